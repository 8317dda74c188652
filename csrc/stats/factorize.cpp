#include "stats/factorize.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "common/rng.hpp"

namespace tb::stats {

namespace {

// A fast hash of one record: 8-byte words folded by multiply-xorshift, then SplitMix64's
// finalizer. Only this table uses it (it is not a stable key: nothing stores it).
std::uint64_t record_hash(const std::uint8_t* p, std::size_t width) {
  std::uint64_t h = 0x9E3779B97F4A7C15ull ^ width;
  std::size_t i = 0;
  for (; i + 8 <= width; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
  }
  if (i < width) {
    std::uint64_t w = 0;
    std::memcpy(&w, p + i, width - i);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
  }
  return rng::mix64(h);
}

constexpr std::uint64_t kEmpty = ~std::uint64_t{0};

// Whether two records of `width` bytes are equal (inline: records are short, a call costs more).
bool same_bytes(const std::uint8_t* a, const std::uint8_t* b, std::size_t width) {
  std::size_t i = 0;
  for (; i + 8 <= width; i += 8) {
    std::uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    if (x != y) return false;
  }
  for (; i < width; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

}  // namespace

std::vector<std::int64_t> factorize_fixed(const std::uint8_t* data, std::size_t n,
                                          std::size_t width, std::int64_t* codes) {
  // A slot holds (upper 32 bits of the hash) << 32 | code; the distinct records' bytes are kept
  // together in `distinct`. Records are looked up in blocks: the block's hashes are computed and
  // their slots prefetched first, then each candidate's bytes, so the cache misses of a block
  // overlap instead of following one another.
  constexpr std::size_t kBlock = 64;
  std::vector<std::int64_t> first;
  std::vector<std::uint8_t> distinct;  // the bytes of each code's record, code after code
  std::size_t capacity = 1024;
  std::vector<std::uint64_t> slot(capacity, kEmpty);
  const auto place = [&](std::uint64_t h, std::uint64_t code) {
    std::size_t s = h & (capacity - 1);
    while (slot[s] != kEmpty) s = (s + 1) & (capacity - 1);
    slot[s] = (h >> 32) << 32 | code;
  };
  // The code of the record with hash h (and bytes rec), or -1 when the table has none.
  const auto find = [&](std::uint64_t h, const std::uint8_t* rec) -> std::int64_t {
    const std::uint64_t tag = h >> 32;
    for (std::size_t s = h & (capacity - 1); slot[s] != kEmpty; s = (s + 1) & (capacity - 1)) {
      if ((slot[s] >> 32) != tag) continue;
      const std::uint64_t c = slot[s] & 0xFFFFFFFFull;
      if (same_bytes(distinct.data() + c * width, rec, width)) {
        return static_cast<std::int64_t>(c);
      }
    }
    return -1;
  };
  std::uint64_t hash[kBlock];
  std::int64_t candidate[kBlock];
  for (std::size_t r0 = 0; r0 < n; r0 += kBlock) {
    const std::size_t m = std::min(kBlock, n - r0);
    for (std::size_t j = 0; j < m; ++j) {
      hash[j] = record_hash(data + (r0 + j) * width, width);
      __builtin_prefetch(slot.data() + (hash[j] & (capacity - 1)));
    }
    for (std::size_t j = 0; j < m; ++j) {  // the first slot with the record's tag, if any
      const std::uint64_t tag = hash[j] >> 32;
      candidate[j] = -1;
      for (std::size_t s = hash[j] & (capacity - 1); slot[s] != kEmpty;
           s = (s + 1) & (capacity - 1)) {
        if ((slot[s] >> 32) == tag) {
          candidate[j] = static_cast<std::int64_t>(slot[s] & 0xFFFFFFFFull);
          const std::uint8_t* at = distinct.data() + candidate[j] * width;
          for (std::size_t b = 0; b < width; b += 64) __builtin_prefetch(at + b);
          __builtin_prefetch(at + width - 1);
          break;
        }
      }
    }
    for (std::size_t j = 0; j < m; ++j) {
      const std::uint8_t* rec = data + (r0 + j) * width;
      std::int64_t code = candidate[j];
      if (code < 0 || !same_bytes(distinct.data() + code * width, rec, width)) {
        code = find(hash[j], rec);  // the table may have grown since: look again
      }
      if (code < 0) {
        if (first.size() >= 0xFFFFFFFFull) {
          throw std::length_error("factorize_fixed: more than 2^32 - 1 distinct records");
        }
        code = static_cast<std::int64_t>(first.size());
        first.push_back(static_cast<std::int64_t>(r0 + j));
        distinct.insert(distinct.end(), rec, rec + width);
        if (2 * first.size() > capacity) {  // keep the load at most 1/2: grow and re-insert
          capacity *= 2;
          slot.assign(capacity, kEmpty);
          for (std::size_t c = 0; c < first.size(); ++c) {
            place(record_hash(distinct.data() + c * width, width), c);
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

}  // namespace tb::stats
