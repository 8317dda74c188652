"""Segmentation, patch grid, loader, coords files and ``tumorboard tile`` end to end.

They run on the pyramidal test slide of test_slides_readers.py and on scikit-image's real IHC
image.

Oracles: the tissue mask is recomputed by an independent numpy/scipy/skimage pipeline (numpy
saturation, scipy median filter, skimage Otsu, numpy closing, scipy-label region filter); the
grid by the brute force of test_slides_core.py; the known blob geometry decides which patches must
be kept or dropped; the loader's tensors equal PIL + numpy on OpenSlide reads; coords files are
inspected with h5py and TRIDENT/CLAM files written by hand in their documented layouts.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy import ndimage as ndi
from test_slides_core import MEAN, STD, brute_grid, oracle_filter
from test_slides_readers import BLOBS, H0, LUMEN, MPP, W0, synthetic_image, write_test_slide
from tumorboard import slides
from tumorboard.cli import main as tumorboard_main
from tumorboard.slides import SegmentationOptions

h5py = pytest.importorskip("h5py")

# areas in um2: the speck (40 px radius at 0.5 um/px, 1,257 um2) is dropped, the lumen (13,195 um2)
# stays a hole
PARAMS = SegmentationOptions(sthresh=8, mthresh=7, close=4, min_tissue_area=30_000.0,
                            min_hole_area=3_000.0, max_n_holes=8)  # fmt: skip


@pytest.fixture(scope="module")
def slide_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pipeline") / "case01.tif"
    write_test_slide(path)
    return path


# ---- independent mask oracle --------------------------------------------------------------------


def np_close(mask: np.ndarray, k: int) -> np.ndarray:
    """OpenCV-style closing with numpy windows (anchor k//2, outside pixels ignored)."""
    from numpy.lib.stride_tricks import sliding_window_view

    if k <= 1:
        return mask

    def win(a, axis, dilate):
        pad = [(0, 0), (0, 0)]
        pad[axis] = (k // 2, k - 1 - k // 2)
        w = sliding_window_view(np.pad(a, pad, constant_values=not dilate), k, axis=axis)
        return w.max(-1) if dilate else w.min(-1)

    d = win(win(mask, 1, True), 0, True)
    return win(win(d, 1, False), 0, False)


def oracle_mask(
    rgb: np.ndarray, p: SegmentationOptions, ds: float, mpp: float = MPP
) -> tuple[np.ndarray, int]:
    from skimage.filters import threshold_otsu

    mx, mn = rgb.max(-1).astype(np.int64), rgb.min(-1).astype(np.int64)
    sat = np.where(mx == 0, 0, (510 * (mx - mn) + mx) // np.maximum(2 * mx, 1)).astype(np.uint8)
    if p.mthresh > 1:
        sat = ndi.median_filter(sat, size=p.mthresh, mode="nearest")
    t = int(threshold_otsu(sat)) if p.use_otsu else p.sthresh
    closed = np_close(sat > t, p.close).astype(np.uint8)
    px = (mpp * ds) ** 2  # um2 per pixel
    keep = oracle_filter(closed, p.min_tissue_area / px, p.min_hole_area / px, p.max_n_holes)
    return keep.astype(bool), t


# ---- segmentation -------------------------------------------------------------------------------


def test_segmentation_matches_oracle_and_geometry(slide_path):
    with slides.open(slide_path) as s:
        tm = slides.segment_tissue(s, params=PARAMS, seg_mpp=4.0)
        thumb, _ = s.read_downsampled(8.0)
    assert tm.mask.shape == (192, 256) and tm.mask.dtype == np.bool_
    assert tm.downsample == (8.0, 8.0) and tm.level0_size == (W0, H0)
    ref, t = oracle_mask(thumb, PARAMS, 8.0)
    np.testing.assert_array_equal(tm.mask, ref)
    assert tm.threshold == t == 8
    assert tm.stats["n_kept"] == 2 and tm.stats["n_holes_kept"] >= 1  # two blobs, the lumen
    at = lambda x, y: tm.mask[int(y / 8), int(x / 8)]  # noqa: E731
    assert at(620, 700) and at(1500, 650) and at(1500, 1180)  # inside the blobs
    assert not at(1500, 900)  # the lumen stays a hole
    assert not at(1850, 200)  # the speck is below min_tissue_area and dropped
    assert not at(100, 1450) and not at(1950, 1450)  # background


def test_ihc_image_segmentation_matches_oracle():
    from skimage import data

    ihc = data.immunohistochemistry()
    for p in (PARAMS, slides.PRESETS["otsu"], slides.PRESETS["bwh_biopsy"]):
        p = replace(p, min_tissue_area=500.0, min_hole_area=125.0)
        tm = slides.segment_image(ihc, params=p, mpp=1.0)
        ref, t = oracle_mask(ihc, p, 1.0, mpp=1.0)
        assert tm.threshold == t
        np.testing.assert_array_equal(tm.mask, ref)
        assert 0.2 < tm.tissue_fraction < 1.0


def test_presets_and_validation():
    unit = (512 * 0.25) ** 2  # one CLAM area unit at 40x, in um2
    assert slides.PRESETS["tcga"] == SegmentationOptions(8, 7, 4, False, 16 * unit, 4 * unit, 8)
    assert slides.PRESETS["bwh_biopsy"] == SegmentationOptions(15, 11, 2, False, unit, unit, 2)
    with pytest.raises(ValueError, match="unknown preset"):
        slides.segment_image(np.zeros((4, 4, 3), np.uint8), preset="nope", mpp=1.0)
    with pytest.raises(ValueError, match="mthresh"):
        SegmentationOptions(mthresh=4)
    with pytest.raises(ValueError, match="min_tissue_area: expected a non-negative number"):
        SegmentationOptions(min_tissue_area=-1.0)
    with pytest.raises(ValueError, match="image: expected"):
        slides.segment_image(np.zeros((4, 4), np.uint8), mpp=1.0)


def test_geojson_export(slide_path, tmp_path):
    with slides.open(slide_path) as s:
        tm = slides.segment_tissue(s, params=PARAMS, seg_mpp=4.0)
    gj = tm.to_geojson()
    assert gj["type"] == "FeatureCollection" and len(gj["features"]) == 2
    total = 0.0
    for f in gj["features"]:
        assert f["type"] == "Feature" and f["geometry"]["type"] == "Polygon"
        rings = [np.array(r, float) for r in f["geometry"]["coordinates"]]
        for r in rings:
            assert (r[0] == r[-1]).all() and len(r) >= 5  # closed
            assert (r[:, 0] >= 0).all() and (r[:, 0] <= W0).all() and (r[:, 1] <= H0).all()
        signed = [0.5 * np.sum(r[:-1, 0] * r[1:, 1] - r[1:, 0] * r[:-1, 1]) for r in rings]
        assert signed[0] > 0 and all(a < 0 for a in signed[1:])
        assert sum(signed) == pytest.approx(f["properties"]["area"])
        total += sum(signed)
    assert total == pytest.approx(tm.mask.sum() * 64.0)
    # the blob with the lumen comes second (raster order) and has the hole
    assert len(gj["features"][1]["geometry"]["coordinates"]) == 2
    out = tm.write_geojson(tmp_path / "contours_geojson" / "case01.geojson")
    assert json.loads(out.read_text()) == gj


# ---- grid ---------------------------------------------------------------------------------------


def test_grid_matches_brute_force_and_blob_geometry(slide_path):
    with slides.open(slide_path) as s:
        tm = slides.segment_tissue(s, params=PARAMS, seg_mpp=4.0)
        for min_tissue in (0.0, 0.31, 0.77):
            g = slides.patch_grid(s, tm, magnification=20, patch_size=256, min_tissue=min_tissue)
            ref, ref_f = brute_grid(tm.mask.astype(np.uint8), W0, H0, 256, 256, min_tissue)
            np.testing.assert_array_equal(g.coords, ref)
            np.testing.assert_allclose(g.tissue_fraction, ref_f, atol=1e-5)
        g = slides.patch_grid(s, tm, magnification=20, patch_size=256)
    assert (g.n_cols, g.n_rows) == (8, 6)
    assert (g.patch_size_level0, g.step_level0, g.read_level, g.read_size) == (256, 256, 0, 256)
    kept = {tuple(c) for c in g.coords.tolist()}
    for r in range(6):
        for c in range(8):
            x0, y0 = c * 256, r * 256
            xs, ys = np.array([x0, x0 + 256] * 2), np.array([y0, y0, y0 + 256, y0 + 256])
            inside = any(
                (((xs - b[0]) / b[2]) ** 2 + ((ys - b[1]) / b[3]) ** 2 < 1).all() for b in BLOBS
            )
            cx, cy = np.clip(LUMEN[0], x0, x0 + 256), np.clip(LUMEN[1], y0, y0 + 256)
            near_lumen = ((cx - LUMEN[0]) / LUMEN[2]) ** 2 + ((cy - LUMEN[1]) / LUMEN[3]) ** 2 < 1
            if inside and not near_lumen:
                assert (x0, y0) in kept, (x0, y0)
            # far (> 96 px) from the two kept blobs: pure background
            far = all(
                ((np.clip(b[0], x0, x0 + 256) - b[0]) / (b[2] + 96)) ** 2
                + ((np.clip(b[1], y0, y0 + 256) - b[1]) / (b[3] + 96)) ** 2
                >= 1
                for b in BLOBS[:2]
            )
            if far:
                assert (x0, y0) not in kept, (x0, y0)


def test_grid_magnification_overlap_and_read_plan(slide_path):
    with slides.open(slide_path) as s:
        g10 = slides.patch_grid(s, None, magnification=10, patch_size=256, overlap=32)
        assert (g10.patch_size_level0, g10.step_level0) == (512, 448)
        assert (g10.read_level, g10.read_size) == (1, 256)
        assert (g10.n_cols, g10.n_rows) == (5, 4) and len(g10) == 20
        assert g10.coords[:6].tolist() == [[0, 0], [448, 0], [896, 0], [1344, 0], [1792, 0],
                                           [0, 448]]  # fmt: skip
        g20 = slides.patch_grid(s, None, magnification=20, patch_size=128)
        assert (g20.patch_size_level0, g20.read_level, g20.read_size) == (128, 0, 128)
        with pytest.raises(ValueError, match="overlap"):
            slides.patch_grid(s, None, patch_size=256, overlap=256)
    assert slides.read_plan((1.0, 4.0003, 16.001), 4.0, 1024) == (1, 256)
    assert slides.read_plan((1.0, 4.0003, 16.001), 2.0, 512) == (0, 512)
    assert slides.read_plan((1.0, 4.0003, 16.001), 8.0, 2048) == (1, 512)
    assert slides.read_plan((1.0, 2.0), 0.5, 128) == (0, 128)


# ---- loader -------------------------------------------------------------------------------------


def anchor_patches(path, coords, level, read, size):
    import openslide

    osr = openslide.OpenSlide(str(path))
    out = []
    for x, y in coords:
        img = osr.read_region((int(x), int(y)), level, (read, read)).convert("RGB")
        a = np.asarray(img.resize((size, size), Image.BILINEAR), np.float32)
        out.append(((a / np.float32(255) - MEAN) / STD).transpose(2, 0, 1))
    osr.close()
    return np.stack(out)


@pytest.mark.parametrize("reader", ["openslide", "tiffslide", "tifffile"])
def test_loader_equals_pil_numpy(slide_path, reader):
    with slides.open(slide_path, reader=reader) as s:
        tm = slides.segment_tissue(s, params=PARAMS, seg_mpp=4.0)
        for mag in (20, 10):
            g = slides.patch_grid(s, tm, magnification=mag, patch_size=256)
            loader = slides.PatchLoader(s, g, batch_size=5, size=224, threads=2, prefetch=1)
            batches = list(loader)
            assert len(batches) == len(loader) == -(-len(g) // 5)
            coords = np.concatenate([b.coords for b in batches])
            np.testing.assert_array_equal(coords, g.coords)
            np.testing.assert_array_equal(np.concatenate([b.index for b in batches]),
                                          np.arange(len(g)))  # fmt: skip
            images = np.concatenate([b.images for b in batches])
            ref = anchor_patches(slide_path, g.coords, g.read_level, g.read_size, 224)
            np.testing.assert_array_equal(images, ref)


def test_loader_half_precision_and_validation(slide_path):
    with slides.open(slide_path, reader="tifffile") as s:
        g = slides.patch_grid(s, None, magnification=20, patch_size=256)
        f32 = next(iter(slides.PatchLoader(s, g, batch_size=4, size=64)))
        f16 = next(iter(slides.PatchLoader(s, g, batch_size=4, size=64, dtype="float16")))
        np.testing.assert_array_equal(f16.images, f32.images.astype(np.float16))
        single = list(slides.PatchLoader(s, g, batch_size=7, size=64, threads=1, prefetch=0))
        assert sum(len(b) for b in single) == len(g)
        with pytest.raises(ValueError, match="level="):
            slides.PatchLoader(s, g.coords)
        with pytest.raises(ValueError, match="batch_size"):
            slides.PatchLoader(s, g, batch_size=0)


# ---- coords files -------------------------------------------------------------------------------


def test_trident_coords_layout(slide_path, tmp_path):
    with slides.open(slide_path) as s:
        tm = slides.segment_tissue(s, params=PARAMS, seg_mpp=4.0)
        g = slides.patch_grid(s, tm, magnification=20, patch_size=256)
    path = slides.coords_path(tmp_path, "case01", magnification=20, patch_size=256, overlap=0)
    assert path == tmp_path / "20x_256px_0px_overlap" / "patches" / "case01_patches.h5"
    slides.write_coords(path, g)
    with h5py.File(path, "r") as f:
        assert list(f.keys()) == ["coords"]
        ds = f["coords"]
        assert ds.dtype == np.int64 and ds.shape == (len(g), 2)
        assert ds.chunks == (1, 2) and ds.maxshape == (None, 2)
        np.testing.assert_array_equal(ds[...], g.coords)
        attrs = dict(ds.attrs)
    assert set(attrs) == set(slides._h5.TRIDENT_ATTRS)
    assert attrs["patch_size"] == 256 and attrs["patch_size_level0"] == 256
    assert attrs["level0_magnification"] == 20 and attrs["target_magnification"] == 20
    assert attrs["overlap"] == 0 and attrs["name"] == "case01"
    assert attrs["level0_width"] == W0 and attrs["level0_height"] == H0
    assert attrs["savetodir"] == str(path.parent)
    cf = slides.read_coords(path)
    assert cf.layout == "trident" and cf.name == "case01" and cf.patch_size_level0 == 256
    np.testing.assert_array_equal(cf.coords, g.coords)
    assert slides.coords_complete(path)
    assert not list(path.parent.glob(".*tmp*"))  # the temporary file was renamed away


def test_read_trident_and_clam_files_written_by_hand(tmp_path):
    coords = np.array([[0, 0], [512, 0], [0, 512]], np.int64)
    tri = tmp_path / "a_patches.h5"
    with h5py.File(tri, "w") as f:
        ds = f.create_dataset("coords", data=coords, chunks=(1, 2), maxshape=(None, 2))
        ds.attrs.update({"patch_size": 256, "patch_size_level0": 512, "level0_magnification": 40,
                         "target_magnification": 20, "overlap": 0, "name": "a",
                         "savetodir": "/x/patches", "level0_width": "None",
                         "level0_height": "None"})  # fmt: skip
    cf = slides.read_coords(tri)
    assert cf.layout == "trident" and cf.patch_size_level0 == 512 and cf.name == "a"
    assert cf.attrs["level0_width"] is None
    np.testing.assert_array_equal(cf.coords, coords)
    clam = tmp_path / "b.h5"
    with h5py.File(clam, "w") as f:
        ds = f.create_dataset("coords", data=coords.astype(np.int64))
        ds.attrs.update({"patch_size": 256, "patch_level": 1, "downsample": np.array([2.0, 2.0]),
                         "downsampled_level_dim": np.array([1024, 768]),
                         "level_dim": np.array([1024, 768]), "name": "b",
                         "save_path": "/y/patches"})  # fmt: skip
    cf = slides.read_coords(clam)
    assert cf.layout == "clam" and cf.patch_size == 256 and cf.patch_size_level0 == 512
    assert cf.name == "b" and cf.attrs["downsample"] == [2.0, 2.0]
    assert not slides.coords_complete(clam)  # resumable outputs are TRIDENT files


def test_truncated_and_foreign_h5_files(tmp_path, slide_path):
    with slides.open(slide_path) as s:
        g = slides.patch_grid(s, None, magnification=20, patch_size=256)
    good = slides.write_coords(tmp_path / "c_patches.h5", g)
    cut = tmp_path / "cut_patches.h5"
    cut.write_bytes(good.read_bytes()[:700])
    with pytest.raises(slides.CoordsFileError, match="cut_patches.h5.*truncated or corrupt"):
        slides.read_coords(cut)
    assert not slides.coords_complete(cut)
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f.create_dataset("features", data=np.zeros((2, 4)))
    with pytest.raises(slides.CoordsFileError, match="no 'coords' dataset"):
        slides.read_coords(other)
    with pytest.raises(slides.CoordsFileError, match="no such file"):
        slides.read_coords(tmp_path / "missing.h5")


# ---- tumorboard tile ----------------------------------------------------------------------------


def run_cli(*argv: str) -> int:
    return tumorboard_main(["tile", *argv])


@pytest.fixture()
def slide_dir(slide_path, tmp_path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(slide_path, d / "a.tif")
    img = synthetic_image(seed=3)[::-1].copy()  # a different slide
    write_test_slide(d / "b.tif", img)
    (d / "corrupt.svs").write_bytes(b"II*\x00" + b"\x00" * 200)
    return d


def report(out: Path) -> dict:
    return json.loads((out / "20x_256px_0px_overlap" / "tile_report.json").read_text())


def test_tile_cli_resume_and_errors(slide_dir, tmp_path, capsys):
    out = tmp_path / "job"
    args = [str(slide_dir), str(tmp_path / "missing.tif"), "--out", str(out), "--preset",
            "bwh_biopsy", "--seg-mpp", "4", "--quiet"]  # fmt: skip
    assert run_cli(*args) == 1  # the corrupt and the missing slide failed
    rep = report(out)
    status = {e["name"]: e["status"] for e in rep["slides"]}
    assert status == {"a": "done", "b": "done", "corrupt": "failed", "missing": "failed"}
    errors = {e["name"]: e["error"] for e in rep["slides"] if e["status"] == "failed"}
    assert "corrupt.svs" in errors["corrupt"] and "no such file" in errors["missing"]
    printed = capsys.readouterr().out
    assert "2 done, 0 skipped (complete), 0 no tissue, 2 failed" in printed and "FAILED" in printed
    pa = slides.coords_path(out, "a")
    pb = slides.coords_path(out, "b")
    assert (out / "contours_geojson" / "a.geojson").is_file()
    # the CLI's coords equal the API's
    with slides.open(slide_dir / "a.tif") as s:
        tm = slides.segment_tissue(s, preset="bwh_biopsy", seg_mpp=4.0)
        g = slides.patch_grid(s, tm, magnification=20, patch_size=256)
    np.testing.assert_array_equal(slides.read_coords(pa).coords, g.coords)
    assert len(g) > 0

    # resume: complete files are skipped and untouched
    mtime_a = pa.stat().st_mtime_ns
    pb.write_bytes(pb.read_bytes()[:500])  # b left incomplete, as by a crash
    assert run_cli(*args) == 1
    status = {e["name"]: e["status"] for e in report(out)["slides"]}
    assert status["a"] == "skipped" and status["b"] == "done"
    assert pa.stat().st_mtime_ns == mtime_a
    assert slides.coords_complete(pb)


def test_tile_cli_interrupted_run_resumes(slide_dir, tmp_path, monkeypatch):
    (slide_dir / "corrupt.svs").unlink()
    out = tmp_path / "job"
    args = [str(slide_dir / "a.tif"), str(slide_dir / "b.tif"), "--out", str(out),
            "--no-seg", "--quiet"]  # fmt: skip
    real_write = slides._tiling.write_coords
    calls = []

    def flaky_write(path, grid, **kw):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the run is killed while writing the second slide
        return real_write(path, grid, **kw)

    monkeypatch.setattr(slides._tiling, "write_coords", flaky_write)
    assert run_cli(*args) == 130  # "tumorboard: interrupted", the shell's status for Ctrl-C
    assert slides.coords_complete(slides.coords_path(out, "a"))
    assert not slides.coords_path(out, "b").exists()
    monkeypatch.setattr(slides._tiling, "write_coords", real_write)
    assert run_cli(*args) == 0
    status = {e["name"]: e["status"] for e in report(out)["slides"]}
    assert status == {"a": "skipped", "b": "done"}
    cf = slides.read_coords(slides.coords_path(out, "b"))
    assert len(cf) == 8 * 6  # --no-seg keeps the whole 20x grid
    assert run_cli(*args, "--force") == 0
    assert {e["status"] for e in report(out)["slides"]} == {"done"}


def test_tile_cli_module_entry_point(slide_dir, tmp_path):
    out = tmp_path / "job2"
    rc = tumorboard_main(["tile", str(slide_dir / "a.tif"), "--out", str(out),
                        "--magnification", "10", "--patch-size", "128", "--overlap", "16",
                        "--quiet", "--preset", "bwh_biopsy", "--seg-mpp", "4"])  # fmt: skip
    assert rc == 0
    cf = slides.read_coords(out / "10x_128px_16px_overlap" / "patches" / "a_patches.h5")
    assert cf.attrs["overlap"] == 16 and cf.attrs["target_magnification"] == 10
    assert cf.patch_size_level0 == 256
    assert run_cli(str(slide_dir / "a.tif"), "--out", str(out), "--patch-size", "0") == 2
