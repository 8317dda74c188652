"""The versioned Arrow schema of a trajectory store (documented in docs/trajectory-schema.md).

Four tables, joined by keys:

* ``runs``: one row per run (benchmark, track, model, tools, config); key ``run_id``.
* ``items``: one row per question; key ``(run_id, patient_id, item_id)``; benchmark-specific
  inputs of the scorers in ``extra`` (:mod:`tumorboard.traj.fields`).
* ``events``: one row per message, thought, action, tool call, observation or file access of an
  item (or of a patient's conversation outside any question, ``item_id`` null); ordered by
  ``step`` within ``(run_id, patient_id, item_id)``.
* ``imports``: one row per imported log file (content hash, source, counts); re-imports are
  idempotent by item (``items.digest``), not by file.

Text that can be long uses ``large_string`` and lists of it ``large_list`` (Arrow's 32-bit
offsets cap one array at 2 GB). :func:`conform` turns user input (pyarrow Table/RecordBatch,
polars DataFrame, or a mapping of column -> values) into a table of exactly this schema, with
errors that name the table, the column and what was expected.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .._json import json_text
from .._typing import Frame
from ..errors import InvalidArgumentError, InvalidTypeError

#: Version of the on-disk layout and of the table schemas below. Bump on any change; a store
#: written by a newer version refuses to open (StoreVersionError). Version 2 added the items
#: columns ``extra``, ``source`` and ``digest`` and the replacement journals; version 1 parts
#: read as version 2 with those columns null.
SCHEMA_VERSION = 2

#: Parquet/Arrow schema metadata key holding SCHEMA_VERSION in every part file.
VERSION_KEY = b"tumorboard.traj.schema_version"

CORRECT_SOURCES = ("log", "graded", "missing")
EVENT_KINDS = (
    "message",
    "thought",
    "action",
    "tool_call",
    "observation",
    "file_access",
    "answer",
    "reprompt",
)

_TS = pa.timestamp("us", tz="UTC")

RUNS = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("benchmark", pa.string()),
        pa.field("track", pa.string()),
        pa.field("model", pa.string()),
        pa.field("tools", pa.bool_()),
        pa.field("config", pa.large_string()),
        pa.field("created_at", _TS),
    ]
)

ITEMS = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("patient_id", pa.string()),
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("position", pa.int32()),
        pa.field("task", pa.string()),
        pa.field("question", pa.large_string()),
        pa.field("options", pa.large_list(pa.large_string())),
        pa.field("gold", pa.string()),
        pa.field("gold_text", pa.large_string()),
        pa.field("response", pa.large_string()),
        pa.field("parsed_answer", pa.string()),
        pa.field("correct", pa.bool_()),
        pa.field("correct_source", pa.string()),
        pa.field("n_files", pa.int32()),
        pa.field("files_accessed", pa.large_list(pa.string())),
        pa.field("files_hallucinated", pa.large_list(pa.string())),
        pa.field("latency_s", pa.float64()),
        pa.field("attempts", pa.int32()),
        pa.field("flags", pa.list_(pa.string())),
        pa.field("extra", pa.large_string()),
        pa.field("source", pa.large_string()),
        pa.field("digest", pa.string()),
    ]
)

EVENTS = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("patient_id", pa.string()),
        pa.field("item_id", pa.string()),
        pa.field("step", pa.int32()),
        pa.field("role", pa.string()),
        pa.field("kind", pa.string()),
        pa.field("tool", pa.string()),
        pa.field("input", pa.large_string()),
        pa.field("output", pa.large_string()),
        pa.field("ok", pa.bool_()),
        pa.field("error", pa.large_string()),
        pa.field("latency_s", pa.float64()),
    ]
)

IMPORTS = pa.schema(
    [
        pa.field("content_hash", pa.string(), nullable=False),
        pa.field("source", pa.large_string()),
        pa.field("format", pa.string()),
        pa.field("batch", pa.string()),
        pa.field("n_items", pa.int64()),
        pa.field("n_events", pa.int64()),
        pa.field("imported_at", _TS),
    ]
)

TABLES: dict[str, pa.Schema] = {"runs": RUNS, "items": ITEMS, "events": EVENTS, "imports": IMPORTS}

#: The columns that identify an item (and, with ``step``, an event).
ITEM_KEY = ("run_id", "patient_id", "item_id")


def output_text(value: Any) -> str | None:
    """Encode a value for the ``events.output`` column: text as it is, anything else as JSON.

    Parameters
    ----------
    value : Any
        A message or tool output: a string (stored unchanged), None (null), or a JSON-able value
        (stored as :func:`tumorboard._json.json_text`, keys sorted).

    Returns
    -------
    str or None
        The column value.
    """
    if value is None or isinstance(value, str):
        return value
    return json_text(value)


def schema_of(table: str) -> pa.Schema:
    """Return the Arrow schema of a store table, with the schema version in its metadata.

    Parameters
    ----------
    table : {"runs", "items", "events", "imports"}
        The table.

    Returns
    -------
    pyarrow.Schema
        The table's schema; its metadata maps ``VERSION_KEY`` to ``SCHEMA_VERSION``.

    Raises
    ------
    InvalidArgumentError
        An unknown table name.
    """
    try:
        schema = TABLES[table]
    except KeyError:
        raise InvalidArgumentError(
            f"table: expected one of {tuple(TABLES)}, got {table!r}"
        ) from None
    return schema.with_metadata({VERSION_KEY: str(SCHEMA_VERSION).encode()})


def _columns_of(data: Any, table: str) -> dict[str, Any]:
    """Return column name -> values of a pyarrow Table/RecordBatch, polars frame or mapping."""
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return {name: data.column(i) for i, name in enumerate(data.schema.names)}
    mod = type(data).__module__
    if mod.startswith("polars"):
        import polars as pl

        if isinstance(data, pl.LazyFrame):
            data = data.collect()
        if isinstance(data, pl.DataFrame):
            arrow = data.to_arrow()
            return {name: arrow.column(name) for name in arrow.schema.names}
    if isinstance(data, Mapping):
        return dict(data)
    raise InvalidTypeError(
        f"{table}: expected a pyarrow Table or RecordBatch, a polars DataFrame or a mapping of "
        f"column name -> values, got {type(data).__name__}"
    )


def _extra_text(values: Any, table: str) -> Any:
    """Encode the ``items.extra`` values that are mappings (or Arrow structs) as JSON text."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if not pa.types.is_struct(values.type):
            return values
        values = values.to_pylist()
    elif type(values).__module__.startswith("polars"):
        import polars as pl

        if not isinstance(values.dtype, pl.Struct):
            return values
        values = values.to_list()
    out = []
    for i, v in enumerate(values):
        if v is None or isinstance(v, str):
            out.append(v)
        elif isinstance(v, Mapping):
            out.append(json_text({k: x for k, x in v.items() if x is not None}) if v else None)
        else:
            raise InvalidArgumentError(
                f"{table}.extra, row {i}: expected a mapping of benchmark fields (or its JSON "
                f"text), got {type(v).__name__}"
            )
    return out


def _to_array(values: Any, field: pa.Field, table: str, n: int | None) -> pa.ChunkedArray:
    """Convert one column's values to a chunked array of the field's type (and length ``n``)."""
    name, typ = field.name, field.type
    if table == "items" and name == "extra":
        values = _extra_text(values, table)
    try:
        if isinstance(values, pa.ChunkedArray):
            arr = values
        elif isinstance(values, pa.Array):
            arr = pa.chunked_array([values])
        elif type(values).__module__.startswith("polars"):
            arr = pa.chunked_array([values.to_arrow()])
        else:
            arr = pa.chunked_array([pa.array(values, type=typ)])
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
        raise InvalidArgumentError(
            f"{table}.{name}: cannot convert the values to {typ}: {exc}"
        ) from None
    if n is not None and len(arr) != n:
        raise InvalidArgumentError(
            f"{table}.{name}: expected {n} values (one per row), got {len(arr)}"
        )
    if arr.type != typ:
        if pa.types.is_null(arr.type):
            return pa.chunked_array([pa.nulls(len(arr), type=typ)])
        try:
            arr = arr.cast(typ, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise InvalidArgumentError(
                f"{table}.{name}: expected {typ}-compatible values, got {arr.type} ({exc})"
            ) from None
    return arr


def _check_members(arr: pa.ChunkedArray, allowed: tuple[str, ...], where: str) -> None:
    """Check that every non-null value of an enum column is one of ``allowed``."""
    bad = pc.invert(pc.is_in(arr, value_set=pa.array(allowed)))
    bad = pc.and_kleene(bad, pc.is_valid(arr))
    if pc.any(bad).as_py():
        idx = pc.index(bad, True).as_py()
        raise InvalidArgumentError(
            f"{where}: row {idx} has {arr[idx].as_py()!r}; expected one of {allowed} or null"
        )


def _distinct_counts(files: pa.ChunkedArray) -> pa.Array:
    """Return the number of distinct entries of each list, as int32."""
    import polars as pl

    series = pl.Series("f", files.combine_chunks())
    return series.list.n_unique().cast(pl.Int32).to_arrow()


def conform(
    data: Frame | pa.RecordBatch, table: str, *, defaults: Mapping[str, Any] | None = None
) -> pa.Table:
    """Build a pyarrow Table of exactly ``schema_of(table)`` from ``data``.

    Columns missing from ``data`` are taken from ``defaults`` (a scalar broadcast to every row)
    or filled with nulls; ``items.n_files`` missing is the number of distinct
    ``files_accessed``; ``items.correct_source`` missing is "log" where ``correct`` is set and
    "missing" elsewhere (everywhere without a ``correct`` column).

    Parameters
    ----------
    data : pyarrow Table or RecordBatch, polars DataFrame or LazyFrame, or mapping
        The rows, as columns (a mapping of column name -> values).
    table : {"runs", "items", "events", "imports"}
        The target table.
    defaults : mapping, optional
        Column name -> scalar for columns missing from ``data``.

    Returns
    -------
    pyarrow.Table
        The table, with the schema (and version metadata) of ``schema_of(table)``.

    Raises
    ------
    InvalidArgumentError
        Unknown columns, nulls in key columns, values that do not convert (safely) to the column
        type, and enum columns outside their values (all ``ValueError``).
    InvalidTypeError
        ``data`` of an unsupported type.
    """
    schema = schema_of(table)
    cols = _columns_of(data, table)
    defaults = dict(defaults or {})
    unknown = [c for c in cols if schema.get_field_index(c) < 0]
    if unknown:
        raise InvalidArgumentError(
            f"{table}: unknown column {unknown[0]!r}; the {table} table has columns "
            f"{', '.join(schema.names)}"
        )
    n: int | None = None
    arrays: dict[str, pa.ChunkedArray] = {}
    for name, values in cols.items():
        arr = _to_array(values, schema.field(name), table, n)
        n = len(arr) if n is None else n
        arrays[name] = arr
    if n is None:
        n = 0
    out = []
    for field in schema:
        name = field.name
        if name in arrays:
            arr = arrays[name]
        elif name in defaults:
            arr = _to_array(
                pa.repeat(pa.scalar(defaults[name], type=field.type), n), field, table, n
            )
        elif table == "items" and name == "n_files" and "files_accessed" in arrays:
            arr = pa.chunked_array([_distinct_counts(arrays["files_accessed"])], type=field.type)
        elif table == "items" and name == "correct_source":
            if "correct" in arrays:
                src = pc.if_else(pc.is_valid(arrays["correct"]), "log", "missing")
                arr = pa.chunked_array([src]).cast(field.type)
            else:
                arr = pa.chunked_array([pa.repeat(pa.scalar("missing", field.type), n)])
        else:
            arr = pa.chunked_array([pa.nulls(n, type=field.type)])
        if not field.nullable and arr.null_count:
            idx = pc.index(pc.is_null(arr), True).as_py()
            raise InvalidArgumentError(
                f"{table}.{name}: missing value at row {idx}; this key is required"
            )
        out.append(arr)
    result = pa.Table.from_arrays(out, schema=schema)
    if table == "items":
        _check_members(result.column("correct_source"), CORRECT_SOURCES, "items.correct_source")
    elif table == "events":
        _check_members(result.column("kind"), EVENT_KINDS, "events.kind")
    return result


def polars_schema(table: str) -> Any:
    """Return the polars schema of a store table (without pandas, which ``pl.from_arrow`` loads).

    Parameters
    ----------
    table : {"runs", "items", "events", "imports"}
        The table.

    Returns
    -------
    polars.Schema
        Column name -> polars dtype, in the table's column order.
    """
    cached = _POLARS_SCHEMAS.get(table)
    if cached is None:
        import polars as pl

        cached = pl.Schema({f.name: _polars_dtype(f.type) for f in schema_of(table)})
        _POLARS_SCHEMAS[table] = cached
    return cached


_POLARS_SCHEMAS: dict[str, Any] = {}


def _polars_dtype(typ: pa.DataType) -> Any:
    """Return the polars dtype of an Arrow type of the store schemas."""
    import polars as pl

    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return pl.String
    if pa.types.is_boolean(typ):
        return pl.Boolean
    if pa.types.is_int32(typ):
        return pl.Int32
    if pa.types.is_int64(typ):
        return pl.Int64
    if pa.types.is_float64(typ):
        return pl.Float64
    if pa.types.is_timestamp(typ):
        return pl.Datetime("us", typ.tz)
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return pl.List(_polars_dtype(typ.value_type))
    raise AssertionError(f"no polars dtype for {typ}")  # pragma: no cover - fixed schemas


def empty(table: str) -> pa.Table:
    """Return a zero-row table of ``schema_of(table)``.

    Parameters
    ----------
    table : {"runs", "items", "events", "imports"}
        The table.

    Returns
    -------
    pyarrow.Table
        The empty table, with the schema's version metadata.
    """
    return schema_of(table).empty_table()
