"""Inline SVG plots for :meth:`Report.to_html` — pure string building, no matplotlib.

* :func:`ci_chart`: per task, one bar (or point, when values can be negative) per model with a
  CI whisker from ci_low to ci_high — the layout of MTBBench Fig. 3.
* :func:`scatter_chart`: accuracy against mean files accessed per question, one point per
  (model, task) — MTBBench Fig. 2.

Output is deterministic: coordinates are printed with fixed decimals, colours come from a fixed
palette in order of first appearance, and all text is XML-escaped.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

import polars as pl

# Tableau 10 (colour-blind friendly, widely used in plotting libraries).
PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)  # fmt: skip
_FONT = 'font-family="Helvetica,Arial,sans-serif"'


def _esc(text: Any) -> str:
    """Return ``str(text)`` XML-escaped (quotes included)."""
    return html.escape(str(text), quote=True)


def _f(x: float) -> str:
    """Return fixed-decimal coordinate text (deterministic, no '-0.00')."""
    s = f"{x:.2f}"
    return "0.00" if s == "-0.00" else s


def _finite(x: Any) -> bool:
    """Tell whether ``x`` is a finite int or float (None and NaN are not)."""
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def nice_ticks(lo: float, hi: float, *, target: int = 5) -> list[float]:
    """Return round tick values covering [lo, hi] with a 1/2/5 x 10^k step.

    Parameters
    ----------
    lo, hi : float
        The range to cover (an empty or non-finite range becomes ``[lo, lo + 1]``).
    target : int, default 5
        About how many steps the range is divided into.

    Returns
    -------
    list of float
        Ascending ticks from at most ``lo`` to at least ``hi``.
    """
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step + 1e-9) * step
    ticks = []
    k = 0
    while True:
        t = start + k * step
        if t > hi + step * 1e-9:
            break
        ticks.append(round(t, 12))
        k += 1
    if ticks[-1] < hi - step * 1e-9:
        ticks.append(round(ticks[-1] + step, 12))
    return ticks


def _tick_label(t: float) -> str:
    """Return a tick's label (``format(t, "g")``)."""
    return f"{t:g}"


def _y_range(values: Sequence[float]) -> tuple[float, float, list[float]]:
    """Return the y axis (low, high, ticks): [0, 1] for values in it, else round ticks from 0."""
    vals = [v for v in values if _finite(v)]
    lo = min([0.0, *vals]) if vals else 0.0
    hi = max(vals) if vals else 1.0
    if lo >= 0.0 and hi <= 1.0:
        return 0.0, 1.0, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    ticks = nice_ticks(lo, hi)
    return ticks[0], ticks[-1], ticks


def _series_labels(table: pl.DataFrame) -> tuple[list[tuple[str, bool]], dict[tuple, str]]:
    """Return the (model, tools) series in order of first appearance, and their legend labels.

    The tools flag is shown in the labels only when both settings occur.
    """
    series: list[tuple[str, bool]] = []
    for model, tools in table.select("model", "tools").iter_rows():
        key = (str(model), bool(tools))
        if key not in series:
            series.append(key)
    both = len({t for _, t in series}) > 1
    labels = {k: (f"{k[0]} ({'tools' if k[1] else 'no tools'})" if both else k[0]) for k in series}
    return series, labels


def _legend(x: float, y: float, labels: Sequence[str]) -> list[str]:
    """Return the SVG elements of a legend at ``(x, y)``: a palette swatch and text per label."""
    out = []
    for i, label in enumerate(labels):
        yy = y + 18 * i
        out.append(
            f'<rect x="{_f(x)}" y="{_f(yy - 9)}" width="10" height="10" '
            f'fill="{PALETTE[i % len(PALETTE)]}"/>'
        )
        out.append(
            f'<text x="{_f(x + 15)}" y="{_f(yy)}" font-size="11" {_FONT}>{_esc(label)}</text>'
        )
    return out


def ci_chart(table: pl.DataFrame, *, title: str, ylabel: str) -> str:
    """Draw grouped bars (points when any value is negative) with CI whiskers as SVG.

    x = task (in table order), one series per (model, tools).

    Parameters
    ----------
    table : polars.DataFrame
        Report-table rows of one metric of one track.
    title : str
        The chart title.
    ylabel : str
        The y-axis label.

    Returns
    -------
    str
        The ``<svg>`` element.
    """
    tasks: list[str] = []
    for t in table.get_column("task").to_list():
        if t not in tasks:
            tasks.append(t)
    series, labels = _series_labels(table)
    cells = {}
    for row in table.iter_rows(named=True):
        cells[(row["task"], (str(row["model"]), bool(row["tools"])))] = row
    values = [v for col in ("estimate", "ci_low", "ci_high")
              for v in table.get_column(col).to_list()]  # fmt: skip
    y0, y1, ticks = _y_range(values)
    bars = y0 >= 0.0

    n_s = max(len(series), 1)
    slot = 14.0
    group_w = max(48.0, n_s * slot + 18.0)
    left, top, plot_h = 58.0, 34.0, 220.0
    rotate = any(len(t) > 8 for t in tasks)
    bottom = 96.0 if rotate else 44.0
    legend_w = 20.0 + 7.0 * max((len(v) for v in labels.values()), default=4)
    plot_w = group_w * max(len(tasks), 1)
    width = left + plot_w + 16.0 + legend_w
    height = top + plot_h + bottom

    def ypos(v: float) -> float:
        """Return the SVG y coordinate of value ``v``."""
        return top + plot_h * (1.0 - (v - y0) / (y1 - y0))

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_f(width)}" height="{_f(height)}" '
        f'viewBox="0 0 {_f(width)} {_f(height)}" role="img" aria-label="{_esc(title)}">',
        f'<text x="{_f(left)}" y="18" font-size="13" font-weight="bold" {_FONT}>'
        f"{_esc(title)}</text>",
    ]
    for t in ticks:
        y = ypos(t)
        out.append(f'<line x1="{_f(left)}" y1="{_f(y)}" x2="{_f(left + plot_w)}" y2="{_f(y)}" '
                   'stroke="#e5e5e5"/>')  # fmt: skip
        out.append(f'<text x="{_f(left - 6)}" y="{_f(y + 4)}" font-size="10" text-anchor="end" '
                   f"{_FONT}>{_esc(_tick_label(t))}</text>")  # fmt: skip
    base = ypos(max(y0, min(0.0, y1)))
    out.append(f'<line x1="{_f(left)}" y1="{_f(base)}" x2="{_f(left + plot_w)}" '
               f'y2="{_f(base)}" stroke="#888"/>')  # fmt: skip
    out.append(f'<line x1="{_f(left)}" y1="{_f(top)}" x2="{_f(left)}" '
               f'y2="{_f(top + plot_h)}" stroke="#888"/>')  # fmt: skip
    out.append(
        f'<text transform="translate(14 {_f(top + plot_h / 2)}) rotate(-90)" font-size="11" '
        f'text-anchor="middle" {_FONT}>{_esc(ylabel)}</text>'
    )
    for ti, task in enumerate(tasks):
        gx = left + group_w * ti
        x_first = gx + (group_w - n_s * slot) / 2.0
        for si, key in enumerate(series):
            row = cells.get((task, key))
            if row is None or not _finite(row["estimate"]):
                continue
            colour = PALETTE[si % len(PALETTE)]
            cx = x_first + slot * si + slot / 2.0
            est = float(row["estimate"])
            tip = (f"{labels[key]} · {task}: {est:.4f}"
                   + (f" [{row['ci_low']:.4f}, {row['ci_high']:.4f}]"
                      if _finite(row["ci_low"]) and _finite(row["ci_high"]) else ""))  # fmt: skip
            if bars:
                yt, yb = ypos(est), base
                out.append(
                    f'<rect x="{_f(cx - slot / 2 + 1.5)}" y="{_f(min(yt, yb))}" '
                    f'width="{_f(slot - 3)}" height="{_f(abs(yb - yt))}" fill="{colour}">'
                    f"<title>{_esc(tip)}</title></rect>"
                )
            else:
                out.append(f'<circle cx="{_f(cx)}" cy="{_f(ypos(est))}" r="3.5" '
                           f'fill="{colour}"><title>{_esc(tip)}</title></circle>')  # fmt: skip
            if _finite(row["ci_low"]) and _finite(row["ci_high"]):
                ya, yb2 = ypos(float(row["ci_low"])), ypos(float(row["ci_high"]))
                out.append(f'<line x1="{_f(cx)}" y1="{_f(ya)}" x2="{_f(cx)}" y2="{_f(yb2)}" '
                           'stroke="#222" stroke-width="1.2"/>')  # fmt: skip
                for yy in (ya, yb2):
                    out.append(f'<line x1="{_f(cx - 3)}" y1="{_f(yy)}" x2="{_f(cx + 3)}" '
                               f'y2="{_f(yy)}" stroke="#222" stroke-width="1.2"/>')  # fmt: skip
        lx = gx + group_w / 2.0
        ly = top + plot_h + 14.0
        if rotate:
            out.append(f'<text transform="translate({_f(lx)} {_f(ly)}) rotate(-35)" '
                       f'font-size="10" text-anchor="end" {_FONT}>{_esc(task)}</text>')  # fmt: skip
        else:
            out.append(f'<text x="{_f(lx)}" y="{_f(ly)}" font-size="10" text-anchor="middle" '
                       f"{_FONT}>{_esc(task)}</text>")  # fmt: skip
    out.extend(_legend(left + plot_w + 16.0, top + 8.0, [labels[k] for k in series]))
    out.append("</svg>")
    return "\n".join(out)


def scatter_chart(points: pl.DataFrame, *, title: str, xlabel: str, ylabel: str) -> str:
    """Draw a scatter of ``y`` against ``x`` with one colour per (model, tools) as SVG.

    Parameters
    ----------
    points : polars.DataFrame
        Columns model, tools, task, x, y (and optionally y_low, y_high for vertical CI
        whiskers).
    title : str
        The chart title.
    xlabel, ylabel : str
        The axis labels.

    Returns
    -------
    str
        The ``<svg>`` element.
    """
    series, labels = _series_labels(points)
    xs = [v for v in points.get_column("x").to_list() if _finite(v)]
    ys = [v for v in points.get_column("y").to_list() if _finite(v)]
    x_ticks = nice_ticks(min([0.0, *xs]), max(xs) if xs else 1.0)
    x0, x1 = x_ticks[0], x_ticks[-1]
    y0, y1, y_ticks = _y_range(ys)
    left, top, plot_w, plot_h, bottom = 58.0, 34.0, 360.0, 220.0, 44.0
    legend_w = 20.0 + 7.0 * max((len(v) for v in labels.values()), default=4)
    width = left + plot_w + 16.0 + legend_w
    height = top + plot_h + bottom

    def xpos(v: float) -> float:
        """Return the SVG x coordinate of value ``v``."""
        return left + plot_w * (v - x0) / (x1 - x0)

    def ypos(v: float) -> float:
        """Return the SVG y coordinate of value ``v``."""
        return top + plot_h * (1.0 - (v - y0) / (y1 - y0))

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_f(width)}" height="{_f(height)}" '
        f'viewBox="0 0 {_f(width)} {_f(height)}" role="img" aria-label="{_esc(title)}">',
        f'<text x="{_f(left)}" y="18" font-size="13" font-weight="bold" {_FONT}>'
        f"{_esc(title)}</text>",
    ]
    for t in y_ticks:
        y = ypos(t)
        out.append(f'<line x1="{_f(left)}" y1="{_f(y)}" x2="{_f(left + plot_w)}" y2="{_f(y)}" '
                   'stroke="#e5e5e5"/>')  # fmt: skip
        out.append(f'<text x="{_f(left - 6)}" y="{_f(y + 4)}" font-size="10" text-anchor="end" '
                   f"{_FONT}>{_esc(_tick_label(t))}</text>")  # fmt: skip
    for t in x_ticks:
        x = xpos(t)
        out.append(f'<line x1="{_f(x)}" y1="{_f(top)}" x2="{_f(x)}" y2="{_f(top + plot_h)}" '
                   'stroke="#f0f0f0"/>')  # fmt: skip
        out.append(f'<text x="{_f(x)}" y="{_f(top + plot_h + 14)}" font-size="10" '
                   f'text-anchor="middle" {_FONT}>{_esc(_tick_label(t))}</text>')  # fmt: skip
    out.append(f'<rect x="{_f(left)}" y="{_f(top)}" width="{_f(plot_w)}" height="{_f(plot_h)}" '
               'fill="none" stroke="#888"/>')  # fmt: skip
    out.append(f'<text x="{_f(left + plot_w / 2)}" y="{_f(top + plot_h + 34)}" font-size="11" '
               f'text-anchor="middle" {_FONT}>{_esc(xlabel)}</text>')  # fmt: skip
    out.append(
        f'<text transform="translate(14 {_f(top + plot_h / 2)}) rotate(-90)" font-size="11" '
        f'text-anchor="middle" {_FONT}>{_esc(ylabel)}</text>'
    )
    has_ci = "y_low" in points.columns and "y_high" in points.columns
    for row in points.iter_rows(named=True):
        if not (_finite(row["x"]) and _finite(row["y"])):
            continue
        key = (str(row["model"]), bool(row["tools"]))
        colour = PALETTE[series.index(key) % len(PALETTE)]
        cx, cy = xpos(float(row["x"])), ypos(float(row["y"]))
        if has_ci and _finite(row["y_low"]) and _finite(row["y_high"]):
            out.append(f'<line x1="{_f(cx)}" y1="{_f(ypos(float(row["y_low"])))}" x2="{_f(cx)}" '
                       f'y2="{_f(ypos(float(row["y_high"])))}" stroke="{colour}" '
                       'stroke-opacity="0.5"/>')  # fmt: skip
        tip = f"{labels[key]} · {row['task']}: x={row['x']:.3f}, y={row['y']:.4f}"
        out.append(f'<circle cx="{_f(cx)}" cy="{_f(cy)}" r="4" fill="{colour}" '
                   f'stroke="#fff"><title>{_esc(tip)}</title></circle>')  # fmt: skip
    out.extend(_legend(left + plot_w + 16.0, top + 8.0, [labels[k] for k in series]))
    out.append("</svg>")
    return "\n".join(out)


def _files_scatter(table: pl.DataFrame, track: str) -> pl.DataFrame | None:
    """Return accuracy (y, with CI) against files accessed (x) per (model, tools, task), or None."""
    sub = table.filter((pl.col("track") == track) & (pl.col("task") != "overall"))
    acc = sub.filter(pl.col("metric") == "accuracy").select(
        "model", "tools", "task", pl.col("estimate").alias("y"), pl.col("ci_low").alias("y_low"),
        pl.col("ci_high").alias("y_high"),
    )  # fmt: skip
    files = sub.filter(pl.col("metric") == "files_accessed").select(
        "model", "tools", "task", pl.col("estimate").alias("x")
    )
    if acc.height == 0 or files.height == 0:
        return None
    pts = acc.join(files, on=["model", "tools", "task"], how="inner", maintain_order="left")
    return pts if pts.height else None


def report_figures(table: pl.DataFrame, *, benchmark: str) -> list[tuple[str, str]]:
    """Return the (caption, svg) pairs of a report table's figures.

    One CI chart per (track, metric) in table order, then for MTBBench-style tables (metrics
    accuracy and files_accessed) one accuracy-vs-files scatter per track.

    Parameters
    ----------
    table : polars.DataFrame
        A report table.
    benchmark : str
        The scorer's name, used in the chart titles.

    Returns
    -------
    list of tuple of (str, str)
        Caption and ``<svg>`` element of each figure (none for an empty table).
    """
    figs: list[tuple[str, str]] = []
    if table.height == 0:
        return figs
    pairs: list[tuple[str, str]] = []
    for track, metric in table.select("track", "metric").iter_rows():
        if (track, metric) not in pairs:
            pairs.append((track, metric))
    multi_track = len({t for t, _ in pairs}) > 1
    for track, metric in pairs:
        sub = table.filter((pl.col("track") == track) & (pl.col("metric") == metric))
        name = f"{benchmark} · {metric}" + (f" · {track}" if multi_track else "")
        svg = ci_chart(sub, title=name, ylabel=metric)
        caption = (f"{metric} per task ({'track ' + track + ', ' if multi_track else ''}"
                   "bars/points: estimate; whiskers: bootstrap percentile CI)")  # fmt: skip
        figs.append((caption, svg))
    for track in dict.fromkeys(t for t, _ in pairs):
        pts = _files_scatter(table, track)
        if pts is None:
            continue
        name = f"{benchmark} · accuracy vs files accessed" + (f" · {track}" if multi_track else "")
        svg = scatter_chart(pts, title=name, xlabel="mean files accessed per question",
                            ylabel="accuracy")  # fmt: skip
        figs.append(("accuracy against mean files accessed per question, one point per "
                      "(model, task); whiskers: accuracy CI", svg))  # fmt: skip
    return figs
