"""Benchmark ``tumorboard.stats.bootstrap`` against two anchors on the same data.

Anchors, measured in the same run:

* **chunked numpy** - the straightforward fast numpy bootstrap: draw the resample index
  matrix a chunk at a time with ``rng.integers`` (about 2M indices per chunk, e.g.
  20 resamples x n=100k), take row means, then ``np.percentile``.  Grouped workloads loop
  over groups; the clustered workload loops over models and resamples patients (cluster
  sums).  BCa uses the closed-form jackknife of the mean.
* **scipy** - ``scipy.stats.bootstrap(..., vectorized=True)`` with ``batch`` chosen so
  memory stays around 1 GB.  For the 200-group workload scipy is run on 5 groups and the
  time multiplied by 40 (reported as *extrapolated*).  In full mode scipy BCa (~20 s or
  more) is run exactly once.

``ratio`` = anchor time / tumorboard time, so values above 1 mean tumorboard is faster.
The anchors are single-threaded; ``--threads`` only affects tumorboard.

Every workload is also sanity-checked: tumorboard's CI endpoints must agree with each
anchor's within a Monte-Carlo tolerance (``Z_TOL`` standard errors of the difference of two
independent quantile estimates).  A disagreement is reported in the ``check`` column; it
never aborts the run.

Usage (from the repository root)::

    python benchmarks/bench_bootstrap.py [--quick] [--json PATH] [--repeat N] [--threads N]
    python benchmarks/bench_bootstrap.py --only W5    # one workload (W1 ... W5)
    python -m benchmarks.bench_bootstrap --quick
"""

from __future__ import annotations

import argparse
import inspect
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

try:
    from ._timing import Result, best_of, format_markdown, positive_int, write_json
except ImportError:  # run as a script: ``python benchmarks/bench_bootstrap.py``
    from _timing import Result, best_of, format_markdown, positive_int, write_json

ANCHOR_NUMPY = "chunked numpy"
ANCHOR_SCIPY = "scipy"
ANCHORS = (ANCHOR_NUMPY, ANCHOR_SCIPY)

CONFIDENCE = 0.95
SEED = 0
#: Resample indices drawn per chunk by the numpy anchor (20 resamples x 100k records).
#: 1M-3M keeps index + gather buffers near cache size; 10M was ~25% slower at n=10k.
CHUNK_ELEMS = 2_000_000
#: Target peak working memory of one scipy batch, in bytes.
SCIPY_BATCH_BYTES = 1_000_000_000
#: Bytes per (resample, record) cell in a scipy batch: int64 index + float64 gather for the
#: bootstrap, plus a bool mask for the jackknife (BCa) pass.
SCIPY_BYTES_PER_CELL = 25
#: Tolerance of the CI sanity check, in Monte-Carlo standard errors of the difference.
Z_TOL = 6.0
#: The grouped workload runs scipy on this many groups and extrapolates linearly.
SCIPY_GROUP_SUBSET = 5
#: Per-measurement budget (seconds) handed to ``best_of`` (full / quick mode).
MAX_TIME = 15.0
MAX_TIME_QUICK = 4.0
MIN_TIME = 0.2

_ND = NormalDist()


# --------------------------------------------------------------------------------------
# numpy anchor
# --------------------------------------------------------------------------------------


def _chunk_rows(n: int, n_resamples: int) -> int:
    """Resamples per chunk so a chunk holds about ``CHUNK_ELEMS`` indices."""
    return max(1, min(n_resamples, CHUNK_ELEMS // max(n, 1)))


def numpy_boot_means(x: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap distribution of the mean of ``x``, drawn in chunks of resamples."""
    n = x.shape[0]
    out = np.empty(n_resamples)
    step = _chunk_rows(n, n_resamples)
    for start in range(0, n_resamples, step):
        stop = min(start + step, n_resamples)
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = x[idx].mean(axis=1)
    return out


def percentile_ci(theta_b: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Percentile interval of a bootstrap distribution."""
    alpha = 1.0 - confidence
    lo, hi = np.percentile(theta_b, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(lo), float(hi)


def bca_mean_ci(
    x: np.ndarray, theta_b: np.ndarray, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """BCa interval for the mean (Efron & Tibshirani eq. 14.10/14.15, as in scipy).

    The jackknife of the mean is closed-form: leave-one-out means are ``(S - x_i)/(n-1)``.
    """
    alpha = 1.0 - confidence
    theta_hat = float(x.mean())
    b = theta_b.size
    p0 = (np.count_nonzero(theta_b < theta_hat) + np.count_nonzero(theta_b <= theta_hat)) / (2 * b)
    if not 0.0 < p0 < 1.0:
        return math.nan, math.nan
    z0 = _ND.inv_cdf(p0)
    n = x.shape[0]
    jack = (x.sum() - x) / (n - 1)
    d = jack.mean() - jack
    den = 6.0 * float(np.sum(d * d)) ** 1.5
    a = float(np.sum(d * d * d)) / den if den > 0 else 0.0
    qs = []
    for z_alpha in (_ND.inv_cdf(alpha / 2), _ND.inv_cdf(1 - alpha / 2)):
        qs.append(100 * _ND.cdf(z0 + (z0 + z_alpha) / (1 - a * (z0 + z_alpha))))
    lo, hi = np.percentile(theta_b, qs)
    return float(lo), float(hi)


def numpy_single(x: np.ndarray, n_resamples: int, method: str, seed: int) -> np.ndarray:
    """Chunked numpy bootstrap of one sample; returns ``[[lo, hi]]``."""
    rng = np.random.default_rng(seed)
    theta_b = numpy_boot_means(x, n_resamples, rng)
    ci = bca_mean_ci(x, theta_b) if method == "bca" else percentile_ci(theta_b)
    return np.array([ci])


def _factorize(*cols: np.ndarray) -> tuple[np.ndarray, list[tuple[Any, ...]]]:
    """Integer group code per record plus the (sorted) key tuple of each code."""
    code = np.zeros(cols[0].shape[0], dtype=np.int64)
    uniques = []
    for c in cols:
        u, inv = np.unique(c, return_inverse=True)
        code = code * len(u) + inv.ravel()
        uniques.append(u)
    present = np.unique(code)
    keys = []
    for c in present.tolist():
        parts = []
        for u in reversed(uniques):
            c, r = divmod(c, len(u))
            parts.append(u[r].item())
        keys.append(tuple(reversed(parts)))
    return code, keys


def numpy_grouped(
    values: np.ndarray, group_cols: Sequence[np.ndarray], n_resamples: int, seed: int
) -> np.ndarray:
    """Loop over groups, chunked percentile bootstrap per group; returns ``(G, 2)``.

    Groups come out in sorted key order.  Grouping (factorise + stable sort + split) is
    part of the timed work, as it is for tumorboard.
    """
    rng = np.random.default_rng(seed)
    code, _ = _factorize(*group_cols)
    order = np.argsort(code, kind="stable")
    sorted_codes = code[order]
    cuts = np.flatnonzero(np.diff(sorted_codes)) + 1
    out = []
    for idx in np.split(order, cuts):
        theta_b = numpy_boot_means(values[idx], n_resamples, rng)
        out.append(percentile_ci(theta_b))
    return np.array(out)


def _cluster_sums(
    values: np.ndarray, groups: np.ndarray, clusters: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per (group, cluster) sums and record counts, shaped ``(G, C)``."""
    gu, gi = np.unique(groups, return_inverse=True)
    cu, ci = np.unique(clusters, return_inverse=True)
    flat = gi.ravel() * len(cu) + ci.ravel()
    size = len(gu) * len(cu)
    sums = np.bincount(flat, weights=values, minlength=size).reshape(len(gu), len(cu))
    counts = np.bincount(flat, minlength=size).reshape(len(gu), len(cu))
    return sums, counts


def numpy_clustered(
    values: np.ndarray, groups: np.ndarray, clusters: np.ndarray, n_resamples: int, seed: int
) -> np.ndarray:
    """Loop over groups (models); resample clusters (patients) with replacement.

    The statistic is the mean over all records of the resampled clusters, i.e.
    ``sum(cluster sums) / sum(cluster sizes)``.  Returns ``(G, 2)`` in sorted group order.
    """
    rng = np.random.default_rng(seed)
    sums, counts = _cluster_sums(values, groups, clusters)
    out = []
    for g in range(sums.shape[0]):
        keep = counts[g] > 0
        s, c = sums[g, keep], counts[g, keep]
        k = s.shape[0]
        theta_b = np.empty(n_resamples)
        step = _chunk_rows(k, n_resamples)
        for start in range(0, n_resamples, step):
            stop = min(start + step, n_resamples)
            idx = rng.integers(0, k, size=(stop - start, k))
            theta_b[start:stop] = s[idx].sum(axis=1) / c[idx].sum(axis=1)
        out.append(percentile_ci(theta_b))
    return np.array(out)


# --------------------------------------------------------------------------------------
# scipy anchor
# --------------------------------------------------------------------------------------


def _scipy_bootstrap() -> Callable[..., Any] | None:
    try:
        from scipy.stats import bootstrap
    except ImportError:
        return None
    return bootstrap


def _scipy_rng_kw(bootstrap: Callable[..., Any], seed: int) -> dict[str, Any]:
    """``rng=`` on scipy >= 1.15, ``random_state=`` before."""
    params = inspect.signature(bootstrap).parameters
    key = "rng" if "rng" in params else "random_state"
    return {key: np.random.default_rng(seed)}


def scipy_batch(n: int, n_resamples: int) -> int:
    """Resamples per scipy batch so one batch stays near ``SCIPY_BATCH_BYTES``."""
    return max(1, min(n_resamples, SCIPY_BATCH_BYTES // (SCIPY_BYTES_PER_CELL * max(n, 1))))


def _mean_stat(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis)


def _ratio_stat(s: np.ndarray, c: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.sum(s, axis=axis) / np.sum(c, axis=axis)


def scipy_single(
    bootstrap: Callable[..., Any], x: np.ndarray, n_resamples: int, method: str, seed: int
) -> np.ndarray:
    """``scipy.stats.bootstrap`` of the mean; returns ``[[lo, hi]]``."""
    res = bootstrap(
        (x,),
        _mean_stat,
        n_resamples=n_resamples,
        batch=scipy_batch(x.shape[0], n_resamples),
        vectorized=True,
        method="BCa" if method == "bca" else "percentile",
        confidence_level=CONFIDENCE,
        **_scipy_rng_kw(bootstrap, seed),
    )
    ci = res.confidence_interval
    return np.array([[float(ci.low), float(ci.high)]])


def scipy_groups(
    bootstrap: Callable[..., Any], samples: Sequence[np.ndarray], n_resamples: int, seed: int
) -> np.ndarray:
    """Run scipy's percentile bootstrap of the mean, one call per pre-split group."""
    out = [
        scipy_single(bootstrap, x, n_resamples, "percentile", seed + i)[0]
        for i, x in enumerate(samples)
    ]
    return np.array(out)


def scipy_clustered(
    bootstrap: Callable[..., Any],
    sums: np.ndarray,
    counts: np.ndarray,
    n_resamples: int,
    seed: int,
) -> np.ndarray:
    """Run scipy's paired bootstrap over (cluster sum, cluster size), one call per group."""
    out = []
    for g in range(sums.shape[0]):
        keep = counts[g] > 0
        s, c = sums[g, keep], counts[g, keep].astype(np.float64)
        res = bootstrap(
            (s, c),
            _ratio_stat,
            n_resamples=n_resamples,
            batch=scipy_batch(s.shape[0], n_resamples),
            vectorized=True,
            paired=True,
            method="percentile",
            confidence_level=CONFIDENCE,
            **_scipy_rng_kw(bootstrap, seed + g),
        )
        ci = res.confidence_interval
        out.append((float(ci.low), float(ci.high)))
    return np.array(out)


# --------------------------------------------------------------------------------------
# sanity check
# --------------------------------------------------------------------------------------


def mc_tolerance(ref: np.ndarray, n_resamples: int, method: str) -> np.ndarray:
    """Per-group tolerance for comparing CI endpoints from two independent bootstraps.

    The Monte-Carlo s.e. of the ``q``-quantile of ``B`` draws is ``sqrt(q(1-q)/B) / f(x_q)``;
    ``f`` is approximated by a normal density whose sd is read off the reference CI width.
    The difference of two independent estimates has ``sqrt(2)`` times that s.e.; BCa gets
    another ``sqrt(2)`` for the Monte-Carlo noise in its bias correction ``z0``.
    """
    alpha = 1.0 - CONFIDENCE
    z = _ND.inv_cdf(1 - alpha / 2)
    width = np.abs(ref[:, 1] - ref[:, 0])
    sigma = width / (2 * z)
    q = alpha / 2
    se = math.sqrt(q * (1 - q) / n_resamples) * sigma / _ND.pdf(z)
    factor = Z_TOL * math.sqrt(2) * (math.sqrt(2) if method == "bca" else 1.0)
    return factor * se + 1e-12 * (1 + np.abs(ref).max(axis=1))


def max_deviation(test: np.ndarray, ref: np.ndarray, n_resamples: int, method: str) -> float:
    """Largest endpoint difference in units of :func:`mc_tolerance` (<= 1 is agreement)."""
    if test.shape != ref.shape:
        return math.inf
    if not np.all(np.isfinite(test)):
        return math.inf
    tol = mc_tolerance(ref, n_resamples, method)
    dev = np.abs(test - ref) / tol[:, None]
    return float(np.nanmax(dev))


@dataclass
class _Check:
    """Accumulates the CI comparisons of one workload into a short verdict."""

    n_resamples: int
    method: str = "percentile"
    devs: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def compare(self, label: str, test: np.ndarray | None, ref: np.ndarray | None) -> None:
        if test is None or ref is None:
            return
        self.devs[label] = max_deviation(test, ref, self.n_resamples, self.method)

    def verdict(self) -> str:
        bad = {k: v for k, v in self.devs.items() if not v <= 1.0}
        if self.problems or bad:
            parts = list(self.problems)
            parts += [f"{k} {v:.2f} tol" for k, v in bad.items()]
            parts += self.notes  # e.g. "order assumed sorted" explains a mismatch
            return "WARN: " + "; ".join(parts)
        if not self.devs:
            return "not checked"
        return f"ok (max dev {max(self.devs.values()):.2f} tol)"


# --------------------------------------------------------------------------------------
# tumorboard result extraction
# --------------------------------------------------------------------------------------


def _tb_arrays(res: Any) -> np.ndarray:
    lo = np.asarray(res.ci_low, dtype=np.float64).ravel()
    hi = np.asarray(res.ci_high, dtype=np.float64).ravel()
    if lo.shape != hi.shape:
        raise ValueError("ci_low and ci_high differ in length")
    return np.stack([lo, hi], axis=1)


def _key_str(key: Any) -> tuple[str, ...]:
    if isinstance(key, tuple):
        return tuple(str(k) for k in key)
    return (str(key),)


def tb_grouped_cis(
    res: Any, keys: Sequence[tuple[Any, ...]], names: Sequence[str] | None
) -> tuple[np.ndarray | None, str]:
    """Return tumorboard's per-group CIs aligned to ``keys`` (sorted key order).

    Uses ``res.to_polars()`` key columns when they can be identified (``names`` for dict
    groups; otherwise a column whose values are exactly the expected keys).  Falls back to
    assuming tumorboard reports groups in sorted key order.

    Returns
    -------
    tuple
        ``(cis, note)``.
    """
    cis = _tb_arrays(res)
    if cis.shape[0] != len(keys):
        return None, f"{cis.shape[0]} groups, expected {len(keys)}"
    want = [_key_str(k) for k in keys]
    try:
        df = res.to_polars()
        cols: list[str] | None = None
        if names and all(c in df.columns for c in names):
            cols = list(names)
        elif len(want[0]) == 1:
            target = {w[0] for w in want}
            for c in df.columns:
                if c in ("ci_low", "ci_high"):
                    continue
                vals = [str(v) for v in df.get_column(c).to_list()]
                if len(vals) == len(want) and set(vals) == target:
                    cols = [c]
                    break
        if cols is not None:
            rows = list(
                zip(*([str(v) for v in df.get_column(c).to_list()] for c in cols), strict=True)
            )
            if {"ci_low", "ci_high"} <= set(df.columns):
                cis = np.stack(
                    [
                        df.get_column("ci_low").to_numpy().astype(np.float64),
                        df.get_column("ci_high").to_numpy().astype(np.float64),
                    ],
                    axis=1,
                )
            pos = {r: i for i, r in enumerate(rows)}
            if all(w in pos for w in want):
                return cis[[pos[w] for w in want]], ""
    except Exception as exc:  # the check must never abort the benchmark
        return cis, f"to_polars failed ({type(exc).__name__}); order assumed sorted"
    return cis, "order assumed sorted"


# --------------------------------------------------------------------------------------
# workloads
# --------------------------------------------------------------------------------------


def _fmt_count(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1_000 and n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


def _keep(fn: Callable[[], Any]) -> tuple[Callable[[], None], dict[str, Any]]:
    """Wrap ``fn`` so its last return value is kept in ``box["value"]``."""
    box: dict[str, Any] = {}

    def wrapped() -> None:
        box["value"] = fn()

    return wrapped, box


@dataclass
class _Ctx:
    ts: Any
    scipy_bootstrap: Callable[..., Any] | None
    quick: bool
    repeat: int
    threads: int | None
    log: Callable[[str], None]
    workloads: dict[str, dict[str, Any]] = field(default_factory=dict)

    def time(self, label: str, fn: Callable[[], Any], **kw: Any) -> tuple[float, Any]:
        wrapped, box = _keep(fn)
        max_time = MAX_TIME_QUICK if self.quick else MAX_TIME
        opts = {"repeat": self.repeat, "min_time": MIN_TIME, "max_time": max_time}
        opts.update(kw)
        t0 = time.perf_counter()
        sec = best_of(wrapped, **opts)
        self.log(f"  {label}: {sec:.3f} s/call ({time.perf_counter() - t0:.1f} s wall)")
        return sec, box.get("value")

    def options(self, n_resamples: int, *, method: str = "percentile") -> Any:
        """Return the tumorboard BootstrapOptions of a workload (this run's seed and threads)."""
        return self.ts.BootstrapOptions(
            n_resamples=n_resamples, method=method, seed=SEED, threads=self.threads
        )


def _results(
    ctx: _Ctx,
    name: str,
    tb_s: float,
    np_s: float,
    sp_s: float | None,
    check: _Check,
    *,
    extrapolated: bool = False,
    note: str = "",
) -> list[Result]:
    verdict = check.verdict()
    ctx.log(f"  check: {verdict}")
    out = [Result.make(name, tb_s, ANCHOR_NUMPY, np_s, check=verdict, note=note)]
    if sp_s is not None:
        out.append(
            Result.make(
                name,
                tb_s,
                ANCHOR_SCIPY,
                sp_s,
                extrapolated=extrapolated,
                check=verdict,
                note=note,
            )
        )
    return out


def _order_note(ctx: _Ctx, check: _Check, tb_ci: np.ndarray | None, msg: str) -> None:
    """Route a message from :func:`tb_grouped_cis` to the check or the log."""
    if not msg:
        return
    if tb_ci is None:
        check.problems.append(msg)
    else:
        check.notes.append(msg)
        ctx.log(f"  note: {msg}")


def _single_workload(
    ctx: _Ctx, name: str, x: np.ndarray, n_resamples: int, method: str
) -> list[Result]:
    """W1-W3: one sample, mean statistic."""
    ctx.log(f"{name}")
    ctx.workloads[name] = {"n": int(x.shape[0]), "n_resamples": n_resamples, "method": method}
    check = _Check(n_resamples, method)

    tb_s, tb_res = ctx.time(
        "tumorboard",
        lambda: ctx.ts.bootstrap(x, options=ctx.options(n_resamples, method=method)),
    )
    np_s, np_ci = ctx.time("chunked numpy", lambda: numpy_single(x, n_resamples, method, SEED + 1))

    sp_s, sp_ci = None, None
    if ctx.scipy_bootstrap is not None:
        sb = ctx.scipy_bootstrap
        slow = method == "bca" and not ctx.quick
        kw = {"repeat": 1, "warmup": False} if slow else {}
        sp_s, sp_ci = ctx.time(
            "scipy" + (" (single run)" if slow else ""),
            lambda: scipy_single(sb, x, n_resamples, method, SEED + 2),
            **kw,
        )

    try:
        tb_ci = _tb_arrays(tb_res)
    except Exception as exc:
        check.problems.append(f"bad tumorboard result ({type(exc).__name__})")
        tb_ci = None
    check.compare("tb vs numpy", tb_ci, np_ci)
    check.compare("tb vs scipy", tb_ci, sp_ci)
    check.compare("numpy vs scipy", np_ci, sp_ci)
    note = f"n={x.shape[0]} B={n_resamples} method={method}"
    return _results(ctx, name, tb_s, np_s, sp_s, check, note=note)


def _grouped_workload(
    ctx: _Ctx, name: str, n_records: int, n_models: int, n_tasks: int, n_resamples: int
) -> list[Result]:
    """W4: 0/1 accuracy in (model, task) groups of equal size, records in random order."""
    ctx.log(f"{name}")
    rng = np.random.default_rng(1004)
    n_groups = n_models * n_tasks
    per = n_records // n_groups
    code = np.repeat(np.arange(n_groups), per)
    rng.shuffle(code)
    model = code // n_tasks
    task = code % n_tasks
    p = rng.uniform(0.3, 0.9, n_groups)
    values = (rng.random(code.shape[0]) < p[code]).astype(np.float64)
    ctx.workloads[name] = {
        "n": int(values.shape[0]),
        "groups": n_groups,
        "n_resamples": n_resamples,
        "method": "percentile",
    }
    check = _Check(n_resamples)

    tb_s, tb_res = ctx.time(
        "tumorboard",
        lambda: ctx.ts.bootstrap(
            values,
            groups={"model": model, "task": task},
            options=ctx.options(n_resamples),
        ),
    )
    np_s, np_ci = ctx.time(
        "chunked numpy", lambda: numpy_grouped(values, (model, task), n_resamples, SEED + 1)
    )

    sp_s, sp_ci = None, None
    n_sub = min(SCIPY_GROUP_SUBSET, n_groups)
    if ctx.scipy_bootstrap is not None:
        sb = ctx.scipy_bootstrap
        # groups in sorted key order are codes 0, 1, ...; pre-split outside the timing
        subset = [values[code == g] for g in range(n_sub)]
        sub_s, sp_ci = ctx.time(
            f"scipy ({n_sub} groups)", lambda: scipy_groups(sb, subset, n_resamples, SEED + 2)
        )
        sp_s = sub_s * n_groups / n_sub

    _, keys = _factorize(model, task)
    tb_ci = None
    try:
        tb_ci, msg = tb_grouped_cis(tb_res, keys, ["model", "task"])
        _order_note(ctx, check, tb_ci, msg)
    except Exception as exc:
        check.problems.append(f"bad tumorboard result ({type(exc).__name__})")
    check.compare("tb vs numpy", tb_ci, np_ci)
    if tb_ci is not None and sp_ci is not None:
        check.compare("tb vs scipy", tb_ci[:n_sub], sp_ci)
    if sp_ci is not None:
        check.compare("numpy vs scipy", np_ci[:n_sub], sp_ci)
    note = (
        f"n={values.shape[0]} groups={n_groups} B={n_resamples}; scipy timed on {n_sub} "
        f"groups x{n_groups / n_sub:g}"
    )
    return _results(ctx, name, tb_s, np_s, sp_s, check, extrapolated=True, note=note)


def _clustered_workload(
    ctx: _Ctx, name: str, n_patients: int, n_questions: int, n_models: int, n_resamples: int
) -> list[Result]:
    """W5: 0/1 answers, patients are clusters, one CI per model."""
    ctx.log(f"{name}")
    rng = np.random.default_rng(1005)
    model, patient, _q = (
        a.ravel()
        for a in np.meshgrid(
            np.arange(n_models), np.arange(n_patients), np.arange(n_questions), indexing="ij"
        )
    )
    skill = rng.normal(0.5, 0.5, n_models)
    difficulty = rng.normal(0.0, 1.0, n_patients)
    p = 1.0 / (1.0 + np.exp(-(skill[model] - difficulty[patient])))
    values = (rng.random(model.shape[0]) < p).astype(np.float64)
    perm = rng.permutation(values.shape[0])
    values, model, patient = values[perm], model[perm], patient[perm]
    ctx.workloads[name] = {
        "n": int(values.shape[0]),
        "groups": n_models,
        "clusters": n_patients,
        "n_resamples": n_resamples,
        "method": "percentile",
    }
    check = _Check(n_resamples)

    tb_s, tb_res = ctx.time(
        "tumorboard",
        lambda: ctx.ts.bootstrap(
            values,
            groups=model,
            clusters=patient,
            options=ctx.options(n_resamples),
        ),
    )
    np_s, np_ci = ctx.time(
        "chunked numpy",
        lambda: numpy_clustered(values, model, patient, n_resamples, SEED + 1),
    )
    sp_s, sp_ci = None, None
    if ctx.scipy_bootstrap is not None:
        sb = ctx.scipy_bootstrap
        sums, counts = _cluster_sums(values, model, patient)  # precomputed, not timed
        sp_s, sp_ci = ctx.time(
            "scipy", lambda: scipy_clustered(sb, sums, counts, n_resamples, SEED + 2)
        )

    keys = [(k,) for k in np.unique(model).tolist()]
    tb_ci = None
    try:
        tb_ci, msg = tb_grouped_cis(tb_res, keys, None)
        _order_note(ctx, check, tb_ci, msg)
    except Exception as exc:
        check.problems.append(f"bad tumorboard result ({type(exc).__name__})")
    check.compare("tb vs numpy", tb_ci, np_ci)
    check.compare("tb vs scipy", tb_ci, sp_ci)
    check.compare("numpy vs scipy", np_ci, sp_ci)
    note = f"{n_patients} patients x {n_questions} questions x {n_models} models, B={n_resamples}"
    return _results(ctx, name, tb_s, np_s, sp_s, check, note=note)


def _import_tumorboard() -> Any:
    try:
        import tumorboard.stats as ts
    except ImportError as exc:
        raise RuntimeError(
            f"cannot import tumorboard.stats ({exc}); build and install tumorboard first"
        ) from exc
    return ts


WORKLOADS = ("W1", "W2", "W3", "W4", "W5")


def run_results(
    quick: bool = False,
    repeat: int = 3,
    threads: int | None = None,
    log: Callable[[str], None] | None = None,
    only: Sequence[str] = WORKLOADS,
) -> tuple[list[Result], dict[str, Any]]:
    """Run the workloads named in ``only`` (all by default); return the records and metadata."""
    if log is None:

        def log(msg: str) -> None:
            print(msg, file=sys.stderr, flush=True)

    ctx = _Ctx(
        ts=_import_tumorboard(),
        scipy_bootstrap=_scipy_bootstrap(),
        quick=quick,
        repeat=repeat,
        threads=threads,
        log=log,
    )
    if ctx.scipy_bootstrap is None:
        log("scipy not installed: scipy anchor skipped")
    s = 10 if quick else 1
    n1 = 100_000 // s
    n4 = 1_000_000 // s
    n_models5 = max(1, 50 // s)
    data_rng = np.random.default_rng(12345)
    binary = (data_rng.random(n1) < 0.7).astype(np.float64)
    skewed = data_rng.gamma(2.0, 1.0, n1)

    t0 = time.perf_counter()
    results: list[Result] = []
    if "W1" in only:
        results += _single_workload(
            ctx, f"W1 0/1 n={_fmt_count(n1)} B=10k percentile", binary, 10_000, "percentile"
        )
    if "W2" in only:
        results += _single_workload(
            ctx, f"W2 float n={_fmt_count(n1)} B=10k percentile", skewed, 10_000, "percentile"
        )
    if "W3" in only:
        results += _single_workload(
            ctx, f"W3 float n={_fmt_count(n1)} B=1k BCa", skewed, 1000, "bca"
        )
    if "W4" in only:
        results += _grouped_workload(
            ctx, f"W4 0/1 n={_fmt_count(n4)} 200 groups B=1k", n4, 20, 10, 1000
        )
    if "W5" in only:
        results += _clustered_workload(
            ctx, f"W5 clustered 40x5x{n_models5} B=10k", 40, 5, n_models5, 10_000
        )
    meta = {
        "quick": quick,
        "repeat": repeat,
        "threads": threads,
        "confidence": CONFIDENCE,
        "z_tol": Z_TOL,
        "ratio": "anchor_s / tumorboard_s (>1: tumorboard faster)",
        "workloads": ctx.workloads,
        "total_wall_s": time.perf_counter() - t0,
    }
    return results, meta


def run(quick: bool = False, repeat: int = 3, threads: int | None = None) -> list[dict]:
    """Run the benchmark and return one dict per (workload, anchor) record.

    Keys: ``workload, tumorboard_s, anchor, anchor_s, ratio, extrapolated, check, note``.
    Progress goes to stderr.  Raises ``RuntimeError`` if ``tumorboard.stats`` is missing.
    """
    results, _ = run_results(quick=quick, repeat=repeat, threads=threads)
    return [asdict(r) for r in results]


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns a process exit status."""
    parser = argparse.ArgumentParser(
        prog="bench_bootstrap",
        description="Time tumorboard.stats.bootstrap against scipy and a chunked numpy "
        "bootstrap on the same data.",
    )
    parser.add_argument(
        "--quick", action="store_true", help="shrink every workload's n by 10x (< 60 s)"
    )
    parser.add_argument("--json", metavar="PATH", help="also write results as JSON to PATH")
    parser.add_argument(
        "--repeat",
        type=positive_int,
        default=3,
        help="timed samples per measurement (best is reported; default 3; calls longer "
        f"than ~{MAX_TIME / 2:g} s are sampled fewer times)",
    )
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="threads for tumorboard (default: all cores); anchors are single-threaded",
    )
    parser.add_argument(
        "--only",
        choices=WORKLOADS,
        action="append",
        help="run only this workload (repeatable; default: all)",
    )
    args = parser.parse_args(argv)

    try:
        results, meta = run_results(quick=args.quick, repeat=args.repeat, threads=args.threads,
                                    only=args.only or WORKLOADS)  # fmt: skip
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    threads = "all cores" if args.threads is None else str(args.threads)
    print(f"\n### tumorboard bootstrap benchmark ({'quick' if args.quick else 'full'} mode)\n")
    print(format_markdown(results, ANCHORS))
    print(
        f"\nratio = anchor time / tumorboard time (>1: tumorboard faster). tumorboard "
        f"threads: {threads}; anchors single-threaded.\ncheck: CI endpoints compared "
        f"pairwise; tol = {Z_TOL:g} Monte-Carlo standard errors. Total "
        f"{meta['total_wall_s']:.0f} s."
    )
    if args.json:
        write_json(results, args.json, meta)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
