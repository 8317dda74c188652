"""The store's manifest and commit log: ``manifest.json``, numbered records, checkpoints, locks.

:class:`_StoreLog`, the base class of :class:`~tumorboard.traj.store.Store`, reads and creates
the manifest, replays the commit log into a :class:`_State` (the live parts of each table),
publishes commit records under the short commit lock (``_log.lock``), folds them into
checkpoints, and holds the store's write lock (``_store.lock``). The design is described in
:mod:`tumorboard.traj.store`.

The hooks tests replace live here, and the code looks them up here: ``_FAULT_HOOK`` (called by
:func:`_fault` at each step of a commit, compaction or checkpoint), ``CHECKPOINT_EVERY`` and
:func:`_writer_alive` (``_maintenance`` calls it as ``_log._writer_alive``).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import socket
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import __version__
from .._io import atomic_path, is_temp_name
from .._json import json_text
from ..errors import CorruptStoreError, InvalidArgumentError, StateError, StoreVersionError
from .schema import SCHEMA_VERSION, TABLES

MANIFEST = "manifest.json"
FORMAT = "tumorboard.traj"
PART_SUFFIX = ".parquet"
LOCK = "_store.lock"
LOG = "_log"
LOG_LOCK = "_log.lock"
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
#: errno values of a filesystem without hard links
_NO_LINKS = {
    getattr(errno, name) for name in ("EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS", "EMLINK")
    if hasattr(errno, name)
}  # fmt: skip
#: Seconds the file of a removed part stays on disk for readers that listed it (Store retain_s).
RETAIN_S = 600.0

_HOST = "".join(c if c.isalnum() else "-" for c in socket.gethostname())[:24] or "host"

#: Set by tests only: called with the name of each step of a commit, compaction or checkpoint.
_FAULT_HOOK: Callable[[str], None] | None = None


def _fault(step: str) -> None:
    """Call the fault-injection hook at ``step`` (a no-op unless a test set the hook)."""
    if _FAULT_HOOK is not None:
        _FAULT_HOOK(step)


@dataclass
class _State:
    """The manifest replayed: live parts per table (name -> (size, rows)) in commit order."""

    version: int = 0
    checkpoint: int = 0
    parts: dict[str, dict[str, tuple[int, int]]] = field(
        default_factory=lambda: {t: {} for t in TABLES}
    )
    #: Parts removed by the records after the checkpoint, or retired by it (their files may
    #: be kept for readers, or left by a crash): name -> when it was removed (Unix time).
    removed: dict[str, dict[str, float]] = field(default_factory=lambda: {t: {} for t in TABLES})
    #: Log files that are missing or unreadable (only when replayed tolerantly).
    log_problems: list[tuple[str, str]] = field(default_factory=list)


def _record_time(doc: Any) -> float:
    """Return when a commit record was written (its ``at``), as Unix time; 0 when unreadable.

    0 makes what the record removed old at once: a record without a readable time keeps no
    file for readers.
    """
    try:
        return datetime.fromisoformat(str(doc.get("at"))).timestamp()
    except (TypeError, ValueError, OverflowError):
        return 0.0


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


def _writer_alive_or_gone(name: str, entry: os.DirEntry[str]) -> bool:
    """Whether a part file's writer may still commit it, or the file is gone already."""
    try:
        mtime = entry.stat().st_mtime
    except FileNotFoundError:
        return True
    return _writer_alive(name, mtime)


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


class _StoreLog:
    """The manifest and the commit log of a store (the base class of ``Store``).

    Attributes
    ----------
    path : pathlib.Path
        The store directory.
    fsync : bool
        Whether what is written is fsynced before it counts as written.
    manifest : dict
        The manifest.
    retain_s : float
        Seconds the file of a removed part is kept for readers that listed it.
    """

    path: Path
    fsync: bool
    manifest: dict[str, Any]
    retain_s: float

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
            for table, entries in _check_entries(doc, "retired").items():
                for e in entries:
                    if not isinstance(e, dict) or not isinstance(e.get("name"), str):
                        raise InvalidArgumentError(f"bad retired part entry {e!r}")
                    at = e.get("at")
                    if isinstance(at, bool) or not isinstance(at, (int, float)):
                        raise InvalidArgumentError(f"bad retired part entry {e!r}")
                    state.removed[table][e["name"]] = float(at)
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
        at = _record_time(doc)
        for table, names in removes.items():
            for name in names:
                state.parts[table].pop(name, None)
                state.removed[table][name] = at
        for table, entries in adds.items():
            for name, size, rows in entries:
                state.parts[table][name] = (size, rows)
                state.removed[table].pop(name, None)

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
        retired = {
            t: [{"at": at, "name": name} for name, at in sorted(state.removed[t].items())
                if name not in state.parts[t] and (self.path / t / name).exists()]
            for t in TABLES
        }  # fmt: skip
        if any(retired.values()):  # kept for readers; checkpoints without them stay as they were
            doc["retired"] = {t: v for t, v in retired.items() if v}
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
        """Delete the files of removed parts older than ``retain_s``; forget their names.

        Younger ones stay in ``state.removed`` (a checkpoint written from it keeps them as
        retired parts): a reader that listed them before their removal may still read them.
        """
        now = time.time()
        for table in TABLES:
            for name in sorted(state.removed[table]):
                if name in state.parts[table] or self._retained(state, table, name, now):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    (self.path / table / name).unlink()
                del state.removed[table][name]

    def _retained(self, state: _State, table: str, name: str, now: float) -> bool:
        """Tell whether the removed part ``name`` is kept for readers (younger than retain_s)."""
        at = state.removed[table].get(name)
        return at is not None and now - at < self.retain_s

    def _version(self) -> int:
        """Return the newest number in the commit log (it grows with every commit)."""
        records, checkpoints = self._log_numbers()
        return max([0, *records, *checkpoints])

    # ------------------------------------------------------------------ locks

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
