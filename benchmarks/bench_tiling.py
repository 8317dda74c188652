"""Benchmark tumorboard's slide tiling against the same algorithms in numpy/PIL, same data.

Workloads, on a synthetic pyramidal JPEG-tiled TIFF written first (100k x 80k px at 40x,
0.25 um/px, 256 px tiles, 2x pyramid; ``--quick``: 16k x 12.8k):

* **W1 tissue mask + patch grid** (20x, 256 px, CLAM preset): open the slide, read the 1.25x
  thumbnail, HSV saturation, median blur 7, threshold, closing 4, region/hole filter, grid.
  tumorboard: ``slides.segment_tissue`` + ``slides.patch_grid`` (OpenSlide reader, strips read on
  threads, C++ pipeline). Anchor: OpenSlide ``read_region`` of the level + PIL resize, PIL HSV and
  ``MedianFilter``, numpy threshold and sliding-window closing, ``scipy.ndimage.label`` region
  and hole filter, numpy integral-image grid. W1b times the compute alone on the same thumbnail.
* **W2 patch read + preprocess** (256 px patches at 20x -> 224 px, ImageNet-normalised float32
  NCHW): tumorboard ``slides.PatchLoader`` (thread pool, fused C++ resize/normalise) with the
  tifffile tile reader and with OpenSlide; anchor: per patch OpenSlide ``read_region`` ->
  ``convert("RGB")`` -> PIL ``resize((224, 224), BILINEAR)`` -> numpy ``/255``, ``-mean``,
  ``/std``, transpose (what torchvision's ToTensor + Normalize compute).

``ratio`` = anchor time / tumorboard time. Anchors run single-threaded (as TRIDENT/CLAM loops do);
``--threads`` (default: all cores) sets tumorboard's threads. Each workload checks that both sides
agree (same kept patches; identical normalised tensors) and reports it in ``check``.

Usage (from the repository root)::

    python benchmarks/bench_tiling.py [--quick] [--json PATH] [--repeat N] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

try:
    from ._timing import Result, best_of, format_markdown, positive_int, write_json
except ImportError:  # run as a script: ``python benchmarks/bench_tiling.py``
    from _timing import Result, best_of, format_markdown, positive_int, write_json

ANCHOR = "numpy/PIL"
ANCHORS = (ANCHOR,)
MAX_TIME = 15.0
MAX_TIME_QUICK = 3.0
MIN_TIME = 0.2
TILE = 256
MPP = 0.25  # 40x level 0
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)

# Tissue blobs and lumens as ellipses (cx, cy, rx, ry) in fractions of the slide size.
BLOBS = ((0.25, 0.30, 0.12, 0.15), (0.60, 0.35, 0.15, 0.12), (0.45, 0.72, 0.20, 0.10),
         (0.82, 0.75, 0.08, 0.10), (0.10, 0.80, 0.03, 0.04))  # fmt: skip
HOLES = ((0.60, 0.35, 0.04, 0.03), (0.22, 0.28, 0.02, 0.03))


# ---- synthetic slide ------------------------------------------------------------------------


def _textures(n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """H&E-like 256 px tiles: smooth pink stroma with purple nuclei."""
    out = []
    yy, xx = np.mgrid[0:TILE, 0:TILE]
    for _ in range(n):
        coarse = rng.random((9, 9))
        ys = np.linspace(0, 8, TILE)
        smooth = np.array([np.interp(ys, np.arange(9), row) for row in coarse])  # 9 x TILE
        smooth = np.array([np.interp(ys, np.arange(9), col) for col in smooth.T]).T
        img = np.empty((TILE, TILE, 3), np.float32)
        img[..., 0] = 215 + 25 * smooth
        img[..., 1] = 140 + 30 * smooth
        img[..., 2] = 190 + 20 * smooth
        for cx, cy in rng.integers(0, TILE, (40, 2)):
            nuc = (xx - cx) ** 2 + (yy - cy) ** 2 < rng.integers(9, 40)
            img[nuc] = (110, 60, 150)
        out.append(np.clip(img, 0, 255).astype(np.uint8))
    return out


def _ellipse_inside(x: np.ndarray, y: np.ndarray, e: tuple, w: int, h: int) -> np.ndarray:
    cx, cy, rx, ry = e[0] * w, e[1] * h, e[2] * w, e[3] * h
    return ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 < 1.0


def _rect_meets(e: tuple, x0: float, y0: float, x1: float, y1: float, w: int, h: int) -> bool:
    cx, cy = e[0] * w, e[1] * h
    px, py = min(max(cx, x0), x1), min(max(cy, y0), y1)  # rectangle point closest to centre
    return bool(_ellipse_inside(np.array(px), np.array(py), e, w, h))


def _rect_within(e: tuple, x0: float, y0: float, x1: float, y1: float, w: int, h: int) -> bool:
    xs, ys = np.array([x0, x1, x0, x1]), np.array([y0, y0, y1, y1])
    return bool(_ellipse_inside(xs, ys, e, w, h).all())


def write_synthetic_slide(path: str, width: int, height: int, *, seed: int = 0) -> dict[str, Any]:
    """Write a pyramidal JPEG-tiled TIFF of H&E-like blobs on white.

    The 2x pyramid goes down to about 1000 px. Tiles fully inside/outside tissue are JPEG-encoded
    once and repeated; only tiles on a blob edge are rendered.
    """
    import imagecodecs
    import tifffile

    rng = np.random.default_rng(seed)
    textures = _textures(6, rng)

    def enc(a: np.ndarray) -> bytes:
        return imagecodecs.jpeg_encode(
            a, level=80, colorspace="RGB", outcolorspace="YCBCR", subsampling=(2, 2)
        )

    white_tile = np.full((TILE, TILE, 3), 240, np.uint8)
    white, tissue = enc(white_tile), [enc(t) for t in textures]
    levels = []
    ds = 1
    while True:
        levels.append(ds)
        if max(width, height) / (ds * 2) < 1000:
            break
        ds *= 2
    rendered = 0

    def tiles(ds: int, lw: int, lh: int) -> Iterator[bytes]:
        nonlocal rendered
        for ty in range(-(-lh // TILE)):
            for tx in range(-(-lw // TILE)):
                x0, y0 = tx * TILE * ds, ty * TILE * ds
                x1, y1 = x0 + TILE * ds, y0 + TILE * ds
                k = (tx * 7 + ty * 13) % len(tissue)
                if not any(_rect_meets(b, x0, y0, x1, y1, width, height) for b in BLOBS):
                    yield white
                elif any(_rect_within(b, x0, y0, x1, y1, width, height) for b in BLOBS) and not any(
                    _rect_meets(hh, x0, y0, x1, y1, width, height) for hh in HOLES
                ):
                    yield tissue[k]
                else:
                    yy, xx = np.mgrid[0:TILE, 0:TILE]
                    gx, gy = x0 + (xx + 0.5) * ds, y0 + (yy + 0.5) * ds
                    inside = np.zeros((TILE, TILE), bool)
                    for b in BLOBS:
                        inside |= _ellipse_inside(gx, gy, b, width, height)
                    for hh in HOLES:
                        inside &= ~_ellipse_inside(gx, gy, hh, width, height)
                    rendered += 1
                    yield enc(np.where(inside[..., None], textures[k], white_tile))

    t0 = time.perf_counter()
    with tifffile.TiffWriter(path, bigtiff=True) as tif:
        for i, ds in enumerate(levels):
            lw, lh = -(-width // ds), -(-height // ds)
            res = 1e4 / (MPP * ds)
            tif.write(
                tiles(ds, lw, lh),
                shape=(lh, lw, 3),
                dtype=np.uint8,
                tile=(TILE, TILE),
                compression="jpeg",
                photometric="rgb",
                subfiletype=1 if i else 0,
                resolution=(res, res),
                resolutionunit="CENTIMETER",
            )
    return {
        "width": width,
        "height": height,
        "levels": len(levels),
        "rendered_tiles": rendered,
        "bytes": os.path.getsize(path),
        "write_s": round(time.perf_counter() - t0, 2),
    }


# ---- anchor: the same algorithms in numpy / PIL ----------------------------------------------


def _np_window(a: np.ndarray, k: int, axis: int, dilate: bool) -> np.ndarray:
    """Take the max (dilate) or min over the window [x - k//2, x + k - 1 - k//2] along ``axis``.

    Pixels outside the image are ignored (OpenCV's closing border).
    """
    from numpy.lib.stride_tricks import sliding_window_view

    lo, hi = k // 2, k - 1 - k // 2
    pad = [(0, 0), (0, 0)]
    pad[axis] = (lo, hi)
    p = np.pad(a, pad, constant_values=not dilate)
    win = sliding_window_view(p, k, axis=axis)
    return win.max(axis=-1) if dilate else win.min(axis=-1)


def np_close(mask: np.ndarray, k: int) -> np.ndarray:
    if k <= 1:
        return mask
    d = _np_window(_np_window(mask, k, 1, True), k, 0, True)
    return _np_window(_np_window(d, k, 1, False), k, 0, False)


def np_filter(mask: np.ndarray, min_area: float, min_hole: float, max_holes: int) -> np.ndarray:
    """Apply CLAM's region/hole filter with scipy labels.

    Holes' parents come from the pixel above their first pixel; nested regions are not
    special-cased.
    """
    from scipy import ndimage as ndi

    h, w = mask.shape
    fg, _ = ndi.label(mask, structure=np.ones((3, 3), bool))
    keep_fg = np.bincount(fg.ravel()) > min_area
    keep_fg[0] = False
    bg, nb = ndi.label(~mask)
    border = np.unique(np.concatenate([bg[0], bg[-1], bg[:, 0], bg[:, -1]]))
    size = np.bincount(bg.ravel(), minlength=nb + 1)
    labels, first = np.unique(bg.ravel(), return_index=True)
    is_hole = (labels != 0) & ~np.isin(labels, border)
    hole, first = labels[is_hole], first[is_hole]
    parent = fg.ravel()[first - w]
    order = np.lexsort((-size[hole], parent))
    hole, parent = hole[order], parent[order]
    start = np.r_[0, np.flatnonzero(np.diff(parent)) + 1] if hole.size else np.zeros(0, int)
    big = size[hole] > min_hole
    kept = np.zeros(hole.size, bool)
    for s0, s1 in zip(start, np.r_[start[1:], hole.size], strict=True):  # rank among big holes
        b = np.flatnonzero(big[s0:s1])[:max_holes]
        kept[s0 + b] = True
    fill = np.zeros(nb + 1, bool)
    fill[hole] = keep_fg[parent] & ~kept
    return keep_fg[fg] | fill[bg]


def np_grid(mask: np.ndarray, width: int, height: int, size0: int, step0: int) -> np.ndarray:
    """TRIDENT's grid kept where the patch overlaps the mask (integral image, vectorised)."""
    mh, mw = mask.shape
    s = np.zeros((mh + 1, mw + 1), np.int64)
    s[1:, 1:] = mask.astype(np.int64).cumsum(0).cumsum(1)
    cols, rows = -(-width // step0), -(-height // step0)
    x = np.arange(cols) * step0
    y = np.arange(rows) * step0
    j0 = np.floor(x * mw / width).astype(np.int64)
    j1 = np.minimum(mw, np.ceil(np.minimum((x + size0) * mw / width, mw)).astype(np.int64))
    i0 = np.floor(y * mh / height).astype(np.int64)
    i1 = np.minimum(mh, np.ceil(np.minimum((y + size0) * mh / height, mh)).astype(np.int64))
    cnt = s[i1][:, j1] - s[i0][:, j1] - s[i1][:, j0] + s[i0][:, j0]
    keep = cnt > 0
    rr, cc = np.nonzero(keep)
    return np.stack([x[cc], y[rr]], axis=1)


def anchor_mask_compute(thumb: np.ndarray, p: Any, ref_area: int) -> np.ndarray:
    from PIL import Image, ImageFilter

    sat = np.asarray(Image.fromarray(thumb).convert("HSV"))[..., 1]
    sat = np.asarray(Image.fromarray(sat).filter(ImageFilter.MedianFilter(p.mthresh)))
    closed = np_close(sat > p.sthresh, p.close)
    return np_filter(closed, p.a_t * ref_area, p.a_h * ref_area, p.max_n_holes)


def anchor_read_thumb(path: str, ds: float) -> np.ndarray:
    import openslide
    from PIL import Image

    osr = openslide.OpenSlide(path)
    try:
        w0, h0 = osr.dimensions
        tw, th = round(w0 / ds), round(h0 / ds)
        level = osr.get_best_level_for_downsample(ds + 1e-6)
        img = osr.read_region((0, 0), level, osr.level_dimensions[level]).convert("RGB")
        if img.size != (tw, th):
            img = img.resize((tw, th), Image.BILINEAR)
        return np.asarray(img)
    finally:
        osr.close()


def anchor_patches(path: str, coords: np.ndarray, level: int, read: int, size: int) -> np.ndarray:
    import openslide
    from PIL import Image

    osr = openslide.OpenSlide(path)
    out = np.empty((len(coords), 3, size, size), np.float32)
    try:
        for i, (x, y) in enumerate(coords):
            img = osr.read_region((int(x), int(y)), level, (read, read)).convert("RGB")
            a = np.asarray(img.resize((size, size), Image.BILINEAR), dtype=np.float32)
            out[i] = ((a / np.float32(255) - MEAN) / STD).transpose(2, 0, 1)
    finally:
        osr.close()
    return out


# ---- runner ---------------------------------------------------------------------------------


@dataclass
class _Ctx:
    quick: bool
    repeat: int
    threads: int | None
    log: Callable[[str], None]
    workloads: dict[str, dict[str, Any]] = field(default_factory=dict)

    def time(self, label: str, fn: Callable[[], Any], **kw: Any) -> tuple[float, Any]:
        box: dict[str, Any] = {}

        def wrapped() -> None:
            box["value"] = fn()

        opts: dict[str, Any] = {
            "repeat": self.repeat,
            "min_time": MIN_TIME,
            "max_time": MAX_TIME_QUICK if self.quick else MAX_TIME,
        }
        opts.update(kw)
        t0 = time.perf_counter()
        sec = best_of(wrapped, **opts)
        self.log(f"  {label}: {sec:.3f} s/call ({time.perf_counter() - t0:.1f} s wall)")
        return sec, box.get("value")


def _coords_check(a: np.ndarray, b: np.ndarray) -> str:
    sa = {tuple(r) for r in np.asarray(a).tolist()}
    sb = {tuple(r) for r in np.asarray(b).tolist()}
    if sa == sb:
        return f"same {len(sa)} patches"
    jac = len(sa & sb) / max(1, len(sa | sb))
    return f"patch sets differ: {len(sa)} vs {len(sb)}, Jaccard {jac:.4f}"


def run_results(
    quick: bool = False,
    repeat: int = 3,
    threads: int | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[list[Result], dict[str, Any]]:
    """Write the synthetic slide, run the workloads; return the records and run metadata."""
    if log is None:

        def log(msg: str) -> None:
            print(msg, file=sys.stderr, flush=True)

    try:
        from tumorboard import _core, slides
        from tumorboard.slides import PRESETS
    except ImportError as exc:
        raise RuntimeError(
            f"cannot import tumorboard.slides ({exc}); build tumorboard first"
        ) from exc
    ctx = _Ctx(quick=quick, repeat=repeat, threads=threads, log=log)
    n_threads = threads or os.cpu_count() or 1
    width, height = (16_384, 12_800) if quick else (100_000, 80_000)
    n_patches = 512 if quick else 4096
    n_anchor = 128 if quick else 512
    tmp = tempfile.mkdtemp(prefix="tb-bench-tiling-")
    results: list[Result] = []
    t_start = time.perf_counter()
    try:
        path = os.path.join(tmp, "synthetic.tif")
        log(f"writing a {width} x {height} synthetic slide ...")
        info = write_synthetic_slide(path, width, height)
        log(f"  {info}")
        # CLAM's default preset drops regions under 100 x 512^2 px; the quick slide's blobs are
        # smaller, so it uses the TCGA preset (16 x 512^2).
        preset = "tcga" if quick else "clam"
        params = PRESETS[preset]

        # W1: mask + grid, end to end from the file, with both slide readers
        seg_ds = 8.0 / MPP
        size0 = 512  # 256 px at 20x on a 40x slide

        def anchor_w1() -> np.ndarray:
            thumb = anchor_read_thumb(path, seg_ds)
            sx, sy = width / thumb.shape[1], height / thumb.shape[0]
            mask = anchor_mask_compute(thumb, params, int(512**2 / (sx * sy)))
            return np_grid(mask, width, height, size0, size0)

        an_s, an_coords = None, None
        for backend in ("tifffile", "openslide"):
            name = f"W1 mask + grid {width // 1000}k x {height // 1000}k px, {backend} reader"
            log(name)

            def tb_w1(backend: str = backend) -> np.ndarray:
                with slides.open(path, backend=backend) as s:
                    tm = slides.segment_tissue(s, params=params, threads=threads)
                    return slides.patch_grid(s, tm, magnification=20, patch_size=256).coords

            tb_s, tb_coords = ctx.time("tumorboard", tb_w1)
            if an_s is None:
                an_s, an_coords = ctx.time("anchor (OpenSlide read + numpy/PIL)", anchor_w1)
            check = _coords_check(tb_coords, an_coords)
            log(f"  check: {check}")
            note = f"{len(tb_coords)} patches at 20x/256px, preset {preset}"
            results.append(Result.make(name, tb_s, ANCHOR, an_s, check=check, note=note))
            ctx.workloads[name] = {"slide": info, "patches": len(tb_coords)}

        # W1b: the same, compute only (thumbnail already in memory)
        name_b = "W1b mask + grid compute only (same thumbnail)"
        log(name_b)
        thumb = anchor_read_thumb(path, seg_ds)
        sx, sy = width / thumb.shape[1], height / thumb.shape[0]

        def tb_w1b() -> np.ndarray:
            tm = slides.segment_image(
                thumb,
                params=params,
                downsample=(sx, sy),
                level0_size=(width, height),
                threads=threads,
            )
            return _core.tiling.patch_grid(
                tm.mask.view(np.uint8), width, height, size0, size0, 0.0, threads or 0
            )[0]

        def anchor_w1b() -> np.ndarray:
            mask = anchor_mask_compute(thumb, params, int(512**2 / (sx * sy)))
            return np_grid(mask, width, height, size0, size0)

        tb_s, tb_c = ctx.time("tumorboard", tb_w1b)
        an_s, an_c = ctx.time("anchor", anchor_w1b)
        check = _coords_check(tb_c, an_c)
        log(f"  check: {check}")
        note = f"thumbnail {thumb.shape[1]}x{thumb.shape[0]}"
        results.append(Result.make(name_b, tb_s, ANCHOR, an_s, check=check, note=note))

        # W2: patch read + preprocess
        rng = np.random.default_rng(7)
        if len(tb_coords) == 0:
            raise RuntimeError("the segmentation kept no patch; cannot time patch loading")
        pick = np.sort(rng.choice(len(tb_coords), min(n_patches, len(tb_coords)), replace=False))
        coords = tb_coords[pick]
        level, read = 1, 256  # 20x = level 1 of the 40x slide
        for backend in ("tifffile", "openslide"):
            name2 = f"W2 read+preprocess 256->224, {backend} reader"
            log(name2)
            slide = slides.open(path, backend=backend)

            def tb_w2(slide: Any = slide) -> np.ndarray:
                loader = slides.PatchLoader(
                    slide,
                    coords,
                    level=level,
                    read_size=read,
                    batch_size=64,
                    size=224,
                    threads=n_threads,
                )
                first = None
                for b in loader:
                    if first is None:
                        first = b.images
                return first

            tb_s, tb_first = ctx.time("tumorboard", tb_w2, repeat=max(1, repeat - 1))
            sub = coords[:n_anchor]
            an_s, an_out = ctx.time(
                "anchor", lambda sub=sub: anchor_patches(path, sub, level, read, 224), repeat=1
            )
            an_s_all = an_s * len(coords) / len(sub)
            k = min(len(tb_first), len(an_out))
            same = np.array_equal(tb_first[:k], an_out[:k])
            check = (
                f"first {k} tensors identical"
                if same
                else (f"max |diff| {np.abs(tb_first[:k] - an_out[:k]).max():.3g} over {k} tensors")
            )
            log(f"  check: {check}")
            rate = len(coords) / tb_s
            note = (
                f"{rate:,.0f} patches/s on {n_threads} threads vs {len(sub) / an_s:,.0f}/s; "
                f"anchor timed on {len(sub)} of {len(coords)} patches"
            )
            results.append(
                Result.make(
                    name2, tb_s, ANCHOR, an_s_all, extrapolated=True, check=check, note=note
                )
            )
            ctx.workloads[name2] = {"patches": len(coords), "patches_per_s": rate}
            slide.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    meta = {
        "quick": quick,
        "repeat": repeat,
        "threads": threads,
        "ratio": "anchor_s / tumorboard_s (>1: tumorboard faster)",
        "workloads": ctx.workloads,
        "total_wall_s": time.perf_counter() - t_start,
    }
    return results, meta


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns a process exit status."""
    parser = argparse.ArgumentParser(
        prog="bench_tiling",
        description="Time tumorboard's tissue mask, patch grid and patch loading against the "
        "same algorithms in numpy/PIL on a synthetic pyramidal TIFF.",
    )
    parser.add_argument("--quick", action="store_true", help="a 16k x 12.8k slide (< 30 s)")
    parser.add_argument("--json", metavar="PATH", help="also write results as JSON to PATH")
    parser.add_argument("--repeat", type=positive_int, default=3, help="timed samples (best)")
    parser.add_argument(
        "--threads", type=positive_int, default=None, help="tumorboard threads (default: all)"
    )
    args = parser.parse_args(argv)
    try:
        results, meta = run_results(quick=args.quick, repeat=args.repeat, threads=args.threads)
    except (RuntimeError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    threads = "all cores" if args.threads is None else str(args.threads)
    print(f"\n### tumorboard tiling benchmark ({'quick' if args.quick else 'full'} mode)\n")
    print(format_markdown(results, ANCHORS))
    for r in results:
        if r.note:
            print(f"- {r.workload}: {r.note}")
    print(
        f"\nratio = anchor time / tumorboard time (>1: tumorboard faster). tumorboard threads: "
        f"{threads}; anchors single-threaded. Total {meta['total_wall_s']:.0f} s."
    )
    if args.json:
        write_json(results, args.json, meta)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
