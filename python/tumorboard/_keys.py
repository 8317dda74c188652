"""Dense codes and stable 64-bit hashes of user-supplied labels.

The labels are groups, clusters, strata and record keys. Everything here is vectorized: no
Python loop over records.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa

from . import _core
from ._checks import as_array
from .errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ._typing import Labels

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _sortable_labels(dtype: Any) -> bool:
    """Tell whether polars can rank labels of ``dtype`` (not Object, List, Array or Struct)."""
    return dtype != pl.Object and not dtype.is_nested()


#: numpy string arrays at least this long are converted through their distinct labels.
_DISTINCT_FIRST = 4096


def _unicode_series(name: str, arr: np.ndarray) -> pl.Series:
    """Return ``pl.Series(name, arr)`` of a numpy string array, converting each label once.

    polars decodes every element's UCS-4 text; labels repeat (models, items of many models),
    so the distinct ones are found by their bytes (``_core.stats.factorize_fixed``), converted,
    and gathered: the same Series, 4-10x faster for repeated labels.
    """
    flat = np.ascontiguousarray(arr).reshape(-1)
    codes, first = _core.stats.factorize_fixed(flat.view(np.uint8), arr.itemsize)
    if 2 * first.size > flat.size:  # mostly distinct: nothing to save
        return pl.Series(name, arr)
    return pl.Series(name, flat[first]).gather(codes)


@dataclass(frozen=True, eq=False)
class Coded:
    """Labels with their dense codes already computed, to code a column once for many calls.

    A scorer that bootstraps, counts and joins on the same key columns several times codes each
    column once (:meth:`of`) and passes ``Coded`` columns wherever labels are taken
    (``groups=``, ``clusters=``: :func:`label_columns` and :func:`factorize` use the codes as
    they are). Internal and trusted: the labels were validated when the column was coded.

    Attributes
    ----------
    labels : polars.Series
        The labels (no nulls).
    codes : numpy.ndarray
        int64 codes 0..m-1 in sorted order of the labels, as :func:`dense_codes` gives them.
    """

    labels: pl.Series
    codes: np.ndarray

    @classmethod
    def of(cls, s: pl.Series) -> Coded:
        """Code a label Series (:func:`dense_codes`)."""
        return cls(s, dense_codes(s))

    def __len__(self) -> int:
        return len(self.labels)

    def gather(self, idx: np.ndarray) -> Coded:
        """Return the labels at positions ``idx``, their codes made dense again (same order)."""
        sub = self.codes[idx]
        size = int(self.codes.max()) + 1 if self.codes.size else 0
        return Coded(self.labels.gather(idx), compact_codes(sub, size) if sub.size else sub)


def as_series(obj: Any, *, name: str, n: int) -> pl.Series:
    """Convert a 1-D label array-like to a polars Series of length n, rejecting nulls/NaN."""
    if isinstance(obj, pl.Series):
        s = obj
    elif isinstance(obj, (pa.Array, pa.ChunkedArray)):
        s = pl.Series(name, obj)
    else:
        arr = as_array(obj, name=name)
        if arr.ndim != 1:
            raise InvalidArgumentError(
                f"{name}: expected a 1-D array of labels, got shape {arr.shape}"
            )
        if arr.dtype.kind not in "biufUSOMm":
            raise InvalidArgumentError(
                f"{name}: expected integer, string, bool or float labels, got dtype {arr.dtype}"
            )
        try:
            if arr.dtype == object:
                s = pl.Series(name, arr.tolist(), strict=False)
            elif arr.dtype.kind == "U" and arr.size >= _DISTINCT_FIRST and arr.itemsize:
                s = _unicode_series(name, arr)
            else:
                s = pl.Series(name, arr)
        except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError) as exc:
            raise InvalidArgumentError(
                f"{name}: expected integer, string, bool or float labels ({exc})"
            ) from exc
    if not _sortable_labels(s.dtype):
        # Checked before polars sorts or hashes them: an Object column (complex numbers, mixed
        # Python objects) makes polars panic (a pyo3 PanicException, a BaseException) in arg_sort.
        raise InvalidArgumentError(
            f"{name}: expected integer, string, bool or float labels, got {s.dtype}"
        )
    if len(s) != n:
        raise InvalidArgumentError(f"{name}: expected {n} entries (one per record), got {len(s)}")
    if s.null_count():
        first = int(s.is_null().arg_true()[0])
        raise InvalidArgumentError(f"{name}: missing label at record {first}")
    if s.dtype.is_float() and s.is_nan().any():
        first = int(s.is_nan().arg_true()[0])
        raise InvalidArgumentError(f"{name}: NaN label at record {first}")
    return s


def label_columns(obj: Labels, *, name: str, n: int) -> dict[str, pl.Series | Coded]:
    """Return the key columns of a groups/clusters/strata argument.

    The argument is one array, a mapping of columns, or a DataFrame; :class:`Coded` columns
    are kept as they are (their length is checked).
    """
    if isinstance(obj, pl.DataFrame):
        items = list(obj.to_dict().items())
    elif isinstance(obj, Mapping):
        items = list(obj.items())
    elif isinstance(obj, Coded):
        items = [(obj.labels.name or name, obj)]
    else:
        default = obj.name if isinstance(obj, pl.Series) and obj.name else name
        items = [(default, obj)]
    if not items:
        raise InvalidArgumentError(f"{name}: expected at least one key column")
    out: dict[str, pl.Series | Coded] = {}
    for k, v in items:
        if isinstance(v, Coded):
            if len(v) != n:
                raise InvalidArgumentError(
                    f"{name}[{k!r}]: expected {n} entries (one per record), got {len(v)}"
                )
            out[str(k)] = v
        else:
            out[str(k)] = as_series(v, name=f"{name}[{k!r}]", n=n)
    return out


def dense_codes(s: pl.Series) -> np.ndarray:
    """Return codes 0..m-1 in sorted order of the labels.

    Integers with a compact range take an O(n) bincount path (booleans too: False < True);
    strings look their code up in the sorted distinct labels; everything else is ranked by
    polars.
    """
    if s.dtype == pl.Boolean and len(s) and s.null_count() == 0:
        return compact_codes(s.cast(pl.Int64).to_numpy(), 2)
    if s.dtype.is_integer() and len(s):
        x = s.to_numpy()
        lo, hi = int(x.min()), int(x.max())
        if hi - lo <= 4 * len(x) + 1024:
            return compact_codes(x.astype(np.int64, copy=False) - lo, hi - lo + 1)
    if s.dtype in (pl.String, pl.Categorical) and len(s):
        labels = s.cast(pl.String)
        if labels.null_count() == 0:
            return string_codes(labels)[0]
        # A hash lookup into the sorted distinct labels: O(n), ~10x faster than a string sort.
        levels = labels.unique().sort()
        return labels.cast(pl.Enum(levels)).to_physical().to_numpy().astype(np.int64, copy=False)
    return (s.rank("dense").to_numpy().astype(np.int64, copy=False)) - 1


def label_text(labels: Any) -> pl.Series | None:
    """Return a polars or Arrow label column as an unnamed String Series, or None.

    Integer and string columns (categoricals too) without nulls qualify, integers as their
    decimal text. None for anything else, for a column with nulls, and for one with a label
    ending in NUL, which numpy's strings drop: those go the numpy way (``np.asarray``), so
    every form of a label gives the same text.
    """
    if type(labels).__module__.startswith("pyarrow"):
        labels = pl.Series(labels)
    if not isinstance(labels, pl.Series) or not len(labels) or labels.null_count():
        return None
    if not (labels.dtype.is_integer() or labels.dtype in (pl.String, pl.Categorical, pl.Enum)):
        return None
    text = labels.cast(pl.String)
    if text.str.ends_with("\x00").any():
        return None
    return text.rename("")  # unnamed, as an array: the argument names the column


def string_codes(labels: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """Return the codes of a String Series without nulls, and the first row of each code.

    A byte-comparing hash table codes the labels in O(n), then only the distinct labels are
    sorted, byte-wise as polars sorts strings (``_core.stats.factorize_strings``; UTF-8's byte
    order is the code-point order); polars' own string views are read in place.
    """
    views = _string_views(labels)
    if views is not None:
        return _core.stats.factorize_string_views(views, sort=True)
    return _core.stats.factorize_strings(*_string_buffers(labels), sort=True)


def compact_codes(x: np.ndarray, size: int) -> np.ndarray:
    """Return dense codes of non-negative integers below `size`, in sorted order, in O(n + size)."""
    present = np.bincount(x, minlength=size) > 0
    remap = np.cumsum(present, dtype=np.int64) - 1
    return remap[x]


def factorize(
    cols: Mapping[str, pl.Series | Coded],
) -> tuple[np.ndarray, dict[str, np.ndarray], int]:
    """Return joint dense codes of key columns (lexicographic order) and the key values per code.

    :class:`Coded` columns bring their codes; the others are coded here (:func:`dense_codes`).
    The joint codes of the same :class:`Coded` columns (the same objects, in the same order,
    under the same names) are computed once while those objects live
    (:data:`_JOINT`): a scorer's bootstrap, counts and metrics group on them many times.
    """
    token = _joint_token(cols)
    if token is not None:
        hit = _JOINT.get(token[0])
        if hit is not None and hit[0] == token[1]:
            inverse, keys, n_codes = hit[2]
            return inverse, {k: v.copy() for k, v in keys.items()}, n_codes
    out = _factorize(cols)
    if token is not None:
        out[0].setflags(write=False)  # shared by every caller: never changed in place
        first, ids, others = token
        _JOINT[first] = (ids, others, (out[0], {k: v.copy() for k, v in out[1].items()}, out[2]))
    return out


#: Joint codes of Coded columns, held while the first column's Coded object lives. The key is
#: that object; the value holds the names and ids of all the columns, the other columns
#: themselves (so that their ids cannot be reused meanwhile) and the result.
_JOINT: weakref.WeakKeyDictionary[Coded, tuple[Any, ...]] = weakref.WeakKeyDictionary()


def _joint_token(cols: Mapping[str, Any]) -> tuple[Coded, tuple[Any, ...], list[Coded]] | None:
    """Return (first column, names and ids of all the columns, the others) if all are Coded."""
    values = list(cols.values())
    if len(values) < 2 or not all(isinstance(v, Coded) for v in values):
        return None
    others = [v for v in values[1:] if v is not values[0]]  # the key itself stays weak
    return values[0], tuple((name, id(v)) for name, v in cols.items()), others


def _factorize(
    cols: Mapping[str, pl.Series | Coded],
) -> tuple[np.ndarray, dict[str, np.ndarray], int]:
    """Compute :func:`factorize` (no cache)."""
    codes = [s.codes if isinstance(s, Coded) else dense_codes(s) for s in cols.values()]
    combined = codes[0]
    size = int(combined.max()) + 1 if combined.size else 0
    for c in codes[1:]:
        radix = int(c.max()) + 1
        if size >= np.iinfo(np.int64).max // max(radix, 1):
            raise InvalidArgumentError("too many distinct key combinations")
        combined = combined * radix + c
        size *= radix
    if len(codes) == 1:
        inverse = combined
    elif size <= 4 * combined.size + 1024:
        inverse = compact_codes(combined, size)
    else:
        inverse = np.unique(combined, return_inverse=True)[1].astype(np.int64, copy=False)
    n_codes = int(inverse.max()) + 1 if inverse.size else 0
    first = _core.stats.first_rows(inverse, n_codes)  # any occurrence carries the key values
    keys = {
        name: _gather(s.labels if isinstance(s, Coded) else s, first) for name, s in cols.items()
    }
    return inverse, keys, n_codes


def _gather(s: pl.Series, rows: np.ndarray) -> np.ndarray:
    """Return ``s.gather(rows).to_numpy()``; numeric labels (no nulls) are taken in numpy."""
    if (s.dtype.is_numeric() or s.dtype == pl.Boolean) and not s.null_count():
        return s.to_numpy()[rows]  # the same values and dtype, without a polars query
    return s.gather(rows).to_numpy()


def hash_labels(s: pl.Series | np.ndarray) -> np.ndarray:
    """Return a stable 64-bit hash per label.

    Integers and booleans hash by value, floats by their bits, strings by the bytes of their
    UTF-8 encoding (FNV-1a + SplitMix64; fixed forever).
    """
    if not isinstance(s, pl.Series):
        s = pl.Series(np.asarray(s))
    dtype = s.dtype
    if dtype == pl.Boolean or dtype.is_integer():
        raw = s.cast(pl.Int64).to_numpy().view(np.uint64)
        return _core.stats.mix64(np.ascontiguousarray(raw))
    if dtype.is_float():
        raw = s.cast(pl.Float64).to_numpy() + 0.0  # -0.0 and 0.0 hash alike
        return _core.stats.mix64(np.ascontiguousarray(raw).view(np.uint64) ^ _GOLDEN)
    if dtype in (pl.String, pl.Categorical, pl.Enum):
        return _core.stats.hash_strings(*_string_buffers(s.cast(pl.String)))
    raise InvalidArgumentError(f"labels of type {dtype} cannot be hashed; use integers or strings")


def _string_buffers(s: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """Return the (int64 offsets, uint8 bytes) of a string Series' UTF-8 values (Arrow layout)."""
    arr = s.to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != pa.large_string():  # polars exports large_string: no cast (nor the import
        arr = arr.cast(pa.large_string())  # of pyarrow.compute that a cast costs, ~0.15 s)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)
    offsets = offsets[arr.offset : arr.offset + len(arr) + 1]
    data = arr.buffers()[2]
    payload = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    return np.ascontiguousarray(offsets), payload


def _string_views(s: pl.Series) -> list[tuple[np.ndarray, list[np.ndarray]]] | None:
    """Return the (16-byte views, data buffers) of each chunk of a string Series, in place.

    polars keeps strings in Arrow's string-view layout (Arrow columnar format, "Variable-size
    Binary View Layout"); each chunk exported at the newest compatibility level comes out
    without a copy, where :func:`_string_buffers` joins the chunks and rewrites every string
    into the offsets layout. None when a chunk does not export as a string-view array.
    """
    out = []
    for chunk in s.get_chunks():
        try:
            arr = chunk.to_arrow(compat_level=pl.CompatLevel.newest())
        except (AttributeError, TypeError):  # pragma: no cover - polars without compat levels
            return None
        if isinstance(arr, pa.ChunkedArray):
            if arr.num_chunks != 1:
                return None
            arr = arr.chunk(0)
        if arr.type != pa.string_view():
            return None
        bufs = arr.buffers()
        lo, hi = 16 * arr.offset, 16 * (arr.offset + len(arr))
        views = np.frombuffer(bufs[1], dtype=np.uint8)[lo:hi] if len(arr) else np.zeros(0, np.uint8)
        out.append((views, [np.frombuffer(b, dtype=np.uint8) for b in bufs[2:] if b is not None]))
    return out


def combine_hashes(columns: list[np.ndarray]) -> np.ndarray:
    """Combine per-column hashes, in column order, into one stable key per row."""
    h = np.zeros(columns[0].shape, dtype=np.uint64)
    for col in columns:
        h = _core.stats.mix64(np.ascontiguousarray((h * _GOLDEN) ^ col))
    return h
