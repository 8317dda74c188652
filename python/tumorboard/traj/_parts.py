"""Part files: naming and writing them, listing them against the manifest, scanning them.

:class:`_StoreParts` gives :class:`~tumorboard.traj.store.Store` its part files: a new part is
written under a unique name (time, host, process id), with its own name and the names of the
parts it replaces in its Arrow metadata, and stays uncommitted until a commit record lists it;
:meth:`_StoreParts.parts` lists the parts the manifest lists, checked against the files on disk
(a missing or resized part is an error, a stray one a warning); ``_scan_paths`` reads parts as
one polars LazyFrame with the table's schema.
"""

from __future__ import annotations

import os
import time
import uuid
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .._io import atomic_path
from .._json import json_text
from ..errors import CorruptStoreError, InvalidArgumentError, StrayPartWarning
from ._log import _HOST, PART_SUFFIX, _fault, _StoreLog, _unlink_all, _writer_alive_or_gone
from .schema import TABLES, polars_schema, schema_of

COMPRESSION = "zstd"
#: Arrow metadata of every part: its own file name and the parts it replaces (JSON list).
PART_KEY = b"tumorboard.traj.part"
REPLACES_KEY = b"tumorboard.traj.replaces"
QUARANTINE = "_quarantine"
#: Attempts of :meth:`Store.read` when the manifest changes under a read.
READ_ATTEMPTS = 20


class _StoreParts(_StoreLog):
    """The part files of a store's tables (a base class of ``Store``).

    Attributes
    ----------
    page_checksums : bool
        Whether the parts written get a CRC-32 in every page header.
    """

    page_checksums: bool

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

    def _scan_paths(self, table: str, paths: Sequence[Path]) -> Any:
        """Return a LazyFrame over ``paths`` with the table's schema."""
        import polars as pl

        schema = polars_schema(table)
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
