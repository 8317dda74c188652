#include "statistic.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include "agreement.hpp"
#include "text/bleu.hpp"

namespace tb::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Mean of column 0: sum(x) / n.
class Mean final : public Statistic {
 public:
  std::size_t n_columns() const override { return 1; }
  double evaluate(const double* s, double w) const override { return w > 0 ? s[0] / w : kNaN; }
  bool is_mean() const override { return true; }
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

// F1 of the means of two per-record scores: with R = sum(col 0), P = sum(col 1) over n records
// (n = the weight), 2 (R/n)(P/n) / ((R + P)/n) = 2RP / (n (R + P)): the harmonic mean of mean recall
// and mean precision, as MedInsightBench prints its insight F1 (0 when R + P = 0; NaN for n = 0).
class F1OfMeans final : public Statistic {
 public:
  std::size_t n_columns() const override { return 2; }
  double evaluate(const double* s, double w) const override {
    if (!(w > 0)) return kNaN;
    const double den = s[0] + s[1];
    return den != 0.0 ? 2.0 * s[0] * s[1] / (w * den) : 0.0;
  }
};

// Weighted mean of k ratios: sum_i w_i (S_{2i} / S_{2i+1}) / sum_i w_i, read from 2k columns
// [numerator_1, denominator_1, ...]. With a record's value in its component's numerator column and 1 in
// its denominator column this is the macro average of per-component means (MTBBench's "Overall" = the
// plain mean of the task accuracies; MedBench v4's task -> dimension -> overall averaging with weights
// 1 / (n_dims * n_tasks_in_dim)). A component with zero denominator in a resample makes it NaN (left out).
class MeanOfRatios final : public Statistic {
 public:
  explicit MeanOfRatios(std::vector<double> weights) : w_(std::move(weights)) {
    for (double x : w_) total_ += x;
  }
  std::size_t n_columns() const override { return 2 * w_.size(); }
  double evaluate(const double* s, double) const override {
    double acc = 0.0;
    for (std::size_t i = 0; i < w_.size(); ++i) {
      if (w_[i] == 0.0) continue;
      if (s[2 * i + 1] == 0.0) return kNaN;
      acc += w_[i] * (s[2 * i] / s[2 * i + 1]);
    }
    return acc / total_;
  }

 private:
  std::vector<double> w_;
  double total_ = 0.0;
};

std::unique_ptr<Statistic> make_mean_of_ratios(std::size_t k, const std::vector<double>& params) {
  if (params.empty()) {
    throw std::invalid_argument("statistic 'mean_of_ratios' needs params: one weight per ratio");
  }
  if (k != 2 * params.size()) {
    throw std::invalid_argument("statistic 'mean_of_ratios' with " +
                                std::to_string(params.size()) + " weight(s) needs " +
                                std::to_string(2 * params.size()) + " value columns, got " +
                                std::to_string(k));
  }
  double total = 0.0;
  for (double x : params) {
    if (!(x >= 0.0) || !std::isfinite(x)) {
      throw std::invalid_argument("statistic 'mean_of_ratios': weights must be finite and >= 0");
    }
    total += x;
  }
  if (!(total > 0.0)) {
    throw std::invalid_argument("statistic 'mean_of_ratios': weights must not all be 0");
  }
  return std::make_unique<MeanOfRatios>(params);
}

// Corpus BLEU (sacrebleu's BLEU.compute_bleu, csrc/text/bleu.hpp) of the summed per-item
// [matches_1..N, totals_1..N, hyp_len, ref_len]. params (trailing entries may be left out):
// [max_order N (default: from k), smooth (0 none, 1 floor, 2 add-k, 3 exp; default 3),
//  smooth_value (NaN: sacrebleu's default for the method), effective_order (0/1, default 0),
//  python_sum (0: CPython <= 3.11 sum(), 1: CPython >= 3.12 sum(); default 0)].
class CorpusBleu final : public Statistic {
 public:
  explicit CorpusBleu(const tb::text::BleuScoreOptions& o) : o_(o) {}
  std::size_t n_columns() const override { return tb::text::bleu_n_columns(o_.max_order); }
  double evaluate(const double* s, double) const override {
    return tb::text::bleu_score(s, o_, nullptr).score;
  }

 private:
  tb::text::BleuScoreOptions o_;
};

std::unique_ptr<Statistic> make_bleu(std::size_t k, const std::vector<double>& p) {
  if (p.size() > 5) throw std::invalid_argument("statistic 'bleu' takes at most 5 params");
  auto flag = [&](std::size_t i, const char* what) {
    if (p.size() <= i) return false;
    if (p[i] != 0.0 && p[i] != 1.0) {
      throw std::invalid_argument(std::string("statistic 'bleu': ") + what + " must be 0 or 1");
    }
    return p[i] == 1.0;
  };
  tb::text::BleuScoreOptions o;
  const double order = p.empty() ? (static_cast<double>(k) - 2.0) / 2.0 : p[0];
  if (!(order >= 1.0) || order != std::floor(order) || order > 1e6) {
    throw std::invalid_argument("statistic 'bleu' needs an integer max_order >= 1 and "
                                "2 * max_order + 2 value columns");
  }
  o.max_order = static_cast<int>(order);
  if (tb::text::bleu_n_columns(o.max_order) != k) {
    throw std::invalid_argument("statistic 'bleu' with max_order " +
                                std::to_string(o.max_order) + " needs " +
                                std::to_string(tb::text::bleu_n_columns(o.max_order)) +
                                " value column(s), got " + std::to_string(k));
  }
  const double code = p.size() > 1 ? p[1] : 3.0;
  if (code != 0.0 && code != 1.0 && code != 2.0 && code != 3.0) {
    throw std::invalid_argument("statistic 'bleu': smooth code must be 0, 1, 2 or 3");
  }
  o.smooth = static_cast<tb::text::BleuSmooth>(static_cast<int>(code));
  const double value = p.size() > 2 ? p[2] : std::numeric_limits<double>::quiet_NaN();
  o.smooth_value = std::isnan(value) ? tb::text::bleu_default_smooth_value(o.smooth) : value;
  o.effective_order = flag(3, "effective_order");
  o.sum = flag(4, "python_sum") ? tb::text::PySum::kNeumaier : tb::text::PySum::kSequential;
  return std::make_unique<CorpusBleu>(o);
}

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
  if (name == "f1_of_means") return checked<F1OfMeans>(name, k);
  if (name == "bleu") return make_bleu(k, params);
  if (name == "mean_of_ratios") return make_mean_of_ratios(k, params);
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
  std::vector<std::string> names = {"mean", "sum", "ratio", "f1", "f1_of_means",
                                    "bleu", "mean_of_ratios"};
  for (auto& n : agreement_statistic_names()) names.push_back(std::move(n));
  return names;
}

}  // namespace tb::stats
