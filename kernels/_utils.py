"""Helpers shared by the Triton kernels: device facts and TMA descriptor set-up."""

from __future__ import annotations

import torch

__all__ = ["device_name", "num_programs", "set_allocator", "tma_ok"]


def num_programs(device: torch.device) -> int:
    """Return the program count of a persistent kernel: one per SM (two in the interpreter)."""
    if device.type != "cuda":
        return 2
    return torch.cuda.get_device_properties(device).multi_processor_count


def device_name(device: torch.device) -> str:
    """Return the device's name (the GPU model on CUDA), a key of measured dispatch."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


def tma_ok(*tensors: torch.Tensor) -> bool:
    """Say whether TMA descriptors can address these 2-D tensors.

    TMA needs 16-byte aligned base addresses and row strides, and unit column strides.
    """
    return all(
        t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and (t.stride(0) * t.element_size()) % 16 == 0
        for t in tensors
    )


def set_allocator(device: torch.device) -> None:
    """Give device-side tensor descriptors their scratch memory on ``device``."""
    import triton

    def alloc(size: int, alignment: int, stream: int | None) -> torch.Tensor:
        return torch.empty(size, dtype=torch.int8, device=device)

    triton.set_allocator(alloc)
