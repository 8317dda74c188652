"""Crash points and corruption of the trajectory store (issue 18, items 4 and 5).

Oracles, all independent of the store's own bookkeeping:

* **Crash images.** While an operation runs (compaction, a Recorder flush, an import that
  replaces items, a repair), the store directory is copied just before every rename, link and
  unlink the process makes and at every named fault step: each copy is exactly what a SIGKILL
  at that instant leaves on disk. Each image must read as the rows before the operation or the
  rows after it (compared as multisets of item ids and contents, read from the Parquet files
  the test wrote), never a mix or a doubling, and must be recoverable (``check(repair=True)``)
  to a store that checks clean, with no file left that the manifest does not list.
* **Raised faults.** The same steps, each made to raise in turn: the store afterwards reads as
  before or after, and recovers.
* **SIGKILL.** A few steps kill a real subprocess (no cleanup code runs at all).
* **Corruption fuzz** (seeded): truncated, zero-byte, lost and stray parts, lost, damaged and
  zero-byte commit records and checkpoints, a damaged manifest. Every case either reads the
  original rows exactly (a stray is ignored, with a warning naming it), or raises a
  :class:`~tumorboard.errors.TumorboardError` naming the damaged file; the number of rows never
  changes without one of the two. ``check`` names the file, ``check(repair=True)`` leaves a
  store that reads without error and whose rows are the original ones minus exactly the rows of
  the parts it reports as lost.

A watchdog (``SIGALRM``) fails any single case that runs for over 60 s (a hang), which is not a
timing assertion: the cases take milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import tumorboard.traj._log as log_mod  # the test hooks: looked up there
import tumorboard.traj.store as store_mod
from tumorboard.errors import TumorboardError
from tumorboard.traj import (
    CorruptStoreError,
    Recorder,
    Store,
    StrayPartWarning,
    conform,
)

# the test process's own import path: the installed package under `make test`, a source
# checkout with its built extension in development
SUBPROCESS_PYTHONPATH = os.pathsep.join(p for p in sys.path if p)
SYS_PATH = [p for p in sys.path if p]
TABLES = ("runs", "items", "events", "imports")
#: a process id above Linux's largest (``pid_max`` is at most 2**22): its writer is dead
DEAD_PID = 2**22 + 7


class InjectedError(OSError):
    """The fault a test injects."""


@contextlib.contextmanager
def watchdog(seconds: int = 60):
    """Fail the case when it runs for more than ``seconds`` (a hang), via SIGALRM."""

    def hang(*_):
        raise AssertionError(f"hang: a store operation ran for more than {seconds} s")

    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ----------------------------------------------------------------------------- oracles


def disk_rows(root: Path, table: str = "items", names=None) -> Counter:
    """(item_id, task) of the given part files of ``table``, read with pyarrow directly."""
    out: Counter = Counter()
    for name in names if names is not None else []:
        t = pq.read_table(root / table / name, columns=["item_id", "task"])
        out.update(zip(t.column("item_id").to_pylist(), t.column("task").to_pylist(), strict=True))
    return out


def store_rows(store: Store, table: str = "items") -> Counter:
    """(item_id, task) of every row a reader of the store sees."""
    lf = store.scan(table)
    if table == "items":
        df = lf.select("item_id", "task").collect()
        return Counter(
            zip(df.get_column("item_id").to_list(), df.get_column("task").to_list(), strict=True)
        )
    df = lf.select("item_id").collect()
    return Counter((i, None) for i in df.get_column("item_id").to_list())


def part_files(root: Path, table: str) -> set[str]:
    """Return the part files on disk (not hidden, not temporary) of ``table``."""
    return {p.name for p in (root / table).glob("*.parquet") if not p.name.startswith((".", "_"))}


@contextlib.contextmanager
def dead_writers(monkeypatch):
    """Treat every part file's writer as dead (crash images come from this very process)."""
    with monkeypatch.context() as m:
        m.setattr(log_mod, "_writer_alive", lambda name, mtime: False)
        yield


def read_all(root: Path) -> tuple[Counter, Counter, list[str]]:
    """Items and events rows a reader sees, and the stray warnings it gets."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = Store(root, fsync=False)
        items, events = store_rows(store), store_rows(store, "events")
        store.runs().collect()
        store.imported_hashes()
    strays = [str(w.message) for w in caught if issubclass(w.category, StrayPartWarning)]
    others = [w for w in caught if not issubclass(w.category, StrayPartWarning)]
    assert not others, [str(w.message) for w in others]
    return items, events, strays


def assert_recovers(root: Path, expected_items: Counter, *, lost_ok: bool = False) -> None:
    """Repair ``root``; then it checks clean, reads ``expected_items`` and lists every part.

    Temporary files of the crashed writer are first made two hours old: younger ones may be a
    live writer's and are left alone (by design), older ones must be removed by the repair.
    """
    old = time.time() - 7200
    for p in [*root.rglob(".*.tmp"), *(root / "_log").glob("_staged-*")]:
        os.utime(p, (old, old))
    store = Store(root, fsync=False)
    result = store.check(repair=True)
    assert result.ok, str(result)
    assert lost_ok or not [p for p in result.problems if p.kind in ("missing", "damaged")], str(
        result
    )
    items, _events, strays = read_all(root)
    assert items == expected_items and not strays
    assert Store(root).check().ok
    live = {t: {p.name for p in Store(root).parts(t)} for t in TABLES}
    for t in TABLES:
        assert part_files(root, t) == live[t], (t, part_files(root, t) - live[t])
    assert not list((root / "_log").glob("_staged-*")) and not list(root.rglob(".*.tmp"))


# ----------------------------------------------------------------------------- stores


OPTIONS = ["A) x", "B) y"]


def record(store: Store, run_id: str, ids, *, flush_every: int) -> None:
    """Record items ``ids`` (one message and one answer event each) in one run."""
    with Recorder(store, benchmark="mtbbench", model=run_id, run_id=run_id,
                  flush_every=flush_every) as rec:  # fmt: skip
        for i in ids:
            with rec.item(patient_id="p", item_id=f"{run_id}-{i}", task="t", options=OPTIONS,
                          gold="A") as it:  # fmt: skip
                it.message("assistant", f"thinking about {i}")
                it.answer("A")


def base_store(root: Path) -> Store:
    """Build a store whose log has two checkpoints and records before and after the newest."""
    store = Store(root, fsync=False)
    record(store, "r1", range(8), flush_every=3)  # commits 1-3
    store.compact(small_rows=100)  # merges, then checkpoint
    record(store, "r2", range(6), flush_every=2)
    items = conform({"run_id": ["imp"] * 2, "item_id": ["imp-a", "imp-b"], "task": ["t"] * 2},
                    "items")  # fmt: skip
    store.commit_batch("b1", {"items": items}, conform({"content_hash": ["h1"]}, "imports"))
    store.compact(small_rows=100)  # checkpoint again; the first one and the records stay
    record(store, "r3", range(4), flush_every=2)  # two more commits after the checkpoint
    return store


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("base") / "store"
    base_store(root)
    return root


def test_base_store_has_the_log_shape_the_fuzz_needs(base):
    records = sorted(int(p.name[:20]) for p in (base / "_log").glob("*.json")
                     if p.name[20:] == ".json")  # fmt: skip
    checkpoints = sorted(int(p.name[:20]) for p in (base / "_log").glob("*.checkpoint.json"))
    assert len(checkpoints) == 2 and records[-1] > checkpoints[-1] + 1
    assert records[0] == checkpoints[0] + 1  # records since the previous checkpoint are kept
    store = Store(base)
    assert store.count("items") == 8 + 6 + 2 + 4 == sum(store_rows(store).values())
    assert store.check().ok and not store.check().problems


# ----------------------------------------------------------------------------- crash images


class CrashImages:
    """Copies of a store taken before every rename/link/unlink inside it and at every fault."""

    def __init__(self, root: Path, dest: Path) -> None:
        self.root, self.dest = root, dest
        self.images: list[tuple[str, Path]] = []
        self.steps: list[str] = []
        self._busy = False

    def snap(self, label: str) -> None:
        if self._busy:
            return
        self._busy = True
        try:
            target = self.dest / f"{len(self.images):03d}"
            shutil.copytree(self.root, target)
            self.images.append((label, target))
            self.steps.append(label)
        finally:
            self._busy = False

    def install(self, monkeypatch) -> None:
        root = str(self.root)
        for fname in ("replace", "link", "unlink", "rename"):
            real = getattr(os, fname)

            def wrapper(*args, _real=real, _name=fname, **kw):
                if str(args[0]).startswith(root):
                    self.snap(f"os.{_name} {Path(args[-1] if _name != 'unlink' else args[0]).name}")
                return _real(*args, **kw)

            monkeypatch.setattr(os, fname, wrapper)
        monkeypatch.setattr(log_mod, "_FAULT_HOOK", self.snap)


def run_with_images(root: Path, tmp_path: Path, monkeypatch, operation) -> CrashImages:
    """Run ``operation(store)`` on ``root``, taking a crash image at every step."""
    images = CrashImages(root, tmp_path / "images")
    with monkeypatch.context() as m:
        images.install(m)
        operation(Store(root, fsync=False))
    return images


def check_images(images: CrashImages, allowed: list[Counter], monkeypatch, *,
                 events: list[Counter] | None = None) -> None:  # fmt: skip
    """Every image reads as one of ``allowed`` (items; events paired) and recovers to it."""
    assert len(images.images) >= 5
    with dead_writers(monkeypatch):
        for label, image in images.images:
            with watchdog():
                items, ev, strays = read_all(image)
                assert items in allowed, (label, items)
                if events is not None:
                    assert ev == events[allowed.index(items)], (label, "events not paired")
                for message in strays:  # a warning names files that exist and are not listed
                    assert str(image) in message
                assert_recovers(image, items)


def test_every_crash_point_of_compaction(tmp_path, monkeypatch, base):
    root = tmp_path / "s"
    shutil.copytree(base, root)
    record(Store(root, fsync=False), "r4", range(4), flush_every=2)  # small parts to merge
    before = store_rows(Store(root))
    images = run_with_images(root, tmp_path, monkeypatch, lambda st: st.compact(small_rows=100))
    assert store_rows(Store(root)) == before and len(Store(root).parts("items")) == 1
    steps = set(images.steps)
    for step in (
        "part:renamed",
        "commit:numbered",
        "commit:published",
        "compact:tidied",
        "compact:source-removed",
        "checkpoint:written",
        "checkpoint:record-removed",
    ):
        assert step in steps, step  # fmt: skip
    check_images(images, [before], monkeypatch)


def test_every_crash_point_of_a_recorder_flush(tmp_path, monkeypatch, base):
    root = tmp_path / "s"
    shutil.copytree(base, root)
    store = Store(root, fsync=False)
    before, ev_before = store_rows(store), store_rows(store, "events")
    rec = Recorder(store, benchmark="mtbbench", model="r5", run_id="r5", flush_every=1000)
    for i in range(5):
        with rec.item(patient_id="p", item_id=f"r5-{i}", task="t", gold="A") as it:
            it.message("assistant", "x")
            it.answer("A")
    monkeypatch.setattr(log_mod, "CHECKPOINT_EVERY", 2)  # the flush also checkpoints
    images = run_with_images(root, tmp_path, monkeypatch, lambda st: rec.close())
    after, ev_after = store_rows(store), store_rows(store, "events")
    assert sum(after.values()) == sum(before.values()) + 5
    assert sum(ev_after.values()) == sum(ev_before.values()) + 10
    assert {"part:renamed", "commit:published", "checkpoint:written"} <= set(images.steps)
    check_images(images, [before, after], monkeypatch, events=[ev_before, ev_after])
    # the run row is committed with the first flush's items, never without them
    with dead_writers(monkeypatch):
        for _label, image in images.images:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", StrayPartWarning)
                st = Store(image)
                runs = set(st.runs().collect().get_column("run_id").to_list())
                has_items = any(i.startswith("r5-") for i, _ in store_rows(st))
            assert ("r5" in runs) == has_items


def test_every_crash_point_of_an_import_that_replaces_items(tmp_path, monkeypatch, base):
    root = tmp_path / "s"
    shutil.copytree(base, root)
    store = Store(root, fsync=False)
    before = store_rows(store)
    (source,) = [p for p in store.parts("items") if "r3-0" in
                 pq.read_table(p, columns=["item_id"]).column("item_id").to_pylist()]  # fmt: skip
    kept = pq.read_table(source)
    mask = [i != "r3-0" for i in kept.column("item_id").to_pylist()]
    kept = conform(kept.filter(mask), "items")
    fixed = conform({"run_id": ["r3"], "patient_id": ["p"], "item_id": ["r3-0"],
                     "task": ["fixed"]}, "items")  # fmt: skip
    imports = conform({"content_hash": ["h2"]}, "imports")

    def operation(st):
        with st.write_lock():
            st.commit_batch("b2", {"items": fixed}, imports, replace={"items": [(source, kept)]})

    images = run_with_images(root, tmp_path, monkeypatch, operation)
    after = store_rows(Store(root))
    assert after == before - Counter({("r3-0", "t"): 1}) + Counter({("r3-0", "fixed"): 1})
    assert {"part:renamed", "commit:published", "import:source-removed"} <= set(images.steps)
    check_images(images, [before, after], monkeypatch)


def test_every_crash_point_of_a_repair(tmp_path, monkeypatch, base):
    root = tmp_path / "s"
    shutil.copytree(base, root)
    store = Store(root, fsync=False)
    victim, *_, other = store.parts("items")
    lost = disk_rows(root, names=[victim.name])
    before = store_rows(store)
    victim.write_bytes(victim.read_bytes()[:100])
    shutil.copy(other, root / "items" / "copy.parquet")
    images = run_with_images(root, tmp_path, monkeypatch, lambda st: st.check(repair=True))
    assert store_rows(Store(root)) == before - lost
    with dead_writers(monkeypatch):
        for label, image in images.images:
            with watchdog():
                try:  # an image taken before the drop still names the damaged part
                    items, _ev, _strays = read_all(image)
                    assert items == before - lost, label
                except CorruptStoreError as exc:
                    assert victim.name in str(exc), label
                assert_recovers(image, before - lost, lost_ok=True)


@pytest.mark.parametrize("operation", ["compact", "flush", "import"])
def test_a_fault_raised_at_any_step_leaves_old_or_new_rows(tmp_path, monkeypatch, base, operation):
    # count the steps once, then make each one raise in turn
    def prepare(root):
        shutil.copytree(base, root)
        store = Store(root, fsync=False)
        if operation == "compact":
            record(store, "r4", range(2), flush_every=1)
        return store

    def run(store):
        if operation == "compact":
            store.compact(small_rows=100)
        elif operation == "flush":
            record(store, "r6", range(3), flush_every=1000)
        else:
            items = conform({"run_id": ["i"], "item_id": ["i-0"], "task": ["t"]}, "items")
            store.commit_batch("b9", {"items": items}, conform({"content_hash": ["h9"]}, "imports"))

    probe = prepare(tmp_path / "probe")
    before = store_rows(probe)
    calls = []
    with monkeypatch.context() as m:
        m.setattr(log_mod, "_FAULT_HOOK", calls.append)
        run(probe)
    after = store_rows(probe)
    assert len(calls) >= 3
    for k in range(len(calls)):
        store = prepare(tmp_path / f"k{k}")
        seen = []

        def fail(step, k=k, seen=seen):
            seen.append(step)
            if len(seen) == k + 1:
                raise InjectedError(f"injected at {step}")

        with monkeypatch.context() as m, watchdog():
            m.setattr(log_mod, "_FAULT_HOOK", fail)
            with pytest.raises(InjectedError):
                run(store)
        with watchdog():
            rows = store_rows(Store(store.path))
            assert rows in (before, after), (k, calls[k])
            with dead_writers(monkeypatch):
                assert_recovers(store.path, rows)


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    sys.path[:0] = {python!r}
    import tumorboard.traj._log as log_mod
    from tumorboard.traj import Recorder, Store, conform

    seen = []
    def hook(step):
        seen.append(step)
        if step == {step!r} and seen.count(step) == {occurrence}:
            os.kill(os.getpid(), signal.SIGKILL)
    store = Store({root!r})
    log_mod._FAULT_HOOK = hook
    op = {operation!r}
    if op == "compact":
        store.compact(small_rows=100)
    elif op == "flush":
        with Recorder(store, benchmark="mtbbench", model="k", run_id="k", flush_every=100) as rec:
            for i in range(4):
                with rec.item(patient_id="p", item_id=f"k-{{i}}", task="t", gold="A") as it:
                    it.message("assistant", "x")
                    it.answer("A")
    else:
        items = conform({{"run_id": ["i"], "item_id": ["i-0"], "task": ["t"]}}, "items")
        store.commit_batch("k1", {{"items": items}}, conform({{"content_hash": ["hk"]}}, "imports"))
    print("not killed", seen)
    """
)


@pytest.mark.parametrize(
    ("operation", "step", "occurrence", "committed"),
    [
        ("compact", "part:renamed", 1, False),  # merged part written, not committed
        ("compact", "commit:published", 1, True),  # committed, sources not yet deleted
        ("flush", "part:renamed", 3, False),  # run, items and events written, not committed
        ("import", "commit:numbered", 1, False),  # every part written, the record not linked
    ],
)
def test_sigkill_at_a_step(tmp_path, base, operation, step, occurrence, committed):
    root = tmp_path / "s"
    shutil.copytree(base, root)
    store = Store(root, fsync=False)
    if operation == "compact":
        record(store, "r4", range(5), flush_every=2)
    before = store_rows(store)
    listed_before = {t: part_files(root, t) for t in TABLES}
    code = KILLER.format(python=SYS_PATH, root=str(root), step=step, occurrence=occurrence,
                         operation=operation)  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    new_files = {t: part_files(root, t) - listed_before[t] for t in TABLES}
    items, _events, strays = read_all(root)
    assert items == before  # the compaction changes no rows; the others did not commit
    if committed:  # the merged part is listed; its sources are leftovers, silently ignored
        assert not strays
    else:  # the killed writer's parts: ignored, and named in one warning per table
        named = {n for t in TABLES for n in new_files[t]}
        assert named and all(any(n in msg for msg in strays) for n in named)
    kind = "leftover" if committed else "stray"
    if operation == "flush":  # the command line reports, repairs, and then finds nothing
        env = {**os.environ, "PYTHONPATH": SUBPROCESS_PYTHONPATH}
        cli = [sys.executable, "-m", "tumorboard.cli", "store", "check", str(root)]
        first = subprocess.run(cli, capture_output=True, text=True, env=env, timeout=120)
        assert first.returncode == 1 and "problem(s) remain" in first.stdout, first.stdout
        assert f"problem: {kind}:" in first.stdout
        fixed = subprocess.run([*cli, "--repair", "--json"], capture_output=True, text=True,
                               env=env, timeout=120)  # fmt: skip
        doc = json.loads(fixed.stdout)
        assert fixed.returncode == 0 and doc["ok"] and doc["problems"], fixed.stderr
        assert doc["rows"]["items"] == sum(before.values())
    else:
        found = Store(root).check()
        assert not found.ok and {p.kind for p in found.problems} == {kind}, str(found)
        assert Store(root).check(repair=True).ok
    again = Store(root).check()
    assert again.ok and not again.problems, str(again)
    items, _events, strays = read_all(root)
    assert items == before and not strays
    if not committed:
        quarantined = {p.name for p in (root / "_quarantine").rglob("*.parquet")}
        assert quarantined == {n for t in TABLES for n in new_files[t]}
    for t in TABLES:  # nothing on disk that the manifest does not list
        assert part_files(root, t) == {p.name for p in Store(root).parts(t)}


# ----------------------------------------------------------------------------- corruption fuzz


def _log_numbers(root: Path) -> tuple[list[int], list[int]]:
    names = [p.name for p in (root / "_log").iterdir()]
    records = sorted(int(n[:20]) for n in names if len(n) == 25 and n.endswith(".json"))
    checkpoints = sorted(int(n[:20]) for n in names if n.endswith(".checkpoint.json"))
    return records, checkpoints


def _record_adds(root: Path, n: int) -> dict[str, list[str]]:
    doc = json.loads((root / "_log" / f"{n:020d}.json").read_text())
    return {t: [e["name"] for e in v] for t, v in doc["add"].items()}


def _mutations(base: Path, rng: random.Random, n_cases: int) -> list[tuple[str, object]]:
    store = Store(base)
    listed = [(t, p.name) for t in TABLES for p in store.parts(t)]
    records, checkpoints = _log_numbers(base)
    classes = ["truncate", "zero", "delete", "stray-copy", "stray-dead-writer", "stray-garbage",
               "lose-record", "damage-record", "zero-record", "lose-checkpoint",
               "damage-checkpoint", "damage-manifest", "lose-imports-part"]  # fmt: skip
    cases = []
    for k in range(n_cases):
        kind = classes[k % len(classes)] if k < len(classes) else rng.choice(classes)
        if kind in ("truncate", "zero", "delete", "stray-copy", "stray-dead-writer"):
            cases.append((kind, rng.choice(listed)))
        elif kind in ("lose-record", "damage-record", "zero-record"):
            cases.append((kind, rng.choice(records)))
        elif kind in ("lose-checkpoint", "damage-checkpoint"):
            cases.append((kind, checkpoints[-1]))
        elif kind == "lose-imports-part":
            cases.append((kind, ("imports", store.parts("imports")[0].name)))
        else:
            cases.append((kind, rng.random()))
    return cases


def _apply(root: Path, kind: str, arg, rng: random.Random) -> dict:
    """Damage ``root``; return what the oracle expects."""
    records, checkpoints = _log_numbers(root)
    if kind in ("truncate", "zero", "delete", "lose-imports-part"):
        table, name = arg
        path = root / table / name
        lost = disk_rows(root, table, [name]) if table == "items" else Counter()
        if kind == "delete" or kind == "lose-imports-part":
            path.unlink()
        else:
            data = path.read_bytes()
            path.write_bytes(b"" if kind == "zero" else data[: rng.randrange(1, len(data))])
        return {"error": path, "table": table, "lost": lost}
    if kind.startswith("stray"):
        if kind == "stray-garbage":
            name = f"part-{rng.getrandbits(32):08x}.parquet"
            (root / "items" / name).write_bytes(os.urandom(rng.randrange(0, 4000)))
            return {"stray": root / "items" / name}
        table, src = arg
        name = ("copy of " + src if kind == "stray-copy" else
                f"part-{rng.getrandbits(64):016x}-otherhost-{DEAD_PID}-{rng.getrandbits(48):012x}"
                ".parquet")  # fmt: skip
        if kind == "stray-dead-writer":  # a writer of this host, long dead
            name = name.replace("otherhost", store_mod._HOST)
        shutil.copy(root / table / src, root / table / name)
        return {"stray": root / table / name}
    if kind == "damage-manifest":
        path = root / "manifest.json"
        path.write_bytes(path.read_bytes()[: int(arg * 40)])
        return {"error": path, "manifest": True}
    if kind in ("lose-checkpoint", "damage-checkpoint"):
        path = root / "_log" / f"{arg:020d}.checkpoint.json"
        if kind == "lose-checkpoint":
            path.unlink()
            return {}  # the previous checkpoint and the records since give the same state
        path.write_text('{"parts": {"items": [{"name": 1}]}, "version": ')
        return {"log_problem": path}
    path = root / "_log" / f"{arg:020d}.json"
    if arg <= checkpoints[-1]:  # folded into the newest checkpoint: not read any more
        expect: dict = {}
    elif arg == records[-1] and kind == "lose-record":  # the newest record: its parts are strays
        adds = _record_adds(root, arg)
        expect = {"vanish": {t: names for t, names in adds.items()}}
    else:
        expect = {"error": path, "log_problem": path}
    if kind == "lose-record":
        path.unlink()
    elif kind == "zero-record":
        path.write_bytes(b"")
    else:
        path.write_bytes(path.read_bytes()[:-7] + b"\xff\xfe}")
    return expect


def test_corruption_fuzz(tmp_path, monkeypatch, base):
    rng = random.Random(18)
    original = store_rows(Store(base))
    cases = _mutations(base, rng, 52)
    assert len({k for k, _ in cases}) == 13
    with dead_writers(monkeypatch):
        for i, (kind, arg) in enumerate(cases):
            root = tmp_path / f"case{i:02d}"
            shutil.copytree(base, root)
            expect = _apply(root, kind, arg, rng)
            where = f"case {i} {kind} {arg}"
            with watchdog():
                if expect.get("manifest"):
                    with pytest.raises(TumorboardError, match="manifest.json") as info:
                        Store(root)
                    assert isinstance(info.value, ValueError)
                    continue
                if "error" in expect:
                    with pytest.raises(CorruptStoreError) as info:
                        read_all(root)
                    assert str(expect["error"]) in str(info.value), where
                    assert isinstance(info.value, TumorboardError)
                    assert "tumorboard store check" in str(info.value)
                if "error" not in expect:
                    items, _ev, strays = read_all(root)
                    if "vanish" in expect:
                        gone = disk_rows(base, "items", expect["vanish"].get("items", []))
                        assert items == original - gone, where
                        named = [n for names in expect["vanish"].values() for n in names]
                        assert all(any(n in m for m in strays) for n in named), where
                    else:
                        assert items == original, where  # n never changes silently
                        if "stray" in expect:
                            assert any(expect["stray"].name in m for m in strays), where
                        else:
                            assert not strays, where
                # check names the file; repair leaves the original rows minus the reported ones
                result = Store(root, fsync=False).check()
                named_file = expect.get("error") or expect.get("stray") or expect.get("log_problem")
                if named_file is not None:
                    assert not result.ok, (where, str(result))
                    assert str(named_file) in {p.path for p in result.problems}, where
                repaired = Store(root, fsync=False).check(repair=True)
                assert repaired.ok, (where, str(repaired))
                lost_files = {Path(p.path).name for p in repaired.problems
                              if p.kind in ("missing", "damaged")}  # fmt: skip
                if "lost" in expect and expect["table"] == "items":
                    assert lost_files == {Path(expect["error"]).name}, where
                    assert [p.rows for p in repaired.problems if p.kind in ("missing", "damaged")] \
                        == [sum(expect["lost"].values())]  # fmt: skip
                items, _ev, strays = read_all(root)
                assert not strays and Store(root).check().ok, where
                if "lost" in expect and expect["table"] == "items":
                    assert items == original - expect["lost"], where
                elif "vanish" in expect:  # the newest record lost: its parts quarantined
                    gone = disk_rows(base, "items", expect["vanish"].get("items", []))
                    assert items == original - gone, where
                    quarantined = {p.name for p in (root / "_quarantine").rglob("*.parquet")}
                    assert quarantined == {n for v in expect["vanish"].values() for n in v}
                else:  # a lost or damaged record inside the log: its parts are listed again
                    assert items == original, where
                assert sum(items.values()) == Store(root).count("items"), where


def test_cli_reports_a_damaged_store_by_name(tmp_path, base):
    root = tmp_path / "s"
    shutil.copytree(base, root)
    victim = Store(root).parts("items")[1]
    victim.write_bytes(b"")
    env = {**os.environ, "PYTHONPATH": SUBPROCESS_PYTHONPATH}
    score = subprocess.run([sys.executable, "-m", "tumorboard.cli", "score", str(root)],
                           capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    lines = score.stderr.strip().splitlines()
    assert score.returncode == 2 and len(lines) == 1 and "Traceback" not in score.stderr
    assert lines[0].startswith("tumorboard: error: ") and str(victim) in lines[0]
    assert "zero bytes" in lines[0] and "store check" in lines[0]
    check = subprocess.run([sys.executable, "-m", "tumorboard.cli", "store", "check", str(root)],
                           capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert check.returncode == 1 and f"problem: damaged: {victim}" in check.stdout
    # damage of the same size (a bad disk block in the footer): found when read, and named
    shutil.rmtree(root)
    shutil.copytree(base, root)
    victim = Store(root).parts("items")[0]
    data = bytearray(victim.read_bytes())
    data[-80:-8] = bytes(b ^ 0xFF for b in data[-80:-8])
    victim.write_bytes(bytes(data))
    score = subprocess.run([sys.executable, "-m", "tumorboard.cli", "score", str(root)],
                           capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    lines = score.stderr.strip().splitlines()
    assert score.returncode == 2 and len(lines) == 1 and str(victim) in lines[0], score.stderr
    assert "corrupt Parquet part" in lines[0] and "store check" in lines[0]
    result = Store(root).check()
    (problem,) = result.problems
    assert problem.kind == "damaged" and problem.path == str(victim)
    assert "unreadable Parquet" in problem.detail and "\n" not in problem.detail
    missing = subprocess.run(
        [sys.executable, "-m", "tumorboard.cli", "store", "check", str(tmp_path / "nothing")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert missing.returncode == 2 and "no trajectory store here" in missing.stderr


def test_layout_1_store_is_converted_with_the_same_rows(tmp_path):
    # a store as the previous layout wrote it: parts found by listing, an uncommitted import
    # batch (invisible), a finished compaction journal whose sources were not yet deleted
    root = tmp_path / "old"
    for t in TABLES:
        (root / t).mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps(
        {"format": "tumorboard.traj", "schema_version": 2, "tables": list(TABLES)}))  # fmt: skip

    def part(table, name, ids):
        data = {"run_id": ["r"] * len(ids), "item_id": ids}
        if table == "imports":
            data = {"content_hash": ids}
        pq.write_table(conform(data, table), root / table / name)

    part("items", "part-1.parquet", ["a", "b"])
    part("items", "part-2.parquet", ["c"])
    part("items", "cmp-1.parquet", ["a", "b", "c"])
    (root / "items" / "_compact-x.json").write_text(
        json.dumps({"target": "cmp-1.parquet", "sources": ["part-1.parquet", "part-2.parquet"]})
    )
    part("items", "imp-b1.parquet", ["d"])  # committed below
    part("items", "imp-b2.parquet", ["e"])  # never committed
    part("imports", "imp-b1.parquet", ["h1"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = Store(root)
        ids = sorted(store.items().collect().get_column("item_id").to_list())
        assert store.count("items") == 4 and store.imported_hashes() == {"h1"}
    assert ids == ["a", "b", "c", "d"]
    assert [str(w.message) for w in caught if "imp-b2" in str(w.message)]  # ignored, named
    assert json.loads((root / "manifest.json").read_text())["layout"] == 2
    assert not (root / "items" / "_compact-x.json").exists()
    assert not (root / "items" / "part-1.parquet").exists()


def test_a_stray_part_of_a_live_writer_is_not_warned_about(tmp_path):
    alive = store_mod._writer_alive
    mine = Store(tmp_path / "s")._new_part_name()
    assert alive(mine, 0.0)  # this process: a commit may be in flight
    assert not alive(mine.replace(f"-{os.getpid()}-", f"-{DEAD_PID}-"), 0.0)
    other = mine.replace(store_mod._HOST, "otherhost")
    assert alive(other, time.time()) and not alive(other, time.time() - 7200)
    assert not alive("copy.parquet", time.time())


CONCURRENT_WRITER = textwrap.dedent(
    """
    import sys
    sys.path[:0] = {python!r}
    import tumorboard.traj._log as log_mod
    from tumorboard.traj import Recorder, Store

    log_mod.CHECKPOINT_EVERY = 3  # checkpoints fold and delete records while others commit
    store = Store({root!r}, fsync=False)
    with Recorder(store, benchmark="mtbbench", model={name!r}, run_id={name!r},
                  flush_every=1) as rec:
        for i in range({n}):
            with rec.item(patient_id="p", item_id=f"{name}-{{i}}", task="t") as it:
                it.message("assistant", "x")
                it.answer("A")
    print("DONE", flush=True)
    """
)


def test_commits_checkpoints_and_compaction_racing_with_readers(tmp_path):
    root = tmp_path / "s"
    Store(root, fsync=False)
    n = 30
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                CONCURRENT_WRITER.format(python=SYS_PATH, root=str(root), name=f"w{k}", n=n),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for k in range(3)
    ]
    seen = rounds = merged = 0
    with watchdog(300):
        while any(p.poll() is None for p in procs) or rounds < 3:
            store = Store(root, fsync=False)
            count = store.count("items")
            items = store.items().select("item_id").collect()
            # a reader never sees a row twice, and never loses one it saw
            assert items.get_column("item_id").n_unique() == items.height >= count >= seen
            seen = count
            if rounds % 4 == 0:  # this process also compacts while the writers commit
                with contextlib.suppress(TumorboardError):  # StateError: the lock is busy
                    merged += store.compact(small_rows=10**6).rows_rewritten["items"]
            rounds += 1
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0 and out.strip().endswith("DONE")
    store = Store(root, fsync=False)
    ids = store.items().collect().get_column("item_id").to_list()
    assert sorted(ids) == sorted(f"w{k}-{i}" for k in range(3) for i in range(n))
    assert store.count("items") == 3 * n and store.count("events") == 3 * n * 2
    assert store.runs().collect().height == 3
    result = store.check()
    assert result.ok and not result.problems, str(result)
    assert merged > 0 and len(list((root / "_log").glob("*.checkpoint.json"))) <= 2


def test_repair_lists_again_the_parts_of_a_lost_import_record(tmp_path, monkeypatch, base):
    # an import that replaced an item, then a later commit; the import's record is lost
    root = tmp_path / "s"
    shutil.copytree(base, root)
    store = Store(root, fsync=False)
    (source,) = [p for p in store.parts("items") if "r3-1" in
                 pq.read_table(p, columns=["item_id"]).column("item_id").to_pylist()]  # fmt: skip
    table = pq.read_table(source)
    kept = conform(table.filter([i != "r3-1" for i in table.column("item_id").to_pylist()]),
                   "items")  # fmt: skip
    fixed = conform({"run_id": ["r3"], "patient_id": ["p"], "item_id": ["r3-1"],
                     "task": ["fixed"]}, "items")  # fmt: skip
    with store.write_lock():
        store.commit_batch("b3", {"items": fixed}, conform({"content_hash": ["h3"]}, "imports"),
                           replace={"items": [(source, kept)]})  # fmt: skip
    (lost,) = _log_numbers(root)[0][-1:]
    record(store, "r7", range(2), flush_every=5)  # a later commit: the lost one is inside
    after = store_rows(store)
    hashes = store.imported_hashes()
    copy = root / "items" / "copy.parquet"  # a copy of one of its parts is not adopted
    shutil.copy(next(p for p in store.parts("items") if "imp-b3" in p.name), copy)
    (root / "_log" / f"{lost:020d}.json").unlink()
    with pytest.raises(CorruptStoreError, match=f"{lost:020d}.json: commit record missing"):
        Store(root).items()
    monkeypatch.setattr(log_mod, "_writer_alive", lambda name, mtime: False)  # writer gone
    found = Store(root).check()
    kinds = Counter(p.kind for p in found.problems)
    assert kinds == {"log": 1, "unlisted": 3, "stray": 1}, str(found)  # items x2, imports
    assert not found.ok and "missing" not in kinds  # the replaced source is accounted for
    repaired = Store(root, fsync=False).check(repair=True)
    assert repaired.ok, str(repaired)
    store = Store(root)
    assert store_rows(store) == after and store.imported_hashes() == hashes
    assert {p.name for p in (root / "_quarantine").rglob("*.parquet")} == {"copy.parquet"}
    assert Store(root).check().ok and not Store(root).check().problems


def test_a_filesystem_without_hard_links_still_commits(tmp_path, monkeypatch):
    import errno

    def no_link(*_args, **_kw):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_link)
    store = Store(tmp_path / "s", fsync=False)
    record(store, "r", range(5), flush_every=2)
    assert store.count("items") == 5 and store.compact(small_rows=100).parts_after["items"] == 1
    assert sorted(i for i, _ in store_rows(store)) == [f"r-{i}" for i in range(5)]
    assert store.check().ok and not list((tmp_path / "s" / "_log").glob("_staged-*"))


def test_every_crash_point_of_a_re_import_through_import_logs(tmp_path, monkeypatch):
    # end to end: tumorboard's importer re-imports a changed JSONL log, replacing two items
    from tumorboard.traj import import_logs

    log = tmp_path / "run.jsonl"

    def write(task_of):
        lines = [
            {
                "model": "m1",
                "patient_id": str(i % 2),
                "item_id": f"q{i}",
                "task": task_of(i),
                "question": "Q?\nA) x\nB) y",
                "gold": "A",
                "response": "A",
            }
            for i in range(6)
        ]
        log.write_text("\n".join(json.dumps(line) for line in lines) + "\n")  # fmt: skip

    root = tmp_path / "s"
    write(lambda i: "t")
    import_logs("jsonl", log, root, benchmark="mtbbench")
    before, hashes_before = store_rows(Store(root)), Store(root).imported_hashes()
    write(lambda i: "changed" if i < 2 else "t")
    images = run_with_images(
        root, tmp_path, monkeypatch, lambda st: import_logs("jsonl", log, st, benchmark="mtbbench")
    )
    after, hashes_after = store_rows(Store(root)), Store(root).imported_hashes()
    assert after == Counter({("q0", "changed"): 1, ("q1", "changed"): 1}) + Counter(
        {(f"q{i}", "t"): 1 for i in range(2, 6)}
    )
    assert len(hashes_after) == 2 and hashes_before < hashes_after
    assert {"part:renamed", "commit:published", "import:source-removed"} <= set(images.steps)
    with dead_writers(monkeypatch):  # the import record is committed with its rows, never apart
        for label, image in images.images:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", StrayPartWarning)
                st = Store(image)
                hashes = st.imported_hashes()
                assert hashes == (hashes_after if store_rows(st) == after else hashes_before), label
    check_images(images, [before, after], monkeypatch)
