"""LAMMI-Pathology's trajectory-aware adapter on a Hugging Face causal LM.

LAMMI-Pathology (arXiv 2602.18773; its training figure, ``assets/LAMMI_training.png`` in the
LAMMI repository@d4dea63) keeps the language backbone frozen and adds per decoder layer one
trainable vector per trajectory segment (thought, action, action input). The FFN output of every
token is scaled channel-wise by its segment's vector::

    h_mod = (1 + Δ) ⊙ h_ffn,    Δ = Σ_k M_k[:, None] · γ_k[None, :]

with ``M_k`` the 0/1 segment masks computed from the marker tokens (:mod:`tumorboard.seqmask`).
Our choices where the paper is silent:

* the scaling applies to the MLP output (``mlp.down_proj``'s result) before the residual add;
* γ starts at zero, so the adapted model is the base model at initialization;
* γ is stored in float32 whatever the model dtype; the product is computed in float32 and cast
  back to the activation dtype;
* marker tokens themselves are not scaled (``mark_markers=False``), ``Observation:`` ends a span,
  and overlapping markers resolve leftmost-longest (see :mod:`tumorboard.seqmask`).

Typical use::

    adapter = SegmentAdapter.attach(model, tokenizer=tokenizer)   # base frozen, γ trainable
    opt = torch.optim.AdamW(adapter.parameters(), lr=1e-3)       # 3 · layers · hidden values
    loss = model(input_ids=ids, attention_mask=mask, labels=ids).loss
    adapter.save("lammi_adapter.safetensors")
    adapter.detach()                                              # the plain model again

Segment ids are computed from the ``input_ids`` (and 2-D ``attention_mask``) of every forward call
of the decoder. A call that sees only part of a trajectory (incremental decoding with a KV cache,
``inputs_embeds``) cannot know the open span: pass the ids yourself with
:meth:`SegmentAdapter.use_segment_ids`. On CUDA the scaling runs in the Triton kernel of
``tumorboard.kernels.segment_scale`` when it imports; elsewhere in plain torch.
"""

from __future__ import annotations

import contextlib
import numbers
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from .. import seqmask
from .._json import json_text
from ..errors import InvalidArgumentError, InvalidTypeError, StateError
from ..kernels import choose_backend

__all__ = ["SegmentAdapter", "segment_scale_torch"]

_FORMAT = "tumorboard.segment_adapter"
_GAMMA = "segment_gamma"


def segment_scale_torch(h: torch.Tensor, seg: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """Compute ``h * (1 + γ[seg])`` in plain torch, in float32 arithmetic.

    Parameters
    ----------
    h : torch.Tensor
        ``[..., D]`` activations.
    seg : torch.Tensor
        ``[...]`` segment ids: 0 = identity, 1..3 = the rows of ``gamma``.
    gamma : torch.Tensor
        ``[3, D]`` per-segment scales.

    Returns
    -------
    torch.Tensor
        The scaled activations, in ``h.dtype``.
    """
    table = torch.cat([gamma.new_zeros((1, gamma.shape[1])), gamma]).float()
    return (h.float() * (1.0 + table[seg.long()])).to(h.dtype)


def _scale(h: torch.Tensor, seg: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    if choose_backend("auto", h.device) == "triton":
        from ..kernels.segment_scale import segment_scale

        d = h.shape[-1]
        flat = segment_scale(h.reshape(-1, d), seg.reshape(-1).to(torch.int8), gamma,
                             backend="triton")  # fmt: skip
        return flat.reshape(h.shape)
    return segment_scale_torch(h, seg, gamma)


def _decoder_layers(model: nn.Module) -> tuple[nn.Module, Sequence[nn.Module]]:
    """Return (module receiving input_ids, its decoder layers) of a LLaMA/Qwen2-style model."""
    for decoder in (getattr(model, "model", None), model):
        layers = getattr(decoder, "layers", None)
        if isinstance(decoder, nn.Module) and isinstance(layers, nn.ModuleList) and len(layers):
            return decoder, layers
    raise InvalidTypeError(
        f"{type(model).__name__}: expected a LLaMA/Qwen2-style causal LM with "
        "model.model.layers[i].mlp.down_proj"
    )


class SegmentAdapter(nn.Module):
    """Per-layer, per-segment channel scales γ [3, hidden] on the MLP outputs of a causal LM.

    Build it with :meth:`attach`. ``gammas[i]`` is layer ``i``'s γ (rows: thought, action,
    action input); the same parameters are registered on ``layers[i].mlp`` as
    ``segment_gamma`` while attached, so ``model.parameters()`` yields them too.

    Parameters
    ----------
    n_layers : int
        Decoder layers.
    hidden : int
        Hidden size (the MLP output width).
    markers : Mapping
        Name -> token ids (or list of token-id variants), as :func:`seqmask.segment_ids` takes.
    mark_markers : bool, default False
        Scale the marker tokens with their span's γ.
    ignore_ids : sequence of int, default ()
        Token ids never scaled.
    """

    def __init__(
        self,
        n_layers: int,
        hidden: int,
        *,
        markers: seqmask.MarkerIds,
        mark_markers: bool = False,
        ignore_ids: Sequence[int] = (),
    ) -> None:
        super().__init__()
        if n_layers < 1 or hidden < 1:
            raise InvalidArgumentError(
                f"n_layers and hidden: expected integers >= 1, got {n_layers} and {hidden}"
            )
        seqmask._compile(markers)  # validates now rather than at the first forward
        self.markers = markers
        self.mark_markers = bool(mark_markers)
        self.ignore_ids = tuple(int(i) for i in ignore_ids)
        self.gammas = nn.ParameterList(
            [nn.Parameter(torch.zeros(3, hidden, dtype=torch.float32)) for _ in range(n_layers)]
        )
        self._model: nn.Module | None = None
        self._handles: list[Any] = []
        self._mlps: list[nn.Module] = []
        self._requires_grad: dict[str, bool] = {}
        self._seg: torch.Tensor | None = None
        self._override: torch.Tensor | None = None

    # ------------------------------------------------------------------ attach / detach
    @classmethod
    def attach(
        cls,
        model: nn.Module,
        *,
        markers: Mapping[str, Any] | None = None,
        tokenizer: Any = None,
        mark_markers: bool = False,
        ignore_ids: Sequence[int] = (),
    ) -> SegmentAdapter:
        """Freeze ``model`` and scale every decoder layer's MLP output by ``1 + γ[segment]``.

        Parameters
        ----------
        model : torch.nn.Module
            A Hugging Face causal LM with ``model.model.layers[i].mlp.down_proj`` (LLaMA, Qwen2,
            Mistral ...) or its bare decoder (``.layers``).
        markers : Mapping or None, default None
            Name -> token ids (or list of token-id variants) for ``thought``, ``action``,
            ``action_input`` and ``observation``; or, with ``tokenizer``, name -> marker string.
            None with ``tokenizer``: :data:`seqmask.DEFAULT_MARKERS`.
        tokenizer : transformers.PreTrainedTokenizerFast or None, default None
            A fast tokenizer to turn marker strings into token ids
            (:func:`seqmask.marker_token_ids`, every tokenization variant).
        mark_markers : bool, default False
            Scale the marker tokens with their span's γ (default: not scaled).
        ignore_ids : sequence of int, default ()
            Token ids never scaled (image placeholder tokens, BOS, padding).

        Returns
        -------
        SegmentAdapter
            The adapter, on the model's device; γ is zero so outputs are unchanged.
        """
        decoder, layers = _decoder_layers(model)
        for i, layer in enumerate(layers):
            mlp = getattr(layer, "mlp", None)
            down = getattr(mlp, "down_proj", None)
            if not isinstance(down, nn.Linear):
                raise InvalidTypeError(
                    f"layers[{i}].mlp.down_proj: expected an nn.Linear, got {down!r}"
                )
            if _GAMMA in mlp._parameters:
                raise StateError(f"layers[{i}].mlp already carries a SegmentAdapter; detach it")
        if tokenizer is not None:
            strings = seqmask.DEFAULT_MARKERS if markers is None else markers
            other = [v for v in strings.values() if not isinstance(v, str)]
            if other:
                raise InvalidTypeError(
                    "markers: expected marker names mapped to strings (with tokenizer), "
                    f"got {other[0]!r}"
                )
            resolved: Mapping[str, Any] = seqmask.marker_token_ids(tokenizer, strings)
        elif markers is None:
            raise InvalidArgumentError("attach needs markers (token ids) or a tokenizer")
        else:
            if any(isinstance(v, str) for v in markers.values()):
                raise InvalidTypeError("markers given as strings need tokenizer=")
            resolved = markers
        down0 = layers[0].mlp.down_proj
        adapter = cls(
            len(layers),
            down0.out_features,
            markers=resolved,
            mark_markers=mark_markers,
            ignore_ids=ignore_ids,
        ).to(down0.weight.device)
        adapter._requires_grad = {n: p.requires_grad for n, p in model.named_parameters()}
        model.requires_grad_(False)
        for i, layer in enumerate(layers):
            if layer.mlp.down_proj.out_features != down0.out_features:
                raise InvalidArgumentError(f"layers[{i}]: hidden size differs from layer 0")
            layer.mlp.register_parameter(_GAMMA, adapter.gammas[i])
            adapter._mlps.append(layer.mlp)
            adapter._handles.append(layer.mlp.register_forward_hook(adapter._make_hook(i)))
        adapter._handles.append(
            decoder.register_forward_pre_hook(adapter._pre_hook, with_kwargs=True)
        )
        # Not a submodule: adapter.parameters() and state_dict() hold γ only.
        object.__setattr__(adapter, "_model", model)
        return adapter

    @property
    def attached(self) -> bool:
        """True while the adapter's hooks are on a model."""
        return self._model is not None

    def detach(self) -> nn.Module:
        """Remove the hooks and γ from the model and restore its ``requires_grad`` flags.

        Returns
        -------
        torch.nn.Module
            The model, as it was before :meth:`attach`.
        """
        if self._model is None:
            raise StateError("SegmentAdapter is not attached")
        for h in self._handles:
            h.remove()
        for mlp in self._mlps:
            del mlp._parameters[_GAMMA]
        for name, p in self._model.named_parameters():
            p.requires_grad_(self._requires_grad.get(name, True))
        model = self._model
        object.__setattr__(self, "_model", None)
        self._handles, self._mlps, self._seg = [], [], None
        return model

    # ------------------------------------------------------------------ segment ids
    def segment_ids(self, input_ids: torch.Tensor, attention_mask: Any = None) -> torch.Tensor:
        """Return the int8 [B, L] segment ids of a (padded) batch, as the forward hooks do."""
        if input_ids.ndim == 1:
            input_ids = input_ids[None]
        if attention_mask is not None and (
            not isinstance(attention_mask, torch.Tensor) or attention_mask.shape != input_ids.shape
        ):
            attention_mask = None  # 4-D or custom masks: every position counts
        return seqmask.segment_ids_padded(
            input_ids,
            attention_mask,
            markers=self.markers,
            mark_markers=self.mark_markers,
            ignore_ids=self.ignore_ids,
        )

    @contextlib.contextmanager
    def use_segment_ids(self, seg: torch.Tensor) -> Iterator[None]:
        """Use ``seg`` ([B, L] ids, 0..3) instead of computing them from ``input_ids``."""
        self._override = seg
        try:
            yield
        finally:
            self._override = None

    def _pre_hook(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        if self._override is not None:
            self._seg = self._override
            return
        ids = kwargs.get("input_ids")
        if ids is None and args:
            ids = args[0]
        if not isinstance(ids, torch.Tensor):
            raise InvalidArgumentError(
                "SegmentAdapter computes segments from input_ids; this call has none "
                "(inputs_embeds?): wrap it in adapter.use_segment_ids(seg)"
            )
        self._seg = self.segment_ids(ids, kwargs.get("attention_mask"))

    def _make_hook(self, i: int) -> Any:
        def hook(module: nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
            # The last computed ids stay valid for recomputation (gradient checkpointing).
            seg = self._seg
            if seg is None:
                return output
            if seg.shape != output.shape[:-1]:
                raise InvalidArgumentError(
                    f"segment ids {tuple(seg.shape)} do not match the MLP output "
                    f"{tuple(output.shape)} of layer {i}"
                )
            return _scale(output, seg.to(output.device), self.gammas[i])

        return hook

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write γ as safetensors: ``layers.{i}.gamma`` [3, hidden] float32, plus metadata."""
        from safetensors.torch import save_file

        tensors = {f"layers.{i}.gamma": g.detach().cpu().contiguous() for i, g in self._items()}
        meta = {
            "format": _FORMAT,
            "n_layers": str(len(self.gammas)),
            "hidden": str(self.gammas[0].shape[1]),
            "segments": "thought,action,action_input",
            "markers": json_text({k: _jsonable(v) for k, v in self.markers.items()}),
            "mark_markers": str(self.mark_markers),
        }
        save_file(tensors, os.fspath(path), metadata=meta)

    def load(self, path: str | os.PathLike[str]) -> SegmentAdapter:
        """Load γ written by :meth:`save` (in place, keeps markers) and return ``self``."""
        from safetensors import safe_open

        path = os.fspath(path)
        with safe_open(path, framework="pt") as f:
            meta = f.metadata() or {}
            if meta.get("format") != _FORMAT:
                raise InvalidArgumentError(f"{path}: not a SegmentAdapter file (metadata format)")
            keys = set(f.keys())
            want = {f"layers.{i}.gamma" for i in range(len(self.gammas))}
            if keys != want:
                raise InvalidArgumentError(
                    f"{path}: expected keys layers.0..{len(self.gammas) - 1}.gamma, "
                    f"missing {sorted(want - keys)}, unexpected {sorted(keys - want)}"
                )
            with torch.no_grad():
                for i, g in self._items():
                    t = f.get_tensor(f"layers.{i}.gamma")
                    if t.shape != g.shape:
                        raise InvalidArgumentError(
                            f"{path}: layers.{i}.gamma has shape {tuple(t.shape)}, "
                            f"expected {tuple(g.shape)}"
                        )
                    g.copy_(t)
        return self

    def _items(self) -> Iterator[tuple[int, nn.Parameter]]:
        return enumerate(self.gammas)

    def extra_repr(self) -> str:
        """Return the size and state shown in the module's repr."""
        return (
            f"layers={len(self.gammas)}, hidden={self.gammas[0].shape[1]}, "
            f"attached={self.attached}, mark_markers={self.mark_markers}"
        )


def _jsonable(v: Any) -> Any:
    if isinstance(v, str):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    return [_jsonable(x) for x in v]
