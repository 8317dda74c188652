"""JSON-lines importer: the file's lines, and the two readers that turn them into typed columns.

Lines are split on newlines only and over-long ones rejected before any parsing. The bulk
reader reads a chunk of well-typed object lines with Arrow's JSON reader and an explicit schema
of the record keys (those that occur in the chunk; the others are columns of nulls); anything
it cannot vouch for (events or other nested values, what :func:`tumorboard._json.load_json`
would refuse, a type mismatch) returns None and goes to the line reader, which reads each line
with ``load_json`` and names every bad one. Both give the
same columns, which :mod:`._jsonl_rows` turns into rows.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from ..._json import MAX_JSON_DEPTH, load_json
from ...errors import InvalidArgumentError
from ._common import Parsed
from ._jsonl_fields import _I32, _IDS, _KEYS_SAMPLE, _MISSING, _Bad, _check, _events, _get, _kind_of


def _drop_long_lines(
    path: Path, numbers: Sequence[int], lines: list[bytes], limit: int
) -> tuple[list[int], list[bytes], list[tuple[str, str]]]:
    """Reject the lines longer than ``limit`` bytes (before any parsing: bounded memory)."""
    keep_n: list[int] = []
    keep: list[bytes] = []
    rejected: list[tuple[str, str]] = []
    for n, line in zip(numbers, lines, strict=True):
        if len(line) > limit:
            rejected.append(_too_long(path, n, len(line), limit))
        else:
            keep_n.append(n)
            keep.append(line)
    return keep_n, keep, rejected


_SPACE = frozenset(b" \t\r\n\x0b\x0c")


def _numbered_lines(raw: bytes, first: int = 1) -> tuple[Sequence[int], list[bytes]]:
    """Return the line numbers and the non-blank lines (split on newlines only).

    ``first`` is the number of the first line of ``raw`` (a block of a longer file).
    """
    lines = raw.split(b"\n")
    space = _SPACE
    head = lines[:-1]
    # the smallest line starting above b" " (and so above every blank) vouches for all of them
    # in one C-level pass; otherwise each line is looked at
    smallest = min(head, default=b"!")
    if (smallest and smallest[0] > 32) or all(line and line[0] not in space for line in head):
        if not lines[-1].strip():
            lines.pop()
        return range(first, first + len(lines)), lines
    kept = [(i, line) for i, line in enumerate(lines, first) if line.strip()]
    return [i for i, _ in kept], [line for _, line in kept]


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


def _suspect(raw: bytes) -> bool:
    """Tell whether a chunk must go to the line reader, which checks it with load_json.

    One compiled pass over the bytes (``_core.traj.scan_chunk``, csrc/traj/jsonl.cpp) finds
    lines that are not objects (Arrow reads "null" as a row of nulls; the line reader rejects
    it), what :func:`tumorboard._json.may_break_limits` finds (lone surrogate escapes, numbers
    past 64 bits or a double's range), bytes that are not UTF-8 (an encoded lone surrogate,
    ED A0 80: the line reader rejects its line alone; Arrow would pass it to polars) and lines
    with more brackets than :data:`MAX_JSON_DEPTH` (a bound of their depth).
    """
    from ... import _core  # here: tumorboard.traj imports without the compiled core

    every_object, may_break, utf8, max_brackets = _core.traj.scan_chunk(raw)
    return not every_object or may_break or not utf8 or max_brackets > MAX_JSON_DEPTH


#: Bytes Arrow's JSON reader parses per task: fewer, larger tasks than 1 MiB ones (fewer chunks
#: to stitch and combine); a line longer than a block makes Arrow refuse the chunk, which then
#: goes to the line reader (the same rows).
_ARROW_BLOCK_BYTES = 8 << 20


#: A key the bulk reader may leave out when it does not occur quoted: not dotted, and without
#: what JSON writes only escaped (quote, backslash, control characters) or may write escaped
#: otherwise than with a \u escape (a key "a/b" may be written "a\/b").
_PLAIN_KEY = re.compile(r'[^."\\/\x00-\x1f]+')


def _quoted_keys(
    raw: bytes, nested: Sequence[str], keys: Mapping[str, str]
) -> tuple[bool, set[str]]:
    r"""Return whether a nested key occurs in a chunk, and the fields whose key no line has.

    One compiled pass over the quotes (``_core.traj.quoted_present``, csrc/traj/quoted.cpp)
    tells, for each name, whether ``"name"`` occurs in the bytes. A field is absent when its
    key (plain, :data:`_PLAIN_KEY`, and no parent of a dotted key) never occurs quoted and
    the chunk has no ``\u`` escape (which could spell a key another way): Arrow's reader then
    parses without it, a quarter less work on logs that leave most optional fields out.
    """
    from ... import _core

    plain = sorted(
        {k for k in keys.values() if _PLAIN_KEY.fullmatch(k) and not any(o.startswith(k + ".")
                                                                         for o in keys.values())}
    )  # fmt: skip
    names = [*nested, *plain]
    found = dict(zip(names, _core.traj.quoted_present(raw, [n.encode() for n in names]),
                     strict=True))  # fmt: skip
    if any(found[k] for k in nested):
        return True, set()
    missing = {k for k in plain if not found[k]}
    if not missing or b"\\u" in raw or all(k in missing for k in keys.values()):
        return False, set()  # (a schema of no field is not narrowed to)
    return False, {f for f, k in keys.items() if k in missing}


_ID_NUMBER = re.compile(r"Column\((/[^)]*)\) changed from string to number")


def _arrow_type(kind: str) -> Any:
    """Return the Arrow type the bulk reader reads a field kind as (None: not in bulk)."""
    import pyarrow as pa

    return {
        "id": pa.string(), "str": pa.large_string(), "gold": pa.large_string(),
        "bool": pa.bool_(), "int": pa.int64(), "int32": pa.int64(), "number": pa.float64(),
        "flag": pa.float64(),
        "str_list": pa.list_(pa.large_string()), "int_list": pa.list_(pa.int64()),
        "number_list": pa.list_(pa.float64()), "bool_list": pa.list_(pa.bool_()),
    }.get(kind)  # fmt: skip


def _explicit_schema(keys: Mapping[str, str], number_ids: set[str]) -> Any:
    """Return the explicit Arrow schema of the record keys (nested structs for dotted keys)."""
    import pyarrow as pa

    tree: dict[str, Any] = {}
    for f, key in keys.items():
        typ = pa.int64() if f in number_ids else _arrow_type(_kind_of(f))
        node = tree
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                return None  # a key is both a value and a parent: leave it to the line reader
            node = child
        if parts[-1] in node and node[parts[-1]] != typ:
            return None  # two fields of different types read one key
        node[parts[-1]] = typ

    def build(node: dict[str, Any]) -> list[Any]:
        return [
            pa.field(k, pa.struct(build(v)) if isinstance(v, dict) else v) for k, v in node.items()
        ]

    return pa.schema(build(tree))


def _read_bulk(
    raw: bytes, lines: Sequence[bytes], keys: Mapping[str, str]
) -> tuple[dict[str, Any], list[dict]] | None:
    """Read a well-typed file in bulk; None sends it to the line reader.

    Returns the columns (Arrow arrays, ids as strings) and the first records (for the keys
    seen).
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as paj

    nested = sorted(
        {k.rsplit(".", 1)[-1] for f, k in keys.items() if _arrow_type(_kind_of(f)) is None}
    )
    keys = {f: k for f, k in keys.items() if _arrow_type(_kind_of(f)) is not None}
    nested_found, absent = _quoted_keys(raw, nested, keys)
    if nested_found:
        return None  # events, config, tool calls or matrices: the line reader
    if _suspect(raw):
        return None  # what load_json checks (surrogates, huge numbers, depth): the line reader
    read = {f: k for f, k in keys.items() if f not in absent}
    number_ids: set[str] = set()
    table = None
    for _ in range(4):
        schema = _explicit_schema(read, number_ids)
        if schema is None:
            return None
        try:
            table = paj.read_json(
                io.BytesIO(raw),
                read_options=paj.ReadOptions(block_size=_ARROW_BLOCK_BYTES),
                parse_options=paj.ParseOptions(
                    explicit_schema=schema, unexpected_field_behavior="ignore"
                ),
            )
            break
        except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
            m = _ID_NUMBER.search(str(exc))
            ids = [f for f in _IDS if f in keys and "/" + keys[f].replace(".", "/") == (m and m[1])]
            if not ids or ids[0] in number_ids:
                return None
            number_ids.add(ids[0])
    if table is None or table.num_rows != len(lines):
        return None
    columns: dict[str, Any] = {}
    for f, key in keys.items():
        if f in absent:  # what Arrow gives a key no line has: nulls of the field's type
            columns[f] = pa.nulls(table.num_rows, type=_arrow_type(_kind_of(f)))
            continue
        arr: Any = table
        for part in key.split("."):
            arr = arr.column(part) if isinstance(arr, pa.Table) else pc.struct_field(arr, part)
        arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
        kind = _kind_of(f)
        if kind.endswith("_list") and arr.null_count < len(arr):
            if pc.list_flatten(arr).null_count:
                return None  # a list with a null element: the line reader names the line
        if kind == "flag" and arr.null_count < len(arr):
            if pc.any(pc.or_(pc.less(arr, 0.0), pc.greater(arr, 1.0))).as_py():
                return None
        if kind in ("number", "flag", "number_list") and arr.null_count < len(arr):
            flat = pc.list_flatten(arr) if kind == "number_list" else arr
            if len(flat) and not pc.all(pc.is_finite(flat)).as_py():
                return None
        if kind == "int32" and arr.null_count < len(arr):
            bounds = pc.min_max(arr)
            if bounds["min"].as_py() < _I32[0] or bounds["max"].as_py() > _I32[1]:
                return None  # the line reader names the line
        if f in number_ids:
            arr = pc.cast(arr, pa.string())
        columns[f] = arr
    try:
        sample = [load_json(line) for line in lines[:_KEYS_SAMPLE]]
    except InvalidArgumentError:
        return None  # a line Arrow read and load_json refuses: the line reader names it
    return columns, sample
