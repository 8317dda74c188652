"""The rows of the model registry: :class:`ModelInfo` (public) and :class:`Entry` (builder + row).

Kept apart from :mod:`tumorboard.models._registry` so that the encoder zoo modules
(:mod:`tumorboard.models._zoo`) can declare their rows without importing the registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

__all__ = ["RANDOM_WEIGHTS_SOURCE", "Entry", "Kind", "ModelInfo"]

#: ``weights_source`` of the tiny random-weight models used by tests and the demo.
RANDOM_WEIGHTS_SOURCE = "none (random weights, for tests and the demo)"

Kind = Literal["encoder", "slide_encoder", "regressor"]


@dataclass(frozen=True)
class ModelInfo:
    """What the registry knows about a model name.

    Attributes
    ----------
    name : str
        The canonical name (one of :func:`available`).
    kind : {"encoder", "slide_encoder", "regressor"}
        ``"encoder"``: a patch encoder, images ``[B, 3, H, W]`` -> ``[B, embed_dim]``;
        ``"slide_encoder"``: ABMIL over a bag of patch features; ``"regressor"``: MTBBench's IHC
        head.
    embed_dim : int or None
        Output width; ``None`` where an option decides it (``abmil``: ``in_dim``).
    image_size : int or None
        Native input size of an encoder; ``None`` for the others.
    mean, std : tuple of three floats, or None
        Per-channel input normalisation of an encoder (for images in [0, 1]); ``None`` for the
        others.
    interpolation : {"bilinear", "bicubic"} or None
        The resize filter of the encoder's reference preprocessing; ``None`` for the others.
    gpu_dtype : torch.dtype
        The dtype TRIDENT runs the model in on CUDA, which ``load(dtype="auto")`` casts to there.
    trident_name : str or None
        TRIDENT's name (its ``features_{trident_name}`` directories), accepted by :func:`load`.
    weights_source : str
        Where the official weights come from (tumorboard never downloads them).
    license : str or None, default None
        The license of the published weights (None: not recorded).
    gated : bool or None, default None
        Whether the weights need an access request (None: not recorded).
    magnification : float or None, default None
        The magnification the encoder is recommended at (TRIDENT's table), e.g. 20.0.
    patch_size : int or None, default None
        The recommended patch side in pixels at ``magnification``.
    pooling : str or None, default None
        Which tokens form the embedding (e.g. "class token", "class token + mean of patch
        tokens").
    """

    name: str
    kind: Kind
    embed_dim: int | None
    image_size: int | None
    mean: tuple[float, float, float] | None
    std: tuple[float, float, float] | None
    interpolation: Literal["bilinear", "bicubic"] | None
    gpu_dtype: torch.dtype
    trident_name: str | None
    weights_source: str
    license: str | None = None
    gated: bool | None = None
    magnification: float | None = None
    patch_size: int | None = None
    pooling: str | None = None

    @property
    def published_weights(self) -> bool:
        """Whether the model has weights to download (False: random weights only)."""
        return self.weights_source != RANDOM_WEIGHTS_SOURCE


@dataclass(frozen=True)
class Entry:
    info: ModelInfo
    build: Callable[..., nn.Module]  # keyword options -> module with random parameters
    build_zero_shot: Callable[..., Any] | None = None  # the full CONCH model (load_conch)
