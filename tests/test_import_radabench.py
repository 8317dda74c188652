"""``tumorboard import radabench``: RadA-BenchPlat pipeline result folders, quirks included.

The fixtures are written here in the format of the pipelines of MAGIC-AI4Med/RadABench@acbcf87
(``EvalPlat/EvalPipeline_multihop_general.py`` builds the log text; ``Utils/utils.py:saveINFO``
writes ``logouts/<case>/<chain>.txt`` with one trailing newline and ``info/<case>/<chain>.json``;
``handle_exception`` appends the error block). The expected aggregates are worked out by hand
from the official ``EvalPlat/EvalMetrics`` scripts' rules (module docstrings of
``tumorboard.traj.importers.radabench`` and ``tumorboard.score.radabench``):

multiGeneral, 4 logs (GT chains from the scripts' map_dict; AC/MC/OS/AD/DD the categories):

=========  ===================================  ==========  ============================
case/chain  called ids -> categories              completed   quirk
=========  ===================================  ==========  ============================
0/012       TOOL1 TOOL2 TOOL5 -> AC MC OS          yes
0/013       TOOL1 TOOL2 TOOL99 -> AC MC            no          unknown id TOOL99 (error)
1/0123      TOOL1 TOOL2 TOOL4 -> AC MC OS          "yes"       multi-line error undetected
1/014       (TOOL1 lost) TOOL2 TOOL9 -> MC DD      yes         call dict cut at its first }
=========  ===================================  ==========  ============================

multihop_IO_passrate.py: passrate1 = 3/4; passrate2 = (1 + 0 + 1) / 4 = 1/2; redundancy 0;
precision (LCS / |gt|) = (3/3 + 3/4 + 2/3) / 3; failed length ratio = 2/3; distances over the 3
completed: gt-vs-called (0 + 1 + 1) / 3, plan-vs-called (0 + 1 + 1) / 3, gt-vs-plan 0.
generalEval over all 4: gt-vs-called (0 + 1 + 1 + 1) / 4. multihop_performance.py: win rate
(1 + 0 + 2/3 + 1/5) / 4; milestone 3/4; text metrics on the 2 logs without "error": F1, BLEU-1
and ROUGE-L (1 + 0) / 2 (0/012 repeats its reference; 1/014's question has no answer: 0).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from tumorboard.score import radabench as rscore
from tumorboard.stats import BootstrapOptions
from tumorboard.traj import Store, import_logs
from tumorboard.traj.importers import radabench as radabench_importer
from tumorboard.traj.importers.radabench import extract

REPO = Path(__file__).resolve().parents[1]
AC, MC, OS, AD = "Anatomy Classifier", "Modality Classifier", "Organ Segmentor", "Anomaly Detector"
DD, BQ = "Disease Diagnoser", "Biomarker Quantifier"
TOOLINFO = {
    "TOOL1": {"Category": AC, "Performance": 0.9},
    "TOOL2": {"Category": MC, "Performance": 0.9},
    "TOOL3": {"Category": OS, "Performance": 0.6},
    "TOOL4": {"Category": OS, "Performance": 0.7},
    "TOOL5": {"Category": OS, "Performance": 0.8},
    "TOOL6": {"Category": AD, "Performance": 0.7},
    "TOOL7": {"Category": AD, "Performance": 0.8},
    "TOOL9": {"Category": DD, "Performance": 0.5},
    "TOOL12": {"Category": BQ, "type": "Anomaly", "Performance": 0.5},
}
PLAN = {
    AC: "Anatomy Classification Tool", MC: "Modality Classification Tool",
    OS: "Organ Segmentation Tool", AD: "Anomaly Detection Tool", DD: "Disease Diagnosis Tool",
}  # fmt: skip


def call_dict(tool: str, purpose: str = "next step") -> str:
    """Return the repr of the pipeline's call dict (``extract_call_content``)."""
    return str({"Purpose": purpose, "Tool": tool, "Input": ["$Image$", "$Information$"]})


def pipeline_log(
    i: int,
    j: int,
    chain: str,
    plan: list[str],
    calls: list[str],
    conclusion: str | None = None,
    error: tuple[str, str] | None = None,
) -> str:
    """Compose a log the way EvalPipeline_multihop_general.pipelinerun and handle_exception do."""
    value = {"$Image$": "PLACEHOLDER_IMAGE", "$Information$": "PLACEHOLDER_INFORMATION"}
    score = {"$Image$": 1.0, "$Information$": 1.0}
    chain_text = " -> ".join(f"*{p}*" for p in plan)
    log = f"Case {i}, Question {j}, {chain}: What does the image show?\n"
    log += f"Initial Output: Known Info: []\nTool Chain: [{chain_text}]\n"
    log += (
        f"Initial Value Dict: {value}\nInitial Score Dict: {score}\nInitial Fixed Dict: {score}\n"
    )
    log += f"\nMemory bank: {value} \nScore bank: {score} \nFixed bank: {score}"
    for k, c in enumerate(calls, 1):
        log += f"\nStep {k} starts!"
        log += f"\nStepoutput: <Call><Purpose>step {k}</Purpose><Tool>...</Tool></Call>"
        log += f"\nCall Dict: {c}"
        if error is not None and k == len(calls):
            break
        log += f"\nMemory bank: {value} \nScore bank: {score} \nFixed bank: {score}"
        log += f"\nStep {k} completes!"
    if error is None:
        log += "Final combination starts!"
        log += f"\nConclusion: {conclusion}\n"
    else:
        log += "\nAn error occurred:"
        log += f"\nError Type: {error[0]}"
        log += f"\nError Message: {error[1]}"
        log += "\nTraceback:"
        log += 'Traceback (most recent call last):\n  File "pipeline.py", line 240\n'
    return log


def save(base: Path, i: int, chain: str, log: str, toolinfo: dict | None = None) -> None:
    """Write the log and the info file as saveINFO does (log_to_file appends a newline)."""
    (base / "logouts" / str(i)).mkdir(parents=True, exist_ok=True)
    (base / "info" / str(i)).mkdir(parents=True, exist_ok=True)
    with open(base / "logouts" / str(i) / f"{chain}.txt", "a", encoding="utf-8") as f:
        f.write(str(log) + "\n")
    info = {"TOOLINFO": toolinfo or TOOLINFO, "TOOLDES": "...", "TOOLBOX": {}}
    (base / "info" / str(i) / f"{chain}.json").write_text(json.dumps(info, indent=4))


def write_results(root: Path) -> tuple[Path, Path]:
    """Write the multiGeneral and singleGeneral folders of model GPT4 and the cases file."""
    multi = root / "GPT4" / "multiGeneral"
    save(multi, 0, "012", pipeline_log(0, 0, "012", [PLAN[AC], PLAN[MC], PLAN[OS]],
                                       [call_dict(t) for t in ("TOOL1", "TOOL2", "TOOL5")],
                                       conclusion="The liver is segmented."))  # fmt: skip
    save(multi, 0, "013", pipeline_log(
        0, 1, "013", [PLAN[AC], PLAN[MC], PLAN[AD], "Anomaly Biomarker Quantification Tool"],
        [call_dict(t) for t in ("TOOL1", "TOOL2", "TOOL99")],
        error=("NameError", "Tool TOOL99 is not in the toolbox!"),
    ))  # fmt: skip
    save(multi, 1, "0123", pipeline_log(
        1, 0, "0123", [PLAN[AC], PLAN[MC], PLAN[OS], PLAN[AD]],
        [call_dict(t) for t in ("TOOL1", "TOOL2", "TOOL4")],
        error=("OSError", "Input ['$Anatomy$'] is not in Meta Information!\nretry later"),
    ))  # fmt: skip
    save(multi, 1, "014", pipeline_log(
        1, 1, "014", [PLAN[AC], PLAN[MC], PLAN[DD]],
        [call_dict("TOOL1", purpose="classify the {anatomy} first"), call_dict("TOOL2"),
         call_dict("TOOL9")],
        conclusion="Pneumonia is likely.",
    ))  # fmt: skip
    single = root / "GPT4" / "singleGeneral"
    decomposition = (
        "Case 0, Question 0, 0123568: Report the lesion volume.\n<Decomposition>\n"
        + "".join(f"<Call{k}><Purpose>p</Purpose><Tool> {t} </Tool><Input>$Image$</Input>"
                  f"<Output>$X$</Output></Call{k}>\n"
                  for k, t in enumerate(["TOOL12", "TOOL1", "TOOL2", "TOOL77"], 1))
        + "</Decomposition>"
    )  # fmt: skip
    save(single, 0, "0123568", decomposition)
    cases = root / "combined_casesV3_qa_Subset.json"
    cases.write_text(json.dumps({
        "case-a": {"case": {}, "QA": {"012": {"Q": "q", "A": "The liver is segmented."},
                                      "013": {"Q": "q", "A": "A nodule."}}},
        "case-b": {"case": {}, "QA": {"0123": {"Q": "q", "A": "x"}, "014": {"Q": "q"}}},
    }))  # fmt: skip
    return root, cases


def test_extract_follows_the_scripts_quirks(tmp_path: Path) -> None:
    root, _ = write_results(tmp_path)
    logs = root / "GPT4" / "multiGeneral" / "logouts"
    got = {
        (p.parent.name, p.stem): extract(p.read_text(), TOOLINFO, p.stem)
        for p in logs.rglob("*.txt")
    }
    ok = got[("0", "012")]
    assert ok["completed"] and ok["called_tools"] == [AC, MC, OS] and ok["flags"] == []
    assert ok["plan_tools"] == [AC, MC, OS] and ok["response"] == "The liver is segmented."
    failed = got[("0", "013")]
    assert not failed["completed"]
    assert failed["called_tool_ids"] == ["TOOL1", "TOOL2", "TOOL99"]
    assert failed["called_tools"] == [AC, MC] and "unknown_tool_id" in failed["flags"]
    assert failed["plan_tools"] == [AC, MC, AD]  # the scripts' name table lacks the 4th name
    assert failed["response"] is None
    multi_line = got[("1", "0123")]
    assert multi_line["completed"] and multi_line["flags"] == ["error_not_detected"]
    cut = got[("1", "014")]
    assert cut["called_tool_ids"] == ["TOOL2", "TOOL9"] and cut["called_tools"] == [MC, DD]
    assert cut["flags"] == ["truncated_call_dict"]
    single = root / "GPT4" / "singleGeneral" / "logouts" / "0" / "0123568.txt"
    sh = extract(single.read_text(), TOOLINFO, "0123568")
    # typed biomarker category, unknown TOOL77 dropped, stably sorted by the GT order
    assert sh["single_hop"] and sh["called_tools"] == [AC, MC, "Anomaly Biomarker Quantifier"]
    assert sh["gt_tools"][5:7] == ["Organ Biomarker Quantifier", "Anomaly Biomarker Quantifier"]


def test_import_then_score_reproduces_the_official_aggregates(tmp_path: Path) -> None:
    root, cases = write_results(tmp_path / "results")
    store = tmp_path / "store"
    rep = import_logs("radabench", root, store, cases=cases)
    assert len(rep.imported) == 5 and rep.n_items == 5 and not rep.skipped
    reasons = " | ".join(r for _, r in rep.warnings)
    assert "multi-line message" in reasons and "TOOL99" in reasons and "cut at its first" in reasons
    st = Store(store, create=False)
    runs = st.runs().collect()
    assert sorted(runs["track"].to_list()) == ["multiGeneral", "singleGeneral"]
    assert set(runs["model"].to_list()) == {"GPT4"} and set(runs["benchmark"]) == {"radabench"}
    items = st.items().collect()
    assert sorted(items["item_id"].to_list()) == ["012", "0123", "0123568", "013", "014"]
    assert "error_not_detected" in items.filter(pl.col("item_id") == "0123")["flags"][0]
    opts = BootstrapOptions(n_resamples=200, seed=0)
    code = rscore.score(st, options=opts, convention="code")
    assert code.convention is not None and code.convention.startswith("code")
    t = code.table.filter(pl.col("track") == "multiGeneral")
    assert set(t["task"].to_list()) == {"all"}  # pooled over the chains
    est = {r["metric"]: r["estimate"] for r in t.iter_rows(named=True)}
    expected = {
        "execution_completion_rate": 3 / 4,  # passrate1
        "target_hit_rate": 1 / 2,  # passrate2
        "redundancy_rate_code": 0.0,
        "tool_matching_accuracy_code": (1 + 3 / 4 + 2 / 3) / 3,  # "precision"
        "pre_failure_progress": 2 / 3,  # failed length ratio
        "tool_chain_levenshtein_code": 2 / 3,  # IO script: completed cases
        "plan_levenshtein_code": 2 / 3,
        "plan_gt_levenshtein_code": 0.0,
        "tool_chain_levenshtein": 3 / 4,  # generalEval: all cases
        "optimal_tool_score_code": (1 + 0 + 2 / 3 + 1 / 5) / 4,  # win rate
        "milestone_hit_rate": 3 / 4,
        "f1_code": 0.5,
        "bleu1_code": 0.5,
    }
    for metric, value in expected.items():
        assert est[metric] == pytest.approx(value), metric
    assert est["rouge_l_code"] == pytest.approx(0.5, abs=1e-8)
    n = {r["metric"]: r["n"] for r in t.iter_rows(named=True)}
    assert (
        n["f1_code"] == 2
        and n["tool_chain_levenshtein_code"] == 3
        and n["pre_failure_progress"] == 1
    )
    assert "false_discovery_rate" not in est  # a paper metric, not the scripts'
    single = code.table.filter(pl.col("track") == "singleGeneral")
    lev = single.filter(pl.col("metric") == "tool_chain_levenshtein")["estimate"][0]
    assert lev == 5.0  # 8-step GT, 3 called categories in GT order: 5 deletions
    # the paper convention splits by chain and adds the paper's definitions
    paper = rscore.score(st, options=opts)
    pt = paper.table.filter(pl.col("track") == "multiGeneral")
    assert {"012", "013", "0123", "014", "overall"} <= set(pt["task"].to_list())
    assert "false_discovery_rate" in set(pt["metric"].to_list())
    # re-importing the same folders changes nothing
    again = import_logs("radabench", root, store, cases=cases)
    assert again.n_new == 0 and again.n_unchanged == 5


def test_bad_folders_are_skipped_and_reported(tmp_path: Path) -> None:
    root, _ = write_results(tmp_path / "results")
    multi = root / "GPT4" / "multiGeneral"
    save(multi, 2, "0999", "Case 2, Question 0, 0999: q\n")  # a chain the scripts do not know
    (multi / "logouts" / "3").mkdir()
    (multi / "logouts" / "3" / "012.txt").write_text("Case 3, Question 0, 012: q\n")  # no info
    rep = import_logs("radabench", root, tmp_path / "store")
    skipped = dict(rep.skipped)
    assert "unknown chain '0999'" in skipped[str(multi / "logouts" / "2" / "0999.txt")]
    assert "info/3/012.json" in skipped[str(multi / "logouts" / "3" / "012.txt")]
    assert rep.n_items == 5
    with pytest.raises(ValueError, match="only the radabench format"):
        import_logs("jsonl", root, tmp_path / "s2", cases=root / "x.json")


def test_hostile_info_and_cases_files_are_named_at_the_json_boundary(tmp_path: Path) -> None:
    """Info and cases files go through load_json: a deep, surrogate or huge value names the file.

    Before, ``json.loads`` let these through: the deep file raised a RecursionError and the lone
    surrogate a UnicodeEncodeError at write time, neither naming the info file at fault.
    """
    root, cases = write_results(tmp_path / "results")
    multi = root / "GPT4" / "multiGeneral"
    deep = multi / "info" / "0" / "012.json"
    deep.write_text('{"TOOLINFO": ' + "[" * 5000 + "]" * 5000 + "}")
    surrogate = multi / "info" / "0" / "013.json"
    surrogate.write_text('{"TOOLINFO": {"TOOL1": {"Category": "\\ud800"}}}')
    rep = import_logs("radabench", root, tmp_path / "store")
    skipped = dict(rep.skipped)
    assert skipped[str(multi / "logouts" / "0" / "012.txt")] == (
        f"{deep}: JSON nested deeper than 100 levels"
    )
    reason = skipped[str(multi / "logouts" / "0" / "013.txt")]
    assert reason.startswith(f"{surrogate}: $.TOOLINFO.TOOL1.Category:") and "surrogate" in reason
    assert rep.n_items == 3 and len(rep.failed) == 2
    doc = json.loads(cases.read_text())
    doc["case-b"]["QA"]["014"]["A"] = 10**30
    cases.write_text(json.dumps(doc))
    rep = import_logs("radabench", root, tmp_path / "store2", cases=cases)
    reason = dict(rep.skipped)[str(multi / "logouts" / "1" / "014.txt")]
    assert reason.startswith(f"cases file {cases}: $") and "64-bit range" in reason


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.run([sys.executable, "-m", "tumorboard.cli", *args], capture_output=True,
                          text=True, env=env, timeout=300)  # fmt: skip


def test_cli_import_and_score_with_convention(tmp_path: Path) -> None:
    root, cases = write_results(tmp_path / "results")
    store = tmp_path / "store"
    out = run_cli("import", "radabench", str(root), "--store", str(store), "--cases", str(cases))
    assert out.returncode == 0, out.stderr
    assert "5 imported" in out.stdout and "tumorboard: warning:" in out.stderr
    args = ["--benchmark", "radabench", "--convention", "code", "--n-resamples", "100"]
    out = run_cli("score", str(store), *args, "--track", "multiGeneral", "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["convention"].startswith("code")
    rows = {r["metric"]: r for r in doc["rows"]}
    assert rows["execution_completion_rate"]["estimate"] == pytest.approx(0.75)
    assert rows["optimal_tool_score_code"]["estimate"] == pytest.approx((1 + 2 / 3 + 0.2) / 4)
    md = run_cli("score", str(store), *args, "--style", "paper")
    assert md.returncode == 0 and "Convention: code" in md.stdout
    bad = run_cli("score", str(store), "--benchmark", "radabench", "--convention", "tumorboard")
    assert bad.returncode == 2
    assert "convention: expected one of 'paper', 'code'" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_deny_level1_runs_give_the_unsolvability_rates(tmp_path: Path) -> None:
    # multihop_deny1.py: over all logs of the pipeline, deny rate = share with "Deny Call Dict:",
    # category match = deny and the first 'Category' value contains deny_map[chain].
    # 0/012 denies naming Anatomy Classifier (the missing one): aware and grounded; 0/013 denies
    # naming Organ Segmentor (013 misses the Modality Classifier): aware, not grounded; 1/012
    # calls tools without denying: neither. Awareness 2/3, grounding 1/3.
    deny = tmp_path / "GPT4" / "multiDenyl1"

    def denied(category: str) -> str:
        return str({"Purpose": "p", "Category": category, "Anatomy": "chest", "Modality": "CT",
                    "Ability": "InsufficientCapability"})  # fmt: skip

    for i, chain, category in ((0, "012", AC), (0, "013", OS)):
        log = pipeline_log(i, 0, chain, [PLAN[AC]], [], conclusion="No tool can do this.")
        deny_line = f"\nDeny Call Dict: {denied(category)}"
        save(deny, i, chain, log.replace("Final combination", deny_line + "Final combination"))
    save(deny, 1, "012", pipeline_log(1, 0, "012", [PLAN[AC]], [call_dict("TOOL1")],
                                      conclusion="Chest."))  # fmt: skip
    store = tmp_path / "store"
    import_logs("radabench", tmp_path / "GPT4", store)
    t = rscore.score(Store(store, create=False), options=BootstrapOptions(n_resamples=50),
                     convention="code").table  # fmt: skip
    est = {r["metric"]: (r["estimate"], r["n"]) for r in t.iter_rows(named=True)}
    assert est["unsolvability_awareness_rate"] == (pytest.approx(2 / 3), 3)
    assert est["unsolvability_grounding_rate"] == (pytest.approx(1 / 3), 3)


def test_the_llama_deny_folder_misspelled_multiIDenyl1_is_the_deny_track(tmp_path: Path) -> None:
    # EvalPipeline_multihop_denyl1.py line 84 (RadABench@acbcf87) saves the LLAMA runs under
    # "LLAMA/multiIDenyl1" (the other models under "multiDenyl1"): the same track, with the
    # missing category of each chain and the deny1 rates.
    deny = tmp_path / "LLAMA" / "multiIDenyl1"
    denied = str({"Purpose": "p", "Category": AC, "Anatomy": "chest", "Modality": "CT",
                  "Ability": "InsufficientCapability"})  # fmt: skip
    log = pipeline_log(0, 0, "012", [PLAN[AC]], [], conclusion="No tool can do this.")
    save(deny, 0, "012", log.replace("Final combination",
                                     f"\nDeny Call Dict: {denied}Final combination"))  # fmt: skip
    save(deny, 1, "013", pipeline_log(1, 0, "013", [PLAN[AC]], [call_dict("TOOL1")],
                                      conclusion="Chest."))  # fmt: skip
    store = tmp_path / "store"
    import_logs("radabench", tmp_path, store)
    items = Store(store, create=False).items().collect().sort("patient_id")
    runs = Store(store, create=False).runs().collect()
    assert runs["track"].to_list() == ["multiDenyl1"] and runs["model"].to_list() == ["LLAMA"]
    extras = [json.loads(e) for e in items["extra"]]
    assert [e["missing_category"] for e in extras] == [AC, MC]
    t = rscore.score(Store(store, create=False), options=BootstrapOptions(n_resamples=20),
                     convention="code").table  # fmt: skip
    est = {r["metric"]: (r["track"], r["estimate"], r["n"]) for r in t.iter_rows(named=True)}
    assert est["unsolvability_awareness_rate"] == ("multiDenyl1", pytest.approx(1 / 2), 2)
    assert est["unsolvability_grounding_rate"] == ("multiDenyl1", pytest.approx(1 / 2), 2)
    assert radabench_importer.pipeline_name("multiIDenyl2") == "multiDenyl2"
    assert radabench_importer.pipeline_name("GPT4") is None


def test_a_rerun_appended_to_a_log_is_read_as_one_run(tmp_path: Path) -> None:
    # log_to_file opens the log with mode 'a': a second pipeline run over the same folder
    # appends to it. The scripts read the file as one run: the calls of both runs, the error of
    # the first, the first conclusion; so does the import, with a flag and a warning.
    base = tmp_path / "GPT4" / "multiGeneral"
    save(base, 0, "012", pipeline_log(0, 0, "012", [PLAN[AC]], [call_dict("TOOL1")],
                                      error=("ValueError", "bad input")))  # fmt: skip
    save(base, 0, "012", pipeline_log(0, 0, "012", [PLAN[AC]], [call_dict("TOOL2")],
                                      conclusion="Second try."))  # fmt: skip
    rep = import_logs("radabench", tmp_path, tmp_path / "store")
    assert any("2 runs appended" in r for _, r in rep.warnings)
    items = Store(tmp_path / "store", create=False).items().collect()
    extra = json.loads(items["extra"][0])
    assert extra["called_tool_ids"] == ["TOOL1", "TOOL2"] and extra["completed"] is False
    assert items["response"][0] == "Second try."
    assert "runs_appended" in items["flags"][0]


def test_linear_extractors_match_the_scripts_patterns() -> None:
    """The linear-time extractors return what the scripts' regular expressions return.

    The patterns are those of MAGIC-AI4Med/RadABench@acbcf87 ``EvalPlat/EvalMetrics``; on short
    random strings (where backtracking costs nothing) old and new must agree exactly.
    """
    import random
    import re

    call = re.compile(r"Call Dict: ({[^}]+})")
    plan = re.compile(r"Tool Chain: \[(.*?)\]")
    decomposition = re.compile(r"<Decomposition>(.*?)</Decomposition>", re.DOTALL)
    tool = re.compile(r"<Tool>\s*(.*?)\s*</Tool>")
    pieces = [*" \n\t{}[]x*a\x0b\u2003", "Call Dict: {", "Call Dict: ", "Tool Chain: ["]
    pieces += ["<Decomposition>", "</Decomposition>", "<Tool>", "</Tool>", "'Tool': 'TOOL3'"]
    rng = random.Random(15)
    for _ in range(20_000):
        t = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 16)))
        assert radabench_importer._call_dicts(t) == call.findall(t), t
        m = plan.search(t)
        assert radabench_importer._plan_text(t) == (m and m.group(1)), t
        m = decomposition.search(t)
        assert radabench_importer._decomposition(t) == (m and m.group(1)), t
        tools = [x.strip() for x in tool.findall(t)]
        assert radabench_importer._decomposition_tools(t) == tools, t
