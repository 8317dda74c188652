"""The outcome of one import: :class:`ImportReport`, its summary text and its JSON form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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

    def to_polars(self) -> Any:
        """Return one row per file or record decided on: ``status``, ``where``, ``reason``.

        ``status`` is "imported", "unchanged", "skipped", "failed", "rejected" (a record) or
        "warning"; ``reason`` is null where there is none.
        """
        import polars as pl

        rows = [("imported", f, None) for f in self.imported]
        rows += [("unchanged", f, None) for f in self.unchanged]
        rows += [("skipped", f, why) for f, why in self.skipped]
        rows += [("failed", f, None) for f in self.failed]
        rows += [("rejected", w, why) for w, why in self.rejected]
        rows += [("warning", w, why) for w, why in self.warnings]
        return pl.DataFrame(rows, schema={"status": pl.Utf8, "where": pl.Utf8, "reason": pl.Utf8},
                            orient="row")  # fmt: skip

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
