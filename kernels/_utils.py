"""The Triton backend choice, once for every kernel and every model that dispatches to one.

Three decisions live here and nowhere else:

* whether triton can be imported (:func:`triton_available`, without importing it);
* whether Triton runs in its interpreter (:data:`INTERPRET`: ``TRITON_INTERPRET=1`` in the
  environment when this module is first imported, which is when triton reads it too; the
  interpreter runs kernels on CPU tensors with numpy, so the kernels pick small tiles then);
* which backend an entry point runs (:func:`choose_backend`): ``"auto"`` takes the Triton kernel
  for CUDA tensors when triton is installed and plain torch otherwise; ``"triton"`` insists
  (CUDA tensors, or any tensors under the interpreter); ``"torch"`` never uses a kernel.

:func:`tune_configs` trims every kernel's autotuning candidates to the first (the measured
best on an H100) when ``TUMORBOARD_TRITON_AUTOTUNE=first`` is set at import: the CUDA test
suite sets it, so a test pays one compilation per kernel and shape instead of one per
candidate (six TMA candidates of a fused kernel cost minutes of compiling on a fresh
machine); the benchmarks and users autotune over every candidate.

It also holds the device facts the persistent kernels need (:func:`num_programs`,
:func:`device_name`, :func:`tma_ok`, :func:`set_allocator` for device-side TMA descriptors).

:func:`import_triton` is the one import of ``triton`` and ``triton.language`` the kernel
modules make. This module imports neither torch nor triton at import time.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
from types import ModuleType
from typing import Any, Literal

from tumorboard.errors import InvalidArgumentError, MissingDependencyError

__all__ = [
    "BACKENDS",
    "INTERPRET",
    "choose_backend",
    "device_name",
    "import_triton",
    "num_programs",
    "set_allocator",
    "gemm_prune",
    "tma_ok",
    "tune_configs",
    "triton_available",
]

#: The values of every ``backend=`` argument of the kernels and of the modules that use them.
BACKENDS = ("auto", "triton", "torch")

#: Whether Triton's interpreter is on (``TRITON_INTERPRET=1``), read once at import.
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: ``TUMORBOARD_TRITON_AUTOTUNE`` at import: ``"all"`` (default) or ``"first"``.
AUTOTUNE = os.environ.get("TUMORBOARD_TRITON_AUTOTUNE", "all").strip().lower() or "all"
if AUTOTUNE not in ("all", "first"):
    raise InvalidArgumentError(
        f"TUMORBOARD_TRITON_AUTOTUNE: expected 'all' or 'first', got {AUTOTUNE!r}"
    )


def tune_configs(candidates: list[Any]) -> list[Any]:
    """Return a kernel's autotuning candidates: all of them, or the first alone.

    Parameters
    ----------
    candidates : list of triton.Config
        The candidates, best-measured first.

    Returns
    -------
    list of triton.Config
        ``candidates`` unchanged, or ``candidates[:1]`` under
        ``TUMORBOARD_TRITON_AUTOTUNE=first`` (read once at import).
    """
    return list(candidates[:1]) if AUTOTUNE == "first" else list(candidates)


def triton_available() -> bool:
    """Tell whether the ``triton`` package can be imported (the ``gpu`` extra is installed).

    Returns
    -------
    bool
        True when ``triton`` is installed; it is not imported.
    """
    return importlib.util.find_spec("triton") is not None


def import_triton() -> tuple[ModuleType, ModuleType] | tuple[None, None]:
    """Import ``triton`` and ``triton.language`` when they are installed.

    Returns
    -------
    tuple
        ``(triton, triton.language)``, or ``(None, None)`` without triton (the kernel modules
        then define no kernels and every entry point runs its torch reference).
    """
    if not triton_available():
        return None, None
    return importlib.import_module("triton"), importlib.import_module("triton.language")


def choose_backend(
    backend: str, device: Any, *, auto_triton: bool = True
) -> Literal["triton", "torch"]:
    """Resolve a ``backend=`` argument to the implementation that runs.

    Parameters
    ----------
    backend : {"auto", "triton", "torch"}
        What the caller asked for.
    device : torch.device or str
        The device of the input tensors (its ``type``, or the part of the string before
        ``":"``, is read).
    auto_triton : bool, default True
        Whether ``"auto"`` may pick the kernel at all; callers pass False when the call needs
        something only the torch path does (e.g. active dropout in a module).

    Returns
    -------
    {"triton", "torch"}
        ``"triton"`` for ``backend="triton"``, and for ``"auto"`` on a CUDA device with triton
        installed (and ``auto_triton``); ``"torch"`` otherwise.

    Raises
    ------
    InvalidArgumentError
        ``backend`` is not one of :data:`BACKENDS`, or is ``"triton"`` for tensors that are not
        on CUDA while the interpreter is off.
    ImportError
        ``backend="triton"`` but triton is not installed.
    """
    if backend not in BACKENDS:
        raise InvalidArgumentError(
            f"backend: expected 'auto', 'triton' or 'torch', got {backend!r}"
        )
    on_cuda = (getattr(device, "type", None) or str(device).split(":")[0]) == "cuda"
    if backend == "auto":
        return "triton" if auto_triton and on_cuda and triton_available() else "torch"
    if backend == "torch":
        return "torch"
    if not triton_available():
        raise MissingDependencyError.for_extra("backend='triton'", package="triton", extra="gpu")
    if not on_cuda and not INTERPRET:
        raise InvalidArgumentError(
            f"backend='triton' needs CUDA tensors (or TRITON_INTERPRET=1), got {device}"
        )
    return "triton"


def _gemm_smem_bytes(config: Any, element_size: int) -> int:
    """Shared memory of a pipelined GEMM tile, over-estimated: one buffer more than stages.

    Triton asked 393,232 bytes for 128 x 256 x 64 float32 tiles in three stages on an H100,
    four buffers' worth; an estimate too large only drops a candidate.
    """
    kw = config.kwargs
    per_stage = (kw["BLOCK_M"] + kw["BLOCK_N"]) * kw["BLOCK_K"] * element_size
    return (config.num_stages + 1) * per_stage


@functools.cache
def _smem_limit(device_type: str, index: int | None) -> int | None:
    if device_type != "cuda":
        return None
    import torch

    props = torch.cuda.get_device_properties(index if index is not None else 0)
    return getattr(props, "shared_memory_per_block_optin", None)


def gemm_prune(operand: str) -> dict[str, Any]:
    """Return ``prune_configs_by`` for a GEMM kernel: the tiles that fit in shared memory.

    A 128 x 256 x 64 tile in three stages fits an H100's 227 KiB in bfloat16 and needs
    384 KiB in float32 (seen on an H100: every candidate of the fused down_proj failed with
    ``OutOfResources`` for float32 inputs). Candidates whose operand tiles do not fit the
    device's opt-in shared memory are dropped before autotuning; under
    ``TUMORBOARD_TRITON_AUTOTUNE=first`` the first that fits is kept alone.

    Parameters
    ----------
    operand : str
        The name of the kernel's pointer argument whose element size sizes the tiles.

    Returns
    -------
    dict
        ``{"early_config_prune": fn}`` for :func:`triton.autotune`.
    """

    def prune(configs: list[Any], named_args: dict[str, Any], **kwargs: Any) -> list[Any]:
        t = named_args[operand]
        size = t.element_size()
        limit = _smem_limit(t.device.type, t.device.index)
        fit = [c for c in configs if limit is None or _gemm_smem_bytes(c, size) <= limit]
        if not fit:  # nothing fits: the smallest, so that the error names a real tile
            fit = [min(configs, key=lambda c: _gemm_smem_bytes(c, size))]
        return fit[:1] if AUTOTUNE == "first" else fit

    return {"early_config_prune": prune}


def num_programs(device: Any) -> int:
    """Return the program count of a persistent kernel: one per SM (two in the interpreter).

    Parameters
    ----------
    device : torch.device
        The device the kernel runs on.

    Returns
    -------
    int
        The multiprocessor count on CUDA, 2 elsewhere.
    """
    import torch

    if device.type != "cuda":
        return 2
    return torch.cuda.get_device_properties(device).multi_processor_count


def device_name(device: Any) -> str:
    """Return the device's name (the GPU model on CUDA), a key of measured dispatch.

    Parameters
    ----------
    device : torch.device
        The device.

    Returns
    -------
    str
        ``torch.cuda.get_device_name`` on CUDA, the device type elsewhere.
    """
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


def tma_ok(*tensors: Any) -> bool:
    """Say whether TMA tensor descriptors can address these 2-D tensors.

    Parameters
    ----------
    *tensors : torch.Tensor
        Row-major matrices.

    Returns
    -------
    bool
        True when every tensor has unit column stride and 16-byte aligned base address and
        row stride (the bulk tensor copy engine's requirement).
    """
    return all(
        t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and (t.stride(0) * t.element_size()) % 16 == 0
        for t in tensors
    )


def set_allocator(device: Any) -> None:
    """Give device-side tensor descriptors their scratch memory on ``device``.

    Parameters
    ----------
    device : torch.device
        Where the descriptors' scratch buffers are allocated.
    """
    import torch
    import triton

    def alloc(size: int, alignment: int, stream: int | None) -> torch.Tensor:
        return torch.empty(size, dtype=torch.int8, device=device)

    triton.set_allocator(alloc)
