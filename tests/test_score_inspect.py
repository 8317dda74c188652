"""The inspect_ai scorer on frames (the store path is tested in test_inspect_import.py).

Oracles are hand-worked: inspect_ai reduces a sample's epochs to their mean
(``mean_score()``, its default epoch reducer) and ``accuracy()``/``mean()`` average those
sample values; unscored (null) epochs are left out.
"""

from __future__ import annotations

import polars as pl
import pytest
from tumorboard.errors import InvalidArgumentError
from tumorboard.score import inspect as inspect_scorer
from tumorboard.stats import BootstrapOptions

OPTS = BootstrapOptions(n_resamples=200, seed=1)


def test_epochs_are_averaged_per_sample_before_the_mean():
    df = pl.DataFrame({
        "model": ["m"] * 6, "task": ["t"] * 6, "scorer": ["acc"] * 6,
        "value": [1.0, 0.0, 1.0, None, 1.0, 0.0],
        "sample_id": ["a", "a", "b", "b", "c", "c"],
    })  # fmt: skip
    row = inspect_scorer.score(df, options=OPTS).table.row(0, named=True)
    # samples: a = (1 + 0)/2, b = 1 (its null epoch left out), c = (1 + 0)/2
    assert row["estimate"] == pytest.approx((0.5 + 1.0 + 0.5) / 3)
    assert (row["n"], row["n_epochs"], row["n_unscored"]) == (3, 5, 1)


def test_all_epochs_unscored_says_so():
    # an eval whose every sample errored: the value column is all null (polars dtype Null);
    # it was refused as "must be numeric, got Null", which blames the column's type
    df = pl.DataFrame({"model": ["m"] * 3, "task": ["t"] * 3, "scorer": ["acc"] * 3,
                       "value": [None, None, None]})  # fmt: skip
    with pytest.raises(InvalidArgumentError, match="none of the 3 rows has a score value"):
        inspect_scorer.score(df, options=OPTS)
