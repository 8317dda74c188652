"""``Store``: a trajectory store on disk, Parquet part files listed by a manifest.

Layout (docs/trajectory-schema.md)::

    STORE/manifest.json       {"format": "tumorboard.traj", "schema_version": 2, "layout": 2}
    STORE/_log/<n>.json       commit records: the parts each commit added and removed
    STORE/_log/<n>.checkpoint.json   every part as of commit n (the records up to n folded in)
    STORE/runs/*.parquet         one directory per table; every file is one immutable part
    STORE/items/*.parquet
    STORE/events/*.parquet
    STORE/imports/*.parquet

**The manifest is the source of truth.** The manifest is ``manifest.json`` (format and schema
version) plus the commit log ``_log/``: the newest checkpoint and the commit records after it,
numbered without gaps, replayed in order. A commit record lists, per table, the parts it adds
(name, size in bytes, rows) and the parts it removes. This is the transaction-log design of
Delta Lake (Armbrust et al., "Delta Lake: High-Performance ACID Table Storage over Cloud Object
Stores", PVLDB 13(12), 2020, §3: numbered JSON commit records of add/remove actions, replayed
from the last checkpoint). A part file that no commit lists is not part of the store: readers
ignore it with a :class:`StrayPartWarning` naming it (unless its writer is still running). A
part the manifest lists that is missing, or whose size differs from the recorded one (truncated,
zero bytes, replaced), is an error naming the file (:class:`CorruptStoreError`). So neither a
stray copy of a part nor a lost or damaged one can change what scores count without a word.

Writes. Every part is written under a hidden temporary name and renamed into place
(``tumorboard._io.atomic_path``), then a commit record naming it is published. The record is
written the same way and renamed to the next free number under a short lock (``_log.lock``,
an ``flock``), so any number of processes can commit. The record's rename is the one step at
which a commit becomes visible: a writer killed before it leaves only stray parts, one killed
after it has committed. A commit that replaces parts (compaction merging small parts, an import
replacing items) adds the new part and removes the old ones in that one record, so a reader
sees either the old parts or the new one, never both; the old files are deleted afterwards,
and deleting them is repeated by the next :meth:`Store.compact` or :meth:`Store.check` when a
crash intervened (the records still name them). Every 256 commits, and after every compaction,
the state is written as a checkpoint; the previous checkpoint and the records since it are kept
(a lost newest checkpoint changes nothing), older ones are deleted.

Imports and compaction also take the store's write lock (``_store.lock``, an ``flock``):
imports wait for each other, so each one resolves its replacements against a stable store;
``compact()`` refuses to start while an import holds it. Other writers (the Recorder,
``write``) only add parts and need only the short commit lock.

Fault injection. Each step of a commit, a compaction and a checkpoint calls ``_fault(step)``,
which does nothing unless a test set ``_FAULT_HOOK`` of :mod:`tumorboard.traj._log`
(tests/test_fuzz_store.py raises or kills the process at every step in turn and checks what
readers see afterwards and after recovery).

Modules. :class:`Store` is this module's class on three mixin bases, one job each:
``_log.py`` (the manifest and the commit log: replay, commit records, checkpoints, the locks),
``_parts.py`` (part files: naming, writing, listing against the manifest, scanning) and
``_maintenance.py`` (layout upgrade, compaction, verify, check and repair, with
:class:`CompactionResult`, :class:`StoreProblem` and :class:`StoreCheck`). This module keeps the
public reads and writes and import batches, and re-exports the names that were defined here.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from .._typing import Frame
from ..errors import CorruptStoreError as CorruptStoreError  # re-exported
from ..errors import InvalidArgumentError, MissingFileError, StateError, TumorboardError
from ..errors import StoreVersionError as StoreVersionError  # re-exported
from ..errors import StrayPartWarning as StrayPartWarning  # re-exported
from . import _log
from ._log import _HOST as _HOST  # re-exported
from ._log import CHECKPOINT_EVERY as CHECKPOINT_EVERY  # re-exported
from ._log import FORMAT as FORMAT  # re-exported
from ._log import LAYOUT, LOG, MANIFEST, PART_SUFFIX, _fault, _unlink_all
from ._log import LOCK as LOCK  # re-exported
from ._log import LOG_LOCK as LOG_LOCK  # re-exported
from ._log import _writer_alive as _writer_alive  # re-exported
from ._maintenance import CompactionResult as CompactionResult  # re-exported
from ._maintenance import StoreCheck as StoreCheck  # re-exported
from ._maintenance import StoreProblem as StoreProblem  # re-exported
from ._maintenance import _StoreMaintenance
from ._parts import COMPRESSION as COMPRESSION  # re-exported
from ._parts import PART_KEY as PART_KEY  # re-exported
from ._parts import QUARANTINE as QUARANTINE  # re-exported
from ._parts import READ_ATTEMPTS
from ._parts import REPLACES_KEY as REPLACES_KEY  # re-exported
from .schema import TABLES, conform

_T = TypeVar("_T")


class Store(_StoreMaintenance):
    """A trajectory store: Parquet parts per table, listed by a manifest and its commit log.

    Parameters
    ----------
    path : str or os.PathLike
        The store directory. Created (with its manifest) when missing and ``create``.
    create : bool, default True
        Create a new store when ``path`` holds none; otherwise raise
        :class:`~tumorboard.errors.MissingFileError` (a FileNotFoundError).
    fsync : bool, default True
        fsync every part, commit record and their directory before they count as written
        (durable against power loss, not only process crashes).
    page_checksums : bool, default True
        Write a CRC-32 into every Parquet page header of the parts this object writes, which
        :meth:`verify`, :meth:`check`, :meth:`compact` and scoring compare with the page's
        bytes (a flipped bit is found and the part named). Parts written without checksums
        (older stores) still read; their pages are reported as unchecked, not as damage.
    retain_s : float, optional
        How long the file of a part that a commit removed (a compaction's sources, a replaced
        import part) stays on disk: a reader that listed the parts before the commit, such
        as a LazyFrame of :meth:`items` collected later, still finds every file it names
        for that long. Later maintenance (a compaction, a checkpoint, ``check(repair=True)``)
        deletes the older ones. 0 deletes them at once (readers then need :meth:`read`).
        None (the default) means ``tumorboard.traj._log.RETAIN_S``, 600 seconds.

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
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        fsync: bool = True,
        page_checksums: bool = True,
        retain_s: float | None = None,
    ) -> None:
        if retain_s is None:
            retain_s = _log.RETAIN_S
        if (
            isinstance(retain_s, bool)
            or not isinstance(retain_s, (int, float))
            or not (0 <= retain_s < float("inf"))
        ):
            raise InvalidArgumentError(
                f"retain_s: expected a number of seconds >= 0, got {retain_s!r}"
            )
        self.path = Path(path)
        self.retain_s = float(retain_s)
        self.fsync = bool(fsync)
        self.page_checksums = bool(page_checksums)
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
        (self.path / LOG).mkdir(exist_ok=True)
        if self.manifest.get("layout") != LAYOUT:
            self._upgrade_layout()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r}, schema_version={self.schema_version})"

    # ------------------------------------------------------------------ writing

    def write_parts(self, tables: Mapping[str, pa.Table], *, op: str = "write") -> dict[str, Path]:
        """Write conforming Arrow tables as one new part each, committed together.

        The parts become visible at once (one commit record), or not at all when the writer is
        killed before the commit: a Recorder's flush of items, events and its run row is one
        commit. Empty tables are skipped.

        Parameters
        ----------
        tables : mapping of str to pyarrow.Table
            Table name -> rows with exactly the table's schema (metadata aside).
        op : str, default "write"
            What the commit record says wrote it.

        Returns
        -------
        dict of str to pathlib.Path
            The new part of each non-empty table.

        Raises
        ------
        InvalidArgumentError
            An unknown table, or data without the table's schema.
        """
        for table, data in tables.items():
            self._check_data(table, data)
        written: dict[str, Path] = {}
        try:
            for table, data in tables.items():
                if data.num_rows:
                    written[table] = self._write_file(table, data, self._new_part_name())
        except BaseException:
            _unlink_all(written.values())
            raise
        if written:  # removes the parts itself when it fails before publishing
            self._commit({t: [(p, tables[t].num_rows)] for t, p in written.items()}, op=op)
        return written

    def write_part(self, table: str, data: pa.Table, *, name: str | None = None) -> Path:
        """Write an already conforming Arrow table as one new committed part.

        Prefer :meth:`write`, which validates; this is the fast path for callers that built
        the table against ``schema_of(table)`` themselves.

        Parameters
        ----------
        table : {"runs", "items", "events", "imports"}
            The table.
        data : pyarrow.Table
            Rows with exactly the table's schema (metadata aside).
        name : str, optional
            The part's file name (default: a new unique name); it must not name a file of the
            table already.

        Returns
        -------
        pathlib.Path
            The part file.

        Raises
        ------
        InvalidArgumentError
            An unknown table, ``data`` without the table's schema, or a ``name`` in use.
        """
        self._check_data(table, data)
        if name is None:
            name = self._new_part_name()
        elif (
            not name.endswith(PART_SUFFIX)
            or name.startswith((".", "_"))
            or "/" in name
            or os.sep in name
        ):
            raise InvalidArgumentError(
                f"name: expected a file name ending in {PART_SUFFIX} (not hidden), got {name!r}"
            )
        elif (self.path / table / name).exists():
            raise InvalidArgumentError(f"name: {self.path / table / name} exists already")
        final = self._write_file(table, data, name)
        self._commit({table: [(final, data.num_rows)]}, op="write")
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

    def read(self, fn: Callable[[Store], _T], *, attempts: int = READ_ATTEMPTS) -> _T:
        """Run a read of the store against one consistent state of its manifest.

        ``fn(self)`` lists parts and reads them (scans, collects). When it fails because a
        part vanished or changed under it (``FileNotFoundError``, a
        :class:`CorruptStoreError` or a polars or pyarrow error) and a commit landed
        meanwhile (another process compacted, imported or repaired), it is run again from
        the new manifest, up to ``attempts`` times. So a concurrent compaction never shows as
        a missing file or a false corruption. A failure while the manifest stood still is
        real: a polars or pyarrow error is turned into a :class:`CorruptStoreError` naming
        the damaged part (found by :meth:`verify`), when one is found.

        Parameters
        ----------
        fn : callable
            Takes the store, returns what was read. It may run more than once, so it should
            only read (a LazyFrame must be collected inside it).
        attempts : int, default READ_ATTEMPTS
            Runs of ``fn`` at most.

        Returns
        -------
        object
            What ``fn`` returned.

        Raises
        ------
        CorruptStoreError
            A listed part is missing or damaged (named), and no commit explains it.
        StateError
            The store changed under every one of the ``attempts`` runs.
        InvalidArgumentError
            ``attempts`` below 1.

        Examples
        --------
        >>> df = store.read(lambda s: s.items().collect())  # doctest: +SKIP
        """
        if attempts < 1:
            raise InvalidArgumentError(f"attempts: expected >= 1, got {attempts!r}")
        for attempt in range(attempts):
            version = self._version()
            try:
                return fn(self)
            except Exception as exc:
                if not _is_read_failure(exc):
                    raise
                if self._version() == version:
                    raise self._explain(exc) from exc
                if attempt + 1 == attempts:
                    raise StateError(
                        f"{self.path}: the store changed under each of {attempts} reads "
                        "(another process keeps committing); try again"
                    ) from exc
                time.sleep(min(0.002 * 2**attempt, 0.1))
        raise AssertionError("unreachable")  # pragma: no cover

    def _explain(self, exc: Exception) -> Exception:
        """Return the error naming the damaged part behind a read failure, else ``exc``."""
        if isinstance(exc, TumorboardError):
            return exc
        try:
            self.verify(read=True)
        except CorruptStoreError as found:
            return found
        return exc

    def count(self, table: str) -> int:
        """Count the rows of ``table`` from the manifest (no data read).

        Parameters
        ----------
        table : {"runs", "items", "events", "imports"}
            The table.

        Returns
        -------
        int
            The rows of its listed parts.
        """
        self._check_table(table)
        return sum(rows for _size, rows in self._live(table).values())

    # ------------------------------------------------------------------ import batches

    def commit_batch(
        self,
        batch: str,
        tables: Mapping[str, pa.Table],
        imports: pa.Table,
        *,
        replace: Mapping[str, Sequence[tuple[Path, pa.Table]]] | None = None,
    ) -> BatchParts:
        """Write one atomic import batch: its parts and its imports rows, in one commit.

        The parts of each table in ``tables``, the replacement copies of ``replace`` and the
        batch's rows of the imports table are written as parts named ``imp-<batch>-...``, then
        one commit record adds them all and removes the replaced parts: readers see the new
        rows, and stop seeing the replaced ones, at that one step. Afterwards the replaced
        files are deleted. Callers hold :meth:`write_lock` when ``replace`` is given.

        Parameters
        ----------
        batch : str
            The batch id (letters, digits, ``-`` and ``_``).
        tables : mapping of str to pyarrow.Table
            Conforming Arrow tables of runs, items and events (empty tables are skipped).
        imports : pyarrow.Table
            The batch's rows of the imports table.
        replace : mapping of str to sequence of (pathlib.Path, pyarrow.Table), optional
            Per table: (listed part, its rows to keep). Each part is swapped for a copy holding
            only the kept rows (none when no row is kept) when the batch commits.

        Returns
        -------
        BatchParts
            The names of the parts the batch added, copied and removed.

        Raises
        ------
        InvalidArgumentError
            ``tables`` holds the imports table, or a part to replace is not a listed part.
        """
        if not batch or not re.fullmatch(r"[A-Za-z0-9_-]+", batch):
            raise InvalidArgumentError(
                f"batch: expected an id of letters, digits, '-' and '_', got {batch!r}"
            )
        for table, data in tables.items():
            if table == "imports":
                raise InvalidArgumentError(
                    "tables: the imports part is the commit; pass it as imports"
                )
            self._check_data(table, data)
        self._check_data("imports", imports)
        state = self._load_state()
        removes: dict[str, list[str]] = {}
        for table, swaps in (replace or {}).items():
            self._check_table(table)
            directory = self.path / table
            for source, kept in swaps:
                source = Path(source)
                if source.parent != directory or source.name not in state.parts[table]:
                    raise InvalidArgumentError(
                        f"replace: {source} is not a listed part of the {table} table"
                    )
                self._check_data(table, kept)
                removes.setdefault(table, []).append(source.name)
        prefix = f"imp-{batch}"
        add: dict[str, list[tuple[Path, int]]] = {}
        fresh: dict[str, list[str]] = {}
        copies: dict[str, dict[str, str]] = {}
        try:
            for table, data in tables.items():
                if data.num_rows:
                    part = self._write_file(table, data, self._new_part_name(prefix))
                    add.setdefault(table, []).append((part, data.num_rows))
                    fresh.setdefault(table, []).append(part.name)
            for table, swaps in (replace or {}).items():
                for source, kept in swaps:
                    if kept.num_rows:
                        name = self._new_part_name(prefix)
                        part = self._write_file(table, kept, name, replaces=[Path(source).name])
                        add.setdefault(table, []).append((part, kept.num_rows))
                        copies.setdefault(table, {})[Path(source).name] = part.name
            part = self._write_file("imports", imports, self._new_part_name(prefix))
            add.setdefault("imports", []).append((part, imports.num_rows))
            fresh.setdefault("imports", []).append(part.name)
        except BaseException:
            _unlink_all(p for v in add.values() for p, _ in v)
            raise
        self._commit(add, removes, op=f"import {batch}")
        for table, names in removes.items():  # the swap is done; tidy up
            for name in names:
                if not self.retain_s:  # else kept for readers, deleted by later maintenance
                    with contextlib.suppress(FileNotFoundError):
                        (self.path / table / name).unlink()
                _fault("import:source-removed")
        return BatchParts(
            added={t: tuple(v) for t, v in fresh.items()},
            copies=copies,
            removed={t: tuple(v) for t, v in removes.items()},
        )


@dataclass(frozen=True)
class BatchParts:
    """The part files one :meth:`Store.commit_batch` added, copied and removed, per table.

    Attributes
    ----------
    added : dict of str to tuple of str
        The names of the new parts of the batch's rows (the imports part among them).
    copies : dict of str to dict of str to str
        Replaced part name to the name of its copy holding the rows it keeps (a part whose
        rows are all replaced has no copy).
    removed : dict of str to tuple of str
        The names of the parts the batch replaced.
    """

    added: dict[str, tuple[str, ...]]
    copies: dict[str, dict[str, str]]
    removed: dict[str, tuple[str, ...]]


def _is_read_failure(exc: BaseException) -> bool:
    """Whether ``exc`` may come from a part that vanished or changed under a read."""
    if isinstance(exc, (FileNotFoundError, CorruptStoreError)):
        return True
    if isinstance(exc, TumorboardError):
        return False
    module = type(exc).__module__.split(".")[0]
    return module in ("polars", "pyarrow") or isinstance(exc, OSError)
