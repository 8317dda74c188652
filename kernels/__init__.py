"""Triton kernels of tumorboard, installed as ``tumorboard.kernels``.

The kernels themselves (fused ABMIL pooling, segment-masked scaling) land with their issue; this
package is importable without triton so that the rest of tumorboard never depends on a GPU stack.
"""

from __future__ import annotations

import importlib.util

__all__ = ["triton_available"]


def triton_available() -> bool:
    """Whether the ``triton`` package can be imported (the ``gpu`` extra is installed)."""
    return importlib.util.find_spec("triton") is not None
