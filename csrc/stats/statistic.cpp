#include "statistic.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include "agreement.hpp"

namespace tb::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Mean of column 0: sum(x) / n.
class Mean final : public Statistic {
 public:
  std::size_t n_columns() const override { return 1; }
  double evaluate(const double* s, double w) const override { return w > 0 ? s[0] / w : kNaN; }
};

// Sum of column 0.
class Sum final : public Statistic {
 public:
  std::size_t n_columns() const override { return 1; }
  double evaluate(const double* s, double) const override { return s[0]; }
};

// Ratio of sums: sum(col 0) / sum(col 1) (a ratio estimator; micro-averaged rates).
class Ratio final : public Statistic {
 public:
  std::size_t n_columns() const override { return 2; }
  double evaluate(const double* s, double) const override {
    return s[1] != 0.0 ? s[0] / s[1] : kNaN;
  }
};

// F1 from summed counts TP, FP, FN: 2TP / (2TP + FP + FN) (van Rijsbergen 1979). 0/0 is NaN.
class F1 final : public Statistic {
 public:
  std::size_t n_columns() const override { return 3; }
  double evaluate(const double* s, double) const override {
    const double den = 2.0 * s[0] + s[1] + s[2];
    return den != 0.0 ? 2.0 * s[0] / den : kNaN;
  }
};

class PairedDifference final : public Statistic {
 public:
  PairedDifference(std::unique_ptr<Statistic> a, std::unique_ptr<Statistic> b)
      : a_(std::move(a)), b_(std::move(b)) {}
  std::size_t n_columns() const override { return a_->n_columns() + b_->n_columns(); }
  double evaluate(const double* s, double w) const override {
    return a_->evaluate(s, w) - b_->evaluate(s + a_->n_columns(), w);
  }

 private:
  std::unique_ptr<Statistic> a_, b_;
};

template <class T>
std::unique_ptr<Statistic> checked(const std::string& name, std::size_t k) {
  auto stat = std::make_unique<T>();
  if (stat->n_columns() != k) {
    throw std::invalid_argument("statistic '" + name + "' needs " +
                                std::to_string(stat->n_columns()) + " value column(s), got " +
                                std::to_string(k));
  }
  return stat;
}

}  // namespace

std::unique_ptr<Statistic> make_statistic(const std::string& name, std::size_t k,
                                          const std::vector<double>& params) {
  if (name == "mean") return checked<Mean>(name, k);
  if (name == "sum") return checked<Sum>(name, k);
  if (name == "ratio") return checked<Ratio>(name, k);
  if (name == "f1") return checked<F1>(name, k);
  if (auto stat = make_agreement_statistic(name, k, params)) return stat;
  std::string known;
  for (const auto& n : statistic_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown statistic '" + name + "'; expected one of: " + known);
}

std::unique_ptr<Statistic> make_paired_difference(std::unique_ptr<Statistic> a,
                                                  std::unique_ptr<Statistic> b) {
  return std::make_unique<PairedDifference>(std::move(a), std::move(b));
}

std::vector<std::string> statistic_names() {
  std::vector<std::string> names = {"mean", "sum", "ratio", "f1"};
  for (auto& n : agreement_statistic_names()) names.push_back(std::move(n));
  return names;
}

}  // namespace tb::stats
