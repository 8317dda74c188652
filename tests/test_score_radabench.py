"""Tests of the RadA-BenchPlat metrics and scorer.

The scorer is python/tumorboard/score/radabench.py; the reference-code replicas are in
score/_radabench_reference.py.

Hand-worked values for every agent metric from the paper's definition (e.g. the paper's optimal
tool score example: 4 tools, the second best chosen, 0.75) and for the reference code's variants
(MAGIC-AI4Med/RadABench@acbcf87, EvalPlat/EvalMetrics/*.py); BLEU-1 against NLTK's
sentence_bleu; ROUGE-L of the ``rouge`` 1.0.1 package worked by hand (the package is not
installed); a small frame whose report is worked out in the test.
"""

from __future__ import annotations

import math
import random

import numpy as np
import polars as pl
import pytest
from tumorboard.score import radabench
from tumorboard.score.radabench import (
    bleu1_code,
    deny_awareness,
    deny_grounding,
    execution_failed,
    extract_conclusion,
    false_discovery_rate,
    final_response_scores_code,
    log_error_flag,
    longest_common_run,
    optimal_tool_score,
    optimal_tool_score_code,
    pre_failure_progress,
    redundancy_rate_code,
    rouge_l_code,
    set_f1_code,
    tool_chain_levenshtein,
    tool_matching_accuracy,
    tool_matching_accuracy_code,
)
from tumorboard.stats import BootstrapOptions

B = 300
GT = ["Anatomy Classifier", "Modality Classifier", "Organ Segmentor", "Anomaly Detector"]


# --------------------------------------------------------------------------- tool-chain metrics


def test_optimal_tool_score_paper_example() -> None:
    # "4 tools, second best chosen gives 0.75": (N - R + 1) / N = (4 - 2 + 1) / 4
    assert float(optimal_tool_score(2, 4)) == 0.75
    np.testing.assert_allclose(optimal_tool_score([1, 4, 3], [4, 4, 3]), [1.0, 0.25, 1 / 3])
    with pytest.raises(ValueError):
        optimal_tool_score(5, 4)
    with pytest.raises(ValueError):
        optimal_tool_score(0, 4)


def test_optimal_tool_score_code_scans_from_the_end() -> None:
    cands = ["TOOL7", "TOOL8", "TOOL10", "TOOL9", "TOOL11"]  # worst .. best (max_tool_dict)
    assert optimal_tool_score_code(["TOOL11"], cands) == 1.0  # best: i = 0 -> 5/5
    assert optimal_tool_score_code(["TOOL1", "TOOL9"], cands) == 0.8  # i = 1 -> 4/5
    assert optimal_tool_score_code(["TOOL7", "TOOL10"], cands) == 0.6  # best called wins
    assert optimal_tool_score_code(["TOOL2"], cands) == 0.0
    assert optimal_tool_score_code(["TOOL2"], []) == 0.0


def test_chain_metrics_hand_cases() -> None:
    pred = ["Anatomy Classifier", "Disease Diagnoser", "Organ Segmentor", "Anomaly Detector"]
    assert tool_chain_levenshtein(pred, GT) == 1  # one substitution
    assert tool_chain_levenshtein([], GT) == 4
    # one of four called tools is not in GT
    assert false_discovery_rate(pred, GT) == 0.25
    assert false_discovery_rate(["X", "X", "Anatomy Classifier"], GT) == pytest.approx(2 / 3)
    assert false_discovery_rate([], GT) == 0.0
    # the code's denominator max(|pred|, |gt|): 1 / max(2, 4)
    assert redundancy_rate_code(["Anatomy Classifier", "X"], GT) == 0.25
    assert false_discovery_rate(["Anatomy Classifier", "X"], GT) == 0.5
    # positional hits 0, 2, 3 of 4
    assert tool_matching_accuracy(pred, GT) == 0.75
    # shifted by one: no positional hit, but a contiguous run of 3
    shifted = ["X"] + GT[:3]
    assert tool_matching_accuracy(shifted, GT) == 0.0
    assert longest_common_run(GT, shifted) == 3
    assert tool_matching_accuracy_code(shifted, GT) == 0.75
    # the run must be contiguous: GT[0], GT[2] in order is a subsequence of 2 but runs of 1
    assert tool_matching_accuracy_code([GT[0], "X", GT[2]], GT) == 0.25
    assert tool_matching_accuracy_code(pred, []) == 0.0
    with pytest.raises(ValueError):
        tool_matching_accuracy(pred, [])
    assert pre_failure_progress(GT[:1], GT) == 0.25


def test_longest_common_run_against_brute_force() -> None:
    rng = random.Random(0)
    for _ in range(200):
        a = [rng.choice("abc") for _ in range(rng.randint(0, 7))]
        b = [rng.choice("abc") for _ in range(rng.randint(0, 7))]
        best = 0
        for i in range(len(a)):
            for j in range(len(b)):
                k = 0
                while i + k < len(a) and j + k < len(b) and a[i + k] == b[j + k]:
                    k += 1
                best = max(best, k)
        assert longest_common_run(a, b) == best


# ---------------------------------------------------------------------------------- log parsing


def test_log_parsing() -> None:
    failed = "Step 1 starts!\nError Type: KeyError\nError Message: 'TOOL3'\nTraceback: ..."
    assert execution_failed(failed)
    # the message must be one line (no DOTALL in the code's regex)
    assert not execution_failed("Error Type: KeyError\nError Message: a\nb\nTraceback:")
    assert log_error_flag("an error occurred") and log_error_flag("Error")
    assert not log_error_flag("ERROR")  # only "Error" and "error"
    log = "Final combination starts!\nConclusion: The liver is enlarged.\n\nDone\n"
    assert extract_conclusion(log) == "The liver is enlarged."
    assert extract_conclusion("Conclusion:  at the end\n") == "at the end"
    assert extract_conclusion("no answer") == ""
    deny = "Deny Call Dict: {'Purpose': 'x', 'Category': 'Organ Segmentor', 'Anatomy': 'Liver'}"
    assert deny_awareness(deny) and not deny_awareness("Call Dict: {}")
    assert deny_grounding(deny, "Organ Segmentor")
    assert deny_grounding(deny, "Segmentor")  # substring, as the code checks
    assert not deny_grounding(deny, "Anomaly Detector")
    assert not deny_grounding("'Category': 'Organ Segmentor'", "Organ Segmentor")  # not aware


# ------------------------------------------------------------------ reference-code text metrics


def test_bleu1_code_matches_nltk_sentence_bleu() -> None:
    bleu_score = pytest.importorskip("nltk.translate.bleu_score")
    smooth = bleu_score.SmoothingFunction().method1
    rng = random.Random(5)
    vocab = ["the", "liver", "is", "enlarged", "normal", "no", "lesion", ".", ","]
    for _ in range(300):
        hyp = [rng.choice(vocab) for _ in range(rng.randint(1, 12))]
        ref = [rng.choice(vocab) for _ in range(rng.randint(1, 12))]
        expected = bleu_score.sentence_bleu([ref], hyp, weights=(1.0, 0, 0, 0),
                                            smoothing_function=smooth)  # fmt: skip
        assert bleu1_code(hyp, ref) == pytest.approx(expected, rel=0, abs=1e-15)
    # hand: 3 of 4 unigrams match, |hyp| = |ref| -> BP = 1
    assert bleu1_code(["a", "b", "c", "x"], ["a", "b", "c", "d"]) == 0.75
    # clipping and brevity: hyp "a a" vs ref "a b c": 1 clipped match of 2, BP = exp(1 - 3/2)
    assert bleu1_code(["a", "a"], ["a", "b", "c"]) == pytest.approx(0.5 * math.exp(-0.5))
    assert bleu1_code([], ["a"]) == 0.0
    assert bleu1_code(["x"], ["a"]) == 0.0


def test_set_f1_code_hand_case() -> None:
    # sets {the, liver, is, normal} and {the, liver, is, enlarged}: P = R = 3/4
    assert set_f1_code("the liver is normal".split(), "the liver is enlarged".split()) == 0.75
    assert set_f1_code([], ["a"]) == 0.0
    assert set_f1_code(["a", "a", "b"], ["a"]) == pytest.approx(2 * 0.5 * 1 / 1.5)


def test_rouge_l_code_hand_cases() -> None:
    # one sentence each: LCS "the liver is": R = P = 3/4, F = 2PR / (P + R + 1e-8)
    f = rouge_l_code("the liver is normal", "the liver is enlarged")
    assert f == 2 * ((0.75 * 0.75) / (0.75 + 0.75 + 1e-8))
    # the package's union-LCS example: r = w1..w5, c1 = w1 w2 w6 w7 w8, c2 = w1 w3 w8 w9 w5:
    # union {w1, w2, w3, w5} = 4, m = 5 reference words, n = 8 distinct candidate words
    f = rouge_l_code("w1 w2 w6 w7 w8. w1 w3 w8 w9 w5", "w1 w2 w3 w4 w5")
    assert f == 2 * ((0.5 * 0.8) / (0.5 + 0.8 + 1e-8))
    # LCS reconstruction tie-break: LCS("a b", "b a") is reconstructed as {b}; with the second
    # reference sentence "b" the union is {b} (1 word), not {a, b}: R = P = 1/2
    f = rouge_l_code("b a", "a b. b")
    assert f == 2 * ((0.5 * 0.5) / (0.5 + 0.5 + 1e-8))
    # a whitespace-only piece after the last "." is the word "": n = |{hello, world, ""}| = 3
    f = rouge_l_code("hello world. ", "hello world")
    assert f == 2 * ((2 / 3 * 1.0) / (2 / 3 + 1.0 + 1e-8))
    # case-sensitive
    assert rouge_l_code("The liver", "the liver") == 2 * ((0.5 * 0.5) / (0.5 + 0.5 + 1e-8))
    with pytest.raises(ValueError):
        rouge_l_code("...", "a")


def test_final_response_scores_code() -> None:
    pytest.importorskip("nltk")
    f1, bleu, rl = final_response_scores_code("The liver is normal.", "The liver is enlarged.")
    # NLTK tokens (lowercased): the liver is normal . / the liver is enlarged .
    assert f1 == pytest.approx(2 * 0.8 * 0.8 / 1.6)
    assert bleu == pytest.approx(0.8)
    # raw text: one sentence "The liver is normal" each side: 3 of 4 words
    assert rl == pytest.approx(0.75, abs=1e-8)
    assert final_response_scores_code("", "x") == (0.0, 0.0, 0.0)
    assert final_response_scores_code("a", None) == (0.0, 0.0, 0.0)
    # ROUGE raises on "..." (no sentence) and the code scores it 0; F1 and BLEU still count
    f1, bleu, rl = final_response_scores_code("...", "...")
    assert (f1, bleu, rl) == (1.0, 1.0, 0.0)


def test_radabench_tokenize_is_nltk_word_tokenize_per_sentence() -> None:
    nltk = pytest.importorskip("nltk")
    from tumorboard.score.radabench import radabench_tokenize

    one = 'the 3.5 cm lesion (segment vii) isn\'t enhancing, see "report"'
    assert radabench_tokenize(one) == nltk.word_tokenize(one, preserve_line=True)
    two = "the liver is enlarged. no focal lesion."
    assert radabench_tokenize(two) == ["the", "liver", "is", "enlarged", ".", "no", "focal",
                                       "lesion", "."]  # fmt: skip


# ------------------------------------------------------------------------------------- scorer


def core_frame() -> pl.DataFrame:
    g3 = GT[:3]
    return pl.DataFrame(
        {
            "model": ["m"] * 4,
            "gt_tools": [GT, GT, g3, GT[:2]],
            "called_tools": [[GT[0], "X", GT[2], GT[3]], GT[:2], g3, []],
            "completed": [True, False, True, True],
            "candidate_tools": [["T1", "T2", "T3", "T4"], None, ["T5"], []],
            "called_tool_ids": [["T3", "T1"], [], ["T5"], []],
            "selection_ranks": [[2, 1], [1], [], None],
            "selection_sizes": [[4, 3], [2], [], None],
            "milestone": [GT[2], GT[2], None, GT[1]],
            "missing_category": [None, None, None, "Organ Segmentor"],
            "log": [
                "Conclusion: the liver is normal",
                "Error Type: KeyError\nError Message: x\nTraceback: ...",
                "all fine",
                "Deny Call Dict: {'Category': 'Organ Segmentor (missing)'}",
            ],
        }
    )


def test_radabench_hand_frame() -> None:
    t = radabench.score(core_frame(), options=BootstrapOptions(n_resamples=B)).table
    est = {r["metric"]: (r["estimate"], r["n"]) for r in t.iter_rows(named=True)}
    # cases: 0: gt ABCD called AXCD (done); 1: ABCD called AB (failed); 2: ABC = ABC (done);
    # 3: gt AB, nothing called (done, unsolvable)
    assert est["tool_chain_levenshtein"] == (pytest.approx((1 + 2 + 0 + 2) / 4), 4)
    assert est["false_discovery_rate"] == (pytest.approx(0.25 / 4), 4)
    assert est["tool_matching_accuracy"] == (pytest.approx((0.75 + 0.5 + 1 + 0) / 4), 4)
    # code variants on completed cases 0, 2, 3: redundancy 1/4, 0, 0; run CD = 2/4, 1, 0
    assert est["redundancy_rate_code"] == (pytest.approx(0.25 / 3), 3)
    assert est["tool_matching_accuracy_code"] == (pytest.approx(1.5 / 3), 3)
    assert est["execution_completion_rate"] == (0.75, 4)
    assert est["pre_failure_progress"] == (0.5, 1)  # failed case: 2 of 4
    assert est["target_hit_rate"] == (0.5, 4)  # cases 0 and 2
    assert est["milestone_hit_rate"] == (pytest.approx(1 / 3), 3)
    # paper OTS: case 0 steps 3/4 and 3/3 -> 7/8; case 1 step 2/2 -> 1; cases 2-3 no steps
    assert est["optimal_tool_score"] == (pytest.approx((7 / 8 + 1) / 2), 2)
    # code OTS: case 0 best called T3 at index 2 -> 3/4; case 2 -> 1; case 3 empty -> 0
    assert est["optimal_tool_score_code"] == (pytest.approx(1.75 / 3), 3)
    assert est["unsolvability_awareness_rate"] == (1.0, 1)
    assert est["unsolvability_grounding_rate"] == (1.0, 1)
    assert "bleu" not in est  # no reference answers
    for r in t.iter_rows(named=True):
        assert r["ci_low"] - 1e-12 <= r["estimate"] <= r["ci_high"] + 1e-12
    assert t["task"].unique().to_list() == ["all"]


def test_radabench_completion_from_log_and_code_text_metrics() -> None:
    pytest.importorskip("nltk")
    df = (
        core_frame()
        .drop("completed")
        .with_columns(pl.Series("reference_answer", ["the liver is enlarged", "a", None, "b"]))
    )
    t = radabench.score(df, options=BootstrapOptions(n_resamples=B), text_metrics="code").table
    est = {r["metric"]: (r["estimate"], r["n"]) for r in t.iter_rows(named=True)}
    assert est["execution_completion_rate"] == (0.75, 4)  # from the Error Type block
    # text: case 1 has "Error" in its log (left out), case 2 no reference; case 0 response
    # "the liver is normal" (3 of 4 tokens), case 3 has no conclusion (0)
    assert est["f1_code"] == (pytest.approx(0.75 / 2), 2)
    assert est["bleu1_code"] == (pytest.approx(0.75 / 2), 2)
    assert est["rouge_l_code"][0] == pytest.approx(0.75 / 2, abs=1e-8)


def test_radabench_paper_text_metrics_match_reference_libraries() -> None:
    text = pytest.importorskip("tumorboard.text", exc_type=ImportError)
    sacrebleu = pytest.importorskip("sacrebleu")
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
    assert text is not None
    hyps = ["The liver is normal.", "Small lesion in segment VII, likely a cyst.", ""]
    refs = ["The liver is enlarged.", "A cyst in segment VII.", "No abnormality."]
    df = pl.DataFrame({"model": ["m"] * 3, "gt_tools": [GT] * 3, "called_tools": [GT] * 3,
                       "response": hyps, "reference_answer": refs})  # fmt: skip
    t = radabench.score(df, options=BootstrapOptions(n_resamples=B)).table
    est = {r["metric"]: r["estimate"] for r in t.iter_rows(named=True)}
    bleu = [sacrebleu.sentence_bleu(h, [r]).score / 100 for h, r in zip(hyps, refs, strict=True)]
    sc = rouge_scorer.RougeScorer(["rougeL"])
    rl = [sc.score(r, h)["rougeL"].fmeasure for h, r in zip(hyps, refs, strict=True)]
    assert est["bleu"] == pytest.approx(np.mean(bleu), abs=1e-12)
    assert est["rouge_l"] == pytest.approx(np.mean(rl), abs=1e-12)
    # unique-token F1 over rouge-score tokens
    from rouge_score import tokenize

    f1 = []
    for h, r in zip(hyps, refs, strict=True):
        hs, rs = set(tokenize.tokenize(h, None)), set(tokenize.tokenize(r, None))
        common = len(hs & rs)
        f1.append(0.0 if common == 0 else 2 * common / (len(hs) + len(rs)))
    assert est["f1"] == pytest.approx(np.mean(f1), abs=1e-12)


def test_radabench_errors() -> None:
    df = core_frame()
    with pytest.raises(ValueError, match="no column 'gt_tools'"):
        radabench.score(df.drop("gt_tools"))
    with pytest.raises(ValueError, match="gt_tools at row 1 is missing or empty"):
        radabench.score(df.with_columns(pl.Series("gt_tools", [GT, [], GT, GT])))
    with pytest.raises(ValueError, match="selection step at row 0"):
        radabench.score(df.with_columns(pl.Series("selection_ranks", [[5, 1], [1], [], None])))
    with pytest.raises(ValueError, match="text_metrics"):
        radabench.score(df, text_metrics="all")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="response"):
        radabench.score(df.drop("log").with_columns(pl.lit("x").alias("reference_answer")))
    with pytest.raises(TypeError, match="list"):
        radabench.score(df.with_columns(pl.lit("A").alias("called_tools")))
