"""``Report``: the result of every benchmark scorer.

One polars table in a shared schema and its renderings as Markdown, CSV, JSON and a
self-contained HTML page with inline SVG plots.

Table schema (every scorer; extra scorer-specific columns may follow ``pm``):

=========  =======  ==============================================================
column     dtype    meaning
=========  =======  ==============================================================
benchmark  str      scorer name ("mtbbench", ...)
track      str      benchmark track / subset ("default" when the input has none)
model      str      the model (agent) scored
tools      bool     whether the agent had tools (False when the input does not say)
task       str      task name, or "overall" for the macro mean over tasks
metric     str      metric name ("accuracy", ...)
n          int64    items (or units) aggregated
estimate   f64      the plain statistic on the data
boot_mean  f64      mean of the bootstrap distribution
ci_low     f64      lower end of the percentile CI
ci_high    f64      upper end of the percentile CI
pm         f64      half the CI width, (ci_high - ci_low) / 2 (the papers' "±")
=========  =======  ==============================================================

Rows are sorted by (track, model, tools, metric, task) with task "overall" last in each
(track, model, tools, metric); :func:`sort_table` does this.
"""

from __future__ import annotations

import html
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from .._io import atomic_path
from ..errors import InvalidArgumentError, InvalidTypeError

TABLE_COLUMNS = (
    "benchmark", "track", "model", "tools", "task", "metric", "n", "estimate", "boot_mean",
    "ci_low", "ci_high", "pm",
)  # fmt: skip
TABLE_SCHEMA: dict[str, Any] = {
    "benchmark": pl.String, "track": pl.String, "model": pl.String, "tools": pl.Boolean,
    "task": pl.String, "metric": pl.String, "n": pl.Int64, "estimate": pl.Float64,
    "boot_mean": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64, "pm": pl.Float64,
}  # fmt: skip
OVERALL = "overall"


def sort_table(table: pl.DataFrame, *, extra_keys: Sequence[str] = ()) -> pl.DataFrame:
    """Sort a report table's rows into report order.

    The order is (track, model, tools, metric, *extra_keys, task) with task "overall" last
    within each (track, model, tools, metric, *extra_keys).

    Parameters
    ----------
    table : polars.DataFrame
        A table in the report schema.
    extra_keys : sequence of str, default ()
        Scorer-specific key columns sorted on before the task.

    Returns
    -------
    polars.DataFrame
        The sorted table (nulls last, ties in their input order).
    """
    by = ["track", "model", "tools", "metric", *extra_keys]
    return (
        table.with_columns((pl.col("task") == OVERALL).alias("__overall"))
        .sort([*by, "__overall", "task"], nulls_last=True, maintain_order=True)
        .drop("__overall")
    )


def _write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8, newlines as given) to ``path`` atomically.

    Parameters
    ----------
    path : str or os.PathLike
        The target file; a reader never sees a partial file (:func:`~tumorboard._io.atomic_path`).
    text : str
        The rendering to write.
    """
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="")


def _cell(value: Any, dtype: Any) -> str:
    """Return Markdown/HTML cell text: floats with 4 decimals, nulls/NaN empty, bools true/false."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.4f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_cell(v, None) for v in value)
    return str(value)


def _md_escape(text: str) -> str:
    """Escape backslashes and pipes, and turn line breaks into spaces, for a Markdown cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("\r", " ")


def _json_value(value: Any) -> Any:
    """Return ``value`` with every non-finite float (at any depth) replaced by None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN/inf
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value


@dataclass(frozen=True, eq=False)
class Report:
    """A scorer's result table with renderers.

    ``str(report)`` is the Markdown rendering. The ``to_*`` methods return text and, when
    ``path`` is given, also write it there atomically (temporary file + ``os.replace``).

    The parameters are kept as attributes of the same names (``table`` cast to the report
    schema, ``notes`` as a tuple of str).

    Parameters
    ----------
    table : polars.DataFrame
        At least the columns of :data:`TABLE_COLUMNS` (see the module docstring for their
        meaning); extra scorer-specific columns follow ``pm``.
    benchmark : str
        The scorer's name, e.g. "mtbbench".
    title : str, optional
        A heading for the Markdown and HTML renderings (default: the benchmark name).
    notes : sequence of str, default ()
        Free-text notes (definitions, options used), rendered under the table.

    Raises
    ------
    InvalidTypeError
        ``table`` is not a polars DataFrame, or a column of the wrong dtype.
    InvalidArgumentError
        A missing table column, or an empty ``benchmark``.
    """

    table: pl.DataFrame
    benchmark: str
    title: str | None = None
    notes: tuple[str, ...] = ()

    def __init__(
        self,
        table: pl.DataFrame,
        *,
        benchmark: str,
        title: str | None = None,
        notes: Sequence[str] = (),
    ) -> None:
        if not isinstance(table, pl.DataFrame):
            raise InvalidTypeError(
                f"table: expected a polars DataFrame, got {type(table).__name__}"
            )
        missing = [c for c in TABLE_COLUMNS if c not in table.columns]
        if missing:
            raise InvalidArgumentError(
                f"table: missing column {missing[0]!r}; a report table needs the columns "
                f"{', '.join(TABLE_COLUMNS)}"
            )
        for col, dtype in TABLE_SCHEMA.items():
            got = table.schema[col]
            ok = got == dtype or (dtype == pl.Float64 and got.is_numeric()) or (
                dtype == pl.Int64 and got.is_integer()) or (got == pl.Null)  # fmt: skip
            if not ok:
                raise InvalidTypeError(f"table: column {col!r} must be {dtype}, got {got}")
        if not isinstance(benchmark, str) or not benchmark:
            raise InvalidArgumentError(f"benchmark: expected a non-empty string, got {benchmark!r}")
        if isinstance(notes, str):
            notes = (notes,)
        ordered = table.select(
            *(pl.col(c).cast(TABLE_SCHEMA[c]) for c in TABLE_COLUMNS),
            *(c for c in table.columns if c not in TABLE_SCHEMA),
        )
        object.__setattr__(self, "table", ordered)
        object.__setattr__(self, "benchmark", benchmark)
        object.__setattr__(self, "title", title)
        object.__setattr__(self, "notes", tuple(str(x) for x in notes))

    # ------------------------------------------------------------------ renderings

    @property
    def heading(self) -> str:
        """The heading of the renderings: ``title``, or the benchmark name without one."""
        return self.title if self.title else self.benchmark

    def to_polars(self) -> pl.DataFrame:
        """Return the report's table (the standard columns, then the scorer's own).

        Returns
        -------
        polars.DataFrame
            One row per (group, metric).
        """
        return self.table

    def rows(self) -> list[dict[str, Any]]:
        """Return the table as a list of row dicts (NaN/inf as None).

        Returns
        -------
        list of dict
            One dict per row, keys in column order.
        """
        return [_json_value(r) for r in self.table.to_dicts()]

    def to_markdown(self, path: str | os.PathLike[str] | None = None) -> str:
        """Render the report as a GitHub-flavoured Markdown table (floats with 4 decimals).

        The table is preceded by a ``## title`` line and followed by the notes as a bullet list
        when there are notes.

        Parameters
        ----------
        path : str or os.PathLike, optional
            Also write the text to this file, atomically.

        Returns
        -------
        str
            The Markdown text.
        """
        cols = self.table.columns
        dtypes = self.table.dtypes
        lines = [f"## {_md_escape(self.heading)}", ""]
        lines.append("| " + " | ".join(_md_escape(c) for c in cols) + " |")
        align = ["---:" if d.is_numeric() else "---" for d in dtypes]
        lines.append("| " + " | ".join(align) + " |")
        for row in self.table.iter_rows():
            cells = (_md_escape(_cell(v, d)) for v, d in zip(row, dtypes, strict=True))
            lines.append("| " + " | ".join(cells) + " |")
        if self.notes:
            lines.append("")
            lines.extend(f"- {_md_escape(note)}" for note in self.notes)
        text = "\n".join(lines) + "\n"
        if path is not None:
            _write_text(path, text)
        return text

    def __str__(self) -> str:
        return self.to_markdown()

    def to_csv(self, path: str | os.PathLike[str] | None = None) -> str:
        """Render the table as CSV with a header row; ``pl.read_csv`` reads it back.

        polars ``write_csv``: full float precision, booleans as true/false, nulls as empty
        fields; nested columns are written as JSON text.

        Parameters
        ----------
        path : str or os.PathLike, optional
            Also write the text to this file, atomically.

        Returns
        -------
        str
            The CSV text.
        """
        text = self._csv_table().write_csv()
        if path is not None:
            _write_text(path, text)
        return text

    def _csv_table(self) -> pl.DataFrame:
        """Return the table with nested (list) columns encoded as JSON text."""
        nested = [c for c, d in self.table.schema.items() if d.is_nested()]
        if not nested:
            return self.table
        return self.table.with_columns(
            pl.col(c).map_elements(lambda v: json.dumps(_json_value(v.to_list()
                                   if hasattr(v, "to_list") else v)),
                                   return_dtype=pl.String)
            for c in nested
        )  # fmt: skip

    def to_json(self, path: str | os.PathLike[str] | None = None) -> str:
        """Render the report as a JSON object.

        The object is ``{"benchmark", "title", "notes", "columns", "rows"}`` where ``rows`` is a
        list of objects (one per table row, keys in column order; NaN as null).

        Parameters
        ----------
        path : str or os.PathLike, optional
            Also write the text to this file, atomically.

        Returns
        -------
        str
            The JSON text (indented, with a final newline).
        """
        doc = {
            "benchmark": self.benchmark,
            "title": self.heading,
            "notes": list(self.notes),
            "columns": list(self.table.columns),
            "rows": self.rows(),
        }
        text = json.dumps(doc, indent=2, allow_nan=False, ensure_ascii=False) + "\n"
        if path is not None:
            _write_text(path, text)
        return text

    def to_html(self, path: str | os.PathLike[str] | None = None) -> str:
        """Render the report as a self-contained HTML page.

        The page holds the title, inline SVG plots (per metric: the estimate per task with CI
        whiskers for each model, as MTBBench Fig. 3; for MTBBench also accuracy against files
        accessed per question, as Fig. 2, when that metric is present), the table and the notes.
        No scripts, no external resources; the output is deterministic.

        Parameters
        ----------
        path : str or os.PathLike, optional
            Also write the text to this file, atomically.

        Returns
        -------
        str
            The HTML text.
        """
        from ._plots import report_figures

        esc = html.escape
        parts = [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f"<title>{esc(self.heading)}</title>",
            "<style>",
            "body{font-family:Helvetica,Arial,sans-serif;margin:24px;color:#222}",
            "table{border-collapse:collapse;font-size:13px}",
            "th,td{border:1px solid #ccc;padding:3px 8px}",
            "td.num{text-align:right;font-variant-numeric:tabular-nums}",
            "th{background:#f2f2f2}",
            "figure{margin:16px 0}",
            "figcaption{font-size:13px;color:#555}",
            "</style>",
            "</head>",
            "<body>",
            f"<h1>{esc(self.heading)}</h1>",
        ]
        for caption, svg in report_figures(self.table, benchmark=self.benchmark):
            parts.append(f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>")
        parts.append("<table>")
        parts.append("<thead><tr>" + "".join(f"<th>{esc(c)}</th>" for c in self.table.columns)
                     + "</tr></thead>")  # fmt: skip
        parts.append("<tbody>")
        dtypes = self.table.dtypes
        for row in self.table.iter_rows():
            cells = []
            for v, d in zip(row, dtypes, strict=True):
                cls = ' class="num"' if d.is_numeric() else ""
                cells.append(f"<td{cls}>{esc(_cell(v, d))}</td>")
            parts.append("<tr>" + "".join(cells) + "</tr>")
        parts.append("</tbody>")
        parts.append("</table>")
        if self.notes:
            parts.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in self.notes) + "</ul>")
        parts.append("</body>")
        parts.append("</html>")
        text = "\n".join(parts) + "\n"
        if path is not None:
            _write_text(path, text)
        return text
