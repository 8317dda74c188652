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
which does nothing unless a test set ``_FAULT_HOOK`` (tests/test_fuzz_store.py raises or kills
the process at every step in turn and checks what readers see afterwards and after recovery).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import socket
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from .. import __version__
from .._io import atomic_path, is_temp_name, remove_temp_files, temp_files
from .._json import json_text
from .._typing import Frame
from ..errors import CorruptStoreError as CorruptStoreError  # re-exported
from ..errors import (
    InvalidArgumentError,
    MissingFileError,
    StateError,
    TumorboardError,
)
from ..errors import StoreVersionError as StoreVersionError  # re-exported
from ..errors import StrayPartWarning as StrayPartWarning  # re-exported
from ._pages import PageChecksumError, verify_page_checksums
from .schema import SCHEMA_VERSION, TABLES, conform, polars_schema, schema_of

MANIFEST = "manifest.json"
FORMAT = "tumorboard.traj"
PART_SUFFIX = ".parquet"
COMPRESSION = "zstd"
LOCK = "_store.lock"
LOG = "_log"
LOG_LOCK = "_log.lock"
#: Arrow metadata of every part: its own file name and the parts it replaces (JSON list).
PART_KEY = b"tumorboard.traj.part"
REPLACES_KEY = b"tumorboard.traj.replaces"
QUARANTINE = "_quarantine"
#: The on-disk layout: 2 is the manifest + commit log; stores without the key (layout 1, parts
#: found by listing the folders) are converted when first opened.
LAYOUT = 2
#: Commits between automatic checkpoints.
CHECKPOINT_EVERY = 256
#: A stray part of another host younger than this may belong to a commit in flight.
_IN_FLIGHT_S = 3600.0
_RECORD_RE = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT_RE = re.compile(r"^(\d{20})\.checkpoint\.json$")
_PART_NAME_RE = re.compile(
    r"-(?P<ns>[0-9a-f]{16})-(?P<host>[A-Za-z0-9-]+)-(?P<pid>[0-9]+)-[0-9a-f]{12}\.parquet$"
)
_LEGACY_JOURNALS = ("_compact-", "_replace-")
#: errno values of a filesystem without hard links
_NO_LINKS = {
    getattr(errno, name) for name in ("EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS", "EMLINK")
    if hasattr(errno, name)
}  # fmt: skip
#: Attempts of :meth:`Store.read` when the manifest changes under a read.
READ_ATTEMPTS = 20
_T = TypeVar("_T")
_HOST = "".join(c if c.isalnum() else "-" for c in socket.gethostname())[:24] or "host"

#: Set by tests only: called with the name of each step of a commit, compaction or checkpoint.
_FAULT_HOOK: Callable[[str], None] | None = None


def _fault(step: str) -> None:
    """Call the fault-injection hook at ``step`` (a no-op unless a test set the hook)."""
    if _FAULT_HOOK is not None:
        _FAULT_HOOK(step)


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


@dataclass(frozen=True)
class StoreProblem:
    """One problem :meth:`Store.check` found.

    Attributes
    ----------
    kind : str
        ``"missing"`` (a part the manifest lists is not there), ``"damaged"`` (a listed part
        whose size, footer, rows or data are not what was committed: truncated, zero bytes,
        overwritten, corrupt), ``"stray"`` (a part no commit lists), ``"leftover"`` (a part a
        commit removed that a crash left on disk), ``"log"`` (a commit record or checkpoint
        missing or unreadable), ``"unlisted"`` (a whole part of a commit record the damaged
        log lost, listed again by the repair), ``"temporary"`` (a temporary file of a killed
        writer, older than an hour).
    path : str
        The file.
    detail : str
        What is wrong.
    action : str
        What ``repair=True`` does (or did) about it.
    repaired : bool
        Whether it was repaired.
    rows : int or None
        Rows the manifest lists for the part (missing and damaged parts), else None.
    """

    kind: str
    path: str
    detail: str
    action: str
    repaired: bool = False
    rows: int | None = None


@dataclass(frozen=True)
class StoreCheck:
    """The result of :meth:`Store.check`: the problems found and, after repair, what was done.

    Attributes
    ----------
    path : str
        The store directory.
    problems : tuple of StoreProblem
        Every problem found, in the order checked.
    parts, rows : dict of str to int
        Parts and rows of each table the manifest lists (after repair, when repaired).
    repair : bool
        Whether repairs were made.
    """

    path: str
    problems: tuple[StoreProblem, ...]
    parts: dict[str, int]
    rows: dict[str, int]
    repair: bool = False

    @property
    def ok(self) -> bool:
        """True when no problem remains (none found, or every one repaired)."""
        return all(p.repaired for p in self.problems)

    @property
    def remaining(self) -> tuple[StoreProblem, ...]:
        """The problems not repaired."""
        return tuple(p for p in self.problems if not p.repaired)

    def to_dict(self) -> dict[str, Any]:
        """Return the result as plain data (for JSON).

        Returns
        -------
        dict
            ``path``, ``ok``, ``repair``, ``parts``, ``rows`` and ``problems`` (dicts).
        """
        return {
            "path": self.path,
            "ok": self.ok,
            "repair": self.repair,
            "parts": dict(self.parts),
            "rows": dict(self.rows),
            "problems": [
                {
                    "kind": p.kind,
                    "path": p.path,
                    "detail": p.detail,
                    "action": p.action,
                    "repaired": p.repaired,
                    "rows": p.rows,
                }
                for p in self.problems
            ],
        }

    def __str__(self) -> str:
        counts = ", ".join(f"{t} {self.parts[t]} parts / {self.rows[t]:,} rows" for t in self.parts)
        lines = [f"store {self.path}: {counts}"]
        for p in self.problems:
            state = "repaired" if p.repaired else "problem"
            rows = f", {p.rows:,} rows" if p.rows is not None else ""
            lines.append(f"  {state}: {p.kind}: {p.path}: {p.detail}{rows} ({p.action})")
        if not self.problems:
            lines.append("  no problems found")
        elif self.ok:
            lines.append(f"  {len(self.problems)} problem(s), all repaired")
        else:
            hint = "" if self.repair else f"; `tumorboard store check {self.path} --repair` repairs"
            lines.append(f"  {len(self.remaining)} problem(s) remain{hint}")
        return "\n".join(lines)


@dataclass
class _State:
    """The manifest replayed: live parts per table (name -> (size, rows)) in commit order."""

    version: int = 0
    checkpoint: int = 0
    parts: dict[str, dict[str, tuple[int, int]]] = field(
        default_factory=lambda: {t: {} for t in TABLES}
    )
    #: Parts the records after the checkpoint removed (their files may be left by a crash).
    removed: dict[str, set[str]] = field(default_factory=lambda: {t: set() for t in TABLES})
    #: Log files that are missing or unreadable (only when replayed tolerantly).
    log_problems: list[tuple[str, str]] = field(default_factory=list)


def _utcnow() -> datetime:
    """Return the current time in UTC (timezone-aware)."""
    return datetime.now(timezone.utc)  # noqa: UP017 (py3.10 target)


def _entry(name: str, size: int, rows: int) -> dict[str, Any]:
    """Return a part's entry in a commit record or checkpoint."""
    return {"name": name, "rows": int(rows), "size": int(size)}


def _check_entries(doc: Any, key: str) -> dict[str, list[Any]]:
    """Return ``doc[key]`` (table -> list) checked for shape; raise ValueError when malformed."""
    value = doc.get(key, {})
    if not isinstance(value, dict) or not all(
        t in TABLES and isinstance(v, list) for t, v in value.items()
    ):
        raise InvalidArgumentError(f"{key!r} is not a mapping of table -> list")
    return value


def _parse_entry(e: Any) -> tuple[str, int, int]:
    """Return (name, size, rows) of an entry; raise ValueError when malformed."""
    if not isinstance(e, dict):
        raise InvalidArgumentError("a part entry is not an object")
    name, size, rows = e.get("name"), e.get("size"), e.get("rows")
    if not isinstance(name, str) or not name.endswith(PART_SUFFIX) or "/" in name:
        raise InvalidArgumentError(f"bad part name {name!r}")
    if not isinstance(size, int) or not isinstance(rows, int) or size < 0 or rows < 0:
        raise InvalidArgumentError(f"bad size or rows of {name!r}")
    return name, size, rows


def _writer_alive(name: str, mtime: float) -> bool:
    """Whether a part's writer (from its name: host and pid) may still be about to commit it."""
    m = _PART_NAME_RE.search(name)
    if m is None:
        return False
    if m["host"] != _HOST:
        return time.time() - mtime < _IN_FLIGHT_S
    pid = int(m["pid"])
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


class Store:
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
    ) -> None:
        self.path = Path(path)
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
        layout = doc.get("layout", 1)
        if not isinstance(layout, int) or layout > LAYOUT:
            raise StoreVersionError(
                f"{self.path}: the store has layout {layout!r}, but this tumorboard "
                f"({__version__}) reads layouts up to {LAYOUT}; upgrade tumorboard to open it"
            )
        return doc

    def _create(self) -> dict[str, Any]:
        """Create the store directory and its manifest; refuse a non-empty foreign directory."""
        if self.path.exists() and not self.path.is_dir():
            raise InvalidArgumentError(f"{self.path}: exists and is not a directory")
        if self.path.is_dir():
            own = {*TABLES, LOG, LOCK, LOG_LOCK}
            stray = [
                p.name
                for p in self.path.iterdir()
                if p.name not in own and not is_temp_name(p.name)
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
            "layout": LAYOUT,
            "tables": list(TABLES),
            "created_at": _utcnow().isoformat(),
            "created_by": f"tumorboard {__version__}",
        }
        target = self.path / MANIFEST
        if not target.exists():  # concurrent creators write identical manifests
            with atomic_path(target, fsync=True) as tmp:
                tmp.write_text(json_text(doc) + "\n", encoding="utf-8")
        return self._read_manifest(target)

    def _upgrade_layout(self) -> None:
        """Convert a layout-1 store (parts found by listing) to the manifest + commit log.

        Layout 1 showed every part in the table folders except the parts of import batches
        without a commit part (``imports/imp-<batch>.parquet``) and the sources of a swap
        journal (``_compact-*.json``, ``_replace-*.json``) whose target was visible. Exactly
        those parts become checkpoint 0; the swaps' sources and journals are removed.
        """
        with self._log_lock():
            doc = self._read_manifest(self.path / MANIFEST)
            if doc.get("layout") != LAYOUT:
                if not self._log_numbers()[0] and not self._log_numbers()[1]:
                    parts, garbage = self._layout1_parts()
                    state = _State()
                    for table, names in parts.items():
                        for name in names:
                            path = self.path / table / name
                            try:
                                rows = pq.ParquetFile(path).metadata.num_rows
                            except Exception:  # noqa: BLE001 - check() reports it as damaged
                                rows = 0
                            state.parts[table][name] = (path.stat().st_size, rows)
                    self._write_checkpoint(state, 0)
                    for path in garbage:
                        with contextlib.suppress(FileNotFoundError):
                            path.unlink()
                doc["layout"] = LAYOUT
                with atomic_path(self.path / MANIFEST, fsync=True) as tmp:
                    tmp.write_text(json_text(doc) + "\n", encoding="utf-8")
            self.manifest = doc

    def _layout1_parts(self) -> tuple[dict[str, list[str]], list[Path]]:
        """Return the parts a layout-1 reader saw per table, and the files to remove."""
        names: dict[str, set[str]] = {}
        journals: dict[str, list[Path]] = {}
        for table in TABLES:
            names[table], journals[table] = set(), []
            for p in (self.path / table).iterdir():
                if p.name.startswith(_LEGACY_JOURNALS) and p.name.endswith(".json"):
                    journals[table].append(p)
                elif p.name.endswith(PART_SUFFIX) and not p.name.startswith((".", "_")):
                    names[table].add(p.name)

        def batch(name: str) -> str:
            return name[4 : -len(PART_SUFFIX)].split(".", 1)[0]

        committed = {batch(n) for n in names["imports"] if n.startswith("imp-")}
        garbage: list[Path] = []
        for table in TABLES:
            if table != "imports":
                names[table] = {
                    n for n in names[table] if not n.startswith("imp-") or batch(n) in committed
                }
            for journal in journals[table]:
                try:
                    doc = json.loads(journal.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    doc = {}
                if isinstance(doc, dict) and doc.get("target") in names[table]:
                    sources = [s for s in doc.get("sources", ()) if isinstance(s, str)]
                    names[table].difference_update(sources)
                    garbage.extend(self.path / table / s for s in sources)
                garbage.append(journal)
        return {t: sorted(v) for t, v in names.items()}, garbage

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r}, schema_version={self.schema_version})"

    # ------------------------------------------------------------------ commit log

    @contextlib.contextmanager
    def _log_lock(self) -> Iterator[None]:
        """Hold the short commit lock (``_log.lock``): numbering records and checkpoints."""
        with self._flock(LOG_LOCK, wait=True):
            yield

    def _log_numbers(self) -> tuple[list[int], list[int]]:
        """Return the numbers of the commit records and of the checkpoints, ascending."""
        records, checkpoints = [], []
        with os.scandir(self.path / LOG) as it:
            for e in it:
                m = _RECORD_RE.match(e.name)
                if m:
                    records.append(int(m[1]))
                    continue
                m = _CHECKPOINT_RE.match(e.name)
                if m:
                    checkpoints.append(int(m[1]))
        return sorted(records), sorted(checkpoints)

    def _record_path(self, n: int) -> Path:
        """Return the path of commit record ``n``."""
        return self.path / LOG / f"{n:020d}.json"

    def _checkpoint_path(self, n: int) -> Path:
        """Return the path of checkpoint ``n``."""
        return self.path / LOG / f"{n:020d}.checkpoint.json"

    def _read_log_file(self, path: Path) -> dict[str, Any]:
        """Read one commit record or checkpoint; FileNotFoundError passes, damage is an error."""
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as exc:
            raise CorruptStoreError(
                path, f"unreadable commit log file ({exc}){self._hint}"
            ) from None
        if not isinstance(doc, dict):
            raise CorruptStoreError(
                path, f"unreadable commit log file (not a JSON object){self._hint}"
            )
        return doc

    @property
    def _hint(self) -> str:
        """The repair hint of a damaged commit log."""
        return (
            f"; `tumorboard store check {self.path} --repair` rebuilds the manifest from the "
            "records left"
        )

    def _load_state(self, *, tolerant: bool = False) -> _State:
        """Replay the manifest: the newest checkpoint, then every commit record after it.

        A checkpoint or record that vanishes while it is read (a concurrent checkpoint folded it
        in) makes the replay start over. A gap in the numbers, or a record that does not parse,
        is an error naming the file; with ``tolerant`` it is noted in ``log_problems`` and
        skipped (what :meth:`check` repairs from).
        """
        for _ in range(100):
            records, checkpoints = self._log_numbers()
            state, base = _State(), 0
            damaged: list[tuple[str, str]] = []
            try:
                for c in reversed(checkpoints):  # the newest readable checkpoint
                    loaded = _State()
                    try:
                        self._apply_checkpoint(loaded, c)
                    except CorruptStoreError as exc:
                        damaged.append((exc.path, "unreadable checkpoint"))
                        continue
                    state, base = loaded, c
                    break
                state.log_problems.extend(damaged)
                pending = [n for n in records if n > base]
                expected = range(base + 1, base + 1 + len(pending))
                if pending != list(expected):
                    again = self._log_numbers()
                    if again != (records, checkpoints):
                        continue  # a commit or checkpoint landed meanwhile: list again
                    missing = sorted(set(range(base + 1, pending[-1] + 1)) - set(pending))
                    if not tolerant:
                        raise CorruptStoreError(
                            self._record_path(missing[0]),
                            f"commit record missing ({len(missing)} record(s) of the store's "
                            "log, or the checkpoint before them, are gone: what they added or "
                            f"removed is unknown){self._hint}",
                        )
                    state.log_problems.extend(
                        (str(self._record_path(n)), "commit record missing") for n in missing
                    )
                state.checkpoint = base
                state.version = max([base, *pending])
                for n in pending:
                    try:
                        self._apply_record(state, n)
                    except CorruptStoreError as exc:
                        if not tolerant:
                            raise
                        state.log_problems.append((exc.path, "unreadable commit record"))
                return state
            except FileNotFoundError:
                continue  # folded into a newer checkpoint while we read: start over
        raise StateError(f"{self.path}: the store's commit log kept changing while it was read")

    def _apply_checkpoint(self, state: _State, n: int) -> None:
        """Load checkpoint ``n`` into ``state``; a malformed one is a CorruptStoreError."""
        path = self._checkpoint_path(n)
        doc = self._read_log_file(path)
        try:
            for table, entries in _check_entries(doc, "parts").items():
                for e in entries:
                    name, size, rows = _parse_entry(e)
                    state.parts[table][name] = (size, rows)
        except ValueError as exc:
            raise CorruptStoreError(path, f"unreadable checkpoint ({exc}){self._hint}") from None

    def _apply_record(self, state: _State, n: int) -> None:
        """Apply commit record ``n`` to ``state`` (all of it, or nothing when malformed)."""
        path = self._record_path(n)
        doc = self._read_log_file(path)
        try:
            removes = {t: [str(x) for x in v] for t, v in _check_entries(doc, "remove").items()}
            adds = {t: [_parse_entry(e) for e in v] for t, v in _check_entries(doc, "add").items()}
        except ValueError as exc:
            raise CorruptStoreError(path, f"unreadable commit record ({exc}){self._hint}") from None
        for table, names in removes.items():
            for name in names:
                state.parts[table].pop(name, None)
                state.removed[table].add(name)
        for table, entries in adds.items():
            for name, size, rows in entries:
                state.parts[table][name] = (size, rows)
                state.removed[table].discard(name)

    def _commit(
        self,
        add: Mapping[str, Sequence[tuple[Path, int]]],
        remove: Mapping[str, Sequence[str]] | None = None,
        *,
        op: str,
    ) -> int:
        """Publish one commit record: ``add`` (table -> (part, rows)), ``remove`` (names).

        Parts to remove must be live (the caller holds the write lock). Returns the record's
        number. Every ``CHECKPOINT_EVERY`` records a checkpoint is written.
        """
        remove = {t: list(v) for t, v in (remove or {}).items() if v}
        doc = {
            "add": {
                t: [_entry(p.name, p.stat().st_size, rows) for p, rows in v]
                for t, v in add.items()
                if v
            },
            "at": _utcnow().isoformat(),
            "by": f"tumorboard {__version__} {_HOST} {os.getpid()}",
            "op": op,
            "remove": remove,
        }
        logdir = self.path / LOG
        staged = logdir / f"_staged-{uuid.uuid4().hex}.json"
        published = False
        try:
            # a private name nobody reads; the link below publishes it whole, so no rename
            self._write_staged(staged, json_text(doc).encode("utf-8"))
            with self._log_lock():
                if remove:
                    live = self._load_state().parts
                    gone = [f"{t}/{n}" for t, names in remove.items() for n in names
                            if n not in live[t]]  # fmt: skip
                    if gone:
                        raise StateError(
                            f"{self.path}: cannot replace {', '.join(gone[:3])}: no longer "
                            "part of the store (another process changed it)"
                        )
                records, checkpoints = self._log_numbers()
                n = max([0, *records, *checkpoints]) + 1
                _fault("commit:numbered")
                self._publish(staged, self._record_path(n))
                published = True
                if self.fsync:
                    _fsync_dir(logdir)
                _fault("commit:published")
                last = checkpoints[-1] if checkpoints else 0
                if n - last >= CHECKPOINT_EVERY:
                    try:
                        self._checkpoint_locked()
                    except Exception as exc:  # the commit stands; the next one tries again
                        warnings.warn(
                            f"{self.path}: writing a checkpoint of the commit log failed "
                            f"({exc}); the store is intact",
                            stacklevel=3,
                        )
        except BaseException:
            if not published:  # nothing refers to the new parts: remove them
                _unlink_all(p for v in add.values() for p, _ in v)
            raise
        finally:
            with contextlib.suppress(FileNotFoundError):
                staged.unlink()
        return n

    @staticmethod
    def _publish(staged: Path, record: Path) -> None:
        """Give the staged record its number: a hard link, which never replaces a file.

        Filesystems without hard links get a rename; the commit lock makes the number free.
        """
        try:
            os.link(staged, record)
        except OSError as exc:
            if exc.errno not in _NO_LINKS or record.exists():
                raise
            os.rename(staged, record)

    def _write_staged(self, path: Path, data: bytes) -> None:
        """Write a new file ``path`` (exclusive create, fsync when the store promises it)."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if self.fsync:
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            raise
        os.close(fd)

    def _write_checkpoint(self, state: _State, n: int) -> None:
        """Write ``state`` as checkpoint ``n`` (atomic)."""
        doc = {
            "parts": {
                t: [_entry(name, s, r) for name, (s, r) in state.parts[t].items()] for t in TABLES
            },
            "version": n,
        }
        with atomic_path(self._checkpoint_path(n), fsync=self.fsync) as tmp:
            tmp.write_text(json_text(doc), encoding="utf-8")

    def _checkpoint_locked(self) -> None:
        """Fold the commit records into a new checkpoint (the commit lock is held).

        The files of parts the records removed are deleted first (their names are forgotten
        with the records), then the checkpoint is written. The previous checkpoint and the
        records after it are kept: should the new checkpoint be lost, replaying them gives the
        same state. Older records and checkpoints are deleted.
        """
        state = self._load_state()
        records, checkpoints = self._log_numbers()
        if checkpoints and checkpoints[-1] == state.version:
            return
        self._delete_removed(state)
        _fault("checkpoint:garbage-removed")
        self._write_checkpoint(state, state.version)
        _fault("checkpoint:written")
        previous = max([0, *(c for c in checkpoints if c < state.version)])
        for n in records:
            if n <= previous:
                with contextlib.suppress(FileNotFoundError):
                    self._record_path(n).unlink()
                _fault("checkpoint:record-removed")
        for n in checkpoints:
            if n < previous:
                with contextlib.suppress(FileNotFoundError):
                    self._checkpoint_path(n).unlink()

    def _delete_removed(self, state: _State) -> None:
        """Delete the files of parts the commit records removed (left by a crash)."""
        for table in TABLES:
            for name in sorted(state.removed[table]):
                if name not in state.parts[table]:
                    with contextlib.suppress(FileNotFoundError):
                        (self.path / table / name).unlink()

    # ------------------------------------------------------------------ parts

    def _check_table(self, table: str) -> None:
        """Check that ``table`` is one of the store's tables."""
        if table not in TABLES:
            raise InvalidArgumentError(f"table: expected one of {tuple(TABLES)}, got {table!r}")

    def parts(self, table: str) -> list[Path]:
        """List the part files of ``table`` the manifest lists, oldest name first (a snapshot).

        Part files no commit lists are ignored, with a :class:`StrayPartWarning` naming them
        (unless their writer may still be committing them).

        Parameters
        ----------
        table : {"runs", "items", "events", "imports"}
            The table.

        Returns
        -------
        list of pathlib.Path
            The part files.

        Raises
        ------
        CorruptStoreError
            A listed part is missing or its size is not the committed one (truncated, zero
            bytes, overwritten), or the commit log is damaged; the message names the files.
        """
        self._check_table(table)
        return [self.path / table / n for n in sorted(self._live(table))]

    def _live(self, table: str) -> dict[str, tuple[int, int]]:
        """Return the listed parts of ``table`` (name -> (size, rows)), checked against disk.

        A listed part found missing or resized while a commit lands (a concurrent compaction
        removed it) is no damage: the manifest is read again, up to ``READ_ATTEMPTS`` times.
        """
        for _ in range(READ_ATTEMPTS):
            state = self._load_state()
            live = state.parts[table]
            on_disk = self._part_entries(table)
            bad = self._mismatched(table, live, on_disk)
            if not bad or self._version() == state.version:
                break
        if bad:
            raise self._corrupt(bad)
        directory = self.path / table
        strays = [
            name
            for name, e in on_disk.items()
            if name not in live
            and name not in state.removed[table]
            and not _writer_alive_or_gone(name, e)
        ]
        if strays:
            strays.sort()
            shown = ", ".join(str(directory / n) for n in strays[:5])
            more = f" and {len(strays) - 5} more" if len(strays) > 5 else ""
            warnings.warn(
                f"{self.path}: {len(strays)} part file(s) in {table}/ that no commit lists are "
                f"ignored: {shown}{more} (left by a killed writer or copied in; "
                f"`tumorboard store check {self.path} --repair` moves them to {QUARANTINE}/)",
                StrayPartWarning,
                stacklevel=3,
            )
        return dict(live)

    def _part_entries(self, table: str) -> dict[str, os.DirEntry[str]]:
        """Return the part files in the folder of ``table`` by name (hidden ones left out)."""
        on_disk: dict[str, os.DirEntry[str]] = {}
        with os.scandir(self.path / table) as it:
            for e in it:
                if e.name.endswith(PART_SUFFIX) and not e.name.startswith((".", "_")):
                    on_disk[e.name] = e
        return on_disk

    def _corrupt(self, bad: list[tuple[Any, str]], *, what: str = "") -> CorruptStoreError:
        """Return the error naming the damaged parts ``bad`` ((path, why) pairs, first five)."""
        others = "".join(f"; {p}: {why}" for p, why in bad[1:5])
        more = f"; ... ({len(bad) - 5} more)" if len(bad) > 5 else ""
        return CorruptStoreError(
            bad[0][0],
            f"{what}{bad[0][1]}{others}{more}; `tumorboard store check {self.path} --repair` "
            "drops such parts from the manifest (their rows are lost), or restore them from a "
            "copy",
        )

    def _mismatched(
        self,
        table: str,
        live: Mapping[str, tuple[int, int]],
        on_disk: Mapping[str, os.DirEntry[str]],
    ) -> list[tuple[Path, str]]:
        """Return (part, what is wrong) of each listed part missing or not its committed size."""
        directory = self.path / table
        bad = []
        for name, (size, _rows) in live.items():
            entry = on_disk.get(name)
            try:
                actual = entry.stat().st_size if entry is not None else None
            except FileNotFoundError:  # removed between the listing and the stat
                actual = None
            if actual is None:
                bad.append((directory / name, "Parquet part listed in the manifest is missing"))
            elif actual != size:
                what = "zero bytes" if actual == 0 else f"{actual:,} bytes"
                bad.append(
                    (
                        directory / name,
                        f"corrupt Parquet part: {what}, committed with {size:,} bytes "
                        "(truncated or overwritten)",
                    )
                )
        return bad

    def _version(self) -> int:
        """Return the newest number in the commit log (it grows with every commit)."""
        records, checkpoints = self._log_numbers()
        return max([0, *records, *checkpoints])

    def _new_part_name(self, prefix: str = "part") -> str:
        """Return a new unique part name: prefix, time, host, process id and a random suffix."""
        return (
            f"{prefix}-{time.time_ns():016x}-{_HOST}-{os.getpid()}-"
            f"{uuid.uuid4().hex[:12]}{PART_SUFFIX}"
        )

    def _write_file(
        self, table: str, data: pa.Table, name: str, *, replaces: Sequence[str] = ()
    ) -> Path:
        """Write ``data`` as part file ``name`` of ``table`` (temp file + rename), uncommitted.

        The part's own name and the names of the parts it replaces (a merged part's sources,
        a replacement copy's original) are kept in its Arrow metadata, so that a repair can
        re-adopt a part whose commit record was lost, and tell a copy from the original.
        """
        schema = schema_of(table)
        metadata = {
            **(schema.metadata or {}),
            PART_KEY: name.encode("utf-8"),
            REPLACES_KEY: json_text(list(replaces)).encode("utf-8"),
        }
        final = self.path / table / name
        with atomic_path(final, fsync=self.fsync) as tmp:
            pq.write_table(
                data.replace_schema_metadata(metadata),
                tmp,
                compression=COMPRESSION,
                write_page_checksum=self.page_checksums,
            )
        try:
            _fault("part:renamed")
        except BaseException:
            _unlink_all([final])
            raise
        return final

    def _check_data(self, table: str, data: pa.Table) -> None:
        """Check that ``data`` has exactly the table's schema."""
        self._check_table(table)
        if not data.schema.equals(schema_of(table), check_metadata=False):
            raise InvalidArgumentError(
                f"{table}: the table does not have the {table} schema; use write()"
            )

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

    def verify(self, tables: Sequence[str] | str = TABLES, *, read: bool = False) -> None:
        """Verify the listed parts of ``tables``; raise naming every damaged one.

        Each part must be present with its committed size, have a Parquet footer with the
        committed rows and the table's columns, and every page must match its CRC-32 (pages
        written without one are not compared: parts of older stores). This reads each part's
        bytes once without decoding them; scoring calls it before it reads the store.

        Parameters
        ----------
        tables : str or sequence of str, default every table
            The tables.
        read : bool, default False
            Also decode each part in full with polars, the engine scoring reads with, and
            pyarrow, the engine compaction reads with.

        Raises
        ------
        CorruptStoreError
            A part is missing or damaged; ``path`` is the first, the message names each one
            and what is wrong.
        """
        if isinstance(tables, str):
            tables = (tables,)
        bad: list[tuple[Path, str]] = []
        for table in tables:
            self._check_table(table)
            for name, (size, rows) in sorted(self._live(table).items()):
                path = self.path / table / name
                damage = self._part_damage(table, path, size, rows, checksums=True, read=read)
                if damage is not None:
                    bad.append((path, damage[1]))
        if bad:
            raise self._corrupt(bad, what="corrupt Parquet part: ")

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
    ) -> None:
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
        try:
            for table, data in tables.items():
                if data.num_rows:
                    part = self._write_file(table, data, self._new_part_name(prefix))
                    add.setdefault(table, []).append((part, data.num_rows))
            for table, swaps in (replace or {}).items():
                for source, kept in swaps:
                    if kept.num_rows:
                        name = self._new_part_name(prefix)
                        part = self._write_file(table, kept, name, replaces=[Path(source).name])
                        add.setdefault(table, []).append((part, kept.num_rows))
            part = self._write_file("imports", imports, self._new_part_name(prefix))
            add.setdefault("imports", []).append((part, imports.num_rows))
        except BaseException:
            _unlink_all(p for v in add.values() for p, _ in v)
            raise
        self._commit(add, removes, op=f"import {batch}")
        for table, names in removes.items():  # the swap is done; tidy up
            for name in names:
                with contextlib.suppress(FileNotFoundError):
                    (self.path / table / name).unlink()
                _fault("import:source-removed")

    def _flock(self, name: str, *, wait: bool) -> contextlib.AbstractContextManager[bool]:
        """Return a context holding an ``flock`` on the store file ``name``; yields success."""

        @contextlib.contextmanager
        def hold() -> Iterator[bool]:
            fh = open(self.path / name, "a+")  # noqa: SIM115
            try:
                try:
                    import fcntl

                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
                except ImportError:  # pragma: no cover (non-POSIX)
                    pass
                except OSError:
                    yield False
                    return
                yield True
            finally:
                fh.close()

        return hold()

    @contextlib.contextmanager
    def write_lock(self, *, wait: bool = True) -> Iterator[None]:
        """Hold the store's write lock (an ``flock`` on ``_store.lock``).

        Imports hold it while they resolve which items they add or replace and commit; compaction
        and repairs hold it while they rewrite. Readers and the Recorder never take it.

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
        with self._flock(LOCK, wait=wait) as held:
            if not held:
                raise StateError(
                    f"{self.path}: another process is compacting, repairing or importing into "
                    "this store; try again when it is done"
                )
            yield

    # ------------------------------------------------------------------ compaction

    def compact(
        self,
        tables: Sequence[str] | str = ("runs", "items", "events"),
        *,
        small_rows: int = 200_000,
        target_rows: int = 2_000_000,
    ) -> CompactionResult:
        """Merge small parts into larger ones, in name order.

        Parts of fewer than ``small_rows`` rows are merged into parts of up to ``target_rows``
        rows. Each merge is one commit that adds the merged part and removes its sources, so
        readers see either the sources or the merged part, never both, whatever step a crash
        interrupts; files a crash left (removed sources, uncommitted parts of dead writers'
        temporary files older than an hour) are deleted first. Safe while other processes
        write new parts (only parts listed at the start are merged). Readers holding a
        LazyFrame from before the compaction must re-open it (merged sources are deleted).
        The imports table is never compacted (its parts are the import records). Ends with a
        checkpoint of the commit log.

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
        CorruptStoreError
            A listed part is missing or damaged (see :meth:`check`).
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
            self._tidy()
            _fault("compact:tidied")
            for table in tables:
                live = self._live(table)
                before[table] = len(live)
                moved[table] = 0
                small = [(self.path / table / n, r) for n, (_s, r) in sorted(live.items())
                         if r < small_rows]  # fmt: skip
                for group in _groups(small, target_rows):
                    if len(group) < 2:
                        continue
                    moved[table] += self._merge(table, [p for p, _ in group])
                after[table] = len(self._live(table))
            with self._log_lock():
                self._checkpoint_locked()
        return CompactionResult(before, after, moved)

    def _tidy(self) -> None:
        """Delete what crashes left: removed parts, staged records, old temporary files.

        The write lock is held. Parts no commit lists are left alone (a writer may be about to
        commit them; :meth:`check` reports and quarantines the ones of dead writers).
        """
        self._delete_removed(self._load_state())
        for directory in (*(self.path / t for t in TABLES), self.path / LOG):
            remove_temp_files(directory, min_age_s=3600)
        now = time.time()
        for staged in (self.path / LOG).glob("_staged-*.json"):
            with contextlib.suppress(FileNotFoundError):
                if now - staged.stat().st_mtime > 3600:
                    staged.unlink()

    def _merge(self, table: str, sources: list[Path]) -> int:
        """Merge ``sources`` into one part in one commit; return the rows moved."""
        schema = schema_of(table)
        parts = [conform(self._read_source(table, p), table) for p in sources]
        merged = pa.concat_tables(parts).combine_chunks().cast(schema)
        target = self._write_file(
            table, merged, self._new_part_name("cmp"), replaces=[p.name for p in sources]
        )
        self._commit(
            {table: [(target, merged.num_rows)]}, {table: [p.name for p in sources]}, op="compact"
        )
        for p in sources:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
            _fault("compact:source-removed")
        return merged.num_rows

    def _read_source(self, table: str, path: Path) -> pa.Table:
        """Read a part to merge, verifying its page checksums; damage names the part."""
        try:
            return pq.read_table(path, page_checksum_verification=True)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises OSError, ArrowInvalid, ...
            raise CorruptStoreError(
                path,
                f"corrupt Parquet part of the {table} table ({_one_line(exc)}); nothing was "
                f"compacted from it; `tumorboard store check {self.path} --repair` moves it to "
                f"{QUARANTINE}/ and drops it from the manifest (its rows are lost), or restore "
                "it from a copy",
            ) from None

    # ------------------------------------------------------------------ check and repair

    def check(self, *, repair: bool = False, read: bool = True) -> StoreCheck:
        """Check the store against its manifest; with ``repair``, repair what can be repaired.

        Checked: the commit log (every record and the checkpoint present and readable, numbers
        without gaps); every listed part (present, its committed size, a Parquet footer with the
        committed rows and the table's columns, and with ``read`` its data decoded in full);
        part files no commit lists (strays: left by a killed writer or copied in) and files of
        parts a commit removed that a crash left; temporary files of killed writers.

        Repairs (``repair=True``, under the write lock): a missing or damaged part is dropped
        from the manifest (a damaged file is moved to ``_quarantine/<table>/``), so the store
        reads again without its rows (the problem lists how many); a damaged commit log is
        rebuilt from the records that are left into a new checkpoint, and the whole parts of
        the records it lost are listed again (``"unlisted"``: each part's metadata names the
        part itself and the parts it replaced, which must be gone; a killed writer's
        uncommitted parts cannot be told from them then, and are listed too); other strays
        are moved to ``_quarantine/<table>/`` (never deleted: they may hold rows worth
        re-adding); leftovers and temporary files older than an hour are deleted. Stray files
        whose writer is still running are not touched.

        Parameters
        ----------
        repair : bool, default False
            Repair what can be repaired.
        read : bool, default True
            Also decode every listed part in full (catches damage inside the data pages, at
            the cost of reading the store once).

        Returns
        -------
        StoreCheck
            The problems found and what was done; ``.ok`` is True when none remains.

        Raises
        ------
        StateError
            ``repair`` while another process compacts or imports into the store.
        """
        lock = self.write_lock(wait=False) if repair else contextlib.nullcontext()
        with lock:
            return self._check(repair=repair, read=read)

    def _check(self, *, repair: bool, read: bool) -> StoreCheck:
        """Run :meth:`check` (the write lock is held when repairing)."""
        problems: list[StoreProblem] = []
        state = self._load_state(tolerant=True)
        log_damaged = bool(state.log_problems)
        for path, detail in state.log_problems:
            problems.append(
                StoreProblem("log", path, detail, "rebuild the manifest from the records left")
            )
        if log_damaged:
            problems.extend(self._adopt_lost_commits(state))
        adopted = {Path(p.path) for p in problems if p.kind == "unlisted"}
        dropped: dict[str, list[str]] = {}
        quarantine: list[tuple[str, Path]] = []
        for table in TABLES:
            directory = self.path / table
            for name, (size, rows) in list(state.parts[table].items()):
                path = directory / name
                damage = self._part_damage(table, path, size, rows, checksums=read, read=read)
                if damage is None:
                    continue
                kind, detail = damage
                action = (
                    "drop it from the manifest; its rows are lost unless restored from a copy"
                    if kind == "missing"
                    else f"move it to {QUARANTINE}/{table}/ and drop it from the manifest"
                )
                problems.append(StoreProblem(kind, str(path), detail, action, rows=rows))
                dropped.setdefault(table, []).append(name)
                if kind == "damaged":
                    quarantine.append((table, path))
            with os.scandir(directory) as it:
                files = sorted(
                    (e.name, e.stat().st_mtime)
                    for e in it
                    if e.name.endswith(PART_SUFFIX) and not e.name.startswith((".", "_"))
                )
            for name, mtime in files:
                if name in state.parts[table] or directory / name in adopted:
                    continue
                path = directory / name
                if name in state.removed[table]:
                    problems.append(
                        StoreProblem(
                            "leftover",
                            str(path),
                            "a part a commit removed, left on disk by an interrupted writer",
                            "delete it",
                        )
                    )
                elif not _writer_alive(name, mtime):
                    problems.append(
                        StoreProblem(
                            "stray",
                            str(path),
                            "a part file no commit lists (ignored by readers): left by a "
                            "killed writer, by a lost commit record, or copied in",
                            f"move it to {QUARANTINE}/{table}/",
                        )
                    )
                    quarantine.append((table, path))
        now = time.time()
        for directory in (*(self.path / t for t in TABLES), self.path / LOG):
            old = [p for p in temp_files(directory) if _age(p, now) > 3600]
            if directory.name == LOG:
                old += [p for p in directory.glob("_staged-*.json") if _age(p, now) > 3600]
            problems.extend(
                StoreProblem(
                    "temporary", str(p), "a temporary file of a killed writer", "delete it"
                )
                for p in sorted(old)
            )
        if repair and problems:
            self._repair(state, problems, dropped, quarantine, log_damaged)
            problems = [
                StoreProblem(p.kind, p.path, p.detail, p.action, True, p.rows) for p in problems
            ]
            state = self._load_state()
        return StoreCheck(
            path=str(self.path),
            problems=tuple(problems),
            parts={t: len(state.parts[t]) for t in TABLES},
            rows={t: sum(r for _s, r in state.parts[t].values()) for t in TABLES},
            repair=repair,
        )

    def _adopt_lost_commits(self, state: _State) -> list[StoreProblem]:
        """Adopt into ``state`` the parts of commit records a damaged log lost.

        A candidate is a part file no surviving record lists or removes, whose writer is gone,
        whose footer reads, and whose metadata names the file itself (a copy under another name
        is not adopted). It is adopted when none of the parts it replaces is still on disk: its
        commit had happened (the writer deletes the replaced files only after committing), so
        the rows move to it exactly as the lost record said. A candidate whose replaced parts
        are still there may never have been committed: it stays out (the rows stay where they
        are). Returns one ``"unlisted"`` problem per adopted part.
        """
        found: list[StoreProblem] = []
        for table in TABLES:
            directory = self.path / table
            with os.scandir(directory) as it:
                files = sorted(
                    (e.name, e.stat().st_mtime, e.stat().st_size)
                    for e in it
                    if e.name.endswith(PART_SUFFIX) and not e.name.startswith((".", "_"))
                )
            for name, mtime, size in files:
                if (
                    name in state.parts[table]
                    or name in state.removed[table]
                    or _writer_alive(name, mtime)
                ):
                    continue
                try:
                    meta = pq.ParquetFile(directory / name).metadata
                    kv = meta.metadata or {}
                    replaces = json.loads(kv.get(REPLACES_KEY, b"null"))
                    rows = meta.num_rows
                except Exception:  # noqa: BLE001 - unreadable: a stray, quarantined
                    continue
                if kv.get(PART_KEY) != name.encode("utf-8") or not isinstance(replaces, list):
                    continue
                if any((directory / str(r)).exists() for r in replaces):
                    continue
                for r in replaces:
                    state.parts[table].pop(str(r), None)
                state.parts[table][name] = (size, rows)
                found.append(
                    StoreProblem(
                        "unlisted",
                        str(directory / name),
                        "a whole part whose commit record was lost"
                        + (f" (it replaced {len(replaces)} part(s))" if replaces else ""),
                        "list it in the manifest again",
                        rows=rows,
                    )
                )
        return found

    def _part_damage(
        self, table: str, path: Path, size: int, rows: int, *, checksums: bool, read: bool
    ) -> tuple[str, str] | None:
        """Return (kind, detail) of what is wrong with a listed part, or None.

        Checked: presence, the committed size, the footer (rows, columns); with ``checksums``
        the CRC-32 of every page; with ``read`` a full decode by polars (with the options
        scoring reads with) and by pyarrow (which compaction reads with).
        """
        try:
            actual = path.stat().st_size
        except FileNotFoundError:
            return "missing", "listed in the manifest but missing"
        if actual != size:
            what = "zero bytes" if actual == 0 else f"{actual:,} bytes"
            return "damaged", f"{what}, committed with {size:,} bytes (truncated or overwritten)"
        try:
            meta = pq.ParquetFile(path).metadata
            if meta.num_rows != rows:
                return "damaged", f"{meta.num_rows:,} rows, committed with {rows:,}"
            names = set(meta.schema.to_arrow_schema().names)
            if not names & set(schema_of(table).names):
                return "damaged", f"not a {table} part (no column of the {table} table)"
        except FileNotFoundError:
            return "missing", "listed in the manifest but missing"
        except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError, ...
            return "damaged", f"unreadable Parquet ({_one_line(exc)})"
        if checksums:
            try:
                verify_page_checksums(path)
            except FileNotFoundError:
                return "missing", "listed in the manifest but missing"
            except PageChecksumError as exc:
                return "damaged", f"page checksum mismatch: {_one_line(exc, named=False)}"
            except Exception as exc:  # noqa: BLE001 - the footer moved under us, or I/O
                return "damaged", f"unreadable Parquet ({_one_line(exc)})"
        if read:
            try:
                self._scan_paths(table, [path]).collect()
                pq.read_table(path, page_checksum_verification=checksums)
            except FileNotFoundError:
                return "missing", "listed in the manifest but missing"
            except Exception as exc:  # noqa: BLE001 - polars ComputeError, ArrowInvalid, ...
                return "damaged", f"unreadable Parquet ({_one_line(exc)})"
        return None

    def _repair(
        self,
        state: _State,
        problems: Sequence[StoreProblem],
        dropped: Mapping[str, Sequence[str]],
        quarantine: Sequence[tuple[str, Path]],
        log_damaged: bool,
    ) -> None:
        """Make the repairs :meth:`check` found (the write lock is held)."""
        for table, path in quarantine:
            dest_dir = self.path / QUARANTINE / table
            dest_dir.mkdir(parents=True, exist_ok=True)
            dest = dest_dir / path.name
            if dest.exists():
                dest = dest_dir / f"{path.stem}-{uuid.uuid4().hex[:8]}{PART_SUFFIX}"
            with contextlib.suppress(FileNotFoundError):
                shutil.move(str(path), str(dest))
        if log_damaged:
            # the records left, replayed, become the new checkpoint (numbered after every
            # existing file, so no reader can mistake an older record for a newer one)
            with self._log_lock():
                for table, names in dropped.items():
                    for name in names:
                        state.parts[table].pop(name, None)
                records, checkpoints = self._log_numbers()
                for k in records:  # commits that landed since the check read the log
                    if k > state.version:
                        self._apply_record(state, k)
                n = max([0, *records, *checkpoints]) + 1
                self._delete_removed(state)
                self._write_checkpoint(state, n)
                for k in records:
                    with contextlib.suppress(FileNotFoundError):
                        self._record_path(k).unlink()
                for k in checkpoints:
                    with contextlib.suppress(FileNotFoundError):
                        self._checkpoint_path(k).unlink()
        elif dropped:
            self._commit({}, dropped, op="repair")
        for p in problems:
            if p.kind in ("leftover", "temporary"):
                with contextlib.suppress(FileNotFoundError):
                    Path(p.path).unlink()
        with self._log_lock():
            self._checkpoint_locked()


def _one_line(exc: BaseException, *, named: bool = True) -> str:
    """Return an exception as one line: ``Type: message`` (or the message alone)."""
    why = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {why}" if named else why


def _is_read_failure(exc: BaseException) -> bool:
    """Whether ``exc`` may come from a part that vanished or changed under a read."""
    if isinstance(exc, (FileNotFoundError, CorruptStoreError)):
        return True
    if isinstance(exc, TumorboardError):
        return False
    module = type(exc).__module__.split(".")[0]
    return module in ("polars", "pyarrow") or isinstance(exc, OSError)


def _writer_alive_or_gone(name: str, entry: os.DirEntry[str]) -> bool:
    """Whether a part file's writer may still commit it, or the file is gone already."""
    try:
        mtime = entry.stat().st_mtime
    except FileNotFoundError:
        return True
    return _writer_alive(name, mtime)


def _age(path: Path, now: float) -> float:
    """Return the seconds since ``path`` was modified (0 when it vanished)."""
    try:
        return now - path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _unlink_all(paths: Iterable[Path]) -> None:
    """Delete files, ignoring ones already gone."""
    for p in list(paths):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def _fsync_dir(directory: Path) -> None:
    """Flush a directory's entries to disk, where the platform can open directories."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # pragma: no cover (platforms without directory handles)
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
