"""Tests of the MTBBench scorer ``tumorboard.score.mtbbench`` on a small hand-built frame.

The frame's right answers are worked out below; the engine (``tumorboard.stats.bootstrap`` with
the same group keys) is the oracle for the bootstrap columns.

Hand-worked frame (track "multimodal" for gpt, none given for llama -> "default"):

gpt (tools):    diag      correct T, T, F, null  -> 2/4 = 0.5 (null counts as wrong)
                progress  correct F, F           -> 0/2 = 0.0 (CI [0, 0])
                therapy   correct T, T, T        -> 3/3 = 1.0 (CI [1, 1])
                overall   (0.5 + 0.0 + 1.0) / 3 = 1/2 (pooled would be 5/9), n 9, n_correct 5
llama (no tools): diag    correct F, F, T        -> 1/3
                therapy   correct T, F           -> 1/2
                overall   (1/3 + 1/2) / 2 = 5/12 (pooled 2/5), n 5, n_correct 2
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
import tumorboard.score as score
from tumorboard.score import TABLE_COLUMNS, mtbbench
from tumorboard.stats import BootstrapOptions, bootstrap

FRAME = pl.DataFrame(
    {
        "model": ["gpt"] * 9 + ["llama"] * 5,
        "track": ["multimodal"] * 9 + [None] * 5,
        "tools": [True] * 9 + [False] * 5,
        "task": ["diag"] * 4 + ["progress"] * 2 + ["therapy"] * 3 + ["diag"] * 3 + ["therapy"] * 2,
        "correct": [True, True, False, None, False, False, True, True, True,
                    False, False, True, True, False],
        "patient_id": ["p1", "p1", "p2", "p3", "p1", "p2", "p3", "p4", "p4",
                       "q1", "q2", "q2", "q1", "q3"],
        "files_accessed": [["a", "b"], ["a", "a"], [], None, ["c"], ["c", "d", "e"],
                           ["x"], ["x", "y"], ["x", None],
                           ["a"], [], ["a", "b", "c", "d"], ["t"], ["t", "t", "u"]],
        "files_hallucinated": [[], ["zz"], [], None, [], [], ["q", "r"], [], [],
                               ["nope"], ["nope"], [], [], []],
    }
)  # fmt: skip


def get(table: pl.DataFrame, col: str, **key) -> object:
    sub = table
    for name, value in key.items():
        sub = sub.filter(pl.col(name) == value)
    assert sub.height == 1, key
    return sub.get_column(col)[0]


@pytest.fixture(scope="module")
def report():
    return mtbbench.score(FRAME, options=BootstrapOptions(n_resamples=500, seed=0))


def test_accuracy_rows_hand_worked(report):
    t = report.table.filter(pl.col("metric") == "accuracy")
    expected = {
        ("gpt", "diag"): (4, 2, 0.5), ("gpt", "progress"): (2, 0, 0.0),
        ("gpt", "therapy"): (3, 3, 1.0), ("gpt", "overall"): (9, 5, 1 / 2),
        ("llama", "diag"): (3, 1, 1 / 3), ("llama", "therapy"): (2, 1, 0.5),
        ("llama", "overall"): (5, 2, 5 / 12),
    }  # fmt: skip
    assert t.height == len(expected)
    for (model, task), (n, n_correct, acc) in expected.items():
        assert get(t, "n", model=model, task=task) == n
        assert get(t, "n_correct", model=model, task=task) == n_correct
        assert get(t, "estimate", model=model, task=task) == pytest.approx(acc, abs=1e-15)
    assert get(t, "track", model="gpt", task="diag") == "multimodal"
    assert get(t, "track", model="llama", task="diag") == "default"
    assert get(t, "tools", model="gpt", task="diag") is True
    # all-correct task: the interval is [1, 1]
    assert get(t, "ci_low", model="gpt", task="therapy") == 1.0
    assert get(t, "ci_high", model="gpt", task="therapy") == 1.0
    assert get(t, "boot_mean", model="gpt", task="therapy") == 1.0
    assert get(t, "pm", model="gpt", task="therapy") == 0.0
    np.testing.assert_array_equal(t["pm"], (t["ci_high"] - t["ci_low"]) / 2)


def test_file_metrics_hand_worked(report):
    t = report.table
    files = t.filter(pl.col("metric") == "files_accessed")
    # distinct non-null names per question; a null list counts 0
    expected_files = {
        ("gpt", "diag"): (2 + 1 + 0 + 0) / 4, ("gpt", "progress"): (1 + 3) / 2,
        ("gpt", "therapy"): (1 + 2 + 1) / 3, ("llama", "diag"): (1 + 0 + 4) / 3,
        ("llama", "therapy"): (1 + 2) / 2,
    }  # fmt: skip
    assert files.height == len(expected_files)  # no overall row for the file metrics
    for (model, task), value in expected_files.items():
        assert get(files, "estimate", model=model, task=task) == pytest.approx(value)
    hall = t.filter(pl.col("metric") == "hallucinated_file_rate")
    expected_hall = {
        ("gpt", "diag"): 1 / 4, ("gpt", "progress"): 0.0, ("gpt", "therapy"): 1 / 3,
        ("llama", "diag"): 2 / 3, ("llama", "therapy"): 0.0,
    }  # fmt: skip
    for (model, task), value in expected_hall.items():
        assert get(hall, "estimate", model=model, task=task) == pytest.approx(value)
    assert get(hall, "ci_high", model="gpt", task="progress") == 0.0
    assert files["n_correct"].null_count() == files.height
    assert hall["n_correct"].null_count() == hall.height


def test_table_schema_and_order(report):
    t = report.table
    assert report.benchmark == "mtbbench"
    assert t.columns == [*TABLE_COLUMNS, "n_correct", "n_graded", "n_ungraded", "n_missing"]
    assert t.schema["n_correct"] == pl.Int64 and t.schema["n"] == pl.Int64
    assert set(t["benchmark"]) == {"mtbbench"}
    keys = t.select("track", "model", "tools", "metric", "task").rows()
    assert keys[:7] == [
        ("default", "llama", False, "accuracy", "diag"),
        ("default", "llama", False, "accuracy", "therapy"),
        ("default", "llama", False, "accuracy", "overall"),
        ("default", "llama", False, "files_accessed", "diag"),
        ("default", "llama", False, "files_accessed", "therapy"),
        ("default", "llama", False, "hallucinated_file_rate", "diag"),
        ("default", "llama", False, "hallucinated_file_rate", "therapy"),
    ]
    assert keys[7:11] == [
        ("multimodal", "gpt", True, "accuracy", t) for t in ("diag", "progress", "therapy",
                                                            "overall")
    ]  # fmt: skip
    assert t.height == 7 + 4 + 3 + 3


def test_bootstrap_columns_equal_engine_with_same_keys(report):
    correct = FRAME["correct"].fill_null(False).to_numpy().astype(float)
    keys = pl.DataFrame({"track": FRAME["track"].fill_null("default"), "model": FRAME["model"],
                         "tools": FRAME["tools"], "task": FRAME["task"]})  # fmt: skip
    ref = bootstrap(
        correct, groups=keys, options=BootstrapOptions(n_resamples=500, seed=0)
    ).to_polars()
    acc = report.table.filter((pl.col("metric") == "accuracy") & (pl.col("task") != "overall"))
    joined = acc.join(ref, on=["track", "model", "tools", "task"], suffix="_ref")
    assert joined.height == 5
    for col in ("n", "estimate", "boot_mean", "ci_low", "ci_high"):
        assert joined[col].to_list() == joined[f"{col}_ref"].to_list(), col


def test_patient_clusters(report):
    clustered = mtbbench.score(
        FRAME, options=BootstrapOptions(n_resamples=500), cluster="patient_id"
    )
    alias = mtbbench.score(FRAME, options=BootstrapOptions(n_resamples=500), cluster="patient")
    assert clustered.table.equals(alias.table)
    assert clustered.table["estimate"].to_list() == report.table["estimate"].to_list()
    assert clustered.table["n_correct"].to_list() == report.table["n_correct"].to_list()
    assert not clustered.table["ci_low"].equals(report.table["ci_low"]) or not clustered.table[
        "ci_high"
    ].equals(report.table["ci_high"])
    # per-task rows: the engine with the same clusters
    correct = FRAME["correct"].fill_null(False).to_numpy().astype(float)
    keys = pl.DataFrame({"track": FRAME["track"].fill_null("default"), "model": FRAME["model"],
                         "tools": FRAME["tools"], "task": FRAME["task"]})  # fmt: skip
    ref = bootstrap(
        correct,
        groups=keys,
        clusters=FRAME["patient_id"],
        options=BootstrapOptions(n_resamples=500, seed=0),
    ).to_polars()
    acc = clustered.table.filter((pl.col("metric") == "accuracy") & (pl.col("task") != "overall"))
    joined = acc.join(ref, on=["track", "model", "tools", "task"], suffix="_ref")
    for col in ("boot_mean", "ci_low", "ci_high"):
        assert joined[col].to_list() == joined[f"{col}_ref"].to_list(), col
    # Worked by hand: llama/diag has patient q1 (1 question, wrong) and q2 (2 questions, one
    # right). Resampling 2 patients gives 0/2 (prob 1/4), 1/3 (prob 1/2) or 2/4 (prob 1/4): the
    # 95% interval is [0, 0.5] and the bootstrap mean 1/2 * 1/3 + 1/4 * 1/2 = 7/24. Resampling
    # the 3 questions instead gives 3/3 with prob 1/27 > 2.5%, so that interval reaches 1.
    clus = acc.filter((pl.col("task") == "diag") & (pl.col("model") == "llama")).row(0, named=True)
    plain = report.table.filter((pl.col("metric") == "accuracy") & (pl.col("task") == "diag")
                                & (pl.col("model") == "llama")).row(0, named=True)  # fmt: skip
    assert (clus["ci_low"], clus["ci_high"]) == (0.0, 0.5)
    assert (plain["ci_low"], plain["ci_high"]) == (0.0, 1.0)
    assert clus["boot_mean"] == pytest.approx(7 / 24, abs=0.04)  # MC sd ~0.008 at B = 500
    assert any(str(n).startswith("intervals resample whole clusters") for n in clustered.notes)


def test_minimal_frame_and_input_kinds():
    df = FRAME.select("model", "task", "correct")
    r = mtbbench.score(df, options=BootstrapOptions(n_resamples=200))
    assert set(r.table["metric"]) == {"accuracy"}
    assert set(r.table["track"]) == {"default"} and set(r.table["tools"]) == {False}
    assert r.table.equals(
        mtbbench.score(df.lazy(), options=BootstrapOptions(n_resamples=200)).table
    )
    assert r.table.equals(
        mtbbench.score(df.to_arrow(), options=BootstrapOptions(n_resamples=200)).table
    )
    # all-null optional columns take the defaults; an all-null file column is no measurement:
    # the metric is left out with a note, never reported as 0 files
    nulls = df.with_columns(
        pl.lit(None).alias("track"), pl.lit(None).alias("tools"),
        pl.lit(None).alias("files_accessed"),
    )  # fmt: skip
    rep = mtbbench.score(nulls, options=BootstrapOptions(n_resamples=200))
    t = rep.table
    assert t.filter(pl.col("metric") == "accuracy").equals(r.table)
    assert t.filter(pl.col("metric") == "files_accessed").height == 0
    assert any(n.startswith("files_accessed: left out") for n in rep.notes)
    # 0/1 integers are accepted for `correct`
    ints = df.with_columns(pl.col("correct").cast(pl.Int8))
    assert r.table.equals(mtbbench.score(ints, options=BootstrapOptions(n_resamples=200)).table)


def test_integer_file_counts_equal_lists():
    counts = FRAME.with_columns(
        pl.col("files_accessed").list.drop_nulls().list.n_unique().fill_null(0).cast(pl.Int32),
        pl.col("files_hallucinated").list.len().fill_null(0),
    )
    a = mtbbench.score(FRAME, options=BootstrapOptions(n_resamples=200)).table
    b = mtbbench.score(counts, options=BootstrapOptions(n_resamples=200)).table
    # the figures are equal; a null list (no file record, counted 0) is ungraded, a 0 is not
    cover = ["n_graded", "n_ungraded"]
    assert a.drop(cover).equals(b.drop(cover))
    files = pl.col("metric").is_in(["files_accessed", "hallucinated_file_rate"])
    assert a.filter(files)["n_ungraded"].sum() == 2 and b.filter(files)["n_ungraded"].sum() == 0
    assert (a["n_graded"] + a["n_ungraded"]).equals(b["n_graded"] + b["n_ungraded"])


def test_missing_columns_and_bad_values():
    for col in ("model", "task", "correct"):
        with pytest.raises(ValueError) as err:
            mtbbench.score(FRAME.drop(col))
        msg = str(err.value)
        assert f"no column {col!r}" in msg
        assert "required columns: model, task, correct" in msg
    with pytest.raises(ValueError, match="needs the column 'patient_id'"):
        mtbbench.score(FRAME.drop("patient_id"), cluster="patient")
    with pytest.raises(TypeError, match="'correct': expected boolean"):
        mtbbench.score(FRAME.with_columns(pl.lit("yes").alias("correct")))
    with pytest.raises(ValueError, match="boolean or 0/1, got 2 at row 0"):
        mtbbench.score(FRAME.with_columns(pl.lit(2).alias("correct")))
    with pytest.raises(ValueError, match="'model' has a missing value at row 1"):
        mtbbench.score(FRAME.with_columns(pl.when(pl.int_range(pl.len()) == 1).then(None)
                                    .otherwise(pl.col("model")).alias("model")))  # fmt: skip
    with pytest.raises(TypeError, match="'files_accessed': expected a list"):
        mtbbench.score(FRAME.with_columns(pl.lit("a").alias("files_accessed")))
    with pytest.raises(ValueError, match="cluster"):
        mtbbench.score(FRAME, cluster="")
    with pytest.raises(TypeError, match="pandas|polars DataFrame"):
        mtbbench.score(FRAME.to_dicts())


def test_renderings(report):
    page = report.to_html()
    assert page.count("<svg") == 3 * 1 + 3 * 1 + 2  # 3 metrics x 2 tracks + 2 scatters
    assert "accuracy vs files accessed" in page
    assert "gpt" in page and "llama" in page
    assert (
        page == mtbbench.score(FRAME, options=BootstrapOptions(n_resamples=500, seed=0)).to_html()
    )
    rows = json.loads(report.to_json())["rows"]
    first = rows[0]
    assert list(first) == [*TABLE_COLUMNS, "n_correct", "n_graded", "n_ungraded", "n_missing"]
    assert first["n_correct"] == 1 and first["task"] == "diag" and first["model"] == "llama"
    md = report.to_markdown().splitlines()
    assert md[0] == "## MTBBench"
    assert sum(ln.startswith("|") for ln in md) == report.table.height + 2


def test_default_options_and_registry():
    r = score.get("mtbbench")(FRAME.select("model", "task", "correct"))
    direct = mtbbench.score(
        FRAME.select("model", "task", "correct"),
        options=BootstrapOptions(n_resamples=1000, level=0.95, seed=0),
    )
    assert r.table.equals(direct.table)
    assert "1000 bootstrap resamples" in r.notes[0]


def test_paper_convention_reproduces_the_printed_cells():
    # MTBBench (Vasilev et al., NeurIPS 2025 D&B) prints per task the mean of 1000 bootstrap
    # accuracies ± half the 2.5-97.5 percentile width, and an Overall = mean of the three task
    # means ± (np.percentile(m, 97.5) - np.percentile(m, 2.5)) / 2 = 0.475 (max - min).
    opts = BootstrapOptions(n_resamples=1000, seed=0)
    rep = mtbbench.score(FRAME, options=opts, convention="paper")
    assert rep.convention is not None and rep.convention.startswith("paper")
    assert "Convention: paper" in rep.to_markdown(style="paper")
    assert json.loads(rep.to_json())["convention"] == rep.convention
    acc = rep.table.filter(pl.col("metric") == "accuracy")
    frame = FRAME.with_columns(pl.col("track").fill_null("default"),
                               pl.col("correct").fill_null(False))  # fmt: skip
    for (_track, model, _tools), sub in frame.group_by(["track", "model", "tools"]):
        means = []
        for task, tsub in sorted(sub.group_by("task"), key=lambda kv: kv[0][0]):
            keys = tsub.select("track", "model", "tools", "task")
            dist = bootstrap(tsub["correct"].cast(pl.Float64).to_numpy(), groups=keys,
                             options=opts, return_distribution=True).distribution[0]  # fmt: skip
            row = get(acc, "estimate", model=model, task=task[0])
            assert row == pytest.approx(dist.mean(), rel=1e-12)
            pm = (np.percentile(dist, 97.5) - np.percentile(dist, 2.5)) / 2
            assert get(acc, "pm", model=model, task=task[0]) == pytest.approx(pm, abs=1e-12)
            means.append(dist.mean())
        m = np.array(means)
        assert get(acc, "estimate", model=model, task="overall") == pytest.approx(m.mean())
        spread = (np.percentile(m, 97.5) - np.percentile(m, 2.5)) / 2
        assert get(acc, "pm", model=model, task="overall") == pytest.approx(spread)
        if len(m) == 3:
            assert spread == pytest.approx(0.475 * (m.max() - m.min()))
    # the default (tumorboard) convention keeps the raw accuracy and the joint-resampling CI
    default = mtbbench.score(FRAME, options=opts)
    assert default.convention is not None and default.convention.startswith("tumorboard")
    assert get(default.table, "estimate", model="gpt", task="diag", metric="accuracy") == 0.5
    with pytest.raises(ValueError, match="convention"):
        mtbbench.score(FRAME, convention="code")


def test_paper_overall_cell_hand_worked():
    # three printed task means 45.3, 61.2, 70.8 (%): Overall = 59.1, ± = 0.475 x 25.5 = 12.1125
    rows = pl.DataFrame({
        "track": ["default"] * 4, "model": ["m"] * 4, "tools": [False] * 4,
        "task": ["a", "b", "c", "overall"], "estimate": [0.44, 0.60, 0.70, 0.58],
        "boot_mean": [0.453, 0.612, 0.708, 0.5], "ci_low": [0.0] * 4, "ci_high": [1.0] * 4,
        "pm": [0.5] * 4,
    })  # fmt: skip
    out = mtbbench.paper_cells(rows)
    assert out["estimate"].to_list()[:3] == [0.453, 0.612, 0.708]
    overall = out.row(3, named=True)
    assert overall["estimate"] == pytest.approx(0.591)
    assert overall["pm"] == pytest.approx(0.121125)
    assert overall["ci_low"] == pytest.approx(0.453 + 0.05 * (0.612 - 0.453))
    assert overall["ci_high"] == pytest.approx(0.612 + 0.95 * (0.708 - 0.612))


def test_paper_convention_caption_describes_the_files_accessed_estimate_shown():
    # Under convention="paper" only accuracy takes the paper's cells (bootstrap means, spread of
    # the task means); files_accessed keeps the raw mean per question with ± = half its
    # bootstrap interval's width and no overall row, and its caption says exactly that.
    opts = BootstrapOptions(n_resamples=200, level=0.9, seed=0)
    rep = mtbbench.score(FRAME, options=opts, convention="paper")
    tables = rep.paper_tables()
    [(files, files_table)] = [(c, t) for c, t in tables if "MTBBench: files_accessed." in c]
    assert "Cells: estimate ± half the width of the 90% percentile bootstrap interval" in files
    assert "accuracy: task estimate = mean of the bootstrap accuracies" in files
    assert "overall ± = half the 5-95 percentile spread of the task means" in files
    assert ("files_accessed and hallucinated_file_rate: estimate = the raw mean per question, "
            "not a bootstrap mean, ± = half the width of its bootstrap interval, no overall"
            ) in files  # fmt: skip
    assert "overall" not in files_table.columns
    rows = rep.table.filter(pl.col("metric") == "files_accessed")
    # gpt diag: distinct files per question {a,b}, {a}, {}, null -> (2 + 1 + 0 + 0) / 4
    assert get(rows, "estimate", model="gpt", task="diag") == 0.75
    assert get(rows, "estimate", model="gpt", task="diag") != get(
        rows, "boot_mean", model="gpt", task="diag"
    )
    assert any(n.startswith("files_accessed:") and "the raw mean" in n for n in rep.notes)
    plain = mtbbench.score(FRAME.drop("files_hallucinated"), options=opts, convention="paper")
    assert plain.convention is not None and plain.convention.endswith(
        "; files_accessed: estimate = the raw mean per question, not a bootstrap mean, ± = half "
        "the width of its bootstrap interval, no overall)"
    )
    default = mtbbench.score(FRAME, options=opts)
    assert "bootstrap mean" not in (default.convention or "")
    assert not any("the raw mean" in n for n in default.notes)
