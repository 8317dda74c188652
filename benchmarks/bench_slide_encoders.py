"""Benchmark the slide encoders (``tumorboard.models.slide_encoder``): slides per second.

Workload: N synthetic slides of 1k-20k patches (lengths drawn uniformly with a fixed seed) as
float32 patch-feature arrays, already in memory (reading the .h5 files is not timed). Each slide
is a slice of one random feature pool, so memory stays bounded at any N. Encoders, at TRIDENT's
full sizes:

* ``mean-uni_v2`` - the mean of 1536-d UNI2-h features;
* ``abmil`` - TRIDENT's ABMILSlideEncoder on 1536-d features, one gated head of width 512;
* ``feather_uni_v2`` - FEATHER over 1536-d features (512-d patch embedding, gated attention 384);
* ``feather`` - FEATHER over 768-d CONCH v1.5 features;
* ``chief`` - CHIEF's gated attention over 768-d CTransPath features (768 -> 512 -> 256);
* ``madeleine`` - MADELEINE over 512-d CONCH v1 features (3 pre-attention blocks to 4 x 512,
  4 gated heads, projector to 512);
* ``titan`` - TITAN's slide encoder (6 blocks, width 768, 2-D ALiBi) over 768-d CONCH v1.5
  features with coordinates (each slide a rectangle of a 100-patch-wide grid, 512 px units).
  TITAN tiles at 512 px, so its slides have a quarter of the patches of the same tissue at
  256 px: 250-5k patches. Attention is quadratic in that, so in ``--quick`` mode it runs on
  ``TITAN_QUICK`` slides only (on the CPU a 5k-patch slide takes about a minute), and
  ``--titan-slides N`` runs it on the first N slides of any run (its line names N).
* ``gigapath`` - Prov-GigaPath's slide encoder (LongNet, 11 of its 12 layers run, width 768,
  dilated attention over 5 branches) over 1536-d features with coordinates (256 px units),
  1k-20k patches.
* ``prism`` - PRISM's Perceiver (513 latents of 1280, 8 cross-attention layers, 48
  self-attention blocks) over 2560-d Virchow features, 1k-20k patches.

  In ``--quick`` mode both run on ``SLOW_QUICK`` slides of at most ``QUICK_ROWS`` patches.

tumorboard: the slides packed into varlen batches of up to ``MAX_ROWS`` patches, one
``forward_varlen`` per batch (what ``embed --slide-encoder`` runs; the fused Triton kernel on
CUDA, its torch reference on the CPU). Anchor: one slide at a time through the padded
``forward`` on ``[1, N, F]`` (TRIDENT's slide loop). ``ratio`` = anchor time / tumorboard time
(above 1: tumorboard faster); the note gives tumorboard's slides/s. ``check``: the embeddings of
both paths agree within 1e-4.

Nothing is asserted on timings.

Usage (from the repository root)::

    python benchmarks/bench_slide_encoders.py [--quick] [--slides N] [--titan-slides N]
        [--only NAME ...] [--device cpu|cuda] [--json PATH]
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

try:
    from ._timing import Result, format_markdown, positive_int, write_json
except ImportError:  # run as a script: ``python benchmarks/bench_slide_encoders.py``
    from _timing import Result, format_markdown, positive_int, write_json

SEED = 0
ANCHOR = "one slide at a time"
ANCHORS = (ANCHOR,)
ENCODERS = ("mean-uni_v2", "abmil", "feather_uni_v2", "feather", "chief", "madeleine", "titan",
            "gigapath", "prism")  # fmt: skip
IN_DIM = {"mean-uni_v2": 1536, "abmil": 1536, "feather_uni_v2": 1536, "feather": 768,
          "chief": 768, "madeleine": 512, "titan": 768, "gigapath": 1536,
          "prism": 2560}  # fmt: skip
#: Slides TITAN runs on in --quick mode; its slides have a quarter of the patches (512 px).
TITAN_QUICK = 2
#: Slides gigapath and prism run on in --quick mode, and their patch caps there (on the CPU a
#: 1k-patch gigapath slide and any prism slide take tens of seconds).
SLOW_QUICK = 1
QUICK_ROWS = {"gigapath": 1_000, "prism": 4_000}
#: The grid of the synthetic coordinates: patches per grid row; the level-0 patch side of the
#: encoders that read coordinates.
GRID_WIDTH = 100
PATCH_LEVEL0 = {"titan": 512, "gigapath": 256}


def _encoder(name: str) -> Any:
    from tumorboard.models import RandomWeightsWarning, load_slide_encoder

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RandomWeightsWarning)
        return load_slide_encoder(name, in_dim=IN_DIM[name])


def _slides(n: int, lo: int, hi: int) -> tuple[list[int], list[int]]:
    import numpy as np

    rng = np.random.default_rng(SEED)
    lengths = rng.integers(lo, hi + 1, size=n).tolist()
    starts = rng.integers(0, hi, size=n).tolist()  # into a pool of 2 * hi rows
    return lengths, starts


def _workload(name: str, lengths: list[int], starts: list[int], device: str) -> list[Result]:
    import torch
    from tumorboard.embed._slide_features import MAX_ROWS, _batches

    torch.manual_seed(SEED)
    f = IN_DIM[name]
    pool = torch.randn(2 * max(lengths) + 1, f, device=device)
    enc = _encoder(name).to(device)
    slides = [(i, n) for i, n in enumerate(lengths)]
    rows = torch.arange(pool.shape[0], device=device)
    uses_coords = name in PATCH_LEVEL0
    unit = PATCH_LEVEL0.get(name, 1)
    xy = torch.stack((rows // GRID_WIDTH, rows % GRID_WIDTH), 1) * unit

    def extra(parts: list[torch.Tensor]) -> dict[str, Any]:
        if not uses_coords:
            return {}
        return {"coords": torch.cat(parts), "patch_size_level0": unit}

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    def varlen() -> torch.Tensor:
        outs = []
        for group in _batches(slides, getattr(enc, "max_rows", MAX_ROWS)):
            x = torch.cat([pool[starts[i] : starts[i] + lengths[i]] for i in group])
            off = torch.tensor([0] + [lengths[i] for i in group], device=device).cumsum(0)
            kw = extra([xy[starts[i] : starts[i] + lengths[i]] for i in group])
            outs.append(enc.forward_varlen(x, off, **kw))
        return torch.cat(outs)

    def loop() -> torch.Tensor:
        out = []
        for i, _ in slides:
            rows_i = slice(starts[i], starts[i] + lengths[i])
            kw = extra([xy[rows_i][None]])
            out.append(enc(pool[rows_i][None], **kw))
        return torch.cat(out)

    with torch.inference_mode():
        warm = extra([xy[:200]])
        enc.forward_varlen(pool[:200], torch.tensor([0, 200], device=device), **warm)  # warm-up
        enc(pool[None, :200], **extra([xy[None, :200]]))
        sync()
        t0 = time.perf_counter()
        a = varlen()
        sync()
        t_varlen = time.perf_counter() - t0
        t0 = time.perf_counter()
        b = loop()
        sync()
        t_loop = time.perf_counter() - t0
    ok = torch.allclose(a, b, rtol=1e-4, atol=1e-4)
    n = len(lengths)
    note = (f"{n / t_varlen:.2f} slides/s ({sum(lengths) / t_varlen:,.0f} patches/s), "
            f"F={f}, {device}")  # fmt: skip
    span = f"{min(lengths):,}-{max(lengths):,} patches" + (f" of {unit} px" if uses_coords else "")
    return [Result.make(f"{name}: {n} slides of {span}", t_varlen, ANCHOR, t_loop,
                        check="same embeddings" if ok else "DIFFER", note=note)]  # fmt: skip


def run_results(
    *,
    quick: bool = False,
    slides: int | None = None,
    device: str = "cpu",
    titan_slides: int | None = None,
    only: Sequence[str] | None = None,
) -> tuple[list[Result], dict[str, Any]]:
    """Run the workloads (``only``: some of :data:`ENCODERS`); return results and metadata.

    ``titan_slides`` runs TITAN on the first that many slides only (default: all of them, or
    :data:`TITAN_QUICK` in ``quick`` mode); its result line names the count.
    """
    import torch

    names = ENCODERS if only is None else tuple(only)
    unknown = sorted(set(names) - set(ENCODERS))
    if unknown:
        raise ValueError(f"unknown encoders {unknown}; expected some of {ENCODERS}")
    t0 = time.perf_counter()
    n = slides or (8 if quick else 1000)
    lengths, starts = _slides(n, 1_000, 20_000)
    results: list[Result] = []
    for name in (e for e in ENCODERS if e in names):
        if name == "titan":  # 512 px tiles: a quarter of the patches of the same tissue
            k = min(n, titan_slides or (TITAN_QUICK if quick else n))
            few = [max(1, m // 4) for m in lengths[:k]]
            results += _workload(name, few, [s // 4 for s in starts[:k]], device)
            continue
        if name in ("gigapath", "prism") and quick:
            k = min(n, SLOW_QUICK)
            few = [min(m, QUICK_ROWS[name]) for m in lengths[:k]]
            results += _workload(name, few, [s % (max(few) + 1) for s in starts[:k]], device)
            continue
        results += _workload(name, lengths, starts, device)
    meta = {"quick": quick, "n_slides": n, "n_patches": sum(lengths), "device": device,
            "titan_slides": (min(n, titan_slides or (TITAN_QUICK if quick else n))
                             if "titan" in names else None),
            "encoders": list(names), "torch_threads": torch.get_num_threads(),
            "total_wall_s": time.perf_counter() - t0}  # fmt: skip
    return results, meta


def run(
    quick: bool = False,
    slides: int | None = None,
    device: str = "cpu",
    titan_slides: int | None = None,
    only: Sequence[str] | None = None,
) -> list[dict]:
    """Run the benchmark and return one dict per (workload, anchor) record."""
    results, _ = run_results(
        quick=quick, slides=slides, device=device, titan_slides=titan_slides, only=only
    )
    return [asdict(r) for r in results]


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns a process exit status."""
    parser = argparse.ArgumentParser(
        prog="bench_slide_encoders",
        description="Slides/s of the mean, ABMIL-family (FEATHER, CHIEF, MADELEINE), TITAN, "
        "Prov-GigaPath and PRISM slide encoders, varlen vs one by one.",
    )
    parser.add_argument("--quick", action="store_true", help="8 slides instead of 1,000")
    parser.add_argument("--slides", type=positive_int, default=None, help="number of slides")
    parser.add_argument("--titan-slides", type=positive_int, default=None, metavar="N",
                        help=f"run TITAN on the first N slides only (default: all; "
                        f"{TITAN_QUICK} with --quick)")  # fmt: skip
    parser.add_argument("--only", nargs="+", choices=ENCODERS, metavar="NAME",
                        help=f"run only these encoders ({', '.join(ENCODERS)})")  # fmt: skip
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--json", metavar="PATH", help="also write results as JSON to PATH")
    args = parser.parse_args(argv)
    results, meta = run_results(quick=args.quick, slides=args.slides, device=args.device,
                                titan_slides=args.titan_slides, only=args.only)  # fmt: skip
    mode = "quick" if args.quick else "full"
    print(f"\n### tumorboard slide-encoder benchmark ({mode} mode, {meta['n_slides']} slides, "
          f"{meta['n_patches']} patches, {args.device}, "
          f"{meta['torch_threads']} threads)\n")  # fmt: skip
    print(format_markdown(results, ANCHORS))
    for r in results:
        print(f"- {r.workload.split(':')[0]}: {r.note}")
    if "titan" in meta["encoders"] and meta["titan_slides"] < meta["n_slides"]:
        print(f"\nTITAN ran on the first {meta['titan_slides']} of the {meta['n_slides']} slides "
              "only (--titan-slides / --quick): its slides/s is from those.")  # fmt: skip
    print(
        "\nratio = anchor time / tumorboard time (>1: tumorboard faster); tumorboard packs the "
        "slides into varlen batches, the anchor runs them one at a time. "
        f"Total {meta['total_wall_s']:.0f} s."
    )
    if args.json:
        write_json(results, args.json, meta)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
