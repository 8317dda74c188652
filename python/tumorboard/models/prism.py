"""PRISM's slide aggregator: a Perceiver whose latent queries cross-attend to Virchow tile features.

PRISM (Shaikovski et al., "PRISM: A Multi-Modal Generative Foundation Model for Slide-Level
Histopathology", arXiv 2405.10254, 2024: a Perceiver slide encoder and a BioGPT report decoder
trained CoCa-style) embeds a slide from the Virchow tile embeddings (2560-d: class token and
mean patch token of each 224 px tile at 20x).
Only the slide encoder is built here: ``Prism.slide_representations(...)["image_embedding"]``,
which TRIDENT's ``PRISMSlideEncoder`` returns (mahmoodlab/TRIDENT
``trident/slide_encoder_models/load.py``@a91fa84: float16, 1280-d, ``text_decoder = None``).
The architecture and configuration are those of the Hugging Face paige-ai/Prism remote code
(``modeling_prism.py``, ``perceiver.py``, ``configuring_prism.py``, ``config.json``), read in
its copy in DIAGNijmegen/unicorn_baseline ``src/unicorn_baseline/vision_language/prism/``
@dec3809. For one slide with tile features ``c_n``:

1. **Latents**: 513 learned queries ``perceiver.latents`` [513, 1280] (one for the slide
   embedding, 512 image latents for the report decoder).
2. **Perceiver layers** (``perceiver.layers.{i}``, 8 of them), each a cross-attention block
   then a transformer of 6 self-attention blocks:

   * cross-attention ``xattn.xattn``: ``x + to_out(softmax(q k^T / sqrt(1280)) v)`` with
     ``q = to_q(x_norm(x))`` and ``[k, v] = to_kv(c)`` (no norm on the tiles, one head of
     1280, no biases), then ``x + ff(x)`` (``xattn.ff``);
   * ``tf.{j}``: ``x + mha(norm(x))`` (``nn.MultiheadAttention``, 8 heads, no biases) then
     ``x + ff(x)``;
   * ``ff`` is ``net.2(GEGLU(net.0(norm(x))))`` with ``GEGLU([a, b]) = a * GELU(b)``
     (``net.0``: 1280 -> 2560, ``net.2``: 1280 -> 1280, mult 1).

   Weights are shared as the config says (``share_xattn_start_layer=1``,
   ``share_tf_start_layer=0``): layers 0 and 1 have their own cross-attention block, layers
   2-7 reuse layer 1's (and its keys and values); all 8 layers reuse layer 0's transformer.
3. **Slide embedding**: ``cls_norm`` (LayerNorm) of the first latent: 1280-d. ``img_norm`` of
   the other 512 (``image_latents``) feeds only the BioGPT report decoder and is not computed
   here (its keys are loaded).

The LayerNorms have eps 1e-5. The tile order does not matter (no position information), and a
slide run alone has no padding: PRISM's default mask for one slide is a float tensor of ones,
which ``scaled_dot_product_attention`` adds to every logit, leaving the softmax unchanged.

Checkpoint keys: the Hugging Face model's state dict has ``image_resampler.*`` (this module,
same names), ``text_decoder.*`` (BioGPT), ``img_to_latents.*``, ``text_to_latents.*`` and
``temperature``. :meth:`PrismSlideEncoder.adapt_state_dict` keeps ``image_resampler.*`` only
(a bare Perceiver state dict, keys ``perceiver.*``, ``cls_norm.*``, ``img_norm.*``, gets the
prefix) and fills the names of shared weights that a file stores once; every key of the
Perceiver is then loaded strictly.

Many slides at once (:meth:`PrismSlideEncoder.forward_varlen`): the keys and values of all tiles
of the batch are projected in one pass, the cross-attention runs per slide, and the latent
blocks run batched over the slides (every slide has 513 latents).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InvalidArgumentError, WeightsError
from .abmil import _check_offsets, _padded_rows

__all__ = ["PRISM", "PRISM_TINY", "PrismSlideEncoder", "prism", "prism_config"]

#: The published configuration (paige-ai/Prism ``config.json``, ``perceiver_config``).
PRISM = {"in_dim": 2560, "width": 1280, "n_latents": 512, "depth": 8, "transformer_depth": 6,
         "n_heads": 8, "xattn_heads": 1, "mlp_mult": 1, "share_xattn_start_layer": 1,
         "share_tf_start_layer": 0}  # fmt: skip
#: A small configuration of the same classes for tests (the published head counts and sharing,
#: which a checkpoint's shapes do not record).
PRISM_TINY = {"in_dim": 24, "width": 16, "n_latents": 5, "depth": 3, "transformer_depth": 2,
              "n_heads": 8, "xattn_heads": 1, "mlp_mult": 1, "share_xattn_start_layer": 1,
              "share_tf_start_layer": 0}  # fmt: skip

_PREFIX = "image_resampler."


class _GEGLU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, gate = x.chunk(2, dim=-1)
        return a * F.gelu(gate)


class _FeedForward(nn.Module):
    """``net.2(GEGLU(net.0(norm(x))))``."""

    def __init__(self, width: int, mult: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.net = nn.Sequential(nn.Linear(width, 2 * width * mult), _GEGLU(),
                                 nn.Linear(width * mult, width), nn.Dropout(0.0))  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(self.norm(x))


class _CrossAttention(nn.Module):
    def __init__(self, width: int, in_dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.x_norm = nn.LayerNorm(width)
        self.to_q = nn.Linear(width, width, bias=False)
        self.to_kv = nn.Linear(in_dim, 2 * width, bias=False)
        self.to_out = nn.Linear(width, width, bias=False)


class _SelfAttention(nn.Module):
    """PRISM's ``MHSA``: LayerNorm then a bias-free ``nn.MultiheadAttention``."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mha = nn.MultiheadAttention(width, heads, bias=False, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mha = self.mha
        b, n, width = x.shape
        heads = mha.num_heads
        qkv = F.linear(self.norm(x), mha.in_proj_weight).reshape(b, n, 3, heads, width // heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # [B, H, n, hd] each
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, width)
        return mha.out_proj(a)


def _self_block(width: int, heads: int, mult: int) -> nn.ModuleDict:
    return nn.ModuleDict({"mhsa": _SelfAttention(width, heads), "ff": _FeedForward(width, mult)})


class _Perceiver(nn.Module):
    def __init__(self, in_dim: int, width: int, n_latents: int, depth: int,
                 transformer_depth: int, n_heads: int, xattn_heads: int, mlp_mult: int,
                 share_xattn: int, share_tf: int) -> None:  # fmt: skip
        super().__init__()
        self.share_xattn, self.share_tf = share_xattn, share_tf
        self.latents = nn.Parameter(torch.randn(n_latents + 1, width))
        layers: list[nn.ModuleDict] = []
        for i in range(depth):
            if i <= share_xattn:
                xattn = nn.ModuleDict({"xattn": _CrossAttention(width, in_dim, xattn_heads),
                                       "ff": _FeedForward(width, mlp_mult)})  # fmt: skip
            else:
                xattn = layers[-1]["xattn"]
            if i <= share_tf:
                tf = nn.ModuleList(_self_block(width, n_heads, mlp_mult)
                                   for _ in range(transformer_depth))  # fmt: skip
            else:
                tf = layers[-1]["tf"]
            layers.append(nn.ModuleDict({"xattn": xattn, "tf": tf}))
        self.layers = nn.ModuleList(layers)


class _Resampler(nn.Module):
    """PRISM's ``PerceiverResampler``: the Perceiver and the two output norms."""

    def __init__(self, perceiver: _Perceiver, width: int) -> None:
        super().__init__()
        self.cls_norm = nn.LayerNorm(width)
        self.img_norm = nn.LayerNorm(width)
        self.perceiver = perceiver


class PrismSlideEncoder(nn.Module):
    """PRISM's slide embedding from Virchow tile features (module docstring).

    Keys (``image_resampler.`` prefix, the Hugging Face checkpoint's): ``cls_norm.*``,
    ``img_norm.*``, ``perceiver.latents`` ``[n_latents + 1, width]``,
    ``perceiver.layers.{i}.xattn.xattn.{x_norm.*, to_q.weight [width, width],
    to_kv.weight [2 width, in_dim], to_out.weight [width, width]}``,
    ``perceiver.layers.{i}.xattn.ff.{norm.*, net.0.* [2 mult width, width], net.2.* [width,
    mult width]}``, ``perceiver.layers.{i}.tf.{j}.mhsa.{norm.*, mha.in_proj_weight
    [3 width, width], mha.out_proj.weight [width, width]}`` and ``...tf.{j}.ff.*``; the
    names of shared modules repeat per layer (torch's ``state_dict`` lists every alias).

    Parameters
    ----------
    in_dim : int, default 2560
        The tile feature width (Virchow: 2560).
    width : int, default 1280
        The latent width (= the embedding width).
    n_latents : int, default 512
        Image latents (one more latent gives the slide embedding).
    depth : int, default 8
        Perceiver layers.
    transformer_depth : int, default 6
        Self-attention blocks per Perceiver layer.
    n_heads : int, default 8
        Heads of the self-attention blocks.
    xattn_heads : int, default 1
        Heads of the cross-attention.
    mlp_mult : int, default 1
        GEGLU hidden width over ``width``.
    share_xattn_start_layer : int, default 1
        Layers after this one reuse its cross-attention block.
    share_tf_start_layer : int, default 0
        Layers after this one reuse its transformer.
    """

    #: Tiles per varlen forward the embedding pipeline packs slides up to.
    max_rows = 1 << 17

    def __init__(self, in_dim: int = 2560, *, width: int = 1280, n_latents: int = 512,
                 depth: int = 8, transformer_depth: int = 6, n_heads: int = 8,
                 xattn_heads: int = 1, mlp_mult: int = 1, share_xattn_start_layer: int = 1,
                 share_tf_start_layer: int = 0) -> None:  # fmt: skip
        super().__init__()
        for name, value in (("in_dim", in_dim), ("width", width), ("n_latents", n_latents),
                            ("depth", depth), ("transformer_depth", transformer_depth),
                            ("n_heads", n_heads), ("xattn_heads", xattn_heads),
                            ("mlp_mult", mlp_mult)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"{name}: expected a positive int, got {value!r}")
        for name, value in (("share_xattn_start_layer", share_xattn_start_layer),
                            ("share_tf_start_layer", share_tf_start_layer)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgumentError(f"{name}: expected an int >= 0, got {value!r}")
        for name, heads in (("n_heads", n_heads), ("xattn_heads", xattn_heads)):
            if width % heads:
                raise InvalidArgumentError(
                    f"{name}: expected a divisor of width {width}, got {heads}"
                )
        self.in_dim, self.embed_dim = in_dim, width
        per = _Perceiver(in_dim, width, n_latents, depth, transformer_depth, n_heads,
                         xattn_heads, mlp_mult, share_xattn_start_layer,
                         share_tf_start_layer)  # fmt: skip
        self.image_resampler = _Resampler(per, width)

    def adapt_state_dict(self, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Keep the Perceiver's keys (``image_resampler.*``) of a full PRISM checkpoint.

        A state dict with no ``image_resampler.`` key but ``perceiver.*`` keys (a bare
        ``PerceiverResampler``) gets the prefix. The aliases of a shared block that a file
        stores once (``perceiver.layers.{i}.xattn.*`` for ``i`` above the first shared layer,
        ``perceiver.layers.{i}.tf.*``) are filled from the stored name; stored aliases must
        hold equal tensors.
        """
        kept = _prefixed(state)
        per = self.image_resampler.perceiver
        base = f"{_PREFIX}perceiver.layers."
        for kind, owner in (("xattn", per.share_xattn), ("tf", per.share_tf)):
            src = f"{base}{owner}.{kind}."
            shared = {k[len(src) :]: v for k, v in kept.items() if k.startswith(src)}
            for i in range(owner + 1, len(per.layers)):
                alias = f"{base}{i}.{kind}."
                stored = {k[len(alias) :]: v for k, v in kept.items() if k.startswith(alias)}
                differ = sorted(alias + n for n, v in stored.items()
                                if n in shared and (v.shape != shared[n].shape
                                                    or not torch.equal(v, shared[n])))  # fmt: skip
                if differ:
                    raise WeightsError(
                        "<state dict>",
                        f"prism: expected {alias}* to repeat {src}* (PRISM shares that block), "
                        f"got different tensors in {', '.join(differ[:5])}",
                    )
                kept.update({alias + n: v for n, v in shared.items() if n not in stored})
        return kept

    # -----------------------------------------------------------------------------------------

    def forward_varlen(self, features: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """Embed concatenated slides ``[sum N_i, in_dim]`` with ``offsets [B+1]`` to ``[B, width]``.

        Parameters
        ----------
        features : torch.Tensor
            ``[sum N_i, in_dim]`` Virchow tile features.
        offsets : torch.Tensor
            ``[B + 1]`` integer row offsets (slide ``i`` = rows ``offsets[i]:offsets[i+1]``).

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
        bounds = _check_offsets(features, offsets).tolist()
        n_slides = len(bounds) - 1
        res = self.image_resampler
        per = res.perceiver
        dtype = per.latents.dtype
        out = features.new_zeros((n_slides, self.embed_dim), dtype=dtype)
        present = [i for i in range(n_slides) if bounds[i + 1] > bounds[i]]
        if not present:
            return out
        ctx = features.to(dtype)
        x = per.latents[None].expand(len(present), -1, -1)
        kv: tuple[torch.Tensor, torch.Tensor] | None = None
        for i, layer in enumerate(per.layers):
            block = layer["xattn"]
            if kv is None or i <= per.share_xattn:  # a block of its own: project the tiles
                kv = block["xattn"].to_kv(ctx).chunk(2, dim=-1)
            x = x + self._cross(block["xattn"], x, kv, bounds, present)
            x = x + block["ff"](x)
            for sub in layer["tf"]:
                x = x + sub["mhsa"](x)
                x = x + sub["ff"](x)
        out[present] = res.cls_norm(x[:, 0])
        return out

    @staticmethod
    def _cross(xa: _CrossAttention, x: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor],
               bounds: list[int], present: list[int]) -> torch.Tensor:  # fmt: skip
        b, n, width = x.shape
        heads, hd = xa.heads, width // xa.heads
        q = xa.to_q(xa.x_norm(x)).reshape(b, n, heads, hd).transpose(1, 2)  # [B, H, n, hd]
        k, v = kv
        rows = []
        for row, i in enumerate(present):
            a, e = bounds[i], bounds[i + 1]
            ks = k[a:e].reshape(e - a, heads, hd).transpose(0, 1)  # [H, N, hd]
            vs = v[a:e].reshape(e - a, heads, hd).transpose(0, 1)
            rows.append(F.scaled_dot_product_attention(q[row], ks, vs))  # [H, n, hd]
        a = torch.stack(rows).transpose(1, 2).reshape(b, n, width)
        return xa.to_out(a)

    def forward(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Embed a padded batch ``features [B, N, in_dim]`` (``mask [B, N]``) to ``[B, width]``.

        ``mask`` (True = real tile) drops padding rows; the slides are then embedded as in
        :meth:`forward_varlen`.
        """
        rows, offsets, _ = _padded_rows(features, mask, self.in_dim)
        return self.forward_varlen(rows, offsets)


def _prefixed(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Keep the ``image_resampler.*`` keys (a bare Perceiver state dict gets the prefix)."""
    kept = {k: v for k, v in state.items() if k.startswith(_PREFIX)}
    if not kept and any(k.startswith("perceiver.") for k in state):
        kept = {_PREFIX + k: v for k, v in state.items()}
    return kept


def _layer_indices(state: Mapping[str, torch.Tensor]) -> set[int]:
    base = f"{_PREFIX}perceiver.layers."
    heads = (k[len(base) :].split(".")[0] for k in state if k.startswith(base))
    return {int(h) for h in heads if h.isdigit()}


def prism(**options: Any) -> PrismSlideEncoder:
    """PRISM's slide aggregator in the published configuration (:data:`PRISM`), random parameters.

    Parameters
    ----------
    **options
        :class:`PrismSlideEncoder` options overriding :data:`PRISM`.

    Returns
    -------
    PrismSlideEncoder
        Random parameters.
    """
    config = {**PRISM, **options}
    return PrismSlideEncoder(config.pop("in_dim"), **config)


def prism_config(state: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Read widths, latents and depths from a PRISM checkpoint's shapes.

    The head counts and the sharing stay the published ones. A file that stores only layers 0
    and 1 (the distinct blocks) gives the published depth 8. A checkpoint without
    ``image_resampler.perceiver.latents`` gives the published configuration (strict loading
    then lists what it lacks).
    """
    state = _prefixed(state)
    key = f"{_PREFIX}perceiver.latents"
    if key not in state:
        return dict(PRISM)
    n, width = (int(s) for s in state[key].shape)
    base = f"{_PREFIX}perceiver.layers."
    indices = _layer_indices(state)
    depth = max(indices) + 1 if indices and max(indices) > 1 else PRISM["depth"]
    tf = {k[len(f"{base}0.tf.") :].split(".")[0] for k in state
          if k.startswith(f"{base}0.tf.")}  # fmt: skip
    kv = state.get(f"{base}0.xattn.xattn.to_kv.weight")
    net2 = state.get(f"{base}0.xattn.ff.net.2.weight")
    return {**PRISM, "width": width, "n_latents": n - 1, "depth": depth,
            "transformer_depth": len(tf) or PRISM["transformer_depth"],
            "in_dim": int(kv.shape[1]) if kv is not None else PRISM["in_dim"],
            "mlp_mult": int(net2.shape[1]) // width if net2 is not None
            else PRISM["mlp_mult"]}  # fmt: skip
