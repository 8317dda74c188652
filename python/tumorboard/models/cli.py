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
        "(tumorboard never downloads weights).",
    )
    p.add_argument("--kind", choices=["encoder", "slide_encoder", "regressor"],
                   help="only models of this kind")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=_cmd_models)


def _row(info: Any) -> dict[str, Any]:
    return {
        "name": info.name, "trident_name": info.trident_name, "kind": info.kind,
        "embed_dim": info.embed_dim, "image_size": info.image_size,
        "magnification": info.magnification, "patch_size": info.patch_size,
        "gpu_dtype": str(info.gpu_dtype).removeprefix("torch."), "license": info.license,
        "gated": info.gated, "pooling": info.pooling, "weights_source": info.weights_source,
    }  # fmt: skip


def _cmd_models(args: argparse.Namespace) -> int:
    from . import available, info

    rows = [_row(info(n)) for n in available()]
    if args.kind:
        rows = [r for r in rows if r["kind"] == args.kind]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0

    def cell(v: Any) -> str:
        return "" if v is None else ("yes" if v is True else "no" if v is False else str(v))

    out = ["| name | TRIDENT | kind | dim | input | mag / patch | CUDA dtype | license | gated "
           "| weights |", "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        mag = f"{r['magnification']:g}x / {r['patch_size']}" if r["magnification"] else ""
        out.append(
            f"| {r['name']} | {cell(r['trident_name'])} | {r['kind']} | {cell(r['embed_dim'])} "
            f"| {cell(r['image_size'])} | {mag} | {r['gpu_dtype']} | {cell(r['license'])} "
            f"| {cell(r['gated'])} | {r['weights_source']} |"
        )
    sys.stdout.write("\n".join(out) + "\n")
    return 0
