"""The native batch patch reader (``_core.slides``) against the Python tile path.

The oracle is the loader's Python path (``native=False``): tifffile's tile table, imagecodecs'
libjpeg-turbo decode per tile, region assembly in numpy, then the same fused preprocessing. The
native path must give identical batches (bit for bit, every output dtype, both filters) on
pyramids written here with tifffile: RGB JPEG tiles as Aperio writes them (no JFIF, decoded as
RGB components), YCbCr JPEG tiles with chroma subsampling, uncompressed RGB and RGBA tiles,
regions across tile borders, past the level's edge and outside the slide. Also: sparse tiles
read as white, truncated and corrupt tiles raise ``SlideError`` naming the tile, damaged tiles
never crash and agree with the Python path, ``native=True`` says why it does not apply, and the
libjpeg candidates that do not fit are refused with a reason (in a child process, since the
first library loaded stays for the life of the process).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from _scanner_tiffs import write_tables_pyramid
from tumorboard import _core, slides
from tumorboard.errors import InvalidArgumentError
from tumorboard.slides._native import level_spec, native_jpeg

tifffile = pytest.importorskip("tifffile")
pytest.importorskip("imagecodecs")

MPP = 0.5


def _image(h: int, w: int, seed: int, channels: int = 3) -> np.ndarray:
    """Smooth colour gradients plus texture: JPEG's colour conversion and upsampling matter."""
    g = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([128 + 100 * np.sin(xx / 37.0), 128 + 90 * np.cos(yy / 23.0),
                     128 + 60 * np.sin((xx + yy) / 51.0)], axis=-1)  # fmt: skip
    img = np.clip(base + g.normal(0, 20, base.shape), 0, 255).astype(np.uint8)
    if channels == 4:
        alpha = np.full((h, w, 1), 255, np.uint8)
        img = np.concatenate([img, alpha], axis=-1)
    return img


def _write(path: Path, img: np.ndarray, *, compression: str | None, photometric: str,
           levels: int = 2, subsampling: tuple[int, int] | None = None) -> Path:  # fmt: skip
    kw = {}
    if compression == "jpeg":
        kw["compressionargs"] = {"level": 85}
        if subsampling is not None:
            kw["subsampling"] = subsampling
    with tifffile.TiffWriter(path) as tif:
        for i in range(levels):
            lv = np.ascontiguousarray(img[:: 2**i, :: 2**i])
            res = 1e4 / (MPP * 2**i)
            tif.write(lv, tile=(128, 128), compression=compression, photometric=photometric,
                      extrasamples=("unassalpha",) if img.shape[2] == 4 else None,
                      subfiletype=1 if i else 0, resolution=(res, res),
                      resolutionunit="CENTIMETER", **kw)  # fmt: skip
    return path


KINDS = {
    "aperio-rgb": {"tables": "rgb"},  # abbreviated streams + JPEGTables, RGB components
    "ycbcr-tables": {"tables": "ycbcr"},
    "jpeg-rgb": {"compression": "jpeg", "photometric": "rgb"},  # tifffile: JFIF YCbCr streams
    "jpeg-ycbcr": {"compression": "jpeg", "photometric": "ycbcr", "subsampling": (2, 2)},
    "raw-rgb": {"compression": None, "photometric": "rgb"},
    "raw-rgba": {"compression": None, "photometric": "rgb"},
}

# level-0 corners: aligned, across tile borders, past the right/bottom edge, outside the slide
COORDS = np.array([[0, 0], [128, 256], [77, 190], [600, 500], [650, 470], [-40, -25],
                   [900, 900]], np.int64)  # fmt: skip


@pytest.fixture(scope="module")
def pyramids(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("native")
    out = {}
    for name, kw in KINDS.items():
        img = _image(610, 730, seed=len(out), channels=4 if name == "raw-rgba" else 3)
        if "tables" in kw:
            out[name] = write_tables_pyramid(root / f"{name}.tif", img, kw["tables"])
        else:
            out[name] = _write(root / f"{name}.tif", img, **kw)
    return out


def _batches(slide, *, native, level, read_size, **kw):
    loader = slides.PatchLoader(slide, COORDS, level=level, read_size=read_size, batch_size=3,
                                native=native, **kw)  # fmt: skip
    return loader, np.concatenate([b.images for b in loader])


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("level", [0, 1])
def test_native_batches_equal_the_python_path(pyramids, kind, level):
    assert native_jpeg().available, native_jpeg().reason
    with slides.open(pyramids[kind]) as s:
        assert s.reader == "tifffile"
        py, want = _batches(s, native=False, level=level, read_size=150, size=96)
        nat, got = _batches(s, native=None, level=level, read_size=150, size=96)
        assert not py.native and nat.native and nat.native_reason is None
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", ["aperio-rgb", "jpeg-ycbcr"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "uint8"])
@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
def test_every_output_type_and_filter(pyramids, kind, dtype, interpolation):
    with slides.open(pyramids[kind]) as s:
        kw = {"level": 0, "read_size": 200, "size": (64, 80), "dtype": dtype,
              "interpolation": interpolation}  # fmt: skip
        _, want = _batches(s, native=False, **kw)
        _, got = _batches(s, native=True, **kw)
        np.testing.assert_array_equal(got, want)


def test_threads_and_prefetch_do_not_change_batches(pyramids):
    with slides.open(pyramids["jpeg-rgb"]) as s:
        runs = [
            _batches(s, native=True, level=0, read_size=128, size=64, threads=t, prefetch=p)[1]
            for t, p in ((1, 0), (2, 2), (3, 1))
        ]
    for r in runs[1:]:
        np.testing.assert_array_equal(r, runs[0])


def test_read_region_equals_the_slide_read(pyramids):
    with slides.open(pyramids["aperio-rgb"]) as s:
        page = s._pages[1]
        assert page.jpegtables and not page.is_jfif  # abbreviated RGB-component streams
        assert level_spec(page, False)[0]["color"] == "rgb"
        reader, why = s.native_reader(1)
        assert why is None
        got = reader.read_region(0, 300, 200, 90, 70)  # level-1 pixels
        want = s.read_region((600, 400), 1, (90, 70))
        np.testing.assert_array_equal(got, want)
        outside = reader.read_region(0, -500, -500, 20, 10)
        assert (outside == 255).all()


def test_sparse_tiles_read_as_white(pyramids):
    with slides.open(pyramids["raw-rgb"]) as s:
        page = s._pages[0]
        counts = np.asarray(page.databytecounts, np.uint64).copy()
        counts[0] = 0  # tile 0 absent: background
        spec = {"width": int(page.imagewidth), "height": int(page.imagelength),
                "tile_width": 128, "tile_height": 128, "codec": "none", "color": "detect",
                "samples": 3, "offsets": np.asarray(page.dataoffsets, np.uint64),
                "counts": counts, "tables": None}  # fmt: skip
        reader = _core.slides.TileReader(str(s.path), [spec])
        got = reader.read_region(0, 100, 100, 60, 60)
        want = s.read_region((100, 100), 0, (60, 60))
        assert (got[:28, :28] == 255).all()
        np.testing.assert_array_equal(got[28:, :], want[28:, :])
        np.testing.assert_array_equal(got[:, 28:], want[:, 28:])


def test_bad_tile_tables_are_refused_naming_the_level(pyramids):
    spec = {"width": 300, "height": 300, "tile_width": 128, "tile_height": 128, "codec": "jpeg",
            "color": "rgb", "samples": 3, "offsets": np.zeros(4, np.uint64),
            "counts": np.zeros(4, np.uint64)}  # fmt: skip
    with pytest.raises(InvalidArgumentError, match=r"level 0: the tile table .* for 9 tiles"):
        _core.slides.TileReader(str(pyramids["jpeg-rgb"]), [spec])
    with pytest.raises(InvalidArgumentError, match="codec"):
        _core.slides.TileReader(str(pyramids["jpeg-rgb"]), [{**spec, "codec": "lzw"}])


def _tile_span(path: Path, level: int, index: int) -> tuple[int, int]:
    with tifffile.TiffFile(path) as tf:
        page = tf.series[0].levels[level].keyframe
        return int(page.dataoffsets[index]), int(page.databytecounts[index])


def test_corrupt_tile_is_a_slide_error_naming_tile_and_level(pyramids, tmp_path):
    src = pyramids["jpeg-rgb"]
    data = bytearray(src.read_bytes())
    off, n = _tile_span(src, 0, 0)
    data[off : off + n] = b"\x00" * n  # not a JPEG stream at all
    bad = tmp_path / "bad.tif"
    bad.write_bytes(bytes(data))
    with slides.open(bad) as s:
        loader = slides.PatchLoader(s, COORDS[:1], level=0, read_size=64, native=True)
        with pytest.raises(slides.SlideError, match=r"bad\.tif.*tile 0 of level 0 is corrupt"):
            list(loader)
        with pytest.raises(slides.SlideError, match="tile 0 of level 0"):
            list(slides.PatchLoader(s, COORDS[:1], level=0, read_size=64, native=False))


def test_a_damaged_size_field_costs_no_gigabytes(pyramids, tmp_path):
    src = pyramids["jpeg-rgb"]
    data = bytearray(src.read_bytes())
    off, n = _tile_span(src, 0, 0)
    sof = data.index(b"\xff\xc0", off, off + n)  # baseline SOF: length, precision, height, width
    data[sof + 5 : sof + 9] = b"\x7f\xff\x7f\xff"  # 32767 x 32767 pixels: 3 GiB of RGB
    bad = tmp_path / "huge.tif"
    bad.write_bytes(bytes(data))
    with slides.open(bad) as s:
        loader = slides.PatchLoader(s, COORDS[:1], level=0, read_size=64, native=True)
        with pytest.raises(slides.SlideError, match="tile 0 of level 0.*claims 32767x32767"):
            list(loader)


def test_prefetcher_delivers_good_batches_before_a_bad_one_and_stops_early(pyramids, tmp_path):
    src = pyramids["jpeg-rgb"]  # 128 px tiles, 6 per row
    data = bytearray(src.read_bytes())
    off, n = _tile_span(src, 0, 14)  # tile (row 2, col 2)
    data[off : off + n] = b"\x00" * n
    bad = tmp_path / "late.tif"
    bad.write_bytes(bytes(data))
    corners = np.array([[0, 0], [0, 128], [256, 256], [0, 0]], np.int64)  # batch 2 reads tile 14
    with slides.open(bad) as s:
        for threads in (1, 3):
            loader = slides.PatchLoader(s, corners, level=0, read_size=64, batch_size=1,
                                        native=True, threads=threads)  # fmt: skip
            it = iter(loader)
            assert [next(it).index.tolist() for _ in range(2)] == [[0], [1]]
            with pytest.raises(slides.SlideError, match="tile 14 of level 0 is corrupt"):
                next(it)
    with slides.open(pyramids["raw-rgb"]) as s:
        loader = slides.PatchLoader(s, np.zeros((600, 2), np.int64), level=0, read_size=64,
                                    batch_size=2, native=True, threads=2, prefetch=4)  # fmt: skip
        it = iter(loader)
        assert [len(next(it)) for _ in range(2)] == [2, 2]
        it.close()  # leaving early stops and joins the C++ workers (this would hang otherwise)
        assert [len(b) for b in loader][-1] == 2  # and a new iteration starts afresh


@pytest.mark.filterwarnings("ignore:.*reported 1 problem")
def test_truncated_file_is_a_slide_error(pyramids, tmp_path):
    src = pyramids["raw-rgb"]
    off, n = _tile_span(src, 0, 0)
    cut = tmp_path / "cut.tif"
    data = src.read_bytes()
    # keep the header and IFDs (tifffile wrote them first) but cut tile 0 short
    cut.write_bytes(data[: off + n // 2])
    with slides.open(cut) as s:
        loader = slides.PatchLoader(s, COORDS[:1], level=0, read_size=64, native=True)
        with pytest.raises(slides.SlideError, match="truncated: tile 0 of level 0"):
            list(loader)


@pytest.mark.parametrize("kind", ["jpeg-ycbcr", "aperio-rgb"])
def test_damaged_jpeg_tiles_never_crash_and_agree_with_python(pyramids, tmp_path, kind):
    """Random byte damage inside JPEG tiles: both paths fail alike or give the same pixels."""
    src = pyramids[kind]
    g = np.random.default_rng(7)
    clean = src.read_bytes()
    spans = [_tile_span(src, 0, i) for i in range(4)]
    outcomes = set()
    for trial in range(12):
        data = bytearray(clean)
        for off, n in spans:
            for _ in range(int(g.integers(1, 6))):
                data[off + int(g.integers(2, n))] = int(g.integers(0, 256))
        p = tmp_path / f"damaged{trial}.tif"
        p.write_bytes(bytes(data))
        with slides.open(p) as s:
            results = []
            for native in (False, True):
                try:
                    results.append(_batches(s, native=native, level=0, read_size=200, size=32)[1])
                except slides.SlideError as exc:
                    results.append(type(exc))
        if isinstance(results[0], np.ndarray):
            np.testing.assert_array_equal(results[1], results[0])
            outcomes.add("decoded")
        else:
            assert results[1] is slides.SlideError
            outcomes.add("error")
    # both outcomes were met (damage to abbreviated RGB streams rarely stops libjpeg)
    assert outcomes == ({"decoded", "error"} if kind == "jpeg-ycbcr" else {"decoded"}), outcomes


def test_native_true_says_why_it_does_not_apply(pyramids, tmp_path):
    lzw = _write(tmp_path / "lzw.tif", _image(300, 300, 3), compression="lzw",
                 photometric="rgb", levels=1)  # fmt: skip
    with slides.open(lzw) as s:
        assert s.reader == "tifffile"
        auto = slides.PatchLoader(s, COORDS[:2], level=0, read_size=64)
        assert not auto.native and "LZW" in auto.native_reason
        with pytest.raises(InvalidArgumentError, match=r"lzw\.tif.*LZW"):
            slides.PatchLoader(s, COORDS[:2], level=0, read_size=64, native=True)
    with slides.open(pyramids["jpeg-rgb"], reader="openslide") as s:
        with pytest.raises(InvalidArgumentError, match="openslide reader has no native"):
            slides.PatchLoader(s, COORDS[:2], level=0, read_size=64, native=True)
    with slides.open(pyramids["jpeg-rgb"]) as s:
        with pytest.raises(InvalidArgumentError, match="native: expected"):
            slides.PatchLoader(s, COORDS[:2], level=0, read_size=64, native="yes")


def test_closing_the_slide_releases_the_native_readers(pyramids):
    s = slides.open(pyramids["jpeg-rgb"])
    reader, _ = s.native_reader(0)
    assert reader.level_count == 1
    s.close()
    assert s._native == {}


def _child(code: str, **env: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), **env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, env=env)  # fmt: skip


def test_libjpeg_candidates_that_do_not_fit_are_refused_with_a_reason(tmp_path):
    not_a_lib = tmp_path / "libjpeg-fake.so"
    not_a_lib.write_bytes(b"not an ELF file")
    code = f"""
        import ctypes.util
        from tumorboard import _core
        print("missing:", _core.slides.jpeg_load({str(tmp_path / "nope.so")!r}))
        print("garbage:", _core.slides.jpeg_load({str(not_a_lib)!r}))
        libz = ctypes.util.find_library("z")
        print("libz:", _core.slides.jpeg_load(libz) if libz else "lacks jpeg_skip")
        print("loaded:", repr(_core.slides.jpeg_loaded_path()))
    """
    out = _child(code)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(": ", 1) for line in out.stdout.strip().splitlines())
    assert lines["missing"].startswith("cannot open it")
    assert lines["garbage"].startswith("cannot open it")
    assert "lacks jpeg_" in lines["libz"]
    assert lines["loaded"] == "''"


def test_environment_variable_picks_the_library_and_a_bad_one_falls_through(tmp_path):
    code = """
        from tumorboard.slides._native import native_jpeg
        info = native_jpeg()
        print(info.available, info.library)
    """
    out = _child(code, TUMORBOARD_LIBJPEG=str(tmp_path / "missing.so"))
    assert out.returncode == 0, out.stderr
    available, library = out.stdout.split()
    assert available == "True" and "missing.so" not in library
    chosen = native_jpeg().library
    out = _child(code, TUMORBOARD_LIBJPEG=chosen)
    assert out.stdout.split() == ["True", chosen]
