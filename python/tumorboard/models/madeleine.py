"""MADELEINE's slide encoder: multi-head gated attention MIL over CONCH v1 patch features.

MADELEINE (Jaume et al., "Multistain Pretraining for Slide Representation Learning in
Pathology", ECCV 2024, arXiv 2408.02859) embeds an H&E slide from the CONCH v1 features (512-d)
of its 256 px patches at 10x. Its slide encoder is mahmoodlab/MADELEINE
``madeleine/models/Model.py`` and ``madeleine/models/abmil.py``@419287d (``MADELEINE`` with
``wsi_encoder="abmil"``, ``ABMILEmbedder``, ``BatchedABMIL``); the slide embedding is
``MADELEINE.encode_he``, the output TRIDENT's ``MadeleineSlideEncoder.forward`` returns
(mahmoodlab/TRIDENT ``trident/slide_encoder_models/load.py``@a91fa84: ``embedding_dim = 512``;
its precision, bfloat16, is asserted in TRIDENT's ``tests/test_slide_encoders.py``@a91fa84).
With ``H`` the encoder width (``wsi_encoder_hidden_dim``, 512) and ``K`` heads (``n_heads``, 4),
for one slide with patch features ``x_n``:

1. **Pre-attention** (``wsi_embedders.pre_attn``, shared by the heads): three blocks
   ``Linear -> LayerNorm -> GELU -> Dropout(0.1)``, ``in_dim -> H -> H -> H*K`` (indices 0/1,
   4/5, 8/9 of the ``nn.Sequential``).
2. **Heads**: the ``H*K`` vector is split as einops ``"(e c) -> e c"`` with ``c = K``: head
   ``k`` takes the features ``k, k+K, k+2K, ...`` (interleaved, not contiguous blocks):
   ``t_n^k`` is ``H``-d.
3. **Gated attention per head** (``wsi_embedders.attn.{k}``, MADELEINE's ``BatchedABMIL`` with
   ``hidden_dim=512``, dropout 0.25 after tanh and sigmoid): ``s_n^k = W_c (tanh(W_a t_n^k) *
   sigmoid(W_b t_n^k))``; ``w^k = softmax over the slide`` (``activation="softmax"``).
4. **Pooling**: ``p^k = sum_n w_n^k t_n^k``; the ``[H, K]`` matrix is flattened row-major (again
   interleaved: entry ``e*K + k``), ``H*K``-d.
5. **Projection** (``projector``): ``Linear(H*K -> H)``; no activation. That is the 512-d
   slide embedding.

``token_projector`` (``Linear(H*K -> 128)``) maps the pre-attention tokens for MADELEINE's local
(cross-stain token) alignment loss during training; it is in the checkpoint but not in the
embedding, and is built here so that the checkpoint loads strictly. The checkpoint built
without stain encodings (``create_model``: ``stain_encoding=False``) has no ``embedding.*``.

Checkpoint (Hugging Face MahmoodLab/madeleine ``model.pt`` with ``model_config.json``): keys
``wsi_embedders.pre_attn.{0,4,8}.*`` (Linear), ``wsi_embedders.pre_attn.{1,5,9}.*``
(LayerNorm), ``wsi_embedders.attn.{k}.attention_{a,b}.0.*`` ``[512, H]``,
``wsi_embedders.attn.{k}.attention_c.*`` ``[1, 512]``, ``token_projector.*`` ``[128, H*K]``,
``projector.*`` ``[H, H*K]``, possibly under DistributedDataParallel's ``module.`` prefix
(MADELEINE's ``create_model`` strips it when present, as
:func:`~tumorboard.models.read_state_dict` does). MADELEINE's
code only runs with ``H = 512`` (its projector is sized from the attention width, 512, and its
output reshaped to ``H``). What is not confirmed from a file: ``model_config.json`` itself.
``n_heads = 4``, ``wsi_encoder_hidden_dim = 512`` and ``activation = "softmax"`` are the
repository's defaults (``madeleine/utils/process_args.py``) and the values of its published
pretraining script (``scripts/launch_pretrain_withoutStainEncodings.sh``); the widths and the
number of heads are read from the checkpoint's shapes at load (:func:`madeleine_config`), the
activation cannot be.

Many slides at once (:meth:`MadeleineSlideEncoder.forward_varlen`): the pre-attention layers
and every head's scores run once over all patches of the batch; the softmax and weighted sum
run per slide; the projection once over the pooled slides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from ..errors import InvalidArgumentError
from .abmil import _check_offsets, _GatedAttention

__all__ = ["MADELEINE", "MADELEINE_TINY", "MadeleineSlideEncoder", "madeleine",
           "madeleine_config"]  # fmt: skip

#: The published configuration (CONCH v1 512-d in, H = 512, 4 heads, attention 512, tokens 128).
MADELEINE = {"in_dim": 512, "hidden": 512, "n_heads": 4, "attn_dim": 512, "token_dim": 128}
#: A small configuration of the same class for tests.
MADELEINE_TINY = {"in_dim": 12, "hidden": 6, "n_heads": 3, "attn_dim": 5, "token_dim": 4}


def _block(a: int, b: int) -> list[nn.Module]:
    return [nn.Linear(a, b), nn.LayerNorm(b), nn.GELU(), nn.Dropout(0.1)]


class _Embedder(nn.Module):
    """MADELEINE's ``ABMILEmbedder``: ``pre_attn`` and one gated attention per head (``attn``)."""

    def __init__(self, in_dim: int, hidden: int, n_heads: int, attn_dim: int) -> None:
        super().__init__()
        self.pre_attn = nn.Sequential(*_block(in_dim, hidden), *_block(hidden, hidden),
                                      *_block(hidden, hidden * n_heads))  # fmt: skip
        self.attn = nn.ModuleList(_GatedAttention(hidden, attn_dim, 0.25) for _ in range(n_heads))


class MadeleineSlideEncoder(nn.Module):
    """MADELEINE's H&E slide embedding from CONCH v1 patch features (module docstring).

    Keys: ``wsi_embedders.pre_attn.{0,1,4,5,8,9}.*``, ``wsi_embedders.attn.{k}.attention_a.0.*``,
    ``...attention_b.0.*``, ``...attention_c.*``, ``token_projector.*`` (checkpoint only) and
    ``projector.*``. Output ``[B, hidden]``.

    Parameters
    ----------
    in_dim : int, default 512
        The patch feature width (CONCH v1: 512).
    hidden : int, default 512
        The encoder width ``H`` per head (MADELEINE's ``wsi_encoder_hidden_dim``) and the
        embedding width.
    n_heads : int, default 4
        Attention heads ``K``.
    attn_dim : int, default 512
        Width of each head's gated attention (MADELEINE: 512).
    token_dim : int, default 128
        Output width of ``token_projector`` (checkpoint only).
    """

    #: Patches per varlen forward the embedding pipeline packs slides up to (the pre-attention
    #: layers hold ``H*K`` floats per patch, a few times over).
    max_rows = 1 << 16

    def __init__(self, in_dim: int = 512, *, hidden: int = 512, n_heads: int = 4,
                 attn_dim: int = 512, token_dim: int = 128) -> None:  # fmt: skip
        super().__init__()
        for name, value in (("in_dim", in_dim), ("hidden", hidden), ("n_heads", n_heads),
                            ("attn_dim", attn_dim), ("token_dim", token_dim)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"{name}: expected a positive int, got {value!r}")
        self.in_dim, self.embed_dim, self.n_heads = in_dim, hidden, n_heads
        self.wsi_embedders = _Embedder(in_dim, hidden, n_heads, attn_dim)
        self.token_projector = nn.Linear(hidden * n_heads, token_dim)
        self.projector = nn.Linear(hidden * n_heads, hidden)

    def tokens(self, features: torch.Tensor) -> torch.Tensor:
        """Return the heads' inputs ``[..., hidden, n_heads]`` of features ``[..., in_dim]``.

        Head ``k`` is ``[..., :, k]``: features ``k, k+K, ...`` of the pre-attention output.
        """
        z = self.wsi_embedders.pre_attn(features)
        return z.reshape(*z.shape[:-1], self.embed_dim, self.n_heads)

    def scores(self, tokens: torch.Tensor) -> torch.Tensor:
        """Return the raw attention scores ``[..., n_heads]`` of :meth:`tokens` output."""
        heads = self.wsi_embedders.attn
        return torch.cat([head(tokens[..., k]) for k, head in enumerate(heads)], dim=-1)

    def forward(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Embed a padded batch ``[B, N, in_dim]`` (``mask [B, N]``: True = real) to ``[B, H]``."""
        if features.ndim != 3 or features.shape[-1] != self.in_dim:
            raise InvalidArgumentError(
                f"features: expected a [B, N, {self.in_dim}] tensor, "
                f"got shape {list(features.shape)}"
            )
        t = self.tokens(features)  # [B, N, H, K]
        s = self.scores(t).float()  # [B, N, K]
        if mask is not None:
            if mask.shape != features.shape[:2]:
                raise InvalidArgumentError(
                    f"mask: expected shape {list(features.shape[:2])}, got {list(mask.shape)}"
                )
            s = s.masked_fill(~mask.bool()[..., None], float("-inf"))
        w = s.softmax(dim=1).to(t.dtype)
        pooled = torch.einsum("bnk,bnhk->bhk", w, t)
        return self.projector(pooled.reshape(pooled.shape[0], -1))

    def forward_varlen(
        self, features: torch.Tensor, offsets: torch.Tensor, *, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Embed concatenated slides ``[sum N_i, in_dim]`` (``offsets [B+1]``) to ``[B, H]``.

        Parameters
        ----------
        features : torch.Tensor
            ``[sum N_i, in_dim]``.
        offsets : torch.Tensor
            ``[B + 1]`` integer row offsets.
        return_weights : bool, default False
            Also return the attention weights ``[sum N_i, n_heads]`` float32 (each slide's
            sum to 1 per head).

        Returns
        -------
        torch.Tensor or tuple of torch.Tensor
            ``[B, hidden]``, and the weights when asked. An empty slide pools to zeros before
            the projection (its embedding is the projection's bias).
        """
        if features.ndim != 2 or features.shape[1] != self.in_dim:
            raise InvalidArgumentError(
                f"features: expected a [sum N_i, {self.in_dim}] tensor, "
                f"got shape {list(features.shape)}"
            )
        bounds = _check_offsets(features, offsets).tolist()
        t = self.tokens(features)  # [T, H, K], one dense pass over every slide of the batch
        s = self.scores(t).float()  # [T, K]
        pooled = t.new_zeros((len(bounds) - 1, self.embed_dim, self.n_heads))
        weights = []
        for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            w = s[a:b].softmax(dim=0)  # [N_i, K]
            weights.append(w)
            if b > a:
                pooled[i] = torch.einsum("nk,nhk->hk", w.to(t.dtype), t[a:b])
        out = self.projector(pooled.reshape(pooled.shape[0], -1))
        return (out, torch.cat(weights)) if return_weights else out


def madeleine(**options: Any) -> MadeleineSlideEncoder:
    """MADELEINE's slide encoder in the published configuration (:data:`MADELEINE`), random.

    Parameters
    ----------
    **options
        :class:`MadeleineSlideEncoder` options overriding :data:`MADELEINE`.

    Returns
    -------
    MadeleineSlideEncoder
        Random parameters.
    """
    config = {**MADELEINE, **options}
    return MadeleineSlideEncoder(config.pop("in_dim"), **config)


def madeleine_config(state: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Read a MADELEINE checkpoint's configuration from its shapes.

    Parameters
    ----------
    state : Mapping of str to torch.Tensor
        The state dict (``module.`` already stripped, as
        :func:`~tumorboard.models.read_state_dict` does).

    Returns
    -------
    dict
        ``in_dim``, ``hidden``, ``n_heads``, ``attn_dim`` and ``token_dim``: the
        :class:`MadeleineSlideEncoder` arguments. A checkpoint without
        ``wsi_embedders.pre_attn.0.weight`` or a first head gives the published configuration
        (:data:`MADELEINE`); strict loading then lists every key it lacks or has in excess.
    """
    pre = state.get("wsi_embedders.pre_attn.0.weight")
    head = state.get("wsi_embedders.attn.0.attention_a.0.weight")
    if pre is None or head is None or pre.ndim != 2 or head.ndim != 2:
        return dict(MADELEINE)
    prefix = "wsi_embedders.attn."
    heads = {k[len(prefix) :].split(".")[0] for k in state if k.startswith(prefix)}
    token = state.get("token_projector.weight")
    return {
        "in_dim": int(pre.shape[1]),
        "hidden": int(pre.shape[0]),
        "n_heads": len(heads),
        "attn_dim": int(head.shape[0]),
        "token_dim": int(token.shape[0]) if token is not None else MADELEINE["token_dim"],
    }
