"""Pathology foundation models in plain torch, with the official state-dict keys.

Typical use::

    from tumorboard import models

    enc = models.load("uni2-h", weights="pytorch_model.bin")        # bf16 on GPU, fp32 on CPU
    emb = enc(images)          # images: [B, 3, 224, 224] normalised with enc.mean / enc.std
    # emb: [B, 1536]

    conch = models.load_conch(weights="conch.bin", tokenizer="conch_byte_level_bpe_uncased.json")
    img = conch.encode_image(images448)                             # [B, 512], L2-normalised
    txt = conch.class_embeddings([["an image of tumor"], ["an image of normal tissue"]])
    probs = conch.zero_shot_probs(img, txt)                         # [B, 2]

    reg = models.load("mtbbench-regressor", weights="ABMIL_checkpoint_regression.pt")
    pct = reg.predict_percentage(features)                          # [N, 1536] UNI2-h features

    models.export_onnx(enc.float(), "uni2h.onnx")
    ort_enc = models.OnnxEncoder("uni2h.onnx")                      # same call, same attributes

Models (:func:`available`). Each architecture's named configurations and builders live beside
its class, as in timm's model files: UNI2-h, UNI and the tiny twin in :mod:`~tumorboard.models.vit`
(:data:`UNI2_H`, :data:`UNI`, :data:`UNI2_TINY`), CONCH in :mod:`~tumorboard.models.conch`
(:data:`CONCH_B16`, :data:`CONCH_TINY`), the ABMIL models in :mod:`~tumorboard.models.abmil`;
:func:`load` finds them through the registry, whose rows (:class:`ModelInfo`) hold each name's
metadata.

=================== ====================================================== ======= ========
name                what                                                   output  GPU dtype
=================== ====================================================== ======= ========
uni2-h              UNI2-h ViT-H/14, 8 registers, SwiGLU (TRIDENT uni_v2)   1536    bf16
uni                 UNI ViT-L/16 (TRIDENT uni_v1)                           1024    fp16
conch               CONCH vision tower (TRIDENT conch_v1 feature)           512     fp32
uni2-tiny           the UNI2-h class, 48 wide, 2 blocks, random             48      bf16
conch-tiny          the CONCH classes, small, random                        16      fp32
abmil               TRIDENT ABMIL slide encoder                             in_dim  fp32
mtbbench-regressor  MTBBench IHC positive-cell regression head              1       fp32
=================== ====================================================== ======= ========

The encoder zoo (:mod:`tumorboard.models._zoo`) adds, under TRIDENT's names: virchow,
virchow2, hoptimus0, hoptimus1, h0-mini, gigapath, conch_v15, kaiko-vits8, kaiko-vits16,
kaiko-vitb8, kaiko-vitb16, kaiko-vitl14, lunit-vits8, gpfm, openmidnight (timm layout), phikon,
phikon_v2, hibou_l, hibou-b, midnight12k (Hugging Face layout, :mod:`~tumorboard.models.hf_vit`),
resnet50 and ctranspath (:mod:`~tumorboard.models.resnet`, :mod:`~tumorboard.models.swin`) and
keep (KEEP's image tower). ``tumorboard models``
prints every row (width, input, precision, license, gated, the file to fetch).

Slide encoders (:func:`slide_encoders`, :func:`slide_encoder_info`, :func:`load_slide_encoder`)
carry TRIDENT's slide-encoder names: ``mean-{patch encoder}``, ``abmil`` and FEATHER
(``feather``, ``feather_uni_v2``) are built in :mod:`~tumorboard.models.slide_encoder`,
``titan`` in :mod:`~tumorboard.models.titan`, ``chief`` in :mod:`~tumorboard.models.chief`,
``madeleine`` in :mod:`~tumorboard.models.madeleine`, ``gigapath`` in
:mod:`~tumorboard.models.gigapath_slide` and ``prism`` in :mod:`~tumorboard.models.prism`, each
mapping concatenated slides (``forward_varlen``) to one vector per slide; threads and care are
listed with why they are not built.

Sources: UNI and UNI2-h, Chen et al., *Nature Medicine* 2024, and mahmoodlab/UNI
``uni/get_encoder/get_encoder.py``@42715ef; CONCH, Lu et al., *Nature Medicine* 2024, and
mahmoodlab/CONCH ``conch/open_clip_custom/``@141cc09; ABMIL, Ilse et al., ICML 2018, as
mahmoodlab/TRIDENT ``trident/slide_encoder_models/``@a91fa84 builds it; the regressor, MTBBench
``neurips25/utils/train_abmil.py``@ae2f8fe.

Weights are never downloaded: the official ones are gated on Hugging Face, so pass the files
you obtained. Without weights, models are random (deterministic per ``seed``) with a loud
:class:`RandomWeightsWarning`. torch, safetensors and tokenizers come with
``pip install tumorboard[embed]``; onnx and onnxruntime with ``[gpu]``. :class:`OnnxEncoder`
needs only numpy and onnxruntime.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..errors import MissingDependencyError

if TYPE_CHECKING:  # the lazily loaded names, for type checkers
    from ._device import resolve_device
    from ._registry import ModelInfo, available, build, info, load, load_conch
    from ._slide_info import SlideEncoderInfo, slide_encoder_info, slide_encoders
    from .abmil import ABMIL, ABMILSlideEncoder, MTBBenchRegressor
    from .adapter import SegmentAdapter
    from .chief import ChiefSlideEncoder
    from .conch import (
        CONCH,
        CONCH_B16,
        CONCH_TINY,
        ConchConfig,
        ConchTextEncoder,
        ConchVisionEncoder,
    )
    from .conch_tokenizer import ConchTokenizer
    from .gigapath_slide import GigaPathSlideEncoder
    from .madeleine import MadeleineSlideEncoder
    from .onnx import OnnxEncoder, export_onnx
    from .prism import PrismSlideEncoder
    from .slide_encoder import FeatherSlideEncoder, MeanSlideEncoder, load_slide_encoder
    from .titan import TitanSlideEncoder
    from .vit import UNI, UNI2_H, UNI2_TINY, VisionTransformer, ViTConfig
    from .weights import (
        CheckpointKeyError,
        RandomWeightsWarning,
        UnsafeCheckpointError,
        WeightsError,
        read_state_dict,
        save_state_dict,
    )

__all__ = [
    "ABMIL",
    "ABMILSlideEncoder",
    "CONCH",
    "CONCH_B16",
    "CONCH_TINY",
    "CheckpointKeyError",
    "ChiefSlideEncoder",
    "ConchConfig",
    "ConchTextEncoder",
    "ConchTokenizer",
    "ConchVisionEncoder",
    "FeatherSlideEncoder",
    "GigaPathSlideEncoder",
    "MTBBenchRegressor",
    "MadeleineSlideEncoder",
    "MeanSlideEncoder",
    "ModelInfo",
    "OnnxEncoder",
    "PrismSlideEncoder",
    "RandomWeightsWarning",
    "SegmentAdapter",
    "SlideEncoderInfo",
    "TitanSlideEncoder",
    "UNI",
    "UNI2_H",
    "UNI2_TINY",
    "UnsafeCheckpointError",
    "ViTConfig",
    "VisionTransformer",
    "WeightsError",
    "available",
    "build",
    "export_onnx",
    "info",
    "load",
    "load_conch",
    "load_slide_encoder",
    "read_state_dict",
    "resolve_device",
    "save_state_dict",
    "slide_encoder_info",
    "slide_encoders",
]

# Where each name of __all__ lives; submodules load on first use.
_WHERE = {
    "ABMIL": "abmil",
    "ABMILSlideEncoder": "abmil",
    "MTBBenchRegressor": "abmil",
    "SegmentAdapter": "adapter",
    "CONCH": "conch",
    "CONCH_B16": "conch",
    "CONCH_TINY": "conch",
    "ConchConfig": "conch",
    "ConchTextEncoder": "conch",
    "ConchVisionEncoder": "conch",
    "ConchTokenizer": "conch_tokenizer",
    "OnnxEncoder": "onnx",
    "export_onnx": "onnx",
    "UNI": "vit",
    "UNI2_H": "vit",
    "UNI2_TINY": "vit",
    "ViTConfig": "vit",
    "VisionTransformer": "vit",
    "CheckpointKeyError": "weights",
    "RandomWeightsWarning": "weights",
    "UnsafeCheckpointError": "weights",
    "WeightsError": "weights",
    "read_state_dict": "weights",
    "save_state_dict": "weights",
    "ModelInfo": "_registry",
    "available": "_registry",
    "build": "_registry",
    "info": "_registry",
    "load": "_registry",
    "load_conch": "_registry",
    "resolve_device": "_device",
    "SlideEncoderInfo": "_slide_info",
    "slide_encoder_info": "_slide_info",
    "slide_encoders": "_slide_info",
    "FeatherSlideEncoder": "slide_encoder",
    "MeanSlideEncoder": "slide_encoder",
    "load_slide_encoder": "slide_encoder",
    "TitanSlideEncoder": "titan",
    "ChiefSlideEncoder": "chief",
    "MadeleineSlideEncoder": "madeleine",
    "GigaPathSlideEncoder": "gigapath_slide",
    "PrismSlideEncoder": "prism",
}
_NEEDS_TORCH = {
    "abmil",
    "adapter",
    "conch",
    "vit",
    "weights",
    "_device",
    "_registry",
    "_slide_info",
    "slide_encoder",
    "titan",
    "chief",
    "madeleine",
    "gigapath_slide",
    "prism",
}


def __getattr__(name: str) -> Any:
    # Submodules load on first use: OnnxEncoder and ConchTokenizer work without torch.
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'tumorboard.models' has no attribute {name!r}")
    try:
        module = importlib.import_module(f"{__name__}.{where}")
    except ImportError as exc:
        if where in _NEEDS_TORCH and exc.name in ("torch", "safetensors"):
            raise MissingDependencyError.for_extra(
                f"tumorboard.models.{name}", package=str(exc.name), extra="embed", cause=exc
            ) from exc
        raise
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
