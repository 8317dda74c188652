"""Logs -> scores from the user's side: ``tumorboard import`` then ``tumorboard score``.

Covered (issue 13, items 6-10): every benchmark scores from a store (JSON lines imported with
``--benchmark X``, scored by the CLI and by the API on a Store, values worked out by hand from
the records below); re-imports are idempotent by item (an appended line adds one item, a fixed
line replaces its earlier version, also for MTBBench logs and ReAct traces); a mapping that
leaves the response empty warns with counts and the keys seen, ``--strict`` fails, and the
report counts ungraded items; the paper-style table; the CLI's JSON is ``Report.to_json()``;
import progress; the bulk JSON-lines reader gives the same rows as the line reader.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from tumorboard import score as sc
from tumorboard._progress import CountProgress
from tumorboard.stats import BootstrapOptions
from tumorboard.traj import Store, import_logs
from tumorboard.traj.importers import jsonl as jsonl_importer

OPTS = BootstrapOptions(n_resamples=200, seed=0)
QUESTION = "Which histologic type is shown?\nA) Adenocarcinoma\nB) Squamous cell carcinoma"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m tumorboard.cli ARGS`` in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "tumorboard.cli", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=300,
    )


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def rows_of(text: str, metric: str) -> dict[str, dict]:
    """Return the rows of one metric of a ``score --format json`` output, by task."""
    doc = json.loads(text)
    return {r["task"]: r for r in doc["rows"] if r["metric"] == metric}


# ------------------------------------------------------------------- item 6: every benchmark


def mtbbench_records() -> list[dict]:
    # pathology: 3 of 4 right; hematology: 1 of 2 right
    right = {"p0": True, "p1": True, "p2": False, "p3": True, "h0": False, "h1": True}
    out = []
    for k, (item, ok) in enumerate(right.items()):
        out.append(
            {
                "model": "gpt-4o",
                "patient_id": f"P{k % 3}",
                "item_id": item,
                "task": "digital_pathology" if item[0] == "p" else "hematology",
                "question": QUESTION,
                "gold": "B) Squamous cell carcinoma",
                "response": "[ANSWER: B) Squamous]" if ok else "[ANSWER: A) Adeno]",
            }
        )
    return out


def radabench_records() -> list[dict]:
    gt = ["Anatomy Classifier", "Modality Classifier", "Organ Segmentor"]
    called = [gt, [gt[0], gt[2]], [*gt, "Lesion Segmentor"], []]
    out = []
    for k, chain in enumerate(called):
        rec = {
            "model": "rada-agent",
            "item_id": f"case{k}",
            "task": "multi-hop",
            "gt_tools": gt,
            "completed": k < 2,
            "response": "a hypodense liver lesion",
            "gold": "a hypodense liver lesion in segment 4",
        }
        if k % 2:  # the chain from the trace's tool calls ...
            rec["events"] = [
                {"kind": "tool_call", "role": "tool", "tool": t, "ok": True} for t in chain
            ]
        else:  # ... or logged as a field
            rec["called_tools"] = chain
        out.append(rec)
    return out


def lammi_records() -> list[dict]:
    calls = [[True], [True, False], [], [False]]
    responses = ["B", "A", "B", "I am not sure"]
    return [
        {
            "model": "path-agent",
            "item_id": f"s{k}",
            "task": "he_subtyping",
            "question": QUESTION,
            "gold": "B",
            "response": responses[k],
            "events": [
                {
                    "kind": "tool_call",
                    "role": "tool",
                    "tool": "conch",
                    "input": {"img": f"{k}.png"},
                    "ok": ok,
                }
                for ok in calls[k]
            ],  # fmt: skip
        }
        for k in range(4)
    ]


def medinsight_records() -> list[dict]:
    gt = ["mortality rises with age", "women live longer"]
    return [
        {"model": "analyst", "item_id": "c0", "gt_insights": gt,
         "insights": ["mortality rises with age"]},
        {"model": "analyst", "item_id": "c1", "gt_insights": gt,
         "response": "- women live longer\n- smoking rates fell"},
    ]  # fmt: skip


def medbench_records() -> list[dict]:
    out = [
        {"model": "med-llm", "item_id": f"m{k}", "task": "mcq", "dimension": "knowledge",
         "metric": "accuracy", "correct": ok}
        for k, ok in enumerate([True, True, False, True])
    ]  # fmt: skip
    out += [
        {"model": "med-llm", "item_id": f"r{k}", "task": "report", "dimension": "generation",
         "metric": "one_minus_ned", "response": "abc", "gold": ref}
        for k, ref in enumerate(["abd", "abc"])
    ]  # fmt: skip
    return out


# benchmark -> (records, metric, {task: estimate})
CASES = {
    "mtbbench": (
        mtbbench_records,
        "accuracy",
        {"digital_pathology": 0.75, "hematology": 0.5, "overall": 0.625},
    ),
    "radabench": (
        radabench_records,
        "tool_chain_levenshtein",
        {"multi-hop": (0 + 1 + 1 + 3) / 4},
    ),
    "lammi": (
        lammi_records,
        "trajectory_success_score",
        # paper reading TSS = (valid + s/t) / 2, s/t = 0 without calls
        {"he_subtyping": (1 + (1 + 0.5) / 2 + (1 + 0) / 2 + 0) / 4},
    ),
    "medinsight": (
        medinsight_records,
        "insight_f1",
        # paper convention: F1 of mean recall (0.5 + 0.5) / 2 and mean precision (1 + 0.5) / 2
        {"default": 2 * 0.5 * 0.75 / (0.5 + 0.75)},
    ),
    "medbench": (
        medbench_records,
        "score",
        {"mcq": 75.0, "report": 100 * (2 / 3 + 1) / 2, "overall": (75.0 + 250 / 3) / 2},
    ),
}


@pytest.mark.parametrize("benchmark", sorted(CASES))
def test_import_jsonl_then_score_each_benchmark(benchmark, tmp_path):
    records, metric, expected = CASES[benchmark]
    log = write_jsonl(tmp_path / f"{benchmark}.jsonl", records())
    store = tmp_path / "store"
    imp = cli("import", "jsonl", str(log), "--store", str(store), "--benchmark", benchmark)
    assert imp.returncode == 0, imp.stderr
    out = cli("score", str(store), "--benchmark", benchmark, "--n-resamples", "200", "--format",
              "json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = rows_of(out.stdout, metric)
    for task, value in expected.items():
        assert rows[task]["estimate"] == pytest.approx(value, abs=1e-9), (task, rows[task])
    # the API on the Store gives the very same report
    report = sc.get(benchmark)(Store(store), options=OPTS)
    assert out.stdout == report.to_json()


def test_benchmark_specific_columns_come_from_the_store(tmp_path):
    store = tmp_path / "s"
    import_logs("jsonl", write_jsonl(tmp_path / "r.jsonl", radabench_records()), store,
                benchmark="radabench")  # fmt: skip
    import_logs("jsonl", write_jsonl(tmp_path / "l.jsonl", lammi_records()), store,
                benchmark="lammi")  # fmt: skip
    rada = sc.store_frame(store, "radabench").sort("called_tools")
    assert rada.get_column("called_tools").to_list() == [
        [],  # no tool event in a run that recorded events: no call (null = no tool record)
        ["Anatomy Classifier", "Modality Classifier", "Organ Segmentor"],
        ["Anatomy Classifier", "Modality Classifier", "Organ Segmentor", "Lesion Segmentor"],
        ["Anatomy Classifier", "Organ Segmentor"],
    ]
    assert rada.get_column("reference_answer").unique().to_list() == [
        "a hypodense liver lesion in segment 4"
    ]
    completion = sc.radabench.score(store, options=OPTS).table.filter(
        pl.col("metric") == "execution_completion_rate", pl.col("task") == "multi-hop"
    )
    assert completion.item(0, "estimate") == 0.5
    lammi = sc.store_frame(store, "lammi").sort("patient_id", "task")
    calls = {len(c or []) for c in lammi.get_column("tool_calls").to_list()}
    assert calls == {0, 1, 2}
    assert lammi.get_column("output_valid").to_list().count(False) == 1  # "I am not sure"
    mc = sc.lammi.score(store, options=OPTS).table.filter(pl.col("metric") == "mc_f1")
    assert mc.filter(pl.col("task") == "he_subtyping").item(0, "estimate") == 0.5


def test_a_store_without_the_benchmark_is_refused_and_can_be_repaired(tmp_path):
    log = write_jsonl(tmp_path / "log.jsonl", mtbbench_records())
    store = tmp_path / "store"
    assert cli("import", "jsonl", str(log), "--store", str(store)).returncode == 0
    out = cli("score", str(store), "--benchmark", "mtbbench")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith("tumorboard: error: ")
    assert "no items of benchmark 'mtbbench' (benchmarks present: jsonl)" in out.stderr
    assert "--benchmark" in out.stderr
    # importing again with --benchmark repairs it: the same records, now in an mtbbench run
    fixed = cli("import", "jsonl", str(log), "--store", str(store), "--benchmark", "mtbbench")
    assert fixed.returncode == 0, fixed.stderr
    out = cli("score", str(store), "--benchmark", "mtbbench", "--n-resamples", "200",
              "--format", "json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert rows_of(out.stdout, "accuracy")["overall"]["estimate"] == pytest.approx(0.625)


def test_recorder_items_with_benchmark_fields_score_from_the_store(tmp_path):
    from tumorboard.traj import Recorder

    store = Store(tmp_path / "s")
    gt = ["Anatomy Classifier", "Organ Segmentor"]
    with Recorder(store, benchmark="radabench", model="agent", tools=True) as rec:
        for k, chain in enumerate([gt, gt[:1]]):
            with rec.item(item_id=f"c{k}", task="two-hop", extra={"gt_tools": gt}) as it:
                for tool in chain:
                    it.tool_call(tool, input={"image": "ct.nii"}, output="ok", ok=True)
                it.answer("a liver lesion")
        with pytest.raises(TypeError, match="'gt_tools': expected a list of strings"):
            rec.item(item_id="bad", extra={"gt_tools": "Anatomy Classifier"})
        with pytest.raises(ValueError, match="radabench has no field 'dimension'"):
            rec.item(item_id="bad", extra={"dimension": "x"})
    table = sc.radabench.score(store, options=OPTS).table
    lev = table.filter(pl.col("metric") == "tool_chain_levenshtein", pl.col("task") == "two-hop")
    assert lev.item(0, "estimate") == 0.5  # (0 + 1) / 2
    done = table.filter(pl.col("metric") == "execution_completion_rate").get_column("estimate")
    assert done.to_list() == [1.0, 1.0]  # no tool call failed: every case completed


# ------------------------------------------------------------------- item 7: idempotent by item


def test_appended_and_fixed_jsonl_lines_give_no_duplicates(tmp_path):
    records = mtbbench_records()[:2]
    records[1]["events"] = [{"kind": "tool_call", "tool": "conch", "output": "adenocarcinoma"}]
    log = write_jsonl(tmp_path / "log.jsonl", records)
    store = tmp_path / "store"
    first = json.loads(cli("import", "jsonl", str(log), "--store", str(store), "--benchmark",
                           "mtbbench", "--json").stdout)  # fmt: skip
    assert (first["n_new"], first["n_replaced"], first["n_unchanged"]) == (2, 0, 0)
    write_jsonl(log, [*records, mtbbench_records()[2]])  # a line appended
    second = json.loads(cli("import", "jsonl", str(log), "--store", str(store), "--benchmark",
                            "mtbbench", "--json").stdout)  # fmt: skip
    assert (second["n_new"], second["n_replaced"], second["n_unchanged"]) == (1, 0, 2)
    assert Store(store).count("items") == 3  # not 5
    # line 2 fixed: its earlier version (and its events) are replaced
    records[1]["response"] = "[ANSWER: B) Squamous]"
    records[1]["events"][0]["output"] = "squamous cell carcinoma"
    write_jsonl(log, [*records, mtbbench_records()[2]])
    third = import_logs("jsonl", log, store, benchmark="mtbbench")
    assert (third.n_new, third.n_replaced, third.n_unchanged) == (0, 1, 2)
    items = Store(store).items().sort("item_id").collect()
    assert items.height == 3 and items.get_column("item_id").to_list() == ["p0", "p1", "p2"]
    assert items.filter(pl.col("item_id") == "p1").item(0, "correct") is True
    events = Store(store).events().collect()
    assert events.get_column("output").to_list() == ["squamous cell carcinoma"]
    # the same file once more: nothing to write
    again = import_logs("jsonl", log, store, benchmark="mtbbench")
    assert again.batch is None and again.n_unchanged == 3 and again.imported == ()
    # two lines with one key in one import: the later one wins, with a warning
    dup = write_jsonl(tmp_path / "dup.jsonl", [records[0], {**records[0], "response": "A"}])
    rep = import_logs("jsonl", dup, tmp_path / "s2", benchmark="mtbbench")
    assert rep.n_items == 1 and any("replaced by" in r for _, r in rep.warnings)
    assert Store(tmp_path / "s2").items().collect().item(0, "response") == "A"


def test_an_import_replaces_a_recorded_item_of_the_same_key(tmp_path):
    from tumorboard.traj import Recorder

    store = Store(tmp_path / "s")
    run = "mtbbench:default:gpt-4o:no-tools"  # the run id the import derives
    with Recorder(store, run_id=run, benchmark="mtbbench", model="gpt-4o") as rec:
        with rec.item(patient_id="P0", item_id="p0", question=QUESTION, gold="B") as it:
            it.answer("[ANSWER: A]")
    log = write_jsonl(tmp_path / "log.jsonl", mtbbench_records()[:1])
    rep = import_logs("jsonl", log, store, benchmark="mtbbench")
    assert (rep.n_new, rep.n_replaced, rep.n_unchanged) == (0, 1, 0)
    items = store.items(with_runs=True).collect()
    assert items.height == 1 and items.item(0, "correct") is True
    assert store.runs().collect().height == 1  # the run row replaced too (config differs)
    again = import_logs("jsonl", log, store, benchmark="mtbbench")
    assert again.batch is None and again.n_unchanged == 1


def mtbbench_log(right: int, *, extra_answer: str | None = None) -> list[dict]:
    recs = []
    for pos in range(3):
        recs.append(
            {
                "question": f"Pathology question {pos}?\nA) yes\nB) no",
                "answer": "A) yes",
                "response": "A) yes" if pos < right else "B) no",
                "correct": pos < right,
                "files_accessed": [],
                "files_hallucinated": [],
                "question_time": 1.0,
            }
        )
    if extra_answer is not None:
        recs[0]["response"] = extra_answer
    return recs


def test_mtbbench_and_react_reimports_replace_by_item(tmp_path):
    logs = tmp_path / "logs" / "gpt4o"
    logs.mkdir(parents=True)
    (logs / "104_chatlog_1700000000.json").write_text(json.dumps(mtbbench_log(1)))
    (logs / "105_chatlog_1700000000.json").write_text(json.dumps(mtbbench_log(2)))
    store = tmp_path / "store"
    first = import_logs("mtbbench", logs.parent, store)
    assert first.n_new == 6
    # one log rewritten in place (a fixed grade): its patient is replaced, the other unchanged
    (logs / "104_chatlog_1700000000.json").write_text(json.dumps(mtbbench_log(3)))
    second = import_logs("mtbbench", logs.parent, store)
    assert (second.n_new, second.n_replaced, second.n_unchanged) == (0, 3, 3)
    items = Store(store).items().collect()
    assert items.height == 6
    assert items.filter(pl.col("patient_id") == "104").get_column("correct").all()
    # a newer log of the patient replaces it; an older one is refused
    (logs / "104_chatlog_1800000000.json").write_text(json.dumps(mtbbench_log(0)))
    third = import_logs("mtbbench", logs / "104_chatlog_1800000000.json", store)
    assert third.n_replaced == 3 and Store(store).count("items") == 6
    (logs / "104_chatlog_1600000000.json").write_text(json.dumps(mtbbench_log(3)))
    fourth = import_logs("mtbbench", logs / "104_chatlog_1600000000.json", store)
    assert fourth.n_items == 0
    assert "superseded by the newer log 104_chatlog_1800000000.json" in fourth.skipped[0][1]
    assert not Store(store).items().filter(pl.col("patient_id") == "104").collect()["correct"].any()
    # ReAct: an edited trace replaces its item
    trace = tmp_path / "traces" / "agent" / "case9.txt"
    trace.parent.mkdir(parents=True)
    body = "# gold: A\nQuestion: Q?\nA) yes\nB) no\nThought: look\nAction: Finish[{}]\n"
    trace.write_text(body.format("B) no"))
    import_logs("react", trace.parent.parent, store)
    trace.write_text(body.format("A) yes"))
    rep = import_logs("react", trace.parent.parent, store)
    assert rep.n_replaced == 1
    react = Store(store).items(with_runs=True).filter(pl.col("benchmark") == "react").collect()
    assert react.height == 1 and react.item(0, "correct") is True


# ------------------------------------------------------------------- item 8: nothing silent


def test_a_mistyped_map_key_warns_and_strict_fails(tmp_path):
    records = [
        {"id": f"q{k}", "model": "m", "question": QUESTION, "gold": "B", "response": "B"}
        for k in range(4)
    ]
    log = write_jsonl(tmp_path / "log.jsonl", records)
    store = tmp_path / "store"
    args = ["import", "jsonl", str(log), "--store", str(store), "--benchmark", "mtbbench",
            "--map", "item_id=id", "--map", "response=respnse"]  # fmt: skip
    out = cli(*args, "--strict")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("tumorboard: error: ")
    assert "--strict" in out.stderr and "nothing was imported" in out.stderr
    assert not (store / "items").exists() or Store(store).count("items") == 0
    out = cli(*args)
    assert out.returncode == 0
    assert (
        "4 of 4 lines have no value for 'respnse' (--map response=respnse); keys seen: id, "
        "model, question, gold, response"
    ) in out.stderr
    assert "4 of 4 lines have no grade" in out.stderr
    scored = cli("score", str(store), "--n-resamples", "200", "--format", "json")
    overall = rows_of(scored.stdout, "accuracy")["overall"]
    assert (overall["estimate"], overall["n_ungraded"], overall["n"]) == (0.0, 4, 4)
    notes = json.loads(scored.stdout)["notes"]
    assert any(n.startswith("4 of 4 answers have no grade") for n in notes)


def test_a_folder_without_logs_is_an_error_not_an_empty_import(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "notes.txt").write_text("not a log")
    out = cli("import", "jsonl", str(tmp_path / "logs"), "--store", str(tmp_path / "s"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr == (
        f"tumorboard: error: {tmp_path / 'logs'}: no jsonl logs found (expected *.jsonl or "
        "*.ndjson files)\n"
    )


# ------------------------------------------------------------------- item 9: paper style, JSON


def test_paper_style_table_and_cli_json_is_report_to_json(tmp_path):
    log = write_jsonl(tmp_path / "log.jsonl", mtbbench_records())
    store = tmp_path / "store"
    import_logs("jsonl", log, store, benchmark="mtbbench")
    report = sc.mtbbench.score(Store(store), options=OPTS)
    long = report.table.filter(pl.col("metric") == "accuracy")
    ((caption, table), *_) = report.paper_tables()
    assert table.columns == ["model", "digital_pathology", "hematology", "overall"]
    for task in ("digital_pathology", "hematology", "overall"):
        row = long.filter(pl.col("task") == task).row(0, named=True)
        expected = f"{100 * row['estimate']:.1f} ± {100 * row['pm']:.1f}"
        assert table.item(0, task) == expected
    assert table.item(0, "overall").startswith("62.5 ± ")
    assert "95% percentile bootstrap interval (200 resamples, seed 0)" in caption
    assert "accuracy (%)" in caption and "half the width" in caption
    md = report.to_markdown(style="paper")
    assert caption in md and "| gpt-4o | 75.0 ± " in md
    out = cli("score", str(store), "--n-resamples", "200", "--style", "paper")
    assert out.returncode == 0 and out.stdout == md
    csv = pl.read_csv(io.StringIO(report.to_csv(style="paper")))
    assert csv.filter(pl.col("metric") == "accuracy").item(0, "overall") == table.item(0, "overall")
    js = cli("score", str(store), "--n-resamples", "200", "--format", "json")
    assert js.stdout == report.to_json()
    bad = cli("score", str(store), "--format", "json", "--style", "paper")
    assert bad.returncode == 2 and "--style paper" in bad.stderr


# ------------------------------------------------------------------- item 10: progress, readers


def test_import_reports_progress_with_a_rate(tmp_path, monkeypatch):
    records = [{**mtbbench_records()[k % 6], "item_id": f"i{k}"} for k in range(250)]
    log = write_jsonl(tmp_path / "big.jsonl", records)
    monkeypatch.setattr(jsonl_importer, "CHUNK_LINES", 100)
    seen = []
    report = import_logs("jsonl", log, tmp_path / "s", benchmark="mtbbench",
                         progress=lambda *a: seen.append(a))  # fmt: skip
    assert report.n_items == 250 and report.n_records == 250
    assert [a[2] for a in seen] == [100, 200, 250, 250]  # per chunk, then the finished file
    # chunks give the rows one pass gives (positions continue across chunks)
    monkeypatch.setattr(jsonl_importer, "CHUNK_LINES", 10_000)
    import_logs("jsonl", log, tmp_path / "one", benchmark="mtbbench")
    chunked = Store(tmp_path / "s").items().collect()
    assert chunked.equals(Store(tmp_path / "one").items().collect())
    assert chunked.filter(pl.col("patient_id") == "P0").get_column("position").to_list() == list(
        range(84)
    )
    stream = io.StringIO()
    printer = CountProgress("import", stream=stream, after=0.0, every=0.0)
    for files, total, count, _ in seen:
        printer.update(files, total, count)
    printer.close()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("import: 100 lines, ") and lines[0].endswith(" lines/s")
    assert lines[-1].startswith("import: 250 lines, ")
    quiet = io.StringIO()
    late = CountProgress("import", stream=quiet)  # waits 2 s before its first line
    late.update(0, 1, 10)
    late.close()
    assert quiet.getvalue() == ""
    # during one long step (no update), the background thread keeps printing
    stream = io.StringIO()
    with CountProgress("import", stream=stream, after=0.0, every=0.05) as live:
        live.update(0, 2, 1000)
        time.sleep(0.4)
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 3 and all(
        line.startswith("import: 1,000 lines (0/2 files), ") for line in lines
    )
    # a job that fails before its first count prints nothing but its error
    silent = io.StringIO()
    with CountProgress("import", stream=silent, after=0.0, every=0.05):
        time.sleep(0.3)
    assert silent.getvalue() == ""


def test_bulk_reader_and_line_reader_give_the_same_rows(tmp_path, monkeypatch):
    records = []
    for k in range(40):
        rec = {
            "model": ["a", "b"][k % 2],
            "patient_id": k % 5,  # integers: stored as text
            "task": f"t{k % 3}",
            "question": QUESTION if k % 4 else "Free text question?",
            "gold": ["B) Squamous cell carcinoma", "A", "a liver lesion"][k % 3],
            "response": ["[ANSWER: B]", "A) Adenocarcinoma", "Squamous cell carcinoma"][k % 3],
            "files_accessed": ["x.png", "x.png", "y.png"][: k % 4],
            "latency_s": k,
            "flags": ["retry"] if k == 7 else [],
        }
        if k % 6 == 0:
            rec["correct"] = True
        if k % 9 == 0:
            rec["position"] = 10
        records.append(rec)
    log = write_jsonl(tmp_path / "log.jsonl", records)
    bulk = import_logs("jsonl", log, tmp_path / "bulk", benchmark="mtbbench")
    monkeypatch.setattr(jsonl_importer, "_read_bulk", lambda *a, **k: None)
    lines = import_logs("jsonl", log, tmp_path / "lines", benchmark="mtbbench")
    assert bulk.warnings == lines.warnings and bulk.n_items == lines.n_items == 40
    assert bulk.rejected == lines.rejected

    def items(path):
        return Store(path).items().sort("item_id").collect()

    assert items(tmp_path / "bulk").equals(items(tmp_path / "lines"))
    got = items(tmp_path / "bulk").filter(pl.col("source").str.ends_with(":4")).row(0, named=True)
    assert got["patient_id"] == "3" and got["files_accessed"] == ["x.png", "y.png"]
    assert got["flags"] == ["duplicate_files_accessed"] and got["n_files"] == 2


def test_a_line_reader_file_names_each_bad_line(tmp_path):
    records = [json.dumps(r) for r in mtbbench_records()]
    records[2] = json.dumps({**mtbbench_records()[2], "latency_s": "slow"})
    records.insert(4, "not json at all")
    # a raw U+2028 inside a string is not a line break of JSON lines
    odd = {**mtbbench_records()[0], "item_id": "u", "question": "Line one\u2028line two?"}
    records.append(json.dumps(odd, ensure_ascii=False))
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(records) + "\n", encoding="utf-8")
    report = import_logs("jsonl", log, tmp_path / "s", benchmark="mtbbench")
    assert report.n_items == 6
    bad = {w.rsplit(":", 1)[1]: r for w, r in report.rejected if w.startswith(f"{log}:")}
    assert bad == {"3": "'latency_s': expected a number, got \"slow\"", "5": bad["5"]}
    assert bad["5"].startswith("not valid JSON")
    items = Store(tmp_path / "s").items().collect()
    assert items.filter(pl.col("item_id") == "u").item(0, "question") == "Line one\u2028line two?"
