#include "stats/factorize.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/parallel.hpp"
#include "common/rng.hpp"

namespace tb::stats {

namespace {

// A fast hash of one record: 8-byte words folded by multiply-xorshift, then SplitMix64's
// finalizer. Only this table uses it (it is not a stable key: nothing stores it).
std::uint64_t record_hash(const std::uint8_t* p, std::size_t len) {
  std::uint64_t h = 0x9E3779B97F4A7C15ull ^ len;
  std::size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
  }
  if (i < len) {
    std::uint64_t w = 0;
    std::memcpy(&w, p + i, len - i);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
  }
  return rng::mix64(h);
}

// Whether two records of `len` bytes are equal (inline: records are short, a call costs more).
bool same_bytes(const std::uint8_t* a, const std::uint8_t* b, std::size_t len) {
  std::size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    std::uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    if (x != y) return false;
  }
  if (i == len) return true;
  if (len >= 8) {  // the tail as the last eight bytes (overlapping words already equal)
    std::uint64_t x, y;
    std::memcpy(&x, a + len - 8, 8);
    std::memcpy(&y, b + len - 8, 8);
    return x == y;
  }
  for (; i < len; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
constexpr std::size_t kBlock = 64;

// The table. A slot holds (upper 32 bits of the hash) << 32 | code; the distinct records' bytes
// are kept together in `pool` (code c at pool[start[c], start[c + 1])), so a lookup touches the
// slot and one short, nearby record. Records are looked up in blocks: the block's hashes are
// computed and their slots prefetched first, then each candidate's bytes, so the cache misses of
// a block overlap instead of following one another. `Records` gives ptr(r) and len(r); `add`
// may be called for several runs of records (the chunks of one column), numbered on from `base`.
struct Table {
  std::vector<std::int64_t> first;
  std::vector<std::uint8_t> pool;
  std::vector<std::size_t> start{0};
  std::size_t capacity = 1024;
  std::vector<std::uint64_t> slot = std::vector<std::uint64_t>(1024, kEmpty);

  const std::uint8_t* bytes_of(std::size_t c) const { return pool.data() + start[c]; }
  std::size_t len_of(std::size_t c) const { return start[c + 1] - start[c]; }
  bool equal(std::size_t c, const std::uint8_t* p, std::size_t len) const {
    return len_of(c) == len && same_bytes(bytes_of(c), p, len);
  }
  void place(std::uint64_t h, std::uint64_t code) {
    std::size_t s = h & (capacity - 1);
    while (slot[s] != kEmpty) s = (s + 1) & (capacity - 1);
    slot[s] = (h >> 32) << 32 | code;
  }
  // The code of the record with hash h, or -1 when the table has none.
  std::int64_t find(std::uint64_t h, const std::uint8_t* p, std::size_t len) const {
    const std::uint64_t tag = h >> 32;
    for (std::size_t s = h & (capacity - 1); slot[s] != kEmpty; s = (s + 1) & (capacity - 1)) {
      if ((slot[s] >> 32) == tag && equal(slot[s] & 0xFFFFFFFFull, p, len)) {
        return static_cast<std::int64_t>(slot[s] & 0xFFFFFFFFull);
      }
    }
    return -1;
  }

  // Adds a record the table does not hold (hash h, first seen at row `row`); returns its code.
  std::int64_t insert(std::uint64_t h, const std::uint8_t* p, std::size_t len, std::int64_t row) {
    if (first.size() >= 0xFFFFFFFFull) {
      throw std::length_error("factorize: more than 2^32 - 1 distinct records");
    }
    const auto code = static_cast<std::int64_t>(first.size());
    first.push_back(row);
    pool.insert(pool.end(), p, p + len);
    start.push_back(pool.size());
    if (2 * first.size() > capacity) {  // keep the load at most 1/2: grow and re-insert
      capacity *= 2;
      slot.assign(capacity, kEmpty);
      for (std::size_t c = 0; c < first.size(); ++c) {
        place(record_hash(bytes_of(c), len_of(c)), c);
      }
    } else {
      place(h, static_cast<std::uint64_t>(code));
    }
    return code;
  }

  // Takes in the distinct records of `other`, a table of rows after all of this one's, in
  // other's order; returns each one's code here (other's code c -> the returned [c]).
  std::vector<std::int64_t> merge(const Table& other) {
    std::vector<std::int64_t> to(other.first.size());
    for (std::size_t c = 0; c < other.first.size(); ++c) {
      const std::uint8_t* p = other.bytes_of(c);
      const std::size_t len = other.len_of(c);
      const std::uint64_t h = record_hash(p, len);
      std::int64_t code = find(h, p, len);
      if (code < 0) code = insert(h, p, len, other.first[c]);
      to[c] = code;
    }
    return to;
  }

  template <class Records>
  void add(const Records& rec, std::size_t n, std::int64_t* codes, std::size_t base) {
    std::uint64_t hash[kBlock];
    std::int64_t candidate[kBlock];
    std::size_t lens[kBlock];
    bool repeat[kBlock];
    std::size_t prev_len = 0;  // the length of record r - 1
    for (std::size_t r0 = 0; r0 < n; r0 += kBlock) {
      const std::size_t m = std::min(kBlock, n - r0);
      for (std::size_t j = 0; j < m; ++j) {
        const std::size_t r = r0 + j;
        if (r > 0 && rec.identical_to_previous(r)) {  // a run: not even its length is needed
          lens[j] = prev_len;
          repeat[j] = true;
          continue;
        }
        const std::size_t len = rec.len(r);
        lens[j] = len;
        repeat[j] = r > 0 && rec.same_as_previous(r, len, prev_len);
        prev_len = len;
        if (repeat[j]) continue;  // a run of equal records (sorted columns): no lookup
        hash[j] = record_hash(rec.ptr(r), len);
        __builtin_prefetch(slot.data() + (hash[j] & (capacity - 1)));
      }
      for (std::size_t j = 0; j < m; ++j) {  // the first slot with the record's tag, if any
        candidate[j] = -1;
        if (repeat[j]) continue;
        const std::uint64_t tag = hash[j] >> 32;
        for (std::size_t s = hash[j] & (capacity - 1); slot[s] != kEmpty;
             s = (s + 1) & (capacity - 1)) {
          if ((slot[s] >> 32) == tag) {
            candidate[j] = static_cast<std::int64_t>(slot[s] & 0xFFFFFFFFull);
            const std::uint8_t* at = bytes_of(static_cast<std::size_t>(candidate[j]));
            const std::size_t len = len_of(static_cast<std::size_t>(candidate[j]));
            for (std::size_t b = 0; b < len; b += 64) __builtin_prefetch(at + b);
            if (len > 0) __builtin_prefetch(at + len - 1);
            break;
          }
        }
      }
      for (std::size_t j = 0; j < m; ++j) {
        if (repeat[j]) {
          codes[r0 + j] = codes[r0 + j - 1];
          continue;
        }
        const std::uint8_t* p = rec.ptr(r0 + j);
        const std::size_t len = lens[j];
        std::int64_t code = candidate[j];
        if (code < 0 || !equal(static_cast<std::size_t>(code), p, len)) {
          code = find(hash[j], p, len);  // the table may have grown since: look again
        }
        if (code < 0) code = insert(hash[j], p, len, static_cast<std::int64_t>(base + r0 + j));
        codes[r0 + j] = code;
      }
    }
  }

  // Renumbers the n codes in byte-wise lexicographic order of their records (a proper prefix
  // first) and puts `first` in that order. Sorted by the first eight bytes as a big-endian word
  // (cache-friendly, settles most pairs), then, among equal prefixes, by the whole records.
  void sort(std::int64_t* codes, std::size_t n) {
    const std::size_t m = first.size();
    struct Entry {
      std::uint64_t prefix;
      std::int64_t code;
    };
    std::vector<Entry> order(m);
    for (std::size_t c = 0; c < m; ++c) {
      const std::uint8_t* p = bytes_of(c);
      const std::size_t len = std::min<std::size_t>(8, len_of(c));
      std::uint64_t prefix = 0;
      for (std::size_t i = 0; i < 8; ++i) prefix = prefix << 8 | (i < len ? p[i] : 0);
      order[c] = {prefix, static_cast<std::int64_t>(c)};
    }
    std::sort(order.begin(), order.end(), [&](const Entry& a, const Entry& b) {
      if (a.prefix != b.prefix) return a.prefix < b.prefix;
      const auto ca = static_cast<std::size_t>(a.code), cb = static_cast<std::size_t>(b.code);
      const std::size_t la = len_of(ca), lb = len_of(cb);
      const int cmp = std::memcmp(bytes_of(ca), bytes_of(cb), std::min(la, lb));
      return cmp != 0 ? cmp < 0 : la < lb;  // distinct records: never equal
    });
    std::vector<std::int64_t> rank(m), sorted_first(m);
    for (std::size_t k = 0; k < m; ++k) {
      rank[static_cast<std::size_t>(order[k].code)] = static_cast<std::int64_t>(k);
      sorted_first[k] = first[static_cast<std::size_t>(order[k].code)];
    }
    for (std::size_t r = 0; r < n; ++r) codes[r] = rank[static_cast<std::size_t>(codes[r])];
    first.swap(sorted_first);
  }
};

// Whether record r (> 0), of len bytes, equals record r - 1, of prev_len bytes: the runs of a
// sorted column skip the lookup.
template <class Records>
bool same_bytes_as_previous(const Records& rec, std::size_t r, std::size_t len,
                            std::size_t prev_len) {
  return prev_len == len && same_bytes(rec.ptr(r - 1), rec.ptr(r), len);
}

// Fixed-width records are keyed by their bytes up to the last nonzero one: the rest of a record
// is zeros, so two records of one width are equal exactly when these prefixes are. A numpy
// string column pads every label to the longest (UTF-32: "q7" in a <U21 column is 8 bytes of
// 84), and the hash and the compares then read only what the labels hold.
struct FixedRecords {
  const std::uint8_t* data;
  std::size_t width;
  const std::uint8_t* ptr(std::size_t r) const { return data + r * width; }
  std::size_t len(std::size_t r) const {
    const std::uint8_t* p = ptr(r);
    std::size_t n = width;
    for (; n >= 8; n -= 8) {  // trailing zero words, then bytes
      std::uint64_t w;
      std::memcpy(&w, p + n - 8, 8);
      if (w != 0) return n - static_cast<std::size_t>(__builtin_clzll(w) / 8);
    }
    while (n > 0 && p[n - 1] == 0) --n;
    return n;
  }
  // The whole record, padding included, equals record r - 1: exactly when their keys are
  // equal (a key is followed by zeros only), so same_as_previous has nothing left to find.
  bool identical_to_previous(std::size_t r) const {
    return same_bytes(ptr(r - 1), ptr(r), width);
  }
  bool same_as_previous(std::size_t, std::size_t, std::size_t) const { return false; }
};

struct OffsetRecords {
  const std::uint8_t* data;
  const std::int64_t* offsets;
  const std::uint8_t* ptr(std::size_t r) const { return data + offsets[r]; }
  std::size_t len(std::size_t r) const {
    return static_cast<std::size_t>(offsets[r + 1] - offsets[r]);
  }
  bool same_as_previous(std::size_t r, std::size_t len, std::size_t prev_len) const {
    return same_bytes_as_previous(*this, r, len, prev_len);
  }
  bool identical_to_previous(std::size_t) const { return false; }
};

struct ViewRecords {
  const std::uint8_t* views;
  const std::vector<const std::uint8_t*>* buffers;
  std::int32_t field(std::size_t r, std::size_t at) const {
    std::int32_t v;
    std::memcpy(&v, views + 16 * r + at, 4);
    return v;
  }
  const std::uint8_t* ptr(std::size_t r) const {
    const std::int32_t len = field(r, 0);
    if (len <= 12) return views + 16 * r + 4;
    return (*buffers)[static_cast<std::size_t>(field(r, 8))] + field(r, 12);
  }
  std::size_t len(std::size_t r) const { return static_cast<std::size_t>(field(r, 0)); }
  // Two equal views of a string of at most 12 bytes hold it whole: one 16-byte compare (views
  // that differ only in padding fall through to the byte compare).
  bool same_as_previous(std::size_t r, std::size_t len, std::size_t prev_len) const {
    std::uint64_t a[2], b[2];
    std::memcpy(a, views + 16 * (r - 1), 16);
    std::memcpy(b, views + 16 * r, 16);
    if (a[0] == b[0] && a[1] == b[1] && static_cast<std::int32_t>(a[0]) <= 12) return true;
    return same_bytes_as_previous(*this, r, len, prev_len);
  }
  bool identical_to_previous(std::size_t) const { return false; }
};

}  // namespace

namespace {

// Records [at, at + n) of `rec`, numbered from 0.
template <class Records>
struct Shifted {
  const Records* rec;
  std::size_t at;
  const std::uint8_t* ptr(std::size_t r) const { return rec->ptr(at + r); }
  std::size_t len(std::size_t r) const { return rec->len(at + r); }
  bool same_as_previous(std::size_t r, std::size_t len, std::size_t prev_len) const {
    return rec->same_as_previous(at + r, len, prev_len);
  }
  bool identical_to_previous(std::size_t r) const { return rec->identical_to_previous(at + r); }
};

// Rows per part below which a column is coded on one thread.
constexpr std::size_t kPartRows = std::size_t{1} << 17;

// The codes of the records of every chunk (chunk i: sizes[i] records of recs[i]), numbered on
// across chunks, in order of first appearance; sorted with `sort` (Table::sort). Long columns
// are cut into one part per thread, each coded with its own table, then the parts' tables are
// merged in row order (a part's records new to the ones before it, in the order the part first
// shows them, are the column's next codes) and each part's codes renumbered: the same codes
// and first rows as one table over the whole column, whatever the number of threads.
template <class Records>
std::vector<std::int64_t> factorize_chunks(const std::vector<Records>& recs,
                                           const std::vector<std::size_t>& sizes, bool sort,
                                           std::int64_t* codes, int threads) {
  std::size_t n = 0;
  for (std::size_t s : sizes) n += s;
  const std::size_t parts =
      std::min<std::size_t>(static_cast<std::size_t>(resolve_threads(threads)),
                            std::max<std::size_t>(1, n / kPartRows));
  std::vector<Table> tables(parts);
  // part q holds rows [n q / parts, n (q + 1) / parts), which may span chunks
  auto bound = [&](std::size_t q) { return n / parts * q + std::min(q, n % parts); };
  parallel_for(parts, parts == 1 ? 1 : threads, [&](std::size_t q) {
    const std::size_t r0 = bound(q), r1 = bound(q + 1);
    std::size_t chunk_start = 0;
    for (std::size_t i = 0; i < recs.size(); ++i) {
      const std::size_t c0 = std::max(r0, chunk_start);
      const std::size_t c1 = std::min(r1, chunk_start + sizes[i]);
      if (c0 < c1) {
        tables[q].add(Shifted<Records>{&recs[i], c0 - chunk_start}, c1 - c0, codes + c0, c0);
      }
      chunk_start += sizes[i];
    }
  });
  Table& whole = tables[0];
  std::vector<std::vector<std::int64_t>> to(parts);
  for (std::size_t q = 1; q < parts; ++q) to[q] = whole.merge(tables[q]);
  if (parts > 1) {
    parallel_for(parts - 1, threads, [&](std::size_t q1) {
      const std::size_t q = q1 + 1;
      const std::vector<std::int64_t>& map = to[q];
      for (std::size_t r = bound(q); r < bound(q + 1); ++r) {
        codes[r] = map[static_cast<std::size_t>(codes[r])];
      }
    });
  }
  if (sort) whole.sort(codes, n);
  return std::move(whole.first);
}

}  // namespace

std::vector<std::int64_t> factorize_fixed(const std::uint8_t* data, std::size_t n,
                                          std::size_t width, std::int64_t* codes) {
  return factorize_chunks(std::vector<FixedRecords>{FixedRecords{data, width}}, {n}, false, codes,
                          0);
}

std::vector<std::int64_t> factorize_offsets(const std::uint8_t* data,
                                            const std::int64_t* offsets, std::size_t n,
                                            std::int64_t* codes, bool sort) {
  return factorize_chunks(std::vector<OffsetRecords>{OffsetRecords{data, offsets}}, {n}, sort,
                          codes, 0);
}

std::vector<std::int64_t> factorize_views(const std::vector<ViewChunk>& chunks, bool sort,
                                          std::int64_t* codes) {
  std::vector<ViewRecords> recs;
  std::vector<std::size_t> sizes;
  for (const auto& chunk : chunks) {
    recs.push_back(ViewRecords{chunk.views, &chunk.buffers});
    sizes.push_back(chunk.n);
  }
  return factorize_chunks(recs, sizes, sort, codes, 0);
}

void check_views(const std::uint8_t* views, std::size_t n,
                 const std::vector<std::int64_t>& sizes) {
  for (std::size_t r = 0; r < n; ++r) {
    std::int32_t len, index, offset;
    std::memcpy(&len, views + 16 * r, 4);
    if (len < 0) {
      throw std::invalid_argument("views: string " + std::to_string(r) + " has a negative length");
    }
    if (len <= 12) continue;
    std::memcpy(&index, views + 16 * r + 8, 4);
    std::memcpy(&offset, views + 16 * r + 12, 4);
    if (index < 0 || static_cast<std::size_t>(index) >= sizes.size() || offset < 0 ||
        static_cast<std::int64_t>(offset) + len > sizes[static_cast<std::size_t>(index)]) {
      throw std::invalid_argument("views: string " + std::to_string(r) +
                                  " points outside the data buffers");
    }
  }
}

namespace {

// The smallest and largest of x[0..n) (n > 0), blocks in parallel.
std::pair<std::int64_t, std::int64_t> min_max(const std::int64_t* x, std::size_t n, int threads) {
  constexpr std::size_t kBlockRows = std::size_t{1} << 20;
  const std::size_t blocks = (n + kBlockRows - 1) / kBlockRows;
  std::vector<std::int64_t> lo(blocks), hi(blocks);
  parallel_for(blocks, threads, [&](std::size_t b) {
    const std::size_t r0 = b * kBlockRows, r1 = std::min(n, r0 + kBlockRows);
    std::int64_t a = x[r0], z = x[r0];
    for (std::size_t r = r0 + 1; r < r1; ++r) {
      a = std::min(a, x[r]);
      z = std::max(z, x[r]);
    }
    lo[b] = a;
    hi[b] = z;
  });
  return {*std::min_element(lo.begin(), lo.end()), *std::max_element(hi.begin(), hi.end())};
}

// hi - lo as an unsigned offset (exact for any int64 pair with lo <= hi).
std::uint64_t offset_of(std::int64_t v, std::int64_t lo) {
  return static_cast<std::uint64_t>(v) - static_cast<std::uint64_t>(lo);
}

}  // namespace

bool compact_distinct(const std::int64_t* x, std::size_t n, int threads,
                      std::vector<std::int64_t>& out) {
  if (n == 0) {
    out.clear();
    return true;
  }
  const auto [lo, hi] = min_max(x, n, threads);
  const std::uint64_t top = offset_of(hi, lo);  // span - 1
  if (top >= 4 * static_cast<std::uint64_t>(n) + 1024) return false;
  std::vector<std::uint8_t> present(top + 1, 0);
  for (std::size_t r = 0; r < n; ++r) present[offset_of(x[r], lo)] = 1;
  out.clear();
  for (std::uint64_t k = 0; k <= top; ++k) {
    if (present[k]) out.push_back(static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + k));
  }
  return true;
}

void compact_codes(const std::int64_t* x, std::size_t n, const std::int64_t* values,
                   const std::int64_t* rank, std::size_t m, int threads, std::int64_t* codes) {
  if (n == 0 || m == 0) return;
  const std::int64_t lo = values[0];
  std::vector<std::int64_t> table(offset_of(values[m - 1], lo) + 1, -1);
  for (std::size_t k = 0; k < m; ++k) table[offset_of(values[k], lo)] = rank[k];
  parallel_blocks(static_cast<std::int64_t>(n), threads, [&](std::int64_t r0, std::int64_t r1) {
    for (auto r = static_cast<std::size_t>(r0); r < static_cast<std::size_t>(r1); ++r) {
      const std::uint64_t k = offset_of(x[r], lo);
      if (k >= table.size() || table[k] < 0) {
        throw std::invalid_argument("x: a value not among values");
      }
      codes[r] = table[k];
    }
  });
}

}  // namespace tb::stats
