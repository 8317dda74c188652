"""RadA-BenchPlat agent metrics and scorer.

RadA-BenchPlat (Zheng et al. 2025, arXiv 2412.09529) evaluates radiology agents that chain tools of
given categories (Anatomy Classifier -> Modality Classifier -> Organ Segmentor -> ...). Each metric
below is given as the paper defines it; where the reference code (``MAGIC-AI4Med/RadABench`` at
commit ``acbcf87``, ``EvalPlat/EvalMetrics/*.py``) computes something else, the code's version is
provided too, under a name ending in ``_code`` (defined in
:mod:`tumorboard.score._radabench_reference` and re-exported here), and the difference is
documented. Chains are lists of tool categories (strings); ``pred`` is the chain the agent called,
``gt`` the ground-truth chain.

Tool-chain metrics (per case):

* ``tool_chain_levenshtein``: element-level Levenshtein distance ``d(gt, pred)`` between the
  chains (the code: python-Levenshtein ``distance`` on the two lists; identical), averaged over
  **all** cases, as ``multihop_generalEval.py`` and ``singlehop_generalEval.py`` average it
  (the multi-hop one also starts at case folder 2, skipping folders 0 and 1, which tumorboard
  does not copy). ``tool_chain_levenshtein_code`` is the same distance averaged over the
  **completed** cases only, as ``multihop_IO_passrate.py`` prints it: the two scripts divide by
  different case counts. The same holds for ``plan_levenshtein`` (d(plan, called)) and
  ``plan_gt_levenshtein`` (d(gt, plan)) and their ``_code`` variants. The code's
  single-hop evaluation first sorts the decomposed categories stably by their ground-truth
  order; that preprocessing is the caller's (pass the sorted chain as ``called_tools``;
  ``tumorboard import radabench`` does it).
* ``false_discovery_rate`` (paper): ``|{k : pred[k] not in gt}| / |pred|``, the share of the
  called tools (with repetition) whose category is not in the ground truth; 0 for an empty
  chain. ``redundancy_rate_code`` (code, "redundancy"): the same count over
  ``max(|pred|, |gt|)``, and averaged over completed cases only.
* ``tool_matching_accuracy`` (paper): positional hits over the ground-truth length,
  ``sum_{k < min(|pred|, |gt|)} [pred[k] == gt[k]] / |gt|``. ``tool_matching_accuracy_code``
  (code, "precision"): the length of the longest common **contiguous** run of the two chains
  over ``|gt|``, averaged over completed cases only.
* ``optimal_tool_score`` (paper): at each tool-selection step with N candidate tools of the
  required category ranked by performance, choosing the tool of rank R (1 = best) scores
  ``(N - R + 1) / N``; a case scores the mean over its steps (4 tools, second best chosen:
  0.75). ``optimal_tool_score_code`` (code, "win rate"): per case, one candidate list of tool
  ids ordered from worst to best; scanning it from the end (best first), the first candidate
  that the agent called, at 0-based position i from the end, gives ``(N - i) / N``; 0 if none
  was called.
* ``execution_completion_rate``: share of cases that ran to the end without an execution
  error (code "passrate1").
* ``pre_failure_progress`` ("pre-failure success percentage"): on failed cases only,
  ``|pred| / |gt|``, the share of the chain called before the failure (code "failed length
  ratio").
* ``target_hit_rate``: share of cases that completed and whose last called category is the
  last ground-truth category (code "passrate2"; the denominator is all cases).
* ``milestone_hit_rate``: share of cases whose called categories include the case's key
  (milestone) category.
* ``unsolvability_awareness_rate`` and ``unsolvability_grounding_rate``: on unsolvable cases
  (a category the chain needs has no tool), the share where the agent declined the call
  (a ``Deny Call Dict:`` in the log), and the share where it also named the missing category
  (the first ``'Category': '...'`` value of the log contains it, as the code's deny1 check).

Final-response text metrics (the agent's conclusion against the reference answer):

* paper-standard (``bleu``, ``rouge_l``, ``f1``): sacrebleu sentence BLEU (13a tokenizer,
  exponential smoothing, effective order) divided by 100, rouge-score ROUGE-L F-measure (its
  tokenizer, no stemming), and unique-token F1 over rouge-score tokens
  (``tumorboard.text.set_f1``), on all cases with a reference answer (a missing response
  scores 0).
* reference-code (``bleu1_code``, ``rouge_l_code``, ``f1_code``): the code's exact recipe
  (:mod:`tumorboard.score._radabench_reference`); cases whose log contains the substring
  ``Error`` or ``error`` anywhere are left out of the averages (the code zeroes them and
  averages over the others; without a log, the cases that did not complete are left out).
  ``multihop_performance.py`` pools these over all chains: its figures are sums over every
  case of every chain divided by the number of cases kept, not means of per-chain means.

Conventions (``convention=``): ``"paper"`` (default) reports the paper's metrics and the
``_code`` variants per task (the chain) with the macro "overall" row; ``"code"`` reproduces the
official ``EvalPlat/EvalMetrics`` scripts' printed aggregates: only their metrics, pooled over
all cases of a (track, model, tools) (task "all"; no per-chain split), with their text metrics
(``text_metrics="code"`` unless given).

The per-case functions above (the paper's tool-chain metrics, the log readers and
``final_response_scores``) are defined in :mod:`tumorboard.score._radabench_metrics` and
re-exported here; this module is the scorer, which computes them vectorised over a frame of
cases with bootstrap intervals (:func:`score`).
"""

from __future__ import annotations

import os
from typing import Literal

import numpy as np
import polars as pl

from .._typing import Frame
from ..errors import InvalidArgumentError, InvalidTypeError
from ..stats import BootstrapOptions
from ..text import sequence_levenshtein
from ..traj import Store
from . import _store, _validate
from ._coverage import no_response
from ._radabench_metrics import (
    _CATEGORY,
    _DENY,
    _FAILURE,
    deny_awareness,
    deny_grounding,
    execution_failed,
    extract_conclusion,
    false_discovery_rate,
    final_response_scores,
    optimal_tool_score,
    pre_failure_progress,
    tool_chain_levenshtein,
    tool_matching_accuracy,
)
from ._radabench_reference import (
    bleu1_code,
    final_response_scores_code,
    log_error_flag,
    longest_common_run,
    optimal_tool_score_code,
    radabench_tokenize,
    redundancy_rate_code,
    rouge_l_code,
    set_f1_code,
    tool_matching_accuracy_code,
)
from ._summary import summarize_metrics
from ._validate import bool_column, require_columns, string_column
from .report import Report, interval_note, interval_text

__all__ = [
    "bleu1_code",
    "deny_awareness",
    "deny_grounding",
    "execution_failed",
    "extract_conclusion",
    "false_discovery_rate",
    "final_response_scores",
    "final_response_scores_code",
    "log_error_flag",
    "longest_common_run",
    "optimal_tool_score",
    "optimal_tool_score_code",
    "pre_failure_progress",
    "radabench_tokenize",
    "redundancy_rate_code",
    "rouge_l_code",
    "score",
    "set_f1_code",
    "tool_chain_levenshtein",
    "tool_matching_accuracy",
    "tool_matching_accuracy_code",
]

BENCHMARK = "radabench"
REQUIRED = ("model", "gt_tools", "called_tools")
OPTIONAL = (
    "track", "tools", "task", "completed", "log", "plan_tools", "called_tool_ids",
    "candidate_tools", "selection_ranks", "selection_sizes", "milestone", "unsolvable",
    "missing_category", "aware", "grounded", "response", "reference_answer",
)  # fmt: skip

_CONVENTIONS = {
    "paper": "paper (the paper's metric definitions, per chain, with the _code variants)",
    "code": "code (the official EvalPlat/EvalMetrics scripts' aggregates, pooled over all cases)",
}
#: The metrics the official scripts print (convention "code").
_CODE_METRICS = frozenset({
    "execution_completion_rate", "target_hit_rate", "redundancy_rate_code",
    "tool_matching_accuracy_code", "pre_failure_progress", "tool_chain_levenshtein",
    "tool_chain_levenshtein_code", "plan_levenshtein", "plan_gt_levenshtein",
    "plan_levenshtein_code", "plan_gt_levenshtein_code", "optimal_tool_score_code",
    "milestone_hit_rate", "f1_code", "bleu1_code", "rouge_l_code",
    "unsolvability_awareness_rate", "unsolvability_grounding_rate",
})  # fmt: skip


#: The metrics computed from the called chain: ungraded on a case without its tool record.
_CHAIN_METRICS = frozenset({
    "tool_chain_levenshtein", "tool_chain_levenshtein_code", "false_discovery_rate",
    "tool_matching_accuracy", "redundancy_rate_code", "tool_matching_accuracy_code",
    "pre_failure_progress", "target_hit_rate", "plan_levenshtein", "plan_levenshtein_code",
    "optimal_tool_score_code", "milestone_hit_rate",
})  # fmt: skip


# ------------------------------------------------------------------------------------- scorer


def _selection_scores(frame: pl.DataFrame, where: str) -> pl.DataFrame:
    """Add ``_ots``: the mean over a case's selection steps of (N - R + 1) / N (null without)."""
    require_columns(frame, ["selection_ranks", "selection_sizes"], where=f"{where} (selection)")
    for col in ("selection_ranks", "selection_sizes"):
        dt = frame.schema[col]
        if not (isinstance(dt, pl.List) and (dt.inner.is_integer() or dt.inner == pl.Null)):
            raise InvalidTypeError(f"{where}: column {col!r}: expected list[int], got {dt}")
    lr = frame.get_column("selection_ranks").list.len().fill_null(0)
    ls = frame.get_column("selection_sizes").list.len().fill_null(0)
    if (lr != ls).any():
        i = int((lr != ls).arg_true()[0])
        raise InvalidArgumentError(
            f"{where}: row {i} has {lr[i]} selection_ranks but {ls[i]} selection_sizes; expected "
            "one rank and one candidate count per selection step"
        )
    steps = (
        frame.select("_row", "selection_ranks", "selection_sizes")
        .filter(pl.col("selection_ranks").list.len() > 0)
        .explode(["selection_ranks", "selection_sizes"])
    )
    r, n = pl.col("selection_ranks"), pl.col("selection_sizes")
    bad = steps.filter(r.is_null() | n.is_null() | (n < 1) | (r < 1) | (r > n))
    if bad.height:
        raise InvalidArgumentError(
            f"{where}: selection step at row {bad['_row'][0]} has rank {bad['selection_ranks'][0]} "
            f"of {bad['selection_sizes'][0]} candidates; expected 1 <= rank <= candidates"
        )
    per = steps.group_by("_row").agg(((n - r + 1) / n).mean().alias("_ots"))
    return frame.join(per, on="_row", how="left").sort("_row")


def _win_rate_code(frame: pl.DataFrame) -> pl.DataFrame:
    """Add ``_ots_code``: (index of the best called candidate + 1) / N, 0 if none.

    Null for a case without a candidate list.
    """
    ids = "called_tool_ids" if "called_tool_ids" in frame.columns else "called_tools"
    cand = (
        frame.select("_row", pl.col("candidate_tools").alias("_c"))
        .filter(pl.col("_c").is_not_null())
        .with_columns(pl.col("_c").list.len().alias("_N"))
        .explode("_c")
        .filter(pl.col("_c").is_not_null())
        .with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over("_row").alias("_idx"))
    )
    called = (
        frame.select("_row", pl.col(ids).alias("_c"))
        .explode("_c")
        .filter(pl.col("_c").is_not_null())
        .unique()
    )
    best = (
        cand.join(called, on=["_row", "_c"], how="inner")
        .group_by("_row")
        .agg(((pl.col("_idx").max() + 1) / pl.col("_N").first()).alias("_best"))
    )
    out = frame.join(best, on="_row", how="left").sort("_row")
    return out.with_columns(
        pl.when(pl.col("candidate_tools").is_not_null())
        .then(pl.col("_best").fill_null(0.0))
        .alias("_ots_code")
    ).drop("_best")


def _unsolvability(
    frame: pl.DataFrame, has_log: bool, where: str
) -> tuple[pl.DataFrame, list[tuple[str, str, pl.Expr | None]]]:
    """Add the unsolvability awareness and grounding flags and return their metric specs."""
    if "unsolvable" in frame.columns:
        uns = bool_column(frame, "unsolvable", where=where, null_as=False)
    elif "missing_category" in frame.columns:
        uns = frame.get_column("missing_category").is_not_null()
    else:
        return frame, []
    frame = frame.with_columns(uns.alias("_unsolvable"))
    mask = pl.col("_unsolvable")
    specs: list[tuple[str, str, pl.Expr | None]] = []
    if "aware" in frame.columns:
        frame = frame.with_columns(
            bool_column(frame, "aware", where=where, null_as=False).alias("_aware")
        )
    elif has_log:
        frame = frame.with_columns(
            pl.col("log").fill_null("").str.contains(_DENY, literal=True).alias("_aware")
        )
    if "_aware" in frame.columns:
        specs.append(("unsolvability_awareness_rate", "_aware", mask))
    if "grounded" in frame.columns:
        frame = frame.with_columns(
            bool_column(frame, "grounded", where=where, null_as=False).alias("_grounded")
        )
    elif has_log and "missing_category" in frame.columns and "_aware" in frame.columns:
        first_category = pl.col("log").fill_null("").str.extract(_CATEGORY, 1)
        named = first_category.str.contains(pl.col("missing_category").fill_null(""),
                                            literal=True)  # fmt: skip
        frame = frame.with_columns((pl.col("_aware") & named.fill_null(False)).alias("_grounded"))
    if "_grounded" in frame.columns:
        specs.append(("unsolvability_grounding_rate", "_grounded", mask))
    return frame, specs


def _text_metrics(
    frame: pl.DataFrame, which: str, has_log: bool, where: str
) -> tuple[pl.DataFrame, list[tuple[str, str, pl.Expr | None]]]:
    """Add the final-response text scores (paper, code or both) and return their metric specs."""
    if frame.schema["reference_answer"] not in (pl.String, pl.Null):
        raise InvalidTypeError(
            f"{where}: column 'reference_answer': expected strings, "
            f"got {frame.schema['reference_answer']}"
        )
    if "response" in frame.columns:
        if frame.schema["response"] not in (pl.String, pl.Null):
            raise InvalidTypeError(
                f"{where}: column 'response': expected strings, got {frame.schema['response']}"
            )
        frame = frame.with_columns(
            pl.col("response").fill_null("").alias("_response"),
            no_response(frame).alias("_no_response"),  # type: ignore[union-attr]
        )
    elif has_log:
        conclusion = (
            pl.col("log").str.extract(r"(?s)Conclusion:(.*)", 1).str.split("\n\n").list.first()
        )
        frame = frame.with_columns(
            conclusion.str.strip_chars().fill_null("").alias("_response"),
            (conclusion.is_null() | (conclusion.str.strip_chars() == "")).alias("_no_response"),
        )
    else:
        raise InvalidArgumentError(
            f"{where}: the text metrics need a 'response' column (or a 'log' to take the "
            "conclusion from) next to 'reference_answer'"
        )
    has_ref = pl.col("reference_answer").is_not_null()
    frame = frame.with_columns((has_ref & pl.col("_no_response")).alias("_ug_text"))
    sub = frame.filter(has_ref)
    hyps = sub.get_column("_response").to_list()
    refs = sub.get_column("reference_answer").to_list()
    specs: list[tuple[str, str, pl.Expr | None]] = []
    cols: dict[str, np.ndarray] = {}
    if which in ("paper", "both") and sub.height:
        scores = final_response_scores(hyps, refs)
        cols.update({"_bleu": scores["bleu"], "_rouge_l": scores["rouge_l"], "_f1": scores["f1"]})
        specs += [("bleu", "_bleu", has_ref), ("rouge_l", "_rouge_l", has_ref),
                  ("f1", "_f1", has_ref)]  # fmt: skip
    if which in ("code", "both") and sub.height:
        pairs = zip(hyps, refs, strict=True)
        triples = np.array([final_response_scores_code(h, r) for h, r in pairs],
                           dtype=np.float64).reshape(-1, 3)  # fmt: skip
        cols.update({"_f1_code": triples[:, 0], "_bleu1_code": triples[:, 1],
                     "_rouge_l_code": triples[:, 2]})  # fmt: skip
        if has_log:
            log = pl.col("log").fill_null("")
            err = log.str.contains("Error", literal=True) | log.str.contains("error", literal=True)
        else:
            err = ~pl.col("_done")
        keep = has_ref & ~err
        frame = frame.with_columns((keep & pl.col("_no_response")).alias("_ug_text_code"))
        specs += [("bleu1_code", "_bleu1_code", keep), ("rouge_l_code", "_rouge_l_code", keep),
                  ("f1_code", "_f1_code", keep)]  # fmt: skip
    if cols:
        values = sub.select("_row").with_columns(
            *(pl.Series(name, v, dtype=pl.Float64) for name, v in cols.items())
        )
        frame = frame.join(values, on="_row", how="left").sort("_row")
    return frame, specs


def _list_str(frame: pl.DataFrame, col: str, where: str) -> None:
    """Check that column ``col`` is list[str]."""
    dt = frame.schema[col]
    if not (isinstance(dt, pl.List) and dt.inner in (pl.String, pl.Null)):
        raise InvalidTypeError(f"{where}: column {col!r}: expected list[str], got {dt}")


def _chain_stats(frame: pl.DataFrame, pred: str, gt: str) -> pl.DataFrame:
    """Compute per-row chain statistics with joins on exploded chains (no Python loop).

    Per row (_row): _nin (called tools not in gt), _pos (positional hits), _run (longest common
    contiguous run).
    """
    p = (
        frame.select("_row", pl.col(pred).alias("_t"))
        .explode("_t")
        .filter(pl.col("_t").is_not_null())
        .with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over("_row").alias("_i"))
    )
    g = (
        frame.select("_row", pl.col(gt).alias("_t"))
        .explode("_t")
        .filter(pl.col("_t").is_not_null())
        .with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over("_row").alias("_j"))
    )
    gset = g.select("_row", "_t").unique().with_columns(pl.lit(True).alias("_in"))
    nin = (
        p.join(gset, on=["_row", "_t"], how="left")
        .group_by("_row")
        .agg(pl.col("_in").is_null().sum().cast(pl.Int64).alias("_nin"))
    )
    pos = (
        p.join(g, left_on=["_row", "_i"], right_on=["_row", "_j"], how="inner")
        .filter(pl.col("_t") == pl.col("_t_right"))
        .group_by("_row")
        .agg(pl.len().cast(pl.Int64).alias("_pos"))
    )
    # matches (i, j) on the same diagonal i - j with consecutive i form a contiguous run
    runs = (
        p.join(g, on=["_row", "_t"], how="inner")
        .with_columns((pl.col("_i") - pl.col("_j")).alias("_d"))
        .sort(["_row", "_d", "_i"])
        .with_columns(
            (pl.col("_i") - pl.col("_i").shift(1).over(["_row", "_d"]) != 1)
            .fill_null(True)
            .cum_sum()
            .over(["_row", "_d"])
            .alias("_seg")
        )
        .group_by(["_row", "_d", "_seg"])
        .agg(pl.len().alias("_len"))
        .group_by("_row")
        .agg(pl.col("_len").max().cast(pl.Int64).alias("_run"))
    )
    out = frame.select("_row")
    for part in (nin, pos, runs):
        out = out.join(part, on="_row", how="left")
    return out.with_columns(pl.col("_nin", "_pos", "_run").fill_null(0))


def score(
    df: Frame | Store | str | os.PathLike[str],
    *,
    options: BootstrapOptions | None = None,
    cluster: str | None = None,
    text_metrics: Literal["paper", "code", "both", "none"] | None = None,
    convention: str | None = None,
    interval: str = "bootstrap",
) -> Report:
    """Score RadA-BenchPlat runs (metric definitions: module docstring).

    Every metric is a mean of per-case values with a bootstrap percentile CI
    (:func:`tumorboard.score.summarize`). Metrics defined on a subset (pre-failure progress on
    failed cases, the ``_code`` tool-chain variants on completed cases, unsolvability on
    unsolvable cases, the code's text metrics on cases without "error" in the log) are averaged
    over that subset, whose size is ``n``.

    Parameters
    ----------
    df : polars DataFrame or LazyFrame, pyarrow Table, or a trajectory Store
        A trajectory Store (or its directory) is read with
        :func:`~tumorboard.score.store_frame` (docs/trajectory-schema.md).
        Otherwise one row per case (one query answered by one agent). Required columns:

        * ``model`` (str);
        * ``gt_tools`` (list[str]): the ground-truth chain of tool categories (non-empty);
        * ``called_tools`` (list[str]): the categories of the tools the agent called, in
          order (null = none).

        Optional columns (each enables the metrics that need it):

        * ``track``, ``tools``, ``task`` (e.g. the chain id or "single-hop"; without it every
          case is in task "all" and there is no overall row);
        * ``completed`` (bool): ran without an execution error. Without it, a ``log`` column
          gives it (no ``Error Type: ...Traceback:`` block); without either, completion,
          target-hit and pre-failure metrics are skipped and the ``_code`` variants use all
          cases;
        * ``log`` (str): the raw run log; also gives ``response`` (the conclusion), the
          "error" exclusion of the code's text metrics and, for unsolvable cases, ``aware`` and
          ``grounded``;
        * ``plan_tools`` (list[str]): the planned chain; adds ``plan_levenshtein``
          (d(plan, called)) and ``plan_gt_levenshtein`` (d(gt, plan));
        * ``selection_ranks`` and ``selection_sizes`` (list[int]): rank R (1 = best) of the
          tool chosen at each selection step and the number N of candidates;
          ``optimal_tool_score``;
        * ``candidate_tools`` (list[str], worst to best) with ``called_tool_ids`` (list[str];
          default: ``called_tools``): ``optimal_tool_score_code``;
        * ``milestone`` (str): the key category; ``milestone_hit_rate``;
        * ``unsolvable`` (bool) or ``missing_category`` (str, null on solvable cases), with
          ``aware`` and ``grounded`` (bool) or a ``log``: the unsolvability rates;
        * ``response`` and ``reference_answer`` (str): the text metrics.
    options : BootstrapOptions, optional
        The bootstrap of every interval (default ``BootstrapOptions()``).
    cluster : str, optional
        A column whose values are resampled whole (e.g. the imaging case id).
    text_metrics : {"paper", "code", "both", "none"}, optional
        Which final-response metrics to compute when ``reference_answer`` is present ("code"
        and "both" need NLTK); None: "paper", or "code" under ``convention="code"``.
    convention : {"paper", "code"}, optional
        None is "paper": every metric per task and overall. "code": the official scripts'
        aggregates, pooled over all cases (module docstring). The report names it.

    interval : {"bootstrap", "wilson", "agresti_coull", "clopper_pearson", "normal", "cr1", \
"wilson_deff"}, default "bootstrap"
        The interval of ``ci_low``/``ci_high``/``pm``: the bootstrap's, or a closed-form
        proportion interval (:func:`tumorboard.stats.proportion_interval`; "cr1" and
        "wilson_deff" on the ``cluster`` column, which they need) on the per-group rows of the
        0/1 metrics; other metrics and "overall" rows keep the bootstrap, and the column
        ``interval`` names each row's (:func:`tumorboard.score.summarize`).

    Returns
    -------
    Report
        One row per (track, model, tools[, task], metric), with the coverage columns
        ``n_graded``, ``n_ungraded`` and ``n_missing`` (int64; definitions in
        :mod:`tumorboard.score.report`; summed over tasks on the overall row). What "graded"
        means here: a text metric (``bleu``, ``rouge_l``, ``f1`` and their ``_code``
        variants) is graded on a case with a reference answer when it has a response (a
        non-blank ``response``, or without it a non-blank ``Conclusion:`` in the log); a case
        without one scores 0 and is ungraded (for the ``_code`` text metrics, only those not
        left out for an error). A tool-chain metric (the Levenshtein distances involving the
        called chain, false discovery, matching, redundancy, pre-failure progress, target and
        milestone hits, the code's win rate) is graded when the case has its tool record: a
        null ``called_tools`` is scored as an empty chain, as before, and is ungraded (the
        store gives an empty chain to a case of a run with events that called no tool). The
        metrics read from other columns (completion, ``plan_gt_levenshtein``,
        ``optimal_tool_score``, the unsolvability rates) grade every case of their subset.
        ``n_missing``: the ungraded cases without any response (null without a ``response``
        column or a ``log``).
    """
    where = "radabench"
    conv = _validate.convention(convention, allowed=("paper", "code"), default="paper",
                                where=where)  # fmt: skip
    if text_metrics is None:
        text_metrics = "code" if conv == "code" else "paper"
    df = _store.resolve(df, BENCHMARK)
    if text_metrics not in ("paper", "code", "both", "none"):
        raise InvalidArgumentError(
            f"text_metrics: expected 'paper', 'code', 'both' or 'none', got {text_metrics!r}"
        )
    opts = BootstrapOptions.resolve(options)
    interval = _validate.interval(interval, cluster=cluster, where=where)
    frame = _validate.input_frame(df, required=REQUIRED, optional=OPTIONAL, where=where,
                                  cluster=cluster)  # fmt: skip
    frame = frame.with_columns(
        string_column(frame, "model", where=where),
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"),
    )
    has_task = "task" in frame.columns and conv == "paper"
    if has_task:
        frame = frame.with_columns(string_column(frame, "task", where=where))
    for col in ("gt_tools", "called_tools", "plan_tools", "called_tool_ids", "candidate_tools"):
        if col in frame.columns:
            _list_str(frame, col, where)
    empty = pl.lit([], dtype=pl.List(pl.String))
    frame = frame.with_columns(
        pl.col("called_tools").is_null().alias("_no_chain"),
        pl.col("called_tools").fill_null(empty),
    )
    gt_len = frame.get_column("gt_tools").list.len().fill_null(0)
    if (gt_len == 0).any():
        i = int((gt_len == 0).arg_true()[0])
        raise InvalidArgumentError(f"{where}: gt_tools at row {i} is missing or empty")
    has_log = "log" in frame.columns
    if has_log and frame.schema["log"] not in (pl.String, pl.Null):
        raise InvalidTypeError(
            f"{where}: column 'log': expected strings, got {frame.schema['log']}"
        )

    # ---- completion
    has_completed = "completed" in frame.columns or has_log
    if "completed" in frame.columns:
        frame = frame.with_columns(bool_column(frame, "completed", where=where).alias("_done"))
    elif has_log:
        frame = frame.with_columns(
            (~pl.col("log").fill_null("").str.contains(_FAILURE)).alias("_done")
        )
    else:
        frame = frame.with_columns(pl.lit(True).alias("_done"))

    # ---- tool-chain metrics
    stats = _chain_stats(frame, "called_tools", "gt_tools")
    frame = frame.join(stats, on="_row", how="left").sort("_row")
    gt_list = frame.get_column("gt_tools").to_list()
    called = frame.get_column("called_tools").to_list()
    n_called = pl.col("called_tools").list.len()
    n_gt = pl.col("gt_tools").list.len()
    frame = frame.with_columns(
        pl.Series("_lev", sequence_levenshtein(gt_list, called), dtype=pl.Float64),
        pl.when(n_called > 0).then(pl.col("_nin") / n_called).otherwise(0.0).alias("_fdr"),
        (pl.col("_nin") / pl.max_horizontal(n_called, n_gt)).alias("_red_code"),
        (pl.col("_pos") / n_gt).alias("_tma"),
        (pl.col("_run") / n_gt).alias("_tma_code"),
        (n_called / n_gt).alias("_prefail"),
        (
            pl.col("_done")
            & (n_called > 0)
            & (pl.col("called_tools").list.last() == pl.col("gt_tools").list.last())
        )
        .fill_null(False)
        .alias("_target"),
    )
    done = pl.col("_done")
    specs: list[tuple[str, str, pl.Expr | None]] = [
        ("tool_chain_levenshtein", "_lev", None),
        ("tool_chain_levenshtein_code", "_lev", done),
        ("false_discovery_rate", "_fdr", None),
        ("tool_matching_accuracy", "_tma", None),
        ("redundancy_rate_code", "_red_code", done),
        ("tool_matching_accuracy_code", "_tma_code", done),
    ]
    if has_completed:
        specs += [
            ("execution_completion_rate", "_done", None),
            ("pre_failure_progress", "_prefail", ~done),
            ("target_hit_rate", "_target", None),
        ]
    if "plan_tools" in frame.columns:
        has_plan = pl.col("plan_tools").is_not_null()
        plan = frame.get_column("plan_tools").fill_null(empty).to_list()
        frame = frame.with_columns(
            pl.Series("_plan_lev", sequence_levenshtein(plan, called), dtype=pl.Float64),
            pl.Series("_plan_gt_lev", sequence_levenshtein(gt_list, plan), dtype=pl.Float64),
        )
        specs += [("plan_levenshtein", "_plan_lev", has_plan),
                  ("plan_gt_levenshtein", "_plan_gt_lev", has_plan),
                  ("plan_levenshtein_code", "_plan_lev", has_plan & done),
                  ("plan_gt_levenshtein_code", "_plan_gt_lev", has_plan & done)]  # fmt: skip
    if "selection_ranks" in frame.columns or "selection_sizes" in frame.columns:
        frame = _selection_scores(frame, where)
        specs.append(("optimal_tool_score", "_ots", pl.col("_ots").is_not_null()))
    if "candidate_tools" in frame.columns:
        frame = _win_rate_code(frame)
        specs.append(
            ("optimal_tool_score_code", "_ots_code", pl.col("candidate_tools").is_not_null())
        )
    if "milestone" in frame.columns:
        if frame.schema["milestone"] not in (pl.String, pl.Null):
            raise InvalidTypeError(
                f"{where}: column 'milestone': expected category names (strings), got "
                f"{frame.schema['milestone']}"
            )
        frame = frame.with_columns(
            pl.col("called_tools").list.contains(pl.col("milestone")).alias("_milestone")
        )
        specs.append(("milestone_hit_rate", "_milestone", pl.col("milestone").is_not_null()))
    frame, unsolvable_specs = _unsolvability(frame, has_log, where)
    specs += unsolvable_specs

    # ---- final-response text metrics
    if "reference_answer" in frame.columns and text_metrics != "none":
        frame, text_specs = _text_metrics(frame, text_metrics, has_log, where)
        specs += text_specs

    if conv == "code":
        specs = [x for x in specs if x[0] in _CODE_METRICS]
    ungraded = {m: "_no_chain" for m in _CHAIN_METRICS}
    ungraded |= {m: "_ug_text" for m in ("bleu", "rouge_l", "f1")}
    ungraded |= {m: "_ug_text_code" for m in ("bleu1_code", "rouge_l_code", "f1_code")}
    missing = no_response(frame)
    if missing is None and has_log:
        conclusion = pl.col("log").str.extract(r"(?s)Conclusion:(.*)", 1)
        missing = conclusion.is_null() | (conclusion.str.strip_chars() == "")
    if missing is not None:
        frame = frame.with_columns(missing.alias("_missing"))
    table = summarize_metrics(frame, specs, benchmark=BENCHMARK, by_task=has_task,
                              cluster=cluster, options=opts, ungraded=ungraded,
                              missing="_missing" if missing is not None else None,
                              interval=interval)  # fmt: skip
    notes = [
        "Paper metrics over all cases; *_code metrics reproduce the reference code (redundancy "
        "over max(|pred|,|gt|), longest common contiguous run, on completed cases; win-rate scan "
        "from the end of the candidate list).",
        "pre_failure_progress = |called|/|gt| on failed cases only; target_hit_rate = completed "
        "and last called category == last ground-truth category, over all cases.",
    ]
    used = {m for m, _, _ in specs}
    k = int(frame.get_column("_no_chain").sum())
    if k:
        notes.append(
            f"tool-chain metrics: {k} of {frame.height} cases have no tool record (called_tools "
            "is null) and are scored as an empty chain; n_ungraded counts them per row."
        )
    for flag, metrics in (("_ug_text", "bleu, rouge_l, f1"),
                          ("_ug_text_code", "bleu1_code, rouge_l_code, f1_code")):  # fmt: skip
        k = int(frame.get_column(flag).sum()) if flag in frame.columns else 0
        if k and any(m in used for m in metrics.split(", ")):
            notes.append(
                f"{metrics}: {k} of {frame.height} cases with a reference answer have no "
                "response and score 0; n_ungraded counts them per row."
            )
    notes.append(
        "tool_chain/plan/plan_gt_levenshtein average over all cases (generalEval scripts); "
        "their _code variants over completed cases only (multihop_IO_passrate.py)."
    )
    if conv == "code":
        notes.append(
            "code convention: the official EvalMetrics scripts' aggregates, pooled over all "
            "cases of a run (no per-chain split): passrate1 = execution_completion_rate, "
            "passrate2 = target_hit_rate, redundancy = redundancy_rate_code, precision = "
            "tool_matching_accuracy_code, failed length ratio = pre_failure_progress, win rate "
            "= optimal_tool_score_code, milestone = milestone_hit_rate, F1/BLEU/ROUGE = "
            "f1_code/bleu1_code/rouge_l_code, deny rate / category match (multihop_deny1.py) = "
            "unsolvability_awareness_rate / unsolvability_grounding_rate."
        )
    if interval != "bootstrap":
        notes.append(interval_note(interval, opts))
    distances = ("tool_chain_levenshtein", "plan_levenshtein", "plan_gt_levenshtein")
    counts = tuple(f"{m}{sfx}" for m in distances for sfx in ("", "_code"))
    percent = [m for m in table.get_column("metric").unique().to_list() if m not in counts]
    return Report(table, benchmark=BENCHMARK, title="RadA-BenchPlat", notes=tuple(notes),
                  percent=percent, interval=interval_text(opts, interval=interval),
                  convention=_CONVENTIONS[conv])  # fmt: skip
