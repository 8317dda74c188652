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

Coverage columns (every scorer's rows carry them after its own columns; int64):

==========  ======================================================================
column      meaning
==========  ======================================================================
n_graded    the row's items whose value was computed from what they record (a
            readable answer, a response, a tool or file record, a judge score);
            ``n - n_ungraded`` where the scorer counts ungraded items in ``n``
            (as wrong / 0), ``n`` where it leaves them out
n_ungraded  the items of the row's group whose value could not be computed; each
            scorer's docstring says what "graded" means for its metrics and whether
            such items count as wrong / 0 (then they are part of ``n``) or are left
            out (then not); the report's notes say so when any is
n_missing   of the ``n_ungraded`` items, those with no response at all (a null or
            blank response); null when the input has no response column
==========  ======================================================================

Aggregate rows ("overall", MedBench's dimension rows) carry the sums over their tasks.
:mod:`tumorboard.score._coverage` computes them, one rule for every scorer.

Rows are sorted by (track, model, tools, metric, task) with task "overall" last in each
(track, model, tools, metric); :func:`sort_table` does this.

Two styles render the table: ``"long"`` (the table as it is, one row per (track, model, tools,
task, metric)) and ``"paper"`` (what papers print: per metric, one row per model and one column
per task, cells ``"54.6 ± 7.2"`` = estimate ± pm, in percent for the metrics a scorer marks as
proportions, under a caption that states the interval convention).
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
#: The track of a record that names none.
DEFAULT_TRACK = "default"
STYLES = ("long", "paper")
#: The coverage columns every scorer's rows carry (module docstring).
COVERAGE_COLUMNS = ("n_graded", "n_ungraded", "n_missing")


#: How the closed-form proportion intervals are named in captions and notes.
_INTERVAL_NAMES = {
    "wilson": "Wilson", "agresti_coull": "Agresti-Coull", "clopper_pearson": "Clopper-Pearson",
    "normal": "normal (Wald)", "cr1": "cluster-robust (CR1) normal",
    "wilson_deff": "design-effect Wilson",
}  # fmt: skip


def interval_text(options: Any, *, interval: str = "bootstrap") -> str:
    """Describe the intervals a BootstrapOptions gives, for captions and notes.

    Parameters
    ----------
    options : tumorboard.stats.BootstrapOptions
        The options the scorer used.
    interval : str, default "bootstrap"
        The scorer's ``interval=``: a closed-form proportion interval is named first (it is
        that of the 0/1 metrics; the others keep the bootstrap's).

    Returns
    -------
    str
        E.g. "95% percentile bootstrap interval (1000 resamples, seed 0)", or "95% Wilson
        interval for 0/1 metrics (column interval); others: 95% percentile bootstrap ...".
    """
    method = {"bca": "BCa"}.get(options.method, options.method)
    boot = (
        f"{options.level * 100:g}% {method} bootstrap interval ({options.n_resamples} "
        f"resamples, seed {options.seed})"
    )
    if interval == "bootstrap":
        return boot
    name = _INTERVAL_NAMES.get(interval, interval)
    return (
        f"{options.level * 100:g}% {name} interval for 0/1 metrics (column interval); "
        f"others: {boot}"
    )


def interval_note(interval: str, options: Any) -> str:
    """Return the report note of a scorer's closed-form ``interval=`` (not "bootstrap").

    Parameters
    ----------
    interval : str
        One of :data:`tumorboard.stats.INTERVALS`.
    options : tumorboard.stats.BootstrapOptions
        The options the scorer used (level, and the bootstrap the other rows keep).

    Returns
    -------
    str
        What ``ci_low``/``ci_high``/``pm`` are on which rows.
    """
    name = _INTERVAL_NAMES.get(interval, interval)
    return (
        f"interval {interval}: ci_low, ci_high and pm of the per-group rows of 0/1 metrics are "
        f"the {options.level * 100:g}% {name} interval (tumorboard.stats.proportion_interval); "
        "metrics with other values and the 'overall' rows keep the bootstrap interval; the "
        "column interval names each row's."
    )


def _check_style(style: str) -> None:
    """Raise for an unknown rendering style."""
    if style not in STYLES:
        raise InvalidArgumentError(f"style: expected one of {STYLES}, got {style!r}")


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


def _paper_cell(estimate: Any, pm: Any, percent: bool, decimals: int) -> str:
    """Return a paper-style cell "E ± P" (x 100 for percent) with ``decimals`` decimals."""
    if estimate is None or (isinstance(estimate, float) and math.isnan(estimate)):
        return ""
    scale, fmt = (100.0 if percent else 1.0), f".{decimals}f"
    text = f"{estimate * scale:{fmt}}"
    if pm is not None and not (isinstance(pm, float) and math.isnan(pm)):
        text += f" ± {pm * scale:{fmt}}"
    return text


def _md_table(table: pl.DataFrame) -> list[str]:
    """Return the lines of a Markdown table of ``table`` (numbers right-aligned)."""
    dtypes = table.dtypes
    lines = ["| " + " | ".join(_md_escape(c) for c in table.columns) + " |"]
    align = ["---:" if d.is_numeric() else "---" for d in dtypes]
    lines.append("| " + " | ".join(align) + " |")
    for row in table.iter_rows():
        cells = (_md_escape(_cell(v, d)) for v, d in zip(row, dtypes, strict=True))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


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
    percent : sequence of str, default ()
        Metrics that are proportions: the paper style shows them in percent (x 100).
    interval : str, optional
        The interval convention, e.g. "95% percentile bootstrap interval (1000 resamples,
        seed 0)" (:func:`interval_text`), stated in the paper style's captions.
    convention : str, optional
        The scoring convention in use and what it means, e.g. ``"paper: Overall ± = (97.5th -
        2.5th percentile of the task means) / 2, as printed by the paper"``; stated in every
        caption, under the heading of the long style and in the JSON (``"convention"``).

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
    percent: tuple[str, ...] = ()
    interval: str | None = None
    convention: str | None = None

    def __init__(
        self,
        table: pl.DataFrame,
        *,
        benchmark: str,
        title: str | None = None,
        notes: Sequence[str] = (),
        percent: Sequence[str] = (),
        interval: str | None = None,
        convention: str | None = None,
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
                raise InvalidTypeError(f"table: column {col!r}: expected {dtype}, got {got}")
        for col in COVERAGE_COLUMNS:
            got = table.schema.get(col)
            if got is not None and not (got.is_integer() or got == pl.Null):
                raise InvalidTypeError(f"table: column {col!r}: expected Int64, got {got}")
        if not isinstance(benchmark, str) or not benchmark:
            raise InvalidArgumentError(f"benchmark: expected a non-empty string, got {benchmark!r}")
        if isinstance(notes, str):
            notes = (notes,)
        ordered = table.select(
            *(pl.col(c).cast(TABLE_SCHEMA[c]) for c in TABLE_COLUMNS),
            *(pl.col(c).cast(pl.Int64) if c in COVERAGE_COLUMNS else pl.col(c)
              for c in table.columns if c not in TABLE_SCHEMA),
        )  # fmt: skip
        object.__setattr__(self, "table", ordered)
        object.__setattr__(self, "benchmark", benchmark)
        object.__setattr__(self, "title", title)
        object.__setattr__(self, "notes", tuple(str(x) for x in notes))
        object.__setattr__(self, "percent", tuple(str(x) for x in percent))
        object.__setattr__(self, "interval", interval)
        object.__setattr__(self, "convention", convention)

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

    def paper_tables(self) -> list[tuple[str, pl.DataFrame]]:
        """Return the paper-style tables: per metric, models x tasks, with their captions.

        Each table has the columns ``model`` (and ``track`` and ``tools`` when they vary), then
        one column per task in report order ("overall" last); a cell is ``"E ± P"``: the
        estimate and ``pm`` (half the interval's width), in percent with one decimal for the
        metrics in ``percent``, else with one decimal when the metric reaches 10 and three
        below; empty where a model has no row for the task.

        Returns
        -------
        list of (str, polars.DataFrame)
            (caption, table) per metric, in report order.
        """
        out = []
        metrics = list(dict.fromkeys(self.table.get_column("metric").to_list()))
        conv = self.interval or "confidence interval (ci_low, ci_high)"
        for k, metric in enumerate(metrics, 1):
            sub = self.table.filter(pl.col("metric") == metric)
            pct = metric in self.percent
            keys = ["track", "model", "tools"]
            shown = ["model"] + [c for c in ("track", "tools") if sub.get_column(c).n_unique() > 1]
            tasks = list(dict.fromkeys(sub.get_column("task").to_list()))
            if OVERALL in tasks:
                tasks = [t for t in tasks if t != OVERALL] + [OVERALL]
            big = sub.select(pl.col("estimate").abs().max()).item()
            decimals = 1 if pct or (big is not None and big >= 10) else 3
            rows: dict[tuple[Any, ...], dict[str, str]] = {}
            for r in sub.iter_rows(named=True):
                cells = rows.setdefault(tuple(r[c] for c in keys), {})
                cells[r["task"]] = _paper_cell(r["estimate"], r["pm"], pct, decimals)
            data: dict[str, list[Any]] = {c: [] for c in shown}
            for t in tasks:
                data[t] = []
            for key, cells in rows.items():
                named = dict(zip(keys, key, strict=True))
                for c in shown:
                    data[c].append(named[c])
                for t in tasks:
                    data[t].append(cells.get(t, ""))
            schema = {c: (pl.Boolean if c == "tools" else pl.String) for c in data}
            table = pl.DataFrame(data, schema=schema)
            fixed = []
            if "track" not in shown:
                fixed.append(f"track {sub.get_column('track')[0]}")
            if "tools" not in shown:
                fixed.append("with tools" if sub.get_column("tools")[0] else "without tools")
            unit = " (%)" if pct else ""
            caption = (
                f"Table {k}. {self.heading}: {metric}{unit}"
                + (f", {', '.join(fixed)}" if fixed else "")
                + f". Cells: estimate ± half the width of the {conv}"
                + (", in percent" if pct else "")
                + ". Rows: models; columns: tasks"
                + ("; overall: the aggregate row (see the notes)" if OVERALL in tasks else "")
                + "."
                + (f" Convention: {self.convention}." if self.convention else "")
            )
            out.append((caption, table))
        return out

    def to_markdown(
        self, path: str | os.PathLike[str] | None = None, *, style: str = "long"
    ) -> str:
        """Render the report as GitHub-flavoured Markdown.

        ``style="long"``: the table (floats with 4 decimals) under a ``## title`` line;
        ``style="paper"``: one models x tasks table per metric (:meth:`paper_tables`), each
        under its caption. The notes follow as a bullet list.

        Parameters
        ----------
        path : str or os.PathLike, optional
            Also write the text to this file, atomically.
        style : {"long", "paper"}, default "long"
            The table style.

        Returns
        -------
        str
            The Markdown text.
        """
        _check_style(style)
        lines = [f"## {_md_escape(self.heading)}", ""]
        if style == "paper":
            for caption, table in self.paper_tables():
                lines += [_md_escape(caption), ""]
                lines += _md_table(table)
                lines.append("")
            lines.pop()
        else:
            if self.convention:
                lines += [_md_escape(f"Convention: {self.convention}."), ""]
            lines += _md_table(self.table)
        if self.notes:
            lines.append("")
            lines.extend(f"- {_md_escape(note)}" for note in self.notes)
        text = "\n".join(lines) + "\n"
        if path is not None:
            _write_text(path, text)
        return text

    def __str__(self) -> str:
        return self.to_markdown()

    def to_csv(self, path: str | os.PathLike[str] | None = None, *, style: str = "long") -> str:
        """Render the table as CSV with a header row; ``pl.read_csv`` reads it back.

        ``style="long"``: the table (polars ``write_csv``: full float precision, booleans as
        true/false, nulls as empty fields; nested columns as JSON text). ``style="paper"``: the
        paper tables of every metric stacked, with a leading ``metric`` column and one column
        per task of any metric (empty where a metric has no such task).

        Parameters
        ----------
        path : str or os.PathLike, optional
            Also write the text to this file, atomically.
        style : {"long", "paper"}, default "long"
            The table style.

        Returns
        -------
        str
            The CSV text.
        """
        _check_style(style)
        if style == "paper":
            metrics = list(dict.fromkeys(self.table.get_column("metric").to_list()))
            frames = [
                t.select(pl.lit(m).alias("metric"), pl.all())
                for m, (_, t) in zip(metrics, self.paper_tables(), strict=True)
            ]
            text = pl.concat(frames, how="diagonal").write_csv()
        else:
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

        The object is ``{"benchmark", "title", "notes", "convention", "columns", "rows"}`` where
        ``rows`` is a list of objects (one per table row, keys in column order; NaN as null).

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
            "convention": self.convention,
            "columns": list(self.table.columns),
            "rows": self.rows(),
        }
        text = json.dumps(doc, indent=2, allow_nan=False, ensure_ascii=False) + "\n"
        if path is not None:
            _write_text(path, text)
        return text

    def to_html(self, path: str | os.PathLike[str] | None = None, *, style: str = "long") -> str:
        """Render the report as a self-contained HTML page.

        The page holds the title, inline SVG plots (per metric: the estimate per task with CI
        whiskers for each model, as MTBBench Fig. 3; for MTBBench also accuracy against files
        accessed per question, as Fig. 2, when that metric is present), the table (``style``
        "long") or the captioned paper tables (``style="paper"``) and the notes. No scripts, no
        external resources; the output is deterministic.

        Parameters
        ----------
        path : str or os.PathLike, optional
            Also write the text to this file, atomically.
        style : {"long", "paper"}, default "long"
            The table style.

        Returns
        -------
        str
            The HTML text.
        """
        from ._plots import report_figures

        _check_style(style)

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
        if self.convention:
            parts.append(f"<p>Convention: {esc(self.convention)}.</p>")
        for caption, svg in report_figures(self.table, benchmark=self.benchmark):
            parts.append(f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>")
        tables = self.paper_tables() if style == "paper" else [(None, self.table)]
        for caption, table in tables:
            parts.append("<table>")
            if caption:
                parts.append(f"<caption>{esc(caption)}</caption>")
            parts.append("<thead><tr>" + "".join(f"<th>{esc(c)}</th>" for c in table.columns)
                         + "</tr></thead>")  # fmt: skip
            parts.append("<tbody>")
            dtypes = table.dtypes
            for row in table.iter_rows():
                cells = []
                for v, d in zip(row, dtypes, strict=True):
                    cls = ' class="num"' if d.is_numeric() or (caption and d == pl.String) else ""
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
