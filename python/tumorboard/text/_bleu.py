r"""BLEU identical to sacrebleu, over the C++ text engine (csrc/text/bleu*.cpp).

BLEU is Papineni et al. (2002), "BLEU: a Method for Automatic Evaluation of Machine
Translation", as implemented by sacrebleu 2.x (Post 2018, "A Call for Clarity in Reporting BLEU
Scores"; ``sacrebleu/metrics/bleu.py``): ``bleu`` equals
``BLEU(...).sentence_score(hyp, refs)`` and ``corpus_bleu`` equals
``BLEU(...).corpus_score(hyps, refs)`` / ``sacrebleu.corpus_bleu``, bit for bit: the same
tokenization, the same integer statistics and the same floating-point operations in the same
order (``math.exp(sum(log p) / n)``; the sum is added the way the running Python's ``sum()``
adds floats, which changed in CPython 3.12).

Tokenizers (``tokenizer=``, the keyword every text metric uses; the values are sacrebleu's
``tokenize`` names), applied after ``str.lower()`` (with ``lowercase=True``) and
``str.rstrip()``; tokens are then the ``str.split()`` pieces (Python's full whitespace set):

``"13a"``
    mteval-v13a (sacrebleu's default): removes ``<skipped>``, joins ``-\n``, maps ``\n`` to a
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

One hypothesis (a ``str``, with one reference or a list of references) gives Python scalars;
sequences give one array entry per item. Corpus BLEU without ``groups`` is one corpus: Python
scalars (``corpus_bleu(hyps, refs).score`` is a ``float``); with ``groups`` one entry per group.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import polars as pl

from .. import _core
from .._deprecate import options_keywords, renamed_keywords
from .._keys import factorize, label_columns
from .._results import entries, interval, per_column, squeeze, table
from .._typing import Labels, Texts
from ..errors import InvalidArgumentError, InvalidTypeError
from ..stats import BootstrapOptions, BootstrapResult, bootstrap_sufficient
from . import _validate

Smooth = Literal["exp", "floor", "add-k", "none"]
Tokenizer = Literal["13a", "zh", "char", "none"]

_SMOOTH_CODES = {"none": 0, "floor": 1, "add-k": 2, "exp": 3}
_TOKENIZERS = ("13a", "zh", "char", "none")
# How sum() adds floats: left to right up to CPython 3.11, Neumaier-compensated from 3.12.
_PY_SUM = 1 if sys.version_info >= (3, 12) else 0


# ----------------------------------------------------------------------------- results


_SENTENCE_FIELDS = ("score", "bp", "ratio", "precisions", "sys_len", "ref_len", "statistics")
_CORPUS_FIELDS = ("n", "score", "bp", "ratio", "precisions", "counts", "totals", "sys_len",
                  "ref_len", "se", "ci_low", "ci_high")  # fmt: skip


@dataclass(frozen=True, eq=False)
class BleuResult:
    """Sentence BLEU of each (hypothesis, references) item, or of one.

    Attributes
    ----------
    score : float or numpy.ndarray
        BLEU in [0, 100] (sacrebleu's ``BLEUScore.score``), float64 (n,); a float for one
        hypothesis.
    bp : float or numpy.ndarray
        Brevity penalty.
    ratio : float or numpy.ndarray
        Hypothesis length / reference length (0 when the reference is empty).
    precisions : numpy.ndarray
        N-gram precisions in [0, 100] after smoothing, (n, max_order), or (max_order,).
    sys_len, ref_len : int or numpy.ndarray
        Hypothesis length and closest reference length, in tokens.
    statistics : numpy.ndarray
        The (n, 2 * max_order + 2) int64 sufficient statistics
        ``[matches_1..N, totals_1..N, hyp_len, ref_len]`` ((2 * max_order + 2,) for one).
    max_order, smooth, smooth_value, tokenizer, lowercase, effective_order
        The options the scores were computed with (as in :func:`bleu`).
    """

    score: Any
    bp: Any
    ratio: Any
    precisions: np.ndarray
    sys_len: Any
    ref_len: Any
    statistics: np.ndarray = field(repr=False)
    max_order: int
    smooth: str
    smooth_value: float | None
    tokenizer: str
    lowercase: bool
    effective_order: bool

    def __len__(self) -> int:
        return entries(self.score)

    def to_polars(self) -> pl.DataFrame:
        """Return one row per item: score, bp, ratio, sys_len, ref_len, precision_1..precision_N.

        Returns
        -------
        polars.DataFrame
            One row per item (one row for one hypothesis).
        """
        cols: dict[str, Any] = {
            "score": self.score,
            "bp": self.bp,
            "ratio": self.ratio,
            "sys_len": self.sys_len,
            "ref_len": self.ref_len,
        }
        cols.update(per_column(self.precisions, "precision", self.max_order))
        return table(cols)


@dataclass(frozen=True, eq=False)
class CorpusBleuResult:
    """Corpus BLEU: Python scalars without ``groups``, one array entry per group with them.

    Attributes
    ----------
    keys : dict of str to numpy.ndarray
        Group key columns, name -> values (empty without ``groups``).
    n : int or numpy.ndarray
        Items per group.
    score : float or numpy.ndarray
        Corpus BLEU in [0, 100] (sacrebleu's ``corpus_score(...).score``).
    bp, ratio : float or numpy.ndarray
        Brevity penalty and length ratio of the corpus.
    precisions : numpy.ndarray
        (groups, max_order) n-gram precisions in [0, 100] after smoothing ((max_order,)
        without groups).
    counts, totals : numpy.ndarray
        (groups, max_order) summed clipped matches and hypothesis n-grams (before any add-k
        smoothing); (max_order,) without groups.
    sys_len, ref_len : int or numpy.ndarray
        Summed hypothesis and closest-reference lengths.
    se, ci_low, ci_high : float or numpy.ndarray
        Bootstrap standard error and confidence interval of the score (NaN without
        ``ci=True``).
    max_order, smooth, smooth_value, tokenizer, lowercase, effective_order
        The options the scores were computed with (as in :func:`corpus_bleu`).
    n_resamples, level, method, seed
        The bootstrap options (``n_resamples`` is 0 without ``ci=True``).
    bootstrap : BootstrapResult or None
        The engine's :class:`~tumorboard.stats.BootstrapResult` (None without resampling).
    """

    keys: dict[str, np.ndarray]
    n: Any
    score: Any
    bp: Any
    ratio: Any
    precisions: np.ndarray
    counts: np.ndarray
    totals: np.ndarray
    sys_len: Any
    ref_len: Any
    se: Any
    ci_low: Any
    ci_high: Any
    max_order: int
    smooth: str
    smooth_value: float | None
    tokenizer: str
    lowercase: bool
    effective_order: bool
    n_resamples: int
    level: float
    method: str
    seed: int
    bootstrap: BootstrapResult | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return entries(self.score)

    def interval(self) -> tuple[float, float]:
        """Return ``(ci_low, ci_high)`` of an ungrouped (or single-group) result.

        Returns
        -------
        tuple of float
            The confidence interval.

        Raises
        ------
        InvalidArgumentError
            The result has more than one group.
        """
        return interval(self)

    def to_polars(self) -> pl.DataFrame:
        """Return the result as a table with one row per group (one row without groups).

        The columns are the key columns, n, score, se, ci_low, ci_high, bp, ratio, sys_len,
        ref_len, precision_1..precision_N.

        Returns
        -------
        polars.DataFrame
            One row per group.
        """
        cols: dict[str, Any] = {name: values for name, values in self.keys.items()}
        for name in ("n", "score", "se", "ci_low", "ci_high", "bp", "ratio", "sys_len",
                     "ref_len"):  # fmt: skip
            cols[name] = getattr(self, name)
        cols.update(per_column(self.precisions, "precision", self.max_order))
        return table(cols)


# ----------------------------------------------------------------------------- inputs


def _inputs(
    hyps: Any, refs: Any, tokenizer: Any, lowercase: Any, max_order: Any
) -> tuple[Any, list[Any], str, bool, int, bool]:
    """Validate the texts, reference streams, tokenizer, lowercase flag and n-gram order.

    The last value tells whether ``hyps`` was one hypothesis (a ``str``): its references are
    then one ``str`` or a sequence of them (sacrebleu's ``sentence_score(hyp, refs)``).
    """
    note = " (sacrebleu's 'intl', 'ja-mecab', 'ko-mecab' and 'spm' tokenizers are not available)"
    tok = _validate.choice(tokenizer, _TOKENIZERS, name="tokenizer", note=note)
    lower = _validate.flag(lowercase, name="lowercase")
    order = _validate.max_order(max_order)
    if isinstance(hyps, str):
        one = [refs] if isinstance(refs, str) else _validate.texts(refs, name="refs")
        if not one:
            raise InvalidArgumentError("refs: expected at least one reference for the hypothesis")
        return [hyps], [[r] for r in one], tok, lower, order, True
    h, streams = _validate.text_column(hyps, name="hyps"), _validate.ref_streams(refs)
    return h, streams, tok, lower, order, False


def _smoothing(smooth: Any, smooth_value: Any, effective_order: Any) -> tuple[float | None, bool]:
    """Validate the smoothing method and value and the effective-order flag."""
    _validate.choice(smooth, tuple(_SMOOTH_CODES), name="smooth")
    return (
        _validate.smooth_value(smooth_value),
        _validate.flag(effective_order, name="effective_order"),
    )


# ----------------------------------------------------------------------------- public API


def bleu_statistic_params(
    *,
    smooth: Smooth = "exp",
    smooth_value: float | None = None,
    effective_order: bool = False,
    max_order: int = 4,
) -> list[float]:
    """Return the ``params`` of the bootstrap engine's ``"bleu"`` statistic.

    For ``tumorboard.stats.bootstrap_sufficient(bleu_statistics(...), statistic="bleu",
    params=...)``.

    Parameters
    ----------
    smooth, smooth_value, effective_order, max_order
        As in :func:`corpus_bleu`.

    Returns
    -------
    list of float
        [max_order, smoothing code, smooth_value (NaN: default), effective_order, how this
        Python's ``sum()`` adds floats].

    Raises
    ------
    InvalidArgumentError
        An invalid option (the message names it).
    """
    value, eff = _smoothing(smooth, smooth_value, effective_order)
    return _params(smooth, value, eff, _validate.max_order(max_order))


def _params(smooth: str, value: float | None, eff: bool, order: int) -> list[float]:
    """Return the ``"bleu"`` statistic's params of validated options."""
    nan = float("nan")
    return [float(order), float(_SMOOTH_CODES[smooth]), nan if value is None else value,
            float(eff), float(_PY_SUM)]  # fmt: skip


@renamed_keywords(tokenize="tokenizer", workers="threads")
def bleu_statistics(
    hyps: str | Texts,
    refs: str | Texts | Sequence[Texts],
    *,
    tokenizer: Tokenizer = "13a",
    lowercase: bool = False,
    max_order: int = 4,
    threads: int | None = None,
) -> np.ndarray:
    """Compute per-item BLEU sufficient statistics, int64 (n, 2 * max_order + 2).

    One hypothesis (a ``str``) gives its one row, shape (2 * max_order + 2,).

    Columns: ``matches_1..matches_N`` (clipped n-gram matches: each hypothesis n-gram counts at
    most as often as it occurs in the reference where it occurs most), ``totals_1..totals_N``
    (hypothesis n-grams), ``hyp_len`` (hypothesis tokens) and ``ref_len`` (tokens of the
    reference whose length is closest to ``hyp_len``, the shorter one on ties). sacrebleu
    keeps the same numbers as ``[hyp_len, ref_len, matches..., totals...]``.

    Parameters
    ----------
    hyps : str or sequence of str
        One hypothesis, or hypothesis texts (list/tuple of str, 1-D numpy array, polars Series,
        pyarrow array).
    refs : str, sequence of str, or sequence of reference streams
        For one hypothesis: its reference, or a list of its references. For a sequence: one
        reference per hypothesis, or several reference streams as sacrebleu takes them
        (``refs[k][i]`` is the k-th reference of item i; None marks a missing reference, every
        item needs at least one).
    tokenizer : {"13a", "zh", "char", "none"}, default "13a"
        The tokenizer (module notes).
    lowercase : bool, default False
        Lowercase hypotheses and references (``str.lower()``) first.
    max_order : int, default 4
        The largest n-gram order N.
    threads : int, optional
        Worker threads (default: all cores); results do not depend on it.

    Returns
    -------
    numpy.ndarray
        int64, shape (n, 2 * max_order + 2), or (2 * max_order + 2,) for one hypothesis.

    Raises
    ------
    InvalidArgumentError
        An invalid option, or a text column with a missing text.
    InvalidTypeError
        Texts that are not strings.
    """
    h, streams, tok, lower, order, one = _inputs(hyps, refs, tokenizer, lowercase, max_order)
    out = _core.text.bleu_statistics(
        h, streams, tok, lower, order, _validate.check_threads(threads)
    )
    return out[0] if one else out


@renamed_keywords(tokenize="tokenizer", workers="threads")
def bleu(
    hyps: str | Texts,
    refs: str | Texts | Sequence[Texts],
    *,
    smooth: Smooth = "exp",
    smooth_value: float | None = None,
    tokenizer: Tokenizer = "13a",
    lowercase: bool = False,
    effective_order: bool = True,
    max_order: int = 4,
    threads: int | None = None,
) -> BleuResult:
    """Compute sentence BLEU of each item, identical to sacrebleu.

    Equals ``sacrebleu.metrics.BLEU(smooth_method=smooth, smooth_value=smooth_value,
    tokenize=tokenizer, lowercase=lowercase, effective_order=effective_order,
    max_ngram_order=max_order).sentence_score(hyps[i], [refs[i]])``; for one hypothesis
    ``bleu(hyp, refs)`` equals ``.sentence_score(hyp, refs)`` (``refs`` one string or a list).

    Parameters
    ----------
    hyps, refs
        As in :func:`bleu_statistics`.
    smooth : {"exp", "floor", "add-k", "none"}, default "exp"
        The smoothing method (module notes).
    smooth_value : float, optional
        The value of "floor" (default 0.1) or "add-k" (default 1).
    tokenizer, lowercase
        As in :func:`bleu_statistics`.
    effective_order : bool, default True
        Leave out n-gram orders the hypothesis is too short to have (the recommended setting
        for sentence BLEU, and the default here as in ``sacrebleu.sentence_bleu``).
    max_order, threads
        As in :func:`bleu_statistics`.

    Returns
    -------
    BleuResult
        Scores in [0, 100] (Python scalars for one hypothesis); ``.to_polars()`` gives one row
        per item.

    Raises
    ------
    InvalidArgumentError
        An invalid tokenizer, order or smoothing, or a missing text (None/NaN).
    InvalidTypeError
        Texts that are not strings.
    """
    h, streams, tok, lower, order, one = _inputs(hyps, refs, tokenizer, lowercase, max_order)
    value, eff = _smoothing(smooth, smooth_value, effective_order)
    out = _core.text.bleu_sentence(h, streams, tok, lower, order, smooth, value, eff, _PY_SUM,
                              _validate.check_threads(threads))  # fmt: skip
    stats = out["statistics"]
    res = BleuResult(
        score=out["score"], bp=out["bp"], ratio=out["ratio"], precisions=out["precisions"],
        sys_len=stats[:, 2 * order].copy(), ref_len=stats[:, 2 * order + 1].copy(),
        statistics=stats, max_order=order, smooth=smooth, smooth_value=value, tokenizer=tok,
        lowercase=lower, effective_order=eff,
    )  # fmt: skip
    return squeeze(res, _SENTENCE_FIELDS) if one else res


@renamed_keywords(tokenize="tokenizer", workers="threads")
@options_keywords(BootstrapOptions, "n_resamples", "level", "method", "seed")
def corpus_bleu(
    hyps: Texts,
    refs: Texts | Sequence[Texts],
    *,
    smooth: Smooth = "exp",
    smooth_value: float | None = None,
    tokenizer: Tokenizer = "13a",
    lowercase: bool = False,
    effective_order: bool = False,
    max_order: int = 4,
    groups: Labels | None = None,
    clusters: Labels | None = None,
    ci: bool = False,
    options: BootstrapOptions | None = None,
    threads: int | None = None,
) -> CorpusBleuResult:
    """Compute corpus BLEU, identical to sacrebleu, with an optional bootstrap interval.

    Equals ``sacrebleu.corpus_bleu(hyps, [refs], ...)`` (i.e. ``BLEU(...).corpus_score``;
    ``effective_order`` defaults to False there and here), one score per group.

    Parameters
    ----------
    hyps, refs
        As in :func:`bleu_statistics`.
    smooth, smooth_value
        As in :func:`bleu`.
    tokenizer, lowercase
        As in :func:`bleu_statistics`.
    effective_order : bool, default False
        As in :func:`bleu` (False here, as in ``sacrebleu.corpus_bleu``).
    max_order
        As in :func:`bleu_statistics`.
    groups : labels, optional
        One corpus BLEU (and interval) per group, e.g. per model; a 1-D array, a mapping of
        name -> array, or a polars DataFrame of key columns.
    clusters : labels, optional
        Resampling clusters (e.g. documents or patients) for the interval.
    ci : bool, default False
        Add a bootstrap interval: items (or ``clusters``) are resampled and corpus BLEU is
        recomputed from the resampled sums of their statistics in the C++ engine (Koehn 2004,
        "Statistical Significance Tests for Machine Translation Evaluation").
    options : BootstrapOptions, optional
        The interval's resamples, level, method, seed and threads (default
        ``BootstrapOptions()``); only with ``ci=True``.
    threads : int, optional
        Worker threads of the tokenization (default: all cores).

    Returns
    -------
    CorpusBleuResult
        Python scalars without ``groups`` (``.score`` is a float), one entry per group with
        them; ``.to_polars()`` gives one row per group.

    Raises
    ------
    InvalidArgumentError
        An invalid option, no item, or ``options`` without ``ci=True``.
    InvalidTypeError
        Texts that are not strings (or one string: a corpus is a sequence of hypotheses), or
        ``options`` that are not :class:`BootstrapOptions`.
    """
    if isinstance(hyps, str):
        raise InvalidTypeError(
            "hyps: expected a sequence of hypotheses (a corpus), got a single str; use bleu() "
            "for one hypothesis"
        )
    h, streams, tok, lower, order, _ = _inputs(hyps, refs, tokenizer, lowercase, max_order)
    value, eff = _smoothing(smooth, smooth_value, effective_order)
    opts = BootstrapOptions.resolve(options, ci=ci)
    stats = _core.text.bleu_statistics(
        h, streams, tok, lower, order, _validate.check_threads(threads)
    )
    n = stats.shape[0]
    if n == 0:
        raise InvalidArgumentError("hyps: empty input; corpus BLEU needs at least one item")
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
    if ci:
        boot = bootstrap_sufficient(
            stats, statistic="bleu", params=_params(smooth, value, eff, order), groups=groups,
            clusters=clusters, options=opts,
        )  # fmt: skip
        se, lo, hi = boot.se, boot.ci_low, boot.ci_high
    res = CorpusBleuResult(
        keys=keys, n=counts_per_group, score=parts["score"], bp=parts["bp"],
        ratio=parts["ratio"], precisions=parts["precisions"], counts=sums[:, :order],
        totals=sums[:, order : 2 * order], sys_len=sums[:, 2 * order],
        ref_len=sums[:, 2 * order + 1], se=se, ci_low=lo, ci_high=hi, max_order=order,
        smooth=smooth, smooth_value=value, tokenizer=tok, lowercase=lower,
        effective_order=eff, n_resamples=opts.n_resamples if ci else 0, level=opts.level,
        method=opts.method, seed=opts.seed, bootstrap=boot,
    )  # fmt: skip
    return res if groups is not None else squeeze(res, _CORPUS_FIELDS)
