"""Kaiko, Lunit, GPFM and OpenMidnight ViT patch encoders in the timm state-dict layout.

Every model here is a :class:`~tumorboard.models.vit.VisionTransformer` configured from public
facts; none needs a new architecture feature. Each ``ViTConfig`` below names its sources. The
embedding is the class token after the final norm (what TRIDENT takes: ``model(x)`` of a timm ViT
with ``num_classes=0``, ``global_pool="token"``, or the DINOv2 hub model's ``x_norm_clstoken``);
register tokens are dropped.

TRIDENT facts (names, precision, eval transforms, target sizes, recommended magnification and
patch size) are from mahmoodlab/TRIDENT ``trident/patch_encoder_models/load.py``,
``utils/constants.py``, ``utils/transform_utils.py`` and ``README.md`` @a91fa84.

Checkpoints in the DINOv2 layout (kaiko's ``vitl14.pth`` GitHub release; OpenMidnight's
``teacher_checkpoint_load.pt``) are converted at load by :meth:`DinoV2LayoutViT.adapt_state_dict`
the way timm converts DINOv2 weights (``_convert_dinov2`` in timm
``timm/models/vision_transformer.py``): ``register_tokens`` becomes ``reg_token``, the class row
of ``pos_embed`` is folded into ``cls_token`` (DINOv2 adds position embeddings before it inserts
the registers, so CLS gets ``pos_embed[:, 0]`` and the registers none, which is timm's
``no_embed_class`` layout with ``cls_token + pos_embed[:, 0]``), packed SwiGLU ``mlp.w12`` /
``mlp.w3`` become ``mlp.fc1`` / ``mlp.fc2``, and the training-only ``mask_token`` is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch

from ..._constants import IMAGENET_MEAN, IMAGENET_STD
from .._info import Entry, ModelInfo
from ..vit import VisionTransformer, ViTConfig

__all__ = [
    "ENTRIES",
    "GPFM",
    "KAIKO_MEAN",
    "KAIKO_STD",
    "KAIKO_VITB8",
    "KAIKO_VITB16",
    "KAIKO_VITL14",
    "KAIKO_VITS8",
    "KAIKO_VITS16",
    "LUNIT_MEAN",
    "LUNIT_STD",
    "LUNIT_VITS8",
    "OPENMIDNIGHT",
    "DinoV2LayoutViT",
    "gpfm",
    "kaiko_vitb8",
    "kaiko_vitb16",
    "kaiko_vitl14",
    "kaiko_vits8",
    "kaiko_vits16",
    "lunit_vits8",
    "openmidnight",
]

#: kaiko.ai's input normalisation (kaiko-ai/towards_large_pathology_fms ``README.md``@480274c,
#: ``v2.Normalize(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))``; TRIDENT ``KAIKO_MEAN/STD``).
KAIKO_MEAN: tuple[float, float, float] = (0.5, 0.5, 0.5)
KAIKO_STD: tuple[float, float, float] = (0.5, 0.5, 0.5)
#: Lunit's ViT-S training statistics (Kang et al., CVPR 2023, lunit-io/benchmark-ssl-pathology
#: ``README.md``, as quoted by kaiko-ai/eva
#: ``src/eva/vision/models/networks/backbones/pathology/lunit.py``). Not the registry's
#: normalisation: TRIDENT's ``lunit-vits8`` features use ImageNet's (:func:`lunit_vits8`).
LUNIT_MEAN: tuple[float, float, float] = (0.70322989, 0.53606487, 0.66096631)
LUNIT_STD: tuple[float, float, float] = (0.21716536, 0.26081574, 0.20723464)


def _vit_s(patch: int) -> ViTConfig:
    # timm vit_small_patch{8,16}_224: 384 wide, 12 blocks, 6 heads, MLP 4x, qkv bias, eps 1e-6.
    return ViTConfig(
        image_size=224, patch_size=patch, embed_dim=384, depth=12, num_heads=6, mlp_hidden=1536
    )


def _vit_b(patch: int) -> ViTConfig:
    # timm vit_base_patch{8,16}_224: 768 wide, 12 blocks, 12 heads, MLP 4x, qkv bias, eps 1e-6.
    return ViTConfig(
        image_size=224, patch_size=patch, embed_dim=768, depth=12, num_heads=12, mlp_hidden=3072
    )


#: kaiko.ai ViT-S/8, ViT-S/16, ViT-B/8, ViT-B/16: timm ``vit_{small,base}_patch{8,16}_224`` with
#: ``num_classes=0`` (kaiko-ai/towards_large_pathology_fms ``hubconf.py``@caaf75c, loaded
#: strictly; Hugging Face 1aurent/vit_*_patch*_224.kaiko_ai_towards_large_pathology_fms, whose
#: ``model.safetensors`` of 343 MB for both ViT-B models is 85.8 M float32 parameters).
KAIKO_VITS8 = _vit_s(8)
KAIKO_VITS16 = _vit_s(16)
KAIKO_VITB8 = _vit_b(8)
KAIKO_VITB16 = _vit_b(16)
#: kaiko.ai ViT-L/14: timm ``vit_large_patch14_reg4_dinov2`` at its default 518 px (37 x 37
#: position grid, patches only), 4 registers, LayerScale, MLP 4096 (``hubconf.py``@caaf75c loads
#: the DINOv2-layout release through timm's ``_convert_dinov2`` into that model strictly; the
#: 1aurent ``model.safetensors`` is 1.22 GB = 304.4 M float32 parameters, the 37 x 37 grid).
KAIKO_VITL14 = ViTConfig(
    image_size=518,
    patch_size=14,
    embed_dim=1024,
    depth=24,
    num_heads=16,
    mlp_hidden=4096,
    init_values=1e-5,
    reg_tokens=4,
    no_embed_class=True,
)
#: Lunit DINO ViT-S/8: timm ``vit_small_patch8_224`` (Hugging Face
#: 1aurent/vit_small_patch8_224.lunit_dino model card: 21.7 M parameters, 224 x 224).
LUNIT_VITS8 = _vit_s(8)
#: GPFM: timm ``vit_large_patch14_dinov2`` built at 224 px (16 x 16 grid plus the class row),
#: LayerScale, GELU MLP 4096, no registers; TRIDENT loads ``GPFM.pth`` (Hugging Face majiabo/GPFM)
#: into it strictly. Ma et al., *Nat. Biomed. Eng.* 2025 (arXiv 2407.18449): ViT-L/14.
GPFM = ViTConfig(
    image_size=224,
    patch_size=14,
    embed_dim=1024,
    depth=24,
    num_heads=16,
    mlp_hidden=4096,
    init_values=1e-5,
)
#: OpenMidnight: DINOv2 ``dinov2_vitg14_reg`` (ViT-g/14: 1536 wide, 40 blocks, 24 heads, fused
#: SwiGLU with ``(int(6144 * 2 / 3) + 7) // 8 * 8 = 4096`` hidden features, i.e. ``w12`` of 8192,
#: LayerScale, 4 registers), trained with 224 px global crops, so the checkpoint's position
#: embedding is 1 + 16 x 16 rows ("the pos embed is the only different shape":
#: MedARC-AI/OpenMidnight ``HEST_evaluation.py`` and ``dinov2/configs/train/vitg14_reg4.yaml``
#: @f7d5a64; TRIDENT replaces the hub model's ``pos_embed`` with the checkpoint's before its
#: strict load).
OPENMIDNIGHT = ViTConfig(
    image_size=224,
    patch_size=14,
    embed_dim=1536,
    depth=40,
    num_heads=24,
    mlp_hidden=8192,
    mlp="swiglu",
    init_values=1.0,
    reg_tokens=4,
    no_embed_class=True,
)

_CHUNKED_BLOCK = re.compile(r"^blocks\.\d+\.(\d+\..*)$")


class DinoV2LayoutViT(VisionTransformer):
    """A :class:`VisionTransformer` that also loads checkpoints in the DINOv2 layout.

    Its own keys are timm's; :meth:`adapt_state_dict` (called by ``models.load`` before the
    strict key check) converts a DINOv2-layout checkpoint and passes a timm-layout one through.
    The conversion is exact: the folded class row is the same single addition DINOv2 does.
    """

    def adapt_state_dict(self, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Convert a DINOv2-layout checkpoint to this module's timm layout.

        Parameters
        ----------
        state : Mapping[str, torch.Tensor]
            A checkpoint in the timm layout (returned unchanged) or the DINOv2 layout
            (``register_tokens``, ``mask_token``, ``pos_embed`` with a class row, ``mlp.w12`` /
            ``mlp.w3``, optionally block-chunked ``blocks.{chunk}.{i}.`` keys).

        Returns
        -------
        dict of str to torch.Tensor
            The checkpoint with this module's key names; other keys are kept for the strict
            check to report.
        """
        out = dict(state)
        if "register_tokens" not in out and "mask_token" not in out:
            return out
        out.pop("mask_token", None)
        converted: dict[str, torch.Tensor] = {}
        for key, value in out.items():
            chunked = _CHUNKED_BLOCK.match(key)
            if chunked is not None:  # DINOv2 block chunking (FSDP): blocks.{chunk}.{i}.…
                key = "blocks." + chunked.group(1)
            key = key.replace(".mlp.w12.", ".mlp.fc1.").replace(".mlp.w3.", ".mlp.fc2.")
            converted["reg_token" if key == "register_tokens" else key] = value
        pos, cls = converted.get("pos_embed"), converted.get("cls_token")
        if self.config.no_embed_class and pos is not None and cls is not None:
            grid = self.config.grid_size**2
            if pos.ndim == 3 and pos.shape[1] == grid + 1:
                converted["cls_token"] = cls + pos[:, :1]
                converted["pos_embed"] = pos[:, 1:]
        return converted


def _kaiko(config: ViTConfig, name: str, image_size: int | None) -> VisionTransformer:
    # kaiko preprocessing: resize the shorter side to 224 (bilinear, antialias), centre crop 224.
    size = 224 if image_size is None else int(image_size)
    cls = DinoV2LayoutViT if config.reg_tokens else VisionTransformer
    return cls(
        config,
        name=name,
        image_size=size,
        mean=KAIKO_MEAN,
        std=KAIKO_STD,
        interpolation="bilinear",
    )


def kaiko_vits8(*, image_size: int | None = None) -> VisionTransformer:
    """Build kaiko.ai ViT-S/8 (:data:`KAIKO_VITS8`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        The input size preprocessing produces, a multiple of 8 (TRIDENT ``target_img_size``).
        ``None`` (default) means 224; other sizes resample the position embedding at run time.

    Returns
    -------
    VisionTransformer
        ``"kaiko-vits8"``: ``[B, 3, H, W] -> [B, 384]`` (class token), mean = std = 0.5.
    """
    return _kaiko(KAIKO_VITS8, "kaiko-vits8", image_size)


def kaiko_vits16(*, image_size: int | None = None) -> VisionTransformer:
    """Build kaiko.ai ViT-S/16 (:data:`KAIKO_VITS16`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        The input size preprocessing produces, a multiple of 16. ``None`` (default) means 224.

    Returns
    -------
    VisionTransformer
        ``"kaiko-vits16"``: ``[B, 3, H, W] -> [B, 384]`` (class token), mean = std = 0.5.
    """
    return _kaiko(KAIKO_VITS16, "kaiko-vits16", image_size)


def kaiko_vitb8(*, image_size: int | None = None) -> VisionTransformer:
    """Build kaiko.ai ViT-B/8 (:data:`KAIKO_VITB8`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        The input size preprocessing produces, a multiple of 8. ``None`` (default) means 224.

    Returns
    -------
    VisionTransformer
        ``"kaiko-vitb8"``: ``[B, 3, H, W] -> [B, 768]`` (class token), mean = std = 0.5.
    """
    return _kaiko(KAIKO_VITB8, "kaiko-vitb8", image_size)


def kaiko_vitb16(*, image_size: int | None = None) -> VisionTransformer:
    """Build kaiko.ai ViT-B/16 (:data:`KAIKO_VITB16`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        The input size preprocessing produces, a multiple of 16. ``None`` (default) means 224.

    Returns
    -------
    VisionTransformer
        ``"kaiko-vitb16"``: ``[B, 3, H, W] -> [B, 768]`` (class token), mean = std = 0.5.
    """
    return _kaiko(KAIKO_VITB16, "kaiko-vitb16", image_size)


def kaiko_vitl14(*, image_size: int | None = None) -> VisionTransformer:
    """Build kaiko.ai ViT-L/14 (:data:`KAIKO_VITL14`) with random parameters.

    The checkpoint's position grid is 37 x 37 (518 px) while TRIDENT preprocesses to 224 px, so
    at the default size the grid is resampled at run time to 16 x 16 (bicubic, antialiased, as
    timm's ``dynamic_img_size``); TRIDENT does the same (its backbone is built at 518).

    Parameters
    ----------
    image_size : int, optional
        The input size preprocessing produces, a multiple of 14. ``None`` (default) means 224.

    Returns
    -------
    DinoV2LayoutViT
        ``"kaiko-vitl14"``: ``[B, 3, H, W] -> [B, 1024]`` (class token; the 4 registers are
        dropped), mean = std = 0.5. Loads the 1aurent timm checkpoint and kaiko's DINOv2-layout
        ``vitl14.pth`` alike.
    """
    return _kaiko(KAIKO_VITL14, "kaiko-vitl14", image_size)


def lunit_vits8(*, image_size: int | None = None) -> VisionTransformer:
    """Build Lunit's DINO ViT-S/8 (:data:`LUNIT_VITS8`) with random parameters.

    Eval transform (TRIDENT: timm ``create_transform`` from the checkpoint's data config, crop
    fraction 0.9): resize the shorter side to ``floor(224 / 0.9) = 248`` (bicubic), then centre
    crop 224 - a resize followed by a crop of a different size, which a single resize to 224 only
    approximates. Normalisation: ImageNet's statistics, as TRIDENT normalises: with a local
    checkpoint it builds timm ``vit_small_patch8_224``, whose data config is timm's ``.dino``
    one (Hugging Face timm/vit_small_patch8_224.dino ``config.json``@03012ea: ImageNet mean/std,
    ``crop_pct`` 0.9, bicubic), and the 1aurent hub ``config.json`` keeps that data config (its
    only edit, c23bc01, grows the 577-byte stock file by the 6 bytes of ``"lunit_"`` in the tag).
    Lunit's own training statistics stay available as :data:`LUNIT_MEAN` and :data:`LUNIT_STD`.

    Parameters
    ----------
    image_size : int, optional
        The input size preprocessing produces, a multiple of 8. ``None`` (default) means 224.

    Returns
    -------
    VisionTransformer
        ``"lunit-vits8"``: ``[B, 3, H, W] -> [B, 384]`` (class token).
    """
    return VisionTransformer(
        LUNIT_VITS8,
        name="lunit-vits8",
        image_size=image_size,
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
        interpolation="bicubic",
    )


def gpfm(*, image_size: int | None = None) -> VisionTransformer:
    """Build GPFM (:data:`GPFM`) with random parameters.

    Eval transform (TRIDENT; birkhoffkiki/GPFM ``models/dinov2/__init__.py``
    ``build_transform``): resize to 224 (bicubic, antialias), no crop, ImageNet statistics.

    Parameters
    ----------
    image_size : int, optional
        The input size preprocessing produces, a multiple of 14. ``None`` (default) means 224.

    Returns
    -------
    VisionTransformer
        ``"gpfm"``: ``[B, 3, H, W] -> [B, 1024]`` (class token).
    """
    return VisionTransformer(
        GPFM,
        name="gpfm",
        image_size=image_size,
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
        interpolation="bicubic",
    )


def openmidnight() -> VisionTransformer:
    """Build OpenMidnight (:data:`OPENMIDNIGHT`) with random parameters.

    TRIDENT offers no other input size for it. Eval transform: resize to 224 x 224 (bilinear), no
    crop, ImageNet statistics.

    Returns
    -------
    DinoV2LayoutViT
        ``"openmidnight"``: ``[B, 3, 224, 224] -> [B, 1536]`` (the DINOv2 model's
        ``x_norm_clstoken``; registers dropped). Loads ``teacher_checkpoint_load.pt`` (DINOv2
        layout) or its timm-layout conversion.
    """
    return DinoV2LayoutViT(
        OPENMIDNIGHT,
        name="openmidnight",
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
        interpolation="bilinear",
    )


_KAIKO_WEIGHTS = (
    "Hugging Face 1aurent/{repo}.kaiko_ai_towards_large_pathology_fms, model.safetensors"
)
_KAIKO_LICENSE = "kaiko-non-commercial"


def _kaiko_row(name: str, dim: int, repo: str, *, pooling: str = "class token") -> ModelInfo:
    return ModelInfo(
        name=name,
        kind="encoder",
        embed_dim=dim,
        image_size=224,
        mean=KAIKO_MEAN,
        std=KAIKO_STD,
        interpolation="bilinear",
        gpu_dtype=torch.float32,
        trident_name=name,
        weights_source=_KAIKO_WEIGHTS.format(repo=repo),
        license=_KAIKO_LICENSE,
        gated=False,
        magnification=20.0,
        patch_size=256,
        pooling=pooling,
    )


ENTRIES: tuple[Entry, ...] = (
    Entry(_kaiko_row("kaiko-vits8", 384, "vit_small_patch8_224"), build=kaiko_vits8),
    Entry(_kaiko_row("kaiko-vits16", 384, "vit_small_patch16_224"), build=kaiko_vits16),
    Entry(_kaiko_row("kaiko-vitb8", 768, "vit_base_patch8_224"), build=kaiko_vitb8),
    Entry(_kaiko_row("kaiko-vitb16", 768, "vit_base_patch16_224"), build=kaiko_vitb16),
    Entry(
        _kaiko_row(
            "kaiko-vitl14",
            1024,
            "vit_large_patch14_reg4_224",
            pooling="class token (registers dropped)",
        ),
        build=kaiko_vitl14,
    ),
    Entry(
        ModelInfo(
            name="lunit-vits8",
            kind="encoder",
            embed_dim=384,
            image_size=224,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            interpolation="bicubic",
            gpu_dtype=torch.float32,
            trident_name="lunit-vits8",
            weights_source=(
                "Hugging Face 1aurent/vit_small_patch8_224.lunit_dino, model.safetensors"
            ),
            license="lunit-non-commercial",
            gated=False,
            magnification=20.0,
            patch_size=224,
            pooling="class token",
        ),
        build=lunit_vits8,
    ),
    Entry(
        ModelInfo(
            name="gpfm",
            kind="encoder",
            embed_dim=1024,
            image_size=224,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            interpolation="bicubic",
            gpu_dtype=torch.float16,
            trident_name="gpfm",
            weights_source="Hugging Face majiabo/GPFM, GPFM.pth",
            license="CC-BY-NC-4.0",
            gated=False,
            magnification=20.0,
            patch_size=224,
            pooling="class token",
        ),
        build=gpfm,
    ),
    Entry(
        ModelInfo(
            name="openmidnight",
            kind="encoder",
            embed_dim=1536,
            image_size=224,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            interpolation="bilinear",
            gpu_dtype=torch.float16,
            trident_name="openmidnight",
            weights_source="Hugging Face SophontAI/OpenMidnight, teacher_checkpoint_load.pt",
            license="Apache-2.0",
            gated=None,
            magnification=20.0,
            patch_size=224,
            pooling="class token (registers dropped)",
        ),
        build=openmidnight,
    ),
)
"""Registry rows of this module, in TRIDENT's order of its table."""
