"""The ``n_ungraded`` column of the RadA-BenchPlat, LAMMI, MedInsightBench and MedBench reports."""

from __future__ import annotations

import polars as pl
from tumorboard.score import lammi, medbench, medinsight, radabench
from tumorboard.stats import BootstrapOptions

OPTS = BootstrapOptions(n_resamples=50, seed=1)


def _ungraded(table: pl.DataFrame, metric: str) -> dict[str, int | None]:
    """Return n_ungraded per task for one metric."""
    rows = table.filter(pl.col("metric") == metric).select("task", "n_ungraded").rows()
    return dict(rows)


def test_radabench_counts_missing_responses() -> None:
    df = pl.DataFrame(
        {
            "model": ["m"] * 4,
            "task": ["a", "a", "b", "b"],
            "gt_tools": [["A", "B"]] * 4,
            "called_tools": [["A", "B"]] * 4,
            "response": ["the liver", None, "a lesion", "the liver"],
            "reference_answer": ["the liver", "a lesion", "a lesion", "the liver"],
        }
    )
    report = radabench.score(df, options=OPTS)
    t = report.table
    assert t.schema["n_ungraded"] == pl.Int64
    for metric in ("bleu", "rouge_l", "f1"):
        assert _ungraded(t, metric) == {"a": 1, "b": 0, "overall": 1}
    assert set(_ungraded(t, "tool_chain_levenshtein").values()) == {0}
    assert any("n_ungraded" in note for note in report.notes)
    # the numbers are unchanged: the missing response still scores 0
    f1 = t.filter((pl.col("metric") == "f1") & (pl.col("task") == "a"))
    assert f1["estimate"][0] == 0.5 and f1["n"][0] == 2


def test_radabench_no_note_when_all_answered() -> None:
    df = pl.DataFrame(
        {
            "model": ["m"] * 2,
            "gt_tools": [["A"]] * 2,
            "called_tools": [["A"]] * 2,
            "response": ["x", "y"],
            "reference_answer": ["x", "y"],
        }
    )
    report = radabench.score(df, options=OPTS)
    assert _ungraded(report.table, "bleu") == {"all": 0}
    assert not any("n_ungraded" in note for note in report.notes)


def test_lammi_counts_missing_predictions_and_judge_scores() -> None:
    call = [{"name": "zoom", "input": "x", "success": True}]
    df = pl.DataFrame(
        {
            "model": ["m"] * 4,
            "task": ["a", "a", "b", "b"],
            "tool_calls": [call] * 4,
            "output_valid": [True] * 4,
            "mc_prediction": ["A", None, "B", "C"],
            "mc_answer": ["A", "B", "B", "C"],
            "answer_consistency": [1.0, 2.0, None, 3.0],
        }
    )
    report = lammi.score(df, options=OPTS)
    t = report.table
    assert _ungraded(t, "mc_f1") == {"a": 1, "b": 0, "overall": 1}
    assert _ungraded(t, "answer_consistency") == {"a": 0, "b": 1, "overall": 1}
    assert set(_ungraded(t, "trajectory_success_score").values()) == {0}
    mc = t.filter((pl.col("metric") == "mc_f1") & (pl.col("task") == "a"))
    assert mc["estimate"][0] == 0.5 and mc["n"][0] == 2
    assert sum("n_ungraded" in note for note in report.notes) == 2


def test_medinsight_counts_cases_without_judge_scores() -> None:
    df = pl.DataFrame(
        {
            "model": ["m"] * 4,
            "case_id": ["1", "2", "3", "4"],
            "task": ["a", "a", "b", "b"],
            "gt_insights": [["tumor grows"]] * 4,
            "insights": [["tumor grows"], ["tumor shrinks"], ["tumor grows"], ["no change"]],
            "insight_precision_scores": [[8.0], None, [7.0], [2.0]],
            "insight_novelty_votes": [[0], None, [1], [3]],
        }
    )
    report = medinsight.score(df, options=OPTS)
    t = report.table
    for metric in ("original", "innovation"):
        assert _ungraded(t, metric) == {"a": 1, "b": 0, "overall": 1}
    assert set(_ungraded(t, "insight_f1").values()) == {0}
    assert any("n_ungraded" in note for note in report.notes)
    orig = t.filter((pl.col("metric") == "original") & (pl.col("task") == "a"))
    assert orig["estimate"][0] == 1.0 and orig["n"][0] == 1


def test_medbench_counts_missing_answers() -> None:
    df = pl.DataFrame(
        {
            "model": ["m"] * 5,
            "task": ["qa", "qa", "qa", "ned", "ned"],
            "dimension": ["d1", "d1", "d1", "d2", "d2"],
            "metric": ["accuracy"] * 3 + ["one_minus_ned"] * 2,
            "correct": [True, None, False, None, None],
            "prediction": [None, None, None, "abc", "abd"],
            "reference": [None, None, None, "abc", "abc"],
        }
    )
    report = medbench.score(df, options=OPTS)
    t = report.table
    got = dict(t.select("task", "n_ungraded").rows())
    assert got == {"qa": 1, "ned": 0, "dimension:d1": 1, "dimension:d2": 0, "overall": 1}
    assert t.schema["n_ungraded"] == pl.Int64
    qa = t.filter(pl.col("task") == "qa")
    assert abs(qa["estimate"][0] - 100.0 / 3) < 1e-9
    assert any("n_ungraded" in note for note in report.notes)


def test_medbench_counts_missing_boxes_labels_and_strict_items() -> None:
    df = pl.DataFrame(
        {
            "model": ["m"] * 6,
            "task": ["box", "box", "lab", "lab", "strict", "strict"],
            "dimension": ["d"] * 6,
            "metric": ["iou", "iou", "micro_f1", "micro_f1", "strict_accuracy", "strict_accuracy"],
            "pred_box": [[0.0, 0.0, 1.0, 1.0], None, None, None, None, None],
            "gold_box": [[0.0, 0.0, 1.0, 1.0]] * 2 + [None] * 4,
            "pred_labels": [None, None, ["x"], None, None, None],
            "gold_labels": [None, None, ["x"], ["y"], None, None],
            "item_id": [None, None, None, None, "q1", "q1"],
            "correct": [None, None, None, None, True, None],
        }
    )
    t = medbench.score(df, options=OPTS).table
    got = dict(t.select("task", "n_ungraded").rows())
    assert got == {"box": 1, "lab": 1, "strict": 1, "dimension:d": 3, "overall": 3}
