"""Argument checks of the slides package, run once at each public entry before any work.

Every message names the option and the value it got, so a command line that passes the option
straight through reports it as the user typed it.
"""

from __future__ import annotations

import math
from typing import Any

from .._checks import check_threads as check_threads  # re-exported: one threads check
from .._checks import choice
from ..errors import InvalidArgumentError

#: The slide readers, by name; "auto" picks one per file (see :func:`tumorboard.slides.open`).
READERS = ("auto", "openslide", "tiffslide", "tifffile", "image")


def positive(value: Any, name: str, unit: str = "") -> float:
    """Return ``value`` as a float after checking that it is a finite number above 0.

    Parameters
    ----------
    value : float
        The number to check.
    name : str
        The option's name, for the message.
    unit : str, optional
        The unit, for the message (e.g. "um/px").

    Returns
    -------
    float
        ``value``.

    Raises
    ------
    InvalidArgumentError
        ``value`` is not a number, not finite, or <= 0.
    """
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    if isinstance(value, bool) or not (math.isfinite(x) and x > 0):
        what = f"a positive number{f' of {unit}' if unit else ''}"
        raise InvalidArgumentError(f"{name}: expected {what}, got {value!r}")
    return x


def non_negative(value: Any, name: str, unit: str = "") -> float:
    """Return ``value`` as a float after checking that it is a finite number >= 0.

    Parameters
    ----------
    value : float
        The number to check.
    name : str
        The option's name, for the message.
    unit : str, optional
        The unit, for the message.

    Returns
    -------
    float
        ``value``.

    Raises
    ------
    InvalidArgumentError
        ``value`` is not a number, not finite, or negative.
    """
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    if isinstance(value, bool) or not (math.isfinite(x) and x >= 0):
        what = f"a non-negative number{f' of {unit}' if unit else ''}"
        raise InvalidArgumentError(f"{name}: expected {what}, got {value!r}")
    return x


def reader(value: Any) -> str:
    """Return the reader name ``value`` after checking it is one of :data:`READERS`.

    Parameters
    ----------
    value : str
        The reader's name.

    Returns
    -------
    str
        ``value``.

    Raises
    ------
    InvalidArgumentError
        ``value`` names no reader; the message lists them.
    """
    return choice(value, READERS, name="reader")
