#include "stats/pairs.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "common/parallel.hpp"
#include "stats/bootstrap.hpp"

namespace tb::stats {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::size_t kPairwiseBlock = 128;  // numpy's PW_BLOCKSIZE

// numpy.std(x, ddof=1) of a contiguous row as numpy's _var computes it: the pairwise sum over n,
// the deviations from that mean squared, their pairwise sum over n - 1, the square root.
double numpy_std_ddof1(const double* x, std::size_t n, std::vector<double>& scratch) {
  if (n < 2) return kNaN;
  const double mean = numpy_pairwise_sum(x, n) / static_cast<double>(n);
  scratch.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double dev = x[i] - mean;
    scratch[i] = dev * dev;
  }
  return std::sqrt(numpy_pairwise_sum(scratch.data(), n) / static_cast<double>(n - 1));
}

}  // namespace

double numpy_pairwise_sum(const double* x, std::size_t n) {
  if (n < 8) {
    double res = 0.0;
    for (std::size_t i = 0; i < n; ++i) res += x[i];
    return res;
  }
  if (n <= kPairwiseBlock) {
    double r[8];
    for (std::size_t j = 0; j < 8; ++j) r[j] = x[j];
    std::size_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (std::size_t j = 0; j < 8; ++j) r[j] += x[i + j];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += x[i];
    return res;
  }
  std::size_t n2 = n / 2;
  n2 -= n2 % 8;
  return numpy_pairwise_sum(x, n2) + numpy_pairwise_sum(x + n2, n - n2);
}

PairSummaries pair_summaries(const double* dist, std::size_t n_models, std::size_t n_resamples,
                             const std::int64_t* a, const std::int64_t* b, const double* d,
                             std::size_t n_pairs, double q_low, double q_high, int threads) {
  if (!(0.0 <= q_low && q_low <= q_high && q_high <= 1.0)) {
    throw std::invalid_argument("q_low, q_high: expected 0 <= q_low <= q_high <= 1");
  }
  for (std::size_t p = 0; p < n_pairs; ++p) {
    if (a[p] < 0 || b[p] < 0 || static_cast<std::size_t>(a[p]) >= n_models ||
        static_cast<std::size_t>(b[p]) >= n_models) {
      throw std::invalid_argument("pairs: model index out of range");
    }
  }
  const std::size_t B = n_resamples;
  PairSummaries out;
  out.low.assign(n_pairs, kNaN);
  out.high.assign(n_pairs, kNaN);
  out.se.assign(n_pairs, kNaN);
  out.extreme.assign(n_pairs, 0);
  out.max_ratio.assign(B, 0.0);
  auto row = [&](std::int64_t m) { return dist + static_cast<std::size_t>(m) * B; };
  // pass 1, pair by pair: the differences in resample order (their standard error is summed
  // pairwise in that order, as numpy sums a row), then the interval by selection
  parallel_for(n_pairs, threads, [&](std::size_t p) {
    if (B == 0) return;
    std::vector<double> diff(B), scratch;
    const double* xa = row(a[p]);
    const double* xb = row(b[p]);
    bool has_nan = false;
    std::int64_t extreme = 0;
    const double dp = d[p], bound = std::fabs(d[p]);
    for (std::size_t r = 0; r < B; ++r) {
      const double x = xa[r] - xb[r];
      diff[r] = x;
      has_nan = has_nan || std::isnan(x);
      extreme += std::fabs(x - dp) >= bound;
    }
    out.extreme[p] = extreme;
    out.se[p] = numpy_std_ddof1(diff.data(), B, scratch);
    if (!has_nan) quantile_pair(diff, q_low, q_high, &out.low[p], &out.high[p]);
  });
  for (std::size_t p = 0; p < n_pairs; ++p) out.any_live = out.any_live || out.se[p] > 0;
  if (!out.any_live) return out;
  // pass 2, resamples in blocks: the maximum over the live pairs (a maximum is exact, so the
  // blocks and their order cannot change it)
  constexpr std::size_t kCols = 512;
  const std::size_t n_blocks = (B + kCols - 1) / kCols;
  parallel_for(n_blocks, threads, [&](std::size_t blk) {
    const std::size_t r0 = blk * kCols, r1 = std::min(B, r0 + kCols);
    double* mx = out.max_ratio.data();
    for (std::size_t p = 0; p < n_pairs; ++p) {
      const double se = out.se[p];
      if (!(se > 0)) continue;
      const double* xa = row(a[p]);
      const double* xb = row(b[p]);
      const double dp = d[p];
      for (std::size_t r = r0; r < r1; ++r) {
        const double ratio = std::fabs((xa[r] - xb[r]) - dp) / se;
        mx[r] = (ratio > mx[r] || std::isnan(ratio)) ? ratio : mx[r];  // NaN spreads, as in np.max
      }
    }
  });
  return out;
}

std::vector<std::int64_t> nonzero_overlaps(const double* x, std::size_t m, std::size_t n,
                                           int threads) {
  const std::size_t words = (n + 63) / 64;
  std::vector<std::uint64_t> bits(m * words, 0);
  parallel_for(m, threads, [&](std::size_t i) {
    const double* row = x + i * n;
    std::uint64_t* out = bits.data() + i * words;
    std::size_t w = 0;
    for (; (w + 1) * 64 <= n; ++w) {  // whole words: a fixed trip count the compiler unrolls
      std::uint64_t word = 0;
      for (std::size_t k = 0; k < 64; ++k) {
        word |= static_cast<std::uint64_t>(row[w * 64 + k] != 0.0) << k;
      }
      out[w] = word;
    }
    for (std::size_t c = w * 64; c < n; ++c) {
      out[c / 64] |= static_cast<std::uint64_t>(row[c] != 0.0) << (c % 64);
    }
  });
  std::vector<std::int64_t> both(m * m, 0);
  parallel_for(m, threads, [&](std::size_t i) {
    const std::uint64_t* bi = bits.data() + i * words;
    for (std::size_t j = i; j < m; ++j) {
      const std::uint64_t* bj = bits.data() + j * words;
      std::int64_t count = 0;
      for (std::size_t w = 0; w < words; ++w) count += __builtin_popcountll(bi[w] & bj[w]);
      both[i * m + j] = count;
    }
  });
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < i; ++j) both[i * m + j] = both[j * m + i];
  }
  return both;
}

bool value_table(const std::int64_t* model, const std::int64_t* key, const double* v,
                 std::size_t n, std::size_t n_models, std::size_t n_keys, double* table,
                 bool* binary) {
  std::fill_n(table, n_models * n_keys, std::numeric_limits<double>::quiet_NaN());
  bool ok = true, zero_one = true;
  for (std::size_t r = 0; r < n; ++r) {
    const auto m = static_cast<std::size_t>(model[r]), k = static_cast<std::size_t>(key[r]);
    if (m >= n_models || k >= n_keys) throw std::invalid_argument("model, key: out of range");
    double& cell = table[m * n_keys + k];
    ok = ok && std::isnan(cell);
    cell = v[r];
    zero_one = zero_one && (v[r] == 0.0 || v[r] == 1.0);
  }
  *binary = zero_one;
  return ok;
}

std::int64_t key_clusters(const std::int64_t* key, const std::int64_t* cluster, std::size_t n,
                          std::size_t n_keys, std::int64_t* cluster_of_key) {
  std::fill_n(cluster_of_key, n_keys, std::int64_t{-1});
  std::int64_t bad = -1;
  for (std::size_t r = 0; r < n; ++r) {
    const auto k = static_cast<std::size_t>(key[r]);
    if (k >= n_keys) throw std::invalid_argument("key: out of range");
    std::int64_t& c = cluster_of_key[k];
    if (c < 0) {
      c = cluster[r];
    } else if (c != cluster[r] && bad < 0) {
      bad = static_cast<std::int64_t>(r);
    }
  }
  return bad;
}

}  // namespace tb::stats
