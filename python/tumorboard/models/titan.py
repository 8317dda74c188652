"""TITAN's slide encoder: a ViT over a 2-D grid of CONCH v1.5 patch features with 2-D ALiBi.

TITAN (Ding et al., "Multimodal Whole Slide Foundation Model for Pathology", arXiv 2411.19666,
2024; *Nature Medicine* 2025) embeds a slide from the CONCH v1.5 features (768-d) of its 512 px
patches at 20x. Only the vision encoder is built here: the slide embedding of
``Titan.encode_slide_from_patch_features`` (Hugging Face MahmoodLab/TITAN, remote code
``modeling_titan.py``, ``vision_transformer.py`` and ``configuration_titan.py``; TRIDENT runs it
in ``TitanSlideEncoder``, mahmoodlab/TRIDENT ``trident/slide_encoder_models/load.py``@04e4c2b,
in float16 autocast with a 768-d output). For one slide with patch features ``f_n`` and level-0
coordinates ``c_n = (x_n, y_n)``:

1. **Grid** (``preprocess_features``): ``g_n = floor((c_n - min_m c_m) / patch_size_level0)``
   (``patch_size_level0`` is the patch side at level 0, 512 for a 20x slide, 1024 for 40x). The
   features are summed into the cells of an ``H x W`` grid (two patches of one cell add up),
   and the cells whose summed vector is all zeros are background and dropped. The tokens are the
   remaining cells in row-major order of ``(g_x, g_y)``: so the order of the input patches does
   not matter, only their coordinates do.
2. **Patch embedding**: ``GELU(W_e f + b_e)`` (``patch_embed.0``, 768 -> width), a class token
   (``cls_token``) in front; no positional embedding.
3. **Transformer**: ``depth`` pre-norm blocks (LayerNorm eps 1e-6, ``norm1``/``norm2``),
   multi-head self-attention (``attn.qkv`` with bias, ``attn.proj``) and a GELU MLP
   (``mlp.fc1``, ``mlp.fc2``, ratio 4), under ``blocks.modules_list.{i}``. The attention logits
   get the 2-D ALiBi bias ``-m_h * ||g_i - g_j||_2`` (Euclidean distance on the grid) between
   two patch tokens and 0 to and from the class token; the slopes ``m_h`` are ALiBi's (Press et
   al., ICLR 2022): ``2^(-8 h / n)`` for ``h = 1..n`` when ``n`` is a power of two, else those
   of the nearest lower power of two followed by every other slope of twice that
   (:func:`alibi_slopes`; 12 heads: ``2^-1 .. 2^-8`` then ``2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5``).
4. **Final norm** ``norm`` (LayerNorm eps 1e-6) on every token.
5. **Pooling**: the contrastive attentional pooler of TITAN's CoCa stage
   (``attn_pool_contrastive``): one learned query (``query`` [1, width]), ``ln_q`` on it and
   ``ln_k`` on the tokens (LayerNorm eps 1e-5), an 8-head ``nn.MultiheadAttention``
   (``attn.in_proj_weight``, ``attn.out_proj``) over the class and patch tokens. Its output,
   768-d, is the slide embedding (``no_proj=True``: the projection ``proj`` [width, width] that
   TITAN's zero-shot path applies, :meth:`TitanSlideEncoder.project`, is not part of it).

The published configuration (``TitanVisionConfig`` defaults; ``TitanConfig`` sets
``attentional_pool="parallel"``): width 768, depth 6, 12 heads, MLP ratio 4, qkv bias, input
768, pooler 8 heads. With parallel pooling, the 128-query captioning pooler ``attn_pool`` feeds
only the report decoder and is not part of the embedding.

Checkpoint keys: the Hugging Face model's state dict has ``vision_encoder.*`` (this module, same
names) and ``text_encoder.*`` (the CoCa text tower). :meth:`TitanSlideEncoder.adapt_state_dict`
drops every key outside ``vision_encoder.`` and the captioning pooler
``vision_encoder.attn_pool.*``; every other key is loaded strictly.

Many slides at once (:meth:`TitanSlideEncoder.forward_varlen`): slides stay concatenated without
padding. Every per-token layer (embedding, norms, qkv, projections, MLP, pooler keys) runs once
over all tokens of the batch; only the attention runs per slide, over blocks of query rows whose
ALiBi bias is computed for that block (memory ``heads x rows x N`` instead of ``heads x N x N``).
The result equals one slide at a time, up to float rounding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InvalidArgumentError
from .abmil import _check_offsets, _padded_rows

__all__ = ["TITAN", "TITAN_TINY", "TitanSlideEncoder", "alibi_bias", "alibi_slopes",
           "titan", "titan_grid"]  # fmt: skip

#: The published configuration (``TitanVisionConfig`` defaults of MahmoodLab/TITAN).
TITAN = {"in_dim": 768, "width": 768, "depth": 6, "n_heads": 12, "mlp_ratio": 4.0,
         "pool_heads": 8}  # fmt: skip
#: A small configuration of the same classes for tests (width divisible by 12 and 8 heads).
TITAN_TINY = {"in_dim": 16, "width": 48, "depth": 2, "n_heads": 12, "mlp_ratio": 2.0,
              "pool_heads": 8}  # fmt: skip

#: Attention logits held at once per slide and layer (heads x query rows x keys).
_BLOCK_ELEMENTS = 1 << 25
#: A slide's token-to-token distances are computed once for all layers up to this many
#: entries (8k tokens); a larger slide recomputes them per block of query rows and layer.
_DIST_ELEMENTS = 1 << 26


def _slopes(n: int) -> list[float]:
    if math.log2(n).is_integer():
        p = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
        return [p * p**i for i in range(n)]
    low = 2 ** math.floor(math.log2(n))
    return _slopes(low) + _slopes(2 * low)[0::2][: n - low]


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Return ALiBi's head slopes ``m_h`` (float32 ``[n_heads]``; module docstring, step 3)."""
    if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads < 1:
        raise InvalidArgumentError(f"n_heads: expected a positive int, got {n_heads!r}")
    return torch.tensor(_slopes(n_heads), dtype=torch.float32, device="cpu")


def titan_grid(coords: torch.Tensor, patch_size_level0: int) -> tuple[torch.Tensor, int]:
    """Place patches on TITAN's grid.

    Parameters
    ----------
    coords : torch.Tensor
        ``[N, 2]`` integer level-0 coordinates (x, y) of the patches' top-left corners.
    patch_size_level0 : int
        The grid unit: the patch side at level 0.

    Returns
    -------
    tuple
        ``(grid [N, 2] int64, W)``: each patch's ``(g_x, g_y)`` and the grid height along
        ``g_y`` (the cell index is ``g_x * W + g_y``, TITAN's row-major order).
    """
    if coords.ndim != 2 or coords.shape[1] != 2:
        raise InvalidArgumentError(
            f"coords: expected an [N, 2] tensor, got shape {list(coords.shape)}"
        )
    if coords.dtype.is_floating_point:
        raise InvalidArgumentError(f"coords: expected integer coordinates, got {coords.dtype}")
    size = int(patch_size_level0)
    if size < 1:
        raise InvalidArgumentError(
            f"patch_size_level0: expected a positive int, got {patch_size_level0!r}"
        )
    c = coords.to(torch.long)
    if c.shape[0] == 0:
        return c.new_zeros((0, 2)), 1
    grid = torch.div(c - c.min(dim=0).values, size, rounding_mode="floor")
    return grid, int(grid[:, 1].max()) + 1


def alibi_bias(grid: torch.Tensor, slopes: torch.Tensor) -> torch.Tensor:
    """TITAN's attention bias for a class token followed by patch tokens at ``grid`` positions.

    Parameters
    ----------
    grid : torch.Tensor
        ``[N, 2]`` grid positions of the patch tokens.
    slopes : torch.Tensor
        ``[H]`` head slopes (:func:`alibi_slopes`).

    Returns
    -------
    torch.Tensor
        ``[H, N + 1, N + 1]`` float32: ``-m_h * ||g_i - g_j||`` between patch tokens, 0 in the
        class token's row and column (distances in float64, then float32, as TITAN's numpy).
    """
    return _bias_rows(grid, slopes, 0, grid.shape[0] + 1)


def _distances(grid: torch.Tensor, r0: int, r1: int) -> torch.Tensor:
    """Grid distances of token rows ``r0:r1`` to every token, float32 ``[r1 - r0, N + 1]``.

    Row and column 0 (the class token) are 0; computed in float64, as TITAN's numpy, then
    rounded to float32.
    """
    n = grid.shape[0]
    out = torch.zeros((r1 - r0, n + 1), dtype=torch.float32, device=grid.device)
    a = max(r0, 1)
    if r1 > a and n:
        g = grid.to(torch.float64)
        d = torch.cdist(g[a - 1 : r1 - 1], g, compute_mode="donot_use_mm_for_euclid_dist")
        out[a - r0 :, 1:] = d.to(torch.float32)
    return out


def _bias_rows(grid: torch.Tensor, slopes: torch.Tensor, r0: int, r1: int,
               dist: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
    """Rows ``r0:r1`` of :func:`alibi_bias`, from ``dist`` (all rows of :func:`_distances`)."""
    d = _distances(grid, r0, r1) if dist is None else dist[r0:r1]
    return d[None] * slopes.to(d.device)[:, None, None] * -1.0


class _Attention(nn.Module):
    def __init__(self, width: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(width, 3 * width, bias=True)
        self.proj = nn.Linear(width, width)


class _Mlp(nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class _Block(nn.Module):
    def __init__(self, width: int, n_heads: int, hidden: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width, eps=1e-6)
        self.attn = _Attention(width, n_heads)
        self.norm2 = nn.LayerNorm(width, eps=1e-6)
        self.mlp = _Mlp(width, hidden)


class _Blocks(nn.Module):
    """TITAN's ``CustomSequential``: the blocks under ``modules_list``."""

    def __init__(self, blocks: list[_Block]) -> None:
        super().__init__()
        self.modules_list = nn.ModuleList(blocks)


class _AttentionalPooler(nn.Module):
    """CoCa's attentional pooler: learned queries attend over the tokens (one query here)."""

    def __init__(self, width: int, n_heads: int, n_queries: int = 1) -> None:
        super().__init__()
        self.query = nn.Parameter(torch.randn(n_queries, width))
        self.attn = nn.MultiheadAttention(width, n_heads)
        self.ln_q = nn.LayerNorm(width)
        self.ln_k = nn.LayerNorm(width)


class _TitanVision(nn.Module):
    """The modules of TITAN's ``vision_encoder`` that the slide embedding uses."""

    def __init__(self, in_dim: int, width: int, depth: int, n_heads: int, mlp_ratio: float,
                 pool_heads: int) -> None:  # fmt: skip
        super().__init__()
        self.patch_embed = nn.Sequential(nn.Linear(in_dim, width), nn.GELU())
        self.cls_token = nn.Parameter(torch.zeros(1, 1, width))
        hidden = int(width * mlp_ratio)
        self.blocks = _Blocks([_Block(width, n_heads, hidden) for _ in range(depth)])
        self.norm = nn.LayerNorm(width, eps=1e-6)
        self.attn_pool_contrastive = _AttentionalPooler(width, pool_heads)
        self.proj = nn.Parameter(width**-0.5 * torch.randn(width, width))


class TitanSlideEncoder(nn.Module):
    """TITAN's slide embedding from CONCH v1.5 patch features and coordinates (module docstring).

    Keys (``vision_encoder.`` prefix, the Hugging Face checkpoint's): ``patch_embed.0.*``
    ``[width, in_dim]``, ``cls_token`` ``[1, 1, width]``,
    ``blocks.modules_list.{i}.{norm1,norm2}.*``, ``...attn.qkv.*`` ``[3 width, width]``,
    ``...attn.proj.*``, ``...mlp.fc1.*`` ``[mlp_ratio width, width]``, ``...mlp.fc2.*``,
    ``norm.*``, ``attn_pool_contrastive.{query,attn.in_proj_weight,attn.in_proj_bias,
    attn.out_proj.weight,attn.out_proj.bias,ln_q.*,ln_k.*}`` and ``proj`` ``[width, width]``.

    Parameters
    ----------
    in_dim : int, default 768
        The patch feature width (CONCH v1.5: 768).
    width : int, default 768
        The transformer width (= the embedding width).
    depth : int, default 6
        Transformer blocks.
    n_heads : int, default 12
        Attention heads (ALiBi slopes per head).
    mlp_ratio : float, default 4.0
        MLP hidden width over ``width``.
    pool_heads : int, default 8
        Heads of the attentional pooler.
    """

    #: Tokens per varlen forward the embedding pipeline packs slides up to (the MLP holds
    #: ``4 width`` floats per token).
    max_rows = 1 << 15

    def __init__(self, in_dim: int = 768, *, width: int = 768, depth: int = 6, n_heads: int = 12,
                 mlp_ratio: float = 4.0, pool_heads: int = 8) -> None:  # fmt: skip
        super().__init__()
        for name, value in (("in_dim", in_dim), ("width", width), ("depth", depth),
                            ("n_heads", n_heads), ("pool_heads", pool_heads)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"{name}: expected a positive int, got {value!r}")
        for name, heads in (("n_heads", n_heads), ("pool_heads", pool_heads)):
            if width % heads:
                raise InvalidArgumentError(
                    f"{name}: expected a divisor of width {width}, got {heads}"
                )
        if not mlp_ratio > 0:
            raise InvalidArgumentError(f"mlp_ratio: expected a positive number, got {mlp_ratio}")
        self.in_dim, self.embed_dim, self.n_heads = in_dim, width, n_heads
        self.vision_encoder = _TitanVision(in_dim, width, depth, n_heads, mlp_ratio, pool_heads)
        self._slopes = _slopes(n_heads)  # a list, not a tensor: no state, nothing on meta

    @staticmethod
    def adapt_state_dict(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Keep ``vision_encoder.*`` but the captioning pooler ``vision_encoder.attn_pool.*``."""
        return {k: v for k, v in state.items()
                if k.startswith("vision_encoder.")
                and not k.startswith("vision_encoder.attn_pool.")}  # fmt: skip

    def project(self, embedding: torch.Tensor) -> torch.Tensor:
        """Map slide embeddings ``[..., width]`` into TITAN's vision-language space.

        ``embedding @ proj`` L2-normalised, as ``Titan.zero_shot`` does before comparing with
        text embeddings (TITAN's text tower is not built here).
        """
        z = embedding.to(self.vision_encoder.proj.dtype) @ self.vision_encoder.proj
        return F.normalize(z, dim=-1)

    # -----------------------------------------------------------------------------------------

    def _tokens(self, features: torch.Tensor, coords: torch.Tensor,
                size: int) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """One slide's summed grid cells (float32, background dropped) and their positions."""
        grid, w = titan_grid(coords, size)
        if grid.shape[0] == 0:
            return features.new_zeros((0, self.in_dim), dtype=torch.float32), grid
        cell = grid[:, 0] * w + grid[:, 1]
        cells, inverse = torch.unique(cell, sorted=True, return_inverse=True)
        summed = torch.zeros((cells.numel(), features.shape[1]), dtype=torch.float32,
                             device=features.device)  # fmt: skip
        summed.index_add_(0, inverse, features.float())
        keep = summed.ne(0).any(dim=1)  # TITAN's background mask: an all-zero cell
        cells = cells[keep]
        return summed[keep], torch.stack((cells // w, cells % w), dim=1)

    def _attention(self, attn: _Attention, h: torch.Tensor, grids: list[torch.Tensor],
                   dists: list[torch.Tensor | None],
                   starts: list[int]) -> torch.Tensor:  # fmt: skip
        """Self-attention of every slide's tokens (rows ``starts[i]:starts[i+1]`` of ``h``)."""
        t, width = h.shape
        heads, hd = attn.n_heads, width // attn.n_heads
        qkv = attn.qkv(h).reshape(t, 3, heads, hd).permute(1, 2, 0, 3)  # [3, H, T, hd]
        out = torch.empty((heads, t, hd), dtype=h.dtype, device=h.device)
        slopes = torch.tensor(self._slopes, dtype=torch.float32, device=h.device)
        for grid, dist, a, b in zip(grids, dists, starts[:-1], starts[1:], strict=True):
            q, k, v = qkv[0, :, a:b], qkv[1, :, a:b], qkv[2, :, a:b]
            n = b - a
            rows = max(1, _BLOCK_ELEMENTS // (heads * n))
            for r0 in range(0, n, rows):
                r1 = min(n, r0 + rows)
                bias = _bias_rows(grid, slopes, r0, r1, dist).to(h.dtype)
                out[:, a + r0 : a + r1] = F.scaled_dot_product_attention(
                    q[:, r0:r1], k, v, attn_mask=bias
                )
        return attn.proj(out.permute(1, 0, 2).reshape(t, width))

    def _pool(self, x: torch.Tensor, starts: list[int]) -> torch.Tensor:
        """Pool each slide's tokens with the contrastive pooler's one query: ``[B, width]``."""
        pool = self.vision_encoder.attn_pool_contrastive
        mha = pool.attn
        width = x.shape[1]
        heads, hd = mha.num_heads, width // mha.num_heads
        w_q, w_k, w_v = mha.in_proj_weight.chunk(3)
        b_q, b_k, b_v = mha.in_proj_bias.chunk(3)
        q = F.linear(pool.ln_q(pool.query), w_q, b_q).reshape(heads, 1, hd)
        kx = pool.ln_k(x)
        k = F.linear(kx, w_k, b_k).reshape(-1, heads, hd).transpose(0, 1)  # [H, T, hd]
        v = F.linear(kx, w_v, b_v).reshape(-1, heads, hd).transpose(0, 1)
        rows = [F.scaled_dot_product_attention(q, k[:, a:b], v[:, a:b]).reshape(1, width)
                for a, b in zip(starts[:-1], starts[1:], strict=True)]  # fmt: skip
        return mha.out_proj(torch.cat(rows))

    def forward_varlen(
        self,
        features: torch.Tensor,
        offsets: torch.Tensor,
        *,
        coords: torch.Tensor,
        patch_size_level0: int | Sequence[int] | torch.Tensor,
    ) -> torch.Tensor:
        """Embed concatenated slides ``[sum N_i, in_dim]`` with ``offsets [B+1]`` to ``[B, width]``.

        Parameters
        ----------
        features : torch.Tensor
            ``[sum N_i, in_dim]`` CONCH v1.5 patch features.
        offsets : torch.Tensor
            ``[B + 1]`` integer row offsets (slide ``i`` = rows ``offsets[i]:offsets[i+1]``).
        coords : torch.Tensor
            ``[sum N_i, 2]`` integer level-0 coordinates (x, y) of the same rows.
        patch_size_level0 : int or sequence of int or torch.Tensor
            The grid unit of every slide, or one per slide (``[B]``).

        Returns
        -------
        torch.Tensor
            ``[B, width]`` in the parameters' dtype. A slide with no patch (or only all-zero
            features, which TITAN treats as background) gives zeros.
        """
        if features.ndim != 2 or features.shape[1] != self.in_dim:
            raise InvalidArgumentError(
                f"features: expected a [sum N_i, {self.in_dim}] tensor, "
                f"got shape {list(features.shape)}"
            )
        if coords.shape != (features.shape[0], 2):
            raise InvalidArgumentError(
                f"coords: expected shape [{features.shape[0]}, 2], got {list(coords.shape)}"
            )
        bounds = _check_offsets(features, offsets).tolist()
        n_slides = len(bounds) - 1
        sizes = torch.as_tensor(patch_size_level0).reshape(-1).tolist()
        if len(sizes) == 1:
            sizes = sizes * n_slides
        if len(sizes) != n_slides:
            raise InvalidArgumentError(
                f"patch_size_level0: expected one value or {n_slides} (one per slide), "
                f"got {len(sizes)}"
            )
        ve = self.vision_encoder
        dtype = ve.cls_token.dtype
        cells, grids, present = [], [], []
        for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            tok, grid = self._tokens(features[a:b], coords[a:b], int(sizes[i]))
            if grid.shape[0]:
                cells.append(tok)
                grids.append(grid)
                present.append(i)
        out = features.new_zeros((n_slides, self.embed_dim), dtype=dtype)
        if not present:
            return out
        # one pass of the patch embedding over every slide's cells, a class token before each
        emb = ve.patch_embed(torch.cat(cells).to(dtype))
        cls = ve.cls_token.reshape(1, -1)
        pieces, starts, pos = [], [0], 0
        for c in cells:
            pieces += [cls, emb[pos : pos + c.shape[0]]]
            pos += c.shape[0]
            starts.append(starts[-1] + c.shape[0] + 1)
        x = torch.cat(pieces)
        dists = [_distances(g, 0, g.shape[0] + 1) if (g.shape[0] + 1) ** 2 <= _DIST_ELEMENTS
                 else None for g in grids]  # fmt: skip
        for block in ve.blocks.modules_list:
            x = x + self._attention(block.attn, block.norm1(x), grids, dists, starts)
            x = x + block.mlp(block.norm2(x))
        out[present] = self._pool(ve.norm(x), starts)
        return out

    def forward(
        self,
        features: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        coords: torch.Tensor,
        patch_size_level0: int | Sequence[int] | torch.Tensor,
    ) -> torch.Tensor:
        """Embed a padded batch ``features [B, N, in_dim]``, ``coords [B, N, 2]`` to ``[B, width]``.

        ``mask [B, N]`` (True = real patch) drops padding rows; the slides are then embedded
        as in :meth:`forward_varlen`.
        """
        rows, offsets, flat = _padded_rows(features, mask, self.in_dim, coords)
        return self.forward_varlen(rows, offsets, coords=flat,
                                   patch_size_level0=patch_size_level0)  # fmt: skip


def titan(**options: Any) -> TitanSlideEncoder:
    """TITAN's slide encoder in the published configuration (:data:`TITAN`), random parameters.

    Parameters
    ----------
    **options
        :class:`TitanSlideEncoder` options overriding :data:`TITAN`.

    Returns
    -------
    TitanSlideEncoder
        Random parameters.
    """
    config = {**TITAN, **options}
    return TitanSlideEncoder(config.pop("in_dim"), **config)


def titan_config(state: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Read ``in_dim``, ``width``, ``depth`` and ``mlp_ratio`` from a checkpoint's shapes.

    The head counts are not in the shapes: they stay the published ones (12, pooler 8). A
    checkpoint without ``vision_encoder.patch_embed.0.weight`` gives the published
    configuration (strict loading then lists what it lacks).
    """
    key = "vision_encoder.patch_embed.0.weight"
    if key not in state:
        return dict(TITAN)
    width, in_dim = (int(s) for s in state[key].shape)
    prefix = "vision_encoder.blocks.modules_list."
    depth = len({k[len(prefix) :].split(".")[0] for k in state if k.startswith(prefix)})
    fc1 = state.get(f"{prefix}0.mlp.fc1.weight")
    ratio = int(fc1.shape[0]) / width if fc1 is not None else TITAN["mlp_ratio"]
    return {**TITAN, "in_dim": in_dim, "width": width, "depth": max(depth, 1),
            "mlp_ratio": ratio}  # fmt: skip
