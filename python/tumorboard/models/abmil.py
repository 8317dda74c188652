"""ABMIL pooling, TRIDENT's ABMIL slide encoder and MTBBench's IHC regression head.

Attention-based multiple-instance pooling (Ilse et al., ICML 2018) as TRIDENT builds it, the
TRIDENT ABMIL slide encoder, and MTBBench's IHC regression head (mahmoodlab/TRIDENT
``trident/slide_encoder_models/model_zoo/reusable_blocks/ABMIL.py`` and
``trident/slide_encoder_models/load.py``@a91fa84; goodfire-ai/mtbbench
``neurips25/utils/train_abmil.py``@ae2f8fe).

ABMIL math, for one bag of ``N`` instance features ``x_n`` (``F``-d), ``H`` heads and ``R``
branches (TRIDENT ``n_heads``, ``n_branches``); heads are independent (not a split of ``F``)::

    a_n^h   = tanh(W_a^h x_n + b_a^h)                          hidden-d  (attention_heads.h.0)
    a_n^h  *= sigmoid(W_g^h x_n + b_g^h)     if gated          hidden-d  (gating_layers.h.0)
    s_n^h   = W_s^h a_n^h + b_s^h                               R scores  (branching_layers.h)
    w_n^h   = softmax over the bag's n of s_n^h                 (per branch r)
    z^h     = sum_n w_n^h x_n                                   [R, F]
    z       = concat_h z^h                                      [R, H*F]
    pooled  = condensing_layer(z) if H > 1 else z               [R, F]

Dropout (``dropout``) follows tanh and sigmoid in every head and is inactive in ``eval()``. In
the padded entry point (:meth:`ABMIL.forward`) padding positions get score ``-1e9`` before the
softmax, as TRIDENT does; :meth:`ABMIL.forward_varlen` takes the bags concatenated
(``features [sum N_i, F]``, ``offsets [B+1]``, bag ``i`` = rows ``offsets[i]:offsets[i+1]``) and
computes the same softmax per segment (max-subtracted, in float32); an empty bag pools to
``z^h = 0``. The Triton kernel (``tumorboard.kernels.abmil``) implements ``forward_varlen``.
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import InvalidArgumentError, InvalidTypeError
from ..kernels import choose_backend

__all__ = ["ABMIL", "ABMILSlideEncoder", "MTBBenchRegressor"]

_MASK_VALUE = -1e9


def _check_offsets(features: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    if features.ndim != 2:
        raise InvalidArgumentError(
            f"features: expected a [sum N_i, F] tensor, got shape {list(features.shape)}"
        )
    offsets = torch.as_tensor(offsets, device=features.device)
    if offsets.ndim != 1 or offsets.numel() < 2:
        raise InvalidArgumentError(
            f"offsets: expected 1-D with B+1 >= 2 entries, got shape {list(offsets.shape)}"
        )
    if offsets.dtype.is_floating_point:
        raise InvalidTypeError(f"offsets: expected integers, got {offsets.dtype}")
    offsets = offsets.to(torch.long)
    if int(offsets[0]) != 0 or int(offsets[-1]) != features.shape[0]:
        raise InvalidArgumentError(
            f"offsets: expected to run from 0 to the number of rows {features.shape[0]}, "
            f"got {int(offsets[0])} .. {int(offsets[-1])}"
        )
    if bool((offsets[1:] < offsets[:-1]).any()):
        raise InvalidArgumentError("offsets: expected non-decreasing values")
    return offsets


def _padded_rows(
    features: torch.Tensor,
    mask: torch.Tensor | None,
    in_dim: int,
    coords: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Check a padded batch ``[B, N, in_dim]``; return its real rows, their offsets and coords.

    ``mask [B, N]`` (True = a real patch; None: every row) drops the padding, so a padded
    batch runs through an encoder's ``forward_varlen`` on exactly its slides' rows.
    """
    if features.ndim != 3 or features.shape[-1] != in_dim:
        raise InvalidArgumentError(
            f"features: expected a [B, N, {in_dim}] tensor, got shape {list(features.shape)}"
        )
    if coords is not None and coords.shape != (*features.shape[:2], 2):
        raise InvalidArgumentError(
            f"coords: expected shape {[*features.shape[:2], 2]}, got {list(coords.shape)}"
        )
    if mask is None:
        mask = torch.ones(features.shape[:2], dtype=torch.bool, device=features.device)
    mask = mask.bool()
    counts = mask.sum(dim=1)
    offsets = torch.cat((counts.new_zeros(1), counts.cumsum(0)))
    return features[mask], offsets, None if coords is None else coords[mask]


class ABMIL(nn.Module):
    """Multi-head (gated) attention pooling with TRIDENT's parameter names.

    Keys: ``attention_heads.{h}.0.{weight,bias}`` ``[hidden, in_dim]``; if gated
    ``gating_layers.{h}.0.*`` ``[hidden, in_dim]``; ``branching_layers.{h}.*`` ``[n_branches,
    hidden]``; if ``n_heads > 1`` ``condensing_layer.*`` ``[in_dim, n_heads*in_dim]``.

    Parameters
    ----------
    in_dim : int
        Instance feature width ``F`` (TRIDENT ``feature_dim``).
    hidden : int, default 256
        Attention width per head (TRIDENT ``head_dim``).
    n_heads : int, default 8
        Independent attention heads.
    gated : bool, default False
        Multiply by a sigmoid gate (Ilse et al.'s gated attention).
    dropout : float, default 0.0
        Dropout after tanh and sigmoid.
    n_branches : int, default 1
        Attention branches per head (scores per instance).
    """

    def __init__(
        self,
        in_dim: int,
        *,
        hidden: int = 256,
        n_heads: int = 8,
        gated: bool = False,
        dropout: float = 0.0,
        n_branches: int = 1,
    ) -> None:
        super().__init__()
        for name, value in (("in_dim", in_dim), ("hidden", hidden), ("n_heads", n_heads),
                            ("n_branches", n_branches)):  # fmt: skip
            if not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"{name}: expected a positive int, got {value!r}")
        if not 0.0 <= dropout < 1.0:
            raise InvalidArgumentError(f"dropout: expected a value in [0, 1), got {dropout}")
        self.in_dim, self.hidden, self.n_heads = in_dim, hidden, n_heads
        self.gated, self.n_branches, self.dropout = bool(gated), n_branches, float(dropout)
        self.attention_heads = nn.ModuleList(
            nn.Sequential(nn.Linear(in_dim, hidden), nn.Tanh(), nn.Dropout(dropout))
            for _ in range(n_heads)
        )
        if self.gated:
            self.gating_layers = nn.ModuleList(
                nn.Sequential(nn.Linear(in_dim, hidden), nn.Sigmoid(), nn.Dropout(dropout))
                for _ in range(n_heads)
            )
        self.branching_layers = nn.ModuleList(nn.Linear(hidden, n_branches) for _ in range(n_heads))
        self.condensing_layer = nn.Linear(n_heads * in_dim, in_dim) if n_heads > 1 else None

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """Return the raw attention scores ``[..., N, n_heads, n_branches]`` of ``[..., N, F]``."""
        out = []
        for h in range(self.n_heads):
            a = self.attention_heads[h](x)
            if self.gated:
                a = a * self.gating_layers[h](x)
            out.append(self.branching_layers[h](a))
        return torch.stack(out, dim=-2)

    def _condense(self, pooled: torch.Tensor) -> torch.Tensor:
        # pooled [B, H, R, F] -> [B, R, H*F] (heads concatenated on the feature axis)
        b, h, r, f = pooled.shape
        z = pooled.permute(0, 2, 1, 3).reshape(b, r, h * f)
        return self.condensing_layer(z) if self.condensing_layer is not None else z

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Pool a padded batch.

        Parameters
        ----------
        x : torch.Tensor
            ``[B, N, F]`` features.
        mask : torch.Tensor or None, default None
            Optional ``[B, N]``, True (or non-zero) for real instances; padding gets score
            ``-1e9`` before the softmax.

        Returns
        -------
        tuple of torch.Tensor
            ``(pooled [B, n_branches, F], scores [B, n_branches, n_heads, N])`` with the raw
            pre-softmax, pre-mask scores (TRIDENT's return value).
        """
        if x.ndim != 3 or x.shape[-1] != self.in_dim:
            raise InvalidArgumentError(
                f"x: expected a [B, N, {self.in_dim}] tensor, got shape {list(x.shape)}"
            )
        s = self.scores(x)  # [B, N, H, R]
        logits = s.float()
        if mask is not None:
            if mask.shape != x.shape[:2]:
                raise InvalidArgumentError(
                    f"mask: expected shape [B, N] = {list(x.shape[:2])}, got {list(mask.shape)}"
                )
            logits = logits.masked_fill(~mask.bool()[:, :, None, None], _MASK_VALUE)
        w = logits.softmax(dim=1).to(x.dtype)  # over N
        pooled = torch.einsum("bnhr,bnf->bhrf", w, x)
        return self._condense(pooled), s.permute(0, 3, 2, 1)

    def forward_varlen(
        self,
        features: torch.Tensor,
        offsets: torch.Tensor,
        *,
        return_scores: bool = False,
        backend: str = "auto",
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Pool bags given concatenated (module docstring).

        Parameters
        ----------
        features : torch.Tensor
            ``[sum N_i, F]``.
        offsets : torch.Tensor
            ``[B + 1]`` integer row offsets, ``offsets[0] = 0``, ``offsets[-1] = sum N_i``,
            non-decreasing.
        return_scores : bool, default False
            Also return the raw scores ``[sum N_i, n_heads, n_branches]``.
        backend : {"auto", "triton", "torch"}, default "auto"
            ``"auto"`` runs the fused Triton kernel (``tumorboard.kernels.abmil``) on CUDA
            tensors when triton is installed and no dropout is active, torch otherwise;
            ``"triton"`` forces the kernel (no dropout; CPU tensors need
            ``TRITON_INTERPRET=1``); ``"torch"`` forces the torch code.

        Returns
        -------
        torch.Tensor or tuple of torch.Tensor
            ``pooled [B, n_branches, F]`` (and the scores when asked).
        """
        if features.shape[-1:] != (self.in_dim,):
            raise InvalidArgumentError(
                f"features: expected a [sum N_i, {self.in_dim}] tensor, "
                f"got shape {list(features.shape)}"
            )
        dropout_on = self.training and self.dropout > 0.0
        if choose_backend(backend, features.device, auto_triton=not dropout_on) == "triton":
            from tumorboard.kernels.abmil import abmil_pool, module_weights

            res = abmil_pool(features, offsets, *module_weights(self), backend="triton")
            out = self._condense(res.pooled)
            return (out, res.scores.to(features.dtype)) if return_scores else out
        offsets = _check_offsets(features, offsets)
        n_bags = offsets.numel() - 1
        lengths = offsets[1:] - offsets[:-1]
        seg = torch.repeat_interleave(torch.arange(n_bags, device=features.device), lengths)
        s = self.scores(features)  # [T, H, R]
        logits = s.float()
        h, r = self.n_heads, self.n_branches
        seg_hr = seg[:, None, None].expand_as(logits)
        peak = torch.full((n_bags, h, r), float("-inf"), device=features.device)
        peak = peak.scatter_reduce(0, seg_hr, logits, reduce="amax", include_self=True)
        e = torch.exp(logits - peak[seg])
        denom = torch.zeros((n_bags, h, r), device=features.device).index_add_(0, seg, e)
        w = (e / denom[seg]).to(features.dtype)  # [T, H, R]
        pooled = features.new_zeros((n_bags, h * r, self.in_dim))
        w_flat = w.reshape(-1, h * r)
        for j in range(h * r):
            pooled[:, j].index_add_(0, seg, features * w_flat[:, j, None])
        out = self._condense(pooled.reshape(n_bags, h, r, self.in_dim))
        return (out, s) if return_scores else out


class ABMILSlideEncoder(nn.Module):
    """TRIDENT's ABMIL slide encoder: ``[B, N, F] -> [B, F]``.

    ``Linear(F,F)+GELU+Dropout(0.1)`` on every instance, a one-branch :class:`ABMIL` over the
    transformed features, then ``Linear(F,F)+GELU+Dropout(0.1)``. Keys under ``model.``
    (``pre_attention_layers.0``, ``image_pooler.*``, ``post_attention_layers.0``), as TRIDENT's
    ``load.py``@a91fa84 names them.

    TRIDENT freezes the encoder by default (``freeze=True``: no gradients, eval mode); this
    class leaves that to the caller.

    Parameters
    ----------
    in_dim : int
        Instance feature width ``F``.
    hidden, n_heads, gated, dropout
        As in :class:`ABMIL` (defaults 256, 8, False, 0.0).
    """

    def __init__(
        self,
        in_dim: int,
        *,
        hidden: int = 256,
        n_heads: int = 8,
        gated: bool = False,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.in_dim = self.embed_dim = in_dim
        self.model = nn.ModuleDict(
            {
                "pre_attention_layers": nn.Sequential(
                    nn.Linear(in_dim, in_dim), nn.GELU(), nn.Dropout(0.1)
                ),
                "image_pooler": ABMIL(
                    in_dim, hidden=hidden, n_heads=n_heads, gated=gated, dropout=dropout
                ),
                "post_attention_layers": nn.Sequential(
                    nn.Linear(in_dim, in_dim), nn.GELU(), nn.Dropout(0.1)
                ),
            }
        )

    @property
    def pooler(self) -> ABMIL:
        """The :class:`ABMIL` pooling (``model.image_pooler``)."""
        return self.model["image_pooler"]  # type: ignore[return-value]

    def forward(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Encode ``features [B, N, F]`` (optional ``mask [B, N]``, True = real) to ``[B, F]``."""
        h = self.model["pre_attention_layers"](features)
        pooled, _ = self.pooler(h, mask)
        return self.model["post_attention_layers"](pooled[:, 0])

    def forward_varlen(self, features: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """Encode concatenated bags ``[sum N_i, F]`` with ``offsets [B+1]`` to ``[B, F]``."""
        h = self.model["pre_attention_layers"](features)
        pooled = self.pooler.forward_varlen(h, offsets)
        return self.model["post_attention_layers"](pooled[:, 0])  # type: ignore[index]


class MTBBenchRegressor(nn.Module):
    """MTBBench's IHC positive-cell regression model.

    ``RegressionModel`` in goodfire-ai/mtbbench ``neurips25/utils/train_abmil.py``@ae2f8fe: an
    :class:`ABMILSlideEncoder` (``feature_encoder.``) then an MLP
    ``in_dim -> 1024 -> 512 -> 256 -> 128 -> 1`` with ReLU and Dropout(0.2) after the first three
    hidden layers, ReLU after the fourth (keys ``regressor.{0,3,6,9,11}``).

    Defaults are the released checkpoint's configuration (UNI2-h 1536-d features, 2 gated heads
    of width 512, dropout 0.3). The target was the percentage of positive cells (0-100), fitted
    with MSE; :meth:`forward` returns the raw regression ``[B]``, :meth:`predict_percentage` the
    value clipped to [0, 100].

    ``freeze_encoder=True`` turns gradients off for the ABMIL part, as MTBBench trained it
    (TRIDENT's default ``freeze``); its weights in the checkpoint are their random
    initialisation. ``hidden`` is MTBBench's ``head_dim``; its ``hidden_dim`` argument is unused
    there and has no counterpart here.

    Parameters
    ----------
    in_dim : int, default 1536
        Feature width.
    hidden : int, default 512
        Attention width per head.
    n_heads : int, default 2
        Attention heads.
    gated : bool, default True
        Gated attention.
    dropout : float, default 0.3
        Attention dropout.
    freeze_encoder : bool, default True
        Turn gradients off for the ABMIL part.
    """

    def __init__(
        self,
        in_dim: int = 1536,
        *,
        hidden: int = 512,
        n_heads: int = 2,
        gated: bool = True,
        dropout: float = 0.3,
        freeze_encoder: bool = True,
    ) -> None:
        super().__init__()
        self.in_dim = in_dim
        self.feature_encoder = ABMILSlideEncoder(
            in_dim, hidden=hidden, n_heads=n_heads, gated=gated, dropout=dropout
        )
        self.regressor = nn.Sequential(
            nn.Linear(in_dim, 1024),
            nn.ReLU(),
            nn.Dropout(0.2),
            nn.Linear(1024, 512),
            nn.ReLU(),
            nn.Dropout(0.2),
            nn.Linear(512, 256),
            nn.ReLU(),
            nn.Dropout(0.2),
            nn.Linear(256, 128),
            nn.ReLU(),
            nn.Linear(128, 1),
        )
        if freeze_encoder:
            self.feature_encoder.requires_grad_(False)

    def forward(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Regress ``features [B, N, in_dim]`` (optional ``mask [B, N]``) to raw ``[B]``."""
        return self.regressor(self.feature_encoder(features, mask)).squeeze(1)

    def forward_varlen(self, features: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """Regress concatenated bags ``[sum N_i, in_dim]`` with ``offsets [B+1]`` to ``[B]``."""
        return self.regressor(self.feature_encoder.forward_varlen(features, offsets)).squeeze(1)

    @torch.no_grad()
    def predict_percentage(
        self,
        features: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        offsets: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Predict the percentage of positive cells in [0, 100].

        Parameters
        ----------
        features : torch.Tensor
            A padded batch ``[B, N, in_dim]`` (with ``mask``), one bag ``[N, in_dim]``, or
            concatenated bags with ``offsets``.
        mask : torch.Tensor or None, default None
            ``[B, N]`` (or ``[N]`` for one bag), True for real instances.
        offsets : torch.Tensor or None, default None
            ``[B + 1]`` row offsets of concatenated bags.

        Returns
        -------
        torch.Tensor
            ``[B]`` float32 in [0, 100].
        """
        p = next(self.parameters())
        x = torch.as_tensor(features).to(device=p.device, dtype=p.dtype)
        if offsets is not None:
            raw = self.forward_varlen(x, offsets)
        else:
            if x.ndim == 2:
                x = x.unsqueeze(0)
                mask = None if mask is None else torch.as_tensor(mask).unsqueeze(0)
            raw = self.forward(x, None if mask is None else torch.as_tensor(mask).to(p.device))
        return raw.float().clamp(0.0, 100.0)


class _GatedAttention(nn.Module):
    """Gated attention scores: ``attention_{a,b}.0`` (tanh, sigmoid), then ``attention_c``.

    The layout of CLAM's ``Attn_Net_Gated`` (Lu et al., *Nature Biomedical Engineering* 2021):
    ``attention_a.0`` (Linear, tanh) and ``attention_b.0`` (Linear, sigmoid), each followed by
    dropout, multiplied, then ``attention_c`` (Linear to ``n_heads`` scores).

    The layout FEATHER (MIL-Lab ``GlobalGatedAttention``), CHIEF (``Attn_Net_Gated``) and
    MADELEINE (``BatchedABMIL``) share; :meth:`forward` returns the raw scores, the softmax
    over a slide is the caller's.
    """

    def __init__(self, dim: int, attn_dim: int, dropout: float, n_heads: int = 1) -> None:
        super().__init__()
        self.attention_a = nn.Sequential(nn.Linear(dim, attn_dim), nn.Tanh(), nn.Dropout(dropout))
        self.attention_b = nn.Sequential(
            nn.Linear(dim, attn_dim), nn.Sigmoid(), nn.Dropout(dropout)
        )
        self.attention_c = nn.Linear(attn_dim, n_heads)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """Return the raw scores ``[..., N, n_heads]`` of ``h [..., N, dim]``."""
        return self.attention_c(self.attention_a(h) * self.attention_b(h))
