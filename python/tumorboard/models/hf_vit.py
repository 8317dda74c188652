"""Vision Transformers in plain torch with Hugging Face ``transformers`` checkpoint keys.

Two families of published checkpoints use the Hugging Face layout rather than timm's:

* ``ViTModel`` (huggingface/transformers ``src/transformers/models/vit/modeling_vit.py``):
  pre-norm blocks ``x + attn(layernorm_before(x))``,
  ``x + output(GELU(intermediate(layernorm_after(x))))``, no LayerScale; keys
  ``embeddings.{cls_token, position_embeddings, patch_embeddings.projection}``,
  ``encoder.layer.{i}.attention.attention.{query,key,value}``,
  ``encoder.layer.{i}.attention.output.dense``, ``encoder.layer.{i}.layernorm_before``,
  ``encoder.layer.{i}.intermediate.dense``, ``encoder.layer.{i}.output.dense``,
  ``encoder.layer.{i}.layernorm_after``, ``layernorm``. Used by Phikon (owkin/phikon).
* ``Dinov2Model`` / ``Dinov2WithRegistersModel`` (``models/dinov2/modeling_dinov2.py``,
  ``models/dinov2_with_registers/modeling_dinov2_with_registers.py``): blocks
  ``x + layer_scale1(attn(norm1(x)))``, ``x + layer_scale2(mlp(norm2(x)))`` with LayerScale
  ``layer_scale{1,2}.lambda1``, a GELU MLP (``mlp.fc1``, ``mlp.fc2``) or a SwiGLU MLP
  (``mlp.weights_in`` packing gate then value, ``mlp.weights_out``), a ``embeddings.mask_token``
  (unused at inference, present in the checkpoints) and, with registers,
  ``embeddings.register_tokens``. Used by Phikon-v2 (owkin/phikon-v2).

The keys are those of the published checkpoint files (the ``transformers`` 4.x module layout).
``transformers`` 5 renames its modules (``q_proj``, ``o_proj``, ``gate_proj``/``up_proj``, ...)
and converts these checkpoint keys when it loads them (``conversion_mapping.py``, entries
``ViTModel``, ``Dinov2Model``, ``Dinov2WithRegistersModel``); the unit tests load the same file
into both and compare outputs.

Token layout: ``[CLS, registers..., patches...]``. The position embedding covers CLS and the
training patch grid and is added before the registers are inserted (registers carry no position).
Inputs of another size resample the patch part of the position embedding with bicubic
interpolation (``align_corners=False``) as the Hugging Face models do: ``ViTModel``
(``interpolate_pos_encoding=True``) in the parameters' dtype without antialiasing,
``Dinov2Model`` in float32 without antialiasing, ``Dinov2WithRegistersModel`` in float32 with
antialiasing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from .._constants import IMAGENET_MEAN, IMAGENET_STD
from ..errors import InvalidArgumentError
from .vit import patch_input_size, set_encoder_metadata

__all__ = ["HFViTConfig", "HFVisionTransformer", "dinov2_swiglu_hidden"]

Family = Literal["vit", "dinov2"]
Pooling = Literal["cls", "cls+mean"]


def dinov2_swiglu_hidden(hidden_size: int, mlp_ratio: float) -> int:
    """Return the SwiGLU hidden width of a Hugging Face DINOv2 block.

    Two thirds of ``int(hidden_size * mlp_ratio)``, rounded up to a multiple of 8
    (``Dinov2SwiGLUFFN`` in ``transformers/models/dinov2/modeling_dinov2.py``; the same rule as
    facebookresearch/dinov2 ``SwiGLUFFNFused``). ``mlp.weights_in`` has twice this many rows.

    Parameters
    ----------
    hidden_size : int
        Token width.
    mlp_ratio : float
        The configuration's ``mlp_ratio``.

    Returns
    -------
    int
        The width of the gate (and of the value) half.
    """
    return (int(int(hidden_size * mlp_ratio) * 2 / 3) + 7) // 8 * 8


@dataclass(frozen=True)
class HFViTConfig:
    """Hyperparameters of a :class:`HFVisionTransformer` (names follow the HF configs).

    Attributes
    ----------
    family : {"vit", "dinov2"}
        ``"vit"``: ``ViTModel`` block names; ``"dinov2"``: ``Dinov2Model`` /
        ``Dinov2WithRegistersModel`` block names (with LayerScale).
    image_size : int
        The configuration's ``image_size``; ``embeddings.position_embeddings`` covers its grid.
    patch_size : int
        Side of a patch in pixels.
    hidden_size : int
        Token width.
    num_hidden_layers : int
        Number of blocks.
    num_attention_heads : int
        Attention heads per block.
    mlp_hidden : int
        The MLP width: ``intermediate_size`` for ``"vit"``, ``int(hidden_size * mlp_ratio)`` for
        ``"dinov2"`` (the SwiGLU width is derived from it with :func:`dinov2_swiglu_hidden`).
    layer_norm_eps : float
        LayerNorm epsilon.
    use_swiglu_ffn : bool, default False
        SwiGLU MLP (``mlp.weights_in`` / ``mlp.weights_out``; ``"dinov2"`` only).
    num_register_tokens : int, default 0
        Register tokens (``embeddings.register_tokens``; ``"dinov2"`` only).
    use_mask_token : bool, default True
        Whether the checkpoint carries ``embeddings.mask_token`` (``"dinov2"``; ``ViTModel`` has
        none by default).
    pooling : {"cls", "cls+mean"}, default "cls"
        The embedding: the final-norm class token, or it concatenated with the mean of the patch
        tokens (registers excluded), which doubles the width.
    """

    family: Family
    image_size: int
    patch_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    mlp_hidden: int
    layer_norm_eps: float
    use_swiglu_ffn: bool = False
    num_register_tokens: int = 0
    use_mask_token: bool = True
    pooling: Pooling = "cls"

    def __post_init__(self) -> None:
        if self.family not in ("vit", "dinov2"):
            raise InvalidArgumentError(f"family: expected 'vit' or 'dinov2', got {self.family!r}")
        if self.image_size % self.patch_size:
            raise InvalidArgumentError(
                f"image_size {self.image_size} is not a multiple of patch_size {self.patch_size}"
            )
        if self.hidden_size % self.num_attention_heads:
            raise InvalidArgumentError(
                f"hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                f"{self.num_attention_heads}"
            )
        if self.family == "vit" and (self.use_swiglu_ffn or self.num_register_tokens):
            raise InvalidArgumentError("ViTModel has no SwiGLU MLP and no register tokens")
        if self.pooling not in ("cls", "cls+mean"):
            raise InvalidArgumentError(
                f"pooling: expected 'cls' or 'cls+mean', got {self.pooling!r}"
            )

    @property
    def grid_size(self) -> int:
        """Patches per side at ``image_size``."""
        return self.image_size // self.patch_size

    @property
    def embed_dim(self) -> int:
        """The output width (``hidden_size``, doubled for ``"cls+mean"``)."""
        return self.hidden_size * (2 if self.pooling == "cls+mean" else 1)


class PatchEmbeddings(nn.Module):
    """Strided convolution ``projection`` (``*PatchEmbeddings``)."""

    def __init__(self, patch_size: int, hidden_size: int) -> None:
        super().__init__()
        self.projection = nn.Conv2d(3, hidden_size, kernel_size=patch_size, stride=patch_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embed images ``[B, 3, H, W]`` to ``[B, D, rows, cols]``."""
        return self.projection(x)


class Embeddings(nn.Module):
    """CLS, optional mask and register tokens, position and patch embeddings."""

    def __init__(self, config: HFViTConfig) -> None:
        super().__init__()
        self.config = config
        dim = config.hidden_size
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        dinov2 = config.family == "dinov2"
        self.mask_token = (
            nn.Parameter(torch.zeros(1, dim)) if dinov2 and config.use_mask_token else None
        )
        self.patch_embeddings = PatchEmbeddings(config.patch_size, dim)
        self.position_embeddings = nn.Parameter(torch.zeros(1, config.grid_size**2 + 1, dim))
        self.register_tokens = (
            nn.Parameter(torch.zeros(1, config.num_register_tokens, dim))
            if config.num_register_tokens
            else None
        )
        # Position embeddings fixed for given grids while exporting (see tumorboard.models.onnx).
        self._pos_embed_fixed: dict[tuple[int, int], torch.Tensor] = {}

    def position_embeddings_for_grid(self, rows: int, cols: int) -> torch.Tensor:
        """Return the position embedding ``[1, 1 + rows*cols, D]`` for a patch grid.

        Parameters
        ----------
        rows, cols : int
            The patch grid of the input.

        Returns
        -------
        torch.Tensor
            The stored embedding when the grid is the training grid, else its patch part
            resampled bicubically as the Hugging Face model of this family does (module
            docstring).
        """
        fixed = self._pos_embed_fixed.get((rows, cols))
        if fixed is not None:
            return fixed
        pos = self.position_embeddings
        side = self.config.grid_size
        if (rows, cols) == (side, side):
            return pos
        dim = pos.shape[-1]
        grid = pos[:, 1:].reshape(1, side, side, dim).permute(0, 3, 1, 2)
        if self.config.family == "vit":
            grid = F.interpolate(grid, size=(rows, cols), mode="bicubic", align_corners=False)
        else:
            grid = F.interpolate(
                grid.float(),
                size=(rows, cols),
                mode="bicubic",
                align_corners=False,
                antialias=self.register_tokens is not None,
            ).to(pos.dtype)
        grid = grid.permute(0, 2, 3, 1).reshape(1, rows * cols, dim)
        return torch.cat([pos[:, :1], grid], dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the token sequence ``[B, 1 + registers + rows*cols, D]``."""
        x = self.patch_embeddings(x)
        rows, cols = int(x.shape[2]), int(x.shape[3])
        x = x.flatten(2).transpose(1, 2)
        b = x.shape[0]
        x = torch.cat([self.cls_token.expand(b, -1, -1), x], dim=1)
        x = x + self.position_embeddings_for_grid(rows, cols)
        if self.register_tokens is not None:
            x = torch.cat([x[:, :1], self.register_tokens.expand(b, -1, -1), x[:, 1:]], dim=1)
        return x


class SelfAttention(nn.Module):
    """Separate ``query``, ``key``, ``value`` projections (``attention.attention``)."""

    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attend over ``[B, N, D]``; returns the concatenated heads ``[B, N, D]``."""
        b, n, d = x.shape
        h = self.num_heads

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(b, n, h, d // h).transpose(1, 2)

        out = F.scaled_dot_product_attention(
            heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        )
        return out.transpose(1, 2).reshape(b, n, d)


class Dense(nn.Module):
    """A module holding one ``dense`` linear layer (``attention.output``, ``intermediate``, ...)."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.dense = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``dense(x)``."""
        return self.dense(x)


class Attention(nn.Module):
    """``attention.attention`` (projections) then ``attention.output.dense``."""

    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.attention = SelfAttention(dim, num_heads)
        self.output = Dense(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``output.dense(attention(x))``."""
        return self.output(self.attention(x))


class LayerScale(nn.Module):
    """Per-channel scale ``x * lambda1`` (``Dinov2LayerScale``)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.lambda1 = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``x * lambda1``."""
        return x * self.lambda1


class GeluMlp(nn.Module):
    """``fc2(GELU(fc1(x)))`` with exact GELU (``Dinov2MLP``, ``hidden_act="gelu"``)."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``fc2(GELU(fc1(x)))``."""
        return self.fc2(F.gelu(self.fc1(x)))


class SwiGLU(nn.Module):
    """``weights_out(SiLU(a) * b)`` with ``a, b`` the first and second half of ``weights_in(x)``.

    The checkpoint layout of HF DINOv2's ``Dinov2SwiGLUFFN`` (transformers 4.x); transformers 5
    splits ``weights_in`` along its rows into ``gate_proj`` (first half, activated) and
    ``up_proj`` (second half) when it loads such a file.
    """

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.weights_in = nn.Linear(dim, 2 * hidden)
        self.weights_out = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``weights_out(SiLU(a) * b)``."""
        a, b = self.weights_in(x).chunk(2, dim=-1)
        return self.weights_out(F.silu(a) * b)


class ViTLayer(nn.Module):
    """A ``ViTModel`` block: ``layernorm_before``, attention, ``layernorm_after``, GELU MLP."""

    def __init__(self, config: HFViTConfig) -> None:
        super().__init__()
        dim, eps = config.hidden_size, config.layer_norm_eps
        self.attention = Attention(dim, config.num_attention_heads)
        self.intermediate = Dense(dim, config.mlp_hidden)
        self.output = Dense(config.mlp_hidden, dim)
        self.layernorm_before = nn.LayerNorm(dim, eps=eps)
        self.layernorm_after = nn.LayerNorm(dim, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply both residual branches to ``[B, N, D]``."""
        x = x + self.attention(self.layernorm_before(x))
        return x + self.output(F.gelu(self.intermediate(self.layernorm_after(x))))


class Dinov2Layer(nn.Module):
    """A DINOv2 block: ``norm1``, attention, ``layer_scale1``, ``norm2``, MLP, ``layer_scale2``."""

    def __init__(self, config: HFViTConfig) -> None:
        super().__init__()
        dim, eps = config.hidden_size, config.layer_norm_eps
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attention = Attention(dim, config.num_attention_heads)
        self.layer_scale1 = LayerScale(dim)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp: nn.Module
        if config.use_swiglu_ffn:
            self.mlp = SwiGLU(dim, dinov2_swiglu_hidden(dim, config.mlp_hidden / dim))
        else:
            self.mlp = GeluMlp(dim, config.mlp_hidden)
        self.layer_scale2 = LayerScale(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply both residual branches to ``[B, N, D]``."""
        x = x + self.layer_scale1(self.attention(self.norm1(x)))
        return x + self.layer_scale2(self.mlp(self.norm2(x)))


class Encoder(nn.Module):
    """The ``encoder.layer`` list."""

    def __init__(self, config: HFViTConfig) -> None:
        super().__init__()
        block = ViTLayer if config.family == "vit" else Dinov2Layer
        self.layer = nn.ModuleList(block(config) for _ in range(config.num_hidden_layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Run the blocks in order."""
        for layer in self.layer:
            x = layer(x)
        return x


#: ``ViTModel`` pooler keys some checkpoints carry; unused by the embedding, dropped at load.
VIT_POOLER_KEYS = ("pooler.dense.weight", "pooler.dense.bias")


class HFVisionTransformer(nn.Module):
    """A ViT with Hugging Face checkpoint keys: ``forward(x) -> [B, embed_dim]``.

    ``forward`` returns the pooled embedding of :attr:`HFViTConfig.pooling` computed from the
    final-``layernorm`` tokens (the HF model's ``last_hidden_state``); :meth:`forward_features`
    returns all tokens. Inputs are normalised images ``[B, 3, H, W]`` with ``H`` and ``W``
    multiples of the patch size, cast to the parameters' dtype.

    Parameters
    ----------
    config : HFViTConfig
        The hyperparameters.
    name : str, default "hf-vit"
        The model name.
    image_size : int or None, default None
        The input size preprocessing should produce (default ``config.image_size``); other sizes
        than the configuration's resample the position embedding at run time.
    mean, std : tuple of float, default ImageNet
        Per-channel normalisation constants for inputs in [0, 1].
    interpolation : {"bilinear", "bicubic"}, default "bilinear"
        The resize filter of the reference preprocessing.

    Attributes
    ----------
    config : HFViTConfig
        The configuration.
    name, embed_dim, image_size, mean, std, interpolation
        The encoder metadata the registry promises (:class:`tumorboard.models.ModelInfo`).
    """

    def __init__(
        self,
        config: HFViTConfig,
        *,
        name: str = "hf-vit",
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
        self.embeddings = Embeddings(config)
        self.encoder = Encoder(config)
        self.layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Initialise as the HF models do (``_init_weights``).

        Truncated normal (std 0.02) for linear and convolution weights, the position
        embedding and the CLS token; zero biases, mask and register tokens; LayerScale 1.
        """
        emb = self.embeddings
        nn.init.trunc_normal_(emb.position_embeddings, std=0.02)
        nn.init.trunc_normal_(emb.cls_token, std=0.02)
        for token in (emb.mask_token, emb.register_tokens):
            if token is not None:
                nn.init.zeros_(token)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    @property
    def num_prefix_tokens(self) -> int:
        """CLS plus register tokens."""
        return 1 + self.config.num_register_tokens

    def adapt_state_dict(self, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Drop the ``ViTModel`` pooler (``pooler.dense.*``) if the checkpoint has it.

        The pooler (``tanh(dense(CLS))``) is not part of any embedding served here (TRIDENT
        builds Phikon with ``add_pooling_layer=False``); every other key is checked strictly.

        Parameters
        ----------
        state : Mapping of str to torch.Tensor
            The checkpoint's state dict.

        Returns
        -------
        dict of str to torch.Tensor
            The state dict without the pooler keys.
        """
        if self.config.family != "vit":
            return dict(state)
        return {k: v for k, v in state.items() if k not in VIT_POOLER_KEYS}

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """Return all tokens after the final ``layernorm``: ``[B, prefix + rows*cols, D]``."""
        if x.ndim != 4 or x.shape[1] != 3:
            raise InvalidArgumentError(f"expected images [B, 3, H, W], got shape {list(x.shape)}")
        p = self.config.patch_size
        if x.shape[2] % p or x.shape[3] % p:
            raise InvalidArgumentError(
                f"image height and width: expected multiples of the patch size {p}, "
                f"got {x.shape[2]}x{x.shape[3]}"
            )
        x = x.to(self.embeddings.cls_token.dtype)
        return self.layernorm(self.encoder(self.embeddings(x)))

    def pool(self, tokens: torch.Tensor) -> torch.Tensor:
        """Pool final tokens ``[B, N, D]`` into the embedding ``[B, embed_dim]``."""
        cls = tokens[:, 0]
        if self.config.pooling == "cls":
            return cls
        return torch.cat([cls, tokens[:, self.num_prefix_tokens :].mean(dim=1)], dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the embedding ``[B, embed_dim]`` (:attr:`HFViTConfig.pooling`)."""
        return self.pool(self.forward_features(x))

    def extra_repr(self) -> str:
        """Return the name and size shown in the module's repr."""
        c = self.config
        return (
            f"name={self.name!r}, family={c.family}, image_size={self.image_size}, "
            f"patch={c.patch_size}, dim={c.hidden_size}, depth={c.num_hidden_layers}, "
            f"heads={c.num_attention_heads}, swiglu={c.use_swiglu_ffn}, "
            f"registers={c.num_register_tokens}, pooling={c.pooling}"
        )
