// Inter-rater agreement statistics evaluated from summed per-item sufficient statistics.
//
// Each class below documents the column layout that its Python builder
// (python/tumorboard/_agreement.py) writes for one item; the engine hands evaluate() the (weighted)
// column sums S over a (re)sample and the total item weight N. Every statistic returns NaN where it
// is undefined (a 0/0) and never throws.
//
// References:
//   Cohen, J. (1960). A coefficient of agreement for nominal scales. Educ. Psychol. Meas. 20,
//     37-46.
//   Cohen, J. (1968). Weighted kappa. Psychol. Bull. 70, 213-220.
//   Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters. Psychol. Bull. 76,
//     378-382.
//   Byrt, T., Bishop, J., Carlin, J. B. (1993). Bias, prevalence and kappa. J. Clin. Epidemiol. 46,
//     423-429.
//   Gwet, K. L. (2008). Computing inter-rater reliability and its variance in the presence of high
//     agreement. Br. J. Math. Stat. Psychol. 61, 29-48.
//   Krippendorff, K. (2011). Computing Krippendorff's alpha-reliability. Annenberg School for
//     Communication, University of Pennsylvania.
#include "agreement.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tb::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// num / den, or NaN when den is zero (the statistic is undefined on this (re)sample).
inline double ratio(double num, double den) { return den == 0.0 ? kNaN : num / den; }

// Chance-corrected agreement (p_o - p_e) / (1 - p_e); NaN when p_e == 1 (or either is NaN).
inline double chance_corrected(double p_o, double p_e) { return ratio(p_o - p_e, 1.0 - p_e); }

// ---------------------------------------------------------------------------------------------
// Parameter validation (construction time only; evaluate() never throws).

std::string format_number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw std::invalid_argument("agreement statistic '" + name + "': " + what);
}

// params[index] as a count >= min_value; throws unless it is a finite integer.
std::size_t count_param(const std::string& name, const std::vector<double>& params,
                        std::size_t index, const char* label, double min_value) {
  if (params.size() <= index) {
    fail(name, std::string("params[") + std::to_string(index) + "] (" + label + ") is missing");
  }
  const double v = params[index];
  if (!std::isfinite(v) || v != std::floor(v) || v < min_value || v > 1e9) {
    fail(name, std::string(label) + " must be an integer >= " +
                   format_number(min_value) + ", got " + format_number(v));
  }
  return static_cast<std::size_t>(v);
}

void expect_params_size(const std::string& name, const std::vector<double>& params,
                        std::size_t expected, const std::string& layout) {
  if (params.size() != expected) {
    fail(name, "expected " + std::to_string(expected) + " params (" + layout + "), got " +
                   std::to_string(params.size()));
  }
}

void expect_columns(const std::string& name, std::size_t k, std::size_t expected,
                    const std::string& layout) {
  if (k != expected) {
    fail(name, "expected " + std::to_string(expected) + " columns (" + layout + "), got " +
                   std::to_string(k));
  }
}

void expect_finite(const std::string& name, const std::vector<double>& params, std::size_t from,
                   const char* label) {
  for (std::size_t i = from; i < params.size(); ++i) {
    if (!std::isfinite(params[i])) fail(name, std::string(label) + " must be finite");
  }
}

// ---------------------------------------------------------------------------------------------
// Cohen's kappa, unweighted (Cohen 1960) or weighted (Cohen 1968).
// Columns (q*q): one-hot of the item's confusion cell, index i*q + j (rater A code i, rater B j).
// params: [q, w_00, w_01, ..., w_(q-1)(q-1)], agreement weights (identity = unweighted).
// kappa = (p_o - p_e) / (1 - p_e), p_o = sum w_ij p_ij, p_e = sum w_ij p_i. p_.j.
class CohenKappa final : public Statistic {
 public:
  CohenKappa(std::size_t q, std::vector<double> weights) : q_(q), w_(std::move(weights)) {}
  std::size_t n_columns() const override { return q_ * q_; }
  double evaluate(const double* s, double n) const override {
    if (!(n > 0.0)) return kNaN;
    std::vector<double> row(q_, 0.0), col(q_, 0.0);
    double observed = 0.0;
    for (std::size_t i = 0; i < q_; ++i) {
      for (std::size_t j = 0; j < q_; ++j) {
        const double c = s[i * q_ + j];
        row[i] += c;
        col[j] += c;
        observed += w_[i * q_ + j] * c;
      }
    }
    double expected = 0.0;
    for (std::size_t i = 0; i < q_; ++i) {
      double acc = 0.0;
      for (std::size_t j = 0; j < q_; ++j) acc += w_[i * q_ + j] * col[j];
      expected += row[i] * acc;
    }
    return chance_corrected(observed / n, expected / (n * n));
  }

 private:
  std::size_t q_;
  std::vector<double> w_;
};

// ---------------------------------------------------------------------------------------------
// Fleiss' kappa (Fleiss 1971): every item rated by the same m raters into q categories.
// Columns (q+1): [sum_j n_ij (n_ij - 1), n_i1, ..., n_iq].   params: [q, m].
// P_bar = S_0 / (N m (m-1)), p_j = S_j / (N m), P_e = sum p_j^2, kappa = (P_bar - P_e)/(1 - P_e).
class FleissKappa final : public Statistic {
 public:
  FleissKappa(std::size_t q, double m) : q_(q), m_(m) {}
  std::size_t n_columns() const override { return q_ + 1; }
  double evaluate(const double* s, double n) const override {
    if (!(n > 0.0)) return kNaN;
    const double ratings = n * m_;
    const double p_bar = s[0] / (ratings * (m_ - 1.0));
    double p_e = 0.0;
    for (std::size_t j = 0; j < q_; ++j) {
      const double p = s[1 + j] / ratings;
      p_e += p * p;
    }
    return chance_corrected(p_bar, p_e);
  }

 private:
  std::size_t q_;
  double m_;
};

// ---------------------------------------------------------------------------------------------
// Prevalence- and bias-adjusted kappa (Byrt, Bishop & Carlin 1993), q categories:
// PABAK = (q p_o - 1) / (q - 1)  (= 2 p_o - 1 for two categories).
// Columns (1): [1 if the two raters agree on the item else 0].   params: [q].
class Pabak final : public Statistic {
 public:
  explicit Pabak(double q) : q_(q) {}
  std::size_t n_columns() const override { return 1; }
  double evaluate(const double* s, double n) const override {
    if (!(n > 0.0)) return kNaN;
    return (q_ * (s[0] / n) - 1.0) / (q_ - 1.0);
  }

 private:
  double q_;
};

// ---------------------------------------------------------------------------------------------
// Gwet's AC1 (Gwet 2008) for any number of raters, r_i ratings on item i (missing allowed).
// Columns (q+3): [a_i, 1{r_i >= 2}, r_i1/r_i, ..., r_iq/r_i, 1{r_i >= 1}] where
//   a_i = sum_k r_ik (r_ik - 1) / (r_i (r_i - 1)) if r_i >= 2 else 0, and r_ik/r_i = 0 if r_i = 0.
// params: [q].
// p_a = S_0 / S_1, pi_k = S_(1+k) / S_(q+2) for k = 1..q,
// p_e = sum_k pi_k (1 - pi_k) / (q - 1), AC1 = (p_a - p_e) / (1 - p_e).
class GwetAc1 final : public Statistic {
 public:
  explicit GwetAc1(std::size_t q) : q_(q) {}
  std::size_t n_columns() const override { return q_ + 3; }
  double evaluate(const double* s, double /*n*/) const override {
    const double p_a = ratio(s[0], s[1]);
    const double rated = s[q_ + 2];
    if (rated == 0.0) return kNaN;
    double p_e = 0.0;
    for (std::size_t k = 0; k < q_; ++k) {
      const double pi = s[2 + k] / rated;
      p_e += pi * (1.0 - pi);
    }
    p_e /= static_cast<double>(q_ - 1);
    return chance_corrected(p_a, p_e);
  }

 private:
  std::size_t q_;
};

// ---------------------------------------------------------------------------------------------
// Krippendorff's alpha (Krippendorff 2011) from the coincidence matrix.
// Columns (q*q): the unit's coincidences o_ck(u) = (n_uc n_uk - [c == k] n_uc) / (m_u - 1),
//   index c*q + k, over the q values in params order; only units with m_u >= 2 pairable values.
// params: [q, metric, v_1, ..., v_q], metric 0 nominal, 1 ordinal, 2 interval, 3 ratio.
// n_c = sum_k o_ck, n = sum_c n_c, alpha = 1 - (n - 1) sum o_ck d_ck / sum n_c n_k d_ck, with
// d the squared difference function of the metric; the ordinal one depends on the marginals n_g
// of the (re)sample, so it is recomputed in evaluate().
enum class Metric { kNominal = 0, kOrdinal = 1, kInterval = 2, kRatio = 3 };

class KrippendorffAlpha final : public Statistic {
 public:
  KrippendorffAlpha(std::size_t q, Metric metric, const std::vector<double>& values)
      : q_(q), metric_(metric), delta_(q * q, 0.0) {
    for (std::size_t c = 0; c < q_; ++c) {
      for (std::size_t k = 0; k < q_; ++k) {
        delta_[c * q_ + k] = fixed_delta(values[c], values[k], c, k);
      }
    }
  }
  std::size_t n_columns() const override { return q_ * q_; }
  double evaluate(const double* o, double /*n*/) const override {
    std::vector<double> marg(q_, 0.0);
    double n = 0.0;
    for (std::size_t c = 0; c < q_; ++c) {
      for (std::size_t k = 0; k < q_; ++k) marg[c] += o[c * q_ + k];
      n += marg[c];
    }
    std::vector<double> ordinal;
    if (metric_ == Metric::kOrdinal) ordinal = ordinal_delta(marg);
    const std::vector<double>& d = metric_ == Metric::kOrdinal ? ordinal : delta_;
    double observed = 0.0, expected = 0.0;
    for (std::size_t c = 0; c < q_; ++c) {
      for (std::size_t k = 0; k < q_; ++k) {
        observed += o[c * q_ + k] * d[c * q_ + k];
        expected += marg[c] * marg[k] * d[c * q_ + k];
      }
    }
    return 1.0 - ratio((n - 1.0) * observed, expected);
  }

 private:
  double fixed_delta(double vc, double vk, std::size_t c, std::size_t k) const {
    switch (metric_) {
      case Metric::kNominal: return c == k ? 0.0 : 1.0;
      case Metric::kInterval: return (vc - vk) * (vc - vk);
      case Metric::kRatio: {
        const double sum = vc + vk;
        return sum == 0.0 ? 0.0 : ((vc - vk) / sum) * ((vc - vk) / sum);
      }
      case Metric::kOrdinal: return 0.0;  // recomputed from the marginals in evaluate()
    }
    return 0.0;
  }

  // d_ck = (sum_{g=c}^{k} n_g - (n_c + n_k) / 2)^2 for c <= k (symmetric), values in rank order.
  std::vector<double> ordinal_delta(const std::vector<double>& marg) const {
    std::vector<double> cum(q_ + 1, 0.0), d(q_ * q_, 0.0);
    for (std::size_t g = 0; g < q_; ++g) cum[g + 1] = cum[g] + marg[g];
    for (std::size_t c = 0; c < q_; ++c) {
      for (std::size_t k = c + 1; k < q_; ++k) {
        const double t = cum[k + 1] - cum[c] - 0.5 * (marg[c] + marg[k]);
        d[c * q_ + k] = d[k * q_ + c] = t * t;
      }
    }
    return d;
  }

  std::size_t q_;
  Metric metric_;
  std::vector<double> delta_;
};

// ---------------------------------------------------------------------------------------------
// Mean pairwise percent agreement over P rater pairs.
// Columns (2P): [agree_1, rated_1, ..., agree_P, rated_P] with rated_p = 1 if both raters of pair p
// rated the item, agree_p = 1 if they did and gave the same label.   params: [P].
// statistic = mean over pairs with sum(rated_p) > 0 of sum(agree_p) / sum(rated_p).
class MeanPairwiseAgreement final : public Statistic {
 public:
  explicit MeanPairwiseAgreement(std::size_t pairs) : pairs_(pairs) {}
  std::size_t n_columns() const override { return 2 * pairs_; }
  double evaluate(const double* s, double /*n*/) const override {
    double total = 0.0;
    std::size_t used = 0;
    for (std::size_t p = 0; p < pairs_; ++p) {
      if (s[2 * p + 1] > 0.0) {
        total += s[2 * p] / s[2 * p + 1];
        ++used;
      }
    }
    return used == 0 ? kNaN : total / static_cast<double>(used);
  }

 private:
  std::size_t pairs_;
};

// ---------------------------------------------------------------------------------------------
// Factories: check k and params against the layouts above.

std::unique_ptr<Statistic> make_cohen(const std::string& name, std::size_t k,
                                      const std::vector<double>& params) {
  const std::size_t q = count_param(name, params, 0, "q (number of categories)", 2);
  expect_params_size(name, params, 1 + q * q, "[q, q*q agreement weights]");
  expect_columns(name, k, q * q, "one-hot confusion cell, q*q");
  expect_finite(name, params, 1, "agreement weights");
  return std::make_unique<CohenKappa>(q, std::vector<double>(params.begin() + 1, params.end()));
}

std::unique_ptr<Statistic> make_fleiss(const std::string& name, std::size_t k,
                                        const std::vector<double>& params) {
  const std::size_t q = count_param(name, params, 0, "q (number of categories)", 2);
  const std::size_t m = count_param(name, params, 1, "m (raters per item)", 2);
  expect_params_size(name, params, 2, "[q, m]");
  expect_columns(name, k, q + 1, "[sum n_ij(n_ij-1), n_i1..n_iq], q+1");
  return std::make_unique<FleissKappa>(q, static_cast<double>(m));
}

std::unique_ptr<Statistic> make_pabak(const std::string& name, std::size_t k,
                                      const std::vector<double>& params) {
  const std::size_t q = count_param(name, params, 0, "q (number of categories)", 2);
  expect_params_size(name, params, 1, "[q]");
  expect_columns(name, k, 1, "[agree]");
  return std::make_unique<Pabak>(static_cast<double>(q));
}

std::unique_ptr<Statistic> make_gwet(const std::string& name, std::size_t k,
                                     const std::vector<double>& params) {
  const std::size_t q = count_param(name, params, 0, "q (number of categories)", 2);
  expect_params_size(name, params, 1, "[q]");
  expect_columns(name, k, q + 3, "[a_i, 1{r_i>=2}, r_i1/r_i..r_iq/r_i, 1{r_i>=1}], q+3");
  return std::make_unique<GwetAc1>(q);
}

std::unique_ptr<Statistic> make_krippendorff(const std::string& name, std::size_t k,
                                             const std::vector<double>& params) {
  const std::size_t q = count_param(name, params, 0, "q (number of values)", 2);
  const std::size_t metric = count_param(name, params, 1, "metric code", 0);
  if (metric > 3) {
    fail(name, "metric code must be 0 (nominal), 1 (ordinal), 2 (interval) or 3 (ratio), got " +
                   std::to_string(metric));
  }
  expect_params_size(name, params, 2 + q, "[q, metric, v_1..v_q]");
  expect_columns(name, k, q * q, "coincidences o_ck(u), q*q");
  expect_finite(name, params, 2, "values");
  return std::make_unique<KrippendorffAlpha>(
      q, static_cast<Metric>(metric), std::vector<double>(params.begin() + 2, params.end()));
}

std::unique_ptr<Statistic> make_mean_pairwise(const std::string& name, std::size_t k,
                                              const std::vector<double>& params) {
  const std::size_t pairs = count_param(name, params, 0, "P (number of rater pairs)", 1);
  expect_params_size(name, params, 1, "[P]");
  expect_columns(name, k, 2 * pairs, "[agree_p, rated_p] per pair, 2P");
  return std::make_unique<MeanPairwiseAgreement>(pairs);
}

using Factory = std::unique_ptr<Statistic> (*)(const std::string&, std::size_t,
                                               const std::vector<double>&);

struct Entry {
  const char* name;
  Factory make;
};

constexpr Entry kRegistry[] = {
    {"cohen_kappa", make_cohen},
    {"fleiss_kappa", make_fleiss},
    {"pabak", make_pabak},
    {"gwet_ac1", make_gwet},
    {"krippendorff_alpha", make_krippendorff},
    {"mean_pairwise_agreement", make_mean_pairwise},
};

}  // namespace

std::unique_ptr<Statistic> make_agreement_statistic(const std::string& name, std::size_t k,
                                                    const std::vector<double>& params) {
  for (const Entry& e : kRegistry) {
    if (name == e.name) return e.make(name, k, params);
  }
  return nullptr;
}

std::vector<std::string> agreement_statistic_names() {
  std::vector<std::string> names;
  for (const Entry& e : kRegistry) names.emplace_back(e.name);
  return names;
}

}  // namespace tb::stats
