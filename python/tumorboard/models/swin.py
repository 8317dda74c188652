"""Swin Transformer in plain torch, with the keys of the CTransPath checkpoint.

The architecture is Swin-T (Liu et al., *Swin Transformer: Hierarchical Vision Transformer using
Shifted Windows*, ICCV 2021, Sections 3.1-3.3 and Table 7) as timm 0.5.x builds
``swin_tiny_patch4_window7_224`` (huggingface/pytorch-image-models
``timm/models/swin_transformer.py`` of the 0.5 series, the version TransPath ships as its
modified ``timm-0.5.4``): 4 stages of 2, 2, 6, 2 blocks, 96 channels doubling per stage, 3, 6,
12, 24 heads, 7x7 windows, MLP ratio 4, qkv with bias, LayerNorm (eps 1e-5) everywhere.

* Blocks alternate window attention (W-MSA) and shifted-window attention (SW-MSA, a cyclic
  shift by ``window // 2`` with an attention mask that keeps tokens from attending across the
  wrapped edges: 0 within a region, -100 across regions; Section 3.2). A stage whose grid is no
  larger than the window uses one window of the whole grid and no shift (at 224 input the last
  stage's 7x7 grid).
* Each window attention adds a learned relative position bias: a
  ``[(2w-1)^2, heads]`` table indexed by the ``[w*w, w*w]`` buffer ``relative_position_index``
  (Section 3.2, "Relative position bias").
* Patch merging at the *end* of stages 1-3 (timm 0.5 layout: ``layers.{0,1,2}.downsample``)
  concatenates each 2x2 neighbourhood as ``[x(0,0), x(1,0), x(0,1), x(1,1)]`` (row, column),
  normalises the 4C features and maps them to 2C without bias.
* The embedding is the mean over tokens after the final ``norm`` (timm's ``avgpool``); there is
  no classifier head.

CTransPath (Wang et al., *Medical Image Analysis* 81, 2022, Section 3.2) replaces the 4x4 patch
embedding with a convolutional stem (:class:`ConvStem`; Xiyue-Wang/TransPath ``ctran.py``):
two 3x3/2 convolutions without bias, each followed by batch norm and ReLU, with C/8 then C/4
channels, and a 1x1 convolution with bias to C, then the patch LayerNorm.

The CTransPath checkpoints (TransPath's ``ctranspath.pth`` and the CHIEF copy
``CHIEF_CTransPath.pth`` that TRIDENT loads, both a ``{"model": state_dict}``) hold
``relative_position_index`` in every block and ``attn_mask`` in every shifted block (the timm 0.5
buffers were persistent): TRIDENT's loader (mahmoodlab/TRIDENT
``trident/patch_encoder_models/load.py``@a91fa84) drops the masks and asserts that exactly the
five masks of ``layers.0.blocks.1``, ``layers.1.blocks.1`` and ``layers.2.blocks.{1,3,5}`` are then
missing and nothing is unexpected. Both buffers are therefore persistent here and load strictly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from .._constants import IMAGENET_MEAN, IMAGENET_STD
from ..errors import InvalidArgumentError
from .vit import Mlp, set_encoder_metadata

__all__ = [
    "CTRANSPATH",
    "ConvStem",
    "PatchMerging",
    "SwinConfig",
    "SwinTransformer",
    "WindowAttention",
    "ctranspath",
    "relative_position_index",
    "shifted_window_mask",
    "window_partition",
    "window_reverse",
]

#: The value the shifted-window mask adds to logits between tokens of different regions.
MASK_VALUE = -100.0


@dataclass(frozen=True)
class SwinConfig:
    """Hyperparameters of a :class:`SwinTransformer`.

    Attributes
    ----------
    image_size : int
        The input size (square); the attention masks are built for it.
    embed_dim : int
        Channels of the first stage (doubling per stage).
    depths : tuple of int
        Blocks per stage.
    num_heads : tuple of int
        Attention heads per stage.
    window_size : int
        Side of an attention window in tokens.
    mlp_ratio : float, default 4.0
        MLP hidden width over the token width.
    stem : {"conv", "patch"}, default "conv"
        ``"conv"``: CTransPath's :class:`ConvStem`; ``"patch"``: Swin's 4x4/4 convolution.
    patch_size : int, default 4
        Downsampling of the stem.
    eps : float, default 1e-5
        LayerNorm epsilon (``torch.nn.LayerNorm``'s default, which timm 0.5 Swin uses).
    """

    image_size: int
    embed_dim: int
    depths: tuple[int, ...]
    num_heads: tuple[int, ...]
    window_size: int
    mlp_ratio: float = 4.0
    stem: Literal["conv", "patch"] = "conv"
    patch_size: int = 4
    eps: float = 1e-5

    def __post_init__(self) -> None:
        if len(self.depths) != len(self.num_heads) or not self.depths:
            raise InvalidArgumentError(
                f"depths and num_heads: expected non-empty sequences of equal length, got lengths "
                f"{len(self.depths)} and {len(self.num_heads)}"
            )
        if self.stem not in ("conv", "patch"):
            raise InvalidArgumentError(f"stem: expected 'conv' or 'patch', got {self.stem!r}")
        if self.stem == "conv" and (self.patch_size != 4 or self.embed_dim % 8):
            raise InvalidArgumentError("the conv stem needs patch_size 4 and embed_dim % 8 == 0")
        side = self.image_size // self.patch_size
        if self.image_size % self.patch_size or side % 2 ** (len(self.depths) - 1):
            raise InvalidArgumentError(
                f"image_size: expected a multiple of the patch size {self.patch_size} whose "
                f"patch grid divides by {2 ** (len(self.depths) - 1)}, got {self.image_size}"
            )
        for i, heads in enumerate(self.num_heads):
            if (self.embed_dim * 2**i) % heads:
                raise InvalidArgumentError(f"stage {i}: width not divisible by {heads} heads")

    def resolution(self, stage: int) -> int:
        """Grid side (tokens) of ``stage``."""
        return self.image_size // self.patch_size // 2**stage

    def window_and_shift(self, stage: int) -> tuple[int, int]:
        """Window side and shift of the shifted blocks of ``stage`` (timm 0.5 rule)."""
        res = self.resolution(stage)
        if res <= self.window_size:
            return res, 0
        return self.window_size, self.window_size // 2


# --- window helpers -----------------------------------------------------------------------------


def window_partition(x: torch.Tensor, window: int) -> torch.Tensor:
    """Cut ``[B, H, W, C]`` into windows ``[B * (H/w) * (W/w), w, w, C]``.

    Windows are ordered per image, row-major over the window grid.
    """
    b, h, w, c = x.shape
    x = x.reshape(b, h // window, window, w // window, window, c)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, window, window, c)


def window_reverse(windows: torch.Tensor, window: int, height: int, width: int) -> torch.Tensor:
    """Invert :func:`window_partition`: ``[B * nW, w, w, C] -> [B, H, W, C]``."""
    c = windows.shape[-1]
    x = windows.reshape(-1, height // window, width // window, window, window, c)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, height, width, c)


def relative_position_index(window: int) -> torch.Tensor:
    """Index into the relative position bias table for each pair of tokens in a window.

    For tokens ``i = (r_i, c_i)`` and ``j = (r_j, c_j)`` (row-major in the window) the index is
    ``(r_i - r_j + w - 1) * (2w - 1) + (c_i - c_j + w - 1)`` (Liu et al. 2021, Section 3.2).

    Returns
    -------
    torch.Tensor
        int64 ``[w*w, w*w]`` with values in ``[0, (2w-1)^2)``.
    """
    rows = torch.arange(window).repeat_interleave(window)
    cols = torch.arange(window).repeat(window)
    dr = rows[:, None] - rows[None, :] + window - 1
    dc = cols[:, None] - cols[None, :] + window - 1
    return dr * (2 * window - 1) + dc


def shifted_window_mask(height: int, width: int, window: int, shift: int) -> torch.Tensor:
    """Build the additive attention mask of shifted windows on a ``height x width`` grid.

    After the cyclic shift by ``-shift`` the grid is split into 3 row bands (``[0, H-w)``,
    ``[H-w, H-shift)``, ``[H-shift, H)``) times 3 column bands; two tokens of one window may attend
    to each other only if they lie in the same band pair (timm 0.5 ``SwinTransformerBlock``).

    Returns
    -------
    torch.Tensor
        float32 ``[nW, w*w, w*w]``: 0 where attention is allowed, -100 elsewhere.
    """
    region = torch.zeros(height, width)
    bands_h = (slice(0, height - window), slice(height - window, height - shift))
    bands_w = (slice(0, width - window), slice(width - window, width - shift))
    bands_h += (slice(height - shift, height),)
    bands_w += (slice(width - shift, width),)
    label = 0
    for hs in bands_h:
        for ws in bands_w:
            region[hs, ws] = label
            label += 1
    windows = window_partition(region[None, :, :, None], window).reshape(-1, window * window)
    differs = windows[:, None, :] != windows[:, :, None]
    return torch.zeros(differs.shape).masked_fill(differs, MASK_VALUE)


# --- modules ------------------------------------------------------------------------------------


class ConvStem(nn.Module):
    """CTransPath's convolutional patch embedding (keys ``proj.{0,1,3,4,6}``, ``norm``).

    ``proj``: Conv3x3/2 (3 -> C/8, no bias), BN, ReLU, Conv3x3/2 (C/8 -> C/4, no bias), BN, ReLU,
    Conv1x1 (C/4 -> C, bias); then the tokens ``[B, H/4 * W/4, C]`` go through ``norm``.
    """

    def __init__(self, embed_dim: int, *, eps: float = 1e-5) -> None:
        super().__init__()
        c1, c2 = embed_dim // 8, embed_dim // 4
        self.proj = nn.Sequential(
            nn.Conv2d(3, c1, kernel_size=3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(c1),
            nn.ReLU(),
            nn.Conv2d(c1, c2, kernel_size=3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(c2),
            nn.ReLU(),
            nn.Conv2d(c2, embed_dim, kernel_size=1),
        )
        self.norm = nn.LayerNorm(embed_dim, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embed images ``[B, 3, H, W]`` to tokens ``[B, H/4, W/4, C]``."""
        return self.norm(self.proj(x).permute(0, 2, 3, 1))


class PatchEmbed(nn.Module):
    """Swin's patch embedding: a ``p x p`` stride-``p`` convolution, then ``norm``."""

    def __init__(self, patch_size: int, embed_dim: int, *, eps: float = 1e-5) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, embed_dim, kernel_size=patch_size, stride=patch_size)
        self.norm = nn.LayerNorm(embed_dim, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embed images ``[B, 3, H, W]`` to tokens ``[B, H/p, W/p, C]``."""
        return self.norm(self.proj(x).permute(0, 2, 3, 1))


class WindowAttention(nn.Module):
    """Multi-head self-attention inside windows with a relative position bias.

    Parameters
    ----------
    dim : int
        Token width.
    num_heads : int
        Heads.
    window : int
        Window side.
    """

    def __init__(self, dim: int, num_heads: int, window: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.window = window
        self.relative_position_bias_table = nn.Parameter(
            torch.zeros((2 * window - 1) ** 2, num_heads)
        )
        self.register_buffer("relative_position_index", relative_position_index(window))
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def position_bias(self) -> torch.Tensor:
        """Return the bias ``[heads, w*w, w*w]`` gathered from the table."""
        n = self.window * self.window
        bias = self.relative_position_bias_table[self.relative_position_index.reshape(-1)]
        return bias.reshape(n, n, self.num_heads).permute(2, 0, 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Attend within windows ``[B * nW, N, C]``; ``mask`` is ``[nW, N, N]`` or None."""
        bw, n, c = x.shape
        qkv = self.qkv(x).reshape(bw, n, 3, self.num_heads, c // self.num_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        bias = self.position_bias().unsqueeze(0)  # [1, heads, N, N]
        if mask is not None:
            nw = mask.shape[0]
            bias = (bias + mask.unsqueeze(1)).repeat(bw // nw, 1, 1, 1)  # [B * nW, heads, N, N]
        x = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype))
        return self.proj(x.transpose(1, 2).reshape(bw, n, c))


class SwinBlock(nn.Module):
    """Pre-norm (shifted-)window attention block; ``attn_mask`` is a buffer when shifted."""

    def __init__(
        self, dim: int, num_heads: int, resolution: int, window: int, shift: int, config: SwinConfig
    ) -> None:
        super().__init__()
        self.resolution = resolution
        self.window = window
        self.shift = shift
        self.norm1 = nn.LayerNorm(dim, eps=config.eps)
        self.attn = WindowAttention(dim, num_heads, window)
        self.norm2 = nn.LayerNorm(dim, eps=config.eps)
        self.mlp = Mlp(dim, int(dim * config.mlp_ratio))
        mask = shifted_window_mask(resolution, resolution, window, shift) if shift else None
        self.register_buffer("attn_mask", mask)
        self.attn_mask: torch.Tensor | None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the block to tokens ``[B, H, W, C]``."""
        b, h, w, c = x.shape
        y = self.norm1(x)
        if self.shift:
            y = torch.roll(y, shifts=(-self.shift, -self.shift), dims=(1, 2))
        win = window_partition(y, self.window).reshape(-1, self.window * self.window, c)
        win = self.attn(win, self.attn_mask)
        y = window_reverse(win.reshape(-1, self.window, self.window, c), self.window, h, w)
        if self.shift:
            y = torch.roll(y, shifts=(self.shift, self.shift), dims=(1, 2))
        x = x + y
        return x + self.mlp(self.norm2(x))


class PatchMerging(nn.Module):
    """Concatenate 2x2 neighbours ``[x(0,0), x(1,0), x(0,1), x(1,1)]``, ``norm``, ``reduction``."""

    def __init__(self, dim: int, *, eps: float = 1e-5) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(4 * dim, eps=eps)
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Merge ``[B, H, W, C]`` to ``[B, H/2, W/2, 2C]``."""
        parts = [x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]]
        return self.reduction(self.norm(torch.cat(parts, dim=-1)))


class SwinStage(nn.Module):
    """A stage (``layers.{i}``): ``blocks`` then, except for the last stage, ``downsample``."""

    def __init__(self, config: SwinConfig, stage: int) -> None:
        super().__init__()
        dim = config.embed_dim * 2**stage
        res = config.resolution(stage)
        window, shift = config.window_and_shift(stage)
        self.blocks = nn.ModuleList(
            SwinBlock(dim, config.num_heads[stage], res, window, shift if i % 2 else 0, config)
            for i in range(config.depths[stage])
        )
        last = stage == len(config.depths) - 1
        self.downsample = None if last else PatchMerging(dim, eps=config.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the blocks and the merge to ``[B, H, W, C]``."""
        for block in self.blocks:
            x = block(x)
        return x if self.downsample is None else self.downsample(x)


class SwinTransformer(nn.Module):
    """Swin Transformer encoder with timm 0.5 keys: ``forward(x) -> [B, embed_dim]``.

    Inputs are normalised images ``[B, 3, S, S]`` with ``S = config.image_size`` (the masks are
    built for that grid), cast to the parameters' dtype. The output is the mean of the final
    normalised tokens, in the parameters' dtype.

    Parameters
    ----------
    config : SwinConfig
        The hyperparameters.
    name : str, default "swin"
        The model name.
    mean, std : tuple of float, default ImageNet
        Per-channel normalisation constants.
    interpolation : {"bilinear", "bicubic"}, default "bilinear"
        The resize filter of the reference preprocessing.

    Attributes
    ----------
    config, name, embed_dim, image_size, mean, std, interpolation
        The configuration and the encoder attributes of :func:`tumorboard.models.load`.
    """

    def __init__(
        self,
        config: SwinConfig,
        *,
        name: str = "swin",
        mean: tuple[float, float, float] = IMAGENET_MEAN,
        std: tuple[float, float, float] = IMAGENET_STD,
        interpolation: Literal["bilinear", "bicubic"] = "bilinear",
    ) -> None:
        super().__init__()
        self.config = config
        set_encoder_metadata(self, name=name, image_size=config.image_size,
                             embed_dim=config.embed_dim * 2 ** (len(config.depths) - 1),
                             mean=mean, std=std, interpolation=interpolation)  # fmt: skip
        if config.stem == "conv":
            self.patch_embed: nn.Module = ConvStem(config.embed_dim, eps=config.eps)
        else:
            self.patch_embed = PatchEmbed(config.patch_size, config.embed_dim, eps=config.eps)
        self.layers = nn.ModuleList(SwinStage(config, i) for i in range(len(config.depths)))
        self.norm = nn.LayerNorm(self.embed_dim, eps=config.eps)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Initialise as timm does.

        Truncated normal (std 0.02) for linear weights and relative position bias tables, zero
        linear biases, unit LayerNorms; convolutions and batch norms keep torch's defaults.
        """
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, WindowAttention):
                nn.init.trunc_normal_(m.relative_position_bias_table, std=0.02)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """Return the final normalised tokens ``[B, h, w, embed_dim]``."""
        s = self.config.image_size
        if x.ndim != 4 or x.shape[1] != 3 or x.shape[2] != s or x.shape[3] != s:
            raise InvalidArgumentError(
                f"expected images [B, 3, {s}, {s}] (the attention masks are built for {s}), "
                f"got shape {list(x.shape)}"
            )
        x = self.patch_embed(x.to(self.norm.weight.dtype))
        for stage in self.layers:
            x = stage(x)
        return self.norm(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the token-mean embedding ``[B, embed_dim]``."""
        return self.forward_features(x).mean(dim=(1, 2))

    def extra_repr(self) -> str:
        """Return the name and size shown in the module's repr."""
        c = self.config
        return (
            f"name={self.name!r}, image_size={c.image_size}, stem={c.stem}, dim={c.embed_dim}, "
            f"depths={c.depths}, heads={c.num_heads}, window={c.window_size}"
        )


#: CTransPath: Swin-T (timm ``swin_tiny_patch4_window7_224``) with the conv stem, at 224
#: (Wang et al. 2022; TRIDENT builds it with ``img_size=224``).
CTRANSPATH = SwinConfig(
    image_size=224, embed_dim=96, depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24), window_size=7
)


def ctranspath() -> SwinTransformer:
    """Build CTransPath (:data:`CTRANSPATH`, TRIDENT ``ctranspath``) with random parameters.

    Returns
    -------
    SwinTransformer
        The encoder named ``"ctranspath"``: ``[B, 3, 224, 224] -> [B, 768]``, ImageNet
        normalisation, 27,520,038 parameters.
    """
    return SwinTransformer(CTRANSPATH, name="ctranspath")
