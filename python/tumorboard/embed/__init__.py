"""Slide-collection embedding: read, tile and embed many slides with a foundation model.

``embed_slides`` embeds the slides with a pathology foundation model and writes TRIDENT features
.h5 files plus a Parquet table, resuming per slide and reporting bad slides at the end instead of
stopping.

Typical use::

    from tumorboard.embed import embed_slides

    report = embed_slides(["a.svs", "b.svs"], model="uni2-h", weights="uni2h.bin", out="job")
    print(report.summary())

torch, h5py (``pip install tumorboard[embed]``), the slide readers (``[slides]``) and, for
``backend="onnxruntime"``, onnxruntime (``[gpu]`` for onnxruntime-gpu) are imported lazily.
"""

from __future__ import annotations

from ._backends import OnnxBackend, TorchBackend, export_onnx
from ._engine import (
    TRIDENT_ENCODER_NAMES,
    EmbedReport,
    SlideResult,
    embed_slides,
    features_complete,
    read_features,
)

__all__ = [
    "TRIDENT_ENCODER_NAMES",
    "EmbedReport",
    "OnnxBackend",
    "SlideResult",
    "TorchBackend",
    "embed_slides",
    "export_onnx",
    "features_complete",
    "read_features",
]
