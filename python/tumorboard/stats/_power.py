"""Planning a comparison: power, sample size and the minimum detectable effect.

Normal-approximation (z-test) power of a two-sided test of a difference of means Delta with
standard deviation sd (Cohen 1988, *Statistical Power Analysis for the Behavioral Sciences*,
2nd ed., ch. 2; the same numbers as ``statsmodels.stats.power.NormalIndPower``):

* ``design="paired"`` - both models answer the same n items; sd is the standard deviation of
  the per-item differences (for 0/1 outcomes: sqrt(p_discordant - Delta^2)); one-sample test of
  the mean difference: the noncentrality is Delta sqrt(n) / sd;
* ``design="independent"`` - two groups of n items each: Delta sqrt(n / 2) / sd.

Clustered items (questions nested in patients) count as fewer independent ones: the design
effect 1 + (m - 1) ICC with m items per patient (Kish 1965, *Survey Sampling*, sec. 5.4)
divides the effective sample size; the answer gives items and patients.

power = Phi(z - z_{1-alpha/2}) + Phi(-z - z_{1-alpha/2}) with z the noncentrality; the sample
size is the smallest whole n reaching the power; the minimum detectable effect is the Delta at
which the power is reached for a given n (solved by bisection, both tails counted).

``power(..., method="simulation")`` checks the approximation where it matters (few patients,
strong clustering): it simulates paired 0/1 outcomes and runs the test the comparison runs.
Each simulated data set has ``n_items`` paired per-item differences D in {-1, 0, 1} with
P(D = 1) = (q + Delta) / 2, P(D = -1) = (q - Delta) / 2, q = sd^2 + Delta^2 (so that E D = Delta
and SD D = sd: the discordant pairs of McNemar's table), items nested in patients of
``items_per_cluster``; within a patient each item takes the patient's shared draw with
probability sqrt(ICC), else its own draw from the same distribution, so two items of a patient
correlate by exactly ICC (a common-shock mixture model; Ridout, Demetrio & Firth 1999,
*Biometrics* 55:137-148, for the ICC of binary data). Every data set is tested by the clustered
paired bootstrap of the C++ engine (:func:`tumorboard.stats.bootstrap`, whole patients
resampled; all data sets in one engine call, one group each): H0 is rejected when the
percentile interval at level 1 - alpha excludes 0. The power is the share of rejections; its
Monte Carlo standard error is sqrt(power (1 - power) / n_simulations).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from ..errors import InvalidArgumentError
from ._exact import norm_cdf, norm_ppf
from ._options import BootstrapOptions

__all__ = ["PowerPlan", "detectable_effect", "plan_sample_size", "power"]

Design = Literal["paired", "independent"]
PowerMethod = Literal["analytic", "simulation"]


@dataclass(frozen=True)
class PowerPlan:
    """The items (and patients) a comparison needs.

    Attributes
    ----------
    n_items : int
        Items per model (paired: answered by both; independent: per group).
    n_clusters : int
        Patients: ``ceil(n_items / items_per_cluster)``.
    design_effect : float
        1 + (items_per_cluster - 1) icc.
    power : float
        The power reached at ``n_items``.
    delta, sd, alpha, icc : float
        The inputs.
    items_per_cluster : int
        The input.
    design : str
        ``"paired"`` or ``"independent"``.
    """

    n_items: int
    n_clusters: int
    design_effect: float
    power: float
    delta: float
    sd: float
    alpha: float
    icc: float
    items_per_cluster: int
    design: str


def _check(name: str, x: float, lo: float, hi: float, *, lo_open: bool = True) -> float:
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    if not ok or (x <= lo if lo_open else x < lo) or x >= hi:
        bound = "(" if lo_open else "["
        raise InvalidArgumentError(f"{name}: expected a number in {bound}{lo}, {hi}), got {x!r}")
    return float(x)


def _deff(icc: float, m: int) -> float:
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise InvalidArgumentError(f"items_per_cluster: expected an integer >= 1, got {m!r}")
    _check("icc", icc, 0.0, 1.0 + 1e-12, lo_open=False)
    return 1.0 + (m - 1) * icc


def _power_z(z: float, alpha: float) -> float:
    crit = norm_ppf(1.0 - alpha / 2.0)
    return norm_cdf(z - crit) + norm_cdf(-z - crit)


def _noncentrality(delta: float, n: float, sd: float, design: str, deff: float) -> float:
    if design not in ("paired", "independent"):
        raise InvalidArgumentError(f"design: expected 'paired' or 'independent', got {design!r}")
    n_eff = n / deff
    return abs(delta) * math.sqrt(n_eff if design == "paired" else n_eff / 2.0) / sd


def power(
    delta: float,
    n_items: int,
    *,
    sd: float = 1.0,
    alpha: float = 0.05,
    design: Design = "paired",
    icc: float = 0.0,
    items_per_cluster: int = 1,
    method: PowerMethod = "analytic",
    n_simulations: int = 1000,
    seed: int = 0,
    options: BootstrapOptions | None = None,
) -> float:
    """Return the power of a two-sided test to detect ``delta`` with ``n_items`` items.

    Parameters
    ----------
    delta : float
        The difference of means to detect.
    n_items : int
        Items per model (module docstring).
    sd : float, default 1.0
        Standard deviation of the per-item differences (paired) or of the values
        (independent).
    alpha : float, default 0.05
        Two-sided level.
    design : {"paired", "independent"}, default "paired"
        The comparison (module docstring).
    icc : float, default 0.0
        Intra-class correlation of items within a patient.
    items_per_cluster : int, default 1
        Items per patient.
    method : {"analytic", "simulation"}, default "analytic"
        "analytic": the z-test's power (module docstring). "simulation": the share of
        simulated paired 0/1 data sets in which the clustered paired bootstrap rejects H0
        (module docstring); ``design`` must be "paired", and ``delta`` and ``sd`` must be
        those of 0/1 outcomes (sd^2 + delta^2 <= 1 and |delta| <= sd^2 + delta^2).
    n_simulations : int, default 1000
        Simulated data sets (``method="simulation"``); the Monte Carlo standard error of the
        answer is sqrt(power (1 - power) / n_simulations).
    seed : int, default 0
        Seed of the simulated data (``method="simulation"``); the same seed gives the same
        answer on any number of threads.
    options : BootstrapOptions, optional
        The bootstrap of each simulated data set (``method="simulation"``): resamples, seed
        and threads; its ``level`` is set to 1 - ``alpha`` and its method to percentile.
        Default ``BootstrapOptions(n_resamples=1000, seed=seed)``.

    Returns
    -------
    float
        The probability of rejecting H0 (both tails), or its simulated estimate.

    Raises
    ------
    InvalidArgumentError
        An input out of range, an unknown method, or a simulation asked of an independent
        design or of a (delta, sd) no 0/1 outcome has.
    """
    _check("sd", sd, 0.0, math.inf)
    _check("alpha", alpha, 0.0, 1.0)
    if isinstance(n_items, bool) or not isinstance(n_items, int) or n_items < 1:
        raise InvalidArgumentError(f"n_items: expected an integer >= 1, got {n_items!r}")
    deff = _deff(icc, items_per_cluster)
    if method == "simulation":
        return _simulated_power(float(delta), n_items, sd=sd, alpha=alpha, design=design,
                                icc=icc, m=items_per_cluster, n_simulations=n_simulations,
                                seed=seed, options=options)  # fmt: skip
    if method != "analytic":
        raise InvalidArgumentError(f"method: expected 'analytic' or 'simulation', got {method!r}")
    return _power_z(_noncentrality(delta, n_items, sd, design, deff), alpha)


def _simulated_power(
    delta: float,
    n: int,
    *,
    sd: float,
    alpha: float,
    design: str,
    icc: float,
    m: int,
    n_simulations: int,
    seed: int,
    options: BootstrapOptions | None,
) -> float:
    """Simulate paired clustered 0/1 differences; return the bootstrap test's rejection rate."""
    from ._bootstrap import bootstrap

    if design != "paired":
        raise InvalidArgumentError(
            f"design: method='simulation' simulates paired 0/1 outcomes; expected 'paired', "
            f"got {design!r}"
        )
    if isinstance(n_simulations, bool) or not isinstance(n_simulations, int) or n_simulations < 1:
        raise InvalidArgumentError(
            f"n_simulations: expected an integer >= 1, got {n_simulations!r}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidArgumentError(f"seed: expected an integer >= 0, got {seed!r}")
    q = sd * sd + delta * delta  # P(discordant pair)
    if q > 1.0 + 1e-12 or abs(delta) > q:
        raise InvalidArgumentError(
            f"sd: paired 0/1 outcomes with delta {delta:g} need sd^2 + delta^2 <= 1 and |delta| "
            f"<= sd^2 + delta^2, got sd {sd:g}"
        )
    base = BootstrapOptions.resolve(options) if options is not None else BootstrapOptions(
        n_resamples=1000, seed=seed)  # fmt: skip
    opts = replace(base, level=1.0 - alpha, method="percentile")
    p_up, p_down = (q + delta) / 2.0, (q - delta) / 2.0
    share = math.sqrt(icc)
    rng = np.random.default_rng(seed)
    cluster = np.arange(n) // m
    g = int(cluster[-1]) + 1

    def draw(shape: tuple[int, ...]) -> np.ndarray:
        u = rng.random(shape)
        return np.where(u < p_up, 1.0, np.where(u < p_up + p_down, -1.0, 0.0))

    rejected = 0
    block = max(1, min(n_simulations, 2**22 // n))
    for start in range(0, n_simulations, block):
        k = min(block, n_simulations - start)
        d = draw((k, n))
        if m > 1 and share > 0:
            shared = draw((k, g))[:, cluster]
            d = np.where(rng.random((k, n)) < share, shared, d)
        sims = np.arange(start, start + k)
        res = bootstrap(
            d.ravel(), groups=np.repeat(sims, n),
            clusters=(sims[:, None] * g + cluster[None, :]).ravel() if m > 1 else None,
            options=opts,
        )  # fmt: skip
        lo, hi = np.asarray(res.ci_low), np.asarray(res.ci_high)
        rejected += int(np.count_nonzero((lo > 0.0) | (hi < 0.0)))
    return rejected / n_simulations


def plan_sample_size(
    delta: float,
    *,
    sd: float = 1.0,
    alpha: float = 0.05,
    target_power: float = 0.8,
    design: Design = "paired",
    icc: float = 0.0,
    items_per_cluster: int = 1,
) -> PowerPlan:
    """Return the fewest items (and patients) that reach ``target_power`` for ``delta``.

    Parameters
    ----------
    delta : float
        The difference of means to detect (not 0).
    sd, alpha, design, icc, items_per_cluster
        As in :func:`power`.
    target_power : float, default 0.8
        The power to reach, in (alpha, 1).

    Returns
    -------
    PowerPlan
        Items, patients, design effect and the power reached.
    """
    _check("sd", sd, 0.0, math.inf)
    _check("alpha", alpha, 0.0, 1.0)
    _check("target_power", target_power, alpha, 1.0)
    if not isinstance(delta, (int, float)) or not math.isfinite(delta) or delta == 0:
        raise InvalidArgumentError(f"delta: expected a finite non-zero difference, got {delta!r}")
    deff = _deff(icc, items_per_cluster)

    def at(n: int) -> float:
        return _power_z(_noncentrality(delta, n, sd, design, deff), alpha)

    z_a, z_b = norm_ppf(1.0 - alpha / 2.0), norm_ppf(target_power)
    per = 1.0 if design == "paired" else 2.0
    # the one-tailed closed form, then whole steps to the smallest n (both tails counted)
    n = max(1, math.floor(per * deff * ((z_a + z_b) * sd / delta) ** 2))
    while n > 1 and at(n - 1) >= target_power:
        n -= 1
    while at(n) < target_power:
        n += 1
    reached = at(n)
    return PowerPlan(
        n_items=n, n_clusters=math.ceil(n / items_per_cluster), design_effect=deff,
        power=reached, delta=float(delta), sd=float(sd), alpha=float(alpha), icc=float(icc),
        items_per_cluster=items_per_cluster, design=design,
    )  # fmt: skip


def detectable_effect(
    n_items: int,
    *,
    sd: float = 1.0,
    alpha: float = 0.05,
    target_power: float = 0.8,
    design: Design = "paired",
    icc: float = 0.0,
    items_per_cluster: int = 1,
) -> float:
    """Return the smallest difference detected with ``target_power`` by ``n_items`` items.

    Parameters
    ----------
    n_items : int
        Items per model.
    sd, alpha, target_power, design, icc, items_per_cluster
        As in :func:`plan_sample_size`.

    Returns
    -------
    float
        The minimum detectable effect (positive), both tails counted.
    """
    _check("target_power", target_power, alpha, 1.0)
    lo, hi = 0.0, 1.0
    kw = dict(sd=sd, alpha=alpha, design=design, icc=icc, items_per_cluster=items_per_cluster)
    while power(hi, n_items, **kw) < target_power:  # type: ignore[arg-type]
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if power(mid, n_items, **kw) < target_power:  # type: ignore[arg-type]
            lo = mid
        else:
            hi = mid
    return hi
