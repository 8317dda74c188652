"""The coverage columns of every scorer's rows: ``n_graded``, ``n_ungraded``, ``n_missing``.

Each frame holds a known number of missing and unreadable responses; the expected counts are
worked out by hand in the comments (definitions: ``tumorboard.score.report``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from tumorboard.score import (
    COVERAGE_COLUMNS,
    inspect,
    lammi,
    medbench,
    medinsight,
    mtbbench,
    radabench,
)
from tumorboard.stats import BootstrapOptions

OPTS = BootstrapOptions(n_resamples=50, seed=1)


def cover(table: pl.DataFrame, metric: str) -> dict[str, tuple[int, int, int, int | None]]:
    """Return (n, n_graded, n_ungraded, n_missing) per task of one metric."""
    rows = table.filter(pl.col("metric") == metric).select("task", "n", *COVERAGE_COLUMNS)
    return {r[0]: tuple(r[1:]) for r in rows.rows()}


def check_schema(table: pl.DataFrame) -> None:
    """Every row has the three columns, as Int64, with n_missing <= n_ungraded."""
    for col in COVERAGE_COLUMNS:
        assert table.schema[col] == pl.Int64, col
    assert table.get_column("n_graded").null_count() == 0
    assert table.get_column("n_ungraded").null_count() == 0
    bad = table.filter(pl.col("n_missing") > pl.col("n_ungraded"))
    assert bad.height == 0, bad


def test_mtbbench_accuracy_and_file_rows() -> None:
    df = pl.DataFrame(
        {
            "model": ["m"] * 5,
            "task": ["a", "a", "a", "b", "b"],
            "correct": [True, None, None, False, True],
            # row 1: no response; row 2: unreadable; row 3: blank but graded (a grade exists)
            "response": ["A", None, "???", " ", "B"],
            "files_accessed": [["x"], None, [], ["y"], None],
        }
    )
    report = mtbbench.score(df, options=OPTS)
    t = report.table
    check_schema(t)
    assert cover(t, "accuracy") == {"a": (3, 1, 2, 1), "b": (2, 2, 0, 0), "overall": (5, 3, 2, 1)}
    # a null file list counts 0 and is ungraded; row 1 also has no response
    assert cover(t, "files_accessed") == {"a": (3, 2, 1, 1), "b": (2, 1, 1, 0)}
    acc = t.filter((pl.col("metric") == "accuracy") & (pl.col("task") == "a"))
    assert acc["estimate"][0] == pytest.approx(1 / 3) and acc["n_correct"][0] == 1
    # without a response column n_missing is unknown, not 0
    t2 = mtbbench.score(df.drop("response"), options=OPTS).table
    assert set(t2.get_column("n_missing").to_list()) == {None}


def test_radabench_text_and_tool_chain_rows() -> None:
    df = pl.DataFrame(
        {
            "model": ["m"] * 4,
            "task": ["a", "a", "b", "b"],
            "gt_tools": [["A", "B"]] * 4,
            # case 1 has no tool record: scored as an empty chain, ungraded
            "called_tools": [["A", "B"], None, ["A"], []],
            # case 1: no response; case 2: blank
            "response": ["the liver", None, "  ", "a lesion"],
            "reference_answer": ["the liver", "a lesion", "a lesion", "a lesion"],
        }
    )
    report = radabench.score(df, options=OPTS)
    t = report.table
    check_schema(t)
    chain = {"a": (2, 1, 1, 1), "b": (2, 2, 0, 0), "overall": (4, 3, 1, 1)}
    assert cover(t, "tool_chain_levenshtein") == chain
    assert cover(t, "false_discovery_rate") == chain
    text = {"a": (2, 1, 1, 1), "b": (2, 1, 1, 1), "overall": (4, 2, 2, 2)}
    for metric in ("bleu", "rouge_l", "f1"):
        assert cover(t, metric) == text, metric
    lev = t.filter((pl.col("metric") == "tool_chain_levenshtein") & (pl.col("task") == "a"))
    assert lev["estimate"][0] == 1.0  # d(AB, AB) = 0, d(AB, empty) = 2: unchanged
    assert any("no tool record" in note for note in report.notes)


def test_lammi_trajectory_judge_and_choice_rows() -> None:
    call = [{"name": "zoom", "input": "x", "success": True}]
    df = pl.DataFrame(
        {
            "model": ["m"] * 4,
            "task": ["a", "a", "b", "b"],
            "tool_calls": [call, None, call, []],  # sample 1: no tool record
            "output_valid": [True] * 4,
            "mc_prediction": ["A", None, "B", None],
            "mc_answer": ["A", "B", "B", "C"],
            "response": ["A", None, "B", "hmm"],  # sample 3 answered, unreadably
            "answer_consistency": [1.0, None, 2.0, 3.0],
        }
    )
    t = lammi.score(df, options=OPTS).table
    check_schema(t)
    tss = {"a": (2, 1, 1, 1), "b": (2, 2, 0, 0), "overall": (4, 3, 1, 1)}
    assert cover(t, "trajectory_success_score") == tss
    assert cover(t, "trajectory_success_rate") == tss
    # counted as wrong: in n
    assert cover(t, "mc_f1") == {"a": (2, 1, 1, 1), "b": (2, 1, 1, 0), "overall": (4, 2, 2, 1)}
    # left out: n = n_graded, n_ungraded counts the samples outside n
    want = {"a": (1, 1, 1, 1), "b": (2, 2, 0, 0), "overall": (3, 3, 1, 1)}
    assert cover(t, "answer_consistency") == want


def test_medinsight_case_and_novelty_rows() -> None:
    df = pl.DataFrame(
        {
            "model": ["m"] * 4,
            "case_id": ["1", "2", "3", "4"],
            "task": ["a", "a", "b", "b"],
            "gt_insights": [["tumor grows"]] * 4,
            "insights": [["tumor grows"], [], ["no change"], []],  # cases 2 and 4: none
            "insight_precision_scores": [[8.0], None, [7.0], None],
            "insight_novelty_votes": [[0], None, [1], None],
        }
    )
    t = medinsight.score(df, options=OPTS).table
    check_schema(t)
    case = {"a": (2, 1, 1, 1), "b": (2, 1, 1, 1), "overall": (4, 2, 2, 2)}
    for metric in ("insight_recall", "insight_precision", "insight_f1"):
        assert cover(t, metric) == case, metric
    # n counts judged insights; the unjudged cases are left out and counted
    novelty = {"a": (1, 1, 1, 1), "b": (1, 1, 1, 1), "overall": (2, 2, 2, 2)}
    assert cover(t, "original") == novelty
    assert cover(t, "innovation") == novelty


def test_medbench_task_combined_dimension_and_overall_rows() -> None:
    df = pl.DataFrame(
        {
            "model": ["m"] * 7,
            "task": ["qa", "qa", "qa", "ned", "ned", "combo", "combo"],
            "dimension": ["d1", "d1", "d1", "d2", "d2", "d2", "d2"],
            "metric": ["accuracy"] * 3 + ["one_minus_ned"] * 2 + ["accuracy+one_minus_ned"] * 2,
            "correct": [True, None, None, None, None, None, True],
            "prediction": ["A", None, "maybe", "abc", None, None, "abc"],
            "reference": [None, None, None, "abc", "abc", "abc", "abc"],
        }
    )
    t = medbench.score(df, options=OPTS).table
    check_schema(t)
    got = {r[0]: tuple(r[1:]) for r in t.select("task", "n", *COVERAGE_COLUMNS).rows()}
    assert got == {
        "qa": (3, 1, 2, 1),  # row 1 no response, row 2 unreadable
        "ned": (2, 1, 1, 1),
        "combo [accuracy]": (2, 1, 1, 1),
        "combo [one_minus_ned]": (2, 1, 1, 1),
        "combo": (2, 1, 1, 1),  # input rows ungraded in any of its metrics
        "dimension:d1": (3, 1, 2, 1),
        "dimension:d2": (4, 2, 2, 2),
        "overall": (7, 3, 4, 3),
    }


def test_inspect_unscored_samples_are_left_out_and_counted() -> None:
    df = pl.DataFrame(
        {
            "model": ["m"] * 6,
            "task": ["t1", "t1", "t1", "t1", "t2", "t2"],
            "scorer": ["acc"] * 6,
            "sample_id": ["s1", "s2", "s3", "s3", "s4", "s5"],
            # s2 and s4: no scored epoch (left out); s3: one of two epochs scored (graded)
            "value": [1.0, None, 1.0, None, None, 0.0],
        }
    )
    t = inspect.score(df, options=OPTS).table
    check_schema(t)
    assert cover(t, "acc") == {"t1": (2, 2, 1, None), "t2": (1, 1, 1, None)}


def test_renderings_carry_the_columns() -> None:
    df = pl.DataFrame(
        {"model": ["m"] * 2, "gt_tools": [["A"]] * 2, "called_tools": [["A"], None],
         "response": ["x", None], "reference_answer": ["x", "y"]}
    )  # fmt: skip
    report = radabench.score(df, options=OPTS)
    header = next(x for x in report.to_markdown().splitlines() if x.startswith("| benchmark"))
    assert all(f" {c} " in header for c in COVERAGE_COLUMNS)
    assert report.to_csv().splitlines()[0].endswith("n_graded,n_ungraded,n_missing")
    doc = json.loads(report.to_json())
    assert doc["columns"][-3:] == list(COVERAGE_COLUMNS)
    html = report.to_html()
    assert all(f"<th>{c}</th>" in html for c in COVERAGE_COLUMNS)


QUESTION = "Which histologic type is shown?\nA) Adenocarcinoma\nB) Squamous cell carcinoma"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m tumorboard.cli ARGS`` in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "tumorboard.cli", *args],
        capture_output=True, text=True, env=dict(os.environ), timeout=300,
    )  # fmt: skip


def test_cli_prints_and_warns_the_coverage_of_a_lammi_store(tmp_path: Path) -> None:
    # 6 multiple-choice answers: 3 readable, 1 unreadable, 1 empty, 1 without a response
    responses = ["B", "A", "B", "I am not sure", "", None]
    recs = []
    for k, r in enumerate(responses):
        rec = {"model": "path-agent", "item_id": f"s{k}", "task": "he_subtyping",
               "question": QUESTION, "gold": "B"}  # fmt: skip
        if r is not None:
            rec["response"] = r
        if k == 0:  # the run records events: the others called no tool
            rec["events"] = [{"kind": "tool_call", "role": "tool", "tool": "conch",
                              "input": {"img": "0.png"}, "ok": True}]  # fmt: skip
        recs.append(rec)
    log = tmp_path / "l.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    store = str(tmp_path / "s")
    imp = _cli("import", "jsonl", str(log), "--store", store, "--benchmark", "lammi")
    assert imp.returncode == 0, imp.stderr
    out = _cli("score", store, "--n-resamples", "50", "--format", "json")
    assert out.returncode == 0, out.stderr
    assert "coverage: 3 of 6 item(s) graded, 3 ungraded (2 with no response)" in out.stderr
    assert "3 answer(s) have no grade" in out.stderr
    rows = {(r["metric"], r["task"]): r for r in json.loads(out.stdout)["rows"]}
    mc = rows[("mc_f1", "overall")]
    assert (mc["n"], mc["n_graded"], mc["n_ungraded"], mc["n_missing"]) == (6, 3, 3, 2)
    tss = rows[("trajectory_success_score", "overall")]
    assert (tss["n_graded"], tss["n_ungraded"]) == (6, 0)
    strict = _cli("score", store, "--n-resamples", "50", "--strict")
    assert strict.returncode == 1 and "--strict" in strict.stderr
