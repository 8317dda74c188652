#include "stats/factorize.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

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
// a block overlap instead of following one another. `Records` gives ptr(r) and len(r).
template <class Records>
std::vector<std::int64_t> factorize(const Records& rec, std::size_t n, std::int64_t* codes) {
  std::vector<std::int64_t> first;
  std::vector<std::uint8_t> pool;
  std::vector<std::size_t> start{0};
  std::size_t capacity = 1024;
  std::vector<std::uint64_t> slot(capacity, kEmpty);
  const auto bytes_of = [&](std::size_t c) { return pool.data() + start[c]; };
  const auto len_of = [&](std::size_t c) { return start[c + 1] - start[c]; };
  const auto equal = [&](std::size_t c, const std::uint8_t* p, std::size_t len) {
    return len_of(c) == len && same_bytes(bytes_of(c), p, len);
  };
  const auto place = [&](std::uint64_t h, std::uint64_t code) {
    std::size_t s = h & (capacity - 1);
    while (slot[s] != kEmpty) s = (s + 1) & (capacity - 1);
    slot[s] = (h >> 32) << 32 | code;
  };
  // The code of the record with hash h, or -1 when the table has none.
  const auto find = [&](std::uint64_t h, const std::uint8_t* p, std::size_t len) -> std::int64_t {
    const std::uint64_t tag = h >> 32;
    for (std::size_t s = h & (capacity - 1); slot[s] != kEmpty; s = (s + 1) & (capacity - 1)) {
      if ((slot[s] >> 32) == tag && equal(slot[s] & 0xFFFFFFFFull, p, len)) {
        return static_cast<std::int64_t>(slot[s] & 0xFFFFFFFFull);
      }
    }
    return -1;
  };
  std::uint64_t hash[kBlock];
  std::int64_t candidate[kBlock];
  bool repeat[kBlock];
  for (std::size_t r0 = 0; r0 < n; r0 += kBlock) {
    const std::size_t m = std::min(kBlock, n - r0);
    for (std::size_t j = 0; j < m; ++j) {
      const std::size_t r = r0 + j, len = rec.len(r);
      repeat[j] = r > 0 && rec.len(r - 1) == len && same_bytes(rec.ptr(r - 1), rec.ptr(r), len);
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
      const std::size_t len = rec.len(r0 + j);
      std::int64_t code = candidate[j];
      if (code < 0 || !equal(static_cast<std::size_t>(code), p, len)) {
        code = find(hash[j], p, len);  // the table may have grown since: look again
      }
      if (code < 0) {
        if (first.size() >= 0xFFFFFFFFull) {
          throw std::length_error("factorize: more than 2^32 - 1 distinct records");
        }
        code = static_cast<std::int64_t>(first.size());
        first.push_back(static_cast<std::int64_t>(r0 + j));
        pool.insert(pool.end(), p, p + len);
        start.push_back(pool.size());
        if (2 * first.size() > capacity) {  // keep the load at most 1/2: grow and re-insert
          capacity *= 2;
          slot.assign(capacity, kEmpty);
          for (std::size_t c = 0; c < first.size(); ++c) {
            place(record_hash(bytes_of(c), len_of(c)), c);
          }
        } else {
          place(hash[j], static_cast<std::uint64_t>(code));
        }
      }
      codes[r0 + j] = code;
    }
  }
  return first;
}

struct FixedRecords {
  const std::uint8_t* data;
  std::size_t width;
  const std::uint8_t* ptr(std::size_t r) const { return data + r * width; }
  std::size_t len(std::size_t) const { return width; }
};

struct OffsetRecords {
  const std::uint8_t* data;
  const std::int64_t* offsets;
  const std::uint8_t* ptr(std::size_t r) const { return data + offsets[r]; }
  std::size_t len(std::size_t r) const {
    return static_cast<std::size_t>(offsets[r + 1] - offsets[r]);
  }
};

}  // namespace

std::vector<std::int64_t> factorize_fixed(const std::uint8_t* data, std::size_t n,
                                          std::size_t width, std::int64_t* codes) {
  return factorize(FixedRecords{data, width}, n, codes);
}

std::vector<std::int64_t> factorize_offsets(const std::uint8_t* data,
                                            const std::int64_t* offsets, std::size_t n,
                                            std::int64_t* codes) {
  return factorize(OffsetRecords{data, offsets}, n, codes);
}

void sort_codes(const std::uint8_t* data, const std::int64_t* offsets, std::size_t n,
                std::int64_t* codes, std::vector<std::int64_t>& first) {
  const std::size_t m = first.size();
  // Sorted by the first eight bytes as a big-endian word (cache-friendly, settles most pairs),
  // then, among equal prefixes, by the whole strings.
  struct Entry {
    std::uint64_t prefix;
    std::int64_t code;
  };
  const auto bytes = [&](std::int64_t c) { return data + offsets[first[c]]; };
  const auto length = [&](std::int64_t c) {
    return static_cast<std::size_t>(offsets[first[c] + 1] - offsets[first[c]]);
  };
  std::vector<Entry> order(m);
  for (std::size_t c = 0; c < m; ++c) {
    const auto code = static_cast<std::int64_t>(c);
    const std::uint8_t* p = bytes(code);
    const std::size_t len = std::min<std::size_t>(8, length(code));
    std::uint64_t prefix = 0;
    for (std::size_t i = 0; i < 8; ++i) prefix = prefix << 8 | (i < len ? p[i] : 0);
    order[c] = {prefix, code};
  }
  std::sort(order.begin(), order.end(), [&](const Entry& a, const Entry& b) {
    if (a.prefix != b.prefix) return a.prefix < b.prefix;
    const std::size_t la = length(a.code), lb = length(b.code);
    const int cmp = std::memcmp(bytes(a.code), bytes(b.code), std::min(la, lb));
    return cmp != 0 ? cmp < 0 : la < lb;  // distinct strings: never equal
  });
  std::vector<std::int64_t> rank(m), sorted_first(m);
  for (std::size_t k = 0; k < m; ++k) {
    rank[static_cast<std::size_t>(order[k].code)] = static_cast<std::int64_t>(k);
    sorted_first[k] = first[static_cast<std::size_t>(order[k].code)];
  }
  for (std::size_t r = 0; r < n; ++r) codes[r] = rank[static_cast<std::size_t>(codes[r])];
  first.swap(sorted_first);
}

}  // namespace tb::stats
