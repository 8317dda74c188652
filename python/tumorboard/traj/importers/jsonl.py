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

Two readers give the same rows: files whose every line is a well-typed object (and that have
no ``events`` or ``config``) are read in bulk by Arrow's JSON reader with an explicit schema
(any type mismatch sends the file to the other reader); everything else is read line by line
with :func:`tumorboard._json.load_json`, which names each bad line. Either way, the rows are
built in bulk (polars) from the columns.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._json import MAX_JSON_DEPTH, json_text, load_json, may_break_limits
from ...errors import InvalidArgumentError
from ...harness.parsing import answer_letter, parse_answers, parse_options
from ..fields import BENCHMARK_FIELDS, REQUIRED_FIELDS, check_value, extra_fields
from ..schema import EVENT_KINDS, output_text, schema_of
from ._common import (
    ImportOptions,
    MalformedLog,
    Parsed,
    files_with_suffix,
    input_text,
    line_digests,
)

RUN_FIELDS = ("run_id", "benchmark", "track", "model", "tools", "config")
#: Columns of the items table the importer computes rather than reads from a record: the
#: reference's text (``gold_text``), where ``correct`` came from (``correct_source``), the file
#: count (``n_files``), the benchmark-specific ``extra`` struct, and the record's ``source`` and
#: ``digest``. ``run_id`` is a run field (:data:`RUN_FIELDS`).
COMPUTED_ITEM_COLUMNS = ("gold_text", "correct_source", "n_files", "extra", "source", "digest")
#: The item fields a record is read for: the items table's columns (``schema_of("items")``, the
#: single source of their names and order) less the run fields and the computed columns.
ITEM_FIELDS = tuple(
    name
    for name in schema_of("items").names
    if name not in RUN_FIELDS and name not in COMPUTED_ITEM_COLUMNS
)
FIELDS = RUN_FIELDS + ITEM_FIELDS + ("events",)
_ALL_EXTRA = {f: k for fields in BENCHMARK_FIELDS.values() for f, k in fields.items()}

#: Other names harnesses give the fields, tried in this order when a file's records lack the
#: field's own key and ``--map`` does not map it: the first alias the sampled records carry is
#: read as the field, and the import says so (warning naming both keys). ``id`` comes last
#: for the item id (a per-request id would be ``request_id``); ``answer``, which is as often
#: the model's free text as the reference, is not here.
FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "correct": ("is_correct", "correctness", "is_right", "score_correct"),
    "gold": ("target", "ground_truth", "gt_answer", "answer_key", "expected", "reference",
             "gold_answer", "correct_answer", "label"),
    "response": ("output", "prediction", "pred", "completion", "model_output",
                 "model_response", "generation"),
    "parsed_answer": ("predicted_answer", "pred_answer", "extracted_answer"),
    "question": ("prompt", "query", "input_text"),
    "item_id": ("question_id", "qid", "sample_id", "doc_id", "id"),
    "patient_id": ("case_id", "patient"),
}  # fmt: skip
_MISSING = object()
_KEYS_SAMPLE = 1000
_ALIAS_SAMPLE = 200  # records whose keys decide the field aliases of a file
_IDS = ("run_id", "patient_id", "item_id")
# field -> kind, for the common fields (ids accept integers, "json" is any JSON value)
_KIND = {
    "run_id": "id", "benchmark": "str", "track": "str", "model": "str", "tools": "bool",
    "config": "json", "patient_id": "id", "item_id": "id", "position": "int32", "task": "str",
    "question": "str", "options": "str_list", "gold": "gold", "response": "str",
    "parsed_answer": "str", "correct": "bool", "files_accessed": "str_list",
    "files_hallucinated": "str_list", "latency_s": "number", "attempts": "int32",
    "flags": "str_list", "events": "json",
}  # fmt: skip
_EXPECT = {
    "id": "a string", "str": "a string", "bool": "true or false", "int": "an integer",
    "int32": "a 32-bit integer",
    "number": "a number", "str_list": "a list of strings",
}  # fmt: skip


def discover(src: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Return the files to import: ``src`` itself, or every ``.jsonl`` / ``.ndjson`` under it.

    Suffixes match in any letter case (``LOG.JSONL``).

    Hidden files and folders are left out. The second element (files skipped while
    discovering) is always empty for this format.
    """
    if src.is_file():
        return [src], []
    return files_with_suffix(src, (".jsonl", ".ndjson")), []


def known_fields(benchmark: str | None) -> tuple[str, ...]:
    """Return the fields a record may carry for ``benchmark`` (every benchmark's when None).

    Parameters
    ----------
    benchmark : str or None
        The import's benchmark.

    Returns
    -------
    tuple of str
        The common fields, then the benchmark fields.
    """
    extra = _ALL_EXTRA if benchmark is None else extra_fields(benchmark)
    return FIELDS + tuple(extra)


def check_field_map(field_map: Mapping[str, str], benchmark: str | None) -> None:
    """Check that ``field_map`` maps known fields to non-empty keys.

    Parameters
    ----------
    field_map : mapping of str to str
        Field -> record key.
    benchmark : str or None
        The import's benchmark (its fields are allowed too).

    Raises
    ------
    InvalidArgumentError
        An unknown field or an empty key.
    """
    allowed = known_fields(benchmark)
    for name, key in field_map.items():
        if name not in allowed:
            which = f" for benchmark {benchmark!r}" if benchmark else ""
            raise InvalidArgumentError(
                f"field_map: unknown field {name!r}{which}; fields: {', '.join(allowed)}"
            )
        if not isinstance(key, str) or not key or any(not p for p in key.split(".")):
            raise InvalidArgumentError(
                f"field_map: field {name!r} maps to {key!r}; expected a record key such as "
                "'answer' or 'meta.answer'"
            )


_I32 = (-(2**31), 2**31 - 1)


class _Bad(InvalidArgumentError):
    """A record that cannot be imported; the line becomes a warning."""


def _kind_of(name: str) -> str:
    """Return the kind of a field (common or benchmark field, or an ``--item-key`` key)."""
    if name.startswith("_key:"):
        return "json"
    return _KIND.get(name) or _ALL_EXTRA[name]


def _check(name: str, kind: str, value: Any) -> Any:
    """Check one record value of field ``name``; return it as stored (raises _Bad)."""
    if value is None:
        return None
    if kind == "id":
        if isinstance(value, str):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        raise _Bad(f"{name!r} must be a string, got {json.dumps(value)[:40]}")
    if kind == "json":
        return value
    if kind == "gold":
        return value if isinstance(value, str) else json_text(value)
    if kind == "int32":
        if isinstance(value, int) and not isinstance(value, bool) and _I32[0] <= value <= _I32[1]:
            return value
        what = "an integer in [-2**31, 2**31 - 1]"
        raise _Bad(f"{name!r} must be {what}, got {json.dumps(value, default=str)[:40]}")
    try:
        return check_value(kind, value)
    except ValueError as exc:
        raise _Bad(f"{name!r} {exc}, got {json.dumps(value, default=str)[:40]}") from None


def _get(record: Mapping[str, Any], key: str) -> Any:
    """Return the value at a dotted key of a record, or ``_MISSING``."""
    if "." not in key:
        return record.get(key, _MISSING)
    value: Any = record
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _fields(opts: ImportOptions) -> list[str]:
    """Return the fields read from the records (the import's forced fields are not read)."""
    forced = {"model": opts.model, "benchmark": opts.benchmark, "track": opts.track}
    extra = _ALL_EXTRA if opts.benchmark is None else extra_fields(opts.benchmark)
    keyed = [_key_field(k) for k in opts.item_key]
    return [f for f in (*FIELDS, *extra) if not forced.get(f)] + keyed


#: Lines read and turned into rows at a time (progress is reported after each chunk).
CHUNK_LINES = 200_000


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
    check_field_map(opts.field_map, opts.benchmark)
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    linenos_all, lines_all = _numbered_lines(raw)
    out_rejected: list[tuple[str, str]] = []
    if opts.max_line_bytes is not None and any(len(x) > opts.max_line_bytes for x in lines_all):
        linenos_all, lines_all, out_rejected = _drop_long_lines(
            path, linenos_all, lines_all, opts.max_line_bytes
        )
    fields = _fields(opts)
    keys = {f: opts.field_map.get(f, f) if not f.startswith("_key:") else f[5:] for f in fields}
    out = Parsed(n_records=len(lines_all) + len(out_rejected), rejected=out_rejected)
    _apply_aliases(keys, lines_all, opts, path, out)
    state = _State()
    for start in range(0, len(lines_all), CHUNK_LINES):
        lines = lines_all[start : start + CHUNK_LINES]
        numbers = linenos_all[start : start + CHUNK_LINES]
        whole = len(lines) == len(lines_all) and len(lines) == numbers[-1]
        body = raw if whole else b"\n".join(lines)
        bulk = _read_bulk(body, lines, keys)
        if bulk is not None:
            columns, sample = bulk
            linenos, texts, events = numbers, lines, None
        else:
            columns, linenos, texts, events, sample = _read_lines(path, numbers, lines, keys, out)
        if not state.keys_seen:
            state.keys_seen = _keys_seen(sample)
        if linenos:
            _build(out, state, path, opts, fp, columns, linenos, texts, events)
        if tick is not None:
            tick(start + len(lines))
    if state.m == 0:
        reason = "empty file" if not lines_all else "no valid record (see warnings)"
        if out.rejected:
            first = out.rejected[0]
            reason = (
                f"no valid record; first problem: line {first[0].rsplit(':', 1)[1]}: {first[1]}"
            )
        raise MalformedLog(reason)
    _finish(out, state, path, opts, keys)
    out.legacy_sources = (f"{path}:",)
    return out


def _drop_long_lines(
    path: Path, numbers: Sequence[int], lines: list[bytes], limit: int
) -> tuple[list[int], list[bytes], list[tuple[str, str]]]:
    """Reject the lines longer than ``limit`` bytes (before any parsing: bounded memory)."""
    keep_n: list[int] = []
    keep: list[bytes] = []
    rejected: list[tuple[str, str]] = []
    for n, line in zip(numbers, lines, strict=True):
        if len(line) > limit:
            rejected.append(
                (
                    f"{path}:{n}",
                    f"line of {len(line):,} bytes is over the limit of {limit:,} bytes "
                    "(--max-line-mb / ImportOptions.max_line_bytes raises it)",
                )
            )
        else:
            keep_n.append(n)
            keep.append(line)
    return keep_n, keep, rejected


_SPACE = frozenset(b" \t\r\n\x0b\x0c")


def _numbered_lines(raw: bytes) -> tuple[Sequence[int], list[bytes]]:
    """Return the line numbers and the non-blank lines (split on newlines only)."""
    lines = raw.split(b"\n")
    space = _SPACE
    if all(line and line[0] not in space for line in lines[:-1]):
        if not lines[-1].strip():
            lines.pop()
        return range(1, len(lines) + 1), lines
    kept = [(i, line) for i, line in enumerate(lines, 1) if line.strip()]
    return [i for i, _ in kept], [line for _, line in kept]


@dataclass
class _State:
    """What the chunks of one file share: run rows, position counters, empty-field counts."""

    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    counts: Any = None  # polars frame run_id, patient_id, n: records seen per patient
    m: int = 0
    missing: dict[str, int] = field(default_factory=dict)
    keys_seen: list[str] = field(default_factory=list)
    benchmarks: set[str] = field(default_factory=set)
    items: list[Any] = field(default_factory=list)
    keys: list[Any] = field(default_factory=list)
    # run_id, _h, n: records given a content id so far per identity hash (the next: n)
    occurrences: Any = None
    n_shared: int = 0  # records whose identifying text another record of their run shares


def _finish(
    out: Parsed, state: _State, path: Path, opts: ImportOptions, keys: Mapping[str, str]
) -> None:
    """Collect the chunks' rows into ``out`` and add the empty-field warnings."""
    import polars as pl
    import pyarrow as pa

    out.runs = list(state.runs.values())
    if state.n_shared:
        which = ", ".join(opts.item_key) if opts.item_key else "task, patient and question"
        out.warnings.append(
            (
                str(path),
                f"{state.n_shared:,} records without an item id share their {which} with "
                "another record of their run; they are told apart by an occurrence index "
                "(.1, .2, ...). Give them item ids (--map item_id=KEY) or name what "
                "identifies an item (--item-key KEY[,KEY...])",
            )
        )
    out.items_table = pa.concat_tables(state.items)
    out.keys_frame = pl.concat(state.keys)
    m = state.m
    seen = ", ".join(state.keys_seen[:40]) + (", ..." if len(state.keys_seen) > 40 else "")
    wanted = [f for f in opts.field_map if f in keys and f not in ("events", "config")]
    for b in sorted(state.benchmarks):
        need = REQUIRED_FIELDS.get(b, REQUIRED_FIELDS["mtbbench"])
        wanted += [f for f in need if f not in wanted]
    for f in wanted:
        n = state.missing.get(f, 0)
        if not n:
            continue
        if f == "grade":
            reason = (
                f"{n:,} of {m:,} lines have no grade (no {keys.get('correct', 'correct')!r}, "
                f"and no {keys.get('gold', 'gold')!r} with a "
                f"{keys.get('response', 'response')!r} whose answer can be read); they are "
                "ungraded (flag 'ungraded'; `score` counts them in n_ungraded)"
            )
        else:
            mapped = f" (--map {f}={opts.field_map[f]})" if f in opts.field_map else ""
            reason = f"{n:,} of {m:,} lines have no value for {keys.get(f, f)!r}{mapped}"
        out.warnings.append((str(path), f"{reason}; keys seen: {seen}"))


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


def _events(raw_events: Any) -> list[dict[str, Any]] | None:
    """Check a record's ``events`` list and return its event rows (without the item keys)."""
    if raw_events is None:
        return None
    if not isinstance(raw_events, list):
        raise _Bad("'events' must be a list of objects")
    out = []
    for step, e in enumerate(raw_events):
        if not isinstance(e, dict):
            raise _Bad(f"events[{step}] must be an object")
        kind = e.get("kind")
        if kind not in EVENT_KINDS:
            raise _Bad(f"events[{step}].kind must be one of {', '.join(EVENT_KINDS)}")
        where = f"events[{step}]"
        row = {
            "step": _check(f"{where}.step", "int32", e.get("step", step)),
            "role": _check(f"{where}.role", "str", e.get("role")),
            "kind": kind,
            "tool": _check(f"{where}.tool", "str", e.get("tool")),
            "input": input_text(e.get("input")),
            "output": output_text(e.get("output")),
            "ok": _check(f"{where}.ok", "bool", e.get("ok")),
            "error": _check(f"{where}.error", "str", e.get("error")),
            "latency_s": _check(f"{where}.latency_s", "number", e.get("latency_s")),
        }
        out.append(row)
    return out


def _apply_aliases(
    keys: dict[str, str], lines: Sequence[bytes], opts: ImportOptions, path: Path, out: Parsed
) -> None:
    """Read a field under an alias (:data:`FIELD_ALIASES`) when its own key is never there.

    The first :data:`_ALIAS_SAMPLE` records decide; each alias used is reported once.
    """
    sample: list[dict[str, Any]] = []
    for line in lines[:_ALIAS_SAMPLE]:
        try:
            record = load_json(line)
        except InvalidArgumentError:
            continue
        if isinstance(record, dict):
            sample.append(record)
    if not sample:
        return
    seen = set(_keys_seen(sample))
    taken = set(keys.values())
    for f, aliases in FIELD_ALIASES.items():
        if f not in keys or f in opts.field_map or keys[f] in seen:
            continue
        alias = next((a for a in aliases if a in seen and a not in taken), None)
        if alias is None:
            continue
        keys[f] = alias
        taken.add(alias)
        out.warnings.append(
            (
                str(path),
                f"read {alias!r} as the field {f!r} (no {f!r} key in the records; "
                f"--map {f}={alias} says so explicitly, --map {f}=KEY reads another key)",
            )
        )


def _keys_seen(sample: Sequence[Mapping[str, Any]]) -> list[str]:
    """Return the keys of the sampled records, in first-seen order (nested keys dotted)."""
    seen: dict[str, None] = {}
    for record in sample:
        for k, v in record.items():
            seen.setdefault(k, None)
            if isinstance(v, Mapping):
                for sub in v:
                    seen.setdefault(f"{k}.{sub}", None)
    return list(seen)


# ----------------------------------------------------------------------------- bulk reader


def _suspect(raw: bytes, n_lines: int) -> bool:
    """Tell whether a chunk must go to the line reader, which checks it with load_json.

    Lines that are not objects, and what :func:`tumorboard._json.may_break_limits` finds
    (lone surrogate escapes, numbers past 64 bits or a double's range).
    """
    # every line an object: the body starts with "{" and so does every line after a newline
    if (raw[:1] != b"{" or raw.count(b"\n{") != n_lines - 1) and _NOT_OBJECT.search(raw):
        return True
    if may_break_limits(raw):
        return True
    try:  # bytes that are not UTF-8 (an encoded lone surrogate: ED A0 80): the line reader
        raw.decode("utf-8")  # rejects their line alone; Arrow would pass them to polars
    except UnicodeDecodeError:
        return True
    return False


# A line whose first non-blank byte is not "{": Arrow reads "null" as a row of nulls; the line
# reader rejects it as not an object.
_NOT_OBJECT = re.compile(rb"^[ \t\r\x0b\x0c]*[^{ \t\r\n\x0b\x0c]", re.MULTILINE)


def _max_brackets(raw: bytes) -> int:
    """Return the most ``[`` and ``{`` on one line of ``raw`` (a bound of the lines' depth).

    Vectorised (one pass of numpy over the bytes): two ``bytes.count`` calls per line cost
    about 0.2 s per 200k lines, a tenth of a bulk import.
    """
    import numpy as np

    data = np.frombuffer(raw, np.uint8)
    at = np.flatnonzero((data == 0x5B) | (data == 0x7B))
    if at.size == 0:
        return 0
    line = np.searchsorted(np.flatnonzero(data == 0x0A), at)
    return int(np.bincount(line).max())


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
    if nested and re.search(f'"(?:{"|".join(map(re.escape, nested))})"'.encode(), raw):
        return None  # events, config, tool calls or matrices: the line reader
    if _suspect(raw, len(lines)) or (
        raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH and _max_brackets(raw) > MAX_JSON_DEPTH
    ):
        return None  # what load_json checks (surrogates, huge numbers, depth): the line reader
    keys = {f: k for f, k in keys.items() if _arrow_type(_kind_of(f)) is not None}
    number_ids: set[str] = set()
    table = None
    for _ in range(4):
        schema = _explicit_schema(keys, number_ids)
        if schema is None:
            return None
        try:
            table = paj.read_json(
                io.BytesIO(raw),
                read_options=paj.ReadOptions(block_size=1 << 20),
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


# ----------------------------------------------------------------------------- rows


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
    s = pl.Series(name, values)
    return s if s.dtype == dtype else s.cast(dtype)


def _build(
    out: Parsed,
    state: _State,
    path: Path,
    opts: ImportOptions,
    fp: bytes,
    columns: Mapping[str, Any],
    linenos: list[int],
    texts: list[bytes],
    events: list[Any] | None,
) -> None:
    """Turn the typed columns of one chunk's good lines into rows (in bulk), into ``state``."""
    import polars as pl

    data: dict[str, Any] = {"_line": pl.Series("_line", linenos, dtype=pl.Int64)}
    objects: dict[str, list[Any]] = {}
    for f, values in columns.items():
        s = _series(f, values, _kind_of(f))
        if isinstance(s, pl.Series):
            data[f] = s
        else:
            objects[f] = list(values)
    df = pl.DataFrame(data)

    def col(name: str, dtype: Any) -> pl.Expr:
        return pl.col(name) if name in df.columns else pl.lit(None, dtype=dtype)

    def text_or(name: str, forced: str | None, default: str) -> pl.Expr:
        if forced:
            return pl.lit(forced, dtype=pl.String)
        c = col(name, pl.String)
        return pl.when(c.is_null() | (c == "")).then(pl.lit(default)).otherwise(c)

    model = pl.lit(opts.model, dtype=pl.String) if opts.model else col("model", pl.String)
    df = df.with_columns(model.alias("_model"), pl.int_range(pl.len(), dtype=pl.Int64).alias("_i"))
    no_model = pl.col("_model").is_null() | (pl.col("_model") == "")
    bad = df.filter(no_model).get_column("_line").to_list()
    for lineno in bad:
        out.rejected.append(
            (f"{path}:{lineno}", "no model (give the record a 'model' or the import a model)")
        )
    if bad:
        df = df.filter(~no_model)
    df, unidentified = _identities(df, objects, opts)
    why = (
        f"no item id and none of the --item-key keys ({', '.join(opts.item_key)}) has a value"
        if opts.item_key
        else _NO_IDENTITY
    )
    for lineno in unidentified:
        out.rejected.append((f"{path}:{lineno}", why))
    bad = bad or unidentified
    m = df.height
    if m == 0:
        return
    # mapped keys that the records leave empty (counted before defaults fill them)
    for f in opts.field_map:
        if f in _ALL_EXTRA or f in ("response", "events", "config"):
            continue
        n = int(df.get_column(f).null_count()) if f in df.columns else m
        if f in objects:
            n = sum(1 for i in df.get_column("_i").to_list() if objects[f][i] is None)
        state.missing[f] = state.missing.get(f, 0) + n
    df = df.with_columns(
        pl.col("_model").alias("model"),
        text_or("benchmark", opts.benchmark, "jsonl").alias("benchmark"),
        text_or("track", opts.track, "default").alias("track"),
        col("tools", pl.Boolean).fill_null(False).alias("tools"),
    )
    keep = df.get_column("_i").to_list() if bad else range(len(linenos))
    tail = [pl.lit(opts.run_name)] if opts.run_name else []
    derived_run = pl.concat_str(
        [
            pl.col("benchmark"),
            pl.col("track"),
            pl.col("model"),
            pl.when(pl.col("tools")).then(pl.lit("tools")).otherwise(pl.lit("no-tools")),
            *tail,
        ],
        separator=":",
    )
    run_id = col("run_id", pl.String)
    df = df.with_columns(
        pl.when(run_id.is_null() | (run_id == "")).then(derived_run).otherwise(run_id)
        .alias("run_id"),
        col("patient_id", pl.String).alias("patient_id"),
        col("position", pl.Int64).is_not_null().alias("_pos_given"),
    )  # fmt: skip
    kept_texts = texts if isinstance(keep, range) else [texts[i] for i in keep]
    df = _content_item_ids(df, kept_texts, state)
    df = _positions(df, state)
    # options: given, else parsed from the question (once per distinct question)
    df = df.with_columns(col("question", pl.String).alias("question"))
    if "options" not in df.columns:
        df = df.with_columns(pl.lit(None, dtype=pl.List(pl.String)).alias("options"))
    if df.get_column("options").null_count():
        missing_opts = pl.col("options").is_null() & (pl.col("question").fill_null("") != "")
        qs = df.filter(missing_opts).get_column("question").unique().to_list()
        if qs:
            parsed_opts = [list(parse_options(q)) or None for q in qs]
            table = pl.DataFrame(
                {"question": qs, "_opts": pl.Series(parsed_opts, dtype=pl.List(pl.String))}
            )
            df = df.join(table, on="question", how="left", maintain_order="left").with_columns(
                pl.coalesce("options", "_opts").alias("options")
            )
    # gold: a letter (with the logged text in gold_text) or free text
    if "gold" in df.columns and df.get_column("gold").null_count() < m:
        golds = df.get_column("gold").drop_nulls().unique().to_list()
        letters = pl.DataFrame(
            {"gold": golds, "_letter": [answer_letter(g) for g in golds]},
            schema={"gold": pl.String, "_letter": pl.String},
        )
        df = df.join(letters, on="gold", how="left", maintain_order="left").with_columns(
            pl.coalesce("_letter", "gold").alias("gold"),
            pl.when(pl.col("_letter").is_not_null() & (pl.col("gold") != pl.col("_letter")))
            .then(pl.col("gold"))
            .alias("gold_text"),
        )  # fmt: skip
    else:
        df = df.with_columns(
            pl.lit(None, dtype=pl.String).alias("gold"),
            pl.lit(None, dtype=pl.String).alias("gold_text"),
        )
    df = df.with_columns(
        col("response", pl.String).alias("response"),
        col("parsed_answer", pl.String).alias("parsed_answer"),
        col("correct", pl.Boolean).alias("correct"),
    )
    todo = df.select(
        pl.col("parsed_answer").is_null() & pl.col("response").is_not_null()
    ).to_series()
    if todo.any():
        sub = df.filter(todo)
        found = parse_answers(sub.get_column("response"), options=_Rows(sub.get_column("options")))
        filled = pl.Series("_parsed", [None] * m, dtype=pl.String).scatter(
            todo.arg_true(), pl.Series(found, dtype=pl.String)
        )
        df = df.with_columns(pl.coalesce("parsed_answer", filled).alias("parsed_answer"))
    # a response whose answer cannot be read is ungraded, not wrong
    gradable = pl.col("gold").is_not_null() & pl.col("parsed_answer").is_not_null()
    graded = pl.col("parsed_answer").is_not_null() & (pl.col("parsed_answer") == pl.col("gold"))
    df = df.with_columns(
        pl.when(pl.col("correct").is_not_null())
        .then(pl.lit("log"))
        .when(gradable)
        .then(pl.lit("graded"))
        .otherwise(pl.lit("missing"))
        .alias("correct_source"),
    ).with_columns(
        pl.when(pl.col("correct_source") == "graded")
        .then(graded.fill_null(False))
        .otherwise(pl.col("correct"))
        .alias("correct"),
    )
    empty = pl.lit([], dtype=pl.List(pl.String))
    flag_parts = [col("flags", pl.List(pl.String)).fill_null(empty)]
    flagged = [col("flags", pl.List(pl.String)).list.len().fill_null(0) > 0]
    flag_parts.append(
        pl.when(pl.col("correct_source") == "missing")
        .then(pl.lit(["ungraded"], dtype=pl.List(pl.String)))
        .otherwise(empty)
    )
    flagged.append(pl.col("correct_source") == "missing")
    for name in ("files_accessed", "files_hallucinated"):
        if name not in df.columns:
            df = df.with_columns(pl.lit(None, dtype=pl.List(pl.String)).alias(name))
            continue
        once = pl.col(name).list.unique(maintain_order=True)
        df = df.with_columns(
            once.alias(name),
            (once.list.len() != pl.col(name).list.len()).fill_null(False).alias(f"_dup_{name}"),
        )
        flag_parts.append(
            pl.when(pl.col(f"_dup_{name}"))
            .then(pl.lit([f"duplicate_{name}"], dtype=pl.List(pl.String)))
            .otherwise(empty)
        )
        flagged.append(pl.col(f"_dup_{name}"))
    # most records raise no flag: build the lists only when some do
    any_flag = df.select(pl.any_horizontal(flagged).any()).item()
    flags = pl.concat_list(flag_parts) if any_flag else empty
    df = df.with_columns(
        col("task", pl.String).fill_null("default").alias("task"),
        pl.col("files_accessed").list.len().cast(pl.Int32).alias("n_files"),
        col("latency_s", pl.Float64).alias("latency_s"),
        col("attempts", pl.Int64).cast(pl.Int32).alias("attempts"),
        flags.alias("flags"),
        pl.concat_str(pl.lit(f"{path}:"), pl.col("_line").cast(pl.String)).alias("source"),
    )
    # benchmark fields, as JSON text per item (only those of the item's benchmark)
    extra = _extra_column(df, objects, keep, state)
    ids = df.get_column("item_id").to_list()
    # a position derived from the record's place in the file is left out of the digest: the
    # same records in another order are the same items, unchanged
    positions = (
        df.select(pl.when(pl.col("_pos_given")).then(pl.col("position")).otherwise(-1))
        .to_series()
        .to_list()
    )
    digests = line_digests(fp, ids, positions, kept_texts)
    df = df.with_columns(
        pl.Series("extra", extra, dtype=pl.String),
        pl.Series("digest", digests, dtype=pl.String),
    )
    # what the benchmark needs, left empty
    state.m += m
    state.benchmarks.update(df.get_column("benchmark").unique().to_list())
    counts = df.select(
        pl.col("response").null_count().alias("response"),
        (pl.col("correct_source") == "missing").sum().alias("grade"),
    ).row(0, named=True)
    for f, n in counts.items():
        state.missing[f] = state.missing.get(f, 0) + int(n)

    runs = df.select("run_id", "benchmark", "track", "model", "tools").with_columns(
        pl.lit(None, dtype=pl.String).alias("config")
    )
    if "config" in objects:
        configs = [objects["config"][i] for i in keep]
        runs = runs.with_columns(
            pl.Series("config", [json_text(c) for c in configs], dtype=pl.String)
        )
    for r in runs.unique(subset="run_id", keep="first", maintain_order=True).to_dicts():
        state.runs.setdefault(r["run_id"], {**r, "created_at": None})
    row0 = sum(t.num_rows for t in state.items)
    items = df.select(
        [pl.col(c) if c in df.columns else pl.lit(None) for c in schema_of("items").names]
    )
    state.items.append(_arrow(items, "items"))
    state.keys.append(df.select("run_id", "patient_id", "item_id", "digest", "source", "question"))
    if events is not None and any(events):
        rows = df.select("run_id", "patient_id", "item_id").rows()
        for row, (i, key) in enumerate(zip(keep, rows, strict=True)):
            for e in events[i] or ():
                out.events.append(
                    {
                        "run_id": key[0],
                        "patient_id": key[1],
                        "item_id": key[2],
                        **e,
                        "_row": row0 + row,
                    }
                )


_NO_IDENTITY = (
    "nothing identifies the item: no item id and no question (map the id with --map "
    "item_id=KEY, or name the keys that identify an item with --item-key KEY[,KEY...])"
)
#: The prefix of item ids made from content (a record without an item id).
CONTENT_ID_PREFIX = "q"


def _identities(df: Any, objects: Mapping[str, list[Any]], opts: ImportOptions) -> Any:
    """Add ``_idh``, the hash of what identifies each row without an item id; drop the others.

    With ``opts.item_key`` it hashes the JSON text of those record keys' values; else the
    task, the patient id and the question, each hashed by :func:`tumorboard._keys.hash_labels`
    and combined in that order (a record of neither kind is dropped). ``_idh`` is null on rows
    that have an item id. Returns the frame and the line numbers of the rows dropped.
    """
    import polars as pl

    from ..._keys import combine_hashes, hash_labels

    def col(name: str) -> pl.Series:
        if name in df.columns:
            return df.get_column(name).cast(pl.String)
        return pl.Series(name, [None] * df.height, dtype=pl.String)

    item_id = col("item_id")
    need = item_id.is_null() | (item_id == "")
    if opts.item_key:
        index = df.get_column("_i").to_list()
        values = [objects.get(_key_field(k)) or [None] * (max(index, default=-1) + 1)
                  for k in opts.item_key]  # fmt: skip
        idents = []
        for i in index:
            parts = [v[i] for v in values]
            idents.append(
                None if all(p is None for p in parts) else "\x1f".join(json_text(p) for p in parts)
            )
        text = pl.Series("_ident", idents, dtype=pl.String)
        has = text.is_not_null()
        hashes = hash_labels(text.fill_null(""))
    else:
        question = col("question")
        has = question.is_not_null() & (question != "")
        parts = [col("task").fill_null("default"), col("patient_id").fill_null(""),
                 question.fill_null("")]  # fmt: skip
        hashes = combine_hashes([hash_labels(p) for p in parts])
    idh = pl.Series("_idh", hashes, dtype=pl.UInt64)
    df = df.with_columns(pl.when(need & has).then(idh).otherwise(None).alias("_idh"))
    lost = need & ~has
    dropped = df.filter(lost).get_column("_line").to_list() if lost.any() else []
    return (df.filter(~lost) if dropped else df), dropped


def _content_item_ids(df: Any, texts: Sequence[bytes], state: _State) -> Any:
    """Give each row without an item id one made from its content (``_idh``).

    The id is ``q`` and 16 hex digits of the stable 64-bit hash :func:`_identities` made (FNV-1a
    and SplitMix64 in the compiled core, :func:`tumorboard._keys.hash_labels`: fixed forever);
    records of one run with the same identifying values get ``.1``, ``.2``, ... in the order of
    their lines' digests, so that the same records in another order get the same ids. All of
    it runs in bulk; only the lines of such repeated records are digested one by one.
    """
    import polars as pl

    old = pl.col("item_id").cast(pl.String) if "item_id" in df.columns else pl.lit(None, pl.String)
    mask = df.get_column("_idh").is_not_null()
    n_need = int(mask.sum())
    if n_need == 0:
        return df.with_columns(old.alias("item_id"))
    every = n_need == df.height
    sub = df.select("run_id", "_idh") if every else df.filter(mask).select("run_id", "_idh")
    hashes = sub.get_column("_idh").to_numpy()
    key = ["run_id", "_h"]
    sub = sub.select("run_id", pl.col("_idh").alias("_h")).with_row_index("_r")
    counts = pl.len().over(key).alias("_n")
    sub = sub.with_columns(counts, pl.lit(0, dtype=pl.Int64).alias("_occ"))
    shared = sub.filter(pl.col("_n") > 1)
    if shared.height:
        rows = shared.get_column("_r").to_list()
        lines = texts if every else [texts[i] for i in mask.arg_true().to_list()]
        digests = [int.from_bytes(hashlib.blake2b(lines[r], digest_size=8).digest(), "big")
                   for r in rows]  # fmt: skip
        occ = shared.with_columns(pl.Series("_lh", digests, dtype=pl.UInt64)).select(
            "_r", (pl.col("_lh").rank("ordinal").over(key) - 1).cast(pl.Int64).alias("_o")
        )
        sub = sub.join(occ, on="_r", how="left", maintain_order="left").with_columns(
            pl.col("_o").fill_null(0).alias("_occ")
        )
        state.n_shared += shared.height
    sizes = sub.group_by(key).agg(pl.len().cast(pl.Int64).alias("n"))
    if state.occurrences is not None:  # a later chunk: continue each text's count
        sub = sub.join(state.occurrences, on=key, how="left", maintain_order="left").with_columns(
            (pl.col("_occ") + pl.col("n").fill_null(0)).alias("_occ")
        )
        sizes = pl.concat([state.occurrences, sizes]).group_by(key).agg(pl.col("n").sum())
    state.occurrences = sizes
    hexed = _hex64(hashes)
    suffix = (
        pl.when(pl.col("_occ") > 0).then(pl.format(".{}", pl.col("_occ"))).otherwise(pl.lit(""))
    )
    ids = sub.select(pl.concat_str([pl.lit(CONTENT_ID_PREFIX), hexed, suffix])).to_series()
    if every:
        return df.with_columns(ids.alias("item_id"))
    full = df.select(old).to_series().scatter(mask.arg_true(), ids)
    return df.with_columns(full.alias("item_id"))


def _hex64(values: Any) -> Any:
    """Return 64-bit integers as 16-digit lower-case hex strings, in bulk (a polars literal)."""
    import numpy as np
    import polars as pl
    import pyarrow as pa

    big = np.ascontiguousarray(np.asarray(values, dtype=np.uint64).astype(">u8"))
    arr = pa.FixedSizeBinaryArray.from_buffers(pa.binary(8), len(big), [None, pa.py_buffer(big)])
    series = pl.from_arrow(arr).cast(pl.Binary).bin.encode("hex")
    return pl.lit(series)


def _key_field(key: str) -> str:
    """Return the internal field name under which ``--item-key`` KEY is read."""
    return f"_key:{key}"


def _positions(df: Any, state: _State) -> Any:
    """Fill ``position``: given, else the order of the patient's records in the run so far."""
    import polars as pl

    key = ["run_id", "patient_id"]
    counts = state.counts
    if "position" in df.columns and df.get_column("position").null_count() < df.height:
        seen: dict[tuple[Any, Any], int] = {}
        if counts is not None:
            seen = {(r[0], r[1]): r[2] for r in counts.rows()}
        positions = []
        for k, pos in zip(df.select(key).rows(), df.get_column("position").to_list(), strict=True):
            if pos is None:
                pos = seen.get(k, 0)
            seen[k] = pos + 1
            positions.append(pos)
        df = df.with_columns(pl.Series("position", positions, dtype=pl.Int64))
        state.counts = pl.DataFrame(
            [(k[0], k[1], v) for k, v in seen.items()],
            schema={"run_id": pl.String, "patient_id": pl.String, "n": pl.Int64},
            orient="row",
        )
        return df
    # group the rows by patient once (a window over many groups is several times slower)
    groups = df.select(key).with_row_index("_r").group_by(key).agg(pl.col("_r"))
    if counts is not None:
        groups = groups.join(counts, on=key, how="left", nulls_equal=True)
        groups = groups.with_columns(pl.col("n").fill_null(0))
    else:
        groups = groups.with_columns(pl.lit(0, dtype=pl.Int64).alias("n"))
    end = pl.col("n") + pl.col("_r").list.len()
    groups = groups.with_columns(pl.int_ranges("n", end, dtype=pl.Int64).alias("position"))
    positions = groups.select("_r", "position").explode("_r", "position").sort("_r")
    df = df.with_columns(positions.get_column("position"))
    new = groups.select(*key, end.alias("n"))
    if counts is not None:
        new = pl.concat([counts.join(new, on=key, how="anti", nulls_equal=True), new])
    state.counts = new
    return df


class _Rows:
    """Row access to a polars list Series as Python lists (what parse_answers indexes)."""

    def __init__(self, series: Any) -> None:
        self.series = series

    def __len__(self) -> int:
        return len(self.series)

    def __getitem__(self, i: int) -> list[str] | None:
        v = self.series[i]
        return None if v is None else list(v)


def _extra_column(
    df: Any, objects: Mapping[str, list[Any]], keep: Sequence[int], state: _State
) -> list[str | None]:
    """Return each row's ``extra`` JSON text (the non-null fields of its benchmark).

    Counts, per benchmark field, the rows of that benchmark without it (``state.missing``).
    """
    benchmarks = df.get_column("benchmark").to_list()
    fields_of = {b: list(extra_fields(b)) for b in set(benchmarks)}
    if not any(fields_of.values()):
        return [None] * df.height
    values: dict[str, list[Any]] = {}
    for fields in fields_of.values():
        for f in fields:
            if f in objects:
                values[f] = [objects[f][i] for i in keep]
            elif f in df.columns:
                values[f] = df.get_column(f).to_list()
    out: list[str | None] = []
    missing = state.missing
    for row, b in enumerate(benchmarks):
        doc = {}
        for f in fields_of[b]:
            v = values[f][row] if f in values else None
            if v is None:
                missing[f] = missing.get(f, 0) + 1
            else:
                doc[f] = v
        out.append(json_text(doc) if doc else None)
    return out


def _arrow(frame: Any, table: str) -> Any:
    """Return a polars frame of a table's columns as a conforming Arrow table."""
    import pyarrow as pa

    schema = schema_of(table)
    arrow = frame.to_arrow()
    arrays = []
    for fld in schema:
        arr = arrow.column(fld.name)
        if arr.type != fld.type:
            arr = arr.cast(fld.type)
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=schema)
