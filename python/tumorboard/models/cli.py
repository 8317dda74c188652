"""The ``tumorboard models`` verb: the model registry as a table (or JSON).

Building the parser imports nothing heavy; the registry (and torch) load when the verb runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .._verbs import verb_help

__all__ = ["add_models_parser"]


def add_models_parser(sub: Any) -> None:
    """Add the ``models`` sub-command to ``sub`` (the top parser's sub-parsers)."""
    p = sub.add_parser(
        "models",
        help=verb_help("models"),
        description="List the model registry: each name and its TRIDENT name, kind, output "
        "width, input size, recommended magnification and patch size, the dtype it runs in on "
        "CUDA, the license and whether the weights are gated, and the file to download "
        "(tumorboard never downloads weights), and the patch encoders of TRIDENT not built here "
        "with the reason; then TRIDENT's slide encoders: which are built "
        "(and why the others are not), the patch encoder each reads, at which magnification "
        "and patch size, the widths in and out and the precision.",
    )
    p.add_argument("--kind", choices=["encoder", "slide_encoder", "regressor"],
                   help="only models of this kind")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--slide-encoders", action="store_true",
                   help="only the slide encoders (TRIDENT's slide_features_NAME)")  # fmt: skip
    p.set_defaults(func=_cmd_models)


def _row(info: Any) -> dict[str, Any]:
    return {
        "name": info.name, "trident_name": info.trident_name, "kind": info.kind,
        "embed_dim": info.embed_dim, "image_size": info.image_size,
        "magnification": info.magnification, "patch_size": info.patch_size,
        "gpu_dtype": str(info.gpu_dtype).removeprefix("torch."), "license": info.license,
        "gated": info.gated, "pooling": info.pooling, "weights_source": info.weights_source,
        "status": "built", "reason": None,
    }  # fmt: skip


def _unbuilt_row(u: Any) -> dict[str, Any]:
    precision = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}.get(u.precision)
    return {
        "name": u.name, "trident_name": u.name, "kind": "encoder", "embed_dim": u.embed_dim,
        "image_size": u.image_size, "magnification": u.magnification,
        "patch_size": u.patch_size, "gpu_dtype": precision or u.precision,
        "license": u.license, "gated": u.gated, "pooling": u.pooling,
        "weights_source": u.weights_source, "status": "not built", "reason": u.reason,
    }  # fmt: skip


def _slide_row(info: Any) -> dict[str, Any]:
    return {
        "name": info.name, "status": info.status, "patch_encoder": info.patch_encoder,
        "trident_patch_encoder": info.trident_patch_encoder,
        "magnification": info.magnification, "patch_size": info.patch_size,
        "in_dim": info.in_dim, "embed_dim": info.embed_dim, "precision": info.precision,
        "uses_coords": info.uses_coords, "reason": info.reason,
        "weights_source": info.weights_source,
    }  # fmt: skip


def _slide_table(rows: list[dict[str, Any]]) -> list[str]:
    out = ["| slide encoder | status | patch encoder | mag / patch | in -> out | precision "
           "| coords | weights, or why not built |",
           "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        patch = r["patch_encoder"] or "any (--model)"
        if r["trident_patch_encoder"] not in (None, r["patch_encoder"]):
            patch += f" ({r['trident_patch_encoder']})"
        mag = f"{r['magnification']:g}x / {r['patch_size']}" if r["magnification"] else "tiling's"
        out_dim = r["embed_dim"] or ("?" if r["status"] != "built" else r["in_dim"] or "F")
        dims = f"{r['in_dim'] or 'F'} -> {out_dim}"
        why = r["weights_source"] if r["status"] == "built" else r["reason"]
        out.append(
            f"| {r['name']} | {r['status']} | {patch} | {mag} | {dims} "
            f"| {r['precision'] or 'not recorded'} | {'yes' if r['uses_coords'] else 'no'} "
            f"| {why} |"
        )
    return out


def _cmd_models(args: argparse.Namespace) -> int:
    from . import available, info, slide_encoder_info, slide_encoders
    from ._encoder_table import UNBUILT

    slide_rows = [_slide_row(slide_encoder_info(n)) for n in slide_encoders()]
    if args.slide_encoders:
        if args.json:
            print(json.dumps(slide_rows, indent=2))
        else:
            sys.stdout.write("\n".join(_slide_table(slide_rows)) + "\n")
        return 0
    rows = [_row(info(n)) for n in available()] + [_unbuilt_row(u) for u in UNBUILT]
    if args.kind:
        rows = [r for r in rows if r["kind"] == args.kind]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0

    def cell(v: Any) -> str:
        return "" if v is None else ("yes" if v is True else "no" if v is False else str(v))

    out = ["| name | TRIDENT | kind | dim | input | mag / patch | CUDA dtype | license | gated "
           "| weights | status |", "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        mag = f"{r['magnification']:g}x / {r['patch_size']}" if r["magnification"] else ""
        out.append(
            f"| {r['name']} | {cell(r['trident_name'])} | {r['kind']} | {cell(r['embed_dim'])} "
            f"| {cell(r['image_size'])} | {mag} | {r['gpu_dtype']} | {cell(r['license'])} "
            f"| {cell(r['gated'])} | {r['weights_source']} "
            f"| {r['status'] if r['reason'] is None else 'not built: ' + r['reason']} |"
        )
    if args.kind in (None, "slide_encoder"):
        out += ["", *_slide_table(slide_rows)]
    sys.stdout.write("\n".join(out) + "\n")
    return 0
