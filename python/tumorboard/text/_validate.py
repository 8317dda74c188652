"""Validation of the inputs of :mod:`tumorboard.text`, in one place.

The text metrics share their argument checks: text columns (lists, NumPy, polars and Arrow
columns of str), reference streams, worker threads, tokenizer and stemmer names, ROUGE types,
BLEU's order and smoothing. Each public function runs them once, at its entry. Elements of text
columns (None/NaN, non-str) are checked in C++ while the text is read, with messages that name
``name[index]``. Errors are :class:`~tumorboard.errors.InvalidArgumentError` (bad values) and
:class:`~tumorboard.errors.InvalidTypeError` (wrong types), naming the argument.
"""

from __future__ import annotations

import numbers
import re
import reprlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from .._checks import check_threads as check_threads  # re-exported: one threads check
from .._checks import choice as choice  # re-exported: one choice check for the package
from .._checks import finite as finite  # re-exported: one finite-number check
from .._checks import flag as flag  # re-exported: one bool check for the package
from ..errors import InvalidArgumentError, InvalidTypeError

_ROUGE_TYPE = re.compile(r"rouge([1-9][0-9]*)")


def empty_value(value: Any, *, name: str = "empty") -> float:
    """Return the value a 0/0 similarity takes: a number in [0, 1], or NaN (undefined).

    The metrics with an ``empty`` argument (IoU, ``one_minus_ned``) are similarities in
    [0, 1]; a value outside that range would be returned as if it were one.

    Parameters
    ----------
    value : float
        The argument.
    name : str, default "empty"
        The argument's name, for the message.

    Returns
    -------
    float
        ``value``.

    Raises
    ------
    InvalidArgumentError
        ``value`` is not a real number in [0, 1] or NaN.
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)
    if ok and not isinstance(value, numbers.Integral):
        ok = bool(np.isnan(float(value))) or 0.0 <= float(value) <= 1.0
    elif ok:
        ok = value in (0, 1)
    if not ok:
        raise InvalidArgumentError(
            f"{name}: expected a number in [0, 1] or NaN, got {reprlib.repr(value)}"
        )
    return float(value)


# ------------------------------------------------------------------------------- text columns


def texts(data: Any, *, name: str) -> list[Any]:
    """Return a column of texts as a list (elements are checked in C++).

    Parameters
    ----------
    data : sequence of str
        A list, tuple, 1-D NumPy array, polars Series or pyarrow Array/ChunkedArray.
    name : str
        The argument's name, for the message.

    Returns
    -------
    list
        The texts.

    Raises
    ------
    InvalidTypeError
        A single string, or something that is not a sequence.
    InvalidArgumentError
        A NumPy array with more than one dimension.
    """
    if isinstance(data, str | bytes):
        raise InvalidTypeError(
            f"{name}: expected a sequence of str, got a single {type(data).__name__}"
        )
    if isinstance(data, list):
        return data
    if isinstance(data, np.ndarray):
        if data.ndim != 1:
            raise InvalidArgumentError(f"{name}: expected a 1-D array of str, got {data.ndim}-D")
        return data.tolist()
    if isinstance(data, pl.Series):
        return data.to_list()
    if hasattr(data, "to_pylist"):  # pyarrow Array / ChunkedArray
        return data.to_pylist()
    if isinstance(data, Sequence) or hasattr(data, "__iter__"):
        return list(data)
    raise InvalidTypeError(f"{name}: expected a sequence of str, got {type(data).__name__}")


def text_pair(a: Any, b: Any, *, names: tuple[str, str]) -> tuple[list[Any], list[Any]]:
    """Return two text columns of the same length as lists.

    Parameters
    ----------
    a, b : sequence of str
        The two columns, as in :func:`texts`.
    names : tuple of str
        Their argument names, for the message.

    Returns
    -------
    tuple of list
        The two columns.

    Raises
    ------
    InvalidArgumentError
        Columns of different lengths.
    """
    la, lb = texts(a, name=names[0]), texts(b, name=names[1])
    if len(la) != len(lb):
        raise InvalidArgumentError(
            f"{names[0]} and {names[1]}: expected the same length, got {len(la)} and {len(lb)}"
        )
    return la, lb


def pair_or_batch(hyps: Any, refs: Any) -> tuple[list[Any], list[Any], bool]:
    """Return hypotheses and references as lists, and whether they were one pair of strings.

    One pair (two ``str``) gives scalar results, two sequences give one value per pair.

    Parameters
    ----------
    hyps, refs : str or sequence of str
        Two strings, or two columns as in :func:`texts`.

    Returns
    -------
    tuple
        ``(hyps, refs, single)``: the two lists and True for one pair of strings.

    Raises
    ------
    InvalidTypeError
        One string and one sequence.
    InvalidArgumentError
        Columns of different lengths.
    """
    if isinstance(hyps, str) and isinstance(refs, str):
        return [hyps], [refs], True
    if isinstance(hyps, str) or isinstance(refs, str):
        raise InvalidTypeError(
            "hyps and refs: expected two strings (one pair) or two sequences of strings (a "
            f"batch), got {type(hyps).__name__} and {type(refs).__name__}"
        )
    h, r = text_pair(hyps, refs, names=("hyps", "refs"))
    return h, r, False


def _arrow_column(arr: Any, name: str) -> Any:
    """Return zero-copy (offsets, bytes, validity) of a pyarrow string array (a list if empty)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if len(arr) == 0:
        return []
    t = arr.type
    if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t)):
        if not (hasattr(pa.types, "is_string_view") and pa.types.is_string_view(t)):
            raise InvalidTypeError(f"{name}: expected strings, got an Arrow array of type {t}")
    if not pa.types.is_large_string(t):
        arr = arr.cast(pa.large_string())
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = np.zeros(0, np.uint8) if bufs[2] is None else np.frombuffer(bufs[2], dtype=np.uint8)
    valid = None
    if arr.null_count:
        valid = arr.is_valid().to_numpy(zero_copy_only=False).astype(np.uint8)
    return (offsets, data, valid)


def text_column(data: Any, *, name: str) -> Any:
    """Return a column of texts for the BLEU engine: a list, or Arrow buffers read in place.

    Parameters
    ----------
    data : sequence of str
        As in :func:`texts`; polars and Arrow string columns are passed to C++ as their
        (offsets, bytes, validity) buffers without a copy.
    name : str
        The argument's name, for the message.

    Returns
    -------
    list or tuple
        A list of str, or an Arrow (offsets, bytes, validity) tuple.

    Raises
    ------
    InvalidTypeError
        A single string, a non-string column, or something that is not a sequence.
    InvalidArgumentError
        A NumPy array with more than one dimension.
    """
    if isinstance(data, pl.Series):
        if data.dtype != pl.String and data.dtype != pl.Null:
            raise InvalidTypeError(f"{name}: expected a String Series, got dtype {data.dtype}")
        return _arrow_column(data.to_arrow(), name)
    if isinstance(data, pa.Array | pa.ChunkedArray):
        return _arrow_column(data, name)
    return texts(data, name=name)


def _is_stream(x: Any) -> bool:
    """Tell whether an element of ``refs`` is itself a sequence of references (not a text)."""
    if x is None or isinstance(x, str | bytes | float):
        return False
    return isinstance(x, Sequence | np.ndarray | pl.Series | pa.Array | pa.ChunkedArray)


def ref_streams(refs: Any) -> list[Any]:
    """Return references as a list of reference streams (``refs[k][i]``: k-th reference of i).

    Parameters
    ----------
    refs : sequence of str, or sequence of sequences of str
        One reference per item, or several streams as sacrebleu takes them (a 2-D NumPy array
        is one stream per row).

    Returns
    -------
    list
        One :func:`text_column` per stream.

    Raises
    ------
    InvalidTypeError
        A single string, or streams mixed with texts.
    """
    if isinstance(refs, str | bytes):
        raise InvalidTypeError(
            f"refs: expected a sequence of str, got a single {type(refs).__name__}"
        )
    if isinstance(refs, pl.Series | pa.Array | pa.ChunkedArray):
        return [text_column(refs, name="refs")]
    if isinstance(refs, np.ndarray):
        if refs.ndim == 2:
            return [text_column(row, name=f"refs[{k}]") for k, row in enumerate(refs)]
        return [text_column(refs, name="refs")]
    if isinstance(refs, list | tuple):
        seq = refs
    else:
        try:
            seq = list(refs)
        except TypeError:
            raise InvalidTypeError(
                f"refs: expected a sequence of str or of reference streams, got "
                f"{type(refs).__name__}"
            ) from None
    if len(seq) > 0 and _is_stream(seq[0]):
        for k, s in enumerate(seq):
            if not _is_stream(s):
                raise InvalidTypeError(
                    f"refs[{k}]: expected a reference stream (a sequence of str) like refs[0], "
                    f"got {type(s).__name__}"
                )
        return [text_column(s, name=f"refs[{k}]") for k, s in enumerate(seq)]
    return [text_column(list(seq) if isinstance(seq, tuple) else seq, name="refs")]


# ------------------------------------------------------------------------------ metric options


def stemmer(value: Any) -> str:
    """Return the engine's stemmer name: "none", "porter" or "porter-original".

    Parameters
    ----------
    value : bool or str
        False/None (no stemming), True or "porter" (NLTK's default mode), "porter-original".

    Returns
    -------
    str
        The stemmer name.

    Raises
    ------
    InvalidArgumentError
        Any other value.
    """
    if value is False or value is None or value is np.False_:
        return "none"
    if value is True or value is np.True_:
        return "porter"
    if isinstance(value, str) and value in ("porter", "porter-original"):
        return str(value)
    raise InvalidArgumentError(
        f"stemmer: expected True, False, 'porter' or 'porter-original', got {reprlib.repr(value)}"
    )


def rouge_type(value: Any) -> int:
    """Return the engine's code of a ROUGE type: N for "rougeN", 0 for "rougeL", -1 for Lsum.

    Parameters
    ----------
    value : str
        "rougeN" (N >= 1), "rougeL" or "rougeLsum".

    Returns
    -------
    int
        The code.

    Raises
    ------
    InvalidArgumentError
        Any other value.
    """
    if value == "rougeL":
        return 0
    if value == "rougeLsum":
        return -1
    m = _ROUGE_TYPE.fullmatch(value) if isinstance(value, str) else None
    if m is None:
        raise InvalidArgumentError(
            f"types: invalid rouge type {value!r}: expected 'rougeN' (N >= 1), 'rougeL' or "
            "'rougeLsum'"
        )
    return int(m.group(1))


def max_order(value: Any) -> int:
    """Return BLEU's largest n-gram order, an integer in [1, 1000].

    Parameters
    ----------
    value : int
        The order N.

    Returns
    -------
    int
        ``value``.

    Raises
    ------
    InvalidArgumentError
        A non-integer or an order outside [1, 1000].
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(f"max_order: expected an integer >= 1, got {value!r}")
    if not 1 <= int(value) <= 1000:
        raise InvalidArgumentError(f"max_order: expected an integer in [1, 1000], got {value}")
    return int(value)


def smooth_value(value: Any) -> float | None:
    """Return BLEU's smoothing value: None (the method's default) or a finite number >= 0.

    Parameters
    ----------
    value : float or None
        The value of "floor" or "add-k" smoothing.

    Returns
    -------
    float or None
        ``value``.

    Raises
    ------
    InvalidArgumentError
        A non-number, or a number that is negative or not finite.
    """
    if value is None:
        return None
    out = finite(value, name="smooth_value")
    if out < 0:
        raise InvalidArgumentError(f"smooth_value: expected a finite number >= 0, got {value!r}")
    return out
