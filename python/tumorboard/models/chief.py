"""CHIEF's slide encoder: gated attention MIL over CTransPath features, pooling the input features.

CHIEF (Wang et al., "A pathology foundation model for cancer diagnosis and prognosis
prediction", *Nature* 634, 970-978, 2024) embeds a slide from the CTransPath features (768-d) of
its 256 px patches at 10x. The slide aggregator is hms-dbmi/CHIEF ``models/CHIEF.py``@1abed33
(class ``CHIEF``, built by CHIEF's README, ``Get_CHIEF_WSI_level_feature.py`` and TRIDENT's
``CHIEFSlideEncoder`` as ``CHIEF(size_arg="small", dropout=True, n_classes=2)``; mahmoodlab/TRIDENT
``trident/slide_encoder_models/load.py``@a91fa84). For one slide with patch features ``x_n``::

    h_n = ReLU(W_0 x_n + b_0)                            512-d   (attention_net.0)
    a_n = tanh(W_a h_n + b_a) * sigmoid(W_b h_n + b_b)   256-d   (attention_net.3.attention_{a,b}.0)
    s_n = W_c a_n + b_c                                   1 score (attention_net.3.attention_c)
    w_n = softmax over the slide's n of s_n
    embedding = sum_n w_n x_n                             768-d

Dropout (0.25 after the ReLU and after tanh and sigmoid) is inactive in eval mode. The
embedding is the attention-weighted sum of the *input* CTransPath features, not of ``h_n``: it
is ``CHIEF.forward(...)["WSI_feature"]`` (``slide_embeddings = torch.mm(A, h_ori)`` since
CHIEF's commit f50ae9a of 2024-09-19; the earlier 512-d ``torch.mm(A, h)``), the output
TRIDENT's ``CHIEFSlideEncoder.forward`` returns (``embedding_dim = 768``, float32).

The text branch is not part of the embedding: CHIEF adds ``text_to_vision(organ_embedding
[organ])`` (an anatomical-site prompt embedding, 19 sites) to the 512-d pooled ``h`` to form
``WSI_feature_anatomical`` and the two-class ``bag_logits`` (``classifiers``), and TRIDENT calls
it with organ index 0 only to discard that branch. ``instance_classifiers`` and ``att_head`` are
not used by ``CHIEF.forward`` at all. They are all built here nevertheless, so that the
published ``CHIEF_pretraining.pth`` (which both CHIEF and TRIDENT load with
``load_state_dict(strict=True)`` into that module) loads strictly, key for key:

* ``attention_net.0.{weight,bias}`` ``[512, 768]``, ``[512]``;
* ``attention_net.3.attention_a.0.*`` and ``attention_net.3.attention_b.0.*`` ``[256, 512]``,
  ``attention_net.3.attention_c.*`` ``[1, 256]`` (the gated attention is the fourth module of
  ``attention_net``: Linear, ReLU, Dropout, gated attention);
* ``classifiers.*`` ``[2, 512]``; ``instance_classifiers.{0,1}.*`` ``[2, 512]``;
* ``att_head.fc1.*`` ``[256, 512]``, ``att_head.fc2.*`` ``[1, 256]``;
* ``text_to_vision.0.*`` ``[512, 768]``; the buffer ``organ_embedding`` ``[19, 768]``.

1,185,032 parameters plus the buffer. The published checkpoint's key list itself is not read
from a file here (the weights are on Google Drive): it is the module tree above, which strict
loading checks.

Many slides at once (:meth:`ChiefSlideEncoder.forward_varlen`): the scores of every patch of
the batch in one dense pass, then a softmax and a weighted sum per slide (no padding).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from ..errors import InvalidArgumentError
from .abmil import _check_offsets, _GatedAttention

__all__ = ["CHIEF", "CHIEF_TINY", "ChiefSlideEncoder", "chief", "chief_config"]

#: The published configuration (``size_arg="small"``: 768 -> 512 -> 256; two classes; 19 organs).
CHIEF = {"in_dim": 768, "hidden": 512, "attn_dim": 256, "n_classes": 2, "n_organs": 19,
         "text_dim": 768}  # fmt: skip
#: A small configuration of the same class for tests.
CHIEF_TINY = {"in_dim": 12, "hidden": 8, "attn_dim": 6, "n_classes": 2, "n_organs": 3,
              "text_dim": 5}  # fmt: skip


class _AttHead(nn.Module):
    """CHIEF's ``Att_Head`` (``fc1``, ReLU, ``fc2``, sigmoid): checkpoint only, not embedding."""

    def __init__(self, dim: int, attn_dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, attn_dim)
        self.fc2 = nn.Linear(attn_dim, 1)


class ChiefSlideEncoder(nn.Module):
    """CHIEF's slide embedding from CTransPath patch features (module docstring).

    Keys: ``attention_net.0.*``, ``attention_net.3.attention_{a,b}.0.*``,
    ``attention_net.3.attention_c.*`` (the embedding), and ``classifiers.*``,
    ``instance_classifiers.{i}.*``, ``att_head.fc{1,2}.*``, ``text_to_vision.0.*``,
    ``organ_embedding`` (in the checkpoint, unused by the embedding). Output ``[B, in_dim]``.

    Parameters
    ----------
    in_dim : int, default 768
        The patch feature width (CTransPath: 768) and the embedding width.
    hidden : int, default 512
        Width of ``h`` (``attention_net.0``).
    attn_dim : int, default 256
        Width of the gated attention.
    n_classes : int, default 2
        Outputs of ``classifiers`` and number of ``instance_classifiers`` (checkpoint only).
    n_organs : int, default 19
        Rows of ``organ_embedding`` (checkpoint only).
    text_dim : int, default 768
        Width of ``organ_embedding`` (checkpoint only).
    """

    def __init__(self, in_dim: int = 768, *, hidden: int = 512, attn_dim: int = 256,
                 n_classes: int = 2, n_organs: int = 19, text_dim: int = 768) -> None:  # fmt: skip
        super().__init__()
        for name, value in (("in_dim", in_dim), ("hidden", hidden), ("attn_dim", attn_dim),
                            ("n_classes", n_classes), ("n_organs", n_organs),
                            ("text_dim", text_dim)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"{name}: expected a positive int, got {value!r}")
        self.in_dim = self.embed_dim = in_dim
        self.attention_net = nn.Sequential(
            nn.Linear(in_dim, hidden), nn.ReLU(), nn.Dropout(0.25),
            _GatedAttention(hidden, attn_dim, 0.25),
        )  # fmt: skip
        self.classifiers = nn.Linear(hidden, n_classes)
        self.instance_classifiers = nn.ModuleList(nn.Linear(hidden, 2) for _ in range(n_classes))
        self.att_head = _AttHead(hidden, attn_dim)
        self.text_to_vision = nn.Sequential(nn.Linear(text_dim, hidden), nn.ReLU(),
                                            nn.Dropout(0.25))  # fmt: skip
        self.register_buffer("organ_embedding", torch.zeros(n_organs, text_dim))

    def scores(self, features: torch.Tensor) -> torch.Tensor:
        """Return the raw attention scores ``[...]`` of patch features ``[..., in_dim]``."""
        return self.attention_net(features)[..., 0]

    def forward(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Embed a padded batch ``[B, N, in_dim]`` (``mask [B, N]``: True = real) to ``[B, F]``."""
        if features.ndim != 3 or features.shape[-1] != self.in_dim:
            raise InvalidArgumentError(
                f"features: expected a [B, N, {self.in_dim}] tensor, "
                f"got shape {list(features.shape)}"
            )
        s = self.scores(features).float()  # [B, N]
        if mask is not None:
            if mask.shape != features.shape[:2]:
                raise InvalidArgumentError(
                    f"mask: expected shape {list(features.shape[:2])}, got {list(mask.shape)}"
                )
            s = s.masked_fill(~mask.bool(), float("-inf"))
        w = s.softmax(dim=1)
        return torch.einsum("bn,bnf->bf", w, features.float()).to(features.dtype)

    def forward_varlen(
        self, features: torch.Tensor, offsets: torch.Tensor, *, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Embed concatenated slides ``[sum N_i, in_dim]`` (``offsets [B+1]``) to ``[B, in_dim]``.

        Parameters
        ----------
        features : torch.Tensor
            ``[sum N_i, in_dim]``.
        offsets : torch.Tensor
            ``[B + 1]`` integer row offsets.
        return_weights : bool, default False
            Also return the attention weights ``[sum N_i]`` float32 (each slide's sum to 1).

        Returns
        -------
        torch.Tensor or tuple of torch.Tensor
            ``[B, in_dim]`` (an empty slide gives zeros), and the weights when asked.
        """
        if features.ndim != 2 or features.shape[1] != self.in_dim:
            raise InvalidArgumentError(
                f"features: expected a [sum N_i, {self.in_dim}] tensor, "
                f"got shape {list(features.shape)}"
            )
        bounds = _check_offsets(features, offsets).tolist()
        s = self.scores(features).float()  # one dense pass over every slide of the batch
        out = features.new_zeros((len(bounds) - 1, self.in_dim))
        weights = []
        for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            w = s[a:b].softmax(dim=0)
            weights.append(w)
            if b > a:
                out[i] = (w @ features[a:b].float()).to(features.dtype)
        return (out, torch.cat(weights)) if return_weights else out


def chief(**options: Any) -> ChiefSlideEncoder:
    """CHIEF's slide encoder in the published configuration (:data:`CHIEF`), random parameters.

    Parameters
    ----------
    **options
        :class:`ChiefSlideEncoder` options overriding :data:`CHIEF`.

    Returns
    -------
    ChiefSlideEncoder
        Random parameters.
    """
    config = {**CHIEF, **options}
    return ChiefSlideEncoder(config.pop("in_dim"), **config)


def chief_config(state: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Read a CHIEF checkpoint's configuration from its shapes.

    Parameters
    ----------
    state : Mapping of str to torch.Tensor
        The state dict.

    Returns
    -------
    dict
        The :class:`ChiefSlideEncoder` arguments (``in_dim``, ``hidden``, ``attn_dim``,
        ``n_classes``, ``n_organs``, ``text_dim``; the published ``CHIEF_pretraining.pth``
        gives :data:`CHIEF`). A checkpoint without ``attention_net.0.weight`` or
        ``attention_net.3.attention_a.0.weight`` gives :data:`CHIEF`; strict loading then lists
        every key it lacks or has in excess.
    """
    first = state.get("attention_net.0.weight")
    gate = state.get("attention_net.3.attention_a.0.weight")
    if first is None or gate is None or first.ndim != 2 or gate.ndim != 2:
        return dict(CHIEF)
    config = {"in_dim": int(first.shape[1]), "hidden": int(first.shape[0]),
              "attn_dim": int(gate.shape[0])}  # fmt: skip
    classes = state.get("classifiers.weight")
    if classes is not None and classes.ndim == 2:
        config["n_classes"] = int(classes.shape[0])
    organs = state.get("organ_embedding")
    if organs is not None and organs.ndim == 2:
        config["n_organs"], config["text_dim"] = (int(n) for n in organs.shape)
    return {**CHIEF, **config}
