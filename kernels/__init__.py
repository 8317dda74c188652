"""Triton kernels of tumorboard, installed as ``tumorboard.kernels``.

* :mod:`tumorboard.kernels.abmil`: fused ABMIL pooling over concatenated variable-length bags
  (:func:`abmil_pool`, pure-torch :func:`abmil_reference`).
* :mod:`tumorboard.kernels.segment_scale`: the segment-masked scaling of LAMMI-Pathology's
  trajectory-aware adapter (:func:`segment_scale`) and its fusion into the FFN down-projection
  GEMM (:func:`fused_down_proj_segment_scale`).

Import the submodules (``from tumorboard.kernels.segment_scale import segment_scale``); this
package itself imports neither torch nor triton, and every entry point falls back to pure torch
on CPU tensors (or without triton), so the rest of tumorboard never depends on a GPU stack.
Where a fused kernel and a library path compete (the fused down_proj against cuBLAS plus one
scale-and-residual pass), the faster is measured on first use per shape bucket and device and
cached (``kernels/_dispatch.py``); :func:`dispatch_choices` lists the decisions.
Which implementation a ``backend=`` argument runs is decided in one place,
:func:`choose_backend` (``kernels/_utils.py``), for the kernels and for the modules of
``tumorboard.models`` that dispatch to them.
"""

from __future__ import annotations

from ._dispatch import choices as dispatch_choices
from ._utils import BACKENDS, choose_backend, triton_available

__all__ = ["BACKENDS", "choose_backend", "dispatch_choices", "triton_available"]
