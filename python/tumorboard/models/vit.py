"""Vision Transformer in plain torch with timm-compatible state-dict keys.

The architecture is timm's ``VisionTransformer`` (huggingface/pytorch-image-models
``timm/models/vision_transformer.py``@aa4b5850) as UNI, UNI2-h and CONCH configure it (the UNI
configurations :data:`UNI2_H`, :data:`UNI`, :data:`UNI2_TINY` and their builders are at the end of
this module, CONCH's beside CONCH in :mod:`tumorboard.models.conch`): pre-norm blocks
``x + ls1(attn(norm1(x)))``, ``x + ls2(mlp(norm2(x)))``, LayerNorm eps 1e-6, qkv with bias,
optional LayerScale, GELU MLP or packed SwiGLU, optional register tokens, and a final ``norm``.
Parameter names follow timm (``cls_token``, ``reg_token``, ``pos_embed``, ``patch_embed.proj``,
``blocks.{i}.norm1``, ``attn.qkv``, ``attn.proj``, ``ls1.gamma``, ``norm2``, ``mlp.fc1``,
``mlp.fc2``, ``ls2.gamma``, ``norm``) so the official checkpoints load strictly.

Token layout: ``[CLS, registers..., patches...]``. With ``no_embed_class`` (UNI2-h) the position
embedding covers only the patch grid and is added before CLS and registers are prepended; without
it (UNI, CONCH) the CLS row is part of ``pos_embed`` and it is added after prepending.

Inputs of another size (``dynamic_img_size`` in timm) resample the patch-grid part of the position
embedding with :func:`resample_pos_embed` (bicubic with antialiasing, timm's
``resample_abs_pos_embed`` defaults); prefix rows are kept as they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from .._constants import IMAGENET_MEAN, IMAGENET_STD
from ..errors import InvalidArgumentError

__all__ = [
    "UNI",
    "UNI2_H",
    "UNI2_TINY",
    "GluMlp",
    "Mlp",
    "ViTConfig",
    "VisionTransformer",
    "resample_pos_embed",
    "uni",
    "uni2_h",
    "uni2_tiny",
]


@dataclass(frozen=True)
class ViTConfig:
    """Hyperparameters of a :class:`VisionTransformer`.

    Attributes
    ----------
    image_size : int
        The training input size (square); ``pos_embed`` covers its patch grid.
    patch_size : int
        Side of a patch in pixels.
    embed_dim : int
        Token width.
    depth : int
        Number of blocks.
    num_heads : int
        Attention heads per block.
    mlp_hidden : int
        ``fc1`` output features; for ``mlp="swiglu"`` both halves together (timm:
        ``int(embed_dim * mlp_ratio)``).
    mlp : {"gelu", "swiglu"}, default "gelu"
        ``"gelu"`` (``fc2(GELU(fc1(x)))``) or ``"swiglu"`` (timm ``SwiGLUPacked``:
        ``fc2(SiLU(h[:half]) * h[half:])`` with ``h = fc1(x)``).
    init_values : float or None, default None
        LayerScale initial value; ``None`` means no LayerScale (no ``ls*.gamma``).
    reg_tokens : int, default 0
        Number of register tokens (``reg_token`` parameter) after CLS.
    no_embed_class : bool, default False
        Position embedding for patch tokens only (timm ``no_embed_class``).
    eps : float, default 1e-6
        LayerNorm epsilon.
    """

    image_size: int
    patch_size: int
    embed_dim: int
    depth: int
    num_heads: int
    mlp_hidden: int
    mlp: Literal["gelu", "swiglu"] = "gelu"
    init_values: float | None = None
    reg_tokens: int = 0
    no_embed_class: bool = False
    eps: float = 1e-6

    def __post_init__(self) -> None:
        if self.image_size % self.patch_size:
            raise InvalidArgumentError(
                f"image_size {self.image_size} is not a multiple of patch_size {self.patch_size}"
            )
        if self.embed_dim % self.num_heads:
            raise InvalidArgumentError(
                f"embed_dim {self.embed_dim} is not divisible by num_heads {self.num_heads}"
            )
        if self.mlp not in ("gelu", "swiglu"):
            raise InvalidArgumentError(f"mlp: expected 'gelu' or 'swiglu', got {self.mlp!r}")
        if self.mlp == "swiglu" and self.mlp_hidden % 2:
            raise InvalidArgumentError(
                f"mlp_hidden: expected an even width for a SwiGLU MLP, got {self.mlp_hidden}"
            )

    @property
    def grid_size(self) -> int:
        """Patches per side at ``image_size``."""
        return self.image_size // self.patch_size

    @property
    def num_prefix_tokens(self) -> int:
        """CLS plus register tokens."""
        return 1 + self.reg_tokens


def resample_pos_embed(
    pos_embed: torch.Tensor,
    grid: tuple[int, int],
    *,
    num_prefix_tokens: int,
    mode: Literal["bicubic", "bilinear"] = "bicubic",
    antialias: bool = True,
) -> torch.Tensor:
    """Resample the patch-grid part of a position embedding to ``grid = (rows, cols)``.

    The square patch-grid part of a ``[1, prefix + g*g, D]`` position embedding is resampled; the
    first ``num_prefix_tokens`` rows are kept unchanged. The grid is interpolated as a
    ``D``-channel image in float32 and cast back. Defaults are timm's ``resample_abs_pos_embed``
    (bicubic, antialias on) used at run time for other input sizes; CONCH's loader resamples with
    ``mode="bilinear", antialias=False`` (mahmoodlab/CONCH
    ``conch/open_clip_custom/coca_model.py``, ``resize_pos_embed``@141cc09).

    Parameters
    ----------
    pos_embed : torch.Tensor
        ``[1, prefix + g*g, D]``.
    grid : tuple of int
        ``(rows, cols)`` of the target patch grid.
    num_prefix_tokens : int
        Leading rows (CLS, registers) kept unchanged.
    mode : {"bicubic", "bilinear"}, default "bicubic"
        Interpolation mode.
    antialias : bool, default True
        Antialias when shrinking.

    Returns
    -------
    torch.Tensor
        ``[1, prefix + rows*cols, D]`` (``pos_embed`` itself when the grid is unchanged).
    """
    if pos_embed.ndim != 3 or pos_embed.shape[0] != 1:
        raise InvalidArgumentError(
            f"pos_embed: expected shape [1, tokens, dim], got {list(pos_embed.shape)}"
        )
    n_grid = pos_embed.shape[1] - num_prefix_tokens
    side = math.isqrt(n_grid)
    if n_grid <= 0 or side * side != n_grid:
        raise InvalidArgumentError(
            f"pos_embed has {pos_embed.shape[1]} rows; with {num_prefix_tokens} prefix rows the "
            f"remaining {n_grid} do not form a square grid"
        )
    rows, cols = int(grid[0]), int(grid[1])
    if (rows, cols) == (side, side):
        return pos_embed
    prefix, patches = pos_embed[:, :num_prefix_tokens], pos_embed[:, num_prefix_tokens:]
    dim = pos_embed.shape[-1]
    img = patches.float().reshape(1, side, side, dim).permute(0, 3, 1, 2)
    img = F.interpolate(img, size=(rows, cols), mode=mode, antialias=antialias, align_corners=False)
    patches = img.permute(0, 2, 3, 1).reshape(1, rows * cols, dim).to(pos_embed.dtype)
    return torch.cat([prefix, patches], dim=1)


def fit_checkpoint_pos_embed(
    pos_embed: torch.Tensor, model_shape: torch.Size, *, grid: int, num_prefix_tokens: int
) -> torch.Tensor:
    """Fit a checkpoint's position embedding of another square grid to a model's.

    The CONCH loaders resample the grid rows bilinearly without antialiasing and keep the
    prefix rows (mahmoodlab/CONCH ``conch/open_clip_custom/factory.py``, ``load_checkpoint``
    @141cc09; TRIDENT ``model_zoo/conchv1_5/conchv1_5.py``@a91fa84). A tensor of another width,
    of the model's shape already, or whose grid is not square is returned unchanged, for the
    strict key check to report.

    Parameters
    ----------
    pos_embed : torch.Tensor
        The checkpoint's ``[1, prefix + g*g, D]`` position embedding.
    model_shape : torch.Size
        The model's ``pos_embed`` shape.
    grid : int
        The model's patch grid side.
    num_prefix_tokens : int
        Leading rows (CLS, registers) kept unchanged.

    Returns
    -------
    torch.Tensor
        The embedding to load.
    """
    if pos_embed.ndim != 3 or pos_embed.shape[2] != model_shape[2]:
        return pos_embed
    n_grid = pos_embed.shape[1] - num_prefix_tokens
    if pos_embed.shape[1] == model_shape[1] or n_grid <= 0 or math.isqrt(n_grid) ** 2 != n_grid:
        return pos_embed
    return resample_pos_embed(pos_embed, (grid, grid), num_prefix_tokens=num_prefix_tokens,
                              mode="bilinear", antialias=False)  # fmt: skip


class PatchEmbed(nn.Module):
    """Non-overlapping patches through a strided convolution (timm ``PatchEmbed.proj``)."""

    def __init__(self, patch_size: int, embed_dim: int) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Conv2d(3, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embed images ``[B, 3, H, W]`` to ``[B, D, rows, cols]``."""
        return self.proj(x)  # [B, D, rows, cols]


class Attention(nn.Module):
    """Multi-head self-attention with a packed ``qkv`` projection (timm ``Attention``)."""

    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attend over tokens ``[B, N, D]``; returns ``[B, N, D]``."""
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(b, n, c))


class LayerScale(nn.Module):
    """Per-channel scaling ``x * gamma`` (timm ``LayerScale``; key ``gamma``)."""

    def __init__(self, dim: int, init_values: float) -> None:
        super().__init__()
        self.init_values = init_values
        self.gamma = nn.Parameter(torch.full((dim,), float(init_values)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``x * gamma``."""
        return x * self.gamma


class Mlp(nn.Module):
    """``fc2(GELU(fc1(x)))`` with exact (erf) GELU (timm ``Mlp``)."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``fc2(GELU(fc1(x)))``."""
        return self.fc2(self.act(self.fc1(x)))


class GluMlp(nn.Module):
    """Packed SwiGLU (timm ``SwiGLUPacked`` = ``GluMlp(act=SiLU, gate_last=False)``).

    ``h = fc1(x)`` has ``hidden`` features; with ``a = h[..., :hidden//2]`` (first half) and
    ``b = h[..., hidden//2:]`` (second half) the output is ``fc2(SiLU(a) * b)``: the activation
    goes on the *first* half, which is what the UNI2-h weights were trained with (timm
    ``timm/layers/mlp.py``, ``SwiGLUPacked``@aa4b5850).
    """

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.SiLU()
        self.fc2 = nn.Linear(hidden // 2, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``fc2(SiLU(a) * b)`` with ``a, b`` the halves of ``fc1(x)``."""
        a, b = self.fc1(x).chunk(2, dim=-1)
        return self.fc2(self.act(a) * b)


class Block(nn.Module):
    """Pre-norm transformer block (timm ``Block``)."""

    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        dim = config.embed_dim
        self.norm1 = nn.LayerNorm(dim, eps=config.eps)
        self.attn = Attention(dim, config.num_heads)
        self.ls1 = (
            LayerScale(dim, config.init_values) if config.init_values is not None else nn.Identity()
        )
        self.norm2 = nn.LayerNorm(dim, eps=config.eps)
        mlp_cls = GluMlp if config.mlp == "swiglu" else Mlp
        self.mlp = mlp_cls(dim, config.mlp_hidden)
        self.ls2 = (
            LayerScale(dim, config.init_values) if config.init_values is not None else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the attention and MLP residual branches to tokens ``[B, N, D]``."""
        x = x + self.ls1(self.attn(self.norm1(x)))
        return x + self.ls2(self.mlp(self.norm2(x)))


def patch_input_size(image_size: int | None, default: int, patch_size: int) -> int:
    """Return the input side of a patch-grid encoder: ``image_size``, else ``default``.

    Raises
    ------
    InvalidArgumentError
        Not a positive multiple of ``patch_size``.
    """
    size = default if image_size is None else int(image_size)
    if size <= 0 or size % patch_size:
        raise InvalidArgumentError(
            f"image_size: expected a positive multiple of the patch size {patch_size}, "
            f"got {image_size}"
        )
    return size


def set_encoder_metadata(
    module: nn.Module,
    *,
    name: str,
    embed_dim: int,
    image_size: int,
    mean: tuple[float, ...],
    std: tuple[float, ...],
    interpolation: str,
) -> None:
    """Set the attributes every image encoder carries (:class:`tumorboard.models.ModelInfo`).

    ``name``, ``embed_dim`` and the preprocessing the embedding engine applies: ``image_size``,
    ``mean``, ``std`` (as floats) and ``interpolation``.
    """
    module.name = name
    module.embed_dim = embed_dim
    module.image_size = image_size
    module.mean = tuple(float(m) for m in mean)
    module.std = tuple(float(s) for s in std)
    module.interpolation = interpolation


class TrunkPreprocessing:
    """The preprocessing facts of an image encoder that wraps a :class:`VisionTransformer`.

    ``image_size``, ``mean``, ``std`` and ``interpolation`` (what the embedding engine resizes
    and normalises with) are read from the wrapped ViT, the attribute named by ``_trunk``.
    """

    _trunk = "trunk"

    @property
    def image_size(self) -> int:
        """Input side in pixels."""
        return getattr(self, self._trunk).image_size

    @property
    def mean(self) -> tuple[float, ...]:
        """Per-channel normalisation mean."""
        return getattr(self, self._trunk).mean

    @property
    def std(self) -> tuple[float, ...]:
        """Per-channel normalisation std."""
        return getattr(self, self._trunk).std

    @property
    def interpolation(self) -> str:
        """Resize filter of the preprocessing."""
        return getattr(self, self._trunk).interpolation


class VisionTransformer(nn.Module):
    """timm-compatible ViT encoder: ``forward(x) -> [B, embed_dim]``.

    ``forward`` returns the CLS token after the final norm (timm ``global_pool='token'``);
    :meth:`forward_features` returns all tokens. Inputs are ``[B, 3, H, W]`` normalised images
    with ``H`` and ``W`` multiples of the patch size; they are cast to the parameters' dtype. The
    output has the parameters' dtype.

    Parameters
    ----------
    config : ViTConfig
        The hyperparameters.
    name : str, default "vit"
        The model name.
    image_size : int or None, default None
        The input size preprocessing should produce (default ``config.image_size``).
    mean, std : tuple of float, default ImageNet
        Per-channel normalisation constants.
    interpolation : {"bilinear", "bicubic"}, default "bilinear"
        The resize filter of the reference preprocessing.

    Attributes
    ----------
    config : ViTConfig
        The :class:`ViTConfig`.
    name : str
        The model name (``"uni2-h"``, ...).
    embed_dim : int
        Output width.
    image_size : int
        The input size preprocessing should produce. It may differ from ``config.image_size``;
        the position embedding is then resampled at run time.
    mean, std : tuple of float
        Per-channel normalisation constants for inputs in [0, 1].
    interpolation : str
        The resize filter of the reference preprocessing.
    """

    def __init__(
        self,
        config: ViTConfig,
        *,
        name: str = "vit",
        image_size: int | None = None,
        mean: tuple[float, float, float] = IMAGENET_MEAN,
        std: tuple[float, float, float] = IMAGENET_STD,
        interpolation: Literal["bilinear", "bicubic"] = "bilinear",
    ) -> None:
        super().__init__()
        self.config = config
        size = patch_input_size(image_size, config.image_size, config.patch_size)
        set_encoder_metadata(self, name=name, embed_dim=config.embed_dim, image_size=size,
                             mean=mean, std=std, interpolation=interpolation)  # fmt: skip
        dim = config.embed_dim
        self.patch_embed = PatchEmbed(config.patch_size, dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.reg_token = (
            nn.Parameter(torch.zeros(1, config.reg_tokens, dim)) if config.reg_tokens else None
        )
        n_pos = config.grid_size**2 + (0 if config.no_embed_class else config.num_prefix_tokens)
        self.pos_embed = nn.Parameter(torch.zeros(1, n_pos, dim))
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.depth))
        self.norm = nn.LayerNorm(dim, eps=config.eps)
        # Position embeddings fixed for given grids while exporting (see tumorboard.models.onnx).
        self._pos_embed_fixed: dict[tuple[int, int], torch.Tensor] = {}
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Initialise as timm does.

        Truncated normal (std 0.02) for ``pos_embed`` and linear weights, zero biases, 1e-6
        normal for CLS and register tokens, LayerScale at ``init_values``.
        """
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.normal_(self.cls_token, std=1e-6)
        if self.reg_token is not None:
            nn.init.normal_(self.reg_token, std=1e-6)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    @property
    def num_prefix_tokens(self) -> int:
        """CLS plus register tokens."""
        return self.config.num_prefix_tokens

    def pos_embed_for_grid(self, rows: int, cols: int) -> torch.Tensor:
        """Return the position embedding used for a ``rows x cols`` patch grid."""
        fixed = self._pos_embed_fixed.get((rows, cols))
        if fixed is not None:
            return fixed
        prefix = 0 if self.config.no_embed_class else self.config.num_prefix_tokens
        return resample_pos_embed(self.pos_embed, (rows, cols), num_prefix_tokens=prefix)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """Return all tokens after the final norm: ``[B, 1 + reg_tokens + rows*cols, D]``."""
        if x.ndim != 4 or x.shape[1] != 3:
            raise InvalidArgumentError(f"expected images [B, 3, H, W], got shape {list(x.shape)}")
        p = self.config.patch_size
        if x.shape[2] % p or x.shape[3] % p:
            raise InvalidArgumentError(
                f"image height and width: expected multiples of the patch size {p}, "
                f"got {x.shape[2]}x{x.shape[3]}"
            )
        x = x.to(self.cls_token.dtype)
        x = self.patch_embed(x)
        rows, cols = x.shape[2], x.shape[3]
        x = x.flatten(2).transpose(1, 2)
        b = x.shape[0]
        pos = self.pos_embed_for_grid(int(rows), int(cols))
        prefix = [self.cls_token.expand(b, -1, -1)]
        if self.reg_token is not None:
            prefix.append(self.reg_token.expand(b, -1, -1))
        if self.config.no_embed_class:
            x = torch.cat([*prefix, x + pos], dim=1)
        else:
            x = torch.cat([*prefix, x], dim=1) + pos
        for block in self.blocks:
            x = block(x)
        return self.norm(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the CLS embedding ``[B, embed_dim]``; register and patch tokens are dropped."""
        return self.forward_features(x)[:, 0]

    def extra_repr(self) -> str:
        """Return the name and size shown in the module's repr."""
        c = self.config
        return (
            f"name={self.name!r}, image_size={self.image_size}, patch={c.patch_size}, "
            f"dim={c.embed_dim}, depth={c.depth}, heads={c.num_heads}, mlp={c.mlp}"
        )


# --- named configurations (timm's model-file pattern: configs beside the class) --------------

#: UNI2-h: timm ``vit_giant_patch14_224`` with every size overridden (1536 wide, 24 blocks,
#: 24 heads), packed SwiGLU with ``int(1536 * 5.33334) = 8192`` hidden features, LayerScale 1e-5,
#: 8 register tokens and a position embedding for the patches only (``timm_kwargs`` of
#: mahmoodlab/UNI ``uni/get_encoder/get_encoder.py``@42715ef; TRIDENT's ``uni_v2`` encoder,
#: mahmoodlab/TRIDENT ``trident/patch_encoder_models/load.py``@a91fa84).
UNI2_H = ViTConfig(
    image_size=224,
    patch_size=14,
    embed_dim=1536,
    depth=24,
    num_heads=24,
    mlp_hidden=int(1536 * 5.33334),
    mlp="swiglu",
    init_values=1e-5,
    reg_tokens=8,
    no_embed_class=True,
)
#: UNI (v1): timm ``vit_large_patch16_224`` with LayerScale 1e-5 (Chen et al., *Nature Medicine*
#: 2024, Methods; mahmoodlab/UNI ``README.md``@42715ef; TRIDENT's ``uni_v1`` encoder).
UNI = ViTConfig(
    image_size=224,
    patch_size=16,
    embed_dim=1024,
    depth=24,
    num_heads=16,
    mlp_hidden=4096,
    init_values=1e-5,
)
#: The UNI2-h architecture scaled down (same class and code paths) for tests and the demo.
UNI2_TINY = ViTConfig(
    image_size=224,
    patch_size=14,
    embed_dim=48,
    depth=2,
    num_heads=3,
    mlp_hidden=int(48 * 5.33334),
    mlp="swiglu",
    init_values=1e-5,
    reg_tokens=8,
    no_embed_class=True,
)


def _uni_family(config: ViTConfig, name: str, image_size: int | None) -> VisionTransformer:
    # UNI and UNI2-h share their preprocessing: ImageNet statistics, bilinear resize.
    return VisionTransformer(
        config,
        name=name,
        image_size=image_size,
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
        interpolation="bilinear",
    )


def uni2_h(*, image_size: int | None = None) -> VisionTransformer:
    """Build UNI2-h (:data:`UNI2_H`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        The input size preprocessing produces, a multiple of 14. ``None`` (default) means the
        native 224; other sizes resample the position embedding at run time.

    Returns
    -------
    VisionTransformer
        The encoder named ``"uni2-h"``: ``[B, 3, H, W] -> [B, 1536]``, ImageNet normalisation.

    Raises
    ------
    ValueError
        If ``image_size`` is not a positive multiple of 14.
    """
    return _uni_family(UNI2_H, "uni2-h", image_size)


def uni(*, image_size: int | None = None) -> VisionTransformer:
    """Build UNI (v1, :data:`UNI`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        The input size preprocessing produces, a multiple of 16. ``None`` (default) means the
        native 224; other sizes resample the position embedding at run time.

    Returns
    -------
    VisionTransformer
        The encoder named ``"uni"``: ``[B, 3, H, W] -> [B, 1024]``, ImageNet normalisation.

    Raises
    ------
    ValueError
        If ``image_size`` is not a positive multiple of 16.
    """
    return _uni_family(UNI, "uni", image_size)


def uni2_tiny(*, image_size: int | None = None) -> VisionTransformer:
    """Build the scaled-down UNI2-h (:data:`UNI2_TINY`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        The input size preprocessing produces, a multiple of 14. ``None`` (default) means 224.

    Returns
    -------
    VisionTransformer
        The encoder named ``"uni2-tiny"``: ``[B, 3, H, W] -> [B, 48]``, ImageNet normalisation.

    Raises
    ------
    ValueError
        If ``image_size`` is not a positive multiple of 14.
    """
    return _uni_family(UNI2_TINY, "uni2-tiny", image_size)
