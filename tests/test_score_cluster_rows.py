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


def _with_coverage_columns(df: pl.DataFrame, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    n = df.height
    correct = [
        None if u < 0.1 else bool(c) for u, c in zip(rng.random(n), df["correct"], strict=True)
    ]
    response = [None if u < 0.05 else ("  " if u < 0.08 else "A") for u in rng.random(n)]
    files = [None if u < 0.2 else [f"f{j}" for j in range(int(u * 4))] for u in rng.random(n)]
    return df.with_columns(
        pl.Series("correct", correct, dtype=pl.Boolean),
        pl.Series("response", response, dtype=pl.String),
        pl.Series("files_accessed", files, dtype=pl.List(pl.String)),
        pl.Series("tools", rng.random(n) < 0.5),
    )


@pytest.mark.parametrize(
    ("cluster", "interval"),
    [(None, "bootstrap"), ("patient_id", "bootstrap"), ("patient_id", "wilson_deff")],
)
def test_columns_coded_once_give_the_same_report(cluster, interval, monkeypatch):
    """Key and cluster columns coded once (and counted by bincounts) change nothing."""
    df = _with_coverage_columns(_frame(3), 4)
    opts = BootstrapOptions(n_resamples=150, seed=9)
    fast = mtbbench.score(df, options=opts, cluster=cluster, interval=interval).table
    # nothing coded: stats.bootstrap codes every call, polars group-bys count
    monkeypatch.setattr(mtbbench, "code_columns", lambda frame, names: {})
    monkeypatch.setattr(_summary, "code_columns", lambda frame, names: {})
    slow = mtbbench.score(df, options=opts, cluster=cluster, interval=interval).table
    assert set(fast["metric"].unique()) == {"accuracy", "files_accessed"}
    assert fast["n_missing"].drop_nulls().sum() > 0 and fast["n_ungraded"].sum() > 0
    assert fast.equals(slow)


def test_coded_labels_keep_sorted_dense_codes():
    from tumorboard import _keys

    s = pl.Series("m", ["b", "a", "c", "b", "a"])
    coded = _keys.Coded.of(s)
    assert coded.codes.tolist() == [1, 0, 2, 1, 0] and len(coded) == 5
    sub = coded.gather(np.array([2, 0, 3]))
    assert sub.labels.to_list() == ["c", "b", "b"] and sub.codes.tolist() == [1, 0, 0]
    assert _keys.dense_codes(pl.Series([True, True])).tolist() == [0, 0]
    assert _keys.dense_codes(pl.Series([True, False, True])).tolist() == [1, 0, 1]
    codes, keys, n = _keys.factorize({"m": coded, "t": pl.Series([1, 1, 2, 1, 1])})
    assert n == 3 and codes.tolist() == [1, 0, 2, 1, 0]
    assert keys["m"].tolist() == ["a", "b", "c"] and keys["t"].tolist() == [1, 1, 2]
    with pytest.raises(Exception, match="expected 4 entries"):
        _keys.label_columns({"m": coded}, name="groups", n=4)
