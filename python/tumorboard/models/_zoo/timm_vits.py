"""ViT patch encoders in the timm state-dict layout (TRIDENT names).

Virchow, Virchow2, H-optimus-0, H-optimus-1, H0-mini, Prov-GigaPath and CONCH v1.5, built from
:class:`tumorboard.models.vit.VisionTransformer` with the published checkpoints' key names (no
prefix; CONCH v1.5's checkpoint has its own ``trunk.`` / ``attn_pool_contrast.`` layout).

Sources of the facts (architecture, pooled output, preprocessing, precision):

* TRIDENT ``trident/patch_encoder_models/load.py``@a91fa84 (mahmoodlab/TRIDENT): the timm
  architecture names and keyword overrides each encoder is built with, the eval transform, the
  ``precision`` (all seven: float16) and the output TRIDENT stores; its ``README.md``@a91fa84
  table gives the recommended magnification and patch size (``--mag``, ``--patch_size``).
* timm ``timm/models/vision_transformer.py`` (huggingface/pytorch-image-models): the named
  configurations ``vit_huge_patch14_224`` (1280 wide, 32 blocks, 16 heads, patch 14),
  ``vit_giant_patch14_dinov2`` and ``vit_giant_patch14_reg4_dinov2`` (1536 wide, 40 blocks,
  24 heads, LayerScale 1e-5, packed SwiGLU with ``mlp_ratio = 2.66667 * 2``; the ``reg4``
  variant adds 4 registers and ``no_embed_class``), ``vit_base_patch14_reg4_dinov2`` (768 wide,
  12 blocks, 12 heads, LayerScale 1e-5, 4 registers, ``no_embed_class``, ``mlp_ratio`` 4).
* Model cards: https://huggingface.co/paige-ai/Virchow, https://huggingface.co/paige-ai/Virchow2
  (Zimmermann et al., arXiv:2408.00738: ViT-H/14, 632 M parameters; CLS concatenated with the
  mean of the patch tokens, 2,560 dims), https://huggingface.co/bioptimus/H-optimus-0,
  https://huggingface.co/bioptimus/H-optimus-1 (ViT-g/14, 1.1 B parameters, normalisation
  mean (0.707223, 0.578729, 0.703617), std (0.211883, 0.230117, 0.177517)),
  https://huggingface.co/bioptimus/H0-mini (Filiot et al., arXiv:2501.16239: ViT-B/14 distilled
  from H-optimus-0; ``timm.create_model(..., mlp_layer=SwiGLUPacked, act_layer=SiLU)``; output
  ``[B, 1 + 4 + 256, 768]``), https://huggingface.co/prov-gigapath/prov-gigapath,
  https://huggingface.co/MahmoodLab/conchv1_5 (ViT-L/16 trained with CoCa, 448 px).

Eval transforms that are not a single resize: Prov-GigaPath's is a bicubic resize of the short
side to 256 followed by a 224 center crop (TRIDENT ``GigaPathInferenceEncoder``; with
``target_img_size`` set it becomes resize + crop to that size). The registry row records the
224-pixel model input and bicubic filter; the 256 -> 224 crop is not expressible as one resize
and is named in the row's ``pooling`` text. The others are one resize of a square patch
(Virchow/Virchow2 bicubic; H-optimus-0/1 torchvision's default, bilinear; CONCH v1.5 bilinear to
448 then a 448 center crop, a no-op on square patches).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn

from ..._constants import IMAGENET_MEAN, IMAGENET_STD
from .._info import Entry, ModelInfo
from ..vit import TrunkPreprocessing, VisionTransformer, ViTConfig, fit_checkpoint_pos_embed

__all__ = [
    "CONCH_V15_TRUNK",
    "ENTRIES",
    "GIGAPATH",
    "H0_MINI",
    "HOPTIMUS",
    "HOPTIMUS_MEAN",
    "HOPTIMUS_STD",
    "VIRCHOW",
    "VIRCHOW2",
    "ClsMeanViT",
    "ConchV15AttentionalPooler",
    "ConchV15Vision",
    "conch_v15",
    "gigapath",
    "h0_mini",
    "hoptimus0",
    "hoptimus1",
    "virchow",
    "virchow2",
]

#: H-optimus-0/1 and H0-mini input normalisation (model cards; TRIDENT
#: ``HOptimus0InferenceEncoder``).
HOPTIMUS_MEAN: tuple[float, float, float] = (0.707223, 0.578729, 0.703617)
HOPTIMUS_STD: tuple[float, float, float] = (0.211883, 0.230117, 0.177517)

#: Virchow: timm ``vit_huge_patch14_224`` with ``mlp_ratio=5.3375``, packed SwiGLU (SiLU) and
#: LayerScale 1e-5 (TRIDENT ``VirchowInferenceEncoder``@a91fa84; paige-ai/Virchow model card):
#: ``fc1`` ``int(1280 * 5.3375) = 6832`` features, ``fc2`` 3416; ``pos_embed`` includes the CLS row.
VIRCHOW = ViTConfig(
    image_size=224,
    patch_size=14,
    embed_dim=1280,
    depth=32,
    num_heads=16,
    mlp_hidden=int(1280 * 5.3375),
    mlp="swiglu",
    init_values=1e-5,
)
#: Virchow2: Virchow plus 4 register tokens (``reg_tokens=4``; class-embedded ``pos_embed`` of
#: ``1 + 4 + 256`` rows, timm's layout without ``no_embed_class``).
VIRCHOW2 = replace(VIRCHOW, reg_tokens=4)
#: H-optimus-0 and H-optimus-1: timm ``vit_giant_patch14_reg4_dinov2`` at ``img_size=224``,
#: LayerScale 1e-5 (TRIDENT ``HOptimus0InferenceEncoder`` / ``HOptimus1InferenceEncoder``):
#: packed SwiGLU ``int(1536 * 5.33334) = 8192``, 4 registers, patch-only ``pos_embed`` (256 rows).
HOPTIMUS = ViTConfig(
    image_size=224,
    patch_size=14,
    embed_dim=1536,
    depth=40,
    num_heads=24,
    mlp_hidden=int(1536 * 2.66667 * 2),
    mlp="swiglu",
    init_values=1e-5,
    reg_tokens=4,
    no_embed_class=True,
)
#: H0-mini: timm ``vit_base_patch14_reg4_dinov2`` at 224 with ``mlp_layer=SwiGLUPacked`` and
#: ``act_layer=SiLU`` (TRIDENT ``H0MiniInferenceEncoder``; bioptimus/H0-mini model card), timm's
#: default ``mlp_ratio`` 4: ``fc1`` 3072, ``fc2`` 1536. The hub ``config.json`` could not be read
#: here: the MLP width is timm's default for that architecture, not checked against the file.
H0_MINI = ViTConfig(
    image_size=224,
    patch_size=14,
    embed_dim=768,
    depth=12,
    num_heads=12,
    mlp_hidden=int(768 * 4.0),
    mlp="swiglu",
    init_values=1e-5,
    reg_tokens=4,
    no_embed_class=True,
)
#: Prov-GigaPath tile encoder: timm ``vit_giant_patch14_dinov2`` with ``patch_size=16``,
#: ``img_size=224``, ``mlp_ratio=5.33334`` (TRIDENT ``GigaPathInferenceEncoder``; the hub
#: ``config.json`` of prov-gigapath/prov-gigapath): packed SwiGLU 8192, LayerScale 1e-5, no
#: registers, class-embedded ``pos_embed`` (197 rows).
GIGAPATH = ViTConfig(
    image_size=224,
    patch_size=16,
    embed_dim=1536,
    depth=40,
    num_heads=24,
    mlp_hidden=int(1536 * 5.33334),
    mlp="swiglu",
    init_values=1e-5,
)
#: CONCH v1.5 trunk: ViT-L/16 (1024 wide, 24 blocks, 16 heads, GELU MLP 4096, qkv bias),
#: LayerScale (``init_values=1.0``), built on the 224 grid (``pos_embed`` 197 rows) and run on
#: 448-pixel inputs (TRIDENT ``model_zoo/conchv1_5/conchv1_5.py``@a91fa84, ``vit_large``,
#: ``CONCHVisionTower``).
CONCH_V15_TRUNK = ViTConfig(
    image_size=224,
    patch_size=16,
    embed_dim=1024,
    depth=24,
    num_heads=16,
    mlp_hidden=4096,
    init_values=1.0,
)


class ClsMeanViT(VisionTransformer):
    """A :class:`VisionTransformer` whose output is ``[CLS, mean(patch tokens)]`` (2 x width).

    Virchow and Virchow2 embed a patch as the final-norm CLS token concatenated with the mean of
    the patch tokens; register tokens are excluded from the mean (TRIDENT
    ``Virchow2InferenceEncoder.forward`` averages ``output[:, 5:]``; paige-ai/Virchow2 model
    card). Subclassing keeps the checkpoint's key names (no wrapper prefix).

    Parameters
    ----------
    config : ViTConfig
        The hyperparameters.
    **kwargs
        As :class:`VisionTransformer` (``name``, ``image_size``, ``mean``, ``std``,
        ``interpolation``).

    Attributes
    ----------
    embed_dim : int
        ``2 * config.embed_dim``.
    """

    def __init__(self, config: ViTConfig, **kwargs: object) -> None:
        super().__init__(config, **kwargs)  # type: ignore[arg-type]
        self.embed_dim = 2 * config.embed_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``[B, 2 * width]``: the CLS token and the mean of the patch tokens."""
        tokens = self.forward_features(x)
        patches = tokens[:, self.num_prefix_tokens :]
        return torch.cat([tokens[:, 0], patches.mean(dim=1)], dim=-1)


class ConchV15AttentionalPooler(nn.Module):
    """CONCH v1.5's contrastive attentional pooler.

    Keys ``query``, ``ln_q``, ``ln_k``, ``to_q``, ``to_kv``, ``to_out``; projections without
    bias, LayerNorm eps 1e-5.

    ``to_out(softmax(q k^T / sqrt(d)) v)`` with ``q = to_q(ln_q(query))`` and
    ``k, v = to_kv(ln_k(x))`` split in halves, over ``n_head`` heads (TRIDENT
    ``model_zoo/conchv1_5/conchv1_5.py``@a91fa84, ``AttentionalPooler``: shapes and math only).

    Parameters
    ----------
    d_model : int
        Query and output width (768).
    context_dim : int
        Token width (1024).
    n_head : int
        Attention heads (8).
    n_queries : int
        Learned queries (1).
    """

    def __init__(self, d_model: int, context_dim: int, n_head: int, n_queries: int) -> None:
        super().__init__()
        self.heads = n_head
        self.query = nn.Parameter(torch.randn(n_queries, d_model))
        self.ln_k = nn.LayerNorm(context_dim)
        self.ln_q = nn.LayerNorm(d_model)
        self.to_q = nn.Linear(d_model, d_model, bias=False)
        self.to_kv = nn.Linear(context_dim, 2 * d_model, bias=False)
        self.to_out = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Pool tokens ``[B, L, context_dim]`` to ``[B, n_queries, d_model]``."""
        b, n = x.shape[0], self.query.shape[0]
        h = self.heads
        q = self.to_q(self.ln_q(self.query)).expand(b, -1, -1)
        k, v = self.to_kv(self.ln_k(x)).chunk(2, dim=-1)

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(b, t.shape[1], h, -1).transpose(1, 2)

        out = F.scaled_dot_product_attention(split(q), split(k), split(v))
        return self.to_out(out.transpose(1, 2).reshape(b, n, -1))


class ConchV15Vision(TrunkPreprocessing, nn.Module):
    """CONCH v1.5 image tower: ``ln_contrast(attn_pool_contrast(trunk tokens)[:, 0])``, 768-d.

    The output TRIDENT stores as ``conch_v15`` features (``CONCHVisionTower.forward``). Keys:
    ``trunk.*`` (timm ViT-L/16 layout), ``attn_pool_contrast.*``, ``ln_contrast.*``, as in
    MahmoodLab/conchv1_5 ``pytorch_model_vision.bin``.

    Parameters
    ----------
    name : str, default "conch_v15"
        The model name.
    image_size : int, default 448
        The preprocessing size; the trunk's 224-grid position embedding is resampled at run time.
    config : ViTConfig, default CONCH_V15_TRUNK
        The trunk's hyperparameters (smaller ones for tests).

    Attributes
    ----------
    embed_dim : int
        768.
    image_size, mean, std, interpolation
        The preprocessing (448, ImageNet statistics, bilinear).
    """

    def __init__(
        self,
        *,
        name: str = "conch_v15",
        image_size: int = 448,
        config: ViTConfig = CONCH_V15_TRUNK,
    ) -> None:
        super().__init__()
        self.name = name
        self.embed_dim = 768
        self.trunk = VisionTransformer(
            config,
            name=f"{name}.trunk",
            image_size=image_size,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            interpolation="bilinear",
        )
        self.attn_pool_contrast = ConchV15AttentionalPooler(768, config.embed_dim, 8, 1)
        self.ln_contrast = nn.LayerNorm(768)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embed ``x [B, 3, H, W]`` to ``[B, 768]``."""
        tokens = self.trunk.forward_features(x)
        return self.ln_contrast(self.attn_pool_contrast(tokens)[:, 0])

    def adapt_state_dict(self, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Fit a checkpoint's ``trunk.pos_embed`` grid to the trunk's grid (14 x 14).

        TRIDENT's loader resamples a ``trunk.pos_embed`` of another grid to the model's bilinearly
        without antialiasing, keeping the CLS row (``resize_pos_embed`` in
        ``model_zoo/conchv1_5/conchv1_5.py``@a91fa84); every other key is passed on unchanged.

        Parameters
        ----------
        state : Mapping of str to torch.Tensor
            The checkpoint's state dict.

        Returns
        -------
        dict of str to torch.Tensor
            The state dict for this tower.
        """
        out = dict(state)
        if "trunk.pos_embed" in out:
            out["trunk.pos_embed"] = fit_checkpoint_pos_embed(
                out["trunk.pos_embed"], self.trunk.pos_embed.shape,
                grid=self.trunk.config.grid_size, num_prefix_tokens=1,
            )  # fmt: skip
        return out


def _vit(
    cls: type[VisionTransformer],
    config: ViTConfig,
    name: str,
    image_size: int | None,
    mean: tuple[float, float, float],
    std: tuple[float, float, float],
    interpolation: str,
) -> VisionTransformer:
    return cls(
        config,
        name=name,
        image_size=image_size,
        mean=mean,
        std=std,
        interpolation=interpolation,  # type: ignore[arg-type]
    )


def virchow(*, image_size: int | None = None) -> VisionTransformer:
    """Build Virchow (:data:`VIRCHOW`, :class:`ClsMeanViT`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        The preprocessing size, a multiple of 14 (TRIDENT ``target_img_size``); ``None`` means
        224. Other sizes resample the position embedding at run time.

    Returns
    -------
    VisionTransformer
        ``"virchow"``: ``[B, 3, H, W] -> [B, 2560]`` (CLS + mean of the 256 patch tokens),
        ImageNet normalisation, bicubic resize.
    """
    return _vit(ClsMeanViT, VIRCHOW, "virchow", image_size, IMAGENET_MEAN, IMAGENET_STD, "bicubic")


def virchow2(*, image_size: int | None = None) -> VisionTransformer:
    """Build Virchow2 (:data:`VIRCHOW2`, :class:`ClsMeanViT`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        The preprocessing size, a multiple of 14; ``None`` means 224.

    Returns
    -------
    VisionTransformer
        ``"virchow2"``: ``[B, 3, H, W] -> [B, 2560]`` (CLS + mean of the patch tokens, the 4
        registers excluded), ImageNet normalisation, bicubic resize.
    """
    return _vit(
        ClsMeanViT, VIRCHOW2, "virchow2", image_size, IMAGENET_MEAN, IMAGENET_STD, "bicubic"
    )


def hoptimus0(*, image_size: int | None = None) -> VisionTransformer:
    """Build H-optimus-0 (:data:`HOPTIMUS`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        The preprocessing size, a multiple of 14; ``None`` means 224.

    Returns
    -------
    VisionTransformer
        ``"hoptimus0"``: ``[B, 3, H, W] -> [B, 1536]`` (CLS), H-optimus normalisation, bilinear
        resize (torchvision's default in TRIDENT's ``Resize``).
    """
    return _vit(
        VisionTransformer,
        HOPTIMUS,
        "hoptimus0",
        image_size,
        HOPTIMUS_MEAN,
        HOPTIMUS_STD,
        "bilinear",
    )


def hoptimus1(*, image_size: int | None = None) -> VisionTransformer:
    """Build H-optimus-1 (:data:`HOPTIMUS`, H-optimus-0's architecture) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        The preprocessing size, a multiple of 14; ``None`` means 224.

    Returns
    -------
    VisionTransformer
        ``"hoptimus1"``: ``[B, 3, H, W] -> [B, 1536]`` (CLS), H-optimus normalisation, bilinear.
    """
    return _vit(
        VisionTransformer,
        HOPTIMUS,
        "hoptimus1",
        image_size,
        HOPTIMUS_MEAN,
        HOPTIMUS_STD,
        "bilinear",
    )


def h0_mini(*, image_size: int | None = None) -> VisionTransformer:
    """Build H0-mini (:data:`H0_MINI`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        The preprocessing size, a multiple of 14; ``None`` means 224.

    Returns
    -------
    VisionTransformer
        ``"h0-mini"``: ``[B, 3, H, W] -> [B, 768]`` (CLS, TRIDENT's default ``return_type``),
        H-optimus normalisation, bicubic resize (timm data config of the hub model).
    """
    return _vit(
        VisionTransformer, H0_MINI, "h0-mini", image_size, HOPTIMUS_MEAN, HOPTIMUS_STD, "bicubic"
    )


def gigapath(*, image_size: int | None = None) -> VisionTransformer:
    """Build the Prov-GigaPath tile encoder (:data:`GIGAPATH`) with random parameters.

    TRIDENT's eval transform is a bicubic resize to 256 then a 224 center crop (with
    ``target_img_size``: resize and crop to that size); tumorboard's engine resizes a patch to
    ``image_size`` directly, which equals TRIDENT only when ``image_size`` is given.

    Parameters
    ----------
    image_size : int, optional
        The preprocessing size, a multiple of 16; ``None`` means 224.

    Returns
    -------
    VisionTransformer
        ``"gigapath"``: ``[B, 3, H, W] -> [B, 1536]`` (CLS), ImageNet normalisation, bicubic.
    """
    return _vit(
        VisionTransformer, GIGAPATH, "gigapath", image_size, IMAGENET_MEAN, IMAGENET_STD, "bicubic"
    )


def conch_v15(*, image_size: int = 448) -> ConchV15Vision:
    """Build CONCH v1.5's image tower (:class:`ConchV15Vision`) with random parameters.

    Parameters
    ----------
    image_size : int, default 448
        The preprocessing size (TRIDENT ``img_size``), a multiple of 16.

    Returns
    -------
    ConchV15Vision
        ``"conch_v15"``: ``[B, 3, H, W] -> [B, 768]``, ImageNet normalisation, bilinear resize.
    """
    return ConchV15Vision(name="conch_v15", image_size=image_size)


def _row(
    name: str,
    *,
    embed_dim: int,
    image_size: int,
    mean: tuple[float, float, float],
    std: tuple[float, float, float],
    interpolation: str,
    weights_source: str,
    license: str | None,
    patch_size: int,
    pooling: str,
) -> ModelInfo:
    return ModelInfo(
        name=name,
        kind="encoder",
        embed_dim=embed_dim,
        image_size=image_size,
        mean=mean,
        std=std,
        interpolation=interpolation,  # type: ignore[arg-type]
        gpu_dtype=torch.float16,  # TRIDENT load.py@a91fa84: precision float16 for all seven
        trident_name=name,
        weights_source=weights_source,
        license=license,
        gated=True,
        magnification=20.0,
        patch_size=patch_size,
        pooling=pooling,
    )


_CLS_MEAN = "class token + mean of patch tokens (registers excluded)"

ENTRIES: tuple[Entry, ...] = (
    Entry(
        _row(
            "virchow",
            embed_dim=2560,
            image_size=224,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            interpolation="bicubic",
            weights_source="Hugging Face paige-ai/Virchow, pytorch_model.bin (gated)",
            license="Apache-2.0",
            patch_size=224,
            pooling=_CLS_MEAN,
        ),
        build=virchow,
    ),
    Entry(
        _row(
            "virchow2",
            embed_dim=2560,
            image_size=224,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            interpolation="bicubic",
            weights_source="Hugging Face paige-ai/Virchow2, pytorch_model.bin (gated)",
            license="CC-BY-NC-ND-4.0",
            patch_size=224,
            pooling=_CLS_MEAN,
        ),
        build=virchow2,
    ),
    Entry(
        _row(
            "hoptimus0",
            embed_dim=1536,
            image_size=224,
            mean=HOPTIMUS_MEAN,
            std=HOPTIMUS_STD,
            interpolation="bilinear",
            weights_source="Hugging Face bioptimus/H-optimus-0, pytorch_model.bin (gated)",
            license="Apache-2.0",
            patch_size=224,
            pooling="class token",
        ),
        build=hoptimus0,
    ),
    Entry(
        _row(
            "hoptimus1",
            embed_dim=1536,
            image_size=224,
            mean=HOPTIMUS_MEAN,
            std=HOPTIMUS_STD,
            interpolation="bilinear",
            weights_source="Hugging Face bioptimus/H-optimus-1, pytorch_model.bin (gated)",
            license=None,
            patch_size=224,
            pooling="class token",
        ),
        build=hoptimus1,
    ),
    Entry(
        _row(
            "h0-mini",
            embed_dim=768,
            image_size=224,
            mean=HOPTIMUS_MEAN,
            std=HOPTIMUS_STD,
            interpolation="bicubic",
            weights_source="Hugging Face bioptimus/H0-mini (gated)",
            license=None,
            patch_size=224,
            pooling="class token",
        ),
        build=h0_mini,
    ),
    Entry(
        _row(
            "gigapath",
            embed_dim=1536,
            image_size=224,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            interpolation="bicubic",
            weights_source="Hugging Face prov-gigapath/prov-gigapath, pytorch_model.bin (gated)",
            license="Apache-2.0",
            patch_size=256,
            pooling="class token (TRIDENT's transform: bicubic resize to 256, center crop 224)",
        ),
        build=gigapath,
    ),
    Entry(
        _row(
            "conch_v15",
            embed_dim=768,
            image_size=448,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            interpolation="bilinear",
            weights_source="Hugging Face MahmoodLab/conchv1_5, pytorch_model_vision.bin (gated)",
            license="CC-BY-NC-ND-4.0",
            patch_size=512,
            pooling="attentional-pooler contrastive token after ln_contrast",
        ),
        build=conch_v15,
    ),
)
