"""Exact distribution functions the comparison layer needs, without scipy at run time.

* :func:`betainc` - the regularized incomplete beta function I_x(a, b), by the continued
  fraction of Numerical Recipes (Press et al. 2007, *Numerical Recipes*, 3rd ed., sec. 6.4,
  modified Lentz evaluation), with the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) where the fraction
  converges slowly;
* :func:`binom_cdf` - P(X <= k) for X ~ Binomial(n, p), as I_{1-p}(n - k, k + 1)
  (Abramowitz & Stegun 1964, 26.5.24);
* :func:`beta_ppf` - the quantile of the Beta(a, b) distribution, by bisection on
  :func:`betainc` to double precision (the Clopper-Pearson bounds are beta quantiles);
* :func:`norm_ppf`, :func:`norm_cdf` - the standard normal quantile (``statistics.NormalDist``,
  Wichura's AS241) and distribution function.

Tested against ``scipy.special.betainc``, ``scipy.stats.binom`` and ``scipy.stats.beta``.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

__all__ = [
    "beta_ppf",
    "betainc",
    "binom_cdf",
    "binom_cdf_many",
    "binom_pmf",
    "norm_cdf",
    "norm_ppf",
]

_EPS = 1e-16
_NORMAL = NormalDist()
_TINY = 1e-300


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of I_x(a, b) (modified Lentz; Numerical Recipes sec. 6.4)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 100_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            return h
    return h  # pragma: no cover - converges in O(sqrt(max(a, b))) steps


def _betacf_many(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """:func:`_betacf` of each (a, b, x), vectorised: the same operations on each, in order.

    Every integer product of the scalar code (``m * (b - m)``, ``(a + m) * (qab + m)``) is
    exact in float64 for a, b below 2^20 (the caller's condition), and numpy's float64
    add, multiply and divide round as Python's floats do, so each value is the scalar one bit
    for bit. An element stops at the step where the scalar loop returns.
    """
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = np.ones_like(x)
    d = 1.0 - qab * x / qap
    d = 1.0 / np.where(np.abs(d) > _TINY, d, _TINY)
    h = d.copy()
    live = np.ones(x.shape, dtype=bool)
    out = h.copy()
    for m in range(1, 100_000):
        m2 = 2.0 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / np.where(np.abs(d) > _TINY, d, _TINY)
        c = 1.0 + aa / c
        c = np.where(np.abs(c) > _TINY, c, _TINY)
        h = h * (d * c)
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / np.where(np.abs(d) > _TINY, d, _TINY)
        c = 1.0 + aa / c
        c = np.where(np.abs(c) > _TINY, c, _TINY)
        delta = d * c
        h = h * delta
        done = live & (np.abs(delta - 1.0) < _EPS)
        out[done] = h[done]
        live &= ~done
        if not live.any():
            return out
    out[live] = h[live]  # pragma: no cover - converges in O(sqrt(max(a, b))) steps
    return out


def betainc(a: float, b: float, x: float) -> float:
    """Return the regularized incomplete beta function I_x(a, b) for a, b > 0, 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def binom_pmf(k: int, n: int, p: float) -> float:
    """Return P(X = k) for X ~ Binomial(n, p)."""
    if k < 0 or k > n:
        return 0.0
    if p in (0.0, 1.0):
        return float(k == (0 if p == 0.0 else n))
    log = (
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
    )
    return math.exp(log)


def binom_cdf(k: int, n: int, p: float) -> float:
    """Return P(X <= k) for X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return betainc(n - k, k + 1, 1.0 - p)


def binom_cdf_many(k: np.ndarray, n: np.ndarray, p: float) -> np.ndarray:
    """:func:`binom_cdf` of each (k, n) (integer arrays, 0 <= k < n < 2^20), bit for bit.

    The front factors are taken one by one with :mod:`math` (as :func:`betainc` does), the
    continued fractions together (:func:`_betacf_many`).
    """
    x = 1.0 - p
    if not 0.0 < x < 1.0:
        return np.array([binom_cdf(int(i), int(m), p) for i, m in zip(k, n, strict=True)])
    out = np.empty(k.shape, dtype=np.float64)
    fronts, direct = [], []
    for a, b in zip((n - k).tolist(), (k + 1).tolist(), strict=True):
        fronts.append(math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                               + a * math.log(x) + b * math.log1p(-x)))  # fmt: skip
        direct.append(x < (a + 1.0) / (a + b + 2.0))
    front = np.array(fronts, dtype=np.float64)
    first = np.array(direct, dtype=bool)
    a = (n - k).astype(np.float64)
    b = (k + 1).astype(np.float64)
    if first.any():
        cf = _betacf_many(a[first], b[first], np.full(int(first.sum()), x))
        out[first] = front[first] * cf / a[first]
    if (~first).any():
        other = ~first
        cf = _betacf_many(b[other], a[other], np.full(int(other.sum()), 1.0 - x))
        out[other] = 1.0 - front[other] * cf / b[other]
    return out


def beta_ppf(q: float, a: float, b: float) -> float:
    """Return the ``q`` quantile of Beta(a, b) (bisection to the last representable step)."""
    if q <= 0.0:
        return 0.0
    if q >= 1.0:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if betainc(a, b, mid) < q:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def norm_ppf(q: float) -> float:
    """Return the standard normal quantile of ``q`` in (0, 1)."""
    return _NORMAL.inv_cdf(q)


def norm_cdf(x: float) -> float:
    """Return the standard normal distribution function at ``x``."""
    return _NORMAL.cdf(x)
