"""Slide collections: one naming rule and one progress printer.

The naming rule (``slides.slide_name``, ``slides.plan_slide_names``) and the progress printer
(``tumorboard._progress.SlideProgress``) are shared by ``tumorboard tile``, ``embed_slides`` and
its Ray executor.

Oracles: names and lines written out by hand.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from tumorboard import slides
from tumorboard._progress import SlideProgress


def test_slide_name():
    assert slides.slide_name("dir/case01.svs") == "case01"
    assert slides.slide_name(Path("case.ome.tiff")) == "case"
    assert slides.slide_name("CASE.OME.TIF") == "CASE"
    assert slides.slide_name("a.b.ndpi") == "a.b"  # only the extension goes
    assert slides.slide_name(".ome.tif") == ".ome"  # a bare extension is not stripped to ""


def test_plan_slide_names_marks_later_duplicates():
    plan = slides.plan_slide_names(["x/a.svs", "y/b.tif", "z/a.ndpi", "a.ome.tiff"])
    assert [(p.index, p.name) for p in plan] == [(0, "a"), (1, "b"), (2, "a"), (3, "a")]
    assert [p.duplicate_of for p in plan] == [None, None, Path("x/a.svs"), Path("x/a.svs")]
    assert plan[0].error is None
    assert plan[2].error == "duplicate slide name 'a' (also x/a.svs); outputs are named by slide"
    assert slides.plan_slide_names([]) == ()


def test_slide_name_is_the_readers_name(tmp_path):
    pytest.importorskip("tifffile")
    from test_slides_readers import write_test_slide

    rng = np.random.default_rng(1)
    path = tmp_path / "case07.ome.tif"
    write_test_slide(path, rng.integers(0, 255, (512, 512, 3), dtype=np.uint8), levels=1)
    with slides.open(path, reader="tifffile") as s:
        assert s.name == "case07"


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def slide(name, status, n_patches=None, seconds=None, error=None):
    return SimpleNamespace(name=name, status=status, n_patches=n_patches, seconds=seconds,
                           error=error)  # fmt: skip


def test_progress_lines_off_a_terminal():
    out = io.StringIO()
    p = SlideProgress(3, stream=out)
    p.finished(slide("a", "done", n_patches=12, seconds=1.25))
    p.update("b", 0, 10, force=True)
    p.update("b", 5, 10)  # throttled: within 5 s of the last line
    p.add_patches(10)
    p.finished(slide("b", "skipped", n_patches=10))
    p.message("worker died on c (attempt 1); retrying")
    p.finished(slide("c", "failed", error="RuntimeError: boom"))
    p.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "[1/3] a: done, 12 patches, 1.2 s"
    assert re.fullmatch(r"\[2/3\] b: 0/10 patches \| 0 patches so far \| 0\.0 patches/s", lines[1])
    assert lines[2:] == [
        "[2/3] b: skipped",
        "worker died on c (attempt 1); retrying",
        "[3/3] c: failed: RuntimeError: boom",
    ]
    assert p.done == 3 and p.patches == 10


def test_progress_on_a_terminal_rewrites_one_live_line():
    out = FakeTTY()
    p = SlideProgress(2, stream=out)
    p.update("a", 3, 4, force=True)
    p.finished(slide("a", "done", n_patches=4, seconds=0.5))
    p.close()
    text = out.getvalue()
    assert text.startswith("\r\033[K[1/2] a: 3/4 patches")
    assert "\r\033[K[1/2] a: done, 4 patches, 0.5 s\n" in text
    assert text.endswith("\r\033[K[" + "#" * 15 + "-" * 15 + "] 1/2\n")


def test_disabled_progress_prints_nothing_but_counts():
    out = FakeTTY()
    p = SlideProgress(1, stream=out, enabled=False)
    p.update("a", 1, 2, force=True)
    p.finished(slide("a", "done", n_patches=2))
    p.message("x")
    p.close()
    assert out.getvalue() == "" and p.done == 1


def test_tile_and_embed_plan_and_report_alike(tmp_path, capsys):
    pytest.importorskip("h5py")
    pytest.importorskip("torch")
    from test_atomic import png_slide, tiny_encoder
    from tumorboard.cli import main as tumorboard_main
    from tumorboard.embed import embed_slides
    from tumorboard.slides import TilingOptions

    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    first, second = png_slide(tmp_path / "x" / "a.png"), png_slide(tmp_path / "y" / "a.png")
    dup = f"duplicate slide name 'a' (also {first}); outputs are named by slide"
    argv = ["tile", str(first), str(second), "--out", str(tmp_path / "job"), "--mpp", "0.5",
            "--no-seg"]  # fmt: skip
    assert tumorboard_main(argv) == 1
    err = [ln for ln in capsys.readouterr().err.splitlines() if " | " not in ln]  # no live lines
    assert err[0].startswith("[1/2] a: done, 2 patches, ")
    assert err[1] == f"[2/2] a: failed: {dup}"

    log = io.StringIO()
    rep = embed_slides(
        [first, second],
        model=tiny_encoder(),
        out=tmp_path / "emb",
        tiling=TilingOptions(mpp=0.5, segmentation=None, threads=1),
        stream=log,
    )
    assert [(r.name, r.status, r.error) for r in rep.results] == [
        ("a", "done", None),
        ("a", "failed", dup),
    ]
    lines = [ln for ln in log.getvalue().splitlines() if " | " not in ln]
    assert lines[0] == f"[1/2] a: failed: {dup}"  # planned before any slide runs
    assert lines[-1].startswith("[2/2] a: done, 2 patches, ")
