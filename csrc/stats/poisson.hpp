// The Poisson bootstrap (Hanley & MacGibbon 2006; Chamandy et al. 2012, "Estimating uncertainty for
// massive data streams"): unit u gets weight W_ub ~ Poisson(1) in resample b, drawn from a Philox
// block keyed by (seed, unit key, b). Because a weight depends only on its own key, shards of a
// data set can be resampled independently and their per-resample sums added.
//
// Sums are kept in 128-bit fixed point with a per-column binary scale chosen so that every value
// is represented exactly (up to 2^-64): integer addition is associative, so sums over shards merge
// bit-identically to the sum over the whole data, whatever the split.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "bootstrap.hpp"
#include "statistic.hpp"
#include "units.hpp"

namespace tb::stats {

using int128 = __int128;

inline constexpr int kMaxFixedScale = 64;

struct PoissonSums {
  std::size_t n_groups = 0, n_resamples = 0, k = 0;
  std::vector<int> scale;             // per column: value = fixed * 2^-scale
  std::vector<int128> sums;           // n_groups x (n_resamples + 1) x k; slot n_resamples = data
  std::vector<std::int64_t> weight;   // n_groups x (n_resamples + 1): summed item weights
};

// Smallest binary scale (capped at kMaxFixedScale) at which every value of each column is an
// integer multiple of 2^-scale.
std::vector<int> exact_scales(const double* values, std::size_t n, std::size_t k);

// Per-unit fixed-point rows (m x k) at the given scales. Throws std::invalid_argument when a value
// or the bound on any sum would overflow 126 bits.
std::vector<int128> fixed_unit_rows(const Units& u, const double* values,
                                    const std::vector<int>& scale);

PoissonSums poisson_sums(const Units& u, const std::vector<int128>& fixed_rows,
                         const std::vector<int>& scale, const std::uint64_t* unit_keys,
                         std::uint64_t seed, std::int64_t n_resamples, int threads);

// Turns (possibly merged) sums into the bootstrap distribution and the full-data estimate, on up
// to `threads` threads (the values do not depend on the count).
Distribution poisson_distribution(const PoissonSums& sums, const Statistic& stat, int threads);

// Jackknife acceleration for one group from exact fixed-point sums (single-process BCa).
double poisson_acceleration(const Statistic& stat, const PoissonSums& sums, std::size_t g,
                            const std::vector<int128>& fixed_rows, const Units& u);

// Weight W ~ Poisson(1) from a uniform 32-bit word (inversion; probabilities exact to 2^-32).
int poisson1_from_u32(std::uint32_t x);

// The weight of every key in every resample, out[b * n + i] = W(seed, keys[i], b): the weights
// poisson_sums gives the unit of key keys[i] (the same Philox blocks), as a dense matrix for
// groups that share their units (one draw per key, not per group and key).
template <typename T>
void poisson_weight_matrix(const std::uint64_t* keys, std::size_t n, std::size_t n_resamples,
                           std::uint64_t seed, int threads, T* out);

// The resampled weighted sums out[b * c + j] = sum_i W(seed, keys[i], b) * cols[i * c + j]
// (n_resamples x c) with the weights of poisson_weight_matrix, drawn and multiplied tile by tile
// (never stored as a matrix: a quarter of the time of the matrix and a BLAS product). The sums
// are added in the order of T; they equal the product bit for bit when every partial sum of a
// column is an exact integer of T (integer cols whose magnitudes sum, times 16, below 2^24 for
// float or 2^53 for double), which the callers check.
template <typename T>
void poisson_weighted_sums(const std::uint64_t* keys, std::size_t n, const T* cols, std::size_t c,
                           std::size_t n_resamples, std::uint64_t seed, int threads, T* out);

}  // namespace tb::stats
