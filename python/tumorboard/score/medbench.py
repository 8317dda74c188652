r"""MedBench v4 task metrics and scorer (macro average task -> capability dimension -> overall).

MedBench v4 is Ding et al., "MedBench v4: A Robust and Scalable Benchmark for Evaluating Chinese
Medical Language Models, Multimodal Models, and Intelligent Agents", arXiv 2511.14439.

MedBench v4 scores each task with the metric that fits its output and reports every score on a
0-100 scale; the headline figure is a macro average: tasks are averaged within each capability
dimension and the dimensions are averaged into the overall score. The task metrics:

* ``accuracy``: share of items answered correctly.
* ``strict_accuracy``: multiple choice asked several times with the options shuffled; an item
  counts as correct only if **every** shuffled instance of it is answered correctly. The unit
  is the item (``n`` counts items, not instances).
* ``micro_f1``: multi-label output; with ``TP = sum_i |P_i ∩ G_i|``, ``FP = sum_i |P_i \ G_i|``,
  ``FN = sum_i |G_i \ P_i|`` over the task's items, ``micro-F1 = 2TP / (2TP + FP + FN)``
  (label sets: duplicates ignored; a missing prediction is the empty set).
* ``keypoint_recall``: macro recall over key points: per item, the share of its reference key
  points the answer covers (judged elsewhere, given as one boolean per key point), averaged over
  items.
* ``iou``: box IoU of a predicted and a reference box (x1, y1, x2, y2), averaged over items
  (:func:`tumorboard.text.iou`; a missing prediction scores 0).
* ``one_minus_ned``: ``max(0, 1 - d/|ref|)`` with d the character Levenshtein distance
  (:func:`tumorboard.text.one_minus_ned`), averaged over items.
* ``judge``: an LLM judge's ``<score>N</score>`` reply, N an integer 0-5, rescaled to 0-100
  (:mod:`tumorboard.score.judge`; a malformed reply is an error naming the record).
* ``score``: a per-item score in [0, 1] computed elsewhere.

Several metrics per task. The platform's dataset cards score some tasks by two or three
metrics (e.g. MedOutcome and MedRxCheck: accuracy, macro-recall and an LLM judge; MedHC and
MedLitQA: key-point macro-recall and a judge). Such a task names its metrics joined by ``+`` in
the ``metric`` column (``"accuracy+keypoint_recall+judge"``); every metric is reported on its own
(task ``"<task> [<metric>]"``, aggregation ``"metric"``) and the task score combines them as the
**unweighted mean of the metrics on the 0-100 scale** (or the weighted mean with
``metric_weights``). The cards give no combination rule, so this mean is an assumption of
tumorboard's, stated in the report's notes. The interval of the combined score resamples an
input row with all its metrics at once.

Every task score is multiplied by 100. Dimension score = mean of its task scores; overall =
mean of the dimension scores, i.e. ``sum_t w_t score_t`` with ``w_t = 1 / (D * K_d(t))`` (D
dimensions, K_d tasks in dimension d). Confidence intervals: task rows resample the task's items
(statistic "ratio" of per-item numerator and denominator, which is the mean for per-item scores
and micro-F1 for ``micro_f1``); dimension and overall rows resample all items of the model at
once and recompute the weighted mean of task ratios on every resample (engine statistic
``"mean_of_ratios"``), so they account for the sampling error of every task.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from .. import stats
from .._typing import Frame
from ..errors import InvalidArgumentError, InvalidTypeError
from ..stats import BootstrapOptions
from ..traj import Store
from . import _store, _validate
from ._coverage import COVERAGE_COLUMNS, no_response
from ._medbench_items import per_item
from ._summary import with_interval
from ._validate import require_columns, string_column
from .report import OVERALL, TABLE_COLUMNS, Report, interval_text, sort_table

__all__ = [
    "TASK_METRICS",
    "keypoint_recall",
    "macro_average",
    "micro_f1",
    "score",
    "strict_accuracy",
]

BENCHMARK = "medbench"
TASK_METRICS = (
    "accuracy", "strict_accuracy", "micro_f1", "keypoint_recall", "iou", "one_minus_ned",
    "judge", "score",
)  # fmt: skip
REQUIRED = ("model", "task", "dimension", "metric")
# the columns each task metric reads
METRIC_COLUMNS: dict[str, tuple[str, ...]] = {
    "accuracy": ("correct",),
    "strict_accuracy": ("item_id", "correct"),
    "micro_f1": ("pred_labels", "gold_labels"),
    "keypoint_recall": ("keypoint_hits",),
    "iou": ("pred_box", "gold_box"),
    "one_minus_ned": ("prediction", "reference"),
    "judge": ("judge_output",),
    "score": ("score",),
}
KEYS = ("track", "model", "tools")


# ------------------------------------------------------------------------------ metric functions


def strict_accuracy(item_ids: Sequence[Any], correct: Sequence[bool]) -> float:
    """Compute the share of items whose every instance (option-shuffled variant) is correct.

    Parameters
    ----------
    item_ids : sequence
        The item each instance belongs to.
    correct : sequence of bool
        Whether each instance was answered correctly.

    Returns
    -------
    float
        Items with every instance correct / items.

    Raises
    ------
    InvalidArgumentError
        Sequences of different lengths, or no instance.

    Examples
    --------
    >>> strict_accuracy(["q1", "q1", "q2", "q2", "q3"], [True, True, True, False, True])
    0.6666666666666666
    """
    if len(item_ids) != len(correct):
        raise InvalidArgumentError(
            f"item_ids and correct: expected the same length, got {len(item_ids)} and "
            f"{len(correct)}"
        )
    if not item_ids:
        raise InvalidArgumentError("item_ids: expected at least one instance")
    ok: dict[Any, bool] = {}
    for i, c in zip(item_ids, correct, strict=False):
        ok[i] = ok.get(i, True) and bool(c)
    return sum(ok.values()) / len(ok)


def micro_f1(
    preds: Sequence[Iterable[str] | None],
    golds: Sequence[Iterable[str]],
    *,
    zero_division: float = 0.0,
) -> float:
    """Compute the micro-averaged F1 of multi-label predictions: ``2TP / (2TP + FP + FN)``.

    TP, FP and FN are summed over items. Label lists are taken as sets; a None prediction is the
    empty set.

    Parameters
    ----------
    preds : sequence of (iterable of str or None)
        The predicted labels of each item.
    golds : sequence of iterable of str
        The gold labels of each item.
    zero_division : float, default 0.0
        The value when no item has any label (``2TP + FP + FN = 0``), as scikit-learn does.

    Returns
    -------
    float
        The micro-F1.

    Raises
    ------
    InvalidArgumentError
        Sequences of different lengths.

    Examples
    --------
    >>> micro_f1([["a", "b"], ["c"], None], [["a"], ["c", "d"], ["e"]])  # TP 2, FP 1, FN 2
    0.5714285714285714
    """
    if len(preds) != len(golds):
        raise InvalidArgumentError(
            f"preds and golds: expected the same length, got {len(preds)} and {len(golds)}"
        )
    tp = fp = fn = 0
    for p, g in zip(preds, golds, strict=False):
        ps = set() if p is None else set(p)
        gs = set(g)
        tp += len(ps & gs)
        fp += len(ps - gs)
        fn += len(gs - ps)
    den = 2 * tp + fp + fn
    return float(zero_division) if den == 0 else 2.0 * tp / den


def keypoint_recall(hits: Sequence[Sequence[bool]]) -> float:
    """Compute the macro recall over key points: mean over items of (covered / key points).

    Parameters
    ----------
    hits : sequence of sequence of bool
        Per item, whether each of its reference key points is covered.

    Returns
    -------
    float
        The mean over items of the share of key points covered.

    Raises
    ------
    InvalidArgumentError
        No item, or an item without key points.

    Examples
    --------
    >>> keypoint_recall([[True, False], [True, True, True, False]])  # (1/2 + 3/4) / 2
    0.625
    """
    if not hits:
        raise InvalidArgumentError("hits: expected at least one item")
    per = []
    for i, h in enumerate(hits):
        if len(h) == 0:
            raise InvalidArgumentError(f"hits[{i}]: an item needs at least one key point")
        per.append(sum(bool(x) for x in h) / len(h))
    return float(np.mean(per))


def macro_average(task_scores: dict[str, float], dimensions: dict[str, str]) -> float:
    """Compute MedBench's overall score: mean over dimensions of the mean of their task scores.

    Parameters
    ----------
    task_scores : dict of str to float
        The score of each task.
    dimensions : dict of str to str
        The capability dimension of each task.

    Returns
    -------
    float
        The macro average.

    Raises
    ------
    InvalidArgumentError
        No task, or a task without a dimension.

    Examples
    --------
    >>> macro_average({"t1": 80.0, "t2": 60.0, "t3": 90.0}, {"t1": "A", "t2": "A", "t3": "B"})
    80.0
    """
    by_dim: dict[str, list[float]] = {}
    for task, score in task_scores.items():
        if task not in dimensions:
            raise InvalidArgumentError(f"dimensions: task {task!r} has no capability dimension")
        by_dim.setdefault(dimensions[task], []).append(float(score))
    if not by_dim:
        raise InvalidArgumentError("task_scores: expected at least one task")
    return float(np.mean([np.mean(v) for v in by_dim.values()]))


# ------------------------------------------------------------------------------------- scorer


def _need(frame: pl.DataFrame, metric: str, where: str) -> None:
    """Check that ``frame`` has the columns the task metric ``metric`` reads."""
    require_columns(frame, METRIC_COLUMNS[metric], where=f"{where} (tasks with metric={metric!r})")


def _result_rows(res: Any, keys: dict[str, Any], *, task: Sequence[str], n: Sequence[int],
                 estimate: Sequence[float], extra: dict[str, Any],
                 coverage: tuple[Sequence[int], Sequence[Any]] | None = None,
                 ) -> pl.DataFrame:  # fmt: skip
    """Build report-table rows (metric "score", CIs rescaled to 0-100) from a bootstrap result."""
    m = len(res)
    lo = np.asarray(res.ci_low, dtype=np.float64) * 100.0
    hi = np.asarray(res.ci_high, dtype=np.float64) * 100.0
    cols: dict[str, Any] = {
        "benchmark": pl.Series([BENCHMARK] * m, dtype=pl.String),
        "track": pl.Series(list(keys["track"]), dtype=pl.String),
        "model": pl.Series(list(keys["model"]), dtype=pl.String),
        "tools": pl.Series(list(keys["tools"]), dtype=pl.Boolean),
        "task": pl.Series(list(task), dtype=pl.String),
        "metric": pl.Series(["score"] * m, dtype=pl.String),
        "n": pl.Series(list(n), dtype=pl.Int64),
        "estimate": pl.Series(np.asarray(estimate, dtype=np.float64), dtype=pl.Float64),
        "boot_mean": pl.Series(
            np.asarray(res.boot_mean, dtype=np.float64) * 100.0, dtype=pl.Float64
        ),  # fmt: skip
        "ci_low": pl.Series(lo, dtype=pl.Float64),
        "ci_high": pl.Series(hi, dtype=pl.Float64),
        "pm": pl.Series((hi - lo) / 2.0, dtype=pl.Float64),
    }
    for name, values in extra.items():
        cols[name] = pl.Series(name, list(values), dtype=pl.String)
    if coverage is not None:  # (n_ungraded, n_missing)
        cols["n_ungraded"] = pl.Series("n_ungraded", list(coverage[0]), dtype=pl.Int64)
        cols["n_missing"] = pl.Series("n_missing", list(coverage[1]), dtype=pl.Int64)
    return pl.DataFrame(cols)


def _summed(counts: Sequence[tuple[int, Any]]) -> tuple[list[int], list[Any]]:
    """Return the ([n_ungraded], [n_missing]) sums of several tasks (n_missing null if unknown)."""
    missing = [m for _, m in counts]
    return [sum(u for u, _ in counts)], [None if None in missing else sum(missing)]


def _key_cols(key: Sequence[Any]) -> dict[str, np.ndarray]:
    """Return the (track, model, tools) key columns of one group."""
    return {c: np.array([v]) for c, v in zip(KEYS, key, strict=True)}


def _joint(
    items: pl.DataFrame,
    rows: np.ndarray,
    key: Sequence[Any],
    weights: dict[str, float],
    label: str,
    *,
    clusters: pl.Series | None,
    options: BootstrapOptions,
) -> Any:
    """Bootstrap ``sum_c w_c ratio_c / sum_c w_c`` over the components in ``weights``.

    The group is one (track, model, tools); a component is a single-metric task, or one metric
    of a task scored by several (column ``_comp``). The units of those components are resampled
    together (engine statistic "mean_of_ratios" on columns [num_c, den_c] per component). The
    stream is keyed by the group's key values and ``label``, so every aggregate row has its own
    reproducible stream.
    """
    tasks = sorted(weights)
    index = {t: i for i, t in enumerate(tasks)}
    in_group = pl.all_horizontal([pl.col(c) == v for c, v in zip(KEYS, key, strict=True)])
    mask = items.select((in_group & pl.col("_comp").is_in(tasks)).alias("m"))["m"].to_numpy()
    sub = items.filter(pl.Series(mask))
    t = np.array([index[x] for x in sub.get_column("_comp").to_list()], dtype=np.int64)
    wide = np.zeros((t.size, 2 * len(tasks)), dtype=np.float64)
    pos = np.arange(t.size)
    wide[pos, 2 * t] = rows[mask, 0]
    wide[pos, 2 * t + 1] = rows[mask, 1]
    groups = sub.select(*KEYS).with_columns(pl.lit(label).alias("_aggregate"))
    return stats.bootstrap_sufficient(
        wide, statistic="mean_of_ratios", params=np.array([weights[x] for x in tasks]),
        groups=groups, clusters=None if clusters is None else clusters.filter(pl.Series(mask)),
        options=options,
    )  # fmt: skip


def _combinations(frame: pl.DataFrame, where: str) -> dict[str, tuple[str, ...]]:
    """Return each task's metrics (``metric`` split on "+"), checked and one spec per task."""
    for col in ("metric", "dimension"):
        multi = (
            frame.group_by("task").agg(pl.col(col).n_unique().alias("_k")).filter(pl.col("_k") > 1)
        )
        if multi.height:
            task = sorted(multi.get_column("task").to_list())[0]
            vals = sorted(frame.filter(pl.col("task") == task).get_column(col).unique().to_list())
            raise InvalidArgumentError(
                f"{where}: task {task!r} has several values of {col!r}: {vals}"
            )
    out: dict[str, tuple[str, ...]] = {}
    firsts = frame.group_by("task").agg(pl.col("metric").first(), pl.col("_row").min()).sort("_row")
    for task, spec, row in firsts.select("task", "metric", "_row").rows():
        parts = tuple(p.strip() for p in spec.split("+"))
        bad = [p for p in parts if p not in TASK_METRICS]
        if bad or len(set(parts)) != len(parts):
            what = f"unknown metric {bad[0]!r}" if bad else f"a metric named twice in {spec!r}"
            raise InvalidArgumentError(
                f"{where}: {what} at row {row} (task {task!r}); expected one of "
                f"{', '.join(TASK_METRICS)}, or several joined by '+'"
            )
        out[task] = parts
    return out


def _metric_weights(weights: Any, where: str) -> dict[str, float]:
    """Return the checked combination weights (metric -> weight > 0); empty for the plain mean."""
    if weights is None:
        return {}
    if not isinstance(weights, Mapping):
        raise InvalidTypeError(
            f"{where}: metric_weights: expected a mapping of metric name to weight, got "
            f"{type(weights).__name__}"
        )
    out = {}
    for name, w in weights.items():
        if name not in TASK_METRICS:
            raise InvalidArgumentError(
                f"{where}: metric_weights names unknown metric {name!r}; expected one of "
                f"{', '.join(TASK_METRICS)}"
            )
        ok = isinstance(w, (int, float)) and not isinstance(w, bool) and np.isfinite(w) and w > 0
        if not ok:
            raise InvalidArgumentError(
                f"{where}: metric_weights[{name!r}]: expected a finite number > 0, got {w!r}"
            )
        out[name] = float(w)
    return out


def score(
    df: Frame | Store | str | os.PathLike[str],
    *,
    options: BootstrapOptions | None = None,
    cluster: str | None = None,
    metric_weights: Mapping[str, float] | None = None,
    convention: str | None = None,
    interval: str = "bootstrap",
) -> Report:
    """Score MedBench v4 runs: task scores (0-100) with CIs, macro averaged into dimensions.

    The task scores are averaged into capability-dimension scores and the overall score.

    Definitions of the task metrics, of tasks scored by several metrics and of the averaging:
    module docstring.

    Parameters
    ----------
    df : polars DataFrame or LazyFrame, pyarrow Table, or a trajectory Store
        A trajectory Store (or its directory) is read with
        :func:`~tumorboard.score.store_frame` (docs/trajectory-schema.md).
        Otherwise one row per answered instance. Required columns: ``model`` (str), ``task`` (str),
        ``dimension`` (str: the task's capability dimension; one per task) and ``metric`` (str:
        the task's metric, one of :data:`TASK_METRICS`, or several joined by ``+`` for a task
        scored by several metrics; one value per task). Each metric decides which further
        columns are read (only on its tasks' rows; elsewhere they may be null):

        ===================  =====================================================================
        accuracy             ``correct`` (bool; null = wrong)
        strict_accuracy      ``item_id`` (the item an option-shuffled instance belongs to),
                             ``correct`` (bool; null = wrong)
        micro_f1             ``pred_labels`` (list[str]; null = no label), ``gold_labels``
                             (list[str])
        keypoint_recall      ``keypoint_hits`` (list[bool]: each reference key point covered?)
        iou                  ``pred_box`` (list[f64] x1, y1, x2, y2; null = no box, IoU 0),
                             ``gold_box`` (list[f64])
        one_minus_ned        ``prediction`` (str; null = empty), ``reference`` (str)
        judge                ``judge_output`` (str: a reply with ``<score>N</score>``, N in 0-5)
        score                ``score`` (f64 in [0, 1])
        ===================  =====================================================================

        Optional: ``track`` (default "default"), ``tools`` (default False), and the
        ``cluster`` column when given.
    options : BootstrapOptions, optional
        The bootstrap of every interval (default ``BootstrapOptions()``).
    cluster : str, optional
        A column whose values are resampled whole (e.g. ``patient_id``); for strict accuracy
        the first instance's value is the item's.
    metric_weights : mapping of str to float, optional
        Weights of the metrics of a task scored by several (e.g. ``{"judge": 2}``; a metric not
        named weighs 1); the combined score is the weighted mean of its metrics' scores. None:
        the unweighted mean (tumorboard's assumption; the dataset cards give no rule).
    convention : {"paper"}, optional
        MedBench v4 has one convention (the platform's macro averaging); accepted for the one
        switch across scorers.

    interval : {"bootstrap", "wilson", "agresti_coull", "clopper_pearson", "normal", "cr1", \
"wilson_deff"}, default "bootstrap"
        The interval of ``ci_low``/``ci_high``/``pm``: the bootstrap's, or a closed-form
        proportion interval (:func:`tumorboard.stats.proportion_interval`; "cr1" and
        "wilson_deff" on the ``cluster`` column, which they need) on the per-group rows of the
        0/1 metrics; MedBench has none (its scores are ratios of sums on
        0-100), so every row keeps the bootstrap, and the column ``interval`` says so.

    Returns
    -------
    Report
        Metric "score" on 0-100. Rows per (track, model, tools): one per task (``task`` = task
        name, ``aggregation`` "task"); for a task scored by several metrics, also one per metric
        (``task`` = "<task> [<metric>]", ``aggregation`` "metric"); one per dimension (``task`` =
        "dimension:<name>", ``aggregation`` "dimension") and one overall (``task`` =
        "overall"). Extra columns ``aggregation``, ``dimension`` (null on the overall row) and
        ``task_metric`` (the metric, or the "+"-joined metrics of a combined task; null on
        dimension and overall rows). ``n`` counts the units averaged (items; for strict
        accuracy, items, not instances; a combined task: the most of its metrics).
        The coverage columns ``n_graded``, ``n_ungraded`` and ``n_missing`` (int64;
        definitions in :mod:`tumorboard.score.report`). What "graded" means here: a unit is
        graded when its metric's input has a value; it is ungraded, and scores 0, with a null
        ``correct`` (strict accuracy: in any instance), ``pred_labels``, ``pred_box`` or
        ``prediction``, or a null entry of ``keypoint_hits`` (judge and score tasks: always
        graded, a missing value is an error), so ``n_graded`` = ``n - n_ungraded``.
        ``n_missing``: the ungraded units with a null or blank ``prediction`` (the response;
        strict accuracy: its first instance's; null without that column). A task scored by
        several metrics counts its input rows ungraded in any of them; dimension and overall
        rows sum their tasks.
    """
    where = "medbench"
    _validate.convention(convention, allowed=("paper",), default="paper", where=where)
    weights_of = _metric_weights(metric_weights, where)
    df = _store.resolve(df, BENCHMARK)
    opts = BootstrapOptions.resolve(options)
    interval = _validate.interval(interval, cluster=cluster, where=where)
    optional = sorted({c for cols in METRIC_COLUMNS.values() for c in cols} | {"track", "tools"})
    frame = _validate.input_frame(df, required=REQUIRED, optional=optional, where=where,
                                  cluster=cluster)  # fmt: skip
    frame = frame.with_columns(
        *(string_column(frame, c, where=where) for c in REQUIRED),
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"),
    )
    combos = _combinations(frame, where)
    multi = {t for t, ms in combos.items() if len(ms) > 1}
    spec_of = dict(frame.group_by("task").agg(pl.col("metric").first()).rows())

    pieces = []
    for metric in TASK_METRICS:
        tasks_m = [t for t, ms in combos.items() if metric in ms]
        if not tasks_m:
            continue
        sub = frame.filter(pl.col("task").is_in(tasks_m))
        _need(sub, metric, where)
        part = per_item(sub, metric, f"{where} (metric={metric!r})")
        comp = (
            pl.when(pl.col("task").is_in(list(multi)))
            .then(pl.col("task") + pl.lit(f" [{metric}]"))
            .otherwise(pl.col("task"))
        )
        pieces.append(part.with_columns(comp.alias("_comp"), pl.lit(metric).alias("_metric")))
    items = pl.concat(pieces, how="vertical").sort("_row", "_comp")
    missing = no_response(frame, "prediction")  # the response; None: n_missing is null
    items = items.join(
        frame.select(
            "_row", (missing if missing is not None else pl.lit(None, pl.Boolean)).alias("_missing")
        ),
        on="_row",
        how="left",
        maintain_order="left",
    ).with_columns((pl.col("_ungraded").fill_null(False) & pl.col("_missing")).alias("_missing"))
    clusters = None
    if cluster is not None:
        cl = frame.select("_row", pl.col(cluster).alias("_cluster"))
        items = items.join(cl, on="_row", how="left", maintain_order="left")
        clusters = items.get_column("_cluster")
    elif multi:
        # the metrics of one input row are resampled together
        clusters = items.get_column("_row")
    # per-unit [numerator, denominator] of scores in [0, 1]; _result_rows rescales to 0-100
    rows = np.ascontiguousarray(items.select("_num", "_den").to_numpy(), dtype=np.float64)

    # ---- component rows: ratio of sums per (track, model, tools, task or task [metric])
    gkeys = items.select(*KEYS, pl.col("_comp").alias("task"))
    res = stats.bootstrap(rows, groups=gkeys, clusters=clusters, statistic="ratio", options=opts)
    comps = list(res.keys["task"])
    comp_info = dict(
        items.group_by("_comp").agg(pl.col("task").first(), pl.col("_metric").first(),
                                    pl.col("dimension").first()).select(
            "_comp", pl.struct("task", "_metric", "dimension")).rows()
    )  # fmt: skip
    est = np.asarray(res.estimate, dtype=np.float64) * 100.0
    comp_table = _result_rows(
        res, res.keys, task=comps, n=np.asarray(res.n), estimate=est,
        extra={"aggregation": ["metric" if comp_info[c]["task"] in multi else "task"
                               for c in comps],
               "dimension": [comp_info[c]["dimension"] for c in comps],
               "task_metric": [comp_info[c]["_metric"] for c in comps]},
    )  # fmt: skip
    ug = items.group_by(*KEYS, "_comp").agg(
        pl.col("_ungraded").fill_null(False).sum().cast(pl.Int64).alias("n_ungraded"),
        (pl.col("_missing").sum() if missing is not None else pl.lit(None))
        .cast(pl.Int64)
        .alias("n_missing"),
    )
    comp_table = comp_table.join(ug.rename({"_comp": "task"}), on=[*KEYS, "task"], how="left",
                                 maintain_order="left")  # fmt: skip
    comp_table = comp_table.with_columns(pl.col("n_ungraded").fill_null(0))
    # a task's coverage counts its input rows (units): ungraded in any of its metrics
    t_cov = {
        tuple(k): (ug_n, ms_n if missing is not None else None)
        for *k, ug_n, ms_n in items.group_by(*KEYS, "task", "_row")
        .agg(pl.col("_ungraded").fill_null(False).any(), pl.col("_missing").any())
        .group_by(*KEYS, "task").agg(pl.col("_ungraded").sum(), pl.col("_missing").sum())
        .rows()
    }  # fmt: skip

    def within(task: str) -> dict[str, float]:
        """Return the components of ``task`` with their weights (summing to 1)."""
        if task not in multi:
            return {task: 1.0}
        w = {f"{task} [{m}]": weights_of.get(m, 1.0) for m in combos[task]}
        total = sum(w.values())
        return {c: x / total for c, x in w.items()}

    # ---- combined task rows, dimension and overall rows: weighted means of component ratios,
    # joint resampling
    agg_parts = []
    common = dict(clusters=clusters, options=opts)
    dim_of = {t: comp_info[c]["dimension"] for c in comp_info for t in [comp_info[c]["task"]]}
    for key in items.select(KEYS).unique(maintain_order=True).rows():
        in_group = pl.all_horizontal([pl.col(c) == v for c, v in zip(KEYS, key, strict=True)])
        g = comp_table.filter(in_group)
        c_est = dict(zip(g["task"].to_list(), g["estimate"].to_list(), strict=True))
        c_n = dict(zip(g["task"].to_list(), g["n"].to_list(), strict=True))
        tasks_here = sorted({comp_info[c]["task"] for c in c_est})
        t_est, t_n, t_ug = {}, {}, {t: t_cov[(*key, t)] for t in tasks_here}
        for t in tasks_here:
            w = {c: x for c, x in within(t).items() if c in c_est}
            total = sum(w.values())
            w = {c: x / total for c, x in w.items()}
            t_est[t] = float(sum(x * c_est[c] for c, x in w.items()))
            t_n[t] = max(c_n[c] for c in w)
            if t in multi:
                r = _joint(items, rows, key, w, t, **common)
                agg_parts.append(_result_rows(
                    r, _key_cols(key), task=[t], n=[t_n[t]], estimate=[t_est[t]],
                    extra={"aggregation": ["task"], "dimension": [dim_of[t]],
                           "task_metric": [spec_of[t]]},
                    coverage=([t_ug[t][0]], [t_ug[t][1]]),
                ))  # fmt: skip
        dims = sorted({dim_of[x] for x in t_est})
        n_tasks = {d: sum(1 for x in t_est if dim_of[x] == d) for d in dims}
        dim_est = {}
        for d in dims:
            members = sorted(x for x in t_est if dim_of[x] == d)
            dim_est[d] = float(np.mean([t_est[x] for x in members]))
            w = {c: x for m in members for c, x in within(m).items() if c in c_est}
            r = _joint(items, rows, key, w, f"dimension:{d}", **common)
            agg_parts.append(_result_rows(
                r, _key_cols(key), task=[f"dimension:{d}"], n=[sum(t_n[x] for x in members)],
                estimate=[dim_est[d]],
                extra={"aggregation": ["dimension"], "dimension": [d], "task_metric": [None]},
                coverage=_summed([t_ug[x] for x in members]),
            ))  # fmt: skip
        weights = {
            c: x / (n_tasks[dim_of[t]] * len(dims))
            for t in t_est
            for c, x in within(t).items()
            if c in c_est
        }
        r = _joint(items, rows, key, weights, OVERALL, **common)
        agg_parts.append(_result_rows(
            r, _key_cols(key), task=[OVERALL], n=[sum(t_n.values())],
            estimate=[float(np.mean(list(dim_est.values())))],
            extra={"aggregation": [OVERALL], "dimension": [None], "task_metric": [None]},
            coverage=_summed(list(t_ug.values())),
        ))  # fmt: skip
    table = pl.concat([comp_table, *agg_parts], how="vertical")
    table = sort_table(
        table.with_columns((pl.col("n") - pl.col("n_ungraded")).alias("n_graded")).select(
            *TABLE_COLUMNS, "aggregation", "dimension", "task_metric", *COVERAGE_COLUMNS
        )
    )
    notes = [
        "Scores on 0-100. Task rows: per-task metric (accuracy, strict accuracy over "
        "option-shuffled variants, micro-F1, key-point recall, IoU, 1-NED, judge score/5).",
        "dimension:<name> = mean of the dimension's task scores; overall = mean of the dimension "
        "scores; their CIs resample all items jointly (weighted mean of task ratios).",
    ]
    if multi:
        how = (
            "the weighted mean (metric_weights "
            + ", ".join(f"{k}={v:g}" for k, v in sorted(weights_of.items()))
            + "; others 1)"
            if weights_of
            else "the unweighted mean"
        )
        notes.append(
            f"Tasks scored by several metrics ({', '.join(sorted(multi))}): each metric is "
            f"reported on its own as '<task> [<metric>]'; the task score is {how} of its "
            "metrics on 0-100 - an assumption of tumorboard's, since the MedBench v4 dataset "
            "cards give no combination rule; its interval resamples each input row with all "
            "its metrics."
        )
    ungraded = int(items.get_column("_ungraded").sum())
    if ungraded:
        notes.append(
            f"{ungraded} of {items.height} items have no grade or answer (a null correct, "
            "pred_labels, pred_box or prediction, or a null key-point hit) and score 0; "
            "n_ungraded counts them per row."
        )
    if interval != "bootstrap":
        table = with_interval(table, "bootstrap")
        notes.append(
            f"interval {interval}: not applied; MedBench scores are ratios of sums on 0-100 "
            "(and macro averages of them), not proportions of 0/1 items, so every row keeps the "
            "bootstrap interval (column interval)."
        )
    return Report(table, benchmark=BENCHMARK, title="MedBench v4", notes=tuple(notes),
                  interval=interval_text(opts, interval=interval),
                  convention="paper (MedBench v4 macro averaging: task -> dimension -> "
                  "overall)")  # fmt: skip
