"""The ``device`` and ``dtype`` arguments of :func:`tumorboard.models.load`."""

from __future__ import annotations

import torch

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


def resolve_device(device: str | torch.device) -> torch.device:
    """Turn a ``device`` argument into a :class:`torch.device`.

    Parameters
    ----------
    device : str or torch.device
        ``"auto"`` (CUDA when available, else the CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...
        or a :class:`torch.device`.

    Returns
    -------
    torch.device
        The device to build and run on.

    Raises
    ------
    InvalidArgumentError
        If ``device`` is not a device name, or names CUDA on a machine without it.
    """
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise InvalidArgumentError(
            f"device: expected 'auto', 'cpu', 'cuda[:i]' or a torch.device, got {device!r} ({exc})"
        ) from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InvalidArgumentError(f"device: {device!r} requested but CUDA is not available")
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
