"""The overall rows of a clustered score are built from per-cluster sums, bit-identically.

A 10M-item store clustered by patient once built a dense (items x 2 tasks) matrix for the
overall rows; it now builds one row per (group, cluster) when the values are whole numbers
(their sums are exact in any order). The report must not change by a bit.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from tumorboard.score import _summary, mtbbench
from tumorboard.stats import BootstrapOptions


def _frame(seed: int, n: int = 6000) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    model = rng.integers(0, 5, n)
    task = rng.integers(0, 6, n)
    task = np.where(model == 0, task % 2, np.where(model == 1, task % 4, task))  # k = 2, 4, 6
    return pl.DataFrame(
        {
            "model": [f"m{m}" for m in model],
            "task": [f"t{t}" for t in task],
            "patient_id": [f"P{p}" for p in rng.integers(0, 300, n)],
            "correct": rng.random(n) < 0.6,
            "track": ["a" if m < 3 else "b" for m in model],
        }
    )


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_cluster_sums_give_the_per_item_report(method, monkeypatch):
    df = _frame(1)
    opts = BootstrapOptions(n_resamples=200, seed=5, method=method)
    fast = mtbbench.score(df, options=opts, cluster="patient_id").table
    monkeypatch.setattr(_summary, "_integral", lambda values: False)  # the per-item matrix
    slow = mtbbench.score(df, options=opts, cluster="patient_id").table
    assert fast.filter(pl.col("task") == "overall").height == 5
    assert fast.equals(slow)
    monkeypatch.setattr(_summary, "_task_layout", lambda frame, okeys: None)  # polars ranks
    assert mtbbench.score(df, options=opts, cluster="patient_id").table.equals(slow)
    unclustered = mtbbench.score(df, options=opts).table
    monkeypatch.undo()
    assert mtbbench.score(df, options=opts).table.equals(unclustered)


def test_only_whole_numbers_take_the_cluster_sums():
    assert _summary._integral(np.array([0.0, 1.0, 3.0]))
    assert not _summary._integral(np.array([0.0, 0.5]))
    assert not _summary._integral(np.array([], dtype=np.float64))
    assert not _summary._integral(np.array([2.0**53, 1.0]))
