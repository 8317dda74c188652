// Exact binomial variates from a uniform stream, for multinomial resampling of distinct rows by
// conditional binomials. Small means use sequential inversion; larger ones Hormann's BTRS
// ("The generation of binomial random variates", J. Stat. Comput. Simul. 46, 1993), a transformed
// rejection method with a squeeze that is exact (rejection corrects the hat function).
#pragma once

#include <cmath>
#include <cstdint>
#include <math.h>

#include "../common/rng.hpp"

namespace tb::stats {

namespace detail {

// lgamma without the global `signgam` write of the C library's lgamma (thread-safe).
inline double lgam(double x) {
#if defined(__GLIBC__) || defined(__APPLE__)
  int sign = 0;
  return ::lgamma_r(x, &sign);
#else
  return std::lgamma(x);
#endif
}

inline std::int64_t binomial_inversion(std::int64_t n, double p, rng::Stream& s) {
  const double q = 1.0 - p;
  const double ratio = p / q;
  const double a = (static_cast<double>(n) + 1.0) * ratio;
  const double r0 = std::pow(q, static_cast<double>(n));
  for (;;) {
    double u = s.uniform();
    double r = r0;
    std::int64_t k = 0;
    bool ok = true;
    while (u > r) {
      u -= r;
      ++k;
      if (k > n) {
        ok = false;  // rounding left mass unassigned: redraw
        break;
      }
      r *= a / static_cast<double>(k) - ratio;
    }
    if (ok) return k;
  }
}

inline std::int64_t binomial_btrs(std::int64_t n_int, double p, rng::Stream& s) {
  const double n = static_cast<double>(n_int);
  const double spq = std::sqrt(n * p * (1.0 - p));
  const double b = 1.15 + 2.53 * spq;
  const double a = -0.0873 + 0.0248 * b + 0.01 * p;
  const double c = n * p + 0.5;
  const double v_r = 0.92 - 4.2 / b;
  const double alpha = (2.83 + 5.1 / b) * spq;
  const double lpq = std::log(p / (1.0 - p));
  const double m = std::floor((n + 1.0) * p);
  const double h = lgam(m + 1.0) + lgam(n - m + 1.0);
  for (;;) {
    const double u = s.uniform() - 0.5;
    double v = s.uniform_open();
    const double us = 0.5 - std::fabs(u);
    const double k = std::floor((2.0 * a / us + b) * u + c);
    if (k < 0 || k > n) continue;
    if (us >= 0.07 && v <= v_r) return static_cast<std::int64_t>(k);
    v = std::log(v * alpha / (a / (us * us) + b));
    // log of f(k)/f(m) for the binomial pmf f, evaluated stably.
    const double bound = h - lgam(k + 1.0) - lgam(n - k + 1.0) + (k - m) * lpq;
    if (v <= bound) return static_cast<std::int64_t>(k);
  }
}

}  // namespace detail

// One Binomial(n, p) draw. n >= 0, 0 <= p <= 1.
inline std::int64_t binomial(std::int64_t n, double p, rng::Stream& s) {
  if (n <= 0 || p <= 0.0) return 0;
  if (p >= 1.0) return n;
  if (p > 0.5) return n - binomial(n, 1.0 - p, s);
  if (static_cast<double>(n) * p < 10.0) return detail::binomial_inversion(n, p, s);
  return detail::binomial_btrs(n, p, s);
}

}  // namespace tb::stats
