"""Per-group means with bootstrap CIs in the shared report-table schema, and the overall row.

``summarize`` also gives the joint-resampling CI of the "overall" (macro mean over tasks) figure.

The per-group intervals come from :func:`tumorboard.stats.bootstrap` (one C++ call for all
groups). The overall row follows the MTBBench paper for its estimate (the plain mean of the task
means) and adds what the paper does not give: a confidence interval for that figure obtained by
resampling the records of all tasks of a (track, model, tools) at once and recomputing the mean of
the task means on every resample (engine statistic ``"mean_of_ratios"`` with equal weights).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import polars as pl

from .. import _core, _keys, stats
from .._typing import Frame
from ..errors import InvalidArgumentError, InvalidTypeError
from ..stats import BootstrapOptions
from . import _validate
from ._coverage import with_coverage
from ._validate import DEFAULT_TRACK
from .report import OVERALL, TABLE_COLUMNS, sort_table

KEY_COLUMNS = ("track", "model", "tools", "task")
_UNGROUPED = {"track": DEFAULT_TRACK, "model": "all", "tools": False, "task": "all"}


def summarize(
    df: Frame,
    *,
    value: str,
    benchmark: str,
    metric: str,
    group_cols: Sequence[str] = KEY_COLUMNS,
    cluster: str | None = None,
    options: BootstrapOptions | None = None,
    overall: bool = True,
    interval: str = "bootstrap",
) -> pl.DataFrame:
    """Compute the mean of ``value`` per group with a bootstrap percentile CI, as table rows.

    Parameters
    ----------
    df : polars DataFrame or LazyFrame, or pyarrow Table
        One row per scored item, with the ``value`` column (bool, integer or float; no nulls or
        NaN) and the ``group_cols``. A missing or null ``track`` is "default" and a missing or
        null ``tools`` is False.
    value : str
        The per-item value column (e.g. ``correct``); its group mean is the estimate.
    benchmark, metric : str
        Written into the ``benchmark`` and ``metric`` columns.
    group_cols : sequence of str, default ("track", "model", "tools", "task")
        The grouping columns. Table key columns (track, model, tools, task) that are not grouped
        on get a constant: track "default", model "all", tools False, task "all". Other grouping
        columns are kept as extra columns after ``pm``.
    cluster : str, optional
        A column whose values are resampled whole (e.g. ``patient_id`` when several questions
        belong to one patient); None resamples items.
    options : BootstrapOptions, optional
        Resamples, confidence level, interval method, seed and threads (default
        ``BootstrapOptions()``: 1000 resamples, 95% percentile intervals).
    overall : bool, default True
        When true and ``task`` is grouped on, add one row per (track, model, tools, extra keys)
        with task="overall": its ``estimate`` is the plain mean of the task means (the MTBBench
        paper's "Overall") and ``n`` the number of items; its ``boot_mean``/``ci_low``/
        ``ci_high``/``pm`` come from joint resampling of all the records of the group (tasks are
        not held fixed; resamples in which a task gets no record are left out), with clusters
        resampled whole when ``cluster`` is given.
    interval : {"bootstrap", "wilson", "agresti_coull", "clopper_pearson", "normal", "cr1", \
"wilson_deff"}, default "bootstrap"
        The interval of ``ci_low``/``ci_high``/``pm``. "bootstrap" is the bootstrap's (above).
        A closed-form proportion interval (:func:`tumorboard.stats.proportion_interval`; "cr1"
        and "wilson_deff" on the ``cluster`` column, which they need) replaces them on the
        per-group rows of a 0/1 metric (every value 0 or 1, the definition
        :func:`tumorboard.stats.compare` uses); a metric with other values, and the
        task="overall" rows (a mean of task means, not a proportion), keep the bootstrap
        interval. The table then gets a column ``interval`` (String) naming each row's
        interval ("wilson", ..., or "bootstrap"); ``boot_mean`` is the bootstrap's either way.

    Returns
    -------
    polars.DataFrame
        Columns benchmark, track, model, tools, task, metric, n, estimate, boot_mean, ci_low,
        ci_high, pm (then extra group columns, then ``interval`` when ``interval`` is not
        "bootstrap"), sorted by (track, model, tools, metric, extra keys, task) with "overall"
        last.

    Raises
    ------
    InvalidArgumentError
        A missing column, an empty frame, a missing or non-finite value, a task named "overall"
        (with ``overall=True``), or invalid options.
    InvalidTypeError
        A frame or column of the wrong type.

    Notes
    -----
    Each group's random stream is keyed by its key values, so a group's interval does not
    depend on the other groups in the frame. The interval of a group with a single resampling
    unit, or with no spread (e.g. every item correct), is [estimate, estimate].
    """
    where = f"summarize(metric={metric!r})"
    groups = _check_group_cols(group_cols, value, cluster)
    needed = [value, *(c for c in groups if c not in ("track", "tools"))]
    frame = _validate.input_frame(df, required=needed, where=where, cluster=cluster,
                                  overall=overall and "task" in groups)  # fmt: skip
    frame = frame.with_columns(
        _validate.string_column(frame, c, where=where) for c in ("model", "task") if c in groups
    )
    _value_array(frame, value, where)
    opts = BootstrapOptions.resolve(options)
    interval = _validate.interval(interval, cluster=cluster, where=where)
    return summarize_frame(frame, value=value, benchmark=benchmark, metric=metric,
                           group_cols=groups, cluster=cluster, options=opts,
                           overall=overall, interval=interval)  # fmt: skip


def summarize_frame(
    frame: pl.DataFrame,
    *,
    value: str,
    benchmark: str,
    metric: str,
    group_cols: Sequence[str],
    cluster: str | None,
    options: BootstrapOptions,
    overall: bool,
    interval: str = "bootstrap",
    coded: Mapping[str, _keys.Coded] | None = None,
) -> pl.DataFrame:
    """Compute :func:`summarize` on a frame the caller has validated (nothing is checked again).

    Scorers validate their input once (:func:`~tumorboard.score._validate.input_frame`) and
    derive the value columns themselves, so they call this entry.

    Parameters
    ----------
    frame : polars.DataFrame
        A validated frame: ``track`` (String) and ``tools`` (Boolean) filled in, ``model`` and
        ``task`` (where grouped on) String without nulls, ``value`` numeric or Boolean.
    value, benchmark, metric, group_cols, cluster
        As in :func:`summarize`.
    options : BootstrapOptions
        The bootstrap options.
    overall : bool
        As in :func:`summarize`.
    interval : str, default "bootstrap"
        As in :func:`summarize` (checked by the caller, :func:`~._validate.interval`).
    coded : mapping of str to tumorboard._keys.Coded, optional
        Key and cluster columns of ``frame`` the caller has coded already
        (:func:`code_columns`), so that several metrics of one frame code them once; the
        others are coded here.

    Returns
    -------
    polars.DataFrame
        As :func:`summarize`.
    """
    groups = list(group_cols)
    frame, keys, extras = _keyed(frame, groups)
    values = frame.get_column(value).cast(pl.Float64).to_numpy()
    names = [*keys, *([cluster] if cluster is not None else [])]
    known = dict(coded or {})
    known.update(code_columns(frame, [c for c in names if c not in known]))
    key_cols = {c: known.get(c, frame.get_column(c)) for c in keys}
    clusters = None if cluster is None else known.get(cluster, frame.get_column(cluster))

    res = stats.bootstrap(values, groups=key_cols, clusters=clusters, options=options)
    per_group = _rows(res.keys, res, benchmark, metric, keys)
    parts = [per_group]
    if overall and "task" in groups:
        parts.append(
            _overall_rows(
                key_cols,
                values,
                per_group,
                keys,
                clusters,
                benchmark,
                metric,
                options,
                boolean=frame.schema[value] == pl.Boolean,
            )  # fmt: skip
        )
    if interval != "bootstrap":
        labels = clusters.labels if isinstance(clusters, _keys.Coded) else clusters
        parts[0] = _closed_form(per_group, frame, values, keys, labels, interval, options.level)
        parts[1:] = [with_interval(p, "bootstrap") for p in parts[1:]]
    out = pl.concat(parts, how="vertical")
    return sort_table(out, extra_keys=extras)


def with_interval(table: pl.DataFrame, name: str) -> pl.DataFrame:
    """Return ``table`` with the column ``interval`` (String) set to ``name`` on every row."""
    return table.with_columns(pl.lit(name, dtype=pl.String).alias("interval"))


def _closed_form(
    per_group: pl.DataFrame,
    frame: pl.DataFrame,
    values: np.ndarray,
    keys: Sequence[str],
    clusters: pl.Series | None,
    interval: str,
    level: float,
) -> pl.DataFrame:
    """Replace the per-group rows' bootstrap interval by ``interval`` for a 0/1 metric.

    Each group's items are found by its key values; :func:`tumorboard.stats.proportion_interval`
    gives the bounds (on the group's clusters for "cr1" and "wilson_deff"). A metric whose
    values are not all 0 or 1 keeps the bootstrap interval, and its rows say so.
    """
    if not bool(np.isin(values, (0.0, 1.0)).all()):
        return with_interval(per_group, "bootstrap")
    members = (
        frame.select(keys)
        .with_row_index("_row")
        .group_by(list(keys), maintain_order=True)
        .agg(pl.col("_row"))
    )
    found = per_group.select(keys).join(members, on=list(keys), how="left",
                                        nulls_equal=True, maintain_order="left")  # fmt: skip
    labels = None if clusters is None else clusters.cast(pl.String).to_numpy()
    lows, highs = [], []
    for rows in found.get_column("_row").to_list():
        idx = np.asarray(rows, dtype=np.int64)
        res = stats.proportion_interval(
            values[idx], method=interval, level=level,  # type: ignore[arg-type]
            clusters=None if labels is None or interval not in ("cr1", "wilson_deff")
            else labels[idx],
        )  # fmt: skip
        lows.append(res.ci_low)
        highs.append(res.ci_high)
    lo, hi = np.asarray(lows, dtype=np.float64), np.asarray(highs, dtype=np.float64)
    return per_group.with_columns(
        pl.Series("ci_low", lo, dtype=pl.Float64),
        pl.Series("ci_high", hi, dtype=pl.Float64),
        pl.Series("pm", (hi - lo) / 2.0, dtype=pl.Float64),
        pl.lit(interval, dtype=pl.String).alias("interval"),
    )


#: Label types whose codes :func:`code_columns` computes (others are validated per call).
_CODED_TYPES = (pl.String, pl.Boolean, pl.Categorical, pl.Enum)


def code_columns(frame: pl.DataFrame, names: Sequence[str]) -> dict[str, _keys.Coded]:
    """Code the key and cluster columns of ``frame`` once (:class:`tumorboard._keys.Coded`).

    Only columns without nulls, of string, Boolean, categorical or integer type, are coded;
    the others are left to the per-call validation (which names a missing or NaN label). Large
    columns are coded on threads at once (the string coding releases the GIL); each column's
    codes are the same whatever the threads.
    """
    todo = []
    for c in names:
        s = frame.get_column(c)
        if s.null_count() == 0 and (s.dtype in _CODED_TYPES or s.dtype.is_integer()):
            todo.append((c, s))
    workers = min(len(todo), os.cpu_count() or 1)
    if workers < 2 or frame.height < _THREADED_ROWS:
        return {c: _keys.Coded.of(s) for c, s in todo}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        coded = list(pool.map(lambda item: _keys.Coded.of(item[1]), todo))
    return {c: k for (c, _), k in zip(todo, coded, strict=True)}


#: Frames at least this long code their columns on threads (:func:`code_columns`).
_THREADED_ROWS = 1 << 20


def _keyed(frame: pl.DataFrame, groups: Sequence[str]) -> tuple[pl.DataFrame, list[str], list[str]]:
    """Return the frame with its ungrouped key columns set, the group keys and the extras.

    A key column not in ``groups`` gets its constant (track "default", model "all", tools
    False, task "all"); the keys are :data:`KEY_COLUMNS` followed by the extra group columns.
    """
    for col, const in _UNGROUPED.items():
        if col not in groups:
            frame = frame.with_columns(pl.lit(const).alias(col))
    extras = [c for c in groups if c not in KEY_COLUMNS]
    return frame, [*KEY_COLUMNS, *extras], extras


def _check_group_cols(group_cols: Sequence[str], value: str, cluster: str | None) -> list[str]:
    """Return the validated group columns: distinct, not the value, cluster or a table column."""
    if isinstance(group_cols, str):
        raise InvalidTypeError(
            "group_cols: expected a sequence of column names, got a single string"
        )
    groups = [str(c) for c in group_cols]
    if len(set(groups)) != len(groups):
        raise InvalidArgumentError(f"group_cols: duplicate column names in {groups}")
    if value in groups:
        raise InvalidArgumentError(f"value: the value column {value!r} is also a grouping column")
    if cluster is not None and cluster in groups:
        raise InvalidArgumentError(
            f"cluster: the cluster column {cluster!r} is also a grouping column"
        )
    reserved = set(TABLE_COLUMNS) - set(KEY_COLUMNS)
    clash = [c for c in groups if c in reserved]
    if clash:
        raise InvalidArgumentError(
            f"group_cols: {clash[0]!r} is a report-table column, not a group key"
        )
    return groups


def _value_array(frame: pl.DataFrame, value: str, where: str) -> None:
    """Check the value column of :func:`summarize`: numeric or Boolean, no null, NaN or inf."""
    s = frame.get_column(value)
    if not (s.dtype == pl.Boolean or s.dtype.is_numeric()):
        raise InvalidTypeError(
            f"{where}: column {value!r}: expected boolean or numeric, got {s.dtype}"
        )
    if s.null_count():
        first = int(s.is_null().arg_true()[0])
        raise InvalidArgumentError(f"{where}: column {value!r} has a missing value at row {first}")
    arr = s.cast(pl.Float64).to_numpy()
    finite = np.isfinite(arr)
    if not finite.all():
        first = int(np.flatnonzero(~finite)[0])
        raise InvalidArgumentError(
            f"{where}: column {value!r} has a NaN or infinite value at row {first}"
        )


def _rows(keys: dict[str, np.ndarray], res: Any, benchmark: str, metric: str,
          key_cols: Sequence[str]) -> pl.DataFrame:  # fmt: skip
    """Build report-table rows of one metric from a bootstrap result and its group keys."""
    n = len(res)
    ci_low = np.asarray(res.ci_low, dtype=np.float64)
    ci_high = np.asarray(res.ci_high, dtype=np.float64)
    cols: dict[str, Any] = {
        "benchmark": pl.Series([benchmark] * n, dtype=pl.String),
        "track": pl.Series(keys["track"], dtype=pl.String),
        "model": pl.Series(keys["model"], dtype=pl.String),
        "tools": pl.Series(keys["tools"], dtype=pl.Boolean),
        "task": pl.Series(keys["task"], dtype=pl.String),
        "metric": pl.Series([metric] * n, dtype=pl.String),
        "n": pl.Series(np.asarray(res.n, dtype=np.int64), dtype=pl.Int64),
        "estimate": pl.Series(np.asarray(res.estimate, dtype=np.float64), dtype=pl.Float64),
        "boot_mean": pl.Series(np.asarray(res.boot_mean, dtype=np.float64), dtype=pl.Float64),
        "ci_low": pl.Series(ci_low, dtype=pl.Float64),
        "ci_high": pl.Series(ci_high, dtype=pl.Float64),
        "pm": pl.Series((ci_high - ci_low) / 2.0, dtype=pl.Float64),
    }
    for extra in key_cols:
        if extra not in cols:
            cols[extra] = pl.Series(keys[extra])
    return pl.DataFrame(cols)


def _overall_rows(
    key_cols: Mapping[str, pl.Series | _keys.Coded],
    values: np.ndarray,
    per_group: pl.DataFrame,
    keys: Sequence[str],
    clusters: pl.Series | _keys.Coded | None,
    benchmark: str,
    metric: str,
    options: BootstrapOptions,
    *,
    boolean: bool = False,
) -> pl.DataFrame:
    """Compute one task="overall" row per (track, model, tools, extras).

    The estimate is the plain mean of the task means; the CI comes from the engine's
    "mean_of_ratios" on [sum_t, count_t] columns per task.

    The engine takes one weight vector per call, so groups are batched by their number of tasks
    k; each group's tasks get local indices 0..k-1 (sorted by name). Group streams are keyed by
    the group's key values, so the batching does not change any group's interval.
    """
    okeys = [c for c in keys if c != "task"]
    plain = per_group.group_by(okeys).agg(
        pl.col("estimate").mean().alias("_plain"), pl.col("n").sum().alias("_n")
    )
    layout = _task_layout(key_cols, okeys)
    if layout is None:
        g = None
        coded = _task_layout_polars(key_cols, okeys)
        k_row = coded.get_column("_k").to_numpy()
        t_local = coded.get_column("_t").to_numpy()
    else:
        g, t_local, k_row = layout
    exact = clusters is not None and g is not None and _integral(values, boolean=boolean)
    pieces = []
    for k in np.unique(k_row).tolist():
        idx = np.flatnonzero(k_row == k)
        if exact:
            rows, group_cols, sub_clusters = _cluster_rows(
                key_cols, idx, g, t_local, values, clusters, okeys, k
            )
        else:
            rows = np.zeros((idx.size, 2 * k), dtype=np.float64)
            pos = np.arange(idx.size)
            t = t_local[idx]
            rows[pos, 2 * t] = values[idx]
            rows[pos, 2 * t + 1] = 1.0
            group_cols = {c: key_cols[c].gather(idx) for c in okeys}
            sub_clusters = None if clusters is None else clusters.gather(idx)
        res = stats.bootstrap_sufficient(
            rows, statistic="mean_of_ratios", params=np.ones(k), groups=group_cols,
            clusters=sub_clusters, options=options,
        )  # fmt: skip
        res_keys = dict(res.keys)
        res_keys["task"] = np.array([OVERALL] * len(res), dtype=object)
        pieces.append(_rows(res_keys, res, benchmark, metric, keys))
    joint = pl.concat(pieces, how="vertical")
    joint = joint.join(plain, on=okeys, how="left", nulls_equal=True)
    return joint.with_columns(
        pl.col("_plain").alias("estimate"), pl.col("_n").cast(pl.Int64).alias("n")
    ).select(per_group.columns)


#: Integers up to 2**53 add exactly in float64, in any order.
_EXACT_SUM = float(2**53)


def _integral(values: np.ndarray, *, boolean: bool = False) -> bool:
    """Tell whether per-cluster sums of ``values`` are exact in any order (whole numbers).

    ``boolean``: the values are a Boolean column's 0/1 (whole numbers, no scan needed).
    """
    if boolean:
        return bool(values.size) and values.size < _EXACT_SUM
    return bool(
        values.size
        and np.abs(values).sum() < _EXACT_SUM
        and np.array_equal(values, np.trunc(values))
    )


def _task_layout(
    key_cols: Mapping[str, pl.Series | _keys.Coded], okeys: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Return each row's group code, its task's index among its group's tasks, and k.

    Groups are the ``okeys`` values, tasks are numbered in sorted order within each group
    (0..k-1), k is the group's number of tasks. None when a key has missing values or the
    groups x tasks table would be large (the caller ranks with polars instead).

    The layout is worked out on the (okeys, task) groups of the per-group bootstrap, one row
    each, and gathered to the rows: three gathers instead of passes of integer work over every
    row (with Coded columns the groups' joint codes are computed once, for both). The codes are
    the same: the groups' okeys values and tasks, coded in sorted order, are the rows' values
    and tasks coded in sorted order.
    """
    if any(isinstance(key_cols[c], pl.Series) and key_cols[c].null_count() for c in okeys):
        return None
    joint, values, _ = _keys.factorize(key_cols)  # the bootstrap's groups

    def per_group(c: str) -> pl.Series:  # one value per group, in the column's own type
        col = key_cols[c]
        dtype = col.labels.dtype if isinstance(col, _keys.Coded) else col.dtype
        return pl.Series(c, values[c], dtype=dtype)

    g_of, _, n_groups = _keys.factorize({c: per_group(c) for c in okeys})
    t_of = _keys.dense_codes(per_group("task"))
    n_tasks = int(t_of.max()) + 1 if t_of.size else 0
    if n_groups * n_tasks > 4 * joint.size + 1024:
        return None
    present = np.zeros((n_groups, n_tasks), dtype=bool)
    present[g_of, t_of] = True
    local = np.cumsum(present, axis=1, dtype=np.int64) - 1
    k_of = present.sum(axis=1, dtype=np.int64)[g_of]
    return g_of[joint], local[g_of, t_of][joint], k_of[joint]


def _task_layout_polars(
    key_cols: Mapping[str, pl.Series | _keys.Coded], okeys: Sequence[str]
) -> pl.DataFrame:
    """Return ``_t`` and ``_k`` of :func:`_task_layout` computed by polars (any key values)."""

    def labels(c: str) -> pl.Series:
        col = key_cols[c]
        return (col.labels if isinstance(col, _keys.Coded) else col).alias(c)

    task = labels("task")
    if task.dtype == pl.String:  # sorted codes: the dense rank below sorts integers
        task = task.cast(pl.Enum(task.unique().sort())).to_physical()
    return (
        pl.DataFrame([labels(c) for c in okeys])
        .with_columns(task.alias("task"))
        .select(
            (pl.col("task").rank("dense").over(okeys) - 1).cast(pl.Int64).alias("_t"),
            pl.col("task").n_unique().over(okeys).cast(pl.Int64).alias("_k"),
        )
    )


def _cluster_rows(
    key_cols: Mapping[str, pl.Series | _keys.Coded],
    idx: np.ndarray,
    g: np.ndarray,
    t_local: np.ndarray,
    values: np.ndarray,
    clusters: pl.Series | _keys.Coded,
    okeys: Sequence[str],
    k: int,
) -> tuple[np.ndarray, dict[str, pl.Series | _keys.Coded], _keys.Coded]:
    """Return one [sum_t, count_t] row per (group, cluster) of rows ``idx``, its groups, clusters.

    The bootstrap resamples a group's clusters whole and adds up each cluster's rows first, so
    a cluster given as one row of its sums is the same input: with whole-number values (0/1
    outcomes) every sum is exact whatever the order, and the cluster labels (hence their codes
    and random streams) are unchanged, so the intervals are bit-identical. The rows shrink from
    one per item to one per (group, cluster): a 10M-item store clustered by patient builds a
    matrix the size of its patients, not of its items times 2k.
    """
    coded = clusters if isinstance(clusters, _keys.Coded) else _keys.Coded.of(clusters)
    n_c = int(coded.codes.max()) + 1  # codes of all rows: a subset's are in the same order
    every = idx.size == g.size  # all rows (every group has k tasks): no gathers
    g_at, c_at = (g, coded.codes) if every else (g[idx], coded.codes[idx])
    t_at, v_at = (t_local, values) if every else (t_local[idx], values[idx])
    unit = g_at.astype(np.int64) * n_c + c_at
    size = int(unit.max()) + 1
    if size <= 4 * unit.size + 1024:
        unit = _keys.compact_codes(unit, size)
    else:
        unit = np.unique(unit, return_inverse=True)[1].astype(np.int64, copy=False)
    n_units = int(unit.max()) + 1
    cell = unit * k + t_at
    rows = np.empty((n_units, 2 * k), dtype=np.float64)
    rows[:, 0::2] = np.bincount(cell, weights=v_at, minlength=n_units * k).reshape(-1, k)
    rows[:, 1::2] = np.bincount(cell, minlength=n_units * k).reshape(-1, k)
    first = _core.stats.first_rows(unit, n_units)  # any row of a unit carries its labels
    first = first if every else idx[first]
    return rows, {c: key_cols[c].gather(first) for c in okeys}, coded.gather(first)


def summarize_metrics(
    frame: pl.DataFrame,
    specs: Sequence[tuple[str, str, pl.Expr | None]],
    *,
    benchmark: str,
    by_task: bool,
    cluster: str | None,
    options: BootstrapOptions,
    ungraded: Mapping[str, str] | None = None,
    missing: str | None = None,
    interval: str = "bootstrap",
) -> pl.DataFrame:
    """Compute several metrics of one validated frame as sorted report-table rows.

    Parameters
    ----------
    frame : polars.DataFrame
        A validated frame (as for :func:`summarize_frame`).
    specs : sequence of (str, str, polars.Expr or None)
        (metric name, value column, row filter or None): each metric is the mean of its value
        column over the rows its filter keeps (n = that subset's size), with a bootstrap CI,
        per (track, model, tools[, task]) and, when ``by_task``, the joint "overall" row.
        Metrics whose subset is empty are left out.
    benchmark : str
        Written into the ``benchmark`` column.
    by_task : bool
        Group by task too (and add the overall rows).
    cluster : str, optional
        A column whose values are resampled whole.
    options : BootstrapOptions
        The bootstrap options.
    ungraded : mapping of str to str, optional
        The coverage columns (:mod:`tumorboard.score._coverage`, definitions in
        :mod:`tumorboard.score.report`) of every row: for a metric named in the mapping, the
        Boolean column ``ungraded[metric]`` flags its ungraded items, counted in ``n`` when the
        metric's filter keeps them (scored as wrong / 0) and left out otherwise; a metric not
        named has every item graded. None: no coverage columns.
    missing : str, optional
        The Boolean column flagging the items without any response (``n_missing`` counts the
        ungraded ones); None: ``n_missing`` is null.
    interval : str, default "bootstrap"
        As in :func:`summarize`, per metric: 0/1 metrics get the closed-form interval, the
        others keep the bootstrap's (the ``interval`` column says which).

    Returns
    -------
    polars.DataFrame
        The rows of every metric, sorted.

    Raises
    ------
    InvalidArgumentError
        No metric could be computed.
    """
    group_cols = ("track", "model", "tools", "task") if by_task else ("track", "model", "tools")
    parts = []
    for metric, value, mask in specs:
        sub = frame if mask is None else frame.filter(mask)
        if sub.height == 0:
            continue
        parts.append(
            summarize_frame(
                sub,
                value=value,
                benchmark=benchmark,
                metric=metric,
                group_cols=group_cols,
                cluster=cluster,
                options=options,
                overall=by_task,
                interval=interval,
            )  # fmt: skip
        )
        if ungraded is not None:
            flag = ungraded.get(metric)
            if mask is None:
                items, counted = frame, None
            else:
                keep = mask if flag is None else mask | pl.col(flag).fill_null(False)
                items = frame.with_columns(mask.fill_null(False).alias("_counted")).filter(keep)
                counted = "_counted"
            parts[-1] = with_coverage(parts[-1], items, group_cols, ungraded=flag,
                                      missing=missing, counted=counted)  # fmt: skip
    if not parts:
        raise InvalidArgumentError(
            f"{benchmark}: no metric could be computed from the given columns"
        )
    return sort_table(pl.concat(parts, how="vertical"))


def summarize_f1_of_means(
    frame: pl.DataFrame,
    *,
    recall: str,
    precision: str,
    benchmark: str,
    metric: str,
    group_cols: Sequence[str],
    cluster: str | None,
    options: BootstrapOptions,
    overall: bool,
) -> pl.DataFrame:
    """Compute ``2 R̄ P̄ / (R̄ + P̄)`` per group, with a bootstrap of ``(ΣR, ΣP, n)``.

    R̄ and P̄ are the group means of the per-item columns ``recall`` and ``precision`` (0 when
    both are 0). Every resample recomputes the two sums and the count and the F1 of their means
    (engine statistic ``"f1_of_means"``), so the interval is that of this F1, not of a mean of
    per-item F1 values.

    Parameters
    ----------
    frame : polars.DataFrame
        A validated frame (as for :func:`summarize_frame`).
    recall, precision : str
        The per-item value columns (finite floats).
    benchmark, metric, group_cols, cluster, options
        As in :func:`summarize_frame`.
    overall : bool
        When true and ``task`` is grouped on, add one row per (track, model, tools) with task
        "overall": the same F1 of the means over all the group's items (all tasks pooled).

    Returns
    -------
    polars.DataFrame
        Report-table rows, sorted.
    """
    groups = list(group_cols)
    frame, keys, extras = _keyed(frame, groups)
    rows = np.ascontiguousarray(frame.select(recall, precision).cast(pl.Float64).to_numpy())
    clusters = frame.get_column(cluster) if cluster is not None else None
    res = stats.bootstrap_sufficient(rows, statistic="f1_of_means", groups=frame.select(keys),
                                     clusters=clusters, options=options)  # fmt: skip
    parts = [_rows(res.keys, res, benchmark, metric, keys)]
    if overall and "task" in groups:
        pooled = stats.bootstrap_sufficient(
            rows, statistic="f1_of_means",
            groups=frame.select(keys).with_columns(pl.lit(OVERALL).alias("task")),
            clusters=clusters, options=options,
        )  # fmt: skip
        parts.append(_rows(pooled.keys, pooled, benchmark, metric, keys))
    return sort_table(pl.concat(parts, how="vertical"), extra_keys=extras)
