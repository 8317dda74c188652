"""``tumorboard embed``: the embedding engine on the command line.

Usage: ``tumorboard embed SLIDES... --model uni2-h --weights PATH --out DIR``. The inputs, tiling,
resume and progress options and behaviours are ``tumorboard tile``'s
(:func:`tumorboard.slides.cli.add_slide_options`). A real model name needs ``--weights`` (or
``--random-weights`` for testing). Inputs, options and weights are checked before the model is
loaded. The JSON report ``{out}/{mag}x_{patch}px_{overlap}px_overlap/embed_report_{encoder}.json``
keeps the slides of earlier runs. ``--slide-encoder NAME [--slide-weights PATH]`` also writes
one embedding per slide (``.../slide_features_{NAME}/{name}.h5`` and
``slide_features_{NAME}.parquet``) after making, or finding, the patch features it reads; its
report is ``embed_report_{NAME}.json`` beside the patch encoder's. Exit status 0 when every
slide is done or already complete, 1 when any slide failed or had no tissue (the others are
still written), 2 when the command was refused before any work.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .._args import cli_message, device_name, positive_int
from .._verbs import verb_help
from ..errors import InvalidArgumentError, TumorboardError
from ..slides.cli import (
    add_slide_options,
    collect_inputs,
    tiling_options,
    usage_error,
    write_report,
)
from ._backends import COMPILE_MODES
from ._options import EmbedOptions
from ._report import SlideEmbedReport


def add_embed_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``embed`` sub-command to an argparse ``subparsers`` object (sets ``func``).

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The main parser's subparsers.

    Returns
    -------
    argparse.ArgumentParser
        The ``embed`` parser.
    """
    p = subparsers.add_parser(
        "embed",
        help=verb_help("embed"),
        description=(
            "Tiles every slide (tissue segmentation, TRIDENT patch grid), embeds the patches and "
            "writes {out}/{mag}x_{patch}px_{overlap}px_overlap/features_{encoder}/{name}.h5 "
            "(TRIDENT layout) and .../embeddings_{encoder}/{name}.parquet. Slides complete with "
            "the same settings and weights are skipped on a rerun; failed and tissue-less slides "
            "are listed at the end."
        ),
    )
    add_slide_options(p)
    p.add_argument(
        "--model",
        default=None,
        help="patch encoder: uni2-h (default), uni, conch, uni2-tiny, ...; with --slide-encoder, "
        "the one it reads (default)",
    )
    p.add_argument("--weights", type=Path, default=None, help="checkpoint (.bin/.pt/.safetensors)")
    p.add_argument(
        "--random-weights",
        action="store_true",
        help="run a real model with random parameters (testing only; recorded as 'random')",
    )
    p.add_argument(
        "--backend", choices=("torch", "onnxruntime"), default="torch", help="compute backend"
    )
    p.add_argument(
        "--device", type=device_name, default="auto", help="auto, cpu, cuda, cuda:1, ..."
    )
    p.add_argument(
        "--dtype",
        choices=("auto", "fp32", "fp16", "bf16", "fp8"),
        default="auto",
        help="precision: auto (bf16 on CUDA, fp32 on CPU), fp32, fp16, bf16, or fp8 (block "
        "linears in FP8 E4M3 on GPUs of compute capability >= 8.9; refused elsewhere)",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the encoder with static batch shapes (last batch padded); compiled "
        "once per model, batch size and dtype",
    )
    p.add_argument(
        "--compile-mode",
        choices=COMPILE_MODES,
        default=None,
        help="torch.compile mode for --compile (default: 'default')",
    )
    p.add_argument(
        "--decode",
        choices=("cpu", "gpu"),
        default="cpu",
        help="where JPEG tiles are decoded: cpu (default, libjpeg-turbo) or gpu (nvImageCodec "
        "on the CUDA --device, for tiled TIFF pyramids of JPEG tiles; needs tumorboard[gpu])",
    )
    p.add_argument(
        "--batch-size", type=positive_int, default=64, help="patches per forward (default 64)"
    )
    p.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="where the work runs: this process, or Ray actors (needs tumorboard[dist])",
    )
    p.add_argument("--ray-address", default=None, help="the Ray cluster for --executor ray")
    p.add_argument(
        "--slide-encoder",
        default=None,
        metavar="NAME",
        help="also write one embedding per slide (TRIDENT slide_features_NAME/): mean-uni_v2 "
        "(any mean-PATCH_ENCODER), abmil, feather, feather_uni_v2, titan, chief, madeleine, "
        "gigapath, prism; the patch features it reads are made first at its magnification and "
        "patch size ('tumorboard models --slide-encoders' lists them)",
    )
    p.add_argument(
        "--slide-weights",
        type=Path,
        default=None,
        metavar="PATH",
        help="the slide encoder's checkpoint (abmil: a TRIDENT ABMILSlideEncoder state dict; "
        "feather*, titan: model.safetensors; chief: CHIEF_pretraining.pth; madeleine: model.pt; "
        "gigapath: slide_encoder.pth; prism: the full checkpoint, of which image_resampler.* is "
        "used)",
    )
    # left out, --magnification and --patch-size are the slide encoder's (TRIDENT's), else 20x
    # and 256 px (tiling_defaults)
    p.set_defaults(func=run_embed, magnification=None, patch_size=None)
    return p


def tiling_defaults(args: argparse.Namespace) -> None:
    """Fill ``--magnification`` and ``--patch-size`` where they were left out.

    With ``--slide-encoder NAME`` they are the magnification and patch size TRIDENT runs NAME
    at (``chief`` and ``madeleine``: 10x / 256 px, ``feather``: 20x / 512 px; a value given
    that differs is refused by the engine), otherwise 20x and 256 px.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``embed`` arguments, changed in place.
    """
    mag, size = 20.0, 256
    if args.slide_encoder is not None:
        from ..models import slide_encoder_info

        info = slide_encoder_info(args.slide_encoder)
        if info.magnification is not None and info.patch_size is not None:
            mag, size = info.magnification, info.patch_size
    if args.magnification is None:
        args.magnification = mag
    if args.patch_size is None:
        args.patch_size = size


def embed_options(args: argparse.Namespace) -> EmbedOptions:
    """Build the validated :class:`~tumorboard.embed.EmbedOptions` of parsed ``embed`` arguments.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``embed`` arguments (``--batch-size``, ``--backend``, ``--device``,
        ``--dtype``, ``--compile``/``--compile-mode`` and ``--decode``).

    Returns
    -------
    EmbedOptions
        The run options.

    Raises
    ------
    InvalidArgumentError
        ``--compile-mode`` without ``--compile``, or a combination the backend does not run.
    """
    if args.compile_mode is not None and not args.compile:
        raise InvalidArgumentError("--compile-mode needs --compile")
    compile_arg: bool | str = (args.compile_mode or True) if args.compile else False
    return EmbedOptions(
        batch_size=args.batch_size,
        backend=args.backend,
        device=args.device,
        dtype=args.dtype,
        compile=compile_arg,
        decode=args.decode,
    )


def run_embed(args: argparse.Namespace) -> int:
    """Run ``embed_slides`` with the parsed arguments, print the report, return the status.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``embed`` arguments.

    Returns
    -------
    int
        0 when every slide is done or skipped, 1 when any failed or had no tissue, 2 when the
        command was refused before any work.
    """
    from . import _engine

    try:
        tiling_defaults(args)
        tiling = tiling_options(args)
        options = embed_options(args)
        found = collect_inputs(args)
        if args.slide_weights is not None and args.slide_encoder is None:
            raise InvalidArgumentError("--slide-weights needs --slide-encoder")
        model = args.model
        if model is None and args.slide_encoder is None:
            model = "uni2-h"
        report = _engine.embed_slides(
            [p for p, _ in found.items],
            model=model,
            out=args.out,
            tiling=tiling,
            options=options,
            weights=args.weights,
            random_weights=args.random_weights,
            force=args.force,
            progress=not args.quiet,
            executor=args.executor,
            ray_address=args.ray_address,
            slide_encoder=args.slide_encoder,
            slide_weights=args.slide_weights,
        )
    except (TumorboardError, ValueError, TypeError, ImportError, OSError) as exc:
        return usage_error(exc)
    if isinstance(report, SlideEmbedReport):
        patch = report.patch_report
        write_report(
            patch.report_path,
            [r.to_dict() for r in patch.results],
            meta={"encoder": patch.encoder, "weights_fingerprint": patch.weights_fingerprint},
        )
        meta = {"encoder": report.slide_encoder, "weights_fingerprint": report.weights_fingerprint,
                "patch_encoder": patch.encoder}  # fmt: skip
    else:
        meta = {"encoder": report.encoder, "weights_fingerprint": report.weights_fingerprint}
    write_report(report.report_path, [r.to_dict() for r in report.results], meta=meta)
    for line in report.summary().splitlines():  # failures in flags: --mpp, not mpp=
        failed = line.startswith(("FAILED ", "NO TISSUE "))
        print(cli_message(line) if failed else line)
    print(f"report: {report.report_path}")
    return 0 if report.ok else 1
