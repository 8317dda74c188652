"""Tissue is found on real-looking slides at default settings; readers and options are checked.

Slides written here as JPEG-tiled pyramidal TIFFs (as scanners' generic TIFFs are laid out):

* the demo's own sample slide (``tumorboard._demo``: 2048 x 1536 px at 0.5 um/px, two fragments
  of about 0.15 mm2 that the closing joins into one region of 0.3 mm2);
* a biopsy-like slide, 8192 x 6144 px at 0.5 um/px (4.1 x 3.1 mm of glass) with four fragments
  of 0.3 mm2 each: two needle cores (1.5 x 0.26 mm) and two round fragments;
* a tissue-rich slide, 8192 x 6144 px at 0.5 um/px, two sections of 4.4 mm2 covering 70% of it.

CLAM's pixel-unit area filter (100 x 512^2 level-0 px) dropped every one of these at the default
preset; the physical filter keeps them. Also: "no tissue" comes with the largest region and a
hint; CLAM's presets keep their numbers on 40x scans; ``reader="auto"`` picks the direct tile
reader for tiled generic TIFF and JPEG SVS (same pixels as OpenSlide) and OpenSlide for the rest;
bad options are refused before any work, naming the option and the value.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_slides_readers import synthetic_image, write_test_slide
from tumorboard import slides
from tumorboard._demo import sample_slide_image, write_sample_slide
from tumorboard.errors import InvalidArgumentError

pytest.importorskip("tifffile")
pytest.importorskip("imagecodecs")
pytest.importorskip("openslide")

BIG_W, BIG_H, BIG_MPP = 8192, 6144, 0.5
GLASS = 240
CORES = ((2300, 1500, 1500, 255), (5900, 1700, 1500, 255))  # 0.75 x 0.1275 mm half-axes
ROUND = ((2500, 4300, 618, 618), (6000, 4500, 618, 618))  # radius 0.309 mm
SECTIONS = ((2048, 3072, 1950, 2900), (6144, 3072, 1950, 2900))  # 4.44 mm2 each


def ellipse_area_mm2(rx: float, ry: float, mpp: float) -> float:
    """Return the area of an ellipse with half-axes in pixels, in mm2."""
    return float(np.pi * rx * ry * mpp * mpp / 1e6)


def paint(img: np.ndarray, ellipses, seed: int = 0) -> np.ndarray:
    """Paint H&E-like textured ellipses (pink stroma, purple nuclei) into ``img`` in place."""
    rng = np.random.default_rng(seed)
    tile = np.clip(np.array([222, 150, 196]) + rng.integers(-14, 15, (256, 256, 3)), 0, 255)
    tile[rng.random((256, 256)) < 0.05] = (120, 70, 160)
    tile = tile.astype(np.uint8)
    h, w = img.shape[:2]
    for cx, cy, rx, ry in ellipses:
        x0, x1 = max(0, int(cx - rx)), min(w, int(cx + rx) + 1)
        y0, y1 = max(0, int(cy - ry)), min(h, int(cy + ry) + 1)
        yy, xx = np.ogrid[y0:y1, x0:x1]
        inside = ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 < 1.0
        tex = np.tile(tile, (-(-(y1 - y0) // 256), -(-(x1 - x0) // 256), 1))[: y1 - y0, : x1 - x0]
        img[y0:y1, x0:x1][inside] = tex[inside]
    return img


def big_slide(path: Path, ellipses) -> Path:
    img = np.full((BIG_H, BIG_W, 3), GLASS, np.uint8)
    write_test_slide(path, paint(img, ellipses), mpp=BIG_MPP, levels=5)  # 1, 2, 4, 8, 16x
    return path


@pytest.fixture(scope="module")
def demo_slide(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "sample_case.tif"
    return write_sample_slide(path, sample_slide_image(seed=0))


@pytest.fixture(scope="module")
def biopsy_slide(tmp_path_factory) -> Path:
    return big_slide(tmp_path_factory.mktemp("biopsy") / "biopsy.tif", CORES + ROUND)


@pytest.fixture(scope="module")
def rich_slide(tmp_path_factory) -> Path:
    return big_slide(tmp_path_factory.mktemp("rich") / "resection.tif", SECTIONS)


def cli(*argv: str) -> subprocess.CompletedProcess:
    """Run ``tumorboard`` in a subprocess, as a user would (the environment's PYTHONPATH)."""
    return subprocess.run([sys.executable, "-m", "tumorboard.cli", *argv], capture_output=True,
                          text=True, env=dict(os.environ), timeout=300)  # fmt: skip


# ---- item 1: tissue at defaults ----------------------------------------------------------------


def test_demo_slide_has_patches_at_defaults(demo_slide):
    with slides.open(demo_slide) as s:
        tissue = slides.segment_tissue(s)
        grid = slides.patch_grid(s, tissue)
        assert not tissue.empty and tissue.empty_reason == ""
        assert tissue.params == slides.PRESETS["default"] == slides.SegmentationOptions()
        # the two fragments (0.16 + 0.13 mm2 drawn) joined by the closing
        assert 0.25e6 < tissue.largest_region_um2 < 0.33e6
        assert tissue.tissue_area_um2 == pytest.approx(tissue.largest_region_um2)
        assert len(grid) > 20
        # CLAM's own preset still asks for 1.64 mm2 and says so instead of passing silently
        clam = slides.segment_tissue(s, preset="clam")
    assert clam.empty and len(clam.polygons()) == 0
    assert "largest region 0.299 mm2 is not above the minimum 1.64 mm2" in clam.empty_reason
    assert "min_tissue_area" in clam.empty_reason


def test_tile_command_finds_tissue_on_the_demo_and_biopsy_slides(demo_slide, biopsy_slide,
                                                                 tmp_path):  # fmt: skip
    out = tmp_path / "job"
    run = cli("tile", str(demo_slide), str(biopsy_slide), "--out", str(out))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    for name, least in (("sample_case", 20), ("biopsy", 4 * 15)):
        coords = slides.read_coords(slides.coords_path(out, name)).coords
        assert len(coords) >= least, (name, len(coords))


def test_biopsy_fragments_are_all_found_at_defaults(biopsy_slide):
    with slides.open(biopsy_slide) as s:
        tissue = slides.segment_tissue(s)
        grid = slides.patch_grid(s, tissue, magnification=20, patch_size=256)
    assert tissue.stats["n_kept"] == 4 and not tissue.empty
    sx, sy = tissue.downsample
    for cx, cy, _, _ in CORES + ROUND:
        assert tissue.mask[int(cy / sy), int(cx / sx)], (cx, cy)
    drawn = sum(ellipse_area_mm2(rx, ry, BIG_MPP) for *_, rx, ry in CORES + ROUND)
    assert drawn == pytest.approx(1.2, abs=0.01)
    # the thumbnail's edge pixels (JPEG chroma of the 16x level) add up to ~10% on thin cores
    assert drawn < tissue.tissue_area_um2 / 1e6 < 1.15 * drawn
    assert 0.3 < tissue.largest_region_um2 / 1e6 < 0.35
    # every fragment has patches (patch centres: top-left + 128 level-0 px)
    kept = grid.coords + 128
    for cx, cy, rx, ry in CORES + ROUND:
        near = (np.abs(kept[:, 0] - cx) < rx) & (np.abs(kept[:, 1] - cy) < ry)
        assert near.sum() >= 4, (cx, cy)


@pytest.mark.parametrize("preset", list(slides.PRESETS))
def test_tissue_rich_slide_has_patches_under_every_preset(rich_slide, preset):
    with slides.open(rich_slide) as s:
        tissue = slides.segment_tissue(s, preset=preset)
        grid = slides.patch_grid(s, tissue, magnification=20, patch_size=256)
    assert not tissue.empty, tissue.empty_reason
    assert tissue.stats["n_kept"] == 2
    assert tissue.largest_region_um2 / 1e6 == pytest.approx(4.44, rel=0.05)
    assert len(grid) > 500  # 8.9 mm2 of tissue in 0.0164 mm2 patches


@pytest.mark.parametrize("mpp", [0.25, 0.5, 1.0, 2.0])
def test_default_finds_a_small_fragment_at_every_scan_resolution(mpp):
    # a 0.1 mm2 fragment (an ellipse with 310 x 102.7 um half-axes) and a 0.02 mm2 fleck
    side = int(round(1400 / mpp))  # 1.4 mm of glass
    rx, ry = 310.0 / mpp, 102.7 / mpp
    fleck_r = 80.0 / mpp
    img = np.full((side, side, 3), GLASS, np.uint8)
    paint(img, [(side * 0.4, side * 0.3, rx, ry)])
    only_fleck = paint(np.full_like(img, GLASS), [(side * 0.7, side * 0.7, fleck_r, fleck_r)])
    assert ellipse_area_mm2(rx, ry, mpp) == pytest.approx(0.1, rel=0.001)
    with slides.ImageSlide(image=img, mpp=mpp, name="core") as s:
        tissue = slides.segment_tissue(s)
        assert not tissue.empty and tissue.stats["n_kept"] == 1
        assert tissue.largest_region_um2 == pytest.approx(0.1e6, rel=0.06)
        assert len(slides.patch_grid(s, tissue, magnification=s.magnification)) > 0
    with slides.ImageSlide(image=only_fleck, mpp=mpp, name="fleck") as s:
        fleck = slides.segment_tissue(s)
    assert fleck.empty and fleck.stats["n_regions"] == 1 and fleck.stats["n_kept"] == 0
    area = np.pi * 80.0**2
    assert fleck.largest_region_um2 == pytest.approx(area, rel=0.1)  # 0.0201 mm2
    assert f"largest region {fleck.largest_region_um2 / 1e6:.3g} mm2" in fleck.empty_reason
    assert "minimum 0.05 mm2" in fleck.empty_reason and "min_tissue_area" in fleck.empty_reason
    assert "--preset bwh_biopsy: 0.0164 mm2" in fleck.empty_reason


def test_blank_slide_is_no_tissue_with_a_hint():
    glass = np.full((600, 800, 3), 243, np.uint8)
    with slides.ImageSlide(image=glass, mpp=0.5, name="blank") as s:
        tissue = slides.segment_tissue(s)
        grid = slides.patch_grid(s, tissue, magnification=20)
    assert tissue.empty and tissue.largest_region_um2 == 0.0 and len(grid) == 0
    assert tissue.stats["n_regions"] == 0
    assert tissue.empty_reason.startswith("no tissue: nothing passes the saturation threshold 8")
    assert "blank" in tissue.empty_reason


def test_areas_are_physical_and_clam_numbers_hold_at_40x():
    unit = (512 * 0.25) ** 2  # one CLAM area unit at 40x
    assert slides.CLAM_LEVEL0_MPP == 0.25 and unit == 16_384.0
    assert slides.PRESETS["clam"] == slides.SegmentationOptions.from_clam(8, 7, 4, False, 100, 16)
    assert slides.PRESETS["clam"].min_tissue_area == 100 * unit
    assert slides.PRESETS["otsu"].use_otsu and slides.PRESETS["otsu"].min_hole_area == 16 * unit
    at_20x = slides.SegmentationOptions.from_clam(a_t=100, a_h=16, level0_mpp=0.5)
    assert at_20x.min_tissue_area == 4 * slides.PRESETS["clam"].min_tissue_area
    # tcga keeps regions above 16 CLAM units; on an 8 um/px thumbnail of a 40x slide CLAM's rule
    # is pixels > 16 * int(512^2 / 32^2) = 4096: a 63 x 63 square goes, a 65 x 65 one stays (the
    # median blur takes 5 pixels off each corner: 3949 and 4205 px)
    thumb = np.full((200, 300, 3), GLASS, np.uint8)
    thumb[20:83, 20:83] = (200, 120, 180)
    thumb[100:165, 150:215] = (200, 120, 180)
    tcga = slides.PRESETS["tcga"]
    t40 = slides.segment_image(thumb, mpp=0.25, downsample=32.0, params=tcga)
    assert t40.stats["n_kept"] == 1 and t40.mask[130, 180] and not t40.mask[50, 50]
    # the same thumbnail of a 20x scan shows the same tissue (8 um/px): the same decision
    t20 = slides.segment_image(thumb, mpp=0.5, downsample=16.0, params=tcga)
    np.testing.assert_array_equal(t20.mask, t40.mask)
    assert t20.largest_region_um2 == t40.largest_region_um2 == (65 * 65 - 20) * 64.0


# ---- item 4: the reader ------------------------------------------------------------------------


def write_svs(path: Path, img: np.ndarray, compression) -> Path:
    """Write an Aperio-style SVS: tiled level 0, stripped thumbnail, tiled 2x and 4x levels."""
    import tifffile

    h, w = img.shape[:2]
    codec = "JPEG/RGB Q=90" if compression == "jpeg" else "J2K/KDU Q=70"
    desc = (f"Aperio Image Library v12.0.15\r\n{w}x{h} [0,0 {w}x{h}] (256x256) {codec}"
            "|AppMag = 20|MPP = 0.5")  # fmt: skip
    kw = {"photometric": "rgb", "metadata": None, "description": desc}
    with tifffile.TiffWriter(path) as tif:
        tif.write(img, tile=(256, 256), compression=compression, **kw)
        tif.write(np.ascontiguousarray(img[::8, ::8]), compression="jpeg", **kw)  # thumbnail
        for f in (2, 4):
            tif.write(np.ascontiguousarray(img[::f, ::f]), tile=(256, 256),
                      compression=compression, **kw)  # fmt: skip
    return path


@pytest.fixture(scope="module")
def svs_files(tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("svs")
    img = synthetic_image()
    return write_svs(d / "jpeg.svs", img, "jpeg"), write_svs(d / "j2k.svs", img, 33005)


def test_auto_picks_the_direct_reader_for_tiled_tiff_and_jpeg_svs(demo_slide, svs_files):
    for path in (demo_slide, svs_files[0]):
        assert slides.direct_tiff_unsupported(path) is None
        with slides.open(path) as auto, slides.open(path, reader="openslide") as ref:
            assert isinstance(auto, slides.TiffFileSlide) and auto.reader == "tifffile"
            assert ref.reader == "openslide"
            assert auto.level_dimensions == ref.level_dimensions
            assert (auto.mpp, auto.magnification) == (ref.mpp, ref.magnification) == (0.5, 20)
            for level in range(ref.level_count):
                np.testing.assert_array_equal(auto.read_level(level), ref.read_level(level))


def test_auto_leaves_other_formats_to_openslide(svs_files, tmp_path):
    j2k = svs_files[1]
    assert "APERIO_JP2000_RGB" in slides.direct_tiff_unsupported(j2k)
    with slides.open(j2k) as s:
        assert isinstance(s, slides.OpenSlideSlide) and s.reader == "openslide"
        assert s.level_count == 3 and s.mpp == 0.5
    png = tmp_path / "roi.png"
    from PIL import Image

    Image.fromarray(synthetic_image(64, 48)).save(png)
    assert slides.direct_tiff_unsupported(png) == "not a TIFF file"
    with slides.open(png, mpp=0.5) as s:
        assert s.reader == "image"


def test_auto_probe_of_a_broken_tiff_is_quiet_and_openslide_reports_it(tmp_path, caplog):
    bad = tmp_path / "junk.tif"
    bad.write_bytes(b"II*\x00" + bytes(200))
    with caplog.at_level(logging.WARNING, logger="tifffile"):
        reason = slides.direct_tiff_unsupported(bad)
    assert reason.startswith("tifffile cannot parse it") and caplog.records == []
    with pytest.raises(slides.SlideError, match=r"junk\.tif: unreadable slide; openslide: "):
        slides.open(bad)


def test_unknown_reader_is_one_clear_error(demo_slide, tmp_path):
    for path in (demo_slide, tmp_path / "missing.svs"):  # checked before the file is touched
        with pytest.raises(InvalidArgumentError) as err:
            slides.open(path, reader="fast")
        msg = str(err.value)
        assert msg.startswith("reader: expected one of") and "'fast'" in msg
        for name in ("auto", "openslide", "tiffslide", "tifffile", "image"):
            assert repr(name) in msg
    assert slides.READERS == ("auto", "openslide", "tiffslide", "tifffile", "image")


# ---- item 11: options refused before any work ---------------------------------------------------


def test_magnification_above_the_slides_is_refused(demo_slide):
    with slides.open(demo_slide) as s:
        with pytest.raises(InvalidArgumentError) as err:
            slides.patch_grid(s, None, magnification=40)
        assert "magnification 40x is above the slide's native 20x" in str(err.value)
        assert "sample_case.tif" in str(err.value)
        assert len(slides.patch_grid(s, None, magnification=20)) == 48  # native is fine


@pytest.mark.parametrize("mpp", [-1, 0, 0.0, float("nan"), float("inf"), "x"])
def test_bad_mpp_is_refused_before_opening(tmp_path, mpp):
    with pytest.raises(InvalidArgumentError, match=r"mpp: expected a positive number of um/px"):
        slides.open(tmp_path / "not_there.tif", mpp=mpp)


def test_bad_seg_mpp_and_threads_are_refused_before_work(demo_slide):
    with slides.open(demo_slide) as s:

        def no_read(*args, **kwargs):
            raise AssertionError("the slide was read before the options were checked")

        s.read_downsampled = no_read
        for bad in (0, -8, float("nan")):
            with pytest.raises(InvalidArgumentError, match=f"seg_mpp: expected .*got {bad}"):
                slides.segment_tissue(s, seg_mpp=bad)
        for bad in (0, -3, 1.5, True):
            with pytest.raises(
                InvalidArgumentError, match=f"threads: expected None or an integer.*{bad}"
            ):
                slides.segment_tissue(s, threads=bad)
            with pytest.raises(InvalidArgumentError, match="threads: expected None or an integer"):
                slides.patch_grid(s, None, threads=bad)
            with pytest.raises(InvalidArgumentError, match="threads: expected None or an integer"):
                slides.PatchLoader(s, np.zeros((1, 2), np.int64), level=0, read_size=8,
                                   threads=bad)  # fmt: skip
            with pytest.raises(InvalidArgumentError, match="threads: expected None or an integer"):
                slides.preprocess_patches(np.zeros((1, 8, 8, 3), np.uint8), size=4, threads=bad)
            with pytest.raises(InvalidArgumentError, match="threads: expected None or an integer"):
                slides.resize(np.zeros((8, 8, 3), np.uint8), 4, threads=bad)
            with pytest.raises(InvalidArgumentError, match="threads: expected None or an integer"):
                s.read_level(2, threads=bad)


def _verb_flags(verb: str) -> set[str]:
    """Return the option strings of a ``tumorboard`` verb, from the CLI's own parser."""
    import argparse

    from tumorboard.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {s for a in sub.choices[verb]._actions for s in a.option_strings}


def test_no_tissue_hints_name_only_flags_the_parser_has(tmp_path):
    import re

    from PIL import Image

    mpp = 1.0
    fleck = paint(np.full((1400, 1400, 3), GLASS, np.uint8), [(700, 700, 80.0, 80.0)])
    Image.fromarray(fleck).save(tmp_path / "fleck.png")
    Image.fromarray(np.full((600, 800, 3), 243, np.uint8)).save(tmp_path / "blank.png")
    proc = subprocess.run(
        [sys.executable, "-m", "tumorboard.cli", "tile", str(tmp_path / "fleck.png"),
         str(tmp_path / "blank.png"), "--mpp", str(mpp), "--magnification", "10",
         "--out", str(tmp_path / "out"), "--quiet"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    hints = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith("NO TISSUE")]
    assert len(hints) == 2 and "largest region" in hints[0] and "looks blank" in hints[1]
    named = set(re.findall(r"--[a-z][a-z0-9-]*", " ".join(hints)))
    assert {"--preset", "--seg-mpp", "--no-seg"} <= named
    for verb in ("tile", "embed"):
        assert named <= _verb_flags(verb), named - _verb_flags(verb)
    assert "--preset bwh_biopsy" in hints[0] and "--preset otsu" in hints[1]
    assert set(slides.PRESETS) >= {"bwh_biopsy", "otsu"}
