"""The names of the benchmark scorers, importable without polars or the scorers themselves.

The command line offers them as the choices of ``score --benchmark`` while it builds its parser;
importing :mod:`tumorboard.score` for that would load polars and every scorer on each start,
also for verbs that never score (``embed`` on a GPU machine without polars). The scorer
registry of :mod:`tumorboard.score` is built from this tuple.
"""

from __future__ import annotations

__all__ = ["SCORER_NAMES"]

SCORER_NAMES: tuple[str, ...] = (
    "inspect",
    "lammi",
    "medbench",
    "medinsight",
    "mtbbench",
    "radabench",
)
"""Each a module of :mod:`tumorboard.score` with a ``score`` function, sorted."""
