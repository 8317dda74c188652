"""Damaged slides in a batch: each reported by name, the good ones tiled, stderr stays readable.

Issue 18 (item 7). A seeded generator writes damaged copies of a real pyramidal TIFF (truncated,
bytes flipped in the header or the tiles, blocks zeroed, zero bytes, random bytes, resolution
tags of 2^32 - 1 and 1 / (2^32 - 1) px/cm) next to two good slides, and ``tumorboard tile`` runs
on the folder in a subprocess, as a user runs it. Checks: the run ends (time limit), exits 1,
writes coordinates for the good slides equal to the API's, reports every slide by name with a
status, prints no traceback, and prints at most a few lines per damaged slide (tifffile used to
log one line per bad tag: hundreds per file). The absurd resolution is a ``SlideError`` naming
the file (it was a ``ZeroDivisionError``), and ``mpp=`` overrides it.
"""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_slides_readers import synthetic_image, write_test_slide
from tumorboard import slides

pytest.importorskip("tifffile")
pytest.importorskip("imagecodecs")
pytest.importorskip("h5py")

# the test process's own import path: the installed package under `make test`, a source
# checkout with its built extension in development
SUBPROCESS_PYTHONPATH = os.pathsep.join(p for p in sys.path if p)


def _write_with_resolution(path: Path, res: tuple[int, int]) -> None:
    """Write a good pyramid whose XResolution/YResolution tags are ``res`` px/cm (rational)."""
    import tifffile

    img = synthetic_image()
    with tifffile.TiffWriter(path) as tif:
        for i in range(2):
            tif.write(np.ascontiguousarray(img[:: 2**i, :: 2**i]), tile=(256, 256),
                      compression="jpeg", photometric="rgb", subfiletype=1 if i else 0,
                      resolution=(res, res), resolutionunit="CENTIMETER")  # fmt: skip


def _damaged(data: bytes, rng: random.Random, kind: str) -> bytes:
    b = bytearray(data)
    if kind == "truncated":
        return bytes(b[: rng.randrange(16, len(b) - 1)])
    if kind == "header_bytes":
        for _ in range(rng.randrange(1, 12)):
            b[rng.randrange(8, 512)] = rng.randrange(256)
    elif kind == "tile_bytes":
        for _ in range(rng.randrange(5, 60)):
            b[rng.randrange(512, len(b))] = rng.randrange(256)
    elif kind == "zeroed_block":
        start = rng.randrange(8, len(b) - 4096)
        b[start : start + 4096] = bytes(4096)
    elif kind == "zero_bytes":
        return b""
    elif kind == "random_bytes":
        return rng.randbytes(rng.randrange(1, 20000))
    return bytes(b)


KINDS = ("truncated", "header_bytes", "tile_bytes", "zeroed_block", "zero_bytes", "random_bytes")


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """Write a folder of 2 good and 14 damaged slides; return it and each name's kind."""
    d = tmp_path_factory.mktemp("fuzz_slides")
    write_test_slide(d / "good_a.tif")
    write_test_slide(d / "good_b.tif", synthetic_image(seed=5)[::-1].copy())
    data = (d / "good_a.tif").read_bytes()
    rng = random.Random(18)
    kinds = {"good_a": "good", "good_b": "good"}
    for i in range(12):
        kind = KINDS[i % len(KINDS)]
        name = f"bad{i:02d}_{kind}"
        (d / f"{name}{'.svs' if i % 3 == 0 else '.tif'}").write_bytes(_damaged(data, rng, kind))
        kinds[name] = kind
    _write_with_resolution(d / "res_huge.tif", (2**32 - 1, 1))  # 2.3e-6 um/px: rounds to 0
    _write_with_resolution(d / "res_zero_denominator.tif", (1, 2**32 - 1))
    kinds["res_huge"] = kinds["res_zero_denominator"] = "resolution"
    return d, kinds


def test_tile_reports_every_damaged_slide_and_keeps_the_good_ones(batch, tmp_path):
    folder, kinds = batch
    out = tmp_path / "job"
    env = dict(os.environ, PYTHONPATH=SUBPROCESS_PYTHONPATH)
    proc = subprocess.run(
        [sys.executable, "-m", "tumorboard.cli", "tile", str(folder), "--out", str(out),
         "--preset", "bwh_biopsy", "--seg-mpp", "4", "--quiet"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    # one warning line at most per damaged slide (tifffile logged one per bad tag before)
    assert len(proc.stderr.splitlines()) <= 2 * (len(kinds) - 2), proc.stderr[-3000:]
    report = json.loads((out / "20x_256px_0px_overlap" / "tile_report.json").read_text())
    entries = {e["name"]: e for e in report["slides"]}
    assert set(entries) == set(kinds)  # every slide is in the report, by name
    for name in ("good_a", "good_b"):
        assert entries[name]["status"] == "done"
        with slides.open(folder / f"{name}.tif") as s:
            tm = slides.segment_tissue(s, preset="bwh_biopsy", seg_mpp=4.0)
            grid = slides.patch_grid(s, tm, magnification=20, patch_size=256)
        got = slides.read_coords(slides.coords_path(out, name)).coords
        np.testing.assert_array_equal(got, grid.coords)
        assert len(grid) > 0
    for name, kind in kinds.items():
        entry = entries[name]
        assert entry["status"] in ("done", "failed", "no_tissue", "no tissue"), entry
        if entry["status"] == "failed":
            assert name in entry["error"]  # the message names the file
            assert name in proc.stdout  # and so does the summary the user reads
        if kind in ("zero_bytes", "random_bytes", "resolution"):
            assert entry["status"] == "failed", entry
    assert "SlideResolutionError" in entries["res_huge"]["error"]
    assert "resolution metadata" in entries["res_huge"]["error"]
    # 4.3e13 um/px is a resolution, only far too coarse to tile at 20x: said so, by name
    assert "coarser than 5x" in entries["res_zero_denominator"]["error"]


def test_absurd_resolution_is_a_slide_error_naming_the_file(batch):
    folder, _ = batch
    name = "res_huge.tif"
    for reader in ("auto", "tifffile", "openslide", "tiffslide"):
        with pytest.raises(slides.SlideResolutionError, match=f"{name}: its resolution metadata"):
            slides.open(folder / name, reader=reader)
    with slides.open(folder / name, mpp=0.5) as s:  # the user's mpp overrides the tags
        assert s.mpp == 0.5 and s.magnification == 20
    with slides.open(folder / "res_zero_denominator.tif") as s:  # coarse, but a resolution
        assert s.mpp == round(1e4 * (2**32 - 1), 4) and s.magnification is None


def test_a_damaged_tiff_logs_one_warning_not_a_flood(batch, recwarn, caplog):
    folder, kinds = batch
    warned = 0
    caplog.set_level(logging.WARNING)
    for name, kind in kinds.items():
        if kind in ("good", "resolution"):
            continue
        path = next(folder.glob(f"{name}.*"))
        try:
            with slides.open(path, reader="tiffslide") as s:
                for level in range(s.level_count):
                    s.read_level(level)
        except slides.SlideError as exc:
            assert path.name in str(exc)
    for w in recwarn.list:
        if "reported" in str(w.message):
            warned += 1
            assert "problem(s) with this file" in str(w.message)
    names = [str(w.message).split(":")[0] for w in recwarn.list if "reported" in str(w.message)]
    assert len(names) == len(set(names))  # once per slide
    assert 1 <= warned <= len(kinds)  # the readers did complain about some damaged files ...
    readers = ("tifffile", "tiffslide", "asyncio", "fsspec", "zarr")
    leaked = [r for r in caplog.records if r.name.split(".")[0] in readers]
    assert not leaked, [(r.name, r.getMessage()[:80]) for r in leaked]  # ... in no log line


def test_reader_log_records_of_child_loggers_are_counted_too(caplog):
    """A logger's filter does not see its children's records: each child gets the filter."""
    from tumorboard.slides import _readers

    child = logging.getLogger("zarr.core.sync_tb_test")  # created after the module was imported
    sink = _readers._ReaderProblems()
    with caplog.at_level(logging.WARNING), _readers._collect_reader_logs(sink):
        child.warning("damaged chunk 7")
        logging.getLogger("fsspec.caching").warning("short read")
    assert sink.count == 2 and sink.first == "damaged chunk 7"
    assert not [r for r in caplog.records if r.name.startswith(("zarr", "fsspec"))]
    child.warning("outside a read")  # not charged to any slide, shown as usual
    assert sink.count == 2
    assert [r.getMessage() for r in caplog.records] == ["outside a read"]
