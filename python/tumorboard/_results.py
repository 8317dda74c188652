"""The one convention of result objects: a single item gives scalars, a batch gives arrays.

A function given one pair (two strings, two boxes) or one ungrouped sample returns Python
scalars (``float``, ``int``, ``bool``) in its result; given a batch (sequences, ``groups=``) it
returns one array entry per pair or group. Every tabular result turns into a polars DataFrame
with ``.to_polars()``: one row per entry, or one row for a single result. These helpers do the
squeezing and the table building for the result classes of ``stats`` and ``text``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import polars as pl

from .errors import InvalidArgumentError

_R = TypeVar("_R")


def scalar(value: Any) -> Any:
    """Return a 0-d array or NumPy scalar as the Python scalar (``float``, ``int``, ``bool``).

    Parameters
    ----------
    value : object
        A NumPy scalar, a 0-d array, or anything else (returned unchanged).

    Returns
    -------
    object
        ``value.item()`` for NumPy scalars and 0-d arrays, else ``value``.
    """
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        return value.item()
    return value


def entries(values: Any) -> int:
    """Return the number of entries of a per-entry field (1 for a scalar).

    Parameters
    ----------
    values : scalar or array_like
        A per-entry field: a scalar (a single result) or an array with one entry per item or
        group along its first axis.

    Returns
    -------
    int
        The number of entries.
    """
    return 1 if np.ndim(values) == 0 else int(np.shape(values)[0])


def interval(result: Any) -> tuple[float, float]:
    """Return ``(ci_low, ci_high)`` of a result with a single entry, as Python floats.

    The ``interval()`` method of every result with a confidence interval (the bootstrap,
    paired bootstrap, agreement and corpus BLEU results): it reads the interval the result
    holds, and computes nothing.

    Parameters
    ----------
    result : object
        A result with per-entry fields ``ci_low`` and ``ci_high`` (scalars, or arrays with one
        entry per group); NaN where no interval was computed (``ci=False``).

    Returns
    -------
    tuple of float
        The confidence interval.

    Raises
    ------
    InvalidArgumentError
        The result has more than one entry (group).
    """
    n = entries(result.ci_low)
    if n != 1:
        raise InvalidArgumentError(
            f"interval() needs an ungrouped or single-group result; this one has {n} groups"
        )
    return float(np.ravel(result.ci_low)[0]), float(np.ravel(result.ci_high)[0])


def squeeze(result: _R, fields: Sequence[str]) -> _R:
    """Return a copy of a one-entry result whose per-entry ``fields`` hold the single entry.

    Parameters
    ----------
    result : dataclass instance
        A result with one entry (arrays of length 1 along the first axis).
    fields : sequence of str
        The per-entry fields: 1-D arrays become Python scalars, (1, k) arrays become (k,)
        arrays; a field that is None stays None and a scalar stays a scalar.

    Returns
    -------
    dataclass instance
        The squeezed copy (``dataclasses.replace``).
    """
    out: dict[str, Any] = {}
    for name in fields:
        value = getattr(result, name)
        if value is None:
            continue
        arr = np.asarray(value)
        if arr.ndim == 0:  # already single (e.g. an ungrouped inner result)
            out[name] = scalar(arr)
        else:
            out[name] = scalar(arr[0]) if arr.ndim == 1 else arr[0]
    return dataclasses.replace(result, **out)  # type: ignore[type-var]


def table(columns: Mapping[str, Any]) -> pl.DataFrame:
    """Build a DataFrame from columns that are arrays (a batch) or scalars (a single result).

    Parameters
    ----------
    columns : mapping of str to array-like or scalar
        The columns, in order; scalars become one-row columns.

    Returns
    -------
    polars.DataFrame
        One row per entry.
    """
    cols = {}
    for name, value in columns.items():
        arr = np.asarray(value) if not isinstance(value, (list, pl.Series)) else value
        cols[name] = [scalar(arr)] if isinstance(arr, np.ndarray) and arr.ndim == 0 else arr
    return pl.DataFrame(cols)


def per_column(matrix: Any, prefix: str, count: int) -> dict[str, Any]:
    """Return the columns ``{prefix}_1 .. {prefix}_{count}`` of an (n, count) or (count,) array.

    Parameters
    ----------
    matrix : array_like
        The values: (n, count) for a batch, (count,) for a single result.
    prefix : str
        The column name prefix, e.g. ``"precision"``.
    count : int
        The number of columns.

    Returns
    -------
    dict of str to numpy.ndarray
        One column (or one scalar) per index, named from 1.
    """
    arr = np.asarray(matrix)
    if arr.ndim == 1:
        return {f"{prefix}_{j + 1}": scalar(arr[j]) for j in range(count)}
    return {f"{prefix}_{j + 1}": arr[:, j] for j in range(count)}
