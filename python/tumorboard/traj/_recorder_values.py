"""Recorder values: the checks of what a harness records, and the conversion of rows to Arrow.

Each items and events column's Python type check (from the schema), the check of a row dict
(:func:`_check_row`), ids given as integers, an item's benchmark fields against their kinds
(:func:`_extra`), and the buffered row tuples into an Arrow table of a table's schema, one
conversion per column (:func:`_build`). Shared by :class:`~tumorboard.traj.recorder.Recorder`
and :class:`~tumorboard.traj.recorder.ItemRecorder`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from .._json import json_text
from ..errors import InvalidArgumentError, InvalidTypeError
from .fields import check_value, extra_fields
from .schema import EVENT_KINDS, EVENTS, ITEMS, schema_of

_ITEM_COLS = tuple(ITEMS.names)
_EVENT_COLS = tuple(EVENTS.names)
_KINDS = frozenset(EVENT_KINDS)


def _is_str(v: Any) -> bool:
    """Tell whether ``v`` is a string."""
    return isinstance(v, str)


def _is_int(v: Any) -> bool:
    """Tell whether ``v`` is an int (not a bool)."""
    return isinstance(v, int) and not isinstance(v, bool)


def _is_float(v: Any) -> bool:
    """Tell whether ``v`` is an int or float (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_bool(v: Any) -> bool:
    """Tell whether ``v`` is a bool."""
    return isinstance(v, bool)


def _is_str_list(v: Any) -> bool:
    """Tell whether ``v`` is a list or tuple of strings."""
    return isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)


def _checks(schema: pa.Schema) -> dict[str, tuple[Callable[[Any], bool], str]]:
    """Return, per column, the Python type check of its values and what it expects (for errors)."""
    out: dict[str, tuple[Callable[[Any], bool], str]] = {}
    for f in schema:
        t = f.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            out[f.name] = (_is_str, "a string")
        elif pa.types.is_integer(t):
            out[f.name] = (_is_int, "an integer")
        elif pa.types.is_floating(t):
            out[f.name] = (_is_float, "a number")
        elif pa.types.is_boolean(t):
            out[f.name] = (_is_bool, "True or False")
        else:
            out[f.name] = (_is_str_list, "a list of strings")
    return out


_ITEM_CHECKS = _checks(ITEMS)
_EVENT_CHECKS = _checks(EVENTS)


def _check_row(row: Mapping[str, Any], checks: Mapping[str, Any], where: str) -> None:
    """Check the type of every non-null value of a row dict."""
    for name, value in row.items():
        if value is None:
            continue
        ok, expected = checks[name]
        if not ok(value):
            raise InvalidTypeError(f"{where}: column {name!r} expects {expected}, got {value!r}")


def _id(value: Any, name: str) -> str | None:
    """Return an id as a string (integers are converted; None stays None)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise InvalidTypeError(f"{name}: expected a string (or an integer), got {value!r}")


def _extra(extra: Mapping[str, Any] | None, benchmark: str) -> str | None:
    """Check an item's benchmark fields against the benchmark's kinds; return their JSON text.

    Fields of a benchmark :mod:`tumorboard.traj.fields` knows are checked against their kinds;
    other benchmarks' fields are stored as given (JSON-able values).
    """
    if extra is None:
        return None
    if not isinstance(extra, Mapping) or not all(isinstance(k, str) for k in extra):
        raise InvalidTypeError(f"extra: expected a mapping of field name -> value, got {extra!r}")
    kinds = extra_fields(benchmark)
    doc = {}
    for name, value in extra.items():
        if value is None:
            continue
        if kinds:
            if name not in kinds:
                raise InvalidArgumentError(
                    f"extra: {benchmark} has no field {name!r}; fields: {', '.join(kinds)}"
                )
            try:
                value = check_value(kinds[name], value)
            except ValueError as exc:
                raise InvalidTypeError(f"extra: field {name!r}: {exc}, got {value!r}") from None
        doc[name] = value
    return json_text(doc) if doc else None


def _source_columns(data: Any) -> set[str]:
    """Return the column names of a table, frame or mapping of columns."""
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return set(data.schema.names)
    if hasattr(data, "columns"):
        return set(data.columns)
    return set(data)


def _build(rows: list[tuple[Any, ...]], table: str) -> pa.Table:
    """Convert row tuples to an Arrow table of the table's schema (one conversion per column)."""
    schema = schema_of(table)
    arrays = []
    for field, values in zip(schema, zip(*rows, strict=True), strict=True):
        try:
            arrays.append(pa.array(values, type=field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
            raise InvalidArgumentError(
                f"{table}.{field.name}: a recorded value does not convert to {field.type}: {exc}"
            ) from None
    return pa.Table.from_arrays(arrays, schema=schema)
