"""ViT patch encoders in the Hugging Face ``transformers`` layout (TRIDENT names).

Registered (the architecture is :class:`tumorboard.models.hf_vit.HFVisionTransformer`):

* ``phikon`` - Owkin Phikon, iBOT ViT-B/16 as a ``ViTModel`` (https://huggingface.co/owkin/phikon;
  Filiot et al., medRxiv 2023.07.21.23292757). TRIDENT (mahmoodlab/TRIDENT
  ``trident/patch_encoder_models/load.py``@5f53f47, ``PhikonInferenceEncoder``) builds it with
  ``add_pooling_layer=False``, takes ``last_hidden_state[:, 0]`` (768), resizes to 224x224
  bilinear (antialiased), ImageNet statistics, float32. ``layer_norm_eps`` is 1e-6 (owkin/phikon
  commit 1a3b784 "Update `layer_norm_eps` to match timm").
* ``phikon-v2`` (TRIDENT ``phikon_v2``) - Owkin Phikon-v2, DINOv2 ViT-L/16 without registers
  as a ``Dinov2Model`` (https://huggingface.co/owkin/phikon-v2; Filiot et al., arXiv:2409.09173,
  224x224 global crops at 20x). TRIDENT (``Phikonv2InferenceEncoder``) takes
  ``last_hidden_state[:, 0]`` (1024); ``Resize(224)`` (bilinear, shorter side) then
  ``CenterCrop(224)``, ImageNet statistics, float32.
* ``hibou-l`` (TRIDENT ``hibou_l``) and ``hibou-b`` - HistAI Hibou-L / Hibou-B (Nechaev et al.,
  arXiv:2406.05074), DINOv2 ViT-L/14 and ViT-B/14 with 4 registers and a SwiGLU MLP, published as
  a ``trust_remote_code`` ``Dinov2ModelWithRegisters`` (the transformers 4.41 DINOv2 module plus
  ``embeddings.register_tokens``). Configuration: https://huggingface.co/histai/hibou-b
  ``config.json``@5cc6343 (hidden 768, 12 layers, 12 heads, ``mlp_ratio`` 4,
  ``use_swiglu_ffn`` true, ``num_register_tokens`` 4, ``image_size`` 224, ``patch_size`` 14,
  ``layer_norm_eps`` 1e-6, ``qkv_bias`` true); Hibou-L is the same recipe at ViT-L (1024 wide,
  24 blocks, 16 heads: HistAI/hibou ``hibou/models/cellvit/cellvit.py``@c453bbe ``HibouEncoder``
  builds it with ``arch="vit_large"``, ``img_size=224``, ``patch_size=14``,
  ``ffn_layer="swiglufused"``, ``num_register_tokens=4``; the model card: 304 M parameters).
  SwiGLU width ``(int(4 * D * 2 / 3) + 7) // 8 * 8``: 2048 (B), 2736 (L). TRIDENT
  (``HibouLInferenceEncoder``@a91fa84) takes ``pooler_output`` - the final-``layernorm`` CLS
  token (1024) - resizes to 224 bicubic (antialiased), normalises with Hibou's statistics
  (``HIBOU_MEAN`` / ``HIBOU_STD`` of ``utils/constants.py``) and runs in float32; Hibou-B is not
  in TRIDENT and gets the same recipe (768).

* ``midnight12k`` - kaiko.ai Midnight-12k (https://huggingface.co/kaiko-ai/midnight, MIT;
  Karasikov et al., MICCAI 2025, arXiv:2504.05186), a DINOv2 ViT-g/14 ``Dinov2Model`` trained
  on 224 px TCGA tiles (kaiko-ai/Midnight ``README.md``@e48dce1: mean = std = (0.5, 0.5, 0.5);
  ``last_hidden_state[:, 1:]`` is the 16 x 16 patch grid at 224, so there are no registers; the
  classification embedding is CLS concatenated with the mean of those tokens). The checkpoint:
  1536 wide, 40 blocks, 24 heads, SwiGLU ``weights_in`` / ``weights_out`` (4096 hidden),
  LayerScale, mask token, and the DINOv2 default ``image_size`` 518 (a 1 + 37 x 37 position
  embedding): its ``config.json`` could not be read here, and these shapes are those two
  independent public loaders of the published ``model.safetensors`` use (a strict state-dict
  load into a 37 x 37-grid SwiGLU ViT-g, and a wrapper documenting the 518 x 518 configuration).
  At 224 px the 37 x 37 grid is resampled to 16 x 16 as ``Dinov2Model`` does (bicubic, float32,
  no antialiasing; the size-based rule of current ``transformers``, whose 4.x releases before
  the rewrite used DINOv2's +0.1 scale-factor offset). TRIDENT's
  ``Midnight12kInferenceEncoder``@a91fa84 returns the CLS token (1536) by default and
  CLS + mean of the patch tokens (3072; the width TRIDENT's README lists) with
  ``return_type="cls+mean"`` (here ``pooling="cls+mean"``); ``Resize(224)`` (bilinear,
  antialiased) then ``CenterCrop(224)``, mean = std = 0.5, float16.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import torch

from ..._constants import IMAGENET_MEAN, IMAGENET_STD
from .._info import Entry, ModelInfo
from ..hf_vit import HFVisionTransformer, HFViTConfig
from .timm_vits_b import KAIKO_MEAN, KAIKO_STD

__all__ = [
    "ENTRIES",
    "HIBOU_B",
    "HIBOU_L",
    "HIBOU_MEAN",
    "HIBOU_STD",
    "PHIKON",
    "PHIKON_V2",
    "MIDNIGHT12K",
    "hibou_b",
    "hibou_l",
    "midnight12k",
    "phikon",
    "phikon_v2",
]

#: Phikon: ViT-B/16 (768 wide, 12 blocks, 12 heads, 3072 MLP), 224 input, eps 1e-6, no mask
#: token and (at load) no pooler.
PHIKON = HFViTConfig(
    family="vit",
    image_size=224,
    patch_size=16,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    mlp_hidden=3072,
    layer_norm_eps=1e-6,
    use_mask_token=False,
)
#: Phikon-v2: DINOv2 ViT-L/16 (1024 wide, 24 blocks, 16 heads, GELU MLP ratio 4), 224 input
#: (14x14 grid + CLS), LayerScale, mask token, no registers.
PHIKON_V2 = HFViTConfig(
    family="dinov2",
    image_size=224,
    patch_size=16,
    hidden_size=1024,
    num_hidden_layers=24,
    num_attention_heads=16,
    mlp_hidden=4096,
    layer_norm_eps=1e-6,
)

#: Hibou's input normalisation (TRIDENT ``trident/patch_encoder_models/utils/constants.py``@a91fa84,
#: ``HIBOU_MEAN`` / ``HIBOU_STD``, used for ``hibou_l``).
HIBOU_MEAN: tuple[float, float, float] = (0.7068, 0.5755, 0.722)
HIBOU_STD: tuple[float, float, float] = (0.195, 0.2316, 0.1816)
#: Hibou-B: DINOv2 ViT-B/14 (768 wide, 12 blocks, 12 heads), SwiGLU MLP (``weights_in`` 2 x 2048),
#: LayerScale, 4 registers, mask token, 224 input (16 x 16 grid + CLS).
HIBOU_B = HFViTConfig(
    family="dinov2",
    image_size=224,
    patch_size=14,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    mlp_hidden=4 * 768,
    layer_norm_eps=1e-6,
    use_swiglu_ffn=True,
    num_register_tokens=4,
)
#: Hibou-L: Hibou-B's recipe at ViT-L/14 (1024 wide, 24 blocks, 16 heads; SwiGLU 2 x 2736).
HIBOU_L = replace(HIBOU_B, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                  mlp_hidden=4 * 1024)  # fmt: skip

#: Midnight-12k: DINOv2 ViT-g/14 (1536 wide, 40 blocks, 24 heads), SwiGLU MLP (``mlp_ratio`` 4:
#: ``weights_in`` 2 x 4096), LayerScale, mask token, no registers, 518 px position grid.
MIDNIGHT12K = HFViTConfig(
    family="dinov2",
    image_size=518,
    patch_size=14,
    hidden_size=1536,
    num_hidden_layers=40,
    num_attention_heads=24,
    mlp_hidden=4 * 1536,
    layer_norm_eps=1e-6,
    use_swiglu_ffn=True,
)


def phikon(*, image_size: int | None = None) -> HFVisionTransformer:
    """Build Phikon (:data:`PHIKON`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        The input size preprocessing produces, a multiple of 16 (default 224); other sizes
        resample the position embedding bicubically at run time (``ViTModel``'s
        ``interpolate_pos_encoding=True``).

    Returns
    -------
    HFVisionTransformer
        The encoder named ``"phikon"``: ``[B, 3, H, W] -> [B, 768]`` (class token).
    """
    return HFVisionTransformer(
        PHIKON,
        name="phikon",
        image_size=image_size,
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
        interpolation="bilinear",
    )


def phikon_v2(*, image_size: int | None = None) -> HFVisionTransformer:
    """Build Phikon-v2 (:data:`PHIKON_V2`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        The input size preprocessing produces, a multiple of 16 (default 224); other sizes
        resample the position embedding bicubically in float32 (``Dinov2Model``).

    Returns
    -------
    HFVisionTransformer
        The encoder named ``"phikon-v2"``: ``[B, 3, H, W] -> [B, 1024]`` (class token).
    """
    return HFVisionTransformer(
        PHIKON_V2,
        name="phikon-v2",
        image_size=image_size,
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
        interpolation="bilinear",
    )


def _hibou(config: HFViTConfig, name: str, image_size: int | None) -> HFVisionTransformer:
    return HFVisionTransformer(
        config,
        name=name,
        image_size=image_size,
        mean=HIBOU_MEAN,
        std=HIBOU_STD,
        interpolation="bicubic",
    )


def hibou_l(*, image_size: int | None = None) -> HFVisionTransformer:
    """Build Hibou-L (:data:`HIBOU_L`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        The input size preprocessing produces, a multiple of 14 (default 224, the only size
        TRIDENT runs). Other sizes resample the position embedding bicubically with
        antialiasing in float32, as HistAI's own DINOv2 model does (HistAI/hibou
        ``hibou/models/__init__.py``@c453bbe: ``interpolate_offset=0``,
        ``interpolate_antialias=True``).

    Returns
    -------
    HFVisionTransformer
        The encoder named ``"hibou-l"``: ``[B, 3, H, W] -> [B, 1024]`` (the final-norm class
        token, TRIDENT's ``pooler_output``; the 4 registers are never pooled).
    """
    return _hibou(HIBOU_L, "hibou-l", image_size)


def hibou_b(*, image_size: int | None = None) -> HFVisionTransformer:
    """Build Hibou-B (:data:`HIBOU_B`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        As for :func:`hibou_l` (default 224).

    Returns
    -------
    HFVisionTransformer
        The encoder named ``"hibou-b"``: ``[B, 3, H, W] -> [B, 768]`` (final-norm class token).
    """
    return _hibou(HIBOU_B, "hibou-b", image_size)


def midnight12k(
    *, image_size: int | None = None, pooling: Literal["cls", "cls+mean"] = "cls"
) -> HFVisionTransformer:
    """Build kaiko.ai Midnight-12k (:data:`MIDNIGHT12K`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        The input size preprocessing produces, a multiple of 14 (default 224; the checkpoint's
        37 x 37 position grid is resampled to it at run time).
    pooling : {"cls", "cls+mean"}, default "cls"
        ``"cls"``: the final-norm class token (1536), TRIDENT's default ``return_type``;
        ``"cls+mean"``: it concatenated with the mean of the patch tokens (3072), the model
        card's classification embedding and TRIDENT's ``return_type="cls+mean"``.

    Returns
    -------
    HFVisionTransformer
        The encoder named ``"midnight12k"``: ``[B, 3, H, W] -> [B, 1536]`` (or 3072).
    """
    return HFVisionTransformer(
        replace(MIDNIGHT12K, pooling=pooling),
        name="midnight12k",
        image_size=224 if image_size is None else image_size,
        mean=KAIKO_MEAN,
        std=KAIKO_STD,
        interpolation="bilinear",
    )


_OWKIN_LICENSE = "Owkin non-commercial license (HF: other)"

ENTRIES: tuple[Entry, ...] = (
    Entry(
        ModelInfo(
            name="phikon",
            kind="encoder",
            embed_dim=768,
            image_size=224,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            interpolation="bilinear",
            gpu_dtype=torch.float32,
            trident_name="phikon",
            weights_source="Hugging Face owkin/phikon, model.safetensors / pytorch_model.bin",
            license=_OWKIN_LICENSE,
            gated=False,
            magnification=20.0,
            patch_size=224,
            pooling="class token",
        ),
        build=phikon,
    ),
    Entry(
        ModelInfo(
            name="phikon-v2",
            kind="encoder",
            embed_dim=1024,
            image_size=224,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            interpolation="bilinear",
            gpu_dtype=torch.float32,
            trident_name="phikon_v2",
            weights_source="Hugging Face owkin/phikon-v2, model.safetensors",
            license=_OWKIN_LICENSE,
            gated=False,
            magnification=20.0,
            patch_size=224,
            pooling="class token",
        ),
        build=phikon_v2,
    ),
    Entry(
        ModelInfo(
            name="hibou-l",
            kind="encoder",
            embed_dim=1024,
            image_size=224,
            mean=HIBOU_MEAN,
            std=HIBOU_STD,
            interpolation="bicubic",
            gpu_dtype=torch.float32,
            trident_name="hibou_l",
            weights_source="Hugging Face histai/hibou-L, model.safetensors (gated)",
            license="Apache-2.0",
            gated=True,
            magnification=20.0,
            patch_size=224,
            pooling="class token (pooler_output), 4 registers dropped",
        ),
        build=hibou_l,
    ),
    Entry(
        ModelInfo(
            name="hibou-b",
            kind="encoder",
            embed_dim=768,
            image_size=224,
            mean=HIBOU_MEAN,
            std=HIBOU_STD,
            interpolation="bicubic",
            gpu_dtype=torch.float32,
            trident_name=None,
            weights_source="Hugging Face histai/hibou-b, model.safetensors",
            license="Apache-2.0",
            gated=None,
            magnification=20.0,
            patch_size=224,
            pooling="class token (pooler_output), 4 registers dropped",
        ),
        build=hibou_b,
    ),
    Entry(
        ModelInfo(
            name="midnight12k",
            kind="encoder",
            embed_dim=1536,
            image_size=224,
            mean=KAIKO_MEAN,
            std=KAIKO_STD,
            interpolation="bilinear",
            gpu_dtype=torch.float16,
            trident_name="midnight12k",
            weights_source="Hugging Face kaiko-ai/midnight, model.safetensors",
            license="MIT",
            gated=False,
            magnification=20.0,
            patch_size=224,
            pooling="class token (pooling='cls+mean': + mean of patch tokens, 3072)",
        ),
        build=midnight12k,
    ),
)
