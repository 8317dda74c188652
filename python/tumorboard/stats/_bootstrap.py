"""Bootstrap confidence intervals over the C++ engine (csrc/stats/).

Definitions follow Efron & Tibshirani, *An Introduction to the Bootstrap* (1993), ch. 13-14, and
match ``scipy.stats.bootstrap`` (percentile, basic, BCa) when fed the same resamples. The Poisson
scheme follows Hanley & MacGibbon (2006) and Chamandy et al. (2012).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from .. import _core
from .._deprecate import options_keywords
from .._results import entries, interval, squeeze, table
from .._typing import Labels, Resampler, Scheme, Values
from ..errors import CoreError, InvalidArgumentError, NumericOverflowError
from . import _scale, _validate
from ._options import BootstrapOptions

#: The per-group fields of BootstrapResult (scalars without groups, arrays with them).
RESULT_FIELDS = (
    "n", "n_units", "estimate", "boot_mean", "se", "ci_low", "ci_high", "degenerate", "n_valid",
    "distribution",
)  # fmt: skip
PAIRED_FIELDS = (
    "n", "n_units", "estimate_a", "estimate_b", "difference", "boot_mean", "se", "ci_low",
    "ci_high", "p_value", "degenerate", "n_valid", "distribution",
)  # fmt: skip


@dataclass(frozen=True, eq=False)
class BootstrapResult:
    """Bootstrap result: Python scalars without ``groups``, one array entry per group with them.

    ``bootstrap(x).estimate`` is a ``float``; ``bootstrap(x, groups=g).estimate`` is an array
    with one value per group (the convention of every result, ``tumorboard._results``).
    ``.to_polars()`` gives one row per group (one row without groups).

    Attributes
    ----------
    keys : dict of str to numpy.ndarray
        Group key columns, name -> values (empty without ``groups``).
    n : int or numpy.ndarray
        Items per group.
    n_units : int or numpy.ndarray
        Resampling units per group (items, or clusters with ``clusters``).
    estimate : float or numpy.ndarray
        The statistic on the full data.
    boot_mean : float or numpy.ndarray
        Mean of the bootstrap distribution.
    se : float or numpy.ndarray
        Bootstrap standard error (standard deviation of the distribution, ddof=1).
    ci_low, ci_high : float or numpy.ndarray
        The confidence interval.
    degenerate : bool or numpy.ndarray of bool
        True where the group has fewer than two units or the distribution has no spread; then
        ``ci_low == ci_high == estimate`` and ``se == 0``.
    n_valid : int or numpy.ndarray
        Resamples where the statistic was defined (e.g. not 0/0); the interval uses those.
    statistic : str
        The engine statistic (``"mean"``, ``"ratio"``, ...).
    method : str
        The interval method.
    scheme : str
        The resampling scheme (``"multinomial"`` or ``"poisson"``).
    level : float
        The confidence level.
    n_resamples : int
        The resamples drawn (0 for a point estimate).
    seed : int
        The seed of the random streams.
    distribution : numpy.ndarray or None
        The bootstrap distribution, (n_resamples,) without groups and (groups, n_resamples)
        with them, if requested.
    """

    keys: dict[str, np.ndarray]
    n: Any
    n_units: Any
    estimate: Any
    boot_mean: Any
    se: Any
    ci_low: Any
    ci_high: Any
    degenerate: Any
    n_valid: Any
    statistic: str
    method: str
    scheme: str
    level: float
    n_resamples: int
    seed: int
    distribution: np.ndarray | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return entries(self.estimate)

    def interval(self) -> tuple[float, float]:
        """Return ``(ci_low, ci_high)`` of an ungrouped (or single-group) result.

        Returns
        -------
        tuple of float
            The confidence interval.

        Raises
        ------
        InvalidArgumentError
            The result has more than one group.
        """
        return interval(self)

    def to_polars(self) -> pl.DataFrame:
        """Return the result as a table with one row per group (one row without groups).

        The columns are the key columns, then n, n_units, estimate, boot_mean, se, ci_low,
        ci_high, degenerate, n_valid.

        Returns
        -------
        polars.DataFrame
            One row per group.
        """
        return table({**self.keys, **{f: getattr(self, f) for f in RESULT_FIELDS[:-1]}})


@dataclass(frozen=True, eq=False)
class PairedBootstrapResult:
    """Paired bootstrap of ``statistic(a) - statistic(b)`` on shared resamples, per group.

    ``p_value`` is two-sided for H0: no difference, from the bootstrap distribution shifted to
    the null: (1 + #{|d_b - d| >= |d|}) / (1 + B) (Efron & Tibshirani 1993, sec. 16.4; the
    paired-resampling test of Koehn 2004).

    As :class:`BootstrapResult`, the per-group fields are Python scalars without ``groups`` and
    arrays with one entry per group with them.

    Attributes
    ----------
    keys : dict of str to numpy.ndarray
        Group key columns, name -> values (empty without ``groups``).
    n, n_units : int or numpy.ndarray
        Items and resampling units per group, as in :class:`BootstrapResult`.
    estimate_a, estimate_b : float or numpy.ndarray
        The statistic of each system on the full data.
    difference : float or numpy.ndarray
        ``statistic(a) - statistic(b)`` on the full data.
    boot_mean, se, ci_low, ci_high : float or numpy.ndarray
        Mean, standard error and confidence interval of the bootstrap distribution of the
        difference.
    p_value : float or numpy.ndarray
        Two-sided p-value for H0: no difference (1 where a group has a single unit, or no spread
        and no difference).
    degenerate, n_valid : bool, int or numpy.ndarray
        As in :class:`BootstrapResult`.
    statistic, method, scheme, level, n_resamples, seed
        As in :class:`BootstrapResult`.
    distribution : numpy.ndarray or None
        The bootstrap distribution of the difference, (n_resamples,) or (groups, n_resamples),
        if requested.
    """

    keys: dict[str, np.ndarray]
    n: Any
    n_units: Any
    estimate_a: Any
    estimate_b: Any
    difference: Any
    boot_mean: Any
    se: Any
    ci_low: Any
    ci_high: Any
    p_value: Any
    degenerate: Any
    n_valid: Any
    statistic: str
    method: str
    scheme: str
    level: float
    n_resamples: int
    seed: int
    distribution: np.ndarray | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return entries(self.difference)

    def interval(self) -> tuple[float, float]:
        """Return ``(ci_low, ci_high)`` of the difference of an ungrouped (or one-group) result.

        Returns
        -------
        tuple of float
            The confidence interval of the difference.

        Raises
        ------
        InvalidArgumentError
            The result has more than one group.
        """
        return interval(self)

    def to_polars(self) -> pl.DataFrame:
        """Return the result as a table with one row per group (one row without groups).

        The columns are the key columns, then n, n_units, estimate_a, estimate_b, difference,
        boot_mean, se, ci_low, ci_high, p_value, degenerate, n_valid.

        Returns
        -------
        polars.DataFrame
            One row per group.
        """
        return table({**self.keys, **{f: getattr(self, f) for f in PAIRED_FIELDS[:-1]}})


def single(res: Any, *, grouped: bool) -> Any:
    """Return a result as the caller asked: arrays with ``groups``, scalars without.

    Parameters
    ----------
    res : BootstrapResult or PairedBootstrapResult
        A result computed with arrays (one entry per group).
    grouped : bool
        Whether the caller passed ``groups``.

    Returns
    -------
    BootstrapResult or PairedBootstrapResult
        ``res``, or its single entry as Python scalars.
    """
    if grouped:
        return res
    fields = PAIRED_FIELDS if isinstance(res, PairedBootstrapResult) else RESULT_FIELDS
    return squeeze(res, fields)


# ----------------------------------------------------------------------------- engine calls


def run_engine(
    values: np.ndarray,
    lay: _validate.Layout,
    *,
    statistic: str,
    params: list[float],
    scheme: str,
    record_keys: np.ndarray | None,
    options: BootstrapOptions,
    return_distribution: bool,
    resampler: str,
    paired_split: int = 0,
    estimate_only: bool = False,
) -> BootstrapResult:
    """Run the C++ engine on validated inputs; nothing is validated here.

    Parameters
    ----------
    values : numpy.ndarray
        Validated (n, k) float64 rows.
    lay : Layout
        The validated groups, strata and clusters.
    statistic : str
        The engine statistic.
    params : list of float
        Its parameters.
    scheme : {"multinomial", "poisson"}
        The resampling scheme.
    record_keys : numpy.ndarray or None
        Stable record keys (Poisson scheme only).
    options : BootstrapOptions
        Resamples, level, method, seed and threads.
    return_distribution : bool
        Also return the bootstrap distribution.
    resampler : {"auto", "index", "counts"}
        The multinomial resampling path.
    paired_split : int, default 0
        Columns of system a for paired statistics (0: not paired).
    estimate_only : bool, default False
        Only the estimate: no resampling.

    Returns
    -------
    BootstrapResult
        The result.
    """
    b = 0 if estimate_only else options.n_resamples
    threads, method, level = options.engine_threads, options.method, options.level
    _validate.resample_memory(b, lay.n_groups, values.shape[1], scheme=scheme,
                              return_distribution=return_distribution)  # fmt: skip
    if scheme == "multinomial":
        scaling = _scale.plan(values, lay.group, lay.n_groups, statistic=statistic,
                              paired_split=paired_split)  # fmt: skip
        out = _core.stats.bootstrap_multinomial(
            scaling.values, lay.group, lay.n_groups, lay.stratum, lay.n_strata, lay.cluster,
            lay.n_clusters, lay.group_keys, statistic, params, paired_split, b, options.seed,
            threads, resampler, method, level, return_distribution,
        )  # fmt: skip
        _scale.apply(out, scaling.exponent)
    else:
        _validate.poisson_magnitudes(values)
        partial = _core.stats.poisson_partials(
            values, lay.group, lay.n_groups, lay.cluster, lay.n_clusters, record_keys,
            lay.cluster_keys, statistic, params, paired_split, b, options.seed, threads,
            method == "bca",
        )  # fmt: skip
        out = _core.stats.poisson_finalize(
            partial["hi"], partial["lo"], partial["weight"], partial["scale"], partial["n"],
            partial["n_units"], partial["acceleration"], statistic, params, paired_split, method,
            level, threads, return_distribution,
        )  # fmt: skip
    check_numbers(out, lay.keys, statistic=statistic, estimate_only=estimate_only,
                  paired=paired_split > 0)  # fmt: skip
    return result(out, lay.keys, statistic=statistic, scheme=scheme, options=options,
                  n_resamples=b, estimate_only=estimate_only)  # fmt: skip


def _group_name(keys: dict[str, np.ndarray], g: int) -> str:
    """Return how a message names group ``g``: its key values, or nothing without groups."""
    if not keys:
        return ""
    return " of group " + ", ".join(f"{k}={np.ravel(v)[g]!r}" for k, v in keys.items())


def check_numbers(
    out: dict[str, Any],
    keys: dict[str, np.ndarray],
    *,
    statistic: str,
    estimate_only: bool = False,
    paired: bool = False,
) -> None:
    """Refuse engine output that fails its mathematical checks instead of returning it.

    The inputs were validated finite, so an infinite estimate, bound, standard error or
    resample means a result beyond the float64 range (a ``"sum"`` of values near 1e308); it is
    an error, never a number. NaN stays where it has a meaning: an undefined statistic (0/0)
    and an undefined BCa interval. An F1 (its estimate, bootstrap mean and resamples) must lie
    in [0, 1] and an interval must not be inverted. The interval bounds are not held to [0, 1]:
    the basic interval ``(2θ - q_hi, 2θ - q_lo)`` reflects the quantiles about the estimate and
    leaves the statistic's range whenever the distribution is skewed (Davison & Hinkley 1997,
    *Bootstrap Methods and their Application*, §5.2.1), which is that method's answer, not a
    fault.

    Parameters
    ----------
    out : dict
        The engine's output dictionary, after scaling back.
    keys : dict of str to numpy.ndarray
        The group key columns, to name the group in the message.
    statistic : str
        The engine statistic.
    estimate_only : bool, default False
        Only the estimate was computed (the interval fields are not checked).
    paired : bool, default False
        The statistic is a paired difference (an F1 difference lies in [-1, 1]).

    Raises
    ------
    NumericOverflowError
        A value beyond the float64 range.
    CoreError
        An F1 outside [0, 1], a negative standard error or an inverted interval (the engine's
        invariants; validated inputs cannot produce them).
    """
    fields = ("estimate",) if estimate_only else ("estimate", "boot_mean", "se", "ci_low",
                                                  "ci_high")  # fmt: skip
    arrays = {f: np.atleast_1d(np.asarray(out[f], dtype=np.float64)) for f in fields}
    dist = None if estimate_only else out.get("distribution")
    if dist is not None:
        arrays["distribution"] = np.asarray(dist, dtype=np.float64)
    for name, arr in arrays.items():
        bad = np.isinf(arr)
        if bad.any():
            g = int(np.argwhere(bad)[0][0])
            raise NumericOverflowError(
                f"statistic {statistic!r}{_group_name(keys, g)}: the {name} is beyond the float64 "
                "range (|x| > 1.8e308) although every value is finite; rescale the values (e.g. "
                "divide by a power of ten) and scale the result back"
            )
    if statistic == "f1":
        low = -1.0 if paired else 0.0
        for name, arr in arrays.items():
            if name in ("se", "ci_low", "ci_high"):
                continue
            outside = (arr < low) | (arr > 1.0)
            if outside.any():
                g = int(np.argwhere(outside)[0][0])
                raise CoreError(
                    f"statistic 'f1'{_group_name(keys, g)}: {name} outside [{low:g}, 1]"
                )
    if not estimate_only:
        se, lo, hi = arrays["se"], arrays["ci_low"], arrays["ci_high"]
        if (se < 0).any() or (lo > hi).any():
            g = int(np.flatnonzero((se < 0) | (lo > hi))[0])
            raise CoreError(
                f"statistic {statistic!r}{_group_name(keys, g)}: negative standard error or "
                "inverted interval"
            )


def _poisson_keys(scheme: str, keys: Any, n: int) -> np.ndarray | None:
    """Return the validated record keys of the Poisson scheme (None for the multinomial one)."""
    return _validate.record_keys(keys, n) if scheme == "poisson" else None


def result(
    out: dict[str, Any],
    keys: dict[str, np.ndarray],
    *,
    statistic: str,
    scheme: str,
    options: BootstrapOptions,
    n_resamples: int,
    estimate_only: bool = False,
) -> BootstrapResult:
    """Wrap the engine's output dictionary in a :class:`BootstrapResult`.

    Parameters
    ----------
    out : dict
        What ``_core.stats.bootstrap_multinomial``, ``_core.stats.poisson_finalize`` or
        ``_core.stats.bootstrap_from_counts`` returned.
    keys : dict of str to numpy.ndarray
        The group key columns.
    statistic, scheme : str
        Recorded in the result.
    options : BootstrapOptions
        The options the interval was computed with (level, method and seed are recorded).
    n_resamples : int
        The resamples drawn (0 for a point estimate).
    estimate_only : bool, default False
        No resampling was done: the interval fields are NaN.

    Returns
    -------
    BootstrapResult
        The result.
    """
    nan = np.full_like(out["estimate"], np.nan)
    pick = (lambda name: nan) if estimate_only else (lambda name: out[name])  # noqa: E731
    return BootstrapResult(
        keys=keys,
        n=np.asarray(out["n"], dtype=np.int64),
        n_units=np.asarray(out["n_units"], dtype=np.int64),
        estimate=out["estimate"],
        boot_mean=pick("boot_mean"),
        se=pick("se"),
        ci_low=pick("ci_low"),
        ci_high=pick("ci_high"),
        degenerate=np.asarray(out["degenerate"], dtype=bool) & (not estimate_only),
        n_valid=np.asarray(out["n_valid"], dtype=np.int64),
        statistic=statistic,
        method=options.method,
        scheme=scheme,
        level=options.level,
        n_resamples=n_resamples,
        seed=options.seed,
        distribution=out.get("distribution"),
    )


@options_keywords(BootstrapOptions)
def bootstrap_sufficient(
    rows: Values,
    *,
    statistic: str,
    params: Values | None = None,
    groups: Labels | None = None,
    clusters: Labels | None = None,
    strata: Labels | None = None,
    scheme: Scheme = "multinomial",
    keys: Labels | None = None,
    options: BootstrapOptions | None = None,
    return_distribution: bool = False,
    resampler: Resampler = "auto",
    paired_split: int = 0,
    estimate_only: bool = False,
) -> BootstrapResult:
    """Bootstrap any registered statistic of summed per-item sufficient statistics.

    Parameters
    ----------
    rows : array_like, shape (n, k)
        One row of sufficient statistics per item.
    statistic : str
        A statistic of the C++ engine (``tumorboard._core.stats.statistic_names()``).
    params : array_like, optional
        The statistic's parameters.
    groups, clusters, strata, scheme, keys, options, return_distribution, resampler
        As in :func:`bootstrap`.
    paired_split : int, default 0
        For paired statistics: the number of leading columns that belong to system a.
    estimate_only : bool, default False
        Compute only ``estimate`` (and ``n``): no resampling, interval fields NaN.

    Returns
    -------
    BootstrapResult
        Scalars without ``groups``, one entry per group with them.

    Raises
    ------
    InvalidArgumentError
        An invalid argument (the message names it).
    """
    values = _validate.values(rows, name="rows")
    statistic = _validate.engine_statistic(statistic)
    if statistic == "f1":
        _validate.f1_counts(values, name="rows")
    return_distribution = _validate.flag(return_distribution, name="return_distribution")
    estimate_only = _validate.flag(estimate_only, name="estimate_only")
    opts = BootstrapOptions.resolve(options)
    scheme = _validate.scheme(scheme, strata=strata, keys=keys)
    resampler = _validate.choice(resampler, _validate.RESAMPLERS, name="resampler")
    if not _validate.is_integer(paired_split) or not 0 <= paired_split < values.shape[1]:
        raise InvalidArgumentError(
            f"paired_split: expected an integer in [0, {values.shape[1]}), got {paired_split!r}"
        )
    lay = _validate.layout(values.shape[0], groups=groups, strata=strata, clusters=clusters)
    res = run_engine(
        values, lay, statistic=statistic, params=_validate.params(params), scheme=scheme,
        record_keys=_poisson_keys(scheme, keys, values.shape[0]), options=opts,
        return_distribution=return_distribution, resampler=resampler,
        paired_split=int(paired_split), estimate_only=estimate_only,
    )  # fmt: skip
    return single(res, grouped=groups is not None)


@options_keywords(BootstrapOptions)
def bootstrap(
    values: Values,
    *,
    groups: Labels | None = None,
    clusters: Labels | None = None,
    strata: Labels | None = None,
    statistic: str = "mean",
    scheme: Scheme = "multinomial",
    keys: Labels | None = None,
    options: BootstrapOptions | None = None,
    return_distribution: bool = False,
    resampler: Resampler = "auto",
) -> BootstrapResult:
    """Compute bootstrap confidence intervals, one per group, in a single call.

    Parameters
    ----------
    values : array_like
        1-D bool/int/float per-item values, or 2-D (n, k) per-item sufficient statistics for
        ratio statistics ("ratio": numerator, denominator; "f1": TP, FP, FN).
    groups : labels, optional
        Labels giving one interval per group (e.g. model); a 1-D array, a mapping of
        name -> array, or a polars DataFrame for several key columns (e.g. model and task).
    clusters : labels, optional
        Labels of resampling clusters (e.g. patient): whole clusters are resampled with all
        their items, the correct interval when questions are nested in patients.
    strata : labels, optional
        Labels of strata; resampling happens independently within each stratum.
    statistic : {"mean", "sum", "ratio", "f1"}, default "mean"
        "ratio" is sum of column 0 / sum of column 1, "f1" is 2TP / (2TP + FP + FN).
    scheme : {"multinomial", "poisson"}, default "multinomial"
        The ordinary bootstrap, or Poisson(1) weights per record (or cluster) keyed by
        (seed, key, resample), which merge across shards.
    keys : labels, optional
        Stable record keys for the Poisson scheme (integers or strings); default: the record
        positions, which are only stable if the data are never split differently.
    options : BootstrapOptions, optional
        Resamples, confidence level, interval method ("bca": bias-corrected and accelerated,
        the acceleration from a closed-form O(n) jackknife), seed and threads. Default:
        ``BootstrapOptions()``.
    return_distribution : bool, default False
        Also return the (groups, B) bootstrap distribution.
    resampler : {"auto", "index", "counts"}, default "auto"
        "auto" draws the counts of distinct sufficient-statistic rows with one multinomial
        (conditional binomials) per resample when the data have few distinct rows (0/1
        outcomes, small counts) and unit indices otherwise; "index" and "counts" force a path
        (both give the same distribution).

    Returns
    -------
    BootstrapResult
        Python scalars without ``groups`` (``bootstrap(x).estimate`` is a float), one array
        entry per group with them; ``.to_polars()`` gives one row per group.

    Raises
    ------
    InvalidArgumentError
        An invalid argument (the message names it).

    Notes
    -----
    A group's random stream is keyed by a stable hash of its key values, so its interval does
    not change when other groups are added or removed. Resamples where the statistic is
    undefined (0/0) are left out and counted in ``n_valid``.
    """
    arr = _validate.values(values)
    _validate.statistic(statistic, arr)
    return_distribution = _validate.flag(return_distribution, name="return_distribution")
    opts = BootstrapOptions.resolve(options)
    scheme = _validate.scheme(scheme, strata=strata, keys=keys)
    resampler = _validate.choice(resampler, _validate.RESAMPLERS, name="resampler")
    lay = _validate.layout(arr.shape[0], groups=groups, strata=strata, clusters=clusters)
    res = run_engine(
        arr, lay, statistic=statistic, params=[], scheme=scheme,
        record_keys=_poisson_keys(scheme, keys, arr.shape[0]), options=opts,
        return_distribution=return_distribution, resampler=resampler,
    )  # fmt: skip
    return single(res, grouped=groups is not None)


@options_keywords(BootstrapOptions)
def paired_bootstrap(
    a: Values,
    b: Values,
    *,
    groups: Labels | None = None,
    clusters: Labels | None = None,
    strata: Labels | None = None,
    statistic: str = "mean",
    scheme: Scheme = "multinomial",
    keys: Labels | None = None,
    options: BootstrapOptions | None = None,
    return_distribution: bool = False,
) -> PairedBootstrapResult:
    """Bootstrap ``statistic(a) - statistic(b)`` of two systems on shared resamples.

    Both systems are scored on the same resamples of the same items (row i of ``a`` and ``b``
    is the same item).

    Parameters
    ----------
    a, b : array_like
        The two systems' per-item values, of the same shape.
    groups, clusters, strata, statistic, scheme, keys, options, return_distribution
        As in :func:`bootstrap`.

    Returns
    -------
    PairedBootstrapResult
        The per-system estimates, the difference, its interval and a two-sided p-value for H0:
        no difference (scalars without ``groups``, one entry per group with them).

    Raises
    ------
    InvalidArgumentError
        An invalid argument, or ``a`` and ``b`` of different shapes.
    """
    va, vb = _validate.values(a, name="a"), _validate.values(b, name="b")
    if va.shape != vb.shape:
        raise InvalidArgumentError(
            f"a and b: expected the same shape, got {va.shape} and {vb.shape}"
        )
    _validate.statistic(statistic, va, name="a")
    if statistic == "f1":
        _validate.f1_counts(vb, name="b")
    return_distribution = _validate.flag(return_distribution, name="return_distribution")
    opts = BootstrapOptions.resolve(options)
    scheme = _validate.scheme(scheme, strata=strata, keys=keys)
    lay = _validate.layout(va.shape[0], groups=groups, strata=strata, clusters=clusters)
    rk = _poisson_keys(scheme, keys, va.shape[0])

    def run(rows: np.ndarray, **kw: Any) -> BootstrapResult:
        """Run the engine on ``rows`` with the shared layout, scheme, keys and options."""
        return run_engine(rows, lay, statistic=statistic, params=[], scheme=scheme,
                          record_keys=rk, options=opts, resampler="auto", **kw)  # fmt: skip

    res = run(np.hstack([va, vb]), return_distribution=True, paired_split=va.shape[1])
    est_a = run(va, return_distribution=False, estimate_only=True).estimate
    est_b = run(vb, return_distribution=False, estimate_only=True).estimate
    dist = res.distribution
    assert dist is not None
    diff = res.estimate
    with np.errstate(invalid="ignore"):
        extreme = np.abs(dist - diff[:, None]) >= np.abs(diff)[:, None]
    extreme &= ~np.isnan(dist)
    p = (1.0 + extreme.sum(axis=1)) / (1.0 + res.n_valid)
    # One unit (item or cluster) carries no evidence about variability: p = 1.
    no_evidence = (res.n_units < 2) | (res.degenerate & (diff == 0))
    p = np.where(no_evidence, 1.0, np.minimum(p, 1.0))
    paired = PairedBootstrapResult(
        keys=res.keys, n=res.n, n_units=res.n_units, estimate_a=est_a, estimate_b=est_b,
        difference=diff, boot_mean=res.boot_mean, se=res.se, ci_low=res.ci_low,
        ci_high=res.ci_high, p_value=p, degenerate=res.degenerate, n_valid=res.n_valid,
        statistic=statistic, method=opts.method, scheme=scheme, level=res.level,
        n_resamples=res.n_resamples, seed=res.seed,
        distribution=dist if return_distribution else None,
    )  # fmt: skip
    return single(paired, grouped=groups is not None)


@options_keywords(BootstrapOptions)
def bootstrap_from_indices(
    values: Values,
    indices: npt.ArrayLike,
    *,
    statistic: str = "mean",
    options: BootstrapOptions | None = None,
) -> BootstrapResult:
    """Run the engine's interval code on a given resample index matrix (a test hook).

    Instead of the engine's random streams, the resamples are the rows of ``indices``, e.g. the
    matrix ``scipy.stats.bootstrap`` draws, so the intervals can be compared to the last digit.

    Parameters
    ----------
    values : array_like
        Per-item values, as in :func:`bootstrap`.
    indices : array_like of int, shape (n_resamples, n)
        Row b lists the items of resample b.
    statistic : {"mean", "sum", "ratio", "f1"}, default "mean"
        As in :func:`bootstrap`.
    options : BootstrapOptions, optional
        The level and method of the interval. Its ``n_resamples`` must equal the number of
        rows of ``indices`` (default: that number); ``seed`` and ``threads`` do not apply,
        since nothing is drawn.

    Returns
    -------
    BootstrapResult
        An ungrouped result (Python scalars).

    Raises
    ------
    InvalidArgumentError
        An invalid argument, or ``options.n_resamples`` different from the rows of ``indices``.
    """
    arr = _validate.values(values)
    _validate.statistic(statistic, arr)
    idx = _validate.resample_indices(indices, arr.shape[0])
    b = idx.shape[0]
    opts = BootstrapOptions(n_resamples=b) if options is None else BootstrapOptions.resolve(options)
    if opts.n_resamples != b:
        raise InvalidArgumentError(
            f"options: n_resamples={opts.n_resamples} but indices has {b} resamples (rows)"
        )
    counts = np.zeros(idx.shape, dtype=np.float64)
    rows = np.repeat(np.arange(b), idx.shape[1])
    np.add.at(counts, (rows, idx.ravel()), 1.0)
    scaling = _scale.plan(arr, None, 1, statistic=statistic)
    out = _core.stats.bootstrap_from_counts(
        scaling.values, counts, statistic, [], opts.method, opts.level, True
    )
    _scale.apply(out, scaling.exponent)
    check_numbers(out, {}, statistic=statistic)
    res = result(out, {}, statistic=statistic, scheme="multinomial", options=opts, n_resamples=b)
    return single(res, grouped=False)
