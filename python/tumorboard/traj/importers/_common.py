"""Shared pieces of the log importers: options, per-file results, digests, Arrow rows, errors."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..._json import json_text
from ...errors import InvalidArgumentError
from ...errors import ItemConflictError as ItemConflictError  # re-exported
from ...errors import MalformedLog as MalformedLog  # re-exported
from ...errors import NotOfFormat as NotOfFormat  # re-exported
from ..schema import CORRECT_SOURCES, EVENT_KINDS, polars_schema, schema_of

#: Bumped whenever an importer turns the same log into different rows, so that re-importing
#: old logs with a newer tumorboard replaces the rows an older one made.
IMPORTER_VERSION = 3


#: Default input bounds: far above any real log (MTBBench's longest chat log is 1.4 MB), low
#: enough that one runaway input cannot take the machine's memory.
DEFAULT_MAX_LINE_BYTES = 64 * 2**20
DEFAULT_MAX_FILE_BYTES = 8 * 2**30


@dataclass(frozen=True)
class ImportOptions:
    """Options of one import (see :func:`tumorboard.traj.import_logs`).

    Attributes
    ----------
    track, model, benchmark : str or None
        Values forced on every record (None: from the files).
    model_map : mapping of str to str
        Folder name -> display model name.
    field_map : mapping of str to str
        jsonl only: schema field -> key (dotted path) in the records.
    run_name : str or None
        Appended to derived run ids.
    cases : str or None
        radabench only: the pipelines' cases JSON, for the reference answers (the items'
        digests include the answers read, so it is not part of :meth:`fingerprint`).
    patient_key : str or None
        inspect only: the sample metadata key of the patient id.
    reader : str
        inspect only: "auto", "direct" or "inspect" (which reader reads the samples).
    item_key : tuple of str
        jsonl only: the record keys (dotted paths) whose values identify an item without an
        item id (default: its task, patient id and question).
    replace : bool
        Replace stored items by records with the same key but another question (else the
        import is refused with :class:`ItemConflictError`).
    max_line_bytes, max_file_bytes : int or None
        The largest JSON line (jsonl) and log file read (None: no limit). A longer line is
        rejected alone before it is parsed; a larger file is skipped before it is read.
    """

    track: str | None = None
    model: str | None = None
    model_map: Mapping[str, str] = field(default_factory=dict)
    benchmark: str | None = None
    field_map: Mapping[str, str] = field(default_factory=dict)
    run_name: str | None = None
    cases: str | None = None
    patient_key: str | None = None
    reader: str = "auto"
    item_key: tuple[str, ...] = ()
    replace: bool = False
    max_line_bytes: int | None = DEFAULT_MAX_LINE_BYTES
    max_file_bytes: int | None = DEFAULT_MAX_FILE_BYTES

    def fingerprint(self, format: str) -> bytes:
        """Return the bytes every item digest of this import starts with.

        The same record imported with other options (another ``--map``, model or benchmark)
        gives other rows, so its digest must differ.

        Parameters
        ----------
        format : str
            The log format.

        Returns
        -------
        bytes
            A short hash of the format, the importer version and the options.
        """
        doc = {
            "format": format,
            "version": IMPORTER_VERSION,
            "track": self.track,
            "model": self.model,
            "model_map": dict(self.model_map),
            "benchmark": self.benchmark,
            "field_map": dict(self.field_map),
            "run_name": self.run_name,
        }
        if self.patient_key is not None:  # only then: older digests stay valid
            doc["patient_key"] = self.patient_key
        if self.item_key:
            doc["item_key"] = list(self.item_key)
        return hashlib.blake2b(json_text(doc).encode(), digest_size=16).digest()


def files_with_suffix(src: Path, suffixes: Sequence[str]) -> list[Path]:
    """Return the files under ``src`` whose suffix is one of ``suffixes``, in any letter case.

    Hidden files and folders (a name starting with ".") are left out; the result is sorted.

    Parameters
    ----------
    src : pathlib.Path
        A folder, searched recursively.
    suffixes : sequence of str
        Lower-case suffixes with the dot, e.g. ``(".jsonl", ".ndjson")``.

    Returns
    -------
    list of pathlib.Path
        ``LOG.JSONL`` matches ``.jsonl`` as ``log.jsonl`` does.
    """
    wanted = tuple(suffixes)
    return sorted(
        p
        for p in src.rglob("*")
        if p.suffix.lower() in wanted
        and not any(part.startswith(".") for part in p.relative_to(src).parts)
        and not p.is_dir()
    )


def digest(*parts: bytes) -> str:
    """Return the hex digest (128-bit BLAKE2b) of byte strings joined with NUL separators.

    Parameters
    ----------
    *parts : bytes
        The options fingerprint first, then what identifies the item's content.

    Returns
    -------
    str
        32 hex digits.
    """
    return hashlib.blake2b(b"\0".join(parts), digest_size=16).hexdigest()


def line_digests(fp: bytes, item_ids: Any, positions: Any, lines: Sequence[bytes]) -> Any:
    """Return the digests of JSON-lines items: ``digest(fp, item_id, position, line)`` each.

    The item id and position are part of it because they may be derived from the line's place
    in the file rather than read from it.

    Parameters
    ----------
    fp : bytes
        The import's options fingerprint.
    item_ids : polars.Series or sequence of str
        Each item's id (a String Series is read in place).
    positions : array-like of int
        Each item's position.
    lines : sequence of bytes
        Each item's line: a list, or the spans of one buffer
        (:class:`._jsonl_read.Lines`, read in place).

    Returns
    -------
    polars.Series
        ``digest``: 32 hex digits each, equal to :func:`digest` of the same parts.
    """
    # BLAKE2b-128 in the compiled core (csrc/traj/), on every core with the GIL released: the
    # same bytes as hashlib's, tested against it. Imported here: tumorboard.traj (the Recorder
    # and Store a harness uses) imports without the compiled core.
    import polars as pl

    from ... import _core
    from ..._keys import _string_buffers

    ids = (*_string_buffers(item_ids), None) if isinstance(item_ids, pl.Series) else list(item_ids)
    raw = getattr(lines, "raw", None)
    spans = (raw, lines.starts, lines.ends) if raw is not None else list(lines)  # type: ignore[attr-defined]
    hexed = _core.traj.line_digests(
        fp, ids, np.asarray(positions, dtype=np.int64), spans, 0, as_buffer=True
    )
    n = len(hexed) // 32
    arr = pa.Array.from_buffers(
        pa.large_string(),
        n,
        [None, pa.py_buffer(np.arange(0, 32 * n + 1, 32, dtype=np.int64)), pa.py_buffer(hexed)],
    )
    return pl.Series("digest", arr)


@dataclass
class Parsed:
    """Rows from one log file.

    ``unit`` is the (run_id, patient_id) the file covers when a file holds exactly one patient
    of one run (MTBBench); of several files of a unit the newest (largest ``order``) counts,
    and a unit is replaced as a whole.

    Attributes
    ----------
    runs : list of dict
        Rows of the runs table.
    items : list of dict
        Rows of the items table, each with its ``source`` and ``digest``.
    events : list of dict
        Rows of the events table, each with ``_row``: the index in ``items`` of its item, or
        -1 for events of the unit outside any item.
    warnings : list of (str, str)
        (file[:line], reason) for problems inside the file that still import its records.
    rejected : list of (str, str)
        (file:line, reason) for records of the file that were not imported (a line that is
        not JSON, breaks a JSON limit, or has a value of the wrong type or range).
    unit : tuple of (str, str) or None
        The (run_id, patient_id) the file covers, if it covers exactly one.
    order : float
        Orders the files of one unit (newest largest).
    n_records : int
        Records (lines, traces, question records) read, good or bad.
    items_table : pyarrow.Table or None
        The items as a conforming Arrow table instead of ``items`` (the bulk paths).
    keys_frame : polars.DataFrame or None
        With ``items_table``: its run_id, patient_id, item_id, digest and source columns.
    events_table : pyarrow.Table or None
        The events as a conforming Arrow table with an extra int32 ``_row`` column (the
        item's row) instead of ``events`` (the streaming inspect importer).
    keyed_without_patient : bool
        The items are identified by (run_id, item_id) alone (inspect: the patient id comes
        from a metadata key the import chooses): a stored item with another patient id is
        replaced.
    legacy_sources : tuple of str
        Source prefixes (``"path:"``) of items that earlier tumorboard versions keyed by line
        number (``L<line>``): stored items of the file's runs with such ids and sources are
        replaced by this file's items.
    n_bytes : int
        The input bytes the rows were read from, where a parser reads a file in pieces (a
        streamed JSON-lines file: the bytes of the piece's blocks); 0 when it is the whole file.
    """

    runs: list[dict[str, Any]] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)
    unit: tuple[str, str] | None = None
    order: float = 0.0
    n_records: int = 0
    items_table: Any = None
    keys_frame: Any = None
    events_table: Any = None
    keyed_without_patient: bool = False
    legacy_sources: tuple[str, ...] = ()
    n_bytes: int = 0

    @property
    def n_items(self) -> int:
        """The number of items."""
        return self.items_table.num_rows if self.items_table is not None else len(self.items)


def input_text(value: Any) -> str | None:
    """Return a value for the ``events.input`` column.

    Text that already is JSON stays as is, other text is encoded as a JSON string, other values
    as JSON; None stays None.
    """
    if value is None:
        return None
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError:
            return json_text(value)
        return value
    return json_text(value)


def run_key(*parts: Any) -> str:
    """Return a deterministic run id from its identifying parts.

    The non-empty parts joined with ":", e.g. ``mtbbench:multimodal:gpt-4o:tools``.
    """
    return ":".join(str(p) for p in parts if p is not None and p != "")


def dedupe(names: list[str]) -> tuple[list[str], bool]:
    """Return the names without repeats (first occurrence kept) and whether there were repeats."""
    out = list(dict.fromkeys(names))
    return out, len(out) != len(names)


def _rows_table(rows: Sequence[Mapping[str, Any]], table: str) -> pa.Table:
    """Build a conforming Arrow table of ``table`` from row dicts (one conversion per column).

    The columns are built by polars (``pyarrow.array`` on Python lists would import pandas,
    a tenth of a second; tables without list columns straight from the row dicts, the others
    a column at a time so that repeated lists convert once), checked (keys not null, enum
    columns in their values) and cast to the table's Arrow types.

    Parameters
    ----------
    rows : sequence of mapping
        Row dicts; missing keys are null.
    table : {"runs", "items", "events", "imports"}
        The target table.

    Returns
    -------
    pyarrow.Table
        The rows, with the table's schema.

    Raises
    ------
    InvalidArgumentError
        An importer produced a value that does not fit the schema (a bug, not bad input).
    """
    import polars as pl

    schema = schema_of(table)
    pschema = polars_schema(table)
    try:
        if any(isinstance(dtype, pl.List) for dtype in pschema.values()):
            df = pl.DataFrame(
                [_column([r.get(name) for r in rows], name, dtype)
                 for name, dtype in pschema.items()]
            )  # fmt: skip
        else:  # polars reads the row dicts itself (2-3x faster than a list per column)
            df = pl.from_dicts(rows, schema=pschema, strict=True)
    except (TypeError, ValueError, pl.exceptions.PolarsError) as exc:
        raise InvalidArgumentError(
            f"{table}: importer produced a value that does not fit the schema: {exc}"
        ) from exc
    checks = [(f.name, None) for f in schema if not f.nullable]
    enums = {"items": ("correct_source", CORRECT_SOURCES), "events": ("kind", EVENT_KINDS)}
    if table in enums:
        checks.append(enums[table])
    for name, allowed in checks:
        s = df.get_column(name)
        bad = s.is_null() if allowed is None else ~s.is_in(list(allowed)) & s.is_not_null()
        if bad.any():
            raise InvalidArgumentError(
                f"{table}.{name}: importer produced {s[int(bad.arg_true()[0])]!r} at row "
                f"{int(bad.arg_true()[0])}"
            )
    arrow = df.to_arrow()
    arrays = [
        arrow.column(f.name) if arrow.schema.field(f.name).type == f.type
        else arrow.column(f.name).cast(f.type)
        for f in schema
    ]  # fmt: skip
    return pa.Table.from_arrays(arrays, schema=schema)


def _column(values: list[Any], name: str, dtype: Any) -> Any:
    """Return a polars Series of ``values``; list values are converted once per distinct list.

    Converting Python lists to a polars list column costs microseconds per list, and logs
    repeat them (the options of one question for every patient, empty file lists).
    """
    import polars as pl

    if not isinstance(dtype, pl.List):
        return pl.Series(name, values, dtype=dtype, strict=True)
    index: dict[tuple[Any, ...] | None, int] = {}
    positions = []
    for v in values:
        key = None if v is None else tuple(v)
        j = index.get(key)
        if j is None:
            j = index[key] = len(index)
        positions.append(j)
    distinct = [None if k is None else list(k) for k in index]
    series = pl.Series(name, distinct, dtype=dtype, strict=True)
    return series.gather(pl.Series(positions, dtype=pl.UInt32))
