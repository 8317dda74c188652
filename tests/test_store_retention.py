"""Removed parts stay on disk for readers that listed them (``Store(retain_s=...)``).

A LazyFrame of ``store.items()`` names the part files the manifest listed when it was made; a
compaction (or an import that replaces items) removes parts in one commit. The files of
removed parts are kept for ``retain_s`` seconds (600 by default) so that such a reader never
meets a missing file, recorded as retired parts when a checkpoint folds the commit records,
and deleted by the maintenance that follows once they are older. ``store check`` does not
count a retained part as a problem; one past its time is a leftover, which repair deletes.
"""

from __future__ import annotations

import json
import time

import polars as pl
import pytest
from tumorboard.errors import InvalidArgumentError
from tumorboard.traj import Store, _log


def _small_parts(store: Store, n: int = 4) -> None:
    store.write_runs({"run_id": ["r"], "benchmark": ["b"], "model": ["m"]})
    for k in range(n):
        store.write_items({"run_id": ["r"] * 3, "patient_id": [f"p{k}"] * 3,
                           "item_id": [f"q{k}-{i}" for i in range(3)], "task": ["t"] * 3,
                           "correct": [True, False, True]})  # fmt: skip


def _files(store: Store, table: str = "items") -> set[str]:
    return {p.name for p in (store.path / table).glob("*.parquet")}


def test_a_lazyframe_from_before_a_compaction_still_reads(tmp_path):
    store = Store(tmp_path / "s", fsync=False, retain_s=600)
    _small_parts(store)
    lazy = store.items().select("item_id", "correct")  # lists the four parts now
    sources = _files(store)
    result = store.compact(small_rows=100)
    assert result.parts_after["items"] == 1
    assert sources <= _files(store)  # kept for readers
    assert lazy.collect().sort("item_id").height == 12  # no FileNotFoundError
    assert Store(tmp_path / "s").items().collect().height == 12  # a new reader: the merged part
    assert Store(tmp_path / "s", retain_s=600).check().ok  # retained parts: not problems
    doc = json.loads(max((store.path / "_log").glob("*.checkpoint.json")).read_text())
    assert sorted(e["name"] for e in doc["retired"]["items"]) == sorted(sources)


def test_retired_parts_are_deleted_once_older_than_retain_s(tmp_path, monkeypatch):
    store = Store(tmp_path / "s", fsync=False, retain_s=600)
    _small_parts(store)
    sources = _files(store)
    store.compact(small_rows=100)
    assert sources <= _files(store)
    later = time.time() + 601
    monkeypatch.setattr(_log.time, "time", lambda: later)
    found = Store(tmp_path / "s", retain_s=600).check()
    assert {p.kind for p in found.problems} == {"leftover"} and len(found.problems) == 4
    _small_parts(store, 2)  # two new small parts, then the next compaction tidies first
    Store(tmp_path / "s", fsync=False, retain_s=600).compact(small_rows=100)
    assert not sources & _files(store)
    assert Store(tmp_path / "s").items().collect().height == 18


def test_repair_deletes_only_parts_past_their_time(tmp_path, monkeypatch):
    store = Store(tmp_path / "s", fsync=False, retain_s=600)
    _small_parts(store)
    sources = _files(store)
    store.compact(small_rows=100)
    assert Store(tmp_path / "s", retain_s=600).check(repair=True).ok
    assert sources <= _files(store)  # young: kept
    assert Store(tmp_path / "s", retain_s=0).check(repair=True).ok
    assert not sources & _files(store)
    assert Store(tmp_path / "s").check().ok


def test_retain_s_zero_deletes_at_once_and_bad_values_are_refused(tmp_path):
    store = Store(tmp_path / "s", fsync=False, retain_s=0)
    _small_parts(store)
    sources = _files(store)
    store.compact(small_rows=100)
    assert not sources & _files(store)
    for bad in (-1, float("nan"), float("inf"), "10", True):
        with pytest.raises(InvalidArgumentError, match="retain_s: expected a number of seconds"):
            Store(tmp_path / "s", retain_s=bad)


def test_the_default_keeps_parts_for_ten_minutes(tmp_path, monkeypatch):
    monkeypatch.setattr(_log, "RETAIN_S", 600.0)  # the library default (tests set 0)
    store = Store(tmp_path / "s", fsync=False)
    assert store.retain_s == 600.0
    _small_parts(store)
    lazy = store.items().filter(pl.col("correct"))
    store.compact(small_rows=100)
    assert lazy.collect().height == 8
