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

Not registered, because what a faithful port needs is not public enough here to be exact:

* ``hibou_l``, ``hibou_b`` (histai/hibou-L, hibou-B): DINOv2 with registers through the repos'
  own ``trust_remote_code`` modeling file, whose key names, register count, MLP type and
  position-grid size could not be checked against the published ``config.json``. The
  architecture itself is covered (``HFViTConfig(family="dinov2", num_register_tokens=...)``,
  tested against ``transformers``' ``Dinov2WithRegistersModel``); TRIDENT's facts for later:
  ``pooler_output`` (the final-norm CLS), 224 bicubic, mean (0.7068, 0.5755, 0.722), std
  (0.195, 0.2316, 0.1816), float32.
* ``midnight12k`` (kaiko-ai/midnight, MIT): a DINOv2 ViT-g/14 ``Dinov2Model``, but its
  ``config.json`` (position-grid size, SwiGLU or GELU MLP) could not be checked. Note that
  TRIDENT's ``Midnight12kInferenceEncoder`` defaults to the CLS token (1536) with
  ``return_type="cls+mean"`` (3072, the model card's recipe) as an option; ``Resize(224)``,
  ``CenterCrop(224)``, mean = std = (0.5, 0.5, 0.5), float16. The SwiGLU DINOv2 block and
  ``pooling="cls+mean"`` are implemented and tested.
"""

from __future__ import annotations

import torch

from ..._constants import IMAGENET_MEAN, IMAGENET_STD
from .._info import Entry, ModelInfo
from ..hf_vit import HFVisionTransformer, HFViTConfig

__all__ = ["ENTRIES", "PHIKON", "PHIKON_V2", "phikon", "phikon_v2"]

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
)
