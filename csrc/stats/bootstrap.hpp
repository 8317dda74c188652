// Bootstrap engines over resampling units (units.hpp) and the interval summaries shared by all of
// them. Definitions of the percentile, basic and BCa intervals follow scipy.stats.bootstrap
// (Efron & Tibshirani 1993, ch. 13-14; DiCiccio & Efron 1996), so results agree with scipy when
// fed the same resamples.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "statistic.hpp"
#include "units.hpp"

namespace tb::stats {

enum class Method { kPercentile, kBasic, kBca };
enum class Resampler { kAuto, kIndex, kCounts };

struct EngineOptions {
  std::int64_t n_resamples = 1000;
  std::uint64_t seed = 0;
  int threads = 0;  // 0: all hardware threads
  Resampler resampler = Resampler::kAuto;
};

// Bootstrap distribution of a statistic for every group: theta is n_groups x n_resamples.
struct Distribution {
  std::size_t n_groups = 0;
  std::size_t n_resamples = 0;
  std::vector<double> theta;
  std::vector<double> estimate;      // statistic on the full data, per group
  std::vector<double> acceleration;  // BCa acceleration from the jackknife (NaN if not computed)
  std::vector<std::uint8_t> used_counts;  // 1 where every stratum of the group took the counts path
};

// Multinomial (ordinary) bootstrap: each resample draws, within every stratum of a group, as many
// units as the stratum holds, with replacement. Strata with few distinct unit rows draw the counts
// of the distinct rows with conditional binomials; the others draw unit indices. group_keys give
// each group its random stream, so a group's result does not depend on which other groups exist.
Distribution multinomial_bootstrap(const Units& units, const Statistic& stat,
                                   const std::vector<std::uint64_t>& group_keys,
                                   const EngineOptions& opt, bool with_acceleration);

// Test hook: the distribution for one group (all units, no strata) under a given count matrix
// (n_resamples x n_units: how often each unit appears in each resample).
Distribution distribution_from_counts(const Units& units, const Statistic& stat,
                                      const double* counts, std::size_t n_resamples,
                                      bool with_acceleration);

// a = sum(d^3) / (6 (sum d^2)^1.5) with d = mean(theta) - theta_i (scipy's BCa acceleration).
double acceleration_from_jackknife(const std::vector<double>& theta);

// Jackknife acceleration a = sum(d^3) / (6 (sum d^2)^1.5), d = mean(theta_(u)) - theta_(u),
// where theta_(u) leaves out unit u: closed form f(S - s_u, N - n_u), O(units).
double jackknife_acceleration(const Statistic& stat, const double* total, double total_weight,
                              const double* rows, const double* weight, std::size_t n_units,
                              std::size_t k);

struct Summary {
  std::vector<double> boot_mean, se, ci_low, ci_high;
  std::vector<std::int64_t> n_valid;     // resamples where the statistic was defined
  std::vector<std::uint8_t> degenerate;  // fewer than two units, or no spread: CI = estimate
};

Summary summarize(const Distribution& dist, const std::vector<std::size_t>& units_per_group,
                  Method method, double level, int threads);

// numpy.quantile(a, q) with the default 'linear' method, q in [0, 1]. Reorders `a`.
double quantile_linear(std::vector<double>& a, double q);

// quantile_linear of q_low and of q_high (q_low <= q_high), the order statistics of both
// selected together where they do not overlap; the same values. Reorders `a`.
void quantile_pair(std::vector<double>& a, double q_low, double q_high, double* low,
                   double* high);

// quantile_pair of q_low / 100 and q_high / 100 (numpy.percentile's q, in percent).
void percentile_pair(std::vector<double>& a, double q_low, double q_high, double* low,
                     double* high);

}  // namespace tb::stats
