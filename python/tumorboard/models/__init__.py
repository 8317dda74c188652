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

Models (:func:`available`; shared/spec/REFERENCE.md §1-3):

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

Weights are never downloaded: the official ones are gated on Hugging Face, so pass the files
you obtained. Without weights, models are random (deterministic per ``seed``) with a loud
:class:`RandomWeightsWarning`. torch, safetensors and tokenizers come with
``pip install tumorboard[embed]``; onnx and onnxruntime with ``[gpu]``. :class:`OnnxEncoder`
needs only numpy and onnxruntime.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "SegmentAdapter",
    "ABMIL",
    "CONCH",
    "ABMILSlideEncoder",
    "CheckpointKeyError",
    "ConchConfig",
    "ConchTextEncoder",
    "ConchTokenizer",
    "ConchVisionEncoder",
    "ModelInfo",
    "MTBBenchRegressor",
    "OnnxEncoder",
    "RandomWeightsWarning",
    "UnsafeCheckpointError",
    "ViTConfig",
    "VisionTransformer",
    "WeightsError",
    "CONCH_B16",
    "CONCH_TINY",
    "UNI2_H",
    "UNI2_TINY",
    "UNI_V1",
    "available",
    "build",
    "export_onnx",
    "info",
    "load",
    "load_conch",
    "read_state_dict",
    "save_state_dict",
]

_WHERE = {
    "SegmentAdapter": "adapter",
    "ABMIL": "abmil",
    "ABMILSlideEncoder": "abmil",
    "MTBBenchRegressor": "abmil",
    "CONCH": "conch",
    "ConchConfig": "conch",
    "ConchTextEncoder": "conch",
    "ConchVisionEncoder": "conch",
    "ConchTokenizer": "conch_tokenizer",
    "ViTConfig": "vit",
    "VisionTransformer": "vit",
    "OnnxEncoder": "onnx",
    "export_onnx": "onnx",
    "CheckpointKeyError": "weights",
    "RandomWeightsWarning": "weights",
    "UnsafeCheckpointError": "weights",
    "WeightsError": "weights",
    "read_state_dict": "weights",
    "save_state_dict": "weights",
    "ModelInfo": "_registry",
    "available": "_registry",
    "build": "_registry",
    "UNI2_H": "_registry",
    "UNI_V1": "_registry",
    "UNI2_TINY": "_registry",
    "CONCH_B16": "_registry",
    "CONCH_TINY": "_registry",
    "info": "_registry",
    "load": "_registry",
    "load_conch": "_registry",
}
_NEEDS_TORCH = {"abmil", "adapter", "conch", "vit", "weights", "_registry"}


def __getattr__(name: str) -> Any:
    # Submodules load on first use: OnnxEncoder and ConchTokenizer work without torch.
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'tumorboard.models' has no attribute {name!r}")
    try:
        module = importlib.import_module(f"{__name__}.{where}")
    except ImportError as exc:
        if where in _NEEDS_TORCH and exc.name in ("torch", "safetensors"):
            raise ImportError(
                f"tumorboard.models.{name} needs torch: pip install tumorboard[embed] ({exc})"
            ) from exc
        raise
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
