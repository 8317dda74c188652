#include "stats/signflip.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>
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

// The lookup tables: table[g * 256 + pattern] is the signed sum of group g's units (bit i of the
// pattern set: unit 8 g + i keeps its sign), added in unit order.
std::vector<double> group_tables(const double* x, std::size_t n_units) {
  const std::size_t full = n_units / kGroup, tail = n_units % kGroup;
  const std::size_t n_groups = full + (tail ? 1 : 0);
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
  return table;
}

// The pattern index (bit i: unit 8 g + i keeps its sign) of group g of a row.
inline unsigned group_pattern(const std::uint8_t* row, std::size_t g, std::size_t n_units) {
  const std::size_t full = n_units / kGroup;
  if (g < full) return top_bits8(row + g * kGroup);
  unsigned pattern = 0;
  for (std::size_t i = 0; i < n_units % kGroup; ++i) {
    pattern |= static_cast<unsigned>(row[full * kGroup + i] >> 7) << i;
  }
  return pattern;
}

// The signed sum of one pattern whose sign bytes are row[0 .. n_units).
inline double pattern_sum(const std::vector<double>& table, const std::uint8_t* row,
                          std::size_t n_units) {
  const std::size_t full = n_units / kGroup;
  double stat = 0.0;
  for (std::size_t g = 0; g < full; ++g) stat += table[g * 256 + top_bits8(row + g * kGroup)];
  if (n_units % kGroup) stat += table[full * 256 + group_pattern(row, full, n_units)];
  return stat;
}

using u128 = unsigned __int128;

constexpr u128 kPcgMultiplier =
    (static_cast<u128>(0x2360ED051FC65DA4ull) << 64) | 0x4385DF649FCCF645ull;

}  // namespace

void Pcg64::advance(u128 steps) {
  // Brown 1994, "Random number generation with arbitrary strides": the affine map of `steps`
  // LCG steps, composed by squaring
  u128 acc_mult = 1, acc_plus = 0, cur_mult = kPcgMultiplier, cur_plus = inc;
  while (steps > 0) {
    if (steps & 1) {
      acc_mult *= cur_mult;
      acc_plus = acc_plus * cur_mult + cur_plus;
    }
    cur_plus = (cur_mult + 1) * cur_plus;
    cur_mult *= cur_mult;
    steps >>= 1;
  }
  state = acc_mult * state + acc_plus;
}

std::uint64_t Pcg64::next() {
  state = state * kPcgMultiplier + inc;
  const auto hi = static_cast<std::uint64_t>(state >> 64), lo = static_cast<std::uint64_t>(state);
  const unsigned rot = static_cast<unsigned>(state >> 122);
  const std::uint64_t v = hi ^ lo;
  return (v >> rot) | (v << ((64u - rot) & 63u));
}

namespace {

// A run of pattern rows within one chunk (about `task_bytes` of sign bytes).
struct RowTask {
  std::uint64_t first_byte;  // of the task's first row, in the generator's byte stream
  std::size_t rows;
};

// The tasks of n_patterns patterns drawn in chunks of `chunk`: a chunk's bytes start at four
// times the 32-bit outputs the chunks before it took.
std::vector<RowTask> row_tasks(std::size_t n_units, std::size_t n_patterns, std::size_t chunk,
                               std::size_t task_bytes = std::size_t{1} << 16) {
  std::vector<RowTask> tasks;
  const std::size_t rows_per_task = std::max<std::size_t>(1, task_bytes / n_units);
  std::uint64_t chunk_byte = 0;
  for (std::size_t done = 0; done < n_patterns;) {
    const std::size_t m = std::min(chunk, n_patterns - done);
    for (std::size_t r = 0; r < m; r += rows_per_task) {
      tasks.push_back({chunk_byte + static_cast<std::uint64_t>(r) * n_units,
                       std::min(rows_per_task, m - r)});
    }
    const std::uint64_t bytes = static_cast<std::uint64_t>(m) * n_units;
    chunk_byte += 4 * ((bytes + 3) / 4);
    done += m;
  }
  return tasks;
}

// The sign bytes of a task's rows (buf, from its first row on): the generator's outputs from
// the word holding the first byte, jumped ahead to it.
const std::uint8_t* task_bytes(const RowTask& task, std::size_t n_units, const Pcg64& start,
                               std::vector<std::uint8_t>& buf) {
  const std::uint64_t w0 = task.first_byte / 8;
  const std::uint64_t end = task.first_byte + static_cast<std::uint64_t>(task.rows) * n_units;
  const std::uint64_t w1 = (end + 7) / 8;  // words w0 .. w1 - 1 hold the task's bytes
  buf.resize(static_cast<std::size_t>(8 * (w1 - w0)));
  // (through a plain pointer: a byte store through the vector could alias its own pointer)
  std::uint8_t* out = buf.data();
  Pcg64 gen = start;
  gen.advance(w0);  // output k comes from the state after k + 1 steps
  for (std::uint64_t w = 0; w < w1 - w0; ++w) {
    const std::uint64_t v = gen.next();
    for (int b = 0; b < 8; ++b) out[8 * w + b] = static_cast<std::uint8_t>(v >> (8 * b));
  }
  return out + (task.first_byte - 8 * w0);
}

}  // namespace

std::int64_t sign_flip_hits_pcg64(const double* x, std::size_t n_units, Pcg64 start,
                                  std::size_t n_patterns, std::size_t chunk, double threshold,
                                  int threads) {
  if (n_patterns == 0 || n_units == 0) return 0;
  if (chunk == 0) throw std::invalid_argument("chunk: expected >= 1");
  const std::vector<double> table = group_tables(x, n_units);
  const std::vector<RowTask> tasks = row_tasks(n_units, n_patterns, chunk);
  std::vector<std::int64_t> hits(tasks.size(), 0);
  parallel_for(tasks.size(), threads, [&](std::size_t t) {
    const RowTask& task = tasks[t];
    std::vector<std::uint8_t> buf;
    const std::uint8_t* row = task_bytes(task, n_units, start, buf);
    std::int64_t h = 0;
    for (std::size_t r = 0; r < task.rows; ++r, row += n_units) {
      h += std::fabs(pattern_sum(table, row, n_units)) >= threshold;
    }
    hits[t] = h;
  });
  std::int64_t total = 0;
  for (const std::int64_t h : hits) total += h;
  return total;
}

std::int64_t sign_flip_hits(const double* x, std::size_t n_units, const std::uint8_t* bytes,
                            std::size_t n_patterns, double threshold, int threads) {
  if (n_patterns == 0) return 0;
  const std::vector<double> table = group_tables(x, n_units);
  constexpr std::size_t kBlock = 256;  // patterns per task
  const std::size_t n_tasks = (n_patterns + kBlock - 1) / kBlock;
  std::vector<std::int64_t> hits(n_tasks, 0);
  parallel_for(n_tasks, threads, [&](std::size_t t) {
    const std::size_t r1 = std::min(n_patterns, (t + 1) * kBlock);
    std::int64_t h = 0;
    for (std::size_t r = t * kBlock; r < r1; ++r) {
      const double stat = pattern_sum(table, bytes + r * n_units, n_units);
      h += std::fabs(stat) >= threshold;
    }
    hits[t] = h;
  });
  std::int64_t total = 0;
  for (const std::int64_t h : hits) total += h;
  return total;
}

std::vector<std::int64_t> sign_flip_hits_pcg64_many(const double* x, std::size_t n_sets,
                                                    std::size_t n_units,
                                                    const double* thresholds, Pcg64 start,
                                                    std::size_t n_patterns, std::size_t chunk,
                                                    int threads) {
  std::vector<std::int64_t> out(n_sets, 0);
  if (n_patterns == 0 || n_units == 0 || n_sets == 0) return out;
  if (chunk == 0) throw std::invalid_argument("chunk: expected >= 1");
  constexpr std::size_t kSets = 8;    // sets per block: one 64-byte line of a table entry
  constexpr std::size_t kSlice = 16;  // groups per slice of the table: 256 KiB
  const std::size_t n_groups = (n_units + kGroup - 1) / kGroup;
  // tasks of 1,024 rows (a slice of the table is read by every row of a task)
  const std::vector<RowTask> tasks = row_tasks(n_units, n_patterns, chunk, 1024 * n_units);
  // table[(g * 256 + pattern) * kSets + j]: set j's group_tables entry (the same doubles)
  std::vector<double> table(n_groups * 256 * kSets);
  for (std::size_t s0 = 0; s0 < n_sets; s0 += kSets) {
    const std::size_t k = std::min(kSets, n_sets - s0);
    parallel_for(k, threads, [&](std::size_t j) {
      const std::vector<double> one = group_tables(x + (s0 + j) * n_units, n_units);
      for (std::size_t e = 0; e < n_groups * 256; ++e) table[e * kSets + j] = one[e];
    });
    for (std::size_t j = k; j < kSets; ++j) {
      for (std::size_t e = 0; e < n_groups * 256; ++e) table[e * kSets + j] = 0.0;
    }
    std::vector<std::array<std::int64_t, kSets>> hits(tasks.size());
    parallel_for(tasks.size(), threads, [&](std::size_t t) {
      const RowTask& task = tasks[t];
      std::vector<std::uint8_t> buf;
      const std::uint8_t* rows = task_bytes(task, n_units, start, buf);
      // every row's table entries first, then the table a slice of groups at a time (256 KiB,
      // in L2 while the task's rows read it), each row's sums carried from slice to slice:
      // each set's sum still adds its groups in order
      std::vector<std::uint32_t> at(task.rows * n_groups);
      for (std::size_t r = 0; r < task.rows; ++r) {
        const std::uint8_t* row = rows + r * n_units;
        std::uint32_t* a = at.data() + r * n_groups;
        for (std::size_t g = 0; g < n_groups; ++g) {
          a[g] = static_cast<std::uint32_t>((g * 256 + group_pattern(row, g, n_units)) * kSets);
        }
      }
      std::vector<double> stat(task.rows * kSets, 0.0);
      for (std::size_t g0 = 0; g0 < n_groups; g0 += kSlice) {
        const std::size_t g1 = std::min(n_groups, g0 + kSlice);
        for (std::size_t r = 0; r < task.rows; ++r) {
          const std::uint32_t* a = at.data() + r * n_groups;
          double sum[kSets];
          std::copy_n(stat.data() + r * kSets, kSets, sum);
          for (std::size_t g = g0; g < g1; ++g) {
            const double* entry = table.data() + a[g];
            for (std::size_t j = 0; j < kSets; ++j) sum[j] += entry[j];
          }
          std::copy_n(sum, kSets, stat.data() + r * kSets);
        }
      }
      std::array<std::int64_t, kSets> h{};
      for (std::size_t r = 0; r < task.rows; ++r) {
        for (std::size_t j = 0; j < k; ++j) {
          h[j] += std::fabs(stat[r * kSets + j]) >= thresholds[s0 + j];
        }
      }
      hits[t] = h;
    });
    for (const auto& h : hits) {
      for (std::size_t j = 0; j < k; ++j) out[s0 + j] += h[j];
    }
  }
  return out;
}

}  // namespace tb::stats
