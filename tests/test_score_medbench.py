"""Tests of the MedBench v4 scorer and of the judge helpers.

The scorer is python/tumorboard/score/medbench.py, the judge helpers
python/tumorboard/score/judge.py. Checked: hand-worked metric values, a small frame whose report
is worked out below, the macro average task -> dimension -> overall, judge-reply parsing and
judge-human agreement (Cohen's kappa worked by hand).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from tumorboard.score import medbench
from tumorboard.score.judge import (
    JudgeScoreError,
    judge_agreement,
    parse_judge_score,
    parse_judge_scores,
    rescale_judge_score,
)
from tumorboard.score.medbench import (
    keypoint_recall,
    macro_average,
    micro_f1,
    strict_accuracy,
)
from tumorboard.score.report import TABLE_COLUMNS, Report
from tumorboard.stats import BootstrapOptions

B = 300  # bootstrap resamples in these tests


# ------------------------------------------------------------------------------ metric functions


def test_strict_accuracy_counts_an_item_only_if_every_shuffle_is_right() -> None:
    # q1: 2/2 right, q2: 1/2 right, q3: 1/1 right -> 2 of 3 items
    assert strict_accuracy(["q1", "q1", "q2", "q2", "q3"], [1, 1, 1, 0, 1]) == pytest.approx(2 / 3)
    assert strict_accuracy(["q"], [False]) == 0.0
    with pytest.raises(ValueError):
        strict_accuracy([], [])


def test_micro_f1_hand_case() -> None:
    # item 1: P={a,b}, G={a}: TP 1, FP 1; item 2: P={c}, G={c,d}: TP 1, FN 1;
    # item 3: P=None, G={e}: FN 1.  2TP / (2TP + FP + FN) = 4 / (4 + 1 + 2)
    assert micro_f1([["a", "b"], ["c"], None], [["a"], ["c", "d"], ["e"]]) == pytest.approx(4 / 7)
    assert micro_f1([["a", "a"]], [["a"]]) == 1.0  # label sets
    assert micro_f1([[]], [[]]) == 0.0
    assert micro_f1([[]], [[]], zero_division=1.0) == 1.0


def test_micro_f1_equals_sklearn_definition_on_random_sets() -> None:
    rng = np.random.default_rng(0)
    labels = list("abcdef")
    preds = [list(rng.choice(labels, size=rng.integers(0, 4), replace=False)) for _ in range(50)]
    golds = [list(rng.choice(labels, size=rng.integers(1, 4), replace=False)) for _ in range(50)]
    # independent computation on the binary indicator matrix
    p = np.array([[lab in x for lab in labels] for x in preds])
    g = np.array([[lab in x for lab in labels] for x in golds])
    tp, fp, fn = (p & g).sum(), (p & ~g).sum(), (~p & g).sum()
    assert micro_f1(preds, golds) == pytest.approx(2 * tp / (2 * tp + fp + fn))


def test_keypoint_recall_and_macro_average() -> None:
    assert keypoint_recall([[True, False], [True, True, True, False]]) == pytest.approx(0.625)
    with pytest.raises(ValueError, match="at least one key point"):
        keypoint_recall([[True], []])
    # dimension A = (80 + 60) / 2 = 70, B = 90: overall = 80 (not the task mean 76.67)
    assert macro_average({"t1": 80.0, "t2": 60.0, "t3": 90.0},
                         {"t1": "A", "t2": "A", "t3": "B"}) == pytest.approx(80.0)  # fmt: skip


# ------------------------------------------------------------------------------------ judge


def test_parse_judge_score_accepts_one_tag_with_an_integer() -> None:
    assert parse_judge_score("Reasoning... <score>4</score>") == 4
    assert parse_judge_score("<SCORE> 0 </Score>") == 0
    assert parse_judge_score("multi\nline <score>\n5\n</score>") == 5
    np.testing.assert_array_equal(
        parse_judge_scores(["<score>1</score>", "x <score>3</score> y"]), [1, 3]
    )


@pytest.mark.parametrize(
    "reply, message",
    [
        ("no tag here", "no <score>N</score> tag"),
        ("<score>3</score> and <score>4</score>", "2 <score> tags"),
        ("<score>3.5</score>", "not an integer from 0 to 5"),
        ("<score>6</score>", "not an integer from 0 to 5"),
        ("<score>-1</score>", "not an integer from 0 to 5"),
        ("<score>four</score>", "not an integer from 0 to 5"),
        ("<score></score>", "not an integer from 0 to 5"),
        (None, "missing"),
    ],
)
def test_parse_judge_score_rejects_everything_else_naming_the_record(reply, message) -> None:
    with pytest.raises(JudgeScoreError, match=message) as info:
        parse_judge_scores(["<score>2</score>", reply], ids=["case-1", "case-2"])
    assert "case-2" in str(info.value)
    assert info.value.record == "case-2"
    assert isinstance(info.value, ValueError)


def test_rescale_judge_score() -> None:
    np.testing.assert_allclose(rescale_judge_score([0, 1, 3, 5]), [0.0, 20.0, 60.0, 100.0])
    np.testing.assert_allclose(rescale_judge_score([1, 10], low=1, high=10), [0.0, 100.0])
    with pytest.raises(ValueError, match="outside"):
        rescale_judge_score([6])


def test_judge_agreement_cohen_kappa_by_hand() -> None:
    # 10 items, ratings 0/1. Table (judge rows, human cols): [[4, 1], [2, 3]]
    judge = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    human = [0, 0, 0, 0, 1, 0, 0, 1, 1, 1]
    # p_o = 7/10; marginals judge (.5, .5), human (.6, .4): p_e = .3 + .2 = .5
    df = pl.DataFrame({"judge": judge, "human": human})
    res = judge_agreement(df, judge="judge", human="human", options=BootstrapOptions(n_resamples=B))
    assert res.estimate == pytest.approx((0.7 - 0.5) / (1 - 0.5))
    assert res.n_items == 10
    assert res.ci_low <= res.estimate <= res.ci_high


def test_judge_agreement_weighted_and_parsed_replies() -> None:
    judge_replies = [f"<score>{s}</score>" for s in (0, 1, 2, 2, 1)]
    human = [0, 1, 1, 2, 2]
    df = pl.DataFrame({"j": judge_replies, "h": human})
    res = judge_agreement(
        df, judge="j", human="h", weights="quadratic", options=BootstrapOptions(n_resamples=B)
    )
    # hand: q = 3 categories {0,1,2}, w_ij = 1 - (i-j)^2 / 4
    a, h = np.array([0, 1, 2, 2, 1]), np.array(human)
    w = 1 - (np.subtract.outer(np.arange(3), np.arange(3)) ** 2) / 4
    p = np.zeros((3, 3))
    for x, y in zip(a, h, strict=True):
        p[x, y] += 1 / 5
    po = (w * p).sum()
    pe = (w * np.outer(p.sum(1), p.sum(0))).sum()
    assert res.estimate == pytest.approx((po - pe) / (1 - pe))
    bad = pl.DataFrame({"j": ["<score>1</score>", "oops"], "h": [1, 1]})
    with pytest.raises(JudgeScoreError, match="record 1"):
        judge_agreement(bad, judge="j", human="h")
    with pytest.raises(ValueError, match="no column 'x'"):
        judge_agreement(df, judge="x", human="h")


# ------------------------------------------------------------------------------------- scorer


def hand_frame() -> pl.DataFrame:
    """Model m: tasks in two dimensions, each metric kind once; answers worked out below."""
    rows = [
        # task mc (dimension A, strict accuracy): q1 right twice, q2 right then wrong -> 1/2
        dict(task="mc", dimension="A", metric="strict_accuracy", item_id="q1", correct=True),
        dict(task="mc", dimension="A", metric="strict_accuracy", item_id="q1", correct=True),
        dict(task="mc", dimension="A", metric="strict_accuracy", item_id="q2", correct=True),
        dict(task="mc", dimension="A", metric="strict_accuracy", item_id="q2", correct=False),
        # task ml (A, micro-F1): TP 1+1, FP 1, FN 1 -> 4/6
        dict(
            task="ml", dimension="A", metric="micro_f1", pred_labels=["a", "b"], gold_labels=["a"]
        ),
        dict(
            task="ml", dimension="A", metric="micro_f1", pred_labels=["c"], gold_labels=["c", "d"]
        ),
        # task kp (A, key-point recall): (1/2 + 3/3) / 2 = 3/4
        dict(task="kp", dimension="A", metric="keypoint_recall", keypoint_hits=[True, False]),
        dict(task="kp", dimension="A", metric="keypoint_recall", keypoint_hits=[True, True, True]),
        # task gen (B, 1-NED): abcd vs abce -> 3/4; null vs xy -> 0; mean 3/8
        dict(
            task="gen", dimension="B", metric="one_minus_ned", prediction="abcd", reference="abce"
        ),
        dict(task="gen", dimension="B", metric="one_minus_ned", prediction=None, reference="xy"),
        # task loc (B, IoU): 1/7 and a missing box (0) -> 1/14
        dict(
            task="loc",
            dimension="B",
            metric="iou",
            pred_box=[0.0, 0.0, 2.0, 2.0],
            gold_box=[1.0, 1.0, 3.0, 3.0],
        ),
        dict(task="loc", dimension="B", metric="iou", pred_box=None, gold_box=[0.0, 0.0, 1.0, 1.0]),
        # task jd (B, judge): 4/5 and 2/5 -> 3/5
        dict(task="jd", dimension="B", metric="judge", judge_output="ok <score>4</score>"),
        dict(task="jd", dimension="B", metric="judge", judge_output="<score>2</score>"),
        # task acc (C, accuracy): right, wrong, null (wrong) -> 1/3
        dict(task="acc", dimension="C", metric="accuracy", correct=True),
        dict(task="acc", dimension="C", metric="accuracy", correct=False),
        dict(task="acc", dimension="C", metric="accuracy", correct=None),
        # task sc (C, precomputed score): 0.2, 0.6 -> 0.4
        dict(task="sc", dimension="C", metric="score", score=0.2),
        dict(task="sc", dimension="C", metric="score", score=0.6),
    ]
    schema = {
        "model": pl.String, "task": pl.String, "dimension": pl.String, "metric": pl.String,
        "item_id": pl.String, "correct": pl.Boolean, "pred_labels": pl.List(pl.String),
        "gold_labels": pl.List(pl.String), "keypoint_hits": pl.List(pl.Boolean),
        "prediction": pl.String, "reference": pl.String, "pred_box": pl.List(pl.Float64),
        "gold_box": pl.List(pl.Float64), "judge_output": pl.String, "score": pl.Float64,
    }  # fmt: skip
    full = [{k: r.get(k) for k in schema} | {"model": "m"} for r in rows]
    return pl.DataFrame(full, schema=schema)


EXPECTED_TASKS = {
    "mc": (50.0, 2), "ml": (400 / 6, 2), "kp": (75.0, 2), "gen": (37.5, 2),
    "loc": (100 / 14, 2), "jd": (60.0, 2), "acc": (100 / 3, 3), "sc": (40.0, 2),
}  # fmt: skip


def test_medbench_hand_frame() -> None:
    report = medbench.score(hand_frame(), options=BootstrapOptions(n_resamples=B, seed=3))
    assert isinstance(report, Report)
    t = report.table
    assert t.columns[: len(TABLE_COLUMNS)] == list(TABLE_COLUMNS)
    assert t.columns[len(TABLE_COLUMNS) :] == [
        "aggregation",
        "dimension",
        "task_metric",
        "n_graded",
        "n_ungraded",
        "n_missing",
    ]
    assert set(t["metric"].to_list()) == {"score"}
    tasks = t.filter(pl.col("aggregation") == "task")
    got = {r["task"]: (r["estimate"], r["n"]) for r in tasks.iter_rows(named=True)}
    assert set(got) == set(EXPECTED_TASKS)
    for task, (est, n) in EXPECTED_TASKS.items():
        assert got[task][0] == pytest.approx(est), task
        assert got[task][1] == n, task
    metric_of = dict(zip(tasks["task"].to_list(), tasks["task_metric"].to_list(), strict=True))
    assert metric_of["ml"] == "micro_f1" and metric_of["mc"] == "strict_accuracy"

    e = {k: v[0] for k, v in EXPECTED_TASKS.items()}
    dim_a = (e["mc"] + e["ml"] + e["kp"]) / 3
    dim_b = (e["gen"] + e["loc"] + e["jd"]) / 3
    dim_c = (e["acc"] + e["sc"]) / 2
    dims = t.filter(pl.col("aggregation") == "dimension")
    got_d = {r["dimension"]: (r["task"], r["estimate"], r["n"]) for r in dims.iter_rows(named=True)}
    assert got_d["A"] == ("dimension:A", pytest.approx(dim_a), 6)
    assert got_d["B"] == ("dimension:B", pytest.approx(dim_b), 6)
    assert got_d["C"] == ("dimension:C", pytest.approx(dim_c), 5)
    overall = t.filter(pl.col("task") == "overall").row(0, named=True)
    assert overall["estimate"] == pytest.approx((dim_a + dim_b + dim_c) / 3)
    assert overall["n"] == 17
    assert overall["dimension"] is None and overall["aggregation"] == "overall"
    assert t["task"].to_list()[-1] == "overall"  # overall last in its (track, model, tools)

    # intervals: bounds hold, pm is half the width, micro-F1 task with identical items is fixed
    for r in t.iter_rows(named=True):
        assert r["ci_low"] - 1e-9 <= r["boot_mean"] <= r["ci_high"] + 1e-9
        assert r["pm"] == pytest.approx((r["ci_high"] - r["ci_low"]) / 2)
        assert 0.0 <= r["ci_low"] and r["ci_high"] <= 100.0
    ml = tasks.filter(pl.col("task") == "ml").row(0, named=True)
    assert ml["ci_low"] == ml["ci_high"] == pytest.approx(400 / 6)  # both items are (4, 6)

    # deterministic for a seed
    again = medbench.score(hand_frame(), options=BootstrapOptions(n_resamples=B, seed=3)).table
    assert again.equals(t)


def test_medbench_models_tracks_and_clusters() -> None:
    base = hand_frame()
    other = base.with_columns(pl.lit("n").alias("model"), pl.lit(True).alias("correct"))
    df = pl.concat([base, other]).with_columns(
        pl.lit("t1").alias("track"), (pl.int_range(pl.len()) // 3).cast(pl.String).alias("pid")
    )
    t = medbench.score(df, options=BootstrapOptions(n_resamples=B), cluster="pid").table
    assert set(t["model"].to_list()) == {"m", "n"}
    assert set(t["track"].to_list()) == {"t1"}
    n_mc = t.filter((pl.col("model") == "n") & (pl.col("task") == "mc")).row(0, named=True)
    assert n_mc["estimate"] == 100.0  # every instance correct for model n
    assert t.filter(pl.col("task") == "overall").height == 2


def test_medbench_errors() -> None:
    df = hand_frame()
    with pytest.raises(ValueError, match="no column 'dimension'"):
        medbench.score(df.drop("dimension"))
    with pytest.raises(ValueError, match="unknown metric 'bleu' at row 0"):
        medbench.score(df.with_columns(pl.lit("bleu").alias("metric")))
    mixed = df.with_columns(
        pl.when(pl.int_range(pl.len()) == 0).then(pl.lit("accuracy")).otherwise(pl.col("metric"))
        .alias("metric")
    )  # fmt: skip
    with pytest.raises(ValueError, match="task 'mc' has several values of 'metric'"):
        medbench.score(mixed)
    bad_judge = df.with_columns(
        pl.when(pl.col("judge_output") == "<score>2</score>").then(pl.lit("<score>7</score>"))
        .otherwise(pl.col("judge_output")).alias("judge_output")
    )  # fmt: skip
    with pytest.raises(JudgeScoreError, match="row 13"):
        medbench.score(bad_judge)
    with pytest.raises(ValueError, match="tasks with metric='micro_f1'"):
        medbench.score(df.drop("gold_labels"))
    with pytest.raises(ValueError, match="no rows"):
        medbench.score(df.head(0))


def test_medbench_overall_ci_matches_an_independent_joint_bootstrap() -> None:
    # Dimension A has 3 large tasks, dimension B one small task, so the macro average
    # ((t1 + t2 + t3) / 3 + t4) / 2 weighs t4 by 1/2 (a flat task mean would weigh it by 1/4 and
    # give a CI about 2/3 as wide). The engine's CI must agree, within Monte-Carlo error, with a
    # numpy bootstrap that resamples all items of the model jointly and recomputes the average.
    rng = np.random.default_rng(7)
    sizes = {"t1": 60, "t2": 60, "t3": 60, "t4": 20}
    dims = {"t1": "A", "t2": "A", "t3": "A", "t4": "B"}
    rows = [
        {"model": "m", "task": t, "dimension": dims[t], "metric": "accuracy",
         "correct": bool(rng.random() < 0.5)}
        for t in sizes
        for _ in range(sizes[t])
    ]  # fmt: skip
    df = pl.DataFrame(rows)
    t = medbench.score(df, options=BootstrapOptions(n_resamples=4000, seed=11)).table
    overall = t.filter(pl.col("task") == "overall").row(0, named=True)
    task_of = df["task"].to_numpy()
    ok = df["correct"].to_numpy().astype(float)

    def macro(tt: np.ndarray, vv: np.ndarray) -> float:
        m = {x: vv[tt == x].mean() for x in sizes}
        return 100 * ((m["t1"] + m["t2"] + m["t3"]) / 3 + m["t4"]) / 2

    ests = []
    for _ in range(4000):
        idx = rng.integers(0, len(ok), len(ok))
        ests.append(macro(task_of[idx], ok[idx]))
    lo, hi = np.percentile(ests, [2.5, 97.5])
    assert hi - lo > 18  # the macro weighting matters (a flat mean would give about 15)
    assert overall["ci_low"] == pytest.approx(lo, abs=1.5)
    assert overall["ci_high"] == pytest.approx(hi, abs=1.5)
    assert overall["estimate"] == pytest.approx(macro(task_of, ok))


def multi_metric_frame(n_extra: int = 0, seed: int = 0) -> pl.DataFrame:
    """MedOutcome scored by accuracy + key-point recall + judge (as its dataset card lists)."""
    rows = [
        # accuracy 1, key points 1/2, judge 5/5
        dict(task="MedOutcome", dimension="reasoning", metric="accuracy+keypoint_recall+judge",
             correct=True, keypoint_hits=[True, False], judge_output="<score>5</score>"),
        # accuracy 0, key points 3/4, judge 2/5
        dict(task="MedOutcome", dimension="reasoning", metric="accuracy+keypoint_recall+judge",
             correct=False, keypoint_hits=[True, True, True, False],
             judge_output="<score>2</score>"),
    ] + [
        dict(task="mc", dimension="knowledge", metric="accuracy", correct=ok)
        for ok in (True, True, False, True)
    ]  # fmt: skip
    rng = np.random.default_rng(seed)
    for _ in range(n_extra):
        k, q = int(rng.integers(1, 5)), float(rng.random())  # q: the answer's quality
        rows.append(dict(
            task="MedOutcome", dimension="reasoning", metric="accuracy+keypoint_recall+judge",
            correct=q > 0.5, keypoint_hits=[bool(x) for x in rng.random(k) < q],
            judge_output=f"<score>{round(5 * q)}</score>",
        ))  # fmt: skip
    return pl.DataFrame([{"model": "m", **r} for r in rows])


def test_task_with_several_metrics_hand_worked() -> None:
    # MedBench v4's cards score MedOutcome by accuracy, macro-recall and an LLM judge:
    # accuracy (1 + 0)/2 = 50, key-point recall (1/2 + 3/4)/2 = 62.5, judge (5 + 2)/10 = 70;
    # task score = their unweighted mean 182.5/3; mc 3/4 = 75; overall = (182.5/3 + 75)/2.
    rep = medbench.score(multi_metric_frame(), options=BootstrapOptions(n_resamples=200))
    t = rep.table
    est = {r["task"]: r for r in t.iter_rows(named=True)}
    assert est["MedOutcome [accuracy]"]["estimate"] == pytest.approx(50.0)
    assert est["MedOutcome [keypoint_recall]"]["estimate"] == pytest.approx(62.5)
    assert est["MedOutcome [judge]"]["estimate"] == pytest.approx(70.0)
    for m in ("accuracy", "keypoint_recall", "judge"):
        row = est[f"MedOutcome [{m}]"]
        assert (row["aggregation"], row["task_metric"], row["n"]) == ("metric", m, 2)
    combined = est["MedOutcome"]
    assert combined["estimate"] == pytest.approx(182.5 / 3)
    assert combined["aggregation"] == "task"
    assert combined["task_metric"] == "accuracy+keypoint_recall+judge"
    assert est["dimension:reasoning"]["estimate"] == pytest.approx(182.5 / 3)
    assert est["mc"]["estimate"] == pytest.approx(75.0)
    assert est["overall"]["estimate"] == pytest.approx((182.5 / 3 + 75.0) / 2)
    assert any("unweighted mean" in n and "assumption" in n for n in rep.notes)
    # an explicit weighting: judge counts twice -> (50 + 62.5 + 2 * 70) / 4
    w = medbench.score(multi_metric_frame(), options=BootstrapOptions(n_resamples=200),
                       metric_weights={"judge": 2})  # fmt: skip
    got = w.table.filter(pl.col("task") == "MedOutcome")["estimate"][0]
    assert got == pytest.approx((50 + 62.5 + 140) / 4)
    assert any("judge=2" in n for n in w.notes)
    with pytest.raises(ValueError, match="metric_weights"):
        medbench.score(multi_metric_frame(), metric_weights={"judge": 0})
    with pytest.raises(ValueError, match="named twice"):
        medbench.score(multi_metric_frame().with_columns(pl.lit("judge+judge").alias("metric")))


def test_combined_task_interval_resamples_rows_with_all_their_metrics() -> None:
    # Oracle: a numpy bootstrap of whole input rows, recomputing the mean of the three metric
    # means on every resample; the engine's interval must agree within Monte-Carlo error. The
    # metrics of a row are correlated (one latent quality), so resampling them separately would
    # give a visibly narrower interval.
    df = multi_metric_frame(n_extra=120, seed=5).filter(pl.col("task") == "MedOutcome")
    t = medbench.score(df, options=BootstrapOptions(n_resamples=4000, seed=3)).table
    row = t.filter(pl.col("task") == "MedOutcome").row(0, named=True)
    acc = df["correct"].cast(pl.Float64).to_numpy()
    kp = np.array([np.mean(h) for h in df["keypoint_hits"].to_list()])
    jd = np.array([int(s[7]) / 5 for s in df["judge_output"].to_list()])
    rng = np.random.default_rng(1)
    ests = []
    for _ in range(4000):
        i = rng.integers(0, len(acc), len(acc))
        ests.append(100 * (acc[i].mean() + kp[i].mean() + jd[i].mean()) / 3)
    lo, hi = np.percentile(ests, [2.5, 97.5])
    sep = []
    for _ in range(4000):
        i, j, k = (rng.integers(0, len(acc), len(acc)) for _ in range(3))
        sep.append(100 * (acc[i].mean() + kp[j].mean() + jd[k].mean()) / 3)
    lo_sep, hi_sep = np.percentile(sep, [2.5, 97.5])
    assert (hi - lo) - (hi_sep - lo_sep) > 2.0  # the joint resampling matters here
    assert row["estimate"] == pytest.approx(100 * (acc.mean() + kp.mean() + jd.mean()) / 3)
    assert row["ci_low"] == pytest.approx(lo, abs=1.0)
    assert row["ci_high"] == pytest.approx(hi, abs=1.0)
