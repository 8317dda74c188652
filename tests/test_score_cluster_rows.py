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
    monkeypatch.setattr(_summary, "_integral", lambda values, **kw: False)  # the per-item matrix
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
    assert _summary._integral(np.array([0.0, 1.0]), boolean=True)
    assert not _summary._integral(np.array([], dtype=np.float64), boolean=True)


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
    monkeypatch.setattr(_summary, "_THREADED_ROWS", 0)  # columns coded on threads
    threaded = mtbbench.score(df, options=opts, cluster=cluster, interval=interval).table
    assert threaded.equals(fast)
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
    # joint codes of the same Coded columns are computed once and shared, read-only
    t = _keys.Coded.of(pl.Series([1, 1, 2, 1, 1]))
    first = _keys.factorize({"m": coded, "t": t})
    again = _keys.factorize({"m": coded, "t": t})
    assert again[0] is first[0] and not first[0].flags.writeable
    again[1]["m"][0] = "changed"  # a caller's copy of the keys
    assert _keys.factorize({"m": coded, "t": t})[1]["m"].tolist() == ["a", "b", "c"]
    other = _keys.factorize({"m2": coded, "t": t})  # other names: another result
    assert other[0] is not first[0] and list(other[1]) == ["m2", "t"]


def test_string_views_code_every_chunk_as_one_column():
    """Polars' string views, chunk by chunk, give the codes of the offsets layout."""
    from tumorboard import _core, _keys

    long = pl.Series([f"{'x' * 20}{i % 7}" for i in range(3000)])
    short = pl.Series(["b", "a", "", "é" * 6, "a" * 12, "a" * 13])
    for s in (long, long.slice(5, 100), pl.concat([long.slice(7, 50), short], rechunk=False)):
        views = _keys._string_views(s)
        assert views is not None and len(views) == s.n_chunks()
        got = _core.stats.factorize_string_views(views, sort=True)[0]
        want = _core.stats.factorize_strings(*_keys._string_buffers(s), sort=True)[0]
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(_keys.dense_codes(s), s.rank("dense").to_numpy() - 1)
    bad = np.zeros(16, np.uint8)
    bad[0] = 40  # a 40-byte string in buffer 0, which holds 10 bytes
    with pytest.raises(ValueError, match="outside the data buffers"):
        _core.stats.factorize_string_views([(bad, [np.zeros(10, np.uint8)])])
