"""Bootstrap confidence intervals over the C++ engine (csrc/stats/).

Definitions follow Efron & Tibshirani, *An Introduction to the Bootstrap* (1993), ch. 13-14, and
match ``scipy.stats.bootstrap`` (percentile, basic, BCa) when fed the same resamples. The Poisson
scheme follows Hanley & MacGibbon (2006) and Chamandy et al. (2012).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from .. import _core
from .._keys import combine_hashes, factorize, hash_labels, label_columns
from .._typing import Method, Resampler, Scheme

_METHODS = ("percentile", "basic", "bca")
_SCHEMES = ("multinomial", "poisson")
_RESAMPLERS = ("auto", "index", "counts")


@dataclass(frozen=True, eq=False)
class BootstrapResult:
    """Columnar bootstrap result: one entry per group (a single entry without ``groups``).

    Attributes:
        keys: group key columns, name -> values (empty without ``groups``).
        n: items per group.
        n_units: resampling units per group (items, or clusters with ``clusters``).
        estimate: the statistic on the full data.
        boot_mean: mean of the bootstrap distribution.
        se: bootstrap standard error (standard deviation of the distribution, ddof=1).
        ci_low, ci_high: the confidence interval.
        degenerate: True where the group has fewer than two units or the distribution has no
            spread; then ``ci_low == ci_high == estimate`` and ``se == 0``.
        n_valid: resamples where the statistic was defined (e.g. not 0/0); the interval uses those.
        distribution: the bootstrap distribution, (groups, n_resamples), if requested.
    """

    keys: dict[str, np.ndarray]
    n: np.ndarray
    n_units: np.ndarray
    estimate: np.ndarray
    boot_mean: np.ndarray
    se: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    degenerate: np.ndarray
    n_valid: np.ndarray
    statistic: str
    method: str
    scheme: str
    level: float
    n_resamples: int
    seed: int
    distribution: np.ndarray | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return int(self.estimate.shape[0])

    def interval(self) -> tuple[float, float]:
        """(ci_low, ci_high) of a single-group result."""
        if len(self) != 1:
            raise ValueError(f"interval() needs a single-group result; this one has {len(self)}")
        return float(self.ci_low[0]), float(self.ci_high[0])

    def to_polars(self) -> pl.DataFrame:
        """One row per group: key columns, then n, n_units, estimate, boot_mean, se, ci_low,
        ci_high, degenerate, n_valid."""
        cols: dict[str, Any] = {name: values for name, values in self.keys.items()}
        for name in ("n", "n_units", "estimate", "boot_mean", "se", "ci_low", "ci_high"):
            cols[name] = getattr(self, name)
        cols["degenerate"] = self.degenerate
        cols["n_valid"] = self.n_valid
        return pl.DataFrame(cols)


@dataclass(frozen=True, eq=False)
class PairedBootstrapResult:
    """Paired bootstrap of ``statistic(a) - statistic(b)`` on shared resamples, per group.

    ``p_value`` is two-sided for H0: no difference, from the bootstrap distribution shifted to
    the null: (1 + #{|d_b - d| >= |d|}) / (1 + B) (Efron & Tibshirani 1993, sec. 16.4; the
    paired-resampling test of Koehn 2004).
    """

    keys: dict[str, np.ndarray]
    n: np.ndarray
    n_units: np.ndarray
    estimate_a: np.ndarray
    estimate_b: np.ndarray
    difference: np.ndarray
    boot_mean: np.ndarray
    se: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    p_value: np.ndarray
    degenerate: np.ndarray
    n_valid: np.ndarray
    statistic: str
    method: str
    scheme: str
    level: float
    n_resamples: int
    seed: int
    distribution: np.ndarray | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return int(self.difference.shape[0])

    def to_polars(self) -> pl.DataFrame:
        cols: dict[str, Any] = {name: values for name, values in self.keys.items()}
        for name in (
            "n", "n_units", "estimate_a", "estimate_b", "difference", "boot_mean", "se",
            "ci_low", "ci_high", "p_value", "degenerate", "n_valid",
        ):  # fmt: skip
            cols[name] = getattr(self, name)
        return pl.DataFrame(cols)


# ----------------------------------------------------------------------------- validation


def as_values(values: Any, *, name: str = "values") -> np.ndarray:
    """float64 (n, k) C-contiguous matrix from 1-D or 2-D bool/int/float input; rejects NaN/inf."""
    arr = np.asarray(values)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
    ):
        raise ValueError(f"{name}: expected bool, integer or float values, got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise ValueError(f"{name}: complex values are not supported")
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected a 1-D array or a 2-D (n, k) array, got {arr.ndim}-D")
    if arr.shape[0] == 0:
        raise ValueError(f"{name}: empty input; expected at least one record")
    if arr.shape[1] == 0:
        raise ValueError(f"{name}: expected at least one column")
    out = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.isfinite(out).all():
        bad = np.flatnonzero(~np.isfinite(out).all(axis=1))[0]
        raise ValueError(f"{name}: NaN or infinite value at record {bad}; expected finite numbers")
    return out


def _check_options(n_resamples: Any, level: Any, method: str, scheme: str, seed: Any,
                   threads: Any, resampler: str) -> tuple[int, float, int, int]:  # fmt: skip
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, numbers.Integral):
        raise ValueError(f"n_resamples: expected an integer >= 1, got {n_resamples!r}")
    if not 1 <= int(n_resamples) < 2**32:
        raise ValueError(f"n_resamples: expected an integer in [1, 2^32), got {n_resamples}")
    if not isinstance(level, numbers.Real) or not 0.0 < float(level) < 1.0:
        raise ValueError(f"level: expected a number strictly between 0 and 1, got {level!r}")
    if method not in _METHODS:
        raise ValueError(f"method: expected one of {_METHODS}, got {method!r}")
    if scheme not in _SCHEMES:
        raise ValueError(f"scheme: expected one of {_SCHEMES}, got {scheme!r}")
    if resampler not in _RESAMPLERS:
        raise ValueError(f"resampler: expected one of {_RESAMPLERS}, got {resampler!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**64:
        raise ValueError(f"seed: expected an integer in [0, 2^64), got {seed!r}")
    if threads is None:
        nthreads = 0
    elif isinstance(threads, numbers.Integral) and not isinstance(threads, bool) and threads >= 1:
        nthreads = int(threads)
    else:
        raise ValueError(f"threads: expected None or an integer >= 1, got {threads!r}")
    return int(n_resamples), float(level), int(seed), nthreads


@dataclass(frozen=True)
class _Layout:
    """Dense codes of groups/strata/clusters plus what results and streams need."""

    group: np.ndarray | None
    n_groups: int
    keys: dict[str, np.ndarray]
    group_keys: np.ndarray
    stratum: np.ndarray | None
    n_strata: int
    cluster: np.ndarray | None
    n_clusters: int
    cluster_keys: np.ndarray | None


def _layout(n: int, groups: Any, strata: Any, clusters: Any) -> _Layout:
    if groups is None:
        group, n_groups, keys = None, 1, {}
        group_keys = np.zeros(1, dtype=np.uint64)
    else:
        cols = label_columns(groups, name="groups", n=n)
        group, keys, n_groups = factorize(cols)
        group_keys = combine_hashes([hash_labels(v) for v in keys.values()])
    stratum, n_strata = None, 1
    if strata is not None:
        stratum, _, n_strata = factorize(label_columns(strata, name="strata", n=n))
    cluster, n_clusters, cluster_keys = None, 1, None
    if clusters is not None:
        ccols = label_columns(clusters, name="clusters", n=n)
        cluster, ckeys, n_clusters = factorize(ccols)
        cluster_keys = combine_hashes([hash_labels(v) for v in ckeys.values()])
    return _Layout(group, n_groups, keys, group_keys, stratum, n_strata, cluster, n_clusters,
                   cluster_keys)  # fmt: skip


def record_keys(keys: Any, n: int) -> np.ndarray:
    """Stable 64-bit keys for the Poisson scheme: positions when None, else hashed labels."""
    if keys is None:
        return _core.stats.mix64(np.arange(n, dtype=np.uint64))
    cols = label_columns(keys, name="keys", n=n)
    return combine_hashes([hash_labels(s) for s in cols.values()])


# ----------------------------------------------------------------------------- engine calls


def bootstrap_sufficient(
    rows: Any,
    *,
    statistic: str,
    params: Any = None,
    groups: Any = None,
    clusters: Any = None,
    strata: Any = None,
    n_resamples: int = 1000,
    level: float = 0.95,
    method: Method = "percentile",
    scheme: Scheme = "multinomial",
    keys: Any = None,
    seed: int = 0,
    threads: int | None = None,
    return_distribution: bool = False,
    resampler: Resampler = "auto",
    paired_split: int = 0,
    estimate_only: bool = False,
) -> BootstrapResult:
    """Bootstrap of any registered statistic of summed per-item sufficient statistics.

    ``rows`` is (n, k): one row of sufficient statistics per item; ``statistic`` names a C++
    statistic (``_core.stats.statistic_names()``) and ``params`` its parameters. With
    ``estimate_only=True`` no resampling is done and only ``estimate`` (and ``n``) are meaningful.
    """
    values = as_values(rows)
    n = values.shape[0]
    b, level, seed, nthreads = _check_options(
        n_resamples if not estimate_only else 1, level, method, scheme, seed, threads, resampler
    )
    if estimate_only:
        b = 0
    if scheme == "poisson" and strata is not None:
        raise ValueError(
            "strata: the Poisson scheme does not fix sample sizes, so strata do not apply; "
            "use scheme='multinomial'"
        )
    if keys is not None and scheme != "poisson":
        raise ValueError("keys: record keys are only used with scheme='poisson'")
    p = [] if params is None else [float(x) for x in np.asarray(params, dtype=np.float64).ravel()]
    lay = _layout(n, groups, strata, clusters)
    if scheme == "multinomial":
        out = _core.stats.bootstrap_multinomial(
            values, lay.group, lay.n_groups, lay.stratum, lay.n_strata, lay.cluster,
            lay.n_clusters, lay.group_keys, statistic, p, paired_split, b, seed, nthreads,
            resampler, method, level, return_distribution,
        )  # fmt: skip
    else:
        partial = _core.stats.poisson_partials(
            values, lay.group, lay.n_groups, lay.cluster, lay.n_clusters, record_keys(keys, n),
            lay.cluster_keys, statistic, p, paired_split, b, seed, nthreads, method == "bca",
        )  # fmt: skip
        out = _core.stats.poisson_finalize(
            partial["hi"], partial["lo"], partial["weight"], partial["scale"], partial["n"],
            partial["n_units"], partial["acceleration"], statistic, p, paired_split, method,
            level, nthreads, return_distribution,
        )  # fmt: skip
    return _result(out, lay.keys, statistic, method, scheme, level, b, seed, estimate_only)


def _result(out: dict, keys: dict[str, np.ndarray], statistic: str, method: str, scheme: str,
            level: float, b: int, seed: int, estimate_only: bool) -> BootstrapResult:  # fmt: skip
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
        method=method,
        scheme=scheme,
        level=level,
        n_resamples=b,
        seed=seed,
        distribution=out.get("distribution"),
    )


_STAT_COLUMNS = {"mean": 1, "sum": 1, "ratio": 2, "f1": 3}


def _check_statistic(statistic: str, values: np.ndarray, name: str = "values") -> None:
    if statistic not in _STAT_COLUMNS:
        raise ValueError(
            f"statistic: expected one of {tuple(_STAT_COLUMNS)}, got {statistic!r} "
            "(agreement statistics have their own functions in tumorboard.stats)"
        )
    k = _STAT_COLUMNS[statistic]
    if values.shape[1] != k:
        layout = {1: "a 1-D array", 2: "(n, 2) columns numerator, denominator",
                  3: "(n, 3) columns TP, FP, FN"}[k]  # fmt: skip
        raise ValueError(
            f"{name}: statistic {statistic!r} expects {layout}, got shape {values.shape}"
        )


def bootstrap(
    values: Any,
    *,
    groups: Any = None,
    clusters: Any = None,
    strata: Any = None,
    statistic: str = "mean",
    n_resamples: int = 1000,
    level: float = 0.95,
    method: Method = "percentile",
    scheme: Scheme = "multinomial",
    keys: Any = None,
    seed: int = 0,
    threads: int | None = None,
    return_distribution: bool = False,
    resampler: Resampler = "auto",
) -> BootstrapResult:
    """Bootstrap confidence intervals, one per group, in a single call.

    Args:
        values: 1-D bool/int/float per-item values, or 2-D (n, k) per-item sufficient
            statistics for ratio statistics ("ratio": numerator, denominator; "f1": TP, FP, FN).
        groups: labels giving one interval per group (e.g. model); a 1-D array, a mapping of
            name -> array, or a polars DataFrame for several key columns (e.g. model and task).
        clusters: labels of resampling clusters (e.g. patient): whole clusters are resampled
            with all their items, the correct interval when questions are nested in patients.
        strata: labels of strata; resampling happens independently within each stratum.
        statistic: "mean", "sum", "ratio" (sum col 0 / sum col 1) or "f1" (2TP/(2TP+FP+FN)).
        n_resamples: number of bootstrap resamples B.
        level: confidence level of the two-sided interval.
        method: "percentile", "basic" or "bca" (bias-corrected and accelerated; the acceleration
            comes from a closed-form O(n) jackknife).
        scheme: "multinomial" (the ordinary bootstrap) or "poisson" (each record, or cluster,
            gets a Poisson(1) weight keyed by (seed, key, resample): mergeable across shards).
        keys: stable record keys for the Poisson scheme (integers or strings); default: the
            record positions, which are only stable if the data are never split differently.
        seed: the random seed; results are bit-identical for any ``threads``.
        threads: worker threads (default: all cores).
        return_distribution: also return the (groups, B) bootstrap distribution.
        resampler: "auto" draws the counts of distinct sufficient-statistic rows with one
            multinomial (conditional binomials) per resample when the data have few distinct
            rows (0/1 outcomes, small counts) and unit indices otherwise; "index" and "counts"
            force a path (both give the same distribution).

    Returns:
        A :class:`BootstrapResult`; ``.to_polars()`` gives one row per group.

    Notes:
        A group's random stream is keyed by a stable hash of its key values, so its interval
        does not change when other groups are added or removed. Resamples where the statistic is
        undefined (0/0) are left out and counted in ``n_valid``.
    """
    arr = as_values(values)
    _check_statistic(statistic, arr)
    return bootstrap_sufficient(
        arr, statistic=statistic, groups=groups, clusters=clusters, strata=strata,
        n_resamples=n_resamples, level=level, method=method, scheme=scheme, keys=keys, seed=seed,
        threads=threads, return_distribution=return_distribution, resampler=resampler,
    )  # fmt: skip


def paired_bootstrap(
    a: Any,
    b: Any,
    *,
    groups: Any = None,
    clusters: Any = None,
    strata: Any = None,
    statistic: str = "mean",
    n_resamples: int = 1000,
    level: float = 0.95,
    method: Method = "percentile",
    scheme: Scheme = "multinomial",
    keys: Any = None,
    seed: int = 0,
    threads: int | None = None,
    return_distribution: bool = False,
) -> PairedBootstrapResult:
    """Paired bootstrap of ``statistic(a) - statistic(b)``: both systems are scored on the same
    resamples of the same items (row i of ``a`` and ``b`` is the same item).

    Options are those of :func:`bootstrap`. Returns the per-system estimates, the difference,
    its interval and a two-sided p-value for H0: no difference (see
    :class:`PairedBootstrapResult`).
    """
    va, vb = as_values(a, name="a"), as_values(b, name="b")
    if va.shape != vb.shape:
        raise ValueError(f"a and b: expected the same shape, got {va.shape} and {vb.shape}")
    _check_statistic(statistic, va, "a")
    common = dict(groups=groups, clusters=clusters, strata=strata, scheme=scheme, keys=keys,
                  seed=seed, threads=threads)  # fmt: skip
    res = bootstrap_sufficient(
        np.hstack([va, vb]), statistic=statistic, paired_split=va.shape[1],
        n_resamples=n_resamples, level=level, method=method, return_distribution=True, **common,
    )  # fmt: skip
    est_a = bootstrap_sufficient(va, statistic=statistic, estimate_only=True, **common).estimate
    est_b = bootstrap_sufficient(vb, statistic=statistic, estimate_only=True, **common).estimate
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
    return PairedBootstrapResult(
        keys=res.keys, n=res.n, n_units=res.n_units, estimate_a=est_a, estimate_b=est_b,
        difference=diff, boot_mean=res.boot_mean, se=res.se, ci_low=res.ci_low,
        ci_high=res.ci_high, p_value=p, degenerate=res.degenerate, n_valid=res.n_valid,
        statistic=statistic, method=method, scheme=scheme, level=res.level,
        n_resamples=res.n_resamples, seed=res.seed,
        distribution=dist if return_distribution else None,
    )  # fmt: skip


def bootstrap_from_indices(
    values: Any,
    indices: np.ndarray,
    *,
    statistic: str = "mean",
    level: float = 0.95,
    method: Method = "percentile",
) -> BootstrapResult:
    """Test hook: run the engine's interval code on a given resample index matrix
    (n_resamples, n), e.g. the one scipy.stats.bootstrap draws, instead of the engine's RNG."""
    arr = as_values(values)
    _check_statistic(statistic, arr)
    idx = np.asarray(indices)
    if idx.ndim != 2 or idx.shape[1] != arr.shape[0]:
        raise ValueError(f"indices: expected shape (n_resamples, {arr.shape[0]}), got {idx.shape}")
    counts = np.zeros(idx.shape, dtype=np.float64)
    rows = np.repeat(np.arange(idx.shape[0]), idx.shape[1])
    np.add.at(counts, (rows, idx.ravel()), 1.0)
    _check_options(idx.shape[0], level, method, "multinomial", 0, None, "auto")
    out = _core.stats.bootstrap_from_counts(arr, counts, statistic, [], method, float(level), True)
    return _result(out, {}, statistic, method, "multinomial", float(level), idx.shape[0], 0, False)
