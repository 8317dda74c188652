"""Item identity of JSON lines without ids, through the CLI as a user runs it.

Each test is a row of the table in the "your own logs" issue: what the user did, and what a
user must see now (the right count, or a clear refusal naming the file, line or field).
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
from test_logs_to_scores import cli, write_jsonl
from tumorboard.traj import Store

OPTS = "\nA) adenocarcinoma\nB) squamous cell carcinoma"


def records_300() -> list[dict]:
    """300 records of two models over the same 150 questions, no item ids."""
    out = []
    for model in ("model-a", "model-b"):
        for i in range(150):
            right = (i * 7 + len(model)) % 4 != 0
            out.append(
                {
                    "model": model,
                    "patient_id": f"p{i // 3}",
                    "task": f"task{i % 3}",
                    "question": f"Case {i}: what is the most likely diagnosis?{OPTS}",
                    "gold": "A",
                    "response": "[ANSWER: A]" if right else "[ANSWER: B]",
                }
            )
    return out


def n_per_model(store: Path) -> dict[str, int]:
    items = Store(store).items(with_runs=True).collect()
    return dict(items.group_by("model").len().sort("model").rows())


def test_shuffled_reimport_changes_nothing(tmp_path):
    recs = records_300()
    log = write_jsonl(tmp_path / "log.jsonl", recs)
    out = cli("import", "jsonl", str(log), "--store", str(tmp_path / "s"))
    assert out.returncode == 0, out.stderr
    assert "300 new, 0 replaced" in out.stdout
    shuffled = recs[:]
    random.Random(7).shuffle(shuffled)
    again = write_jsonl(tmp_path / "shuffled.jsonl", shuffled)
    out = cli("import", "jsonl", str(again), "--store", str(tmp_path / "s"))
    assert out.returncode == 0, out.stderr
    assert "0 new, 0 replaced, 300 unchanged" in out.stdout
    assert n_per_model(tmp_path / "s") == {"model-a": 150, "model-b": 150}
    check = cli("store", "check", str(tmp_path / "s"))
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_line_inserted_at_the_top_adds_one_item(tmp_path):
    recs = records_300()
    write_jsonl(tmp_path / "log.jsonl", recs)
    cli("import", "jsonl", str(tmp_path / "log.jsonl"), "--store", str(tmp_path / "s"))
    extra = {**recs[0], "question": f"Case new: grade?{OPTS}", "patient_id": "p-new"}
    write_jsonl(tmp_path / "v2.jsonl", [extra, *recs])
    out = cli("import", "jsonl", str(tmp_path / "v2.jsonl"), "--store", str(tmp_path / "s"))
    assert out.returncode == 0, out.stderr
    assert "1 new, 0 replaced, 300 unchanged" in out.stdout
    assert n_per_model(tmp_path / "s") == {"model-a": 151, "model-b": 150}


def test_two_days_of_one_model_keep_both_days(tmp_path):
    day1 = [{"model": "m", "question": f"Day 1 question {i}?", "gold": "A", "response": "A"}
            for i in range(50)]  # fmt: skip
    day2 = [{"model": "m", "question": f"Day 2 question {i}?", "gold": "A", "response": "A"}
            for i in range(50)]  # fmt: skip
    s = str(tmp_path / "s")
    assert cli("import", "jsonl", str(write_jsonl(tmp_path / "day1.jsonl", day1)), "--store", s)
    out = cli("import", "jsonl", str(write_jsonl(tmp_path / "day2.jsonl", day2)), "--store", s)
    assert "50 new, 0 replaced" in out.stdout, out.stdout
    assert n_per_model(tmp_path / "s") == {"m": 100}


def test_lines_split_over_two_files_are_the_same_items(tmp_path):
    recs = records_300()
    write_jsonl(tmp_path / "whole" / "log.jsonl", recs)
    write_jsonl(tmp_path / "split" / "a.jsonl", recs[::2])
    write_jsonl(tmp_path / "split" / "b.jsonl", recs[1::2])
    cli("import", "jsonl", str(tmp_path / "whole"), "--store", str(tmp_path / "s1"))
    cli("import", "jsonl", str(tmp_path / "split"), "--store", str(tmp_path / "s2"))

    def keys(store: str) -> list[tuple]:
        items = Store(tmp_path / store).items().select("run_id", "item_id", "digest").collect()
        return sorted(items.rows())

    assert keys("s1") == keys("s2")


def test_items_pair_across_models_by_question(tmp_path):
    write_jsonl(tmp_path / "log.jsonl", records_300())
    cli("import", "jsonl", str(tmp_path / "log.jsonl"), "--store", str(tmp_path / "s"))
    items = Store(tmp_path / "s").items(with_runs=True).collect()
    by_model = items.group_by("model").agg(pl.col("item_id").sort())
    ids = dict(by_model.rows())
    assert ids["model-a"] == ids["model-b"] and len(set(ids["model-a"])) == 150


def test_reusing_an_id_for_another_question_is_refused_then_replaced_on_request(tmp_path):
    s = str(tmp_path / "s")
    rec = {"model": "m", "item_id": "x1", "response": "A"}
    first = write_jsonl(tmp_path / "a.jsonl", [{**rec, "question": "Alpha?"}])
    second = write_jsonl(tmp_path / "b.jsonl", [{**rec, "question": "Beta?"}])
    assert cli("import", "jsonl", str(first), "--store", s).returncode == 0
    out = cli("import", "jsonl", str(second), "--store", s)
    assert out.returncode == 2
    assert "b.jsonl:1" in out.stderr and "'Alpha?'" in out.stderr and "--replace" in out.stderr
    assert Store(s).items().collect().get_column("question").to_list() == ["Alpha?"]
    out = cli("import", "jsonl", str(second), "--store", s, "--replace")
    assert out.returncode == 0, out.stderr
    assert "1 replaced" in out.stdout and "replaced an item of another question" in out.stdout
    assert Store(s).items().collect().get_column("question").to_list() == ["Beta?"]


def test_item_key_names_what_identifies_an_item(tmp_path):
    recs = [{"model": "m", "case": {"id": i}, "text": "Same text?", "response": "A"}
            for i in range(6)]  # fmt: skip
    log = write_jsonl(tmp_path / "log.jsonl", recs)
    out = cli("import", "jsonl", str(log), "--store", str(tmp_path / "s"))
    assert out.returncode == 1  # nothing identifies these items: every line rejected
    assert "nothing identifies the item" in out.stdout and "--item-key" in out.stdout
    out = cli("import", "jsonl", str(log), "--store", str(tmp_path / "s"), "--item-key", "case.id")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "6 new" in out.stdout
    random.Random(3).shuffle(recs)
    write_jsonl(log, recs)
    out = cli("import", "jsonl", str(log), "--store", str(tmp_path / "s"), "--item-key", "case.id")
    assert "6 unchanged" in out.stdout, out.stdout
    out = cli("import", "mtbbench", str(log), "--store", str(tmp_path / "t"), "--item-key", "x")
    assert out.returncode == 2 and "--item-key" in out.stderr


def test_repeated_questions_are_kept_apart_and_reported(tmp_path):
    recs = [{"model": "m", "question": "What is shown?", "gold": "A", "response": r}
            for r in ("A", "B", "A")]  # fmt: skip
    log = write_jsonl(tmp_path / "log.jsonl", recs)
    out = cli("import", "jsonl", str(log), "--store", str(tmp_path / "s"))
    assert out.returncode == 0 and "3 new" in out.stdout
    assert "share their task, patient and question" in out.stdout
    ids = sorted(Store(tmp_path / "s").items().collect().get_column("item_id").to_list())
    assert [i.partition(".")[2] for i in ids] == ["", "1", "2"]


def test_line_keyed_items_of_an_older_import_are_replaced(tmp_path):
    # a store as tumorboard < 0.2 left it: the same file's items keyed L<line>
    log = write_jsonl(tmp_path / "log.jsonl", records_300()[:10])
    assert cli("import", "jsonl", str(log), "--store", str(tmp_path / "s")).returncode == 0
    st = Store(tmp_path / "s")
    items = st.items().collect()
    legacy = items.with_columns(
        pl.concat_str(pl.lit("L"), pl.col("source").str.split(":").list.last()).alias("item_id"),
        pl.lit("old").alias("digest"),
    )
    st2 = Store(tmp_path / "s2")
    st2.write("runs", st.runs().collect())
    st2.write("items", legacy)
    out = cli("import", "jsonl", str(log), "--store", str(tmp_path / "s2"))
    assert out.returncode == 0, out.stderr
    assert "10 items an earlier tumorboard keyed by line number" in out.stdout
    after = Store(tmp_path / "s2").items().collect()
    assert after.height == 10 and not after.get_column("item_id").str.starts_with("L").any()
