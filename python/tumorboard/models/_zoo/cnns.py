"""CNN and hybrid patch encoders (TRIDENT names).

* ``resnet50``: ImageNet ResNet-50 truncated after ``layer3``, average pooled
  (:func:`tumorboard.models.resnet.resnet50_trunc`);
* ``ctranspath``: Swin-T with CTransPath's convolutional stem, token mean
  (:func:`tumorboard.models.swin.ctranspath`).

Rows from mahmoodlab/TRIDENT ``trident/patch_encoder_models/load.py``@a91fa84
(``ResNet50InferenceEncoder``, ``CTransPathInferenceEncoder``: output, transform, precision) and
its ``README.md`` table (recommended magnification and patch size). Both transforms are a
bilinear antialiased resize of the shorter side to 224 with ImageNet statistics; ``resnet50``
adds a 224 center crop, which is the identity after that resize on square patches.
"""

from __future__ import annotations

import torch

from ..._constants import IMAGENET_MEAN, IMAGENET_STD
from .._info import Entry, ModelInfo
from ..resnet import resnet50_trunc
from ..swin import ctranspath

__all__ = ["ENTRIES"]

ENTRIES: tuple[Entry, ...] = (
    Entry(
        ModelInfo(
            name="resnet50",
            kind="encoder",
            embed_dim=1024,
            image_size=224,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            interpolation="bilinear",
            gpu_dtype=torch.float32,
            trident_name="resnet50",
            weights_source=(
                "Hugging Face timm/resnet50.tv_in1k, model.safetensors (torchvision "
                "IMAGENET1K_V1; layer4 and fc are dropped at load)"
            ),
            license="BSD-3-Clause",
            gated=False,
            magnification=20.0,
            patch_size=256,
            pooling="adaptive average pool of the layer3 feature map (stride 16)",
        ),
        build=resnet50_trunc,
    ),
    Entry(
        ModelInfo(
            name="ctranspath",
            kind="encoder",
            embed_dim=768,
            image_size=224,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            interpolation="bilinear",
            gpu_dtype=torch.float32,
            trident_name="ctranspath",
            weights_source=(
                "Hugging Face dataset MahmoodLab/hest-bench, fm_v1/ctranspath/CHIEF_CTransPath.pth "
                "(gated; TRIDENT's source), or TransPath's ctranspath.pth (Google Drive link in "
                "Xiyue-Wang/TransPath README.md)"
            ),
            license="GPL-3.0 (TransPath; non-commercial academic use)",
            gated=True,
            magnification=10.0,
            patch_size=256,
            pooling="mean of the final normalised tokens (7x7 grid at 224)",
        ),
        build=ctranspath,
    ),
)
