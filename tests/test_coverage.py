"""What each figure stands on: field aliases, ungraded answers, metrics without inputs.

Rows of the "your own logs" issue's table, run through the CLI as a user runs them.
"""

from __future__ import annotations

import json

from test_item_identity import OPTS, cli, write_jsonl


def _records(model: str, n: int, share: float) -> list[dict]:
    """``n`` graded records of ``model`` (``is_correct``), a third answering ``answer: b``."""
    out = []
    for i in range(n):
        right = (i * 37 % 100) < share * 100
        out.append(
            {
                "model": model,
                "patient_id": f"p{i}",
                "task": "diagnosis",
                "question": f"Case {i}: diagnosis?{OPTS}",
                "gold": "A",
                "response": "answer: b" if i % 3 == 0 else "[ANSWER: A]",
                "is_correct": right,
            }
        )
    return out


def _accuracy(out: str) -> dict[str, float]:
    rows = json.loads(out)["rows"]
    return {
        r["model"]: r["estimate"]
        for r in rows
        if r["metric"] == "accuracy" and r["task"] == "overall"
    }


def test_is_correct_is_read_as_the_grade_and_said_so(tmp_path):
    recs = _records("a", 150, 0.75) + _records("b", 150, 0.47)
    log = write_jsonl(tmp_path / "log.jsonl", recs)
    out = cli("import", "jsonl", str(log), "--store", str(tmp_path / "s"), "--benchmark",
              "mtbbench")  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "read 'is_correct' as the field 'correct'" in out.stdout
    want = {}
    for m in ("a", "b"):
        graded = [r["is_correct"] for r in recs if r["model"] == m]
        want[m] = sum(graded) / len(graded)
    score = cli("score", str(tmp_path / "s"), "--benchmark", "mtbbench", "--format", "json",
                "--n-resamples", "200")  # fmt: skip
    assert score.returncode == 0, score.stderr
    got = _accuracy(score.stdout)
    assert got == {m: want[m] for m in got} and set(got) == {"a", "b"}
    assert "no grade" not in score.stderr


def test_unreadable_answers_are_ungraded_warned_and_strict_fails(tmp_path):
    recs = [
        {"model": "m", "question": f"Case {i}: diagnosis?{OPTS}", "gold": "A",
         "response": "[ANSWER: A]" if i % 2 else "I think it is probably adenocarcinoma"}
        for i in range(20)
    ]  # fmt: skip
    log = write_jsonl(tmp_path / "log.jsonl", recs)
    out = cli("import", "jsonl", str(log), "--store", str(tmp_path / "s"), "--benchmark",
              "mtbbench")  # fmt: skip
    assert "10 of 20 lines have no grade" in out.stdout and "ungraded" in out.stdout
    score = cli("score", str(tmp_path / "s"), "--format", "json", "--n-resamples", "100")
    assert score.returncode == 0
    assert "10 answer(s) have no grade" in score.stderr
    rows = [r for r in json.loads(score.stdout)["rows"] if r["metric"] == "accuracy"]
    assert {r["n_ungraded"] for r in rows} == {10}
    strict = cli("score", str(tmp_path / "s"), "--n-resamples", "100", "--strict")
    assert strict.returncode == 1 and "--strict" in strict.stderr
    assert "accuracy" in strict.stdout  # the report is still printed


def test_metrics_without_inputs_are_left_out_not_zero(tmp_path):
    recs = [{"model": "m", "question": f"Q{i}?{OPTS}", "gold": "A", "response": "[ANSWER: A]"}
            for i in range(12)]  # fmt: skip
    log = write_jsonl(tmp_path / "log.jsonl", recs)
    cli("import", "jsonl", str(log), "--store", str(tmp_path / "s"), "--benchmark", "mtbbench")
    score = cli("score", str(tmp_path / "s"), "--format", "json", "--n-resamples", "100")
    assert score.returncode == 0, score.stderr
    doc = json.loads(score.stdout)
    metrics = {r["metric"] for r in doc["rows"]}
    assert metrics == {"accuracy"}, metrics
    assert any("files_accessed and hallucinated_file_rate: left out" in n for n in doc["notes"])
    assert "left out" in score.stderr
