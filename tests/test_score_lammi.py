"""Tests of the LAMMI-Pathology metrics and scorer (python/tumorboard/score/lammi.py).

Hand-worked values for each metric as the module defines it, the vectorized (polars) scorer
against the per-sample reference functions on generated trajectories, and a small frame whose
report is worked out in the test, and the paper's printed Tables 1-5 and 7 cell by cell
(tests/fixtures/paper_tables/): the averages and gaps its prose derives, and the Table 4 rows
tumorboard's scorer reproduces.
"""

from __future__ import annotations

import random

import _paper_tables as pt
import numpy as np
import polars as pl
import pytest
from tumorboard.score import lammi
from tumorboard.score.lammi import (
    input_jaccard,
    input_tokens,
    multiple_choice_f1,
    tool_consistency_f1,
    tool_redundancy_rate,
    trajectory_success_score,
)
from tumorboard.stats import BootstrapOptions

B = 300
CALL = pl.Struct({"name": pl.String, "input": pl.String, "success": pl.Boolean})


def call(name: str, inp: str | None = "", success: bool | None = True) -> dict:
    return {"name": name, "input": inp, "success": success}


# ------------------------------------------------------------------------------ metric functions


def test_trajectory_success_score_hand_cases() -> None:
    # valid with 2 of 3 calls successful; valid without calls; invalid with 3 of 3 successful
    # paper reading (default): (v + s/t) / 2 with s/t = 0 without calls
    got = trajectory_success_score([True, True, False], [2, 0, 3], [3, 0, 3])
    np.testing.assert_allclose(got, [(1 + 2 / 3) / 2, 0.5, 0.5])
    # tumorboard reading: v * s/t with s/t = 1 without calls
    got = trajectory_success_score([True, True, False], [2, 0, 3], [3, 0, 3],
                                   convention="tumorboard")  # fmt: skip
    np.testing.assert_allclose(got, [2 / 3, 1.0, 0.0])
    # the no-call ratio is an explicit parameter of either reading
    np.testing.assert_allclose(trajectory_success_score([True], [0], [0], no_call_ratio=1.0), [1.0])
    np.testing.assert_allclose(
        trajectory_success_score([True], [0], [0], convention="tumorboard", no_call_ratio=0.0),
        [0.0],
    )
    with pytest.raises(ValueError, match="no_call_ratio"):
        trajectory_success_score([True], [0], [0], no_call_ratio=1.5)
    with pytest.raises(ValueError, match="convention"):
        trajectory_success_score([True], [0], [0], convention="code")
    with pytest.raises(ValueError):
        trajectory_success_score([True], [3], [2])


def test_input_tokens_and_jaccard() -> None:
    assert input_tokens('{"Slide": "A-12", "mag": 20}') == {"slide", "a", "12", "mag", "20"}
    assert input_tokens("肝 癌") == {"肝", "癌"}
    assert input_jaccard("x=1 y=2", "y=2, x=1") == 1.0
    # {region, 3, stain, he} vs {region, 3, stain, ihc}: 3 / 5
    assert input_jaccard("region 3 stain HE", "region 3 stain IHC") == pytest.approx(0.6)
    assert input_jaccard("", None) == 1.0


def test_tool_redundancy_rate_hand_cases() -> None:
    names = ["zoom", "zoom", "stain", "zoom"]
    inputs = ["x=1 y=2", "y=2 x=1", "x=1 y=2", "x=9 y=8"]
    # call 1 repeats call 0 (Jaccard 1); call 2 is another tool; call 3: Jaccard {x,y}/{x,y,1,2,9,8}
    # with call 0 = 2/6 < 0.7 -> 1 redundant of 4
    assert tool_redundancy_rate(names, inputs) == 0.25
    # Jaccard 0.6 is below 0.7 but above 0.5
    two = ["seg", "seg"], ["region 3 stain HE", "region 3 stain IHC"]
    assert tool_redundancy_rate(*two) == 0.0
    assert tool_redundancy_rate(*two, threshold=0.5) == 0.5
    # a call repeating two earlier ones is counted once
    assert tool_redundancy_rate(["a", "a", "a"], ["q", "q", "q"]) == pytest.approx(2 / 3)
    assert np.isnan(tool_redundancy_rate([], []))


def test_tool_consistency_f1_and_mc_f1() -> None:
    # E = {segment, count, grade}, U = {segment, count, zoom}: 2 * 2 / (3 + 3)
    used = ["segment", "count", "zoom", "zoom"]
    assert tool_consistency_f1(["segment", "count", "grade"], used) == pytest.approx(2 / 3)
    assert tool_consistency_f1([], []) == 1.0
    assert tool_consistency_f1(["a"], []) == 0.0
    # micro-F1 of single-answer multiple choice = accuracy: 2 of 4
    assert multiple_choice_f1(["A", "b ", None, "D"], ["A", "B", "C", "C"]) == 0.5


# ------------------------------------------------------------------------------------- scorer


def hand_frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "model": ["m", "m", "m", "m"],
            "task": ["vqa", "vqa", "vqa", "report"],
            "tool_calls": [
                [call("zoom", "x=1 y=2"), call("zoom", "y=2 x=1"), call("stain", "x", False)],
                [],
                None,
                [call("seg", "a"), call("count", "b", None)],
            ],
            "output_valid": [True, True, False, True],
            "expected_tools": [["zoom", "grade"], None, ["a"], ["seg", "count"]],
            "answer_consistency": [4.0, None, 2.0, 5.0],
            "hallucination": [True, False, None, False],
            "mc_prediction": ["A", None, "b", None],
            "mc_answer": ["A", "B", "B", None],
        },
        schema_overrides={"tool_calls": pl.List(CALL)},
    )


def test_lammi_hand_frame() -> None:
    t = lammi.score(hand_frame(), options=BootstrapOptions(n_resamples=B),
                    convention="tumorboard").table  # fmt: skip
    est = {(r["task"], r["metric"]): (r["estimate"], r["n"]) for r in t.iter_rows(named=True)}
    # tumorboard reading; vqa: TSS = 2/3 (valid, 2 of 3 ok), 1 (valid, no calls), 0 (invalid)
    assert est[("vqa", "trajectory_success_score")] == (pytest.approx(5 / 9), 3)
    assert est[("vqa", "trajectory_success_rate")] == (pytest.approx(1 / 3), 3)
    # report: 1 of 2 calls has success null = failed -> 1/2, not a success
    assert est[("report", "trajectory_success_score")] == (pytest.approx(0.5), 1)
    assert est[("report", "trajectory_success_rate")] == (0.0, 1)
    # overall = plain mean of the task means
    assert est[("overall", "trajectory_success_score")] == (pytest.approx((5 / 9 + 0.5) / 2), 4)
    # redundancy only on samples with calls: vqa row 0 (1 of 3), report (0 of 2)
    assert est[("vqa", "tool_redundancy_rate")] == (pytest.approx(1 / 3), 1)
    assert est[("report", "tool_redundancy_rate")] == (0.0, 1)
    # consistency: vqa row 0: E={zoom,grade}, U={zoom,stain}: 1/2; row 2: E={a}, U={}: 0
    assert est[("vqa", "tool_consistency_f1")] == (pytest.approx(0.25), 2)
    assert est[("report", "tool_consistency_f1")] == (1.0, 1)
    assert est[("vqa", "answer_consistency")] == (pytest.approx(3.0), 2)
    assert est[("vqa", "hallucination_rate")] == (pytest.approx(0.5), 2)
    # multiple choice on vqa: A==A, missing prediction wrong, "b" == "B" -> 2/3
    assert est[("vqa", "mc_f1")] == (pytest.approx(2 / 3), 3)
    assert ("report", "mc_f1") not in est  # no gold option there
    for r in t.iter_rows(named=True):
        assert (
            r["ci_low"] - 1e-12 <= r["estimate"] <= r["ci_high"] + 1e-12 or r["task"] == "overall"
        )
        assert r["pm"] == pytest.approx((r["ci_high"] - r["ci_low"]) / 2)
    assert t["benchmark"].unique().to_list() == ["lammi"]


def random_frame(seed: int, n: int = 60) -> pl.DataFrame:
    rng = random.Random(seed)
    words = ["slide", "x", "y", "1", "2", "he", "ihc", "roi"]
    tools = ["zoom", "stain", "segment", "count"]
    calls, expected = [], []
    for _ in range(n):
        k = rng.randint(0, 6)
        calls.append([
            call(rng.choice(tools), " ".join(rng.sample(words, rng.randint(0, 4))),
                 rng.choice([True, True, False, None]))
            for _ in range(k)
        ])  # fmt: skip
        expected.append(rng.sample(tools, rng.randint(0, 3)))
    return pl.DataFrame(
        {
            "model": [rng.choice(["a", "b"]) for _ in range(n)],
            "tool_calls": calls,
            "output_valid": [rng.random() < 0.8 for _ in range(n)],
            "expected_tools": expected,
        },
        schema_overrides={"tool_calls": pl.List(CALL)},
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_lammi_vectorized_scorer_matches_reference_functions(seed: int) -> None:
    df = random_frame(seed)
    t = lammi.score(df, options=BootstrapOptions(n_resamples=50)).table
    assert set(t["task"].to_list()) == {"all"}  # no task column: one task, no overall row
    for model in ("a", "b"):
        rows = [r for r in df.iter_rows(named=True) if r["model"] == model]
        tss, trr, f1 = [], [], []
        for r in rows:
            c = r["tool_calls"]
            ok = sum(1 for x in c if x["success"])
            tss.append(trajectory_success_score([r["output_valid"]], [ok], [len(c)])[0])
            if c:
                trr.append(tool_redundancy_rate([x["name"] for x in c], [x["input"] for x in c]))
            f1.append(tool_consistency_f1(r["expected_tools"], [x["name"] for x in c]))
        got = {
            r["metric"]: (r["estimate"], r["n"])
            for r in t.filter(pl.col("model") == model).iter_rows(named=True)
        }
        assert got["trajectory_success_score"] == (pytest.approx(np.mean(tss)), len(rows))
        assert got["trajectory_success_rate"][0] == pytest.approx(np.mean(np.array(tss) >= 1.0))
        assert got["tool_redundancy_rate"] == (pytest.approx(np.mean(trr)), len(trr))
        assert got["tool_consistency_f1"] == (pytest.approx(np.mean(f1)), len(rows))


def test_lammi_options_and_errors() -> None:
    df = hand_frame()
    lenient = lammi.score(df, options=BootstrapOptions(n_resamples=B), threshold=0.5).table
    row = lenient.filter(
        (pl.col("task") == "report") & (pl.col("metric") == "trajectory_success_rate")
    )
    assert row["estimate"][0] == 1.0  # TSS 0.5 >= 0.5
    with pytest.raises(ValueError, match="no column 'output_valid'"):
        lammi.score(df.drop("output_valid"))
    with pytest.raises(ValueError, match="threshold"):
        lammi.score(df, threshold=1.5)
    with pytest.raises(TypeError, match="tool_calls"):
        lammi.score(df.with_columns(pl.lit("x").alias("tool_calls")))
    no_success = df.with_columns(
        pl.col("tool_calls").list.eval(pl.element().struct.field("name").alias("name"))
        .list.eval(pl.struct(pl.element().alias("name"), pl.lit("").alias("input")))
    )  # fmt: skip
    with pytest.raises(ValueError, match="no field 'success'"):
        lammi.score(no_success)
    with pytest.raises(ValueError, match="no column 'pid'"):
        lammi.score(df, cluster="pid")
    clustered = lammi.score(
        df.with_columns(pl.Series("pid", ["p1", "p1", "p2", "p2"])),
        cluster="pid",
        options=BootstrapOptions(n_resamples=B),
    ).table
    assert clustered.height == lammi.score(df, options=BootstrapOptions(n_resamples=B)).table.height


@pytest.mark.parametrize(("with_calls", "tss"), [(0, 0.500), (2, 0.504)])
def test_tss_reproduces_table4_no_call_planner(with_calls: int, tss: float) -> None:
    # LAMMI-Pathology (arXiv 2602.18773) Table 4: a planner with TRR 0.000 scores TSS
    # 0.500-0.504 at every NITR. Hand-worked: 250 valid answers, `with_calls` of them with one
    # successful call: the paper's reading gives (248 * (1 + 0) / 2 + 2 * (1 + 1) / 2) / 250 =
    # 0.504, and 0.500 without any call; tumorboard's earlier reading gave 1.0 for both.
    n = 250
    calls = [[call("zoom", f"region {i}", True)] if i < with_calls else [] for i in range(n)]
    df = pl.DataFrame(
        {"model": ["planner"] * n, "tool_calls": calls, "output_valid": [True] * n},
        schema_overrides={"tool_calls": pl.List(CALL)},
    )
    rep = lammi.score(df, options=BootstrapOptions(n_resamples=50))
    est = {r["metric"]: r["estimate"] for r in rep.table.iter_rows(named=True)}
    assert est["trajectory_success_score"] == pytest.approx(tss, abs=1e-12)
    assert est["tool_redundancy_rate"] == 0.0  # TRR 0.000, a row even without any call
    assert est["trajectory_success_rate"] == pytest.approx(with_calls / n)
    assert rep.convention is not None and rep.convention.startswith("paper")
    old = lammi.score(df, options=BootstrapOptions(n_resamples=50), convention="tumorboard")
    assert old.table.filter(pl.col("metric") == "trajectory_success_score")["estimate"][0] == 1.0
    explicit = lammi.score(df, options=BootstrapOptions(n_resamples=50), no_call_ratio=1.0)
    got = explicit.table.filter(pl.col("metric") == "trajectory_success_score")["estimate"][0]
    assert got == pytest.approx(1.0)


def test_a_group_without_tool_calls_reports_trr_zero() -> None:
    # LAMMI-Pathology (arXiv 2602.18773) Table 4 prints TRR 0.000 (TSS 0.500) for the PE
    # InternVL3.5 8B planner, which calls no tool: the group gets a row with TRR 0 over all its
    # samples, not a missing row. A group with calls still averages over its samples with calls
    # (here "tool": 1 redundant of 2 calls in one trajectory, a trajectory without calls left
    # out); "mixed" has a task without calls (0 over its 2 samples) and one with calls.
    calls = [[], None, [], [call("zoom", "a b"), call("zoom", "b a")], [], [], [],
             [call("zoom", "a")]]  # fmt: skip
    df = pl.DataFrame(
        {
            "model": ["none", "none", "none", "tool", "tool", "mixed", "mixed", "mixed"],
            "task": ["t", "t", "t", "t", "t", "u", "u", "v"],
            "tool_calls": calls,
            "output_valid": [True] * 8,
        },
        schema_overrides={"tool_calls": pl.List(CALL)},
    )
    rep = lammi.score(df, options=BootstrapOptions(n_resamples=50))
    trr = rep.table.filter(pl.col("metric") == "tool_redundancy_rate")
    got = {(r["model"], r["task"]): r for r in trr.iter_rows(named=True)}
    for key in (("none", "t"), ("none", "overall"), ("mixed", "u")):
        row = got[key]
        assert (row["estimate"], row["ci_low"], row["ci_high"]) == (0.0, 0.0, 0.0)
    assert got[("none", "t")]["n"] == 3 and got[("mixed", "u")]["n"] == 2
    assert (got[("tool", "t")]["estimate"], got[("tool", "t")]["n"]) == (0.5, 1)
    assert (got[("mixed", "v")]["estimate"], got[("mixed", "v")]["n"]) == (0.0, 1)
    assert got[("mixed", "overall")]["estimate"] == 0.0 and got[("mixed", "overall")]["n"] == 3
    assert any("2 group(s) without any tool call report 0" in n for n in rep.notes)
    calls_only = lammi.score(df.filter(pl.col("model") == "tool"),
                             options=BootstrapOptions(n_resamples=50))  # fmt: skip
    assert not any("without any tool call" in n for n in calls_only.notes)


# ------------------------------------------------------- the paper's printed tables, cell by cell
# Su et al., LAMMI-Pathology, arXiv 2602.18773, Tables 1-5 and 7 (fixtures/paper_tables/).

_LAMMI_TABLES = {  # table -> (rows, columns) as printed
    "lammi_table1": (13, 3), "lammi_table2": (13, 5), "lammi_table3": (13, 7),
    "lammi_table4": (12, 6), "lammi_table5": (2, 6), "lammi_table7": (18, 6),
}  # fmt: skip
_ROW_KEYS = ("framework", "adaptation", "planner", "row", "dataset", "lvlm", "setting_inferred")


def test_paper_tables_lammi_every_cell_is_a_printed_rate() -> None:
    # Every metric of the tables (ACS, HR, TRR, TCF1, TSS, F1) is a share in [0, 1]: each cell is
    # a three-decimal number in [0, 1], or "/" (not applicable) in Table 7 only.
    for table, (n_rows, n_cols) in _LAMMI_TABLES.items():
        rows = pt.rows(table, _ROW_KEYS)
        assert len(rows) == n_rows and {len(c) for c in rows.values()} == {n_cols}, table
        for cells in rows.values():
            for text in cells.values():
                if text == "/":
                    assert table == "lammi_table7"
                    continue
                assert pt.half_unit(text) == 0.0005 and 0.0 <= float(text) <= 1.0, (table, text)


def test_paper_tables_lammi_averages_and_gaps_the_prose_derives() -> None:
    # §4.2: LAMMI with Qwen3 VL reaches "0.503 F1 on average" on PathMMU: the mean of its four
    # printed subset F1 cells (Table 3). §4.2: LAMMI with InternVL3.5 exceeds GPT-5's ACS by
    # 0.070 on PathSpatial-DocQA (Table 1: 0.809 - 0.739). §4.3.2: from the first to the
    # fourth maximum-iteration column TSS grows by 0.102 with TA and 0.073 without (Table 5),
    # and it grows with every added iteration.
    subsets = ("F1 Atlas", "F1 EduContent", "F1 PathCLS", "F1 Pubmed")
    t3 = pt.rows("lammi_table3", ("framework", "planner"))
    qwen = t3[("LAMMI (Ours)", "Qwen3 VL 8B Instruct")]
    avg = pt.monotone_range(pt.mean, [qwen[c] for c in subsets], [1] * 4)
    assert pt.consistent(avg, "0.503")
    assert pt.mean(*(float(qwen[c]) for c in subsets)) == pytest.approx(0.503, abs=1e-12)
    t1 = pt.rows("lammi_table1", ("framework", "planner"))
    lammi_acs = t1[("LAMMI (Ours)", "InternVL3.5 8B")]["ACS"]
    gpt5_acs = t1[("OpenAI-Agents-SDK", "GPT-5")]["ACS"]
    gap = pt.monotone_range(lambda a, b: a - b, [lammi_acs, gpt5_acs], [1, -1])
    assert pt.consistent(gap, "0.070")
    t5 = pt.rows("lammi_table5", ("row",))
    for row, gain in (("w/ TA", "0.102"), ("w/o TA", "0.073")):
        tss = [t5[(row,)][f"(unlabelled column {k})"] for k in range(1, 7)]
        rise = pt.monotone_range(lambda a, b: b - a, [tss[0], tss[3]], [-1, 1])
        assert pt.consistent(rise, gain), row
        assert all(float(a) < float(b) for a, b in zip(tss, tss[1:], strict=False)), row


def test_paper_tables_lammi_scorer_reproduces_the_table4_rows_without_redundancy() -> None:
    # Table 4's rows with TRR 0.000: under the paper's TSS = (valid + s/t) / 2 the printed TSS
    # 0.500 is a planner whose valid answers call no tool, and 0.504 one where 0.8% of them make
    # one successful, non-redundant call. tumorboard's scorer, on 250 such trajectories per
    # printed (planner, NITR) cell pair, prints both cells: TRR 0.000 (a row even when no
    # trajectory calls a tool) and the TSS.
    n = 250
    t4 = pt.rows("lammi_table4", ("adaptation", "planner"))
    cells = [(f"{a}|{p}|{nitr}", c[f"NITR={nitr} TSS"])
             for (a, p), c in t4.items() for nitr in ("0.2", "0.5", "1.0")
             if c[f"NITR={nitr} TRR"] == "0.000"]  # fmt: skip
    assert len(cells) == 6 and {tss for _, tss in cells} == {"0.500", "0.504"}
    models, calls = [], []
    for name, tss in cells:
        with_calls = round((float(tss) - 0.5) * 2 * n)
        models += [name] * n
        calls += [[call("zoom", f"region {i}")] if i < with_calls else [] for i in range(n)]
    df = pl.DataFrame({"model": models, "tool_calls": calls, "output_valid": [True] * len(models)},
                      schema_overrides={"tool_calls": pl.List(CALL)})  # fmt: skip
    t = lammi.score(df, options=BootstrapOptions(n_resamples=20)).table
    shown = {(r["model"], r["metric"]): f"{r['estimate']:.3f}" for r in t.iter_rows(named=True)}
    for name, tss in cells:
        assert shown[(name, "tool_redundancy_rate")] == "0.000", name
        assert shown[(name, "trajectory_success_score")] == tss, name
