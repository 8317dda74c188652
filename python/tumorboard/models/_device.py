"""The ``device`` and ``dtype`` arguments of :func:`tumorboard.models.load`."""

from __future__ import annotations

import torch

from .._checks import DEVICE_NAME, DEVICE_NAMES
from ..errors import InvalidArgumentError, InvalidTypeError

__all__ = ["resolve_device", "resolve_dtype"]

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


def _no_cuda_reason() -> str:
    """Say why CUDA is not available: a torch build without CUDA, or no visible device."""
    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is built without CUDA"
    return f"no CUDA device is visible (torch {torch.__version__}, CUDA {torch.version.cuda})"


def resolve_device(device: str | torch.device) -> torch.device:
    """Turn a ``device`` argument into a :class:`torch.device` that exists on this machine.

    Parameters
    ----------
    device : str or torch.device
        ``"auto"`` (CUDA when available, else the CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"``,
        ``"mps"``, or a :class:`torch.device` of those types.

    Returns
    -------
    torch.device
        The device to build and run on.

    Raises
    ------
    InvalidArgumentError
        ``device`` is not a device name (the message names the value and the accepted names), or
        names a device this machine does not have: CUDA without CUDA (the message says whether
        torch lacks CUDA support or no GPU is visible), a CUDA index beyond the visible devices,
        or MPS where it is not available.
    InvalidTypeError
        ``device`` is neither a str nor a :class:`torch.device`.
    """
    if isinstance(device, torch.device):
        dev = device
        name = str(device)
    elif isinstance(device, str):
        name = device.strip().lower()
        if DEVICE_NAME.fullmatch(name) is None:
            raise InvalidArgumentError(
                f"device: unknown device {device!r}; expected {DEVICE_NAMES}"
            )
        if name == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        dev = torch.device(name)
    else:
        raise InvalidTypeError(
            f"device: expected a str or torch.device, got {type(device).__name__}"
        )
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise InvalidArgumentError(
                f"device: {name!r} requested but CUDA is not available: {_no_cuda_reason()}; "
                "use 'cpu' (or 'auto')"
            )
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise InvalidArgumentError(
                f"device: {name!r} requested but this machine has {count} CUDA device(s) "
                f"(cuda:0 to cuda:{count - 1})"
            )
    elif dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise InvalidArgumentError(
                f"device: {name!r} requested but MPS (Apple GPU) is not available here"
            )
    elif dev.type != "cpu":
        raise InvalidArgumentError(f"device: unsupported device {name!r}; expected {DEVICE_NAMES}")
    return dev


def resolve_dtype(
    dtype: str | torch.dtype, *, device: torch.device, gpu_dtype: torch.dtype
) -> torch.dtype:
    """Turn a ``dtype`` argument into the floating dtype the parameters are cast to.

    Parameters
    ----------
    dtype : str or torch.dtype
        ``"auto"``, a floating :class:`torch.dtype`, or one of ``"float32"``/``"fp32"``/
        ``"float"``, ``"bfloat16"``/``"bf16"``, ``"float16"``/``"fp16"``/``"half"``.
    device : torch.device
        Where the model runs; ``"auto"`` depends on it.
    gpu_dtype : torch.dtype
        The model's inference dtype on CUDA (:attr:`ModelInfo.gpu_dtype`, TRIDENT's autocast
        dtype), which ``"auto"`` means on CUDA; on any other device ``"auto"`` is float32.

    Returns
    -------
    torch.dtype
        A floating dtype.

    Raises
    ------
    InvalidArgumentError
        If ``dtype`` is an unknown name or a non-floating dtype.
    InvalidTypeError
        If ``dtype`` is neither a str nor a torch.dtype.
    """
    if isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point:
            raise InvalidArgumentError(f"dtype: expected a floating dtype, got {dtype}")
        return dtype
    if not isinstance(dtype, str):
        raise InvalidTypeError(f"dtype: expected a str or torch.dtype, got {type(dtype).__name__}")
    if dtype == "auto":
        return gpu_dtype if device.type == "cuda" else torch.float32
    if dtype.lower() in _DTYPES:
        return _DTYPES[dtype.lower()]
    raise InvalidArgumentError(
        f"dtype: expected 'auto', a torch dtype or one of {sorted(_DTYPES)}, got {dtype!r}"
    )
