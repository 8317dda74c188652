"""Slide-collection embedding: read, tile and embed many slides with a foundation model.

``embed_slides`` embeds the slides with a pathology foundation model and writes TRIDENT features
.h5 files plus a Parquet table in TRIDENT's job layout, resuming per slide (only when the stored
settings and weights fingerprint match) and reporting bad and tissue-less slides at the end
instead of stopping.

Typical use::

    from tumorboard.embed import EmbedOptions, embed_slides
    from tumorboard.slides import TilingOptions

    report = embed_slides(["a.svs", "slides/"], model="uni2-h", weights="uni2h.bin", out="job",
                          tiling=TilingOptions(magnification=20, patch_size=256),
                          options=EmbedOptions(batch_size=128, dtype="bf16"))
    print(report.summary())
    # job/20x_256px_0px_overlap/features_uni_v2/a.h5 and .../embeddings_uni_v2/a.parquet

With ``slide_encoder="feather"`` (or ``mean-uni2-h``, ``abmil``, ...) the patches are embedded
with the patch encoder that slide encoder reads and each slide is pooled into one vector:
``job/20x_512px_0px_overlap/slide_features_feather/a.h5`` (TRIDENT's layout) and a Parquet
table of all slides; :func:`read_slide_features` reads them back for a whole job.

What decides the patches is ``tiling=`` (:class:`~tumorboard.slides.TilingOptions`, shared with
``tumorboard tile``); how they are computed is ``options=`` (:class:`EmbedOptions`). The separate
keywords these objects replace are deprecated. ``EmbedOptions(compile=True)`` runs a
``torch.compile``'d encoder with static batch shapes; ``dtype="fp8"`` quantises its block linears
to FP8 (GPUs of compute capability >= 8.9). On CUDA the patches cross to the GPU as uint8 and are
normalised there (:func:`normalize_uint8`).

torch, h5py (``pip install tumorboard[embed]``), the slide readers (``[slides]``) and, for
``backend="onnxruntime"``, onnxruntime (``[gpu]`` for onnxruntime-gpu) are imported lazily.
"""

from __future__ import annotations

from ._backends import OnnxBackend, TorchBackend, export_onnx, normalize_uint8
from ._engine import (
    EmbedReport,
    SlideResult,
    embed_slides,
    encoder_identity,
    features_complete,
    read_features,
)

# for the Ray path in tumorboard.dist, which may import only this package (not a private module)
from ._options import EMBED_FIELDS as EMBED_FIELDS
from ._options import TILING_FIELDS as TILING_FIELDS
from ._options import EmbedOptions
from ._options import resolve_options as resolve_options
from ._report import SlideEmbedReport
from ._slide_features import SlideFeatures, read_slide_features

__all__ = [
    "EmbedOptions",
    "EmbedReport",
    "OnnxBackend",
    "SlideEmbedReport",
    "SlideFeatures",
    "SlideResult",
    "TorchBackend",
    "embed_slides",
    "encoder_identity",
    "export_onnx",
    "features_complete",
    "normalize_uint8",
    "read_features",
    "read_slide_features",
]
