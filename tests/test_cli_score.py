"""``tumorboard import`` then ``tumorboard score`` end to end on generated MTBBench logs.

The accuracies are worked out by hand for the generated logs (two runs of one model, with and
without tools, two patients each, 15 questions per patient: 0-8 digital_pathology,
9-12 hematology, 13-14 outcome_recurrence).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest
from tumorboard.cli import main
from tumorboard.score import TABLE_COLUMNS

OPTS = "A) one\nB) two\nC) three"


def question(pos: int) -> str:
    if pos == 13:
        return "Do you think the patient will be alive in 5 years?\nA) Yes\nB) No"
    if pos == 14:
        return "Will the patient's cancer have a recurrence in 2 years?\nA) Yes\nB) No"
    return f"Question {pos} about the case?\n{OPTS}"


def patient_log(right) -> list[dict]:
    out = []
    for pos in range(15):
        gold = "A) Yes" if pos >= 13 else "A) one"
        wrong = "B) No" if pos >= 13 else "C) three"
        ok = right(pos)
        out.append(
            {
                "question": question(pos),
                "answer": gold,
                "response": gold if ok else wrong,
                "correct": ok,
                "files_accessed": ["slide.jpg"] * (pos % 3),
                "files_hallucinated": [],
                "question_time": 1.0,
            }
        )
    return out


@pytest.fixture
def store(tmp_path, capsys) -> Path:
    root = tmp_path / "logs"
    runs = {
        "alpha": {"1": lambda p: p % 2 == 0, "2": lambda p: p < 5},
        "alpha-with-tools": {"1": lambda p: p != 3, "2": lambda p: p != 3},
    }
    for folder, patients in runs.items():
        for pid, right in patients.items():
            recs = patient_log(right)
            if folder == "alpha" and pid == "2":
                del recs[14]["correct"]  # graded on import: "B) No" vs gold A -> wrong
            path = root / folder / f"{pid}_chatlog_1700000000.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(recs))
    (root / "alpha" / "broken_chatlog_1.json").write_text("{")
    st = tmp_path / "store"
    # the broken log is skipped and named, the good ones imported; exit status 1 says so
    assert main(["import", "mtbbench", str(root), "--store", str(st)]) == 1
    captured = capsys.readouterr()
    out = captured.out
    assert "4 imported" in out and "broken_chatlog_1.json: not valid JSON" in out
    assert "1 log file(s) could not be imported: broken_chatlog_1.json" in captured.err
    return st


# per (tools, task): (n, n_correct), worked out from the patterns above
EXPECTED = {
    (False, "digital_pathology"): (18, 5 + 5),  # p1: 0,2,4,6,8; p2: 0-4
    (False, "hematology"): (8, 2 + 0),  # p1: 10, 12
    (False, "outcome_recurrence"): (4, 1 + 0),  # p1: 14
    (True, "digital_pathology"): (18, 16),  # all but position 3, twice
    (True, "hematology"): (8, 8),
    (True, "outcome_recurrence"): (4, 4),
}


def test_import_then_score_json_matches_hand_computation(store, capsys):
    code = main(
        [
            "score",
            str(store),
            "--benchmark",
            "mtbbench",
            "--n-resamples",
            "500",
            "--seed",
            "0",
            "--format",
            "json",
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    doc = json.loads(text)
    assert doc["columns"] == [*TABLE_COLUMNS, "n_correct", "n_graded", "n_ungraded", "n_missing"]
    rows = [r for r in doc["rows"] if r["metric"] == "accuracy"]
    for r in rows:
        r["accuracy"] = r["estimate"]
    by_key = {(r["tools"], r["task"]): r for r in rows}
    assert len(rows) == 8 and {r["model"] for r in rows} == {"alpha"}
    assert {r["track"] for r in rows} == {"multimodal"} and {r["benchmark"] for r in rows} == {
        "mtbbench"
    }
    for key, (n, k) in EXPECTED.items():
        r = by_key[key]
        assert (r["n"], r["n_correct"]) == (n, k)
        assert r["accuracy"] == pytest.approx(k / n, abs=1e-12)
    for tools in (False, True):
        overall = by_key[(tools, "overall")]
        task_acc = [k / n for (t, _), (n, k) in EXPECTED.items() if t == tools]
        assert overall["accuracy"] == pytest.approx(sum(task_acc) / 3, abs=1e-12)
        assert overall["n"] == 30
        assert overall["n_correct"] == sum(k for (t, _), (n, k) in EXPECTED.items() if t == tools)
    # the no-tools run: (10/18 + 2/8 + 1/4) / 3
    assert by_key[(False, "overall")]["accuracy"] == pytest.approx((10 / 18 + 0.25 + 0.25) / 3)
    for r in rows:
        for f in ("accuracy", "boot_mean", "ci_low", "ci_high", "pm"):
            assert 0.0 <= r[f] <= 1.0, (r, f)
        assert r["ci_low"] <= r["boot_mean"] <= r["ci_high"]
        assert r["pm"] == pytest.approx((r["ci_high"] - r["ci_low"]) / 2, abs=1e-12)
    # every answer right: a degenerate interval at 1
    hem = by_key[(True, "hematology")]
    assert hem["ci_low"] == hem["ci_high"] == 1.0 and hem["pm"] == 0.0
    # one answer was logged without a grade and graded on import: nothing is ungraded
    assert {r["n_ungraded"] for r in rows} == {0}
    # same seed, same output; patient clusters change the intervals, not the estimates
    main(["score", str(store), "--n-resamples", "500", "--format", "json"])
    assert capsys.readouterr().out == text
    main(["score", str(store), "--n-resamples", "500", "--format", "json", "--cluster", "patient"])
    clustered = {
        (r["tools"], r["task"]): r
        for r in json.loads(capsys.readouterr().out)["rows"]
        if r["metric"] == "accuracy"
    }
    for key, r in by_key.items():
        assert clustered[key]["estimate"] == r["estimate"] and clustered[key]["n"] == r["n"]


def test_score_formats_and_out_file(store, tmp_path, capsys):
    assert main(["score", str(store), "--n-resamples", "200", "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert "alpha" in md and "digital_pathology" in md and "overall" in md
    out = tmp_path / "report.csv"
    assert (
        main(["score", str(store), "--n-resamples", "200", "--format", "csv", "--out", str(out)])
        == 0
    )
    assert capsys.readouterr().out.strip() == f"wrote {out}"
    table = pl.read_csv(out)
    acc = table.filter(pl.col("metric") == "accuracy")
    assert acc.height == 8 and set(acc.get_column("task")) >= {"overall", "hematology"}
    # distinct files accessed per question: "slide.jpg" repeated pos % 3 times is one file
    # (stored once), so 1 where pos % 3 > 0: 6 of the 9 pathology questions (0-8), 2 of the
    # 4 hematology ones (9-12) and both outcome ones (13, 14)
    files = table.filter(pl.col("metric") == "files_accessed")
    est = {(r["tools"], r["task"]): r["estimate"] for r in files.to_dicts()}
    assert est[(False, "digital_pathology")] == pytest.approx(6 / 9)
    assert est[(True, "hematology")] == pytest.approx(2 / 4)
    assert est[(True, "outcome_recurrence")] == pytest.approx(1.0)
    html = tmp_path / "report.html"
    assert (
        main(["score", str(store), "--n-resamples", "200", "--format", "html", "--out", str(html)])
        == 0
    )
    text = html.read_text()
    assert "<svg" in text and "alpha" in text
    js = tmp_path / "rows.json"
    main(["score", str(store), "--n-resamples", "200", "--format", "json", "--out", str(js)])
    rows = [r for r in json.loads(js.read_text())["rows"] if r["metric"] == "accuracy"]
    assert len(rows) == 8 and not any(math.isnan(r["estimate"]) for r in rows)


def test_cli_errors_and_import_options(store, tmp_path, capsys):
    assert main(["score", str(tmp_path / "nowhere")]) == 2
    assert "no trajectory store" in capsys.readouterr().err
    assert main(["score", str(store), "--benchmark", "radabench"]) == 2
    assert "no items of benchmark 'radabench' (benchmarks present: mtbbench)" in (
        capsys.readouterr().err
    )
    assert main(["score", str(store), "--track", "longitudinal"]) == 2
    assert "left in tracks longitudinal" in capsys.readouterr().err
    # re-import: everything already there; --json report
    code = main(["import", "mtbbench", str(tmp_path / "logs"), "--store", str(store), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["n_items"] == 0 and len(report["unchanged"]) == 4
    assert [Path(f).name for f in report["failed"]] == ["broken_chatlog_1.json"]
    assert report["n_unchanged"] == 60
    assert [Path(s["file"]).name for s in report["skipped"]] == ["broken_chatlog_1.json"]
    # --strict fails on the broken file, and imports nothing
    code = main(["import", "mtbbench", str(tmp_path / "logs"), "--store", str(store), "--strict"])
    assert code == 2 and "broken_chatlog_1.json: not valid JSON" in capsys.readouterr().err
    assert (
        main(["import", "jsonl", str(tmp_path / "logs"), "--store", str(store), "--map", "gold"])
        == 2
    )
    assert "--map: expected FIELD=KEY" in capsys.readouterr().err


def test_score_convention_from_the_command_line(store, capsys):
    """``--convention paper`` gives MTBBench's printed cells and says so; bad choices exit 2."""
    args = ["score", str(store), "--n-resamples", "300", "--format", "json"]
    assert main([*args, "--convention", "paper"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["convention"].startswith("paper")
    rows = [r for r in doc["rows"] if r["metric"] == "accuracy" and not r["tools"]]
    tasks = sorted((r for r in rows if r["task"] != "overall"), key=lambda r: r["task"])
    overall = next(r for r in rows if r["task"] == "overall")
    means = [r["boot_mean"] for r in tasks]
    assert [r["estimate"] for r in tasks] == means  # the paper's task "mean"
    assert overall["estimate"] == pytest.approx(sum(means) / 3, abs=1e-12)
    # three task means m0 <= m1 <= m2: np.percentile(m, 2.5) sits at position 0.05 (linear
    # interpolation), m0 + 0.05 (m1 - m0); the paper's "±" is 0.475 (m2 - m0)
    m0, m1, m2 = sorted(means)
    assert overall["ci_low"] == pytest.approx(m0 + 0.05 * (m1 - m0), abs=1e-12)
    assert overall["ci_high"] == pytest.approx(m2 - 0.05 * (m2 - m1), abs=1e-12)
    assert overall["pm"] == pytest.approx(0.475 * (m2 - m0), abs=1e-12)
    assert main([*args[:-2], "--convention", "paper"]) == 0
    assert "Convention: paper" in capsys.readouterr().out
    # mtbbench has no "code" convention; the distributed path has only tumorboard's
    assert main([*args, "--convention", "code"]) == 2
    err = capsys.readouterr().err
    assert "tumorboard: error: mtbbench: convention: expected one of" in err and "'code'" in err
    assert main([*args, "--convention", "paper", "--shards", "2"]) == 2
    assert "--convention paper: the distributed path" in capsys.readouterr().err
