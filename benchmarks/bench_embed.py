"""Benchmark the slide-collection embedding engine against a bare model forward, same patches.

Workloads, on a synthetic pyramidal JPEG-tiled TIFF (20x, 0.5 um/px) written first, every grid
patch kept (no segmentation), 256 px patches at 20x resized to the encoder's 224 px input, CPU:

* **uni2-tiny** (2 blocks, 48-d): the tiny config of UNI2-h's architecture; 48 patches
  (``--quick``) or 192 patches, batch 16.
* **uni2-h** (full size, 24 blocks, 1536-d, random weights; not in ``--quick``): a few batches
  only (8 patches, batch 4).
* ``--families`` instead: each architecture family's small config
  (``tumorboard.models._zoo.families``: timm ViT, ViT with registers and CLS+mean, CONCH v1.5,
  Hugging Face ViT / Dinov2 / Dinov2 with registers / Midnight, KEEP, Swin, ResNet trunk; 224 px
  inputs, random weights), torch backend only, 48 patches, batch 16. Target: ratio >= 0.9 for
  every family (the pipeline adds less than 10% to the bare module's forward).

Each through ``backend="torch"`` and ``backend="onnxruntime"`` (the module exported once,
dynamic batch). tumorboard time: ``embed_slides`` per-slide time (read + decode + preprocess on
the reader threads, queue, forward, writing the .h5 and Parquet; model loading and ONNX export
excluded), best of ``--repeat`` runs into fresh folders, alternating with the anchor's runs (so
that load from other processes falls on both alike). Anchor (**bare forward**): the same
backend's forward alone on the same patches already preprocessed in memory, same batch size.
``ratio`` = anchor / tumorboard: the share of the pipeline's time that is model compute (1.0 =
no overhead); the note gives patches/s of both and the overhead in percent. Each workload checks
that the pipeline's features equal the bare forward's (max abs difference in ``check``).

``--gpu`` runs the peer benchmark instead (``benchmarks/_embed_gpu.py``): on the first CUDA device
found, SVS-like and 0.5 um/px collections of >= 100k patches, ``embed_slides`` end to end in bf16,
compiled bf16 and FP8 against a TRIDENT-style loop on the same coordinates, the loader alone and
its GIL-held time per patch, and the bare forward's patches/s, MFU and cosine to bf16 eager. On a
CPU it runs the same at tiny size and prints that the GPU figures are pending.

Usage (from the repository root)::

    python benchmarks/bench_embed.py [--quick] [--json PATH] [--repeat N]
    python benchmarks/bench_embed.py --families [--repeat N] [--json PATH]
    python benchmarks/bench_embed.py --gpu [--patches N] [--json PATH] [--budget S]
    python benchmarks/bench_embed.py --gpu --encoders [--json PATH]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

try:
    from ._timing import Result, format_markdown, positive_int, write_json
except ImportError:  # run as a script: ``python benchmarks/bench_embed.py``
    from _timing import Result, format_markdown, positive_int, write_json

ANCHOR = "bare forward"


def _write_slide(path: Path, width: int, height: int) -> Path:
    from tumorboard._demo import sample_slide_image, write_sample_slide

    return write_sample_slide(path, sample_slide_image(seed=0, width=width, height=height))


def _bare(runner: Any, batches: list[np.ndarray]) -> tuple[float, np.ndarray]:
    t0 = time.perf_counter()
    outs = [runner(b) for b in batches]
    return time.perf_counter() - t0, np.concatenate(outs)


def _workload(name: str, module: Any, slide: Path, *, batch_size: int, repeat: int,
              tmp: Path,
              backends: Sequence[str] = ("torch", "onnxruntime")) -> list[Result]:  # fmt: skip
    from tumorboard import slides
    from tumorboard.embed import OnnxBackend, TorchBackend, embed_slides, export_onnx, read_features
    from tumorboard.embed._backends import encoder_meta

    size, mean, std, interp = encoder_meta(module)
    with slides.open(slide) as s:
        grid = slides.patch_grid(s, None, magnification=20, patch_size=256)
        loader = slides.PatchLoader(s, grid, batch_size=batch_size, size=size, mean=mean, std=std,
                                    interpolation=interp)  # fmt: skip
        batches = [b.images for b in loader]
    n = len(grid)
    results = []
    for backend in backends:
        workload = f"{name} {backend} ({n} patches, batch {batch_size})"
        try:
            if backend == "torch":
                runner: Any = TorchBackend(module, device="cpu", dtype="fp32")
            else:
                onnx_path = export_onnx(module, tmp / f"{name}.onnx", image_size=size)
                runner = OnnxBackend(onnx_path, device="cpu")
            runner(batches[0])  # warm-up
            # bare and pipeline runs alternate, so that load from other processes on a shared
            # machine falls on both alike; the best of each is kept
            bare_s, pipe_s = float("inf"), float("inf")
            bare_feats = feats = None
            for r in range(repeat):
                t, out_bare = _bare(runner, batches)
                if t < bare_s:
                    bare_s, bare_feats = t, out_bare
                out = tmp / f"{name}-{backend}-{r}"
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    rep = embed_slides([slide], model=module, out=out, batch_size=batch_size,
                                       backend=backend, device="cpu", dtype="fp32",
                                       segmentation=None, progress=False)  # fmt: skip
                if not rep.ok:
                    raise RuntimeError(rep.failed[0].error)
                pipe_s = min(pipe_s, sum(x.seconds for x in rep.results))
                feats = read_features(rep.results[0].features_path)[0]
            diff = float(np.abs(feats - bare_feats).max())
            check = f"max abs diff {diff:.1e}" + (" ok" if diff <= 1e-4 else " MISMATCH")
            note = (f"pipeline {n / pipe_s:.1f} patches/s, bare {n / bare_s:.1f} patches/s, "
                    f"overhead {100 * (pipe_s / bare_s - 1):+.0f}%")  # fmt: skip
            results.append(Result.make(workload, pipe_s, ANCHOR, bare_s, check=check, note=note))
        except Exception as exc:  # report and go on (e.g. no onnxruntime, export too large)
            note = f"{type(exc).__name__}: {exc}"[:300]
            nan = float("nan")
            results.append(Result(workload, nan, ANCHOR, nan, nan, check="error", note=note))
    return results


def run_families(*, repeat: int) -> tuple[list[Result], dict[str, Any]]:
    """Each encoder family's small config: ``embed_slides`` against its bare forward (torch).

    The configs are ``tumorboard.models._zoo.families.family_encoder(family, size="small")``:
    224 px inputs (CONCH v1.5's trunk at twice its grid: 448), about ViT-Ti widths, random
    weights; one 2048 x 1536 px slide at 20x (48 patches of 256 px), batch 16, fp32, CPU.
    """
    import torch
    from tumorboard.models._zoo.families import FAMILIES, family_encoder

    t_start = time.perf_counter()
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="tb-bench-families-") as d:
        tmp = Path(d)
        slide = _write_slide(tmp / "families_case.tif", 2048, 1536)
        for family in FAMILIES:
            module = family_encoder(family, size="small")
            results += _workload(family, module, slide, batch_size=16, repeat=repeat, tmp=tmp,
                                 backends=("torch",))  # fmt: skip
    meta = {
        "families": True,
        "repeat": repeat,
        "device": "cpu",
        "ratio": "bare forward s / pipeline s (1.0 = no pipeline overhead); target >= 0.9",
        "torch_threads": torch.get_num_threads(),
        "total_wall_s": time.perf_counter() - t_start,
    }
    return results, meta


def run_results(*, quick: bool, repeat: int) -> tuple[list[Result], dict[str, Any]]:
    import torch
    from tumorboard import models

    t_start = time.perf_counter()
    torch.manual_seed(0)
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="tb-bench-embed-") as d:
        tmp = Path(d)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tiny = models.load("uni2-tiny", device="cpu", dtype="fp32")
        w, h = (2048, 1536) if quick else (4096, 3072)
        slide = _write_slide(tmp / "tiny_case.tif", w, h)
        results += _workload("uni2-tiny", tiny, slide, batch_size=16, repeat=repeat, tmp=tmp)
        if not quick:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                full = models.load("uni2-h", device="cpu", dtype="fp32")
            slide = _write_slide(tmp / "full_case.tif", 512, 1024)  # 2 x 4 = 8 patches
            results += _workload("uni2-h", full, slide, batch_size=4, repeat=1, tmp=tmp)
    meta = {
        "quick": quick,
        "repeat": repeat,
        "device": "cpu",
        "ratio": "bare forward s / pipeline s (1.0 = no pipeline overhead)",
        "torch_threads": torch.get_num_threads(),
        "total_wall_s": time.perf_counter() - t_start,
    }
    return results, meta


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns a process exit status."""
    parser = argparse.ArgumentParser(
        prog="bench_embed",
        description="CPU patches/s of tumorboard's embedding engine (torch and onnxruntime "
        "backends) against a bare model forward on the same patches.",
    )
    parser.add_argument("--quick", action="store_true", help="tiny encoder only (< 60 s)")
    parser.add_argument(
        "--families",
        action="store_true",
        help="each encoder family's small config (224 px, random weights): embed_slides "
        "against the bare forward, torch backend (target: ratio >= 0.9)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write results as JSON to PATH")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs (best)")
    parser.add_argument(
        "--gpu",
        action="store_true",
        help="the peer benchmark on the first GPU found (TRIDENT-style loop, compiled, FP8); "
        "tiny sizes on CPU",
    )
    parser.add_argument(
        "--patches",
        type=positive_int,
        default=None,
        help="--gpu: patches in the two collections together (default 100000 on a GPU, 256 on CPU)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="--gpu: stop starting new variants after this many seconds (recorded as skipped)",
    )
    parser.add_argument(
        "--encoders",
        action="store_true",
        help="--gpu: only the table of every patch encoder's bare forward (bf16 eager/compiled)",
    )
    parser.add_argument(
        "--idle-slides",
        type=int,
        default=20,
        metavar="N",
        help="--gpu: slides in the GPU-idle-between-slides run (0: skip it)",
    )
    parser.add_argument(
        "--sections",
        default=None,
        help="--gpu: comma-separated subset of loader,decode,e2e,idle,bare (default all)",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    if args.gpu:
        try:
            from ._embed_gpu import run as run_gpu
        except ImportError:
            from _embed_gpu import run as run_gpu
        try:
            return run_gpu(
                patches=args.patches,
                json_path=args.json,
                budget=args.budget,
                encoders=args.encoders,
                idle_slides=args.idle_slides,
                **({"sections": args.sections.split(",")} if args.sections else {}),
            )
        except ImportError as exc:
            print(f"error: {exc} (pip install 'tumorboard[embed,slides]')", file=sys.stderr)
            return 2
    try:
        if args.families:
            results, meta = run_families(repeat=args.repeat)
        else:
            results, meta = run_results(quick=args.quick, repeat=args.repeat)
    except ImportError as exc:
        print(f"error: {exc} (pip install 'tumorboard[embed,slides]')", file=sys.stderr)
        return 2
    mode = "encoder families" if args.families else "quick" if args.quick else "full"
    print(f"\n### tumorboard embedding benchmark ({mode} mode, CPU)\n")
    print(format_markdown(results, [ANCHOR]))
    for r in results:
        if r.note:
            print(f"- {r.workload}: {r.note}")
    print(
        "\nratio = bare forward time / pipeline time: the share of the pipeline that is model "
        f"compute (1.0 = no overhead). Total {meta['total_wall_s']:.0f} s."
    )
    if args.json:
        write_json(results, args.json, meta)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
