"""Benchmark scorers and reports.

Each scorer takes a polars DataFrame/LazyFrame (or pyarrow Table) of per-item results with
documented columns and returns a :class:`Report`: one table in a shared schema (benchmark, track,
model, tools, task, metric, n, estimate, boot_mean, ci_low, ci_high, pm) with bootstrap percentile
CIs from the C++ engine, renderable as Markdown, CSV, JSON and HTML with inline SVG plots.

Scorers: :func:`mtbbench`, :func:`radabench`, :func:`lammi`, :func:`medinsight`,
:func:`medbench`. :func:`benchmarks` lists them and :func:`get` returns one by name.
:func:`summarize` is the building block: group means with bootstrap CIs in the table schema.

Each scorer function has the name of the submodule that defines it (``tumorboard.score.mtbbench``
is the function; its module is ``sys.modules["tumorboard.score.mtbbench"]``).
"""

from __future__ import annotations

from collections.abc import Callable

from ._summary import summarize
from .lammi import lammi
from .medbench import medbench
from .medinsight import medinsight
from .mtbbench import mtbbench
from .radabench import radabench
from .report import TABLE_COLUMNS, Report, sort_table

__all__ = [
    "Report",
    "TABLE_COLUMNS",
    "benchmarks",
    "get",
    "lammi",
    "medbench",
    "medinsight",
    "mtbbench",
    "radabench",
    "sort_table",
    "summarize",
]

_SCORERS: dict[str, Callable[..., Report]] = {
    "lammi": lammi,
    "medbench": medbench,
    "medinsight": medinsight,
    "mtbbench": mtbbench,
    "radabench": radabench,
}


def benchmarks() -> list[str]:
    """Names of the benchmark scorers, sorted."""
    return sorted(_SCORERS)


def get(name: str) -> Callable[..., Report]:
    """The scorer function called `name` (e.g. ``get("mtbbench")(df, seed=1)``)."""
    try:
        return _SCORERS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"benchmark: unknown scorer {name!r}; expected one of {benchmarks()}"
        ) from None
