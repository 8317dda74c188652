"""The batch import machinery behind :func:`tumorboard.traj.importers.import_logs`.

One import: the options and input bounds are checked, the log files of the format are found
under the sources (and the files passed over listed), each file is read and parsed on its own
(whatever one file raises skips that file with the reason, never the batch; special files and
files over the size bound are skipped before they are read), of several logs of one MTBBench
unit the newest is kept, and what is left goes to :mod:`._commit`; the :class:`ImportReport`
is assembled at the end. The format parsers are imported on first use (:func:`_formats`).
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import InvalidArgumentError, MissingFileError
from ..store import Store
from ._commit import _Entry, _remove_new_empty_store, _write_isolated, own_parts_after
from ._common import ImportOptions, ItemConflictError, MalformedLog, NotOfFormat, Parsed
from ._report import ImportReport


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


class _BackgroundHash:
    """The SHA-256 of a file, computed on a thread while the file is parsed.

    Reading and hashing release the GIL, so a streamed file's second read (for its content
    hash) overlaps the parse instead of coming before it.
    """

    def __init__(self, path: Path) -> None:
        self._digest: str | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(path,), daemon=True)
        self._thread.start()

    def _run(self, path: Path) -> None:
        try:
            self._digest = _file_hash(path)
        except BaseException as exc:  # noqa: BLE001 - raised again where the digest is needed
            self._error = exc

    def wait(self) -> None:
        """Wait until the thread has finished."""
        self._thread.join()

    def result(self) -> str:
        """Return the hex digest once it is computed (raises what reading the file raised)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._digest is not None
        return self._digest


#: Progress callback: ``progress(files_done, files_total, records, bytes_done)``.
Progress = Callable[[int, int, int, int], None]


def run_import(
    format: str,
    src: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    store: Store | str | os.PathLike[str],
    *,
    track: str | None,
    model: str | None,
    model_map: Mapping[str, str] | str | os.PathLike[str] | None,
    benchmark: str | None,
    field_map: Mapping[str, str] | None,
    run_name: str | None,
    patient_key: str | None,
    reader: str,
    strict: bool,
    progress: Progress | None,
    cases: str | os.PathLike[str] | None,
    item_key: str | Sequence[str] | None,
    replace: bool,
    max_line_bytes: int | None,
    max_file_bytes: int | None,
) -> ImportReport:
    """Run one import, as :func:`tumorboard.traj.importers.import_logs` documents.

    Every parameter is given: the public entry holds the defaults and the documentation.
    Options and bounds are checked first; then the files are found, read and parsed one by one
    (a file that fails is skipped with the reason), MTBBench units are resolved within the
    import, and what is new is committed (:func:`._commit._write_isolated`).

    Returns
    -------
    ImportReport
        What was imported, left unchanged, skipped (with reasons) and written.
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
    total_bytes = sum(_size(p) for p in files)
    multi = total_bytes > BATCH_BYTES  # committed in several batches
    checked = False  # strict: every file looked at before the first commit
    if strict and multi:
        # several batches: look at every file before the first is committed, so that a
        # problem anywhere still leaves the store untouched
        dry_skipped = list(skipped)
        dry = _Reader(format, parse, opts, fp, files, dry_skipped, [], None, reader, patient_key)
        problems: list[tuple[str, str]] = []
        units: list[_Entry] = []
        for e, _ in dry.entries():
            problems += e.parsed.rejected + e.parsed.warnings
            units.append(_Entry(len(units), e.path, e.content_hash,
                                Parsed(unit=e.parsed.unit, order=e.parsed.order)))  # fmt: skip
        _resolve_in_import(units, dry_skipped)
        _check_strict(src_path, dry_skipped, problems)
        checked = True
    files_reader = _Reader(format, parse, opts, fp, files, skipped, failed, progress, reader,
                           patient_key)  # fmt: skip
    warnings: list[tuple[str, str]] = []
    rejected: list[tuple[str, str]] = []
    totals: dict[str, Any] = {}
    written: set[str] = set()  # paths with rows written
    seen: dict[str, None] = {}  # paths of every piece parsed, in order
    own_parts: frozenset[str] = frozenset()  # items parts of the batches before (if several)
    batch: list[_Entry] = []
    batch_bytes = 0

    def flush() -> None:
        nonlocal st, batch, batch_bytes, own_parts
        _resolve_in_import(batch, skipped)
        for e in batch:
            warnings.extend(e.parsed.warnings)
            rejected.extend(e.parsed.rejected)
        if strict and not checked:
            _check_strict(src_path, skipped, rejected + warnings)
        if any(e.status == "new" for e in batch):
            created = st is None
            st = st if st is not None else Store(store_path)
            try:
                with st.write_lock():
                    result = _write_isolated(st, format, fp, batch, skipped, warnings, failed,
                                             replace=opts.replace, own_parts=own_parts)  # fmt: skip
            except ItemConflictError as exc:
                if created:
                    _remove_new_empty_store(st)
                if totals.get("n_items"):
                    raise ItemConflictError(
                        f"{exc} (this import is committed in batches of "
                        f"{BATCH_BYTES >> 20} MiB of input: {totals['n_items']:,} items of "
                        "its earlier batches are in the store; a rerun leaves them unchanged)"
                    ) from None
                raise
            except BaseException:
                if created:
                    _remove_new_empty_store(st)
                raise
            _add_totals(totals, result)
            if multi:
                own_parts = own_parts_after(own_parts, result)
        for e in batch:
            if e.status == "new" and e.n_written:
                written.add(str(e.path))
        batch, batch_bytes = [], 0

    for entry, size in files_reader.entries():
        seen[str(entry.path)] = None
        entry.index = len(batch)
        batch.append(entry)
        batch_bytes += size
        if batch_bytes >= BATCH_BYTES:
            flush()
    if batch or not totals:
        flush()
    report_kw: dict[str, Any] = dict(format=format, source=", ".join(map(str, srcs)),
                                     passed_over=tuple(passed_over),
                                     store=str(store_path), n_records=files_reader.records,
                                     failed=failed, rejected=tuple(rejected))  # fmt: skip
    for k in ("n_again", "parts", "units"):
        totals.pop(k, None)
    imported = tuple(p for p in seen if p in written)
    passed = written | {f for f, _ in skipped}  # built once, not per path
    unchanged = tuple(p for p in seen if p not in passed)
    return ImportReport(imported=imported, unchanged=unchanged, skipped=tuple(skipped),
                        warnings=tuple(warnings), seconds=time.perf_counter() - t0,
                        **{**report_kw, "failed": tuple(failed)}, **totals)  # fmt: skip


#: Input bytes parsed before they are committed as one batch: an import of more is committed
#: in several batches (memory holds one batch's rows, whatever the number of files).
BATCH_BYTES = 256 << 20


def _size(path: Path) -> int:
    """Return a file's size in bytes (0 when it cannot be read: the read reports it)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _add_totals(totals: dict[str, Any], result: Mapping[str, Any]) -> None:
    """Add one batch's result to the import's totals (keys written again counted once)."""
    again = result.get("n_again", 0)
    for k in ("n_items", "n_new", "n_replaced", "n_unchanged", "n_events"):
        totals[k] = totals.get(k, 0) + result.get(k, 0)
    totals["n_items"] -= again
    totals["n_new"] -= again
    if "runs" in result:
        totals["runs"] = tuple(sorted(set(totals.get("runs", ())) | set(result["runs"])))
        totals["benchmarks"] = tuple(
            sorted(set(totals.get("benchmarks", ())) | set(result["benchmarks"]))
        )
        totals["batch"] = result["batch"]


class _Reader:
    """Reads and parses the files of an import one by one, giving an :class:`_Entry` per piece.

    A file that fails is skipped with the reason (``skipped``, ``failed``); a JSON-lines file
    larger than :data:`.jsonl.BLOCK_BYTES` is read in blocks and given in pieces.
    """

    def __init__(self, format: str, parse: Callable[..., Any], opts: ImportOptions, fp: bytes,
                 files: Sequence[Path], skipped: list[tuple[str, str]], failed: list[str],
                 progress: Progress | None, reader: str,
                 patient_key: str | None) -> None:  # fmt: skip
        self.format, self.parse, self.opts, self.fp = format, parse, opts, fp
        self.files, self.skipped, self.failed = files, skipped, failed
        self.progress, self.reader, self.patient_key = progress, reader, patient_key
        self.records = 0
        self.done_bytes = 0

    def _skip(self, path: Path, why: str, *, failed: bool = True) -> None:
        self.skipped.append((str(path), why))
        if failed:
            self.failed.append(str(path))

    def entries(self) -> Iterator[tuple[_Entry, int]]:
        """Yield (entry, input bytes it stands for) per parsed file or piece."""
        opts, files, format = self.opts, self.files, self.format
        for k, path in enumerate(files):
            if not str(path).isascii() and not _utf8(str(path)):
                # the store keeps every item's source path as UTF-8 text
                self._skip(path, "file name is not UTF-8 text (rename the file)")
                continue
            why = _not_regular(path)
            if why is None and opts.max_file_bytes is not None:
                big = path.stat().st_size
                if big > opts.max_file_bytes:
                    why = (f"file of {big:,} bytes is over the limit of {opts.max_file_bytes:,} "
                           "bytes (--max-file-mb / max_file_bytes raises it)")  # fmt: skip
            if why is not None:
                self._skip(path, why)
                continue
            try:
                size = path.stat().st_size
                stream = format in _STREAMING or (format == "jsonl" and size > _jsonl_block_bytes())
                raw = b"" if stream else path.read_bytes()
                hashing = _BackgroundHash(path) if stream else None
                content_hash = "" if stream else hashlib.sha256(raw).hexdigest()
            except OSError as exc:
                self._skip(path, f"unreadable: {exc.strerror or exc}")
                continue
            tick = None
            if self.progress is not None:

                def tick(n: int, _k: int = k, _base: int = self.records,
                         _b: int = self.done_bytes) -> None:  # fmt: skip
                    self.progress(_k, len(files), _base + n, _b)  # type: ignore[misc]

            n_pieces = 0
            try:
                for parsed, piece_size in self._parse(path, raw, size, content_hash, stream, tick):
                    if hashing is not None and not content_hash:
                        content_hash = hashing.result()
                    self.records += parsed.n_records
                    n_pieces += 1
                    yield _Entry(0, path, content_hash, parsed), piece_size
            except NotOfFormat as exc:  # not a log of the format at all: skipped, not failed
                self._skip(path, str(exc), failed=False)
                continue
            except MalformedLog as exc:
                self._skip(path, str(exc))
                continue
            except UnicodeDecodeError as exc:
                self._skip(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})")
                continue
            except OSError as exc:
                why = f"unreadable: {exc.strerror or exc}"
                self._skip(path, why if not n_pieces else f"{why} (after {n_pieces} parts of "
                           "it were imported; a rerun imports the rest)")  # fmt: skip
                continue
            except (KeyboardInterrupt, SystemExit, ItemConflictError):
                raise
            except BaseException as exc:  # noqa: BLE001 - one bad file never costs the others
                # BaseException: a Rust panic inside polars/pyarrow (pyo3's PanicException) too
                self._skip(path, f"cannot be read ({type(exc).__name__}: {exc})"[:300])
                continue
            finally:
                if hashing is not None:
                    hashing.wait()  # no reader of a file left behind, whatever happened
            self.done_bytes += size
            if self.progress is not None:
                self.progress(k + 1, len(files), self.records, self.done_bytes)

    def _parse(self, path: Path, raw: bytes, size: int, content_hash: str, stream: bool,
               tick: Callable[[int], None] | None) -> Iterator[tuple[Parsed, int]]:  # fmt: skip
        """Yield the file's parsed piece(s) with the input bytes each stands for."""
        opts, fp, parse = self.opts, self.fp, self.parse
        if self.format == "inspect":
            yield parse(path, opts, fp, tick, reader=self.reader,
                        patient_key=self.patient_key), size  # fmt: skip
        elif self.format == "jsonl" and stream:
            from .jsonl import parse_stream

            done = 0
            for piece in parse_stream(path, opts, fp, tick, piece_bytes=BATCH_BYTES,
                                      block_bytes=_jsonl_block_bytes()):  # fmt: skip
                share = min(size - done, _piece_share(piece, size))
                done += share
                yield piece, share
        elif self.format == "jsonl":
            yield parse(path, raw, opts, fp, tick), size
        elif self.format == "mtbbench":
            yield parse(path, raw, opts, fp, content_hash), size
        else:
            yield parse(path, raw, opts, fp), size


def _jsonl_block_bytes() -> int:
    """Return the block size of streamed JSON-lines files (:data:`.jsonl.BLOCK_BYTES`)."""
    from . import jsonl

    return jsonl.BLOCK_BYTES


def _piece_share(piece: Parsed, size: int) -> int:
    """Return the input bytes a piece of a streamed file stands for.

    The bytes of the blocks it was read from (:attr:`Parsed.n_bytes`). Its items' Arrow bytes
    are no measure: they run about half again over the input, so that the last third of a
    large file went into one batch.
    """
    if piece.n_bytes:
        return min(size, piece.n_bytes)
    table = piece.items_table
    return size if table is None else max(1, min(size, table.nbytes))


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
            got = "names that are not strings" if isinstance(doc, dict) else type(doc).__name__
            raise InvalidArgumentError(
                f"model_map: {path}: expected a JSON object of folder -> name, got {got}"
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
