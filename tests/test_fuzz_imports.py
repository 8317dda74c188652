"""Hostile input never costs good data: the importers and the parsers of model output (issue 18).

Covered, each seeded and deterministic:

* Linear time. Every parser that reads model output gets 1 MB adversarial strings (long runs
  of blanks after a keyword, thousands of unclosed tags, starred wildcards, nested openers) in
  a child process whose per-input deadline (``faulthandler.dump_traceback_later``) kills it on
  a hang, so a regression fails the test instead of hanging the suite. Nothing is timed: the
  deadline is 20 times what the slowest input needs. The rewritten patterns are also compared
  with the patterns they replace on random short strings (where backtracking is harmless), so
  the rewrite changed no result.
* Batch isolation. Folders of good MTBBench logs mixed with damaged copies (one class of
  damage each: truncation, nesting past the limit, lone surrogates, integers past 64 bits,
  NaN, invalid UTF-8, wrong shapes) and random byte mutations; JSON-lines files where one
  damaged line sits between two good lines; ReAct traces. Every good item is in the store,
  every bad file is named in ``failed`` with its reason, every bad line as ``file:line``,
  nothing a parser returns breaks its type or range, and ``tumorboard import`` exits 1 and
  says what was skipped.
* Crashes. A crash is injected before every file-system step of an import that adds and
  replaces items (each rename and unlink, in a child process that ``os._exit``s there), and
  import subprocesses are killed with SIGKILL: the store then shows either the state before
  or the state after the import, never a mix, and running the import again completes it.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import polars as pl
import pytest
from tumorboard.harness import parsing
from tumorboard.traj import Store, import_logs
from tumorboard.traj.importers import mtbbench as mtbbench_importer
from tumorboard.traj.importers import react as react_importer
from tumorboard.traj.store import StrayPartWarning

SEED = 18
#: Seconds one adversarial input may take before its child process is killed (each needs well
#: under a second on one core).
DEADLINE_S = 20
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}

# ---------------------------------------------------------------------------------- linear time

#: name -> Python statements run on 1 MB adversarial strings (``N`` characters) in a child.
ADVERSARIAL = {
    # the case: "The answer" then spaces (three adjacent \s* backtracked cubically)
    "answer_phrase": """
        assert P.parse_answer("The answer" + " " * N).letter is None
        blanks = " " * (N // 2) + ":" + "\\t" * (N // 2)
        assert P.parse_answer("the answer is" + blanks).form == "none"
        assert P.parse_answer("final" + " " * N + "answer").letter is None
        assert P.parse_answer("answer" + " " * N + "is" + " " * N + "B").letter == "B"
    """,
    "answer_tags": """
        assert P.parse_answer("[ANSWER:" * (N // 8)).valid is False
        assert P.parse_answer("[ANSWER:" + " " * N).letter is None
        assert P.parse_answer("[answer: B]" + "[ANSWER:" * (N // 8)).letter == "B"
        assert P.bracket_tags("[ANSWER:" * (N // 8) + "]", "ANSWER") == ["[ANSWER:" * (N // 8 - 1)]
    """,
    "answer_batch": """
        got = P.parse_answers(["The answer" + " " * N, "[ANSWER:" * (N // 8), "[ANSWER: C]"])
        assert got == [None, None, "C"]
    """,
    "option_lines": """
        assert P.parse_options("A)" + " \\t" * (N // 2) + "x") == ("A) x",)
        # blanks inside the text (a lazy group before [ \\t]*$ rescans them per character)
        text = "x" + " \\t" * (N // 2) + "y"
        assert P.parse_options("A) " + text) == ("A) " + text,)
        assert P.parse_options("\\n" * N) == ()
        assert P.parse_options("(A)" * (N // 3)) == ("A) " + "(A)" * (N // 3 - 1),)
        opts = ("A) yes", "B) no")
        assert P.parse_answer("no" + " " * N, options=opts).letter == "B"
    """,
    "file_requests": """
        assert P.parse_requests("[REQUEST:" * (N // 9)) == []
        assert P.parse_requests("[REQUEST: " + " " * N + "x.png]") == ["x.png"]
        many = ",".join(["a.png"] * (N // 6))
        assert P.parse_requests("[REQUEST: " + many + "]") == ["a.png"]
    """,
    # a backtracking ".*a.*a.*a...b" regex is exponential in the stars
    "wildcards": """
        req = "[REQUEST: " + "*a" * 40 + "*b]"
        assert P.parse_requests(req, available=["a" * 300] * 20) == ["*a" * 40 + "*b"]
        assert P.split_requests(["?*" * (N // 2)], ["x" * 100]).hallucinated == ("?*" * (N // 2),)
        assert P.split_requests(["*" * N + "x"], ["ax", "b"]).accessed == ("ax",)
        # many distinct patterns against many names: expanded within the budget, rest as written
        pats = [f"*{i}?" for i in range(N // 8)]
        names = [f"f{i}x" for i in range(20_000)]
        got = P.split_requests(pats, names)
        assert got.accessed[:2] == ("f0x", "f10x") and len(got.hallucinated) > N // 8 - 100
        # a long available list with long names and starred patterns: bounded by the budget
        long_names = ["a" * 255] * 5_000
        got = P.split_requests(["*a" * 100 + "?" + str(i) for i in range(1000)], long_names)
        assert got.accessed == ()
    """,
    "conch_calls": """
        assert len(P.parse_conch("[CONCH: x, (" * (N // 12))) == N // 12
        assert P.parse_conch("[CONCH: x, " + "(" * N)[0].options == ()
        assert P.parse_conch("[CONCH: x" * (N // 9)) == []
    """,
    "react_markers": """
        assert P.parse_react("Thought" + " \\t" * (N // 2) + "x").steps == ()
        assert P.parse_react(("Action" + " " * 1000 + "x\\n") * (N // 1008)).steps == ()
        assert P.parse_react("Act 1" + " " * N + "*").steps == ()
        assert P.parse_react("*" * N + "Thought: t").steps[0].thought == "t"
        act = "x[" + "] " * (N // 2) + "y"
        assert P.parse_react("Action: " + act).steps[0].action == act
    """,
    "rada_blocks": """
        assert P.parse_rada_calls("<Call>" + "<a>" * (N // 3))[0].fields == {}
        assert P.parse_rada_calls("<NoCall><" + "a" * N)[0].fields == {}
        assert len(P.parse_rada_calls("<Call>" * (N // 6))) == N // 6
        assert P.parse_rada_calls("<Call><Tool>t</Tool>" + "<b>" * (N // 3))[0].tool == "t"
    """,
    "answer_protocol": """
        turn = P.AnswerProtocol().step("[REQUEST:" * (N // 18) + "[ANSWER:" * (N // 16))
        assert turn.kind == "reprompt"
    """,
    "mtbbench_log": """
        from tumorboard.traj.importers import mtbbench as M
        from tumorboard.traj.importers._common import ImportOptions
        q = "Which type?\\nA) a\\nB) b"
        recs = [{"question": q, "answer": "A) a", "response": "The answer" + " " * N}]
        conv = [
            {"role": "user", "content": "New files available" + "[FILE:" * (N // 6)},
            {"role": "user", "content": "New files available [FILE: a" + " " * N + "b]"},
            {"role": "user", "content": "\\n" * N + " Question: " + q},
            {"role": "assistant", "content": "[ANSWER:" * (N // 8) + "[CONCH: x, (" * (N // 12)},
            {"role": "user", "content": "[IHCTool:" * (N // 9)},
            {"role": "assistant", "content": "[REQUEST: " + "*?" * (N // 2) + "]"},
        ]
        raw = json.dumps(recs + [{"conversation": conv}]).encode()
        out = M.parse(Path("m/p_chatlog_1.json"), raw, ImportOptions())
        assert out.n_items == 1 and out.items[0]["parsed_answer"] is None
        assert out.items[0]["correct"] is False
    """,
    "react_trace": """
        from tumorboard.traj.importers import react as R
        from tumorboard.traj.importers._common import ImportOptions
        text = "# model: m" + " " * N + "x\\n# gold: A\\nThought: t\\nFinal Answer: A"
        out = R.parse(Path("m/t.txt"), text.encode(), ImportOptions())
        assert out.items[0]["correct"] is True
    """,
    "jsonl_line": """
        from tumorboard.traj.importers import jsonl as J
        from tumorboard.traj.importers._common import ImportOptions
        rec = {"model": "m", "question": "Q?\\nA)" + " \\t" * (N // 4) + "x\\nB) y",
               "gold": "A", "response": "The answer" + " " * N}
        out = J.parse(Path("m.jsonl"), (json.dumps(rec) + "\\n").encode(), ImportOptions())
        assert out.n_items == 1 and out.items_table.column("parsed_answer")[0].as_py() is None
    """,
    "radabench_log": """
        from tumorboard.traj.importers import radabench as RA
        info = {"TOOL3": {"Category": "Organ Segmentor"}}
        got = RA.extract("Call Dict: {" * (N // 12) + "Tool Chain: [*x" * (N // 15), info, "012")
        assert got["called_tool_ids"] == [] and got["plan_tools"] == []
        assert RA.extract("<Decomposition>" * (N // 15), info, "012")["called_tools"] == []
        log = "<Decomposition>" + "<Tool> TOOL3\\nx " * (N // 16) + "</Tool></Decomposition>"
        assert RA.extract(log, info, "012")["called_tool_ids"] == []
        log = "<Decomposition>" + "<Tool>" * (N // 6) + " TOOL3 </Tool></Decomposition>"
        ids = RA.extract(log, info, "012")["called_tool_ids"]
        assert ids == ["<Tool>" * (N // 6 - 1) + " TOOL3"]
    """,
    "score_logs": """
        from tumorboard.score import radabench as RB, lammi as L
        log = "Error Type: x\\nError Message: " * (N // 29)
        assert RB.execution_failed(log) is False
        assert RB.deny_grounding("'Category': '" * (N // 13), "x") is False
        assert RB.extract_conclusion("Conclusion:" + " " * N) == ""
        assert len(L.input_tokens("a " * (N // 2))) == 1
    """,
}

_CHILD = """
import faulthandler, json, sys
from pathlib import Path
from tumorboard.harness import parsing as P
N = 1 << 20
faulthandler.dump_traceback_later({deadline}, exit=True)
{body}
faulthandler.cancel_dump_traceback_later()
print("done")
"""


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_parsers_of_model_output_finish_1mb_adversarial_input(name):
    body = textwrap.dedent(ADVERSARIAL[name])
    code = _CHILD.format(deadline=DEADLINE_S, body=body)
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], env=ENV, capture_output=True, text=True,
            timeout=DEADLINE_S + 30,
        )  # fmt: skip
    except subprocess.TimeoutExpired:  # pragma: no cover - only on a hang
        pytest.fail(f"{name}: no result within {DEADLINE_S + 30} s")
    assert done.returncode == 0 and done.stdout.strip() == "done", (
        f"{name}: a parser did not finish 1 MB of adversarial input within {DEADLINE_S} s or "
        f"returned a wrong result:\n{done.stderr[-3000:]}"
    )


# The patterns the linear-time parsers replaced, kept as the oracle of what they must match.
_OLD = {
    "phrase": re.compile(
        r"(?i:\b(?:final\s+answer|answer|choice|option)\b)\s*(?i:(?:is|was)\b)?\s*[:=]?\s*"
        r"(?:(?i:option|choice)\s+)?\(?([A-F])\)?(?![A-Za-z0-9])"
    ),
    "option": re.compile(r"^[ \t]*\(?([A-Z])\)[ \t]*(.*?)[ \t]*$", re.MULTILINE),
    "react": re.compile(
        r"^[ \t>*#]*(?P<key>Question|Thought|Action[ \t]+Input|Action|Act|Observation|Obs|"
        r"Final[ \t]+Answer)(?:[ \t]+\d+)?[ \t]*\**[ \t]*:\**[ \t]?",
        re.IGNORECASE | re.MULTILINE,
    ),
    "answer": re.compile(r"\[ANSWER:\s*([^\]]*)\]", re.IGNORECASE),
    "answer_open": re.compile(r"\[ANSWER:\s*([^\]]*)$", re.IGNORECASE),
    "request": re.compile(r"\[REQUEST:\s*([^\]]+)\]", re.IGNORECASE),
    "file": re.compile(r"\[FILE:\s*([^\]]+?)\s*\]"),
    "rada_field": re.compile(r"<(\w+)>(.*?)</\1>", re.DOTALL),
    "question": re.compile(r"(?:^|\n)\s*Question:\s"),
    "meta": re.compile(r"^#\s*([A-Za-z_]+)\s*[:=]\s*(.*?)\s*$"),
}
_PIECES = list(" \t\n]:[()<>/*#=ABCaxis1") + [
    "answer", "Answer", "final ", "is ", "option ", "choice", "[ANSWER:", "[REQUEST:",
    "[FILE:", "Thought", "Action", " Input", "Obs", "Question:", "<a>", "</a>", "<b>", "**",
    " 2",
]  # fmt: skip


def _old_wildcard(pattern: str, name: str) -> bool:
    """Match with the backtracking wildcard regex the set-of-states matcher replaced."""
    parts = (".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.compile("".join(parts) + r"\Z").match(name) is not None


def test_linear_parsers_match_what_the_old_patterns_matched():
    """On short random strings (where backtracking costs nothing) old and new agree exactly."""
    rng = random.Random(SEED)
    for _ in range(4000):
        t = "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 14)))
        old, new = _OLD["phrase"].search(t), parsing._PHRASE.search(t)
        assert (old and (old.group(1), old.span())) == (new and (new.group(1), new.span())), t
        old_opts = [(m[1], m[2]) for m in _OLD["option"].finditer(t)]
        assert old_opts == [(m[1], m[2].rstrip(" \t")) for m in parsing._OPTION_LINE.finditer(t)]
        old_react = [(m["key"], m.span()) for m in _OLD["react"].finditer(t)]
        assert old_react == [(m["key"], m.span()) for m in parsing._REACT_MARKER.finditer(t)], t
        tags = [x.strip() for x in _OLD["answer"].findall(t)]
        assert tags == parsing.bracket_tags(t, "ANSWER", keep_empty=True), t
        if not tags:  # the unclosed tag parse_answer falls back to, else the whole text
            m = _OLD["answer_open"].search(t)
            assert parsing.parse_answer(t).raw == (m.group(1) if m else t).strip(), t
        requests = [x.strip() for x in _OLD["request"].findall(t) if x.strip()]
        assert requests == parsing.bracket_tags(t, "REQUEST"), t
        files = [x for x in _OLD["file"].findall(t) if x.strip()]
        assert files == parsing.bracket_tags(t, "FILE", ignore_case=False), t
        fields = {m[1]: m[2].strip() for m in _OLD["rada_field"].finditer(t)}
        assert fields == parsing._rada_fields(t), t
        prompt = mtbbench_importer._QUESTION_PROMPT.search(t)
        assert (_OLD["question"].search(t) is None) == (prompt is None), t
        line = "#" + t.replace("\n", " ")
        old, new = _OLD["meta"].match(line), react_importer._META.match(line)
        assert (old and old.groups()) == (new and (new[1], new[2].rstrip())), line
    for _ in range(4000):
        pattern = "".join(rng.choice("ab*?\n") for _ in range(rng.randint(0, 7)))
        name = "".join(rng.choice("ab\n") for _ in range(rng.randint(0, 7)))
        assert parsing._wildcard_match(pattern, name) == _old_wildcard(pattern, name)


# ---------------------------------------------------------------------------------- MTBBench logs

QUESTIONS = [f"Question {k} about the slides?\nA) one\nB) two\nC) three" for k in range(15)]
MODEL = "gpt-4o"


def good_log(rng: random.Random) -> list:
    """Return an MTBBench chat log: 15 question records and the conversation."""
    recs, conv = [], [{"role": "system", "content": "You are a pathologist."}]
    for k, q in enumerate(QUESTIONS):
        gold, resp = "ABC"[k % 3], rng.choice("ABC")
        seconds = round(rng.uniform(1, 60), 3)
        recs.append({"question": q, "answer": f"{gold}) x", "response": f"{resp}) x",
                     "correct": resp == gold, "files_accessed": ["a.png"],
                     "files_hallucinated": [], "question_time": seconds})  # fmt: skip
        intro = "New files available:\n[FILE: a.png]\n" if k == 0 else ""
        conv.append({"role": "user", "content": f"{intro} Question: {q}"})
        conv.append({"role": "assistant", "content": f"[REQUEST: a.png] [ANSWER: {resp}) x]"})
    return [*recs, {"conversation": conv}]


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _set_time(text: str, value: str) -> str:
    """Replace the first question_time's value with ``value`` (raw JSON text)."""
    new = f'"question_time": {value}'
    return re.sub(r'"question_time": [0-9.]+', lambda _: new, text, count=1)


#: damage class -> (make the damaged bytes from a good log's text, words of the expected reason)
DAMAGE = {
    "truncated": (lambda t, r: t[: r.randrange(1, len(t) - 1)].encode(), "not valid JSON"),
    "empty": (lambda t, r: b"", "not valid JSON"),
    "binary": (lambda t, r: b"[\x9f" + r.randbytes(200), "not UTF-8"),
    "deep_1500": (lambda t, r: _set_time(t, _nested(1500)).encode(), "nested deeper than 100"),
    "deep_150": (lambda t, r: _set_time(t, _nested(150)).encode(), "nested deeper than 100"),
    "lone_surrogate": (
        lambda t, r: t.replace("Question 3", "Question \\ud800", 1).encode(),
        "$[3].question: the string holds a lone surrogate U+D800",
    ),
    "surrogate_key": (
        lambda t, r: t.replace('"correct"', '"correct\\udc00"', 1).encode(),
        "a key holds a lone surrogate U+DC00",
    ),
    "int_10e400": (lambda t, r: _set_time(t, "1" + "0" * 400).encode(), "$[0].question_time"),
    "int_2e64": (lambda t, r: _set_time(t, str(2**64)).encode(), "outside the signed 64-bit"),
    "float_1e400": (lambda t, r: _set_time(t, "1e400").encode(), "too large for a 64-bit float"),
    "nan": (lambda t, r: _set_time(t, "NaN").encode(), "NaN is not a JSON number"),
    "bad_utf8": (
        lambda t, r: t.encode().replace(b"Question 2", b"Question \xff2", 1),
        "not UTF-8",
    ),
    "not_a_list": (lambda t, r: b'{"question": "q", "answer": "A"}', "expected a JSON list"),
    "record_not_object": (lambda t, r: b"[1, 2]", "entry 0: expected an object"),
    "no_answer": (
        lambda t, r: json.dumps(
            [
                {k: v for k, v in d.items() if k != "answer"} if i == 4 else d
                for i, d in enumerate(json.loads(t))
            ]
        ).encode(),  # fmt: skip
        "record 4: 'answer' is missing",
    ),
    "files_not_names": (
        lambda t, r: t.replace('"files_accessed": ["a.png"]', '"files_accessed": 5', 1).encode(),
        "expected a list of file names",
    ),
}


def hostile_but_valid(rng: random.Random) -> tuple[list, int]:
    """Return a valid log whose text is adversarial for parsers, and the record it attacks."""
    log = good_log(rng)
    k = rng.randrange(15)
    attack = rng.choice(
        ["The answer" + " " * 60_000, "[ANSWER:" * 8_000, "A)" + " \t" * 30_000 + "x",
         "answer is" + "\n" * 60_000]
    )  # fmt: skip
    log[k]["response"] = attack
    log[k].pop("correct")  # graded from the response: the parser must read it
    conv = log[-1]["conversation"]
    # 5,000 CONCH calls before a long reply: the reply is stored once, with the first call
    conv.append({"role": "assistant", "content": "[CONCH: x, (" * 5_000 + "[REQUEST: *?" * 3000})
    conv.append({"role": "user", "content": "\n" * 60_000 + "[IHCTool:" * 5_000})
    return log, k


def _mutate(data: bytes, rng: random.Random) -> bytes:
    """Apply 1-3 random byte mutations (flip, delete, duplicate a slice, insert punctuation)."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(b))
        op = rng.randrange(4)
        if op == 0:
            b[i] = rng.randrange(256)
        elif op == 1:
            del b[i]
        elif op == 2:
            j = min(len(b), i + rng.randint(1, 40))
            b[i:i] = b[i:j]
        else:
            b.insert(i, ord(rng.choice('[]{}",:\\')))
    return bytes(b)


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``python -m tumorboard.cli ARGS`` as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "tumorboard.cli", *args],
        capture_output=True, text=True, env=ENV, timeout=timeout,
    )  # fmt: skip


def test_mtbbench_folder_of_damaged_and_good_logs_keeps_every_good_log(tmp_path):
    rng = random.Random(SEED)
    root = tmp_path / "logs" / MODEL
    root.mkdir(parents=True)
    good, hostile, damaged, mutants = [], {}, {}, []
    for i in range(50):
        path = root / f"good{i:02d}_chatlog_1700000000.json"
        path.write_text(json.dumps(good_log(rng)))
        good.append(path)
    for i in range(12):
        log, k = hostile_but_valid(rng)
        path = root / f"hostile{i:02d}_chatlog_1700000000.json"
        path.write_text(json.dumps(log))
        hostile[path] = (k, log[k]["response"])
    for name, (damage, why) in DAMAGE.items():
        for i in range(4):
            path = root / f"{name}{i}_chatlog_1700000000.json"
            path.write_bytes(damage(json.dumps(good_log(rng)), rng))
            damaged[path] = why
    for i in range(400):
        path = root / f"mutant{i:03d}_chatlog_1700000000.json"
        path.write_bytes(_mutate(json.dumps(good_log(rng)).encode(), rng))
        mutants.append(path)
    store = tmp_path / "store"

    done = cli("import", "mtbbench", str(tmp_path / "logs"), "--store", str(store), "--json")
    assert done.returncode == 1, done.stderr  # files were skipped: the status says so
    report = json.loads(done.stdout)
    failed, imported = set(report["failed"]), set(report["imported"])
    reasons = {s["file"]: s["reason"] for s in report["skipped"]}
    assert f"{len(failed)} log file(s) could not be imported" in done.stderr
    # every damaged file is named, with the reason of its damage
    for path, why in damaged.items():
        assert str(path) in failed and why in reasons[str(path)], (
            path.name,
            reasons.get(str(path)),
        )
    # every good and every hostile-but-valid log is imported whole
    assert {str(p) for p in good + list(hostile)} <= imported
    # each mutant is either imported or named as failed, never both, never lost
    for path in mutants:
        assert (str(path) in failed) != (str(path) in imported), path.name
    assert failed | imported == {str(p) for p in good + list(hostile) + list(damaged) + mutants}
    assert len(report["skipped"]) == len(failed)

    items = Store(store).items().collect()
    per_source = dict(items.group_by("source").len().iter_rows())
    assert set(per_source) == imported  # failed files left no rows
    assert all(per_source[str(p)] == 15 for p in good + list(hostile))
    assert report["n_items"] == items.height == sum(per_source.values())
    assert not items.select("run_id", "patient_id", "item_id").is_duplicated().any()
    # numbers are what they must be: finite latencies, positions 0..n-1, grades of both kinds
    latency = items.get_column("latency_s").drop_nulls()
    assert latency.is_finite().all() and (latency >= 0).all()
    assert items.filter(pl.col("source").is_in([str(p) for p in good])).get_column(
        "position"
    ).sort().to_list() == sorted(list(range(15)) * len(good))
    # the hostile responses were parsed, not hung on, and graded by MTBBench's rule (first
    # characters of response and gold, ignoring case)
    for path, (k, response) in hostile.items():
        row = items.filter((pl.col("source") == str(path)) & (pl.col("position") == k)).row(
            0, named=True
        )
        assert row["response"] == response and row["correct_source"] == "graded"
        assert row["parsed_answer"] == ("A" if response.startswith("A)") else None)
        assert row["correct"] == (response.strip()[0].lower() == "abc"[k % 3])
    calls = Store(store).events().filter(pl.col("tool") == "conch").collect()
    assert calls.height == 5_000 * len(hostile)
    assert calls.get_column("output").drop_nulls().len() == len(hostile)


# ---------------------------------------------------------------------------------- JSON lines

JSONL_QUESTION = "Which type?\nA) adenocarcinoma\nB) squamous\nC) other"


def good_line(rng: random.Random, key: str) -> dict:
    """Return a good JSON-lines record (MTBBench fields), keyed by ``key``."""
    return {"model": "m", "patient_id": key, "item_id": "q0", "question": JSONL_QUESTION,
            "gold": "A", "response": rng.choice(["A) adenocarcinoma", "B", "[ANSWER: C]"]),
            "latency_s": round(rng.uniform(0, 9), 2)}  # fmt: skip


def _raw(record: dict, old: str, new: str) -> bytes:
    """Return a record's JSON text with one raw substring replaced (for non-JSON numbers)."""
    return json.dumps(record).replace(old, new, 1).encode()


#: bad line class -> (make the line from a good record, words of the expected reason)
BAD_LINES = {
    "truncated": (lambda g: json.dumps(g)[:30].encode(), "not valid JSON"),
    "not_json": (lambda g: b"this is not json", "not valid JSON"),
    "bad_utf8": (lambda g: json.dumps(g).encode().replace(b"Which", b"Wh\xffich"), "not UTF-8"),
    "deep_150_unknown_key": (
        lambda g: _raw({**g, "x": "DEEP"}, '"DEEP"', _nested(150)),
        "$.x[0][0][0]",
    ),
    "deep_5000": (
        lambda g: _raw({**g, "x": "DEEP"}, '"DEEP"', _nested(5000)),
        "JSON nested deeper than 100 levels",
    ),
    "lone_surrogate": (
        lambda g: json.dumps({**g, "response": "B \ud800"}).encode(),
        "$.response: the string holds a lone surrogate U+D800",
    ),
    "surrogate_key": (lambda g: json.dumps({**g, "\udc00": 1}).encode(), "a key holds a lone"),
    "position_2e40": (
        lambda g: json.dumps({**g, "position": 2**40}).encode(),
        "in [-2**31, 2**31 - 1], got",
    ),
    "position_10e400": (
        lambda g: json.dumps({**g, "position": 10**400}).encode(),
        "$.position: integer of 401 digits is outside the signed 64-bit range",
    ),
    "attempts_below_int32": (
        lambda g: json.dumps({**g, "attempts": -(2**31) - 1}).encode(),
        "'attempts': expected an integer in",
    ),
    "step_2e31": (
        lambda g: json.dumps({**g, "events": [{"kind": "message", "step": 2**31}]}).encode(),
        "'events[0].step': expected an integer in",
    ),
    "latency_1e400": (lambda g: _raw(g, str(g["latency_s"]), "1e400"), "too large for a 64-bit"),
    "latency_nan": (lambda g: _raw(g, str(g["latency_s"]), "NaN"), "NaN is not a JSON number"),
    "latency_text": (
        lambda g: json.dumps({**g, "latency_s": "slow"}).encode(),
        "'latency_s': expected a number",
    ),
    "events_not_list": (lambda g: json.dumps({**g, "events": 5}).encode(), "expected a list"),
    "no_model": (
        lambda g: json.dumps({k: v for k, v in g.items() if k != "model"}).encode(),
        "no model",
    ),
    "array": (lambda g: b"[1, 2]", "expected a JSON object"),
    "null": (lambda g: b"null", "expected a JSON object"),
    "options_not_strings": (
        lambda g: json.dumps({**g, "options": [1, 2]}).encode(),
        "'options': expected a list of strings",
    ),
    "correct_text": (lambda g: json.dumps({**g, "correct": "yes"}).encode(), "true or false"),
}
HOSTILE_LINES = {
    "blank_phrase": ("The answer" + " " * 100_000, None),
    "unclosed_tags": ("[ANSWER:" * 10_000, None),
    "late_tag": ("[ANSWER: B]" + "[ANSWER:" * 10_000, "B"),
}


def test_jsonl_damaged_line_between_good_lines_costs_only_itself(tmp_path):
    """One file per class of damage: good, bad, good. The bad line alone is rejected, named."""
    rng = random.Random(SEED)
    folder = tmp_path / "logs"
    folder.mkdir()
    for name, (make, _) in BAD_LINES.items():
        lines = [json.dumps(good_line(rng, f"{name}-1")).encode(),
                 make(good_line(rng, f"{name}-bad")),
                 json.dumps(good_line(rng, f"{name}-3")).encode()]  # fmt: skip
        (folder / f"{name}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    for name, (response, _) in HOSTILE_LINES.items():
        lines = [good_line(rng, f"{name}-1"), {**good_line(rng, f"{name}-2"), "response": response}]
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    store = tmp_path / "store"
    report = import_logs("jsonl", folder, store, benchmark="mtbbench")

    assert not report.failed and not report.ok
    rejected = dict(report.rejected)
    assert set(rejected) == {f"{folder / name}.jsonl:2" for name in BAD_LINES}
    for name, (_, why) in BAD_LINES.items():
        assert why in rejected[f"{folder / name}.jsonl:2"], (name, rejected)
    items = Store(store).items().collect()
    got = sorted(items.get_column("patient_id").to_list())
    want = sorted([f"{n}-{k}" for n in BAD_LINES for k in (1, 3)]
                  + [f"{n}-{k}" for n in HOSTILE_LINES for k in (1, 2)])  # fmt: skip
    assert got == want and report.n_items == len(want)
    for name, (response, letter) in HOSTILE_LINES.items():
        row = items.filter(pl.col("patient_id") == f"{name}-2").row(0, named=True)
        assert row["response"] == response and row["parsed_answer"] == letter
        if letter is None:  # no readable answer: ungraded, not wrong
            assert row["correct"] is None and row["correct_source"] == "missing"
        else:
            assert row["correct"] is (letter == row["gold"]) and row["correct_source"] == "graded"
    assert items.get_column("latency_s").is_finite().all()


def test_jsonl_folder_keeps_every_good_line(tmp_path):
    """Files of many good lines with every bad class mixed in; the CLI says what it skipped."""
    rng = random.Random(SEED + 1)
    folder = tmp_path / "logs"
    folder.mkdir()
    bad_where: dict[str, str] = {}
    good_keys = []
    for f in range(4):
        lines: list[bytes] = []
        for i in range(80):
            key = f"f{f}-{i}"
            lines.append(json.dumps(good_line(rng, key)).encode())
            good_keys.append(key)
        for make, _ in BAD_LINES.values():
            at = rng.randrange(len(lines) + 1)
            lines.insert(at, make(good_line(rng, "bad")))
        path = folder / f"run{f}.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        for lineno, line in enumerate(lines, 1):
            if b'"bad"' in line or not line.startswith(b'{"model": "m", "patient_id": "f'):
                bad_where[f"{path}:{lineno}"] = line[:40].decode("utf-8", "replace")
    (folder / "all_bad.jsonl").write_bytes(b"nope\n[1]\n")
    # a good file whose name is not UTF-8: the store cannot keep its path as text
    odd = folder / os.fsdecode(b"odd\xfe.jsonl")
    odd.write_text(json.dumps(good_line(rng, "odd")) + "\n")
    # a file of good lines and one suspect line: the bulk reader hands it to the line reader
    bulk = [json.dumps(good_line(rng, f"bulk-{i}")) for i in range(50)]
    bulk[25] = _raw({**good_line(rng, "bulk-25"), "x": "DEEP"}, '"DEEP"', _nested(120)).decode()
    (folder / "bulk.jsonl").write_text("\n".join(bulk) + "\n")
    good_keys += [f"bulk-{i}" for i in range(50) if i != 25]
    bad_where[f"{folder / 'bulk.jsonl'}:26"] = "deep"

    store = tmp_path / "store"
    done = cli("import", "jsonl", str(folder), "--store", str(store), "--benchmark", "mtbbench",
               "--json")  # fmt: skip
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["failed"] == [str(folder / "all_bad.jsonl"), str(odd)]
    reasons = {s["file"]: s["reason"] for s in report["skipped"]}
    assert "line 1: not valid JSON" in reasons[str(folder / "all_bad.jsonl")]
    assert reasons[str(odd)] == "file name is not UTF-8 text (rename the file)"
    assert {r["where"] for r in report["rejected"]} == set(bad_where)
    assert f"{len(bad_where)} record(s) rejected, first" in done.stderr
    assert "2 log file(s) could not be imported: all_bad.jsonl, odd\\udcfe.jsonl" in done.stderr
    items = Store(store).items().collect()
    assert sorted(items.get_column("patient_id").to_list()) == sorted(good_keys)
    # a line's source is its file:line, and no rejected line left a row
    assert not set(items.get_column("source").to_list()) & set(bad_where)


def test_react_traces_isolated_per_file_and_line(tmp_path):
    folder = tmp_path / "traces" / "m"
    folder.mkdir(parents=True)
    trace = "# gold: A\nQuestion: Which?\nA) x\nB) y\nThought: look\nFinal Answer: A"
    (folder / "good.txt").write_text(trace)
    (folder / "hostile.txt").write_text("# model: m" + " " * 200_000 + "x\n" + trace)
    (folder / "binary.txt").write_bytes(b"Thought: \xff\xfe")
    (folder / "empty.md").write_text("nothing to see")
    lines = [json.dumps({"trace": trace, "item_id": "j1", "gold": "A"}),
             json.dumps({"trace": trace + " \ud800", "item_id": "j2"}),
             json.dumps({"trace": "Thought" + " " * 100_000 + "x", "item_id": "j3"}),
             json.dumps({"trace": trace, "item_id": "j4", "gold": "A"})]  # fmt: skip
    (folder / "many.jsonl").write_text("\n".join(lines) + "\n")
    report = import_logs("react", tmp_path / "traces", tmp_path / "store")
    assert sorted(Path(f).name for f in report.failed) == ["binary.txt", "empty.md"]
    assert "not UTF-8" in dict(report.skipped)[str(folder / "binary.txt")]
    assert [w for w, _ in report.rejected] == [f"{folder / 'many.jsonl'}:{k}" for k in (2, 3)]
    assert "lone surrogate" in report.rejected[0][1]
    assert "no Thought/Action/Observation" in report.rejected[1][1]
    items = Store(tmp_path / "store").items().collect()
    assert sorted(items.get_column("item_id").to_list()) == ["good", "hostile", "j1", "j4"]
    assert items.get_column("correct").to_list() == [True] * 4


# ---------------------------------------------------------------------------------- crashes

#: A child that imports with a crash injected before the K-th file-system step that others can
#: see (a rename into place or an unlink): ``os._exit`` there, as a SIGKILL would.
_CRASHING_IMPORT = """
import os, sys
fmt, src, store, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
steps = [0]
def gate(real):
    def step(*args, **kwargs):
        steps[0] += 1
        if steps[0] == k:
            os._exit(86)
        return real(*args, **kwargs)
    return step
os.replace, os.rename, os.unlink = gate(os.replace), gate(os.rename), gate(os.unlink)
from tumorboard.traj import import_logs
import_logs(fmt, src, store)
print(steps[0])
"""


def store_state(path: Path) -> tuple:
    """Return what a reader sees: the items (key, digest) and events (key, step, kind) rows."""
    st = Store(path)
    items = st.items().select("run_id", "patient_id", "item_id", "digest").collect()
    events = st.events().select("run_id", "patient_id", "item_id", "step", "kind").collect()
    return (
        sorted(items.rows(), key=repr),
        sorted(events.rows(), key=repr),
        sorted(st.runs().select("run_id", "model").collect().rows()),
    )


def _logs(root: Path, rng: random.Random, patients: range, ts: int) -> None:
    for p in patients:
        path = root / MODEL / f"p{p}_chatlog_{ts}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(good_log(rng)))


@pytest.fixture
def update(tmp_path) -> tuple[Path, Path, tuple, tuple]:
    """Return a store of 6 patients and logs that replace 3 of them and add 2 (and one bad)."""
    rng = random.Random(SEED + 2)
    first, second = tmp_path / "first", tmp_path / "second"
    _logs(first, rng, range(6), 1700000000)
    shutil.copytree(first, second)
    _logs(second, rng, range(3), 1700000100)  # newer logs of p0-p2: their units are replaced
    _logs(second, rng, range(6, 8), 1700000000)
    (second / MODEL / "p9_chatlog_1700000000.json").write_text("[{")
    base = tmp_path / "base"
    import_logs("mtbbench", first, base)
    before = store_state(base)
    done = tmp_path / "done"
    shutil.copytree(base, done)
    import_logs("mtbbench", second, done)
    after = store_state(done)
    assert before != after and len(after[0]) == 8 * 15
    return base, second, before, after


def test_a_crash_at_every_step_of_an_import_leaves_the_old_or_the_new_store(tmp_path, update):
    base, src, before, after = update
    seen = set()
    for k in range(1, 200):
        store = tmp_path / f"crash{k}"
        shutil.copytree(base, store)
        child = subprocess.run(
            [sys.executable, "-c", _CRASHING_IMPORT, "mtbbench", str(src), str(store), str(k)],
            env=ENV, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        if child.returncode == 0:  # the import has fewer steps than k: it ran to the end
            assert store_state(store) == after
            break
        assert child.returncode == 86, child.stderr
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            state = store_state(store)
            assert state in (before, after), f"crash before step {k}: a mix of old and new rows"
            seen.add("before" if state == before else "after")
            # running the import again completes it
            again = import_logs("mtbbench", src, store)
            assert store_state(store) == after
        assert again.failed == (str(src / MODEL / "p9_chatlog_1700000000.json"),)
        # the only complaint is about the killed writer's uncommitted parts, and repair clears it
        assert all(issubclass(w.category, StrayPartWarning) for w in caught), caught
        Store(store).check(repair=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert store_state(store) == after
        shutil.rmtree(store)
    else:  # pragma: no cover
        pytest.fail("the import never finished")
    assert k > 3 and seen == {"before", "after"}, k  # crashes hit both sides of the commit


def test_sigkill_of_an_import_leaves_the_old_or_the_new_store(tmp_path, update):
    base, src, before, after = update
    rng = random.Random(SEED)
    for trial in range(2):
        store = tmp_path / f"killed{trial}"
        shutil.copytree(base, store)
        proc = subprocess.Popen(
            [sys.executable, "-m", "tumorboard.cli", "import", "mtbbench", str(src), "--store",
             str(store)],
            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(rng.uniform(0.3, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        assert store_state(store) in (before, after)
        done = cli("import", "mtbbench", str(src), "--store", str(store))
        assert done.returncode == 1 and "p9_chatlog_1700000000.json" in done.stderr
        assert store_state(store) == after


def test_rows_that_do_not_fit_the_schema_skip_only_their_file(tmp_path, monkeypatch):
    """An importer that produces an unstorable value for one file (a bug, simulated here)."""
    rng = random.Random(SEED + 3)
    _logs(tmp_path / "logs", rng, range(4), 1700000000)
    real = mtbbench_importer._item

    def item(rec, pos, run_id, patient_id, *args):
        row = real(rec, pos, run_id, patient_id, *args)
        if patient_id == "p2" and pos == 7:
            row["latency_s"] = "not a number"  # a str in a float column
        return row

    monkeypatch.setattr(mtbbench_importer, "_item", item)
    report = import_logs("mtbbench", tmp_path / "logs", tmp_path / "store")
    bad = str(tmp_path / "logs" / MODEL / "p2_chatlog_1700000000.json")
    assert report.failed == (bad,) and "does not fit the schema" in dict(report.skipped)[bad]
    items = Store(tmp_path / "store").items().collect()
    assert sorted(set(items.get_column("patient_id"))) == ["p0", "p1", "p3"]
    assert items.height == report.n_items == 45 and len(report.imported) == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"[" * 101 + b"]" * 101, "[0][0]"),  # 101 levels: one past the limit, named by path
        (b"[" * 3000 + b"]" * 3000, "JSON nested deeper than 100 levels"),  # json.loads' own
        (b'{"a": {"b c": [1, 18446744073709551616]}}', '$.a["b c"][1]: integer of 20 digits'),
        (b'{"t": -1e309}', "$.t: number too large for a 64-bit float (reads as -inf)"),
        (b"[Infinity]", "not valid JSON (Infinity is not a JSON number"),
        (b'["ok", "\\udfff"]', "$[1]: the string holds a lone surrogate U+DFFF at character 0"),
        (b"\xc3(", "not UTF-8 text (invalid continuation byte at byte 0)"),
        (b'{"a": 1,}', "not valid JSON (Expecting property name enclosed in double quotes"),
        ('{"k": ["\ud800"]}', "$.k[0]: the string holds a lone surrogate U+D800"),  # str input
    ],
)
def test_load_json_names_what_breaks_a_limit(text, message):
    from tumorboard._json import load_json
    from tumorboard.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError) as info:
        load_json(text)
    assert message in str(info.value)


def test_load_json_accepts_the_edges_of_every_limit():
    from tumorboard._json import load_json

    deep = b"[" * 100 + b"]" * 100
    assert load_json(deep) == load_json(deep.decode())  # exactly 100 levels pass
    edge = f'[{2**63 - 1}, {-(2**63)}, 1.7976931348623157e308, "\\ud83d\\ude00"]'
    assert load_json(edge) == [2**63 - 1, -(2**63), 1.7976931348623157e308, "\U0001f600"]
