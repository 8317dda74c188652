#include "stats/signflip.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/parallel.hpp"

namespace tb::stats {

namespace {

constexpr std::size_t kGroup = 8;  // units per lookup table (256 sign patterns)

// Bit i of the result is the top bit of byte i of the eight bytes at p.
inline unsigned top_bits8(const std::uint8_t* p) {
  std::uint64_t w;
  std::memcpy(&w, p, 8);
  const std::uint64_t t = (w >> 7) & 0x0101010101010101ull;  // each byte's top bit, at its bottom
  // t * M puts bit (8 i) of t at bit 56 + i: the partial products of other bytes land below
  // bit 56 or above bit 63, and no two land on one bit, so nothing carries into the top byte
  return static_cast<unsigned>((t * 0x0102040810204080ull) >> 56);
}

}  // namespace

std::int64_t sign_flip_hits(const double* x, std::size_t n_units, const std::uint8_t* bytes,
                            std::size_t n_patterns, double threshold, int threads) {
  if (n_patterns == 0) return 0;
  const std::size_t full = n_units / kGroup, tail = n_units % kGroup;
  const std::size_t n_groups = full + (tail ? 1 : 0);
  // table[g][pattern]: the signed sum of group g's units, added in unit order
  std::vector<double> table(n_groups * 256);
  for (std::size_t g = 0; g < n_groups; ++g) {
    const std::size_t size = g < full ? kGroup : tail;
    for (unsigned pattern = 0; pattern < (1u << size); ++pattern) {
      double acc = 0.0;
      for (std::size_t i = 0; i < size; ++i) {
        const double v = x[g * kGroup + i];
        acc += (pattern >> i) & 1u ? v : -v;
      }
      table[g * 256 + pattern] = acc;
    }
  }
  constexpr std::size_t kBlock = 256;  // patterns per task
  const std::size_t n_tasks = (n_patterns + kBlock - 1) / kBlock;
  std::vector<std::int64_t> hits(n_tasks, 0);
  parallel_for(n_tasks, threads, [&](std::size_t t) {
    const std::size_t r1 = std::min(n_patterns, (t + 1) * kBlock);
    std::int64_t h = 0;
    for (std::size_t r = t * kBlock; r < r1; ++r) {
      const std::uint8_t* row = bytes + r * n_units;
      double stat = 0.0;
      for (std::size_t g = 0; g < full; ++g) {
        stat += table[g * 256 + top_bits8(row + g * kGroup)];
      }
      if (tail) {
        unsigned pattern = 0;
        for (std::size_t i = 0; i < tail; ++i) {
          pattern |= static_cast<unsigned>(row[full * kGroup + i] >> 7) << i;
        }
        stat += table[full * 256 + pattern];
      }
      h += std::fabs(stat) >= threshold;
    }
    hits[t] = h;
  });
  std::int64_t total = 0;
  for (const std::int64_t h : hits) total += h;
  return total;
}

}  // namespace tb::stats
