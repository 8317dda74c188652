"""JSON-lines importer: the file's lines, and the two readers that turn them into typed columns.

Lines are split on newlines only and over-long ones rejected before any parsing; a block's lines
are :class:`Lines`, spans of its bytes (no object per line). The bulk reader reads a chunk of
object lines in one compiled pass (``_core.traj.read_columns``, csrc/traj/jsonl_columns.cpp):
strict JSON with every check of :func:`tumorboard._json.load_json`, the record keys' values and
the events checked and converted as the field checks and ``_jsonl_fields._events`` do, straight
into Arrow columns. A line it cannot vouch for (what ``load_json`` or a check would refuse, a
nested value such as a ``config``, a repeated key) gets a null row and goes alone to the line
reader, which reads it with ``load_json`` and names it if it is bad; its row then takes the
null row's place (:func:`_patch_given_up`). Both give the same columns, which
:mod:`._jsonl_rows` turns into rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, overload

import numpy as np

from ..._json import MAX_JSON_DEPTH, load_json
from ...errors import InvalidArgumentError
from ..schema import EVENT_KINDS, schema_of
from ._common import Parsed
from ._jsonl_fields import (
    _KEYS_SAMPLE,
    _MISSING,
    _Bad,
    _check,
    _events,
    _get,
    _keys_seen,
    _kind_of,
)


class Lines(Sequence[bytes]):
    """Lines of a block of JSON lines: spans ``[starts[i], ends[i])`` of its bytes.

    A line is made a ``bytes`` object only when it is indexed (the line reader, the digest of a
    repeated record); the bulk reader and the digests read the spans in place.
    """

    __slots__ = ("ends", "raw", "starts")

    def __init__(self, raw: bytes, starts: np.ndarray, ends: np.ndarray) -> None:
        self.raw = raw
        self.starts = starts
        self.ends = ends

    def __len__(self) -> int:
        return len(self.starts)

    @overload
    def __getitem__(self, i: int) -> bytes: ...

    @overload
    def __getitem__(self, i: slice) -> Lines: ...

    def __getitem__(self, i: int | slice) -> bytes | Lines:
        if isinstance(i, slice):
            return Lines(self.raw, self.starts[i], self.ends[i])
        return self.raw[int(self.starts[i]) : int(self.ends[i])]

    def __iter__(self) -> Iterator[bytes]:
        raw = self.raw
        for a, b in zip(self.starts.tolist(), self.ends.tolist(), strict=True):
            yield raw[a:b]

    def take(self, rows: Sequence[int] | np.ndarray) -> Lines:
        """Return the lines at positions ``rows``."""
        rows = np.asarray(rows, dtype=np.int64)
        return Lines(self.raw, self.starts[rows], self.ends[rows])

    def lengths(self) -> np.ndarray:
        """Return each line's length in bytes."""
        return self.ends - self.starts


def _drop_long_lines(
    path: Path, numbers: np.ndarray, lines: Lines, limit: int
) -> tuple[np.ndarray, Lines, list[tuple[str, str]]]:
    """Reject the lines longer than ``limit`` bytes (before any parsing: bounded memory)."""
    lengths = lines.lengths()
    over = lengths > limit
    if not over.any():
        return numbers, lines, []
    where = np.flatnonzero(over)
    numbers = np.asarray(numbers, dtype=np.int64)
    rejected = [
        _too_long(path, n, size, limit)
        for n, size in zip(numbers[where].tolist(), lengths[where].tolist(), strict=True)
    ]
    keep = np.flatnonzero(~over)
    return numbers[keep], lines.take(keep), rejected


def _numbered_lines(raw: bytes, first: int = 1) -> tuple[np.ndarray, Lines]:
    """Return the line numbers and the non-blank lines (split on newlines only).

    ``first`` is the number of the first line of ``raw`` (a block of a longer file). A line of
    blanks only (``bytes.strip()`` empties it) is left out; the others keep their numbers.
    """
    from ... import _core  # here: tumorboard.traj imports without the compiled core

    starts, ends, index = _core.traj.line_spans(raw)
    return index + first, Lines(raw, starts, ends)


def _too_long(path: Path, lineno: int, size: int, limit: int) -> tuple[str, str]:
    """Return the rejection of a line over the line bound."""
    return (
        f"{path}:{lineno}",
        f"line of {size:,} bytes is over the limit of {limit:,} bytes "
        "(--max-line-mb / ImportOptions.max_line_bytes raises it)",
    )


#: A block of a file: (number of its first line, whole lines, lines over the bound skipped).
Block = tuple[int, bytes, list[tuple[str, str]]]


def read_blocks(
    path: Path, fh: BinaryIO, *, block_bytes: int, max_line_bytes: int | None
) -> Iterator[Block]:
    """Read a JSON-lines file in blocks of whole lines, holding at most one block and one line.

    Each block ends at a newline (the last one at the end of the file). A line longer than
    ``max_line_bytes`` that does not end within the block it starts in is skipped as it is
    read (never held) and rejected with its length; the lines around it keep their numbers.

    Parameters
    ----------
    path : pathlib.Path
        The file (named in rejections).
    fh : binary file
        The open file, at its start.
    block_bytes : int
        Bytes read at a time.
    max_line_bytes : int or None
        The line bound (None: none).

    Yields
    ------
    (int, bytes, list of (str, str))
        The number of the block's first line, its bytes and the rejections of over-long lines
        skipped before it.
    """
    lineno = 1
    pending = bytearray()
    rejected: list[tuple[str, str]] = []
    skip: list[int] | None = None  # [line number, bytes so far] of an over-long line
    while True:
        data = fh.read(block_bytes)
        if not data:
            break
        if skip is not None:
            nl = data.find(b"\n")
            if nl < 0:
                skip[1] += len(data)
                continue
            rejected.append(_too_long(path, skip[0], skip[1] + nl, max_line_bytes or 0))
            lineno, skip, data = skip[0] + 1, None, data[nl + 1 :]
        cut = data.rfind(b"\n")
        if cut < 0:
            pending += data
        else:
            # the block's whole lines, copied once: the bytes read as they are when nothing is
            # pending and the block ends at a newline (the common case), else joined once
            if pending:
                body = b"".join((pending, memoryview(data)[: cut + 1]))
            else:
                body = data if cut == len(data) - 1 else data[: cut + 1]
            pending = bytearray(memoryview(data)[cut + 1 :])
            yield lineno, body, rejected
            lineno += body.count(b"\n")
            rejected = []
        if max_line_bytes is not None and len(pending) > max_line_bytes:
            skip = [lineno, len(pending)]
            pending.clear()
    if skip is not None:
        rejected.append(_too_long(path, skip[0], skip[1], max_line_bytes or 0))
        lineno += 1
    if pending or rejected:
        yield lineno, bytes(pending), rejected


# ----------------------------------------------------------------------------- line reader


def _read_lines(
    path: Path,
    numbers: Sequence[int],
    lines: Sequence[bytes],
    keys: Mapping[str, str],
    out: Parsed,
) -> tuple[dict[str, list[Any]], list[int], list[bytes], list[Any], list[dict]]:
    """Read the lines one by one with load_json; return the typed columns of the good ones."""
    columns: dict[str, list[Any]] = {f: [] for f in keys if f != "events"}
    kinds = {f: _kind_of(f) for f in keys}
    linenos: list[int] = []
    texts: list[bytes] = []
    events: list[Any] = []
    sample: list[dict] = []
    loads = load_json
    for lineno, line in zip(numbers, lines, strict=True):
        where = f"{path}:{lineno}"
        try:
            record = loads(line)
        except InvalidArgumentError as exc:
            out.rejected.append((where, str(exc)))
            continue
        if not isinstance(record, dict):
            out.rejected.append((where, "expected a JSON object"))
            continue
        if len(sample) < _KEYS_SAMPLE:
            sample.append(record)
        try:
            values = {}
            for f, key in keys.items():
                v = _get(record, key)
                values[f] = None if v is _MISSING else _check(f, kinds[f], v)
            ev = _events(values.pop("events", None))
        except _Bad as exc:
            out.rejected.append((where, str(exc)))
            continue
        for f, v in values.items():
            columns[f].append(v)
        linenos.append(lineno)
        texts.append(line)
        events.append(ev)
    return columns, linenos, texts, events, sample


# ----------------------------------------------------------------------------- bulk reader


#: The kinds the compiled reader converts (the others, any JSON value, are "nested": a line
#: that has such a key is given up, to the line reader). A gold answer that is not a string is
#: stored as JSON text by the line reader; the compiled reader reads strings only.
_CORE_KIND = {
    "id": "id", "str": "str", "gold": "str", "bool": "bool", "int": "int", "int32": "int32",
    "number": "number", "flag": "flag", "str_list": "str_list", "int_list": "int_list",
    "number_list": "number_list", "bool_list": "bool_list",
}  # fmt: skip


def _arrow_array(kind: str, n: int, column: tuple[Any, ...]) -> Any:
    """Return the Arrow array of a column the compiled reader gives (buffers, no copy)."""
    import pyarrow as pa

    null_count, validity, list_offsets, offsets, data, ints, numbers = column
    valid = pa.py_buffer(validity) if null_count else None

    def scalars(typ: Any, length: int, valid: Any, nulls: int) -> Any:
        if typ == pa.large_string():
            buffers = [valid, pa.py_buffer(offsets), pa.py_buffer(data)]
        elif typ == pa.bool_():
            buffers = [valid, pa.py_buffer(data)]
        else:
            buffers = [valid, pa.py_buffer(ints if typ == pa.int64() else numbers)]
        return pa.Array.from_buffers(typ, length, buffers, null_count=nulls)

    core = _CORE_KIND[kind]
    typ = {
        "id": pa.large_string(), "str": pa.large_string(), "bool": pa.bool_(),
        "int": pa.int64(), "int32": pa.int64(), "number": pa.float64(), "flag": pa.float64(),
    }.get(core)  # fmt: skip
    if typ is not None:
        return scalars(typ, n, valid, null_count)
    child_type = {"str_list": pa.large_string(), "int_list": pa.int64(),
                  "number_list": pa.float64(), "bool_list": pa.bool_()}[core]  # fmt: skip
    child = scalars(child_type, int(list_offsets[-1]), None, 0)
    return pa.Array.from_buffers(
        pa.large_list(child_type),
        n,
        [valid, pa.py_buffer(list_offsets)],
        null_count=null_count,
        children=[child],
    )


@dataclass(frozen=True)
class ChunkEvents:
    """The events of a chunk's lines, by the line's position among the chunk's columns.

    ``table`` holds the compiled reader's (a ``_line`` column, then the events columns but the
    item keys); ``lists`` the line reader's, one list of event rows (or None) per position.
    """

    table: Any = None
    lists: list[Any] | None = None


def _bitmap(flags: np.ndarray) -> tuple[Any, int]:
    """Return an Arrow validity bitmap of one byte per row (None when all set) and its nulls."""
    import pyarrow as pa

    nulls = int(len(flags) - np.count_nonzero(flags))
    if not nulls:
        return None, 0
    return pa.py_buffer(np.packbits(flags.astype(bool), bitorder="little")), nulls


def _events_table(ev: Mapping[str, Any]) -> Any:
    """Return the compiled reader's events as an Arrow table: ``_line``, then the events columns."""
    import pyarrow as pa

    n = len(ev["_line"])

    def text(column: tuple[np.ndarray, np.ndarray, np.ndarray], typ: Any) -> Any:
        valid, offsets, data = column
        bitmap, nulls = _bitmap(valid)
        buffers = [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)]
        arr = pa.Array.from_buffers(pa.large_string(), n, buffers, nulls)
        return arr if typ == pa.large_string() else arr.cast(typ)

    def values(column: tuple[np.ndarray, np.ndarray], typ: Any) -> Any:
        data, valid = column
        bitmap, nulls = _bitmap(valid)
        body = (pa.py_buffer(np.packbits(data.astype(bool), bitorder="little"))
                if typ == pa.bool_() else pa.py_buffer(data))  # fmt: skip
        return pa.Array.from_buffers(typ, n, [bitmap, body], nulls)

    fields = [f for f in schema_of("events") if f.name not in ("run_id", "patient_id", "item_id")]
    arrays = [pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(ev["_line"])])]
    for fld in fields:
        if fld.name == "step":
            arrays.append(values(ev["step"], pa.int64()).cast(pa.int32()))
        elif fld.name == "ok":
            arrays.append(values(ev["ok"], pa.bool_()))
        elif fld.name == "latency_s":
            arrays.append(values(ev["latency_s"], pa.float64()))
        else:
            arrays.append(text(ev[fld.name], fld.type))
    return pa.Table.from_arrays(arrays, names=["_line", *(f.name for f in fields)])


def _read_bulk(
    lines: Lines, keys: Mapping[str, str]
) -> tuple[dict[str, Any], list[str], np.ndarray, ChunkEvents | None] | None:
    """Read a chunk of object lines in bulk; None sends the whole chunk to the line reader.

    Returns the columns (Arrow arrays of the fields whose kind the compiled reader converts),
    the keys of the chunk's first records (:func:`._jsonl_fields._keys_seen`; incomplete when
    lines were given up), the lines the compiled reader gave up (ascending; their rows are
    nulls, and they have no events): :func:`_patch_given_up` has the line reader read those;
    and the events of the others (None: none).
    """
    from ... import _core

    fields = list(keys.items())
    spec = [
        (key.split("."), "events" if f == "events" else _CORE_KIND.get(_kind_of(f), "nested"))
        for f, key in fields
    ]
    ok, _reason, _line, columns, seen, given_up, events = _core.traj.read_columns(
        lines.raw, lines.starts, lines.ends, spec, MAX_JSON_DEPTH, _KEYS_SAMPLE, per_line=True,
        event_kinds=list(EVENT_KINDS),
    )  # fmt: skip
    if not ok:
        return None  # keys the compiled reader cannot read together (a key and its parent)
    out = {
        f: _arrow_array(_kind_of(f), len(lines), column)
        for (f, _), (_, kind), column in zip(fields, spec, columns, strict=True)
        if kind not in ("nested", "events")
    }
    chunk_events = None if events is None else ChunkEvents(table=_events_table(events))
    return out, seen, given_up, chunk_events


def _series(name: str, values: Any, kind: str) -> Any:
    """Return a polars Series of a column read by either reader."""
    import polars as pl

    dtype = {
        "id": pl.String, "str": pl.String, "gold": pl.String, "bool": pl.Boolean,
        "int": pl.Int64, "int32": pl.Int64, "number": pl.Float64, "flag": pl.Float64,
        "str_list": pl.List(pl.String), "int_list": pl.List(pl.Int64),
        "number_list": pl.List(pl.Float64), "bool_list": pl.List(pl.Boolean),
    }.get(kind)  # fmt: skip
    if dtype is None:  # json values (config) and complex benchmark fields: Python objects
        return values
    if isinstance(values, list):
        return pl.Series(name, values, dtype=dtype, strict=False)
    s = values.rename(name) if isinstance(values, pl.Series) else pl.Series(name, values)
    return s if s.dtype == dtype else s.cast(dtype)


def _patch_given_up(
    path: Path,
    numbers: np.ndarray,
    lines: Lines,
    keys: Mapping[str, str],
    out: Parsed,
    columns: Mapping[str, Any],
    seen_bulk: list[str],
    given_up: np.ndarray,
    events_bulk: ChunkEvents | None,
) -> tuple[dict[str, Any], np.ndarray, Lines, ChunkEvents | None, list[str]]:
    """Read the lines the compiled reader gave up with the line reader, into its columns.

    The line reader names every bad line among them (in line order, as it would reading the
    whole chunk) and reads the rest (nested values, events, what the compiled reader leaves to
    it); their rows take the places of the null rows. Returns the columns (polars Series, and
    lists of the JSON values only the line reader reads), the line numbers, lines and events of
    the rows kept (:class:`ChunkEvents`), and the keys of the chunk's first records
    (``seen_bulk``, the compiled reader's, when it read all of them).
    """
    import polars as pl

    n = len(lines)
    cols, read, _, events_read, _ = _read_lines(
        path, numbers[given_up].tolist(), lines.take(given_up), keys, out
    )
    good = np.isin(numbers[given_up], np.asarray(read, dtype=np.int64))
    patched = given_up[good]
    keep = np.setdiff1d(np.arange(n, dtype=np.int64), given_up[~good], assume_unique=True)
    # each kept row's place in [the compiled reader's n rows, then the line reader's]
    source = np.arange(n, dtype=np.int64)
    source[patched] = n + np.arange(len(patched), dtype=np.int64)
    take = source[keep]
    typed = [f for f in cols if f in columns]
    merged: dict[str, Any] = {}
    if typed:  # one gather of every typed column (polars runs the columns in parallel)
        bulk = pl.DataFrame([_series(f, columns[f], _kind_of(f)) for f in typed])
        patch = pl.DataFrame([_series(f, cols[f], _kind_of(f)) for f in typed],
                             schema=bulk.schema)  # fmt: skip
        merged.update(pl.concat([bulk, patch]).gather(take).to_dict())
    rows = take.tolist()
    for f, values in cols.items():
        if f not in columns:  # values only the line reader reads (JSON values)
            every = [None] * n + values
            merged[f] = [every[i] for i in rows]
    every_events = [None] * n + events_read
    lists = [every_events[i] for i in rows]
    table = None
    if events_bulk is not None:  # the compiled reader's events, at their lines' new places
        import pyarrow as pa

        table = events_bulk.table
        at = np.searchsorted(keep, table.column("_line").to_numpy())
        table = table.set_column(0, "_line", pa.array(at.astype(np.int64)))
    events = ChunkEvents(table=table, lists=lists if any(lists) else None)
    if events.table is None and events.lists is None:
        events = None
    # the keys of the first records: the compiled reader's, when it read every one of them
    seen = seen_bulk if int(given_up[0]) >= _KEYS_SAMPLE else _sample_keys(lines)
    return merged, numbers[keep], lines.take(keep), events, seen


def _sample_keys(lines: Sequence[bytes]) -> list[str]:
    """Return the keys of the first :data:`_KEYS_SAMPLE` object records, as the line reader does."""
    sample: list[dict] = []
    for line in lines:
        if len(sample) >= _KEYS_SAMPLE:
            break
        try:
            record = load_json(line)
        except InvalidArgumentError:
            continue
        if isinstance(record, dict):
            sample.append(record)
    return _keys_seen(sample)
