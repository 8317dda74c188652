"""``tumorboard embed``: the embedding engine on the command line.

Usage: ``tumorboard embed SLIDES... --model uni2-h --weights PATH --out DIR``. Exit status 0 when
every slide is done or already complete, 1 when any slide failed (the others are still written),
2 on bad arguments.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .._args import device_name, positive_float, positive_int


def add_embed_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``embed`` sub-command to an argparse ``subparsers`` object (sets ``func``)."""
    p = subparsers.add_parser(
        "embed",
        help="embed the patches of slides with a foundation model (TRIDENT .h5 + Parquet)",
        description=(
            "Tiles every slide (tissue segmentation, TRIDENT patch grid), embeds the patches and "
            "writes {out}/features_{encoder}/{name}.h5 (TRIDENT layout) and "
            "{out}/embeddings_{encoder}/{name}.parquet. Complete slides are skipped on a rerun; "
            "failed slides are listed at the end."
        ),
    )
    p.add_argument("slides", nargs="+", type=Path, help="slide files")
    p.add_argument("--model", default="uni2-h", help="uni2-h, uni, conch, uni2-tiny, conch-tiny")
    p.add_argument("--weights", type=Path, default=None, help="checkpoint (.bin/.pt/.safetensors)")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--backend", choices=("torch", "onnxruntime"), default="torch")
    p.add_argument(
        "--device", type=device_name, default="auto", help="auto, cpu, cuda, cuda:1, mps"
    )
    p.add_argument("--dtype", choices=("auto", "fp32", "fp16", "bf16"), default="auto")
    p.add_argument(
        "--mag", type=positive_float, default=20, help="target magnification (default 20)"
    )
    p.add_argument(
        "--patch", type=positive_int, default=256, help="patch side at --mag (default 256)"
    )
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument(
        "--workers", type=positive_int, default=None, help="reader threads (default: all cores)"
    )
    p.add_argument(
        "--segmentation",
        default="clam",
        help="tissue segmentation preset, or none (every grid patch)",
    )
    p.add_argument(
        "--mpp", type=positive_float, default=None, help="override the slides' resolution"
    )
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=run_embed)
    return p


def run_embed(args: argparse.Namespace) -> int:
    """Run ``embed_slides`` with the parsed arguments, print the report, return the status."""
    from ._engine import embed_slides

    report = embed_slides(  # errors go to tumorboard.cli.main: one line, exit status 2
        args.slides,
        model=args.model,
        weights=args.weights,
        out=args.out,
        mag=args.mag,
        patch=args.patch,
        batch_size=args.batch_size,
        backend=args.backend,
        device=args.device,
        dtype=args.dtype,
        workers=args.workers,
        segmentation=None if args.segmentation == "none" else args.segmentation,
        mpp=args.mpp,
        progress=not args.quiet,
    )
    print(report.summary())
    return 0 if report.ok else 1
