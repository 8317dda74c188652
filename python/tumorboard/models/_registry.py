"""The model registry (name -> builder and metadata) and :func:`load`.

The architectures and their named configurations live beside their classes
(:mod:`tumorboard.models.vit`, :mod:`tumorboard.models.conch`, :mod:`tumorboard.models.abmil`);
this module only says which builder and which metadata each public name has, and loads weights.
Names are matched case-insensitively with ``_`` and ``-`` equivalent, and TRIDENT's encoder names
(``uni_v2``, ``uni_v1``, ``conch_v1``) are accepted too.
"""

from __future__ import annotations

import inspect
import numbers
import os
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from ..errors import InvalidArgumentError, InvalidTypeError
from ._device import resolve_device, resolve_dtype
from .abmil import ABMILSlideEncoder, MTBBenchRegressor
from .conch import (
    CONCH,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    conch_b16,
    conch_b16_vision,
    conch_tiny,
    conch_tiny_vision,
)
from .conch_tokenizer import ConchTokenizer
from .vit import IMAGENET_MEAN, IMAGENET_STD, uni, uni2_h, uni2_tiny
from .weights import RandomWeightsWarning, load_state_dict, read_state_dict

__all__ = ["ModelInfo", "available", "build", "info", "load", "load_conch"]

from ._info import RANDOM_WEIGHTS_SOURCE as _RANDOM
from ._info import Entry as _Entry
from ._info import ModelInfo
from ._zoo import ENTRIES as _ZOO_ENTRIES

_ENTRIES = (
    _Entry(
        ModelInfo(
            name="uni2-h",
            kind="encoder",
            embed_dim=1536,
            image_size=224,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            interpolation="bilinear",
            gpu_dtype=torch.bfloat16,
            trident_name="uni_v2",
            weights_source="Hugging Face MahmoodLab/UNI2-h, pytorch_model.bin (gated)",
            license="CC-BY-NC-ND-4.0",
            gated=True,
            magnification=20.0,
            patch_size=256,
            pooling="class token",
        ),
        build=uni2_h,
    ),
    _Entry(
        ModelInfo(
            name="uni",
            kind="encoder",
            embed_dim=1024,
            image_size=224,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            interpolation="bilinear",
            gpu_dtype=torch.float16,
            trident_name="uni_v1",
            weights_source="Hugging Face MahmoodLab/UNI, pytorch_model.bin (gated)",
            license="CC-BY-NC-ND-4.0",
            gated=True,
            magnification=20.0,
            patch_size=256,
            pooling="class token",
        ),
        build=uni,
    ),
    _Entry(
        ModelInfo(
            name="conch",
            kind="encoder",
            embed_dim=512,
            image_size=448,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            interpolation="bicubic",
            gpu_dtype=torch.float32,
            trident_name="conch_v1",
            weights_source="Hugging Face MahmoodLab/conch, pytorch_model.bin (gated)",
            license="CC-BY-NC-ND-4.0",
            gated=True,
            pooling="attentional-pooler contrastive token after ln_contrast, before proj_contrast",
        ),
        build=conch_b16_vision,
        build_zero_shot=conch_b16,
    ),
    _Entry(
        ModelInfo(
            name="uni2-tiny",
            kind="encoder",
            embed_dim=48,
            image_size=224,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            interpolation="bilinear",
            gpu_dtype=torch.bfloat16,
            trident_name=None,
            weights_source=_RANDOM,
        ),
        build=uni2_tiny,
    ),
    _Entry(
        ModelInfo(
            name="conch-tiny",
            kind="encoder",
            embed_dim=16,
            image_size=448,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            interpolation="bicubic",
            gpu_dtype=torch.float32,
            trident_name=None,
            weights_source=_RANDOM,
        ),
        build=conch_tiny_vision,
        build_zero_shot=conch_tiny,
    ),
    _Entry(
        ModelInfo(
            name="abmil",
            kind="slide_encoder",
            embed_dim=None,
            image_size=None,
            mean=None,
            std=None,
            interpolation=None,
            gpu_dtype=torch.float32,
            trident_name="abmil",
            weights_source="your own training run (TRIDENT ABMILSlideEncoder layout)",
        ),
        build=ABMILSlideEncoder,
    ),
    _Entry(
        ModelInfo(
            name="mtbbench-regressor",
            kind="regressor",
            embed_dim=1,
            image_size=None,
            mean=None,
            std=None,
            interpolation=None,
            gpu_dtype=torch.float32,
            trident_name=None,
            weights_source="MTBBench data/ABMIL_checkpoint_regression.pt",
        ),
        build=MTBBenchRegressor,
    ),
)


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-")


_ENTRIES = _ENTRIES + _ZOO_ENTRIES
_REGISTRY: dict[str, _Entry] = {e.info.name: e for e in _ENTRIES}
_LOOKUP: dict[str, _Entry] = {
    _key(spelling): e
    for e in _ENTRIES
    for spelling in (e.info.name, e.info.trident_name)
    if spelling is not None
}


def _entry(name: str) -> _Entry:
    if not isinstance(name, str):
        raise InvalidTypeError(f"name: expected a model name (str), got {type(name).__name__}")
    entry = _LOOKUP.get(_key(name))
    if entry is None:
        raise InvalidArgumentError(
            f"name: unknown model {name!r}; available: {', '.join(available())}"
        )
    return entry


def _check_options(
    name: str, build: Callable[..., nn.Module], options: Mapping[str, Any], *, call: str
) -> None:
    params = [
        p
        for p in inspect.signature(build).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    accepted = [p.name for p in params]
    unexpected = sorted(set(options) - set(accepted))
    if unexpected:
        raise InvalidTypeError(
            f"{call}({name!r}): unexpected option(s) {', '.join(unexpected)}; {name!r} takes "
            f"{', '.join(accepted) or 'no options'}"
        )
    missing = [p.name for p in params if p.default is p.empty and p.name not in options]
    if missing:
        raise InvalidTypeError(
            f"{call}({name!r}) needs {', '.join(m + '=' for m in missing)} (no default; see "
            f"{build.__module__}.{build.__qualname__})"
        )


def available() -> tuple[str, ...]:
    """List the canonical model names.

    Returns
    -------
    tuple of str
        The names :func:`load`, :func:`build` and :func:`info` accept, in registry order. TRIDENT
        names (``uni_v2``, ``uni_v1``, ``conch_v1``) and spellings with ``_`` for ``-`` are
        accepted as well.
    """
    return tuple(_REGISTRY)


def info(name: str) -> ModelInfo:
    """Look up the metadata of a model.

    Parameters
    ----------
    name : str
        A name of :func:`available` or a TRIDENT name.

    Returns
    -------
    ModelInfo
        The model's registry row.

    Raises
    ------
    InvalidArgumentError
        If ``name`` is not a registered model.
    InvalidTypeError
        If ``name`` is not a str.
    """
    return _entry(name).info


def build(name: str, **options: Any) -> nn.Module:
    """Build a named architecture with freshly initialised (random) parameters.

    No weights are loaded and no warning is given. Build inside ``with torch.device("meta"):`` to
    inspect key names and shapes without allocating memory.

    Parameters
    ----------
    name : str
        A name of :func:`available` or a TRIDENT name.
    **options
        The model's builder options, as for :func:`load`.

    Returns
    -------
    torch.nn.Module
        The module, in training mode, on the current default device.

    Raises
    ------
    InvalidArgumentError
        If ``name`` is not a registered model.
    InvalidTypeError
        If an option is unknown to the model or a required one is missing.
    """
    entry = _entry(name)
    _check_options(entry.info.name, entry.build, options, call="build")
    return entry.build(**options)


def _build_and_load(
    model: ModelInfo,
    build: Callable[[], nn.Module],
    weights: str | os.PathLike[str] | None,
    seed: int,
    device: torch.device,
    dtype: torch.dtype,
) -> nn.Module:
    if weights is None:
        warnings.warn(
            f"tumorboard.models: {model.name!r} was built WITHOUT weights: its parameters are "
            f"random (seed {seed}) and its outputs are meaningless. Pass weights=PATH to use the "
            f"real model (official weights: {model.weights_source}).",
            RandomWeightsWarning,
            stacklevel=3,  # the caller of load / load_conch
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            module = build()
    else:
        state = read_state_dict(weights)
        with torch.device("meta"):
            module = build()
        adapt = getattr(module, "adapt_state_dict", None)
        if adapt is not None:
            state = adapt(state)
        load_state_dict(
            module, state, path=weights, model=f"{model.name} ({type(module).__name__})"
        )
    return module.to(device=device, dtype=dtype).eval()


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise InvalidTypeError(f"seed: expected an int, got {type(seed).__name__}")
    return int(seed)


def load(
    name: str,
    *,
    weights: str | os.PathLike[str] | None = None,
    device: str | torch.device = "auto",
    dtype: str | torch.dtype = "auto",
    seed: int = 0,
    **options: Any,
) -> nn.Module:
    """Build a model by name and load its weights (strict keys), in eval mode.

    Parameters
    ----------
    name : str
        One of :func:`available` (``"uni2-h"``, ``"uni"``, ``"conch"``, ``"uni2-tiny"``,
        ``"conch-tiny"``, ``"abmil"``, ``"mtbbench-regressor"``) or a TRIDENT name.
    weights : str or os.PathLike, optional
        Checkpoint path (``.bin``/``.pt``/``.pth``/``.safetensors``; see
        :mod:`tumorboard.models.weights`). ``None`` (default) builds random weights from ``seed``
        and warns with :class:`~tumorboard.models.weights.RandomWeightsWarning`.
    device : str or torch.device, default "auto"
        ``"auto"`` (CUDA if available), ``"cpu"``, ``"cuda:0"``, ...
    dtype : str or torch.dtype, default "auto"
        ``"auto"`` is TRIDENT's inference precision on CUDA (:attr:`ModelInfo.gpu_dtype`: bf16
        UNI2-h, fp16 UNI, fp32 CONCH and the ABMIL models) and float32 elsewhere. The parameters
        are cast to it (TRIDENT autocasts instead); encoders cast their input to it and return it.
    seed : int, default 0
        Seed of the random initialisation when ``weights`` is None (deterministic; the global RNG
        state is left untouched).
    **options
        The builder's options. Encoders: ``image_size`` (the preprocessing size; UNI models
        resample their position embedding at run time, bicubic; CONCH resamples the checkpoint's
        grid at load, bilinear, as its ``force_image_size``: MTBBench uses 1024). ``conch``:
        ``proj_contrast=False, normalize=False`` give TRIDENT's ``conch_v1`` feature
        (``ln_contrast`` output, 512-d, unnormalised), ``True, True`` the zero-shot embedding
        (:func:`~tumorboard.models.conch.conch_b16_vision`). ``abmil``: ``in_dim`` (required),
        ``hidden``, ``n_heads``, ``gated``, ``dropout``
        (:class:`~tumorboard.models.abmil.ABMILSlideEncoder`). ``mtbbench-regressor``: the same
        plus ``freeze_encoder``, defaults MTBBench's
        (:class:`~tumorboard.models.abmil.MTBBenchRegressor`).

    Returns
    -------
    torch.nn.Module
        The model on ``device`` in ``dtype``, in eval mode. Encoders expose ``name``,
        ``embed_dim``, ``image_size``, ``mean``, ``std`` and ``interpolation``; ``module(x)`` maps
        normalised images ``[B, 3, H, W]`` to ``[B, embed_dim]``.

    Raises
    ------
    InvalidArgumentError
        If ``name``, ``device``, ``dtype`` or an option value is invalid.
    InvalidTypeError
        If an option is unknown to the model or a required one is missing.
    tumorboard.models.WeightsError
        If the checkpoint cannot be read or its keys or shapes do not match the model
        (:class:`~tumorboard.models.CheckpointKeyError` lists every difference).
    FileNotFoundError
        If ``weights`` does not exist.
    """
    entry = _entry(name)
    _check_options(entry.info.name, entry.build, options, call="load")
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, device=dev, gpu_dtype=entry.info.gpu_dtype)
    return _build_and_load(
        entry.info, lambda: entry.build(**options), weights, _check_seed(seed), dev, dt
    )


def load_conch(
    name: str = "conch",
    *,
    weights: str | os.PathLike[str] | None = None,
    tokenizer: str | os.PathLike[str] | ConchTokenizer | None = None,
    device: str | torch.device = "auto",
    dtype: str | torch.dtype = "auto",
    image_size: int | None = None,
    seed: int = 0,
) -> CONCH:
    """Load the full CONCH model (image and text towers, ``logit_scale``) for zero-shot use.

    Parameters
    ----------
    name : {"conch", "conch-tiny"}
        The configuration (:data:`~tumorboard.models.conch.CONCH_B16` or
        :data:`~tumorboard.models.conch.CONCH_TINY`).
    weights : str or os.PathLike, optional
        The CONCH checkpoint (``pytorch_model.bin``); ``text_decoder.*`` and the caption pooler
        keys are ignored, everything else is checked strictly. ``None``: random weights with a
        :class:`~tumorboard.models.weights.RandomWeightsWarning`.
    tokenizer : str, os.PathLike or ConchTokenizer, optional
        The tokenizer JSON (``conch_byte_level_bpe_uncased.json``) or a :class:`ConchTokenizer`;
        enables :meth:`CONCH.encode_prompts`.
    device, dtype, seed
        As :func:`load` (``"auto"`` dtype is float32 for CONCH).
    image_size : int, optional
        Build for another input size (MTBBench: 1024); the checkpoint's position grid is
        resampled bilinearly at load.

    Returns
    -------
    CONCH
        The model on ``device`` in ``dtype``, in eval mode, with ``tokenizer`` attached.

    Raises
    ------
    InvalidArgumentError
        If ``name`` is not a CONCH model, ``device``/``dtype`` are invalid, or the tokenizer's
        context length differs from the model's.
    tumorboard.models.WeightsError
        If the checkpoint cannot be read or does not match the model.
    """
    entry = _entry(name)
    zero_shot = entry.build_zero_shot
    if zero_shot is None:
        with_text = [e.info.name for e in _ENTRIES if e.build_zero_shot is not None]
        raise InvalidArgumentError(
            f"name: load_conch takes one of {', '.join(map(repr, with_text))}, got {name!r}"
        )
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, device=dev, gpu_dtype=entry.info.gpu_dtype)
    model = _build_and_load(
        entry.info, lambda: zero_shot(image_size=image_size), weights, _check_seed(seed), dev, dt
    )
    assert isinstance(model, CONCH)
    if tokenizer is not None:
        tok = tokenizer if isinstance(tokenizer, ConchTokenizer) else ConchTokenizer(tokenizer)
        if tok.context_length != model.config.context_length:
            raise InvalidArgumentError(
                f"tokenizer: produces {tok.context_length} ids, the model expects "
                f"{model.config.context_length}"
            )
        model.tokenizer = tok
    return model
