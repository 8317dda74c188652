"""Prov-GigaPath's slide encoder: a LongNet transformer with dilated attention over tile features.

Prov-GigaPath (Xu et al., "A whole-slide foundation model for digital pathology from real-world
data", *Nature* 630, 2024, Methods: the LongNet slide encoder) embeds a slide from the
Prov-GigaPath tile features (1536-d) of its 256 px tiles at 20x and their coordinates. Read from
prov-gigapath/prov-gigapath@09d8e87 (``gigapath/slide_encoder.py``: ``LongNetViT`` and
``gigapath_slide_enc12l768d``; ``gigapath/pos_embed.py``; ``gigapath/torchscale/model/LongNet.py``
and ``LongNetConfig.py``: ``LongNet_12_layers_768_dim``; ``gigapath/torchscale/architecture/
encoder.py`` and ``config.py``; ``gigapath/torchscale/component/dilated_attention.py``,
``multihead_attention.py``, ``feedforward_network.py``) and from TRIDENT's
``GigaPathSlideEncoder`` (mahmoodlab/TRIDENT ``trident/slide_encoder_models/load.py``@a91fa84:
``create_model(..., "gigapath_slide_enc12l768d", 1536, global_pool=True)``, float16, 768-d,
``model.tile_size = patch_size_level0`` and ``model(features, coords,
all_layer_embed=True)[11]``). For one slide with tile features ``f_n`` and level-0
coordinates ``c_n = (x_n, y_n)``:

1. **Tokens**: ``W_e f_n + b_e`` (``patch_embed.proj``, 1536 -> 768) plus the 2-D sin-cos
   position embedding of ``p_n = g_x * 1000 + g_y`` with ``(g_x, g_y) = floor(c_n /
   patch_size_level0)`` (absolute: no shift to the slide's corner, so a translation changes
   the embedding). The table has ``1000 x 1000`` rows, row ``p`` = ``[e(p mod 1000),
   e(p div 1000)]`` (each half 384-d: ``e(t) = [sin(t w_k), cos(t w_k)]``, ``w_k =
   10000^(-k / 192)``, ``k = 0..191``; computed in float64, then float32), so ``e(g_y)`` comes
   first; a ``g_y`` of 1000 or more runs into the next ``g_x`` row as in the reference, and a
   ``p`` outside the table is refused. A class token (``cls_token``, whose position row is
   zero) goes in front; the tile order is the input order.
2. **LongNet encoder** (``encoder.layers.{i}``, torchscale ``EncoderLayer`` with ``subln``):
   pre-norm blocks ``x + out_proj(inner_attn_ln(DA(self_attn_layer_norm(x))))`` then
   ``x + fc2(ffn_layernorm(GELU(fc1(final_layer_norm(x)))))`` (LayerNorm eps 1e-5, 16 heads,
   FFN 3072, biases on q/k/v/out projections).
3. **Dilated attention** ``DA`` (LongNet, Ding et al., arXiv 2307.02486, §2.2-2.3;
   :func:`dilated_attention`): for each branch ``(w_j, r_j)`` of segment lengths
   ``[1024, 5792, 32768, 185363, 1048576]`` and dilation ratios ``[1, 2, 4, 8, 16]`` (the
   segment lengths are ``LongNetViT.get_optimal_segment_length(262144, 256)``:
   ``int(2 ** linspace(10, 20, 5))``), the sequence is cut into segments of ``g = min(w_j,
   L)`` tokens (zero-padded at the end to a multiple of ``g``); within a segment head ``h``
   keeps the positions ``r, r + r_j, r + 2 r_j, ...`` with offset ``r = h div (H / r_j)``
   (zero-padded to a multiple of ``r_j``); softmax attention (scale ``d^-1/2``) runs among
   those, the zero-padded keys included as keys with logit 0 and value 0 (the reference's flash
   attention gets no padding mask). Each branch gives every (position, head) it covers an
   output and a log-sum-exp; the branches are combined with weights ``softmax_j(lse_j)``
   over the branches covering it (a branch not covering it, or whose lse is exactly 0, has
   weight 0). Outputs go back to ``segment * g' + position`` with ``g'`` the segment length
   rounded up to a multiple of ``r_j``, then the first ``L`` rows are kept, as the
   reference's ``sparse_to_dense`` and ``scattering`` do (they differ from ``segment * g +
   position`` only for a sequence longer than 185,363 tokens, whose branch 4 has ``g`` not a
   multiple of 8).
4. **Slide embedding**: the hidden states after layer 11 (``encoder_states[11]``: the 11th
   layer's output, before the 12th layer and the encoder's ``layer_norm``), averaged over the
   tile tokens (the class token is left out: ``global_pool=True``), then ``norm`` (LayerNorm
   eps 1e-6): 768-d.

Checkpoint: ``slide_encoder.pth`` from Hugging Face prov-gigapath/prov-gigapath holds the state
dict under ``"model"`` (``create_model`` reads ``torch.load(path)["model"]``); its keys are
exactly this module's (the position table is a non-persistent buffer in the reference and is
not in the file; the demo notebook ``demo/run_gigapath.ipynb`` loads it with no missing or
unexpected key: 86,330,880 parameters, 85,148,160 of them LongNet's). The 12th layer and
``encoder.layer_norm`` are loaded (strictly) but do not enter the embedding.

Many slides at once (:meth:`GigaPathSlideEncoder.forward_varlen`): every per-token layer runs
once over all tokens of the batch; the dilated attention runs per slide, over blocks of query
rows. The result equals one slide at a time, up to float rounding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InvalidArgumentError
from .abmil import _check_offsets, _padded_rows

__all__ = ["GIGAPATH", "GIGAPATH_TINY", "GigaPathSlideEncoder", "dilated_attention",
           "dilated_gather", "gigapath", "gigapath_config",
           "gigapath_position_embedding"]  # fmt: skip

#: The published configuration (``gigapath_slide_enc12l768d`` with ``LongNet_12_layers_768_dim``
#: and the segment lengths of ``get_optimal_segment_length(262144, 256)``); ``layer`` is the
#: hidden state TRIDENT takes (``[11]``).
GIGAPATH = {"in_dim": 1536, "width": 768, "depth": 12, "n_heads": 16, "mlp_ratio": 4.0,
            "segment_lengths": (1024, 5792, 32768, 185363, 1048576),
            "dilated_ratios": (1, 2, 4, 8, 16), "layer": 11, "grid_size": 1000}  # fmt: skip
#: A small configuration of the same classes for tests: the published 16 heads, segments short
#: enough to cut a small slide.
GIGAPATH_TINY = {"in_dim": 16, "width": 64, "depth": 3, "n_heads": 16, "mlp_ratio": 2.0,
                 "segment_lengths": (4, 8, 16), "dilated_ratios": (1, 2, 4), "layer": 2,
                 "grid_size": 1000}  # fmt: skip

#: Attention logits held at once (batch x query rows x keys) per block.
_BLOCK_ELEMENTS = 1 << 25
#: The log-sum-exp given to a (position, head) that a branch does not cover.
_NOT_COVERED = -1e8
#: Use torch's fused CPU attention kernel (it returns the log-sum-exp too) for float32 on the
#: CPU; the blockwise torch path otherwise (and on CUDA).
_FUSED_CPU = True


def _check_branches(seg: tuple[Any, ...], dil: tuple[Any, ...]) -> None:
    bad = [v for v in seg + dil if isinstance(v, bool) or not isinstance(v, int) or v < 1]
    if not seg or len(seg) != len(dil) or bad:
        raise InvalidArgumentError(
            "segment_lengths, dilated_ratios: expected two equally long sequences of "
            f"positive ints, got {list(seg)} and {list(dil)}"
        )


def _ceil_to(n: int, m: int) -> int:
    return -(-n // m) * m


def dilated_gather(x: torch.Tensor, segment_length: int, ratio: int) -> torch.Tensor:
    """Cut one sequence into segments and keep each head's dilated positions.

    Parameters
    ----------
    x : torch.Tensor
        ``[L, H, d]``: one sequence, per head.
    segment_length : int
        ``w``; the segments have ``g = min(w, L)`` tokens (the sequence is zero-padded at the
        end to a multiple of ``g``).
    ratio : int
        ``r``: head ``h`` keeps the positions ``o, o + r, o + 2r, ...`` of each segment, with
        offset ``o = h div (H' / r)``, ``H'`` being ``H`` rounded up to a multiple of ``r``
        (each segment is zero-padded to a multiple of ``r``).

    Returns
    -------
    torch.Tensor
        ``[n_segments, H, ceil(g / r), d]``: row ``l`` of head ``h`` in segment ``s`` is
        ``x[s g + l r + o_h, h]``, or zeros where that is padding.
    """
    length, heads, d = x.shape
    g = min(int(segment_length), length)
    n = -(-length // g)
    gp, hp = _ceil_to(g, ratio), _ceil_to(heads, ratio)
    m, group = gp // ratio, hp // ratio
    xp = F.pad(x, (0, 0, 0, 0, 0, n * g - length)).reshape(n, g, heads, d)
    xp = F.pad(xp, (0, 0, 0, hp - heads, 0, gp - g))  # [n, gp, hp, d]
    xs = xp.reshape(n, m, ratio, ratio, group, d).diagonal(dim1=2, dim2=3)  # [n, m, G, d, r]
    return xs.permute(0, 4, 2, 1, 3).reshape(n, hp, m, d)[:, :heads]


def _scatter(out: torch.Tensor, lse: torch.Tensor, length: int, segment_length: int,
             ratio: int) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Put one branch's ``out [n, H, m, d]`` and ``lse [n, H, m]`` back as ``[L, H, (d)]``.

    Rows land at ``segment * g' + l r + o_h`` (``g'`` = ``g`` rounded up to ``r``), then the
    first ``L`` rows are kept; uncovered entries get ``out`` 0 and ``lse`` -1e8, as does an
    lse of exactly 0 (the reference's ``masked_fill(lse == 0, -1e8)``).
    """
    n, heads, m, d = out.shape
    hp = _ceil_to(heads, ratio)
    group = hp // ratio
    o = F.pad(out, (0, 0, 0, 0, 0, hp - heads)).reshape(n, ratio, group, m, d)
    s = F.pad(lse, (0, 0, 0, hp - heads), value=_NOT_COVERED).reshape(n, ratio, group, m)
    dense_o = out.new_zeros((n, m, ratio, ratio, group, d))
    dense_s = lse.new_full((n, m, ratio, ratio, group), _NOT_COVERED)
    dense_o.diagonal(dim1=2, dim2=3).copy_(o.permute(0, 3, 2, 4, 1))  # [n, m, G, d, r]
    dense_s.diagonal(dim1=2, dim2=3).copy_(s.permute(0, 3, 2, 1))  # [n, m, G, r]
    dense_o = dense_o.reshape(n * m * ratio, hp, d)[:length, :heads]
    dense_s = dense_s.reshape(n * m * ratio, hp)[:length, :heads]
    return dense_o, dense_s.masked_fill(dense_s == 0, _NOT_COVERED)


def _fused_cpu(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               scale: float) -> tuple[torch.Tensor, torch.Tensor] | None:  # fmt: skip
    """Run torch's fused CPU attention, which returns the log-sum-exp too (None: unavailable).

    ``aten._scaled_dot_product_flash_attention_for_cpu`` (the kernel behind
    ``scaled_dot_product_attention`` on the CPU) returns ``(out, logsumexp)``; it is a private
    operator, so any failure or unexpected shape falls back to the blockwise torch path.
    """
    op = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    if not _FUSED_CPU or op is None or q.device.type != "cpu" or q.dtype != torch.float32:
        return None
    try:
        out, lse = op(q[None], k[None], v[None], scale=scale)[:2]
    except (RuntimeError, TypeError, ValueError):
        return None
    if out.shape != (1, *q.shape) or lse.shape != (1, *q.shape[:2]):
        return None
    return out[0], lse[0].float()


def _attention_lse(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   scale: float) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Softmax attention ``[B, m, d]`` and its log-sum-exp ``[B, m]`` (float32), blockwise."""
    fused = _fused_cpu(q, k, v, scale)
    if fused is not None:
        return fused
    b, m, _ = q.shape
    out = torch.empty_like(q)
    lse = q.new_empty((b, m), dtype=torch.float32)
    keys = k.shape[1]
    rows = max(1, min(m, _BLOCK_ELEMENTS // max(1, b * keys)))
    per = max(1, min(b, _BLOCK_ELEMENTS // max(1, rows * keys)))
    for b0 in range(0, b, per):
        b1 = min(b, b0 + per)
        kt, vb = k[b0:b1].transpose(1, 2), v[b0:b1]
        for r0 in range(0, m, rows):
            r1 = min(m, r0 + rows)
            logits = (q[b0:b1, r0:r1] @ kt).float() * scale
            s = torch.logsumexp(logits, dim=-1)
            p = torch.exp(logits - s[..., None])
            out[b0:b1, r0:r1] = (p.to(vb.dtype) @ vb).to(out.dtype)
            lse[b0:b1, r0:r1] = s
    return out, lse


def dilated_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      segment_lengths: Sequence[int],
                      dilated_ratios: Sequence[int]) -> torch.Tensor:  # fmt: skip
    """LongNet's dilated attention of one sequence (module docstring, step 3).

    Parameters
    ----------
    q, k, v : torch.Tensor
        ``[L, H, d]`` projected queries, keys and values of one sequence.
    segment_lengths, dilated_ratios : sequence of int
        The branches ``(w_j, r_j)``.

    Returns
    -------
    torch.Tensor
        ``[L, H, d]``: the branches' outputs combined by their log-sum-exp weights.
    """
    if q.ndim != 3 or k.shape != q.shape or v.shape != q.shape:
        raise InvalidArgumentError(
            "q, k, v: expected three [L, H, d] tensors of one shape, got "
            f"{list(q.shape)}, {list(k.shape)} and {list(v.shape)}"
        )
    _check_branches(tuple(segment_lengths), tuple(dilated_ratios))
    length, heads, d = q.shape
    scale = d**-0.5
    acc = torch.zeros((length, heads, d), dtype=torch.float32, device=q.device)
    top = torch.full((length, heads), float("-inf"), dtype=torch.float32, device=q.device)
    total = torch.zeros((length, heads), dtype=torch.float32, device=q.device)
    for w, r in zip(segment_lengths, dilated_ratios, strict=True):
        qs, ks, vs = (dilated_gather(t, w, r) for t in (q, k, v))  # [n, H, m, d]
        n, _, m, _ = qs.shape
        o, s = _attention_lse(qs.reshape(n * heads, m, d), ks.reshape(n * heads, m, d),
                              vs.reshape(n * heads, m, d), scale)  # fmt: skip
        o, s = _scatter(o.reshape(n, heads, m, d), s.reshape(n, heads, m), length, w, r)
        # a running softmax over the branches: sum_j exp(lse_j) o_j / sum_j exp(lse_j)
        new = torch.maximum(top, s)
        keep, add = torch.exp(top - new), torch.exp(s - new)
        acc = acc * keep[..., None] + o.float() * add[..., None]
        total = total * keep + add
        top = new
    return (acc / total[..., None]).to(q.dtype)


def gigapath_position_embedding(positions: torch.Tensor, width: int,
                                grid_size: int = 1000) -> torch.Tensor:  # fmt: skip
    """Rows ``positions`` of Prov-GigaPath's 2-D sin-cos table (module docstring, step 1).

    Parameters
    ----------
    positions : torch.Tensor
        ``[N]`` integer indices ``p = g_x * grid_size + g_y`` into the table.
    width : int
        The embedding width (a multiple of 4).
    grid_size : int, default 1000
        The table's side (``slide_ngrids``).

    Returns
    -------
    torch.Tensor
        ``[N, width]`` float32: ``[e(p mod grid_size), e(p div grid_size)]``.
    """
    quarter = width // 4
    omega = 1.0 / 10000 ** (torch.arange(quarter, dtype=torch.float64, device=positions.device)
                            / quarter)  # fmt: skip
    halves = []
    for t in (positions % grid_size, torch.div(positions, grid_size, rounding_mode="floor")):
        angle = t.to(torch.float64)[:, None] * omega[None]
        halves += [torch.sin(angle), torch.cos(angle)]
    return torch.cat(halves, dim=1).to(torch.float32)


class _SelfAttention(nn.Module):
    """torchscale's ``MultiheadAttention`` with ``subln``: q/k/v/out projections, inner LN."""

    def __init__(self, width: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.k_proj = nn.Linear(width, width)
        self.v_proj = nn.Linear(width, width)
        self.q_proj = nn.Linear(width, width)
        self.out_proj = nn.Linear(width, width)
        self.inner_attn_ln = nn.LayerNorm(width, eps=1e-5)


class _FeedForward(nn.Module):
    """torchscale's ``FeedForwardNetwork`` with ``subln``: fc1, GELU, ffn_layernorm, fc2."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)
        self.ffn_layernorm = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        h = F.gelu(h.float()).to(h.dtype)
        return self.fc2(self.ffn_layernorm(h))


class _Layer(nn.Module):
    def __init__(self, width: int, n_heads: int, hidden: int) -> None:
        super().__init__()
        self.self_attn = _SelfAttention(width, n_heads)
        self.self_attn_layer_norm = nn.LayerNorm(width, eps=1e-5)
        self.ffn = _FeedForward(width, hidden)
        self.final_layer_norm = nn.LayerNorm(width, eps=1e-5)


class _Encoder(nn.Module):
    """The LongNet encoder: ``layers`` and the final ``layer_norm``."""

    def __init__(self, width: int, depth: int, n_heads: int, hidden: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(_Layer(width, n_heads, hidden) for _ in range(depth))
        self.layer_norm = nn.LayerNorm(width, eps=1e-5)


class _PatchEmbed(nn.Module):
    def __init__(self, in_dim: int, width: int) -> None:
        super().__init__()
        self.proj = nn.Linear(in_dim, width)


class GigaPathSlideEncoder(nn.Module):
    """Prov-GigaPath's slide embedding from tile features and coordinates (module docstring).

    Keys (those of ``slide_encoder.pth``'s ``"model"``): ``patch_embed.proj.*`` ``[width,
    in_dim]``, ``cls_token`` ``[1, 1, width]``, ``encoder.layers.{i}.self_attn.{q,k,v,out}_proj.*``
    ``[width, width]``, ``...self_attn.inner_attn_ln.*``, ``...self_attn_layer_norm.*``,
    ``...ffn.fc1.*`` ``[mlp_ratio width, width]``, ``...ffn.ffn_layernorm.*``,
    ``...ffn.fc2.*``, ``...final_layer_norm.*``, ``encoder.layer_norm.*`` and ``norm.*``.

    Parameters
    ----------
    in_dim : int, default 1536
        The tile feature width (Prov-GigaPath's tile encoder: 1536).
    width : int, default 768
        The transformer width (= the embedding width).
    depth : int, default 12
        LongNet layers.
    n_heads : int, default 16
        Attention heads.
    mlp_ratio : float, default 4.0
        FFN hidden width over ``width``.
    segment_lengths, dilated_ratios : sequence of int
        The dilated-attention branches (default: the published ones).
    layer : int, default 11
        The hidden state pooled into the embedding: the output of layer ``layer`` (1-based;
        ``depth`` is the last layer, before ``encoder.layer_norm``).
    grid_size : int, default 1000
        The side of the position table.
    """

    #: Tokens per varlen forward the embedding pipeline packs slides up to.
    max_rows = 1 << 15

    def __init__(self, in_dim: int = 1536, *, width: int = 768, depth: int = 12,
                 n_heads: int = 16, mlp_ratio: float = 4.0,
                 segment_lengths: Sequence[int] = GIGAPATH["segment_lengths"],
                 dilated_ratios: Sequence[int] = GIGAPATH["dilated_ratios"], layer: int = 11,
                 grid_size: int = 1000) -> None:  # fmt: skip
        super().__init__()
        for name, value in (("in_dim", in_dim), ("width", width), ("depth", depth),
                            ("n_heads", n_heads), ("layer", layer),
                            ("grid_size", grid_size)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"{name}: expected a positive int, got {value!r}")
        if width % n_heads or width % 4:
            raise InvalidArgumentError(
                f"width: expected a multiple of 4 and of n_heads ({n_heads}), got {width}"
            )
        if layer > depth:
            raise InvalidArgumentError(f"layer: expected at most depth ({depth}), got {layer}")
        if not mlp_ratio > 0:
            raise InvalidArgumentError(f"mlp_ratio: expected a positive number, got {mlp_ratio}")
        seg, dil = tuple(segment_lengths), tuple(dilated_ratios)
        _check_branches(seg, dil)
        self.in_dim, self.embed_dim, self.n_heads = in_dim, width, n_heads
        self.segment_lengths, self.dilated_ratios = seg, dil
        self.layer, self.grid_size = layer, grid_size
        self.patch_embed = _PatchEmbed(in_dim, width)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, width))
        self.encoder = _Encoder(width, depth, n_heads, int(width * mlp_ratio))
        self.norm = nn.LayerNorm(width, eps=1e-6)

    # -----------------------------------------------------------------------------------------

    def _positions(self, coords: torch.Tensor, size: int) -> torch.Tensor:
        """Table rows ``g_x * grid + g_y`` of one slide's tiles (refusing ones off the table)."""
        grid = torch.div(coords.to(torch.long), size, rounding_mode="floor")
        p = grid[:, 0] * self.grid_size + grid[:, 1]
        rows = self.grid_size**2
        if p.numel() and (int(p.min()) < 0 or int(p.max()) >= rows):
            raise InvalidArgumentError(
                f"coords: expected tiles on Prov-GigaPath's {self.grid_size} x {self.grid_size} "
                f"grid of {size} px (level 0) tiles, got grid positions from "
                f"{grid.min(0).values.tolist()} to {grid.max(0).values.tolist()} (a slide "
                f"wider than {self.grid_size * size} px or negative coordinates)"
            )
        return p

    def _attention(self, attn: _SelfAttention, h: torch.Tensor,
                   starts: list[int]) -> torch.Tensor:  # fmt: skip
        t, width = h.shape
        heads, hd = attn.n_heads, width // attn.n_heads
        q = attn.q_proj(h).reshape(t, heads, hd)
        k = attn.k_proj(h).reshape(t, heads, hd)
        v = attn.v_proj(h).reshape(t, heads, hd)
        out = torch.empty_like(q)
        for a, b in zip(starts[:-1], starts[1:], strict=True):
            out[a:b] = dilated_attention(q[a:b], k[a:b], v[a:b], self.segment_lengths,
                                         self.dilated_ratios)  # fmt: skip
        return attn.out_proj(attn.inner_attn_ln(out.reshape(t, width)))

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
            ``[sum N_i, in_dim]`` Prov-GigaPath tile features.
        offsets : torch.Tensor
            ``[B + 1]`` integer row offsets (slide ``i`` = rows ``offsets[i]:offsets[i+1]``).
        coords : torch.Tensor
            ``[sum N_i, 2]`` integer level-0 coordinates (x, y) of the same rows.
        patch_size_level0 : int or sequence of int or torch.Tensor
            The tile side at level 0 (the position unit) of every slide, or one per slide.

        Returns
        -------
        torch.Tensor
            ``[B, width]`` in the parameters' dtype; a slide with no tile gives zeros.
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
        if coords.dtype.is_floating_point:
            raise InvalidArgumentError(f"coords: expected integer coordinates, got {coords.dtype}")
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
        if any(int(s) != s or s < 1 for s in sizes):
            raise InvalidArgumentError(f"patch_size_level0: expected positive ints, got {sizes}")
        dtype = self.cls_token.dtype
        out = features.new_zeros((n_slides, self.embed_dim), dtype=dtype)
        present = [i for i in range(n_slides) if bounds[i + 1] > bounds[i]]
        if not present:
            return out
        pos = torch.cat([self._positions(coords[bounds[i] : bounds[i + 1]], int(sizes[i]))
                         for i in present])  # fmt: skip
        rows = torch.cat([torch.arange(bounds[i], bounds[i + 1], device=features.device)
                          for i in present])  # fmt: skip
        emb = self.patch_embed.proj(features[rows].to(dtype))
        emb = emb + gigapath_position_embedding(pos, self.embed_dim, self.grid_size).to(emb)
        cls = self.cls_token.reshape(1, -1)
        pieces, starts, at = [], [0], 0
        for i in present:
            n = bounds[i + 1] - bounds[i]
            pieces += [cls, emb[at : at + n]]
            at += n
            starts.append(starts[-1] + n + 1)
        x = torch.cat(pieces)
        for layer in self.encoder.layers[: self.layer]:
            x = x + self._attention(layer.self_attn, layer.self_attn_layer_norm(x), starts)
            x = x + layer.ffn(layer.final_layer_norm(x))
        pooled = torch.stack([x[a + 1 : b].mean(dim=0)
                              for a, b in zip(starts[:-1], starts[1:], strict=True)])  # fmt: skip
        out[present] = self.norm(pooled)
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

        ``mask [B, N]`` (True = real tile) drops padding rows; the slides are then embedded as
        in :meth:`forward_varlen`.
        """
        rows, offsets, flat = _padded_rows(features, mask, self.in_dim, coords)
        return self.forward_varlen(rows, offsets, coords=flat,
                                   patch_size_level0=patch_size_level0)  # fmt: skip


def gigapath(**options: Any) -> GigaPathSlideEncoder:
    """Prov-GigaPath's slide encoder in the published configuration (:data:`GIGAPATH`).

    Parameters
    ----------
    **options
        :class:`GigaPathSlideEncoder` options overriding :data:`GIGAPATH`.

    Returns
    -------
    GigaPathSlideEncoder
        Random parameters.
    """
    config = {**GIGAPATH, **options}
    return GigaPathSlideEncoder(config.pop("in_dim"), **config)


def gigapath_config(state: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Read ``in_dim``, ``width``, ``depth`` and ``mlp_ratio`` from a checkpoint's shapes.

    The heads, the dilated-attention branches and the grid stay the published ones; ``layer``
    is 11 (TRIDENT's) or the last layer of a checkpoint with fewer. A checkpoint without
    ``patch_embed.proj.weight`` gives the published configuration (strict loading then lists
    what it lacks).
    """
    key = "patch_embed.proj.weight"
    if key not in state:
        return dict(GIGAPATH)
    width, in_dim = (int(s) for s in state[key].shape)
    prefix = "encoder.layers."
    depth = max(1, len({k[len(prefix) :].split(".")[0] for k in state if k.startswith(prefix)}))
    fc1 = state.get(f"{prefix}0.ffn.fc1.weight")
    ratio = int(fc1.shape[0]) / width if fc1 is not None else GIGAPATH["mlp_ratio"]
    return {**GIGAPATH, "in_dim": in_dim, "width": width, "depth": depth, "mlp_ratio": ratio,
            "layer": min(GIGAPATH["layer"], depth)}  # fmt: skip
