// The statistic extension point of the bootstrap engine.
//
// Every statistic tumorboard bootstraps is a function of the *column sums* of per-item sufficient
// statistics: a mean is sum(x) / n, a ratio sum(a) / sum(b), F1 is 2TP / (2TP + FP + FN), corpus
// BLEU is a function of summed n-gram matches and totals, Cohen's kappa a function of the summed
// one-hot confusion cells. A resample therefore only has to produce weighted column sums, and the
// jackknife for BCa is closed-form: leaving out unit u gives f(S - s_u, N - n_u), O(n) in total.
//
// To add a statistic: derive from Statistic, implement n_columns() and evaluate(), and register a
// factory in make_statistic() (statistic.cpp). Nothing else in the engine changes.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace tb::stats {

class Statistic {
 public:
  virtual ~Statistic() = default;
  // Number of sufficient-statistic columns this statistic reads.
  virtual std::size_t n_columns() const = 0;
  // sums: n_columns() weighted column sums; weight: total number of items in the (re)sample.
  // Returns NaN where the statistic is undefined (e.g. 0/0), never throws.
  virtual double evaluate(const double* sums, double weight) const = 0;
  // True for the mean, sum(col 0) / weight (NaN for weight <= 0), which hot loops may inline.
  virtual bool is_mean() const { return false; }
};

// Builds a statistic by name. `k` is the number of value columns supplied; `params` carries
// statistic-specific numbers (a weight matrix for weighted kappa, for example). Throws
// std::invalid_argument with a readable message for unknown names or wrong column counts.
std::unique_ptr<Statistic> make_statistic(const std::string& name, std::size_t k,
                                          const std::vector<double>& params);

// The difference f(first half) - f(second half) for paired bootstraps: the value columns hold
// system A's sufficient statistics followed by system B's.
std::unique_ptr<Statistic> make_paired_difference(std::unique_ptr<Statistic> a,
                                                  std::unique_ptr<Statistic> b);

// Names accepted by make_statistic, for error messages and documentation.
std::vector<std::string> statistic_names();

}  // namespace tb::stats
