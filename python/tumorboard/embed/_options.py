"""How an embedding run computes, as one validated value (``embed_slides(options=)``).

:class:`EmbedOptions` holds the run options of :func:`~tumorboard.embed.embed_slides` that do not
decide the patches (those are :class:`~tumorboard.slides.TilingOptions`, ``tiling=``): batch
size, compute backend, device, precision, ``torch.compile`` and where JPEG tiles are decoded. It
checks itself once, on construction; what depends on the machine (a CUDA device, FP8 tensor
cores, nvImageCodec) is checked by ``embed_slides`` where the work runs.

The keywords ``embed_slides`` took before these objects are accepted for one release with a
:class:`DeprecationWarning` naming the new spelling (:func:`resolve_options`).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Any, Literal

from .._checks import DEVICE_NAME, DEVICE_NAMES
from ..errors import InvalidArgumentError, InvalidTypeError
from ..slides import TilingOptions
from ._backends import DTYPES, check_compile

__all__ = ["EmbedOptions"]

#: Appended to the encoder name of a ``random_weights=True`` run (folders and ``encoder``).
RANDOM_WEIGHTS_SUFFIX = "-random-weights"


def _positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__") or int(value) <= 0:
        raise InvalidArgumentError(f"{name}: expected a positive int, got {value!r}")
    return int(value)


def _choice(value: Any, choices: tuple[str, ...], name: str, hint: str = "") -> str:
    if not isinstance(value, str) or value not in choices:
        listed = ", ".join(repr(c) for c in choices)
        raise InvalidArgumentError(f"{name}: expected one of {listed}, got {value!r}{hint}")
    return value


@dataclass(frozen=True, kw_only=True)
class EmbedOptions:
    """How :func:`~tumorboard.embed.embed_slides` computes the embeddings.

    One frozen, self-validating value passed as ``options=`` (the patches themselves are chosen
    by ``tiling=``, a :class:`~tumorboard.slides.TilingOptions`). Fields are validated on
    construction; :func:`dataclasses.replace` validates again. Being a frozen dataclass it
    pickles, so the same value travels to Ray workers (``executor="ray"``) and is built by
    ``tumorboard embed`` from its flags.

    Attributes
    ----------
    batch_size : int, default 64
        Patches per forward.
    backend : {"torch", "onnxruntime"}, default "torch"
        The compute backend; for "onnxruntime" the module is exported once to
        ``{out}/.onnx/{encoder}.onnx``.
    device : str, default "auto"
        "auto", "cpu", "cuda", "cuda:N" or "mps" (its availability is checked when the run
        starts, where the work runs).
    dtype : {"auto", "fp32", "fp16", "bf16", "fp8"}, default "auto"
        The precision (torch only): "auto" is bf16 autocast on CUDA, fp32 on CPU; "fp8"
        quantises the encoder's block linears to FP8 E4M3 (:mod:`tumorboard.models.fp8`) and
        needs a GPU of compute capability >= 8.9. The features record it (attributes
        ``precision`` and ``dtype``).
    queue_size : int, default 8
        Batches buffered between the readers and the model.
    compile : bool or str, default False
        ``torch.compile`` the encoder (torch only; True is mode "default", or a mode name such as
        "max-autotune") with static batch shapes: the last batch of a slide is padded to
        ``batch_size``. The features record it (attribute ``compiled``).
    decode : {"cpu", "gpu"}, default "cpu"
        Where JPEG tiles are decoded: "cpu" (libjpeg-turbo, the slides layer's threaded loader)
        or "gpu" (nvImageCodec on the model's CUDA device; needs ``backend="torch"`` and
        ``tumorboard[gpu]``).

    Raises
    ------
    InvalidArgumentError
        A field out of range, or a combination the backend does not run (``compile=`` or
        ``dtype="fp8"`` or ``decode="gpu"`` with ``backend="onnxruntime"``); the message names
        the field.
    InvalidTypeError
        ``device`` is not a string.

    Examples
    --------
    >>> from tumorboard.embed import EmbedOptions
    >>> EmbedOptions(batch_size=128, dtype="bf16").backend
    'torch'
    """

    batch_size: int = 64
    backend: Literal["torch", "onnxruntime"] = "torch"
    device: str = "auto"
    dtype: Literal["auto", "fp32", "fp16", "bf16", "fp8"] = "auto"
    queue_size: int = 8
    compile: bool | str = False
    decode: Literal["cpu", "gpu"] = "cpu"

    def __post_init__(self) -> None:
        """Validate every field and the combinations of backend, precision and decoding."""
        put = object.__setattr__
        put(self, "batch_size", _positive(self.batch_size, "batch_size"))
        put(self, "queue_size", _positive(self.queue_size, "queue_size"))
        backend = _choice(self.backend, ("torch", "onnxruntime"), "backend",
                          " (executor= picks where the work runs)")  # fmt: skip
        _choice(self.dtype, DTYPES, "dtype")
        if not isinstance(self.device, str):
            raise InvalidTypeError(f"device: expected a str, got {type(self.device).__name__}")
        if DEVICE_NAME.fullmatch(self.device.strip().lower()) is None:
            raise InvalidArgumentError(f"device: expected {DEVICE_NAMES}, got {self.device!r}")
        mode = check_compile(self.compile)
        _choice(self.decode, ("cpu", "gpu"), "decode")
        if self.decode == "gpu" and backend != "torch":
            raise InvalidArgumentError(
                f"decode='gpu' feeds decoded patches to a torch model on the GPU; "
                f"backend={backend!r} takes CPU batches (use decode='cpu')"
            )
        if backend != "torch" and (mode is not None or self.dtype == "fp8"):
            raise InvalidArgumentError(
                f"backend={backend!r}: compile= and dtype='fp8' are options of backend='torch'"
            )

    @property
    def compile_mode(self) -> str | None:
        """The ``torch.compile`` mode of ``compile`` (None: eager)."""
        return check_compile(self.compile)


#: Fields of each options object, as the keywords ``embed_slides`` took before them.
TILING_FIELDS = tuple(f.name for f in dataclasses.fields(TilingOptions))
EMBED_FIELDS = tuple(f.name for f in dataclasses.fields(EmbedOptions))


def resolve_options(
    function: str,
    tiling: TilingOptions | None,
    options: EmbedOptions | None,
    legacy: dict[str, Any],
    *,
    stacklevel: int = 3,
) -> tuple[TilingOptions, EmbedOptions]:
    """Return the tiling and run options of a call, accepting the deprecated keywords.

    Parameters
    ----------
    function : str
        The public function's name, for the messages.
    tiling : TilingOptions or None
        Its ``tiling=`` argument.
    options : EmbedOptions or None
        Its ``options=`` argument.
    legacy : dict
        The other keywords it was given (the fields of either object, deprecated).
    stacklevel : int, default 3
        The warning's stack level (3: the caller of ``function``).

    Returns
    -------
    tuple of (TilingOptions, EmbedOptions)
        The options objects; defaults where neither spelling gave any.

    Raises
    ------
    TypeError
        A keyword that is no field of either object.
    InvalidTypeError
        ``tiling`` or ``options`` of the wrong type.
    InvalidArgumentError
        A deprecated keyword given together with the object that holds its field, or a value
        out of range.
    """
    if tiling is not None and not isinstance(tiling, TilingOptions):
        raise InvalidTypeError(
            f"tiling: expected a tumorboard.slides.TilingOptions or None, got "
            f"{type(tiling).__name__}"
        )
    if options is not None and not isinstance(options, EmbedOptions):
        raise InvalidTypeError(
            f"options: expected a tumorboard.embed.EmbedOptions or None, got "
            f"{type(options).__name__}"
        )
    unknown = [k for k in legacy if k not in TILING_FIELDS and k not in EMBED_FIELDS]
    if unknown:
        raise InvalidTypeError(f"{function}() got an unexpected keyword argument {unknown[0]!r}")
    old_tiling = {k: v for k, v in legacy.items() if k in TILING_FIELDS}
    old_run = {k: v for k, v in legacy.items() if k in EMBED_FIELDS}
    for old, obj, arg, cls in ((old_tiling, tiling, "tiling", "TilingOptions"),
                               (old_run, options, "options", "EmbedOptions")):  # fmt: skip
        if old and obj is not None:
            names = ", ".join(f"{k}=" for k in old)
            raise InvalidArgumentError(
                f"{function}: {names} and {arg}= both given; set {names} in "
                f"{arg}={cls}(...) only (the separate keywords are deprecated)"
            )
    if legacy:
        new = [f"{arg}={cls}({', '.join(f'{k}=...' for k in old)})"
               for old, arg, cls in ((old_tiling, "tiling", "TilingOptions"),
                                     (old_run, "options", "EmbedOptions")) if old]  # fmt: skip
        given = ", ".join(f"{k}=" for k in legacy)
        warnings.warn(
            f"{function}({given}) is deprecated; use {', '.join(new)}",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
    if tiling is None:
        tiling = TilingOptions(**old_tiling)
    if options is None:
        options = EmbedOptions(**old_run)
    return tiling, options


def run_precision(backend: str, device: str, dtype: str) -> str:
    """Return the precision a run computes in, as its features record it (``precision``).

    The same rule as the backends: onnxruntime computes in fp32; torch in ``dtype``, where
    "auto" is bf16 on CUDA and fp32 elsewhere.
    """
    if backend != "torch":
        return "fp32"
    if dtype != "auto":
        return dtype
    if device == "cpu":
        return "fp32"
    from ..models import resolve_device

    return "bf16" if resolve_device(device).type == "cuda" else "fp32"
