r"""JSON text of stored payloads: one serialiser for everything tumorboard writes as JSON.

Trajectory rows (run configurations, event inputs and outputs), importer payloads, the store's
manifest and commit log, HDF5 attributes, tissue GeoJSON and model-file metadata are
all written with :func:`json_text`, so the same value always gives the same text: keys sorted
(at every depth), non-ASCII characters kept as they are (the text is stored as UTF-8), the
standard separators of ``json.dumps`` (``", "`` and ``": "``, no indentation), and values JSON
has no type for (dates, paths, numpy scalars, ...) written as their ``str()``.

JSON read from outside (agent logs) goes through :func:`load_json`, the one reader of untrusted
JSON: besides the syntax it checks what ``json.loads`` lets through and later code cannot
hold, with a message naming the place in the document (a JSONPath such as
``$[3].question_time``): nesting deeper than :data:`MAX_JSON_DEPTH` (``json.loads`` itself
fails with a ``RecursionError`` somewhere past a thousand levels, and code that walks the value
recurses too), integers outside the signed 64-bit range (every integer column is 64 or 32
bits; ``float()`` of ``10**400`` raises ``OverflowError``), numbers that overflow a double
(``1e400`` reads as ``inf``), the non-standard constants ``NaN`` and ``Infinity``, and lone
UTF-16 surrogates from ``\ud800``-style escapes (valid JSON syntax, but not Unicode text: they
cannot be written as UTF-8). RFC 8259 §9 allows a parser to set such limits.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, overload

from .errors import InvalidArgumentError

__all__ = ["MAX_JSON_DEPTH", "json_text", "load_json", "may_break_limits"]

#: The deepest nesting of arrays and objects :func:`load_json` accepts.
MAX_JSON_DEPTH = 100
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# What makes a document worth the walk over its values (skipped for the rest): an escape that
# can decode to a surrogate, a run of 19 digits (an integer past 64 bits) or a three-digit
# positive exponent (past a double's range). Numbers are looked for in a translated copy
# (digits -> "0", e/E -> "e", "+" kept, everything else a blank) by substring search, several
# times faster than a regex over the text. More brackets than the depth limit make a document
# worth the (cheaper) walk over its containers.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_DIGITS = bytes(
    ord("0") if 48 <= c <= 57 else ord("e") if c in b"eE" else c if c == 43 else 32
    for c in range(256)
)


def may_break_limits(data: bytes) -> bool:
    r"""Tell whether JSON text may hold a lone surrogate escape or an out-of-range number.

    A cheap scan of the bytes (no parsing): False means :func:`load_json` would find neither
    in it, True that it may (a bulk reader hands such text to :func:`load_json`).

    Parameters
    ----------
    data : bytes
        UTF-8 JSON text.

    Returns
    -------
    bool
        Whether a ``\ud800``-style escape, a run of 19 digits or an exponent of three digits
        (not negative) occurs.
    """
    if b"\\u" in data and _SURROGATE_ESCAPE.search(data):  # memchr first: most text has none
        return True
    digits = data.translate(_DIGITS)
    return b"0" * 19 in digits or b"e000" in digits or b"e+000" in digits


@overload
def json_text(value: None) -> None: ...


@overload
def json_text(value: Any) -> str: ...


def json_text(value: Any) -> str | None:
    """Serialise a payload to JSON text for storage.

    Parameters
    ----------
    value : Any
        A JSON-able value (dict, list, str, number, bool); nested values JSON cannot represent
        are written as their ``str()``. None (a missing payload) stays None rather than becoming
        the text ``null``, so nullable text columns stay null.

    Returns
    -------
    str or None
        The JSON text with sorted keys and non-ASCII characters kept, or None for None.

    Examples
    --------
    >>> json_text({"b": 1, "a": "é"})
    '{"a": "é", "b": 1}'
    """
    if value is None:
        return None
    return _ENCODER.encode(value)


#: json_text's encoder, built once: ``json.dumps(value, ensure_ascii=False, sort_keys=True,
#: default=str)`` builds this same encoder on every call, then calls its ``encode``.
_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str)


class _Constant(InvalidArgumentError):
    """A ``NaN`` or ``Infinity`` literal (raised from ``json.loads``'s ``parse_constant``)."""


def _no_constant(name: str) -> Any:
    """Refuse ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON numbers, RFC 8259 §6)."""
    raise _Constant(name)


def load_json(data: bytes | str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse untrusted JSON text and check what later code needs of it.

    Parameters
    ----------
    data : bytes or str
        The JSON text (bytes are read as UTF-8, as ``json.loads`` does).
    max_depth : int, default MAX_JSON_DEPTH
        The deepest nesting of arrays and objects accepted.

    Returns
    -------
    Any
        The value, as ``json.loads`` returns it.

    Raises
    ------
    InvalidArgumentError
        The text is not UTF-8, not JSON, or breaks a limit; the message says which and where
        (``$`` is the document, ``$[3].question_time`` a place inside it).

    Examples
    --------
    >>> load_json(b'{"a": [1, 2]}')
    {'a': [1, 2]}
    """
    raw: bytes | None = bytes(data) if isinstance(data, (bytes, bytearray)) else None
    if raw is not None and _checked_fast(raw, max_depth):
        # one compiled pass found nothing to walk for: strict UTF-8, no lone surrogate escape,
        # no number past the limits, no deeper nesting than max_depth
        return _loads(raw, max_depth)
    if raw is not None:
        try:
            # strict decoding: json.loads would decode bytes with "surrogatepass", letting an
            # encoded lone surrogate (ED A0 80) through as text that cannot be written back
            data = raw.decode(json.detect_encoding(raw))
        except UnicodeDecodeError as exc:
            raise InvalidArgumentError(
                f"not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
    value = _loads(data, max_depth)
    if raw is None:
        try:
            raw = data.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate in the text itself
            raw = None
    if raw is None or may_break_limits(raw):
        _check_value(value, max_depth)
    elif raw.count(b"[") + raw.count(b"{") > max_depth:
        _check_depth(value, max_depth)
    return value


def _loads(text: bytes | str, max_depth: int) -> Any:
    """Return ``json.loads(text)`` (JSON numbers only), its errors as InvalidArgumentError."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise InvalidArgumentError(f"JSON nested deeper than {max_depth} levels") from None
    except _Constant as exc:
        raise InvalidArgumentError(
            f"not valid JSON ({exc.args[0]} is not a JSON number, RFC 8259 §6)"
        ) from None
    except ValueError as exc:
        raise InvalidArgumentError(f"not valid JSON ({str(exc)[:100]})") from None


def _checked_fast(raw: bytes, max_depth: int) -> bool:
    """Tell whether UTF-8 JSON text needs none of :func:`load_json`'s checks after parsing.

    ``_core.traj.scan_document`` (csrc/traj/jsonl.cpp) scans the bytes once: strict UTF-8, the
    test of :func:`may_break_limits` and the deepest nesting outside strings. False (the walk
    decides) for text in another encoding or with a byte-order mark, or without the core.
    """
    try:
        from . import _core
    except ImportError:  # pragma: no cover - a source tree without the compiled core
        return False
    may_break, utf8, depth = _core.traj.scan_document(raw)
    if may_break or not utf8 or depth > max_depth:
        return False
    return json.detect_encoding(raw) == "utf-8"


def _where(path: tuple[Any, ...] | None) -> str:
    """Format a path of (parent, key) links as a JSONPath (``$[3].a``)."""
    keys: list[Any] = []
    while path is not None:
        path, key = path
        keys.append(key)
    out = "$"
    for key in reversed(keys):
        if isinstance(key, int):
            out += f"[{key}]"
        elif key.isidentifier():
            out += f".{key}"
        else:
            out += f"[{json.dumps(key)}]"
    return out if len(out) <= 80 else out[:60] + "..." + out[-17:]


def _check_value(value: Any, max_depth: int) -> None:
    """Walk a parsed value (iteratively) and raise for the first thing past a limit."""
    stack: list[tuple[Any, int, Any]] = [(value, 0, None)]
    while stack:
        v, depth, path = stack.pop()
        if isinstance(v, str):
            _check_text(v, path)
        elif isinstance(v, bool) or v is None:
            continue
        elif isinstance(v, int):
            if not _INT64_MIN <= v <= _INT64_MAX:
                digits = len(str(abs(v)))
                raise InvalidArgumentError(
                    f"{_where(path)}: integer of {digits} digits is outside the signed 64-bit range"
                )
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise InvalidArgumentError(
                    f"{_where(path)}: number too large for a 64-bit float (reads as {v})"
                )
        elif isinstance(v, list):
            if depth >= max_depth:
                raise InvalidArgumentError(
                    f"{_where(path)}: JSON nested deeper than {max_depth} levels"
                )
            stack.extend((x, depth + 1, (path, i)) for i, x in enumerate(v))
        elif isinstance(v, dict):
            if depth >= max_depth:
                raise InvalidArgumentError(
                    f"{_where(path)}: JSON nested deeper than {max_depth} levels"
                )
            for key, x in v.items():
                _check_text(key, path, key=True)
                stack.append((x, depth + 1, (path, key)))


def _check_depth(value: Any, max_depth: int) -> None:
    """Walk the containers of a parsed value (iteratively); raise past ``max_depth`` levels."""
    stack: list[tuple[Any, int, Any]] = [(value, 0, None)]
    containers = (list, dict)
    while stack:
        v, depth, path = stack.pop()
        if depth >= max_depth:
            raise InvalidArgumentError(
                f"{_where(path)}: JSON nested deeper than {max_depth} levels"
            )
        items = v.items() if isinstance(v, dict) else enumerate(v)
        stack.extend((x, depth + 1, (path, k)) for k, x in items if isinstance(x, containers))


def _check_text(s: str, path: Any, *, key: bool = False) -> None:
    """Raise for a string holding a lone surrogate (not encodable as UTF-8)."""
    if s.isascii():
        return
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        what = "a key" if key else "the string"
        code = ord(s[exc.start])
        raise InvalidArgumentError(
            f"{_where(path)}: {what} holds a lone surrogate U+{code:04X} at character "
            f"{exc.start}, which is not Unicode text (RFC 8259 §8.2)"
        ) from None
