"""Image normalisation constants, defined once and torch-free (plain tuples of floats).

Every preprocessing path (the slides layer's fused patch preprocessing and loader, the encoders'
metadata in ``tumorboard.models``, the embedding backends' defaults, the CONCH agent tool) takes
its mean and standard deviation from here.

References
----------
* ImageNet statistics (per-channel RGB mean and std of the ImageNet training set on [0, 1]
  pixels), as used by torchvision and by timm: ``huggingface/pytorch-image-models``,
  ``timm/data/constants.py@9da7e3a79924a05f62544e4a67742d1cac317f1e`` (``IMAGENET_DEFAULT_MEAN``,
  ``IMAGENET_DEFAULT_STD``). UNI and UNI2-h are trained and evaluated with them.
* OpenAI CLIP statistics: ``openai/CLIP``, ``clip/clip.py@3bee28119e6b28e75b82b811b87b56935314e6a5``
  (the ``Normalize`` of ``_transform``); CONCH preprocesses with them.
"""

from __future__ import annotations

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "OPENAI_CLIP_MEAN", "OPENAI_CLIP_STD"]

IMAGENET_MEAN: tuple[float, float, float] = (0.485, 0.456, 0.406)
"""Per-channel (R, G, B) mean of ImageNet images scaled to [0, 1]."""

IMAGENET_STD: tuple[float, float, float] = (0.229, 0.224, 0.225)
"""Per-channel (R, G, B) standard deviation of ImageNet images scaled to [0, 1]."""

OPENAI_CLIP_MEAN: tuple[float, float, float] = (0.48145466, 0.4578275, 0.40821073)
"""Per-channel (R, G, B) mean of OpenAI CLIP's preprocessing."""

OPENAI_CLIP_STD: tuple[float, float, float] = (0.26862954, 0.26130258, 0.27577711)
"""Per-channel (R, G, B) standard deviation of OpenAI CLIP's preprocessing."""
