"""Image input shared by the tools.

An image is a path (PNG, JPEG, TIFF, ... read with Pillow) or an RGB(A) uint8 array.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import (
    InvalidArgumentError,
    InvalidTypeError,
    MissingDependencyError,
    MissingFileError,
)


def load_rgb(image: str | os.PathLike[str] | np.ndarray, *, argument: str = "image") -> np.ndarray:
    """Return (h, w, 3) uint8 RGB from a path or an array.

    RGBA is composited over white; float arrays in [0, 1] are scaled to 0..255.
    """
    if isinstance(image, (str, os.PathLike)):
        p = Path(image)
        if not p.is_file():
            raise MissingFileError(f"{argument}: no such file: {p}")
        try:
            from PIL import Image
        except ImportError as exc:
            raise MissingDependencyError.for_extra(
                f"{argument}: reading image files", package="pillow", extra="slides", cause=exc
            ) from exc
        with Image.open(p) as im:
            arr = np.asarray(im.convert("RGBA"))
    else:
        arr = np.asarray(image)
    if arr.ndim != 3 or arr.shape[2] not in (3, 4) or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InvalidArgumentError(
            f"{argument}: expected an (h, w, 3|4) RGB(A) image, got shape {arr.shape}"
        )
    if arr.dtype != np.uint8:
        if not np.issubdtype(arr.dtype, np.floating):
            raise InvalidTypeError(
                f"{argument}: expected uint8 or float in [0, 1], got {arr.dtype}"
            )
        if not np.isfinite(arr).all() or arr.min() < 0 or arr.max() > 1:
            finite = np.isfinite(arr).all()
            got = f"values in [{arr.min():g}, {arr.max():g}]" if finite else "non-finite values"
            raise InvalidArgumentError(
                f"{argument}: expected a float image with finite values in [0, 1], got {got}"
            )
        arr = np.round(arr * 255.0).astype(np.uint8)
    if arr.shape[2] == 4:
        a = arr[..., 3:4].astype(np.float32) / 255.0
        arr = np.round(arr[..., :3] * a + 255.0 * (1.0 - a)).astype(np.uint8)
    return np.ascontiguousarray(arr)


def image_name(image: str | os.PathLike[str] | np.ndarray, name: str | None) -> str:
    """Return the name a reply sentence uses: ``name``, else the file name, else "the image"."""
    if name is not None:
        return name
    if isinstance(image, (str, os.PathLike)):
        return Path(image).name
    return "the image"
