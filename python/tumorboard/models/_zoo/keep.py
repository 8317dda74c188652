"""KEEP's image tower (TRIDENT ``keep``): a timm ViT-L/16, a two-layer head, L2-normalised.

KEEP (Zhou et al., arXiv:2412.13126; https://huggingface.co/Astaxanthin/KEEP, MIT) is a
CLIP-style pathology model whose image embedding TRIDENT stores (``KeepInferenceEncoder``@a91fa84
calls ``encode_image``). Facts, from MAGIC-AI4Med/KEEP ``quick_start/keep_inference.py``@a346a70
(the released ``pytorch_model.bin`` loaded strictly into that class) and the Hugging Face
``modeling_keep.py``:

* ``visual``: timm ``vit_large_patch16_224`` at 224 px with LayerScale 1e-5 and ``num_classes=0``
  (1024 wide, 24 blocks, 16 heads, GELU MLP 4096, class-embedded ``pos_embed`` of 197 rows), so
  its output is the final-norm class token (:data:`tumorboard.models.vit.UNI` is the same
  configuration);
* ``visual_head``: ``Linear(1024, 768)``, exact GELU, ``Linear(768, 768)``;
* ``encode_image(x) = normalize(visual_head(visual(x)), dim=-1)``: a unit-norm 768-d embedding;
* the checkpoint also holds the text tower (``text.*``, a BERT) and ``logit_scale``, which this
  image tower drops at load; the Hugging Face ``modeling_keep.py`` renames timm's LayerScale
  parameter ``gamma`` to ``weight`` (``RenameLayerScale``), so both spellings are accepted.

TRIDENT's transform: ``Resize(224, bicubic)``, ``CenterCrop(224)`` (the identity on the square
result), ImageNet statistics; float16; its README recommends 256 px patches at 20x.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

from ..._constants import IMAGENET_MEAN, IMAGENET_STD
from .._info import Entry, ModelInfo
from ..vit import UNI, TrunkPreprocessing, VisionTransformer, ViTConfig

__all__ = ["ENTRIES", "KEEP_VISUAL", "KeepVision", "keep"]

#: KEEP's ``visual``: timm ``vit_large_patch16_224``, LayerScale 1e-5, 224 px.
KEEP_VISUAL: ViTConfig = UNI

#: Checkpoint keys of the text side, dropped by :meth:`KeepVision.adapt_state_dict`.
_TEXT_KEY = re.compile(r"^(text\.|logit_scale$)")
_LAYERSCALE_WEIGHT = re.compile(r"^(visual\.blocks\.\d+\.ls[12])\.weight$")


class KeepVision(TrunkPreprocessing, nn.Module):
    """KEEP's ``encode_image``: ``normalize(visual_head(visual(x)))``, ``[B, 3, H, W] -> [B, 768]``.

    Parameters
    ----------
    name : str, default "keep"
        The model name.
    image_size : int or None, default None
        The preprocessing size (default 224); other multiples of 16 resample the position
        embedding at run time as :class:`~tumorboard.models.vit.VisionTransformer` does.
    config : ViTConfig, default KEEP_VISUAL
        The ``visual`` tower's hyperparameters (smaller ones for tests).
    projection_dim : int, default 768
        The head's width (the embedding width).

    Attributes
    ----------
    embed_dim : int
        ``projection_dim``.
    image_size, mean, std, interpolation
        The preprocessing (224, ImageNet statistics, bicubic).
    """

    _trunk = "visual"

    def __init__(
        self,
        *,
        name: str = "keep",
        image_size: int | None = None,
        config: ViTConfig = KEEP_VISUAL,
        projection_dim: int = 768,
    ) -> None:
        super().__init__()
        self.name = name
        self.embed_dim = int(projection_dim)
        self.visual = VisionTransformer(
            config,
            name=f"{name}.visual",
            image_size=image_size,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            interpolation="bicubic",
        )
        self.visual_head = nn.Sequential(
            nn.Linear(config.embed_dim, self.embed_dim),
            nn.GELU(),
            nn.Linear(self.embed_dim, self.embed_dim),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embed ``x [B, 3, H, W]`` to unit-norm ``[B, embed_dim]``."""
        return F.normalize(self.visual_head(self.visual(x)), dim=-1)

    def adapt_state_dict(self, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Keep the image tower of a full KEEP checkpoint.

        Drops ``text.*`` and ``logit_scale`` and renames ``visual.blocks.{i}.ls{1,2}.weight``
        (the Hugging Face modelling file's LayerScale name) to timm's ``gamma``; every other key
        is passed on and checked strictly.

        Parameters
        ----------
        state : Mapping of str to torch.Tensor
            The checkpoint's state dict.

        Returns
        -------
        dict of str to torch.Tensor
            The state dict of this tower.
        """
        out: dict[str, torch.Tensor] = {}
        for key, value in state.items():
            if _TEXT_KEY.match(key):
                continue
            out[_LAYERSCALE_WEIGHT.sub(r"\1.gamma", key)] = value
        return out


def keep(*, image_size: int | None = None) -> KeepVision:
    """Build KEEP's image tower (:class:`KeepVision`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        The input size preprocessing produces, a multiple of 16 (default 224, the size TRIDENT
        runs).

    Returns
    -------
    KeepVision
        The encoder named ``"keep"``: ``[B, 3, H, W] -> [B, 768]`` (L2-normalised).
    """
    return KeepVision(image_size=image_size)


ENTRIES: tuple[Entry, ...] = (
    Entry(
        ModelInfo(
            name="keep",
            kind="encoder",
            embed_dim=768,
            image_size=224,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            interpolation="bicubic",
            gpu_dtype=torch.float16,
            trident_name="keep",
            weights_source=(
                "Hugging Face Astaxanthin/KEEP, model.safetensors or pytorch_model.bin "
                "(the text tower in it is dropped)"
            ),
            license="MIT",
            gated=False,
            magnification=20.0,
            patch_size=256,
            pooling="class token -> visual_head (Linear, GELU, Linear) -> L2 normalisation",
        ),
        build=keep,
    ),
)
