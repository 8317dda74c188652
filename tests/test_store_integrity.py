"""A store that cannot lie (issue 23, item 3): page checksums and readers racing compaction.

* One byte flipped inside a data page of a part: ``tumorboard store check`` names the part and
  exits 1, ``tumorboard score`` exits 2 with one line naming it (never 70, "this is a bug"),
  ``Store.compact()`` raises :class:`CorruptStoreError` naming it and the store reads as before.
* A part written without page checksums (a store from before them) still reads, checks clean
  and compacts; a flipped byte in such a part is still named by ``check`` when polars cannot
  decode it.
* A reader loop in this process while another process compacts the store over and over: no
  read fails with ``FileNotFoundError`` or ``CorruptStoreError``, and every read sees every row
  exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from tumorboard.score import store_frame
from tumorboard.traj import CorruptStoreError, Recorder, Store
from tumorboard.traj._pages import PageChecksumError, verify_page_checksums

SUBPROCESS_PYTHONPATH = os.pathsep.join(p for p in sys.path if p)
OPTIONS = ["A) yes", "B) no"]


def record(store: Store, run_id: str, n: int, *, flush_every: int) -> None:
    """Record ``n`` MTBBench items in one run (half right), one part per ``flush_every``."""
    with Recorder(store, benchmark="mtbbench", model=run_id, run_id=run_id,
                  flush_every=flush_every) as rec:  # fmt: skip
        for i in range(n):
            with rec.item(patient_id=f"p{i % 3}", item_id=f"{run_id}-{i}", task="t",
                          options=OPTIONS, gold="A") as it:  # fmt: skip
                it.message("assistant", f"thinking about item {i} " * 20)
                it.answer("A" if i % 2 else "B")


def flip_data_page_byte(part: Path, column: str = "response") -> int:
    """Flip one byte in the middle of ``column``'s first column chunk; return its offset."""
    meta = pq.ParquetFile(part).metadata
    group = meta.row_group(0)
    (chunk,) = [group.column(c) for c in range(group.num_columns)
                if group.column(c).path_in_schema == column]  # fmt: skip
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    offset = start + chunk.total_compressed_size // 2
    data = bytearray(part.read_bytes())
    data[offset] ^= 0x5A
    part.write_bytes(bytes(data))
    return offset


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``tumorboard ARGS`` in a subprocess, as a user would."""
    env = {**os.environ, "PYTHONPATH": SUBPROCESS_PYTHONPATH}
    return subprocess.run([sys.executable, "-m", "tumorboard.cli", *args], capture_output=True,
                          text=True, env=env, timeout=120)  # fmt: skip


@pytest.fixture
def store(tmp_path) -> Store:
    st = Store(tmp_path / "store", fsync=False)
    record(st, "m1", 30, flush_every=10)
    record(st, "m2", 30, flush_every=15)
    return st


def test_parts_carry_page_checksums_that_match(store):
    parts = store.parts("items") + store.parts("events") + store.parts("runs")
    assert len(store.parts("items")) == 5 and len(parts) == 5 + 5 + 2
    for part in parts:
        found = verify_page_checksums(part)
        assert found.checked > 0 and found.unchecked == 0, part
    store.verify()  # every table, every part: no error
    store.verify(read=True)


def test_a_flipped_byte_is_named_by_check_score_and_compact(store):
    victim = store.parts("items")[1]
    before = store.read(lambda s: s.items().sort("item_id").collect())
    flip_data_page_byte(victim)
    with pytest.raises(PageChecksumError, match="CRC-32 mismatch"):
        verify_page_checksums(victim)

    check = cli("store", "check", str(store.path))
    assert check.returncode == 1, check.stdout + check.stderr
    assert f"problem: damaged: {victim}: page checksum mismatch" in check.stdout
    assert "no problems found" not in check.stdout
    (problem,) = store.check().problems
    assert problem.kind == "damaged" and problem.path == str(victim) and problem.rows == 10

    score = cli("score", str(store.path), "--n-resamples", "50")
    lines = score.stderr.strip().splitlines()
    assert score.returncode == 2, score.stderr
    assert len(lines) == 1 and lines[0].startswith("tumorboard: error: ")
    assert str(victim) in lines[0] and "page checksum mismatch" in lines[0]
    assert "this is a bug" not in score.stderr and "Traceback" not in score.stderr
    with pytest.raises(CorruptStoreError) as info:
        store_frame(store, "mtbbench")
    assert info.value.path == str(victim)

    with pytest.raises(CorruptStoreError) as info:
        store.compact(small_rows=100)
    assert info.value.path == str(victim) and "nothing was compacted" in str(info.value)
    # nothing lost: the same parts, the same rows, and the damaged part still named
    assert victim in store.parts("items") and len(store.parts("items")) == 5
    assert store.count("items") == 60
    undamaged = [p for p in store.parts("items") if p != victim]
    rows = pq.read_table(undamaged).num_rows
    assert rows == 50 and store.check().problems[0].path == str(victim)
    # repaired, the store reads the 50 rows of the intact parts, and nothing else changed
    assert store.check(repair=True).ok
    after = store.read(lambda s: s.items().sort("item_id").collect())
    lost = set(pq.read_table(Path(store.path / "_quarantine" / "items" / victim.name),
                             columns=["item_id"]).column("item_id").to_pylist())  # fmt: skip
    assert len(lost) == 10
    assert after.equals(before.filter(~before.get_column("item_id").is_in(list(lost))))


def test_a_store_without_page_checksums_still_reads_checks_and_compacts(tmp_path):
    old = Store(tmp_path / "old", fsync=False, page_checksums=False)
    record(old, "m1", 30, flush_every=10)
    part = old.parts("items")[0]
    assert verify_page_checksums(part).checked == 0 and verify_page_checksums(part).unchecked > 0
    reopened = Store(tmp_path / "old")  # writes checksums from now on, reads both kinds
    record(reopened, "m2", 10, flush_every=10)
    assert reopened.check().ok and not reopened.check().problems
    assert store_frame(reopened, "mtbbench").height == 40
    reopened.compact(small_rows=100)
    (merged,) = reopened.parts("items")
    assert verify_page_checksums(merged).checked > 0
    assert reopened.count("items") == 40 and reopened.check().ok


def test_a_damaged_footer_in_score_is_named_not_a_bug(store):
    victim = store.parts("runs")[0]
    data = bytearray(victim.read_bytes())
    data[-60:-8] = bytes(b ^ 0xFF for b in data[-60:-8])
    victim.write_bytes(bytes(data))
    score = cli("score", str(store.path), "--benchmark", "mtbbench", "--n-resamples", "50")
    assert score.returncode == 2 and str(victim) in score.stderr, score.stderr
    assert "this is a bug" not in score.stderr


READER = textwrap.dedent(
    """
    import sys, time
    sys.path[:0] = {python!r}
    from tumorboard.traj import Store
    from tumorboard.errors import StateError
    store = Store({root!r}, fsync=False)
    deadline = time.monotonic() + {seconds}
    rounds = 0
    while time.monotonic() < deadline or rounds < 5:
        try:
            n = store.compact(small_rows=10**6).rows_rewritten["items"]
        except StateError:  # another compaction holds the lock
            continue
        rounds += 1
    print("COMPACTED", rounds, flush=True)
    """
)

WRITER = textwrap.dedent(
    """
    import sys
    sys.path[:0] = {python!r}
    from tumorboard.traj import Recorder, Store
    store = Store({root!r}, fsync=False)
    for k in range({batches}):
        with Recorder(store, benchmark="mtbbench", model="w", run_id=f"w{{k}}",
                      flush_every=2) as rec:
            for i in range(4):
                with rec.item(patient_id="p", item_id=f"w{{k}}-{{i}}", task="t",
                              options=["A) x", "B) y"], gold="A") as it:
                    it.answer("A")
    print("WROTE", flush=True)
    """
)


def test_readers_never_fail_while_another_process_compacts(tmp_path):
    root = tmp_path / "store"
    st = Store(root, fsync=False)
    record(st, "base", 40, flush_every=2)  # 20 small parts: the first compaction merges them
    python = [p for p in sys.path if p]
    compactor = subprocess.Popen(
        [sys.executable, "-c", READER.format(python=python, root=str(root), seconds=3)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER.format(python=python, root=str(root), batches=25)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    reads = failures = 0
    seen = 40
    errors: list[str] = []
    deadline = time.monotonic() + 60  # a bound against a hang, not a timing assertion
    while (compactor.poll() is None or writer.poll() is None) and time.monotonic() < deadline:
        try:
            reader = Store(root, fsync=False)
            items = reader.read(lambda s: s.items().select("item_id").collect())
            frame = store_frame(reader, "mtbbench")
            count = reader.count("items")
        except (FileNotFoundError, CorruptStoreError) as exc:
            failures += 1
            errors.append(f"{type(exc).__name__}: {exc}")
            continue
        ids = items.get_column("item_id")
        assert ids.n_unique() == items.height >= seen  # no row twice, none lost
        assert frame.height >= seen and count >= seen
        seen = items.height
        reads += 1
    out_c, _ = compactor.communicate(timeout=60)
    out_w, _ = writer.communicate(timeout=60)
    assert compactor.returncode == 0 and out_c.startswith("COMPACTED"), out_c
    assert writer.returncode == 0 and out_w.strip() == "WROTE"
    assert failures == 0, errors[:3]
    assert reads > 0 and int(out_c.split()[1]) >= 5
    # the compactor (default retain_s) kept its sources for readers: no problem for a check
    # that keeps them as long (this test process's stores delete at once: tests/conftest.py)
    final = Store(root, retain_s=600)
    assert final.count("items") == 40 + 25 * 4 and final.check().ok


def test_compiled_page_walk_equals_the_python_reference(tmp_path):
    """The compiled walk (csrc/traj/pages.cpp) gives the Python walk's counts and errors.

    On every column chunk of a real part: intact, with each of many single bytes flipped (in
    headers and in page bodies), and truncated; plus zlib's CRC-32 on random bytes.
    """
    import random
    import zlib

    import pyarrow as pa
    import pyarrow.parquet as pq
    from tumorboard import _core
    from tumorboard.errors import PageChecksumError
    from tumorboard.traj import _pages

    path = tmp_path / "p.parquet"
    table = pa.table(
        {"a": list(range(3000)), "s": [f"text {i % 97}" * (i % 5) for i in range(3000)]}
    )
    pq.write_table(table, path, write_page_checksum=True, data_page_size=256, write_batch_size=100,
                   compression="zstd")  # fmt: skip
    rng = random.Random(7)
    for b in (b"", bytes(rng.randrange(256) for _ in range(5000))):
        assert _core.traj.crc32(b) == zlib.crc32(b)

    def outcome(fn, data):
        try:
            return fn(data, "c", 100)
        except PageChecksumError as exc:
            return str(exc)

    with open(path, "rb") as fh:
        meta = pq.ParquetFile(fh).metadata
        chunks = []
        for start, length, _ in _pages._chunk_ranges(meta):
            fh.seek(start)
            chunks.append(fh.read(length))
    assert sum(_pages._verify_chunk(c, "c", 0)[0] for c in chunks) > 10
    for data in chunks:
        cases = [data, data[: len(data) // 2], data[:3]]
        for _ in range(60):
            i = rng.randrange(len(data))
            cases.append(data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :])
        for case in cases:
            assert outcome(_pages._verify_chunk, case) == outcome(
                _pages._verify_chunk_python, memoryview(case)
            )
