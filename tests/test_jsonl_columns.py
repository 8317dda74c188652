"""The compiled bulk reader of JSON lines (``_core.traj.read_columns``) against its oracle.

The oracle is the line reader's own path: :func:`tumorboard._json.load_json` of each line, then
the dotted-key lookup and the field check of every field (``_jsonl_fields._get`` and
``_check``). Where the oracle accepts every line of a chunk, the compiled reader must give the
same values, field by field, and the keys of the first records as ``_keys_seen`` lists them;
where the oracle refuses a line, the reader must give up the chunk (the line reader then names
the line). The reader may also give up a chunk the oracle accepts, for the few reasons that are
cheaper to leave to the line reader (a repeated key, a number that underflows), never for
others. Lines are random records with every value type, escapes, surrogate pairs, number edges
and nesting, and random damage; every chunk is read on one and on three threads.
"""

from __future__ import annotations

import json
import math
import random
import struct

import numpy as np
import pytest
from tumorboard import _core
from tumorboard._json import MAX_JSON_DEPTH, load_json
from tumorboard.errors import InvalidArgumentError
from tumorboard.traj.importers._jsonl_fields import (
    _MISSING,
    _Bad,
    _check,
    _events,
    _get,
    _keys_seen,
)
from tumorboard.traj.importers._jsonl_read import (
    _CORE_KIND,
    Lines,
    _arrow_array,
    _events_table,
    _numbered_lines,
)
from tumorboard.traj.schema import EVENT_KINDS

SEED = 26
#: (field name, kind of _jsonl_fields, record key)
FIELDS = [
    ("item_id", "id", "id"),
    ("model", "str", "meta.model"),
    ("question", "str", "question"),
    ("gold", "gold", "gold"),
    ("tools", "bool", "tools"),
    ("epoch", "int", "epoch"),
    ("position", "int32", "position"),
    ("latency_s", "number", "latency_s"),
    ("hallucination", "flag", "hallucination"),
    ("options", "str_list", "options"),
    ("selection_ranks", "int_list", "ranks"),
    ("pred_box", "number_list", "box"),
    ("keypoint_hits", "bool_list", "hits"),
    ("config", "json", "config"),
]
#: Why the reader may give up a chunk the oracle accepts.
CONSERVATIVE = ("a repeated key", "a number outside a double's range", "a value of the wrong type")

_TEXTS = ["", "a", "é", "日本", "😀", 'q"uote', "back\\slash", "tab\there", "nl\nx", "\x00",
          "\u2028", "x" * 40, "\ud83d\ude00"]  # fmt: skip


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(_TEXTS) for _ in range(rng.randint(0, 3)))


def _number(rng: random.Random) -> object:
    return rng.choice([0, -0.0, 1, -1, 7, 2**31 - 1, -(2**31), 2**31, 2**53 + 1, 2**63 - 1,
                       -(2**63), 0.5, 1.0, -2.5e-3, 1e300, 5e-324, 0.1, 3.14159, 1e-7])  # fmt: skip


def _value(rng: random.Random, depth: int = 0) -> object:
    r = rng.random()
    if r < 0.25:
        return _text(rng)
    if r < 0.45:
        return _number(rng)
    if r < 0.55:
        return rng.choice([True, False, None])
    if r < 0.75 and depth < 3:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 3:
        return {_text(rng) or "k": _value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    return 1


def _field_value(rng: random.Random, kind: str) -> object:
    """Return a value of the field's kind most of the time, anything else sometimes."""
    if rng.random() < 0.01:
        return _value(rng)
    if rng.random() < 0.1:
        return None
    return {
        "id": lambda: rng.choice([_text(rng), rng.randint(-5, 10**6)]),
        "str": lambda: _text(rng),
        "gold": lambda: _text(rng),
        "bool": lambda: rng.choice([True, False]),
        "int": lambda: rng.choice([0, -3, 2**62, rng.randint(-100, 100)]),
        "int32": lambda: rng.choice([0, 2**31 - 1, -(2**31), rng.randint(-100, 100)]),
        "number": lambda: _number(rng),
        "flag": lambda: rng.choice([True, False, 0, 1, 0.25, 0.0]),
        "str_list": lambda: [_text(rng) for _ in range(rng.randint(0, 3))],
        "int_list": lambda: [rng.randint(-9, 9) for _ in range(rng.randint(0, 3))],
        "number_list": lambda: [_number(rng) for _ in range(rng.randint(0, 3))],
        "bool_list": lambda: [rng.choice([True, False]) for _ in range(rng.randint(0, 3))],
        "json": lambda: _value(rng),
    }[kind]()


def _record(rng: random.Random) -> dict:
    rec: dict = {}
    for _, kind, key in FIELDS:
        if kind == "json" and rng.random() < 0.9:
            continue  # a nested field sends the chunk to the line reader: mostly absent
        if rng.random() < 0.3:
            continue
        if "." in key:
            parent, child = key.split(".")
            rec.setdefault(parent, {} if rng.random() < 0.95 else "not an object")
            if isinstance(rec[parent], dict):
                rec[parent][child] = _field_value(rng, kind)
                if rng.random() < 0.3:
                    rec[parent]["other"] = _value(rng)
        else:
            rec[key] = _field_value(rng, kind)
    for _ in range(rng.randint(0, 2)):
        rec[_text(rng) or "extra"] = _value(rng)
    return rec


def _line(rng: random.Random) -> bytes:
    rec = _record(rng)
    text = json.dumps(rec, ensure_ascii=rng.random() < 0.5)
    r = rng.random()
    if r < 0.03:
        text = text[: rng.randint(0, len(text))]  # truncated
    elif r < 0.05:
        text = text.replace("1", "1e400", 1)  # past a double
    elif r < 0.07:
        text = text[:-1] + ', "id": "dup"}' if len(text) > 2 else text  # a repeated key
    elif r < 0.09:
        text = text[:-1] + (', "lone": "\\ud800"}' if len(text) > 2 else "")
    elif r < 0.10:
        text = "[" * 101 + "]" * 101
    elif r < 0.11:
        text = text.replace("true", "NaN", 1)
    elif r < 0.12:
        text = rng.choice(["null", "[1]", '"s"', "3", "{}x", "{,}", '{"a":1,}'])
    elif r < 0.13:
        text = text[:-1] + (', "n": 123456789012345678901}' if len(text) > 2 else "")
    elif r < 0.14:
        text = text[:-1] + (', "u": 1e-400}' if len(text) > 2 else "")
    elif r < 0.15:
        text = text[:-1] + (', "ctl": "a\tb"}' if len(text) > 2 else "")
    elif r < 0.16:
        text = text[:-1] + (', "x": 01}' if len(text) > 2 else "")
    raw = text.encode("utf-8", "surrogatepass")
    if rng.random() < 0.01:
        raw = raw.replace(b"{", b"{\xed\xa0\x80", 1)  # an encoded surrogate: not UTF-8
    if rng.random() < 0.1:
        raw = b" \t" + raw + b" \r"
    return raw


def _oracle(lines: list[bytes]) -> tuple[bool, dict[str, list], list[dict]]:
    """Return whether the line reader accepts every line, the checked values, the records."""
    columns: dict[str, list] = {f: [] for f, _, _ in FIELDS}
    records = []
    for line in lines:
        try:
            rec = load_json(line)
        except InvalidArgumentError:
            return False, {}, []
        if not isinstance(rec, dict):
            return False, {}, []
        records.append(rec)
        for f, kind, key in FIELDS:
            v = _get(rec, key)
            if kind == "json":
                if v is not _MISSING:
                    return False, {}, []
                continue
            try:
                columns[f].append(None if v is _MISSING else _check(f, kind, v))
            except _Bad:
                return False, {}, []
    return True, columns, records


def _read(lines: list[bytes], threads: int, sample: int = 1000):
    raw = b"\n".join(lines)
    numbers, spans = _numbered_lines(raw)
    assert len(spans) == len(lines)  # (no blank line generated)
    spec = [(key.split("."), _CORE_KIND.get(kind, "nested")) for _, kind, key in FIELDS]
    return spans, _core.traj.read_columns(
        spans.raw, spans.starts, spans.ends, spec, MAX_JSON_DEPTH, sample, threads=threads
    )


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b) or (a != a and b != b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b and type(a) is type(b)


@pytest.mark.parametrize("seed", range(6))
def test_read_columns_equals_load_json_and_the_field_checks(seed):
    rng = random.Random(SEED * 100 + seed)
    n_ok = n_refused = 0
    for _ in range(150):
        lines = [_line(rng) for _ in range(rng.randint(1, 6))]
        lines = [x for x in lines if x.strip()]
        if not lines:
            continue
        accepted, want, records = _oracle(lines)
        spans, (ok, reason, line, columns, seen, _, _) = _read(lines, 1)
        _, again = _read(lines, 3)
        assert again[0] == ok and (not ok or again[4] == seen)
        if not accepted:
            assert not ok, (lines, reason)
            n_refused += 1
            continue
        if not ok:
            assert reason in CONSERVATIVE, (lines, reason, line)
            continue
        n_ok += 1
        assert seen == _keys_seen(records)
        for (f, kind, _), column, column3 in zip(FIELDS, columns, again[3], strict=True):
            if kind == "json":
                continue
            got = _arrow_array(kind, len(lines), column).to_pylist()
            assert _arrow_array(kind, len(lines), column3).to_pylist() == got
            assert _same(got, want[f]), (f, lines, got, want[f])
    assert n_ok > 20 and n_refused > 30, (n_ok, n_refused)  # both sides exercised


@pytest.mark.parametrize("seed", range(3))
def test_read_columns_per_line_gives_up_only_lines_and_reads_the_rest(seed):
    # per_line: each line the oracle refuses is given up (a null row), every other line is
    # read as on its own, whatever lines surround it; on one thread and on three
    rng = random.Random(SEED * 1000 + seed)
    spec = [(key.split("."), _CORE_KIND.get(kind, "nested")) for _, kind, key in FIELDS]
    for _ in range(40):
        lines = [x for x in (_line(rng) for _ in range(rng.randint(1, 40))) if x.strip()]
        if not lines:
            continue
        raw = b"\n".join(lines)
        _, spans = _numbered_lines(raw)
        got = [_core.traj.read_columns(spans.raw, spans.starts, spans.ends, spec, MAX_JSON_DEPTH,
                                       0, per_line=True, threads=t) for t in (1, 3)]  # fmt: skip
        assert got[0][0] and got[1][0] and got[0][5].tolist() == got[1][5].tolist()
        given_up = set(got[0][5].tolist())
        for i, line in enumerate(lines):
            accepted, want, _ = _oracle([line])
            if not accepted:
                assert i in given_up, line
                continue
            for (f, kind, _), column in zip(FIELDS, got[0][3], strict=True):
                if kind == "json":
                    continue
                value = _arrow_array(kind, len(lines), column).to_pylist()[i]
                if i in given_up:
                    assert value is None
                else:
                    assert _same([value], want[f]), (f, line, value, want[f])


_KINDS = list(EVENT_KINDS)


def _event_value(rng: random.Random) -> object:
    """Return an event input or output: JSON text, other text, or any JSON value."""
    r = rng.random()
    if r < 0.25:
        return json.dumps(_value(rng), ensure_ascii=rng.random() < 0.5)  # text that is JSON
    if r < 0.35:
        return rng.choice(["NaN", "-Infinity", "1e999", '"\\ud800"', " [1, 2] ", "{'a': 1}",
                           "01", "1.", "", "tru", '{"a": 1,}', "\ufeff1"])  # fmt: skip
    if r < 0.55:
        return _text(rng)
    return _value(rng)


def _event(rng: random.Random, index: int) -> dict:
    e: dict = {"kind": rng.choice(_KINDS) if rng.random() < 0.97 else rng.choice(["x", 3, None])}
    for key, make in (
        ("step", lambda: rng.choice([index, 7, None, 2**31, -1])),
        ("role", lambda: rng.choice(["user", "assistant", None, 5])),
        ("tool", lambda: rng.choice(["conch", None, ""])),
        ("input", lambda: _event_value(rng)),
        ("output", lambda: _event_value(rng)),
        ("ok", lambda: rng.choice([True, False, None, 1])),
        ("error", lambda: rng.choice([None, "boom", _text(rng)])),
        ("latency_s", lambda: rng.choice([None, 0.5, 3, True, 1e-7])),
        ("extra", lambda: _value(rng)),
    ):
        if rng.random() < 0.5:
            e[key] = make()
    return e


def _events_line(rng: random.Random) -> bytes:
    rec = {"id": f"q{rng.randint(0, 9)}", "model": "m"}
    if rng.random() < 0.9:
        rec["events"] = [_event(rng, i) for i in range(rng.randint(0, 4))]
        if rng.random() < 0.03:
            rec["events"] = rng.choice([None, "x", [1], {}])
    text = json.dumps(rec, ensure_ascii=rng.random() < 0.5)
    if rng.random() < 0.05:  # an event key twice (json.loads keeps the last)
        text = text.replace('"kind": ', '"ok": true, "ok": null, "kind": ', 1)
    return text.encode("utf-8", "surrogatepass")


@pytest.mark.parametrize("seed", range(4))
def test_read_columns_events_equal_the_line_readers(seed):
    # the events the compiled reader reads are the line reader's (_jsonl_fields._events of
    # load_json's record): step, role, kind, tool, input (JSON text as it is, else json_text),
    # output, ok, error, latency_s, line by line; it gives up every line the line reader
    # refuses, and may give up one with a repeated key
    rng = random.Random(SEED * 7 + seed)
    spec = [(["id"], "id"), (["model"], "str"), (["events"], "events")]
    n_events = 0
    for _ in range(60):
        lines = [_events_line(rng) for _ in range(rng.randint(1, 25))]
        _, spans = _numbered_lines(b"\n".join(lines))
        got = [_core.traj.read_columns(spans.raw, spans.starts, spans.ends, spec, MAX_JSON_DEPTH,
                                       0, per_line=True, event_kinds=_KINDS, threads=t)
               for t in (1, 3)]  # fmt: skip
        tables = [None if g[6] is None else _events_table(g[6]).to_pylist() for g in got]
        assert tables[0] == tables[1] and got[0][5].tolist() == got[1][5].tolist()
        given_up = set(got[0][5].tolist())
        rows = tables[0] or []
        for i, line in enumerate(lines):
            mine = [{k: v for k, v in r.items() if k != "_line"} for r in rows if r["_line"] == i]
            try:
                want = _events(load_json(line).get("events"))
            except (InvalidArgumentError, _Bad):
                assert i in given_up, line
                continue
            if i in given_up:
                assert b'"ok": true, "ok": null' in line, line  # only a repeated key
                continue
            want = want or []
            assert len(mine) == len(want), line
            for a, b in zip(mine, want, strict=True):
                assert set(a) == set(b) and all(_same(a[k], b[k]) for k in b), (line, a, b)
            n_events += len(want)
    assert n_events > 200


def test_json_text_parts_equal_python():
    # json.dumps of text, repr of floats (random bit patterns too) and json.loads' verdict on
    # text, as the compiled reader writes and decides them
    rng = random.Random(SEED)
    for _ in range(20000):
        bits = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        x = rng.choice([bits, rng.uniform(-1e6, 1e6), 10.0 ** rng.randint(-330, 308),
                        rng.choice([0.0, -0.0, 1e16, 1e15, 1e-4, 1e-5, 5e-324])])  # fmt: skip
        if not math.isfinite(x):
            continue
        text = "".join(rng.choice(['{', '}', '[', ']', ',', ':', '"', '"a"', '1', '-', '0', '.',
                                   'e', '+', 'true', 'null', 'NaN', 'Infinity', ' ', '\n',
                                   '\\', '\\u', 'd800', 'é', '\x01', '\ufeff'])
                       for _ in range(rng.randint(0, 8)))  # fmt: skip
        quoted, rep, accepted = _core.traj.json_text_parts(text, x)
        assert quoted.decode() == json.dumps(text, ensure_ascii=False)
        assert rep == repr(x)
        try:
            json.loads(text)
            want = 1
        except ValueError:
            want = 0
        assert accepted == want, text
    assert _core.traj.json_text_parts("[" * 300 + "]" * 300, 0.0)[2] == -1  # Python's recursion


def test_read_columns_on_hand_made_edges():
    def one(text: str | bytes, key: str, kind: str):
        raw = text.encode() if isinstance(text, str) else text
        spans = Lines(raw, np.array([0]), np.array([len(raw)]))
        ok, reason, _, cols, _, _, _ = _core.traj.read_columns(
            raw, spans.starts, spans.ends, [(key.split("."), kind)], MAX_JSON_DEPTH, 1, threads=1
        )
        return _arrow_array(kind, 1, cols[0]).to_pylist()[0] if ok else reason

    assert one('{"a": -0}', "a", "id") == "0"  # str(int("-0"))
    assert one('{"a": -0}', "a", "number") == 0.0
    assert math.copysign(1, one('{"a": -0.0}', "a", "number")) == -1
    assert one('{"a": 9223372036854775807}', "a", "int") == 2**63 - 1
    assert one('{"a": -9223372036854775808}', "a", "int") == -(2**63)
    assert one('{"a": 9223372036854775808}', "a", "int").startswith("an integer outside")
    assert one('{"a": 2147483648}', "a", "int32") == "an integer outside 32 bits"
    assert one('{"a": 1.7976931348623157e308}', "a", "number") == 1.7976931348623157e308
    assert one('{"a": 1.8e308}', "a", "number") == "a number outside a double's range"
    assert one('{"a": "\\ud83d\\ude00\\u00e9\\/"}', "a", "str") == "😀é/"
    assert one('{"a": "\\ud83d"}', "a", "str") == "a lone surrogate escape"
    assert one('{"a": "\\ude00"}', "a", "str") == "a lone surrogate escape"
    assert one('{"a": "x\\u0000"}', "a", "str") == "x\x00"
    assert one(b'{"a": "\xed\xa0\x80"}', "a", "str") == "not UTF-8 text"
    assert one('{"\\u0061": "esc"}', "a", "str") == "esc"  # an escaped key is the key
    assert one('{"m": {"a": 1}}', "m.a", "int") == 1
    assert one('{"m": 3}', "m.a", "int") is None  # not an object: no value
    assert one('{"m": {"a": 1}, "m": {}}', "m.a", "int") == "a repeated key"
    assert one('{"a": true}', "a", "flag") == 1.0
    assert one('{"a": 1.5}', "a", "flag") == "a flag outside [0, 1]"
    assert one('{"a": [1, null]}', "a", "int_list") == "a list element of the wrong type"
    assert one('{"a": [1, 2.0]}', "a", "number_list") == [1.0, 2.0]
    assert one('{"a": {}}', "a", "nested") == "a field read as nested JSON"
    assert one('{"a": 1} x', "a", "int").startswith("not JSON")
    assert one("[1]", "a", "int") == "not a JSON object"
    assert one("{" + '"b":' * 0 + '"a": ' + "[" * 99 + "]" * 99 + "}", "b", "int") is None
    assert one('{"a": ' + "[" * 100 + "]" * 100 + "}", "b", "int") == "JSON nested too deep"


def test_line_spans_keep_every_line_that_is_not_blank():
    rng = random.Random(SEED)
    pieces = [b"{", b"x", b" ", b"\t", b"\r", b"\x0b", b"\x0c", b"", b"\xc3", b"\x85", b"\xa0"]
    for _ in range(300):
        lines = [b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 4)))
                 for _ in range(rng.randint(0, 6))]  # fmt: skip
        raw = b"\n".join(lines) + rng.choice([b"", b"\n", b"\n \n"])
        starts, ends, index = _core.traj.line_spans(raw)
        want = [(i, x) for i, x in enumerate(raw.split(b"\n")) if x.strip()]
        got = [(int(i), raw[a:b]) for i, a, b in zip(index, starts, ends, strict=True)]
        assert got == want, raw


def test_read_columns_rejects_spans_outside_the_data():
    read = _core.traj.read_columns
    with pytest.raises(InvalidArgumentError, match="not a span"):
        read(b"{}", np.array([0]), np.array([3]), [], MAX_JSON_DEPTH, 0, threads=1)
    with pytest.raises(InvalidArgumentError, match="unknown value 'text'"):
        read(b"{}", np.array([0]), np.array([2]), [(["a"], "text")], 100, 0, threads=1)
