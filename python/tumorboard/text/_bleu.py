"""BLEU identical to sacrebleu, over the C++ text engine (csrc/text/bleu*.cpp).

BLEU is Papineni et al. (2002), "BLEU: a Method for Automatic Evaluation of Machine
Translation", as implemented by sacrebleu 2.x (Post 2018, "A Call for Clarity in Reporting BLEU
Scores"; ``sacrebleu/metrics/bleu.py``): ``bleu`` equals
``BLEU(...).sentence_score(hyp, refs)`` and ``corpus_bleu`` equals
``BLEU(...).corpus_score(hyps, refs)`` / ``sacrebleu.corpus_bleu``, bit for bit: the same
tokenization, the same integer statistics and the same floating-point operations in the same
order (``math.exp(sum(log p) / n)``; the sum is added the way the running Python's ``sum()``
adds floats, which changed in CPython 3.12).

Tokenizers (``tokenize=``), applied after ``str.lower()`` (with ``lowercase=True``) and
``str.rstrip()``; tokens are then the ``str.split()`` pieces (Python's full whitespace set):

``"13a"``
    mteval-v13a (sacrebleu's default): removes ``<skipped>``, joins ``-\\n``, maps ``\\n`` to a
    space, unescapes ``&quot; &amp; &lt; &gt;``, then splits off punctuation and symbols, and
    periods/commas except inside numbers, and a dash after a digit.
``"zh"``
    sacrebleu's Chinese tokenizer: every character in its CJK ranges becomes a token, the rest
    is tokenized by the 13a rules (without the entity handling).
``"char"``
    every non-whitespace character is a token.
``"none"``
    whitespace split only.

Smoothing (``smooth=``; Chen & Cherry 2014, "A Systematic Comparison of Smoothing Techniques
for Sentence-Level BLEU"): ``"exp"`` (NIST geometric halving, sacrebleu's default), ``"floor"``
(zero precisions become ``smooth_value / total``, default 0.1), ``"add-k"`` (``smooth_value``,
default 1, added to matches and totals of orders 2 and up), ``"none"``.

Per-item sufficient statistics (``bleu_statistics``) have the columns
``[matches_1..N, totals_1..N, hyp_len, ref_len]`` (N = ``max_order``): clipped n-gram matches,
hypothesis n-grams, hypothesis length in tokens, and the length of the closest reference (ties
to the shorter one). Corpus BLEU is a function of their column sums, which is what the
bootstrap engine resamples (statistic ``"bleu"``; see :func:`bleu_statistic_params`).
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import polars as pl
import pyarrow as pa

from .. import _core
from .._keys import factorize, label_columns
from .._typing import Method
from ..stats import BootstrapResult, bootstrap_sufficient

Smooth = Literal["exp", "floor", "add-k", "none"]
Tokenize = Literal["13a", "zh", "char", "none"]

_SMOOTH_CODES = {"none": 0, "floor": 1, "add-k": 2, "exp": 3}
_TOKENIZERS = ("13a", "zh", "char", "none")
# How sum() adds floats: left to right up to CPython 3.11, Neumaier-compensated from 3.12.
_PY_SUM = 1 if sys.version_info >= (3, 12) else 0


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True, eq=False)
class BleuResult:
    """Sentence BLEU of each (hypothesis, references) item.

    Attributes:
        score: BLEU in [0, 100] (sacrebleu's ``BLEUScore.score``), float64 (n,).
        bp: brevity penalty.
        ratio: hypothesis length / reference length (0 when the reference is empty).
        precisions: n-gram precisions in [0, 100] after smoothing, (n, max_order).
        sys_len, ref_len: hypothesis length and closest reference length, in tokens.
        statistics: the (n, 2 * max_order + 2) int64 sufficient statistics
            ``[matches_1..N, totals_1..N, hyp_len, ref_len]``.
    """

    score: np.ndarray
    bp: np.ndarray
    ratio: np.ndarray
    precisions: np.ndarray
    sys_len: np.ndarray
    ref_len: np.ndarray
    statistics: np.ndarray = field(repr=False)
    max_order: int
    smooth: str
    smooth_value: float | None
    tokenize: str
    lowercase: bool
    effective_order: bool

    def __len__(self) -> int:
        return int(self.score.shape[0])

    def to_polars(self) -> pl.DataFrame:
        """One row per item: score, bp, ratio, sys_len, ref_len, precision_1..precision_N."""
        cols: dict[str, Any] = {
            "score": self.score,
            "bp": self.bp,
            "ratio": self.ratio,
            "sys_len": self.sys_len,
            "ref_len": self.ref_len,
        }
        for j in range(self.max_order):
            cols[f"precision_{j + 1}"] = self.precisions[:, j]
        return pl.DataFrame(cols)


@dataclass(frozen=True, eq=False)
class CorpusBleuResult:
    """Corpus BLEU, one entry per group (a single entry without ``groups``).

    Attributes:
        keys: group key columns, name -> values (empty without ``groups``).
        n: items per group.
        score: corpus BLEU in [0, 100] (sacrebleu's ``corpus_score(...).score``).
        bp, ratio: brevity penalty and length ratio of the corpus.
        precisions: (groups, max_order) n-gram precisions in [0, 100] after smoothing.
        counts, totals: (groups, max_order) summed clipped matches and hypothesis n-grams
            (before any add-k smoothing).
        sys_len, ref_len: summed hypothesis and closest-reference lengths.
        se, ci_low, ci_high: bootstrap standard error and confidence interval of the score
            (NaN when ``n_resamples == 0``).
        bootstrap: the engine's :class:`~tumorboard.stats.BootstrapResult` (None without
            resampling).
    """

    keys: dict[str, np.ndarray]
    n: np.ndarray
    score: np.ndarray
    bp: np.ndarray
    ratio: np.ndarray
    precisions: np.ndarray
    counts: np.ndarray
    totals: np.ndarray
    sys_len: np.ndarray
    ref_len: np.ndarray
    se: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    max_order: int
    smooth: str
    smooth_value: float | None
    tokenize: str
    lowercase: bool
    effective_order: bool
    n_resamples: int
    level: float
    method: str
    seed: int
    bootstrap: BootstrapResult | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return int(self.score.shape[0])

    def interval(self) -> tuple[float, float]:
        """(ci_low, ci_high) of a single-group result."""
        if len(self) != 1:
            raise ValueError(f"interval() needs a single-group result; this one has {len(self)}")
        return float(self.ci_low[0]), float(self.ci_high[0])

    def to_polars(self) -> pl.DataFrame:
        """One row per group: key columns, n, score, se, ci_low, ci_high, bp, ratio, sys_len,
        ref_len, precision_1..precision_N."""
        cols: dict[str, Any] = {name: values for name, values in self.keys.items()}
        for name in ("n", "score", "se", "ci_low", "ci_high", "bp", "ratio", "sys_len",
                     "ref_len"):  # fmt: skip
            cols[name] = getattr(self, name)
        for j in range(self.max_order):
            cols[f"precision_{j + 1}"] = self.precisions[:, j]
        return pl.DataFrame(cols)


# ----------------------------------------------------------------------------- inputs


def _arrow_column(arr: Any, name: str) -> Any:
    """Zero-copy (offsets, bytes, validity) of a pyarrow string array, or a list if empty."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if len(arr) == 0:
        return []
    t = arr.type
    if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t)):
        if not (hasattr(pa.types, "is_string_view") and pa.types.is_string_view(t)):
            raise TypeError(f"{name}: expected strings, got an Arrow array of type {t}")
    if not pa.types.is_large_string(t):
        arr = arr.cast(pa.large_string())
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = np.zeros(0, np.uint8) if bufs[2] is None else np.frombuffer(bufs[2], dtype=np.uint8)
    valid = None
    if arr.null_count:
        valid = arr.is_valid().to_numpy(zero_copy_only=False).astype(np.uint8)
    return (offsets, data, valid)


def _text_column(texts: Any, name: str) -> Any:
    """A list of str (checked in C++) or an Arrow (offsets, bytes, validity) tuple."""
    if isinstance(texts, str | bytes):
        raise TypeError(f"{name}: expected a sequence of str, got a single {type(texts).__name__}")
    if isinstance(texts, list):
        return texts
    if isinstance(texts, pl.Series):
        if texts.dtype != pl.String and texts.dtype != pl.Null:
            raise TypeError(f"{name}: expected a String Series, got dtype {texts.dtype}")
        return _arrow_column(texts.to_arrow(), name)
    if isinstance(texts, pa.Array | pa.ChunkedArray):
        return _arrow_column(texts, name)
    if isinstance(texts, np.ndarray):
        if texts.ndim != 1:
            raise ValueError(f"{name}: expected a 1-D array of str, got {texts.ndim}-D")
        return texts.tolist()
    if isinstance(texts, Sequence) or hasattr(texts, "__iter__"):
        return list(texts)
    raise TypeError(f"{name}: expected a sequence of str, got {type(texts).__name__}")


def _is_stream(x: Any) -> bool:
    """Whether an element of ``refs`` is itself a sequence of references (not a text)."""
    if x is None or isinstance(x, str | bytes | float):
        return False
    return isinstance(x, Sequence | np.ndarray | pl.Series | pa.Array | pa.ChunkedArray)


def _ref_streams(refs: Any) -> list:
    """refs as a list of reference streams (refs[k][i]: k-th reference of item i)."""
    if isinstance(refs, str | bytes):
        raise TypeError(f"refs: expected a sequence of str, got a single {type(refs).__name__}")
    if isinstance(refs, pl.Series | pa.Array | pa.ChunkedArray):
        return [_text_column(refs, "refs")]
    if isinstance(refs, np.ndarray):
        if refs.ndim == 2:
            return [_text_column(row, f"refs[{k}]") for k, row in enumerate(refs)]
        return [_text_column(refs, "refs")]
    seq = refs if isinstance(refs, list | tuple) else list(refs)
    if len(seq) > 0 and _is_stream(seq[0]):
        for k, s in enumerate(seq):
            if not _is_stream(s):
                raise TypeError(
                    f"refs[{k}]: expected a reference stream (a sequence of str) like refs[0], "
                    f"got {type(s).__name__}"
                )
        return [_text_column(s, f"refs[{k}]") for k, s in enumerate(seq)]
    return [_text_column(list(seq) if isinstance(seq, tuple) else seq, "refs")]


def _threads(threads: Any) -> int:
    if threads is None:
        return 0
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or threads < 1:
        raise ValueError(f"threads: expected None or an integer >= 1, got {threads!r}")
    return int(threads)


def _check_tokenize(tokenize: Any) -> str:
    if tokenize not in _TOKENIZERS:
        raise ValueError(
            f"tokenize: expected one of {_TOKENIZERS}, got {tokenize!r} (sacrebleu's 'intl', "
            "'ja-mecab', 'ko-mecab' and 'spm' tokenizers are not available)"
        )
    return str(tokenize)


def _check_max_order(max_order: Any) -> int:
    if isinstance(max_order, bool) or not isinstance(max_order, numbers.Integral):
        raise ValueError(f"max_order: expected an integer >= 1, got {max_order!r}")
    if not 1 <= int(max_order) <= 1000:
        raise ValueError(f"max_order: expected an integer in [1, 1000], got {max_order}")
    return int(max_order)


def _check_smooth(smooth: Any, smooth_value: Any) -> float | None:
    if smooth not in _SMOOTH_CODES:
        raise ValueError(f"smooth: expected one of {tuple(_SMOOTH_CODES)}, got {smooth!r}")
    if smooth_value is None:
        return None
    if isinstance(smooth_value, bool) or not isinstance(smooth_value, numbers.Real):
        raise ValueError(f"smooth_value: expected None or a number, got {smooth_value!r}")
    value = float(smooth_value)
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"smooth_value: expected a finite number >= 0, got {smooth_value!r}")
    return value


def _check_flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{name}: expected True or False, got {value!r}")
    return bool(value)


# ----------------------------------------------------------------------------- public API


def bleu_statistic_params(
    *,
    smooth: Smooth = "exp",
    smooth_value: float | None = None,
    effective_order: bool = False,
    max_order: int = 4,
) -> list[float]:
    """``params`` of the bootstrap engine's ``"bleu"`` statistic, for
    ``tumorboard.stats.bootstrap_sufficient(bleu_statistics(...), statistic="bleu",
    params=...)``: [max_order, smoothing code, smooth_value (NaN: default), effective_order,
    how this Python's ``sum()`` adds floats]."""
    value = _check_smooth(smooth, smooth_value)
    return [
        float(_check_max_order(max_order)),
        float(_SMOOTH_CODES[smooth]),
        float("nan") if value is None else value,
        float(_check_flag(effective_order, "effective_order")),
        float(_PY_SUM),
    ]


def bleu_statistics(
    hyps: Any,
    refs: Any,
    *,
    tokenize: Tokenize = "13a",
    lowercase: bool = False,
    max_order: int = 4,
    threads: int | None = None,
) -> np.ndarray:
    """Per-item BLEU sufficient statistics, int64 (n, 2 * max_order + 2).

    Columns: ``matches_1..matches_N`` (clipped n-gram matches: each hypothesis n-gram counts at
    most as often as it occurs in the reference where it occurs most), ``totals_1..totals_N``
    (hypothesis n-grams), ``hyp_len`` (hypothesis tokens) and ``ref_len`` (tokens of the
    reference whose length is closest to ``hyp_len``, the shorter one on ties). sacrebleu
    keeps the same numbers as ``[hyp_len, ref_len, matches..., totals...]``.

    Args:
        hyps: hypothesis texts (list/tuple of str, 1-D numpy array, polars Series, pyarrow
            array).
        refs: one reference per hypothesis (a sequence of str), or several reference streams
            as sacrebleu takes them (``refs[k][i]`` is the k-th reference of item i; None marks
            a missing reference, every item needs at least one).
        tokenize: "13a", "zh", "char" or "none" (see the module docstring).
        lowercase: lowercase hypotheses and references (``str.lower()``) first.
        max_order: the largest n-gram order N.
        threads: worker threads (default: all cores); results do not depend on it.
    """
    tok = _check_tokenize(tokenize)
    lower = _check_flag(lowercase, "lowercase")
    order = _check_max_order(max_order)
    h = _text_column(hyps, "hyps")
    streams = _ref_streams(refs)
    return _core.text.bleu_statistics(h, streams, tok, lower, order, _threads(threads))


def bleu(
    hyps: Any,
    refs: Any,
    *,
    smooth: Smooth = "exp",
    smooth_value: float | None = None,
    tokenize: Tokenize = "13a",
    lowercase: bool = False,
    effective_order: bool = True,
    max_order: int = 4,
    threads: int | None = None,
) -> BleuResult:
    """Sentence BLEU of each item, identical to
    ``sacrebleu.metrics.BLEU(smooth_method=smooth, smooth_value=smooth_value,
    tokenize=tokenize, lowercase=lowercase, effective_order=effective_order,
    max_ngram_order=max_order).sentence_score(hyps[i], [refs[i]])``.

    Args:
        hyps, refs, tokenize, lowercase, max_order, threads: as in :func:`bleu_statistics`.
        smooth: "exp" (default), "floor", "add-k" or "none".
        smooth_value: the value of "floor" (default 0.1) or "add-k" (default 1).
        effective_order: leave out n-gram orders the hypothesis is too short to have (the
            recommended setting for sentence BLEU, and the default here as in
            ``sacrebleu.sentence_bleu``).

    Returns:
        A :class:`BleuResult` (scores in [0, 100]); ``.to_polars()`` gives one row per item.
    """
    tok = _check_tokenize(tokenize)
    lower = _check_flag(lowercase, "lowercase")
    order = _check_max_order(max_order)
    value = _check_smooth(smooth, smooth_value)
    eff = _check_flag(effective_order, "effective_order")
    h = _text_column(hyps, "hyps")
    streams = _ref_streams(refs)
    out = _core.text.bleu_sentence(h, streams, tok, lower, order, smooth, value, eff, _PY_SUM,
                              _threads(threads))  # fmt: skip
    stats = out["statistics"]
    return BleuResult(
        score=out["score"], bp=out["bp"], ratio=out["ratio"], precisions=out["precisions"],
        sys_len=stats[:, 2 * order].copy(), ref_len=stats[:, 2 * order + 1].copy(),
        statistics=stats, max_order=order, smooth=smooth, smooth_value=value, tokenize=tok,
        lowercase=lower, effective_order=eff,
    )  # fmt: skip


def corpus_bleu(
    hyps: Any,
    refs: Any,
    *,
    smooth: Smooth = "exp",
    smooth_value: float | None = None,
    tokenize: Tokenize = "13a",
    lowercase: bool = False,
    effective_order: bool = False,
    max_order: int = 4,
    n_resamples: int = 0,
    level: float = 0.95,
    method: Method = "percentile",
    seed: int = 0,
    groups: Any = None,
    clusters: Any = None,
    threads: int | None = None,
) -> CorpusBleuResult:
    """Corpus BLEU, identical to ``sacrebleu.corpus_bleu(hyps, [refs], ...)`` (i.e.
    ``BLEU(...).corpus_score``; ``effective_order`` defaults to False there and here), with an
    optional bootstrap confidence interval and one score per group.

    Args:
        hyps, refs, tokenize, lowercase, max_order, threads: as in :func:`bleu_statistics`.
        smooth, smooth_value, effective_order: as in :func:`bleu`.
        n_resamples: bootstrap resamples for the interval (0: no interval). Items (or
            ``clusters``) are resampled and corpus BLEU is recomputed from the resampled sums
            of their statistics, in the C++ engine (Koehn 2004, "Statistical Significance
            Tests for Machine Translation Evaluation").
        level: confidence level of the two-sided interval.
        method: "percentile", "basic" or "bca".
        seed: random seed; the interval is bit-identical for any ``threads``.
        groups: labels giving one corpus BLEU (and interval) per group, e.g. per model; a 1-D
            array, a mapping of name -> array, or a polars DataFrame of key columns.
        clusters: labels of resampling clusters (e.g. documents or patients).

    Returns:
        A :class:`CorpusBleuResult`; ``.to_polars()`` gives one row per group.
    """
    value = _check_smooth(smooth, smooth_value)
    eff = _check_flag(effective_order, "effective_order")
    order = _check_max_order(max_order)
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, numbers.Integral):
        raise ValueError(f"n_resamples: expected an integer >= 0, got {n_resamples!r}")
    if n_resamples < 0:
        raise ValueError(f"n_resamples: expected an integer >= 0, got {n_resamples}")
    if not isinstance(level, numbers.Real) or not 0.0 < float(level) < 1.0:
        raise ValueError(f"level: expected a number strictly between 0 and 1, got {level!r}")
    if method not in ("percentile", "basic", "bca"):
        raise ValueError(f"method: expected 'percentile', 'basic' or 'bca', got {method!r}")
    stats = bleu_statistics(hyps, refs, tokenize=tokenize, lowercase=lowercase, max_order=order,
                            threads=threads)  # fmt: skip
    n = stats.shape[0]
    if n == 0:
        raise ValueError("hyps: empty input; corpus BLEU needs at least one item")
    params = bleu_statistic_params(smooth=smooth, smooth_value=value, effective_order=eff,
                                   max_order=order)  # fmt: skip
    if groups is None:
        keys: dict[str, np.ndarray] = {}
        sums = stats.sum(axis=0, dtype=np.int64)[None, :]
        counts_per_group = np.array([n], dtype=np.int64)
    else:
        codes, keys, n_groups = factorize(label_columns(groups, name="groups", n=n))
        sums = np.stack(
            [np.bincount(codes, weights=stats[:, j], minlength=n_groups)
             for j in range(stats.shape[1])], axis=1,
        ).astype(np.int64)  # fmt: skip
        counts_per_group = np.bincount(codes, minlength=n_groups).astype(np.int64)
    parts = _core.text.bleu_from_statistics(sums.astype(np.float64), order, smooth, value, eff,
                                       _PY_SUM)  # fmt: skip
    boot = None
    nan = np.full(sums.shape[0], np.nan)
    se, lo, hi = nan, nan, nan
    if n_resamples > 0:
        boot = bootstrap_sufficient(
            stats, statistic="bleu", params=params, groups=groups, clusters=clusters,
            n_resamples=int(n_resamples), level=level, method=method, seed=seed, threads=threads,
        )  # fmt: skip
        se, lo, hi = boot.se, boot.ci_low, boot.ci_high
    return CorpusBleuResult(
        keys=keys, n=counts_per_group, score=parts["score"], bp=parts["bp"],
        ratio=parts["ratio"], precisions=parts["precisions"], counts=sums[:, :order],
        totals=sums[:, order : 2 * order], sys_len=sums[:, 2 * order],
        ref_len=sums[:, 2 * order + 1], se=se, ci_low=lo, ci_high=hi, max_order=order,
        smooth=smooth, smooth_value=value, tokenize=tokenize, lowercase=bool(lowercase),
        effective_order=eff, n_resamples=int(n_resamples), level=float(level), method=method,
        seed=int(seed), bootstrap=boot,
    )  # fmt: skip
