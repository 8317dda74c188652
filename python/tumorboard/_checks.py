"""Argument checks shared by the packages' validation modules.

``stats/_validate.py``, ``text/_validate.py`` and ``slides/_validate.py`` import these, so a
check that is the same everywhere has one home.
"""

from __future__ import annotations

import math
import numbers
import re
import reprlib
from collections.abc import Sequence
from typing import Any, TypeVar

from .errors import InvalidArgumentError

_T = TypeVar("_T")


def choice(value: Any, allowed: Sequence[_T], *, name: str, note: str = "") -> _T:
    """Return the element of ``allowed`` equal to ``value`` (and of its type).

    Parameters
    ----------
    value : object
        The argument to check.
    allowed : sequence
        The accepted values.
    name : str
        The argument's name, for the message.
    note : str, optional
        Appended to the message (e.g. which values are not available).

    Returns
    -------
    object
        The element of ``allowed`` equal to ``value``, so that e.g. a ``numpy.str_`` becomes
        the plain ``str``.

    Raises
    ------
    InvalidArgumentError
        ``value`` is not one of ``allowed``; the message names the argument and lists them.
    """
    for a in allowed:
        if isinstance(value, type(a)) and value == a:
            return a
    raise InvalidArgumentError(f"{name}: expected one of {tuple(allowed)}, got {value!r}{note}")


#: Device names tumorboard accepts (``auto``, ``cpu``, ``cuda``, ``cuda:N``, ``mps``); the CLI
#: checks the spelling with it before torch is imported, ``models.resolve_device`` the machine.
DEVICE_NAME = re.compile(r"auto|cpu|mps|cuda(?::[0-9]+)?")
DEVICE_NAMES = "'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'"

#: Most worker threads a call into the C++ core may ask for (each is an OS thread the core
#: starts); :func:`check_threads` checks against it.
MAX_THREADS = 4096


def check_threads(threads: Any, *, name: str = "threads") -> int:
    """Return a worker-thread count as the C++ core takes it: 0 (all cores) for None.

    The one ``threads`` check of the package: ``stats``, ``text`` and ``slides`` validate their
    ``threads`` arguments with it, so the accepted values and the message are the same
    everywhere.

    Parameters
    ----------
    threads : int or None
        Worker threads, an integer (any integral type but bool) in [1, :data:`MAX_THREADS`]
        (4096); None uses every core.
    name : str, default "threads"
        The argument's name, for the message.

    Returns
    -------
    int
        ``threads`` as a Python ``int``, or 0 (the core's "all cores") for None.

    Raises
    ------
    InvalidArgumentError
        ``threads`` is neither None nor an integer in [1, 4096] (0, negative counts, bools and
        floats such as 1.5 included); the message reads
        ``"threads: expected None or an integer in [1, 4096], got ..."``.
    """
    import numpy as np

    if threads is None:
        return 0
    integral = isinstance(threads, numbers.Integral) and not isinstance(threads, (bool, np.bool_))
    if not integral or not 1 <= int(threads) <= MAX_THREADS:
        raise InvalidArgumentError(
            f"{name}: expected None or an integer in [1, {MAX_THREADS}], "
            f"got {reprlib.repr(threads)}"
        )
    return int(threads)


def as_array(data: Any, *, name: str, dtype: Any = None) -> Any:
    """Return ``numpy.asarray(data, dtype)``, refusing what NumPy cannot make an array of.

    Ragged nested lists (``[1, [2]]``), integers beyond every NumPy type (``10**400``) and
    objects NumPy cannot convert raise inside NumPy with a message that names nothing; here they
    become an :class:`~tumorboard.errors.InvalidArgumentError` that names the argument.

    Parameters
    ----------
    data : array_like
        The argument.
    name : str
        The argument's name, for the message.
    dtype : numpy dtype, optional
        The dtype to convert to (None: NumPy's choice).

    Returns
    -------
    numpy.ndarray
        The array.

    Raises
    ------
    InvalidArgumentError
        NumPy cannot build an array (of ``dtype``) from ``data``.
    """
    import numpy as np

    try:
        return np.asarray(data, dtype=dtype)
    except (ValueError, TypeError, OverflowError) as exc:
        what = "an array" if dtype is None else f"a {np.dtype(dtype).name} array"
        raise InvalidArgumentError(
            f"{name}: expected {what} (a rectangular, non-ragged array of numbers or labels), "
            f"got {type(data).__name__}: {exc}"
        ) from exc


def flag(value: Any, *, name: str) -> bool:
    """Return a boolean argument as ``bool`` (Python or NumPy bool; nothing else).

    Parameters
    ----------
    value : bool
        The argument.
    name : str
        The argument's name, for the message.

    Returns
    -------
    bool
        ``value``.

    Raises
    ------
    InvalidArgumentError
        ``value`` is not a bool (an array, a string and a number are refused rather than judged
        by their truth value).
    """
    import numpy as np

    if not isinstance(value, (bool, np.bool_)):
        raise InvalidArgumentError(f"{name}: expected True or False, got {reprlib.repr(value)}")
    return bool(value)


def finite(value: Any, *, name: str) -> float:
    """Return a finite real number as ``float``.

    Parameters
    ----------
    value : float
        The argument.
    name : str
        The argument's name, for the message.

    Returns
    -------
    float
        ``value``.

    Raises
    ------
    InvalidArgumentError
        ``value`` is not a finite real number.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgumentError(f"{name}: expected a finite number, got {reprlib.repr(value)}")
    try:
        out = float(value)
    except OverflowError:  # an int beyond the float range
        raise InvalidArgumentError(
            f"{name}: expected a finite number, got {reprlib.repr(value)}"
        ) from None
    if not math.isfinite(out):
        raise InvalidArgumentError(f"{name}: expected a finite number, got {value!r}")
    return out
