"""Tests of the scoring framework.

Covered: ``tumorboard.score.summarize`` (per-group bootstrap rows and the joint-resampling
"overall" row), ``Report`` renderings, the inline SVG plots, the column helpers and the scorer
registry.

Oracles: hand-worked means on small frames; the engine's own ``tumorboard.stats.bootstrap`` /
``bootstrap_sufficient`` called directly with the same group keys (identical draws); and an
independent numpy Monte-Carlo bootstrap (multinomial resampling of items or clusters) whose
percentile interval must agree within Monte-Carlo error.
"""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import tumorboard.score as score
from tumorboard.score import TABLE_COLUMNS, Report, sort_table, summarize
from tumorboard.score._plots import nice_ticks, report_figures
from tumorboard.score._validate import as_frame, count_column, require_columns, with_defaults
from tumorboard.stats import BootstrapOptions, bootstrap, bootstrap_sufficient

# model A: t1 = 3/4, t2 = 1/3, t3 = 2/2 (all correct); model B: t1 = 1/2, t2 = 2/5
SMALL = pl.DataFrame(
    {
        "model": ["A"] * 9 + ["B"] * 7,
        "task": ["t1"] * 4 + ["t2"] * 3 + ["t3"] * 2 + ["t1"] * 2 + ["t2"] * 5,
        "correct": [1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0],
    }
).with_columns(pl.col("correct").cast(pl.Boolean))


def cell(table: pl.DataFrame, col: str, **key) -> object:
    sub = table
    for name, value in key.items():
        sub = sub.filter(pl.col(name) == value)
    assert sub.height == 1, key
    return sub.get_column(col)[0]


def mc_mean_of_task_means(values, tasks, clusters, b, level, seed):
    """Run an independent numpy bootstrap of the mean of per-task means.

    Resample units (clusters, or records when clusters is None) with replacement; resamples
    where a task is empty are left out.

    Returns
    -------
    tuple
        ``(boot_mean, ci_low, ci_high)`` with linear-interpolation percentiles.
    """
    rng = np.random.default_rng(seed)
    values = np.asarray(values, dtype=float)
    _, t = np.unique(tasks, return_inverse=True)
    if clusters is None:
        u = np.arange(values.size)
    else:
        _, u = np.unique(clusters, return_inverse=True)
    n_units = int(u.max()) + 1
    counts = rng.multinomial(n_units, np.full(n_units, 1.0 / n_units), size=b)  # (b, units)
    w = counts[:, u].astype(float)  # (b, n) record weights
    onehot = np.eye(int(t.max()) + 1)[t]  # (n, k)
    sums = (w * values) @ onehot
    cnts = w @ onehot
    with np.errstate(invalid="ignore", divide="ignore"):
        stat = np.mean(sums / cnts, axis=1)
    stat = stat[np.isfinite(stat)]
    alpha = (1 - level) / 2
    lo, hi = np.quantile(stat, [alpha, 1 - alpha])
    return float(stat.mean()), float(lo), float(hi), float(stat.std(ddof=1))


# ----------------------------------------------------------------------------- summarize


def test_summarize_hand_worked_estimates_and_schema():
    t = summarize(
        SMALL,
        value="correct",
        benchmark="toy",
        metric="accuracy",
        options=BootstrapOptions(n_resamples=200),
    )
    assert t.columns == list(TABLE_COLUMNS)
    assert t.schema["n"] == pl.Int64 and t.schema["tools"] == pl.Boolean
    assert t.schema["estimate"] == pl.Float64
    assert t.select("model", "task").rows() == [
        ("A", "t1"), ("A", "t2"), ("A", "t3"), ("A", "overall"),
        ("B", "t1"), ("B", "t2"), ("B", "overall"),
    ]  # fmt: skip
    assert set(t.get_column("track")) == {"default"}
    assert set(t.get_column("tools")) == {False}
    assert set(t.get_column("benchmark")) == {"toy"} and set(t.get_column("metric")) == {"accuracy"}
    expected = {("A", "t1"): (4, 3 / 4), ("A", "t2"): (3, 1 / 3), ("A", "t3"): (2, 1.0),
                ("B", "t1"): (2, 1 / 2), ("B", "t2"): (5, 2 / 5)}  # fmt: skip
    for (m, task), (n, est) in expected.items():
        assert cell(t, "n", model=m, task=task) == n
        assert cell(t, "estimate", model=m, task=task) == pytest.approx(est, abs=1e-15)
    # overall = plain mean of the task means (not the pooled accuracy 6/9 resp. 3/7)
    assert cell(t, "estimate", model="A", task="overall") == pytest.approx((3 / 4 + 1 / 3 + 1) / 3)
    assert cell(t, "estimate", model="B", task="overall") == pytest.approx((1 / 2 + 2 / 5) / 2)
    assert cell(t, "n", model="A", task="overall") == 9
    assert cell(t, "n", model="B", task="overall") == 7
    # a group whose items are all correct has the degenerate interval [1, 1]
    assert cell(t, "ci_low", model="A", task="t3") == 1.0
    assert cell(t, "ci_high", model="A", task="t3") == 1.0
    assert cell(t, "pm", model="A", task="t3") == 0.0
    np.testing.assert_allclose(t["pm"], (t["ci_high"] - t["ci_low"]) / 2, rtol=0, atol=0)
    assert (t["ci_low"] <= t["estimate"]).all() and (t["estimate"] <= t["ci_high"]).all()


def test_summarize_rows_equal_engine_bootstrap_with_same_keys():
    t = summarize(
        SMALL,
        value="correct",
        benchmark="toy",
        metric="accuracy",
        options=BootstrapOptions(n_resamples=500, seed=7),
        overall=False,
    )
    keys = pl.DataFrame({"track": ["default"] * SMALL.height, "model": SMALL["model"],
                         "tools": [False] * SMALL.height, "task": SMALL["task"]})  # fmt: skip
    res = bootstrap(
        SMALL["correct"].to_numpy().astype(float),
        groups=keys,
        options=BootstrapOptions(n_resamples=500, seed=7),
    ).to_polars()
    joined = t.join(res, on=["track", "model", "tools", "task"], suffix="_ref")
    assert joined.height == t.height == 5
    for col in ("n", "estimate", "boot_mean", "ci_low", "ci_high"):
        assert joined[col].to_list() == joined[f"{col}_ref"].to_list(), col


def test_summarize_group_interval_matches_numpy_bootstrap():
    rng = np.random.default_rng(3)
    x = rng.random(200) < 0.35
    df = pl.DataFrame({"model": ["m"] * 200, "task": ["t"] * 200, "correct": x})
    b = 20000
    t = summarize(
        df,
        value="correct",
        benchmark="toy",
        metric="accuracy",
        options=BootstrapOptions(n_resamples=b),
        overall=False,
    )
    boot_mean, lo, hi, se = mc_mean_of_task_means(x, ["t"] * 200, None, b, 0.95, seed=11)
    row = t.row(0, named=True)
    assert row["estimate"] == pytest.approx(x.mean())
    # boot_mean: both are means of B draws around the same sample mean (sd se/sqrt(B) each)
    assert row["boot_mean"] == pytest.approx(boot_mean, abs=6 * se / np.sqrt(b))
    # interval ends: Monte-Carlo error ~0.001 here; the statistic moves in steps of 1/200
    assert row["ci_low"] == pytest.approx(lo, abs=0.011)
    assert row["ci_high"] == pytest.approx(hi, abs=0.011)


def _three_task_frame(seed: int = 5) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    sizes = {"t1": 30, "t2": 20, "t3": 12}
    p = {"t1": 0.8, "t2": 0.5, "t3": 0.3}
    rows = []
    for task, n in sizes.items():
        for i in range(n):
            rows.append(("m", task, bool(rng.random() < p[task]), f"p{(i * 7 + len(task)) % 9}"))
    return pl.DataFrame(rows, schema=["model", "task", "correct", "patient_id"], orient="row")


def test_overall_interval_matches_numpy_joint_bootstrap():
    df = _three_task_frame()
    b = 6000
    t = summarize(
        df,
        value="correct",
        benchmark="toy",
        metric="accuracy",
        options=BootstrapOptions(n_resamples=b),
    )
    row = t.filter(pl.col("task") == "overall").row(0, named=True)
    means = df.group_by("task").agg(pl.col("correct").mean())["correct"].to_numpy()
    assert row["estimate"] == pytest.approx(means.mean(), abs=1e-15)
    boot_mean, lo, hi, se = mc_mean_of_task_means(df["correct"].to_numpy(), df["task"].to_numpy(),
                                                  None, b, 0.95, seed=1)  # fmt: skip
    assert row["boot_mean"] == pytest.approx(boot_mean, abs=6 * se / np.sqrt(b))
    assert row["ci_low"] == pytest.approx(lo, abs=0.015)
    assert row["ci_high"] == pytest.approx(hi, abs=0.015)
    # the joint interval of the macro mean is narrower than any single task's interval
    per_task = t.filter(pl.col("task") != "overall")
    assert row["pm"] < per_task["pm"].min()


def test_overall_interval_with_clusters_matches_numpy_cluster_bootstrap():
    df = _three_task_frame()
    b = 6000
    t = summarize(
        df,
        value="correct",
        benchmark="toy",
        metric="accuracy",
        options=BootstrapOptions(n_resamples=b),
        cluster="patient_id",
    )
    row = t.filter(pl.col("task") == "overall").row(0, named=True)
    boot_mean, lo, hi, se = mc_mean_of_task_means(
        df["correct"].to_numpy(), df["task"].to_numpy(), df["patient_id"].to_numpy(), b, 0.95,
        seed=2,
    )  # fmt: skip
    assert row["boot_mean"] == pytest.approx(boot_mean, abs=6 * se / np.sqrt(b))
    assert row["ci_low"] == pytest.approx(lo, abs=0.02)
    assert row["ci_high"] == pytest.approx(hi, abs=0.02)
    plain = summarize(
        df,
        value="correct",
        benchmark="toy",
        metric="accuracy",
        options=BootstrapOptions(n_resamples=b),
    )
    assert not np.allclose(t["ci_low"].to_numpy(), plain["ci_low"].to_numpy())
    assert t["estimate"].to_list() == plain["estimate"].to_list()


def test_overall_single_task_equals_engine_ratio_statistic():
    # With one task, mean_of_ratios with one weight is sum/count: the same statistic as the
    # engine's "ratio" on (value, 1), drawn from the same group stream (same key values).
    df = pl.DataFrame({"model": ["a"] * 9 + ["b"] * 6, "task": ["x"] * 15,
                       "correct": [1, 0, 0, 1, 1, 1, 0, 1, 0, 1, 1, 0, 1, 0, 0]})  # fmt: skip
    t = summarize(
        df,
        value="correct",
        benchmark="toy",
        metric="accuracy",
        options=BootstrapOptions(n_resamples=400, seed=3),
    )
    v = df["correct"].to_numpy().astype(float)
    ref = bootstrap_sufficient(
        np.column_stack([v, np.ones_like(v)]), statistic="ratio",
        groups=pl.DataFrame({"track": ["default"] * 15, "model": df["model"],
                             "tools": [False] * 15}),
        options=BootstrapOptions(n_resamples=400, seed=3),
    ).to_polars()  # fmt: skip
    overall = t.filter(pl.col("task") == "overall").join(ref, on=["track", "model", "tools"],
                                                         suffix="_ref")  # fmt: skip
    assert overall.height == 2
    for col in ("boot_mean", "ci_low", "ci_high"):
        assert overall[col].to_list() == overall[f"{col}_ref"].to_list(), col
    assert overall["estimate"].to_list() == pytest.approx([5 / 9, 3 / 6])


def test_overall_is_independent_of_other_groups_and_deterministic():
    full = summarize(
        SMALL,
        value="correct",
        benchmark="toy",
        metric="accuracy",
        options=BootstrapOptions(n_resamples=300),
    )
    only_a = summarize(SMALL.filter(pl.col("model") == "A"), value="correct", benchmark="toy",
                       metric="accuracy", options=BootstrapOptions(n_resamples=300))  # fmt: skip
    assert full.filter(pl.col("model") == "A").equals(only_a)
    again = summarize(
        SMALL,
        value="correct",
        benchmark="toy",
        metric="accuracy",
        options=BootstrapOptions(n_resamples=300),
    )
    assert full.equals(again)
    other_seed = summarize(SMALL, value="correct", benchmark="toy", metric="accuracy",
                           options=BootstrapOptions(n_resamples=300, seed=1))  # fmt: skip
    assert not full["boot_mean"].equals(other_seed["boot_mean"])


def test_summarize_keys_tracks_tools_and_extra_group_columns():
    df = pl.DataFrame({
        "track": ["mm", "mm", "mt", "mt", None, None],
        "model": ["a"] * 6,
        "tools": [True, True, False, False, None, True],
        "task": ["x", "y", "x", "x", "x", "x"],
        "dim": ["d1", "d1", "d1", "d2", "d1", "d1"],
        "score": [0.5, 1.5, 2.0, 4.0, 3.0, 1.0],
    })  # fmt: skip
    t = summarize(
        df, value="score", benchmark="toy", metric="s", options=BootstrapOptions(n_resamples=100)
    )
    assert t.select("track", "tools", "task", "n", "estimate").rows() == [
        ("default", False, "x", 1, 3.0), ("default", False, "overall", 1, 3.0),
        ("default", True, "x", 1, 1.0), ("default", True, "overall", 1, 1.0),
        ("mm", True, "x", 1, 0.5), ("mm", True, "y", 1, 1.5), ("mm", True, "overall", 2, 1.0),
        ("mt", False, "x", 2, 3.0), ("mt", False, "overall", 2, 3.0),
    ]  # fmt: skip
    # grouping on an extra column keeps it after pm; ungrouped key columns get constants
    t2 = summarize(df, value="score", benchmark="toy", metric="s", group_cols=("model", "dim"),
                   options=BootstrapOptions(n_resamples=100))  # fmt: skip
    assert t2.columns == [*TABLE_COLUMNS, "dim"]
    assert t2.select("track", "tools", "task", "dim", "n", "estimate").rows() == [
        ("default", False, "all", "d1", 5, pytest.approx(8.0 / 5)),
        ("default", False, "all", "d2", 1, 4.0),
    ]


def test_summarize_accepts_lazy_and_arrow_input():
    ref = summarize(
        SMALL,
        value="correct",
        benchmark="toy",
        metric="acc",
        options=BootstrapOptions(n_resamples=100),
    )
    lazy = summarize(SMALL.lazy(), value="correct", benchmark="toy", metric="acc",
                     options=BootstrapOptions(n_resamples=100))  # fmt: skip
    arrow = summarize(SMALL.to_arrow(), value="correct", benchmark="toy", metric="acc",
                      options=BootstrapOptions(n_resamples=100))  # fmt: skip
    assert ref.equals(lazy) and ref.equals(arrow)


def test_summarize_validation_errors():
    kw = dict(benchmark="toy", metric="acc", options=BootstrapOptions(n_resamples=50))
    with pytest.raises(
        ValueError, match=r"no column 'task'; required columns: correct, model, task"
    ):
        summarize(SMALL.drop("task"), value="correct", **kw)
    with pytest.raises(ValueError, match="no column 'pid'"):
        summarize(SMALL, value="correct", cluster="pid", **kw)
    as_float = pl.col("correct").cast(pl.Float64)
    nan = SMALL.with_columns(
        pl.when(pl.int_range(pl.len()) == 3).then(float("nan")).otherwise(as_float).alias("correct")
    )
    with pytest.raises(ValueError, match="NaN or infinite value at row 3"):
        summarize(nan, value="correct", **kw)
    null = SMALL.with_columns(pl.when(pl.int_range(pl.len()) == 2).then(None)
                              .otherwise(pl.col("correct")).alias("correct"))  # fmt: skip
    with pytest.raises(ValueError, match="missing value at row 2"):
        summarize(null, value="correct", **kw)
    with pytest.raises(ValueError, match="reserved for the overall row"):
        summarize(SMALL.with_columns(pl.lit("overall").alias("task")), value="correct", **kw)
    with pytest.raises(ValueError, match="no rows"):
        summarize(SMALL.head(0), value="correct", **kw)
    with pytest.raises(TypeError, match="expected boolean or numeric"):
        summarize(SMALL.with_columns(pl.lit("x").alias("correct")), value="correct", **kw)
    with pytest.raises(TypeError, match="options: expected a tumorboard.stats.BootstrapOptions"):
        summarize(SMALL, value="correct", benchmark="toy", metric="acc", options={"level": 0.9})


# ----------------------------------------------------------------------------- Report


@pytest.fixture(scope="module")
def report() -> Report:
    t = summarize(
        SMALL,
        value="correct",
        benchmark="toy",
        metric="accuracy",
        options=BootstrapOptions(n_resamples=200),
    )
    t = t.with_columns(
        pl.when(pl.col("task") == "t3").then(None).otherwise(pl.col("n")).alias("n_extra")
    )
    return Report(t, benchmark="toy", title="Toy | benchmark", notes=("a note", "b & c"))


def test_report_json_round_trip(report):
    doc = json.loads(report.to_json())
    assert doc["benchmark"] == "toy" and doc["title"] == "Toy | benchmark"
    assert doc["notes"] == ["a note", "b & c"]
    assert doc["columns"] == report.table.columns
    assert doc["rows"] == report.table.to_dicts()
    back = pl.DataFrame(doc["rows"], schema=report.table.schema)
    assert back.equals(report.table)


def test_report_csv_round_trip(report):
    text = report.to_csv()
    assert text.splitlines()[0] == ",".join(report.table.columns)
    back = pl.read_csv(io.StringIO(text))
    assert back.equals(report.table)


def test_report_markdown_layout(report):
    md = report.to_markdown()
    assert str(report) == md
    lines = md.splitlines()
    assert lines[0] == "## Toy \\| benchmark"
    table_lines = [ln for ln in lines if ln.startswith("|")]
    assert len(table_lines) == report.table.height + 2
    header = [c.strip() for c in table_lines[0].strip("|").split("|")]
    assert header == report.table.columns
    assert set(table_lines[1].replace("|", "").split()) <= {"---", "---:"}
    first = [c.strip() for c in table_lines[2].strip("|").split("|")]
    row = report.table.row(0, named=True)
    assert first[:6] == ["toy", "default", "A", "false", "t1", "accuracy"]
    assert first[7] == f"{row['estimate']:.4f}"
    t3 = next(ln for ln in table_lines if "| t3 |" in ln)
    assert t3.rstrip().endswith("|  |")  # null renders empty
    assert lines[-2:] == ["- a note", "- b & c"]


def test_report_html_has_plots_models_and_is_deterministic(report):
    page = report.to_html()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert page.count("<svg") == 1  # one metric, one track
    for model in ("A", "B"):
        assert f"<td>{model}</td>" in page
    assert "Toy | benchmark" in page and "b &amp; c" in page
    again = Report(report.table, benchmark="toy", title="Toy | benchmark",
                   notes=("a note", "b & c")).to_html()  # fmt: skip
    assert page == again
    for svg in _svgs(page):
        ET.fromstring(svg)  # well-formed XML


def _svgs(page: str) -> list[str]:
    out, pos = [], 0
    while (start := page.find("<svg", pos)) >= 0:
        end = page.index("</svg>", start) + len("</svg>")
        out.append(page[start:end])
        pos = end
    return out


def test_html_escapes_model_names_and_draws_one_bar_per_row():
    df = pl.DataFrame({
        "model": ["<gpt&co>"] * 4 + ["llama"] * 4, "task": ["x", "x", "y", "y"] * 2,
        "correct": [True, False, True, True, False, False, True, False],
    })  # fmt: skip
    t = summarize(
        df,
        value="correct",
        benchmark="toy",
        metric="accuracy",
        options=BootstrapOptions(n_resamples=100),
    )
    page = Report(t, benchmark="toy").to_html()
    assert "<gpt&co>" not in page
    assert "&lt;gpt&amp;co&gt;" in page and "llama" in page
    (svg,) = _svgs(page)
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    bars = [r for r in root.iter(f"{ns}rect") if r.find(f"{ns}title") is not None]
    assert len(bars) == t.height  # 2 models x (2 tasks + overall)
    titles = sorted(r.find(f"{ns}title").text for r in bars)
    assert titles[0].startswith("<gpt&co> · overall: ")


def test_report_writes_files_atomically(report, tmp_path):
    for method, name in (("to_markdown", "r.md"), ("to_csv", "r.csv"), ("to_json", "r.json"),
                         ("to_html", "r.html")):  # fmt: skip
        path = tmp_path / name
        text = getattr(report, method)(path)
        assert path.read_text(encoding="utf-8") == text
        text2 = getattr(report, method)(str(path))  # overwrite in place
        assert text2 == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv", "r.html", "r.json", "r.md"]


def test_report_validates_table():
    t = summarize(
        SMALL,
        value="correct",
        benchmark="toy",
        metric="accuracy",
        options=BootstrapOptions(n_resamples=50),
    )
    with pytest.raises(ValueError, match=r"missing column 'pm'; a report table needs the columns"):
        Report(t.drop("pm"), benchmark="toy")
    with pytest.raises(TypeError, match="'tools': expected Boolean"):
        Report(t.with_columns(pl.lit("no").alias("tools")), benchmark="toy")
    with pytest.raises(ValueError, match="benchmark"):
        Report(t, benchmark="")
    with pytest.raises(TypeError, match="polars DataFrame"):
        Report(t.to_dicts(), benchmark="toy")  # type: ignore[arg-type]
    # columns are put in schema order, extras after pm
    shuffled = t.with_columns(pl.lit(1).alias("extra")).select(["extra", *reversed(t.columns)])
    r = Report(shuffled, benchmark="toy")
    assert r.table.columns == [*TABLE_COLUMNS, "extra"]
    with pytest.raises(AttributeError):
        r.benchmark = "x"  # type: ignore[misc]


def test_sort_table_puts_overall_last():
    t = pl.DataFrame({
        "track": ["b", "a", "a", "a"], "model": ["m"] * 4, "tools": [False] * 4,
        "metric": ["acc"] * 4, "task": ["z", "overall", "b", "a"],
    })  # fmt: skip
    assert sort_table(t).select("track", "task").rows() == [
        ("a", "a"), ("a", "b"), ("a", "overall"), ("b", "z"),
    ]  # fmt: skip


# ----------------------------------------------------------------------------- plots


def test_nice_ticks_cover_range():
    assert nice_ticks(0.0, 1.0) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(0.0, 7.3) == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert nice_ticks(-0.35, 0.9) == [-0.5, 0.0, 0.5, 1.0]  # range 1.25 / 5 -> step 0.5


def test_points_instead_of_bars_for_negative_values():
    t = summarize(
        pl.DataFrame(
            {"model": ["a"] * 4, "task": ["x", "x", "y", "y"], "v": [-1.0, -2.0, 0.5, 1.5]}
        ),
        value="v",
        benchmark="toy",
        metric="delta",
        options=BootstrapOptions(n_resamples=50),
    )
    ((caption, svg),) = report_figures(t, benchmark="toy")
    assert "delta" in caption
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert len(list(root.iter(f"{ns}circle"))) == 3


# ----------------------------------------------------------------------------- helpers, registry


def test_column_helpers():
    df = pl.DataFrame({"files": [["a", "b", "a"], None, [], ["c", None]], "k": [1, 0, None, 2]})
    assert count_column(df, "files", where="t").to_list() == [2, 0, 0, 1]
    assert count_column(df, "files", where="t", distinct=False).to_list() == [3, 0, 0, 1]
    assert count_column(df, "k", where="t").to_list() == [1, 0, 0, 2]
    with pytest.raises(ValueError, match="negative count at row 1"):
        count_column(pl.DataFrame({"k": [1, -1]}), "k", where="t")
    with pytest.raises(TypeError, match="list"):
        count_column(pl.DataFrame({"k": ["a"]}), "k", where="t")
    with pytest.raises(ValueError, match=r"t: the input frame has no column 'b'; required "
                                         r"columns: a, b; optional: c"):  # fmt: skip
        require_columns(pl.DataFrame({"a": [1]}), ["a", "b"], optional=["c"], where="t")
    filled = with_defaults(pl.DataFrame({"x": [1, 2]}), where="t")
    assert filled["track"].to_list() == ["default", "default"]
    assert filled["tools"].to_list() == [False, False]
    assert as_frame(pa.table({"x": [1]})).equals(pl.DataFrame({"x": [1]}))
    with pytest.raises(TypeError, match="polars DataFrame or LazyFrame or a pyarrow Table"):
        as_frame({"x": [1]})


def test_registry():
    names = score.benchmarks()
    assert names == ["inspect", "lammi", "medbench", "medinsight", "mtbbench", "radabench"]
    assert score.get("mtbbench") is score.mtbbench.score
    with pytest.raises(ValueError, match="unknown scorer 'nope'"):
        score.get("nope")
    for name in names:
        assert score.get(name) is getattr(score, name).score
