"""Closed-form confidence intervals for a proportion, beside the bootstrap.

So that a user can state the interval a paper or another framework reports:

* ``"wilson"`` - Wilson's score interval (Wilson 1927, *JASA* 22:209-212);
* ``"agresti_coull"`` - Agresti & Coull (1998, *Am Stat* 52:119-126): the Wald interval of
  (k + z^2/2) / (n + z^2), clipped to [0, 1];
* ``"clopper_pearson"`` - the exact interval (Clopper & Pearson 1934, *Biometrika*
  26:404-413): beta quantiles;
* ``"normal"`` - the Wald interval p +- z sqrt(p (1 - p) / n), clipped to [0, 1];
* ``"cr1"`` - the cluster-robust (CR1) standard error of the mean of an OLS regression on an
  intercept with clusters (Liang & Zeger 1986; the G/(G-1) (N-1)/(N-K) small-sample factor of
  Stata and statsmodels' ``cov_type="cluster"``), with a normal interval clipped to [0, 1];
  inspect_ai's clustered standard error is this estimator;
* ``"wilson_deff"`` - Wilson's interval at the effective sample size n / deff, where the design
  effect deff is the CR1 variance over the binomial variance p (1 - p) / n (at least 1; Korn &
  Graubard 1998, *Survey Methodology* 24:193-201).

The first four equal ``statsmodels.stats.proportion.proportion_confint`` (methods
``wilson``, ``agresti_coull``, ``beta``, ``normal``); ``"cr1"``'s standard error equals
``statsmodels`` OLS with ``cov_type="cluster"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..errors import InvalidArgumentError
from . import _validate
from ._exact import beta_ppf, norm_ppf

__all__ = ["INTERVALS", "ProportionInterval", "proportion_interval"]

IntervalMethod = Literal[
    "wilson", "agresti_coull", "clopper_pearson", "normal", "cr1", "wilson_deff"
]

#: The interval names :func:`proportion_interval` takes (and ``score --interval``).
INTERVALS: tuple[str, ...] = (
    "wilson",
    "agresti_coull",
    "clopper_pearson",
    "normal",
    "cr1",
    "wilson_deff",
)


@dataclass(frozen=True)
class ProportionInterval:
    """A proportion and its confidence interval.

    Attributes
    ----------
    estimate : float
        Successes over items.
    ci_low, ci_high : float
        The interval's bounds.
    se : float
        The standard error the interval rests on (binomial, or CR1 for the clustered methods;
        NaN for Clopper-Pearson, which has none).
    n : int
        Items.
    successes : int
        Items with outcome 1.
    n_clusters : int or None
        Clusters (None without ``clusters``).
    design_effect : float or None
        CR1 variance over the binomial variance (the clustered methods only).
    method : str
        The interval method.
    level : float
        The confidence level.
    """

    estimate: float
    ci_low: float
    ci_high: float
    se: float
    n: int
    successes: int
    n_clusters: int | None
    design_effect: float | None
    method: str
    level: float


def _wilson(p: float, n: float, z: float) -> tuple[float, float]:
    denom = 1.0 + z * z / n
    center = (p + z * z / (2.0 * n)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n))
    return center - half, center + half


def _cr1_variance(y: np.ndarray, clusters: np.ndarray) -> tuple[float, int]:
    _, inv = np.unique(clusters, return_inverse=True)
    resid = y - y.mean()
    sums = np.bincount(inv.ravel(), weights=resid)
    g, n = sums.size, y.size
    if g < 2:
        return float("nan"), g
    # V = G/(G-1) (N-1)/(N-K) sum_g (sum_i e_i)^2 / N^2 with K = 1 regressor (the intercept)
    return g / (g - 1.0) * float(np.dot(sums, sums)) / (n * n), g


def proportion_interval(
    outcomes: Any,
    *,
    method: IntervalMethod = "wilson",
    level: float = 0.95,
    clusters: Any = None,
) -> ProportionInterval:
    """Return a proportion's confidence interval by a closed-form method.

    Parameters
    ----------
    outcomes : array_like
        0/1 (or boolean) outcome per item.
    method : {"wilson", "agresti_coull", "clopper_pearson", "normal", "cr1", "wilson_deff"}
        The interval (module docstring); default ``"wilson"``.
    level : float, default 0.95
        Confidence level, strictly between 0 and 1.
    clusters : array_like, optional
        A cluster label per item (e.g. the patient); required by ``"cr1"`` and
        ``"wilson_deff"``, refused by the others (they assume independent items).

    Returns
    -------
    ProportionInterval
        The estimate, interval, standard error and counts.

    Raises
    ------
    InvalidArgumentError
        Outcomes not 0/1, no items, an unknown method, a level outside (0, 1), or clusters
        missing for (or given to) a method.
    """
    if method not in INTERVALS:
        raise InvalidArgumentError(
            f"method: expected one of {', '.join(INTERVALS)}, got {method!r}"
        )
    level = _validate.level(level)
    y = np.asarray(outcomes)
    if y.ndim != 1 or y.size == 0:
        raise InvalidArgumentError("outcomes: expected a non-empty 1-D array of 0/1 values")
    if y.dtype != bool and (not np.issubdtype(y.dtype, np.number) or not np.isin(y, (0, 1)).all()):
        raise InvalidArgumentError("outcomes: expected 0/1 (or boolean) values")
    y = y.astype(np.float64)
    clustered = method in ("cr1", "wilson_deff")
    if clustered and clusters is None:
        raise InvalidArgumentError(f"method {method!r}: expected clusters= (a label per item)")
    if not clustered and clusters is not None:
        raise InvalidArgumentError(
            f"clusters: method {method!r} assumes independent items; use 'cr1' or 'wilson_deff'"
        )
    n, k = int(y.size), int(y.sum())
    p = k / n
    z = norm_ppf(0.5 + level / 2.0)
    alpha = 1.0 - level
    se = math.sqrt(p * (1.0 - p) / n)
    n_clusters: int | None = None
    deff: float | None = None
    if method == "wilson":
        lo, hi = _wilson(p, n, z)
    elif method == "agresti_coull":
        nt = n + z * z
        pt = (k + z * z / 2.0) / nt
        se = math.sqrt(pt * (1.0 - pt) / nt)
        lo, hi = max(0.0, pt - z * se), min(1.0, pt + z * se)
    elif method == "clopper_pearson":
        lo = beta_ppf(alpha / 2.0, k, n - k + 1) if k > 0 else 0.0
        hi = beta_ppf(1.0 - alpha / 2.0, k + 1, n - k) if k < n else 1.0
        se = float("nan")
    elif method == "normal":
        lo, hi = max(0.0, p - z * se), min(1.0, p + z * se)
    else:
        labels = np.asarray(clusters)
        if labels.shape != y.shape:
            raise InvalidArgumentError(
                f"clusters: expected one label per outcome ({n}), got shape {labels.shape}"
            )
        var, n_clusters = _cr1_variance(y, labels)
        binom_var = p * (1.0 - p) / n
        deff = var / binom_var if binom_var > 0 and not math.isnan(var) else 1.0
        if method == "cr1":
            se = math.sqrt(var) if not math.isnan(var) else float("nan")
            lo, hi = max(0.0, p - z * se), min(1.0, p + z * se)
        else:
            deff = max(1.0, deff)
            lo, hi = _wilson(p, n / deff, z)
            se = math.sqrt(binom_var * deff)
    return ProportionInterval(
        estimate=p, ci_low=float(lo), ci_high=float(hi), se=float(se), n=n, successes=k,
        n_clusters=n_clusters, design_effect=deff, method=method, level=float(level),
    )  # fmt: skip
