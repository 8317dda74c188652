"""``tumorboard import inspect``: inspect_ai logs made by a real eval into a trajectory store.

The logs are written by running a real inspect_ai task in this test with inspect's mock model
(scripted outputs: a tool call, then an answer; no network): three scorers (``match``,
``includes`` and one with explanations and metadata), two epochs, one sample that errors and
one cancelled by the operator (a ``limit`` of type "operator"), as ``.eval`` and ``.json``.

Oracles: inspect_ai's own reader (``read_eval_log``: the samples' scores, targets, outputs,
tool calls and usage, and the log's own metric results), and the two readers of the importer
against each other (the same rows).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import polars as pl
import pytest

pytest.importorskip("inspect_ai")
from inspect_ai import Task  # noqa: E402
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402
from inspect_ai.scorer import CORRECT, INCORRECT, Score, accuracy, includes, match, scorer  # noqa: E402
from inspect_ai.solver import generate, solver, use_tools  # noqa: E402
from inspect_ai.tool import ToolError, tool  # noqa: E402
from inspect_ai.util import LimitExceededError  # noqa: E402
from tumorboard.score import inspect as inspect_scorer  # noqa: E402
from tumorboard.score import store_frame  # noqa: E402
from tumorboard.stats import BootstrapOptions  # noqa: E402
from tumorboard.traj import Store, import_logs  # noqa: E402
from tumorboard.traj.importers.inspect import read_samples  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
N_SAMPLES, EPOCHS = 8, 2


@tool
def tumour_size():
    async def execute(patient: str):
        """Look up the tumour size of a patient.

        Args:
            patient: The patient id.
        """
        if patient == "P2":
            raise ToolError("no measurement for P2")
        return f"{len(patient) * 7} mm"

    return execute


def _outputs(messages, tools, tool_choice, config):
    last = messages[-1]
    if last.role == "tool":
        out = ModelOutput.from_content(
            "mockllm/model", f"ANSWER: {(last.text.split() or ['unknown'])[0]}"
        )
    else:
        patient = messages[0].text.split()[-1].rstrip("?")
        out = ModelOutput.for_tool_call("mockllm/model", "tumour_size", {"patient": patient})
    out.usage = ModelUsage(input_tokens=11, output_tokens=3, total_tokens=14)
    return out


@solver
def trouble():
    async def solve(state, generate):
        if state.metadata.get("trouble") == "error":
            raise RuntimeError("slide server down")
        if state.metadata.get("trouble") == "cancel":
            raise LimitExceededError("operator", value=1, limit=1, message="cancelled")
        return state

    return solve


@scorer(metrics=[accuracy()])
def explained():
    async def score(state, target):
        ok = target.text in state.output.completion
        return Score(value=CORRECT if ok else INCORRECT, answer=state.output.completion,
                     explanation=f"looked for {target.text}", metadata={"rubric": 1})  # fmt: skip

    return score


def _task() -> Task:
    samples = []
    for i in range(N_SAMPLES):
        trouble_kind = {5: "error", 6: "cancel"}.get(i)
        samples.append(
            Sample(
                id=f"s{i}", input=f"How large is the tumour of P{i // 2}?",
                target="14" if i % 3 else "99",
                metadata={"patient_id": f"P{i // 2}", "site": "lung", "trouble": trouble_kind},
            )
        )  # fmt: skip
    return Task(dataset=samples, solver=[trouble(), use_tools(tumour_size()), generate()],
                scorer=[match(), includes(), explained()], epochs=EPOCHS)  # fmt: skip


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    out = {}
    for fmt in ("eval", "json"):
        d = tmp_path_factory.mktemp(f"logs_{fmt}")
        model = get_model("mockllm/model", custom_outputs=_outputs)
        [log] = inspect_eval(_task(), model=model, log_dir=str(d), log_format=fmt,
                             fail_on_error=False, display="none")  # fmt: skip
        out[fmt] = Path(log.location)
    return out


def _frames(store):
    st = Store(store, create=False)
    key = ["run_id", "patient_id", "item_id"]
    return {
        "items": st.items().collect().sort(key, nulls_last=True),
        "events": st.events().collect().sort([*key, "step"], nulls_last=True),
        "runs": st.runs().collect().sort("run_id"),
    }


@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_both_readers_give_the_same_rows(logs, tmp_path, fmt):
    a = import_logs("inspect", logs[fmt], tmp_path / "direct", reader="direct")
    b = import_logs("inspect", logs[fmt], tmp_path / "inspect", reader="inspect")
    assert a.n_items == b.n_items == N_SAMPLES * EPOCHS
    assert a.n_events == b.n_events > 0
    fa, fb = _frames(tmp_path / "direct"), _frames(tmp_path / "inspect")
    for name in ("items", "events", "runs"):
        assert fa[name].equals(fb[name]), name
    # and the samples themselves: the direct reader's JSON equals inspect's model_dump
    ha, sa = read_samples(logs[fmt], reader="direct")
    hb, sb = read_samples(logs[fmt], reader="inspect")
    assert ha["eval"]["eval_id"] == hb["eval"]["eval_id"]

    def order(samples):  # the json reader keeps the file's order, inspect's the dataset's
        return sorted(samples, key=lambda s: (s["id"], s["epoch"]))

    for x, y in zip(order(sa), order(sb), strict=True):
        assert (x["id"], x["epoch"]) == (y["id"], y["epoch"])
        assert x["scores"].keys() == y["scores"].keys()
        assert [m["content"] for m in x["messages"]] == [m["content"] for m in y["messages"]]


def test_rows_match_inspects_own_reading(logs, tmp_path):
    report = import_logs("inspect", logs["eval"], tmp_path / "s")
    assert report.format == "inspect" and not report.skipped
    log = read_eval_log(str(logs["eval"]))
    fr = _frames(tmp_path / "s")
    items, events, runs = fr["items"], fr["events"], fr["runs"]
    assert items.height == len(log.samples) == N_SAMPLES * EPOCHS
    [run] = runs.rows(named=True)
    assert run["run_id"] == f"inspect:{log.eval.task}:mockllm/model:{log.eval.eval_id}"
    assert run["benchmark"] == "inspect" and run["tools"] is True
    config = json.loads(run["config"])
    assert config["epochs"] == EPOCHS and config["scorers"] == ["match", "includes", "explained"]
    assert config["results"]["match"]["accuracy"] == pytest.approx(
        log.results.scores[0].metrics["accuracy"].value
    )
    by_key = {r["item_id"]: r for r in items.rows(named=True)}
    for s in log.samples:
        r = by_key[f"{s.id}:{s.epoch}"]
        extra = json.loads(r["extra"])
        assert r["patient_id"] == s.metadata["patient_id"]
        assert r["task"] == log.eval.task and r["gold"] == s.target
        assert r["question"] == s.input
        assert extra["epoch"] == s.epoch and extra["sample_id"] == s.id
        assert extra["metadata"] == s.metadata
        if s.error is not None:
            assert r["flags"] == ["error"] and r["correct"] is None
            assert "slide server down" in extra["error"] and extra["scorers"] == []
            continue
        if s.limit is not None:
            assert r["flags"] == ["limit:operator"] and extra["limit"]["type"] == "operator"
        assert extra["usage"] == {
            m: u.model_dump(exclude_none=True) for m, u in s.model_usage.items()
        }
        assert r["response"] == s.output.completion
        assert extra["scorers"] == list(s.scores)
        head = s.scores["match"]
        assert r["correct"] == (head.value == "C")
        assert r["parsed_answer"] == head.answer
        assert extra["score_values"] == [1.0 if v.value == "C" else 0.0 for v in s.scores.values()]
        assert extra["scores"]["explained"]["explanation"] == s.scores["explained"].explanation
        assert extra["scores"]["explained"]["metadata"] == {"rubric": 1}
        # events: the conversation, tool calls with their arguments and results
        ev = events.filter(pl.col("item_id") == r["item_id"]).sort("step")
        calls = [c for m in s.messages if m.role == "assistant" for c in (m.tool_calls or [])]
        tool_rows = ev.filter(pl.col("kind") == "tool_call").rows(named=True)
        assert len(tool_rows) == len(calls)
        results = {m.tool_call_id: m for m in s.messages if m.role == "tool"}
        for row, call in zip(tool_rows, calls, strict=True):
            assert row["tool"] == call.function and json.loads(row["input"]) == call.arguments
            res = results[call.id]
            assert row["ok"] is (res.error is None)
            if res.error is None:
                assert row["output"] == res.text
            else:
                assert res.error.message in row["error"]
        messages = ev.filter(pl.col("kind") == "message")
        assert messages.get_column("role").to_list() == [
            m.role for m in s.messages if m.role != "tool"
        ]
        usage = [json.loads(u) for u in messages.get_column("input").drop_nulls()]
        n_model = sum(m.role == "assistant" for m in s.messages)
        assert len(usage) == n_model and all(u["usage"]["input_tokens"] == 11 for u in usage)
        if s.limit is None:
            assert n_model == 2 and len(tool_rows) == 1


def test_reimport_is_idempotent_and_reader_independent(logs, tmp_path):
    store = tmp_path / "s"
    first = import_logs("inspect", [logs["eval"], logs["json"]], store)
    assert first.n_new == 2 * N_SAMPLES * EPOCHS and len(first.runs) == 2
    again = import_logs("inspect", [logs["eval"], logs["json"]], store, reader="inspect")
    assert again.n_items == 0 and again.n_unchanged == 2 * N_SAMPLES * EPOCHS
    assert len(again.unchanged) == 2 and not again.imported
    st = Store(store, create=False)
    assert st.items().collect().height == 2 * N_SAMPLES * EPOCHS
    # another patient key is another import: every item is replaced, none duplicated
    other = import_logs("inspect", logs["eval"], store, patient_key="site")
    assert other.n_items == N_SAMPLES * EPOCHS
    items = st.items().collect()
    assert items.height == 2 * N_SAMPLES * EPOCHS
    assert set(items.filter(pl.col("run_id") == other.runs[0])["patient_id"]) == {"lung"}


def test_scorer_reproduces_inspects_metrics(logs, tmp_path):
    import_logs("inspect", logs["eval"], tmp_path / "s")
    log = read_eval_log(str(logs["eval"]), header_only=True)
    frame = store_frame(tmp_path / "s", "inspect")
    report = inspect_scorer.score(frame, options=BootstrapOptions(n_resamples=200, seed=3),
                                  cluster="patient")  # fmt: skip
    table = report.table
    assert table.get_column("metric").to_list() == ["explained", "includes", "match"]
    for s in log.results.scores:
        row = table.filter(pl.col("metric") == s.name).row(0, named=True)
        # inspect: epochs reduced by their mean, errored samples left out, then accuracy
        assert row["estimate"] == pytest.approx(s.metrics["accuracy"].value, abs=1e-12)
        assert row["n"] == s.scored_samples == N_SAMPLES - 1
        assert row["n_unscored"] == EPOCHS and row["n_epochs"] == (N_SAMPLES - 1) * EPOCHS
        assert row["ci_low"] <= row["estimate"] <= row["ci_high"]
    assert any("whole clusters of column 'patient_id'" in n for n in report.notes)


def test_crashed_log_without_header_is_read_from_its_journal(logs, tmp_path):
    src = zipfile.ZipFile(logs["eval"])
    cut = tmp_path / "crashed.eval"
    with zipfile.ZipFile(cut, "w") as dst:
        for info in src.infolist():
            if info.filename not in ("header.json", "summaries.json", "reductions.json"):
                raw = _raw_member(logs["eval"], info)
                dst.writestr(_copy_info(info), raw, compress_type=zipfile.ZIP_STORED)
    assert "header.json" not in zipfile.ZipFile(cut).namelist()
    report = import_logs("inspect", cut, tmp_path / "s")
    assert report.n_items == N_SAMPLES * EPOCHS and not report.skipped


def _raw_member(path, info):
    """Return a member's decompressed bytes through the importer's own zstd path."""
    from tumorboard.traj.importers.inspect import _member_bytes

    with open(path, "rb") as fh:
        return _member_bytes(zipfile.ZipFile(fh), fh, info)


def _copy_info(info):
    out = zipfile.ZipInfo(info.filename, date_time=info.date_time)
    out.compress_type = zipfile.ZIP_STORED
    return out


def _cli(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    cmd = [sys.executable, "-m", "tumorboard.cli", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_cli_import_then_score(logs, tmp_path):
    store = tmp_path / "store"
    junk = tmp_path / "junk.eval"
    junk.write_bytes(b"not a zip")
    r = _cli("import", "inspect", logs["eval"], logs["json"], junk, "--store", store)
    # the good logs are imported; the bad one is named, and the exit status says one was left out
    assert r.returncode == 1, r.stderr
    assert f"items: {2 * N_SAMPLES * EPOCHS} new" in r.stdout
    assert "2 run(s) of inspect" in r.stdout
    assert "junk.eval: not a zip archive" in r.stdout
    assert "1 file(s) skipped" in r.stderr
    assert "1 log file(s) could not be imported: junk.eval" in r.stderr
    r = _cli("score", store, "--cluster", "patient", "--n-resamples", "200", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["benchmark"] == "inspect"
    metrics = {row["metric"] for row in doc["rows"]}
    assert metrics == {"match", "includes", "explained"}
    assert doc["convention"].startswith("paper (inspect_ai's reduction")
    # the one convention switch: inspect's reduction is the only one, another is refused clearly
    r = _cli("score", store, "--convention", "tumorboard")
    assert r.returncode == 2 and "inspect: convention: expected one of 'paper'" in r.stderr
    r = _cli("import", "inspect", logs["eval"], "--store", store)
    assert r.returncode == 0 and "0 new" in r.stdout and "unchanged" in r.stdout
    # errors: a missing log, an inspect-only option on another format
    r = _cli("import", "inspect", tmp_path / "nope.eval", "--store", store)
    assert r.returncode == 2 and "nope.eval: no such file or directory" in r.stderr
    with pytest.raises(ValueError, match="only the inspect format"):
        import_logs("jsonl", logs["json"], store, patient_key="x")


def test_not_an_inspect_log_is_skipped_with_the_reason(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"hello": 1}))
    (tmp_path / "b.json").write_text('{"version": 2, "eval": {"task": "t", "model')  # cut off
    (tmp_path / "c.json").write_text("[1, 2")
    with pytest.raises(FileNotFoundError):
        import_logs("inspect", tmp_path / "empty_dir_missing", tmp_path / "s")
    report = import_logs("inspect", tmp_path, tmp_path / "s")
    reasons = dict(report.skipped)
    assert "not an inspect_ai log" in reasons[str(tmp_path / "a.json")]
    assert "not" in reasons[str(tmp_path / "b.json")]
    assert report.n_items == 0
    assert "not a JSON object" in reasons[str(tmp_path / "c.json")]
    # a JSON file that is not an inspect log is skipped, not failed; a cut-off log is failed
    assert report.failed == (str(tmp_path / "b.json"),)
    with pytest.raises(ValueError, match="reader"):
        import_logs("inspect", tmp_path, tmp_path / "s", reader="fast")


def test_a_stray_json_beside_the_logs_does_not_fail_the_import(logs, tmp_path):
    src = tmp_path / "logs"
    src.mkdir()
    (src / "run.json").write_bytes(logs["json"].read_bytes())
    (src / "config.json").write_text(json.dumps({"model": "x", "temperature": 0}))
    r = _cli("import", "inspect", src, "--store", tmp_path / "store")
    assert r.returncode == 0, r.stderr
    assert f"items: {N_SAMPLES * EPOCHS} new" in r.stdout
    assert "config.json: " in r.stdout and "not an inspect_ai log" in r.stdout


def test_cancelled_eval_imports_the_samples_it_holds_with_a_warning(logs, tmp_path):
    doc = json.loads(logs["json"].read_text())
    doc["status"] = "cancelled"
    doc["samples"] = doc["samples"][:5]
    cut = tmp_path / "cancelled.json"
    cut.write_text(json.dumps(doc))
    for reader in ("direct", "inspect"):
        report = import_logs("inspect", cut, tmp_path / reader, reader=reader)
        assert report.n_items == 5
        assert any("log status 'cancelled'" in r for _, r in report.warnings)
    assert _frames(tmp_path / "direct")["items"].equals(_frames(tmp_path / "inspect")["items"])
    with pytest.raises(ValueError, match="--strict"):
        import_logs("inspect", cut, tmp_path / "strict", strict=True)


def _calls_not_objects(raw: bytes) -> bytes:
    """Return a sample member whose assistant tool calls are strings, not objects."""
    doc = json.loads(raw)
    for m in doc["messages"]:
        if m.get("tool_calls"):
            m["tool_calls"] = ["x"]
    return json.dumps(doc).encode()


def test_a_hostile_sample_costs_only_itself(logs, tmp_path):
    """A damaged sample member is rejected by name; the log's other samples are imported.

    Before, one sample of a .eval log that was nested 3,000 deep, held a lone surrogate, an
    integer past 64 bits, text where a number belongs, or a tool call that is not an object
    made the whole log "cannot be read" (RecursionError, AttributeError, or a write-time schema
    error naming no sample).
    """
    src = zipfile.ZipFile(logs["eval"])
    names = sorted(n for n in src.namelist() if n.startswith("samples/"))
    damage = {
        names[0]: lambda raw: raw.replace(
            b'"input":', b'"deep": ' + b"[" * 3000 + b"]" * 3000 + b', "input":', 1
        ),  # fmt: skip
        names[1]: lambda raw: raw.replace(b'"input":', b'"input": "bad \\ud800 text", "x":', 1),
        names[2]: lambda raw: raw.replace(b'"epoch":', b'"big": ' + b"9" * 400 + b', "epoch":', 1),
        names[3]: lambda raw: json.dumps({**json.loads(raw), "total_time": "slow"}).encode(),
        names[4]: _calls_not_objects,
    }
    bad = tmp_path / "hostile.eval"
    with zipfile.ZipFile(bad, "w") as dst:
        for info in src.infolist():
            raw = _raw_member(logs["eval"], info)
            raw = damage.get(info.filename, lambda r: r)(raw)
            dst.writestr(_copy_info(info), raw, compress_type=zipfile.ZIP_STORED)
    report = import_logs("inspect", bad, tmp_path / "s")
    assert not report.skipped and not report.ok
    assert report.n_items == N_SAMPLES * EPOCHS - 5
    why = {where.split("#", 1)[1]: reason for where, reason in report.rejected}
    ids = [n[len("samples/") : -len(".json")].replace("_epoch_", ":") for n in names[:5]]
    assert set(why) == set(ids)
    assert "JSON nested deeper than 100 levels" in why[ids[0]]
    assert "$.input: the string holds a lone surrogate U+D800" in why[ids[1]]
    assert "$.big: integer of 400 digits is outside the signed 64-bit range" in why[ids[2]]
    assert why[ids[3]].startswith("skipped: items: importer produced a value that does not fit")
    items = _frames(tmp_path / "s")["items"]
    assert (
        why[ids[4]]
        == "skipped: cannot be read (AttributeError: 'str' object has no attribute 'get')"
    )
    assert not set(items["item_id"]) & set(ids) and items.height == N_SAMPLES * EPOCHS - 5
    # the events of the kept samples stay with them (the rows were renumbered around the gap)
    events = _frames(tmp_path / "s")["events"]
    assert set(events["item_id"]) <= set(items["item_id"])
    import_logs("inspect", logs["eval"], tmp_path / "good")
    kept = _frames(tmp_path / "good")["events"].filter(~pl.col("item_id").is_in(ids))
    assert events.drop("run_id").equals(kept.drop("run_id"))


def test_a_tool_result_without_its_call_is_kept_as_an_observation():
    """A tool message whose call no assistant message holds is an observation event.

    Before, every tool message with a ``tool_call_id`` was left to be reported with its call, so
    one whose call was not in the conversation was silently dropped.
    """
    from tumorboard.traj.importers.inspect import _events

    messages = [
        {"role": "user", "content": "size of P1?"},
        {"role": "assistant", "id": "m1", "content": "",
         "tool_calls": [{"id": "c1", "function": "tumour_size", "arguments": {"patient": "P1"}}]},
        {"role": "tool", "tool_call_id": "c1", "function": "tumour_size", "content": "7 mm"},
        {"role": "tool", "tool_call_id": "c0", "function": "tumour_size", "content": "9 mm",
         "error": {"type": "timeout", "message": "slow"}},
    ]  # fmt: skip
    rows, used = _events({"messages": messages}, ("r", "P1", "s1:1"))
    assert used
    kinds = [(r["kind"], r.get("tool"), r.get("output")) for r in rows]
    assert kinds == [("message", None, "size of P1?"), ("message", None, ""),
                     ("tool_call", "tumour_size", "7 mm"),
                     ("observation", "tumour_size", "9 mm")]  # fmt: skip
    assert rows[3]["ok"] is False and rows[3]["error"] == "timeout: slow"


def test_a_log_where_every_sample_errored_says_so(logs, tmp_path):
    doc = json.loads(logs["json"].read_text())
    doc["samples"] = [s for s in doc["samples"] if s.get("error")]
    assert doc["samples"] and all("slide server down" in s["error"]["message"]
                                  for s in doc["samples"])  # fmt: skip
    failed = tmp_path / "all_errored.json"
    failed.write_text(json.dumps(doc))
    store = tmp_path / "store"
    r = _cli("import", "inspect", failed, "--store", store)
    n = len(doc["samples"])
    said = f"every one of its {n} samples ended in an error"
    assert said in r.stdout + r.stderr and "slide server down" in r.stdout + r.stderr, r
    s = _cli("score", store, "--benchmark", "inspect")
    assert s.returncode == 2, s
    assert f"none of the {n} stored samples has a score: every one ended in an error" in s.stderr


def test_the_direct_reader_imports_without_pandas(logs, tmp_path):
    """The direct import never loads pandas (``pa.array`` would: half a second)."""
    code = (
        "import sys\n"
        "from tumorboard.traj import import_logs\n"
        f"rep = import_logs('inspect', {str(logs['eval'])!r}, {str(tmp_path / 's')!r})\n"
        "assert rep.n_items > 0, rep\n"
        "print('pandas' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
