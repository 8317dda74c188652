"""The compiled tiling primitives (csrc/tiling/) against independent references.

* HSV saturation: integer formula and skimage.color.rgb2hsv;
* median blur: scipy.ndimage.median_filter(mode="nearest") and PIL's MedianFilter (interior);
* Otsu: skimage.filters.threshold_otsu, exactly;
* closing: scipy.ndimage.binary_closing (odd kernels, away from the border) and a brute-force
  numpy closing with OpenCV's anchor and border for even kernels;
* region/hole filter: an oracle built from scipy.ndimage.label and binary_fill_holes;
* polygons: re-rasterised by an even-odd ray test they give back the mask, with exact areas;
* patch grid: a numpy brute force of the exact covered area of every square;
* resize: PIL.Image.resize, bit-exact (the issue asks for one uint8 step; we assert equality),
  both pass orders of Pillow 13, 1-4 channels;
* fused preprocessing: PIL resize + numpy ToTensor/Normalize, bit-exact in float32, and equal
  to numpy's / torch's rounding for float16 / bfloat16; pixel formats, crops, thread counts.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageFilter
from scipy import ndimage as ndi
from tumorboard import _core
from tumorboard.slides import preprocess_patches, resize

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
PIL_FILTER = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}


def blobby_mask(rng: np.random.Generator, h: int, w: int, p: float = 0.5) -> np.ndarray:
    m = rng.random((h, w)) < p
    return ndi.binary_opening(ndi.binary_dilation(m), iterations=1).astype(np.uint8)


# ---- saturation, median, Otsu, closing --------------------------------------------------------


def test_saturation_matches_integer_formula_and_skimage():
    from skimage.color import rgb2hsv

    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (64, 48, 3), dtype=np.uint8)
    rgb[0, :3] = [(0, 0, 0), (255, 255, 255), (10, 10, 10)]
    mx, mn = rgb.max(-1).astype(np.int64), rgb.min(-1).astype(np.int64)
    expected = np.where(mx == 0, 0, (510 * (mx - mn) + mx) // np.maximum(2 * mx, 1))
    got = _core.tiling.hsv_saturation(rgb, 2)
    np.testing.assert_array_equal(got, expected)
    sk = rgb2hsv(rgb)[..., 1] * 255  # float saturation; ours rounds half up
    assert np.abs(got - sk).max() <= 0.5 + 1e-9
    # a fourth (alpha) byte is ignored
    rgba = np.concatenate([rgb, rng.integers(0, 256, (64, 48, 1), dtype=np.uint8)], axis=2)
    np.testing.assert_array_equal(_core.tiling.hsv_saturation(rgba, 1), got)


@pytest.mark.parametrize("k", [1, 3, 5, 7, 11])
def test_median_blur_matches_scipy(k):
    rng = np.random.default_rng(k)
    for shape in [(1, 1), (3, 17), (40, 29)]:
        img = rng.integers(0, 256, shape, dtype=np.uint8)
        img[: shape[0] // 2] //= 50  # ties and runs of equal values
        ref = ndi.median_filter(img, size=k, mode="nearest")
        np.testing.assert_array_equal(_core.tiling.median_blur(img, k, 2), ref)


def test_median_blur_matches_pil_inside():
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (50, 60), dtype=np.uint8)
    ref = np.asarray(Image.fromarray(img).filter(ImageFilter.MedianFilter(7)))
    got = _core.tiling.median_blur(img, 7, 1)
    np.testing.assert_array_equal(got[3:-3, 3:-3], ref[3:-3, 3:-3])


def test_median_blur_rejects_even_kernel():
    with pytest.raises(ValueError, match="odd"):
        _core.tiling.median_blur(np.zeros((4, 4), np.uint8), 4, 1)


def test_otsu_equals_skimage():
    from skimage.filters import threshold_otsu

    rng = np.random.default_rng(1)
    for t in range(60):
        n = int(rng.integers(2, 3000))
        if t % 3 == 0:
            img = np.concatenate([rng.normal(40, 12, n), rng.normal(170, 25, n)])
        else:
            img = rng.integers(int(rng.integers(0, 120)), int(rng.integers(121, 256)), n)
        img = np.clip(img, 0, 255).astype(np.uint8)
        assert _core.tiling.otsu_threshold(img) == int(threshold_otsu(img))
    const = np.full(10, 77, np.uint8)
    assert _core.tiling.otsu_threshold(const) == 77 == threshold_otsu(const)


@pytest.mark.parametrize("k", [3, 5, 7])
def test_closing_matches_scipy_binary_closing(k):
    rng = np.random.default_rng(k)
    m = np.zeros((70, 80), np.uint8)
    m[12:-12, 12:-12] = rng.random((46, 56)) < 0.55  # away from the border
    ref = ndi.binary_closing(m, structure=np.ones((k, k), bool))
    np.testing.assert_array_equal(_core.tiling.binary_close(m, k, 2), ref)


def brute_close(m: np.ndarray, k: int) -> np.ndarray:
    """OpenCV closing: offsets -(k//2) .. k-1-k//2, pixels outside the image never count."""
    h, w = m.shape
    offs = range(-(k // 2), k - k // 2)

    def op(a, dilate):
        out = np.zeros_like(a)
        for y in range(h):
            for x in range(w):
                vals = [a[y + dy, x + dx] for dy in offs for dx in offs
                        if 0 <= y + dy < h and 0 <= x + dx < w]  # fmt: skip
                out[y, x] = max(vals) if dilate else min(vals)
        return out

    return op(op(m, True), False)


@pytest.mark.parametrize("k", [2, 4])
def test_closing_even_kernel_and_border_brute_force(k):
    rng = np.random.default_rng(10 + k)
    m = (rng.random((13, 11)) < 0.5).astype(np.uint8)
    np.testing.assert_array_equal(_core.tiling.binary_close(m, k, 1), brute_close(m, k))


def test_closing_of_a_gap_hand_worked():
    m = np.zeros((7, 11), np.uint8)
    m[2:5, 2:5] = 1
    m[2:5, 6:9] = 1  # a one-pixel gap at column 5
    closed = _core.tiling.binary_close(m, 3, 1)
    assert closed[2:5, 2:9].all()
    assert closed.sum() == 21  # the 3 x 7 block, nothing else


# ---- region filter and polygons ---------------------------------------------------------------


def oracle_filter(mask: np.ndarray, a_t: float, a_h: float, max_holes: int) -> np.ndarray:
    lab, n = ndi.label(mask, structure=np.ones((3, 3)))
    out = np.zeros(mask.shape, bool)
    for i in range(1, n + 1):
        comp = lab == i
        if not comp.sum() > a_t:
            continue
        filled = ndi.binary_fill_holes(comp)
        holes, nh = ndi.label(filled & ~comp)
        sizes = np.bincount(holes.ravel(), minlength=nh + 1)[1:]
        order = sorted(range(nh), key=lambda j: -sizes[j])
        keep = [j for j in order if sizes[j] > a_h][:max_holes]
        region = filled.copy()
        for j in keep:
            region &= holes != j + 1
        out |= region
    return out.astype(np.uint8)


def test_filter_regions_hand_worked():
    m = np.zeros((12, 14), np.uint8)
    m[1:11, 1:11] = 1
    m[3:6, 3:6] = 0  # 9-px hole: kept (> 4)
    m[7, 7] = 0  # 1-px hole: filled
    m[8:10, 3:5] = 0
    m[8, 3] = 1  # a 3-px hole, filled (<= 4)
    m[4, 4] = 1  # an island in the big hole: 1 px, dropped (<= 2)
    m[1, 12] = 1  # a lone speck: dropped
    out, st = _core.tiling.filter_regions(m, 2.0, 4.0, 8)
    expected = np.zeros_like(m)
    expected[1:11, 1:11] = 1
    expected[3:6, 3:6] = 0
    np.testing.assert_array_equal(out, expected)
    assert st == {"n_regions": 3, "n_kept": 1, "n_holes": 3, "n_holes_kept": 1}
    # max_n_holes = 0: every hole is filled
    out0, _ = _core.tiling.filter_regions(m, 2.0, 4.0, 0)
    assert out0[1:11, 1:11].all() and out0.sum() == 100


def test_filter_regions_matches_scipy_oracle():
    rng = np.random.default_rng(5)
    for t in range(60):
        h, w = (int(v) for v in rng.integers(1, 45, 2))
        m = blobby_mask(rng, h, w, float(rng.uniform(0.3, 0.7)))
        a_t, a_h, mh = (
            float(rng.integers(0, 25)),
            float(rng.integers(0, 8)),
            int(rng.integers(0, 4)),
        )
        got, _ = _core.tiling.filter_regions(m, a_t, a_h, mh)
        np.testing.assert_array_equal(got, oracle_filter(m, a_t, a_h, mh), err_msg=f"case {t}")


def shoelace(r: np.ndarray) -> int:
    x, y = r[:, 0].astype(np.int64), r[:, 1].astype(np.int64)
    return int(np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y)) // 2


def rasterize(rings: list[np.ndarray], h: int, w: int) -> np.ndarray:
    """Even-odd fill at pixel centres (rays towards -x cross the vertical edges)."""
    inside = np.zeros((h, w), bool)
    for r in rings:
        for (x0, y0), (x1, y1) in zip(r, np.roll(r, -1, axis=0), strict=True):
            assert x0 == x1 or y0 == y1, "edges follow pixel edges"
            if x0 == x1 and y0 != y1:
                a, b = sorted((int(y0), int(y1)))
                inside[a:b, : int(x0)] ^= True
    return inside


def test_polygons_rasterise_back_to_the_mask():
    rng = np.random.default_rng(8)
    for t in range(40):
        h, w = (int(v) for v in rng.integers(1, 40, 2))
        m = blobby_mask(rng, h, w, float(rng.uniform(0.3, 0.7)))
        polys = _core.tiling.mask_polygons(m)
        rings, total = [], 0
        for outer, holes, area in polys:
            assert shoelace(outer) > 0  # counter-clockwise (y down), GeoJSON exterior
            assert all(shoelace(hh) < 0 for hh in holes)
            assert shoelace(outer) + sum(shoelace(hh) for hh in holes) == area
            total += area
            rings += [outer, *holes]
        assert total == m.sum()
        np.testing.assert_array_equal(rasterize(rings, h, w), m.astype(bool), err_msg=str(t))


def test_polygon_of_a_square_with_a_hole():
    m = np.zeros((6, 6), np.uint8)
    m[1:5, 1:5] = 1
    m[2:4, 2:4] = 0
    [(outer, holes, area)] = _core.tiling.mask_polygons(m)
    assert {tuple(p) for p in outer.tolist()} == {(1, 1), (5, 1), (5, 5), (1, 5)}
    assert len(holes) == 1
    assert {tuple(p) for p in holes[0].tolist()} == {(2, 2), (4, 2), (4, 4), (2, 4)}
    assert area == 12


# ---- patch grid -------------------------------------------------------------------------------


def brute_grid(mask, width, height, patch, step, min_tissue):
    mh, mw = mask.shape
    kept, frac = [], []
    for r in range(-(-height // step)):
        for c in range(-(-width // step)):
            x, y = c * step, r * step
            x0, x1 = x * mw / width, min((x + patch) * mw / width, mw)
            y0, y1 = y * mh / height, min((y + patch) * mh / height, mh)
            j, i = np.arange(mw), np.arange(mh)
            wx = np.clip(np.minimum(j + 1, x1) - np.maximum(j, x0), 0, None)
            wy = np.clip(np.minimum(i + 1, y1) - np.maximum(i, y0), 0, None)
            f = (wy @ mask.astype(float) @ wx) / ((patch * mw / width) * (patch * mh / height))
            touches = mask[np.ix_(wy > 0, wx > 0)].any()
            if touches and (min_tissue == 0 or f >= min_tissue):
                kept.append((x, y))
                frac.append(f)
    return np.array(kept, np.int64).reshape(-1, 2), np.array(frac)


def test_patch_grid_matches_brute_force():
    rng = np.random.default_rng(11)
    for t in range(60):
        mh, mw = (int(v) for v in rng.integers(1, 30, 2))
        mask = (rng.random((mh, mw)) < rng.uniform(0.05, 0.5)).astype(np.uint8)
        width = int(mw * rng.uniform(4, 30)) + 1
        height = int(mh * rng.uniform(4, 30)) + 1
        patch = int(rng.integers(8, 150))
        step = patch - int(rng.integers(0, patch // 2 + 1))
        min_tissue = [0.0, 0.1234, 0.5317][t % 3]
        coords, frac, n_cols, n_rows = _core.tiling.patch_grid(
            mask, width, height, patch, step, min_tissue, 2
        )
        ref_c, ref_f = brute_grid(mask, width, height, patch, step, min_tissue)
        assert (n_cols, n_rows) == (-(-width // step), -(-height // step))
        np.testing.assert_array_equal(coords, ref_c, err_msg=f"case {t}")
        np.testing.assert_allclose(frac, ref_f, atol=1e-5)


def test_patch_grid_hand_worked():
    # 4 x 4 mask over a 400 x 400 slide: mask pixel = 100 x 100 level-0 pixels
    mask = np.zeros((4, 4), np.uint8)
    mask[1, 1] = 1
    coords, frac, n_cols, n_rows = _core.tiling.patch_grid(mask, 400, 400, 150, 150, 0.0, 1)
    assert (n_cols, n_rows) == (3, 3)
    # squares [0,150)x[0,150), [150,300)x[0,150), ... touching [100,200)^2
    assert coords.tolist() == [[0, 0], [150, 0], [0, 150], [150, 150]]
    np.testing.assert_allclose(frac, [50 * 50 / 150**2, 50 * 50 / 150**2] * 2, rtol=1e-6)
    coords, _, _, _ = _core.tiling.patch_grid(mask, 400, 400, 150, 150, 0.12, 1)
    assert coords.shape == (0, 2)
    coords, frac, _, _ = _core.tiling.patch_grid(None, 400, 300, 150, 150, 0.0, 1)
    assert coords.tolist() == [[0, 0], [150, 0], [300, 0], [0, 150], [150, 150], [300, 150]]
    assert (frac == 1).all()


# ---- resize and preprocessing -----------------------------------------------------------------


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
def test_resize_is_bit_exact_with_pil(interpolation):
    rng = np.random.default_rng(2 if interpolation == "bilinear" else 3)
    # both of Pillow 13's pass orders (vertical first when it shrinks rows much more), up/down
    cases = [(256, 256, 224, 224), (224, 224, 256, 256), (100, 80, 30, 75), (80, 100, 75, 30),
             (40, 40, 10, 30), (40, 40, 30, 10), (7, 300, 64, 64), (1, 1, 5, 3)]  # fmt: skip
    cases += [tuple(int(v) for v in rng.integers(1, 90, 4)) for _ in range(40)]
    for i, (h, w, oh, ow) in enumerate(cases):
        c = [1, 3, 4][i % 3]
        shape = (h, w) if c == 1 else (h, w, c)
        img = rng.integers(0, 256, shape, dtype=np.uint8)
        mode = {1: "L", 3: "RGB", 4: "RGBX"}[c]
        ref = np.asarray(Image.fromarray(img, mode).resize((ow, oh), PIL_FILTER[interpolation]))
        got = resize(img, (oh, ow), interpolation=interpolation, threads=2)
        np.testing.assert_array_equal(got, ref, err_msg=f"{(h, w)} -> {(oh, ow)} c={c}")


def anchor(patches: np.ndarray, size, interpolation="bilinear", crops=None) -> np.ndarray:
    """PIL resize + torchvision-style ToTensor/Normalize in numpy float32."""
    out = []
    for i, p in enumerate(patches):
        im = Image.fromarray(p)
        if crops is not None:
            x, y, w, h = crops[i]
            im = im.crop((x, y, x + w, y + h))
        a = np.asarray(im.resize((size[1], size[0]), PIL_FILTER[interpolation]), np.float32)
        out.append(((a / np.float32(255) - MEAN) / STD).transpose(2, 0, 1))
    return np.stack(out)


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
def test_preprocess_float32_equals_pil_numpy(interpolation):
    rng = np.random.default_rng(4)
    patches = rng.integers(0, 256, (6, 256, 256, 3), dtype=np.uint8)
    got = preprocess_patches(patches, size=224, interpolation=interpolation, threads=2)
    assert got.dtype == np.float32 and got.shape == (6, 3, 224, 224)
    np.testing.assert_array_equal(got, anchor(patches, (224, 224), interpolation))
    # the contract, stated as a tolerance: within one uint8 step after normalisation
    assert np.abs(got - anchor(patches, (224, 224), interpolation)).max() <= (1 / 255) / STD.min()


def test_preprocess_crops_and_odd_sizes():
    rng = np.random.default_rng(6)
    patches = rng.integers(0, 256, (5, 90, 70, 3), dtype=np.uint8)
    crops = np.array([[0, 0, 70, 90], [5, 7, 40, 60], [30, 10, 40, 80], [0, 45, 70, 45],
                      [69, 89, 1, 1]], np.int32)  # fmt: skip
    for size in [(33, 47), (90, 70), (120, 20)]:
        got = preprocess_patches(patches, size=size, crops=crops, interpolation="bicubic")
        np.testing.assert_array_equal(got, anchor(patches, size, "bicubic", crops))


def test_preprocess_half_precision_outputs():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    patches = rng.integers(0, 256, (3, 64, 64, 3), dtype=np.uint8)
    ref = anchor(patches, (48, 48))
    f16 = preprocess_patches(patches, size=48, dtype="float16")
    np.testing.assert_array_equal(f16, ref.astype(np.float16))
    bf16 = preprocess_patches(patches, size=48, dtype="bfloat16")
    assert bf16.dtype == np.uint16
    as_t = torch.from_numpy(bf16.view(np.int16)).view(torch.bfloat16)
    assert torch.equal(as_t, torch.from_numpy(ref).bfloat16())
    # writing into a caller's torch tensor
    out = torch.empty((3, 3, 48, 48), dtype=torch.bfloat16)
    assert preprocess_patches(patches, size=48, dtype="bfloat16", out=out) is out
    assert torch.equal(out, torch.from_numpy(ref).bfloat16())


def test_preprocess_pixel_formats_composite_over_white():
    rng = np.random.default_rng(9)
    rgb = rng.integers(0, 256, (2, 16, 16, 3), dtype=np.uint8)
    alpha = np.full((2, 16, 16, 1), 255, np.uint8)
    alpha[0, :4] = 0
    alpha[1, :, :3] = 128
    rgba = np.concatenate([rgb, alpha], axis=3)
    a = alpha[..., 0].astype(np.int64)
    # straight alpha over white, rounded
    ref_rgb = ((rgb * a[..., None] + 255 * (255 - a[..., None]) + 127) // 255).astype(np.uint8)
    np.testing.assert_array_equal(
        preprocess_patches(rgba, size=16), preprocess_patches(ref_rgb, size=16)
    )
    # premultiplied ARGB32 (OpenSlide): c_premul + (255 - a), clamped
    premul = (rgb.astype(np.int64) * a[..., None] + 127) // 255
    argb = ((a << 24) | (premul[..., 0] << 16) | (premul[..., 1] << 8) | premul[..., 2]).astype(
        np.uint32
    )
    ref2 = np.minimum(premul + (255 - a[..., None]), 255).astype(np.uint8)
    np.testing.assert_array_equal(
        preprocess_patches(argb, size=12), preprocess_patches(ref2, size=12)
    )
    np.testing.assert_array_equal(_core.tiling.argb32_to_rgb(argb[0], 1), ref2[0])
    assert (ref2[0, :4] == 255).all()  # transparent -> white


def test_preprocess_is_thread_count_independent():
    rng = np.random.default_rng(12)
    patches = rng.integers(0, 256, (9, 100, 100, 3), dtype=np.uint8)
    one = preprocess_patches(patches, size=64, threads=1)
    for t in (2, 3, 8):
        np.testing.assert_array_equal(preprocess_patches(patches, size=64, threads=t), one)


def test_preprocess_validation():
    good = np.zeros((2, 8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match="patches: expected"):
        preprocess_patches(np.zeros((2, 8, 8, 2), np.uint8))
    with pytest.raises(ValueError, match="crop 1"):
        preprocess_patches(good, crops=[[0, 0, 8, 8], [4, 4, 8, 8]])
    with pytest.raises(ValueError, match="dtype"):
        preprocess_patches(good, dtype="float64")
    with pytest.raises(ValueError, match="shape"):
        preprocess_patches(good, size=4, out=np.empty((2, 3, 5, 4), np.float32))
    with pytest.raises(ValueError, match="interpolation"):
        preprocess_patches(good, interpolation="nearest")


def test_portable_paths_match_pil(tmp_path):
    """Check that the portable code gives the same (PIL-exact) values as the AVX2 kernels.

    The AVX2 kernels are picked at run time; TUMORBOARD_DISABLE_AVX2=1 forces the portable code.
    """
    import os
    import subprocess
    import sys

    rng = np.random.default_rng(13)
    patches = rng.integers(0, 256, (3, 97, 130, 3), dtype=np.uint8)
    np.save(tmp_path / "in.npy", patches)
    code = (
        "import numpy as np, sys; from tumorboard.slides import preprocess_patches, resize; "
        f"p = np.load({str(tmp_path / 'in.npy')!r}); "
        "np.save(sys.argv[1], preprocess_patches(p, size=(64, 80))); "
        "np.save(sys.argv[2], resize(p[0], (40, 200), interpolation='bicubic'))"
    )
    env = {**os.environ, "TUMORBOARD_DISABLE_AVX2": "1"}
    out1, out2 = tmp_path / "a.npy", tmp_path / "b.npy"
    subprocess.run([sys.executable, "-c", code, str(out1), str(out2)], env=env, check=True)
    np.testing.assert_array_equal(np.load(out1), anchor(patches, (64, 80)))
    ref = np.asarray(Image.fromarray(patches[0]).resize((200, 40), Image.BICUBIC))
    np.testing.assert_array_equal(np.load(out2), ref)
