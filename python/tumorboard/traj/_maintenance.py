"""Store maintenance: layout upgrade, compaction, verify, check and repair, and their results.

:class:`_StoreMaintenance` gives :class:`~tumorboard.traj.store.Store` the operations that
examine or rewrite a whole store rather than add to it: converting a layout-1 store when it is
first opened, ``verify`` (every listed part's size, footer and page checksums), ``compact``
(small parts merged, one commit per merge) and ``check`` (the commit log, every part, strays,
leftovers and temporary files; with ``repair`` it repairs them). :class:`CompactionResult`,
:class:`StoreProblem` and :class:`StoreCheck` are what they return.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .._io import atomic_path, remove_temp_files, temp_files
from .._json import json_text
from ..errors import CorruptStoreError, InvalidArgumentError
from . import _log
from ._log import LAYOUT, LOG, MANIFEST, PART_SUFFIX, _fault, _State
from ._pages import PageChecksumError, verify_page_checksums
from ._parts import PART_KEY, QUARANTINE, REPLACES_KEY, _StoreParts
from .schema import TABLES, conform, schema_of

_LEGACY_JOURNALS = ("_compact-", "_replace-")


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


class _StoreMaintenance(_StoreParts):
    """Layout upgrade, verification, compaction, check and repair (a base class of ``Store``)."""

    # ------------------------------------------------------------------ layout upgrade

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

    # ------------------------------------------------------------------ verification

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
            if not self.retain_s:  # else kept for readers that listed them, deleted later
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
        now = time.time()
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
                if name in state.removed[table] and self._retained(state, table, name, now):
                    continue  # kept for readers that listed it before it was removed
                if name in state.removed[table]:
                    problems.append(
                        StoreProblem(
                            "leftover",
                            str(path),
                            "a part a commit removed, left on disk by an interrupted writer",
                            "delete it",
                        )
                    )
                elif not _log._writer_alive(name, mtime):
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
                    or _log._writer_alive(name, mtime)
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


def _age(path: Path, now: float) -> float:
    """Return the seconds since ``path`` was modified (0 when it vanished)."""
    try:
        return now - path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


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
