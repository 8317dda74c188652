"""Pictures people read of model comparisons, as inline SVG in one HTML page.

* a forest plot of the paired differences: each comparison's point estimate, its pointwise
  interval (thin) and the simultaneous max-T band (thick, pale), a line at 0, the adjusted
  p-value at the right;
* a pairwise heatmap per task of the adjusted p-values (darker = smaller, the value written in
  each cell);
* a rank-interval plot: each model's rank interval with its point rank.

The numbers are those of :meth:`Comparison.to_markdown` / :meth:`RankIntervals.to_markdown`,
which the page also carries as tables. The SVG is self-contained (no script, no external
resource), so the page can be mailed or attached to a report. Each picture is also a
standalone SVG document (:func:`comparison_svgs`; ``tumorboard compare --format svg --out
DIR``).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["comparison_html", "comparison_svgs", "forest_svg", "pvalue_heatmap_svg", "rank_svg"]

_FONT = 'font-family="sans-serif" font-size="11"'


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick positions covering [lo, hi]."""
    span = hi - lo if hi > lo else 1.0
    raw = span / max(1, n - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    start = math.floor(lo / step) * step
    out, t = [], start
    while t <= hi + 1e-12 and len(out) < 20:
        out.append(round(t, 12))
        t += step
    return out


def forest_svg(rows: Sequence[Any], *, level: float, correction: str) -> str:
    """Return the forest plot of ``rows`` (:class:`ComparisonRow`) as an SVG string."""
    live = [r for r in rows if math.isfinite(r.difference)]
    if not live:
        return "<p>No comparison with matched items.</p>"
    bounds = [v for r in live for v in (r.ci_low, r.ci_high, r.simul_low, r.simul_high, 0.0)
              if math.isfinite(v)]  # fmt: skip
    lo, hi = min(bounds), max(bounds)
    pad = 0.05 * (hi - lo or 1.0)
    lo, hi = lo - pad, hi + pad
    left, width, right, row_h, top = 230, 420, 110, 18, 30
    height = top + row_h * len(live) + 40

    def x(v: float) -> float:
        return left + (v - lo) / (hi - lo) * width

    pct = round(100 * level)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + right}" '
           f'height="{height}" role="img" {_FONT}>',
           f'<title>Paired differences a - b with {pct}% intervals</title>',
           f'<text x="{left}" y="16">a - b: point, {pct}% interval (thin), simultaneous band '
           f'(pale); p adjusted ({_esc(correction)})</text>',
           f'<line x1="{x(0):.1f}" y1="{top - 6}" x2="{x(0):.1f}" y2="{height - 34}" '
           'stroke="#888" stroke-dasharray="3,3"/>']  # fmt: skip
    for i, r in enumerate(live):
        y = top + i * row_h + row_h / 2
        label = f"{r.task}: {r.model_a} - {r.model_b}"
        out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{_esc(label)}</text>')
        if math.isfinite(r.simul_low):
            out.append(f'<line x1="{x(r.simul_low):.1f}" y1="{y:.1f}" x2="{x(r.simul_high):.1f}" '
                       f'y2="{y:.1f}" stroke="#9ecae1" stroke-width="7"/>')  # fmt: skip
        out.append(f'<line x1="{x(r.ci_low):.1f}" y1="{y:.1f}" x2="{x(r.ci_high):.1f}" '
                   f'y2="{y:.1f}" stroke="#08519c" stroke-width="1.5"/>')  # fmt: skip
        out.append(f'<circle cx="{x(r.difference):.1f}" cy="{y:.1f}" r="3.5" fill="#08519c"/>')
        p = r.p_adjusted
        p_s = "n/a" if not math.isfinite(p) else (f"{p:.3f}" if p >= 1e-3 else f"{p:.1e}")
        out.append(f'<text x="{left + width + 8}" y="{y + 4:.1f}">p = {p_s}</text>')
    axis_y = height - 30
    out.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + width}" y2="{axis_y}" '
               'stroke="#333"/>')  # fmt: skip
    for t in _ticks(lo, hi):
        if lo <= t <= hi:
            out.append(f'<line x1="{x(t):.1f}" y1="{axis_y}" x2="{x(t):.1f}" y2="{axis_y + 4}" '
                       f'stroke="#333"/><text x="{x(t):.1f}" y="{axis_y + 16}" '
                       f'text-anchor="middle">{t:g}</text>')  # fmt: skip
    out.append("</svg>")
    return "\n".join(out)


def pvalue_heatmap_svg(rows: Sequence[Any], *, task: str, correction: str) -> str:
    """Return the heatmap of adjusted p-values of one task's pairs as an SVG string."""
    fam = [r for r in rows if r.task == task]
    models = sorted({r.model_a for r in fam} | {r.model_b for r in fam})
    p = {(r.model_a, r.model_b): r.p_adjusted for r in fam}
    p.update({(b, a): v for (a, b), v in list(p.items())})
    cell, left, top = 34, 150, 40
    size = len(models)
    w, h = left + cell * size + 20, top + cell * size + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
           f'{_FONT}>', f'<title>Adjusted p-values, {_esc(task)}</title>',
           f'<text x="4" y="16">{_esc(task)}: p adjusted ({_esc(correction)}), darker = '
           'smaller</text>']  # fmt: skip
    for i, a in enumerate(models):
        out.append(f'<text x="{left - 6}" y="{top + i * cell + cell / 2 + 4:.1f}" '
                   f'text-anchor="end">{_esc(a)}</text>')  # fmt: skip
        for j, b in enumerate(models):
            v = p.get((a, b))
            g = 255
            if a == b or v is None or not math.isfinite(v):
                fill, text = "#f0f0f0", ""
            else:
                shade = min(1.0, -math.log10(max(v, 1e-12)) / 4.0)  # p = 1e-4 and below: darkest
                g = int(235 - 190 * shade)
                fill, text = f"rgb({g},{g},{min(255, g + 20)})", f"{v:.2g}"
            cx, cy = left + j * cell, top + i * cell
            out.append(f'<rect x="{cx}" y="{cy}" width="{cell - 1}" height="{cell - 1}" '
                       f'fill="{fill}"/>')  # fmt: skip
            if text:
                color = (
                    "#fff"
                    if fill.startswith("rgb(") and int(fill[4:].split(",")[0]) < 130
                    else "#000"
                )  # noqa: E501
                out.append(f'<text x="{cx + cell / 2:.1f}" y="{cy + cell / 2 + 4:.1f}" '
                           f'text-anchor="middle" fill="{color}" font-size="9">'
                           f"{text}</text>")  # fmt: skip
    out.append("</svg>")
    return "\n".join(out)


def rank_svg(ranks: Any, *, title: str) -> str:
    """Return the rank-interval plot of :class:`RankIntervals` as an SVG string."""
    n = len(ranks.models)
    left, width, row_h, top = 150, 360, 18, 30
    height = top + row_h * n + 36

    def x(rank: float) -> float:
        return left + (rank - 1) / max(1, n - 1) * width

    pct = round(100 * ranks.level)
    head = f"{_esc(title)}: rank (1 = best), {pct}% interval"
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 90}" '
           f'height="{height}" role="img" {_FONT}>', f"<title>{_esc(title)}</title>",
           f'<text x="{left}" y="16">{head}</text>']  # fmt: skip
    for i, m in enumerate(ranks.models):
        y = top + i * row_h + row_h / 2
        lo, hi, r = int(ranks.rank_low[i]), int(ranks.rank_high[i]), int(ranks.rank[i])
        out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{_esc(m)}</text>')
        out.append(f'<line x1="{x(lo):.1f}" y1="{y:.1f}" x2="{x(hi):.1f}" y2="{y:.1f}" '
                   'stroke="#54278f" stroke-width="3"/>')  # fmt: skip
        out.append(f'<circle cx="{x(r):.1f}" cy="{y:.1f}" r="4" fill="#54278f"/>')
        out.append(f'<text x="{left + width + 10}" y="{y + 4:.1f}">P(best) '
                   f'{float(ranks.p_best[i]):.2f}</text>')  # fmt: skip
    axis_y = height - 26
    for k in range(1, n + 1):
        out.append(f'<text x="{x(k):.1f}" y="{axis_y + 12}" text-anchor="middle">{k}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _section(comparison: Any, ranks: Mapping[str, Any] | None, heading: str | None) -> list[str]:
    """Return the HTML of one comparison: plots and tables, under ``heading`` when given."""
    rows = comparison.rows
    tasks = list(dict.fromkeys(r.task for r in rows))
    parts = [f"<h2>{_esc(heading)}</h2>"] if heading else []
    parts += [
        f"<p>Paired on item identity; {_esc(comparison.outcome)} outcomes; "
        f"{'clustered' if comparison.clustered else 'items resampled'}; "
        f"B = {comparison.options.n_resamples:,}; correction: {_esc(comparison.correction)}.</p>",
        forest_svg(rows, level=comparison.options.level, correction=comparison.correction),
    ]
    for task in tasks:
        parts.append(pvalue_heatmap_svg(rows, task=task, correction=comparison.correction))
    for task, r in (ranks or {}).items():
        parts.append(rank_svg(r, title=f"Ranks, {task}"))
    parts.append("<pre>" + _esc(comparison.to_markdown()) + "</pre>")
    level = "h3" if heading else "h2"
    for task, r in (ranks or {}).items():
        parts.append(f"<{level}>Ranks, {_esc(task)}</{level}><pre>{_esc(r.to_markdown())}</pre>")
    return parts


def comparisons_html(
    sections: Sequence[tuple[str | None, Any, Mapping[str, Any] | None]],
) -> str:
    """Return one HTML page of several comparisons, each (heading, comparison, ranks)."""
    parts = [
        "<!doctype html>",
        '<html><head><meta charset="utf-8"><title>Model comparisons</title></head><body>',
        "<h1>Model comparisons</h1>",
    ]
    for heading, comparison, ranks in sections:
        parts += _section(comparison, ranks, heading)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def comparison_html(comparison: Any, ranks: Mapping[str, Any] | None = None) -> str:
    """Return one HTML page: the forest plot, a p-value heatmap per task, ranks, and tables."""
    return comparisons_html([(None, comparison, ranks)])


def file_stem(name: str) -> str:
    """Return ``name`` with every character outside ``A-Z a-z 0-9 . _ -`` replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name).strip(".") or "_"


def comparison_svgs(
    comparison: Any, ranks: Mapping[str, Any] | None = None, *, prefix: str = ""
) -> dict[str, str]:
    """Return the forest plot, the p-value heatmaps and the rank plots as SVG files, by name.

    See :meth:`Comparison.to_svg` for the names.
    """
    rows = comparison.rows
    out: dict[str, str] = {}

    def put(stem: str, svg: str) -> None:
        """Add ``svg`` under ``stem.svg``, or ``stem-2.svg``, ... where the name is taken."""
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", prefix) + stem
        name, k = f"{stem}.svg", 2
        while name in out:
            name, k = f"{stem}-{k}.svg", k + 1
        out[name] = '<?xml version="1.0" encoding="UTF-8"?>\n' + svg + "\n"

    forest = forest_svg(rows, level=comparison.options.level, correction=comparison.correction)
    if forest.startswith("<svg"):
        put("forest", forest)
    for task in dict.fromkeys(r.task for r in rows):
        put(f"pvalues-{file_stem(task)}",
            pvalue_heatmap_svg(rows, task=task, correction=comparison.correction))  # fmt: skip
    for task, r in (ranks or {}).items():
        put(f"ranks-{file_stem(task)}", rank_svg(r, title=f"Ranks, {task}"))
    return out
