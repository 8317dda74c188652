"""MedInsightBench insight metrics and scorer.

MedInsightBench (Zhu et al., arXiv 2512.13297) asks an agent for the insights a medical data
analysis supports and compares them with ground-truth insights (following InsightBench's
insight-level evaluation).

Definitions for one case with ground-truth insights ``g_1..g_m`` (m >= 1), generated insights
``h_1..h_k`` and a score matrix ``S[i, j] = score(g_i, h_j)`` (ROUGE-1 F-measure by default, or
any judge score):

* insight recall ``R = (1/m) * sum_i max_j S[i, j]``: how well each ground-truth insight is
  covered by its best-matching generated insight;
* insight precision ``P = (1/k) * sum_j max_i S[i, j]``: how well each generated insight is
  supported by its best-matching ground-truth insight;
* insight F1 ``= 2PR / (P + R)`` (0 when P + R = 0).

A case without generated insights (k = 0) has R = P = F1 = 0.

Aggregation over cases (``convention=``):

* ``"paper"`` (default): ``insight_recall`` and ``insight_precision`` are the means of the
  per-case R and P, and ``insight_f1 = 2 R̄ P̄ / (R̄ + P̄)`` is the F1 of those two means, which
  is how MedInsightBench prints it (Zhu et al., "MedInsightBench", arXiv 2512.13297, Tables 3, 4
  and 8: every printed F1 but one equals 2·R̄·P̄/(R̄+P̄) of its row's printed means to the
  printed rounding; the exception, MedInsightAgent (GPT-4o)'s G-Eval triple, repeated in all
  three tables, prints 0.384 where R̄ = 0.361 and P̄ = 0.413 give 0.38525). Its bootstrap
  recomputes (ΣR, ΣP, n) on every resample (engine statistic ``"f1_of_means"``).
* ``"tumorboard"``: ``insight_f1`` is the mean of the per-case F1 values (never above the
  paper's figure, by the arithmetic-harmonic mean inequality per case); its interval resamples
  the per-case F1 values.

Novelty (per generated insight, from judge scores): the insight is *correct* when its precision
judge score is above 5 (``correct_above``); an insight that is not correct is *novel* when at
least 2 of the 3 judges vote that it is a valid new finding (``min_votes``). With M correct and
N not-correct insights, ``original = M / (M + N)`` and ``innovation = (M + novel) / (M + N)``.
These are ratios over all generated insights of a (track, model, tools, task): the estimate is
pooled over insights (``n`` counts insights) and the bootstrap resamples whole cases (or the
``cluster`` column's units), since the insights of one case are not independent.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from .._typing import Frame
from ..errors import InvalidArgumentError, InvalidTypeError
from ..stats import BootstrapOptions
from ..traj import Store
from . import _store, _validate
from ._coverage import with_coverage
from ._summary import summarize_f1_of_means, summarize_frame, with_interval
from ._validate import require_columns, string_column
from .report import Report, interval_note, interval_text, sort_table

__all__ = ["InsightScores", "case_scores", "insight_scores", "novelty_rates", "score"]

BENCHMARK = "medinsight"
REQUIRED = ("model", "case_id", "score_matrix | insights + gt_insights")
OPTIONAL = ("track", "tools", "task", "insight_precision_scores", "insight_novelty_votes")
_CONVENTIONS = {
    "paper": "paper (insight_f1 = F1 of the mean recall and mean precision, as MedInsightBench "
    "prints it)",
    "tumorboard": "tumorboard (insight_f1 = mean of the per-case F1)",
}


@dataclass(frozen=True)
class InsightScores:
    """Insight-level recall, precision and F1 of one case (see the module docstring).

    Attributes
    ----------
    recall : float
        ``mean_i max_j S[i, j]`` over the ground-truth insights.
    precision : float
        ``mean_j max_i S[i, j]`` over the generated insights.
    f1 : float
        ``2PR / (P + R)`` (0 when P + R = 0).
    """

    recall: float
    precision: float
    f1: float


def _matrix(scores: Any, name: str = "scores") -> npt.NDArray[np.float64]:
    """Return a finite 2-D score matrix (ground-truth x generated insights) as float64."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2:
        raise InvalidArgumentError(
            f"{name}: expected a 2-D matrix (ground-truth insights x generated insights), got "
            f"shape {s.shape}"
        )
    if not np.isfinite(s).all():
        raise InvalidArgumentError(f"{name}: NaN or infinite score")
    return s


def insight_scores(scores: npt.ArrayLike) -> InsightScores:
    """Compute the insight recall, precision and F1 of one case from its score matrix.

    Parameters
    ----------
    scores : array_like, shape (m, k)
        ``scores[i, j]`` = similarity of ground-truth insight i and generated insight j (rows:
        ground truth, columns: generated), e.g. ROUGE-1 F from
        ``tumorboard.text.rouge_matrix``. m >= 1; k = 0 (no generated insight) gives zeros.

    Returns
    -------
    InsightScores
        ``recall = mean_i max_j S``, ``precision = mean_j max_i S``, ``f1 = 2PR/(P+R)``.

    Raises
    ------
    InvalidArgumentError
        A matrix that is not 2-D, has no row, or holds a NaN or infinite score.

    Examples
    --------
    >>> insight_scores([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]])
    InsightScores(recall=0.75, precision=0.5, f1=0.6)
    """
    s = _matrix(scores)
    if s.shape[0] == 0:
        raise InvalidArgumentError("scores: a case needs at least one ground-truth insight (row)")
    if s.shape[1] == 0:
        return InsightScores(0.0, 0.0, 0.0)
    r = float(s.max(axis=1).mean())
    p = float(s.max(axis=0).mean())
    f = 0.0 if p + r == 0 else 2.0 * p * r / (p + r)
    return InsightScores(r, p, f)


def _novelty_flags(
    precision_scores: npt.ArrayLike, novelty_votes: npt.ArrayLike, correct_above: float,
    min_votes: int,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Return the per-insight flags (correct, novel) from judge scores and novelty votes."""
    p = np.asarray(precision_scores, dtype=np.float64).reshape(-1)
    v = np.asarray(novelty_votes)
    if v.dtype == np.bool_ and v.ndim == 2:  # one column per judge
        v = v.sum(axis=1)
    v = v.astype(np.float64).reshape(-1)
    if p.shape != v.shape:
        raise InvalidArgumentError(
            "precision_scores and novelty_votes: expected one entry per generated insight, got "
            f"{p.size} and {v.size}"
        )
    correct = p > correct_above
    novel = ~correct & (v >= min_votes)
    return correct, novel


def novelty_rates(
    precision_scores: npt.ArrayLike,
    novelty_votes: npt.ArrayLike,
    *,
    correct_above: float = 5.0,
    min_votes: int = 2,
) -> tuple[float, float]:
    """Compute ``(original, innovation)`` over a set of generated insights (module docstring).

    Parameters
    ----------
    precision_scores : array_like, shape (n,)
        Each insight's precision judge score; correct when ``> correct_above``.
    novelty_votes : array_like, shape (n,) of int, or (n, judges) of bool
        How many judges voted the insight novel (or each judge's vote).
    correct_above : float, default 5.0
        An insight is correct when its precision judge score is above this.
    min_votes : int, default 2
        Judge votes that make a not-correct insight novel.

    Returns
    -------
    (float, float)
        ``M / (M + N)`` and ``(M + novel) / (M + N)``; NaN for no insights.

    Examples
    --------
    >>> novelty_rates([8, 3, 6, 2], [0, 2, 3, 1])  # 2 correct, 1 novel of 4
    (0.5, 0.75)
    """
    correct, novel = _novelty_flags(precision_scores, novelty_votes, correct_above, min_votes)
    if correct.size == 0:
        return float("nan"), float("nan")
    n = correct.size
    return float(correct.sum() / n), float((correct.sum() + novel.sum()) / n)


# ------------------------------------------------------------------------------------- scorer


def _rouge1_matrices(gt: Sequence[Sequence[str]], gen: Sequence[Sequence[str]]) -> list[np.ndarray]:
    """Return each case's ROUGE-1 F-measure matrix (ground-truth x generated insights)."""
    try:
        from .. import text
    except ImportError as exc:  # pragma: no cover - depends on the build
        raise InvalidArgumentError(
            "medinsight: computing ROUGE-1 needs tumorboard.text (the compiled text metrics), "
            f"which is not available ({exc}); pass a score_matrix column instead"
        ) from exc
    out = []
    for g, h in zip(gt, gen, strict=False):
        if len(h) == 0:
            out.append(np.zeros((len(g), 0)))
            continue
        # entry (i, j) scores g[i] against h[j]; the F-measure is symmetric in the two
        res = text.rouge_matrix(list(g), list(h), type="rouge1")
        out.append(np.asarray(res.fmeasure, dtype=np.float64).reshape(len(g), len(h)))
    return out


def _list_of_str(frame: pl.DataFrame, col: str, where: str) -> list[list[str]]:
    """Return a list[str] column as Python lists; a missing list or entry is an error."""
    s = frame.get_column(col)
    if not (isinstance(s.dtype, pl.List) and s.dtype.inner in (pl.String, pl.Null)):
        raise InvalidTypeError(f"{where}: column {col!r}: expected list[str], got {s.dtype}")
    out = s.to_list()
    for i, v in enumerate(out):
        if v is None or any(x is None for x in v):
            raise InvalidArgumentError(f"{where}: column {col!r} has a missing value at row {i}")
    return out


def _cases(df: Any, *, cluster: str | None, where: str) -> pl.DataFrame:
    """Validate a scorer frame and add each case's recall, precision and F1.

    The columns ``_recall``, ``_precision``, ``_f1`` and ``_no_insight`` (no generated
    insight), as :func:`score` and :func:`case_scores` read them.
    """
    frame = _validate.input_frame(df, required=["model", "case_id"], optional=OPTIONAL,
                                  where=where, cluster=cluster)  # fmt: skip
    if "score_matrix" not in frame.columns and not (
        "insights" in frame.columns and "gt_insights" in frame.columns
    ):
        raise InvalidArgumentError(
            f"{where}: the input frame needs a 'score_matrix' column, or both 'insights' and "
            f"'gt_insights'; required columns: {', '.join(REQUIRED)} (got: "
            f"{', '.join(frame.columns) or 'none'})"
        )
    frame = frame.with_columns(
        string_column(frame, "model", where=where), string_column(frame, "case_id", where=where)
    )
    if "task" in frame.columns:
        frame = frame.with_columns(string_column(frame, "task", where=where))

    if "score_matrix" in frame.columns:
        s = frame.get_column("score_matrix")
        if not (isinstance(s.dtype, pl.List) and isinstance(s.dtype.inner, pl.List)):
            raise InvalidTypeError(
                f"{where}: column 'score_matrix': expected list[list[f64]], got {s.dtype}"
            )
        matrices = []
        for i, m in enumerate(s.to_list()):
            if m is None or len(m) == 0:
                raise InvalidArgumentError(
                    f"{where}: score_matrix at row {i} has no ground-truth insight (row)"
                )
            widths = {len(r) if r is not None else -1 for r in m}
            if len(widths) != 1 or -1 in widths:
                raise InvalidArgumentError(
                    f"{where}: score_matrix at row {i} is ragged or has a null row"
                )
            try:
                matrices.append(_matrix(m, f"score_matrix at row {i}"))
            except (TypeError, ValueError) as exc:
                raise InvalidArgumentError(f"{where}: {exc}") from exc
    else:
        gt = _list_of_str(frame, "gt_insights", where)
        gen = _list_of_str(frame, "insights", where)
        for i, g in enumerate(gt):
            if not g:
                raise InvalidArgumentError(f"{where}: gt_insights at row {i} is empty")
        matrices = _rouge1_matrices(gt, gen)

    scores = [insight_scores(m) for m in matrices]
    frame = frame.with_columns(
        pl.Series("_recall", [x.recall for x in scores], dtype=pl.Float64),
        pl.Series("_precision", [x.precision for x in scores], dtype=pl.Float64),
        pl.Series("_f1", [x.f1 for x in scores], dtype=pl.Float64),
        # no generated insight (k = 0): no response to grade, scored 0 (module docstring)
        pl.Series("_no_insight", [np.shape(m)[1] == 0 for m in matrices], dtype=pl.Boolean),
    )
    return frame


def case_scores(df: Frame | Store | str | os.PathLike[str]) -> pl.DataFrame:
    """Return each case's insight recall, precision and F1, as :func:`score` computes them.

    The per-case values behind :func:`score`'s group rows (definitions: module docstring), for
    paired comparisons of models case by case or for an F1 of means resampled by another
    grouping (``tumorboard compare --rank-statistic f1_of_means``).

    Parameters
    ----------
    df : polars DataFrame or LazyFrame, pyarrow Table, or a trajectory Store
        As :func:`score` takes it (``model``, ``case_id`` and ``score_matrix`` or ``insights``
        plus ``gt_insights``); a Store or its directory is read with
        :func:`~tumorboard.score.store_frame`.

    Returns
    -------
    polars.DataFrame
        The validated input, one row per case in input order (``track`` and ``tools`` filled
        in as :func:`score` does), with ``insight_recall``, ``insight_precision`` and
        ``insight_f1`` (Float64) and ``no_insight`` (Boolean: the case has no generated
        insight and scores 0).

    Raises
    ------
    InvalidArgumentError, InvalidTypeError
        What :func:`score` raises for its input.

    Examples
    --------
    >>> import polars as pl
    >>> frame = pl.DataFrame({"model": ["m"], "case_id": ["c0"],
    ...                       "score_matrix": [[[1.0, 0.0], [0.0, 0.0]]]})
    >>> case_scores(frame).select("insight_recall", "insight_precision", "insight_f1").row(0)
    (0.5, 0.5, 0.5)
    """
    frame = _cases(_store.resolve(df, BENCHMARK), cluster=None, where="medinsight")
    return frame.rename(
        {"_recall": "insight_recall", "_precision": "insight_precision", "_f1": "insight_f1",
         "_no_insight": "no_insight"}
    )  # fmt: skip


def score(
    df: Frame | Store | str | os.PathLike[str],
    *,
    options: BootstrapOptions | None = None,
    cluster: str | None = None,
    correct_above: float = 5.0,
    min_votes: int = 2,
    convention: str | None = None,
    interval: str = "bootstrap",
) -> Report:
    """Score MedInsightBench runs: insight recall, precision and F1, and the novelty metrics.

    Definitions: module docstring. Recall and precision are computed per case and averaged
    over cases (bootstrap over cases, or over ``cluster`` units); F1 is the F1 of those means
    (``convention="paper"``, the default) or the mean of per-case F1 (``"tumorboard"``);
    ``original`` and ``innovation`` are pooled over generated insights with whole cases
    resampled.

    Parameters
    ----------
    df : polars DataFrame or LazyFrame, pyarrow Table, or a trajectory Store
        A trajectory Store (or its directory) is read with
        :func:`~tumorboard.score.store_frame` (docs/trajectory-schema.md).
        Otherwise one row per (model, case). Required columns:

        * ``model`` (str) and ``case_id`` (str or int);
        * either ``score_matrix`` (list[list[f64]]: row i = ground-truth insight i, column j =
          generated insight j; any similarity, e.g. judge scores), or ``insights`` and
          ``gt_insights`` (list[str] each), from which the ROUGE-1 F-measure matrix is computed
          with ``tumorboard.text.rouge_matrix``. ``score_matrix`` wins when both are present.

        Optional columns: ``track``, ``tools``, ``task`` (without it every case is in task
        "all" and there is no overall row); ``insight_precision_scores`` (list[f64], the
        precision judge score of each generated insight) and ``insight_novelty_votes``
        (list[int], how many of the judges voted each insight novel) enable ``original`` and
        ``innovation``; the ``cluster`` column when given.
    options : BootstrapOptions, optional
        The bootstrap of every interval (default ``BootstrapOptions()``).
    cluster : str, optional
        A column whose values are resampled whole (e.g. ``patient_id``).
    correct_above : float, default 5.0
        An insight is correct when its precision judge score is above this.
    min_votes : int, default 2
        Judge votes that make a not-correct insight novel.
    convention : {"paper", "tumorboard"}, optional
        How ``insight_f1`` aggregates cases (module docstring); None is "paper". The report
        names it (``Report.convention``).

    interval : {"bootstrap", "wilson", "agresti_coull", "clopper_pearson", "normal", "cr1", \
"wilson_deff"}, default "bootstrap"
        The interval of ``ci_low``/``ci_high``/``pm``: the bootstrap's, or a closed-form
        proportion interval (:func:`tumorboard.stats.proportion_interval`; "cr1" and
        "wilson_deff" on the ``cluster`` column, which they need) on the per-group rows of the
        0/1 metrics (original and innovation pool insights within their
        cases); other metrics and "overall" rows keep the bootstrap, and the column ``interval``
        names each row's (:func:`tumorboard.score.summarize`).

    Returns
    -------
    Report
        Metrics ``insight_recall``, ``insight_precision``, ``insight_f1`` and, with the judge
        columns, ``original`` and ``innovation``, with the coverage columns ``n_graded``,
        ``n_ungraded`` and ``n_missing`` (int64; definitions in :mod:`tumorboard.score.report`;
        summed over tasks on the overall row). What "graded" means here: on the recall,
        precision and F1 rows, a case is graded when it has at least one generated insight
        (its response); a case without any (an empty ``insights`` list, a response without a
        non-empty line, or a ``score_matrix`` without columns) scores R = P = F1 = 0 and is
        ungraded and missing. On the ``original`` and ``innovation`` rows a case is graded when
        it has its judge scores; the cases without them (a null
        ``insight_precision_scores`` or ``insight_novelty_votes``) are left out, so
        ``n_graded`` = ``n`` (insights) and ``n_ungraded`` counts cases (those of them without
        an insight are ``n_missing``). With a ``task``
        column, the overall row of ``insight_f1`` under the paper convention is the F1 of the
        mean recall and precision over all the group's cases.
    """
    where = "medinsight"
    conv = _validate.convention(convention, allowed=("paper", "tumorboard"), default="paper",
                                where=where)  # fmt: skip
    df = _store.resolve(df, BENCHMARK)
    opts = BootstrapOptions.resolve(options)
    interval = _validate.interval(interval, cluster=cluster, where=where)
    frame = _cases(df, cluster=cluster, where=where)
    has_task = "task" in frame.columns
    group_cols = ("track", "model", "tools", "task") if has_task else ("track", "model", "tools")
    common = dict(benchmark=BENCHMARK, group_cols=group_cols, options=opts, overall=has_task)
    closed = dict(interval=interval)

    def covered(part: pl.DataFrame) -> pl.DataFrame:
        """Add the coverage of a per-case metric: a case without insights is ungraded, 0."""
        return with_coverage(part, frame, group_cols, ungraded="_no_insight",
                             missing="_no_insight")  # fmt: skip

    per_case = [("insight_recall", "_recall"), ("insight_precision", "_precision")]
    if conv == "tumorboard":
        per_case.append(("insight_f1", "_f1"))
    parts = []
    for m, v in per_case:
        part = summarize_frame(frame, value=v, metric=m, cluster=cluster, **common, **closed)  # type: ignore[arg-type]
        parts.append(covered(part))
    if conv == "paper":
        f1 = summarize_f1_of_means(
            frame, recall="_recall", precision="_precision", metric="insight_f1",
            cluster=cluster, **common,  # type: ignore[arg-type]
        )  # fmt: skip
        if interval != "bootstrap":  # F1 of means: not a proportion, the bootstrap's
            f1 = with_interval(f1, "bootstrap")
        parts.append(covered(f1))

    judge_cols = ("insight_precision_scores", "insight_novelty_votes")
    unjudged = 0
    if any(c in frame.columns for c in judge_cols):
        require_columns(frame, judge_cols, where=f"{where} (novelty)")
        keys = [c for c in (*group_cols, "case_id") if c in frame.columns]
        if cluster is not None and cluster not in keys:
            keys.append(cluster)
        ins = frame.select(*keys, *judge_cols).with_row_index("_case_row")
        p_len = ins.get_column("insight_precision_scores").list.len().fill_null(0)
        v_len = ins.get_column("insight_novelty_votes").list.len().fill_null(0)
        if (p_len != v_len).any():
            i = int((p_len != v_len).arg_true()[0])
            raise InvalidArgumentError(
                f"{where}: row {i} has {p_len[i]} insight_precision_scores but {v_len[i]} "
                "insight_novelty_votes; expected one of each per generated insight"
            )
        ins = ins.explode(list(judge_cols)).filter(
            pl.col("insight_precision_scores").is_not_null()
            | pl.col("insight_novelty_votes").is_not_null()
        )
        if ins.height:
            for c in judge_cols:
                if ins.get_column(c).null_count():
                    raise InvalidArgumentError(
                        f"{where}: column {c!r} has a null entry inside a list"
                    )
            correct, novel = _novelty_flags(
                ins.get_column("insight_precision_scores").cast(pl.Float64).to_numpy(),
                ins.get_column("insight_novelty_votes").cast(pl.Float64).to_numpy(),
                float(correct_above), int(min_votes),
            )  # fmt: skip
            ins = ins.with_columns(
                pl.Series("_original", correct, dtype=pl.Boolean),
                pl.Series("_innovation", correct | novel, dtype=pl.Boolean),
                # the resampling unit: the case (one row of the input), or the cluster column
                pl.col("_case_row").cast(pl.String).alias("_case_unit"),
            )
            unit = cluster if cluster is not None else "_case_unit"
            # cases without judge scores are left out of the novelty metrics: count them
            flags = frame.with_columns(
                pl.any_horizontal([pl.col(c).is_null() for c in judge_cols]).alias("_unjudged"),
                pl.lit(False).alias("_in_n"),  # n counts insights: no unjudged case is in it
            )
            unjudged = int(flags.get_column("_unjudged").sum())
            for m, v in (("original", "_original"), ("innovation", "_innovation")):
                part = summarize_frame(ins, value=v, metric=m, cluster=unit, **common, **closed)  # type: ignore[arg-type]
                parts.append(with_coverage(part, flags, group_cols, ungraded="_unjudged",
                                           missing="_no_insight", counted="_in_n"))  # fmt: skip
    f1_note = (
        "insight_f1 = 2·R̄·P̄/(R̄+P̄), the F1 of the mean recall and mean precision (the "
        "paper's convention); its interval recomputes (ΣR, ΣP, n) on every resample."
        if conv == "paper"
        else "insight_f1 = mean over cases of the per-case F1 = 2PR/(P+R)."
    )
    if conv == "paper" and has_task:
        f1_note += (
            " On the overall row R̄ and P̄ are the means over all the group's cases pooled, "
            "whereas the overall insight_recall and insight_precision rows are the means of the "
            "task means: with tasks of unequal size its insight_f1 is not the F1 of those two rows."
        )
    notes = [
        "Scores: recall = mean over ground-truth insights of the best score against any "
        "generated insight; precision = mean over generated insights of the best score against "
        "any ground-truth insight; per case, averaged over cases.",
        f1_note,
        f"original = M/(M+N), innovation = (M+novel)/(M+N): correct = precision judge score > "
        f"{correct_above}; novel = not correct with >= {min_votes} judge votes; pooled over "
        "insights, cases resampled whole.",
    ]
    if unjudged:
        notes.append(
            f"original, innovation: {unjudged} of {frame.height} cases have no judge scores and "
            "are left out; n_ungraded counts those cases per row."
        )
    if interval != "bootstrap":
        notes.append(interval_note(interval, opts))
    return Report(sort_table(pl.concat(parts, how="vertical")), benchmark=BENCHMARK,
                  title="MedInsightBench", notes=tuple(notes),
                  percent=("insight_recall", "insight_precision", "insight_f1", "original",
                           "innovation"),
                  interval=interval_text(opts, interval=interval),
                  convention=_CONVENTIONS[conv])  # fmt: skip
