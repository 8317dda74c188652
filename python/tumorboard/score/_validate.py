"""Validation of the input frames of the benchmark scorers, in one place.

:func:`input_frame` is each scorer's entry check, run once per call: it accepts a polars
DataFrame / LazyFrame or a pyarrow Table, checks the required, optional and cluster columns
with a clear error, rejects an empty frame and a task named "overall" (reserved for the
aggregate rows), and fills the documented defaults (track -> "default", tools -> False). The
column helpers below it read typed columns (strings, booleans, counts) with messages that name
the scorer, the column and the first bad row. Everything is vectorized polars; nothing loops over
records in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl
import pyarrow as pa

from ..errors import InvalidArgumentError, InvalidTypeError
from .report import DEFAULT_TRACK, OVERALL


def input_frame(
    df: Any,
    *,
    required: Sequence[str],
    optional: Sequence[str] = (),
    where: str,
    cluster: str | None = None,
    overall: bool = True,
) -> pl.DataFrame:
    """Validate and normalise a scorer's input frame, once, at the scorer's entry.

    Parameters
    ----------
    df : polars DataFrame or LazyFrame, or pyarrow Table
        One row per scored record.
    required : sequence of str
        Columns that must be present.
    optional : sequence of str, optional
        Columns the scorer reads when present (listed in the message of a missing column).
    where : str
        The scorer's name, for the messages.
    cluster : str, optional
        A cluster column that must be present.
    overall : bool, default True
        Reject a task named "overall", the name of the aggregate rows.

    Returns
    -------
    polars.DataFrame
        The frame with ``track`` (String, default "default") and ``tools`` (Boolean, default
        False) filled in.

    Raises
    ------
    InvalidArgumentError
        A missing column, an empty frame, or a task named "overall".
    InvalidTypeError
        ``df`` is not a frame, or ``track``/``tools`` have the wrong type.
    """
    frame = as_frame(df)
    require_columns(frame, required, optional=optional, where=where)
    if frame.height == 0:
        raise InvalidArgumentError(f"{where}: the input frame has no rows")
    if cluster is not None:
        if not isinstance(cluster, str) or not cluster:
            raise InvalidArgumentError(
                f"cluster: expected None or a column name such as 'patient_id', got {cluster!r}"
            )
        if cluster not in frame.columns:
            raise InvalidArgumentError(
                f"{where}: cluster={cluster!r} needs the column {cluster!r}; the input frame has "
                f"no column {cluster!r} (required columns: {', '.join([*required, cluster])}; "
                f"got: {', '.join(frame.columns)})"
            )
    if overall and "task" in frame.columns and frame.schema["task"] in (pl.String, pl.Categorical):
        if (frame.get_column("task").cast(pl.String) == OVERALL).any():
            raise InvalidArgumentError(
                f"{where}: a task is named {OVERALL!r}, which is reserved for the overall row; "
                "rename it"
            )
    return with_defaults(frame, where=where)


def as_frame(df: Any, *, name: str = "df") -> pl.DataFrame:
    """Return a polars DataFrame from a DataFrame, LazyFrame (collected) or pyarrow Table.

    A pyarrow RecordBatch is accepted too; anything else raises InvalidTypeError naming the
    argument.
    """
    if isinstance(df, pl.DataFrame):
        return df
    if isinstance(df, pl.LazyFrame):
        return df.collect()
    if isinstance(df, (pa.Table, pa.RecordBatch)):
        out = pl.from_arrow(df)
        assert isinstance(out, pl.DataFrame)
        return out
    raise InvalidTypeError(
        f"{name}: expected a polars DataFrame or LazyFrame or a pyarrow Table, "
        f"got {type(df).__name__}"
    )


def require_columns(
    df: pl.DataFrame,
    required: Sequence[str],
    *,
    optional: Sequence[str] = (),
    where: str,
) -> None:
    """Check that the required columns are present.

    The error names the first missing required column and lists the required (and optional)
    columns; ``where`` names the caller (e.g. "mtbbench") for the message.
    """
    for col in required:
        if col not in df.columns:
            opt = f"; optional: {', '.join(optional)}" if optional else ""
            raise InvalidArgumentError(
                f"{where}: the input frame has no column {col!r}; required columns: "
                f"{', '.join(required)}{opt} (got: {', '.join(df.columns) or 'none'})"
            )


def string_column(df: pl.DataFrame, col: str, *, where: str) -> pl.Series:
    """Return column ``col`` as String; nulls are rejected (a record names its model/task)."""
    s = df.get_column(col)
    if s.dtype == pl.Null:  # an all-null column
        s = s.cast(pl.String)
    if s.dtype not in (pl.String, pl.Categorical, pl.Enum) and not (
        s.dtype.is_integer() or s.dtype == pl.Boolean
    ):
        raise InvalidTypeError(
            f"{where}: column {col!r}: expected strings (or integers), got {s.dtype}"
        )
    s = s.cast(pl.String)
    if s.null_count():
        first = int(s.is_null().arg_true()[0])
        raise InvalidArgumentError(f"{where}: column {col!r} has a missing value at row {first}")
    return s


def bool_column(
    df: pl.DataFrame, col: str, *, where: str, null_as: bool | None = None
) -> pl.Series:
    """Return column ``col`` as Boolean.

    Integer columns must hold only 0 and 1. Nulls become ``null_as`` when it is given and are an
    error otherwise.
    """
    s = df.get_column(col)
    if s.dtype == pl.Null:  # an all-null column
        s = s.cast(pl.Boolean)
    if s.dtype.is_integer():
        bad = s.is_not_null() & ~s.is_in([0, 1])
        if bad.any():
            first = int(bad.arg_true()[0])
            raise InvalidArgumentError(
                f"{where}: column {col!r}: expected boolean or 0/1, got {s[first]} at row {first}"
            )
        s = s.cast(pl.Boolean)
    elif s.dtype != pl.Boolean:
        raise InvalidTypeError(f"{where}: column {col!r}: expected boolean, got {s.dtype}")
    if s.null_count():
        if null_as is None:
            first = int(s.is_null().arg_true()[0])
            raise InvalidArgumentError(
                f"{where}: column {col!r} has a missing value at row {first}"
            )
        s = s.fill_null(null_as)
    return s


def count_column(df: pl.DataFrame, col: str, *, where: str, distinct: bool = True) -> pl.Series:
    """Return per-record counts (Int64) from a list column or an integer count column.

    A list counts its distinct non-null elements when ``distinct``, else all non-null elements.
    A null entry counts 0 (nothing recorded). Negative counts are an error.
    """
    s = df.get_column(col)
    if s.dtype == pl.Null:  # an all-null column: nothing recorded
        return pl.Series(col, [0] * len(s), dtype=pl.Int64)
    if isinstance(s.dtype, (pl.List, pl.Array)):
        if isinstance(s.dtype, pl.Array):
            s = s.arr.to_list()
        # Inside list.eval: Series.list.drop_nulls / list.n_unique are ~10x slower on strings.
        element = pl.element().drop_nulls()
        agg = element.n_unique() if distinct else element.len()
        counts = s.list.eval(agg).list.first().cast(pl.Int64)
        return counts.fill_null(0).alias(col)
    if s.dtype.is_integer():
        out = s.cast(pl.Int64).fill_null(0)
        if (out < 0).any():
            first = int((out < 0).arg_true()[0])
            raise InvalidArgumentError(
                f"{where}: column {col!r} has a negative count at row {first}"
            )
        return out.alias(col)
    raise InvalidTypeError(
        f"{where}: column {col!r}: expected a list (e.g. list[str] of file names) or an integer "
        f"count, got {s.dtype}"
    )


def with_defaults(df: pl.DataFrame, *, where: str) -> pl.DataFrame:
    """Add or fill the standard key columns ``track`` and ``tools``.

    Missing or null ``track`` -> "default", missing or null ``tools`` -> False; ``track`` is
    cast to String and ``tools`` to Boolean.
    """
    n = df.height
    if "track" in df.columns:
        track = string_column(df.with_columns(pl.col("track").fill_null(DEFAULT_TRACK)), "track",
                              where=where)  # fmt: skip
    else:
        track = pl.Series("track", [DEFAULT_TRACK] * n, dtype=pl.String)
    if "tools" in df.columns:
        tools = bool_column(df, "tools", where=where, null_as=False)
    else:
        tools = pl.Series("tools", [False] * n, dtype=pl.Boolean)
    return df.with_columns(track.alias("track"), tools.alias("tools"))


#: The scoring conventions a scorer may offer (``convention=`` of every ``score``).
CONVENTIONS = ("paper", "tumorboard", "code")


def convention(value: Any, *, allowed: Sequence[str], default: str, where: str) -> str:
    """Return the scoring convention ``value`` (None: the scorer's ``default``), checked.

    Parameters
    ----------
    value : str or None
        The ``convention=`` argument.
    allowed : sequence of str
        The conventions this scorer defines.
    default : str
        The scorer's default.
    where : str
        The scorer's name, for the error message.

    Returns
    -------
    str
        The convention in use.

    Raises
    ------
    InvalidArgumentError
        A convention the scorer does not define.
    """
    if value is None:
        return default
    if not isinstance(value, str) or value not in allowed:
        raise InvalidArgumentError(
            f"{where}: convention: expected one of {', '.join(map(repr, allowed))} (or None for "
            f"the default, {default!r}), got {value!r}"
        )
    return value


#: The intervals of ``score(..., interval=)`` and ``tumorboard score --interval``: the
#: bootstrap (the default) or a closed-form proportion interval
#: (:data:`tumorboard.stats.INTERVALS`).
INTERVAL_CHOICES = (
    "bootstrap", "wilson", "agresti_coull", "clopper_pearson", "normal", "cr1", "wilson_deff",
)  # fmt: skip

#: The proportion intervals that need clusters (``cluster=``).
CLUSTERED_INTERVALS = ("cr1", "wilson_deff")


def interval(value: Any, *, cluster: str | None, where: str) -> str:
    """Return the ``interval=`` of a scorer, checked against its ``cluster=``.

    Parameters
    ----------
    value : str
        ``"bootstrap"`` or one of :data:`tumorboard.stats.INTERVALS`.
    cluster : str or None
        The scorer's cluster column: ``"cr1"`` and ``"wilson_deff"`` need one.
    where : str
        The scorer's name, for the error message.

    Returns
    -------
    str
        The interval in use.

    Raises
    ------
    InvalidArgumentError
        An unknown interval, or a clustered one without ``cluster=``.
    """
    if not isinstance(value, str) or value not in INTERVAL_CHOICES:
        raise InvalidArgumentError(
            f"{where}: interval: expected one of {', '.join(map(repr, INTERVAL_CHOICES))}, "
            f"got {value!r}"
        )
    if value in CLUSTERED_INTERVALS and cluster is None:
        raise InvalidArgumentError(
            f"{where}: interval: expected cluster= (e.g. 'patient_id') with {value!r}, a "
            "cluster-robust interval, got no cluster column"
        )
    return value
