"""LLM-judge scores: parsing ``<score>N</score>`` replies, rescaling, and agreement with humans.

MedBench v4 (and other benchmarks with free-text answers) ask an LLM judge for an integer score
on a 0-5 scale wrapped in ``<score>`` tags and report it rescaled to 0-100. Anything else in the
reply (no tag, two tags, a non-integer, a value off the scale) is an error naming the record, not
a silent 0: a judge that fails to follow the format must be noticed, not averaged in.

:func:`judge_agreement` measures how well such a judge agrees with human raters with Cohen's
kappa (optionally linearly or quadratically weighted; Cohen 1960, 1968) and a bootstrap CI,
through :func:`tumorboard.stats.cohen_kappa`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from .._typing import Frame
from ..errors import InvalidArgumentError, InvalidTypeError
from ..errors import JudgeScoreError as JudgeScoreError  # re-exported
from ..stats import AgreementResult, BootstrapOptions, cohen_kappa
from ._validate import as_frame, require_columns

__all__ = [
    "JudgeScoreError",
    "judge_agreement",
    "parse_judge_score",
    "parse_judge_scores",
    "rescale_judge_score",
]

# One <score>...</score> tag; the tag names are case-insensitive, the content may be padded with
# whitespace. The content itself is validated separately so that the error can say what it was.
_TAG = r"(?is)<score>(.*?)</score>"
_INT = r"^\s*[+]?([0-9]+)\s*$"


def _excerpt(text: str, limit: int = 80) -> str:
    """Return ``text`` on one line, cut to ``limit`` characters with "..." when longer."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _check_scale(low: int, high: int) -> None:
    """Check that ``low`` and ``high`` are integers with ``low < high``."""
    for name, v in (("low", low), ("high", high)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise InvalidTypeError(f"{name}: expected an integer, got {v!r}")
    if not low < high:
        raise InvalidArgumentError(f"low, high: expected low < high, got {low} and {high}")


def parse_judge_score(text: str | None, *, record: Any = None, low: int = 0, high: int = 5) -> int:
    """Return the integer score of one judge reply: the ``N`` of its only ``<score>N</score>`` tag.

    ``N`` must be an integer in ``[low, high]`` (default 0-5, MedBench v4's judge scale),
    optionally surrounded by whitespace; tag names are case-insensitive.

    Parameters
    ----------
    text : str or None
        The judge reply.
    record : object, optional
        The record's id, named in the error message.
    low, high : int, default 0 and 5
        The score scale.

    Returns
    -------
    int
        The score.

    Raises
    ------
    JudgeScoreError
        A ``ValueError`` naming ``record``, for a missing reply, no tag, more than one tag, a
        non-integer (``3.5``, ``four``, empty) or a value off the scale.

    Examples
    --------
    >>> parse_judge_score("The answer covers most points. <score>4</score>")
    4
    """
    _check_scale(low, high)
    out = parse_judge_scores([text], ids=[record], low=low, high=high)
    return int(out[0])


def parse_judge_scores(
    texts: Sequence[str | None] | pl.Series,
    *,
    ids: Sequence[Any] | pl.Series | None = None,
    low: int = 0,
    high: int = 5,
) -> npt.NDArray[np.int64]:
    """Parse many judge replies: a vectorized :func:`parse_judge_score` (polars string kernels).

    Parameters
    ----------
    texts : sequence of str or polars Series
        The judge replies.
    ids : sequence, optional
        Record ids used in error messages (default: the positions 0, 1, ...).
    low, high : int, default 0 and 5
        The score scale.

    Returns
    -------
    ndarray of int64
        The scores, in order.

    Raises
    ------
    JudgeScoreError
        For the first reply that is not exactly one valid tag; the message names the record.
    """
    _check_scale(low, high)
    s = texts if isinstance(texts, pl.Series) else pl.Series("reply", list(texts), dtype=pl.String)
    if s.dtype != pl.String:
        raise InvalidTypeError(f"texts: expected strings, got {s.dtype}")
    n = s.len()
    if ids is not None:
        id_list = ids.to_list() if isinstance(ids, pl.Series) else list(ids)
        if len(id_list) != n:
            raise InvalidArgumentError(f"ids: expected {n} ids (one per reply), got {len(id_list)}")
    else:
        id_list = None

    def record_of(i: int) -> Any:
        """Return the record id of reply ``i`` (its position without ``ids``)."""
        return id_list[i] if id_list is not None else i

    if n == 0:
        return np.zeros(0, dtype=np.int64)
    frame = pl.DataFrame({"t": s}).select(
        pl.col("t").is_null().alias("missing"),
        pl.col("t").str.count_matches(_TAG).alias("tags"),
        pl.col("t").str.extract(_TAG, 1).alias("inner"),
    )
    frame = frame.with_columns(
        pl.col("inner").str.extract(_INT, 1).str.to_integer(strict=False).alias("value")
    )
    missing = frame.get_column("missing").to_numpy()
    tags = frame.get_column("tags").fill_null(0).to_numpy()
    value = frame.get_column("value")
    bad_value = (
        value.is_null().to_numpy() | ~value.is_between(low, high).fill_null(False).to_numpy()
    )
    bad = missing | (tags != 1) | bad_value
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        rec = record_of(i)
        text = s[i]
        where = "judge reply" if rec is None else f"judge reply of record {rec!r}"
        if missing[i]:
            raise JudgeScoreError(f"{where}: the reply is missing (null)", record=rec, reply=None)
        if tags[i] == 0:
            msg = f"{where}: no <score>N</score> tag in {_excerpt(text)!r}"
        elif tags[i] > 1:
            msg = (
                f"{where}: {int(tags[i])} <score> tags, expected exactly one, in {_excerpt(text)!r}"
            )
        else:
            inner = frame.get_column("inner")[i]
            msg = f"{where}: <score>{inner}</score> is not an integer from {low} to {high}"
        raise JudgeScoreError(msg, record=rec, reply=text)
    return value.cast(pl.Int64).to_numpy().astype(np.int64)


def rescale_judge_score(
    scores: npt.ArrayLike, *, low: int = 0, high: int = 5, scale: float = 100.0
) -> npt.NDArray[np.float64]:
    """Map judge scores linearly onto ``[0, scale]``: ``scale * (s - low) / (high - low)``.

    With the defaults a 0-5 judge score becomes 0-100 (MedBench v4 reports 0-100): 0 -> 0,
    3 -> 60, 5 -> 100.

    Parameters
    ----------
    scores : array_like
        Judge scores on the scale ``[low, high]``.
    low, high : int, default 0 and 5
        The judge scale.
    scale : float, default 100.0
        The upper end of the target range.

    Returns
    -------
    ndarray of float64
        The rescaled scores, of the shape of ``scores``.

    Raises
    ------
    InvalidArgumentError
        A NaN score, or a score outside ``[low, high]``.
    """
    _check_scale(low, high)
    arr = np.asarray(scores, dtype=np.float64)
    if np.isnan(arr).any():
        raise InvalidArgumentError("scores: NaN score; expected numbers on the judge scale")
    if ((arr < low) | (arr > high)).any():
        bad = np.flatnonzero(((arr < low) | (arr > high)).ravel())[0]
        raise InvalidArgumentError(
            f"scores: value {arr.ravel()[bad]} at position {bad} is outside [{low}, {high}]"
        )
    return scale * (arr - low) / (high - low)


def _rating_column(frame: pl.DataFrame, col: str, low: int, high: int) -> np.ndarray:
    """Return one rating column: numbers as they are, judge replies parsed; no missing ratings."""
    s = frame.get_column(col)
    if s.dtype == pl.String:
        return parse_judge_scores(s, low=low, high=high)
    if not (s.dtype.is_numeric() or s.dtype == pl.Boolean):
        raise InvalidTypeError(
            f"judge_agreement: column {col!r}: expected numeric ratings or judge replies with "
            f"<score> tags, got {s.dtype}"
        )
    if s.null_count():
        first = int(s.is_null().arg_true()[0])
        raise InvalidArgumentError(
            f"judge_agreement: column {col!r} has a missing rating at row {first}"
        )
    arr = s.to_numpy()
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        first = int(np.flatnonzero(np.isnan(arr))[0])
        raise InvalidArgumentError(
            f"judge_agreement: column {col!r} has a NaN rating at row {first}"
        )
    return arr


def judge_agreement(
    df: Frame,
    *,
    judge: str,
    human: str,
    weights: Literal["linear", "quadratic"] | None = None,
    categories: Sequence[Any] | None = None,
    low: int = 0,
    high: int = 5,
    options: BootstrapOptions | None = None,
) -> AgreementResult:
    """Compute the agreement (Cohen's kappa) of an LLM judge and a human rater on the same items.

    ``kappa = (p_o - p_e) / (1 - p_e)`` over the table of joint proportions of the two ratings,
    with agreement weights ``w_ij = 1`` on the diagonal and 0 elsewhere (``weights=None``,
    Cohen 1960), ``1 - |i - j| / (q - 1)`` (``"linear"``) or ``1 - (i - j)^2 / (q - 1)^2``
    (``"quadratic"``, Cohen 1968), i and j indexing the q ordered categories. The interval is a
    bootstrap percentile CI over items (:func:`tumorboard.stats.cohen_kappa`).

    Parameters
    ----------
    df : polars DataFrame or LazyFrame, or pyarrow Table
        One row per rated item, with the columns named by ``judge`` and ``human``.
    judge, human : str
        The two rating columns. Numeric (or boolean) columns are used as they are; string
        columns are judge replies and are parsed with :func:`parse_judge_scores` on the scale
        ``[low, high]`` (a malformed reply is an error naming its row). Missing ratings are an
        error.
    weights : {None, "linear", "quadratic"}, default None
        Kappa weighting; weighted kappa needs the categories in scale order.
    categories : sequence, optional
        All categories in scale order. Default: the sorted distinct observed ratings; pass
        ``range(low, high + 1)`` for weighted kappa on the judge scale so that unused scores
        still count in the distances.
    low, high : int, default 0 and 5
        The judge scale for parsing string columns.
    options : BootstrapOptions, optional
        The bootstrap of the interval (default ``BootstrapOptions()``).

    Returns
    -------
    AgreementResult
        ``statistic`` "cohen_kappa", ``estimate``, ``ci_low``/``ci_high``, ``se``, ``n_items``.
    """
    for name, col in (("judge", judge), ("human", human)):
        if not isinstance(col, str):
            raise InvalidTypeError(f"{name}: expected a column name, got {col!r}")
    frame = as_frame(df)
    require_columns(frame, [judge, human], where="judge_agreement")
    if frame.height == 0:
        raise InvalidArgumentError("judge_agreement: the input frame has no rows")
    a = _rating_column(frame, judge, low, high)
    b = _rating_column(frame, human, low, high)
    opts = BootstrapOptions.resolve(options)
    return cohen_kappa(a, b, weights=weights, categories=categories, ci=True, options=opts)
