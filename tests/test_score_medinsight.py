"""Tests of the MedInsightBench metrics and scorer (python/tumorboard/score/medinsight.py).

Checked: hand-worked insight recall/precision/F1 and novelty rates, a small frame whose report is
worked out below, and the ROUGE-1 path against the rouge-score package.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from tumorboard.score import medinsight
from tumorboard.score.medinsight import insight_scores, novelty_rates
from tumorboard.stats import BootstrapOptions

B = 300


def test_insight_scores_hand_cases() -> None:
    s = [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]]
    # recall: row maxima 1.0, 0.5 -> 0.75; precision: column maxima 1.0, 0.5, 0.0 -> 0.5
    res = insight_scores(s)
    assert (res.recall, res.precision) == (0.75, 0.5)
    assert res.f1 == pytest.approx(2 * 0.75 * 0.5 / 1.25)
    none = insight_scores(np.zeros((2, 0)))
    assert (none.recall, none.precision, none.f1) == (0.0, 0.0, 0.0)
    assert insight_scores([[0.0]]).f1 == 0.0
    with pytest.raises(ValueError, match="ground-truth"):
        insight_scores(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="2-D"):
        insight_scores([1.0, 2.0])


def test_novelty_rates_hand_cases() -> None:
    # precision scores 8 (correct), 3 (2 votes: novel), 6 (correct), 2 (1 vote: not novel)
    assert novelty_rates([8, 3, 6, 2], [0, 2, 3, 1]) == (0.5, 0.75)
    # exactly 5 is not "above 5"; per-judge boolean votes are summed
    votes = np.array([[True, True, False], [True, False, False]])
    assert novelty_rates([5, 9], votes) == (0.5, 1.0)
    assert novelty_rates([5, 9], votes, correct_above=4.0) == (1.0, 1.0)
    o, i = novelty_rates([], [])
    assert np.isnan(o) and np.isnan(i)


def hand_frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "model": ["a", "a", "b"],
            "case_id": [1, 2, 1],
            "score_matrix": [
                [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]],  # R .75, P .5, F .6
                [[0.8]],  # R = P = F = .8
                [[]],  # no generated insight: zeros
            ],
            "insight_precision_scores": [[8.0, 3.0, 6.0], [2.0], []],
            "insight_novelty_votes": [[0, 2, 3], [1], []],
        }
    )


def test_medinsight_hand_frame() -> None:
    t = medinsight.score(hand_frame(), options=BootstrapOptions(n_resamples=B)).table
    est = {(r["model"], r["metric"]): (r["estimate"], r["n"]) for r in t.iter_rows(named=True)}
    assert est[("a", "insight_recall")] == (pytest.approx((0.75 + 0.8) / 2), 2)
    assert est[("a", "insight_precision")] == (pytest.approx((0.5 + 0.8) / 2), 2)
    # paper convention (default): F1 of the mean recall .775 and mean precision .65
    assert est[("a", "insight_f1")] == (pytest.approx(2 * 0.775 * 0.65 / (0.775 + 0.65)), 2)
    assert est[("b", "insight_f1")] == (0.0, 1)
    per_case = medinsight.score(hand_frame(), options=BootstrapOptions(n_resamples=B),
                                convention="tumorboard").table  # fmt: skip
    row = per_case.filter((pl.col("model") == "a") & (pl.col("metric") == "insight_f1"))
    assert row["estimate"][0] == pytest.approx((0.6 + 0.8) / 2)  # mean of the per-case F1
    # model a: insights 8 (correct), 3 (novel), 6 (correct), 2 (neither): M = 2, N = 2
    assert est[("a", "original")] == (pytest.approx(0.5), 4)
    assert est[("a", "innovation")] == (pytest.approx(0.75), 4)
    assert ("b", "original") not in est  # model b generated no insight
    # original resamples cases whole: its two cases have rates 2/3 and 0 (3 and 1 insights),
    # so every resample is one of 0, 2/4 or 2/3 (pooled) and the CI lies in [0, 2/3]
    row = t.filter((pl.col("model") == "a") & (pl.col("metric") == "original")).row(0, named=True)
    assert 0.0 <= row["ci_low"] and row["ci_high"] <= 2 / 3 + 1e-12
    assert set(t["task"].to_list()) == {"all"}


def test_medinsight_tasks_give_overall_rows() -> None:
    df = hand_frame().with_columns(pl.Series("task", ["x", "y", "x"]))
    t = medinsight.score(df, options=BootstrapOptions(n_resamples=B)).table
    overall = t.filter((pl.col("model") == "a") & (pl.col("task") == "overall")
                       & (pl.col("metric") == "insight_recall"))  # fmt: skip
    assert overall["estimate"][0] == pytest.approx((0.75 + 0.8) / 2)


def test_medinsight_overall_f1_of_the_paper_pools_the_cases_and_says_so() -> None:
    # task x: cases (R, P) = (1, 1) and (0, 0); task y: one case (1, 0.5)
    df = pl.DataFrame({
        "model": ["m"] * 3, "case_id": [1, 2, 3], "task": ["x", "x", "y"],
        "score_matrix": [[[1.0]], [[0.0]], [[1.0, 0.0]]],
    })  # fmt: skip
    rep = medinsight.score(df, options=BootstrapOptions(n_resamples=B))
    est = {(r["task"], r["metric"]): r["estimate"] for r in rep.table.iter_rows(named=True)}
    # overall recall/precision rows: means of the task means
    assert est[("overall", "insight_recall")] == pytest.approx((0.5 + 1.0) / 2)
    assert est[("overall", "insight_precision")] == pytest.approx((0.5 + 0.5) / 2)
    # overall F1: of the pooled means R = 2/3, P = 1.5/3, not of the rows above (0.75, 0.5)
    r, p = 2 / 3, 1.5 / 3
    assert est[("overall", "insight_f1")] == pytest.approx(2 * r * p / (r + p))
    assert est[("overall", "insight_f1")] != pytest.approx(2 * 0.75 * 0.5 / 1.25)
    assert any("overall row R̄ and P̄ are the means over all the group's cases pooled" in n
               for n in rep.notes)  # fmt: skip


def test_medinsight_rouge1_path_matches_rouge_score() -> None:
    text = pytest.importorskip("tumorboard.text", exc_type=ImportError)
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
    assert text is not None
    gt = [["the tumour is larger in older patients", "survival drops with stage"],
          ["smokers have more nodules"]]  # fmt: skip
    gen = [["older patients have larger tumours", "stage predicts survival", "nothing"],
           ["nodules are more common in smokers"]]  # fmt: skip
    scorer = rouge_scorer.RougeScorer(["rouge1"])
    expected_r = []
    for g, h in zip(gt, gen, strict=True):
        m = np.array([[scorer.score(x, y)["rouge1"].fmeasure for y in h] for x in g])
        expected_r.append(m.max(axis=1).mean())
    df = pl.DataFrame({"model": ["m", "m"], "case_id": ["c1", "c2"], "insights": gen,
                       "gt_insights": gt})  # fmt: skip
    t = medinsight.score(df, options=BootstrapOptions(n_resamples=B)).table
    got = t.filter(pl.col("metric") == "insight_recall")["estimate"][0]
    assert got == pytest.approx(np.mean(expected_r), abs=1e-12)


def test_medinsight_errors() -> None:
    df = hand_frame()
    with pytest.raises(ValueError, match="no column 'case_id'"):
        medinsight.score(df.drop("case_id"))
    with pytest.raises(ValueError, match="score_matrix"):
        medinsight.score(df.drop("score_matrix"))
    ragged = df.with_columns(pl.Series("score_matrix", [[[1.0, 0.0], [0.5]], [[0.8]], [[]]]))
    with pytest.raises(ValueError, match="row 0 is ragged"):
        medinsight.score(ragged)
    mismatch = df.with_columns(pl.Series("insight_novelty_votes", [[0, 2], [1], []]))
    with pytest.raises(ValueError, match="row 0 has 3 insight_precision_scores but 2"):
        medinsight.score(mismatch)
    with pytest.raises(ValueError, match="novelty"):
        medinsight.score(df.drop("insight_novelty_votes"))


def test_paper_f1_is_f1_of_means_and_its_interval_bootstraps_the_sums() -> None:
    # MedInsightBench (Zhu et al., arXiv 2512.13297) prints F1 = 2 R̄ P̄ / (R̄ + P̄) of its
    # printed mean recall and precision. Oracle for the interval: the bootstrap distributions of
    # the mean recall and the mean precision on the same resamples (same seed and group keys),
    # combined into F1 per resample by numpy.
    from tumorboard.stats import bootstrap

    rng = np.random.default_rng(3)
    mats = []
    for _ in range(40):
        m, k = rng.integers(1, 4), rng.integers(0, 4)
        mats.append(rng.random((m, k)).round(3).tolist() if k else [[] for _ in range(m)])
    df = pl.DataFrame({"model": ["m"] * 40, "case_id": [str(i) for i in range(40)],
                       "score_matrix": mats},
                      schema_overrides={"score_matrix": pl.List(pl.List(pl.Float64))})  # fmt: skip
    opts = BootstrapOptions(n_resamples=400, seed=7)
    rep = medinsight.score(df, options=opts)
    assert rep.convention is not None and rep.convention.startswith("paper")
    t = rep.table
    r = np.array([medinsight.insight_scores(np.array(m).reshape(len(m), -1)).recall for m in mats])
    p = np.array([medinsight.insight_scores(np.array(m).reshape(len(m), -1)).precision
                  for m in mats])  # fmt: skip
    f1 = t.filter(pl.col("metric") == "insight_f1").row(0, named=True)
    assert f1["estimate"] == pytest.approx(2 * r.mean() * p.mean() / (r.mean() + p.mean()))
    keys = pl.DataFrame({"track": ["default"] * 40, "model": ["m"] * 40, "tools": [False] * 40,
                         "task": ["all"] * 40})  # fmt: skip
    rb = bootstrap(r, groups=keys, options=opts, return_distribution=True).distribution[0]
    pb = bootstrap(p, groups=keys, options=opts, return_distribution=True).distribution[0]
    fb = 2 * rb * pb / (rb + pb)
    assert f1["boot_mean"] == pytest.approx(fb.mean(), rel=1e-12)
    assert f1["ci_low"] == pytest.approx(np.percentile(fb, 2.5), rel=1e-12)
    assert f1["ci_high"] == pytest.approx(np.percentile(fb, 97.5), rel=1e-12)
    # the per-case mean F1 (tumorboard convention) is never above the paper's figure
    per_case = medinsight.score(df, options=opts, convention="tumorboard").table
    mean_f1 = per_case.filter(pl.col("metric") == "insight_f1")["estimate"][0]
    assert mean_f1 <= f1["estimate"] + 1e-12
    with pytest.raises(ValueError, match="convention"):
        medinsight.score(df, options=opts, convention="code")


def test_f1_of_means_keeps_extra_group_columns() -> None:
    # summarize_f1_of_means took group_cols "as in summarize_frame" but grouped on the four key
    # columns only: an extra group column was silently pooled away
    from tumorboard.score._summary import summarize_f1_of_means

    df = pl.DataFrame({
        "track": ["default"] * 3, "model": ["m"] * 3, "tools": [False] * 3,
        "site": ["s1", "s1", "s2"], "r": [1.0, 0.0, 1.0], "p": [1.0, 0.0, 0.5],
    })  # fmt: skip
    t = summarize_f1_of_means(df, recall="r", precision="p", benchmark="x", metric="f1",
                              group_cols=("track", "model", "tools", "site"), cluster=None,
                              options=BootstrapOptions(n_resamples=B), overall=False)  # fmt: skip
    est = dict(zip(t["site"].to_list(), t["estimate"].to_list(), strict=True))
    assert est == {"s1": pytest.approx(0.5), "s2": pytest.approx(2 * 0.5 / 1.5)}
