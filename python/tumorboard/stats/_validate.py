"""Validation of the inputs of :mod:`tumorboard.stats`, in one place.

Every public function of the package validates and normalises its arguments here, once, at its
entry, and then hands plain arrays to the computation: per-record values, the layout of groups,
strata and clusters, record keys, statistic names, the fields of
:class:`~tumorboard.stats.BootstrapOptions`, and the label arrays and count tables of the
agreement statistics. Every error is an :class:`~tumorboard.errors.InvalidArgumentError` whose
message names the argument (or field) and says what was expected.
"""

from __future__ import annotations

import numbers
import os
import reprlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _core
from .._checks import as_array, choice
from .._checks import check_threads as check_threads  # re-exported: one threads check
from .._checks import flag as flag  # re-exported: one bool check for the package
from .._keys import combine_hashes, factorize, hash_labels, label_columns
from ..errors import InvalidArgumentError

METHODS = ("percentile", "basic", "bca")
SCHEMES = ("multinomial", "poisson")
RESAMPLERS = ("auto", "index", "counts")
#: Columns per record of the statistics that :func:`~tumorboard.stats.bootstrap` accepts.
STATISTIC_COLUMNS = {"mean": 1, "sum": 1, "ratio": 2, "f1": 3}
#: Largest rating count of an agreement table (integers above 2^53 are not exact in float64).
MAX_COUNT = 2.0**53


# ------------------------------------------------------------------------------ scalar options


def is_integer(value: Any) -> bool:
    """Tell whether ``value`` is an integer of any integral type but bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def integer(value: Any, *, name: str, low: int, high: int) -> int:
    """Return an integer argument in the half-open range [low, high) as a Python ``int``.

    Parameters
    ----------
    value : int
        The argument (any integral type but bool).
    name : str
        The argument's name, for the message.
    low, high : int
        The accepted range, ``low <= value < high``.

    Returns
    -------
    int
        ``value`` as a Python integer.

    Raises
    ------
    InvalidArgumentError
        ``value`` is not an integer, or is outside the range.
    """
    if not is_integer(value) or not low <= int(value) < high:
        raise InvalidArgumentError(
            f"{name}: expected an integer in [{low}, {high}), got {reprlib.repr(value)}"
        )
    return int(value)


def level(value: Any, *, name: str = "level") -> float:
    """Return a confidence level as a ``float`` strictly between 0 and 1.

    Parameters
    ----------
    value : float
        The confidence level (e.g. 0.95).
    name : str, default "level"
        The argument's name, for the message.

    Returns
    -------
    float
        ``value`` as a Python float.

    Raises
    ------
    InvalidArgumentError
        ``value`` is not a real number in (0, 1).
    """
    ok = isinstance(value, numbers.Real) and not isinstance(
        value, (bool, np.bool_, numbers.Integral)
    )
    ok = ok and 0.0 < float(value) < 1.0
    if not ok:  # an integer is never strictly between 0 and 1 (and may not fit a float)
        raise InvalidArgumentError(
            f"{name}: expected a number strictly between 0 and 1, got {reprlib.repr(value)}"
        )
    return float(value)


# ------------------------------------------------------------------------------ per-record data


def values(data: Any, *, name: str = "values") -> np.ndarray:
    """Return per-record values as a C-contiguous float64 (n, k) matrix.

    Parameters
    ----------
    data : array_like
        1-D (one value per record) or 2-D (records x columns) bool, integer or float values.
    name : str, default "values"
        The argument's name, for the message.

    Returns
    -------
    numpy.ndarray
        float64, shape (n, k), n >= 1 and k >= 1.

    Raises
    ------
    InvalidArgumentError
        Non-numeric or complex values, more than 2 dimensions, no record or column, or a NaN or
        infinite value (the message gives the first such record).
    """
    arr = as_array(data, name=name)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
    ):
        raise InvalidArgumentError(
            f"{name}: expected bool, integer or float values, got dtype {arr.dtype}"
        )
    if np.iscomplexobj(arr):
        raise InvalidArgumentError(f"{name}: complex values are not supported")
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise InvalidArgumentError(
            f"{name}: expected a 1-D array or a 2-D (n, k) array, got {arr.ndim}-D"
        )
    if arr.shape[0] == 0:
        raise InvalidArgumentError(f"{name}: empty input; expected at least one record")
    if arr.shape[1] == 0:
        raise InvalidArgumentError(f"{name}: expected at least one column")
    out = np.ascontiguousarray(arr, dtype=np.float64)
    finite = np.isfinite(out)
    if not finite.all():
        bad = int(np.flatnonzero(~finite.all(axis=1))[0])
        raise InvalidArgumentError(
            f"{name}: NaN or infinite value at record {bad}; expected finite numbers"
        )
    return out


def statistic(name_of_statistic: Any, data: np.ndarray, *, name: str = "values") -> str:
    """Check a statistic of :func:`~tumorboard.stats.bootstrap` against the value columns.

    Parameters
    ----------
    name_of_statistic : str
        One of ``"mean"``, ``"sum"`` (1 column), ``"ratio"`` (numerator, denominator) and
        ``"f1"`` (TP, FP, FN).
    data : numpy.ndarray
        The validated (n, k) values.
    name : str, default "values"
        The values argument's name, for the message.

    Returns
    -------
    str
        The statistic.

    Raises
    ------
    InvalidArgumentError
        An unknown statistic, or values with the wrong number of columns for it.
    """
    if not isinstance(name_of_statistic, str) or name_of_statistic not in STATISTIC_COLUMNS:
        raise InvalidArgumentError(
            f"statistic: expected one of {tuple(STATISTIC_COLUMNS)}, got "
            f"{reprlib.repr(name_of_statistic)} "
            "(agreement statistics have their own functions in tumorboard.stats)"
        )
    k = STATISTIC_COLUMNS[name_of_statistic]
    if data.shape[1] != k:
        layout = {1: "a 1-D array", 2: "(n, 2) columns numerator, denominator",
                  3: "(n, 3) columns TP, FP, FN"}[k]  # fmt: skip
        raise InvalidArgumentError(
            f"{name}: statistic {name_of_statistic!r} expects {layout}, got shape {data.shape}"
        )
    if name_of_statistic == "f1":
        f1_counts(data, name=name)
    return str(name_of_statistic)


def f1_counts(data: np.ndarray, *, name: str) -> None:
    """Check that the TP, FP, FN columns of an F1 statistic are non-negative.

    With counts >= 0, ``2TP / (2TP + FP + FN)`` lies in [0, 1] (van Rijsbergen 1979); a negative
    count would give an "F1" outside it (e.g. 1.25), which is not an F1.

    Parameters
    ----------
    data : numpy.ndarray
        The validated (n, k) values.
    name : str
        The values argument's name, for the message.

    Raises
    ------
    InvalidArgumentError
        A negative count; the message names the first such record.
    """
    negative = (data < 0).any(axis=1)
    if negative.any():
        bad = int(np.flatnonzero(negative)[0])
        raise InvalidArgumentError(
            f"{name}: statistic 'f1' takes counts TP, FP, FN >= 0; record {bad} has "
            f"{data[bad].tolist()}"
        )


#: Smallest largest-magnitude of a column the Poisson scheme takes: its exact fixed-point sums
#: resolve 2^-64 (csrc/stats/poisson.hpp, kMaxFixedScale), so a column whose values are all below
#: 2^-30 would keep fewer than 34 significant bits (values near 1e-300 would round to 0).
POISSON_MIN_MAGNITUDE = 2.0**-30


def poisson_magnitudes(data: np.ndarray, *, name: str = "values") -> None:
    """Refuse columns too small for the Poisson scheme's exact fixed-point sums.

    The Poisson partial sums are 128-bit integers in units of 2^-scale with the scale capped
    at 64, the same for every shard, which is what makes shard partials merge bit for bit into
    the whole-data result. A column of values near 1e-20 would be rounded to multiples of
    2^-64 (values near 1e-300 to 0: an estimate of 0 with a "degenerate" interval).

    Parameters
    ----------
    data : numpy.ndarray
        The validated (n, k) values.
    name : str, default "values"
        The values argument's name, for the message.

    Raises
    ------
    InvalidArgumentError
        A column whose largest magnitude is non-zero and below 2^-30 (about 9.3e-10); the
        message names the column and the remedy.
    """
    top = np.abs(data).max(axis=0)
    small = (top > 0) & (top < POISSON_MIN_MAGNITUDE)
    if small.any():
        c = int(np.flatnonzero(small)[0])
        raise InvalidArgumentError(
            f"{name}: column {c} holds values no larger than {top[c]:.3g} in magnitude; the "
            "Poisson scheme's exact sums resolve 2^-64, so they would lose their precision. "
            "Multiply the values by a power of ten (and divide the result), or use "
            "scheme='multinomial'"
        )


def engine_statistic(value: Any) -> str:
    """Return the name of a statistic registered in the C++ engine.

    Parameters
    ----------
    value : str
        A name from ``tumorboard._core.stats.statistic_names()``.

    Returns
    -------
    str
        The name.

    Raises
    ------
    InvalidArgumentError
        ``value`` is not a registered statistic's name.
    """
    names = tuple(_core.stats.statistic_names())
    if not isinstance(value, str) or value not in names:
        raise InvalidArgumentError(f"statistic: expected one of {names}, got {reprlib.repr(value)}")
    return value


def resample_memory(
    n_resamples: int, n_groups: int, k: int, *, scheme: str, return_distribution: bool
) -> None:
    """Refuse a bootstrap whose resample arrays would not fit in this machine's memory.

    The engine keeps every group's B resampled statistics (8 bytes each, twice when the
    distribution is returned) and, for the Poisson scheme, exact 128-bit column sums per group,
    resample and column (16 bytes, held twice while they are handed to NumPy). Asking for more
    than the physical memory would end in ``MemoryError`` (``std::bad_alloc``) after minutes of
    work, or in the out-of-memory killer; this check fails at once instead.

    Parameters
    ----------
    n_resamples : int
        Resamples B.
    n_groups : int
        Groups.
    k : int
        Value columns.
    scheme : {"multinomial", "poisson"}
        The resampling scheme.
    return_distribution : bool
        Whether the distribution is returned (a second copy).

    Raises
    ------
    InvalidArgumentError
        The estimate exceeds the physical memory; the message gives both and the largest
        ``n_resamples`` that fits.
    """
    # theta (G x B), the returned copy, and the per-worker copy the interval summary sorts
    per_resample = 8 * (n_groups * (2 if return_distribution else 1) + 2)
    if scheme == "poisson":
        per_resample += n_groups * (2 * 16 * k + 8)
    need = n_resamples * per_resample
    total = physical_memory()
    if total is not None and need > total:
        fits = max(total // per_resample, 0)
        raise InvalidArgumentError(
            f"n_resamples: {n_resamples} resamples of {n_groups} group(s) need about "
            f"{need / 2**30:.1f} GiB, more than this machine's {total / 2**30:.1f} GiB of memory; "
            f"use n_resamples <= {fits}"
        )


def physical_memory() -> int | None:
    """Return the machine's physical memory in bytes (None where the OS does not say).

    Returns
    -------
    int or None
        ``SC_PHYS_PAGES * SC_PAGE_SIZE``.
    """
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return None


def params(data: Any) -> list[float]:
    """Return the parameters of an engine statistic as a flat list of floats.

    Parameters
    ----------
    data : array_like or None
        The parameters; None for none.

    Returns
    -------
    list of float
        The parameters, flattened.

    Raises
    ------
    InvalidArgumentError
        Parameters that are not numbers.
    """
    if data is None:
        return []
    if np.iscomplexobj(data) or isinstance(data, (str, bytes)):
        raise InvalidArgumentError(f"params: expected real numbers, got {reprlib.repr(data)}")
    try:
        arr = np.asarray(data, dtype=np.float64).ravel()
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidArgumentError(f"params: expected numbers, got {reprlib.repr(data)}") from exc
    return [float(x) for x in arr]


def resample_indices(indices: Any, n: int) -> np.ndarray:
    """Return a resample index matrix (n_resamples, n) of record positions.

    Parameters
    ----------
    indices : array_like
        Integer positions in [0, n), one row per resample.
    n : int
        The number of records.

    Returns
    -------
    numpy.ndarray
        int64, shape (n_resamples, n).

    Raises
    ------
    InvalidArgumentError
        A matrix of another shape, non-integer entries, or positions outside [0, n).
    """
    idx = as_array(indices, name="indices")
    if idx.ndim != 2 or idx.shape[1] != n or idx.shape[0] == 0:
        raise InvalidArgumentError(
            f"indices: expected shape (n_resamples, {n}) with n_resamples >= 1, got {idx.shape}"
        )
    if idx.dtype.kind not in "iu":
        raise InvalidArgumentError(f"indices: expected integer positions, got dtype {idx.dtype}")
    outside = (idx < 0) | (idx >= n)
    if outside.any():
        bad = int(idx[outside][0])
        raise InvalidArgumentError(f"indices: expected positions in [0, {n}), got {bad}")
    return idx.astype(np.int64, copy=False)


# ------------------------------------------------------------------- groups, strata, clusters


@dataclass(frozen=True)
class Layout:
    """Dense codes of the groups, strata and clusters of n records, and their stable keys.

    Attributes
    ----------
    group : numpy.ndarray or None
        Group code of each record (None: one group).
    n_groups : int
        Number of groups.
    keys : dict of str to numpy.ndarray
        The key values of each group, one array per key column (empty without groups).
    group_keys : numpy.ndarray
        A stable 64-bit hash of each group's key values (it keys the group's random stream).
    stratum : numpy.ndarray or None
        Stratum code of each record (None: no strata).
    n_strata : int
        Number of strata.
    cluster : numpy.ndarray or None
        Cluster code of each record (None: records are the resampling units).
    n_clusters : int
        Number of clusters.
    cluster_keys : numpy.ndarray or None
        A stable 64-bit hash of each cluster's label (it keys Poisson weights).
    """

    group: np.ndarray | None
    n_groups: int
    keys: dict[str, np.ndarray]
    group_keys: np.ndarray
    stratum: np.ndarray | None
    n_strata: int
    cluster: np.ndarray | None
    n_clusters: int
    cluster_keys: np.ndarray | None


def layout(n: int, *, groups: Any = None, strata: Any = None, clusters: Any = None) -> Layout:
    """Validate and encode the groups, strata and clusters of n records.

    Parameters
    ----------
    n : int
        The number of records.
    groups, strata, clusters : labels or None
        One label per record: an array, a polars Series or DataFrame, or a mapping of
        name -> array (several key columns).

    Returns
    -------
    Layout
        The dense codes and stable keys.

    Raises
    ------
    ValueError
        Labels of the wrong length, or with missing values (raised by ``tumorboard._keys``).
    """
    if groups is None:
        group, n_groups, keys = None, 1, {}
        group_keys = np.zeros(1, dtype=np.uint64)
    else:
        group, keys, n_groups = factorize(label_columns(groups, name="groups", n=n))
        group_keys = combine_hashes([hash_labels(v) for v in keys.values()])
    stratum, n_strata = None, 1
    if strata is not None:
        stratum, _, n_strata = factorize(label_columns(strata, name="strata", n=n))
    cluster, n_clusters, cluster_keys = None, 1, None
    if clusters is not None:
        cluster, ckeys, n_clusters = factorize(label_columns(clusters, name="clusters", n=n))
        cluster_keys = combine_hashes([hash_labels(v) for v in ckeys.values()])
    return Layout(group, n_groups, keys, group_keys, stratum, n_strata, cluster, n_clusters,
                  cluster_keys)  # fmt: skip


def record_keys(keys: Any, n: int) -> np.ndarray:
    """Return the stable 64-bit key of each record that its Poisson weights are drawn from.

    Parameters
    ----------
    keys : labels or None
        One label (or several key columns) per record; None keys records by position.
    n : int
        The number of records.

    Returns
    -------
    numpy.ndarray
        uint64, shape (n,).
    """
    if keys is None:
        return _core.stats.mix64(np.arange(n, dtype=np.uint64))
    cols = label_columns(keys, name="keys", n=n)
    return combine_hashes([hash_labels(s) for s in cols.values()])


def scheme(value: Any, *, strata: Any, keys: Any) -> str:
    """Check a resampling scheme against the strata and record keys given with it.

    Parameters
    ----------
    value : {"multinomial", "poisson"}
        The scheme.
    strata, keys : labels or None
        The strata and record-key arguments of the same call.

    Returns
    -------
    str
        The scheme.

    Raises
    ------
    InvalidArgumentError
        An unknown scheme, strata with the Poisson scheme, or keys without it.
    """
    choice(value, SCHEMES, name="scheme")
    if value == "poisson" and strata is not None:
        raise InvalidArgumentError(
            "strata: the Poisson scheme does not fix sample sizes, so strata do not apply; "
            "use scheme='multinomial'"
        )
    if keys is not None and value != "poisson":
        raise InvalidArgumentError("keys: record keys are only used with scheme='poisson'")
    return str(value)


# ------------------------------------------------------------------------- agreement inputs


def label_array(data: npt.ArrayLike, *, name: str, axes: tuple[str, ...]) -> np.ndarray:
    """Return raters' labels as a non-empty array with the given axes.

    Parameters
    ----------
    data : array_like
        The labels.
    name : str
        The argument's name, for the message.
    axes : tuple of str
        The names of the expected axes, e.g. ``("n_items", "n_raters")``; their number is the
        expected number of dimensions.

    Returns
    -------
    numpy.ndarray
        The labels.

    Raises
    ------
    InvalidArgumentError
        Another number of dimensions, or an empty array.
    """
    arr = as_array(data, name=name)
    shape = f"({', '.join(axes)}{',' if len(axes) == 1 else ''})"
    if arr.ndim != len(axes):
        raise InvalidArgumentError(
            f"{name}: expected a {len(axes)}-D array of shape {shape}, got shape {arr.shape}"
        )
    if arr.size == 0:
        raise InvalidArgumentError(
            f"{name}: expected at least one entry along each axis of {shape}, got shape {arr.shape}"
        )
    return arr


def count_table(table: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Return a table of rating counts (n_items, n_categories) as float64.

    Parameters
    ----------
    table : array_like
        Non-negative integer counts: how many raters put each item in each category.

    Returns
    -------
    numpy.ndarray
        float64, shape (n_items, n_categories), n_items >= 1 and n_categories >= 2.

    Raises
    ------
    InvalidArgumentError
        Not 2-D, no item, fewer than 2 categories, or counts that are not integers in
        [0, 2^53].
    """
    t = as_array(table, name="table")
    if t.ndim != 2:
        raise InvalidArgumentError(
            f"table: expected a 2-D array (n_items, n_categories), got shape {t.shape}"
        )
    if t.shape[0] == 0:
        raise InvalidArgumentError("table: expected at least one item (row), got none")
    if t.shape[1] < 2:
        raise InvalidArgumentError(
            f"table: expected at least 2 categories (columns), got {t.shape[1]}"
        )
    if t.dtype.kind not in "iufb":
        raise InvalidArgumentError(f"table: expected numeric counts, got dtype {t.dtype}")
    t = t.astype(np.float64)
    if not np.isfinite(t).all() or (t < 0).any() or (t != np.floor(t)).any():
        raise InvalidArgumentError("table: expected non-negative integer counts")
    if (t > MAX_COUNT).any():
        # beyond 2^53 float64 counts are not exact, and n(n - 1) overflows near 1e154
        raise InvalidArgumentError(
            f"table: expected rating counts <= 2^53 (raters per item), got {t.max():.6g}"
        )
    return t


def n_categories(value: Any, observed: int) -> int:
    """Return the number of categories of a scale, at least the number observed.

    Parameters
    ----------
    value : int or None
        The declared number of categories; None: the number observed.
    observed : int
        The number of distinct labels observed.

    Returns
    -------
    int
        The number of categories.

    Raises
    ------
    InvalidArgumentError
        A non-integer, or fewer categories than observed.
    """
    if value is None:
        return observed
    if not is_integer(value) or int(value) > 2**31:
        raise InvalidArgumentError(
            f"n_categories: expected an integer <= 2^31, got {reprlib.repr(value)}"
        )
    if int(value) < observed:
        raise InvalidArgumentError(
            f"n_categories: expected at least the {observed} distinct observed labels, got {value}"
        )
    return int(value)
