"""Tests of the trajectory store (python/tumorboard/traj/{schema,store,recorder}.py).

Covered: round trips through Parquet, schema validation, versioning, lazy scans, compaction,
import-batch commits, a writer killed mid-run (real subprocess, SIGKILL) and concurrent writer
processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tumorboard.traj import (
    SCHEMA_VERSION,
    Recorder,
    Store,
    StoreVersionError,
    StrayPartWarning,
    conform,
    schema_of,
)

PYTHON_DIR = str(Path(__file__).resolve().parents[1] / "python")
OPTIONS = ["A) Adenocarcinoma", "B) Squamous cell carcinoma", "C) Melanoma"]


def _sorted(df: pl.DataFrame, *keys: str) -> pl.DataFrame:
    return df.sort(list(keys))


# ----------------------------------------------------------------------------- round trips


def test_recorder_round_trip(tmp_path):
    store = Store(tmp_path / "s")
    flushes = []
    with Recorder(
        store,
        benchmark="mtbbench",
        track="multimodal",
        model="gpt-4o",
        tools=True,
        config={"temperature": 0},
        flush_every=2,
        on_flush=flushes.append,
    ) as rec:
        with rec.item(
            patient_id="104",
            item_id="q0",
            task="digital_pathology",
            question="What?",
            options=OPTIONS,
            gold="B) Squamous cell carcinoma",
        ) as it:
            it.message("assistant", "I need the slide [REQUEST: he.jpg, ghost.jpg]")
            split = it.request_files(["he.jpg", "ghost.jpg", "he.jpg"], available=["he.jpg"])
            assert split.accessed == ("he.jpg",) and split.hallucinated == ("ghost.jpg",)
            it.request_files(["he.jpg"], available=["he.jpg"])  # again: stored once
            it.tool_call(
                "conch", input={"image": "he.jpg"}, output="squamous", ok=True, latency_s=0.4
            )
            first = it.answer("I am not sure")
            assert first.letter is None
            it.answer("[ANSWER: B) Squamous cell carcinoma]")
        with rec.item(patient_id=104, task="hematology", options=OPTIONS, gold="C") as it:
            it.answer("A) Adenocarcinoma")
            it.latency_s = 2.5
        with rec.item(patient_id="7", task="outcome") as it:  # no gold: ungraded
            it.answer("B")
        with pytest.raises(KeyError), rec.item(patient_id="7", task="outcome", gold="A") as it:
            raise KeyError("harness bug")
    assert [f.n_items for f in flushes] == [2, 2]
    items = _sorted(store.items(with_runs=True).collect(), "patient_id", "position")
    assert items.height == 4
    rows = {(r["patient_id"], r["position"]): r for r in items.to_dicts()}
    a = rows[("104", 0)]
    assert (
        a["item_id"] == "q0" and a["gold"] == "B" and a["gold_text"] == "B) Squamous cell carcinoma"
    )
    assert a["parsed_answer"] == "B" and a["correct"] is True and a["correct_source"] == "graded"
    assert a["attempts"] == 2 and a["n_files"] == 1
    assert a["files_accessed"] == ["he.jpg"] and a["files_hallucinated"] == ["ghost.jpg"]
    assert a["options"] == OPTIONS and a["model"] == "gpt-4o" and a["tools"] is True
    assert a["track"] == "multimodal" and a["benchmark"] == "mtbbench"
    b = rows[("104", 1)]  # patient 104 given as an int; position counts per patient
    assert b["item_id"] == "i1" and b["correct"] is False and b["latency_s"] == 2.5
    c = rows[("7", 0)]
    assert c["correct"] is None and c["correct_source"] == "missing" and c["parsed_answer"] == "B"
    d = rows[("7", 1)]
    assert d["flags"] == ["exception:KeyError"] and d["correct"] is None and d["attempts"] == 0

    events = store.events().filter(pl.col("item_id") == "q0").sort("step").collect()
    assert events.get_column("kind").to_list() == [
        "message",
        "file_access",
        "file_access",
        "tool_call",
        "answer",
        "answer",
    ]
    assert events.get_column("step").to_list() == list(range(6))
    fa = events.row(1, named=True)
    assert json.loads(fa["input"]) == {"requested": ["he.jpg", "ghost.jpg", "he.jpg"]}
    assert json.loads(fa["output"]) == {"accessed": ["he.jpg"], "hallucinated": ["ghost.jpg"]}
    assert fa["ok"] is False
    tool = events.row(3, named=True)
    assert tool["tool"] == "conch" and json.loads(tool["input"]) == {"image": "he.jpg"}
    assert tool["latency_s"] == 0.4 and tool["ok"] is True
    runs = store.runs().collect()
    assert runs.height == 1 and json.loads(runs.item(0, "config")) == {"temperature": 0}


def test_record_and_record_many(tmp_path):
    store = Store(tmp_path / "s")
    with Recorder(store, benchmark="b", model="m") as rec:
        rec.record(
            patient_id="p1",
            task="t",
            gold="A",
            parsed_answer="A",
            correct=True,
            files_accessed=["x", "x", "y"],
            events=[{"kind": "message", "role": "assistant", "output": "A"}],
        )
        with pytest.raises(TypeError, match="'correct' expects True or False"):
            rec.record(correct="yes")
        with pytest.raises(ValueError, match="unknown items column 'colour'"):
            rec.record(colour="red")
        with pytest.raises(ValueError, match="kind: expected one of"):
            rec.record(events=[{"kind": "thinking"}])
        n = rec.record_many(
            {
                "patient_id": ["p2", "p2", "p3", "p3"],
                "item_id": ["a", "b", "c", "d"],
                "task": ["t"] * 4,
                "options": [OPTIONS] * 4,
                "gold": ["A", "B", "C", None],
                "response": ["[ANSWER: A]", "Melanoma", "I do not know", "C)"],
            }
        )
        assert n == 4
        assert rec.record_many(pl.DataFrame({"item_id": ["z"], "position": [3]}).lazy()) == 1
        with pytest.raises(ValueError, match="not this recorder's"):
            rec.record_many({"run_id": ["other"], "item_id": ["z"]})
    items = store.items().sort("item_id").collect()
    bulk = items.filter(pl.col("patient_id").is_in(["p2", "p3"]))
    # parsed with the options ("Melanoma" is option C), graded against gold (None: ungraded)
    assert bulk.get_column("parsed_answer").to_list() == ["A", "C", None, "C"]
    assert bulk.get_column("correct").to_list() == [True, False, False, None]
    assert bulk.get_column("correct_source").to_list() == ["graded"] * 3 + ["missing"]
    z = items.filter(pl.col("item_id") == "z").row(0, named=True)
    assert (z["correct"], z["correct_source"], z["position"]) == (None, "missing", 3)
    one = items.filter(pl.col("patient_id") == "p1").row(0, named=True)
    assert one["n_files"] == 2 and one["correct_source"] == "log"
    assert store.events().collect().get_column("item_id").to_list() == [one["item_id"]]


def test_write_items_conforms_and_rejects(tmp_path):
    store = Store(tmp_path / "s")
    store.write_items(
        pa.table(
            {
                "run_id": ["r", "r"],
                "item_id": ["1", "2"],
                "files_accessed": [["a", "a", "b"], None],
                "correct": [True, None],
            }
        )
    )
    df = store.items().sort("item_id").collect()
    assert df.get_column("n_files").to_list() == [2, None]
    assert df.get_column("correct_source").to_list() == ["log", "missing"]
    with pytest.raises(ValueError, match="unknown column 'colour'"):
        store.write_items({"run_id": ["r"], "item_id": ["1"], "colour": ["x"]})
    with pytest.raises(ValueError, match=r"items\.item_id: missing value at row 1"):
        store.write_items({"run_id": ["r", "r"], "item_id": ["1", None]})
    with pytest.raises(ValueError, match=r"items\.position: cannot convert the values to int32"):
        store.write_items({"run_id": ["r"], "item_id": ["1"], "position": ["first"]})
    with pytest.raises(ValueError, match=r"items\.correct_source: row 0 has 'guessed'"):
        store.write_items({"run_id": ["r"], "item_id": ["1"], "correct_source": ["guessed"]})
    with pytest.raises(ValueError, match=r"events\.kind: row 1 has 'dream'"):
        store.write_events({"run_id": ["r", "r"], "kind": ["message", "dream"]})
    with pytest.raises(ValueError, match="table: expected one of"):
        store.write("patients", {})
    assert store.write_items({"run_id": [], "item_id": []}) is None
    assert store.count("items") == 2


def test_schema_uses_large_types_and_is_versioned(tmp_path):
    items = schema_of("items")
    assert items.field("question").type == pa.large_string()
    assert items.field("options").type == pa.large_list(pa.large_string())
    assert items.field("files_accessed").type == pa.large_list(pa.string())
    assert schema_of("events").field("output").type == pa.large_string()
    store = Store(tmp_path / "s")
    part = store.write_items({"run_id": ["r"], "item_id": ["1"], "question": ["long text"]})
    on_disk = pq.read_schema(part)
    assert on_disk.field("question").type == pa.large_string()
    assert on_disk.metadata[b"tumorboard.traj.schema_version"] == str(SCHEMA_VERSION).encode()
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert manifest["schema_version"] == SCHEMA_VERSION and manifest["format"] == "tumorboard.traj"


def test_versions_and_non_stores(tmp_path):
    store = Store(tmp_path / "s")
    manifest = tmp_path / "s" / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["schema_version"] = SCHEMA_VERSION + 1
    manifest.write_text(json.dumps(doc))
    with pytest.raises(StoreVersionError, match=f"schema version {SCHEMA_VERSION + 1}.*upgrade"):
        Store(tmp_path / "s")
    assert store.schema_version == SCHEMA_VERSION
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "data.csv").write_text("x\n")
    with pytest.raises(ValueError, match="holds no manifest.json"):
        Store(tmp_path / "other")
    with pytest.raises(FileNotFoundError, match="no trajectory store"):
        Store(tmp_path / "missing", create=False)


def test_empty_store_scans_and_pushdown(tmp_path):
    store = Store(tmp_path / "s")
    empty = store.items(with_runs=True).collect()
    assert empty.height == 0 and {"run_id", "correct", "model", "tools"} <= set(empty.columns)
    assert store.events().collect().schema["step"] == pl.Int32
    for k in range(3):
        store.write_items({"run_id": [f"r{k}"] * 2, "item_id": ["a", "b"], "task": ["x", "y"]})
    lf = store.items().filter(pl.col("task") == "y").select("run_id")
    plan = lf.explain()
    n_cols = len(schema_of("items"))
    assert "SELECTION" in plan and f"PROJECT 2/{n_cols}" in plan  # pushed into the Parquet scan
    assert sorted(lf.collect().get_column("run_id").to_list()) == ["r0", "r1", "r2"]


def test_compaction_merges_parts_and_survives_a_crash(tmp_path):
    store = Store(tmp_path / "s")
    for k in range(5):
        store.write_items({"run_id": ["r"] * 3, "item_id": [f"{k}-{j}" for j in range(3)]})
    before = store.items().sort("item_id").collect()
    res = store.compact("items", small_rows=10, target_rows=9)
    assert res.parts_before == {"items": 5} and res.parts_after == {"items": 2}
    assert res.rows_rewritten == {"items": 15}
    assert store.items().sort("item_id").collect().equals(before)

    # the merge commits the merged part and removes its sources in one record; the sources'
    # files are gone and the manifest lists exactly the two merged parts
    assert sorted(p.name for p in (tmp_path / "s" / "items").glob("*.parquet")) == sorted(
        p.name for p in store.parts("items")
    )
    assert store.count("items") == 15
    store.compact("items")  # nothing small enough to merge again: unchanged
    assert store.items().sort("item_id").collect().equals(before)
    with pytest.raises(ValueError, match="imports table is not compacted"):
        store.compact("imports")


def test_uncommitted_part_is_invisible_until_its_batch_commits(tmp_path):
    store = Store(tmp_path / "s")
    items = conform({"run_id": ["r"], "item_id": ["1"]}, "items")
    # a part file no commit lists (a writer killed before its commit record): ignored, named
    pq.write_table(items, tmp_path / "s" / "items" / "imp-deadbeef.parquet")
    with pytest.warns(StrayPartWarning, match=r"imp-deadbeef\.parquet"):
        assert store.items().collect().height == 0
    imports = conform({"content_hash": ["h"], "batch": ["deadbeef"]}, "imports")
    store.commit_batch("deadbeef", {"items": items}, imports)
    with pytest.warns(StrayPartWarning):
        assert store.items().collect().height == 1 and store.imported_hashes() == {"h"}
    with pytest.raises(ValueError, match="batch: expected an id"):
        store.commit_batch("a.b", {}, imports)


# ----------------------------------------------------------------------------- processes

WRITER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {python!r})
    from tumorboard.traj import Recorder, Store

    def report(info):
        print("FLUSHED", info.total_items, flush=True)

    store = Store({store!r})
    with Recorder(store, benchmark="b", model={model!r}, run_id={model!r},
                  flush_every={every}, on_flush=report) as rec:
        for i in range({n}):
            with rec.item(patient_id=str(i % 7), item_id=f"{{i}}", task="t",
                          options=["A) x", "B) y"], gold="A") as it:
                it.message("assistant", "thinking " * 50)
                it.answer("A" if i % 3 else "B")
            if {sleep}:
                time.sleep({sleep})
    print("DONE", flush=True)
    """
)


def _writer(store: Path, model: str, n: int, every: int, sleep: float) -> subprocess.Popen:
    code = WRITER.format(
        python=PYTHON_DIR, store=str(store), model=model, n=n, every=every, sleep=sleep
    )
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def test_killed_writer_loses_only_its_unflushed_buffer(tmp_path):
    store_path = tmp_path / "s"
    Store(store_path)
    proc = _writer(store_path, "victim", n=10**9, every=5, sleep=0.001)
    flushed = 0
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    try:
        while flushed < 40 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, "writer exited early"
            if line.startswith("FLUSHED"):
                flushed = int(line.split()[1])
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # mid-run: between or inside flushes
        proc.wait()
    assert proc.returncode == -signal.SIGKILL and flushed >= 40
    # a half-written part from a killed writer: a hidden temporary file, never read
    (store_path / "items" / ".part-x.parquet.123.0123abcd.tmp").write_bytes(b"PAR1 truncated")

    store = Store(store_path)
    items = store.items().collect()
    ids = set(items.get_column("item_id").to_list())
    assert {str(i) for i in range(flushed)} <= ids  # every reported row is there
    assert ids == {str(i) for i in range(len(ids))}  # and only whole flushes, in order
    assert len(ids) % 5 == 0 and items.height == len(ids)
    for part in store.parts("items") + store.parts("events"):
        pq.read_metadata(part)  # every visible part is complete
    events = store.events().collect()
    assert set(events.get_column("item_id").unique().to_list()) <= ids


def test_concurrent_writers(tmp_path):
    store_path = tmp_path / "s"
    Store(store_path)
    procs = [_writer(store_path, f"w{k}", n=60, every=7 + k, sleep=0) for k in range(3)]
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0 and out.strip().endswith("DONE")
    store = Store(store_path)
    items = store.items(with_runs=True).collect()
    assert items.height == 180
    counts = items.group_by("model").len().sort("model")
    assert counts.get_column("len").to_list() == [60, 60, 60]
    assert items.select("run_id", "item_id").n_unique() == 180
    # the grading inside each writer: answer "A" (gold) unless i % 3 == 0
    assert items.get_column("correct").sum() == 3 * sum(1 for i in range(60) if i % 3)
    assert store.runs().collect().height == 3
    assert store.events().collect().height == 180 * 2


def test_an_import_replacement_swaps_rows_atomically_with_its_commit(tmp_path, monkeypatch):
    import tumorboard.traj._log as log_mod  # where the code looks up the fault hook

    store = Store(tmp_path / "s", fsync=False)
    store.write_items({"run_id": ["r"] * 3, "item_id": ["a", "b", "c"], "task": ["t"] * 3})
    (part,) = store.parts("items")
    kept = conform({"run_id": ["r", "r"], "item_id": ["a", "c"], "task": ["t", "t"]}, "items")
    fixed = conform({"run_id": ["r"], "item_id": ["b"], "task": ["fixed"]}, "items")

    def tasks():
        return dict(store.items().select("item_id", "task").sort("item_id").collect().rows())

    def imports(h):
        return conform({"content_hash": [h], "batch": ["b"]}, "imports")

    # an import that fails just before its commit record changes nothing and leaves nothing
    def fail(step):
        if step == "commit:numbered":
            raise OSError("injected")

    monkeypatch.setattr(log_mod, "_FAULT_HOOK", fail)
    with pytest.raises(OSError, match="injected"):
        store.commit_batch("b1", {"items": fixed}, imports("h1"), replace={"items": [(part, kept)]})
    monkeypatch.setattr(log_mod, "_FAULT_HOOK", None)
    assert tasks() == {"a": "t", "b": "t", "c": "t"} and store.imported_hashes() == set()
    assert [p.name for p in (tmp_path / "s" / "items").glob("*.parquet")] == [part.name]

    # the commit swaps the old row out and the new one in at once; the source is deleted after
    def stop(step):
        if step == "import:source-removed":
            raise KeyboardInterrupt

    monkeypatch.setattr(log_mod, "_FAULT_HOOK", stop)
    with pytest.raises(KeyboardInterrupt):  # interrupted after the commit, at the tidy-up
        store.commit_batch("b1", {"items": fixed}, imports("h1"), replace={"items": [(part, kept)]})
    monkeypatch.setattr(log_mod, "_FAULT_HOOK", None)
    assert tasks() == {"a": "t", "b": "fixed", "c": "t"} and store.count("items") == 3
    assert store.imported_hashes() == {"h1"} and not part.exists()
    # a part to replace must be one the manifest lists
    with pytest.raises(ValueError, match="is not a listed part of the items table"):
        store.commit_batch("b2", {}, imports("h2"), replace={"items": [(part, kept)]})
    (src,) = [
        p for p in store.parts("items") if "b" in pq.read_table(p).column("item_id").to_pylist()
    ]
    store.commit_batch(
        "b2",
        {"items": conform({"run_id": ["r"], "item_id": ["b"], "task": ["again"]}, "items")},
        imports("h2"),
        replace={"items": [(src, conform({"run_id": [], "item_id": []}, "items"))]},
    )
    assert tasks() == {"a": "t", "b": "again", "c": "t"} and not src.exists()
    assert store.count("items") == 3 and store.check().ok


def test_items_with_runs_keep_the_stored_order(tmp_path):
    # scorers resample rows by position: the join with the runs must not reorder the items
    store = Store(tmp_path / "s", fsync=False)
    n = 60_000
    store.write_items(
        {"run_id": [f"r{i % 7}" for i in range(n)], "item_id": [f"i{i}" for i in range(n)]}
    )
    store.write_runs({"run_id": [f"r{k}" for k in range(7)], "model": [f"m{k}" for k in range(7)]})
    items = store.items(with_runs=True).collect()
    assert items.get_column("item_id").to_list() == [f"i{i}" for i in range(n)]
    assert items.get_column("model").to_list()[:8] == [f"m{k}" for k in (*range(7), 0)]
