"""``Store``: a trajectory store on disk, a directory of Parquet part files plus a manifest.

Layout (docs/trajectory-schema.md)::

    STORE/manifest.json          {"format": "tumorboard.traj", "schema_version": 1, ...}
    STORE/runs/*.parquet         one directory per table; every file is one immutable part
    STORE/items/*.parquet
    STORE/events/*.parquet
    STORE/imports/*.parquet

Writers (any number of processes) each write uniquely named parts. Every part is written to a
hidden temporary name and renamed into place (``tumorboard._io.atomic_path``), so a reader never
sees half a part and a writer killed mid-write leaves only an ignored temporary file. Readers
list the parts at call time and scan them with polars (``Store.items()`` etc. are LazyFrames:
filters and column selections are pushed down into the Parquet scan).

Two small protocols keep multi-part operations atomic without locks on the read side:

* Import batches write their parts as ``imp-<batch>.parquet`` in runs/items/events and commit by
  writing ``imports/imp-<batch>.parquet`` last; readers ignore the batch's parts until that
  commit file exists, so an import killed half-way is invisible and is simply redone.
* Swaps: a journal names a target part and the source parts it replaces
  (``_compact-<id>.json`` from ``compact()``, ``_replace-<id>.json`` from an import that
  replaces items: the target is a source part's copy without the replaced rows). Readers skip
  the sources of a journal whose target is visible (present and, for an import's target,
  committed), so no row is ever seen twice and a journal whose target is not visible changes
  nothing. The writer then deletes the sources and the journal; ``compact()`` finishes swaps a
  killed writer left.

Imports and compaction take the store's write lock (``_store.lock``, an ``flock``): imports wait
for each other, so each one resolves its replacements against a stable store; ``compact()``
refuses to start while an import holds it. Other writers (the Recorder, ``write``) only add
parts and need no lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .. import __version__
from .._io import atomic_path, is_temp_name, remove_temp_files
from .._json import json_text
from .._typing import Frame
from ..errors import InvalidArgumentError, MissingFileError, StateError
from .schema import SCHEMA_VERSION, TABLES, conform, polars_schema, schema_of

MANIFEST = "manifest.json"
FORMAT = "tumorboard.traj"
PART_SUFFIX = ".parquet"
COMPRESSION = "zstd"
LOCK = "_store.lock"
_JOURNALS = ("_compact-", "_replace-")
_HOST = "".join(c if c.isalnum() else "-" for c in socket.gethostname())[:24] or "host"


class StoreVersionError(InvalidArgumentError):
    """The store was written by a newer schema version than this tumorboard reads."""


@dataclass(frozen=True)
class CompactionResult:
    """What :meth:`Store.compact` did: per table, parts before and after, and rows moved.

    Attributes
    ----------
    parts_before, parts_after : dict of str to int
        Visible parts of each compacted table before and after.
    rows_rewritten : dict of str to int
        Rows of each table rewritten into merged parts.
    """

    parts_before: dict[str, int]
    parts_after: dict[str, int]
    rows_rewritten: dict[str, int]


def _utcnow() -> datetime:
    """Return the current time in UTC (timezone-aware)."""
    return datetime.now(timezone.utc)  # noqa: UP017 (py3.10 target)


class Store:
    """A trajectory store: a directory of Parquet parts per table plus a versioned manifest.

    Parameters
    ----------
    path : str or os.PathLike
        The store directory. Created (with its manifest) when missing and ``create``.
    create : bool, default True
        Create a new store when ``path`` holds none; otherwise raise
        :class:`~tumorboard.errors.MissingFileError` (a FileNotFoundError).
    fsync : bool, default True
        fsync every part and its directory before it counts as written (durable against power
        loss, not only process crashes); costs one fsync per part.

    Raises
    ------
    StoreVersionError
        The manifest's schema version is newer than ``SCHEMA_VERSION``.
    InvalidArgumentError
        ``path`` exists, is not empty and holds no manifest (a ValueError), or the manifest is
        unreadable.

    Examples
    --------
    >>> store = Store("runs/store")  # doctest: +SKIP
    >>> acc = (store.items(with_runs=True)  # doctest: +SKIP
    ...        .group_by("model", "task").agg(pl.col("correct").mean()).collect())
    """

    def __init__(
        self, path: str | os.PathLike[str], *, create: bool = True, fsync: bool = True
    ) -> None:
        self.path = Path(path)
        self.fsync = bool(fsync)
        manifest = self.path / MANIFEST
        if manifest.is_file():
            self.manifest = self._read_manifest(manifest)
        elif not create:
            raise MissingFileError(f"{self.path}: no trajectory store here (no {MANIFEST})")
        else:
            self.manifest = self._create()
        self.schema_version = int(self.manifest["schema_version"])
        for table in TABLES:
            (self.path / table).mkdir(exist_ok=True)

    # ------------------------------------------------------------------ manifest

    def _read_manifest(self, manifest: Path) -> dict[str, Any]:
        """Read and check the manifest (format and a schema version this package reads)."""
        try:
            doc = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidArgumentError(f"{manifest}: unreadable store manifest ({exc})") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise InvalidArgumentError(f"{manifest}: not a tumorboard trajectory store manifest")
        version = doc.get("schema_version")
        if not isinstance(version, int) or version < 1:
            raise InvalidArgumentError(f"{manifest}: invalid schema_version {version!r}")
        if version > SCHEMA_VERSION:
            raise StoreVersionError(
                f"{self.path}: the store was written with trajectory schema version {version}, "
                f"but this tumorboard ({__version__}) reads versions up to {SCHEMA_VERSION}; "
                "upgrade tumorboard to open it"
            )
        return doc

    def _create(self) -> dict[str, Any]:
        """Create the store directory and its manifest; refuse a non-empty foreign directory."""
        if self.path.exists() and not self.path.is_dir():
            raise InvalidArgumentError(f"{self.path}: exists and is not a directory")
        if self.path.is_dir():
            stray = [
                p.name
                for p in self.path.iterdir()
                if p.name not in TABLES and not is_temp_name(p.name)
            ]
            if stray:
                raise InvalidArgumentError(
                    f"{self.path}: exists, is not empty ({stray[0]!r}) and holds no {MANIFEST}; "
                    "refusing to turn it into a trajectory store"
                )
        self.path.mkdir(parents=True, exist_ok=True)
        doc = {
            "format": FORMAT,
            "schema_version": SCHEMA_VERSION,
            "tables": list(TABLES),
            "created_at": _utcnow().isoformat(),
            "created_by": f"tumorboard {__version__}",
        }
        target = self.path / MANIFEST
        if not target.exists():  # concurrent creators write identical manifests
            with atomic_path(target, fsync=True) as tmp:
                tmp.write_text(json_text(doc) + "\n", encoding="utf-8")
        return self._read_manifest(target)

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r}, schema_version={self.schema_version})"

    # ------------------------------------------------------------------ parts

    def _check_table(self, table: str) -> None:
        """Check that ``table`` is one of the store's tables."""
        if table not in TABLES:
            raise InvalidArgumentError(f"table: expected one of {tuple(TABLES)}, got {table!r}")

    def parts(self, table: str) -> list[Path]:
        """List the visible part files of ``table``, oldest name first (a snapshot).

        Parts of uncommitted import batches and sources of a finished compaction are hidden.

        Parameters
        ----------
        table : {"runs", "items", "events", "imports"}
            The table.

        Returns
        -------
        list of pathlib.Path
            The part files.
        """
        self._check_table(table)
        directory = self.path / table
        names: set[str] = set()
        journals: list[str] = []
        with os.scandir(directory) as it:
            for entry in it:
                name = entry.name
                if name.startswith(_JOURNALS) and name.endswith(".json"):
                    journals.append(name)
                elif name.endswith(PART_SUFFIX) and not name.startswith((".", "_")):
                    names.add(name)
        if table != "imports" and any(n.startswith("imp-") for n in names):
            committed = self._committed_batches()
            names = {n for n in names if not n.startswith("imp-") or _batch_of(n) in committed}
        for journal in journals:
            try:
                doc = json.loads((directory / journal).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # being written or already removed: its sources are still valid
            if doc.get("target") in names:
                names.difference_update(doc.get("sources", ()))
        return [directory / n for n in sorted(names)]

    def _committed_batches(self) -> set[str]:
        """Return the ids of the import batches whose commit part exists."""
        with os.scandir(self.path / "imports") as it:
            return {
                _batch_of(e.name)
                for e in it
                if e.name.startswith("imp-") and e.name.endswith(PART_SUFFIX)
            }

    def _new_part_name(self, prefix: str = "part") -> str:
        """Return a new unique part name: prefix, time, host, process id and a random suffix."""
        return (
            f"{prefix}-{time.time_ns():016x}-{_HOST}-{os.getpid()}-"
            f"{uuid.uuid4().hex[:12]}{PART_SUFFIX}"
        )

    def write_part(self, table: str, data: pa.Table, *, name: str | None = None) -> Path:
        """Write an already conforming Arrow table as one new part (temp file + rename).

        Prefer :meth:`write`, which validates; this is the fast path for callers that built
        the table against ``schema_of(table)`` themselves.

        Parameters
        ----------
        table : {"runs", "items", "events", "imports"}
            The table.
        data : pyarrow.Table
            Rows with exactly the table's schema (metadata aside).
        name : str, optional
            The part's file name (default: a new unique name).

        Returns
        -------
        pathlib.Path
            The part file.

        Raises
        ------
        InvalidArgumentError
            An unknown table, or ``data`` without the table's schema.
        """
        self._check_table(table)
        schema = schema_of(table)
        if not data.schema.equals(schema, check_metadata=False):
            raise InvalidArgumentError(
                f"{table}: the table does not have the {table} schema; use write()"
            )
        directory = self.path / table
        final = directory / (name or self._new_part_name())
        with atomic_path(final, fsync=self.fsync) as tmp:
            pq.write_table(
                data.replace_schema_metadata(schema.metadata), tmp, compression=COMPRESSION
            )
        return final

    def write(
        self,
        table: str,
        data: Frame | pa.RecordBatch,
        *,
        defaults: Mapping[str, Any] | None = None,
    ) -> Path | None:
        """Validate ``data`` against the ``table`` schema and write it as one new part.

        Parameters
        ----------
        table : {"runs", "items", "events", "imports"}
            The table.
        data : pyarrow Table or RecordBatch, polars DataFrame or LazyFrame, or mapping
            The rows, converted with :func:`~tumorboard.traj.conform`.
        defaults : mapping, optional
            Column name -> scalar for columns missing from ``data``.

        Returns
        -------
        pathlib.Path or None
            The new part, or None for zero rows.
        """
        self._check_table(table)
        conformed = conform(data, table, defaults=defaults)
        if conformed.num_rows == 0:
            return None
        return self.write_part(table, conformed)

    def write_runs(self, data: Frame | pa.RecordBatch, **kw: Any) -> Path | None:
        """Write run rows: ``write("runs", data, **kw)``.

        Parameters
        ----------
        data : pyarrow Table or RecordBatch, polars DataFrame or LazyFrame, or mapping
            The rows.
        **kw
            Passed to :meth:`write` (``defaults``).

        Returns
        -------
        pathlib.Path or None
            The new part, or None for zero rows.
        """
        return self.write("runs", data, **kw)

    def write_items(self, data: Frame | pa.RecordBatch, **kw: Any) -> Path | None:
        """Write item rows: ``write("items", data, **kw)``, the bulk path for many questions.

        Parameters
        ----------
        data : pyarrow Table or RecordBatch, polars DataFrame or LazyFrame, or mapping
            The rows.
        **kw
            Passed to :meth:`write` (``defaults``).

        Returns
        -------
        pathlib.Path or None
            The new part, or None for zero rows.
        """
        return self.write("items", data, **kw)

    def write_events(self, data: Frame | pa.RecordBatch, **kw: Any) -> Path | None:
        """Write event rows: ``write("events", data, **kw)``.

        Parameters
        ----------
        data : pyarrow Table or RecordBatch, polars DataFrame or LazyFrame, or mapping
            The rows.
        **kw
            Passed to :meth:`write` (``defaults``).

        Returns
        -------
        pathlib.Path or None
            The new part, or None for zero rows.
        """
        return self.write("events", data, **kw)

    # ------------------------------------------------------------------ reading

    def scan(self, table: str) -> Any:
        """Return a polars LazyFrame over the visible parts of ``table``.

        The frame has the table's full schema even when the store is empty.

        Parameters
        ----------
        table : {"runs", "items", "events", "imports"}
            The table.

        Returns
        -------
        polars.LazyFrame
            A scan of the table's parts.
        """
        return self._scan_paths(table, self.parts(table))

    def _scan_paths(self, table: str, paths: Sequence[Path], *, part_column: bool = False) -> Any:
        """Return a LazyFrame over ``paths`` with the table's schema (and a ``__part`` column).

        With ``part_column``, ``__part`` holds the file name of each row's part.
        """
        import polars as pl

        schema = polars_schema(table)
        if not paths:
            lf = pl.LazyFrame(schema=schema)
            return lf.with_columns(pl.lit(None, pl.String).alias("__part")) if part_column else lf
        lf = pl.scan_parquet(
            [str(p) for p in paths],
            schema=schema,
            missing_columns="insert",
            extra_columns="ignore",
            hive_partitioning=False,
            glob=False,
            include_file_paths="__part" if part_column else None,
        )
        if part_column:
            lf = lf.with_columns(pl.col("__part").str.split("/").list.last())
        return lf

    def runs(self) -> Any:
        """Return a LazyFrame of the runs table.

        Returns
        -------
        polars.LazyFrame
            The runs.
        """
        return self.scan("runs")

    def items(self, *, with_runs: bool = False) -> Any:
        """Return a LazyFrame of the items table.

        Parameters
        ----------
        with_runs : bool, default False
            Also the run's benchmark, track, model and tools columns (left join on run_id; a
            missing ``tools`` is False), which is what scorers group by.

        Returns
        -------
        polars.LazyFrame
            The items.
        """
        import polars as pl

        lf = self.scan("items")
        if with_runs:
            runs = (
                self.scan("runs")
                .select("run_id", "benchmark", "track", "model", "tools")
                .unique(subset="run_id", keep="first", maintain_order=True)
            )
            lf = lf.join(runs, on="run_id", how="left", maintain_order="left")
            lf = lf.with_columns(pl.col("tools").fill_null(False))
        return lf

    def events(self) -> Any:
        """Return a LazyFrame of the events table.

        Returns
        -------
        polars.LazyFrame
            The events.
        """
        return self.scan("events")

    def imports(self) -> Any:
        """Return a LazyFrame of the imports table (content hashes of imported log files).

        Returns
        -------
        polars.LazyFrame
            The imports.
        """
        return self.scan("imports")

    def imported_hashes(self) -> set[str]:
        """Return the content hashes of every committed import.

        Returns
        -------
        set of str
            The SHA-256 hex digests.
        """
        paths = self.parts("imports")
        if not paths:
            return set()
        tables = [pq.read_table(p, columns=["content_hash"]) for p in paths]
        return set(pa.concat_tables(tables).column("content_hash").to_pylist())

    def count(self, table: str) -> int:
        """Count the rows of ``table`` from the part footers (no data read).

        Parameters
        ----------
        table : {"runs", "items", "events", "imports"}
            The table.

        Returns
        -------
        int
            The rows of its visible parts.
        """
        return sum(pq.ParquetFile(p).metadata.num_rows for p in self.parts(table))

    # ------------------------------------------------------------------ import batches

    def commit_batch(
        self,
        batch: str,
        tables: Mapping[str, pa.Table],
        imports: pa.Table,
        *,
        replace: Mapping[str, Sequence[tuple[Path, pa.Table]]] | None = None,
    ) -> None:
        """Write one atomic import batch: the batch's table parts, then its commit part.

        The parts ``imp-<batch>.parquet`` of each table in ``tables`` are written first, with
        the replacement copies of ``replace`` and their journals, then the commit part in
        ``imports``: readers see the new rows, and stop seeing the replaced ones, at that one
        rename. Afterwards the replaced parts and the journals are removed. Re-running a batch
        with the same id overwrites its parts (idempotent). Callers hold :meth:`write_lock`
        when ``replace`` is given.

        Parameters
        ----------
        batch : str
            The batch id (letters, digits, ``-`` and ``_``).
        tables : mapping of str to pyarrow.Table
            Conforming Arrow tables of runs, items and events (empty tables are skipped).
        imports : pyarrow.Table
            The batch's rows of the imports table, written last as the commit.
        replace : mapping of str to sequence of (pathlib.Path, pyarrow.Table), optional
            Per table: (visible part, its rows to keep). Each part is swapped for a copy holding
            only the kept rows (``imp-<batch>.r<k>.parquet``) when the batch commits.

        Raises
        ------
        InvalidArgumentError
            ``tables`` holds the imports table, or a part to replace is not a visible part.
        """
        if "." in batch or "/" in batch:
            raise InvalidArgumentError(f"batch: expected an id without '.' or '/', got {batch!r}")
        name = f"imp-{batch}{PART_SUFFIX}"
        journals: list[tuple[Path, list[Path]]] = []
        for table, data in tables.items():
            if table == "imports":
                raise InvalidArgumentError(
                    "tables: the imports part is the commit; pass it as imports"
                )
            if data.num_rows:
                self.write_part(table, data, name=name)
        for table, swaps in (replace or {}).items():
            self._check_table(table)
            visible = set(self.parts(table))
            directory = self.path / table
            for k, (source, kept) in enumerate(swaps):
                source = Path(source)
                if source.parent != directory or source not in visible:
                    raise InvalidArgumentError(
                        f"replace: {source} is not a visible part of the {table} table"
                    )
                target = f"imp-{batch}.r{k}{PART_SUFFIX}"
                journal = directory / f"_replace-{batch}-{k}.json"
                with atomic_path(journal, fsync=self.fsync) as tmp:
                    tmp.write_text(json_text({"target": target, "sources": [source.name]}))
                self.write_part(table, kept, name=target)
                journals.append((journal, [source]))
        self.write_part("imports", imports, name=name)
        for journal, sources in journals:  # the swap is done; tidy up
            for src in sources:
                with contextlib.suppress(FileNotFoundError):
                    src.unlink()
            with contextlib.suppress(FileNotFoundError):
                journal.unlink()

    @contextlib.contextmanager
    def write_lock(self, *, wait: bool = True) -> Iterator[None]:
        """Hold the store's write lock (an ``flock`` on ``_store.lock``).

        Imports hold it while they resolve which items they add or replace and commit; compaction
        holds it while it merges. Readers and the Recorder never take it.

        Parameters
        ----------
        wait : bool, default True
            Wait for the lock; False raises :class:`~tumorboard.errors.StateError` when another
            process holds it.

        Yields
        ------
        None
            While the lock is held.

        Raises
        ------
        StateError
            ``wait=False`` and another process holds the lock.
        """
        fh = open(self.path / LOCK, "a+")  # noqa: SIM115
        try:
            try:
                import fcntl

                flags = fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB)
                fcntl.flock(fh.fileno(), flags)
            except ImportError:  # pragma: no cover (non-POSIX)
                pass
            except OSError:
                raise StateError(
                    f"{self.path}: another process is compacting or importing into this store; "
                    "try again when it is done"
                ) from None
            yield
        finally:
            fh.close()

    # ------------------------------------------------------------------ compaction

    def _recover_journals(self, table: str) -> None:
        """Finish or drop the swaps killed writers left; remove their leftovers.

        Runs under the write lock, so no import is in flight: a journal whose target is visible
        has its sources removed, any other journal is dropped together with an uncommitted
        target, and uncommitted import parts older than an hour (killed imports) are removed.
        """
        directory = self.path / table
        visible = {p.name for p in self.parts(table)}
        for prefix in _JOURNALS:
            for journal in sorted(directory.glob(f"{prefix}*.json")):
                try:
                    doc = json.loads(journal.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    doc = {}
                target = doc.get("target")
                if target and target in visible:
                    for src in doc.get("sources", ()):
                        with contextlib.suppress(FileNotFoundError):
                            (directory / src).unlink()
                elif target and target.startswith("imp-"):
                    with contextlib.suppress(FileNotFoundError):
                        (directory / target).unlink()
                with contextlib.suppress(FileNotFoundError):
                    journal.unlink()
        committed = self._committed_batches()
        now = time.time()
        for part in directory.glob(f"imp-*{PART_SUFFIX}"):
            if _batch_of(part.name) in committed:
                continue
            with contextlib.suppress(FileNotFoundError):
                if now - part.stat().st_mtime > 3600:
                    part.unlink()
        # Temporary files older than an hour are left over from killed writers.
        remove_temp_files(directory, min_age_s=3600)

    def compact(
        self,
        tables: Sequence[str] | str = ("runs", "items", "events"),
        *,
        small_rows: int = 200_000,
        target_rows: int = 2_000_000,
    ) -> CompactionResult:
        """Merge small parts into larger ones, in name order.

        Parts of fewer than ``small_rows`` rows are merged into parts of up to ``target_rows``
        rows. Safe while other processes write new parts (only parts listed at the start are
        merged) and crash-safe (journal protocol, see the module docstring). Readers holding a
        LazyFrame from before the compaction must re-open it (merged sources are deleted).
        The imports table is never compacted (its parts are the import commit records).

        Parameters
        ----------
        tables : str or sequence of str, default ("runs", "items", "events")
            The tables to compact.
        small_rows : int, default 200_000
            Parts with fewer rows are merged.
        target_rows : int, default 2_000_000
            The most rows of a merged part.

        Returns
        -------
        CompactionResult
            Parts before and after, and rows rewritten, per table.

        Raises
        ------
        StateError
            Another process is compacting or importing into the store (a RuntimeError).
        InvalidArgumentError
            An unknown table, the imports table, or invalid row counts.
        """
        if isinstance(tables, str):
            tables = (tables,)
        for table in tables:
            self._check_table(table)
            if table == "imports":
                raise InvalidArgumentError("tables: the imports table is not compacted")
        if small_rows < 1 or target_rows < 2:
            raise InvalidArgumentError(
                "small_rows and target_rows: expected small_rows >= 1, target >= 2"
            )
        before: dict[str, int] = {}
        after: dict[str, int] = {}
        moved: dict[str, int] = {}
        with self.write_lock(wait=False):
            for table in tables:
                self._recover_journals(table)
                paths = self.parts(table)
                before[table] = len(paths)
                moved[table] = 0
                sizes = [(p, pq.ParquetFile(p).metadata.num_rows) for p in paths]
                small = [(p, n) for p, n in sizes if n < small_rows]
                for group in _groups(small, target_rows):
                    if len(group) < 2:
                        continue
                    moved[table] += self._merge(table, [p for p, _ in group])
                after[table] = len(self.parts(table))
        return CompactionResult(before, after, moved)

    def _merge(self, table: str, sources: list[Path]) -> int:
        """Merge ``sources`` into one part under the journal protocol; return the rows moved."""
        schema = schema_of(table)
        parts = [conform(pq.read_table(p), table) for p in sources]
        merged = pa.concat_tables(parts).combine_chunks()
        name = self._new_part_name("cmp")
        directory = self.path / table
        journal = directory / f"_compact-{uuid.uuid4().hex}.json"
        doc = {"target": name, "sources": [p.name for p in sources]}
        # The journal first: the merged part's rename is then the one step that swaps the
        # sources for it (a journal whose target is missing changes nothing for readers).
        with atomic_path(journal, fsync=self.fsync) as tmp:
            tmp.write_text(json_text(doc), encoding="utf-8")
        try:
            self.write_part(table, merged.cast(schema), name=name)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                journal.unlink()
            raise
        for p in sources:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        journal.unlink()
        return merged.num_rows


def _batch_of(name: str) -> str:
    """Return the import batch of a part name ``imp-<batch>[.r<k>].parquet``."""
    return name[4 : -len(PART_SUFFIX)].split(".", 1)[0]


def _groups(sized: Iterable[tuple[Path, int]], target_rows: int) -> list[list[tuple[Path, int]]]:
    """Split sized parts, in order, into groups; a group closes before exceeding ``target_rows``."""
    groups: list[list[tuple[Path, int]]] = []
    current: list[tuple[Path, int]] = []
    rows = 0
    for p, n in sized:
        if current and rows + n > target_rows:
            groups.append(current)
            current, rows = [], 0
        current.append((p, n))
        rows += n
    if current:
        groups.append(current)
    return groups
