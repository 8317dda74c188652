"""Streaming imports: files read in blocks, imports committed in batches, results unchanged.

An import of more input than ``_batch.BATCH_BYTES`` is committed in several batches, and a
JSON-lines file larger than ``jsonl.BLOCK_BYTES`` is read in blocks of whole lines and given
in pieces. Both bounds are made tiny here so that small inputs take every path; the store's
rows and the report's counts must equal those of the same import made in one batch.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import polars as pl
import pytest
from test_traj_import import logs  # noqa: F401 - the MTBBench fixture
from tumorboard.errors import InvalidArgumentError
from tumorboard.traj import Store, import_logs
from tumorboard.traj.importers import _batch, _jsonl_read, jsonl
from tumorboard.traj.importers._jsonl_read import _drop_long_lines, _numbered_lines, read_blocks

COUNTS = ("n_items", "n_new", "n_replaced", "n_unchanged", "n_events", "n_records")


def _rows(store: Path) -> dict[str, list[tuple]]:
    """Every stored row of every table, sorted (the import time and batch id left out)."""
    st = Store(store)
    out = {}
    for table in ("runs", "items", "events"):
        df = getattr(st, table)().collect()
        df = df.select(sorted(c for c in df.columns if c not in ("imported_at", "batch")))
        out[table] = sorted(df.rows(), key=repr)
    return out


def _small_bounds(monkeypatch, *, batch: int, block: int) -> None:
    monkeypatch.setattr(_batch, "BATCH_BYTES", batch)
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", block)


def _lines(n: int, seed: int = 0) -> list[str]:
    """MTBBench-style answer lines, some without ids (keyed by content), a few bad."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        rec = {
            "model": f"m{i % 3}",
            "patient_id": f"P{i % 17}",
            "task": f"t{i % 4}",
            "question": f"Q{i % 40}: which?\nA) yes\nB) no",
            "gold": rng.choice(["A) yes", "B) no"]),
            "response": rng.choice(["[ANSWER: A) yes]", "[ANSWER: B) no]", "unsure"]),
        }
        if i % 5:
            rec["id"] = f"q{i}"
        out.append(json.dumps(rec))
    out[7] = "{not json"
    out[20] = ""  # a blank line
    out[33] = json.dumps({"model": "m0", "question": "x" * 3000, "id": "long"})  # over the bound
    return out


def test_numbered_lines_keeps_every_line_that_is_not_blank():
    # the fast test (the smallest line starts above b" ") and the line-by-line one agree
    rng = random.Random(5)
    starts = [b"{", b"x", b" ", b"\t", b"\r", b"\x0b", b"\x0c", b"\x01", b"\x7f", b"", b"\xc3"]
    for _ in range(200):
        lines = [rng.choice(starts) + b"a" * rng.randint(0, 3) for _ in range(rng.randint(0, 6))]
        raw = b"\n".join(lines) + rng.choice([b"", b"\n", b"\n \n"])
        numbers, kept = _numbered_lines(raw, 4)
        want = [(i, x) for i, x in enumerate(raw.split(b"\n"), 4) if x.strip()]
        assert list(zip(numbers, kept, strict=True)) == want, raw


def _sparse_lines(seed: int) -> list[str]:
    """Return records that leave optional fields out, some only on late lines, one key escaped."""
    rng = random.Random(seed)
    out = []
    for i in range(300):
        answer = rng.choice(["[ANSWER: A]", "[ANSWER: B]", "B"])
        rec = {"id": f"q{i}", "model": f"m{i % 3}", "question": f"Q{i % 7}?\nA) x\nB) y",
               "gold": "A", "response": answer}  # fmt: skip
        if i == 299:
            rec["latency_s"] = 1.5  # one key only on the last line
        if i % 50 == 7:
            rec["flags"] = ["x"]
        if i % 97 == 3:
            rec["meta"] = {"task": "t"}
        line = json.dumps(rec)
        if seed == 2 and i % 3 == 0:  # a key JSON may spell with an escape other than \u
            line = line[:-1] + f', "pat\\/id": "p{i % 5}"}}'
        out.append(line)
    if seed % 2:  # a key spelled with an escape on one line
        out[150] = out[150].replace('"model"', '"\\u006dodel"', 1)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bulk_reader_equals_the_line_reader_on_sparse_and_escaped_keys(tmp_path, monkeypatch, seed):
    # the compiled bulk reader reads keys that occur late, escaped (\u006d, \/) or nested; its
    # rows, warnings and rejections are the line reader's
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(_sparse_lines(seed)) + "\n")
    field_map = {"item_id": "id", "task": "meta.task", "patient_id": "pat/id"}
    kw = {"field_map": field_map, "benchmark": "mtbbench"}
    full = _jsonl_read._read_bulk
    used: list[bool] = []
    monkeypatch.setattr(
        jsonl, "_read_bulk", lambda *a: used.append(full(*a) is not None) or full(*a)
    )
    bulk = import_logs("jsonl", log, tmp_path / "bulk", **kw)
    assert used == [True]  # read in bulk, escaped keys included
    monkeypatch.setattr(jsonl, "_read_bulk", lambda *a: None)
    lines = import_logs("jsonl", log, tmp_path / "lines", **kw)
    assert _rows(tmp_path / "bulk") == _rows(tmp_path / "lines")
    assert bulk.warnings == lines.warnings and bulk.rejected == lines.rejected
    assert bulk.n_items == lines.n_items == 300
    if seed == 2:  # the escaped key was read
        patients = Store(tmp_path / "bulk").items().collect().get_column("patient_id")
        assert patients.null_count() == 200


@pytest.mark.parametrize("first", [10, 1010])
def test_a_few_bad_lines_are_read_by_the_line_reader_alone(tmp_path, monkeypatch, first):
    # a damaged line, a repeated key, events, a config and a lone surrogate among good lines:
    # the compiled reader reads the good lines and the events, the line reader the other five
    # (naming the bad ones), and the import equals the line reader's of the whole file,
    # rejections in order;
    # the keys listed in warnings are the first records' (all read in bulk from 1010 on)
    lines = [x.replace('"id": "q', f'"id": "c{k}q', 1) for k in range(8) for x in _sparse_lines(0)]
    lines = [x.replace(', "response": "[ANSWER: B]"', "") for x in lines]  # warns: no response
    bad = [first + k for k in (0, 190, 490, 690, 890, 1090)]
    lines[bad[0]] = lines[bad[0]][:-5]  # truncated
    lines[bad[1]] = lines[bad[1]][:-1] + ', "model": "m9"}'  # a repeated key (the last wins)
    lines[bad[2]] = lines[bad[2]][:-1] + ', "events": [{"kind": "message", "output": "hi"}]}'
    lines[bad[3]] = lines[bad[3]][:-1] + ', "config": {"t": 0.5}}'
    lines[bad[4]] = lines[bad[4]][:-1] + ', "latency_s": "slow"}'  # a value of the wrong type
    lines[bad[5]] = lines[bad[5]].replace('"gold": "A"', '"gold": "\\ud800"')
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(lines) + "\n")
    given: list[list[int]] = []
    full = _jsonl_read._patch_given_up
    monkeypatch.setattr(
        jsonl, "_patch_given_up", lambda *a: given.append(a[-2].tolist()) or full(*a)
    )
    kw = {"benchmark": "mtbbench", "field_map": {"item_id": "id"}}
    mixed = import_logs("jsonl", log, tmp_path / "mixed", **kw)
    assert given == [[b for b in bad if b != bad[2]]]  # events are read in bulk
    monkeypatch.setattr(jsonl, "_read_bulk", lambda *a: None)
    whole = import_logs("jsonl", log, tmp_path / "whole", **kw)
    assert _rows(tmp_path / "mixed") == _rows(tmp_path / "whole")
    assert mixed.rejected == whole.rejected and len(mixed.rejected) == 3
    assert [int(r[0].rsplit(":", 1)[1]) - 1 for r in mixed.rejected] == [bad[0], *bad[4:]]
    assert mixed.warnings == whole.warnings and mixed.n_items == whole.n_items
    assert any("keys seen" in w[1] for w in mixed.warnings)
    assert mixed.n_events == whole.n_events == 1


def test_events_read_in_bulk_equal_the_line_readers_in_order(tmp_path, monkeypatch):
    # every line with events (tool inputs as objects with unsorted keys and floats, JSON text,
    # plain text; outputs of any type), some lines given up (a bad event kind, a config): the
    # stored events, in their stored order, are the line reader's
    rng = random.Random(11)
    lines = []
    for i in range(600):
        events = []
        for j in range(rng.randint(0, 4)):
            e = {"kind": rng.choice(["message", "tool_call", "observation", "answer"]),
                 "role": rng.choice(["user", "assistant", None]),
                 "input": rng.choice([{"b": 1.5, "a": [1e-7, "é", None]}, '{"x": 1}', "ls -l",
                                      None, 3, [True, {"z": 2, "y": 0.1}]]),
                 "output": rng.choice(["ok", {"rows": 2}, None, 1e16, ""]),
                 "latency_s": rng.choice([None, 0.25, 2])}  # fmt: skip
            if rng.random() < 0.3:
                e["step"] = j * 10
            if rng.random() < 0.2:
                e["tool"] = "search"
            events.append(e)
        rec = {"id": f"q{i}", "model": f"m{i % 3}", "question": "Q?\nA) x\nB) y",
               "gold": "A", "response": "[ANSWER: A]", "events": events}  # fmt: skip
        if i % 97 == 5:
            rec["events"] = [{"kind": "nonsense"}]  # rejected by the line reader
        if i % 89 == 7:
            rec["config"] = {"t": i}
        lines.append(json.dumps(rec))
    log = tmp_path / "events.jsonl"
    log.write_text("\n".join(lines) + "\n")
    kw = {"benchmark": "mtbbench", "field_map": {"item_id": "id"}}
    bulk = import_logs("jsonl", log, tmp_path / "bulk", **kw)
    monkeypatch.setattr(jsonl, "_read_bulk", lambda *a: None)
    whole = import_logs("jsonl", log, tmp_path / "whole", **kw)
    assert bulk.n_events == whole.n_events > 800
    assert bulk.rejected == whole.rejected and len(bulk.rejected) == 7
    assert bulk.warnings == whole.warnings
    assert _rows(tmp_path / "bulk") == _rows(tmp_path / "whole")

    def stored_order(path):
        df = Store(path).events().collect()
        return df.select(sorted(c for c in df.columns if c != "batch")).rows()

    assert stored_order(tmp_path / "bulk") == stored_order(tmp_path / "whole")


def test_read_blocks_equals_splitting_the_whole_file():
    rng = random.Random(3)
    lines = [b"x" * rng.choice([0, 1, 5, 30, 90, 200]) for _ in range(300)]
    raw = b"\n".join(lines) + rng.choice([b"", b"\n"])
    limit = 100
    numbers, kept = _numbered_lines(raw)
    numbers, kept, rejected = _drop_long_lines(Path("f"), numbers, kept, limit)
    for block in (7, 64, 101, 1000, 10**6):
        got_n: list[int] = []
        got: list[bytes] = []
        got_rej: list[tuple[str, str]] = []
        for first, body, long_lines in read_blocks(
            Path("f"), io.BytesIO(raw), block_bytes=block, max_line_bytes=limit
        ):
            got_rej += long_lines
            n, k = _numbered_lines(body, first)
            n, k, r = _drop_long_lines(Path("f"), n, k, limit)
            got_n += list(n)
            got += k
            got_rej += r
        assert got_n == list(numbers) and got == list(kept), block
        assert sorted(got_rej) == sorted(rejected), block


def test_streamed_jsonl_import_equals_one_batch(tmp_path, monkeypatch):
    src = tmp_path / "logs"
    src.mkdir()
    body = _lines(400)
    (src / "a.jsonl").write_text("\n".join(body) + "\n")
    (src / "b.jsonl").write_text("\n".join(_lines(150, seed=1)))
    whole = import_logs("jsonl", src, tmp_path / "whole", max_line_bytes=2000)
    _small_bounds(monkeypatch, batch=8_000, block=4_000)
    streamed = import_logs("jsonl", src, tmp_path / "streamed", max_line_bytes=2000)
    assert _rows(tmp_path / "streamed") == _rows(tmp_path / "whole")
    for k in COUNTS:
        assert getattr(streamed, k) == getattr(whole, k), k
    assert sorted(streamed.rejected) == sorted(whole.rejected)
    assert any("line of 3,0" in why and where.endswith("a.jsonl:34") for where, why in
               streamed.rejected)  # fmt: skip
    assert streamed.imported == whole.imported and streamed.runs == whole.runs
    assert len(Store(tmp_path / "streamed").parts("items")) > 2  # several batches committed
    # a rerun with the small bounds adds nothing and leaves the rows as they are (keys that
    # two files share are written again: the earlier file's batch replaces the later one's)
    again = import_logs("jsonl", src, tmp_path / "streamed", max_line_bytes=2000)
    assert again.n_new == 0 and again.n_items + again.n_unchanged >= whole.n_items
    assert _rows(tmp_path / "streamed") == _rows(tmp_path / "whole")
    # without keys shared between files a rerun writes nothing
    single = tmp_path / "single"
    single.mkdir()
    (single / "a.jsonl").write_text("\n".join(body) + "\n")
    import_logs("jsonl", single, tmp_path / "s", max_line_bytes=2000)
    rerun = import_logs("jsonl", single, tmp_path / "s", max_line_bytes=2000)
    assert (rerun.n_new, rerun.n_replaced, rerun.n_items) == (0, 0, 0)
    assert rerun.n_unchanged > 300


def test_later_batch_replaces_an_earlier_one_like_a_later_line(tmp_path, monkeypatch):
    src = tmp_path / "logs"
    src.mkdir()
    rec = {"model": "m", "patient_id": "P1", "id": "q1", "gold": "A) yes", "response": "A"}
    first = [json.dumps({**rec, "id": f"q{i}", "question": f"Q{i}?\nA) yes\nB) no"})
             for i in range(60)]  # fmt: skip
    # the same key later, for another question: within one import the later record wins
    last = json.dumps({**rec, "question": "Another?\nA) yes\nB) no", "response": "B"})
    (src / "a.jsonl").write_text("\n".join(first) + "\n")
    (src / "z.jsonl").write_text(last + "\n")
    whole = import_logs("jsonl", src, tmp_path / "whole")
    _small_bounds(monkeypatch, batch=2_000, block=1_000)
    streamed = import_logs("jsonl", src, tmp_path / "streamed")
    assert _rows(tmp_path / "streamed") == _rows(tmp_path / "whole")
    for k in ("n_items", "n_new", "n_replaced", "n_unchanged"):
        assert (
            getattr(streamed, k) == getattr(whole, k) == {"n_items": 60, "n_new": 60}.get(k, 0)
        ), k
    assert any("replaced by" in why and "z.jsonl" in why for _, why in streamed.warnings)
    items = Store(tmp_path / "streamed").items().filter(pl.col("item_id") == "q1").collect()
    assert items.get_column("question").to_list() == ["Another?\nA) yes\nB) no"]


def test_rows_of_earlier_batches_are_followed_into_copied_parts(tmp_path, monkeypatch):
    # An import tells its own earlier rows from the store's by the parts that hold them. Here a
    # batch replaces a row of an earlier batch's part (the part is copied without it) and a
    # later batch a row of that copy; another batch replaces a row that was in the store
    # before the import (its part's copy holds rows of the store, not of this import).
    rec = {"model": "m", "patient_id": "P1", "gold": "A) yes", "response": "A"}

    def line(i: int, question: str = "Q") -> str:
        return json.dumps({**rec, "id": f"q{i}", "question": f"{question}{i}?\nA) yes\nB) no"})

    before = tmp_path / "before.jsonl"
    before.write_text("\n".join(line(i) for i in range(100, 130)) + "\n")
    src = tmp_path / "logs"
    src.mkdir()
    (src / "a.jsonl").write_text("\n".join(line(i) for i in range(60)) + "\n")
    for name, i in (("b.jsonl", 1), ("c.jsonl", 2), ("d.jsonl", 101), ("e.jsonl", 102)):
        (src / name).write_text(line(i, "Other") + "\n")
    reports = {}
    for how in ("whole", "batched"):
        import_logs("jsonl", before, tmp_path / how)
        if how == "batched":
            _small_bounds(monkeypatch, batch=100, block=1_000)
        reports[how] = import_logs("jsonl", src, tmp_path / how, replace=True)
    whole, batched = reports["whole"], reports["batched"]
    assert len(Store(tmp_path / "batched").parts("items")) > len(
        Store(tmp_path / "whole").parts("items")
    )  # several batches, with copies of replaced parts
    assert _rows(tmp_path / "batched") == _rows(tmp_path / "whole")
    for k in ("n_items", "n_new", "n_replaced", "n_unchanged"):
        assert getattr(batched, k) == getattr(whole, k), k
    # q1 and q2 are this import's own (60 new items); q101 and q102 were stored before
    assert (whole.n_items, whole.n_new, whole.n_replaced) == (62, 60, 2)
    warned = [why for _, why in batched.warnings if "replaced by" in why]
    assert any("c.jsonl" in why for why in warned) and any("b.jsonl" in why for why in warned)
    assert not any("d.jsonl" in why or "e.jsonl" in why for why in warned)


def test_mtbbench_in_batches_equals_one_batch(logs, tmp_path, monkeypatch):  # noqa: F811
    kw = {"model_map": logs.parent / "model_map.json"}
    whole = import_logs("mtbbench", logs, tmp_path / "whole", **kw)
    _small_bounds(monkeypatch, batch=10_000, block=1_000)
    batched = import_logs("mtbbench", logs, tmp_path / "batched", **kw)
    assert _rows(tmp_path / "batched") == _rows(tmp_path / "whole")
    for k in ("n_items", "n_events", "n_records"):
        assert getattr(batched, k) == getattr(whole, k), k
    assert batched.imported == whole.imported
    assert len(batched.skipped) == len(whole.skipped)


def test_strict_import_of_several_batches_writes_nothing_on_a_late_problem(tmp_path, monkeypatch):
    src = tmp_path / "logs"
    src.mkdir()
    good = [json.dumps({"model": "m", "id": f"q{i}", "correct": True}) for i in range(50)]
    (src / "a.jsonl").write_text("\n".join(good) + "\n")
    (src / "z.jsonl").write_text("\n".join(good[:5] + ["{broken"]) + "\n")
    _small_bounds(monkeypatch, batch=1_000, block=500)
    with pytest.raises(InvalidArgumentError, match="--strict.*nothing was imported"):
        import_logs("jsonl", src, tmp_path / "store", strict=True)
    assert not (tmp_path / "store").exists()
    report = import_logs("jsonl", src, tmp_path / "store")  # without strict: the good lines
    assert report.n_items == 50 and len(report.rejected) == 1


def test_a_killed_import_resumes_where_its_last_batch_ended(tmp_path, monkeypatch):
    from tumorboard.traj.importers import _commit

    src = tmp_path / "logs"
    src.mkdir()
    (src / "a.jsonl").write_text("\n".join(_lines(300)) + "\n")
    whole = import_logs("jsonl", src, tmp_path / "whole", max_line_bytes=2000)
    _small_bounds(monkeypatch, batch=8_000, block=4_000)
    real = _commit._write_isolated
    calls = []

    def killed_after_two(*args, **kw):
        if len(calls) == 2:
            raise KeyboardInterrupt  # the user's Ctrl-C after two batches were committed
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(_batch, "_write_isolated", killed_after_two)
    with pytest.raises(KeyboardInterrupt):
        import_logs("jsonl", src, tmp_path / "store", max_line_bytes=2000)
    partial = Store(tmp_path / "store").items().collect().height
    assert 0 < partial < whole.n_items  # the two committed batches are kept
    monkeypatch.setattr(_batch, "_write_isolated", real)
    rerun = import_logs("jsonl", src, tmp_path / "store", max_line_bytes=2000)
    assert rerun.n_unchanged == partial and rerun.n_new == whole.n_items - partial
    assert _rows(tmp_path / "store") == _rows(tmp_path / "whole")
