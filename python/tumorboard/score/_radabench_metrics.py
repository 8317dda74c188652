"""RadA-BenchPlat metrics of one case, as the paper defines them, and the readers of a run log.

The per-case definitions that :mod:`tumorboard.score.radabench` documents and re-exports: the
tool-chain metrics of one called chain against its ground truth (Levenshtein distance, false
discovery rate, positional tool matching, the optimal-tool score of the selection steps,
pre-failure progress), the reference code's log patterns (an execution error, the conclusion,
a declined call and the category it names), and the paper-standard text metrics of final
responses. The scorer computes the same metrics vectorised over a frame of cases; the reference
code's variants are in :mod:`tumorboard.score._radabench_reference`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..errors import InvalidArgumentError, InvalidTypeError
from ..text import levenshtein

# The code's failure detector (MAGIC-AI4Med/RadABench
# EvalPlat/EvalMetrics/multihop_IO_passrate.py@acbcf87): no DOTALL, so the message is one line.
_FAILURE = r"Error Type: (\w+)\nError Message: (.+?)\nTraceback:"
_FAILURE_RE = re.compile(_FAILURE)
_DENY = "Deny Call Dict:"
_CATEGORY = r"'Category': '([^']+)'"
_CATEGORY_RE = re.compile(_CATEGORY)


# --------------------------------------------------------------------------- tool-chain metrics


def tool_chain_levenshtein(pred: Sequence[str], gt: Sequence[str]) -> int:
    """Compute the element-level Levenshtein distance of the called and the ground-truth chain.

    Parameters
    ----------
    pred : sequence of str
        The called chain (tool categories).
    gt : sequence of str
        The ground-truth chain.

    Returns
    -------
    int
        The edit distance.

    Examples
    --------
    >>> tool_chain_levenshtein(["Anatomy Classifier", "Organ Segmentor"],
    ...                        ["Anatomy Classifier", "Modality Classifier", "Organ Segmentor"])
    1
    """
    return levenshtein(list(gt), list(pred))


def _not_in_gt(pred: Sequence[str], gt: Sequence[str]) -> int:
    """Count the called tools (with repetition) whose category is not in ``gt``."""
    g = set(gt)
    return sum(1 for t in pred if t not in g)


def false_discovery_rate(pred: Sequence[str], gt: Sequence[str]) -> float:
    """Compute the paper's false discovery rate of a called chain.

    The called tools (with repetition) whose category is not in ``gt``, over ``|pred|``; 0 for an
    empty chain.

    Parameters
    ----------
    pred : sequence of str
        The called chain (tool categories).
    gt : sequence of str
        The ground-truth chain.

    Returns
    -------
    float
        The rate, in [0, 1].

    Examples
    --------
    >>> false_discovery_rate(["A", "X", "B", "X"], ["A", "B", "C"])
    0.5
    """
    return 0.0 if len(pred) == 0 else _not_in_gt(pred, gt) / len(pred)


def tool_matching_accuracy(pred: Sequence[str], gt: Sequence[str]) -> float:
    """Compute the paper's ``sum_k [pred[k] == gt[k]] / |gt|`` over the common positions.

    Parameters
    ----------
    pred : sequence of str
        The called chain (tool categories).
    gt : sequence of str
        The ground-truth chain.

    Returns
    -------
    float
        The accuracy, in [0, 1].

    Raises
    ------
    InvalidArgumentError
        An empty ground-truth chain.

    Examples
    --------
    >>> tool_matching_accuracy(["A", "X", "C"], ["A", "B", "C", "D"])
    0.5
    """
    if len(gt) == 0:
        raise InvalidArgumentError("gt: the ground-truth chain is empty")
    return sum(1 for p, g in zip(pred, gt, strict=False) if p == g) / len(gt)


def optimal_tool_score(rank: npt.ArrayLike, n_candidates: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Compute the paper's ``(N - R + 1) / N`` for choosing the rank-R tool (1 = best) of N.

    N is the number of candidate tools. Vectorized over steps; average a case's steps for its
    score.

    Parameters
    ----------
    rank : array_like of int
        The rank R of the chosen tool at each step (1 = best).
    n_candidates : array_like of int
        The number of candidates N at each step.

    Returns
    -------
    ndarray of float64
        The score of each step.

    Raises
    ------
    InvalidTypeError
        Ranks or counts that are not integers.
    InvalidArgumentError
        Not ``1 <= rank <= n_candidates``.

    Examples
    --------
    >>> float(optimal_tool_score(2, 4))
    0.75
    """
    r = np.asarray(rank)
    n = np.asarray(n_candidates)
    if r.dtype.kind not in "iu" or n.dtype.kind not in "iu":
        raise InvalidTypeError("rank, n_candidates: expected integers")
    if (n < 1).any() or (r < 1).any() or (r > n).any():
        raise InvalidArgumentError("rank, n_candidates: expected 1 <= rank <= n_candidates")
    return ((n - r + 1) / n).astype(np.float64)


def pre_failure_progress(pred: Sequence[str], gt: Sequence[str]) -> float:
    """Compute ``|pred| / |gt|``: the share of the chain called before a failure (failed cases).

    Parameters
    ----------
    pred : sequence of str
        The called chain (tool categories).
    gt : sequence of str
        The ground-truth chain.

    Returns
    -------
    float
        The progress (above 1 when more tools were called than the chain has).

    Raises
    ------
    InvalidArgumentError
        An empty ground-truth chain.

    Examples
    --------
    >>> pre_failure_progress(["A", "B"], ["A", "B", "C", "D"])
    0.5
    """
    if len(gt) == 0:
        raise InvalidArgumentError("gt: the ground-truth chain is empty")
    return len(pred) / len(gt)


# ---------------------------------------------------------------------------------- log parsing


def execution_failed(log: str) -> bool:
    r"""Tell whether the log records an execution error.

    The code's pattern is ``Error Type: <word>\nError Message: <one line>\nTraceback:``.

    Parameters
    ----------
    log : str
        The agent's log.

    Returns
    -------
    bool
        Whether the pattern occurs.
    """
    return _FAILURE_RE.search(log) is not None


def extract_conclusion(log: str) -> str:
    r"""Return the final answer of a log.

    That is the text after the first ``Conclusion:`` up to the first blank line (``\n\n``) or
    the end, stripped; "" when there is none (the code's regex ``Conclusion:(.*?)(?=\n\n|$)``
    with DOTALL).

    Parameters
    ----------
    log : str
        The agent's log.

    Returns
    -------
    str
        The conclusion, or "".
    """
    head, sep, tail = log.partition("Conclusion:")
    if not sep:
        return ""
    return tail.split("\n\n", 1)[0].strip()


def deny_awareness(log: str) -> bool:
    """Tell whether the agent declined a call: ``Deny Call Dict:`` in the log (the code's deny1).

    Parameters
    ----------
    log : str
        The agent's log.

    Returns
    -------
    bool
        Whether the log holds ``Deny Call Dict:``.
    """
    return _DENY in log


def deny_grounding(log: str, missing_category: str) -> bool:
    """Tell whether the agent declined a call and named the missing category.

    That is: aware (see :func:`deny_awareness`) and the first ``'Category': '...'`` value of the
    log contains ``missing_category`` as a substring (the code's deny1 check).

    Parameters
    ----------
    log : str
        The agent's log.
    missing_category : str
        The category the case has no tool for.

    Returns
    -------
    bool
        Whether the agent declined and named the category.
    """
    if not deny_awareness(log):
        return False
    m = _CATEGORY_RE.search(log)
    return m is not None and missing_category in m.group(1)


# --------------------------------------------------------------------- paper-standard text metrics


def final_response_scores(hyps: Sequence[str], refs: Sequence[str]) -> dict[str, np.ndarray]:
    """Compute the paper-standard final-response metrics through ``tumorboard.text``.

    One value per pair (module notes): ``"bleu"`` = sacrebleu sentence BLEU (13a, exp
    smoothing, effective order) / 100, ``"rouge_l"`` = rouge-score ROUGE-L F-measure (its
    tokenizer, no stemmer), ``"f1"`` = unique-token F1 over rouge-score tokens
    (:func:`tumorboard.text.set_f1`).

    Parameters
    ----------
    hyps : sequence of str
        The agents' final responses.
    refs : sequence of str
        The reference answers, of the same length.

    Returns
    -------
    dict of str to numpy.ndarray
        float64 scores per pair under ``"bleu"``, ``"rouge_l"`` and ``"f1"``.
    """
    from .. import text

    hyps, refs = list(hyps), list(refs)
    bleu = text.bleu(hyps, refs)
    rouge_l = text.rouge(hyps, refs, types=("rougeL",))["rougeL"].fmeasure
    f1 = text.set_f1(hyps, refs)
    return {
        "bleu": np.asarray(bleu.score, dtype=np.float64) / 100.0,
        "rouge_l": np.asarray(rouge_l, dtype=np.float64),
        "f1": np.asarray(f1, dtype=np.float64),
    }
