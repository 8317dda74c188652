"""Benchmark scorers and reports.

Each benchmark has a scorer module, :mod:`~tumorboard.score.mtbbench`,
:mod:`~tumorboard.score.radabench`, :mod:`~tumorboard.score.lammi`,
:mod:`~tumorboard.score.medinsight`, :mod:`~tumorboard.score.medbench` and
:mod:`~tumorboard.score.inspect` (any inspect_ai evaluation), that defines
``score(frame, *, options=None, ...)`` next to the benchmark's metric functions
(``from tumorboard.score import mtbbench; mtbbench.score(df)``). A scorer takes a polars
DataFrame/LazyFrame (or pyarrow Table) of per-item results with documented columns, or a
trajectory :class:`~tumorboard.traj.Store` (read with :func:`store_frame`, which builds those
columns from the store's items, events and benchmark fields), validates it once, and returns a
:class:`Report`: one table in a shared schema (benchmark, track, model, tools,
task, metric, n, estimate, boot_mean, ci_low, ci_high, pm, then the scorer's columns and the
coverage of every row, ``n_graded``, ``n_ungraded`` and ``n_missing``, defined in
:mod:`~tumorboard.score.report`) with bootstrap CIs from the C++ engine,
configured by one :class:`~tumorboard.stats.BootstrapOptions` and renderable as Markdown, CSV,
JSON and HTML with inline SVG plots. Every ``score`` takes ``convention=`` ("paper": the numbers as
the benchmark's paper prints them; "tumorboard": tumorboard's own where it differs; "code": a
reference repository's scripts, RadA-BenchPlat), documented per scorer; the report names the one
in use (``Report.convention``).

:func:`benchmarks` lists the scorers and :func:`get` returns one's ``score`` function by name.
:func:`summarize` is the building block: group means with bootstrap CIs in the table schema.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._scorer_names import SCORER_NAMES
from ..errors import InvalidArgumentError
from ._store import store_frame
from ._summary import summarize
from ._validate import DEFAULT_TRACK
from .report import COVERAGE_COLUMNS, TABLE_COLUMNS, Report, sort_table

__all__ = [
    "DEFAULT_TRACK",
    "Report",
    "COVERAGE_COLUMNS",
    "TABLE_COLUMNS",
    "benchmarks",
    "get",
    "inspect",
    "lammi",
    "medbench",
    "medinsight",
    "mtbbench",
    "radabench",
    "sort_table",
    "store_frame",
    "summarize",
]

if TYPE_CHECKING:  # pragma: no cover - typing only
    from . import inspect, lammi, medbench, medinsight, mtbbench, radabench

# The names are kept once, in tumorboard._scorer_names (the CLI reads them without polars). The
# scorer modules are imported when first used (PEP 562 module __getattr__): scoring one
# benchmark does not import the other five (their text metrics, judges and plots).


def __getattr__(name: str) -> Any:
    if name in SCORER_NAMES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(SCORER_NAMES))


def benchmarks() -> list[str]:
    """List the names of the benchmark scorers.

    Returns
    -------
    list of str
        The names, sorted; each is a module of :mod:`tumorboard.score`.
    """
    return sorted(SCORER_NAMES)


def get(name: str) -> Callable[..., Report]:
    """Return the ``score`` function of the benchmark called ``name``.

    Parameters
    ----------
    name : str
        One of :func:`benchmarks` (e.g. ``get("mtbbench")(df)``, or ``get("radabench")(store)``
        for a trajectory store).

    Returns
    -------
    callable
        ``tumorboard.score.<name>.score``.

    Raises
    ------
    InvalidArgumentError
        An unknown name.
    """
    if isinstance(name, str) and name in SCORER_NAMES:
        score: Callable[..., Report] = importlib.import_module(f"{__name__}.{name}").score
        return score
    raise InvalidArgumentError(
        f"benchmark: unknown scorer {name!r}; expected one of {benchmarks()}"
    )
