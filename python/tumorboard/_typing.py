"""Type aliases for the inputs and options of tumorboard's public API.

One home for the shapes the public functions accept, so signatures read ``values: Values`` and
``groups: Labels`` instead of bare ``Any``. They are plain aliases: nothing here validates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Union

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy as np
    import numpy.typing as npt
    import polars as pl
    import pyarrow as pa

Method = Literal["percentile", "basic", "bca"]
"""Bootstrap confidence-interval method (Efron & Tibshirani 1993, ch. 13-14)."""

Scheme = Literal["multinomial", "poisson"]
"""Resampling scheme: classic multinomial, or Poisson(1) weights keyed by record."""

Resampler = Literal["auto", "index", "counts"]
"""How multinomial resamples are drawn: index lists, per-record counts, or chosen by size."""

Values = Union["npt.ArrayLike", "pl.Series", "pa.Array", "pa.ChunkedArray"]
"""Numeric per-record values: a 1-D (or 2-D: records x columns) array-like or column."""

Labels = Union[
    "npt.ArrayLike",
    "pl.Series",
    "pl.DataFrame",
    "pa.Array",
    "pa.ChunkedArray",
    Mapping[str, Any],
    Sequence[Any],
]
"""Per-record labels (groups, strata, clusters): one column, or several as a frame or mapping."""

Frame = Union["pl.DataFrame", "pl.LazyFrame", "pa.Table", "pa.RecordBatch"]
"""A table of records: polars (eager or lazy) or Arrow (what the scorers accept)."""

Texts = Union[str, Sequence[str], "pl.Series", "pa.Array", "pa.ChunkedArray", "np.ndarray"]
"""A text or a column of texts (hypotheses or references)."""

__all__ = ["Frame", "Labels", "Method", "Resampler", "Scheme", "Texts", "Values"]
