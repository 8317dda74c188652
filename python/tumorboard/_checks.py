"""Argument checks shared by the packages' validation modules.

``stats/_validate.py`` and ``text/_validate.py`` import these, so a check that is the same
everywhere has one home.
"""

from __future__ import annotations

import re
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
