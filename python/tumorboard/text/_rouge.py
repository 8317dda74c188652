r"""ROUGE, token F1 and set F1 over the C++ text engine (csrc/text/).

``rouge`` reproduces Google's ``rouge-score`` package (0.1.2, ``rouge_score/rouge_scorer.py``;
Lin 2004, "ROUGE: A Package for Automatic Evaluation of Summaries") bit for bit: the same
tokenizer, the same Porter stemmer (NLTK's ``PorterStemmer()``), the same integer counts and
the same floating-point formula ``2 * p * r / (p + r)``. ``token_f1`` is the official SQuAD
F1 (Rajpurkar et al. 2016/2018), ``set_f1`` the set-of-tokens F1 of RadA-BenchPlat
(``MAGIC-AI4Med/RadABench``, ``EvalPlat/EvalMetrics/multihop_performance.py@acbcf87``).

Tokenizers (``tokenizer=``):

``"rouge"``
    rouge-score's default: ``str.lower()``, every run of characters outside ``[a-z0-9]`` is a
    separator. Non-Latin text (Chinese, Japanese, Korean, Cyrillic, accented letters) yields no
    or broken tokens, exactly as in rouge-score.
``"unicode"``
    NFKC normalization, then ``str.lower()``. Characters of scripts written without spaces
    become one token each: Han ideographs (with extensions, compatibility ideographs, radicals,
    U+3005-3007, U+3021-3029, U+3038-303C), Hiragana, Katakana (incl. half-width and the kana
    supplements), Bopomofo, Hangul (syllables and jamo), Yi, Thai, Lao, Myanmar, Khmer, Tai Le,
    New Tai Lue, Tai Tham, Tai Viet, Tangut, Khitan and Nushu. Elsewhere a token is a maximal
    run of letters and numbers (Unicode general categories L* and N*). Combining marks (M*)
    join the token before them (and are dropped when there is none); every other character
    (punctuation, symbols, whitespace) separates tokens. Categories come from Unicode 14.0.0
    (csrc/text/unicode_table.hpp).
``"whitespace"``
    ``str.split()``: runs of non-whitespace characters, case and punctuation kept.

With ``stemmer=True`` (or ``"porter"``), tokens of more than 3 characters that consist only of
``[a-z0-9]`` are replaced by their Porter stem, NLTK's ``PorterStemmer()`` (its default
NLTK_EXTENSIONS mode, which rouge-score uses); ``"porter-original"`` selects NLTK's
``ORIGINAL_ALGORITHM`` mode (Porter 1980 as published). Stems are computed once per distinct
token per worker thread.

ROUGE-Lsum splits each text into sentences on ``"\n"`` (rouge-score's default, no
``split_summaries``) and computes the summary-level union LCS of rouge-score's
``_summary_level_lcs``, including its LCS backtracking and its guard against double counting.

All loops run in C++ with the GIL released; strings are read in place as UTF-8. ``threads=None``
uses every core; results do not depend on the number of threads.

One pair of strings gives Python floats, sequences give one float64 array entry per pair
(``rouge("a b", "a").fmeasure("rouge1")`` is a ``float``).
"""

from __future__ import annotations

import reprlib
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import polars as pl

from .. import _core
from .._deprecate import renamed_keywords
from .._results import table
from .._typing import Texts
from ..errors import InvalidArgumentError, InvalidTypeError, MissingDependencyError
from . import _validate

Tokenizer = Literal["rouge", "unicode", "whitespace"]
SetTokenizer = Literal["rouge", "unicode", "whitespace", "treebank"]
StemmerArg = bool | Literal["porter", "porter-original"]

DEFAULT_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
_TOKENIZERS = ("rouge", "unicode", "whitespace")


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True, eq=False)
class RougeScore:
    """Per-pair precision, recall and F-measure of one ROUGE type.

    Attributes
    ----------
    precision, recall, fmeasure : float or numpy.ndarray
        One float64 value per pair; Python floats for one pair of strings.
    """

    precision: Any
    recall: Any
    fmeasure: Any

    def __len__(self) -> int:
        return 1 if np.ndim(self.fmeasure) == 0 else int(np.shape(self.fmeasure)[0])

    def to_polars(self) -> pl.DataFrame:
        """Return one row per pair: precision, recall, fmeasure.

        Returns
        -------
        polars.DataFrame
            One row per pair.
        """
        return table({"precision": self.precision, "recall": self.recall,
                      "fmeasure": self.fmeasure})  # fmt: skip


@dataclass(frozen=True, eq=False)
class RougeResult:
    """Scores of ``rouge(hyps, refs)``: one entry per pair for each requested type.

    ``result["rougeL"].fmeasure`` (or ``result.fmeasure("rougeL")``) is a float64 array equal,
    bit for bit, to ``RougeScorer([...]).score(ref, hyp)["rougeL"].fmeasure`` pair by pair (a
    Python float for one pair of strings).

    Attributes
    ----------
    types : tuple of str
        The computed ROUGE types, in the requested order.
    scores : dict of str to RougeScore
        The scores of each type.
    tokenizer : str
        The tokenizer used.
    stemmer : str
        The stemmer used: "none", "porter" or "porter-original".
    """

    types: tuple[str, ...]
    scores: dict[str, RougeScore]
    tokenizer: str
    stemmer: str

    def __len__(self) -> int:
        return len(self.scores[self.types[0]]) if self.types else 0

    def __getitem__(self, rouge_type: str) -> RougeScore:
        try:
            return self.scores[rouge_type]
        except KeyError:
            raise KeyError(
                f"rouge type {rouge_type!r} was not computed; available: {list(self.types)}"
            ) from None

    def precision(self, rouge_type: str) -> Any:
        """Return the per-pair precision of one computed type (e.g. ``"rougeL"``).

        Parameters
        ----------
        rouge_type : str
            A computed type.

        Returns
        -------
        float or numpy.ndarray
            float64, one value per pair (a float for one pair).
        """
        return self[rouge_type].precision

    def recall(self, rouge_type: str) -> Any:
        """Return the per-pair recall of one computed type (e.g. ``"rougeL"``).

        Parameters
        ----------
        rouge_type : str
            A computed type.

        Returns
        -------
        float or numpy.ndarray
            float64, one value per pair (a float for one pair).
        """
        return self[rouge_type].recall

    def fmeasure(self, rouge_type: str) -> Any:
        """Return the per-pair F-measure of one computed type (e.g. ``"rougeL"``).

        Parameters
        ----------
        rouge_type : str
            A computed type.

        Returns
        -------
        float or numpy.ndarray
            float64, one value per pair (a float for one pair).
        """
        return self[rouge_type].fmeasure

    def to_polars(self) -> pl.DataFrame:
        """Return the scores as a table with one row per pair.

        The columns are ``{type}_precision``, ``{type}_recall``, ``{type}_fmeasure`` for each
        type, in the requested order.

        Returns
        -------
        polars.DataFrame
            One row per pair.
        """
        cols: dict[str, Any] = {}
        for t in self.types:
            s = self.scores[t]
            cols[f"{t}_precision"] = s.precision
            cols[f"{t}_recall"] = s.recall
            cols[f"{t}_fmeasure"] = s.fmeasure
        return table(cols)


@dataclass(frozen=True, eq=False)
class RougeMatrix:
    """All-pairs ROUGE of one type.

    Entry ``(i, j)`` scores ``hyps[i]`` as the prediction against ``refs[j]`` as the target,
    i.e. ``RougeScorer([type]).score(refs[j], hyps[i])``. Precision is relative to
    ``hyps[i]``'s n-grams, recall to ``refs[j]``'s.

    Attributes
    ----------
    precision, recall, fmeasure : numpy.ndarray
        float64 arrays of shape ``(len(hyps), len(refs))``.
    type : str
        The ROUGE type.
    tokenizer : str
        The tokenizer used.
    stemmer : str
        The stemmer used: "none", "porter" or "porter-original".
    """

    precision: np.ndarray
    recall: np.ndarray
    fmeasure: np.ndarray
    type: str
    tokenizer: str
    stemmer: str

    @property
    def shape(self) -> tuple[int, int]:
        """The matrix shape ``(len(hyps), len(refs))``."""
        return (int(self.fmeasure.shape[0]), int(self.fmeasure.shape[1]))

    def to_polars(self) -> pl.DataFrame:
        """Return the matrix in long format.

        One row per (hypothesis index ``i``, reference index ``j``) with precision, recall,
        fmeasure.

        Returns
        -------
        polars.DataFrame
            Columns i, j, precision, recall, fmeasure; ``len(hyps) * len(refs)`` rows.
        """
        na, nb = self.shape
        return pl.DataFrame(
            {
                "i": np.repeat(np.arange(na, dtype=np.int64), nb),
                "j": np.tile(np.arange(nb, dtype=np.int64), na),
                "precision": self.precision.reshape(-1),
                "recall": self.recall.reshape(-1),
                "fmeasure": self.fmeasure.reshape(-1),
            }
        )


# ----------------------------------------------------------------------------- tokenizers


def _prepare(texts: list, name: str, tokenizer: str) -> list:
    """Apply the Python-side part of a tokenizer (NFKC + lower for "unicode")."""
    if tokenizer != "unicode":
        return texts
    _core.text.check(texts, name)
    return [unicodedata.normalize("NFKC", s).lower() for s in texts]


# ----------------------------------------------------------------------------- public API


def tokenize(
    texts: str | Texts, *, tokenizer: Tokenizer = "rouge", stemmer: StemmerArg = False
) -> list[str] | list[list[str]]:
    """Return the tokens each text contributes to ROUGE.

    With ``tokenizer="rouge"`` this equals rouge-score's
    ``tokenizers.DefaultTokenizer(use_stemmer=stemmer).tokenize(text)``.

    Parameters
    ----------
    texts : str or sequence of str
        One text, or the texts (list, tuple, numpy, polars, pyarrow).
    tokenizer : {"rouge", "unicode", "whitespace"}, default "rouge"
        The tokenizer (module docstring).
    stemmer : bool or {"porter", "porter-original"}, default False
        Porter stemming of tokens longer than 3 characters (module docstring).

    Returns
    -------
    list of str, or list of list of str
        The tokens of one text, or of each text.
    """
    tok = _validate.choice(tokenizer, _TOKENIZERS, name="tokenizer")
    one = isinstance(texts, str)
    lst = _prepare([texts] if one else _validate.texts(texts, name="texts"), "texts", tok)
    out = _core.text.tokenize(lst, "texts", tok, _validate.stemmer(stemmer), 0)
    return out[0] if one else out


@renamed_keywords(workers="threads")
def rouge(
    hyps: str | Texts,
    refs: str | Texts,
    *,
    types: Sequence[str] = DEFAULT_TYPES,
    stemmer: StemmerArg = False,
    tokenizer: Tokenizer = "rouge",
    threads: int | None = None,
) -> RougeResult:
    """Compute ROUGE of each prediction ``hyps[i]`` against its reference ``refs[i]``.

    Equal, bit for bit, to ``rouge_score.rouge_scorer.RougeScorer(types,
    use_stemmer=stemmer).score(refs[i], hyps[i])`` (note rouge-score's argument order:
    target first). Types: ``"rougeN"`` for any N >= 1 (rouge-score accepts 1-9), ``"rougeL"``
    (LCS over the whole text), ``"rougeLsum"`` (summary-level union LCS over lines).

    Zero handling follows rouge-score: ROUGE-N precision and recall divide by
    ``max(count, 1)``, so an empty side scores 0; ROUGE-L/Lsum are 0 when either side has no
    tokens; the F-measure is 0 when precision + recall is 0.

    Parameters
    ----------
    hyps : str or sequence of str
        One prediction, or predictions (list, tuple, numpy, polars, pyarrow).
    refs : str or sequence of str
        Its reference (target), or references of the same length.
    types : sequence of str, default ("rouge1", "rouge2", "rougeL", "rougeLsum")
        ROUGE types to compute, without duplicates.
    stemmer : bool or {"porter", "porter-original"}, default False
        Porter stemming of tokens longer than 3 characters (see module docstring).
    tokenizer : {"rouge", "unicode", "whitespace"}, default "rouge"
        rouge-score's tokenizer, the CJK/Thai-aware one, or ``str.split()``.
    threads : int, optional
        Worker threads (None: all cores).

    Returns
    -------
    RougeResult
        Precision, recall and F-measure of every pair for each type (Python floats for one
        pair of strings).

    Raises
    ------
    InvalidArgumentError
        No or duplicate types, an unknown type, tokenizer or stemmer, or sequences of different
        lengths.
    InvalidTypeError
        ``hyps`` or ``refs`` is not a sequence of strings.
    """
    if isinstance(types, str):
        type_list = [types]
    elif isinstance(types, Sequence | np.ndarray) and all(isinstance(t, str) for t in types):
        type_list = list(types)
    else:
        raise InvalidTypeError(
            f"types: expected a rouge type or a sequence of them (str), got {reprlib.repr(types)}"
        )
    if not type_list:
        raise InvalidArgumentError("types: expected at least one rouge type, got none")
    if len(set(type_list)) != len(type_list):
        raise InvalidArgumentError(
            f"types: expected distinct rouge types, got duplicates in {type_list}"
        )
    codes = [_validate.rouge_type(t) for t in type_list]
    tok = _validate.choice(tokenizer, _TOKENIZERS, name="tokenizer")
    stem = _validate.stemmer(stemmer)
    h, r, one = _validate.pair_or_batch(hyps, refs)
    h = _prepare(h, "hyps", tok)
    r = _prepare(r, "refs", tok)
    p, rc, f = _core.text.rouge(
        h, r, "hyps", "refs", codes, tok, stem, _validate.check_threads(threads)
    )
    if one:
        p, rc, f = ([float(x[0]) for x in arrs] for arrs in (p, rc, f))
    scores = {t: RougeScore(p[k], rc[k], f[k]) for k, t in enumerate(type_list)}
    return RougeResult(types=tuple(type_list), scores=scores, tokenizer=tok, stemmer=stem)


@renamed_keywords(workers="threads")
def rouge_matrix(
    hyps: Texts,
    refs: Texts,
    *,
    type: str = "rouge1",
    stemmer: StemmerArg = False,
    tokenizer: Tokenizer = "rouge",
    threads: int | None = None,
) -> RougeMatrix:
    """Compute ROUGE of every ``hyps[i]`` (prediction) against every ``refs[j]`` (target).

    Entry ``(i, j)`` equals ``RougeScorer([type]).score(refs[j], hyps[i])[type]``. Each text is
    tokenized once; ROUGE-N pairs are a merge of sorted n-gram counts, ROUGE-L pairs a
    bit-parallel LCS. Used e.g. to match every generated insight against every ground-truth
    insight (MedInsightBench).

    Parameters
    ----------
    hyps : sequence of str
        Predictions (the rows).
    refs : sequence of str
        Targets (the columns).
    type : str, default "rouge1"
        The ROUGE type, as in :func:`rouge`.
    stemmer, tokenizer, threads
        As in :func:`rouge`.

    Returns
    -------
    RougeMatrix
        ``(len(hyps), len(refs))`` precision, recall and F-measure.
    """
    code = _validate.rouge_type(type)
    tok = _validate.choice(tokenizer, _TOKENIZERS, name="tokenizer")
    stem = _validate.stemmer(stemmer)
    la = _prepare(_validate.texts(hyps, name="hyps"), "hyps", tok)
    lb = _prepare(_validate.texts(refs, name="refs"), "refs", tok)
    n = _validate.check_threads(threads)
    p, r, f = _core.text.rouge_matrix(la, lb, "hyps", "refs", code, tok, stem, n)
    return RougeMatrix(p, r, f, type=type, tokenizer=tok, stemmer=stem)


@renamed_keywords(workers="threads")
def token_f1(
    hyps: str | Texts,
    refs: str | Texts,
    *,
    tokenizer: Literal["squad", "whitespace"] = "squad",
    both_empty: float = 1.0,
    threads: int | None = None,
) -> Any:
    r"""Compute the SQuAD token F1 of each hypothesis against its reference.

    ``tokenizer="squad"`` is the official ``normalize_answer`` of the SQuAD v1.1 and v2.0
    evaluation scripts: ``str.lower()``, remove the characters of ``string.punctuation``,
    replace the words a/an/the (``re.sub(r"\b(a|an|the)\b", " ", s)``) by a space, then
    ``str.split()``. ``tokenizer="whitespace"`` splits the raw text with ``str.split()`` (as
    the ``"whitespace"`` tokenizer of :func:`rouge`).
    F1 over the multiset overlap: ``p = same / len(pred)``, ``r = same / len(ref)``,
    ``2 * p * r / (p + r)``; 0 when nothing overlaps.

    Empty answers: when exactly one side has no tokens the score is 0 (both scripts). When
    both are empty, SQuAD v2.0's script returns 1 and v1.1's returns 0; ``both_empty``
    (default 1.0, the v2.0 convention) sets that value, ``both_empty=0.0`` gives v1.1.

    Parameters
    ----------
    hyps, refs : str or sequence of str
        One hypothesis and its reference, or hypotheses and references of the same length.
    tokenizer : {"squad", "whitespace"}, default "squad"
        SQuAD's answer normalization then ``str.split()``, or ``str.split()`` alone.
    both_empty : float, default 1.0
        The score when both sides have no tokens.
    threads : int, optional
        Worker threads (None: all cores).

    Returns
    -------
    float or numpy.ndarray
        The F1 of one pair, or float64 F1 per pair.
    """
    _validate.choice(tokenizer, ("squad", "whitespace"), name="tokenizer")
    be = _validate.finite(both_empty, name="both_empty")
    p, r, one = _validate.pair_or_batch(hyps, refs)
    squad = tokenizer == "squad"
    if squad:
        _core.text.check(p, "hyps")
        _core.text.check(r, "refs")
        p = [s.lower() for s in p]
        r = [s.lower() for s in r]
    out = _core.text.token_f1(p, r, "hyps", "refs", squad, be, _validate.check_threads(threads))
    return float(out[0]) if one else out


def set_f1(
    hyps: str | Texts,
    refs: str | Texts,
    *,
    tokenizer: SetTokenizer = "rouge",
    lowercase: bool = True,
    threads: int | None = None,
) -> Any:
    """Compute the F1 over the sets of distinct tokens of each hypothesis and reference.

    ``p = |P & R| / |P|``, ``r = |P & R| / |R|``, ``2 * (p * r) / (p + r)``; 0 when either
    set is empty or nothing is shared. This is RadA-BenchPlat's final-response F1, which
    tokenizes ``text.lower()`` with NLTK's ``word_tokenize``. ``tokenizer="treebank"`` uses
    ``nltk.tokenize.NLTKWordTokenizer`` (needs the ``nltk`` package but no NLTK data); it
    differs from ``word_tokenize`` only in that ``word_tokenize`` first splits sentences with
    Punkt (which needs data), so sentence-final periods inside a multi-sentence text stay
    attached. The default is rouge-score's tokenizer. ``lowercase`` applies ``str.lower()``
    before the whitespace and treebank tokenizers (the rouge and unicode tokenizers always
    lowercase).

    Parameters
    ----------
    hyps, refs : str or sequence of str
        One hypothesis and its reference, or hypotheses and references of the same length.
    tokenizer : {"rouge", "unicode", "whitespace", "treebank"}, default "rouge"
        The tokenizer.
    lowercase : bool, default True
        Lowercase before the whitespace and treebank tokenizers.
    threads : int, optional
        Worker threads (None: all cores).

    Returns
    -------
    float or numpy.ndarray
        The F1 of one pair, or float64 F1 per pair.

    Raises
    ------
    MissingDependencyError
        ``tokenizer="treebank"`` without the ``nltk`` package.
    """
    tok = _validate.choice(tokenizer, (*_TOKENIZERS, "treebank"), name="tokenizer")
    lower = _validate.flag(lowercase, name="lowercase")
    p, r, one = _validate.pair_or_batch(hyps, refs)
    if tok in ("whitespace", "treebank"):
        _core.text.check(p, "hyps")
        _core.text.check(r, "refs")
        if lower:
            p = [s.lower() for s in p]
            r = [s.lower() for s in r]
    if tok == "treebank":
        try:
            from nltk.tokenize import NLTKWordTokenizer
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise MissingDependencyError.for_extra(
                "tokenizer='treebank'", package="nltk", extra=None, cause=e
            ) from e
        tb = NLTKWordTokenizer()
        # Treebank tokens contain no whitespace, so joining with spaces and splitting in C++
        # gives back exactly these tokens.
        p = [" ".join(tb.tokenize(s)) for s in p]
        r = [" ".join(tb.tokenize(s)) for s in r]
        tok = "whitespace"
    else:
        p = _prepare(p, "hyps", tok)
        r = _prepare(r, "refs", tok)
    out = _core.text.set_f1(p, r, "hyps", "refs", tok, _validate.check_threads(threads))
    return float(out[0]) if one else out
