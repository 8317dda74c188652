#include "poisson.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>

#include "../common/parallel.hpp"
#include "../common/philox_avx2.hpp"
#include "../common/rng.hpp"

namespace tb::stats {
namespace {

// T[j] = round(2^32 * P(W <= j)), W ~ Poisson(1); the last entry is forced to 2^32.
const std::array<std::uint64_t, 16>& poisson_thresholds() {
  static const std::array<std::uint64_t, 16> table = [] {
    std::array<std::uint64_t, 16> t{};
    double pmf = std::exp(-1.0), cdf = 0.0;
    for (int j = 0; j < 16; ++j) {
      cdf += pmf;
      pmf /= static_cast<double>(j + 1);
      t[j] = std::min<std::uint64_t>(std::llround(std::ldexp(cdf, 32)), std::uint64_t{1} << 32);
    }
    t[15] = std::uint64_t{1} << 32;
    return t;
  }();
  return table;
}

double to_double(int128 v, int scale) { return std::ldexp(static_cast<double>(v), -scale); }

}  // namespace

namespace {

// The count of thresholds at or below x (t is nondecreasing and t[15] = 2^32 > x): the first
// four without a branch (W <= 3 has probability 0.981), the rest by a loop.
inline int poisson1_from_table(std::uint32_t x, const std::array<std::uint64_t, 16>& t) {
  int w = (x >= t[0]) + (x >= t[1]) + (x >= t[2]) + (x >= t[3]);
  if (w == 4) [[unlikely]] {
    while (x >= t[w]) ++w;
  }
  return w;
}

}  // namespace

int poisson1_from_u32(std::uint32_t x) { return poisson1_from_table(x, poisson_thresholds()); }

#ifdef TB_HAVE_AVX2_PATH
// The Poisson(1) weights of eight keys in the `rows` (<= 4) resamples 4 * quad + j: the
// Philox blocks of eight keys per call, the thresholds compared eight at a time; the same
// values as poisson1_from_table of each lane's words. As a vector per row j (w[j]).
__attribute__((target("avx2"))) inline void poisson_weights8_vec(
    const std::uint64_t* keys, std::uint32_t quad, std::size_t rows,
    const rng::Philox4x32::Key& key, const std::array<std::uint64_t, 16>& table, __m256i w[4]) {
  const __m256i flip = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256i four = _mm256_set1_epi32(4);
  __m256i r[4];
  rng::philox8(quad, keys, static_cast<std::uint32_t>(rng::Domain::kPoisson), key[0], key[1], r);
  for (std::size_t j = 0; j < rows; ++j) {
    // x >= t (unsigned) as !(t > x) on sign-flipped words; 4 minus the thresholds above x
    const __m256i x = _mm256_xor_si256(r[j], flip);
    __m256i above = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i t = _mm256_set1_epi32(
          static_cast<int>(static_cast<std::uint32_t>(table[c]) ^ 0x80000000u));
      above = _mm256_add_epi32(above, _mm256_cmpgt_epi32(t, x));
    }
    w[j] = _mm256_add_epi32(four, above);
    if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(w[j], four)) != 0) [[unlikely]] {
      alignas(32) std::uint32_t words[8];
      alignas(32) std::int32_t ws[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(words), r[j]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(ws), w[j]);
      for (int l = 0; l < 8; ++l) {
        while (ws[l] >= 4 && words[l] >= table[ws[l]]) ++ws[l];
      }
      w[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(ws));
    }
  }
}

// poisson_weights8_vec, written to ws[j][lane].
__attribute__((target("avx2"))) void poisson_weights8(const std::uint64_t* keys,
                                                      std::uint32_t quad, std::size_t rows,
                                                      const rng::Philox4x32::Key& key,
                                                      const std::array<std::uint64_t, 16>& table,
                                                      std::int32_t ws[4][8]) {
  __m256i w[4];
  poisson_weights8_vec(keys, quad, rows, key, table, w);
  for (std::size_t j = 0; j < rows; ++j) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(ws[j]), w[j]);
  }
}

// Weights of keys[i0, i1) in the rows of resamples 4 * quad .. 4 * quad + rows - 1 (row j at
// row + j * n), eight keys at a time; returns the first key not done (the rest: scalar).
template <typename T>
__attribute__((target("avx2"))) std::size_t weight_rows_avx2(
    const std::uint64_t* keys, std::size_t i0, std::size_t i1, std::size_t n,
    std::uint32_t quad, std::size_t rows, const rng::Philox4x32::Key& key,
    const std::array<std::uint64_t, 16>& table, T* row) {
  std::size_t i = i0;
  for (; i + 8 <= i1; i += 8) {
    __m256i w[4];
    poisson_weights8_vec(keys + i, quad, rows, key, table, w);
    for (std::size_t j = 0; j < rows; ++j) {
      T* dst = row + j * n + i;
      if constexpr (sizeof(T) == 4) {
        _mm256_storeu_ps(reinterpret_cast<float*>(dst), _mm256_cvtepi32_ps(w[j]));
      } else {
        _mm256_storeu_pd(reinterpret_cast<double*>(dst),
                         _mm256_cvtepi32_pd(_mm256_castsi256_si128(w[j])));
        _mm256_storeu_pd(reinterpret_cast<double*>(dst) + 4,
                         _mm256_cvtepi32_pd(_mm256_extracti128_si256(w[j], 1)));
      }
    }
  }
  return i;
}
#endif

template <typename T>
void poisson_weight_matrix(const std::uint64_t* keys, std::size_t n, std::size_t n_resamples,
                           std::uint64_t seed, int threads, T* out) {
  // A task fills a tile of the matrix: kQuads blocks of four resamples (rows) by kKeys keys, row
  // segments written front to back. Every weight is its own Philox draw, so the tiling changes
  // no value.
  constexpr std::size_t kQuads = 8, kKeys = 4096;
  const auto key = rng::key_from_seed(seed);
  const auto& table = poisson_thresholds();
  const std::size_t n_quads = (n_resamples + 3) / 4;
  const std::size_t quad_tiles = (n_quads + kQuads - 1) / kQuads;
  const std::size_t key_tiles = (n + kKeys - 1) / kKeys;
#ifdef TB_HAVE_AVX2_PATH
  const bool simd = rng::avx2_available() && !rng::scalar_only();
#endif
  parallel_for(quad_tiles * key_tiles, threads, [&](std::size_t t) {
    const std::size_t i0 = (t % key_tiles) * kKeys, i1 = std::min(n, i0 + kKeys);
    const std::size_t quad0 = (t / key_tiles) * kQuads;
    const std::size_t quad1 = std::min(n_quads, quad0 + kQuads);
    for (std::size_t quad = quad0; quad < quad1; ++quad) {
      const std::size_t q = quad * 4;
      const std::size_t rows = std::min<std::size_t>(4, n_resamples - q);
      T* row = out + q * n;
      std::size_t start = i0;
#ifdef TB_HAVE_AVX2_PATH
      if (simd) {
        start = weight_rows_avx2<T>(keys, i0, i1, n, static_cast<std::uint32_t>(quad), rows, key,
                                    table, row);
      }
#endif
      for (std::size_t i = start; i < i1; ++i) {
        const std::uint64_t ukey = keys[i];
        const auto r = rng::Philox4x32::block(
            {static_cast<std::uint32_t>(quad), static_cast<std::uint32_t>(ukey),
             static_cast<std::uint32_t>(ukey >> 32),
             static_cast<std::uint32_t>(rng::Domain::kPoisson)},
            key);
        for (std::size_t j = 0; j < rows; ++j) {
          row[j * n + i] = static_cast<T>(poisson1_from_table(r[j], table));
        }
      }
    }
  });
}

template void poisson_weight_matrix<float>(const std::uint64_t*, std::size_t, std::size_t,
                                           std::uint64_t, int, float*);
template void poisson_weight_matrix<double>(const std::uint64_t*, std::size_t, std::size_t,
                                            std::uint64_t, int, double*);

std::vector<int> exact_scales(const double* values, std::size_t n, std::size_t k) {
  std::vector<int> scale(k, 0);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t c = 0; c < k; ++c) {
      const double x = values[i * k + c];
      if (x == 0.0 || scale[c] >= kMaxFixedScale) continue;
      int e = 0;
      const double m = std::frexp(std::fabs(x), &e);  // |x| = m 2^e, m in [0.5, 1)
      auto mant = static_cast<std::uint64_t>(std::ldexp(m, 53));
      const int tz = __builtin_ctzll(mant);
      // lowest set bit of |x| is 2^(e - 53 + tz)
      const int need = 53 - e - tz;
      scale[c] = std::max(scale[c], std::min(need, kMaxFixedScale));
    }
  }
  return scale;
}

std::vector<int128> fixed_unit_rows(const Units& u, const double* values,
                                    const std::vector<int>& scale) {
  const std::size_t k = u.k, m = u.n_units();
  std::vector<int128> rows(m * k, 0);
  std::vector<double> bound(k, 0.0);
  for (std::size_t unit = 0; unit < m; ++unit) {
    for (std::size_t p = u.unit_start[unit]; p < u.unit_start[unit + 1]; ++p) {
      const double* v = values + static_cast<std::size_t>(u.order[p]) * k;
      for (std::size_t c = 0; c < k; ++c) {
        const double scaled = std::nearbyint(std::ldexp(v[c], scale[c]));
        if (std::fabs(scaled) >= 0x1.0p100) {
          throw std::invalid_argument(
              "values: magnitude too large for exact Poisson sums (|value| * 2^scale >= 2^100); "
              "rescale the column");
        }
        rows[unit * k + c] += static_cast<int128>(scaled);
        bound[c] += std::fabs(scaled);
      }
    }
  }
  for (std::size_t c = 0; c < k; ++c) {
    // A Poisson(1) weight drawn from 32 bits never exceeds 15.
    if (16.0 * bound[c] >= 0x1.0p125) {
      throw std::invalid_argument("values: column " + std::to_string(c) +
                                  " sums would overflow the exact 128-bit accumulator; rescale");
    }
  }
  return rows;
}

PoissonSums poisson_sums(const Units& u, const std::vector<int128>& fixed_rows,
                         const std::vector<int>& scale, const std::uint64_t* unit_keys,
                         std::uint64_t seed, std::int64_t n_resamples, int threads) {
  const std::size_t G = u.n_groups(), k = u.k, B = static_cast<std::size_t>(n_resamples);
  const std::size_t S = B + 1;
  PoissonSums out;
  out.n_groups = G;
  out.n_resamples = B;
  out.k = k;
  out.scale = scale;
  out.sums.assign(G * S * k, 0);
  out.weight.assign(G * S, 0);
  constexpr std::size_t kBlock = 64;  // resamples per task: a multiple of 4 (one Philox block)
  struct Task {
    std::size_t g, b0, b1;
  };
  std::vector<Task> tasks;
  for (std::size_t g = 0; g < G; ++g) {
    for (std::size_t b0 = 0; b0 < B; b0 += kBlock) tasks.push_back({g, b0, std::min(B, b0 + kBlock)});
  }
  const auto key = rng::key_from_seed(seed);
  const auto& table = poisson_thresholds();
#ifdef TB_HAVE_AVX2_PATH
  const bool simd = rng::avx2_available() && !rng::scalar_only();
  // Groups whose sums fit 64 bits (every weight is at most 15): there the eight-unit path adds
  // in int64, without a branch on zero weights; the sums are the same integers.
  std::vector<char> fits64(G, 0);
  std::vector<std::int64_t> items64(simd ? u.n_units() : 0);
  for (std::size_t unit = 0; unit < items64.size(); ++unit) {
    items64[unit] = static_cast<std::int64_t>(u.weight[unit]);
  }
  for (std::size_t g = 0; g < G && simd; ++g) {
    constexpr int128 kLimit = int128{1} << 58;  // 16 * limit < 2^63
    std::vector<int128> total(k + 1, 0);
    bool ok = true;
    for (std::size_t unit = u.group_begin(g); unit < u.group_end(g) && ok; ++unit) {
      for (std::size_t c = 0; c < k; ++c) {
        const int128 v = fixed_rows[unit * k + c];
        total[c] += v < 0 ? -v : v;
        ok = ok && v < kLimit && -v < kLimit && total[c] < kLimit;
      }
      total[k] += items64[unit];
      ok = ok && total[k] < kLimit;
    }
    fits64[g] = ok ? 1 : 0;
  }
#endif
  parallel_for(tasks.size(), threads, [&](std::size_t t) {
    const Task& task = tasks[t];
    const std::size_t nb = task.b1 - task.b0;
    std::vector<int128> acc(nb * k, 0);
    std::vector<std::int64_t> wacc(nb, 0);
    // adds weight w of unit `unit` in resample q + j (exact integers: any order, same sums)
    auto add = [&](std::size_t unit, std::size_t bb, int w) {
      const int128* row = fixed_rows.data() + unit * k;
      for (std::size_t c = 0; c < k; ++c) acc[bb * k + c] += static_cast<int128>(w) * row[c];
      wacc[bb] += w * static_cast<std::int64_t>(u.weight[unit]);
    };
    std::size_t first = u.group_begin(task.g);
#ifdef TB_HAVE_AVX2_PATH
    if (simd) {
      // eight units' Philox blocks per call (csrc/common/philox_avx2.hpp), the same words
      alignas(32) std::int32_t ws[4][8];
      const bool narrow = fits64[task.g] != 0;
      std::vector<std::int64_t> acc64(narrow ? nb * k : 0, 0);
      for (; first + 8 <= u.group_end(task.g); first += 8) {
        for (std::size_t q = task.b0; q < task.b1; q += 4) {
          const std::size_t rows = std::min<std::size_t>(4, task.b1 - q);
          poisson_weights8(unit_keys + first, static_cast<std::uint32_t>(q / 4), rows, key, table,
                           ws);
          for (std::size_t j = 0; j < rows; ++j) {
            const std::size_t bb = q + j - task.b0;
            if (!narrow) {
              for (int l = 0; l < 8; ++l) {
                if (ws[j][l] != 0) add(first + l, bb, ws[j][l]);
              }
              continue;
            }
            std::int64_t* a = acc64.data() + bb * k;
            std::int64_t wsum = 0;
            for (int l = 0; l < 8; ++l) {
              const std::int64_t w = ws[j][l];
              const int128* row = fixed_rows.data() + (first + l) * k;
              for (std::size_t c = 0; c < k; ++c) a[c] += w * static_cast<std::int64_t>(row[c]);
              wsum += w * items64[first + l];
            }
            wacc[bb] += wsum;
          }
        }
      }
      for (std::size_t i = 0; i < acc64.size(); ++i) acc[i] += acc64[i];
    }
#endif
    for (std::size_t unit = first; unit < u.group_end(task.g); ++unit) {
      const std::uint64_t ukey = unit_keys[unit];
      for (std::size_t q = task.b0; q < task.b1; q += 4) {
        const auto r = rng::Philox4x32::block(
            {static_cast<std::uint32_t>(q / 4), static_cast<std::uint32_t>(ukey),
             static_cast<std::uint32_t>(ukey >> 32),
             static_cast<std::uint32_t>(rng::Domain::kPoisson)},
            key);
        for (std::size_t j = 0; j < 4 && q + j < task.b1; ++j) {
          const int w = poisson1_from_table(r[j], table);
          if (w != 0) add(unit, q + j - task.b0, w);
        }
      }
    }
    for (std::size_t bb = 0; bb < nb; ++bb) {
      const std::size_t slot = task.g * S + task.b0 + bb;
      std::copy(acc.begin() + bb * k, acc.begin() + (bb + 1) * k, out.sums.begin() + slot * k);
      out.weight[slot] = wacc[bb];
    }
  });
  for (std::size_t g = 0; g < G; ++g) {
    const std::size_t slot = g * S + B;
    for (std::size_t unit = u.group_begin(g); unit < u.group_end(g); ++unit) {
      for (std::size_t c = 0; c < k; ++c) out.sums[slot * k + c] += fixed_rows[unit * k + c];
      out.weight[slot] += static_cast<std::int64_t>(u.weight[unit]);
    }
  }
  return out;
}

Distribution poisson_distribution(const PoissonSums& ps, const Statistic& stat, int threads) {
  const std::size_t G = ps.n_groups, B = ps.n_resamples, k = ps.k, S = B + 1;
  Distribution dist;
  dist.n_groups = G;
  dist.n_resamples = B;
  dist.theta.resize(G * B);
  dist.estimate.resize(G);
  dist.acceleration.assign(G, std::numeric_limits<double>::quiet_NaN());
  dist.used_counts.assign(G, 0);
  // each slot's value depends on its own sums only: blocks of slots in parallel, same values
  constexpr std::size_t kBlock = 4096;
  const std::size_t per_group = (S + kBlock - 1) / kBlock;
  parallel_for(G * per_group, threads, [&](std::size_t task) {
    const std::size_t g = task / per_group, b0 = (task % per_group) * kBlock;
    std::vector<double> sums(k);
    for (std::size_t b = b0; b < std::min(S, b0 + kBlock); ++b) {
      const std::size_t slot = g * S + b;
      for (std::size_t c = 0; c < k; ++c) sums[c] = to_double(ps.sums[slot * k + c], ps.scale[c]);
      const double v = stat.evaluate(sums.data(), static_cast<double>(ps.weight[slot]));
      if (b < B) {
        dist.theta[g * B + b] = v;
      } else {
        dist.estimate[g] = v;
      }
    }
  });
  return dist;
}

double poisson_acceleration(const Statistic& stat, const PoissonSums& ps, std::size_t g,
                            const std::vector<int128>& fixed_rows, const Units& u) {
  const std::size_t k = ps.k, S = ps.n_resamples + 1;
  const std::size_t begin = u.group_begin(g), end = u.group_end(g), m = end - begin;
  if (m < 2) return std::numeric_limits<double>::quiet_NaN();
  const std::size_t slot = g * S + ps.n_resamples;
  std::vector<double> theta(m), loo(k);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t c = 0; c < k; ++c) {
      loo[c] = to_double(ps.sums[slot * k + c] - fixed_rows[(begin + i) * k + c], ps.scale[c]);
    }
    theta[i] = stat.evaluate(loo.data(), static_cast<double>(ps.weight[slot]) - u.weight[begin + i]);
  }
  return acceleration_from_jackknife(theta);
}

}  // namespace tb::stats
