"""MTBBench scorer.

MTBBench is Vasilev et al., "MTBBench: A Multimodal Sequential Clinical Decision-Making Benchmark
in Oncology", NeurIPS 2025 Datasets & Benchmarks, arXiv 2511.20490.

What the paper reports: per task the mean of the bootstrap distribution of 1000 resampled
accuracies, with ± = half the width of its 2.5-97.5 percentile interval (Fig. 3 and the results
tables), and "Overall" = the unweighted mean of the task means, whose "±" is
``(np.percentile(m, 97.5) - np.percentile(m, 2.5)) / 2`` over the task means ``m`` themselves:
a spread of the tasks (0.475 x (max - min) for three tasks, by linear interpolation), not a
confidence interval.

Two conventions (``convention=``):

* ``"tumorboard"`` (default): per task the raw accuracy (``estimate``) next to the bootstrap
  mean (``boot_mean``) and the percentile interval; "overall" = the plain mean of the task
  accuracies with a real confidence interval from joint resampling of all tasks (see
  :func:`tumorboard.score.summarize`).
* ``"paper"``: the printed numbers: per task ``estimate`` = the bootstrap mean and ``pm`` =
  half the percentile interval's width; "overall" ``estimate`` = the mean of those task means,
  ``ci_low``/``ci_high`` = the percentiles ``(1 - level)/2`` and ``(1 + level)/2`` (2.5 and 97.5
  at the default level) of the task means and ``pm`` = half their distance.

Both give optional patient-clustered intervals and the agentic metrics of Fig. 2: files
accessed per question and the hallucinated-file rate.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import polars as pl

from .. import _keys
from .._typing import Frame
from ..errors import InvalidArgumentError, InvalidTypeError
from ..stats import BootstrapOptions
from . import _store, _validate
from ._coverage import COVERAGE_COLUMNS, Grouping, group_counts, no_response, with_coverage
from ._summary import KEY_COLUMNS, code_columns, summarize_frame
from ._validate import bool_column, count_column, string_column
from .report import OVERALL, Report, interval_note, interval_text, sort_table

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ..traj import Store

REQUIRED = ("model", "task", "correct")
OPTIONAL = ("track", "tools", "patient_id", "files_accessed", "files_hallucinated", "response")
_CLUSTER_ALIASES = {"patient": "patient_id"}


def score(
    df: Frame | Store | str | os.PathLike[str],
    *,
    options: BootstrapOptions | None = None,
    cluster: str | None = None,
    executor: Literal["local", "ray"] = "local",
    ray_address: str | None = None,
    shards: int | None = None,
    convention: str | None = None,
    interval: str = "bootstrap",
) -> Report:
    """Score MTBBench answers: accuracy per task with bootstrap CIs, overall, file metrics.

    Parameters
    ----------
    df : polars DataFrame or LazyFrame, pyarrow Table, or a trajectory Store
        One row per question answered. Required columns:

        * ``model`` (str): the model / agent configuration scored;
        * ``task`` (str): the MTBBench task (e.g. a question category);
        * ``correct`` (bool, or 0/1): whether the answer was right. A null (no answer, or an
          answer that could not be parsed) counts as wrong.

        Optional columns:

        * ``track`` (str; default "default"): e.g. "multimodal" / "multitemporal";
        * ``tools`` (bool; default False): whether the agent had tools;
        * ``patient_id`` (str): the patient a question belongs to; needed for
          ``cluster="patient_id"``;
        * ``files_accessed`` (list[str] of file names, or an int count): the files the agent
          opened for the question; a list counts its distinct non-null names;
        * ``files_hallucinated`` (list[str] or int count): requested files that were not
          available to the agent.

        Missing or null track/tools take the defaults; a null file entry counts 0. A
        :class:`~tumorboard.traj.Store` (or its directory) is read with
        :func:`~tumorboard.score.store_frame`: the items of its MTBBench runs.
    options : BootstrapOptions, optional
        The bootstrap; the default is the paper's: 1000 resamples, 95% percentile interval,
        seed 0. Results are deterministic for a seed.
    cluster : str, optional
        None resamples questions; "patient_id" (alias "patient") resamples patients with all
        their questions, the right interval when questions are nested in patients; any other
        column name is used as the cluster label as given.
    executor : {"local", "ray"}, default "local"
        Where the work runs: "ray" scores a trajectory store's Parquet parts on a Ray cluster with
        :func:`tumorboard.dist.score_store` (``df`` must then be a Store or its directory),
        with the Poisson bootstrap keyed by (run_id, patient_id, item_id), bit-identical to the
        single-process Poisson result for any number of shards; it reports per-task accuracy
        (no overall row, no clusters).
    ray_address : str, optional
        The Ray cluster for executor="ray" (None or "auto": the running one; "local": start one
        here).
    shards : int, optional
        Number of shards of Parquet parts for executor="ray" (default: one per part).
    convention : {"tumorboard", "paper"}, optional
        None is "tumorboard": raw task accuracies and a joint-resampling CI of the overall
        figure; "paper" reproduces the paper's printed cells (module docstring). The report
        names it (``Report.convention``). "paper" needs executor="local".
    interval : {"bootstrap", "wilson", "agresti_coull", "clopper_pearson", "normal", "cr1", \
"wilson_deff"}, default "bootstrap"
        The interval of the per-task 0/1 metrics (``accuracy``, ``hallucinated_file_rate``):
        the bootstrap's, or a closed-form proportion interval
        (:func:`tumorboard.stats.proportion_interval`; "cr1" and "wilson_deff" on the
        ``cluster`` column, which they need), so the report can state the interval a paper or
        inspect_ai gives. ``files_accessed`` and the "overall" rows keep the bootstrap; the
        column ``interval`` names each row's (:func:`tumorboard.score.summarize`). Needs
        convention "tumorboard" and executor "local".

    Returns
    -------
    Report
        Benchmark "mtbbench"; the table has the standard columns plus ``n_correct`` (int64,
        accuracy rows; null on the others) and the coverage columns ``n_graded``,
        ``n_ungraded`` and ``n_missing`` of every row (definitions in
        :mod:`tumorboard.score.report`; sums over the tasks on the overall rows). What
        "graded" means here: an answer is graded for ``accuracy`` when it has a grade (a
        non-null ``correct``); one without (no answer, or one that could not be parsed) counts
        as wrong and is ungraded. A question is graded for ``files_accessed`` /
        ``hallucinated_file_rate`` when it has its file list; a null one counts 0 and is
        ungraded. ``n_missing``: the ungraded questions never answered (a null or blank
        ``response``; null without that column). Metrics:

        * ``accuracy``: share of correct answers per (track, model, tools, task), and a row
          with task "overall" per (track, model, tools): estimate = plain mean of the task
          accuracies (the paper's "Overall"); ci_low/ci_high = joint-resampling interval of
          that mean (all tasks resampled at once); n = all questions; n_correct = their sum;
        * ``files_accessed`` (when the column is present): mean number of distinct files
          accessed per question;
        * ``hallucinated_file_rate`` (when ``files_hallucinated`` is present): share of
          questions that requested at least one unavailable file.

    Raises
    ------
    InvalidArgumentError
        A required column or the cluster column is missing (the message names it and lists the
        required columns), or a value is invalid.
    InvalidTypeError
        A column has the wrong type.
    """
    where = "mtbbench"
    conv = _validate.convention(convention, allowed=("tumorboard", "paper"),
                                default="tumorboard", where=where)  # fmt: skip
    opts = BootstrapOptions.resolve(options)
    if executor not in ("local", "ray"):
        raise InvalidArgumentError(
            f"{where}: executor: expected 'local' or 'ray', got {executor!r}"
        )
    if conv == "paper" and executor == "ray":
        raise InvalidArgumentError(
            f"{where}: convention='paper' needs executor='local' (its overall row is computed "
            "from the task means of the multinomial bootstrap)"
        )
    cluster_col = _CLUSTER_ALIASES.get(cluster, cluster) if isinstance(cluster, str) else cluster
    interval = _validate.interval(interval, cluster=cluster_col, where=where)
    if interval != "bootstrap" and (conv == "paper" or executor == "ray"):
        raise InvalidArgumentError(
            f"{where}: interval: expected 'bootstrap' with "
            + ("convention='paper' (the paper's cells are bootstrap figures)"
               if conv == "paper" else "executor='ray' (Poisson-bootstrap partials)")
            + f", got {interval!r}"
        )  # fmt: skip
    df = _resolve_store(df, executor=executor, where=where)
    if executor == "ray":
        if cluster is not None:
            raise InvalidArgumentError(
                f"{where}: cluster= is not available with executor='ray' (the distributed "
                "Poisson path resamples records); use executor='local'"
            )
        from .._executors import ray_entry

        return ray_entry("score")(
            df, benchmark="mtbbench", options=opts, executor="ray", shards=shards,
            ray_address=ray_address,
        ).report()  # fmt: skip
    frame = _validate.input_frame(df, required=REQUIRED, optional=OPTIONAL, where=where,
                                  cluster=cluster_col)  # fmt: skip
    cols: list[pl.Series] = [
        frame.get_column("track"),
        string_column(frame, "model", where=where),
        frame.get_column("tools"),
        string_column(frame, "task", where=where),
        bool_column(frame, "correct", where=where, null_as=False),
        frame.get_column("correct").is_null().alias("__ungraded"),
    ]
    missing = no_response(frame)  # answers never given (no response at all)
    if missing is not None:
        cols.append(frame.select(missing.alias("__missing")).to_series())
    if cluster_col is not None:
        cols.append(frame.get_column(cluster_col).alias("__cluster"))
    absent = []  # agentic metrics whose inputs no item has: left out, never reported as 0
    if _measured(frame, "files_accessed"):
        cols.append(count_column(frame, "files_accessed", where=where).alias("__files"))
        cols.append(frame.get_column("files_accessed").is_null().alias("__files_ug"))
    elif "files_accessed" in frame.columns:
        absent.append("files_accessed")
    if _measured(frame, "files_hallucinated"):
        halluc = count_column(frame, "files_hallucinated", where=where) > 0
        cols.append(halluc.alias("__halluc"))
        cols.append(frame.get_column("files_hallucinated").is_null().alias("__halluc_ug"))
    elif "files_hallucinated" in frame.columns:
        absent.append("hallucinated_file_rate")
    base = pl.DataFrame(cols)
    # every metric groups, clusters and counts on the same columns: code them once
    coded = code_columns(base, [*KEY_COLUMNS, *(["__cluster"] if cluster_col else [])])
    grouping = (
        _keys.factorize({k: coded[k] for k in KEY_COLUMNS})
        if all(k in coded for k in KEY_COLUMNS)
        else None
    )
    common = dict(
        benchmark="mtbbench",
        group_cols=KEY_COLUMNS,
        cluster="__cluster" if cluster_col is not None else None,
        options=opts,
        interval=interval,
        coded=coded,
    )
    acc = summarize_frame(base, value="correct", metric="accuracy", overall=True, **common)
    acc = _with_coverage(_with_n_correct(acc, base, grouping), base, "__ungraded", grouping)
    if conv == "paper":
        acc = paper_cells(acc, level=opts.level)
    parts = [acc]
    if "__files" in base.columns:
        files = summarize_frame(
            base, value="__files", metric="files_accessed", overall=False, **common
        )
        parts.append(_with_coverage(files.with_columns(_NO_CORRECT), base, "__files_ug", grouping))
    if "__halluc" in base.columns:
        hall = summarize_frame(
            base, value="__halluc", metric="hallucinated_file_rate", overall=False, **common
        )
        parts.append(_with_coverage(hall.with_columns(_NO_CORRECT), base, "__halluc_ug", grouping))
    table = sort_table(pl.concat(parts, how="vertical"))
    ungraded = int(base.get_column("__ungraded").sum())
    notes = [
        "accuracy: share of correct answers (a missing answer counts as wrong); "
        f"boot_mean, ci_low, ci_high: mean and {opts.level:g} {opts.method} interval of "
        f"{opts.n_resamples} bootstrap resamples (seed {opts.seed}); "
        "pm = (ci_high - ci_low) / 2.",
        "task 'overall': estimate = plain mean of the task accuracies (as in the MTBBench "
        "paper); its interval comes from joint resampling of all tasks at once."
        if conv == "tumorboard"
        else "paper convention: a task's estimate is the mean of its bootstrap accuracies "
        "(boot_mean); task 'overall': estimate = mean of the task estimates, ci_low/ci_high = "
        "percentiles of the task estimates themselves and pm = half their distance (the "
        "paper's '±', a spread of the tasks, not a confidence interval).",
    ]
    if ungraded:
        notes.append(
            f"{ungraded} of {base.height} answers have no grade (correct is null) and count as "
            "wrong; n_ungraded counts them per row."
        )
    if cluster_col is not None:
        notes.append(f"intervals resample whole clusters of column {cluster_col!r}.")
    if interval != "bootstrap":
        notes.append(interval_note(interval, opts))
    raw = " (the raw mean; the paper convention changes accuracy only)" if conv == "paper" else ""
    if "__files" in base.columns:
        notes.append(f"files_accessed: mean number of distinct files accessed per question{raw}.")
    if "__halluc" in base.columns:
        notes.append(
            "hallucinated_file_rate: share of questions that requested at least one file "
            f"that was not available{raw}."
        )
    if absent:
        notes.append(
            f"{' and '.join(absent)}: left out, no item records which files it accessed "
            "(the column is empty in every row), so there is nothing to measure."
        )
    agentic = [m for m, c in _AGENTIC.items() if c in base.columns]
    return Report(table, benchmark="mtbbench", title="MTBBench", notes=tuple(notes),
                  percent=("accuracy", "hallucinated_file_rate"),
                  interval=interval_text(opts, interval=interval),
                  convention=convention_text(conv, level=opts.level,
                                             agentic=agentic))  # fmt: skip


def _measured(frame: pl.DataFrame, column: str) -> bool:
    """Whether ``column`` is present and at least one item has a value in it (not null)."""
    return column in frame.columns and frame.get_column(column).null_count() < frame.height


#: The agentic metrics of Fig. 2 and their value columns in the scorer's frame.
_AGENTIC = {"files_accessed": "__files", "hallucinated_file_rate": "__halluc"}


def convention_text(convention: str, *, level: float = 0.95, agentic: Sequence[str] = ()) -> str:
    """Describe the estimates a report of this convention shows, for ``Report.convention``.

    ``Report.convention`` is stated in the caption of every paper-style table, so the text says
    what each table's estimate is: under "paper" the accuracy cells are the paper's (task
    estimate = mean of the bootstrap accuracies; overall ± = half the spread of the task means
    between the percentiles of ``level``), while the agentic metrics of Fig. 2 (``agentic``)
    keep the raw per-question mean with ± = half the width of its bootstrap interval and no
    overall row.

    Parameters
    ----------
    convention : {"tumorboard", "paper"}
        The convention of the report.
    level : float, default 0.95
        The confidence level, whose percentiles give the paper's overall "±".
    agentic : sequence of str, default ()
        The agentic metrics the report holds (``files_accessed``, ``hallucinated_file_rate``).

    Returns
    -------
    str
        The convention name followed by what it means, in parentheses.

    Examples
    --------
    >>> convention_text("paper", agentic=["files_accessed"])[:58]
    'paper (accuracy: task estimate = mean of the bootstrap acc'
    """
    if convention == "tumorboard":
        return (
            "tumorboard (task estimate = raw accuracy; overall = mean of the task accuracies "
            "with a joint-resampling confidence interval)"
        )
    lo, hi = 100.0 * (1.0 - level) / 2.0, 100.0 * (1.0 + level) / 2.0
    text = (
        "paper (accuracy: task estimate = mean of the bootstrap accuracies; overall ± = half "
        f"the {lo:g}-{hi:g} percentile spread of the task means, as the MTBBench paper prints "
        "it, not a confidence interval"
    )
    if agentic:
        names = " and ".join(agentic)
        text += (
            f"; {names}: estimate = the raw mean per question, not a bootstrap mean, ± = half "
            "the width of its bootstrap interval, no overall"
        )
    return text + ")"


def paper_cells(table: pl.DataFrame, *, level: float = 0.95) -> pl.DataFrame:
    """Rewrite task and overall rows into the MTBBench paper's printed convention.

    Each task row's ``estimate`` becomes its ``boot_mean`` (the paper's task "mean" is the mean
    of the bootstrap accuracies; ``pm`` is already half the percentile interval's width). Each
    "overall" row becomes the unweighted mean ``M`` of its group's task estimates, with
    ``ci_low``/``ci_high`` = ``np.percentile(m, 100 (1 - level) / 2)`` and
    ``np.percentile(m, 100 (1 + level) / 2)`` of the task estimates ``m`` (linear
    interpolation), ``pm`` = half their distance and ``boot_mean`` = ``M``.

    Parameters
    ----------
    table : polars.DataFrame
        Report rows of one metric with task rows and "overall" rows (from
        :func:`~tumorboard.score.summarize`).
    level : float, default 0.95
        The level whose percentiles give the overall "±".

    Returns
    -------
    polars.DataFrame
        The same rows and columns, in the same order.

    Examples
    --------
    Three task means 0.5, 0.6 and 0.9: overall 2/3 and ± = 0.475 x (0.9 - 0.5) = 0.19.
    """
    keys = ["track", "model", "tools"]
    is_task = pl.col("task") != OVERALL
    out = table.with_columns(
        pl.when(is_task).then(pl.col("boot_mean")).otherwise(pl.col("estimate")).alias("estimate")
    )
    lo_q, hi_q = 100.0 * (1.0 - level) / 2.0, 100.0 * (1.0 + level) / 2.0
    spread = {}
    for key, sub in out.filter(is_task).group_by(keys, maintain_order=True):
        m = sub.get_column("estimate").to_numpy()
        spread[tuple(key)] = (float(m.mean()), float(np.percentile(m, lo_q)),
                              float(np.percentile(m, hi_q)))  # fmt: skip
    rows = out.to_dicts()
    for r in rows:
        if r["task"] == OVERALL and tuple(r[k] for k in keys) in spread:
            mean, lo, hi = spread[tuple(r[k] for k in keys)]
            r.update(estimate=mean, boot_mean=mean, ci_low=lo, ci_high=hi, pm=(hi - lo) / 2.0)
    return pl.DataFrame(rows, schema=out.schema)


#: The coverage columns of the rows: ``n_correct`` (accuracy rows only; null on the others),
#: then those of every report (:data:`tumorboard.score._coverage.COVERAGE_COLUMNS`).
COUNTS = ("n_correct", *COVERAGE_COLUMNS)
_NO_CORRECT = pl.lit(None, dtype=pl.Int64).alias("n_correct")


def _with_n_correct(
    acc: pl.DataFrame, base: pl.DataFrame, grouping: Grouping | None = None
) -> pl.DataFrame:
    """Add ``n_correct`` per task to the accuracy rows, and its sum on the overall rows.

    ``grouping`` (the joint codes of the key columns, when every one has them) counts by
    integer bincounts instead of a polars group-by; the counts are the same.
    """
    keys = list(KEY_COLUMNS)
    if grouping is not None:
        right = base.get_column("correct").to_numpy()
        per_task = group_counts(base, keys, grouping, {"n_correct": right})
    else:
        per_task = base.group_by(keys).agg(
            pl.col("correct").sum().cast(pl.Int64).alias("n_correct")
        )
    overall = (
        per_task.group_by(keys[:-1])
        .agg(pl.col("n_correct").sum())
        .with_columns(pl.lit(OVERALL).alias("task"))
        .select(*keys, "n_correct")
    )
    counts = pl.concat([per_task, overall], how="vertical")
    return acc.join(counts, on=keys, how="left", maintain_order="left")


def _with_coverage(
    part: pl.DataFrame, base: pl.DataFrame, flag: str, grouping: Grouping | None = None
) -> pl.DataFrame:
    """Add ``n_graded``, ``n_ungraded`` and ``n_missing`` to one metric's rows.

    ``flag`` marks the items the metric cannot grade (a null ``correct``, or a null file
    list), which count as wrong / 0 (:mod:`tumorboard.score._coverage`).
    """
    missing = "__missing" if "__missing" in base.columns else None
    return with_coverage(part, base, KEY_COLUMNS, ungraded=flag, missing=missing,
                         grouping=grouping)  # fmt: skip


def _resolve_store(df: Any, *, executor: str, where: str) -> Any:
    """Resolve a store argument: kept for executor="ray", read as the scorer frame for "local".

    For executor="local" a Store or store directory becomes
    :func:`~tumorboard.score.store_frame` of its MTBBench items; anything else is returned
    unchanged.
    """
    if executor == "ray":
        if not _store.is_store(df):
            raise InvalidTypeError(
                f"{where}: executor='ray' scores a trajectory store: pass a tumorboard.traj.Store "
                f"or its directory, got {type(df).__name__}"
            )
        return df
    return _store.resolve(df, "mtbbench")
