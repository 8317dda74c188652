"""Slide encoders: one embedding per slide from its patch features.

Every encoder maps the patch features of many slides at once, concatenated without padding
(``features [sum N_i, F]``, ``offsets [B+1]``: slide ``i`` = rows ``offsets[i]:offsets[i+1]``),
to ``[B, D]`` with :meth:`forward_varlen`; :meth:`forward` takes one padded batch ``[B, N, F]``
with an optional ``mask [B, N]`` (True = real patch). The attention encoders run the fused
varlen ABMIL kernel (:mod:`tumorboard.kernels.abmil`) on CUDA; in torch (the CPU) they score
every patch of the batch in one dense pass and pool slide by slide.

* :class:`MeanSlideEncoder` (TRIDENT ``mean-{patch encoder}``): the mean of the patch features,
  no parameters.
* :class:`~tumorboard.models.abmil.ABMILSlideEncoder` (TRIDENT ``abmil``): ``Linear+GELU`` on every
  patch, gated or plain multi-head ABMIL, ``Linear+GELU`` (keys ``model.*``; no published
  weights: TRIDENT builds it untrained, so it is loaded from your own checkpoint, whose shapes
  give its configuration, :func:`abmil_config`).
* :class:`FeatherSlideEncoder` (TRIDENT ``feather``, ``feather_uni_v2``): FEATHER, the ABMIL
  pretrained on the PC-108 task (Shao et al., "Do Multiple Instance Learning Models Transfer?",
  ICML 2025; mahmoodlab/MIL-Lab ``src/models/abmil.py`` and ``src/model_configs/abmil/base.yaml``
  @186fe41): ``h = ReLU(W_e x + b_e)`` (512-d, ``model.patch_embed.0``), gated attention with
  ``attention_a.0`` (tanh), ``attention_b.0`` (sigmoid) and ``attention_c`` (384 -> 1) under
  ``model.global_attn``, softmax over the slide, embedding ``sum_n w_n h_n`` (512-d, MIL-Lab's
  ``forward_features``, which TRIDENT's ``FeatherSlideEncoder`` returns; load.py@04e4c2b). The
  ``model.`` prefix is the Hugging Face wrapper's (``ABMILModel.model``). A classification head
  (``model.classifier.*``) in a checkpoint is not part of the embedding and is dropped at load.
* :class:`~tumorboard.models.titan.TitanSlideEncoder` (TRIDENT ``titan``): TITAN's ViT over a
  2-D grid of CONCH v1.5 features with 2-D ALiBi (:mod:`tumorboard.models.titan`); it also
  takes the patch coordinates (``forward_varlen(..., coords=, patch_size_level0=)``).
* :class:`~tumorboard.models.chief.ChiefSlideEncoder` (TRIDENT ``chief``): CHIEF's gated
  attention over CTransPath features, pooling the input features (:mod:`tumorboard.models.chief`).
* :class:`~tumorboard.models.madeleine.MadeleineSlideEncoder` (TRIDENT ``madeleine``):
  MADELEINE's multi-head gated attention over CONCH v1 features
  (:mod:`tumorboard.models.madeleine`).
* :class:`~tumorboard.models.gigapath_slide.GigaPathSlideEncoder` (TRIDENT ``gigapath``):
  Prov-GigaPath's LongNet with dilated attention over tile features and coordinates
  (:mod:`tumorboard.models.gigapath_slide`); it takes the coordinates as ``titan`` does.
* :class:`~tumorboard.models.prism.PrismSlideEncoder` (TRIDENT ``prism``): PRISM's Perceiver
  over Virchow tile features (:mod:`tumorboard.models.prism`).

:func:`load_slide_encoder` builds any built encoder by its registry name
(:func:`~tumorboard.models.slide_encoder_info`) and loads its weights strictly.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from ..errors import InvalidArgumentError, WeightsError
from ..kernels import choose_backend
from ._slide_info import slide_encoder_info, slide_encoders
from .abmil import ABMILSlideEncoder, _check_offsets, _GatedAttention
from .chief import chief, chief_config
from .gigapath_slide import GIGAPATH, GigaPathSlideEncoder, gigapath_config
from .madeleine import madeleine, madeleine_config
from .prism import PRISM, PrismSlideEncoder, prism_config
from .titan import TITAN, TitanSlideEncoder, titan_config
from .weights import RandomWeightsWarning, load_state_dict, read_state_dict

__all__ = [
    "FeatherSlideEncoder",
    "MeanSlideEncoder",
    "abmil_config",
    "feather",
    "feather_uni_v2",
    "load_slide_encoder",
]

#: The ABMIL configuration of an ``abmil`` slide encoder built without weights (for tests): one
#: gated head of width 512, the configuration of the reference key table (TRIDENT load.py).
RANDOM_ABMIL = {"hidden": 512, "n_heads": 1, "gated": True}


class MeanSlideEncoder(nn.Module):
    """The mean of a slide's patch features (TRIDENT ``mean-{patch encoder}``).

    No parameters. The mean is accumulated in float32 and returned in the input dtype; a slide
    with no patch gives zeros.

    Parameters
    ----------
    in_dim : int
        The patch feature width (the embedding has the same width).
    """

    def __init__(self, in_dim: int) -> None:
        super().__init__()
        if isinstance(in_dim, bool) or not isinstance(in_dim, int) or in_dim < 1:
            raise InvalidArgumentError(f"in_dim: expected a positive int, got {in_dim!r}")
        self.in_dim = self.embed_dim = in_dim

    def forward(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Average ``features [B, N, F]`` over the real patches of ``mask [B, N]`` to ``[B, F]``."""
        x = features.float()
        if mask is None:
            return x.mean(dim=1).to(features.dtype)
        m = mask.to(x.dtype)[..., None]
        return ((x * m).sum(1) / m.sum(1).clamp_min(1.0)).to(features.dtype)

    def forward_varlen(self, features: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """Average concatenated slides ``[sum N_i, F]`` with ``offsets [B+1]`` to ``[B, F]``."""
        if features.ndim != 2 or features.shape[1] != self.in_dim:
            raise InvalidArgumentError(
                f"features: expected a [sum N_i, {self.in_dim}] tensor, "
                f"got shape {list(features.shape)}"
            )
        bounds = _check_offsets(features, offsets).tolist()
        out = features.new_zeros((len(bounds) - 1, self.in_dim))
        for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            if b > a:  # one reduction per slide (a handful per batch): dense, no scatter
                out[i] = features[a:b].mean(0, dtype=torch.float32).to(features.dtype)
        return out


class _FeatherBody(nn.Module):
    def __init__(self, in_dim: int, embed_dim: int, attn_dim: int, dropout: float,
                 n_heads: int) -> None:  # fmt: skip
        super().__init__()
        self.patch_embed = nn.Sequential(nn.Linear(in_dim, embed_dim), nn.ReLU())
        self.global_attn = _GatedAttention(embed_dim, attn_dim, dropout, n_heads)


class FeatherSlideEncoder(nn.Module):
    """FEATHER: MIL-Lab's gated ABMIL pretrained on PC-108 (TRIDENT ``feather*``; module docstring).

    Keys (``model.`` prefix): ``patch_embed.0.{weight,bias}`` ``[embed_dim, in_dim]``,
    ``global_attn.attention_a.0.*`` and ``global_attn.attention_b.0.*`` ``[attn_dim,
    embed_dim]``, ``global_attn.attention_c.*`` ``[n_heads, attn_dim]``. Output ``[B, n_heads *
    embed_dim]`` (512 for the published ``base`` configuration).

    Parameters
    ----------
    in_dim : int
        The patch feature width (768 CONCH v1.5, 1536 UNI2-h).
    embed_dim : int, default 512
        Width of the patch embedding and of each head's pooled vector.
    attn_dim : int, default 384
        Width of the gated attention.
    dropout : float, default 0.25
        Dropout after tanh and sigmoid (inactive in eval mode).
    n_heads : int, default 1
        Attention heads (scores per patch; their pooled vectors are concatenated).
    """

    def __init__(
        self,
        in_dim: int,
        *,
        embed_dim: int = 512,
        attn_dim: int = 384,
        dropout: float = 0.25,
        n_heads: int = 1,
    ) -> None:
        super().__init__()
        for name, value in (("in_dim", in_dim), ("embed_dim", embed_dim),
                            ("attn_dim", attn_dim), ("n_heads", n_heads)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"{name}: expected a positive int, got {value!r}")
        if not 0.0 <= dropout < 1.0:
            raise InvalidArgumentError(f"dropout: expected a value in [0, 1), got {dropout}")
        self.in_dim, self.n_heads, self.dropout = in_dim, n_heads, float(dropout)
        self.embed_dim = n_heads * embed_dim
        self.model = _FeatherBody(in_dim, embed_dim, attn_dim, dropout, n_heads)

    @staticmethod
    def adapt_state_dict(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Drop a classification head (``model.classifier.*``): the embedding precedes it."""
        return {k: v for k, v in state.items() if not k.startswith("model.classifier.")}

    def _weights(self) -> tuple[torch.Tensor, ...]:
        att = self.model.global_attn
        a, b, c = att.attention_a[0], att.attention_b[0], att.attention_c
        # the kernel's layout: one head (H=1) whose n_heads scores are its branches (R)
        return (a.weight[None], a.bias[None], c.weight[None], c.bias[None], b.weight[None],
                b.bias[None])  # fmt: skip

    def forward(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Encode a padded batch ``features [B, N, in_dim]`` (``mask [B, N]``) to ``[B, D]``."""
        if features.ndim != 3 or features.shape[-1] != self.in_dim:
            raise InvalidArgumentError(
                f"features: expected a [B, N, {self.in_dim}] tensor, "
                f"got shape {list(features.shape)}"
            )
        h = self.model.patch_embed(features)
        s = self.model.global_attn(h).float()  # [B, N, K]
        if mask is not None:
            s = s.masked_fill(~mask.bool()[..., None], float("-inf"))
        w = s.softmax(dim=1).to(h.dtype)
        return torch.einsum("bnk,bnd->bkd", w, h).reshape(h.shape[0], -1)

    def forward_varlen(
        self,
        features: torch.Tensor,
        offsets: torch.Tensor,
        *,
        return_weights: bool = False,
        backend: str = "auto",
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Encode concatenated slides ``[sum N_i, in_dim]`` with ``offsets [B+1]`` to ``[B, D]``.

        Parameters
        ----------
        features : torch.Tensor
            ``[sum N_i, in_dim]``.
        offsets : torch.Tensor
            ``[B + 1]`` integer row offsets.
        return_weights : bool, default False
            Also return the attention weights ``[sum N_i, n_heads]`` (each slide's sum to 1).
        backend : {"auto", "triton", "torch"}, default "auto"
            The ABMIL pooling: "auto" is the fused Triton kernel on CUDA (no active dropout),
            torch otherwise (scores in one dense pass, softmax and weighted sum per slide).

        Returns
        -------
        torch.Tensor or tuple of torch.Tensor
            ``[B, n_heads * embed_dim]`` (and the weights when asked).
        """
        from tumorboard.kernels.abmil import abmil_pool

        if features.ndim != 2 or features.shape[1] != self.in_dim:
            raise InvalidArgumentError(
                f"features: expected a [sum N_i, {self.in_dim}] tensor, "
                f"got shape {list(features.shape)}"
            )
        dropout_on = self.training and self.dropout > 0.0
        chosen = choose_backend(backend, features.device, auto_triton=not dropout_on)
        h = self.model.patch_embed(features)
        if chosen == "triton":
            res = abmil_pool(h, offsets, *self._weights(), return_weights=return_weights,
                             backend="triton")  # fmt: skip
            out = res.pooled.reshape(res.pooled.shape[0], -1)
            return (out, res.weights[:, 0]) if return_weights else out
        # torch: the scores of all slides in one dense pass, then softmax and the weighted sum
        # per slide (a handful of slides per batch: dense products, no scatter)
        bounds = _check_offsets(h, offsets).tolist()
        s = self.model.global_attn(h).float()  # [T, K]
        out = h.new_zeros((len(bounds) - 1, self.embed_dim))
        weights = []
        for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            w = s[a:b].softmax(dim=0)  # [N_i, K]
            weights.append(w)
            if b > a:
                out[i] = (w.T.to(h.dtype) @ h[a:b]).reshape(-1)
        return (out, torch.cat(weights)) if return_weights else out


def feather(**options: Any) -> FeatherSlideEncoder:
    """FEATHER over CONCH v1.5 features (TRIDENT ``feather``): 768 -> 512.

    Parameters
    ----------
    **options
        :class:`FeatherSlideEncoder` options other than ``in_dim``.

    Returns
    -------
    FeatherSlideEncoder
        Random parameters.
    """
    return FeatherSlideEncoder(768, **options)


def feather_uni_v2(**options: Any) -> FeatherSlideEncoder:
    """FEATHER over UNI2-h features (TRIDENT ``feather_uni_v2``): 1536 -> 512.

    Parameters
    ----------
    **options
        :class:`FeatherSlideEncoder` options other than ``in_dim``.

    Returns
    -------
    FeatherSlideEncoder
        Random parameters.
    """
    return FeatherSlideEncoder(1536, **options)


def abmil_config(state: Mapping[str, torch.Tensor], *, path: Any = "<state dict>") -> dict:
    """Read an ``abmil`` slide encoder's configuration from its checkpoint's shapes.

    Parameters
    ----------
    state : Mapping of str to torch.Tensor
        A TRIDENT ``ABMILSlideEncoder`` state dict (``model.pre_attention_layers.0.weight``,
        ``model.image_pooler.attention_heads.{h}.0.weight``, ...).
    path : str or os.PathLike, default "<state dict>"
        The file named in errors.

    Returns
    -------
    dict
        ``in_dim``, ``hidden``, ``n_heads`` and ``gated``: the
        :class:`~tumorboard.models.abmil.ABMILSlideEncoder` arguments.

    Raises
    ------
    WeightsError
        The checkpoint lacks the pre-attention or first attention layer.
    """
    pre = "model.pre_attention_layers.0.weight"
    head = "model.image_pooler.attention_heads.0.0.weight"
    absent = [k for k in (pre, head) if k not in state]
    if absent:
        shown = ", ".join(sorted(state)[:8]) or "none"
        raise WeightsError(
            path,
            f"abmil: expected a TRIDENT ABMILSlideEncoder checkpoint with {', '.join(absent)}, "
            f"got keys {shown}",
        )
    heads = {k.split(".")[3] for k in state if k.startswith("model.image_pooler.attention_heads.")}
    return {
        "in_dim": int(state[pre].shape[1]),
        "hidden": int(state[head].shape[0]),
        "n_heads": len(heads),
        "gated": any(k.startswith("model.image_pooler.gating_layers.") for k in state),
    }


def load_slide_encoder(
    name: str,
    *,
    weights: str | os.PathLike[str] | None = None,
    in_dim: int | None = None,
    seed: int = 0,
) -> nn.Module:
    """Build a slide encoder by name and load its weights strictly, in eval mode, on the CPU.

    Parameters
    ----------
    name : str
        A built slide encoder (:func:`~tumorboard.models.slide_encoders`).
    weights : str or os.PathLike or None, default None
        Its checkpoint (``abmil``: a TRIDENT ``ABMILSlideEncoder`` state dict, whose shapes give
        the configuration; ``feather*``: the published ``model.safetensors``; ``titan``:
        MahmoodLab/TITAN's ``model.safetensors``, whose ``text_encoder.*`` and captioning
        pooler are dropped and whose shapes give width, depth and MLP ratio; ``chief``:
        hms-dbmi/CHIEF's ``CHIEF_pretraining.pth``, every key, whose shapes give the widths;
        ``madeleine``: MahmoodLab/madeleine's ``model.pt``, whose shapes give the widths and
        heads; ``gigapath``: ``slide_encoder.pth`` of prov-gigapath/prov-gigapath, its
        ``"model"`` dict, whose shapes give width, depth and FFN width; ``prism``:
        paige-ai/Prism's checkpoint, of which only ``image_resampler.*`` is used, whose shapes
        give the widths). None builds random parameters from ``seed`` with a
        :class:`~tumorboard.models.RandomWeightsWarning` (``mean-*`` has none to load).
    in_dim : int or None, default None
        The patch feature width; needed for ``mean-*`` of a patch encoder of no fixed width
        and for ``abmil`` without weights.
    seed : int, default 0
        Seed of the random parameters.

    Returns
    -------
    torch.nn.Module
        The encoder, float32, with ``in_dim``, ``embed_dim`` and ``forward_varlen``.

    Raises
    ------
    InvalidArgumentError
        An unknown or not-built name (the message says why it is not built), weights for
        ``mean-*``, or a missing ``in_dim``.
    tumorboard.models.WeightsError
        An unreadable checkpoint, or keys or shapes that do not match
        (:class:`~tumorboard.models.CheckpointKeyError` lists every missing, unexpected and
        mis-shaped key).
    """
    info = slide_encoder_info(name)
    if info.status != "built":
        built = [n for n in slide_encoders() if slide_encoder_info(n).status == "built"]
        raise InvalidArgumentError(
            f"slide_encoder: {info.name!r} is not built in tumorboard ({info.reason}); built: "
            f"{', '.join(n for n in built if not n.startswith('mean-'))} and mean-*"
        )
    width = info.in_dim or in_dim
    if not info.needs_weights:
        if weights is not None:
            raise InvalidArgumentError(
                f"slide_weights: {info.name!r} has no parameters, got {str(weights)!r}"
            )
        if width is None:
            raise InvalidArgumentError(f"in_dim: expected the patch feature width of {info.name}")
        return MeanSlideEncoder(int(width)).eval()
    state = None if weights is None else read_state_dict(weights)
    if info.name == "abmil":
        if state is not None:
            config = abmil_config(state, path=weights)
        elif width is None:
            raise InvalidArgumentError("in_dim: expected the patch feature width of abmil")
        else:
            config = {"in_dim": int(width), **RANDOM_ABMIL}

        def build() -> nn.Module:
            return ABMILSlideEncoder(**config)
    elif info.name == "titan":
        titan_options = dict(TITAN) if state is None else titan_config(state)

        def build() -> nn.Module:
            o = dict(titan_options)
            return TitanSlideEncoder(o.pop("in_dim"), **o)
    elif info.name == "chief":  # the checkpoint's shapes give the configuration
        chief_options = {} if state is None else chief_config(state)

        def build() -> nn.Module:
            return chief(**chief_options)
    elif info.name == "madeleine":  # the checkpoint's shapes give widths and heads
        madeleine_options = {} if state is None else madeleine_config(state)

        def build() -> nn.Module:
            return madeleine(**madeleine_options)
    elif info.name == "gigapath":
        giga_options = dict(GIGAPATH) if state is None else gigapath_config(state)

        def build() -> nn.Module:
            o = dict(giga_options)
            return GigaPathSlideEncoder(o.pop("in_dim"), **o)
    elif info.name == "prism":
        prism_options = dict(PRISM) if state is None else prism_config(state)

        def build() -> nn.Module:
            o = dict(prism_options)
            return PrismSlideEncoder(o.pop("in_dim"), **o)
    else:
        build = feather if info.name == "feather" else feather_uni_v2
    if state is None:
        warnings.warn(
            f"tumorboard.models: slide encoder {info.name!r} was built WITHOUT weights: its "
            f"parameters are random (seed {seed}) and its embeddings are meaningless. Pass "
            f"weights=PATH (official weights: {info.weights_source}).",
            RandomWeightsWarning,
            stacklevel=2,
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            module = build()
    else:
        with torch.device("meta"):
            module = build()
        adapt = getattr(module, "adapt_state_dict", None)
        if adapt is not None:
            state = adapt(state)
        load_state_dict(module, state, path=weights or "<state dict>",
                        model=f"{info.name} ({type(module).__name__})")  # fmt: skip
    return module.float().eval().requires_grad_(False)
