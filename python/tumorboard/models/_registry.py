"""Named model configurations and :func:`load` (see the package docstring)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from .abmil import ABMILSlideEncoder, MTBBenchRegressor
from .conch import CONCH, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, ConchConfig, ConchVisionEncoder
from .conch_tokenizer import ConchTokenizer
from .vit import IMAGENET_MEAN, IMAGENET_STD, VisionTransformer, ViTConfig
from .weights import RandomWeightsWarning, load_state_dict, read_state_dict

Kind = Literal["encoder", "slide_encoder", "regressor"]

# --- architectures (REFERENCE §1-3) ---------------------------------------------------------

#: UNI2-h: timm vit_giant_patch14_224 overridden to 1536/24/24, SwiGLU (hidden int(1536 *
#: 5.33334) = 8192), LayerScale 1e-5, 8 registers, pos-embed for patches only.
UNI2_H = ViTConfig(
    image_size=224,
    patch_size=14,
    embed_dim=1536,
    depth=24,
    num_heads=24,
    mlp_hidden=int(1536 * 5.33334),
    mlp="swiglu",
    init_values=1e-5,
    reg_tokens=8,
    no_embed_class=True,
)
#: UNI (v1): timm vit_large_patch16_224 with LayerScale 1e-5.
UNI_V1 = ViTConfig(
    image_size=224,
    patch_size=16,
    embed_dim=1024,
    depth=24,
    num_heads=16,
    mlp_hidden=4096,
    init_values=1e-5,
)
#: The UNI2-h architecture scaled down (same class and code paths) for tests and the demo.
UNI2_TINY = ViTConfig(
    image_size=224,
    patch_size=14,
    embed_dim=48,
    depth=2,
    num_heads=3,
    mlp_hidden=int(48 * 5.33334),
    mlp="swiglu",
    init_values=1e-5,
    reg_tokens=8,
    no_embed_class=True,
)
#: CONCH as released (conch_ViT-B-16).
CONCH_B16 = ConchConfig()
#: CONCH scaled down for tests and the demo (same classes, same 128-id text input).
CONCH_TINY = ConchConfig(
    vision=ViTConfig(
        image_size=448, patch_size=16, embed_dim=32, depth=2, num_heads=2, mlp_hidden=128
    ),
    embed_dim=16,
    pooler_heads=2,
    context_length=128,
    vocab_size=32007,
    text_width=32,
    text_heads=2,
    text_layers=2,
)


@dataclass(frozen=True)
class ModelInfo:
    """What :func:`load` knows about a model name.

    Attributes:
        name: canonical name.
        kind: ``"encoder"`` (patch encoder: images -> [B, D]), ``"slide_encoder"`` (ABMIL) or
            ``"regressor"`` (MTBBench IHC head).
        embed_dim: output width; 0 where options decide it (``abmil``: ``in_dim``).
        image_size: native input size (encoders), else 0.
        mean, std: input normalisation (encoders).
        interpolation: resize filter of the reference preprocessing (encoders).
        gpu_dtype: the dtype TRIDENT autocasts to on GPU (``dtype="auto"``).
        trident_name: TRIDENT's encoder name (``features_{trident_name}`` directories), or "".
        weights_source: where the official weights come from.
    """

    name: str
    kind: Kind
    embed_dim: int
    image_size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    interpolation: str
    gpu_dtype: torch.dtype
    trident_name: str
    weights_source: str


_NO_NORM = (0.0, 0.0, 0.0)
_INFOS: dict[str, ModelInfo] = {
    i.name: i
    for i in (
        ModelInfo("uni2-h", "encoder", 1536, 224, IMAGENET_MEAN, IMAGENET_STD, "bilinear",
                  torch.bfloat16, "uni_v2",
                  "Hugging Face MahmoodLab/UNI2-h, pytorch_model.bin (gated)"),
        ModelInfo("uni", "encoder", 1024, 224, IMAGENET_MEAN, IMAGENET_STD, "bilinear",
                  torch.float16, "uni_v1",
                  "Hugging Face MahmoodLab/UNI, pytorch_model.bin (gated)"),
        ModelInfo("conch", "encoder", 512, 448, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, "bicubic",
                  torch.float32, "conch_v1",
                  "Hugging Face MahmoodLab/conch, pytorch_model.bin (gated)"),
        ModelInfo("uni2-tiny", "encoder", 48, 224, IMAGENET_MEAN, IMAGENET_STD, "bilinear",
                  torch.bfloat16, "", "none (random weights, for tests and the demo)"),
        ModelInfo("conch-tiny", "encoder", 16, 448, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD,
                  "bicubic", torch.float32, "", "none (random weights, for tests and the demo)"),
        ModelInfo("abmil", "slide_encoder", 0, 0, _NO_NORM, _NO_NORM, "", torch.float32, "abmil",
                  "your own training run (TRIDENT ABMILSlideEncoder layout)"),
        ModelInfo("mtbbench-regressor", "regressor", 1, 0, _NO_NORM, _NO_NORM, "",
                  torch.float32, "",
                  "MTBBench data/ABMIL_checkpoint_regression.pt"),
    )
}  # fmt: skip
_ALIASES = {
    "uni_v2": "uni2-h",
    "uni2_h": "uni2-h",
    "uni-v2": "uni2-h",
    "uni_v1": "uni",
    "uni-v1": "uni",
    "conch_v1": "conch",
    "conch-v1": "conch",
    "uni2_tiny": "uni2-tiny",
    "conch_tiny": "conch-tiny",
    "mtbbench_regressor": "mtbbench-regressor",
}


def available() -> tuple[str, ...]:
    """Canonical names :func:`load` accepts (TRIDENT names ``uni_v2``, ``uni_v1``,
    ``conch_v1`` are accepted as aliases)."""
    return tuple(_INFOS)


def info(name: str) -> ModelInfo:
    """The :class:`ModelInfo` of a model name or alias."""
    return _INFOS[_canonical(name)]


def _canonical(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"model name must be a str, got {type(name).__name__}")
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _INFOS:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(available())}")
    return key


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"`` -> ``cuda`` when available, else ``cpu``; anything else through
    ``torch.device``."""
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"device must be 'auto', 'cpu', 'cuda[:i]' or a torch.device: {exc}"
        ) from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available")
    return dev


_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}


def resolve_dtype(dtype: str | torch.dtype, name: str, device: torch.device) -> torch.dtype:
    """``"auto"``: on CUDA the dtype TRIDENT autocasts the model to (bf16 UNI2-h, fp16 UNI, fp32
    CONCH and the ABMIL models), float32 elsewhere. Strings such as ``"bf16"`` are accepted."""
    if isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point:
            raise ValueError(f"dtype must be a floating dtype, got {dtype}")
        return dtype
    if dtype == "auto":
        return info(name).gpu_dtype if device.type == "cuda" else torch.float32
    if isinstance(dtype, str) and dtype.lower() in _DTYPES:
        return _DTYPES[dtype.lower()]
    raise ValueError(
        f"dtype must be 'auto', a torch dtype or one of {sorted(_DTYPES)}, got {dtype!r}"
    )


def _builder(name: str, options: dict[str, Any]) -> Callable[[], nn.Module]:
    opts = dict(options)

    def take(key: str, default: Any) -> Any:
        return opts.pop(key, default)

    if name in ("uni2-h", "uni", "uni2-tiny"):
        cfg = {"uni2-h": UNI2_H, "uni": UNI_V1, "uni2-tiny": UNI2_TINY}[name]
        size = take("image_size", None)

        def build() -> nn.Module:
            return VisionTransformer(
                cfg, name=name, image_size=size, mean=IMAGENET_MEAN, std=IMAGENET_STD,
                interpolation="bilinear",
            )  # fmt: skip

    elif name in ("conch", "conch-tiny"):
        ccfg = CONCH_B16 if name == "conch" else CONCH_TINY
        size = take("image_size", None)
        if size is not None:
            ccfg = ccfg.with_image_size(size)
        proj, norm = bool(take("proj_contrast", False)), bool(take("normalize", False))

        def build() -> nn.Module:
            return ConchVisionEncoder(ccfg, name=name, proj_contrast=proj, normalize=norm)

    elif name == "abmil":
        if "in_dim" not in opts:
            raise TypeError("load('abmil') needs in_dim= (the patch feature width, e.g. 1536)")
        kwargs = {k: opts.pop(k) for k in ("hidden", "n_heads", "gated", "dropout") if k in opts}
        in_dim = int(opts.pop("in_dim"))

        def build() -> nn.Module:
            return ABMILSlideEncoder(in_dim, **kwargs)

    else:  # mtbbench-regressor
        keys = ("in_dim", "hidden", "n_heads", "gated", "dropout", "freeze_encoder")
        kwargs = {k: opts.pop(k) for k in keys if k in opts}

        def build() -> nn.Module:
            return MTBBenchRegressor(**kwargs)

    if opts:
        raise TypeError(f"unexpected option(s) for {name!r}: {', '.join(sorted(opts))}")
    return build


def build(name: str, **options: Any) -> nn.Module:
    """The architecture of a named model with freshly initialised (random) parameters, no
    weights loaded and no warning. Takes the same ``options`` as :func:`load`. Build on the meta
    device to inspect key names and shapes without allocating memory::

        with torch.device("meta"):
            shapes = {k: v.shape for k, v in build("uni2-h").state_dict().items()}
    """
    return _builder(_canonical(name), options)()


def _build_and_load(
    name: str,
    build: Callable[[], nn.Module],
    weights: str | os.PathLike[str] | None,
    seed: int,
    device: torch.device,
    dtype: torch.dtype,
    stacklevel: int,
) -> nn.Module:
    if weights is None:
        warnings.warn(
            f"tumorboard.models: {name!r} was built WITHOUT weights: its parameters are random "
            f"(seed {seed}) and its outputs are meaningless. Pass weights=PATH to use the real "
            f"model (official weights: {info(name).weights_source}).",
            RandomWeightsWarning,
            stacklevel=stacklevel,
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
        load_state_dict(module, state, path=weights, model=f"{name} ({type(module).__name__})")
    return module.to(device=device, dtype=dtype).eval()


def load(
    name: str,
    *,
    weights: str | os.PathLike[str] | None = None,
    device: str | torch.device = "auto",
    dtype: str | torch.dtype = "auto",
    seed: int = 0,
    **options: Any,
) -> nn.Module:
    """Builds a model by name and loads its weights (strict keys), in eval mode.

    Args:
        name: one of :func:`available` (``"uni2-h"``, ``"uni"``, ``"conch"``, ``"uni2-tiny"``,
            ``"conch-tiny"``, ``"abmil"``, ``"mtbbench-regressor"``) or a TRIDENT alias.
        weights: checkpoint path (.bin/.pt/.pth/.safetensors; see
            :mod:`tumorboard.models.weights`). ``None`` builds random weights from ``seed`` and
            warns with :class:`~tumorboard.models.weights.RandomWeightsWarning`.
        device: ``"auto"`` (CUDA if available), ``"cpu"``, ``"cuda:0"``, ...
        dtype: ``"auto"`` = TRIDENT's inference precision on CUDA (bf16 UNI2-h, fp16 UNI, fp32
            CONCH/ABMIL), float32 on CPU. The parameters are cast to it (TRIDENT autocasts
            instead); encoders cast their input to it and return it.
        seed: seed of the random initialisation when ``weights`` is None (deterministic; the
            global RNG state is left untouched).
        **options: per model --
            encoders: ``image_size`` (preprocessing size; UNI models resample their position
            embedding at run time, bicubic; CONCH resamples the checkpoint's grid at load,
            bilinear, as its ``force_image_size``: MTBBench uses 1024);
            ``conch``: ``proj_contrast=False, normalize=False`` -- the default returns
            TRIDENT's ``conch_v1`` feature (``ln_contrast`` output, 512-d, unnormalised);
            ``True, True`` returns the zero-shot embedding;
            ``abmil``: ``in_dim`` (required), ``hidden``, ``n_heads``, ``gated``, ``dropout``
            -> :class:`~tumorboard.models.abmil.ABMILSlideEncoder`;
            ``mtbbench-regressor``: the same plus ``freeze_encoder`` ->
            :class:`~tumorboard.models.abmil.MTBBenchRegressor` (defaults = MTBBench's).

    Encoders expose ``embed_dim``, ``image_size``, ``mean``, ``std``, ``interpolation`` and
    ``name``; ``module(x)`` maps normalised images ``[B, 3, H, W]`` to ``[B, embed_dim]``.
    """
    key = _canonical(name)
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, key, dev)
    build = _builder(key, options)
    return _build_and_load(key, build, weights, int(seed), dev, dt, stacklevel=3)


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
    """The full CONCH model (image and text towers, ``logit_scale``) for zero-shot use.

    Args:
        name: ``"conch"`` or ``"conch-tiny"``.
        weights: the CONCH checkpoint (``pytorch_model.bin``); ``text_decoder.*`` and the caption
            pooler keys are ignored, everything else is checked strictly. ``None``: random
            weights with a :class:`~tumorboard.models.weights.RandomWeightsWarning`.
        tokenizer: the tokenizer JSON (``conch_byte_level_bpe_uncased.json``) or a
            :class:`ConchTokenizer`; enables :meth:`CONCH.encode_prompts`.
        device, dtype, seed: as :func:`load` (``"auto"`` dtype is float32 for CONCH).
        image_size: build for another input size (MTBBench: 1024); the checkpoint's position
            grid is resampled bilinearly at load.
    """
    key = _canonical(name)
    if key not in ("conch", "conch-tiny"):
        raise ValueError(f"load_conch takes 'conch' or 'conch-tiny', got {name!r}")
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, key, dev)
    cfg = CONCH_B16 if key == "conch" else CONCH_TINY
    if image_size is not None:
        cfg = cfg.with_image_size(image_size)
    model = _build_and_load(
        key, lambda: CONCH(cfg, name=key), weights, int(seed), dev, dt, stacklevel=3
    )
    assert isinstance(model, CONCH)
    if tokenizer is not None:
        tok = tokenizer if isinstance(tokenizer, ConchTokenizer) else ConchTokenizer(tokenizer)
        if tok.context_length != cfg.context_length:
            raise ValueError(
                f"tokenizer produces {tok.context_length} ids, the model expects "
                f"{cfg.context_length}"
            )
        model.tokenizer = tok
    return model
