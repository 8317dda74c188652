r"""JSON-lines logs: one JSON object per line, one question per object.

The format is for harnesses that log their own way.

Field mapping: every field below is read from the record key of the same name unless
``field_map`` (``--map FIELD=KEY``) maps it to another key; a dotted key (``meta.model``) reads
nested objects.

========================  ====================================================================
run fields                ``run_id`` (default: derived), ``benchmark`` (default: the import's
                          ``benchmark`` or "jsonl"), ``track`` ("default"), ``model``
                          (required, or the import's ``model``), ``tools`` (False),
                          ``config`` (any JSON, stored as text)
item fields               ``patient_id``, ``item_id`` (default: from content, below), ``position``
                          (default: order of the patient's records in the run), ``task``
                          ("default"), ``question``, ``options`` (list of strings; default:
                          parsed from the question), ``gold`` (a letter, ``"C) text"`` or
                          free text), ``response``, ``parsed_answer``, ``correct`` (bool),
                          ``files_accessed``, ``files_hallucinated`` (lists of names),
                          ``latency_s``, ``attempts``, ``flags``
benchmark fields          the fields of the run's benchmark in
                          :data:`tumorboard.traj.fields.BENCHMARK_FIELDS` (e.g. ``gt_tools``
                          for radabench, ``dimension`` and ``metric`` for medbench), stored
                          in ``items.extra``
events                    ``events``: a list of objects with the events columns ``role``,
                          ``kind`` (message, thought, action, tool_call, observation,
                          file_access, answer, reprompt), ``tool``, ``input`` (any JSON),
                          ``output``, ``ok``, ``error``, ``latency_s``, ``step`` (default:
                          list order)
========================  ====================================================================

A record without an ``item_id`` is identified by its content, never by its place in the file:
its id is ``q`` and 16 hex digits of a stable 64-bit hash of its task, patient id and question (or
of the values of ``ImportOptions.item_key``, ``--item-key``), with ``.1``, ``.2``, ... for
records of one run that share them, ordered by their lines' digests. A derived ``position`` is
left out of the item digest. A record with nothing that identifies it is rejected.

Where ``correct`` is absent it is graded: the answer parsed from ``response`` (or
``parsed_answer``) against the gold letter (``correct_source="graded"``, else "missing" with
the flag ``ungraded``). An import's ``model``/``benchmark``/``track`` override the records'.
A line that is not a JSON object or has a value of the wrong type is skipped and listed in the
report's ``rejected`` records as ``file:line`` with the reason; the other lines of the file are
imported, and a file without any valid line is skipped. Every line is read with
:func:`tumorboard._json.load_json`, which also rejects (naming the place in the record) JSON
nested deeper than 100 levels, integers outside 64 bits, numbers that overflow a double, and
lone surrogate escapes (``"\ud800"``); ``position``, ``attempts`` and an event's ``step``
must fit 32 bits, the stored type. A line that is not UTF-8 is rejected alone. Lines are split
on newlines only (JSON lines), so text holding U+2028 and other Unicode line breaks stays in its
record.

When the records leave a field the benchmark needs empty (the response, a grade, a benchmark
field) or a ``--map`` key never matches, the import warns with the count of such lines and the
keys the records do have.

Two readers give the same rows: well-typed object lines (events included; without ``config``
or ``--item-key`` values) are read in bulk by the compiled core, in one pass over the bytes on
every core (strict JSON with all of ``load_json``'s checks, the fields' and events' checks);
every line it cannot vouch for is read by the line reader, :func:`tumorboard._json.load_json`
and the field checks, which names each bad line, and its row takes its place. Either way, the
rows are built in bulk (polars) from the columns.

The work is split by job: :mod:`._jsonl_fields` (the fields, their aliases, ``--map`` and the
checks of record values), :mod:`._jsonl_read` (the lines and the bulk and line readers),
:mod:`._jsonl_identity` (content item ids, ``--item-key``) and :mod:`._jsonl_rows` (columns
into rows); this module finds the files and runs a file's chunks through them (:func:`parse`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from ._common import ImportOptions, MalformedLog, Parsed, files_with_suffix
from ._jsonl_fields import COMPUTED_ITEM_COLUMNS as COMPUTED_ITEM_COLUMNS  # re-exported
from ._jsonl_fields import FIELD_ALIASES as FIELD_ALIASES  # re-exported
from ._jsonl_fields import FIELDS as FIELDS  # re-exported
from ._jsonl_fields import ITEM_FIELDS as ITEM_FIELDS  # re-exported
from ._jsonl_fields import RUN_FIELDS as RUN_FIELDS  # re-exported
from ._jsonl_fields import _apply_aliases, _fields, _keys_seen, check_field_map
from ._jsonl_fields import known_fields as known_fields  # re-exported
from ._jsonl_identity import CONTENT_ID_PREFIX as CONTENT_ID_PREFIX  # re-exported
from ._jsonl_read import (
    Block,
    ChunkEvents,
    _drop_long_lines,
    _numbered_lines,
    _patch_given_up,
    _read_bulk,
    _read_lines,
    read_blocks,
)
from ._jsonl_rows import _build, _finish, _State, _take_rows


def discover(src: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Return the files to import: ``src`` itself, or every ``.jsonl`` / ``.ndjson`` under it.

    Suffixes match in any letter case (``LOG.JSONL``).

    Hidden files and folders are left out. The second element (files skipped while
    discovering) is always empty for this format.
    """
    if src.is_file():
        return [src], []
    return files_with_suffix(src, (".jsonl", ".ndjson")), []


#: Lines read and turned into rows at a time (progress is reported after each chunk).
CHUNK_LINES = 200_000
#: Bytes of a file read at a time by :func:`parse_stream` (whole lines).
BLOCK_BYTES = 64 << 20


def parse(
    path: Path,
    raw: bytes,
    opts: ImportOptions,
    fp: bytes = b"",
    tick: Callable[[int], None] | None = None,
) -> Parsed:
    """Parse one JSON-lines file into rows; bad lines become warnings.

    Parameters
    ----------
    path : pathlib.Path
        The file (named in warnings and in ``items.source``).
    raw : bytes
        Its content (UTF-8).
    opts : ImportOptions
        The import's options.
    fp : bytes, default b""
        The import's options fingerprint (:meth:`ImportOptions.fingerprint`), the start of
        every item digest.
    tick : callable, optional
        Called with the number of lines read so far after each chunk of
        :data:`CHUNK_LINES` lines.

    Returns
    -------
    Parsed
        The runs, items and events rows, and the warnings.

    Raises
    ------
    MalformedLog
        The file has no valid record.
    InvalidArgumentError
        ``field_map`` names an unknown field.
    """
    return next(_parse_blocks(path, iter([(1, raw, [])]), opts, fp, tick, piece_bytes=None))


def parse_stream(
    path: Path,
    opts: ImportOptions,
    fp: bytes = b"",
    tick: Callable[[int], None] | None = None,
    *,
    piece_bytes: int,
    block_bytes: int = BLOCK_BYTES,
) -> Iterator[Parsed]:
    """Parse a JSON-lines file read in blocks, giving its rows in pieces of bounded size.

    The file is read :data:`BLOCK_BYTES` at a time (:func:`._jsonl_read.read_blocks`: whole
    lines; an over-long line is skipped as it is read), so memory holds one block, one line
    and the rows of one piece, whatever the file's size. A piece is given once its items take
    ``piece_bytes`` (Arrow bytes) or more; the last piece carries the file's warnings. The
    rows of all pieces together are those :func:`parse` gives for the whole file.

    Parameters
    ----------
    path : pathlib.Path
        The file.
    opts, fp, tick
        As for :func:`parse`.
    piece_bytes : int
        The size of the items of a piece that makes it be given.
    block_bytes : int, default BLOCK_BYTES
        Bytes read at a time.

    Yields
    ------
    Parsed
        The pieces, in line order.

    Raises
    ------
    MalformedLog
        The file has no valid record (raised before any piece is given).
    OSError
        The file cannot be read.
    """
    with open(path, "rb") as fh:
        blocks = read_blocks(path, fh, block_bytes=block_bytes,
                             max_line_bytes=opts.max_line_bytes)  # fmt: skip
        yield from _parse_blocks(path, blocks, opts, fp, tick, piece_bytes=piece_bytes)


def _parse_blocks(
    path: Path,
    blocks: Iterator[Block],
    opts: ImportOptions,
    fp: bytes,
    tick: Callable[[int], None] | None,
    *,
    piece_bytes: int | None,
) -> Iterator[Parsed]:
    """Run the blocks of a file through the readers; give a piece per ``piece_bytes`` of items.

    With ``piece_bytes`` None the whole file is one piece.
    """
    check_field_map(opts.field_map, opts.benchmark)
    fields = _fields(opts)
    keys = {f: opts.field_map.get(f, f) if not f.startswith("_key:") else f[5:] for f in fields}
    out = Parsed()
    state = _State()
    aliased = False
    seen_lines = 0  # lines read (good or bad) before the current block
    for first, raw, long_lines in blocks:
        out.n_bytes += len(raw)
        if first == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        linenos_all, lines_all = _numbered_lines(raw, first)
        out_rejected: list[tuple[str, str]] = list(long_lines)
        if opts.max_line_bytes is not None:
            linenos_all, lines_all, dropped = _drop_long_lines(
                path, linenos_all, lines_all, opts.max_line_bytes
            )
            out_rejected += dropped
        out.n_records += len(lines_all) + len(out_rejected)
        out.rejected += out_rejected
        state.n_lines += len(lines_all)
        if not aliased and lines_all:
            _apply_aliases(keys, lines_all, opts, path, out)
            aliased = True
        for start in range(0, len(lines_all), CHUNK_LINES):
            lines = lines_all[start : start + CHUNK_LINES]
            numbers = linenos_all[start : start + CHUNK_LINES]
            bulk = _read_bulk(lines, keys)
            if bulk is not None:
                columns, seen, given_up, events = bulk
                linenos, texts = numbers, lines
                if len(given_up):
                    columns, linenos, texts, events, seen = _patch_given_up(
                        path, numbers, lines, keys, out, columns, seen, given_up, events
                    )
            else:
                columns, linenos, texts, lists, sample = _read_lines(
                    path, numbers.tolist(), lines, keys, out
                )
                events = ChunkEvents(lists=lists) if any(lists) else None
                seen = _keys_seen(sample)
            if not state.keys_seen:
                state.keys_seen = seen
            if len(linenos):
                _build(out, state, path, opts, fp, columns, linenos, texts, events)
            if tick is not None:
                tick(seen_lines + start + len(lines))
        seen_lines += len(lines_all)
        if piece_bytes is not None and sum(t.nbytes for t in state.items) >= piece_bytes:
            _piece(out, state, path)
            yield out
            out = Parsed()
    if state.m == 0:
        reason = "empty file" if not state.n_lines else "no valid record (see warnings)"
        if out.rejected:
            first_bad = out.rejected[0]
            reason = (
                f"no valid record; first problem: line {first_bad[0].rsplit(':', 1)[1]}: "
                f"{first_bad[1]}"
            )
        raise MalformedLog(reason)
    _finish(out, state, path, opts, keys)
    out.legacy_sources = (f"{path}:",)
    yield out


def _piece(out: Parsed, state: _State, path: Path) -> None:
    """Move the rows gathered so far in ``state`` into the piece ``out``."""
    _take_rows(out, state)
    out.legacy_sources = (f"{path}:",)
