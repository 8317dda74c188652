"""Importers of existing agent logs into a :class:`~tumorboard.traj.Store`.

``import_logs(format, src, store)`` finds the log files under ``src``, parses each one and
writes what is new as one atomic import batch (see :mod:`tumorboard.traj.store`). A malformed
file is skipped and listed in the :class:`ImportReport` with the reason; the rest is imported.

Batch isolation: nothing one file or one line holds can stop the others. Each file is read and
parsed on its own; whatever it raises (bad JSON, JSON past the limits of
:func:`tumorboard._json.load_json`, bytes that are not UTF-8, any failure of the parser on a
hostile value) skips that file with the reason, and a file's bad records (lines of JSON lines,
samples of inspect logs) are rejected one by one as ``file:line`` (``file#sample``) while its
good ones are imported. Should the rows of
several files fail to form one table at write time, each file's rows are checked alone and only
the failing files are skipped. Every parser that reads model output runs in linear time
(:mod:`tumorboard.harness.parsing`), so no file can hang an import.

Re-imports are idempotent by item, not by file: every item is keyed by ``(run_id, patient_id,
item_id)`` and carries a digest of what it was made from (the record, the import options and
the importer version, ``items.digest``). An item already in the store with the same digest is
left alone; one with another digest is replaced (latest wins): the batch swaps the store parts
that hold the old rows (and their events) for copies without them, atomically with its commit.
Within one import, of two records with one key the later one wins (with a warning). MTBBench
logs cover one patient of one run each (a unit) and replace units whole: of several logs of a
unit the newest (by the timestamp in the file name) counts, also against the log the store's
rows came from.

Formats:

* ``mtbbench``: MTBBench chat logs, ``<model>/<patient>_chatlog_<unix_ts>.json``
  (:mod:`.mtbbench`).
* ``jsonl``: one JSON record per line with a documented field mapping (:mod:`.jsonl`).
* ``react``: ReAct text traces, LAMMI-style (:mod:`.react`).
* ``radabench``: RadA-BenchPlat evaluation-pipeline result folders,
  ``logouts/<case>/<chain>.txt`` with ``info/<case>/<chain>.json`` (:mod:`.radabench`).
* ``inspect``: inspect_ai evaluation logs, ``*.eval`` and ``*.json`` (:mod:`.inspect`), read
  sample by sample; needs ``tumorboard[inspect]``.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa

from ...errors import InvalidArgumentError, MissingFileError
from ..schema import conform, schema_of
from ..store import Store
from ._common import (
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_LINE_BYTES,
    ImportOptions,
    ItemConflictError,
    MalformedLog,
    NotOfFormat,
    Parsed,
    _rows_table,
)

__all__ = [
    "FORMATS",
    "ImportOptions",
    "ImportReport",
    "ItemConflictError",
    "MalformedLog",
    "import_logs",
]

#: Lines of warnings ``str(report)`` shows (the JSON report has them all).
SHOWN_WARNINGS = 20


@dataclass(frozen=True)
class ImportReport:
    """The outcome of one import.

    ``str(report)`` is a human-readable summary.

    Attributes
    ----------
    format, source, store : str
        What was imported from where into where.
    imported : tuple of str
        Files that added or replaced items.
    unchanged : tuple of str
        Files whose every item is in the store already, unchanged (or that repeat another
        file of this import byte for byte).
    skipped : tuple of (str, str)
        (file, reason) for files not imported: malformed, or superseded by a newer log of the
        same patient and run.
    failed : tuple of str
        The skipped files that could not be imported (unreadable, malformed, past a JSON
        limit); not those superseded by a newer log or found not to be logs of the format.
    rejected : tuple of (str, str)
        (file:line, reason) for records not imported from files that were: lines that are not
        JSON objects, break a JSON limit, or hold a value of the wrong type or range.
    warnings : tuple of (str, str)
        (file[:line], reason) for problems inside files that were still imported: records
        replaced by later ones, fields the benchmark needs left empty.
    n_items : int
        Items written (new and replaced).
    n_new, n_replaced, n_unchanged : int
        Items that were not in the store, that replaced an older version, and that were
        already there unchanged (not written).
    n_events : int
        Events written.
    n_records : int
        Records read (lines, traces, question records).
    runs : tuple of str
        Run ids that received rows.
    benchmarks : tuple of str
        The benchmarks of those runs.
    batch : str or None
        The import batch id (None when nothing was written).
    seconds : float
        Wall time of the import.
    passed_over : tuple of (str, str)
        (file, reason) for the files under the source folders that are not logs of the
        format by their names (``README.md`` beside ``.jsonl`` logs), so none goes unnoticed.
    """

    format: str
    source: str
    store: str
    imported: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    warnings: tuple[tuple[str, str], ...] = ()
    failed: tuple[str, ...] = ()
    rejected: tuple[tuple[str, str], ...] = ()
    n_items: int = 0
    n_new: int = 0
    n_replaced: int = 0
    n_unchanged: int = 0
    n_events: int = 0
    n_records: int = 0
    runs: tuple[str, ...] = ()
    benchmarks: tuple[str, ...] = ()
    batch: str | None = None
    seconds: float = 0.0
    passed_over: tuple[tuple[str, str], ...] = ()

    @property
    def ok(self) -> bool:
        """Whether every log file and every record found was imported or already stored."""
        return not self.failed and not self.rejected

    @property
    def files_seen(self) -> int:
        """Files found under the source: imported, unchanged and skipped."""
        return len(self.imported) + len(self.unchanged) + len(self.skipped)

    def to_dict(self) -> dict[str, Any]:
        """Return the report as a JSON-able dict (``tumorboard import --json`` prints it).

        Returns
        -------
        dict
            The attributes, with ``skipped`` as ``{"file", "reason"}`` objects and
            ``rejected`` and ``warnings`` as ``{"where", "reason"}`` objects.
        """
        return {
            "format": self.format,
            "source": self.source,
            "store": self.store,
            "imported": list(self.imported),
            "unchanged": list(self.unchanged),
            "skipped": [{"file": f, "reason": r} for f, r in self.skipped],
            "failed": list(self.failed),
            "rejected": [{"where": f, "reason": r} for f, r in self.rejected],
            "warnings": [{"where": f, "reason": r} for f, r in self.warnings],
            "n_items": self.n_items,
            "n_new": self.n_new,
            "n_replaced": self.n_replaced,
            "n_unchanged": self.n_unchanged,
            "n_events": self.n_events,
            "n_records": self.n_records,
            "runs": list(self.runs),
            "benchmarks": list(self.benchmarks),
            "batch": self.batch,
            "seconds": round(self.seconds, 3),
            "passed_over": [{"file": f, "reason": r} for f, r in self.passed_over],
        }

    def __str__(self) -> str:
        lines = [
            f"import {self.format} {self.source} -> {self.store}",
            f"  files: {self.files_seen} seen, {len(self.imported)} imported, "
            f"{len(self.unchanged)} unchanged, {len(self.skipped)} skipped"
            + (f" ({len(self.failed)} could not be imported)" if self.failed else ""),
            f"  records: {self.n_records:,} read, {len(self.rejected):,} rejected",
            f"  items: {self.n_new} new, {self.n_replaced} replaced, {self.n_unchanged} "
            f"unchanged; {self.n_events} events; {len(self.runs)} run(s)"
            + (f" of {', '.join(self.benchmarks)}" if self.benchmarks else ""),
        ]
        if self.skipped:
            lines.append("  skipped:")
            lines += [f"    {f}: {r}" for f, r in self.skipped]
        if self.passed_over:
            lines.append(f"  passed over ({len(self.passed_over)}, not logs of this format):")
            lines += [f"    {f}" for f, _ in self.passed_over[:SHOWN_WARNINGS]]
            if len(self.passed_over) > SHOWN_WARNINGS:
                more = len(self.passed_over) - SHOWN_WARNINGS
                lines.append(f"    ... and {more} more (--json lists all)")
        for title, listed in (("rejected records", self.rejected), ("warnings", self.warnings)):
            if listed:
                lines.append(f"  {title} ({len(listed)}):")
                lines += [f"    {f}: {r}" for f, r in listed[:SHOWN_WARNINGS]]
                if len(listed) > SHOWN_WARNINGS:
                    more = len(listed) - SHOWN_WARNINGS
                    lines.append(f"    ... and {more} more (--json lists all)")
        return "\n".join(lines)


def _formats() -> dict[str, tuple[Callable[..., Any], Callable[..., Parsed]]]:
    """Return the (discover, parse) functions of each format (imported on first use)."""
    from . import inspect, jsonl, mtbbench, radabench, react

    return {
        "mtbbench": (mtbbench.discover, mtbbench.parse),
        "jsonl": (jsonl.discover, jsonl.parse),
        "react": (react.discover, react.parse),
        "radabench": (radabench.discover, radabench.parse),
        "inspect": (inspect.discover, inspect.parse),
    }


FORMATS = ("mtbbench", "jsonl", "react", "radabench", "inspect")
_PATTERNS = {
    "mtbbench": "<model>/<patient>_chatlog_<unix_ts>.json",
    "jsonl": "*.jsonl or *.ndjson",
    "react": "*.txt, *.md, *.log or *.jsonl",
    "radabench": "logouts/<case>/<chain>.txt",
    "inspect": "*.eval or *.json inspect_ai logs",
}
#: Formats whose parser reads the file itself (streaming) instead of its bytes.
_STREAMING = ("inspect",)


def _file_hash(path: Path) -> str:
    """Return the SHA-256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


#: Progress callback: ``progress(files_done, files_total, records, bytes_done)``.
Progress = Callable[[int, int, int, int], None]


@dataclass
class _Entry:
    """One parsed file in an import."""

    index: int
    path: Path
    content_hash: str
    parsed: Parsed
    status: str = "new"  # new | unchanged | skipped
    items: Any = None  # pyarrow.Table of its items, with the _file and _row columns
    n_written: int = 0
    n_events: int = 0
    notes: list[str] = field(default_factory=list)


def import_logs(
    format: str,
    src: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    store: Store | str | os.PathLike[str],
    *,
    track: str | None = None,
    model: str | None = None,
    model_map: Mapping[str, str] | str | os.PathLike[str] | None = None,
    benchmark: str | None = None,
    field_map: Mapping[str, str] | None = None,
    run_name: str | None = None,
    patient_key: str | None = None,
    reader: str = "auto",
    strict: bool = False,
    progress: Progress | None = None,
    cases: str | os.PathLike[str] | None = None,
    item_key: str | Sequence[str] | None = None,
    replace: bool = False,
    max_line_bytes: int | None = DEFAULT_MAX_LINE_BYTES,
    max_file_bytes: int | None = DEFAULT_MAX_FILE_BYTES,
) -> ImportReport:
    """Import the logs under ``src`` into ``store``.

    Parameters
    ----------
    format : {"mtbbench", "jsonl", "react", "radabench", "inspect"}
        The log format.
    src : str, os.PathLike or a sequence of them
        A log file or a directory searched recursively, or several.
    store : Store, str or os.PathLike
        A Store or its path (created when missing).
    track : str, optional
        Force the track (mtbbench: "multimodal" or "longitudinal"; default: detected per file
        from the questions); for other formats the default track.
    model : str, optional
        Force the model name (default: from the folder name or the records).
    model_map : mapping, str or os.PathLike, optional
        Folder name -> display model name; a mapping, or a JSON object file, or a text file of
        ``folder,display`` lines.
    benchmark : str, optional
        The benchmark the runs belong to (recorded in ``runs.benchmark``; ``tumorboard score
        --benchmark`` picks them by it). Default: the format's ("mtbbench"), or the records'
        ``benchmark`` field, else "jsonl" / "react". For jsonl it also decides which benchmark
        fields the records may carry (:data:`tumorboard.traj.fields.BENCHMARK_FIELDS`).
    field_map : mapping of str to str, optional
        jsonl only: schema field -> key (dotted path) in the records.
    run_name : str, optional
        Appended to derived run ids, to keep repeated runs of one model apart.
    patient_key : str, optional
        inspect only: the sample metadata key whose value is the item's ``patient_id``
        (default "patient_id"), so that scores can be clustered by patient.
    reader : {"auto", "direct", "inspect"}, default "auto"
        inspect only: read the samples with inspect_ai's own reader ("inspect") or the log's
        members directly ("direct"; "auto"); both give the same rows
        (:mod:`tumorboard.traj.importers.inspect`).
    item_key : str or sequence of str, optional
        jsonl only: the record keys (dotted paths; a comma-separated string or a list) whose
        values identify an item that has no ``item_id``. Default: the item's task, patient id
        and question. Either way a record without an id gets ``q`` and a digest of those
        values (``.1``, ``.2``... for repeats in one run), so that the same records in another
        order, or split over other files, are the same items.
    replace : bool, default False
        Replace stored items whose key a record reuses with another question; without it such
        an import is refused (:class:`ItemConflictError`) before anything is written.
    max_line_bytes : int or None, default 64 MiB
        jsonl: a longer line is rejected alone, before it is parsed (None: no limit).
    max_file_bytes : int or None, default 8 GiB
        A larger log file is skipped before it is read (None: no limit). Special files (FIFOs,
        devices, links to them) are always skipped with the reason.
    strict : bool, default False
        Fail (write nothing) when any file is skipped or any record is dropped, replaced by a
        later one, or leaves a needed field empty.
    progress : callable, optional
        Called as ``progress(files_done, files_total, records, bytes_done)`` while files are
        read (large files several times).
    cases : str or os.PathLike, optional
        radabench only: the pipelines' cases JSON (``combined_cases*.json``), whose
        ``QA[chain]["A"]`` are the reference answers of the text metrics.

    Returns
    -------
    ImportReport
        What was imported, left unchanged, skipped (with reasons) and written.

    Raises
    ------
    InvalidArgumentError
        An unknown format, an invalid model map or field map, a ``field_map`` for another format
        than jsonl, or (``strict``) any problem in the logs, listed in the message.
    MissingFileError
        ``src`` (or the model-map file) does not exist, or holds no log file of the format.
    """
    t0 = time.perf_counter()
    formats = _formats()
    if format not in formats:
        raise InvalidArgumentError(f"format: expected one of {FORMATS}, got {format!r}")
    if benchmark is not None and (not isinstance(benchmark, str) or not benchmark.strip()):
        raise InvalidArgumentError(f"benchmark: expected a benchmark name, got {benchmark!r}")
    if field_map and format != "jsonl":
        raise InvalidArgumentError(
            f"field_map (--map): only the jsonl format maps fields, not {format!r}"
        )
    if cases is not None and format != "radabench":
        raise InvalidArgumentError(f"cases (--cases): only the radabench format reads a cases "
                                   f"file, not {format!r}")  # fmt: skip
    if cases is not None and not Path(cases).is_file():
        raise MissingFileError(f"{cases}: no such cases file")
    if format != "inspect" and (patient_key is not None or reader != "auto"):
        raise InvalidArgumentError(
            f"patient_key/reader (--patient-key/--reader): only the inspect format has them, "
            f"not {format!r}"
        )
    if patient_key is not None and (not isinstance(patient_key, str) or not patient_key):
        raise InvalidArgumentError(
            f"patient_key: expected a sample metadata key, got {patient_key!r}"
        )
    if format == "inspect":
        from .inspect import READERS

        if reader not in READERS:
            raise InvalidArgumentError(f"reader: expected one of {READERS}, got {reader!r}")
    opts = ImportOptions(
        track=track,
        model=model,
        model_map=_load_model_map(model_map),
        benchmark=benchmark,
        field_map=dict(field_map or {}),
        run_name=run_name,
        cases=None if cases is None else str(cases),
        patient_key=patient_key,
        reader=reader,
        item_key=_item_key(item_key, format),
        replace=bool(replace),
        max_line_bytes=_limit(max_line_bytes, "max_line_bytes"),
        max_file_bytes=_limit(max_file_bytes, "max_file_bytes"),
    )
    if format == "jsonl":
        from .jsonl import check_field_map

        check_field_map(opts.field_map, benchmark)
    srcs = [Path(src)] if isinstance(src, (str, os.PathLike)) else [Path(s) for s in src]
    if not srcs:
        raise InvalidArgumentError("src: expected a log file or folder, got none")
    missing = [s for s in srcs if not s.exists()]
    if len(missing) == len(srcs):
        raise MissingFileError(f"{missing[0]}: no such file or directory")
    srcs = [s for s in srcs if s.exists()]  # the others are imported; the missing listed
    kinds = {s: _not_regular(s) for s in srcs}
    special = [(str(s), why) for s, why in kinds.items() if why is not None]
    srcs_read = [s for s, why in kinds.items() if why is None]
    src_path = srcs[0] if len(srcs) == 1 else Path(os.path.commonpath([str(s) for s in srcs]))
    # an existing store is opened now (a folder that is not a store fails before any work); a
    # new one is made only when there is something to write, so that a refused or empty
    # import leaves no empty store folder behind
    store_path = store.path if isinstance(store, Store) else Path(store)
    st: Store | None = store if isinstance(store, Store) else (
        Store(store_path) if store_path.exists() else None)  # fmt: skip
    if format == "mtbbench" and track is not None:
        from .mtbbench import TRACKS

        if track not in TRACKS:
            raise InvalidArgumentError(f"track: expected one of {TRACKS}, got {track!r}")
    fp = opts.fingerprint(format)
    discover, parse = formats[format]
    files = []
    found_skipped = []
    for s in srcs_read:
        f, k = discover(s)
        files += [p for p in f if p not in files]
        found_skipped += k
    found_skipped += special + [(str(m), "no such file or directory") for m in missing]
    passed_over = _passed_over(srcs_read, files, found_skipped, _PATTERNS[format])
    if not files and not found_skipped:
        pattern = _PATTERNS[format]
        where = ", ".join(str(s) for s in srcs)
        raise MissingFileError(f"{where}: no {format} logs found (expected {pattern} files)")
    skipped: list[tuple[str, str]] = list(found_skipped)
    failed: list[str] = [f for f, _ in special] + [str(m) for m in missing]
    entries: list[_Entry] = []
    records = done_bytes = 0
    for k, path in enumerate(files):
        if not str(path).isascii() and not _utf8(str(path)):
            # the store keeps every item's source path as UTF-8 text
            skipped.append((str(path), "file name is not UTF-8 text (rename the file)"))
            failed.append(str(path))
            continue
        why = _not_regular(path)
        if why is None and opts.max_file_bytes is not None:
            big = path.stat().st_size
            if big > opts.max_file_bytes:
                why = (f"file of {big:,} bytes is over the limit of {opts.max_file_bytes:,} "
                       "bytes (--max-file-mb / max_file_bytes raises it)")  # fmt: skip
        if why is not None:
            skipped.append((str(path), why))
            failed.append(str(path))
            continue
        try:
            raw = b"" if format in _STREAMING else path.read_bytes()
            size = path.stat().st_size
        except OSError as exc:
            skipped.append((str(path), f"unreadable: {exc.strerror or exc}"))
            failed.append(str(path))
            continue
        tick = None
        if progress is not None:

            def tick(n: int, _k: int = k, _base: int = records, _b: int = done_bytes) -> None:
                progress(_k, len(files), _base + n, _b)

        try:
            content_hash = _file_hash(path) if format in _STREAMING else hashlib.sha256(
                raw).hexdigest()  # fmt: skip
        except OSError as exc:
            skipped.append((str(path), f"unreadable: {exc.strerror or exc}"))
            failed.append(str(path))
            continue
        try:
            if format == "inspect":
                result = parse(path, opts, fp, tick, reader=reader, patient_key=patient_key)
            elif format == "jsonl":
                result = parse(path, raw, opts, fp, tick)
            elif format == "mtbbench":
                result = parse(path, raw, opts, fp, content_hash)
            else:
                result = parse(path, raw, opts, fp)
        except NotOfFormat as exc:  # not a log of the format at all: skipped, not failed
            skipped.append((str(path), str(exc)))
            continue
        except MalformedLog as exc:
            skipped.append((str(path), str(exc)))
            failed.append(str(path))
            continue
        except UnicodeDecodeError as exc:
            skipped.append((str(path), f"not UTF-8 text ({exc.reason} at byte {exc.start})"))
            failed.append(str(path))
            continue
        except OSError as exc:
            skipped.append((str(path), f"unreadable: {exc.strerror or exc}"))
            failed.append(str(path))
            continue
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - one bad file never costs the others
            # BaseException: a Rust panic inside polars/pyarrow (pyo3's PanicException) too
            skipped.append((str(path), f"cannot be read ({type(exc).__name__}: {exc})"[:300]))
            failed.append(str(path))
            continue
        records += result.n_records
        done_bytes += size
        entries.append(_Entry(len(entries), path, content_hash, result))
        if progress is not None:
            progress(k + 1, len(files), records, done_bytes)

    warnings = [w for e in entries for w in e.parsed.warnings]
    rejected = [r for e in entries for r in e.parsed.rejected]
    _resolve_in_import(entries, skipped)
    if strict:
        _check_strict(src_path, skipped, rejected + warnings)
    report_kw: dict[str, Any] = dict(format=format, source=", ".join(map(str, srcs)),
                                     passed_over=tuple(passed_over),
                                     store=str(store_path), n_records=records, failed=failed,
                                     rejected=tuple(rejected))  # fmt: skip
    live = [e for e in entries if e.status == "new"]
    if not live:
        return _report(report_kw, entries, skipped, warnings, t0)
    created = st is None
    st = st if st is not None else Store(store_path)
    try:
        with st.write_lock():
            result = _write_isolated(st, format, fp, entries, skipped, warnings, failed,
                                     replace=opts.replace)  # fmt: skip
    except BaseException:
        if created:
            _remove_new_empty_store(st)
        raise
    return _report(report_kw, entries, skipped, warnings, t0, **result)


def _remove_new_empty_store(st: Store) -> None:
    """Remove a store this import created when nothing was committed to it (refused import)."""
    import shutil

    try:
        if all(not st.parts(t) for t in ("runs", "items", "events", "imports")):
            shutil.rmtree(st.path, ignore_errors=True)
    except Exception:  # noqa: BLE001 - the error being raised matters, not this clean-up
        pass


def _write_isolated(
    st: Store,
    format: str,
    fp: bytes,
    entries: list[_Entry],
    skipped: list[tuple[str, str]],
    warnings: list[tuple[str, str]],
    failed: list[str],
    *,
    replace: bool = False,
) -> dict[str, Any]:
    """Run :func:`_write`; if the rows of the files do not form tables, skip the bad files.

    The rows of each file are then converted alone; a file whose rows do not fit the schema is
    skipped with the reason (never the whole batch), and the batch is written without it.
    """
    statuses = [e.status for e in entries]
    n_skipped, n_warnings = len(skipped), len(warnings)
    try:
        return _write(st, format, fp, entries, skipped, warnings, replace=replace)
    except ItemConflictError:
        raise
    except InvalidArgumentError:
        bad = [(e, why) for e in entries if e.status == "new" and (why := _unfit(e)) is not None]
        if not bad:
            raise
    del skipped[n_skipped:], warnings[n_warnings:]
    for e, status in zip(entries, statuses, strict=True):
        e.status, e.n_written, e.n_events = status, 0, 0
    for e, why in bad:
        e.status = "skipped"
        skipped.append((str(e.path), why))
        failed.append(str(e.path))
    if not any(e.status == "new" for e in entries):
        return {}
    return _write(st, format, fp, entries, skipped, warnings, replace=replace)


def _unfit(e: _Entry) -> str | None:
    """Return why a parsed file's rows do not form conforming tables (None if they do)."""
    p = e.parsed
    for table, rows in (("runs", p.runs), ("items", p.items), ("events", p.events)):
        if not rows:
            continue
        try:
            _rows_table([{k: v for k, v in r.items() if k != "_row"} for r in rows], table)
        except InvalidArgumentError as exc:
            return f"rows do not fit the store's schema: {exc}"[:300]
    return None


def _utf8(text: str) -> bool:
    """Tell whether a path string encodes as UTF-8 (no bytes escaped as lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_strict(
    src: Path, skipped: Sequence[tuple[str, str]], warnings: Sequence[tuple[str, str]]
) -> None:
    """Raise for ``strict``: every skipped file, rejected record and warning, first ones listed."""
    problems = [f"{f}: {r}" for f, r in skipped] + [f"{w}: {r}" for w, r in warnings]
    if problems:
        shown = "; ".join(problems[:5]) + (
            f"; ... ({len(problems) - 5} more)" if len(problems) > 5 else ""
        )
        raise InvalidArgumentError(
            f"{src}: --strict: {len(skipped)} file(s) skipped and {len(warnings)} record(s) "
            f"rejected or warned about; nothing was imported: {shown}"
        )


def _report(
    kw: dict[str, Any],
    entries: Sequence[_Entry],
    skipped: Sequence[tuple[str, str]],
    warnings: Sequence[tuple[str, str]],
    t0: float,
    **result: Any,
) -> ImportReport:
    """Assemble the ImportReport."""
    imported = tuple(str(e.path) for e in entries if e.status == "new" and e.n_written)
    unchanged = tuple(
        str(e.path)
        for e in entries
        if e.status == "unchanged" or (e.status == "new" and not e.n_written)
    )
    kw = {**kw, "failed": tuple(kw.get("failed", ()))}
    return ImportReport(
        imported=imported,
        unchanged=unchanged,
        skipped=tuple(skipped),
        warnings=tuple(warnings),
        seconds=time.perf_counter() - t0,
        **kw,
        **result,
    )


def _resolve_in_import(entries: list[_Entry], skipped: list[tuple[str, str]]) -> None:
    """Keep one log per unit (the newest; byte-identical copies are unchanged)."""
    best: dict[tuple[str, str], _Entry] = {}
    for e in entries:
        unit = e.parsed.unit
        if unit is None:
            continue
        other = best.get(unit)
        if other is None:
            best[unit] = e
            continue
        if other.content_hash == e.content_hash:
            e.status = "unchanged"  # the same log under another name
            continue
        newer, older = (e, other) if e.parsed.order > other.parsed.order else (other, e)
        best[unit] = newer
        older.status = "skipped"
        skipped.append(
            (
                str(older.path),
                f"superseded by the newer log {newer.path.name} of patient {unit[1]!r} in "
                f"run {unit[0]!r}",
            )
        )


# ----------------------------------------------------------------------------- writing


def _items_of(entries: Sequence[_Entry]) -> tuple[pa.Table, Any]:
    """Return the items of the live entries as one table, and a polars frame of their keys.

    The frame has run_id, patient_id, item_id, digest, source, ``_file`` (the entry's index),
    ``_row`` (the item's row in its file) and ``_i`` (the row in the table).
    """
    import polars as pl

    key_schema = {"run_id": pl.String, "patient_id": pl.String, "item_id": pl.String,
                  "digest": pl.String, "source": pl.String, "question": pl.String}  # fmt: skip
    tables = []
    frames = []
    dict_rows: list[dict[str, Any]] = []
    dict_files: list[int] = []
    dict_pos: list[int] = []
    for e in entries:
        p = e.parsed
        if p.items_table is not None:
            n = p.items_table.num_rows
            tables.append(p.items_table)
            kf = p.keys_frame
            if "question" not in kf.columns:
                kf = kf.with_columns(pl.lit(None, dtype=pl.String).alias("question"))
            frames.append(
                kf.select(list(key_schema)).with_columns(
                    pl.lit(e.index, pl.Int32).alias("_file"),
                    pl.int_range(n, dtype=pl.Int32).alias("_row"),
                )
            )
        else:
            dict_rows += p.items
            dict_files += [e.index] * len(p.items)
            dict_pos += range(len(p.items))
    if dict_rows:
        tables.append(_rows_table(dict_rows, "items"))
        cols: dict[str, Any] = {c: [r.get(c) for r in dict_rows] for c in key_schema}
        frames.append(
            pl.DataFrame(cols, schema=key_schema).with_columns(
                pl.Series("_file", dict_files, dtype=pl.Int32),
                pl.Series("_row", dict_pos, dtype=pl.Int32),
            )
        )
    items = pa.concat_tables(tables) if tables else schema_of("items").empty_table()
    keys = (
        pl.concat(frames)
        if frames
        else pl.DataFrame(schema={**key_schema, "_file": pl.Int32, "_row": pl.Int32})
    )
    return items, keys.with_row_index("_i")


def _write(
    st: Store,
    format: str,
    fp: bytes,
    entries: list[_Entry],
    skipped: list[tuple[str, str]],
    warnings: list[tuple[str, str]],
    *,
    replace: bool = False,
) -> dict[str, Any]:
    """Compare the live entries with the store, then write one batch (the write lock is held)."""
    import polars as pl
    import pyarrow.compute as pc

    live = [e for e in entries if e.status == "new"]
    items, keys = _items_of(live)
    by_index = {e.index: e for e in live}
    unit_files = {e.index for e in live if e.parsed.unit is not None}
    key = ["run_id", "patient_id", "item_id"]

    # within this import: of several records with one key, the last one wins
    loose = keys.filter(~pl.col("_file").is_in(list(unit_files)))
    repeated = loose.group_by(key).len().filter(pl.col("len") > 1).select(key)
    dup = (
        loose.join(repeated, on=key, how="semi", nulls_equal=True)
        if repeated.height
        else loose.clear()
    )
    drop_rows: set[int] = set()
    if dup.height:
        last = dup.group_by(key, maintain_order=True).agg(
            pl.col("_i").last(), pl.col("source").last()
        )
        winner = {tuple(r[:3]): (r[3], r[4]) for r in last.rows()}
        shown = 0
        for r in dup.rows(named=True):
            i_win, src_win = winner[(r["run_id"], r["patient_id"], r["item_id"])]
            if r["_i"] != i_win:
                drop_rows.add(r["_i"])
                if shown < SHOWN_WARNINGS:
                    shown += 1
                    warnings.append(
                        (r["source"], f"replaced by {src_win} (same run, patient and item id)")
                    )
        if len(drop_rows) > shown:
            warnings.append(
                (
                    str(entries[0].path) if len(entries) == 1 else "(this import)",
                    f"{len(drop_rows) - shown:,} more records replaced by later records with "
                    "the same run, patient and item id",
                )
            )

    # against the store
    run_ids = keys.get_column("run_id").unique().sort().to_list()
    existing = (
        st._scan_paths("items", st.parts("items"), part_column=True)
        .filter(pl.col("run_id").is_in(run_ids))
        .select(*key, "digest", "source", "__part")
        .collect()
    )
    hide_items = pl.DataFrame(schema={k: pl.String for k in key})
    hide_units = pl.DataFrame(schema={"run_id": pl.String, "patient_id": pl.String})
    n_replaced = 0
    n_unchanged = 0
    if existing.height:
        # units (one MTBBench log per patient and run): unchanged, superseded or replaced whole
        old_units = existing.partition_by(["run_id", "patient_id"], as_dict=True)
        mine_of = keys.partition_by("_file", as_dict=True) if unit_files else {}
        for e in [by_index[i] for i in sorted(unit_files)]:
            run_id, patient = e.parsed.unit  # type: ignore[misc]
            old = old_units.get((run_id, patient))
            if old is None:
                continue
            mine = mine_of[(e.index,)]
            old_ids = set(old.get_column("item_id").to_list())
            new_ids = set(mine.get_column("item_id").to_list())
            if (
                old_ids == new_ids
                and old.height == mine.height
                and set(old.get_column("digest").to_list())
                == set(mine.get_column("digest").to_list())
            ):
                e.status = "unchanged"
                n_unchanged += mine.height
                continue
            stored = _newest_source(old.get_column("source").to_list())
            if stored is not None and stored[0] > e.parsed.order:
                e.status = "skipped"
                skipped.append(
                    (
                        str(e.path),
                        f"superseded by the newer log {Path(stored[1]).name} of patient "
                        f"{patient!r} in run {run_id!r}, already in the store",
                    )
                )
                continue
            n_replaced += len(old_ids & new_ids)
            hide_units = pl.concat(
                [hide_units, pl.DataFrame({"run_id": [run_id], "patient_id": [patient]})]
            )
        # keyed items: unchanged (same digest) or replaced
        loose = keys.filter(
            ~pl.col("_file").is_in(list(unit_files)) & ~pl.col("_i").is_in(list(drop_rows))
        )
        joined = loose.join(
            existing.select(*key, pl.col("digest").alias("_old")),
            on=key,
            how="inner",
            nulls_equal=True,
        )
        _check_questions(st, run_ids, joined, replace=replace, warnings=warnings)
        # unchanged: the key's one stored row has the same digest; anything else (another
        # digest, a Recorder's row without one, several rows) is replaced, every stored row
        per_key = joined.group_by("_i").agg(
            pl.len().alias("_n"),
            (pl.col("digest") == pl.col("_old")).fill_null(False).sum().alias("_same"),
        )
        unchanged = (pl.col("_n") == 1) & (pl.col("_same") == 1)
        same = per_key.filter(unchanged).get_column("_i")
        n_unchanged += same.len()
        drop_rows.update(same.to_list())
        changed_rows = per_key.filter(~unchanged).get_column("_i")
        changed = loose.filter(pl.col("_i").is_in(changed_rows.implode())).select(key).unique()
        n_replaced += changed.height
        hide_items = changed
        # formats whose items are identified without the patient (inspect: eval, sample and
        # epoch): a stored item of another patient id is the same item, replaced
        by_item = [e.index for e in live if e.parsed.keyed_without_patient]
        if by_item:
            mine = loose.filter(pl.col("_file").is_in(by_item)).select(
                "run_id", "item_id", pl.col("patient_id").alias("_new_patient")
            )
            moved = (
                existing.join(mine, on=["run_id", "item_id"], how="inner")
                .filter(pl.col("patient_id").ne_missing(pl.col("_new_patient")))
                .select(key)
                .unique()
            )
            if moved.height:
                n_replaced += moved.height
                hide_items = pl.concat([hide_items, moved]).unique()
        # items an earlier tumorboard keyed by line number (L<line>) from the same files
        prefixes = [p for e in live for p in e.parsed.legacy_sources]
        if prefixes:
            legacy = (
                existing.filter(
                    pl.col("item_id").str.contains(r"^L\d+$")
                    & pl.any_horizontal([pl.col("source").str.starts_with(p) for p in prefixes])
                )
                .select(key)
                .unique()
            )
            if legacy.height:
                n_replaced += legacy.height
                hide_items = pl.concat([hide_items, legacy]).unique()
                warnings.append(
                    (
                        prefixes[0][:-1] if len(prefixes) == 1 else "(this import)",
                        f"{legacy.height:,} items an earlier tumorboard keyed by line number "
                        "(L<line>) replaced by the same records keyed by their content",
                    )
                )
    live = [e for e in live if e.status == "new"]
    keep_files = {e.index for e in live}
    mask = pl.col("_file").is_in(list(keep_files)) & ~pl.col("_i").is_in(list(drop_rows))
    kept = keys.filter(mask)
    n_items = kept.height
    if n_items == 0 and hide_items.height == 0 and hide_units.height == 0:
        for e in live:
            e.status = "unchanged"
        return {"n_unchanged": n_unchanged}
    keep_all = kept.height == items.num_rows
    items_out = items if keep_all else items.filter(keys.select(mask).to_series().to_arrow())
    per_file = dict(kept.group_by("_file").len().rows())
    for e in live:
        e.n_written = per_file.get(e.index, 0)
    with_events = [
        e.index
        for e in live
        if (e.parsed.events or e.parsed.events_table is not None) and e.parsed.unit is None
    ]
    kept_pairs = set(kept.filter(pl.col("_file").is_in(with_events)).select("_file", "_row").rows())
    events_out, n_events_per = _events_of(live, kept_pairs)
    for e in live:
        e.n_events = n_events_per.get(e.index, 0)
    runs_out, hide_runs = _runs_of(st, live, kept)

    replace: dict[str, list[tuple[Path, pa.Table]]] = {}
    if hide_items.height or hide_units.height:
        replace["items"] = _swaps(st, "items", hide_items, hide_units)
        replace["events"] = _swaps(st, "events", hide_items, hide_units)
    if hide_runs.height:
        replace["runs"] = _swaps(st, "runs", None, None, runs=hide_runs)
    now = datetime.now(timezone.utc)  # noqa: UP017 (py3.10 target)
    # the batch id: what is written (keys and digests) and replaced, so that re-running a killed
    # import against the same store rewrites the same names
    h = hashlib.blake2b(fp, digest_size=12)
    for buf in items_out.column("digest").combine_chunks().buffers():  # keys are in the digests
        if buf is not None:
            h.update(buf)
    for table, swaps in sorted(replace.items()):
        h.update(f"{table}:{','.join(p.name for p, _ in swaps)}".encode())
    batch = h.hexdigest()
    imports = _rows_table(
        [
            {
                "content_hash": e.content_hash,
                "source": str(e.path),
                "format": format,
                "batch": batch,
                "n_items": e.n_written,
                "n_events": e.n_events,
                "imported_at": now,
            }
            for e in live
            if e.n_written or e.n_events
        ],
        "imports",
    )
    st.commit_batch(
        batch,
        {"runs": runs_out, "items": items_out, "events": events_out},
        imports,
        replace=replace,
    )
    runs_written = sorted(set(items_out.column("run_id").to_pylist()) | set(
        runs_out.column("run_id").to_pylist()))  # fmt: skip
    bench = pc.unique(runs_out.column("benchmark")).to_pylist() if runs_out.num_rows else []
    if not bench and runs_written:
        bench = (
            st.runs().filter(pl.col("run_id").is_in(runs_written)).select("benchmark").unique()
            .collect().get_column("benchmark").to_list()
        )  # fmt: skip
    return {
        "n_items": n_items,
        "n_new": n_items - n_replaced,
        "n_replaced": n_replaced,
        "n_unchanged": n_unchanged,
        "n_events": events_out.num_rows,
        "runs": tuple(runs_written),
        "benchmarks": tuple(sorted(b for b in bench if b is not None)),
        "batch": batch,
    }


def _limit(value: Any, name: str) -> int | None:
    """Check an input bound: a positive int or None (no limit)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidArgumentError(f"{name}: expected a positive number of bytes or None, "
                                   f"got {value!r}")  # fmt: skip
    return value


def _not_regular(path: Path) -> str | None:
    """Say why ``path`` is not read as a log (a FIFO, a device, a link to one), else None.

    Folders and regular files are read; anything else could block the import (a FIFO) or never
    end (``/dev/zero``).
    """
    try:
        mode = path.stat().st_mode  # follows links: a link to /dev/zero is a device
    except OSError:
        return None  # the read reports it
    if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
        return None
    kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a character device"
            if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode) else "a socket"
            if stat.S_ISSOCK(mode) else "not a regular file")  # fmt: skip
    via = " (through a symbolic link)" if path.is_symlink() else ""
    return f"not a regular file: {kind}{via}; skipped"


def _passed_over(
    srcs: Sequence[Path], files: Sequence[Path], skipped: Sequence[tuple[str, str]], pattern: str
) -> list[tuple[str, str]]:
    """List the files under the source folders that the import neither read nor skipped."""
    known = {str(p) for p in files} | {f for f, _ in skipped}
    out = []
    for s in srcs:
        if not s.is_dir():
            continue
        for p in sorted(s.rglob("*")):
            rel = p.relative_to(s).parts
            if p.is_dir() or str(p) in known:
                continue
            if any(part.startswith(".") for part in rel):
                continue
            out.append((str(p), f"not a log of this format (expected {pattern})"))
    return out


def _item_key(item_key: str | Sequence[str] | None, format: str) -> tuple[str, ...]:
    """Check ``item_key`` (``--item-key``) and return it as a tuple of record keys."""
    if item_key is None:
        return ()
    keys = item_key.split(",") if isinstance(item_key, str) else list(item_key)
    keys = [k.strip() if isinstance(k, str) else k for k in keys]
    if not keys or any(not isinstance(k, str) or not k or any(not p for p in k.split("."))
                       for k in keys):  # fmt: skip
        raise InvalidArgumentError(
            f"item_key (--item-key): expected record keys such as 'question' or "
            f"'meta.case,question', got {item_key!r}"
        )
    if format != "jsonl":
        raise InvalidArgumentError(
            f"item_key (--item-key): only the jsonl format keys items by content, not {format!r}"
        )
    return tuple(keys)


def _check_questions(st: Store, run_ids: list[str], joined: Any, *, replace: bool,
                     warnings: list[tuple[str, str]]) -> None:  # fmt: skip
    """Refuse (or, with ``replace``, list) records that reuse a stored key for another question.

    ``joined`` holds the new records' keys, ``digest`` and ``question`` beside the stored
    digest ``_old``. A record with the stored digest holds the stored question, so the stored
    questions are read only for the keys whose digest differs (none on an unchanged re-import).
    """
    import polars as pl

    key = ["run_id", "patient_id", "item_id"]
    suspects = joined.filter(
        pl.col("question").is_not_null() & pl.col("digest").ne_missing(pl.col("_old"))
    )
    if not suspects.height:
        return
    stored = (
        st._scan_paths("items", st.parts("items"))
        .filter(pl.col("run_id").is_in(run_ids))
        .join(suspects.select(key).unique().lazy(), on=key, how="semi", nulls_equal=True)
        .select(*key, pl.col("question").alias("_q"))
        .collect()
    )
    clash = (
        suspects.join(stored, on=key, how="inner", nulls_equal=True)
        .filter(pl.col("_q").is_not_null() & (pl.col("question") != pl.col("_q")))
        .unique(subset=key, maintain_order=True)
    )
    if not clash.height:
        return

    def short(text: str) -> str:
        one = " ".join(text.split())
        return one if len(one) <= 60 else one[:57] + "..."

    lines = [
        f"{r['source']}: run {r['run_id']!r}, item {r['item_id']!r}: stored question "
        f"{short(r['_q'])!r}, this record's {short(r['question'])!r}"
        for r in clash.head(SHOWN_WARNINGS).rows(named=True)
    ]
    more = clash.height - len(lines)
    if replace:
        warnings += [(ln.split(": run ", 1)[0], "replaced an item of another question: "
                      + ln.split(": ", 1)[1]) for ln in lines]  # fmt: skip
        if more:
            warnings.append(("(this import)", f"{more:,} more items of another question replaced"))
        return
    raise ItemConflictError(
        f"{clash.height:,} record(s) would replace stored items that hold another question "
        "(same run and item id); nothing was written. Give the records their own item ids, "
        "name what identifies an item with --item-key, or pass --replace to replace them:\n  "
        + "\n  ".join(lines)
        + (f"\n  ... and {more:,} more" if more else "")
    )


def _newest_source(sources: Sequence[str | None]) -> tuple[float, str] | None:
    """Return (timestamp, source) of the newest MTBBench log among stored item sources."""
    from .mtbbench import split_filename

    best: tuple[float, str] | None = None
    for s in set(sources):
        if s is None:
            continue
        try:
            _, ts = split_filename(Path(s).name)
        except MalformedLog:
            continue
        if ts is not None and (best is None or ts > best[0]):
            best = (float(ts), s)
    return best


def _events_of(
    live: Sequence[_Entry], kept_pairs: set[tuple[int, int]]
) -> tuple[pa.Table, dict[int, int]]:
    """Return the events of the kept items and the count per file.

    A unit's file (MTBBench) is kept or dropped whole, so all its events go with it.
    """
    import pyarrow.compute as pc

    rows: list[dict[str, Any]] = []
    tables: list[pa.Table] = []
    counts: dict[int, int] = {}
    for e in live:
        p = e.parsed
        if p.events_table is not None:
            mine = pa.array(sorted(r for f, r in kept_pairs if f == e.index), type=pa.int32())
            t = p.events_table.filter(pc.is_in(p.events_table.column("_row"), value_set=mine))
            tables.append(t.drop_columns(["_row"]))
            counts[e.index] = t.num_rows
            continue
        if p.unit is not None:
            kept = p.events
        else:
            kept = [ev for ev in p.events if (e.index, ev["_row"]) in kept_pairs]
        rows += kept
        counts[e.index] = len(kept)
    if tables:
        if rows:
            tables.append(_rows_table(rows, "events"))
        return pa.concat_tables(tables), counts
    return _rows_table(rows, "events"), counts


def _runs_of(st: Store, live: Sequence[_Entry], kept: Any) -> tuple[pa.Table, Any]:
    """Return the run rows to write and the runs they replace in the store.

    A run already stored with the same benchmark, track, model, tools and config is not
    written again; one stored with other values is replaced (MTBBench runs keep the earliest
    creation time).
    """
    import polars as pl

    wanted = set(kept.get_column("run_id").to_list())
    runs: dict[str, dict[str, Any]] = {}
    for e in live:
        for r in e.parsed.runs:
            rid = r["run_id"]
            if rid not in wanted:
                continue
            prev = runs.get(rid)
            if prev is None:
                runs[rid] = dict(r)
            elif r.get("created_at") and (
                prev.get("created_at") is None or r["created_at"] < prev["created_at"]
            ):
                prev["created_at"] = r["created_at"]
    cols = ("benchmark", "track", "model", "tools", "config")
    existing = (
        st.runs().filter(pl.col("run_id").is_in(list(runs))).collect().rows(named=True)
        if runs
        else []
    )
    stored: dict[str, list[dict[str, Any]]] = {}
    for r in existing:
        stored.setdefault(r["run_id"], []).append(r)
    out: list[dict[str, Any]] = []
    replaced: list[str] = []
    for rid, r in runs.items():
        old = stored.get(rid)
        if not old:
            out.append(r)
            continue
        if all(o[c] == r.get(c) for o in old for c in cols):
            continue
        times = [t for t in [r.get("created_at"), *(o["created_at"] for o in old)] if t]
        r["created_at"] = min(times) if times else None
        out.append(r)
        replaced.append(rid)
    return _rows_table(out, "runs"), pl.DataFrame(
        {"run_id": replaced}, schema={"run_id": pl.String}
    )


def _swaps(
    st: Store, table: str, items: Any, units: Any, *, runs: Any = None
) -> list[tuple[Path, pa.Table]]:
    """Return (part, rows to keep) for every visible part of ``table`` with rows to hide.

    Hidden: rows of the ``items`` keys, rows of the (run_id, patient_id) ``units``, or (runs
    table) rows of the ``runs`` ids.
    """
    import polars as pl

    key = ["run_id", "patient_id", "item_id"]
    parts = st.parts(table)
    if not parts:
        return []
    lf = st._scan_paths(table, parts, part_column=True)
    hits = []
    if runs is not None:
        hits.append(lf.join(runs.lazy(), on="run_id", how="semi"))
    if items is not None and items.height:
        hits.append(lf.join(items.lazy(), on=key, how="semi", nulls_equal=True))
    if units is not None and units.height:
        hits.append(lf.join(units.lazy(), on=key[:2], how="semi", nulls_equal=True))
    if not hits:
        return []
    names = pl.concat([h.select("__part") for h in hits]).unique().collect()
    out = []
    by_name = {p.name: p for p in parts}
    for name in sorted(names.get_column("__part").to_list()):
        path = by_name[name]
        df = pl.read_parquet(path).with_row_index("__r")
        drop = []
        if runs is not None:
            drop.append(df.join(runs, on="run_id", how="semi"))
        if items is not None and items.height and "item_id" in df.columns:
            drop.append(df.join(items, on=key, how="semi", nulls_equal=True))
        if units is not None and units.height and "patient_id" in df.columns:
            drop.append(df.join(units, on=key[:2], how="semi", nulls_equal=True))
        gone = pl.concat([d.select("__r") for d in drop]).unique()
        kept = df.join(gone, on="__r", how="anti").sort("__r").drop("__r")
        out.append((path, conform(kept.to_arrow(), table)))
    return out


def _load_model_map(spec: Mapping[str, str] | str | os.PathLike[str] | None) -> dict[str, str]:
    """Return the folder -> model name map from a mapping, a JSON file or a text file."""
    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        return {str(k): str(v) for k, v in spec.items()}
    import json

    path = Path(spec)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MissingFileError(f"model_map: cannot read {path}: {exc.strerror or exc}") from None
    if path.suffix.lower() == ".json":
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise InvalidArgumentError(f"model_map: {path} is not valid JSON ({exc})") from None
        if not isinstance(doc, dict) or not all(isinstance(v, str) for v in doc.values()):
            raise InvalidArgumentError(
                f"model_map: {path} must hold a JSON object of folder -> name"
            )
        return {str(k): v for k, v in doc.items()}
    out: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        for sep in (",", "\t", "="):
            if sep in line:
                key, value = (s.strip() for s in line.split(sep, 1))
                break
        else:
            raise InvalidArgumentError(
                f"model_map: {path}:{lineno}: expected 'folder,display name'"
            )
        if (
            lineno == 1
            and key.lower() in ("folder", "directory")
            and value.lower() in ("model", "display", "name")
        ):
            continue
        out[key] = value
    return out
