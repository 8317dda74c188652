r"""BLEU identical to sacrebleu, over the C++ text engine (csrc/text/bleu*.cpp).

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
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import polars as pl

from .. import _core
from .._keys import factorize, label_columns
from .._typing import Labels, Texts
from ..errors import InvalidArgumentError
from ..stats import BootstrapOptions, BootstrapResult, bootstrap_sufficient
from . import _validate

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

    Attributes
    ----------
    score : numpy.ndarray
        BLEU in [0, 100] (sacrebleu's ``BLEUScore.score``), float64 (n,).
    bp : numpy.ndarray
        Brevity penalty.
    ratio : numpy.ndarray
        Hypothesis length / reference length (0 when the reference is empty).
    precisions : numpy.ndarray
        N-gram precisions in [0, 100] after smoothing, (n, max_order).
    sys_len, ref_len : numpy.ndarray
        Hypothesis length and closest reference length, in tokens.
    statistics : numpy.ndarray
        The (n, 2 * max_order + 2) int64 sufficient statistics
        ``[matches_1..N, totals_1..N, hyp_len, ref_len]``.
    max_order, smooth, smooth_value, tokenize, lowercase, effective_order
        The options the scores were computed with (as in :func:`bleu`).
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
        """Return one row per item: score, bp, ratio, sys_len, ref_len, precision_1..precision_N.

        Returns
        -------
        polars.DataFrame
            One row per item.
        """
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

    Attributes
    ----------
    keys : dict of str to numpy.ndarray
        Group key columns, name -> values (empty without ``groups``).
    n : numpy.ndarray
        Items per group.
    score : numpy.ndarray
        Corpus BLEU in [0, 100] (sacrebleu's ``corpus_score(...).score``).
    bp, ratio : numpy.ndarray
        Brevity penalty and length ratio of the corpus.
    precisions : numpy.ndarray
        (groups, max_order) n-gram precisions in [0, 100] after smoothing.
    counts, totals : numpy.ndarray
        (groups, max_order) summed clipped matches and hypothesis n-grams (before any add-k
        smoothing).
    sys_len, ref_len : numpy.ndarray
        Summed hypothesis and closest-reference lengths.
    se, ci_low, ci_high : numpy.ndarray
        Bootstrap standard error and confidence interval of the score (NaN without
        ``ci=True``).
    max_order, smooth, smooth_value, tokenize, lowercase, effective_order
        The options the scores were computed with (as in :func:`corpus_bleu`).
    n_resamples, level, method, seed
        The bootstrap options (``n_resamples`` is 0 without ``ci=True``).
    bootstrap : BootstrapResult or None
        The engine's :class:`~tumorboard.stats.BootstrapResult` (None without resampling).
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
        """Return ``(ci_low, ci_high)`` of a single-group result.

        Returns
        -------
        tuple of float
            The confidence interval.

        Raises
        ------
        InvalidArgumentError
            The result has more than one group.
        """
        if len(self) != 1:
            raise InvalidArgumentError(
                f"interval() needs a single-group result; this one has {len(self)}"
            )
        return float(self.ci_low[0]), float(self.ci_high[0])

    def to_polars(self) -> pl.DataFrame:
        """Return the result as a table with one row per group.

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
        for j in range(self.max_order):
            cols[f"precision_{j + 1}"] = self.precisions[:, j]
        return pl.DataFrame(cols)


# ----------------------------------------------------------------------------- inputs


def _inputs(
    hyps: Any, refs: Any, tokenize: Any, lowercase: Any, max_order: Any
) -> tuple[Any, list[Any], str, bool, int]:
    """Validate the texts, reference streams, tokenizer, lowercase flag and n-gram order."""
    note = " (sacrebleu's 'intl', 'ja-mecab', 'ko-mecab' and 'spm' tokenizers are not available)"
    tok = _validate.choice(tokenize, _TOKENIZERS, name="tokenize", note=note)
    lower = _validate.flag(lowercase, name="lowercase")
    order = _validate.max_order(max_order)
    h, streams = _validate.text_column(hyps, name="hyps"), _validate.ref_streams(refs)
    return h, streams, tok, lower, order


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


def bleu_statistics(
    hyps: Texts,
    refs: Texts | Sequence[Texts],
    *,
    tokenize: Tokenize = "13a",
    lowercase: bool = False,
    max_order: int = 4,
    threads: int | None = None,
) -> np.ndarray:
    """Compute per-item BLEU sufficient statistics, int64 (n, 2 * max_order + 2).

    Columns: ``matches_1..matches_N`` (clipped n-gram matches: each hypothesis n-gram counts at
    most as often as it occurs in the reference where it occurs most), ``totals_1..totals_N``
    (hypothesis n-grams), ``hyp_len`` (hypothesis tokens) and ``ref_len`` (tokens of the
    reference whose length is closest to ``hyp_len``, the shorter one on ties). sacrebleu
    keeps the same numbers as ``[hyp_len, ref_len, matches..., totals...]``.

    Parameters
    ----------
    hyps : sequence of str
        Hypothesis texts (list/tuple of str, 1-D numpy array, polars Series, pyarrow array).
    refs : sequence of str, or sequence of reference streams
        One reference per hypothesis, or several reference streams as sacrebleu takes them
        (``refs[k][i]`` is the k-th reference of item i; None marks a missing reference, every
        item needs at least one).
    tokenize : {"13a", "zh", "char", "none"}, default "13a"
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
        int64, shape (n, 2 * max_order + 2).

    Raises
    ------
    InvalidArgumentError
        An invalid option, or a text column with a missing text.
    InvalidTypeError
        Texts that are not strings.
    """
    h, streams, tok, lower, order = _inputs(hyps, refs, tokenize, lowercase, max_order)
    return _core.text.bleu_statistics(h, streams, tok, lower, order, _validate.threads(threads))


def bleu(
    hyps: Texts,
    refs: Texts | Sequence[Texts],
    *,
    smooth: Smooth = "exp",
    smooth_value: float | None = None,
    tokenize: Tokenize = "13a",
    lowercase: bool = False,
    effective_order: bool = True,
    max_order: int = 4,
    threads: int | None = None,
) -> BleuResult:
    """Compute sentence BLEU of each item, identical to sacrebleu.

    Equals ``sacrebleu.metrics.BLEU(smooth_method=smooth, smooth_value=smooth_value,
    tokenize=tokenize, lowercase=lowercase, effective_order=effective_order,
    max_ngram_order=max_order).sentence_score(hyps[i], [refs[i]])``.

    Parameters
    ----------
    hyps, refs
        As in :func:`bleu_statistics`.
    smooth : {"exp", "floor", "add-k", "none"}, default "exp"
        The smoothing method (module notes).
    smooth_value : float, optional
        The value of "floor" (default 0.1) or "add-k" (default 1).
    tokenize, lowercase
        As in :func:`bleu_statistics`.
    effective_order : bool, default True
        Leave out n-gram orders the hypothesis is too short to have (the recommended setting
        for sentence BLEU, and the default here as in ``sacrebleu.sentence_bleu``).
    max_order, threads
        As in :func:`bleu_statistics`.

    Returns
    -------
    BleuResult
        Scores in [0, 100]; ``.to_polars()`` gives one row per item.

    Raises
    ------
    InvalidArgumentError
        An invalid tokenizer, order or smoothing, or a missing text (None/NaN).
    InvalidTypeError
        Texts that are not strings.
    """
    h, streams, tok, lower, order = _inputs(hyps, refs, tokenize, lowercase, max_order)
    value, eff = _smoothing(smooth, smooth_value, effective_order)
    out = _core.text.bleu_sentence(h, streams, tok, lower, order, smooth, value, eff, _PY_SUM,
                              _validate.threads(threads))  # fmt: skip
    stats = out["statistics"]
    return BleuResult(
        score=out["score"], bp=out["bp"], ratio=out["ratio"], precisions=out["precisions"],
        sys_len=stats[:, 2 * order].copy(), ref_len=stats[:, 2 * order + 1].copy(),
        statistics=stats, max_order=order, smooth=smooth, smooth_value=value, tokenize=tok,
        lowercase=lower, effective_order=eff,
    )  # fmt: skip


def corpus_bleu(
    hyps: Texts,
    refs: Texts | Sequence[Texts],
    *,
    smooth: Smooth = "exp",
    smooth_value: float | None = None,
    tokenize: Tokenize = "13a",
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
    tokenize, lowercase
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
        ``.to_polars()`` gives one row per group.

    Raises
    ------
    InvalidArgumentError
        An invalid option, no item, or ``options`` without ``ci=True``.
    InvalidTypeError
        Texts that are not strings, or ``options`` that are not :class:`BootstrapOptions`.
    """
    h, streams, tok, lower, order = _inputs(hyps, refs, tokenize, lowercase, max_order)
    value, eff = _smoothing(smooth, smooth_value, effective_order)
    opts = BootstrapOptions.resolve(options, ci=ci)
    stats = _core.text.bleu_statistics(h, streams, tok, lower, order, _validate.threads(threads))
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
    return CorpusBleuResult(
        keys=keys, n=counts_per_group, score=parts["score"], bp=parts["bp"],
        ratio=parts["ratio"], precisions=parts["precisions"], counts=sums[:, :order],
        totals=sums[:, order : 2 * order], sys_len=sums[:, 2 * order],
        ref_len=sums[:, 2 * order + 1], se=se, ci_low=lo, ci_high=hi, max_order=order,
        smooth=smooth, smooth_value=value, tokenize=tok, lowercase=lower,
        effective_order=eff, n_resamples=opts.n_resamples if ci else 0, level=opts.level,
        method=opts.method, seed=opts.seed, bootstrap=boot,
    )  # fmt: skip
