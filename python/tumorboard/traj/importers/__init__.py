"""Importers of existing agent logs into a :class:`~tumorboard.traj.Store`.

``import_logs(format, src, store)`` finds the log files under ``src``, parses each one, skips
files whose content hash is already in the store (idempotent re-imports) and writes everything
new as one atomic import batch (see :mod:`tumorboard.traj.store`). A malformed file is skipped
and listed in the :class:`ImportReport` with the reason; the rest is imported.

Formats:

* ``mtbbench``: MTBBench chat logs, ``<model>/<patient>_chatlog_<unix_ts>.json``
  (:mod:`.mtbbench`).
* ``jsonl``: one JSON record per line with a documented field mapping (:mod:`.jsonl`).
* ``react``: ReAct text traces, LAMMI-style (:mod:`.react`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa

from ...errors import InvalidArgumentError, MissingFileError
from ..schema import conform, schema_of
from ..store import Store
from ._common import ImportOptions, MalformedLog, Parsed

__all__ = ["FORMATS", "ImportOptions", "ImportReport", "MalformedLog", "import_logs"]


@dataclass(frozen=True)
class ImportReport:
    """The outcome of one import.

    ``str(report)`` is a human-readable summary.

    Attributes
    ----------
    format, source, store : str
        What was imported from where into where.
    imported : tuple of str
        Files imported now.
    duplicates : tuple of str
        Files skipped because their content hash was already imported.
    skipped : tuple of (str, str)
        (file, reason) for files not imported: malformed, superseded by a newer log of the same
        patient and run, or already present from another file.
    warnings : tuple of (str, str)
        (file[:line], reason) for problems inside files that were still imported (e.g. bad
        lines of a JSON-lines file).
    n_items, n_events : int
        Rows written.
    runs : tuple of str
        Run ids that received rows.
    batch : str or None
        The import batch id (None when nothing was written).
    """

    format: str
    source: str
    store: str
    imported: tuple[str, ...] = ()
    duplicates: tuple[str, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    warnings: tuple[tuple[str, str], ...] = ()
    n_items: int = 0
    n_events: int = 0
    runs: tuple[str, ...] = ()
    batch: str | None = None

    @property
    def files_seen(self) -> int:
        """Files found under the source: imported, duplicates and skipped."""
        return len(self.imported) + len(self.duplicates) + len(self.skipped)

    def to_dict(self) -> dict[str, Any]:
        """Return the report as a JSON-able dict (``tumorboard import --json`` prints it).

        Returns
        -------
        dict
            The attributes, with ``skipped`` as ``{"file", "reason"}`` objects and
            ``warnings`` as ``{"where", "reason"}`` objects.
        """
        return {
            "format": self.format,
            "source": self.source,
            "store": self.store,
            "imported": list(self.imported),
            "duplicates": list(self.duplicates),
            "skipped": [{"file": f, "reason": r} for f, r in self.skipped],
            "warnings": [{"where": f, "reason": r} for f, r in self.warnings],
            "n_items": self.n_items,
            "n_events": self.n_events,
            "runs": list(self.runs),
            "batch": self.batch,
        }

    def __str__(self) -> str:
        lines = [
            f"import {self.format} {self.source} -> {self.store}",
            f"  files: {self.files_seen} seen, {len(self.imported)} imported, "
            f"{len(self.duplicates)} already imported, {len(self.skipped)} skipped",
            f"  rows: {self.n_items} items, {self.n_events} events in {len(self.runs)} run(s)",
        ]
        if self.skipped:
            lines.append("  skipped:")
            lines += [f"    {f}: {r}" for f, r in self.skipped]
        if self.warnings:
            lines.append("  warnings:")
            lines += [f"    {f}: {r}" for f, r in self.warnings]
        return "\n".join(lines)


def _formats() -> dict[str, tuple[Callable[..., Any], Callable[..., Parsed]]]:
    """Return the (discover, parse) functions of each format (imported on first use)."""
    from . import jsonl, mtbbench, react

    return {
        "mtbbench": (mtbbench.discover, mtbbench.parse),
        "jsonl": (jsonl.discover, jsonl.parse),
        "react": (react.discover, react.parse),
    }


FORMATS = ("mtbbench", "jsonl", "react")


def import_logs(
    format: str,
    src: str | os.PathLike[str],
    store: Store | str | os.PathLike[str],
    *,
    track: str | None = None,
    model: str | None = None,
    model_map: Mapping[str, str] | str | os.PathLike[str] | None = None,
    benchmark: str | None = None,
    field_map: Mapping[str, str] | None = None,
    run_name: str | None = None,
) -> ImportReport:
    """Import the logs under ``src`` into ``store``.

    Parameters
    ----------
    format : {"mtbbench", "jsonl", "react"}
        The log format.
    src : str or os.PathLike
        A log file or a directory searched recursively.
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
        Benchmark name (default: the format's: "mtbbench", or from the records).
    field_map : mapping of str to str, optional
        jsonl only: schema field -> key (dotted path) in the records.
    run_name : str, optional
        Appended to derived run ids, to keep repeated runs of one model apart.

    Returns
    -------
    ImportReport
        What was imported, skipped (with reasons) and written.

    Raises
    ------
    InvalidArgumentError
        An unknown format, or an invalid model map.
    MissingFileError
        ``src`` (or the model-map file) does not exist.
    """
    formats = _formats()
    if format not in formats:
        raise InvalidArgumentError(f"format: expected one of {FORMATS}, got {format!r}")
    src_path = Path(src)
    if not src_path.exists():
        raise MissingFileError(f"{src_path}: no such file or directory")
    st = store if isinstance(store, Store) else Store(store)
    opts = ImportOptions(
        track=track,
        model=model,
        model_map=_load_model_map(model_map),
        benchmark=benchmark,
        field_map=dict(field_map or {}),
        run_name=run_name,
    )
    discover, parse = formats[format]
    files, skipped = discover(src_path)
    skipped = list(skipped)
    known = st.imported_hashes()
    duplicates: list[str] = []
    parsed: list[tuple[Path, str, Parsed]] = []
    # identical content covering the same unit (e.g. a copied log) is one import; identical
    # bytes under different patients' file names are different data
    seen_now: set[tuple[str, tuple[str, str] | None]] = set()
    for path in files:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            skipped.append((str(path), f"unreadable: {exc.strerror or exc}"))
            continue
        digest = hashlib.sha256(raw).hexdigest()
        if digest in known:
            duplicates.append(str(path))
            continue
        try:
            result = parse(path, raw, opts)
        except MalformedLog as exc:
            skipped.append((str(path), str(exc)))
            continue
        except UnicodeDecodeError as exc:
            skipped.append((str(path), f"not UTF-8 text ({exc.reason} at byte {exc.start})"))
            continue
        if (digest, result.unit) in seen_now:
            duplicates.append(str(path))
            continue
        seen_now.add((digest, result.unit))
        parsed.append((path, digest, result))

    parsed, more_skipped = _resolve_units(parsed, st)
    skipped += more_skipped
    warnings = [w for _, _, p in parsed for w in p.warnings]
    report_kw = dict(
        format=format,
        source=str(src_path),
        store=str(st.path),
        duplicates=tuple(duplicates),
        skipped=tuple(skipped),
        warnings=tuple(warnings),
    )
    if not parsed:
        return ImportReport(**report_kw)  # type: ignore[arg-type]

    runs: dict[str, dict[str, Any]] = {}
    items: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    imports: list[dict[str, Any]] = []
    now = datetime.now(timezone.utc)  # noqa: UP017 (py3.10 target)
    batch = hashlib.sha256("".join(sorted(d for _, d, _ in parsed)).encode()).hexdigest()[:24]
    for path, digest, p in parsed:
        for r in p.runs:
            prev = runs.get(r["run_id"])
            if prev is None or (
                r.get("created_at")
                and prev.get("created_at")
                and r["created_at"] < prev["created_at"]
            ):
                runs[r["run_id"]] = r
        items += p.items
        events += p.events
        imports.append(
            {
                "content_hash": digest,
                "source": str(path),
                "format": format,
                "batch": batch,
                "n_items": len(p.items),
                "n_events": len(p.events),
                "imported_at": now,
            }
        )
    existing_runs = set(st.runs().select("run_id").collect().get_column("run_id").to_list())
    new_runs = [r for rid, r in runs.items() if rid not in existing_runs]
    tables = {
        "runs": _table(new_runs, "runs"),
        "items": _table(items, "items"),
        "events": _table(events, "events"),
    }
    st.commit_batch(batch, tables, _table(imports, "imports"))
    return ImportReport(
        imported=tuple(str(p) for p, _, _ in parsed),
        n_items=len(items),
        n_events=len(events),
        runs=tuple(sorted({i["run_id"] for i in items} | set(runs))),
        batch=batch,
        **report_kw,
    )  # type: ignore[arg-type]


def _table(rows: Sequence[Mapping[str, Any]], table: str) -> pa.Table:
    """Build a conforming Arrow table of ``table`` from an importer's row dicts."""
    schema = schema_of(table)
    try:
        arrow = pa.Table.from_pylist(list(rows), schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:  # a bug in an importer, not bad input
        raise InvalidArgumentError(
            f"{table}: importer produced rows that do not fit the schema: {exc}"
        ) from exc
    return conform(arrow, table)


def _resolve_units(
    parsed: list[tuple[Path, str, Parsed]], store: Store
) -> tuple[list[tuple[Path, str, Parsed]], list[tuple[str, str]]]:
    """Keep one log per (run, patient) unit; return the kept logs and the skipped files.

    The kept log is the newest within this import, and none for units already in the store.
    """
    import polars as pl

    skipped: list[tuple[str, str]] = []
    best: dict[tuple[str, str], tuple[Path, str, Parsed]] = {}
    free: list[tuple[Path, str, Parsed]] = []
    for entry in parsed:
        unit = entry[2].unit
        if unit is None:
            free.append(entry)
            continue
        other = best.get(unit)
        if other is None:
            best[unit] = entry
            continue
        newer, older = (entry, other) if entry[2].order > other[2].order else (other, entry)
        best[unit] = newer
        skipped.append(
            (
                str(older[0]),
                f"superseded by the newer log {newer[0].name} of patient "
                f"{unit[1]!r} in run {unit[0]!r}",
            )
        )
    if best:
        run_ids = sorted({u[0] for u in best})
        have = (
            store.items()
            .filter(pl.col("run_id").is_in(run_ids))
            .select("run_id", "patient_id")
            .unique()
            .collect()
        )
        existing = set(
            zip(
                have.get_column("run_id").to_list(),
                have.get_column("patient_id").to_list(),
                strict=True,
            )
        )
        for unit, entry in list(best.items()):
            if unit in existing:
                del best[unit]
                skipped.append(
                    (
                        str(entry[0]),
                        f"patient {unit[1]!r} of run {unit[0]!r} is "
                        "already in the store (from another file)",
                    )
                )
    keep = free + list(best.values())
    order = {id(e): i for i, e in enumerate(parsed)}
    keep.sort(key=lambda e: order[id(e)])
    return keep, skipped


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
