"""The patch encoders TRIDENT users reach for, built or not, as rows and as the README's table.

The built rows come from the model registry (:func:`tumorboard.models.info`); the encoders of
TRIDENT's registry (mahmoodlab/TRIDENT ``trident/patch_encoder_models/load.py``@a91fa84) that
are not built here are listed in :data:`UNBUILT` with the reason. ``tumorboard models`` prints
both, and :func:`encoder_table_markdown` writes the README's table (a test keeps the README
equal to it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["UNBUILT", "UnbuiltEncoder", "encoder_rows", "encoder_table_markdown"]


@dataclass(frozen=True)
class UnbuiltEncoder:
    """A patch encoder of TRIDENT's registry that tumorboard does not build, and why.

    Attributes
    ----------
    name : str
        TRIDENT's name.
    embed_dim : int or None
        The width TRIDENT stores.
    image_size : int or None
        The model's input side in pixels.
    magnification : float or None
        The magnification TRIDENT recommends.
    patch_size : int or None
        The patch side TRIDENT recommends at that magnification.
    precision : str
        TRIDENT's precision on CUDA ("fp16", ...).
    license : str or None
        The weights' license.
    gated : bool or None
        Whether the weights need an access request.
    weights_source : str
        Where the weights are published.
    reason : str
        Why it is not built.
    pooling : str or None, default None
        Which tokens TRIDENT stores.
    """

    name: str
    embed_dim: int | None
    image_size: int | None
    magnification: float | None
    patch_size: int | None
    precision: str
    license: str | None
    gated: bool | None
    weights_source: str
    reason: str
    pooling: str | None = None


#: TRIDENT's patch encoders not built here (docs/encoders.md, "Not built yet", has the details).
UNBUILT: tuple[UnbuiltEncoder, ...] = (
    UnbuiltEncoder(
        name="musk",
        embed_dim=1024,
        image_size=384,
        magnification=20.0,
        patch_size=384,
        precision="fp16",
        license="CC-BY-NC-ND-4.0",
        gated=True,
        weights_source="Hugging Face xiangjx/musk, model.safetensors (gated)",
        reason="a BEiT-3 multiway transformer (torchscale); no oracle to test a port against "
        "and the gated checkpoint's key list unread",
        pooling="class token after the final multiway norm (TRIDENT: with_head=False, "
        "out_norm=False)",
    ),
)

_PRECISION = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def encoder_rows() -> list[dict[str, Any]]:
    """Return one row per patch encoder with published weights, built or not.

    Returns
    -------
    list of dict
        Keys ``name`` (TRIDENT's name where it has one), ``tumorboard_name``, ``embed_dim``,
        ``image_size``, ``magnification``, ``patch_size``, ``precision`` ("fp32", "fp16",
        "bf16"), ``license``, ``gated``, ``weights_source``, ``status`` ("built" or
        "not built") and ``reason`` (None when built). The registry's order, then
        :data:`UNBUILT`; the tiny random-weight test models are left out.
    """
    from ._info import RANDOM_WEIGHTS_SOURCE
    from ._registry import available, info

    rows = []
    for name in available():
        m = info(name)
        if m.kind != "encoder" or m.weights_source == RANDOM_WEIGHTS_SOURCE:
            continue
        dtype = str(m.gpu_dtype).removeprefix("torch.")
        rows.append({"name": m.trident_name or m.name, "tumorboard_name": m.name,
                     "embed_dim": m.embed_dim, "image_size": m.image_size,
                     "magnification": m.magnification, "patch_size": m.patch_size,
                     "precision": _PRECISION.get(dtype, dtype), "license": m.license,
                     "gated": m.gated, "weights_source": m.weights_source, "status": "built",
                     "reason": None})  # fmt: skip
    for u in UNBUILT:
        rows.append({"name": u.name, "tumorboard_name": None, "embed_dim": u.embed_dim,
                     "image_size": u.image_size, "magnification": u.magnification,
                     "patch_size": u.patch_size, "precision": u.precision, "license": u.license,
                     "gated": u.gated, "weights_source": u.weights_source,
                     "status": "not built", "reason": u.reason})  # fmt: skip
    return rows


def _yes_no(v: bool | None) -> str:
    return "not recorded" if v is None else "yes" if v else "no"


def encoder_table_markdown() -> str:
    """Return the README's table of patch encoders, from the registry.

    Returns
    -------
    str
        A Markdown table (no trailing newline): name, dims, patch size / magnification,
        precision, gated, built or why not; one row per :func:`encoder_rows` row.

    Examples
    --------
    >>> from tumorboard.models._encoder_table import encoder_table_markdown
    >>> encoder_table_markdown().splitlines()[0]
    '| encoder | dims | patch / mag | precision | gated | status |'
    """
    out = ["| encoder | dims | patch / mag | precision | gated | status |",
           "|---|---:|---|---|---|---|"]  # fmt: skip
    for r in encoder_rows():
        name = f"`{r['name']}`"
        if r["tumorboard_name"] not in (None, r["name"]):
            name += f" (`{r['tumorboard_name']}`)"
        mag = (f"{r['patch_size']} px / {r['magnification']:g}x" if r["magnification"]
               else "not recorded")  # fmt: skip
        status = "built" if r["status"] == "built" else f"not built: {r['reason']}"
        out.append(f"| {name} | {r['embed_dim']} | {mag} | {r['precision']} "
                   f"| {_yes_no(r['gated'])} | {status} |")  # fmt: skip
    return "\n".join(out)
