"""One small configuration per architecture family of the encoder zoo, for tests and benchmarks.

Each family is the class (and the pooling, registers, normalisation and resize filter) of one
group of registry encoders, built small with random parameters:

* ``timm-vit``: ``VisionTransformer``, class token (uni_v1, gigapath, kaiko-*, lunit, gpfm);
* ``timm-vit-reg-clsmean``: ``ClsMeanViT`` with 4 registers and SwiGLU (virchow2; virchow
  without registers; the register path of hoptimus*, h0-mini, openmidnight);
* ``conch-v15``: ``ConchV15Vision``, attentional pooler, trunk grid resampled (conch_v15);
* ``hf-vit``: ``HFVisionTransformer``, ``ViTModel`` layout (phikon);
* ``hf-dinov2``: ``Dinov2Model`` layout (phikon_v2);
* ``hf-dinov2-registers``: ``Dinov2WithRegistersModel``, SwiGLU (hibou_l, hibou-b);
* ``hf-dinov2-clsmean``: ``Dinov2Model``, stored grid resampled, CLS + mean (midnight12k);
* ``keep``: ``KeepVision``, visual head and L2 normalisation (keep);
* ``swin``: ``SwinTransformer`` with the conv stem (ctranspath);
* ``resnet-trunk``: ``ResNetTrunk``, stage 3 average pooled (resnet50).

``size="tiny"`` gives inputs of 28 to 64 pixels and a few thousand to a few hundred thousand
parameters (the tests: every family through ONNX export, the uint8 path and resume in seconds);
``size="small"`` gives 224-pixel inputs (448 for CONCH v1.5's trunk at twice its grid, as the
real model runs) and widths of about ViT-Ti, so that the forward, not the slide reading,
dominates a CPU benchmark (``benchmarks/bench_embed.py --families``). Neither is in the model
registry: they have no published weights and no TRIDENT name.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import torch
from torch import nn

from ...errors import InvalidArgumentError
from ..hf_vit import HFVisionTransformer, HFViTConfig
from ..resnet import ResNetTrunk
from ..swin import SwinConfig, SwinTransformer
from ..vit import VisionTransformer, ViTConfig
from .hf_vits import HIBOU_MEAN, HIBOU_STD, MIDNIGHT12K
from .keep import KeepVision
from .timm_vits import ClsMeanViT, ConchV15Vision

__all__ = ["FAMILIES", "family_encoder"]

#: The family names, in the order of the table above.
FAMILIES = (
    "timm-vit",
    "timm-vit-reg-clsmean",
    "conch-v15",
    "hf-vit",
    "hf-dinov2",
    "hf-dinov2-registers",
    "hf-dinov2-clsmean",
    "keep",
    "swin",
    "resnet-trunk",
)

Size = Literal["tiny", "small"]


def _vit(size: Size, *, patch: int, **kw: object) -> ViTConfig:
    if size == "tiny":
        base = dict(image_size=2 * patch, patch_size=patch, embed_dim=32, depth=2, num_heads=2,
                    mlp_hidden=64)  # fmt: skip
    else:
        base = dict(image_size=224, patch_size=patch, embed_dim=192, depth=4, num_heads=3,
                    mlp_hidden=768)  # fmt: skip
    return ViTConfig(**{**base, **kw})  # type: ignore[arg-type]


def _hf(size: Size, family: Literal["vit", "dinov2"], *, patch: int, **kw: object) -> HFViTConfig:
    if size == "tiny":
        base = dict(image_size=4 * patch, hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=4, mlp_hidden=128)  # fmt: skip
    else:
        base = dict(image_size=224, hidden_size=192, num_hidden_layers=4, num_attention_heads=3,
                    mlp_hidden=768)  # fmt: skip
    return HFViTConfig(family=family, patch_size=patch, layer_norm_eps=1e-6,
                       **{**base, **kw})  # type: ignore[arg-type]  # fmt: skip


def family_encoder(family: str, *, size: Size = "tiny", seed: int = 0) -> nn.Module:
    """Build one family's small encoder with random parameters, in eval mode.

    Parameters
    ----------
    family : str
        One of :data:`FAMILIES`.
    size : {"tiny", "small"}, default "tiny"
        ``"tiny"``: 28 to 64 px inputs for tests; ``"small"``: 224 px (CONCH v1.5: 448) for CPU
        benchmarks (module docstring).
    seed : int, default 0
        Seed of the initialisation (the global RNG state is left untouched).

    Returns
    -------
    torch.nn.Module
        An encoder with the attributes of :func:`tumorboard.models.load`'s (``name``,
        ``embed_dim``, ``image_size``, ``mean``, ``std``, ``interpolation``), named
        ``"{family}-{size}"``.

    Raises
    ------
    InvalidArgumentError
        An unknown family or size.
    """
    if family not in FAMILIES:
        raise InvalidArgumentError(f"family: expected one of {', '.join(FAMILIES)}, got {family!r}")
    if size not in ("tiny", "small"):
        raise InvalidArgumentError(f"size: expected 'tiny' or 'small', got {size!r}")
    name = f"{family}-{size}"
    tiny = size == "tiny"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module: nn.Module
        if family == "timm-vit":
            module = VisionTransformer(_vit(size, patch=16, init_values=1e-5), name=name)
        elif family == "timm-vit-reg-clsmean":
            cfg = _vit(size, patch=14, mlp="swiglu", init_values=1e-5, reg_tokens=4)
            module = ClsMeanViT(cfg, name=name, interpolation="bicubic")
        elif family == "conch-v15":
            # the trunk is built on a grid half the input's side, as CONCH v1.5 (224 -> 448)
            cfg = _vit(size, patch=16, init_values=1.0)
            module = ConchV15Vision(name=name, config=cfg, image_size=2 * cfg.image_size)
        elif family == "hf-vit":
            module = HFVisionTransformer(_hf(size, "vit", patch=16 if not tiny else 8,
                                             use_mask_token=False), name=name)  # fmt: skip
        elif family == "hf-dinov2":
            module = HFVisionTransformer(_hf(size, "dinov2", patch=16 if not tiny else 8),
                                         name=name)  # fmt: skip
        elif family == "hf-dinov2-registers":
            cfg = _hf(size, "dinov2", patch=14 if not tiny else 7, use_swiglu_ffn=True,
                      num_register_tokens=4)  # fmt: skip
            module = HFVisionTransformer(cfg, name=name, mean=HIBOU_MEAN, std=HIBOU_STD,
                                         interpolation="bicubic")  # fmt: skip
        elif family == "hf-dinov2-clsmean":
            # Midnight: the stored position grid is larger than the input's (518 -> 224)
            small = _hf(size, "dinov2", patch=14 if not tiny else 7)
            cfg = replace(MIDNIGHT12K, patch_size=small.patch_size,
                          image_size=63 if tiny else 518, hidden_size=small.hidden_size,
                          num_hidden_layers=small.num_hidden_layers,
                          num_attention_heads=small.num_attention_heads,
                          mlp_hidden=small.mlp_hidden, pooling="cls+mean")  # fmt: skip
            module = HFVisionTransformer(cfg, name=name, image_size=28 if tiny else 224,
                                         mean=(0.5,) * 3, std=(0.5,) * 3)  # fmt: skip
        elif family == "keep":
            cfg = _vit(size, patch=16, init_values=1e-5)
            module = KeepVision(name=name, config=cfg, projection_dim=24 if tiny else 128,
                                image_size=cfg.image_size)  # fmt: skip
        elif family == "swin":
            swin = (SwinConfig(image_size=32, embed_dim=16, depths=(2, 2), num_heads=(2, 4),
                               window_size=4) if tiny else
                    SwinConfig(image_size=224, embed_dim=32, depths=(1, 1, 2, 1),
                               num_heads=(1, 2, 4, 8), window_size=7))  # fmt: skip
            module = SwinTransformer(swin, name=name)
        else:  # resnet-trunk
            module = ResNetTrunk((1, 1, 1), name=name, image_size=32 if tiny else 224)
    return module.eval()
