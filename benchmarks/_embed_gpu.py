"""``bench_embed.py --gpu``: tumorboard's embedding engine against a TRIDENT-style loop, same run.

Everything runs in one process on the first device found (CUDA, else CPU at tiny size, where the
GPU figures are printed as pending):

1. **Collections** written first (tiled pyramidal TIFFs, JPEG tiles cycled from a bank of
   textured H&E-coloured tiles):

   * *SVS-like*: 0.25 um/px level 0 (40x), pyramid in 4x steps, JPEG quality 80: a 20x patch of
     256 px is a 512 px level-0 read resized to the encoder's 224 px;
   * *0.5 um/px*: 20x level 0, 2x steps, JPEG quality 90: 256 px reads.

   On a GPU the two hold >= 100k patches together (``--patches``).
2. **Loader alone**: :class:`tumorboard.slides.PatchLoader` over the SVS-like collection (float32
   NCHW batches, no model; the path it takes, the native batch reader or the Python tile path,
   is printed) at 1, 2, 4 and ``cores - 1`` threads; and the share of one core the
   loader's Python thread work holds the GIL for, per patch: a pure-Python counter thread's
   progress while the loader runs against its progress alone (GIL-held us/patch =
   ``(1 - rate_with / rate_alone) * seconds / patches``).
3. **Bare forward** of the encoder (UNI2-h with random weights on a GPU, batch 256; uni2-tiny on
   CPU) in bf16 eager, bf16 ``torch.compile`` (default and max-autotune) and FP8, on the same
   random batch: patches/s, model FLOP utilisation against the GPU's dense bf16 peak (FLOPs per
   patch from the architecture: 371 GFLOP for UNI2-h at 224 px), and the cosine similarity of the
   features to bf16 eager (minimum over the batch).
4. **End to end**: ``embed_slides`` over each collection (every grid patch, no segmentation) in
   bf16 eager, bf16 compiled, FP8, and bf16 eager with ``decode="gpu"`` (nvImageCodec JPEG
   decoding on the GPU; skipped with the reason printed without CUDA or nvImageCodec); compiled
   variants are timed after an untimed warm-up run on one slide that compiles them. Against the
   **TRIDENT-style loop** on the same slides and coordinates, written here from TRIDENT's
   description (mahmoodlab/TRIDENT
   ``trident/wsi_objects/WSI.py``, ``extract_patch_features``, and ``trident/patch_encoder_models``,
   @a91fa84): OpenSlide ``read_region`` per patch in a torch ``DataLoader`` with
   ``0.75 x cores`` workers, PIL resize to the encoder's input, ToTensor and Normalize, the same
   ViT module under bf16 autocast in eager mode, synchronous host-to-device copies. ``ratio`` =
   tumorboard patches/s / TRIDENT-style patches/s.

Nothing here asserts a timing; the figures are printed (and written as JSON with ``--json``).
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
import warnings
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

#: Dense (no sparsity) bf16 tensor-core peaks, TFLOP/s, from NVIDIA's datasheets (H100 SXM5 and
#: H200: 989.4; H100 PCIe: 756; H100 NVL: 835; A100: 312; L40S: 362; L4: 121).
BF16_PEAK_TFLOPS = {
    "H200": 989.4,
    "H100 NVL": 835.0,
    "H100 PCIe": 756.0,
    "H100": 989.4,
    "A100": 312.0,
    "L40S": 362.0,
    "L4": 121.0,
}


def gpu_decode_unavailable(cuda: bool) -> str | None:
    """Say why the ``--decode gpu`` rows cannot run here (None when they can)."""
    if not cuda:
        return "no CUDA"
    try:
        from nvidia import nvimgcodec  # noqa: F401
    except ImportError as exc:
        return f"nvImageCodec is not installed ({exc}); pip install 'tumorboard[gpu]'"
    return None


def bf16_peak(name: str) -> float | None:
    """Return the dense bf16 peak (TFLOP/s) of a GPU from its name, or None when unknown."""
    for key, peak in BF16_PEAK_TFLOPS.items():  # most specific names first
        if key in name:
            return peak
    return None


def vit_flops_per_patch(config: Any, image_size: int) -> float:
    """Multiply-add FLOPs (2 per MAC) of one ViT forward at ``image_size``.

    Patch embedding, and per block: qkv, attention scores and weighted sum, projection, and the
    MLP (for packed SwiGLU, ``fc1`` to ``mlp_hidden`` and ``fc2`` from half of it). Norms,
    softmax and activations are left out (< 0.5%).
    """
    d = config.embed_dim
    grid = image_size // config.patch_size
    t = grid * grid + 1 + config.reg_tokens
    fc2_in = config.mlp_hidden // 2 if config.mlp == "swiglu" else config.mlp_hidden
    per_block = 2 * t * d * 3 * d + 4 * t * t * d + 2 * t * d * d
    per_block += 2 * t * d * config.mlp_hidden + 2 * t * fc2_in * d
    patch_embed = 2 * grid * grid * 3 * config.patch_size**2 * d
    return float(config.depth * per_block + patch_embed)


# ---- collections ---------------------------------------------------------------------------


def _tile_bank(n: int, seed: int) -> list[np.ndarray]:
    """Textured 256 px tiles in H&E colours (hematoxylin purple nuclei on eosin pink)."""
    g = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:256, 0:256]
    bank = []
    for _ in range(n):
        img = np.empty((256, 256, 3), np.float32)
        img[...] = (235, 170, 200)  # eosin background
        for _ in range(60):  # nuclei
            cy, cx, r = g.uniform(0, 256), g.uniform(0, 256), g.uniform(3, 9)
            m = (yy - cy) ** 2 + (xx - cx) ** 2 < r * r
            img[m] = (110, 60, 150)
        img += g.normal(0, 18, img.shape)  # texture: what makes JPEG decoding cost
        bank.append(np.clip(img, 0, 255).astype(np.uint8))
    return bank


def write_slide(path: Path, *, side: int, mpp: float, step: int, levels: int, quality: int,
                bank: list[np.ndarray], workers: int) -> Path:  # fmt: skip
    """Write a ``side`` x ``side`` pyramidal JPEG-tiled TIFF (tiles cycled from ``bank``)."""
    import tifffile

    path.parent.mkdir(parents=True, exist_ok=True)
    with tifffile.TiffWriter(path, bigtiff=True) as tif:
        for lv in range(levels):
            s = max(256, side // step**lv)
            n_tiles = (-(-s // 256)) ** 2

            def tiles(n: int = n_tiles, lv: int = lv) -> Any:
                for i in range(n):
                    yield bank[(i * 7 + lv) % len(bank)]

            res = 1e4 / (mpp * step**lv)
            tif.write(tiles(), shape=(s, s, 3), dtype=np.uint8, tile=(256, 256),
                      compression="jpeg", compressionargs={"level": quality}, photometric="rgb",
                      subfiletype=1 if lv else 0, resolution=(res, res),
                      resolutionunit="CENTIMETER", maxworkers=workers)  # fmt: skip
    return path


def write_collections(root: Path, *, patches: int, workers: int) -> dict[str, list[Path]]:
    """Write the SVS-like and the 0.5 um/px collections, about ``patches`` 20x patches each."""
    bank = _tile_bank(24, seed=0)
    out: dict[str, list[Path]] = {"svs-like": [], "0.5um": []}
    n_slides = 2
    per_slide = max(1, patches // n_slides)
    # (collection, folder, level-0 px of a 20x 256 px patch, mpp, pyramid step, JPEG quality)
    specs = (("svs-like", "svs", 512, 0.25, 4, 80), ("0.5um", "half", 256, 0.5, 2, 90))
    for key, folder, read_px, mpp, step, quality in specs:
        side = max(1024, int(np.sqrt(per_slide)) * read_px)
        for i in range(n_slides):
            p = root / folder / f"{folder}_{i}.tif"
            p.parent.mkdir(parents=True, exist_ok=True)
            out[key].append(write_slide(p, side=side, mpp=mpp, step=step, levels=3,
                                        quality=quality, bank=bank, workers=workers))  # fmt: skip
    return out


def grids(paths: list[Path]) -> list[tuple[Path, np.ndarray, int, int]]:
    """Every 20x 256 px grid patch of each slide: (path, coords, read level, read size)."""
    from tumorboard import slides

    out = []
    for p in paths:
        with slides.open(p) as s:
            g = slides.patch_grid(s, None, magnification=20, patch_size=256)
            out.append((p, np.asarray(g.coords), int(g.read_level), int(g.read_size)))
    return out


# ---- loader alone and its GIL-held time ----------------------------------------------------


def loader_rate(grid: list[tuple[Path, np.ndarray, int, int]], *, threads: int, batch: int,
                size: int, limit: int, native: bool | None = None,
                max_seconds: float | None = None, decode: str = "cpu",
                device: str | None = None, dtype: str = "float32") -> float:  # fmt: skip
    """Patches/s of PatchLoader alone (``dtype`` batches) over at most ``limit`` patches.

    ``native`` is passed to :class:`~tumorboard.slides.PatchLoader` (None: the native batch
    reader where it applies; False: the Python tile path). ``max_seconds`` stops the pass at
    the first batch after that many seconds. ``decode="gpu"`` decodes on ``device`` (the
    batches stay there; the clock stops after the device has finished).
    """
    from tumorboard import slides

    gpu = {"decode": "gpu", "device": device} if decode == "gpu" else {}
    sync = _cuda_sync if decode == "gpu" else (lambda: None)
    n = 0
    sync()
    t0 = time.perf_counter()
    for path, coords, level, rs in grid:
        take = coords[: max(0, limit - n)]
        if not len(take):
            break
        with slides.open(path) as s:
            for b in slides.PatchLoader(s, take, level=level, read_size=rs, batch_size=batch,
                                        size=size, threads=threads, native=native,
                                        dtype=dtype, **gpu):  # fmt: skip
                n += len(b)
                if max_seconds is not None and time.perf_counter() - t0 > max_seconds:
                    sync()
                    return n / (time.perf_counter() - t0)
    sync()
    return n / (time.perf_counter() - t0)


def _cuda_sync() -> None:
    import torch

    torch.cuda.synchronize()


def loader_path(grid: list[tuple[Path, np.ndarray, int, int]], *,
                native: bool | None = None) -> str:  # fmt: skip
    """Say which path PatchLoader takes on the first slide of ``grid``: native or python."""
    from tumorboard import slides

    path, coords, level, rs = grid[0]
    with slides.open(path) as s:
        ld = slides.PatchLoader(s, coords[:1], level=level, read_size=rs, native=native)
        return "native" if ld.native else f"python ({ld.native_reason})"


def _count_for(seconds: float, stop: threading.Event | None = None) -> int:
    """Count in pure Python for ``seconds`` (or until ``stop``): the GIL probe."""
    n = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end and not (stop is not None and stop.is_set()):
        for _ in range(1000):
            n += 1
    return n


def _runq_s() -> float:
    """Seconds the calling thread has waited on a run queue (Linux schedstat), or nan.

    A thread waiting for the GIL sleeps, so that wait is not in it; a thread kept off the cores
    by other processes is on the run queue.
    """
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return float("nan")


def _counted(seconds: float, stop: threading.Event | None = None) -> dict[str, float]:
    """Run :func:`_count_for`; return its count, wall, on-core and run-queue seconds.

    ``sleep`` = wall - on-core - run-queue: for the counter, which never blocks on anything
    else, the time it waited for the GIL (nan where schedstat is unreadable).
    """
    q0, c0, t0 = _runq_s(), time.thread_time(), time.perf_counter()
    n = _count_for(seconds, stop)
    wall, run, runq = time.perf_counter() - t0, time.thread_time() - c0, _runq_s() - q0
    return {"n": n, "wall": wall, "run": run, "runq": runq, "sleep": wall - run - runq}


def gil_probe(grid: list[tuple[Path, np.ndarray, int, int]], *, threads: int, batch: int,
              size: int, limit: int, native: bool | None = None,
              max_seconds: float | None = None) -> dict[str, float]:  # fmt: skip
    """Measure the loader beside a pure-Python counter thread, and each alone.

    The loader runs alone first (which also warms the page cache), then the counter alone (on
    its own thread) for as long, then both together. The fraction of the counter's progress
    lost is the fraction of the time another thread held the GIL: ``gil_us_per_patch``. The
    same read off the counter thread's schedstat: its sleeping time beside the loader (it sleeps
    only while waiting for the GIL), less its sleeping time alone, per patch:
    ``gil_wait_us_per_patch`` (nan without schedstat), which neither the counter's own speed
    noise nor other processes taking the cores (``runq_alone`` and ``runq_with``: the share
    of the counter's time it waited for a core) move. Also ``rate_alone`` and
    ``rate_with_counter`` (loader patches/s), ``kept`` (their ratio), ``counter_alone`` and
    ``counter_with_loader`` (counts/s) and ``seconds`` (the loader's pass with the counter,
    cut at the first batch after ``max_seconds`` when given: a loader starved of the GIL can
    crawl).
    """
    kw = dict(threads=threads, batch=batch, size=size, limit=limit, native=native)
    t0 = time.perf_counter()
    rate_alone = loader_rate(grid, **kw)  # type: ignore[arg-type]
    seconds = time.perf_counter() - t0
    result: dict[str, dict[str, float]] = {}
    stop = threading.Event()

    def count(key: str, seconds: float) -> None:
        result[key] = _counted(seconds, stop)

    th = threading.Thread(target=count, args=("alone", seconds))
    th.start()
    th.join()
    th = threading.Thread(target=count, args=("with", 3600.0))
    th.start()
    t1 = time.perf_counter()
    rate = loader_rate(grid, max_seconds=max_seconds, **kw)  # type: ignore[arg-type]
    elapsed = time.perf_counter() - t1
    stop.set()
    th.join()
    c0, c1 = result["alone"], result["with"]
    alone, with_loader = c0["n"] / c0["wall"], c1["n"] / c1["wall"]
    n = rate * elapsed
    held = max(0.0, 1.0 - with_loader / alone) * elapsed
    wait = c1["sleep"] - c0["sleep"] * c1["wall"] / c0["wall"]
    wait = wait if np.isnan(wait) else max(0.0, wait)  # below 0: clock-granularity noise
    return {"gil_us_per_patch": held / n * 1e6, "gil_wait_us_per_patch": wait / n * 1e6,
            "rate_alone": rate_alone, "rate_with_counter": rate, "kept": rate / rate_alone,
            "counter_alone": alone, "counter_with_loader": with_loader, "seconds": elapsed,
            "runq_alone": c0["runq"] / c0["wall"],
            "runq_with": c1["runq"] / c1["wall"]}  # fmt: skip


def gil_held_us_per_patch(grid: list[tuple[Path, np.ndarray, int, int]], *, threads: int,
                          batch: int, size: int, limit: int,
                          native: bool | None = None) -> tuple[float, float]:  # fmt: skip
    """Return (GIL-held us per patch, loader patches/s) from a counter thread's slowdown.

    The counter runs alone for as long as the loader will, then beside it; the fraction of the
    counter's progress lost is the fraction of the time another thread held the GIL (see
    :func:`gil_probe`).
    """
    r = gil_probe(grid, threads=threads, batch=batch, size=size, limit=limit, native=native)
    return r["gil_us_per_patch"], r["rate_with_counter"]


# ---- TRIDENT-style peer loop -------------------------------------------------------------


class _TridentPatches:
    """A torch Dataset: OpenSlide ``read_region`` per patch, PIL resize, ToTensor + Normalize."""

    def __init__(self, path: Path, coords: np.ndarray, level: int, read_size: int, size: int,
                 mean: Any, std: Any) -> None:  # fmt: skip
        self.path, self.coords, self.level, self.read_size = str(path), coords, level, read_size
        self.size = size
        self.mean = np.asarray(mean, np.float32).reshape(3, 1, 1)
        self.std = np.asarray(std, np.float32).reshape(3, 1, 1)
        self.slide: Any = None  # opened in each worker

    def __len__(self) -> int:
        return len(self.coords)

    def __getitem__(self, i: int) -> Any:
        import openslide
        import torch
        from PIL import Image

        if self.slide is None:
            self.slide = openslide.OpenSlide(self.path)
        x, y = (int(v) for v in self.coords[i])
        rs = self.read_size
        img = self.slide.read_region((x, y), self.level, (rs, rs)).convert("RGB")
        if rs != self.size:
            img = img.resize((self.size, self.size), Image.BILINEAR)
        a = np.asarray(img, np.float32).transpose(2, 0, 1) / 255.0
        return torch.from_numpy((a - self.mean) / self.std)


def trident_loop(
    grid: list[tuple[Path, np.ndarray, int, int]],
    module: Any,
    *,
    device: Any,
    batch: int,
    workers: int,
    size: int,
    mean: Any,
    std: Any,
) -> tuple[float, int]:
    """Run the TRIDENT-style loop over ``grid``; return (seconds, patches)."""  # fmt: skip
    import torch
    from torch.utils.data import DataLoader

    n = 0
    t0 = time.perf_counter()
    for path, coords, level, rs in grid:
        ds = _TridentPatches(path, coords, level, rs, size, mean, std)
        dl = DataLoader(ds, batch_size=batch, shuffle=False, num_workers=workers)
        with torch.inference_mode():
            for x in dl:
                x = x.to(device)  # synchronous copy
                if device.type == "cuda":
                    with torch.autocast("cuda", dtype=torch.bfloat16):
                        y = module(x)
                else:
                    y = module(x)
                y.float().cpu()
                n += x.shape[0]
    return time.perf_counter() - t0, n


# ---- bare forward --------------------------------------------------------------------------


def bare_forward(module: Any, *, device: Any, dtype: str, compile: Any, batch: int,
                 size: int, iters: int) -> tuple[float, Any]:  # fmt: skip
    """Return (patches/s, features of the fixed batch) of the encoder alone on ``device``."""
    import torch
    from tumorboard.embed import TorchBackend

    be = TorchBackend(module, device=str(device), dtype=dtype, compile=compile)
    x = torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(0)).numpy()
    feats = torch.from_numpy(be(x))  # warm-up (compiles)
    xg = torch.from_numpy(x).to(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        be._forward(xg)
    sync()
    return batch * iters / (time.perf_counter() - t0), feats


def _np_min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Smallest row-wise cosine similarity of two feature matrices of one shape (float64)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    num = (a * b).sum(1)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return float((num / np.maximum(den, 1e-300)).min())


def _cos(a: Any, b: Any) -> float:
    import torch

    return float(torch.nn.functional.cosine_similarity(a.float(), b.float(), dim=-1).min())


# ---- GPU decode, GPU idle between slides, the encoder table ---------------------------------


#: nvImageCodec configurations the decode section compares (``TUMORBOARD_NVIMGCODEC_BACKENDS``,
#: ``TUMORBOARD_NVIMGCODEC_OPTIONS``): the hardware JPEG engines first, CUDA decoding with the
#: Huffman stage on the GPU too, and CPU Huffman with GPU IDCT.
DECODE_VARIANTS = {
    "hw_gpu_only,gpu_only": ("hw_gpu_only,gpu_only", ""),
    "gpu_only, GPU Huffman": ("gpu_only", "nvjpeg_cuda_decoder:hybrid_huffman_threshold=0"),
    "hybrid_cpu_gpu": ("hybrid_cpu_gpu", ""),
}


def decode_variants(grid: list[tuple[Path, np.ndarray, int, int]], *, threads: int, batch: int,
                    size: int, limit: int, left: Any) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Measure the GPU-decode loader under each of :data:`DECODE_VARIANTS` (8 s each at most).

    A configuration that cannot decode a tile, or reads one more than the decoder's check
    allows away from libjpeg, is reported with its error; the environment is restored.
    """
    out: dict[str, dict[str, Any]] = {}
    keys = ("TUMORBOARD_NVIMGCODEC_BACKENDS", "TUMORBOARD_NVIMGCODEC_OPTIONS")
    saved = {k: os.environ.get(k) for k in keys}
    try:
        for name, (backends, options) in DECODE_VARIANTS.items():
            if left() < 60:
                out[name] = {"skipped": "time budget"}
                continue
            os.environ[keys[0]], os.environ[keys[1]] = backends, options
            try:
                rate = loader_rate(grid, threads=threads, batch=batch, size=size, limit=limit,
                                   decode="gpu", device="cuda", max_seconds=8.0)  # fmt: skip
                out[name] = {"patches_per_s": rate}
            except Exception as exc:  # a configuration this GPU or build does not support
                out[name] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return out


def gpu_decode_loader(grid: list[tuple[Path, np.ndarray, int, int]], *, threads: int, batch: int,
                      size: int, limit: int, device: str) -> dict[str, float]:  # fmt: skip
    """Patches/s of ``PatchLoader(decode="gpu")`` alone, and its largest uint8 difference.

    The rate is over at most ``limit`` patches (float32 batches left on the GPU, synchronised at
    the end). ``max_uint8_diff`` compares the first ``batch`` patches of the first slide decoded
    on the GPU and on the CPU (both resized, uint8, not normalised): nvJPEG's IDCT and chroma
    upsampling may differ from libjpeg-turbo's by a few levels.
    """
    from tumorboard import slides

    rate = loader_rate(grid, threads=threads, batch=batch, size=size, limit=limit,
                       decode="gpu", device=device)  # fmt: skip
    path, coords, level, rs = grid[0]
    out = {}
    with slides.open(path) as s:
        for decode in ("cpu", "gpu"):
            kw = {"device": device} if decode == "gpu" else {}
            ld = slides.PatchLoader(s, coords[:batch], level=level, read_size=rs, size=size,
                                    batch_size=batch, dtype="uint8", decode=decode,
                                    **kw)  # fmt: skip
            imgs = next(iter(ld)).images
            out[decode] = imgs.cpu().numpy() if hasattr(imgs, "cpu") else np.asarray(imgs)
    diff = np.abs(out["gpu"].astype(np.int16) - out["cpu"].astype(np.int16))
    return {"patches_per_s": rate, "max_uint8_diff": int(diff.max()),
            "mean_uint8_diff": float(diff.mean())}  # fmt: skip


def forward_timeline(
    run: Any, host: dict[str, list] | None = None
) -> tuple[Any, list[tuple[float, float]]]:
    """Call ``run()`` while CUDA events bracket every encoder forward of the embedding engine.

    Returns ``run()``'s value and the (start, end) milliseconds of each forward on the GPU's
    timeline, relative to an event recorded before ``run()``. The events are recorded on the
    forward's own stream and never synchronised until the end, so the run is not slowed.

    ``host``, when given, is filled with the host side on the same clock (the reference event
    is recorded on an idle device, so its GPU time is the host time it was recorded at):
    ``submit`` (ms each batch reached ``TorchBackend.submit``), ``launch`` ((start, end) ms of
    each forward's launch on the host) and ``finish`` ((start, end) ms of each slide's files
    being written). :func:`boundary_report` reads them.
    """
    import torch
    from tumorboard.embed import TorchBackend, _outputs

    pairs: list[tuple[Any, Any]] = []
    original = TorchBackend._forward
    original_submit = TorchBackend.submit
    original_finish = _outputs._Writer.finish
    rec = host if host is not None else {}
    rec.update(submit=[], launch=[], finish=[])
    h0 = 0.0

    def now() -> float:
        return 1e3 * (time.perf_counter() - h0)

    def timed(self: Any, x: Any) -> Any:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t = now()
        start.record()
        y = original(self, x)
        end.record()
        rec["launch"].append((t, now()))
        pairs.append((start, end))
        return y

    def submit(self: Any, images: Any) -> None:
        rec["submit"].append(now())
        original_submit(self, images)

    def finish(self: Any, *a: Any, **k: Any) -> Any:
        t = now()
        try:
            return original_finish(self, *a, **k)
        finally:
            rec["finish"].append((t, now()))

    torch.cuda.synchronize()
    ref = torch.cuda.Event(enable_timing=True)
    ref.record()
    torch.cuda.synchronize()
    h0 = time.perf_counter()
    TorchBackend._forward = timed  # type: ignore[method-assign]
    TorchBackend.submit = submit  # type: ignore[method-assign]
    _outputs._Writer.finish = finish  # type: ignore[method-assign]
    try:
        value = run()
    finally:
        TorchBackend._forward = original  # type: ignore[method-assign]
        TorchBackend.submit = original_submit  # type: ignore[method-assign]
        _outputs._Writer.finish = original_finish  # type: ignore[method-assign]
    torch.cuda.synchronize()
    return value, [(ref.elapsed_time(s), ref.elapsed_time(e)) for s, e in pairs]


def boundary_report(spans: list[tuple[float, float]], batches_per_slide: list[int],
                    host: dict[str, list]) -> dict[str, float]:  # fmt: skip
    """Where the GPU's idle time at slide boundaries comes from (medians over the boundaries).

    For each boundary (the previous slide's last forward ends on the GPU at ``E``; the next
    slide's first forward starts at ``S``): ``gap_ms`` = S - E; ``submit_after_idle_ms`` = when
    the host submitted the next slide's first batch, minus E (above 0: the host was late, the
    GPU waited on it); ``launch_end_after_idle_ms`` = when the host finished launching that
    forward, minus E; ``start_after_launch_ms`` = S minus when its launch began (a GPU-side
    wait: the copy, another stream); ``host_late_share`` = the share of boundaries whose first
    batch was submitted after E. ``finish_ms`` is the median time a slide's files took to
    write (the consumer thread, between batches).
    """
    subs, launches = host.get("submit", []), host.get("launch", [])
    rows: list[tuple[float, float, float, float]] = []
    k = 0
    for nb in batches_per_slide[:-1]:
        k += nb
        if 0 < k < len(spans) and k < len(subs) and k < len(launches):
            end_prev, start_next = spans[k - 1][1], spans[k][0]
            rows.append((start_next - end_prev, subs[k] - end_prev, launches[k][1] - end_prev,
                         start_next - launches[k][0]))  # fmt: skip
    fin = [e - s for s, e in host.get("finish", [])]
    if not rows:
        return {"boundaries": 0}
    cols = np.asarray(rows)
    med = np.median(cols, axis=0)
    return {"boundaries": len(rows), "gap_ms": float(med[0]),
            "submit_after_idle_ms": float(med[1]), "launch_end_after_idle_ms": float(med[2]),
            "start_after_launch_ms": float(med[3]),
            "host_late_share": float(np.mean(cols[:, 1] > 0)),
            "finish_ms": float(np.median(fin)) if fin else float("nan")}  # fmt: skip


def idle_shares(spans: list[tuple[float, float]], batches_per_slide: list[int]) -> dict[str, float]:
    """GPU idle time of a forward timeline, overall and at the slide boundaries.

    ``spans`` are the forwards' (start, end) in ms, in launch order; ``batches_per_slide`` how
    many of them each slide had, in order. The window runs from the first start to the last
    end. ``idle_share`` = window time no forward covers / window; ``between_slides_share`` =
    the gaps from each slide's last forward to the next slide's first / window.
    """
    if not spans:
        return {"window_s": 0.0, "idle_share": float("nan"), "between_slides_share": float("nan")}
    lo, hi = spans[0][0], max(e for _, e in spans)
    busy, cur_s, cur_e = 0.0, spans[0][0], spans[0][1]
    for s, e in sorted(spans)[1:]:
        if s > cur_e:
            busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    window = hi - lo
    between, k = 0.0, 0
    for nb in batches_per_slide[:-1]:
        k += nb
        if 0 < k < len(spans):
            between += max(0.0, spans[k][0] - spans[k - 1][1])
    return {"window_s": window / 1e3, "idle_share": (window - busy) / window,
            "between_slides_share": between / window,
            "slides": len(batches_per_slide)}  # fmt: skip


def model_flops(module: Any, size: int, device: Any) -> float:
    """FLOPs of one patch: the ViT formula where the module has a ViT config, else counted.

    The count runs one patch through :class:`torch.utils.flop_counter.FlopCounterMode`
    (matrix products and attention; 2 FLOPs per multiply-add).
    """
    cfg = getattr(module, "config", None)
    if cfg is not None and all(
        hasattr(cfg, a)
        for a in ("embed_dim", "patch_size", "depth", "mlp_hidden", "reg_tokens", "mlp")
    ):
        return vit_flops_per_patch(cfg, size)  # fmt: skip
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.zeros(1, 3, size, size, device=device, dtype=next(module.parameters()).dtype)
    # parameters that need no gradient: FlopCounterMode's module tracker otherwise hooks the
    # autograd graph of every parameter a forward touches (CONCH's attention-pool query)
    module.requires_grad_(False)
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        module(x)
    return float(fc.get_total_flops())


def encoder_table(*, device: Any, batch: int, iters: int, peak: float | None,
                  deadline: float | None, say: Any) -> list[dict[str, Any]]:  # fmt: skip
    """Bare-forward patches/s, MFU and cosine of every patch encoder in the registry.

    Each full-size encoder (random weights: the figures are throughput, not features) in bf16
    eager and bf16 compiled on a random batch of ``batch`` at its native input size.
    """
    import torch
    from tumorboard import models
    from tumorboard.embed._backends import encoder_meta

    rows: list[dict[str, Any]] = []
    say("| encoder (TRIDENT name) | input | dims | GFLOP/patch | bf16 eager patches/s | MFU | "
        "bf16 compiled patches/s | MFU |")  # fmt: skip
    say("|---|---|---|---|---|---|---|---|")
    for name in models.available():
        info = models.info(name)
        if info.kind != "encoder" or "tiny" in name:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = models.load(name, device="cpu", dtype="fp32").eval()
        size = encoder_meta(module)[0]
        row: dict[str, Any] = {"name": name, "trident_name": info.trident_name, "size": size,
                               "dims": info.embed_dim}  # fmt: skip
        row["gflop_per_patch"] = model_flops(module, size, "cpu") / 1e9
        cells = []
        for label, comp in (("eager", False), ("compiled", True)):
            if deadline is not None and time.monotonic() > deadline:
                row[label] = "skipped: time budget"
                cells += ["skipped (time budget)", ""]
                continue
            try:
                r, _ = bare_forward(module, device=device, dtype="bf16", compile=comp,
                                    batch=batch, size=size, iters=iters)  # fmt: skip
            except Exception as exc:  # report and go on with the next encoder
                row[label] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                cells += [f"failed: {row[label]['error'][:80]}", ""]
                continue
            mfu = r * row["gflop_per_patch"] * 1e9 / (peak * 1e12) if peak else None
            row[label] = {"patches_per_s": r, "mfu": mfu}
            cells += [f"{r:.0f}", f"{100 * mfu:.0f}%" if mfu is not None else "n/a"]
        module.cpu()
        torch.cuda.empty_cache() if torch.cuda.is_available() else None
        rows.append(row)
        say(f"| {name} ({info.trident_name}) | {size} px | {info.embed_dim} | "
            f"{row['gflop_per_patch']:.0f} | {' | '.join(cells)} |")  # fmt: skip
    return rows


# ---- the run -------------------------------------------------------------------------------


def _dump(record: dict[str, Any], json_path: str | None) -> None:
    """Write ``record`` as JSON atomically (after every section: a cut-off run keeps it)."""
    if not json_path:
        return
    import json

    p = Path(json_path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1, default=str))
    os.replace(tmp, p)


#: The sections of the run ``sections`` chooses from: the loader alone (CPU decode), GPU decode
#: (loader alone and end to end), end to end against the TRIDENT-style loop, GPU idle between
#: slides, and the bare forward.
SECTIONS = ("loader", "decode", "e2e", "idle", "bare")


def run(*, patches: int | None, json_path: str | None, budget: float | None = None,
        encoders: bool = False, idle_slides: int = 20,
        sections: Collection[str] = SECTIONS) -> int:  # fmt: skip
    """Run the measurements of ``sections`` and print the tables; return an exit status.

    ``budget`` (seconds) bounds the run: a section or variant that would start after it is
    recorded as ``skipped: time budget``. ``encoders`` runs the encoder table only.
    ``idle_slides`` is the number of slides of the GPU-idle run (0: none); ``sections`` a subset
    of :data:`SECTIONS`.
    """
    import torch
    from tumorboard import models
    from tumorboard.embed import embed_slides, read_features
    from tumorboard.embed._backends import encoder_meta
    from tumorboard.models.fp8 import fp8_available

    deadline = None if budget is None else time.monotonic() + budget
    sections = set(sections)
    unknown = sections - set(SECTIONS)
    if unknown:
        raise ValueError(f"sections: unknown {sorted(unknown)}; expected among {SECTIONS}")

    def left() -> float:
        return float("inf") if deadline is None else deadline - time.monotonic()

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    cores = os.cpu_count() or 1
    gpu = torch.cuda.get_device_name(0) if cuda else None
    peak = bf16_peak(gpu) if gpu else None
    lines: list[str] = []

    def say(s: str = "") -> None:
        print(s, flush=True)
        lines.append(s)

    if encoders:
        say(f"### Patch encoders, bare forward on {gpu or 'CPU'} (random weights, batch "
            f"{256 if cuda else 2})\n")  # fmt: skip
        if not cuda:
            say("GPU figures pending: no CUDA device here.")
            _dump({"device": "cpu", "encoders": [], "skipped": "no CUDA device"}, json_path)
            return 0
        rows = encoder_table(device=device, batch=256, iters=10, peak=peak, deadline=deadline,
                             say=say)  # fmt: skip
        _dump({"device": gpu, "cores": cores, "batch": 256, "encoders": rows,
               "bf16_peak_tflops": peak, "lines": lines}, json_path)  # fmt: skip
        return 0

    if patches is None:
        patches = 100_000 if cuda else 256
    model_name, batch = ("uni2-h", 256) if cuda else ("uni2-tiny", 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = models.load(model_name, device="cpu", dtype="fp32").eval()
    size, mean, std, _ = encoder_meta(module)
    flops = vit_flops_per_patch(module.config, size)
    fp8_why = fp8_available(device)
    half = "bf16" if cuda else "fp32"  # the CPU run computes in fp32
    record: dict[str, Any] = {"device": gpu or "cpu", "cores": cores, "model": model_name,
                              "batch": batch, "patches_requested": patches,
                              "gflop_per_patch": flops / 1e9, "bf16_peak_tflops": peak,
                              "budget_s": budget, "sections": sorted(sections),
                              "lines": lines}  # fmt: skip

    say(f"### Embedding peer benchmark on {gpu or 'CPU (tiny sizes)'}, {cores} cores, "
        f"{model_name} (random weights), batch {batch}\n")  # fmt: skip
    if not cuda:
        say("GPU figures pending: no CUDA device here; this run checks the benchmark end to end "
            "at tiny size. Run `python benchmarks/bench_embed.py --gpu` on a GPU "
            "machine.\n")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="tb-bench-embed-gpu-") as d:
        root = Path(d)
        t0 = time.perf_counter()
        coll = write_collections(root, patches=patches // 2, workers=cores)
        g = {k: grids(v) for k, v in coll.items()}
        counts = {k: int(sum(len(c) for _, c, _, _ in v)) for k, v in g.items()}
        record["patches"] = counts
        say(f"collections: SVS-like {counts['svs-like']} patches (512 px reads at 0.25 um/px), "
            f"0.5 um/px {counts['0.5um']} patches (256 px reads); written in "
            f"{time.perf_counter() - t0:.0f} s\n")  # fmt: skip

        record["loader"] = {}
        limit = min(counts["svs-like"], 4096 if cuda else 256)
        if "loader" in sections:
            # loader alone, and its GIL-held time
            path = loader_path(g["svs-like"])
            say(f"loader path: {path}\n")
            say("| loader (SVS-like, float32 batches of 64) | patches/s |\n|---|---|")
            rates: dict[int, float] = {}
            for th in sorted({1, 2, 4, max(1, cores - 1)}):
                if th > cores:
                    continue
                lim = limit if th > 2 else min(limit, 2048)  # a few seconds at each count
                rates[th] = loader_rate(g["svs-like"], threads=th, batch=64, size=size, limit=lim)
                say(f"| {th} thread(s) | {rates[th]:.0f} |")
            top = max(rates)
            # uint8 batches: what the embedding engine streams to a GPU (it normalises there)
            rate_u8 = loader_rate(g["svs-like"], threads=top, batch=64, size=size, limit=limit,
                                  dtype="uint8")  # fmt: skip
            say(f"| {top} thread(s), uint8 batches (the engine's path to a GPU) | {rate_u8:.0f} |")
            if 2 in rates:
                say(f"\n1 -> 2 threads: {rates[2] / rates[1]:.2f}x")
            # one loader thread, so that the counter has a core of its own on a 2-core machine
            held, rate = gil_held_us_per_patch(g["svs-like"], threads=1, batch=64, size=size,
                                               limit=min(limit, 512))  # fmt: skip
            say(f"GIL held per patch (counter-thread probe, 1 loader thread): {held:.1f} us "
                f"(loader {rate:.0f} patches/s during the probe)\n")  # fmt: skip
            record["loader"] = {
                "path": path,
                "rates": rates,
                "gil_us_per_patch": held,
                "uint8_rate": {"threads": top, "patches_per_s": rate_u8},
            }
        decode_why = gpu_decode_unavailable(cuda) if "decode" in sections else "not asked for"
        if "decode" in sections:
            if decode_why is None:
                try:
                    gd = gpu_decode_loader(g["svs-like"], threads=max(1, cores - 1), batch=64,
                                           size=size, limit=limit, device="cuda")  # fmt: skip
                    record["loader"]["gpu_decode"] = gd
                    say(
                        f"loader with --decode gpu, {max(1, cores - 1)} threads: "
                        f"{gd['patches_per_s']:.0f} patches/s; largest difference to CPU decode "
                        f"{gd['max_uint8_diff']} uint8 levels (mean {gd['mean_uint8_diff']:.3f})"
                    )
                    variants = decode_variants(g["svs-like"], threads=max(1, cores - 1),
                                               batch=64, size=size, limit=min(limit, 2048),
                                               left=left)  # fmt: skip
                    record["loader"]["gpu_decode_variants"] = variants
                    for name, v in variants.items():
                        rate = v.get("patches_per_s")
                        say(f"  nvImageCodec {name}: "
                            + (f"{rate:.0f} patches/s" if rate is not None
                               else v.get("error") or v.get("skipped", "?")))  # fmt: skip
                    say("")
                except Exception as exc:  # report and go on: the other figures still count
                    decode_why = f"{type(exc).__name__}: {exc}"[:300]
                    record["loader"]["gpu_decode"] = {"error": decode_why}
                    say(f"loader with --decode gpu failed: {decode_why}\n")
            else:
                record["loader"]["gpu_decode"] = {"skipped": decode_why}
                say(f"loader with --decode gpu: skipped ({decode_why})\n")
        _dump(record, json_path)

        if sections & {"e2e", "decode"}:
            # end to end against the TRIDENT-style loop: every row over both collections, one
            # compilation per row (the engine keeps two prepared encoders)
            say(f"| end to end | collection | patches/s | TRIDENT-style patches/s | ratio | "
                f"min cosine to {half} eager (first slide) |")  # fmt: skip
            say("|---|---|---|---|---|---|")
            ref_feats: dict[str, np.ndarray] = {}
            e2e: dict[str, Any] = {}
            record["end_to_end"] = e2e
            workers = max(1, int(0.75 * cores))
            peers: dict[str, float] = {}
            for key in ("svs-like", "0.5um"):
                m_dev = module.to(device)
                secs, n = trident_loop(g[key], m_dev, device=device, batch=batch, workers=workers,
                                       size=size, mean=mean, std=std)  # fmt: skip
                module.cpu()
                peers[key] = n / secs
            record["trident_style"] = peers
            # the headline rows first; this order leaves the compiled bf16 encoder prepared for
            # the GPU-idle run (the engine keeps the last two prepared encoders, not eager ones)
            rows = ((half, "bf16", False, "cpu"), (f"{half} compiled", "bf16", True, "cpu"),
                    ("fp8 compiled", "fp8", True, "cpu"),
                    (f"{half} --decode gpu", "bf16", False, "gpu"))  # fmt: skip
            for label, dt, comp, decode in rows:
                if ("decode" if decode == "gpu" else "e2e") not in sections:
                    continue
                for key in ("svs-like", "0.5um"):
                    peer = peers[key]
                    if dt == "fp8" and fp8_why is not None:
                        say(f"| {label} | {key} | pending: no FP8 here | {peer:.0f} | | |")
                        continue
                    if decode == "gpu" and decode_why is not None:
                        say(f"| {label} | {key} | pending: {decode_why} | {peer:.0f} | | |")
                        continue
                    if left() < (90 if comp else 20):
                        e2e[f"{label} {key}"] = {"skipped": "time budget", "peer": peer}
                        say(f"| {label} | {key} | skipped: time budget | {peer:.0f} | | |")
                        continue
                    out = root / f"out-{key}-{label.replace(' ', '-')}"
                    run_kw = dict(model=module, batch_size=batch, segmentation=None, progress=False,
                                  device=str(device), dtype=dt if cuda else "fp32", compile=comp,
                                  encoder_name=model_name, decode=decode)  # fmt: skip
                    warm = None
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        if comp:
                            # compile (and quantise) on one slide first, untimed: the engine keeps
                            # the prepared encoder for the timed run (same model, weights, dtype,
                            # mode), whose per-slide seconds would otherwise include the compile
                            t0 = time.perf_counter()
                            embed_slides(coll[key][:1], out=out.with_name(out.name + "-warmup"),
                                         **run_kw)  # fmt: skip
                            warm = time.perf_counter() - t0
                        rep = embed_slides(coll[key], out=out, **run_kw)
                    if not rep.ok:
                        why = f"{rep.failed[0].error}"[:300] if rep.failed else rep.summary()[:300]
                        e2e[f"{label} {key}"] = {"failed": why, "peer": peer}
                        say(f"| {label} | {key} | failed: {why[:200]} | | | |")
                        continue
                    secs = sum(r.seconds for r in rep.results)
                    tb = rep.n_patches / secs
                    feats = read_features(rep.results[0].features_path)[0]
                    if label == half:
                        ref_feats[key] = feats
                    cos = _np_min_cosine(feats, ref_feats[key]) if key in ref_feats else None
                    e2e[f"{label} {key}"] = {"patches_per_s": tb, "peer": peer, "ratio": tb / peer,
                                             "warmup_s": warm, "cosine_to_eager": cos}  # fmt: skip
                    note = (
                        f" (compile + first slide before: {warm:.1f} s)" if warm is not None else ""
                    )
                    c_s = f"{cos:.4f}" if cos is not None else "n/a"
                    say(f"| {label} | {key} | {tb:.0f}{note} | {peer:.0f} | {tb / peer:.2f}x | "
                        f"{c_s} |")  # fmt: skip
                    _dump(record, json_path)
            say("")

        if "idle" in sections:
            # GPU idle between slides: a run of many small SVS-like slides, compiled bf16
            if idle_slides and cuda and left() > 60:
                try:
                    per = max(1024, min(2048, patches // (4 * idle_slides)))  # 4-8 batches
                    bank = _tile_bank(8, seed=1)
                    side = max(1024, int(np.sqrt(per)) * 512)
                    paths = [write_slide(root / "idle" / f"idle_{i:02d}.tif", side=side, mpp=0.25,
                                         step=4, levels=3, quality=80, bank=bank, workers=cores)
                             for i in range(idle_slides)]  # fmt: skip
                    run_kw = dict(model=module, batch_size=batch, segmentation=None, progress=False,
                                  device="cuda", dtype="bf16", compile=True,
                                  encoder_name=model_name)  # fmt: skip
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        embed_slides(paths[:1], out=root / "idle-warmup", **run_kw)
                        t0 = time.perf_counter()
                        host: dict[str, list] = {}
                        rep, spans = forward_timeline(
                            lambda: embed_slides(paths, out=root / "idle-out", **run_kw), host
                        )
                        wall = time.perf_counter() - t0
                    per_slide = [-(-r.n_patches // batch) for r in rep.results]
                    shares = idle_shares(spans, per_slide)
                    shares.update({"wall_s": wall, "patches": rep.n_patches,
                                   "patches_per_s": rep.n_patches / wall})  # fmt: skip
                    bounds = boundary_report(spans, per_slide, host)
                    shares["boundaries"] = bounds
                    record["idle"] = shares
                    between, idle = shares["between_slides_share"], shares["idle_share"]
                    say(f"GPU idle, {idle_slides} SVS-like slides of "
                        f"{rep.n_patches // idle_slides} patches, compiled bf16: "
                        f"{100 * between:.2f}% of the forward window between slides, "
                        f"{100 * idle:.2f}% idle in all ({rep.n_patches / wall:.0f} patches/s "
                        f"over {wall:.1f} s wall)")  # fmt: skip
                    if bounds.get("boundaries"):
                        say(f"  at the {bounds['boundaries']} slide boundaries (medians): GPU gap "
                            f"{bounds['gap_ms']:.1f} ms; the next slide's first batch submitted "
                            f"{bounds['submit_after_idle_ms']:+.1f} ms and launched "
                            f"{bounds['launch_end_after_idle_ms']:+.1f} ms after the GPU went "
                            f"idle ({100 * bounds['host_late_share']:.0f}% of boundaries late); "
                            f"it started {bounds['start_after_launch_ms']:.1f} ms after its "
                            f"launch began; a slide's files took {bounds['finish_ms']:.1f} ms "
                            "to write")  # fmt: skip
                    say("")
                    _dump(record, json_path)
                except Exception as exc:  # report and go on: the other figures still count
                    record["idle"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                    say(f"GPU idle between slides failed: {record['idle']['error']}\n")
            elif idle_slides:
                why = "no CUDA" if not cuda else "time budget"
                record["idle"] = {"skipped": why}
                say(f"GPU idle between slides: skipped ({why})\n")

        if "bare" in sections:
            # bare forward
            ref = "bf16" if cuda else "fp32"
            say(f"| bare forward | patches/s | MFU (bf16 peak) | min cosine to {ref} eager |")
            say("|---|---|---|---|")
            variants: list[tuple[str, str, Any]] = [(f"{half} eager", "bf16", False),
                                                    (f"{half} compiled", "bf16", True),
                                                    ("fp8 compiled", "fp8", True)]  # fmt: skip
            base = None
            bare: dict[str, Any] = {}
            record["bare"] = bare
            iters = 10 if cuda else 2

            def bare_row(label: str, dt: str, comp: Any) -> None:
                nonlocal base
                if dt == "fp8" and fp8_why is not None:
                    bare[label] = {"skipped": fp8_why}
                    say(f"| {label} | pending: {fp8_why} | | |")
                    return
                dt_run = dt if cuda else ("fp32" if dt == "bf16" else dt)
                r, feats = bare_forward(module, device=device, dtype=dt_run, compile=comp,
                                        batch=batch, size=size, iters=iters)  # fmt: skip
                base = feats if base is None else base
                mfu = r * flops / (peak * 1e12) if peak else None
                cos = _cos(feats, base)
                bare[label] = {"patches_per_s": r, "cosine": cos, "mfu": mfu}
                mfu_s = f"{100 * mfu:.0f}%" if mfu is not None else "pending (no GPU peak)"
                say(f"| {label} | {r:.0f} | {mfu_s} | {cos:.4f} |")

            for label, dt, comp in variants:
                if left() < 60:
                    bare[label] = {"skipped": "time budget"}
                    say(f"| {label} | skipped: time budget | | |")
                    continue
                bare_row(label, dt, comp)
            say("")
            _dump(record, json_path)

            # max-autotune last: its autotuning takes minutes, the other figures come first
            label = "bf16 compiled max-autotune"
            if not cuda:
                pass
            elif left() > 240:
                try:
                    bare_row(label, "bf16", "max-autotune")
                except Exception as exc:  # report and go on
                    bare[label] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                    say(f"bare forward {label} failed: {bare[label]['error']}")
            else:
                bare[label] = {"skipped": "time budget"}
                say(f"bare forward {label}: skipped (time budget)")
    _dump(record, json_path)
    if not cuda:
        say("\nGPU figures pending (CPU run at tiny size: the numbers above only show the "
            "benchmark runs).")  # fmt: skip
    if json_path:
        _dump(record, json_path)
        print(f"wrote {json_path}")
    return 0
