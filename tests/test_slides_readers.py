"""Slide readers on real pyramidal JPEG-tiled TIFFs written here with tifffile.

The test slide: 2048 x 1536 px at 0.5 um/px (20x), 256 px JPEG tiles, levels 1, 2 and 4x, two
H&E-coloured tissue blobs on white (one with a lumen) and a speck; see ``write_test_slide``.
Checks: geometry and resolution through OpenSlide, tiffslide and tifffile; the same region read
by the three readers has the same pixels (and matches the written image up to JPEG error);
out-of-slide pixels are white; concurrent reads equal sequential ones; mpp key parsing and
magnification bins (TRIDENT's table); plain images; truncated and missing files raise
``SlideError`` naming the file.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest
from tumorboard import slides

pytest.importorskip("tifffile")
pytest.importorskip("imagecodecs")

W0, H0, MPP = 2048, 1536, 0.5
# (cx, cy, rx, ry) in level-0 pixels
BLOBS = ((620, 700, 420, 330), (1500, 900, 300, 380), (1850, 200, 40, 40))
LUMEN = (1500, 900, 140, 120)  # a hole in the second blob
BACKGROUND = (240, 240, 240)


def ellipse(xx, yy, e):
    cx, cy, rx, ry = e
    return ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 < 1.0


def synthetic_image(width: int = W0, height: int = H0, seed: int = 0) -> np.ndarray:
    """H&E-like blobs (pink stroma, purple nuclei) on a near-white background."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    tissue = np.zeros((height, width), bool)
    for b in BLOBS:
        tissue |= ellipse(xx, yy, b)
    tissue &= ~ellipse(xx, yy, LUMEN)
    img = np.empty((height, width, 3), np.uint8)
    img[:] = BACKGROUND
    stroma = np.array([222, 150, 196]) + rng.integers(-12, 13, (height, width, 3))
    nuclei = rng.random((height, width)) < 0.04
    stroma[nuclei] = (120, 70, 160)
    img[tissue] = np.clip(stroma[tissue], 0, 255).astype(np.uint8)
    return img


def write_test_slide(path: Path, image: np.ndarray | None = None, *, mpp: float = MPP,
                     levels: int = 3) -> np.ndarray:  # fmt: skip
    """Write a generic pyramidal TIFF and return the level-0 image.

    The TIFF has one IFD per level, 2x steps, JPEG 256 px tiles and resolution tags in pixels
    per centimetre.
    """
    import tifffile

    img = synthetic_image() if image is None else image
    with tifffile.TiffWriter(path) as tif:
        for i in range(levels):
            lv = img[:: 2**i, :: 2**i] if i else img
            res = 1e4 / (mpp * 2**i)
            tif.write(
                np.ascontiguousarray(lv),
                tile=(256, 256),
                compression="jpeg",
                compressionargs={"level": 92},
                photometric="rgb",
                subfiletype=1 if i else 0,
                resolution=(res, res),
                resolutionunit="CENTIMETER",
            )
    return img


@pytest.fixture(scope="module")
def slide_file(tmp_path_factory) -> tuple[Path, np.ndarray]:
    path = tmp_path_factory.mktemp("slides") / "case01.tif"
    return path, write_test_slide(path)


READERS = ["openslide", "tiffslide", "tifffile"]


@pytest.mark.parametrize("reader", READERS)
def test_geometry_and_resolution(slide_file, reader):
    path, _ = slide_file
    with slides.open(path, reader=reader) as s:
        assert s.reader == reader
        assert s.name == "case01"
        assert s.level_count == 3
        assert s.dimensions == (W0, H0)
        assert s.level_dimensions == ((2048, 1536), (1024, 768), (512, 384))
        np.testing.assert_allclose(s.level_downsamples, (1.0, 2.0, 4.0))
        assert s.mpp == pytest.approx(0.5)
        assert s.magnification == 20
        assert s.best_level_for_downsample(3.0) == 1
        assert s.best_level_for_downsample(0.5) == 0


def test_three_readers_give_the_same_pixels(slide_file):
    path, img = slide_file
    readers = [slides.open(path, reader=r) for r in READERS]
    try:
        for level, loc, size in [(0, (0, 0), (300, 200)), (0, (512, 640), (256, 256)),
                                 (0, (1300, 700), (333, 411)), (1, (512, 256), (200, 150)),
                                 (2, (0, 0), (512, 384)), (1, (2000, 1400), (100, 100)),
                                 (0, (-64, -32), (128, 96))]:  # fmt: skip
            regions = [r.read_region(loc, level, size) for r in readers]
            assert regions[0].shape == (size[1], size[0], 3) and regions[0].dtype == np.uint8
            for other in regions[1:]:
                np.testing.assert_array_equal(regions[0], other, err_msg=f"{level} {loc}")
        # level 0 equals the written image up to JPEG error (the texture is noisy on purpose)
        region = readers[0].read_region((512, 640), 0, (256, 256)).astype(float)
        ref = img[640:896, 512:768].astype(float)
        assert np.abs(region - ref).mean() < 10.0
        np.testing.assert_allclose(region.mean((0, 1)), ref.mean((0, 1)), atol=1.5)
        # whole levels
        for lv in range(3):
            full = [r.read_level(lv, threads=2) for r in readers]
            for other in full[1:]:
                np.testing.assert_array_equal(full[0], other)
    finally:
        for r in readers:
            r.close()


@pytest.mark.parametrize("reader", READERS)
def test_outside_the_slide_is_white(slide_file, reader):
    path, _ = slide_file
    with slides.open(path, reader=reader) as s:
        r = s.read_region((W0 - 50, H0 - 20), 0, (100, 60))
        assert (r[20:, :] == 255).all() and (r[:, 50:] == 255).all()
        assert (r[:20, :50] != 255).any()  # the slide's own (near-white, JPEG) pixels
        assert (s.read_region((-500, -500), 0, (100, 100)) == 255).all()


@pytest.mark.parametrize("reader", READERS)
def test_concurrent_reads_equal_sequential(slide_file, reader):
    path, _ = slide_file
    rng = np.random.default_rng(0)
    locs = [(int(x), int(y)) for x, y in rng.integers(0, 1800, (24, 2))]
    with slides.open(path, reader=reader) as s:
        expected = [s.read_region(loc, 0, (200, 200)) for loc in locs]
        got: list[np.ndarray | None] = [None] * len(locs)

        def work(i0: int) -> None:
            for i in range(i0, len(locs), 4):
                got[i] = s.read_region(locs[i], 0, (200, 200))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for e, g in zip(expected, got, strict=True):
            np.testing.assert_array_equal(e, g)


def test_read_downsampled_and_thumbnail(slide_file):
    path, _ = slide_file
    with slides.open(path, reader="tifffile") as s:
        img, (sx, sy) = s.read_downsampled(8.0)
        assert img.shape == (192, 256, 3)
        assert (sx, sy) == (8.0, 8.0)
        level2 = s.read_level(2)
        np.testing.assert_array_equal(img, slides.resize(level2, (192, 256)))
        th = s.get_thumbnail((128, 128))
        assert th.shape == (96, 128, 3)


def test_magnification_bins_follow_trident():
    table = [(0.1, 80), (0.15, 80), (0.16, 60), (0.19, 60), (0.2, 40), (0.25, 40), (0.3, 20),
             (0.5, 20), (0.6, 10), (1.0, 10), (1.2, 5), (2.3, 5)]  # fmt: skip
    for mpp, mag in table:
        assert slides.magnification_from_mpp(mpp) == mag, mpp
    with pytest.raises(ValueError, match="coarser than 5x"):
        slides.magnification_from_mpp(2.4)
    with pytest.raises(ValueError, match="positive"):
        slides.magnification_from_mpp(0)


def test_mpp_from_property_keys():
    f = slides.mpp_from_properties
    assert f({"openslide.mpp-x": "0.2523", "aperio.MPP": "0.5"}) == 0.2523
    assert f({"openslide.mirax.MPP": "0.24309"}) == 0.2431  # rounded to 4 dp
    assert f({"aperio.MPP": "0.4990"}) == 0.499
    assert f({"hamamatsu.XResolution": "44000"}) == round(10000 / 44000, 4)
    assert f({"openslide.comment": "Aperio Image |AppMag = 40|MPP = 0.2520|X"}) == 0.252
    assert f({"tiff.XResolution": "40000", "tiff.ResolutionUnit": "centimeter"}) == 0.25
    assert f({"tiff.XResolution": "101600", "tiff.ResolutionUnit": "inch"}) == 0.25
    assert f({"tiff.XResolution": "72", "tiff.ResolutionUnit": "none"}) is None
    assert f({}) is None


def test_plain_image_needs_mpp(tmp_path):
    from PIL import Image

    img = synthetic_image(300, 200)
    p = tmp_path / "core.png"
    Image.fromarray(img).save(p)
    with pytest.raises(ValueError, match="mpp="):
        slides.open(p)
    with slides.open(p, mpp=1.0) as s:
        assert isinstance(s, slides.ImageSlide)
        assert s.dimensions == (300, 200) and s.level_count == 1
        assert s.magnification == 10
        np.testing.assert_array_equal(s.read_region((10, 20), 0, (50, 40)), img[20:60, 10:60])
        edge = s.read_region((280, 190), 0, (40, 20))
        np.testing.assert_array_equal(edge[:10, :20], img[190:, 280:])
        assert (edge[10:] == 255).all() and (edge[:, 20:] == 255).all()


def test_mpp_override(slide_file):
    path, _ = slide_file
    with slides.open(path, mpp=0.25) as s:
        assert s.mpp == 0.25 and s.magnification == 40


def test_missing_and_truncated_files(tmp_path, slide_file):
    with pytest.raises(slides.SlideError, match="no such file"):
        slides.open(tmp_path / "nope.svs")
    path, _ = slide_file
    data = path.read_bytes()
    cut = tmp_path / "cut.tif"
    cut.write_bytes(data[: len(data) // 3])
    for reader in ["auto", *READERS]:
        with pytest.raises(slides.SlideError) as err:
            with slides.open(cut, reader=reader) as s:
                for lv in range(s.level_count):
                    s.read_level(lv)
        assert "cut.tif" in str(err.value)
    junk = tmp_path / "junk.svs"
    junk.write_bytes(os.urandom(4096))
    with pytest.raises(slides.SlideError, match="junk.svs"):
        slides.open(junk)
