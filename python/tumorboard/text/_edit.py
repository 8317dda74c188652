"""Edit-distance metrics through rapidfuzz (no edit distance is reimplemented here).

* :func:`levenshtein`: Levenshtein distance between two sequences of tokens, e.g. the chains of
  tool categories RadA-BenchPlat compares (the reference code calls python-Levenshtein's
  ``distance`` on lists, i.e. an element-level edit distance).
* :func:`sequence_levenshtein`: the same, vectorized over a batch of pairs (or all pairs).
* :func:`one_minus_ned`: MedBench v4's ``1 - NED`` text similarity, ``max(0, 1 - d / |ref|)``.

Items are strings (edited character by character) or sequences of hashable tokens (edited token
by token: ``["Organ Segmentor", "Disease Inferencer"]`` has length 2). rapidfuzz compares the
tokens of a sequence by their Python hash and equality. ``tokenizer=`` (the keyword of every text
metric) splits strings into tokens first: ``"char"`` (the default) keeps them as characters,
``"whitespace"``, ``"rouge"`` and ``"unicode"`` are the tokenizers of :func:`~tumorboard.text.rouge`
(a word-level edit distance). One pair of strings gives a Python scalar, batches give arrays;
``threads`` are rapidfuzz's worker threads (None: all cores; results do not depend on them).

References
----------
Levenshtein, V. I. (1966). Binary codes capable of correcting deletions, insertions, and
    reversals. Soviet Physics Doklady, 10(8), 707-710.
Bachmann, M. rapidfuzz (``rapidfuzz.distance.Levenshtein``, ``rapidfuzz.process.cpdist`` and
    ``cdist``), https://github.com/rapidfuzz/RapidFuzz.
MedBench v4 (2025): open-ended generation scored by 1 - normalized edit distance.
Zheng, Q. et al. (2025). RadA-BenchPlat, arXiv 2412.09529: tool-chain Levenshtein distance
    (paper and reference code, ``MAGIC-AI4Med/RadABench``,
    ``EvalPlat/EvalMetrics/*generalEval.py@acbcf87``).
"""

from __future__ import annotations

import numbers
import reprlib
from collections.abc import Hashable, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from ..errors import InvalidArgumentError, InvalidTypeError
from . import _validate

__all__ = ["levenshtein", "one_minus_ned", "sequence_levenshtein"]

Item = str | Sequence[Hashable]
EditTokenizer = Literal["char", "whitespace", "rouge", "unicode"]
_EDIT_TOKENIZERS = ("char", "whitespace", "rouge", "unicode")


def _check_weights(weights: Any) -> tuple[int, int, int]:
    """Return validated (insertion, deletion, substitution) costs as non-negative integers."""
    if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence | np.ndarray):
        raise InvalidTypeError(
            "weights: expected (insertion, deletion, substitution) integers, got "
            f"{reprlib.repr(weights)}"
        )
    ok = len(weights) == 3 and all(
        isinstance(x, numbers.Integral) and not isinstance(x, bool | np.bool_) and 0 <= x < 2**31
        for x in weights
    )
    if not ok:
        raise InvalidArgumentError(
            "weights: expected three integers in [0, 2^31) (insertion, deletion, substitution), "
            f"got {reprlib.repr(weights)}"
        )
    return tuple(int(x) for x in weights)  # type: ignore[return-value]


def _item(x: Any, name: str) -> Item:
    """Return one comparable item: a str, or a tuple of hashable tokens."""
    if isinstance(x, str):
        return x
    if x is None:
        raise InvalidTypeError(f"{name}: expected a string or a sequence of tokens, got None")
    if isinstance(x, np.ndarray):
        x = x.tolist()
    if isinstance(x, (bytes, bytearray)) or not isinstance(x, Sequence):
        raise InvalidTypeError(
            f"{name}: expected a string or an ordered sequence (list, tuple) of tokens, got "
            f"{type(x).__name__}"
        )
    out = tuple(x)
    for i, tok in enumerate(out):
        if tok is None:
            raise InvalidTypeError(f"{name}[{i}]: a token is None; expected hashable tokens")
        try:
            hash(tok)
        except TypeError as exc:
            raise InvalidTypeError(
                f"{name}[{i}]: expected a hashable token, got {type(tok).__name__}"
            ) from exc
    return out


def _workers(threads: Any) -> int:
    """Return rapidfuzz's ``workers`` for a ``threads`` argument (None: -1, all cores)."""
    n = _validate.check_threads(threads)
    return -1 if n == 0 else n


def _tokenized(items: list[Item], tokenizer: str, name: str) -> list[Item]:
    """Split the strings among ``items`` into token tuples (``"char"``: leave them)."""
    if tokenizer == "char":
        return items
    from ._rouge import tokenize

    where = [i for i, x in enumerate(items) if isinstance(x, str)]
    if not where:
        return items
    out = list(items)
    toks = tokenize([items[i] for i in where], tokenizer=tokenizer)  # type: ignore[arg-type]
    for i, t in zip(where, toks, strict=True):
        out[i] = tuple(t)
    return out


def _batch(x: Any, name: str) -> tuple[list[Item], bool]:
    """Return a batch of items and whether the input was a single string."""
    if isinstance(x, str):
        return [x], True
    if x is None:
        raise InvalidTypeError(f"{name}: expected a string or a sequence of items, got None")
    if isinstance(x, np.ndarray):
        x = x.tolist()
    try:
        items = list(x)
    except TypeError as exc:
        raise InvalidTypeError(
            f"{name}: expected a string or a sequence of items, got {type(x).__name__}"
        ) from exc
    return [_item(v, f"{name}[{i}]") for i, v in enumerate(items)], False


def levenshtein(
    hyp: Item,
    ref: Item,
    *,
    weights: tuple[int, int, int] = (1, 1, 1),
    tokenizer: EditTokenizer = "char",
) -> int:
    """Compute the Levenshtein (edit) distance between two sequences of tokens.

    ``d(hyp, ref)`` is the least total cost of insertions, deletions and substitutions of single
    elements that turns ``hyp`` into ``ref`` (Levenshtein 1966). With lists of tool names this is
    the element-level distance RadA-BenchPlat reports between tool chains (its reference code
    calls python-Levenshtein's ``distance`` on lists); with strings it is the usual
    character-level distance. Computed by ``rapidfuzz.distance.Levenshtein.distance``.

    Parameters
    ----------
    hyp, ref : str or sequence of hashable
        The two sequences (a string is a sequence of characters, or of the tokens of
        ``tokenizer``).
    weights : (int, int, int), default (1, 1, 1)
        Costs of an insertion, a deletion and a substitution.
    tokenizer : {"char", "whitespace", "rouge", "unicode"}, default "char"
        How strings are split (module notes); token sequences are used as they are.

    Returns
    -------
    int
        The distance; 0 when the sequences are equal, ``max(len(a), len(b))`` at most with unit
        weights.

    Examples
    --------
    >>> levenshtein(["Anatomy Classifier", "Organ Segmentor"], ["Organ Segmentor"])
    1
    """
    w = _check_weights(weights)
    tok = _validate.choice(tokenizer, _EDIT_TOKENIZERS, name="tokenizer")
    h, r = _tokenized([_item(hyp, "hyp"), _item(ref, "ref")], tok, "hyp")
    return int(Levenshtein.distance(h, r, weights=w))


def sequence_levenshtein(
    hyps: Item | Sequence[Item],
    refs: Item | Sequence[Item],
    *,
    weights: tuple[int, int, int] = (1, 1, 1),
    pairwise: bool = False,
    tokenizer: EditTokenizer = "char",
    threads: int | None = None,
) -> Any:
    """Compute the Levenshtein distances of a batch of sequence pairs (see :func:`levenshtein`).

    Parameters
    ----------
    hyps, refs : str, or sequence of (str or sequence of hashable)
        The items; ``hyps[i]`` is compared with ``refs[i]`` (the two batches must have the same
        length) or, with ``pairwise=True``, with every ``refs[j]``. Two strings are one pair.
    weights : (int, int, int), default (1, 1, 1)
        Costs of an insertion, a deletion and a substitution.
    pairwise : bool, default False
        Return the ``(len(hyps), len(refs))`` matrix of all distances
        (``rapidfuzz.process.cdist``) instead of the element-wise ones
        (``rapidfuzz.process.cpdist``).
    tokenizer : {"char", "whitespace", "rouge", "unicode"}, default "char"
        How strings are split (module notes).
    threads : int, optional
        Threads rapidfuzz may use (None: all cores).

    Returns
    -------
    int or ndarray of int64, shape (n,) or (n, m)
        The distance of one pair of strings, the element-wise distances, or the all-pairs
        matrix with ``pairwise=True``.

    Raises
    ------
    InvalidArgumentError
        Batches of different lengths (element-wise), or invalid weights.
    InvalidTypeError
        An item that is neither a string nor a sequence of hashable tokens.
    """
    w = _check_weights(weights)
    tok = _validate.choice(tokenizer, _EDIT_TOKENIZERS, name="tokenizer")
    workers = _workers(threads)
    p, single_p = _batch(hyps, "hyps")
    r, single_r = _batch(refs, "refs")
    p, r = _tokenized(p, tok, "hyps"), _tokenized(r, tok, "refs")
    if _validate.flag(pairwise, name="pairwise"):
        if not p or not r:
            return np.zeros((len(p), len(r)), dtype=np.int64)
        out = process.cdist(p, r, scorer=Levenshtein.distance, scorer_kwargs={"weights": w},
                            dtype=np.int64, workers=workers)  # fmt: skip
        return np.asarray(out, dtype=np.int64)
    d = _distances(p, r, w, workers)
    return int(d[0]) if single_p and single_r else d


def _distances(
    p: list[Item], r: list[Item], w: tuple[int, int, int], workers: int
) -> npt.NDArray[np.int64]:
    """Return the element-wise distances of two validated batches of the same length."""
    if len(p) != len(r):
        raise InvalidArgumentError(
            f"hyps and refs: expected the same number of items, got {len(p)} and {len(r)}"
        )
    if not p:
        return np.zeros(0, dtype=np.int64)
    out = process.cpdist(p, r, scorer=Levenshtein.distance, scorer_kwargs={"weights": w},
                         dtype=np.int64, workers=workers)  # fmt: skip
    return np.asarray(out, dtype=np.int64)


def one_minus_ned(
    hyps: Item | Sequence[Item],
    refs: Item | Sequence[Item],
    *,
    empty: float = 1.0,
    tokenizer: EditTokenizer = "char",
    threads: int | None = None,
) -> Any:
    """Compute MedBench v4's similarity ``1 - NED``: ``max(0, 1 - d(hyp, ref) / |ref|)``.

    ``d`` is the Levenshtein distance (unit costs, rapidfuzz) and ``|ref|`` the length of the
    reference (characters of a string, or its tokens with another ``tokenizer``, or tokens of a
    token sequence). MedBench v4 normalizes by
    the reference length only, so a prediction much longer than the reference has
    ``d > |ref|`` and ``1 - d/|ref| < 0``; the value is clipped at 0 so that it stays in
    [0, 1] (an entirely wrong answer scores 0 however long it is).

    The empty reference (``|ref| = 0``) makes ``d/|ref|`` undefined; it is defined here as
    ``empty`` (default 1.0) when the prediction is empty too (an exact match) and 0.0 when it
    is not (every character of the prediction is wrong).

    Parameters
    ----------
    hyps, refs : str, or sequence of (str or sequence of hashable)
        One pair of strings, or a batch of items: strings (compared character by character,
        which is what MedBench v4 does for Chinese text) or sequences of tokens. Wrap a single
        token sequence in a list.
    empty : float, default 1.0
        The value for an empty prediction against an empty reference.
    tokenizer : {"char", "whitespace", "rouge", "unicode"}, default "char"
        How strings are split (module notes); "char" is MedBench v4's.
    threads : int, optional
        Threads rapidfuzz may use (None: all cores).

    Returns
    -------
    float or ndarray of float64
        A float for two strings, else shape (n,).

    Examples
    --------
    >>> one_minus_ned("kitten", "sitting")  # d = 3, |ref| = 7
    0.5714285714285714
    """
    tok = _validate.choice(tokenizer, _EDIT_TOKENIZERS, name="tokenizer")
    empty = _validate.empty_value(empty)
    workers = _workers(threads)
    p, single_p = _batch(hyps, "hyps")
    r, single_r = _batch(refs, "refs")
    p, r = _tokenized(p, tok, "hyps"), _tokenized(r, tok, "refs")
    d = _distances(p, r, (1, 1, 1), workers).astype(np.float64)
    ref_len = np.fromiter((len(x) for x in r), dtype=np.float64, count=len(r))
    pred_len = np.fromiter((len(x) for x in p), dtype=np.float64, count=len(p))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.maximum(0.0, 1.0 - d / ref_len)
    zero = ref_len == 0
    out[zero] = np.where(pred_len[zero] == 0, float(empty), 0.0)
    if single_p and single_r:
        return float(out[0])
    return out
