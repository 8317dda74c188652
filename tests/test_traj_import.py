"""Tests of the log importers (python/tumorboard/traj/importers/).

Covered: MTBBench chat logs generated here with every quirk real logs have, JSON lines with a
field mapping, ReAct traces; idempotent re-imports; the import report. Expected values are
worked out by hand from the MTBBench log format (``<model>/<patient>_chatlog_<unix_ts>.json``,
a trailing ``{"conversation": [...]}``) and the task rules of the two tracks.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import polars as pl
import pytest
from tumorboard.traj import Store, import_logs

OPTS3 = "A) opt a\nB) opt b\nC) opt c"


def multimodal_questions() -> list[str]:
    """15 HANCOCK-style questions, the same texts for every patient."""
    qs = [f"Pathology question {k} about the H&E slides?\n{OPTS3}" for k in range(9)]
    qs += [f"Blood question {k} about hemoglobin?\n{OPTS3}" for k in range(9, 13)]
    qs += [
        "Based on all the available patient information, do you think the patient will be "
        "alive in 5 years?\nA) Yes\nB) No",
        "Do you think the patient's cancer will have a recurrence in 2 years?\nA) Yes\nB) No",
    ]
    return qs


def gold_of(pos: int) -> str:
    return "A) Yes" if pos >= 13 else "ABC"[pos % 3] + ") opt " + "abc"[pos % 3]


def record(pos: int, question: str, *, right: bool, **extra) -> dict:
    gold = gold_of(pos)
    wrong = "B) No" if pos >= 13 else ("B) opt b" if gold[0] != "B" else "C) opt c")
    rec = {
        "question": question,
        "answer": gold,
        "response": gold if right else wrong,
        "correct": right,
        "files_accessed": ["PrimaryTumor_HE_104.jpg"] if pos < 9 else [],
        "files_hallucinated": [],
        "question_time": 10.0 + pos,
    }
    rec.update(extra)
    return rec


def conversation(
    questions: list[str], responses: list[str], *, reprompt_first: bool = True, tools: bool = False
) -> dict:
    conv = [{"role": "system", "content": "You are a pathologist AI assistant ..."}]
    for k, (q, r) in enumerate(zip(questions, responses, strict=True)):
        intro = (
            (
                "You are given the following new patient information: \nA 55-year-old man.\n"
                "New files available:\n [FILE: PrimaryTumor_HE_104.jpg]\n"
                "[FILE: LymphNode_HE_104.jpg]"
            )
            if k == 0
            else ""
        )
        conv.append(
            {
                "role": "user",
                "content": f"{intro}\n Question: {q}\n Remember that you "
                "can ask for files [REQUEST: filename.extension]",
            }
        )
        if k == 0:
            conv.append(
                {
                    "role": "assistant",
                    "content": "Let me look. [REQUEST: PrimaryTumor_HE_104.jpg] "
                    "[REQUEST: Ghost_HE.jpg]",
                }
            )
            conv.append(
                {
                    "role": "user",
                    "content": "[FILE: PrimaryTumor_HE_104.jpg] included\n"
                    "[FILE: Ghost_HE.jpg] not found.",
                }
            )
            if tools:
                conv.append(
                    {
                        "role": "assistant",
                        "content": "[CONCH: PrimaryTumor_HE_104.jpg, "
                        "(opt a), (opt b (keratinizing))]",
                    }
                )
                conv.append(
                    {
                        "role": "user",
                        "content": "The image resembles opt a with high "
                        "probability.You can use this information",
                    }
                )
                conv.append(
                    {
                        "role": "user",
                        "content": "[IHCTool: According to IHC tool around "
                        "16.2% of the cells in TMA_1.png are positively stained.]\n[IHCTool: "
                        "You can use this information, but it is not perfect.]",
                    }
                )
            if reprompt_first:
                conv.append({"role": "assistant", "content": "I think it is the second one."})
                conv.append(
                    {
                        "role": "user",
                        "content": "Please provide the final answer in "
                        "[ANSWER: LETTER) answer] ...",
                    }
                )
        conv.append({"role": "assistant", "content": f"Reasoning.\n[ANSWER: {r}]"})
    return {"conversation": conv}


def write(path: Path, doc) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=2))
    return path


@pytest.fixture
def logs(tmp_path) -> Path:
    """Write a folder of MTBBench logs with every quirk (see the assertions for what each tests)."""
    root = tmp_path / "agent_logs"
    qs = multimodal_questions()
    # gpt4o, patient 104: clean, with an aligned conversation (one re-prompt on question 0)
    recs = [record(p, q, right=p % 3 != 0) for p, q in enumerate(qs)]
    write(
        root / "gpt4o" / "104_chatlog_1700000000.json",
        recs + [conversation(qs, [r["response"] for r in recs])],
    )
    # an older log of the same patient and model: superseded by the newer one
    write(
        root / "gpt4o" / "104_chatlog_1600000000.json",
        [record(p, q, right=True) for p, q in enumerate(qs)],
    )
    # gpt4o, patient "ab_12-x": the record-level quirks
    quirky = [record(p, q, right=True) for p, q in enumerate(qs)]
    del quirky[0]["correct"]  # graded: response "A) opt a" vs gold A -> True
    quirky[1].pop("correct")
    quirky[1]["response"] = "The answer is B"  # graded by first letter: 'T' vs 'B' -> False
    quirky[2]["files_accessed"] = ["x.png", "x.png", "y.png"]
    quirky[2]["files_hallucinated"] = ["ghost.png", "ghost.png"]
    quirky[3]["question"] = "Is there significant infiltration of CD8+ T cells?"  # no options
    quirky[4]["answer"] = "E) something else"  # gold letter not among A-C
    quirky[4]["correct"] = False
    del quirky[5]["correct"], quirky[5]["response"]  # nothing to grade
    quirky[6]["correct"] = "true"  # a string: coerced
    quirky[7]["response"] = "Answer: B) opt b"  # not a clean letter for MTBBench
    write(root / "gpt4o" / "ab_12-x_chatlog_1700000100.json", quirky)
    # gpt4o with tools, patient 104 (and an identical copy under another name)
    trecs = [record(p, q, right=p < 10) for p, q in enumerate(qs)]
    first = write(
        root / "gpt4o-with-tools" / "104_chatlog_1700000200.json",
        trecs
        + [conversation(qs, [r["response"] for r in trecs], reprompt_first=False, tools=True)],
    )
    shutil.copy(first, root / "gpt4o-with-tools" / "104_chatlog_1700000300.json")
    # a folder name that differs from the display name (model map), conversation that does
    # not line up with the records (one question prompt missing)
    lrecs = [record(p, q, right=p % 2 == 0) for p, q in enumerate(qs)]
    conv = conversation(qs[:14], [r["response"] for r in lrecs[:14]], reprompt_first=False)
    write(root / "llama3-70b" / "200_chatlog_1700000400.json", lrecs + [conv])
    # longitudinal (MSK-CHORD): wording decides the task
    lq = [
        "Given that the patient is 61.7 years old, will the cancer have a recurrence in the "
        "next 24 months?\nA) Yes\nB) No",
        "Given that the patient is 63 years old, will the patient be still alive in the next 12 "
        "months?\nA) Yes\nB) No",
        "Will the cancer progress in the next 6 months?\nA) Yes\nB) No",
    ]
    write(
        root / "msk" / "gpt4o" / "P-0004727_chatlog_1746517802.json",
        [
            {
                "question": q,
                "answer": "A) Yes",
                "response": "A) Yes",
                "correct": True,
                "files_accessed": ["timeline0.txt"],
                "files_hallucinated": [],
                "question_time": 185.3,
            }
            for q in lq
        ],
    )
    # malformed files
    write(root / "gpt4o" / "bad1_chatlog_1700000500.json", "[{not json")
    write(root / "gpt4o" / "bad2_chatlog_1700000600.json", {"question": "not a list"})
    write(root / "gpt4o" / "bad3_chatlog_1700000700.json", [{"question": "Q?", "response": "A"}])
    write(root / "gpt4o" / "summary.json", {"accuracy": 0.5})
    write(tmp_path / "model_map.json", {"llama3-70b": "Llama-3 70B"})
    return root


def _import(logs: Path, store: Path, **kw):
    return import_logs("mtbbench", logs, store, model_map=logs.parent / "model_map.json", **kw)


def test_mtbbench_import_handles_every_quirk(logs, tmp_path):
    report = _import(logs, tmp_path / "store")
    names = lambda paths: sorted(Path(p).name for p in paths)  # noqa: E731
    assert names(report.imported) == [
        "104_chatlog_1700000000.json",
        "104_chatlog_1700000200.json",
        "200_chatlog_1700000400.json",
        "P-0004727_chatlog_1746517802.json",
        "ab_12-x_chatlog_1700000100.json",
    ]
    assert names(report.unchanged) == ["104_chatlog_1700000300.json"]  # a byte-identical copy
    skipped = {Path(f).name: reason for f, reason in report.skipped}
    assert set(skipped) == {
        "104_chatlog_1600000000.json",
        "bad1_chatlog_1700000500.json",
        "bad2_chatlog_1700000600.json",
        "bad3_chatlog_1700000700.json",
        "summary.json",
    }
    assert (
        "superseded by the newer log 104_chatlog_1700000000.json"
        in skipped["104_chatlog_1600000000.json"]
    )
    assert skipped["bad1_chatlog_1700000500.json"].startswith("not valid JSON")
    assert "expected a JSON list" in skipped["bad2_chatlog_1700000600.json"]
    assert (
        skipped["bad3_chatlog_1700000700.json"] == "record 0: 'answer' is missing or not a string"
    )
    assert "not an MTBBench chat log" in skipped["summary.json"]
    assert report.n_items == 15 * 4 + 3 and "5 imported" in str(report)

    store = Store(tmp_path / "store")
    items = store.items(with_runs=True).collect()
    assert items.height == 63
    assert items.select("run_id", "patient_id", "item_id").n_unique() == 63
    runs = store.runs().sort("run_id").collect()
    assert runs.select("run_id", "track", "model", "tools").rows() == [
        ("mtbbench:longitudinal:gpt4o:no-tools", "longitudinal", "gpt4o", False),
        ("mtbbench:multimodal:Llama-3 70B:no-tools", "multimodal", "Llama-3 70B", False),
        ("mtbbench:multimodal:gpt4o:no-tools", "multimodal", "gpt4o", False),
        ("mtbbench:multimodal:gpt4o:tools", "multimodal", "gpt4o", True),
    ]
    assert runs.filter(pl.col("tools")).item(0, "created_at").timestamp() == 1700000200

    # tasks: multimodal by position, longitudinal by wording
    p104 = items.filter((pl.col("patient_id") == "104") & ~pl.col("tools")).sort("position")
    assert p104.get_column("task").to_list() == (
        ["digital_pathology"] * 9 + ["hematology"] * 4 + ["outcome_recurrence"] * 2
    )
    assert p104.get_column("correct").to_list() == [p % 3 != 0 for p in range(15)]
    assert p104.get_column("correct_source").unique().to_list() == ["log"]
    assert p104.get_column("options").to_list()[0] == ["A) opt a", "B) opt b", "C) opt c"]
    assert p104.get_column("gold").to_list()[:3] == ["A", "B", "C"]
    assert p104.get_column("latency_s").to_list()[:2] == [10.0, 11.0]
    assert p104.get_column("attempts").to_list() == [2] + [1] * 14  # one re-prompt on q0
    assert p104.get_column("flags").to_list() == [[]] * 15
    msk = items.filter(pl.col("track") == "longitudinal").sort("position")
    assert msk.get_column("task").to_list() == ["recurrence", "outcome", "progression"]
    assert msk.get_column("patient_id").unique().to_list() == ["P-0004727"]

    # the quirky file, question by question
    q = {r["position"]: r for r in items.filter(pl.col("patient_id") == "ab_12-x").to_dicts()}
    assert (q[0]["correct"], q[0]["correct_source"], q[0]["parsed_answer"]) == (True, "graded", "A")
    assert (q[1]["correct"], q[1]["correct_source"], q[1]["parsed_answer"]) == (
        False,
        "graded",
        "B",
    )
    assert "response_unclean" in q[1]["flags"]
    assert q[2]["files_accessed"] == ["x.png", "y.png"] and q[2]["n_files"] == 2
    assert q[2]["files_hallucinated"] == ["ghost.png"]
    assert {"duplicate_files_accessed", "duplicate_files_hallucinated"} <= set(q[2]["flags"])
    assert q[3]["options"] == [] and "no_options" in q[3]["flags"] and q[3]["gold"] == "A"
    assert q[4]["gold"] == "E" and "gold_not_in_options" in q[4]["flags"]
    assert (q[5]["correct"], q[5]["correct_source"]) == (None, "missing")
    assert "response_missing" in q[5]["flags"]
    assert q[6]["correct"] is True and "correct_coerced" in q[6]["flags"]
    assert q[7]["parsed_answer"] == "B" and "response_unclean" in q[7]["flags"]
    # the same question text for many patients: keyed by position, never merged
    same = items.filter(pl.col("question") == multimodal_questions()[0])
    assert same.height == 4

    # events: the conversation split into questions
    ev = store.events().filter(pl.col("run_id") == "mtbbench:multimodal:gpt4o:no-tools").collect()
    assert ev.filter(pl.col("item_id").is_null()).get_column("role").to_list() == ["system"]
    q0 = ev.filter(pl.col("item_id") == "q0").sort("step")
    assert q0.get_column("kind").to_list() == [
        "message",
        "message",
        "file_access",
        "message",
        "message",
        "reprompt",
        "message",
        "answer",
    ]
    access = q0.filter(pl.col("kind") == "file_access").row(0, named=True)
    assert json.loads(access["output"]) == {
        "accessed": ["PrimaryTumor_HE_104.jpg"],
        "hallucinated": ["Ghost_HE.jpg"],
    }
    assert access["ok"] is False
    tools_ev = store.events().filter(pl.col("kind") == "tool_call").collect()
    conch = tools_ev.filter(pl.col("tool") == "conch").row(0, named=True)
    assert json.loads(conch["input"]) == {
        "image": "PrimaryTumor_HE_104.jpg",
        "options": ["opt a", "opt b (keratinizing)"],
    }
    assert conch["output"].startswith("The image resembles opt a") and conch["ok"] is True
    ihc = tools_ev.filter(pl.col("tool") == "ihc")
    assert ihc.height == 1 and json.loads(ihc.item(0, "input")) == {"image": "TMA_1.png"}
    # an unaligned conversation is kept without item ids, and flagged
    llama = items.filter(pl.col("model") == "Llama-3 70B")
    assert all("conversation_unaligned" in f for f in llama.get_column("flags").to_list())
    assert llama.get_column("attempts").null_count() == 15
    lev = store.events().filter(pl.col("run_id").str.contains("Llama")).collect()
    assert lev.height > 0 and lev.get_column("item_id").null_count() == lev.height


def test_reimport_is_a_no_op_and_new_files_are_added(logs, tmp_path):
    store_path = tmp_path / "store"
    _import(logs, store_path)
    before = Store(store_path).items().collect()
    again = _import(logs, store_path)
    assert again.imported == () and again.n_items == 0 and again.batch is None
    assert len(again.unchanged) == 6  # the 5 imported files and the copy
    assert again.n_unchanged == 63 and again.n_new == again.n_replaced == 0
    # the older log of patient 104 is still superseded by the newer one
    assert any("superseded by the newer log" in r for _, r in again.skipped)
    assert Store(store_path).items().collect().equals(before)
    qs = multimodal_questions()
    write(
        logs / "gpt4o" / "305_chatlog_1700000900.json",
        [record(p, q, right=True) for p, q in enumerate(qs)],
    )
    third = _import(logs, store_path)
    assert [Path(p).name for p in third.imported] == ["305_chatlog_1700000900.json"]
    assert Store(store_path).count("items") == 63 + 15
    assert Store(store_path).runs().collect().height == 4  # no duplicate run rows


def test_track_override_and_model_option(logs, tmp_path):
    src = logs / "msk" / "gpt4o" / "P-0004727_chatlog_1746517802.json"
    report = import_logs(
        "mtbbench", src, tmp_path / "s", track="multimodal", model="GPT-4o", run_name="rerun"
    )
    assert report.runs == ("mtbbench:multimodal:GPT-4o:no-tools:rerun",)
    items = Store(tmp_path / "s").items().sort("position").collect()
    assert items.get_column("task").to_list() == ["digital_pathology"] * 3
    assert all("unexpected_question_count" in f for f in items.get_column("flags").to_list())
    with pytest.raises(ValueError, match="track: expected one of"):
        import_logs("mtbbench", src, tmp_path / "t", track="radiology")
    with pytest.raises(ValueError, match="format: expected one of"):
        import_logs("csv", src, tmp_path / "t")
    with pytest.raises(FileNotFoundError):
        import_logs("mtbbench", tmp_path / "nope", tmp_path / "t")


def test_model_map_text_file(logs, tmp_path):
    mapping = tmp_path / "map.csv"
    mapping.write_text("folder,model\n# comment\nllama3-70b, Llama 3 (70B)\n")
    report = import_logs("mtbbench", logs / "llama3-70b", tmp_path / "s", model_map=mapping)
    assert report.runs == ("mtbbench:multimodal:Llama 3 (70B):no-tools",)


def test_item_fields_are_the_items_schema_columns():
    # ITEM_FIELDS comes from the items schema: every name is an items column, in its order, and
    # the columns it leaves out are the run fields and those the importer computes
    from tumorboard.traj.importers.jsonl import COMPUTED_ITEM_COLUMNS, ITEM_FIELDS, RUN_FIELDS
    from tumorboard.traj.schema import schema_of

    columns = schema_of("items").names
    assert ITEM_FIELDS and set(ITEM_FIELDS) <= set(columns)
    assert list(ITEM_FIELDS) == [c for c in columns if c in ITEM_FIELDS]
    assert set(COMPUTED_ITEM_COLUMNS) <= set(columns)
    left_out = set(columns) - set(ITEM_FIELDS)
    assert left_out == set(COMPUTED_ITEM_COLUMNS) | (set(RUN_FIELDS) & set(columns))
    assert {"item_id", "gold", "response", "correct"} <= set(ITEM_FIELDS)


def test_jsonl_import_with_field_map(tmp_path):
    lines = [
        {
            "meta": {"model": "m1"},
            "patient_id": 5,
            "task": "t1",
            "question": "Q?\nA) x\nB) y",
            "expected": "B) y",
            "response": "I pick [ANSWER: B]",
            "events": [
                {
                    "kind": "tool_call",
                    "tool": "search",
                    "input": {"q": 1},
                    "output": "res",
                    "ok": True,
                }
            ],
        },
        {"meta": {"model": "m1"}, "item_id": "i2", "task": "t1", "correct": False, "expected": "A"},
        "not json",
        {"meta": {"model": "m1"}, "latency_s": "slow"},
        [],
        {"task": "t2"},
        {"meta": {"model": "m1"}, "item_id": "i7", "task": "t2", "response": "A"},
    ]
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    write(tmp_path / "logs" / "run1.jsonl", text + "\n")
    write(tmp_path / "logs" / "bad.jsonl", "nope\n")
    report = import_logs(
        "jsonl",
        tmp_path / "logs",
        tmp_path / "s",
        benchmark="custom",
        field_map={"model": "meta.model", "gold": "expected"},
    )
    # bad lines are rejected records (file:line), not warnings; the file's good lines import
    warn = {w.rsplit(":", 1)[1]: r for w, r in report.rejected if "run1.jsonl:" in w}
    assert set(warn) == {"3", "4", "5", "6"}
    assert not [w for w, _ in report.warnings if "run1.jsonl:" in w]
    assert report.failed == (str(tmp_path / "logs" / "bad.jsonl"),) and not report.ok
    # file-level, over the 3 records kept: line 7 has no gold (mapped to 'expected') and so no
    # grade, line 2 no response
    summary = [r.split(";")[0] for w, r in report.warnings if w.endswith("run1.jsonl")]
    assert summary == [
        "1 of 3 lines have no value for 'expected' (--map gold=expected)",
        "1 of 3 lines have no value for 'response'",
        "1 of 3 lines have no grade (no 'correct', and no 'expected' with a 'response' whose "
        "answer can be read)",
    ]
    assert (
        "keys seen: meta, meta.model, patient_id, task, question, expected"
        in (report.warnings[-1][1])
    )
    assert warn["4"] == "'latency_s': expected a number, got \"slow\""
    assert warn["5"] == "expected a JSON object" and warn["6"].startswith("no model")
    assert [Path(f).name for f, _ in report.skipped] == ["bad.jsonl"]
    store = Store(tmp_path / "s")
    items = store.items(with_runs=True).sort("source").collect()
    ids = items.get_column("item_id").to_list()
    assert ids[1:] == ["i2", "i7"] and re.fullmatch(r"q[0-9a-f]{16}", ids[0])
    first = items.row(0, named=True)
    assert (first["patient_id"], first["gold"], first["gold_text"]) == ("5", "B", "B) y")
    assert first["options"] == ["A) x", "B) y"] and first["parsed_answer"] == "B"
    assert (first["correct"], first["correct_source"]) == (True, "graded")
    assert first["benchmark"] == "custom" and first["model"] == "m1"
    assert items.row(1, named=True)["correct_source"] == "log"
    last = items.row(2, named=True)
    assert (last["correct"], last["correct_source"], last["flags"]) == (
        None,
        "missing",
        ["ungraded"],
    )
    ev = store.events().collect()
    assert ev.height == 1 and json.loads(ev.item(0, "input")) == {"q": 1}
    assert ev.item(0, "item_id") == ids[0] and ev.item(0, "patient_id") == "5"
    with pytest.raises(ValueError, match="field_map: unknown field 'answer'"):
        import_logs(
            "jsonl", tmp_path / "logs" / "run1.jsonl", tmp_path / "t", field_map={"answer": "x"}
        )


REACT_TRACE = """# model: react-agent
# patient_id: 9
# gold: A
Question: Is CD8 infiltration higher at the invasion front?
A) Yes
B) No
Thought: I need the IHC numbers.
Action: ihc_positive_percentage
Action Input: {"image": "front.png"}
Observation: Error: timeout
Thought: retry with the other slide
Action: Lookup[center CD8]
Observation: 11.6% positive
Thought: the front is higher
Action: Finish[A) Yes]
"""


def test_react_import(tmp_path):
    write(tmp_path / "traces" / "agent" / "case9.txt", REACT_TRACE)
    write(tmp_path / "traces" / "agent" / "empty.txt", "no markers at all")
    report = import_logs("react", tmp_path / "traces", tmp_path / "s")
    assert [Path(f).name for f, _ in report.skipped] == ["empty.txt"]
    store = Store(tmp_path / "s")
    item = store.items(with_runs=True).collect().row(0, named=True)
    assert (item["model"], item["patient_id"], item["item_id"]) == ("react-agent", "9", "case9")
    assert item["options"] == ["A) Yes", "B) No"] and item["response"] == "A) Yes"
    assert (item["parsed_answer"], item["correct"], item["correct_source"]) == ("A", True, "graded")
    ev = store.events().sort("step").collect()
    assert ev.get_column("kind").to_list() == [
        "thought",
        "action",
        "observation",
        "thought",
        "action",
        "observation",
        "thought",
        "action",
    ]
    failed = ev.row(2, named=True)
    assert (failed["ok"], failed["error"], failed["tool"]) == (
        False,
        "Error: timeout",
        "ihc_positive_percentage",
    )
    assert json.loads(ev.item(1, "input")) == {"image": "front.png"}
    assert json.loads(ev.item(4, "input")) == "center CD8"  # plain text stored as a JSON string
