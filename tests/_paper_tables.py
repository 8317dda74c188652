"""Printed paper tables (``tests/fixtures/paper_tables/``, sources in its README) and rounding.

A printed cell ``0.384`` stands for any value in [0.3835, 0.3845]; a figure derived from printed
cells is consistent with a printed result when the range the inputs' rounding allows meets the
printed result's own rounding range.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "paper_tables"
Interval = tuple[float, float]


def load(name: str) -> dict[str, Any]:
    """Return one table's document (``name`` without ``.json``)."""
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def rows(name: str, keys: Sequence[str]) -> dict[tuple[Any, ...], dict[str, str]]:
    """Return the printed text of each cell, per row (the ``keys`` fields) and column."""
    out: dict[tuple[Any, ...], dict[str, str]] = {}
    for cell in load(name)["cells"]:
        out.setdefault(tuple(cell.get(k) for k in keys), {})[cell["column"]] = cell["printed"]
    return out


def half_unit(text: str) -> float:
    """Return half a unit of the last printed decimal (0.0005 for "0.384")."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    return 0.5 * 10.0**-decimals


def rounding_range(text: str) -> Interval:
    """Return the values a printed number can stand for."""
    v, h = float(text), half_unit(text)
    return v - h, v + h


def monotone_range(f: Callable[..., float], texts: Sequence[str], signs: Sequence[int]) -> Interval:
    """Return the range of ``f`` over the printed inputs' rounding ranges.

    ``f`` is monotone in each input: increasing where ``signs`` is +1, decreasing where -1.
    """
    ranges = [rounding_range(t) for t in texts]
    lo = [r[0] if s > 0 else r[1] for r, s in zip(ranges, signs, strict=True)]
    hi = [r[1] if s > 0 else r[0] for r, s in zip(ranges, signs, strict=True)]
    return f(*lo), f(*hi)


def consistent(derived: Interval, printed: str) -> bool:
    """Tell whether a derived range meets the rounding range of a printed result."""
    lo, hi = rounding_range(printed)
    return derived[1] >= lo - 1e-12 and derived[0] <= hi + 1e-12


def f1(r: float, p: float) -> float:
    """Return 2PR / (P + R)."""
    return 2.0 * p * r / (p + r)


def mean(*xs: float) -> float:
    """Return the arithmetic mean."""
    return sum(xs) / len(xs)
