"""Atomic writes: ``tumorboard._io.atomic_path`` and every writer that uses it.

For the helper: the one temporary-name scheme (``.{name}.{pid}.{token}.tmp``, hidden, in the
target's directory), the rename on success, the fsyncs where durability is asked for, and the
cleanup on every kind of failure. For every writer (store parts, batch commits, manifest and
compaction; coords .h5; tissue GeoJSON; features .h5 and Parquet; ONNX export; report files;
the score CLI's JSON; the tile report): the inner write is made to fail half-way, and the target
must keep its old bytes (or stay absent) with no temporary file left behind. Permissions: the
temporary file is private (0600) and the finished file has ``0o666 & ~umask`` (0644 under the
usual umask), or the mode of the file it replaced; the CLI's outputs are checked under two umasks.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import tumorboard._io as tio
from tumorboard._io import atomic_path, is_temp_name, remove_temp_files, temp_files

OLD = b"old bytes that must survive"


class InjectedError(OSError):
    """The failure a torn write raises."""


def hidden_files(root: Path) -> list[Path]:
    """Every hidden file under ``root`` (temporary files of any scheme are hidden)."""
    return sorted(p for p in root.rglob(".*") if p.is_file())


def torn_write_text(self: Path, data: str, *args, **kwargs) -> int:
    """``Path.write_text`` that writes half of the text, then fails (a full disk)."""
    with open(self, "w", encoding="utf-8") as fh:
        fh.write(data[: len(data) // 2])
    raise InjectedError(28, "No space left on device (injected)")


def torn_writer(*args, **kwargs):
    """Stand in for a library write that leaves a few bytes at its destination and then fails.

    Such a write is e.g. ``pq.write_table`` or an ONNX export.
    """
    where = next(a for a in args if isinstance(a, (str, os.PathLike)))
    Path(where).write_bytes(b"PAR1 partial")
    raise InjectedError(28, "No space left on device (injected)")


# ----------------------------------------------------------------------------- the helper


def test_temp_name_scheme_and_rename(tmp_path):
    target = tmp_path / "out.json"
    with atomic_path(target) as tmp:
        m = re.fullmatch(r"\.out\.json\.(\d+)\.([0-9a-f]{8})\.tmp", tmp.name)
        assert m is not None and int(m.group(1)) == os.getpid()
        assert tmp.parent == target.parent and tmp.is_file() and tmp.stat().st_size == 0
        assert is_temp_name(tmp.name) and temp_files(tmp_path, target="out.json") == [tmp]
        assert not target.exists()  # nothing under the final name until the block ends
        tmp.write_text("{}", encoding="utf-8")
    assert target.read_text(encoding="utf-8") == "{}"
    assert hidden_files(tmp_path) == []
    # two writers of one target never share a temporary file
    with atomic_path(target) as a, atomic_path(target) as b:
        assert a != b
        a.write_bytes(b"a")
        b.write_bytes(b"b")
    assert target.read_bytes() == b"a"  # the outer block ends last and wins
    assert hidden_files(tmp_path) == []


def test_replaces_existing_file(tmp_path):
    target = tmp_path / "part.parquet"
    target.write_bytes(OLD)
    with atomic_path(target) as tmp:
        tmp.write_bytes(b"new")
    assert target.read_bytes() == b"new" and hidden_files(tmp_path) == []


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_failure_inside_the_block_keeps_the_target(tmp_path, error):
    target = tmp_path / "report.md"
    target.write_bytes(OLD)
    with pytest.raises(type(error)), atomic_path(target) as tmp:
        tmp.write_bytes(b"half a rep")
        raise error
    assert target.read_bytes() == OLD and hidden_files(tmp_path) == []


def test_failed_rename_removes_the_temporary_file(tmp_path):
    target = tmp_path / "occupied"
    target.mkdir()
    (target / "keep").write_bytes(OLD)  # os.replace cannot put a file over a non-empty folder
    with pytest.raises(OSError), atomic_path(target) as tmp:
        tmp.write_bytes(b"x")
    assert (target / "keep").read_bytes() == OLD and hidden_files(tmp_path) == []


def test_missing_directory_raises_and_leaves_nothing(tmp_path):
    with pytest.raises(FileNotFoundError), atomic_path(tmp_path / "no" / "such" / "file"):
        pass
    assert list(tmp_path.iterdir()) == []


def test_fsync_flushes_the_file_and_its_directory(tmp_path, monkeypatch):
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(tio.os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    with atomic_path(tmp_path / "a", fsync=False) as tmp:
        tmp.write_bytes(b"1")
    assert synced == []
    with atomic_path(tmp_path / "b", fsync=True) as tmp:
        tmp.write_bytes(b"2")
    assert len(synced) == 2  # the file before the rename, the directory after it
    assert (tmp_path / "b").read_bytes() == b"2"


def test_temp_files_and_stale_cleanup(tmp_path):
    mine = tmp_path / ".a.h5.12.0123abcd.tmp"
    other = tmp_path / ".a.h5.h5.12.0123abcd.tmp"  # the temporary file of "a.h5.h5"
    fresh = tmp_path / ".b.h5.13.89abcdef.tmp"
    for p in (mine, other, fresh):
        p.write_bytes(b"x")
    (tmp_path / ".hidden").write_bytes(b"not ours")
    (tmp_path / "a.h5").write_bytes(OLD)
    assert not is_temp_name("a.h5") and not is_temp_name(".a.h5.tmp-12")
    assert temp_files(tmp_path, target="a.h5") == [mine]
    assert temp_files(tmp_path) == sorted([mine, other, fresh])
    assert temp_files(tmp_path / "missing") == []
    old = time.time() - 7200
    os.utime(mine, (old, old))
    os.utime(other, (old, old))
    assert remove_temp_files(tmp_path, min_age_s=3600) == 2  # the fresh one may be in progress
    assert temp_files(tmp_path) == [fresh]
    assert remove_temp_files(tmp_path, target="b.h5") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [".hidden", "a.h5"]


def _dead_pid() -> int:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: the pid names no process now
    return proc.pid


def test_dead_only_cleanup_keeps_live_writers_files(tmp_path):
    dead = tmp_path / f".a.h5.{_dead_pid()}.0123abcd.tmp"
    own = tmp_path / f".a.h5.{os.getpid()}.89abcdef.tmp"  # maybe in progress in another thread
    parent = tmp_path / f".a.h5.{os.getppid()}.00000000.tmp"  # a live process
    for p in (dead, own, parent):
        p.write_bytes(b"x")
    assert remove_temp_files(tmp_path, target="a.h5", dead_only=True) == 1
    assert temp_files(tmp_path) == sorted([own, parent])


def test_coords_and_geojson_writes_remove_a_killed_writers_leftovers(tmp_path):
    """A killed run leaves its temporary file; the next write of the target removes it."""
    pytest.importorskip("h5py")
    from tumorboard import slides

    coords = tmp_path / "patches" / "case_patches.h5"
    geo = tmp_path / "contours_geojson" / "case.geojson"
    dead = _dead_pid()
    for target in (coords, geo):
        target.parent.mkdir()
        (target.parent / f".{target.name}.{dead}.0123abcd.tmp").write_bytes(b"half")
        (target.parent / f".{target.name}.{os.getppid()}.89abcdef.tmp").write_bytes(b"live")
    slides.write_coords(coords, _grid(tmp_path))
    img = np.full((64, 64, 3), 255, np.uint8)
    img[16:48, 16:48] = (150, 60, 120)
    slides.segment_image(img, preset="bwh_biopsy", mpp=8.0).write_geojson(geo)
    for target in (coords, geo):
        left = temp_files(target.parent)
        assert [p.name.split(".")[-3] for p in left] == [str(os.getppid())], left
        assert target.exists()


# ----------------------------------------------------------------------------- trajectory store


def _items(n: int, start: int = 0) -> pa.Table:
    from tumorboard.traj.schema import conform

    return conform(
        {"run_id": ["r"] * n, "patient_id": ["p"] * n,
         "item_id": [str(i) for i in range(start, start + n)]},
        "items",
    )  # fmt: skip


def test_store_part_and_commit_writes_are_atomic(tmp_path, monkeypatch):
    import tumorboard.traj.store as store_mod
    from tumorboard.traj import Store
    from tumorboard.traj.schema import conform

    store = Store(tmp_path / "s", fsync=False)
    imports = conform({"content_hash": ["h1"], "source": ["log.json"]}, "imports")
    store.commit_batch("b1", {"items": _items(3)}, imports)
    (committed,) = store.parts("imports")
    (items_part,) = store.parts("items")
    before = {p: p.read_bytes() for p in (committed, items_part)}
    monkeypatch.setattr(store_mod.pq, "write_table", torn_writer)
    with pytest.raises(InjectedError):  # re-running the batch fails on its first part
        store.commit_batch("b1", {"items": _items(5)}, imports)
    with pytest.raises(InjectedError):
        store.write("items", _items(2))
    assert {p: p.read_bytes() for p in before} == before
    assert hidden_files(store.path) == []
    assert store.count("items") == 3
    # nothing but the committed parts is left: no stray part of the failed writes
    on_disk = sorted(p for t in ("items", "imports") for p in (store.path / t).glob("*.parquet"))
    assert on_disk == sorted(before) and store.check().ok


def test_store_manifest_write_is_atomic(tmp_path, monkeypatch):
    from tumorboard.traj import Store

    monkeypatch.setattr(Path, "write_text", torn_write_text)
    with pytest.raises(InjectedError):
        Store(tmp_path / "s")
    assert not (tmp_path / "s" / "manifest.json").exists()
    assert hidden_files(tmp_path) == []


@pytest.mark.parametrize("fail", ["commit record", "merged part"])
def test_store_compaction_failure_changes_nothing(tmp_path, monkeypatch, fail):
    import tumorboard.traj.store as store_mod
    from tumorboard.traj import Store

    store = Store(tmp_path / "s", fsync=False)
    for k in range(3):
        store.write("items", _items(2, start=2 * k))
    before = {p: p.read_bytes() for p in store.parts("items")}
    log_before = sorted((store.path / "_log").glob("*.json"))
    if fail == "commit record":
        real_write = os.write

        def torn_os_write(fd, data):
            real_write(fd, bytes(data[: len(data) // 2]))
            raise InjectedError(28, "No space left on device (injected)")

        monkeypatch.setattr(os, "write", torn_os_write)
    else:
        monkeypatch.setattr(store_mod.pq, "write_table", torn_writer)
    with pytest.raises(InjectedError):
        store.compact("items")
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in store.parts("items")} == before
    assert sorted((store.path / "items").glob("*.parquet")) == sorted(before)  # no merged part
    assert hidden_files(store.path) == []
    assert sorted((store.path / "_log").glob("*.json")) == log_before  # no new record or stage
    ids = store.items().collect().get_column("item_id").to_list()
    assert sorted(ids) == [str(i) for i in range(6)]


# ----------------------------------------------------------------------------- slides


def png_slide(path: Path) -> Path:
    from PIL import Image

    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (256, 512, 3), dtype=np.uint8)).save(path)
    return path


def _grid(tmp_path: Path):
    from tumorboard import slides

    with slides.open(png_slide(tmp_path / "case.png"), mpp=0.5) as slide:
        return slides.patch_grid(slide, None, magnification=20, patch_size=256)


def test_coords_h5_write_is_atomic(tmp_path, monkeypatch):
    pytest.importorskip("h5py")
    import tumorboard.slides._h5 as h5_mod
    from tumorboard import slides

    path = tmp_path / "patches" / "case_patches.h5"
    grid = _grid(tmp_path)
    slides.write_coords(path, grid)
    good = path.read_bytes()

    def fail(v):
        raise InjectedError(28, "No space left on device (injected)")

    monkeypatch.setattr(h5_mod, "attr_to_hdf5", fail)  # fails after the dataset is written
    with pytest.raises(InjectedError):
        slides.write_coords(path, grid)
    assert path.read_bytes() == good and hidden_files(tmp_path) == []


def test_geojson_write_is_atomic(tmp_path, monkeypatch):
    from tumorboard import slides

    img = np.full((64, 64, 3), 255, np.uint8)
    img[16:48, 16:48] = (150, 60, 120)  # one tissue square
    mask = slides.segment_image(img, preset="bwh_biopsy", mpp=8.0)
    path = tmp_path / "contours_geojson" / "case.geojson"
    path.parent.mkdir()
    path.write_bytes(OLD)
    monkeypatch.setattr(Path, "write_text", torn_write_text)
    with pytest.raises(InjectedError):
        mask.write_geojson(path)
    assert path.read_bytes() == OLD and hidden_files(tmp_path) == []


def test_tile_report_write_is_atomic(tmp_path, monkeypatch, capsys):
    pytest.importorskip("h5py")
    from tumorboard.cli import main as tumorboard_main
    from tumorboard.slides import patch_dir

    slide = png_slide(tmp_path / "case.png")
    out = tmp_path / "job"
    report = patch_dir(out, 20, 256, 0) / "tile_report.json"
    report.parent.mkdir(parents=True)
    report.write_bytes(OLD)
    monkeypatch.setattr(Path, "write_text", torn_write_text)
    argv = ["tile", str(slide), "--out", str(out), "--mpp", "0.5", "--no-seg", "--quiet"]
    assert tumorboard_main(argv) == 2  # the full disk is the command's one error line
    assert "No space left on device (injected)" in capsys.readouterr().err
    assert report.read_bytes() == OLD and hidden_files(tmp_path) == []
    assert (report.parent / "patches" / "case_patches.h5").is_file()  # the slide itself was done


# ----------------------------------------------------------------------------- embedding


def tiny_encoder(fail_on: int | None = None):
    """Build a 4-d encoder of 32 px images that raises on call ``fail_on``.

    It projects the channel means.
    """
    torch = pytest.importorskip("torch")

    class Encoder(torch.nn.Module):
        image_size, mean, std, embed_dim, encoder_name = 32, (0.5,) * 3, (0.25,) * 3, 4, "tiny"

        def __init__(self):
            super().__init__()
            self.proj, self.calls = torch.nn.Linear(3, 4), 0

        def forward(self, x):
            self.calls += 1
            if self.calls == fail_on:
                raise InjectedError(28, "No space left on device (injected)")
            return self.proj(x.mean(dim=(2, 3)))

    return Encoder()


def test_features_h5_and_parquet_writes_are_atomic(tmp_path):
    pytest.importorskip("h5py")
    from tumorboard.embed import EmbedOptions, embed_slides
    from tumorboard.slides import TilingOptions

    slide = png_slide(tmp_path / "case.png")
    out = tmp_path / "job"
    features = out / "20x_256px_0px_overlap" / "features_tiny" / "case.h5"
    parquet = out / "20x_256px_0px_overlap" / "embeddings_tiny" / "case.parquet"
    for p in (features, parquet):
        p.parent.mkdir(parents=True)
        p.write_bytes(OLD)  # an earlier, broken output: redone, and kept when the redo fails
    rep = embed_slides(
        [slide],
        model=tiny_encoder(fail_on=2),
        out=out,
        tiling=TilingOptions(mpp=0.5, threads=1, segmentation=None),
        options=EmbedOptions(batch_size=1),
        progress=False,
    )
    assert [r.status for r in rep.results] == ["failed"]
    assert "injected" in (rep.results[0].error or "")
    assert features.read_bytes() == OLD and parquet.read_bytes() == OLD
    assert hidden_files(tmp_path) == []
    # the same slide with a working model replaces both files
    rep = embed_slides(
        [slide],
        model=tiny_encoder(),
        out=out,
        tiling=TilingOptions(mpp=0.5, threads=1, segmentation=None),
        options=EmbedOptions(batch_size=1),
        progress=False,
    )
    assert rep.ok and rep.results[0].n_patches == 2 and features.read_bytes() != OLD
    assert hidden_files(tmp_path) == []


def test_onnx_export_is_atomic(tmp_path, monkeypatch):
    import tumorboard.models as models
    from tumorboard.embed import export_onnx

    path = tmp_path / ".onnx" / "tiny.onnx"
    path.parent.mkdir()
    path.write_bytes(OLD)
    monkeypatch.setattr(models, "export_onnx", torn_writer)
    with pytest.raises(InjectedError):
        export_onnx(tiny_encoder(), path, image_size=32)
    assert path.read_bytes() == OLD and hidden_files(tmp_path) == []


# ----------------------------------------------------------------------------- reports


def _report():
    from tumorboard.score import Report
    from tumorboard.score.report import TABLE_SCHEMA

    row = {"benchmark": "toy", "track": "default", "model": "m", "tools": False, "task": "t",
           "metric": "accuracy", "n": 4, "estimate": 0.5, "boot_mean": 0.5, "ci_low": 0.25,
           "ci_high": 0.75, "pm": 0.25}  # fmt: skip
    table = pl.DataFrame([row], schema=TABLE_SCHEMA).with_columns(n_correct=pl.lit(2))
    return Report(table, benchmark="toy")  # n_correct: the mtbbench column the CLI prints


@pytest.mark.parametrize("fmt", ["markdown", "csv", "json", "html"])
def test_report_file_writes_are_atomic(tmp_path, monkeypatch, fmt):
    report = _report()
    path = tmp_path / f"report.{fmt}"
    path.write_bytes(OLD)
    monkeypatch.setattr(Path, "write_text", torn_write_text)
    with pytest.raises(InjectedError):
        getattr(report, f"to_{fmt}")(path)
    assert path.read_bytes() == OLD and hidden_files(tmp_path) == []
    monkeypatch.undo()
    text = getattr(report, f"to_{fmt}")(path)
    assert path.read_text(encoding="utf-8") == text and hidden_files(tmp_path) == []


def test_score_cli_json_write_is_atomic(tmp_path, monkeypatch):
    from tumorboard.cli import _emit_report

    path = tmp_path / "scores.json"
    path.write_bytes(OLD)
    monkeypatch.setattr(Path, "write_text", torn_write_text)
    with pytest.raises(InjectedError):
        _emit_report(argparse.Namespace(format="json", out=str(path)), _report())
    assert path.read_bytes() == OLD and hidden_files(tmp_path) == []


def test_features_writer_that_cannot_start_leaves_nothing(tmp_path, monkeypatch):
    h5py = pytest.importorskip("h5py")
    from tumorboard.embed import embed_slides
    from tumorboard.slides import TilingOptions

    real = h5py.File

    def refuse_features(name, *args, **kwargs):  # the coords file still opens
        if Path(name).name.startswith(".case.h5."):
            raise InjectedError(13, "Permission denied (injected)")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(h5py, "File", refuse_features)
    slide = png_slide(tmp_path / "case.png")
    rep = embed_slides(
        [slide],
        model=tiny_encoder(),
        out=tmp_path / "job",
        tiling=TilingOptions(mpp=0.5, segmentation=None, threads=1),
        progress=False,
    )
    assert [r.status for r in rep.results] == ["failed"] and "injected" in rep.results[0].error
    assert (tmp_path / "job" / "20x_256px_0px_overlap" / "patches" / "case_patches.h5").is_file()
    assert hidden_files(tmp_path) == []


# ----------------------------------------------------------------------------- permissions


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.fixture
def umask():
    """Set the process umask for a test and put the old one back."""
    old = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(old)


def test_temp_file_is_private_until_renamed(tmp_path, umask):
    umask(0o022)
    target = tmp_path / "report.md"
    with atomic_path(target) as tmp:
        assert _mode(tmp) == 0o600  # a half-written report is nobody else's business
        tmp.write_text("# partial", encoding="utf-8")
        assert _mode(tmp) == 0o600
    assert _mode(target) == 0o644


MODES = {"022": (0o022, 0o644), "027": (0o027, 0o640), "077": (0o077, 0o600), "002": (0o002, 0o664)}


@pytest.mark.parametrize("mask, want", list(MODES.values()), ids=list(MODES))
def test_new_files_get_the_umask_mode_and_replaced_files_keep_theirs(tmp_path, umask, mask, want):
    umask(mask)
    assert tio.current_umask() == mask
    new = tmp_path / "new.json"
    with atomic_path(new, fsync=True) as tmp:
        tmp.write_text("{}", encoding="utf-8")
    assert _mode(new) == want
    # a file the user made private (or shared) keeps its mode when it is rewritten
    for kept in (0o600, 0o640, 0o664):
        os.chmod(new, kept)
        with atomic_path(new) as tmp:
            tmp.write_text('{"v": 2}', encoding="utf-8")
        assert _mode(new) == kept and new.read_text(encoding="utf-8") == '{"v": 2}'


def test_current_umask_without_proc(monkeypatch, umask):
    umask(0o027)
    real_open = open

    def no_proc(path, *a, **kw):
        if str(path).startswith("/proc/"):
            raise FileNotFoundError(path)
        return real_open(path, *a, **kw)

    monkeypatch.setattr("builtins.open", no_proc)
    assert tio.current_umask() == 0o027
    assert os.umask(0o027) == 0o027  # the fallback put it back


def _cli(args: list[str], *, cwd: Path, mask: int) -> None:
    """Run the ``tumorboard`` command under a umask, as a user's shell would."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "tumorboard.cli", *args], cwd=cwd,
                         capture_output=True, text=True,
                         preexec_fn=lambda: os.umask(mask))  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]


def _written(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): _mode(p) for p in sorted(root.rglob("*")) if p.is_file()}


def test_cli_outputs_have_the_usual_permissions(tmp_path):
    pytest.importorskip("h5py")
    pytest.importorskip("torch")
    from test_slides_readers import write_test_slide

    slide = tmp_path / "case01.tif"
    write_test_slide(slide)
    logs = tmp_path / "logs" / "alpha"
    logs.mkdir(parents=True)
    record = {"question": "Grade?\nA) one\nB) two", "answer": "A) one", "response": "A) one",
              "correct": True, "files_accessed": [], "files_hallucinated": [],
              "question_time": 1.0}  # fmt: skip
    (logs / "1_chatlog_1700000000.json").write_text(json.dumps([record] * 3), encoding="utf-8")
    for mask, want in ((0o022, 0o644), (0o027, 0o640)):
        job = tmp_path / f"job{mask:o}"
        _cli(["import", "mtbbench", str(logs.parent), "--store", str(job / "store")],
             cwd=tmp_path, mask=mask)  # fmt: skip
        _cli(["score", str(job / "store"), "--format", "json", "--out", str(job / "report.json")],
             cwd=tmp_path, mask=mask)  # fmt: skip
        _cli(["tile", str(slide), "--out", str(job / "tiles"), "--quiet"], cwd=tmp_path,
             mask=mask)  # fmt: skip
        _cli(["embed", str(slide), "--out", str(job / "features"), "--model", "uni2-tiny",
              "--device", "cpu", "--quiet"], cwd=tmp_path, mask=mask)  # fmt: skip
        written = _written(job)
        kinds = {Path(name).suffix for name in written}
        # store parts and manifest, the report, coords .h5, GeoJSON, features .h5 + Parquet
        assert {".parquet", ".json", ".h5", ".geojson"} <= kinds, written
        assert any("patches" in n for n in written) and any("features" in n for n in written)
        assert {n: m for n, m in written.items() if m != want} == {}
    # the user made the report private: a rerun replaces its content, not its mode
    report = tmp_path / "job22" / "report.json"
    os.chmod(report, 0o600)
    inode = report.stat().st_ino
    _cli(["score", str(tmp_path / "job22" / "store"), "--format", "json", "--out", str(report)],
         cwd=tmp_path, mask=0o022)  # fmt: skip
    assert report.stat().st_ino != inode  # replaced by a new file (atomically) ...
    assert _mode(report) == 0o600  # ... with the mode the user gave the old one
