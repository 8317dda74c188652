"""GPU JPEG decoding of tiled TIFF patches (``decode="gpu"``), tested on nvImageCodec's CPU backend.

Oracles: tifffile's own tile decode (``page.decode``, imagecodecs' libjpeg-turbo) for the JPEG
stream fix-up, bit for bit; the slide's ``read_region`` for the assembled regions, bit for bit
(nvImageCodec's CPU backend is libjpeg-turbo too); the loader's Python path
(``PatchLoader(native=False)``) for the resized patches, within one uint8 step (PIL's
fixed-point filter weights against torch's float32 ones).

The pyramids are written here the way scanners write them: Aperio-like RGB tiles (components
R, G, B numbered 1, 2, 3, no JFIF or Adobe marker, so a decoder left alone guesses YCbCr) and
YCbCr tiles with 2x2 chroma subsampling, both as abbreviated streams sharing a JPEGTables tag,
plus tifffile's own JFIF tiles (complete streams, no tables). On a machine with CUDA the same
comparisons run on nvJPEG with a looser bound.
"""

from __future__ import annotations

import io
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from _scanner_tiffs import TILE, segments, write_tables_pyramid
from tumorboard import slides
from tumorboard.errors import InvalidArgumentError, MissingDependencyError
from tumorboard.slides import SlideError
from tumorboard.slides import _gpu_decode as gd

tifffile = pytest.importorskip("tifffile")
imagecodecs = pytest.importorskip("imagecodecs")
torch = pytest.importorskip("torch")
pytest.importorskip("nvidia.nvimgcodec")
Image = pytest.importorskip("PIL.Image")

CUDA = torch.cuda.is_available()
# level-0 corners: aligned, across tile borders, past the right/bottom edge, outside the slide
COORDS = np.array([[0, 0], [128, 256], [77, 190], [600, 500], [650, 470], [-40, -25],
                   [900, 900], [333, 101]], np.int64)  # fmt: skip


def _image(h: int, w: int, seed: int) -> np.ndarray:
    g = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([128 + 100 * np.sin(xx / 37.0), 128 + 90 * np.cos(yy / 23.0),
                     128 + 60 * np.sin((xx + yy) / 51.0)], axis=-1)  # fmt: skip
    return np.clip(base + g.normal(0, 20, base.shape), 0, 255).astype(np.uint8)


def _write_tifffile_pyramid(path: Path, img: np.ndarray, compression: str | None) -> Path:
    with tifffile.TiffWriter(path) as tif:
        for i in range(2):
            lv = np.ascontiguousarray(img[:: 2**i, :: 2**i])
            res = 1e4 / (0.5 * 2**i)
            kw = {"compressionargs": {"level": 85}} if compression else {}
            tif.write(lv, tile=(TILE, TILE), compression=compression, photometric="rgb",
                      subfiletype=1 if i else 0, resolution=(res, res),
                      resolutionunit="CENTIMETER", **kw)  # fmt: skip
    return path


KINDS = ("aperio-rgb", "ycbcr-tables", "tifffile-jfif")


@pytest.fixture(scope="module")
def pyramids(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gpu_decode")
    img = _image(610, 730, seed=3)
    return {
        "aperio-rgb": write_tables_pyramid(root / "rgb.tif", img, "rgb"),
        "ycbcr-tables": write_tables_pyramid(root / "ycbcr.tif", img, "ycbcr"),
        "tifffile-jfif": _write_tifffile_pyramid(root / "jfif.tif", img, "jpeg"),
        "raw": _write_tifffile_pyramid(root / "raw.tif", img, None),
    }


@pytest.fixture
def cpu_backend(monkeypatch):
    """``decode="gpu"`` on the CPU device runs nvImageCodec's CPU backend (libjpeg-turbo)."""
    monkeypatch.setattr(gd, "_CPU_BACKEND_FOR_TESTS", True)


def _tiles(path: Path):
    """Yield (page, tile index, tile bytes, tifffile's decoded tile) for every tile."""
    with tifffile.TiffFile(path) as tf:
        for page in (lv.keyframe for lv in tf.series[0].levels):
            fh = tf.filehandle
            for i, (off, n) in enumerate(zip(page.dataoffsets, page.databytecounts,
                                             strict=True)):  # fmt: skip
                fh.seek(off)
                data = fh.read(n)
                want = page.decode(data, i, jpegtables=page.jpegtables)[0]
                yield page, i, data, want.reshape(want.shape[-3:])


@pytest.mark.parametrize("kind", KINDS)
def test_fixed_up_streams_decode_like_tifffile(pyramids, kind):
    n = 0
    for page, i, data, want in _tiles(pyramids[kind]):
        rgb = int(page.photometric) == 2 and not page.is_jfif
        assert rgb == (kind == "aperio-rgb")
        assert (page.jpegtables is not None) == (kind != "tifffile-jfif")
        stream = gd.jpeg_stream(data, page.jpegtables, rgb=rgb)
        pil = np.asarray(Image.open(io.BytesIO(stream)).convert("RGB"))
        np.testing.assert_array_equal(pil, want, err_msg=f"tile {i} (PIL)")
        np.testing.assert_array_equal(imagecodecs.jpeg8_decode(stream), want)
        n += 1
    assert n == 6 * 5 + 3 * 3  # 730 x 610 and 365 x 305 in 128-px tiles
    # without the marker, a decoder takes Aperio's RGB components for YCbCr
    if kind == "aperio-rgb":
        plain = gd.merge_jpeg_tables(data, page.jpegtables)
        assert np.abs(imagecodecs.jpeg8_decode(plain).astype(int) - want).max() > 50


def test_mark_rgb_replaces_an_adobe_marker_and_checks_its_input():
    img = _image(32, 32, seed=1)
    ycc = imagecodecs.jpeg8_encode(img, 90, colorspace="rgb", outcolorspace="rgb")
    adobe = [s for m, s in segments(ycc) if m == 0xEE]
    assert adobe and adobe[0][4:9] == b"Adobe"
    marked = gd.mark_rgb(ycc)
    found = [s for m, s in segments(marked) if m == 0xEE]
    assert len(found) == 1 and found[0][-1] == 0  # transform 0: RGB components
    np.testing.assert_array_equal(imagecodecs.jpeg8_decode(marked), imagecodecs.jpeg8_decode(ycc))
    for bad in (b"", b"\x00\x01", b"\xff\xd8\x00\x00garbage"):
        with pytest.raises(ValueError):
            gd.mark_rgb(bad)
    with pytest.raises(ValueError, match="SOI"):
        gd.merge_jpeg_tables(b"nope", None)
    with pytest.raises(ValueError, match="JPEGTables"):
        gd.merge_jpeg_tables(ycc, b"\xff\xd8\xff\xdb")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("level", [0, 1])
def test_regions_equal_read_region(pyramids, kind, level):
    with slides.open(pyramids[kind]) as s:
        assert s.reader == "tifffile"
        dec = slides.GpuTileDecoder(s, level, device="cpu", backend="cpu")
        got = dec.regions(COORDS, 150)
        assert got.dtype == torch.uint8 and got.shape == (len(COORDS), 150, 150, 3)
        for i, (x, y) in enumerate(COORDS.tolist()):
            want = s.read_region((x, y), level, (150, 150))
            np.testing.assert_array_equal(got[i].numpy(), want, err_msg=f"region {i}")
        assert (got[5].numpy()[:12] == 255).all() and (got[6].numpy() == 255).all()


def _cpu_and_gpu(slide, **kw):
    def run(**extra):
        loader = slides.PatchLoader(slide, COORDS, batch_size=3, **kw, **extra)
        batches = list(loader)
        return loader, batches

    cpu = np.concatenate([b.images for b in run(native=False)[1]])
    loader, batches = run(decode="gpu", device="cpu")
    assert loader.decode == "gpu" and not loader.native
    assert all(isinstance(b.images, torch.Tensor) for b in batches)
    gpu = torch.cat([b.images for b in batches])
    np.testing.assert_array_equal(np.concatenate([b.coords for b in batches]), COORDS)
    return cpu, gpu


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
def test_uint8_patches_within_one_step_of_the_cpu_path(pyramids, cpu_backend, kind,
                                                       interpolation):  # fmt: skip
    with slides.open(pyramids[kind]) as s:
        cpu, gpu = _cpu_and_gpu(s, level=0, read_size=200, size=(96, 112), dtype="uint8",
                                interpolation=interpolation)  # fmt: skip
    assert gpu.dtype == torch.uint8 and tuple(gpu.shape) == cpu.shape
    diff = np.abs(gpu.numpy().astype(np.int16) - cpu)
    frac = float((diff > 0).mean())
    print(f"{kind} {interpolation}: max {diff.max()}, {frac:.4%} of values differ")
    assert diff.max() <= 1
    assert frac < 0.01  # PIL's two uint8 passes are reproduced; only weight rounding differs
    assert (gpu[6] == 255).all()  # outside the slide: white


def test_same_size_needs_no_resize(pyramids, cpu_backend):
    with slides.open(pyramids["aperio-rgb"]) as s:
        cpu, gpu = _cpu_and_gpu(s, level=1, read_size=64, size=64, dtype="uint8")
    np.testing.assert_array_equal(gpu.numpy(), cpu)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_normalised_output_is_the_uint8_output_normalised(pyramids, cpu_backend, dtype):
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    with slides.open(pyramids["ycbcr-tables"]) as s:
        kw = {"level": 0, "read_size": 150, "size": 64, "mean": mean, "std": std}
        u8 = torch.cat(list(b.images for b in slides.PatchLoader(
            s, COORDS, dtype="uint8", decode="gpu", device="cpu", **kw)))  # fmt: skip
        got = torch.cat(list(b.images for b in slides.PatchLoader(
            s, COORDS, dtype=dtype, decode="gpu", device="cpu", **kw)))  # fmt: skip
        cpu = np.concatenate([b.images for b in slides.PatchLoader(
            s, COORDS, dtype="float32", native=False, **kw)])  # fmt: skip
    want = (u8.float() / 255 - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(
        1, 3, 1, 1
    )
    want = want.to(getattr(torch, dtype))
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    # one uint8 step is 1 / (255 std) after normalisation
    step = 1 / (255 * min(std))
    assert np.abs(got.float().numpy() - cpu).max() <= step * 1.001 + 0.01 * (dtype != "float32")


def test_sparse_tiles_are_white(pyramids, cpu_backend):
    with slides.open(pyramids["aperio-rgb"]) as s:
        dec = slides.GpuTileDecoder(s, 0, device="cpu", backend="cpu")
        dec._counts = dec._counts.copy()
        dec._counts[1] = 0  # tile (1, 0): x in [128, 256), y in [0, 128)
        r = dec.regions(np.array([[100, 0]]), 100).numpy()[0]
        assert (r[:, 28:100] == 255).all()
        np.testing.assert_array_equal(r[:, :28], s.read_region((100, 0), 0, (28, 100)))


def test_a_corrupt_tile_names_the_tile(pyramids, cpu_backend, tmp_path):
    src = pyramids["aperio-rgb"]
    bad = tmp_path / "bad.tif"
    shutil.copy(src, bad)
    with tifffile.TiffFile(src) as tf:
        page = tf.pages[0]
        off, n = int(page.dataoffsets[7]), int(page.databytecounts[7])
    with open(bad, "r+b") as f:
        f.seek(off + 2)
        f.write(b"\x00" * min(n - 2, 64))  # no marker after SOI
    with slides.open(bad) as s:
        loader = slides.PatchLoader(s, COORDS, level=0, read_size=200, decode="gpu",
                                    device="cpu", batch_size=8)  # fmt: skip
        with pytest.raises(SlideError, match=r"tile 7 of level 0 is corrupt"):
            list(loader)


def test_missing_nvimgcodec_says_how_to_install(pyramids, monkeypatch):
    monkeypatch.setitem(sys.modules, "nvidia.nvimgcodec", None)  # import raises ImportError
    with pytest.raises(MissingDependencyError, match=r"nvidia-nvimgcodec-cu12.*\[gpu\]"):
        gd._import_nvimgcodec()
    monkeypatch.setattr(gd, "_CPU_BACKEND_FOR_TESTS", True)
    with slides.open(pyramids["aperio-rgb"]) as s, pytest.raises(MissingDependencyError):
        slides.PatchLoader(s, COORDS, level=0, read_size=64, decode="gpu", device="cpu")


def test_levels_and_options_it_does_not_take(pyramids, cpu_backend):
    with slides.open(pyramids["raw"]) as s:
        assert "not JPEG" in slides.gpu_decode_unsupported(s, 0)
        with pytest.raises(InvalidArgumentError, match="cannot be GPU-decoded"):
            slides.PatchLoader(s, COORDS, level=0, read_size=64, decode="gpu", device="cpu")
    with slides.open(pyramids["aperio-rgb"]) as s:
        assert slides.gpu_decode_unsupported(s, 1) is None
        with pytest.raises(InvalidArgumentError, match="decode"):
            slides.PatchLoader(s, COORDS, level=0, read_size=64, decode="nvjpeg")
        with pytest.raises(InvalidArgumentError, match="exclude"):
            slides.PatchLoader(s, COORDS, level=0, read_size=64, decode="gpu", native=True)


@pytest.mark.parametrize("kind", KINDS)
def test_gpu_decode_where_it_runs(pyramids, kind):
    """With CUDA, nvJPEG on the GPU is close to libjpeg; without, decode="gpu" is refused."""
    with slides.open(pyramids[kind]) as s:
        if not CUDA:
            with pytest.raises(InvalidArgumentError, match="CUDA"):
                slides.PatchLoader(s, COORDS, level=0, read_size=64, decode="gpu")
            with pytest.raises(InvalidArgumentError, match="CUDA device"):
                slides.PatchLoader(s, COORDS, level=0, read_size=64, decode="gpu", device="cpu")
            with pytest.raises(InvalidArgumentError, match="CUDA device"):
                slides.GpuTileDecoder(s, 0, device="cpu", backend="gpu")
            return
        cpu = np.concatenate([b.images for b in slides.PatchLoader(
            s, COORDS, level=0, read_size=200, size=96, dtype="uint8", native=False)])  # fmt: skip
        try:
            batches = list(slides.PatchLoader(s, COORDS, level=0, read_size=200, size=96,
                                              dtype="uint8", decode="gpu"))  # fmt: skip
        except SlideError as exc:
            # nvJPEG on an H100 read Aperio's RGB components as YCbCr (232 levels off): the
            # first-tile check refuses the level instead of returning those pixels
            assert kind == "aperio-rgb", exc
            assert "levels away from libjpeg" in str(exc) and "decode='cpu'" in str(exc)
            return
    gpu = torch.cat([b.images for b in batches])
    assert gpu.is_cuda
    diff = np.abs(gpu.cpu().numpy().astype(np.int16) - cpu)
    print(f"{kind} nvJPEG: max {diff.max()}, mean {diff.mean():.4f}")
    # nvJPEG's IDCT and colour conversion are not libjpeg-turbo's: small differences only
    assert diff.max() <= 8 and diff.mean() < 0.5


def test_a_decoder_that_disagrees_with_libjpeg_is_refused(pyramids, cpu_backend, monkeypatch):
    """The first decoded tile is checked against libjpeg: wrong colours are an error, not data."""
    # without the Adobe RGB marker the decoder takes Aperio's RGB components for YCbCr
    monkeypatch.setattr(gd, "mark_rgb", lambda stream: stream)
    with slides.open(pyramids["aperio-rgb"]) as s:
        loader = slides.PatchLoader(s, COORDS, level=0, read_size=200, size=96, dtype="uint8",
                                    decode="gpu", device="cpu")  # fmt: skip
        with pytest.raises(SlideError, match=r"RGB components, as Aperio writes them\) up to \d+ "
                           r"levels away from libjpeg .*decode='cpu'"):  # fmt: skip
            list(loader)
