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
* ``compact()`` writes a journal ``_compact-<id>.json`` naming the merged part and its sources,
  then the merged part, deletes the sources and finally the journal. Readers that find a journal
  whose merged part exists skip the listed sources, so no row is ever seen twice, and a journal
  whose merged part is missing changes nothing.
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
from ..errors import InvalidArgumentError, MissingFileError, StateError
from .schema import SCHEMA_VERSION, TABLES, conform, empty, schema_of

MANIFEST = "manifest.json"
FORMAT = "tumorboard.traj"
PART_SUFFIX = ".parquet"
COMPRESSION = "zstd"
_HOST = "".join(c if c.isalnum() else "-" for c in socket.gethostname())[:24] or "host"


class StoreVersionError(InvalidArgumentError):
    """The store was written by a newer schema version than this tumorboard reads."""


@dataclass(frozen=True)
class CompactionResult:
    """What :meth:`Store.compact` did: per table, parts before and after, and rows moved."""

    parts_before: dict[str, int]
    parts_after: dict[str, int]
    rows_rewritten: dict[str, int]


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)  # noqa: UP017 (py3.10 target)


class Store:
    """A trajectory store: a directory of Parquet parts per table plus a versioned manifest.

    Args:
        path: the store directory. Created (with its manifest) when missing and ``create``.
        create: create a new store when ``path`` holds none; otherwise raise FileNotFoundError.
        fsync: fsync every part and its directory before it counts as written (durable against
            power loss, not only process crashes); costs one fsync per part.

    Raises:
        StoreVersionError: the manifest's schema version is newer than ``SCHEMA_VERSION``.
        ValueError: ``path`` exists, is not empty and holds no manifest.

    Example::

        store = Store("runs/store")
        acc = (store.items(with_runs=True)
               .group_by("model", "task").agg(pl.col("correct").mean()).collect())
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
        if table not in TABLES:
            raise InvalidArgumentError(f"table: expected one of {tuple(TABLES)}, got {table!r}")

    def parts(self, table: str) -> list[Path]:
        """The visible part files of ``table``, oldest name first (a snapshot)."""
        self._check_table(table)
        directory = self.path / table
        names: set[str] = set()
        journals: list[str] = []
        with os.scandir(directory) as it:
            for entry in it:
                name = entry.name
                if name.startswith("_compact-") and name.endswith(".json"):
                    journals.append(name)
                elif name.endswith(PART_SUFFIX) and not name.startswith((".", "_")):
                    names.add(name)
        for journal in journals:
            try:
                doc = json.loads((directory / journal).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # being written or already removed: its sources are still valid
            if doc.get("target") in names:
                names.difference_update(doc.get("sources", ()))
        if table != "imports" and any(n.startswith("imp-") for n in names):
            committed = self._committed_batches()
            names = {
                n
                for n in names
                if not n.startswith("imp-") or n[4 : -len(PART_SUFFIX)] in committed
            }
        return [directory / n for n in sorted(names)]

    def _committed_batches(self) -> set[str]:
        with os.scandir(self.path / "imports") as it:
            return {
                e.name[4 : -len(PART_SUFFIX)]
                for e in it
                if e.name.startswith("imp-") and e.name.endswith(PART_SUFFIX)
            }

    def _new_part_name(self, prefix: str = "part") -> str:
        return (
            f"{prefix}-{time.time_ns():016x}-{_HOST}-{os.getpid()}-"
            f"{uuid.uuid4().hex[:12]}{PART_SUFFIX}"
        )

    def write_part(self, table: str, data: pa.Table, *, name: str | None = None) -> Path:
        """Writes an already conforming Arrow table as one new part (temp file + rename).
        Prefer :meth:`write`, which validates; this is the fast path for callers that built
        the table against ``schema_of(table)`` themselves."""
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
        self, table: str, data: Any, *, defaults: Mapping[str, Any] | None = None
    ) -> Path | None:
        """Validates ``data`` against the ``table`` schema (see ``schema.conform``) and writes
        it as one new part; returns its path, or None for zero rows."""
        self._check_table(table)
        conformed = conform(data, table, defaults=defaults)
        if conformed.num_rows == 0:
            return None
        return self.write_part(table, conformed)

    def write_runs(self, data: Any, **kw: Any) -> Path | None:
        """``write("runs", data)``."""
        return self.write("runs", data, **kw)

    def write_items(self, data: Any, **kw: Any) -> Path | None:
        """``write("items", data)``: the bulk path for many question records at once."""
        return self.write("items", data, **kw)

    def write_events(self, data: Any, **kw: Any) -> Path | None:
        """``write("events", data)``."""
        return self.write("events", data, **kw)

    # ------------------------------------------------------------------ reading

    def scan(self, table: str) -> Any:
        """A polars LazyFrame over the visible parts of ``table`` (any of runs, items, events,
        imports), with the table's full schema even when the store is empty."""
        import polars as pl

        paths = self.parts(table)
        schema = pl.from_arrow(empty(table)).schema  # type: ignore[union-attr]
        if not paths:
            return pl.LazyFrame(schema=schema)
        return pl.scan_parquet(
            [str(p) for p in paths],
            schema=schema,
            missing_columns="insert",
            extra_columns="ignore",
            hive_partitioning=False,
            glob=False,
        )

    def runs(self) -> Any:
        """LazyFrame of the runs table."""
        return self.scan("runs")

    def items(self, *, with_runs: bool = False) -> Any:
        """LazyFrame of the items table; with ``with_runs`` also the run's benchmark, track,
        model and tools columns (left join on run_id), which is what scorers group by."""
        import polars as pl

        lf = self.scan("items")
        if with_runs:
            runs = (
                self.scan("runs")
                .select("run_id", "benchmark", "track", "model", "tools")
                .unique(subset="run_id", keep="first", maintain_order=True)
            )
            lf = lf.join(runs, on="run_id", how="left")
            lf = lf.with_columns(pl.col("tools").fill_null(False))
        return lf

    def events(self) -> Any:
        """LazyFrame of the events table."""
        return self.scan("events")

    def imports(self) -> Any:
        """LazyFrame of the imports table (content hashes of imported log files)."""
        return self.scan("imports")

    def imported_hashes(self) -> set[str]:
        """Content hashes of every committed import."""
        paths = self.parts("imports")
        if not paths:
            return set()
        tables = [pq.read_table(p, columns=["content_hash"]) for p in paths]
        return set(pa.concat_tables(tables).column("content_hash").to_pylist())

    def count(self, table: str) -> int:
        """Rows in ``table`` from the part footers (no data read)."""
        return sum(pq.ParquetFile(p).metadata.num_rows for p in self.parts(table))

    # ------------------------------------------------------------------ import batches

    def commit_batch(self, batch: str, tables: Mapping[str, pa.Table], imports: pa.Table) -> None:
        """Writes one atomic import batch: the parts ``imp-<batch>.parquet`` of each table in
        ``tables`` (conforming Arrow tables), then the commit part in ``imports``. Re-running a
        batch with the same id overwrites its parts (idempotent)."""
        name = f"imp-{batch}{PART_SUFFIX}"
        for table, data in tables.items():
            if table == "imports":
                raise InvalidArgumentError(
                    "tables: the imports part is the commit; pass it as imports"
                )
            if data.num_rows:
                self.write_part(table, data, name=name)
        self.write_part("imports", imports, name=name)

    # ------------------------------------------------------------------ compaction

    @contextlib.contextmanager
    def _compaction_lock(self) -> Iterator[None]:
        lock_path = self.path / "_compact.lock"
        fh = open(lock_path, "a+")  # noqa: SIM115
        try:
            try:
                import fcntl

                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except ImportError:  # pragma: no cover (non-POSIX)
                pass
            except OSError:
                raise StateError(f"{self.path}: another process is compacting this store") from None
            yield
        finally:
            fh.close()

    def _recover_journals(self, table: str) -> None:
        directory = self.path / table
        for journal in sorted(directory.glob("_compact-*.json")):
            try:
                doc = json.loads(journal.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                doc = {}
            if doc.get("target") and (directory / doc["target"]).exists():
                for src in doc.get("sources", ()):
                    with contextlib.suppress(FileNotFoundError):
                        (directory / src).unlink()
            with contextlib.suppress(FileNotFoundError):
                journal.unlink()
        # Temporary files older than an hour are left over from killed writers.
        remove_temp_files(directory, min_age_s=3600)

    def compact(
        self,
        tables: Sequence[str] | str = ("runs", "items", "events"),
        *,
        small_rows: int = 200_000,
        target_rows: int = 2_000_000,
    ) -> CompactionResult:
        """Merges small parts (fewer than ``small_rows`` rows) into parts of up to
        ``target_rows`` rows, in name order. Safe while other processes write new parts (only
        parts listed at the start are merged) and crash-safe (journal protocol, see the module
        docstring); a second concurrent ``compact`` raises RuntimeError. Readers holding a
        LazyFrame from before the compaction must re-open it (merged sources are deleted).
        The imports table is never compacted (its parts are the import commit records)."""
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
        with self._compaction_lock():
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


def _groups(sized: Iterable[tuple[Path, int]], target_rows: int) -> list[list[tuple[Path, int]]]:
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
