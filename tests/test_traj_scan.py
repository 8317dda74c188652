"""The JSON-lines importer's compiled pass (``_core.traj``) against Python's own answers.

``scan_document`` (what :func:`tumorboard._json.load_json` walks a parsed value for) is checked
against a byte-at-a-time Python oracle on hand-picked edges and random documents.
``line_digests`` is checked against ``hashlib.blake2b`` (RFC 7693) across the block boundaries
of the hash (0, 127, 128, 129, 256 bytes), four lanes at once and one at a time, and for any
thread count. The bulk reader itself is tested in test_jsonl_columns.py.
"""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pyarrow as pa
import pytest
from _scalar_paths import fast_and_scalar
from tumorboard import _core


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


EDGES = [
    b"",
    b'{"a": 1}\n{"b": 2}\n',
    b'  \t{"a": 1}\n\n\r\n{"b": [[{}]]}',
    b'null\n{"a": 1}',
    b'{"a": 1}\n  [1]',
    b'{"a": "\\ud800"}',
    b'{"a": "\\uDFFF"}',
    b'{"a": "\\ud7ff"}',
    b'{"a": "\\\\ud800"}',
    b'{"a": 1234567890123456789}',
    b'{"a": 123456789012345678}',
    b'{"a": 1e308}',
    b'{"a": 1E+400}',
    b'{"a": 1e-400}',
    b'{"a": "e000"}',
    b'{"a": "\xed\xa0\x80"}',  # an encoded lone surrogate
    b'{"a": "\xc0\xaf"}',  # overlong
    b'{"a": "\xf4\x90\x80\x80"}',  # past U+10FFFF
    b'{"a": "\xe2\x82"}',  # truncated
    '{"a": "é 中 😀"}'.encode(),
    b'{"a": 1}\n\xff',
]


def _hashlib_digest(fp: bytes, iid: str, pos: int, line: bytes) -> str:
    return hashlib.blake2b(b"\0".join([fp, iid.encode(), b"%d" % pos, line]),
                           digest_size=16).hexdigest()  # fmt: skip


@pytest.mark.parametrize("threads", [1, 2, 5])
def test_line_digests_equal_hashlib(threads):
    rng = np.random.default_rng(3)
    sizes = [0, 1, 90, 127, 128, 129, 255, 256, 257, 1000, *rng.integers(0, 600, 200).tolist()]
    lines = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in sizes]
    ids = [f"q{i}-é" if i % 3 else "" for i in range(len(lines))]
    pos = np.arange(len(lines), dtype=np.int64) - 5
    fp = b"options-fingerprint"
    got, scalar = fast_and_scalar(lambda: _core.traj.line_digests(fp, ids, pos, lines, threads))
    want = [_hashlib_digest(fp, i, int(p), x) for i, p, x in zip(ids, pos, lines, strict=True)]
    assert got == want  # four lanes at once (AVX2) where the machine has it
    assert scalar == want  # one message at a time
    # the same lines as spans of one buffer, the ids as Arrow buffers, the digests as one buffer
    raw = b"".join(lines)
    ends = np.cumsum([len(x) for x in lines], dtype=np.int64)
    starts = ends - np.array([len(x) for x in lines], dtype=np.int64)
    arr = pa.array(ids, type=pa.large_string())
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)
    hexed = _core.traj.line_digests(
        fp, (offsets, data, None), pos, (raw, starts, ends), threads, as_buffer=True
    )
    assert bytes(hexed).decode() == "".join(want)


def test_line_digests_reject_mismatched_lengths():
    from tumorboard.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="same length"):
        _core.traj.line_digests(b"", ["a"], np.zeros(2, np.int64), [b"x"], 1)


def _depth(value) -> int:
    """Nesting levels of arrays and objects of a parsed value (a top-level list: 1)."""
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


DOCUMENTS = [*EDGES, b'["[[[{", {"a": "]]\\"[["}, [[[]]]]', b'"\\\\"', b'{"a": [1, [2, [3]]]}',
             b'[' * 150 + b']' * 150, b'{"x": "\\u00e9\\"{{{"}']  # fmt: skip


@pytest.mark.parametrize("raw", DOCUMENTS)
def test_scan_document_depth_and_limits(raw):
    """Exact depth; strict UTF-8; nothing past a limit goes unflagged (strings are text)."""
    import json

    from tumorboard import _json

    may_break, utf8, depth = _core.traj.scan_document(raw)
    assert utf8 == _utf8(raw)
    try:
        value = json.loads(raw)
    except ValueError:
        return  # not JSON: the depth is only a bound
    assert depth == _depth(value)
    if utf8 and not may_break:
        _json._check_value(value, 10**6)  # the walk finds nothing the scan did not flag


@pytest.mark.parametrize(
    ("raw", "flagged"),
    [(b'{"id": "3e000", "n": "12345678901234567890"}', False), (b'{"a": 1e400}', True),
     (b'{"a": 1E+400}', True), (b'{"a": 1e-400}', False), (b'["\\\\ud800"]', False),
     (b'["\\ud800"]', True), (b'{"a": 12345678901234567890}', True), (b'[1.5e30, 7]', False),
     (b'[0.0007203610002761707]', False), (b'[12345678901234567890.5]', True)],
)  # fmt: skip
def test_scan_document_reads_strings_as_text(raw, flagged):
    assert _core.traj.scan_document(raw)[0] is flagged


def _document_oracle(raw: bytes) -> tuple[bool, bool, int]:
    """scan_document's three answers, a byte at a time (the reference for its fast paths)."""
    try:
        raw.decode("utf-8")
        utf8 = True
    except UnicodeDecodeError:
        utf8 = False
    may_break, depth, deepest, in_string, i, n = False, 0, 0, False, 0, len(raw)
    digits = b"0123456789"
    while i < n:
        c = raw[i : i + 1]
        if in_string:
            if c == b"\\":
                high = raw[i + 3 : i + 4]
                if i + 3 < n and raw[i + 1 : i + 3] in (b"ud", b"uD") and high in b"89abcdefABCDEF":
                    may_break = True
                i += 2
                continue
            in_string = c != b'"'
        elif c == b'"':
            in_string = True
        elif c in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif c in (b"]", b"}"):
            depth -= 1
        elif c in digits:
            start = i
            while i + 1 < n and raw[i + 1 : i + 2] in digits:
                i += 1
            run = i - start + 1
            if run >= 19 and raw[start - 1 : start] != b".":
                may_break = True
            before = raw[start - 1 : start] if start else b""
            exponent = before in (b"e", b"E")
            signed = before == b"+" and start >= 2 and raw[start - 2 : start - 1] in (b"e", b"E")
            if run >= 3 and (exponent or signed):
                may_break = True
        i += 1
    return may_break, utf8, deepest


def test_scan_document_long_strings_equal_a_byte_at_a_time():
    # strings are skipped eight bytes at a time up to a quote or a backslash, and ASCII is
    # validated eight bytes at a time: documents with long strings whose quotes, escapes,
    # surrogate escapes and multi-byte (or broken) UTF-8 fall at every offset of a word
    rng = random.Random(23)
    pieces = [b"a" * 9, b"\\\"", b"\\\\", b"\\ud83d", b"\\uDC00", b"\xc3\xa9", b"\xe2\x82\xac",
              b"\xf0\x9f\x98\x80", b"\xed\xa0\x80", b"\xc3", b"\x80", b"[{", b"1e400", b" ",
              b"12345678901234567890", b"x" * 17]  # fmt: skip
    for _ in range(400):
        body = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        for raw in (b'["' + b"z" * rng.randint(0, 9) + body + b'", [1, {"k": 2}]]',
                    b"[" + body + b"]", b'{"a": "' + body):  # fmt: skip
            may_break, utf8, depth = _core.traj.scan_document(raw)
            assert (may_break, utf8, depth) == _document_oracle(raw), raw


def test_load_json_fast_path_equals_the_checked_path(monkeypatch):
    """``load_json`` gives the same value or the same error with and without its compiled scan."""
    import json

    from tumorboard import _json
    from tumorboard.errors import InvalidArgumentError

    rng = random.Random(11)
    alphabet = [b"{", b"}", b"[", b"]", b'"', b"\\", b"u", b"d", b"8", b"0", b"1", b"9", b"e",
                b"E", b"+", b"-", b".", b":", b",", b" ", b"\n", b"a", b"N", b"\xed\xa0\x80",
                b"\xc3\xa9", b"null", b"true", b'"k"', b'"v"']  # fmt: skip
    docs = list(DOCUMENTS) + [
        json.dumps({"q": "x" * 50, "n": [1, 2.5, -3e10], "d": {"e": [[{}]]}}).encode(),
        b'{"a": NaN}', b"\xef\xbb\xbf{\"a\": 1}", b'[' * 101 + b']' * 101,
    ]  # fmt: skip
    docs += [b"".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 30)))
             for _ in range(1500)]  # fmt: skip

    def outcome(raw):
        try:
            return ("ok", _json.load_json(raw))
        except InvalidArgumentError as exc:
            return ("error", str(exc))

    fast = [outcome(d) for d in docs]
    monkeypatch.setattr(_json, "_checked_fast", lambda raw, max_depth: False)
    slow = [outcome(d) for d in docs]
    assert fast == slow
    assert sum(kind == "ok" for kind, _ in fast) > 20
