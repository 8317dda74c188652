"""Replicas of RadA-BenchPlat's reference scoring code, where it differs from the paper.

RadA-BenchPlat (Zheng et al. 2025, arXiv 2412.09529) defines its metrics in the paper; its reference
code (``MAGIC-AI4Med/RadABench`` at commit ``acbcf87``, ``EvalPlat/EvalMetrics/*.py`` with the
pipelines ``EvalPlat/EvalPipeline_*.py`` and ``EvalPlat/Utils/utils.py``) computes some of them
differently. The functions here reproduce the code's versions, each under a name ending in ``_code``
(or used only by those), so that published numbers can be matched; the paper's definitions live in
:mod:`tumorboard.score.radabench`, which re-exports these names and documents each difference.

* ``redundancy_rate_code`` ("redundancy"): called tools whose category is not in the ground
  truth over ``max(|pred|, |gt|)`` (the paper divides by ``|pred|``).
* ``tool_matching_accuracy_code`` ("precision"): the longest common **contiguous** run of the
  chains over ``|gt|`` (the paper counts positional hits).
* ``optimal_tool_score_code`` ("win rate"): per case one candidate list ordered worst to best,
  scanned from the end.
* ``bleu1_code``, ``rouge_l_code``, ``set_f1_code`` and ``final_response_scores_code``: the
  code's ``calculate_metrics``: unique-token F1 and NLTK ``sentence_bleu`` with weights
  (1, 0, 0, 0) and ``SmoothingFunction().method1`` over NLTK ``word_tokenize(text.lower())``
  tokens, and the ``rouge`` 1.0.1 package's ROUGE-L on the raw text; a missing response or
  reference, or no token, gives 0 for all three. ``log_error_flag`` is the code's exclusion
  rule for these metrics (the substring ``Error`` or ``error`` anywhere in the log).

``word_tokenize`` needs NLTK's Punkt English model, which is data we do not ship:
:func:`radabench_tokenize` splits sentences with an untrained ``PunktSentenceTokenizer`` (no
learned abbreviation list, so ``e.g.`` or ``dr.`` end a sentence and lose their final period)
and then applies ``NLTKWordTokenizer``, which is what ``word_tokenize`` does per sentence. NLTK
is imported only when these metrics run.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

from ..errors import InvalidArgumentError, MissingDependencyError

__all__ = [
    "bleu1_code",
    "final_response_scores_code",
    "log_error_flag",
    "longest_common_run",
    "optimal_tool_score_code",
    "radabench_tokenize",
    "redundancy_rate_code",
    "rouge_l_code",
    "set_f1_code",
    "tool_matching_accuracy_code",
]


def redundancy_rate_code(pred: Sequence[str], gt: Sequence[str]) -> float:
    """Compute the code's "redundancy": called tools not in ``gt`` over ``max(|pred|, |gt|)``.

    The count of ``radabench.false_discovery_rate`` over another denominator; 0 when both
    chains are empty.

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
    >>> redundancy_rate_code(["A", "X"], ["A", "B", "C", "D"])
    0.25
    """
    m = max(len(pred), len(gt))
    g = set(gt)
    return 0.0 if m == 0 else sum(1 for t in pred if t not in g) / m


def longest_common_run(a: Sequence[str], b: Sequence[str]) -> int:
    """Return the length of the longest common contiguous run (substring) of two sequences.

    Parameters
    ----------
    a, b : sequence of str
        The two sequences.

    Returns
    -------
    int
        The length of the run (0 when nothing is shared).

    Examples
    --------
    >>> longest_common_run(["A", "B", "C", "D"], ["X", "B", "C", "Y", "D"])
    2
    """
    best = 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            if x == y:
                cur[j] = prev[j - 1] + 1
                best = max(best, cur[j])
        prev = cur
    return best


def tool_matching_accuracy_code(pred: Sequence[str], gt: Sequence[str]) -> float:
    """Compute the code's "precision": the longest common contiguous run over ``|gt|``.

    The run is of ``gt`` and ``pred``; 0 for an empty ``gt``.

    Parameters
    ----------
    pred : sequence of str
        The called chain (tool categories).
    gt : sequence of str
        The ground-truth chain.

    Returns
    -------
    float
        The score, in [0, 1].

    Examples
    --------
    >>> tool_matching_accuracy_code(["A", "X", "C", "D"], ["A", "B", "C", "D"])
    0.5
    """
    return 0.0 if len(gt) == 0 else longest_common_run(gt, pred) / len(gt)


def optimal_tool_score_code(called: Sequence[str], candidates: Sequence[str]) -> float:
    """Compute the code's "win rate" from candidates ordered worst to best.

    Scanning from the end, the first candidate present in ``called`` at position i from the end
    gives ``(N - i) / N``; 0 when none was called (or there are no candidates).

    Parameters
    ----------
    called : sequence of str
        The tool ids the agent called.
    candidates : sequence of str
        The candidate tool ids, ordered from worst to best.

    Returns
    -------
    float
        The win rate, in [0, 1].

    Examples
    --------
    >>> optimal_tool_score_code(["TOOL1", "TOOL4"], ["TOOL3", "TOOL4", "TOOL5"])
    0.6666666666666666
    """
    n = len(candidates)
    called_set = set(called)
    for i, tool in enumerate(reversed(candidates)):
        if tool in called_set:
            return (n - i) / n
    return 0.0


def log_error_flag(log: str) -> bool:
    """Apply the code's text-metric exclusion rule: ``"Error" in log or "error" in log``.

    Parameters
    ----------
    log : str
        The agent's log.

    Returns
    -------
    bool
        Whether the case is left out of the code's text metrics.
    """
    return "Error" in log or "error" in log


@functools.lru_cache(maxsize=1)
def _nltk_tokenizers() -> tuple[Any, Any]:
    """Return an untrained Punkt sentence tokenizer and NLTK's word tokenizer (imported once)."""
    try:
        from nltk.tokenize import NLTKWordTokenizer
        from nltk.tokenize.punkt import PunktSentenceTokenizer
    except ImportError as exc:
        raise MissingDependencyError.for_extra(
            "radabench's reference-code text metrics (bleu1_code, rouge_l_code, f1_code; or use "
            "the paper-standard metrics, text_metrics='paper')",
            package="nltk", extra=None, cause=exc,
        ) from exc  # fmt: skip
    return PunktSentenceTokenizer(), NLTKWordTokenizer()


def radabench_tokenize(text: str) -> list[str]:
    """Tokenize like NLTK's ``word_tokenize``, as far as it runs without data files.

    Sentences come from an untrained ``PunktSentenceTokenizer``, then ``NLTKWordTokenizer``
    runs on each (module notes). The reference code calls ``word_tokenize(text.lower())``;
    lowercase before calling this.

    Parameters
    ----------
    text : str
        The text.

    Returns
    -------
    list of str
        The tokens.

    Raises
    ------
    MissingDependencyError
        NLTK is not installed.
    """
    sents, words = _nltk_tokenizers()
    return [tok for s in sents.tokenize(text) for tok in words.tokenize(s)]


def set_f1_code(hyp_tokens: Sequence[str], ref_tokens: Sequence[str]) -> float:
    """Compute the unique-token F1 of two token lists.

    ``P = |H ∩ R| / |H|``, ``R = |H ∩ R| / |R|``, ``2PR / (P + R)`` on the token sets; 0 when
    either set is empty or nothing is shared.

    Parameters
    ----------
    hyp_tokens, ref_tokens : sequence of str
        The hypothesis and reference tokens (:func:`radabench_tokenize` of the lowercased text).

    Returns
    -------
    float
        The score, in [0, 1].
    """
    h, r = set(hyp_tokens), set(ref_tokens)
    if not h or not r:
        return 0.0
    common = len(h & r)
    p, rec = common / len(h), common / len(r)
    return 0.0 if p + rec == 0 else 2 * (p * rec) / (p + rec)


def bleu1_code(hyp_tokens: Sequence[str], ref_tokens: Sequence[str]) -> float:
    """Compute NLTK's BLEU-1 with method-1 smoothing, as the reference code calls it.

    That is ``sentence_bleu([ref], hyp, weights=(1, 0, 0, 0),
    smoothing_function=SmoothingFunction().method1)``. With one reference this is ``BP * p1``:
    ``p1`` = clipped unigram matches / ``|hyp|``; ``BP = 1`` if ``|hyp| > |ref|``, else
    ``exp(1 - |ref| / |hyp|)``; 0 when no unigram matches (NLTK returns 0 before smoothing) or the
    hypothesis is empty. ``method1`` only smooths the zero-weighted higher orders, so it does
    not change the value.

    Parameters
    ----------
    hyp_tokens, ref_tokens : sequence of str
        The hypothesis and reference tokens (:func:`radabench_tokenize` of the lowercased text).

    Returns
    -------
    float
        The score, in [0, 1].
    """
    c, r = len(hyp_tokens), len(ref_tokens)
    if c == 0:
        return 0.0
    ref_counts: dict[str, int] = {}
    for t in ref_tokens:
        ref_counts[t] = ref_counts.get(t, 0) + 1
    hyp_counts: dict[str, int] = {}
    for t in hyp_tokens:
        hyp_counts[t] = hyp_counts.get(t, 0) + 1
    matches = sum(min(k, ref_counts.get(t, 0)) for t, k in hyp_counts.items())
    if matches == 0:
        return 0.0
    bp = 1.0 if c > r else math.exp(1 - r / c)
    # NLTK: bp * exp(fsum(w_n * log p_n)); with weights (1, 0, 0, 0) that is exp(log p1).
    return bp * math.exp(math.log(matches / c))


def _rouge_sentences(text: str) -> list[list[str]]:
    """Split a text into sentences of words as the ``rouge`` 1.0.1 package does.

    Split on ".", drop empty pieces, collapse whitespace, then words = ``sentence.split(" ")``
    (so a whitespace-only piece is the one word "").
    """
    return [" ".join(piece.split()).split(" ") for piece in text.split(".") if len(piece) > 0]


def _lcs_word_set(x: Sequence[str], y: Sequence[str]) -> set[str]:
    """Return the words of the LCS of x (reference) and y (candidate sentence).

    Reconstructed as ``rouge`` 1.0.1 does: from the end, a match steps diagonally, otherwise
    step up (x shorter) when ``table[i-1][j] > table[i][j-1]`` and left otherwise.
    """
    n, m = len(x), len(y)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        xi, row, above = x[i - 1], table[i], table[i - 1]
        for j in range(1, m + 1):
            if xi == y[j - 1]:
                row[j] = above[j - 1] + 1
            else:
                row[j] = max(above[j], row[j - 1])
    out: set[str] = set()
    i, j = n, m
    while i > 0 and j > 0:
        if x[i - 1] == y[j - 1]:
            out.add(x[i - 1])
            i -= 1
            j -= 1
        elif table[i - 1][j] > table[i][j - 1]:
            i -= 1
        else:
            j -= 1
    return out


def rouge_l_code(hyp: str, ref: str) -> float:
    """Compute the ROUGE-L F of the ``rouge`` 1.0.1 package.

    That is ``Rouge().get_scores(hyp, ref)[0]["rouge-l"]["f"]``: the summary-level union LCS
    with its set semantics (``exclusive=True``).

    Sentences are the non-empty pieces of the text split on "." (whitespace collapsed), words
    are split on single spaces, case is kept. With ``U`` = the set of words that occur in the
    LCS of some (reference sentence, candidate sentence) pair, ``m`` and ``n`` the numbers of
    distinct reference and candidate words: ``R = |U| / m``, ``P = |U| / n``,
    ``F = 2PR / (P + R + 1e-8)``. A text without a sentence is an error (the package raises
    too; the RadA code then scores 0). Unlike the package (a recursive LCS reconstruction), very
    long sentences do not hit Python's recursion limit here.

    Parameters
    ----------
    hyp, ref : str
        The hypothesis and reference texts.

    Returns
    -------
    float
        The ROUGE-L F.

    Raises
    ------
    InvalidArgumentError
        Either text has no sentence (a ValueError).

    Examples
    --------
    >>> round(rouge_l_code("the liver is normal", "the liver is enlarged"), 6)
    0.75
    """
    hs, rs = _rouge_sentences(hyp), _rouge_sentences(ref)
    if not hs:
        raise InvalidArgumentError("rouge_l_code: the hypothesis has no sentence")
    if not rs:
        raise InvalidArgumentError("rouge_l_code: the reference has no sentence")
    m = len({w for s in rs for w in s})
    n = len({w for s in hs for w in s})
    union: set[str] = set()
    for r in rs:
        for h in hs:
            union |= _lcs_word_set(r, h)
    llcs = len(union)
    r_lcs = llcs / m
    p_lcs = llcs / n
    return 2.0 * ((p_lcs * r_lcs) / (p_lcs + r_lcs + 1e-8))


def final_response_scores_code(
    hypothesis: str | None, reference: str | None
) -> tuple[float, float, float]:
    """Score one final response as the reference code's ``calculate_metrics`` does.

    Returns ``(f1, bleu1, rouge_l)`` (module notes); (0, 0, 0) for a missing or empty text or
    when either side has no token.

    Parameters
    ----------
    hypothesis : str or None
        The agent's final response.
    reference : str or None
        The reference answer.

    Returns
    -------
    tuple of float
        ``(f1, bleu1, rouge_l)``.
    """
    if not reference or not hypothesis:
        return 0.0, 0.0, 0.0
    ref_tokens = radabench_tokenize(reference.lower())
    hyp_tokens = radabench_tokenize(hypothesis.lower())
    if not ref_tokens or not hyp_tokens:
        return 0.0, 0.0, 0.0
    f1 = set_f1_code(hyp_tokens, ref_tokens)
    bleu = bleu1_code(hyp_tokens, ref_tokens)
    try:
        rl = rouge_l_code(hypothesis, reference)
    except (ValueError, ZeroDivisionError):
        rl = 0.0
    return f1, bleu, rl
