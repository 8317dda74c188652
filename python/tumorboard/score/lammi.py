r"""LAMMI-Pathology agent metrics and scorer.

LAMMI-Pathology (Su et al., arXiv 2602.18773) scores pathology tool-using agents with a
trajectory success score, a tool redundancy rate, a tool consistency F1, judge-based answer
consistency and hallucination rate, and multiple-choice F1. The paper's equations were lost in
text extraction and the reference repository contains no metric code (at commit ``d4dea63`` it
holds only its ``README.md`` and the figures under ``assets/``), so the exact definitions
implemented here are written out below and in each function; they follow the paper's prose.

Definitions (per sample i, i.e. one trajectory answering one question):

* Trajectory success score. ``v_i`` = 1 if the final output is valid (parsable, in the required
  format) else 0, ``s_i`` = number of successful tool calls, ``t_i`` = number of tool calls,
  ``rho_i = s_i / t_i`` the call-success ratio and, when the trajectory makes no tool call
  (``t_i = 0``), ``rho_i = no_call_ratio``. Two readings (``convention=``):

  - ``"paper"`` (default): ``TSS_i = (v_i + rho_i) / 2``, the mean of output validity and call
    success, with ``no_call_ratio = 0`` (no call, no call success). This is the reading the
    paper's numbers support: in its Table 4 a planner with TRR 0.000 scores TSS 0.500-0.504 at
    every NITR, which fits valid outputs (v = 1) averaged with zero call success when no call
    is made: 0.5 when no trajectory calls a tool, slightly above when a few do (the
    equations of §9 did not survive text extraction, so the form is inferred from those
    printed values; under the product form such a planner would score 1).
  - ``"tumorboard"``: ``TSS_i = v_i * rho_i`` with ``no_call_ratio = 1`` (no call failed), the
    definition tumorboard used before, under which a trajectory without calls scores ``v_i``.

  ``no_call_ratio`` can be set explicitly for either reading. A trajectory succeeds when
  ``TSS_i >= threshold`` (default 1.0: valid output and every call successful; under the paper
  reading a trajectory without calls cannot reach 1 unless ``no_call_ratio = 1``).
  Reported: ``trajectory_success_score`` = mean TSS and ``trajectory_success_rate`` = share of
  successful trajectories, over all samples.
* Tool redundancy rate ``TRR_i = r_i / t_i``: call k is redundant when an earlier call
  ``j < k`` of the same trajectory has the same tool name and an input whose token Jaccard
  similarity with call k's input is at least 0.7. Tokens are the lowercased maximal runs of
  Unicode word characters (regex ``\w+``) of the input text, as a set; two inputs without any
  token have Jaccard 1. ``tool_redundancy_rate`` = mean of ``TRR_i`` over the samples with at
  least one tool call (``TRR`` is 0/0 otherwise and those samples are left out; n counts the
  samples used). A group (track, model, tools[, task]) in which no sample calls a tool reports
  TRR 0 over all its samples (no call, no redundant call; n = its samples, interval [0, 0]),
  as the paper's Table 4 prints 0.000 for the planner that calls no tool (TSS 0.500), rather
  than leaving the group's row out.
* Tool consistency F1: with E_i the set of expected tools and U_i the set of tool names used,
  ``P = |E ∩ U| / |U|``, ``R = |E ∩ U| / |E|``, ``F1_i = 2PR / (P + R) = 2|E ∩ U| / (|E| + |U|)``;
  ``F1_i = 1`` when both sets are empty and 0 when only one is. ``tool_consistency_f1`` = mean
  over the samples that list expected tools.
* Answer consistency and hallucination: judge scores supplied as columns;
  ``answer_consistency`` = mean judge score (on the judge's own scale) and
  ``hallucination_rate`` = mean of the hallucination flag (or score in [0, 1]), each over the
  samples where the column is not null.
* Multiple-choice F1: micro-averaged F1 over single-answer multiple-choice questions. Every
  question has exactly one gold option and one predicted option, so each wrong answer is one
  false positive and one false negative and ``micro-F1 = 2TP / (2TP + FP + FN) = TP / n`` =
  accuracy; ``mc_f1`` is reported as the share of correct answers (options compared after
  stripping whitespace and uppercasing; a missing prediction is wrong), over the samples with
  a gold option.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt
import polars as pl

from .._typing import Frame
from ..errors import InvalidArgumentError, InvalidTypeError
from ..stats import BootstrapOptions
from ..traj import Store
from . import _store, _validate
from ._coverage import no_response
from ._summary import summarize_metrics
from ._validate import bool_column, require_columns, string_column
from .report import Report, interval_note, interval_text

__all__ = [
    "input_jaccard",
    "input_tokens",
    "score",
    "multiple_choice_f1",
    "tool_consistency_f1",
    "tool_redundancy_rate",
    "trajectory_success_score",
]

BENCHMARK = "lammi"
REQUIRED = ("model", "tool_calls", "output_valid")
OPTIONAL = (
    "track", "tools", "task", "expected_tools", "answer_consistency", "hallucination",
    "mc_prediction", "mc_answer", "response",
)  # fmt: skip
#: The metrics computed from the tool record: ungraded on a sample without it.
_TOOL_METRICS = (
    "trajectory_success_score", "trajectory_success_rate", "tool_redundancy_rate",
    "tool_consistency_f1",
)  # fmt: skip
_TOKEN = r"\w+"
_TOKEN_RE = re.compile(_TOKEN)


# ------------------------------------------------------------------------------ metric functions


def _tss_options(convention: str | None, no_call_ratio: float | None) -> tuple[str, float]:
    """Return the checked (convention, no_call_ratio) of the trajectory success score."""
    conv = _validate.convention(convention, allowed=("paper", "tumorboard"), default="paper",
                                where="lammi")  # fmt: skip
    if no_call_ratio is None:
        return conv, 0.0 if conv == "paper" else 1.0
    ok = isinstance(no_call_ratio, (int, float)) and not isinstance(no_call_ratio, bool)
    if not ok or not 0.0 <= float(no_call_ratio) <= 1.0:
        raise InvalidArgumentError(
            f"no_call_ratio: expected a number in [0, 1] (the call-success ratio of a trajectory "
            f"without tool calls), got {no_call_ratio!r}"
        )
    return conv, float(no_call_ratio)


def trajectory_success_score(
    output_valid: npt.ArrayLike,
    n_success: npt.ArrayLike,
    n_calls: npt.ArrayLike,
    *,
    convention: str | None = None,
    no_call_ratio: float | None = None,
) -> npt.NDArray[np.float64]:
    """Compute the trajectory success score of each trajectory (module notes).

    ``"paper"``: ``TSS = (v + rho) / 2``; ``"tumorboard"``: ``TSS = v * rho``; with
    ``rho = s / t`` and ``rho = no_call_ratio`` when ``t = 0``.

    Parameters
    ----------
    output_valid : array_like of bool
        Whether each final output is valid.
    n_success, n_calls : array_like of int
        Successful tool calls and all tool calls of each trajectory (``0 <= s <= t``).
    convention : {"paper", "tumorboard"}, optional
        The reading of the score; None is "paper".
    no_call_ratio : float, optional
        ``rho`` of a trajectory without tool calls, in [0, 1]; None: 0 for "paper", 1 for
        "tumorboard".

    Returns
    -------
    ndarray of float64
        The TSS of each trajectory, in [0, 1].

    Raises
    ------
    InvalidArgumentError
        Counts that are negative, more successful calls than calls, an unknown convention or a
        ``no_call_ratio`` outside [0, 1].

    Examples
    --------
    A valid output without any tool call:

    >>> trajectory_success_score([True], [0], [0]).tolist()
    [0.5]
    >>> trajectory_success_score([True], [0], [0], convention="tumorboard").tolist()
    [1.0]
    """
    conv, empty = _tss_options(convention, no_call_ratio)
    v = np.asarray(output_valid, dtype=bool)
    s = np.asarray(n_success, dtype=np.float64)
    t = np.asarray(n_calls, dtype=np.float64)
    if (s < 0).any() or (t < 0).any() or (s > t).any():
        raise InvalidArgumentError("n_success, n_calls: expected 0 <= n_success <= n_calls")
    ratio = np.divide(s, t, out=np.full(np.broadcast(s, t).shape, empty), where=t > 0)
    if conv == "paper":
        return ((v.astype(np.float64) + ratio) / 2.0).astype(np.float64)
    return np.where(v, ratio, 0.0).astype(np.float64)


def input_tokens(text: str | None) -> frozenset[str]:
    r"""Return the token set of a tool-call input: lowercased maximal runs of ``\w+``.

    Tokens are the maximal runs of word characters of the lowercased text; None has no token.

    Parameters
    ----------
    text : str or None
        The tool-call input.

    Returns
    -------
    frozenset of str
        The tokens.

    Examples
    --------
    >>> sorted(input_tokens('{"slide": "A-12", "Magnification": 20}'))
    ['12', '20', 'a', 'magnification', 'slide']
    """
    if text is None:
        return frozenset()
    return frozenset(_TOKEN_RE.findall(str(text).lower()))


def input_jaccard(a: str | None, b: str | None) -> float:
    """Compute the Jaccard similarity of two tool inputs' token sets; 1.0 when both have none.

    Parameters
    ----------
    a, b : str or None
        The two tool inputs.

    Returns
    -------
    float
        The Jaccard similarity of their token sets, in [0, 1].
    """
    ta, tb = input_tokens(a), input_tokens(b)
    union = len(ta | tb)
    return 1.0 if union == 0 else len(ta & tb) / union


def tool_redundancy_rate(
    names: Sequence[str], inputs: Sequence[str | None], *, threshold: float = 0.7
) -> float:
    """Compute the share of one trajectory's calls that repeat an earlier call (module notes).

    Call k is redundant when some call ``j < k`` has ``names[j] == names[k]`` and
    ``input_jaccard(inputs[j], inputs[k]) >= threshold``.

    Parameters
    ----------
    names : sequence of str
        The tool name of each call, in order.
    inputs : sequence of str or None
        The input text of each call.
    threshold : float, default 0.7
        Input-token Jaccard at or above which a same-tool call repeats an earlier one.

    Returns
    -------
    float
        Redundant calls / calls; NaN for a trajectory without calls (0/0).

    Raises
    ------
    InvalidArgumentError
        ``names`` and ``inputs`` of different lengths.

    Examples
    --------
    >>> tool_redundancy_rate(["zoom", "zoom", "stain"], ["x=1 y=2", "y=2 x=1", "x=1 y=2"])
    0.3333333333333333
    """
    if len(names) != len(inputs):
        raise InvalidArgumentError(
            f"names and inputs: expected one input per call, got {len(names)} and {len(inputs)}"
        )
    if not names:
        return float("nan")
    tokens = [input_tokens(x) for x in inputs]
    redundant = 0
    for k in range(1, len(names)):
        for j in range(k):
            if names[j] != names[k]:
                continue
            union = len(tokens[j] | tokens[k])
            jac = 1.0 if union == 0 else len(tokens[j] & tokens[k]) / union
            if jac >= threshold:
                redundant += 1
                break
    return redundant / len(names)


def tool_consistency_f1(expected: Iterable[str], used: Iterable[str]) -> float:
    """Compute the set F1 of expected and used tool names: ``2|E ∩ U| / (|E| + |U|)``.

    The F1 is 1.0 when both sets are empty.

    Parameters
    ----------
    expected : iterable of str
        The expected tool names.
    used : iterable of str
        The tool names used.

    Returns
    -------
    float
        The F1, in [0, 1].

    Examples
    --------
    >>> tool_consistency_f1(["segment", "count", "grade"], ["segment", "count", "zoom", "zoom"])
    0.6666666666666666
    """
    e, u = set(expected), set(used)
    if not e and not u:
        return 1.0
    return 2.0 * len(e & u) / (len(e) + len(u))


def _norm_option(x: str | None) -> str | None:
    """Return an option label stripped and uppercased (None stays None)."""
    return None if x is None else x.strip().upper()


def multiple_choice_f1(preds: Sequence[str | None], answers: Sequence[str]) -> float:
    """Compute the micro-F1 of single-answer multiple choice, which equals accuracy (module notes).

    Options are compared after stripping whitespace and uppercasing; a None prediction is wrong.

    Parameters
    ----------
    preds : sequence of str or None
        The predicted option of each question.
    answers : sequence of str
        The gold option of each question.

    Returns
    -------
    float
        The micro-F1.

    Raises
    ------
    InvalidArgumentError
        Sequences of different lengths, or no question.

    Examples
    --------
    >>> multiple_choice_f1(["A", "b ", None, "D"], ["A", "B", "C", "C"])
    0.5
    """
    if len(preds) != len(answers):
        raise InvalidArgumentError(
            f"preds and answers: expected the same length, got {len(preds)} and {len(answers)}"
        )
    if not answers:
        raise InvalidArgumentError("answers: expected at least one question")
    tp = sum(
        1
        for p, a in zip(preds, answers, strict=True)
        if p is not None and _norm_option(p) == _norm_option(a)
    )
    n = len(answers)
    fp = fn = n - tp  # each wrong (or missing) answer: one wrong option predicted, gold missed
    return 2.0 * tp / (2.0 * tp + fp + fn)


# ------------------------------------------------------------------------------------- scorer


def _calls(frame: pl.DataFrame) -> pl.DataFrame:
    """Return one row per tool call: _row, _k (position in the trajectory), name, input, success."""
    s = frame.get_column("tool_calls")
    dtype = s.dtype
    if not isinstance(dtype, pl.List) or not isinstance(dtype.inner, pl.Struct):
        raise InvalidTypeError(
            "lammi: column 'tool_calls': expected list[struct{name: str, input: str, success: "
            f"bool}}], got {dtype}"
        )
    fields = {f.name: f.dtype for f in dtype.inner.fields}
    for f in ("name", "input", "success"):
        if f not in fields:
            raise InvalidArgumentError(
                f"lammi: the structs of column 'tool_calls' have no field {f!r}; expected fields "
                f"name (str), input (str), success (bool), got {', '.join(fields) or 'none'}"
            )
    if fields["success"] != pl.Boolean:
        raise InvalidTypeError(
            f"lammi: tool_calls.success: expected boolean, got {fields['success']}"
        )
    if fields["input"] not in (pl.String, pl.Null) and not fields["input"].is_numeric():
        raise InvalidTypeError(
            f"lammi: tool_calls.input: expected a string (e.g. JSON text), got {fields['input']}"
        )
    calls = (
        frame.select(pl.col("_row"), pl.col("tool_calls"))
        .explode("tool_calls")
        .filter(pl.col("tool_calls").is_not_null())
        .unnest("tool_calls")
        .with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over("_row").alias("_k"))
    )
    if calls.get_column("name").null_count():
        first = int(calls.filter(pl.col("name").is_null()).get_column("_row")[0])
        raise InvalidArgumentError(
            f"lammi: a tool call without a name in column 'tool_calls' at row {first}"
        )
    return calls.select(
        "_row",
        "_k",
        pl.col("name").cast(pl.String),
        pl.col("input").cast(pl.String).fill_null(""),
        pl.col("success").fill_null(False),
    )


def _per_sample(frame: pl.DataFrame, *, threshold: float, redundancy: float, convention: str,
                no_call_ratio: float) -> pl.DataFrame:  # fmt: skip
    """Add the per-sample TSS, success flag, redundancy rate and used tools to ``frame``."""
    calls = _calls(frame)
    counts = calls.group_by("_row").agg(
        pl.len().cast(pl.Int64).alias("_t"),
        pl.col("success").sum().cast(pl.Int64).alias("_s"),
        pl.col("name").unique().alias("_used"),
    )
    tokens = calls.with_columns(
        pl.col("input").str.to_lowercase().str.extract_all(_TOKEN).list.unique().alias("_tok")
    ).select("_row", "_k", "name", "_tok")
    pairs = tokens.join(tokens, on=["_row", "name"], how="inner", suffix="_e").filter(
        pl.col("_k_e") < pl.col("_k")
    )
    inter = pl.col("_tok").list.set_intersection(pl.col("_tok_e")).list.len()
    union = pl.col("_tok").list.set_union(pl.col("_tok_e")).list.len()
    jac = pl.when(union == 0).then(1.0).otherwise(inter / union)
    redundant = (
        pairs.with_columns(jac.alias("_jac"))
        .filter(pl.col("_jac") >= redundancy)
        .select("_row", "_k")
        .unique()
        .group_by("_row")
        .agg(pl.len().cast(pl.Int64).alias("_r"))
    )
    out = (
        frame.join(counts, on="_row", how="left")
        .join(redundant, on="_row", how="left")
        .with_columns(
            pl.col("_t").fill_null(0),
            pl.col("_s").fill_null(0),
            pl.col("_r").fill_null(0),
            pl.col("_used").fill_null(pl.lit([], dtype=pl.List(pl.String))),
        )
    )
    rho = pl.when(pl.col("_t") == 0).then(no_call_ratio).otherwise(pl.col("_s") / pl.col("_t"))
    if convention == "paper":
        tss = (pl.col("output_valid").cast(pl.Float64) + rho) / 2.0
    else:
        tss = pl.when(pl.col("output_valid")).then(rho).otherwise(0.0)
    out = out.with_columns(tss.alias("_tss")).with_columns(
        (pl.col("_tss") >= threshold).alias("_success"),
        pl.when(pl.col("_t") > 0).then(pl.col("_r") / pl.col("_t")).alias("_trr"),
    )
    return out.sort("_row")


def _redundancy_subset(per: pl.DataFrame, *, has_task: bool) -> tuple[pl.DataFrame, pl.Expr, int]:
    """Return the frame with TRR 0 where a sample has no call, the TRR subset, no-call groups.

    The subset holds the samples with calls, and every sample of a group (track, model, tools[,
    task]) in which no sample calls a tool; that group's TRR is then 0 (module notes).
    """
    keys = ["track", "model", "tools", *(["task"] if has_task else [])]
    no_call_group = pl.col("_t").max().over(keys) == 0
    n_groups = per.filter(no_call_group).select(pl.struct(keys).n_unique()).item()
    per = per.with_columns(pl.col("_trr").fill_null(0.0))
    return per, (pl.col("_t") > 0) | no_call_group, int(n_groups)


def score(
    df: Frame | Store | str | os.PathLike[str],
    *,
    options: BootstrapOptions | None = None,
    cluster: str | None = None,
    threshold: float = 1.0,
    redundancy_threshold: float = 0.7,
    convention: str | None = None,
    no_call_ratio: float | None = None,
    interval: str = "bootstrap",
) -> Report:
    """Score LAMMI-Pathology runs with bootstrap CIs.

    The metrics: trajectory success, tool redundancy, tool consistency, judge-based answer
    consistency and hallucination, and multiple-choice F1.

    Definitions: see the module docstring (they are written out there because the paper's
    equations are not recoverable). Every metric is a mean of per-sample values with a
    bootstrap percentile CI (:func:`tumorboard.score.summarize`); metrics defined on a subset
    of samples (redundancy: samples with calls; the judge and multiple-choice metrics: samples
    where their columns are not null) are averaged over that subset, whose size is ``n``.

    Parameters
    ----------
    df : polars DataFrame or LazyFrame, pyarrow Table, or a trajectory Store
        A trajectory Store (or its directory) is read with
        :func:`~tumorboard.score.store_frame` (docs/trajectory-schema.md).
        Otherwise one row per sample (trajectory). Required columns:

        * ``model`` (str): the agent.
        * ``tool_calls`` (list[struct{name: str, input: str, success: bool}]): the tool calls
          in order; a null list means no call, a null ``success`` counts as a failed call and a
          null ``input`` as an empty one.
        * ``output_valid`` (bool): whether the final output is valid.

        Optional columns: ``track`` (str, default "default"), ``tools`` (bool, default False),
        ``task`` (str; without it every sample is in task "all" and there is no overall row),
        ``expected_tools`` (list[str]; enables ``tool_consistency_f1``),
        ``answer_consistency`` (numeric judge score; enables ``answer_consistency``),
        ``hallucination`` (bool, or numeric in [0, 1]; enables ``hallucination_rate``),
        ``mc_prediction`` and ``mc_answer`` (str option labels; enable ``mc_f1``),
        ``response`` (str: the final answer; gives ``n_missing``), and the ``cluster`` column
        when given.
    options : BootstrapOptions, optional
        The bootstrap of every interval (default ``BootstrapOptions()``).
    cluster : str, optional
        A column whose values are resampled whole (e.g. ``patient_id``).
    threshold : float, default 1.0
        A trajectory succeeds when its TSS is at least this.
    redundancy_threshold : float, default 0.7
        Input-token Jaccard at or above which a same-tool call repeats an earlier one.
        The redundancy rate is averaged over the samples with calls; a group without any call
        reports 0 over all its samples (module docstring).
    convention : {"paper", "tumorboard"}, optional
        The reading of the trajectory success score (module docstring); None is "paper":
        ``TSS = (valid + s/t) / 2``. "tumorboard" is ``valid * s/t``. The report names it
        (``Report.convention``).
    no_call_ratio : float, optional
        ``s/t`` of a trajectory without tool calls, in [0, 1]; None: 0 under "paper", 1 under
        "tumorboard".

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
        Metrics ``trajectory_success_score``, ``trajectory_success_rate``,
        ``tool_redundancy_rate`` and, when their columns are present, ``tool_consistency_f1``,
        ``answer_consistency``, ``hallucination_rate``, ``mc_f1``; one row per (track, model,
        tools, task, metric) plus the task "overall" (mean of the task means, joint-resampling
        CI) when the frame has a ``task`` column.
        Every row has the coverage columns ``n_graded``, ``n_ungraded`` and ``n_missing``
        (int64; definitions in :mod:`tumorboard.score.report`; summed over tasks on the
        overall row). What "graded" means here: the trajectory metrics (success score and
        rate, redundancy, tool consistency F1) grade a sample that has its tool record; a null
        ``tool_calls`` (no record) is scored as making no call, as before, and is ungraded
        (the store gives an empty list to a sample of a run with events that called no tool).
        ``answer_consistency`` and ``hallucination_rate`` grade a sample with a judge score; a
        null one is left out (``n_graded`` = ``n``). ``mc_f1`` grades a sample whose
        predicted option was read; a gold option without a prediction counts as wrong and is
        ungraded. ``n_missing``: the ungraded samples without any response (a null or blank
        ``response``; null without that column).
    """
    where = "lammi"
    conv, empty = _tss_options(convention, no_call_ratio)
    df = _store.resolve(df, BENCHMARK)
    opts = BootstrapOptions.resolve(options)
    interval = _validate.interval(interval, cluster=cluster, where=where)
    frame = _validate.input_frame(df, required=REQUIRED, optional=OPTIONAL, where=where,
                                  cluster=cluster)  # fmt: skip
    for name, v, lo, hi in (("threshold", threshold, 0.0, 1.0),
                            ("redundancy_threshold", redundancy_threshold, 0.0, 1.0)):  # fmt: skip
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise InvalidArgumentError(f"{name}: expected a number in [{lo}, {hi}], got {v!r}")
    frame = frame.with_columns(
        string_column(frame, "model", where=where),
        bool_column(frame, "output_valid", where=where),
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"),
        pl.col("tool_calls").is_null().alias("_no_tools"),
    )
    missing = no_response(frame)
    if missing is not None:
        frame = frame.with_columns(missing.alias("_missing"))
    has_task = "task" in frame.columns
    if has_task:
        frame = frame.with_columns(string_column(frame, "task", where=where))
    per = _per_sample(frame, threshold=float(threshold), redundancy=float(redundancy_threshold),
                      convention=conv, no_call_ratio=empty)  # fmt: skip

    per, trr_subset, no_call_groups = _redundancy_subset(per, has_task=has_task)
    specs: list[tuple[str, str, pl.Expr | None]] = [
        ("trajectory_success_score", "_tss", None),
        ("trajectory_success_rate", "_success", None),
        ("tool_redundancy_rate", "_trr", trr_subset),
    ]
    ungraded: dict[str, str] = dict.fromkeys(_TOOL_METRICS, "_no_tools")
    if "expected_tools" in per.columns:
        exp = per.get_column("expected_tools")
        if not (isinstance(exp.dtype, pl.List) and exp.dtype.inner in (pl.String, pl.Null)):
            raise InvalidTypeError(
                f"{where}: column 'expected_tools': expected list[str], got {exp.dtype}"
            )
        e = pl.col("expected_tools").list.drop_nulls().list.unique()
        inter = e.list.set_intersection(pl.col("_used")).list.len()
        total = e.list.len() + pl.col("_used").list.len()
        f1 = pl.when(total == 0).then(1.0).otherwise(2.0 * inter / total)
        per = per.with_columns(
            pl.when(pl.col("expected_tools").is_not_null()).then(f1).alias("_tcf1")
        )
        specs.append(("tool_consistency_f1", "_tcf1", pl.col("_tcf1").is_not_null()))
    for col, metric in (("answer_consistency", "answer_consistency"),
                        ("hallucination", "hallucination_rate")):  # fmt: skip
        if col not in per.columns:
            continue
        s = per.get_column(col)
        if not (s.dtype.is_numeric() or s.dtype == pl.Boolean):
            raise InvalidTypeError(
                f"{where}: column {col!r}: expected numeric or boolean, got {s.dtype}"
            )
        vals = s.cast(pl.Float64)
        if vals.is_nan().any():
            first = int(vals.is_nan().arg_true()[0])
            raise InvalidArgumentError(f"{where}: column {col!r} has a NaN at row {first}")
        if col == "hallucination" and ((vals < 0) | (vals > 1)).any():
            first = int(((vals < 0) | (vals > 1)).arg_true()[0])
            raise InvalidArgumentError(
                f"{where}: column 'hallucination': expected a flag or a score in [0, 1], got "
                f"{vals[first]} at row {first}"
            )
        per = per.with_columns(vals.alias(f"_{col}"), vals.is_null().alias(f"_ug_{col}"))
        specs.append((metric, f"_{col}", pl.col(f"_{col}").is_not_null()))
        ungraded[metric] = f"_ug_{col}"
    if "mc_answer" in per.columns or "mc_prediction" in per.columns:
        require_columns(per, ["mc_prediction", "mc_answer"], where=f"{where} (multiple choice)")
        for col in ("mc_prediction", "mc_answer"):
            if per.schema[col] not in (pl.String, pl.Null):
                raise InvalidTypeError(
                    f"{where}: column {col!r}: expected strings, got {per.schema[col]}"
                )
        pred = pl.col("mc_prediction").cast(pl.String).str.strip_chars().str.to_uppercase()
        gold = pl.col("mc_answer").cast(pl.String).str.strip_chars().str.to_uppercase()
        per = per.with_columns(
            (pred == gold).fill_null(False).alias("_mc"),
            (pl.col("mc_answer").is_not_null() & pl.col("mc_prediction").is_null()).alias("_ug_mc"),
        )
        specs.append(("mc_f1", "_mc", pl.col("mc_answer").is_not_null()))
        ungraded["mc_f1"] = "_ug_mc"

    table = summarize_metrics(per, specs, benchmark=BENCHMARK, by_task=has_task, cluster=cluster,
                              options=opts, ungraded=ungraded, interval=interval,
                              missing="_missing" if missing is not None else None)  # fmt: skip
    notes = [
        (
            f"TSS = (valid + successful/total tool calls) / 2, with {empty:g} for the call "
            "ratio of a trajectory without calls (the paper's reading)"
            if conv == "paper"
            else f"TSS = valid * successful/total tool calls ({empty:g} when no call)"
        )
        + f"; a trajectory succeeds when TSS >= {threshold}.",
        f"Tool redundancy: a call repeats an earlier same-name call with input-token Jaccard "
        f">= {redundancy_threshold}; averaged over samples with at least one call.",
        "Tool consistency F1 = 2|E∩U|/(|E|+|U|) per sample; mc_f1 = micro-F1 = accuracy.",
    ]
    if no_call_groups:
        notes.append(
            f"tool_redundancy_rate: {no_call_groups} group(s) without any tool call report 0 "
            "over all their samples (LAMMI-Pathology Table 4 prints TRR 0.000 for a planner that "
            "calls no tool)."
        )
    k = int(per.get_column("_no_tools").sum())
    if k:
        notes.append(
            f"{', '.join(_TOOL_METRICS[:3])}, tool_consistency_f1: {k} of {per.height} samples "
            "have no tool record (tool_calls is null) and are scored as making no call; "
            "n_ungraded counts them per row."
        )
    for metric, flag in ungraded.items():
        if metric in _TOOL_METRICS:
            continue
        k = int(per.get_column(flag).sum())
        if k:
            what = (
                "samples with a gold option have no prediction and count as wrong"
                if metric == "mc_f1"
                else "samples have no judge score and are left out"
            )
            notes.append(f"{metric}: {k} of {per.height} {what}; n_ungraded counts them per row.")
    if interval != "bootstrap":
        notes.append(interval_note(interval, opts))
    percent = [m for m in table.get_column("metric").unique().to_list()
               if m != "answer_consistency"]  # fmt: skip
    conv_text = (
        f"paper (TSS = (valid + s/t) / 2, s/t = {empty:g} without calls; LAMMI-Pathology Table 4)"
        if conv == "paper"
        else f"tumorboard (TSS = valid * s/t, s/t = {empty:g} without calls)"
    )
    return Report(table, benchmark=BENCHMARK, title="LAMMI-Pathology", notes=tuple(notes),
                  percent=percent, interval=interval_text(opts, interval=interval),
                  convention=conv_text)  # fmt: skip
