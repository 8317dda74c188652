// Every pair of a family of models bootstrapped on shared resamples (stats.compare): each pair's
// percentile interval, standard error and bootstrap p-value count from its resampled
// differences, and the per-resample maximum of the studentised deviations behind the max-T
// simultaneous band (Romano & Wolf 2005, "Exact and approximate stepdown methods for multiple
// hypothesis testing", JASA 100; Westfall & Young 1993, ch. 2), without materialising the
// pairs x resamples matrix of differences.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tb::stats {

struct PairSummaries {
  std::vector<double> low, high;     // numpy.quantile(d*, [q_low, q_high]) of each pair
  std::vector<double> se;            // numpy.std(d*, ddof=1), bit for bit (NaN below 2 resamples)
  std::vector<std::int64_t> extreme;  // #{ |d* - d| >= |d| }
  std::vector<double> max_ratio;     // per resample: max over pairs with se > 0 of |d* - d| / se
  bool any_live = false;             // some pair has se > 0
};

// numpy's pairwise summation of x[0..n) (numpy/_core/src/umath/loops_utils.h.src,
// pairwise_sum): what numpy.add.reduce gives along a contiguous row of a 2-D array.
double numpy_pairwise_sum(const double* x, std::size_t n);

// dist is models x n_resamples (C order); pair p is model a[p] minus model b[p], d[p] its
// difference of estimates. Pairs run in parallel; every result is independent of `threads`.
PairSummaries pair_summaries(const double* dist, std::size_t n_models, std::size_t n_resamples,
                             const std::int64_t* a, const std::int64_t* b, const double* d,
                             std::size_t n_pairs, double q_low, double q_high, int threads);

// both[i * m + j] = #{ c : x[i, c] != 0 and x[j, c] != 0 } of an m x n row-major array (rows as
// bit sets, popcounts of their intersections; McNemar's concordant counts of 0/1 outcomes).
std::vector<std::int64_t> nonzero_overlaps(const double* x, std::size_t m, std::size_t n,
                                           int threads);

// The (model, key) table of a comparison: table[model[r] * n_keys + key[r]] = v[r], NaN where no
// row gives a value (table holds n_models * n_keys doubles). Returns false where a (model, key)
// pair has two rows (v must be free of NaN: a cell already set is a repeat). *binary is whether
// every v is 0 or 1.
bool value_table(const std::int64_t* model, const std::int64_t* key, const double* v,
                 std::size_t n, std::size_t n_models, std::size_t n_keys, double* table,
                 bool* binary);

// The cluster of each key, the cluster of its first row (cluster_of_key, n_keys values; every
// key 0..n_keys-1 has a row), and the first row whose cluster differs from its key's (-1: none).
std::int64_t key_clusters(const std::int64_t* key, const std::int64_t* cluster, std::size_t n,
                          std::size_t n_keys, std::int64_t* cluster_of_key);

}  // namespace tb::stats
