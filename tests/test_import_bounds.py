"""Bounded input: what one log may cost an import, through the CLI as a user runs it."""

from __future__ import annotations

import json
import os

import pytest
from test_item_identity import cli, write_jsonl
from tumorboard.traj import Store, import_logs
from tumorboard.traj.importers import ImportOptions

GOOD = {"model": "m", "question": "Q?\nA) x\nB) y", "gold": "A", "response": "[ANSWER: A]"}


def test_an_encoded_lone_surrogate_rejects_its_line_alone(tmp_path):
    bad = json.dumps({**GOOD, "question": "Q1?"}).encode().replace(b"[ANSWER", b"\xed\xa0\x80 [A")
    log = tmp_path / "logs" / "a.jsonl"
    log.parent.mkdir()
    log.write_bytes(bad + b"\n" + json.dumps({**GOOD, "question": "Q2?"}).encode() + b"\n")
    write_jsonl(tmp_path / "logs" / "b.jsonl", [{**GOOD, "question": "Q3?"}])
    out = cli("import", "jsonl", str(tmp_path / "logs"), "--store", str(tmp_path / "s"))
    assert out.returncode == 1  # a rejected record
    assert "a.jsonl:1: not UTF-8 text" in out.stdout
    assert "PanicException" not in out.stdout + out.stderr
    assert Store(tmp_path / "s").items().collect().height == 2  # Q2 and the other file's Q3


def test_a_fifo_and_a_link_to_a_device_are_skipped_not_waited_on(tmp_path):
    logs = tmp_path / "logs"
    write_jsonl(logs / "good.jsonl", [GOOD])
    os.mkfifo(logs / "pipe.jsonl")
    (logs / "zero.jsonl").symlink_to("/dev/zero")
    out = cli("import", "jsonl", str(logs), "--store", str(tmp_path / "s"))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "pipe.jsonl: not a regular file: a FIFO" in out.stdout
    assert "zero.jsonl: not a regular file: a character device (through a symbolic link)" in (
        out.stdout
    )
    assert Store(tmp_path / "s").items().collect().height == 1
    named = cli("import", "jsonl", str(logs / "zero.jsonl"), "--store", str(tmp_path / "t"))
    assert named.returncode == 1 and "character device" in named.stdout


def test_a_line_over_the_limit_is_rejected_before_parsing(tmp_path):
    huge = {**GOOD, "question": "Q big?", "response": "x" * (3 * 2**20)}
    log = write_jsonl(tmp_path / "log.jsonl", [huge, GOOD])
    out = cli("import", "jsonl", str(log), "--store", str(tmp_path / "s"), "--max-line-mb", "1")
    assert out.returncode == 1
    assert "log.jsonl:1: line of 3,145,793 bytes is over" in out.stdout
    assert "--max-line-mb" in out.stdout
    assert Store(tmp_path / "s").items().collect().height == 1
    raised = cli("import", "jsonl", str(log), "--store", str(tmp_path / "s"), "--max-line-mb", "4")
    assert raised.returncode == 0 and "1 new" in raised.stdout


def test_a_file_over_the_limit_is_skipped_and_named(tmp_path):
    log = write_jsonl(tmp_path / "log.jsonl", [GOOD] * 3)
    report = import_logs("jsonl", log, tmp_path / "s", max_file_bytes=100)
    assert report.failed == (str(log),)
    assert "over the limit of 100 bytes" in report.skipped[0][1]
    with pytest.raises(ValueError, match="max_line_bytes"):
        import_logs("jsonl", log, tmp_path / "s", max_line_bytes=0)
    assert ImportOptions().max_line_bytes == 64 * 2**20


def test_upper_case_suffixes_are_found_and_other_files_listed(tmp_path):
    root = tmp_path / "logs" / "gpt4o"
    chat = [{"question": "Q?\nA) x\nB) y", "response": "[ANSWER: A]", "gold": "A",
             "correct": True}]  # fmt: skip
    root.mkdir(parents=True)
    (root / "104_chatlog_1700000000.JSON").write_text(json.dumps(chat))
    (root / "notes.md").write_text("# run notes\n")
    out = cli("import", "mtbbench", str(tmp_path / "logs"), "--store", str(tmp_path / "s"))
    assert "104_chatlog_1700000000.JSON" in out.stdout + out.stderr
    assert "1 seen" in out.stdout or "imported" in out.stdout
    write_jsonl(tmp_path / "j" / "RUN.JSONL", [GOOD])
    (tmp_path / "j" / "README.txt").write_text("about the run\n")
    out = cli("import", "jsonl", str(tmp_path / "j"), "--store", str(tmp_path / "t"))
    assert out.returncode == 0 and "1 new" in out.stdout
    assert "passed over (1, not logs of this format)" in out.stdout and "README.txt" in out.stdout


def test_a_refused_or_empty_import_leaves_no_store_folder(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(GOOD) + "\nnot json\n")
    out = cli("import", "jsonl", str(log), "--store", str(tmp_path / "new"), "--strict")
    assert out.returncode == 2 and "log.jsonl:2" in out.stderr
    assert not (tmp_path / "new").exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("nope\n")
    out = cli("import", "jsonl", str(bad), "--store", str(tmp_path / "new"))
    assert out.returncode == 1 and not (tmp_path / "new").exists()


def test_a_missing_input_is_named_and_the_others_imported(tmp_path):
    log = write_jsonl(tmp_path / "log.jsonl", [GOOD])
    gone = tmp_path / "typo.jsonl"
    out = cli("import", "jsonl", str(log), str(gone), "--store", str(tmp_path / "s"))
    assert out.returncode == 1
    assert f"{gone}: no such file or directory" in out.stdout and "1 new" in out.stdout
    out = cli("import", "jsonl", str(gone), "--store", str(tmp_path / "t"))
    assert out.returncode == 2 and "typo.jsonl: no such file or directory" in out.stderr
