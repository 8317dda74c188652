"""``ihc_positive_percentage``: MTBBench's IHC positive-cell estimate from a foundation model.

MTBBench's pipeline is goodfire-ai/mtbbench ``neurips25/utils/ihc_tool.py`` (patching and
embedding with mahmoodlab/TRIDENT@a91fa84) and ``neurips25/utils/train_abmil.py`` (the ABMIL
regressor), @ae2f8fe; the reply is from ``neurips25/models/agent_with_tools.py``@ae2f8fe.

MTBBench's pipeline reads the IHC image as a 1 µm/px "slide" (10x), tiles it into patches of
256 px at 20x (128 image pixels, upsampled), embeds every patch with UNI2-h (1536-d), pools the
bag with a gated two-head ABMIL and regresses the percentage of positive cells with an MLP
(``tumorboard.models.MTBBenchRegressor``). Here the tissue is found with the slides layer's
classical segmentation on the image itself (MTBBench uses a deep segmenter); a tile is kept when
it overlaps tissue, and every tile is used when none is found. The reply is MTBBench's
``According to IHC tool around {value}% of the cells in {image} are positively stained.`` with
the value rounded to one decimal.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ._image import image_name, load_rgb


@dataclass(frozen=True)
class IhcResult:
    """Result of :func:`ihc_positive_percentage`.

    Attributes
    ----------
    percentage : float
        The predicted percentage of positive cells, in [0, 100].
    n_patches : int
        Tiles embedded.
    coords : numpy.ndarray
        (n_patches, 2) int64 top-left (x, y) of the tiles in image pixels.
    reply : str
        MTBBench's sentence.
    """

    percentage: float
    n_patches: int
    coords: np.ndarray
    reply: str

    def to_dict(self) -> dict[str, Any]:
        """Return percentage, n_patches and reply as a plain dict (without the coords)."""
        return {"percentage": self.percentage, "n_patches": self.n_patches, "reply": self.reply}


def tile_image(
    rgb: np.ndarray,
    tile: int,
    *,
    segmentation: str | None = "clam",
    min_tissue: float = 0.0,
    mpp: float = 1.0,
) -> np.ndarray:
    """Return the top-left corners of the ``tile`` x ``tile`` grid over an image, on tissue.

    The grid is row-major; the last row/column may overhang and is padded white. A tile is kept
    where the tissue mask of the slides layer overlaps it by more than ``min_tissue``; all tiles
    are kept when there is no tissue.

    Parameters
    ----------
    rgb : numpy.ndarray
        (h, w, 3) uint8 image.
    tile : int
        Tile side in image pixels.
    segmentation : str or None, default "clam"
        A slides-layer segmentation preset, or None to keep every tile.
    min_tissue : float, default 0.0
        Tissue fraction a tile must exceed.
    mpp : float, default 1.0
        Microns per pixel of the image (the segmentation's area limits are in um2).

    Returns
    -------
    numpy.ndarray
        (N, 2) int64 top-left (x, y) corners.
    """
    h, w = rgb.shape[:2]
    ys, xs = np.arange(0, h, tile), np.arange(0, w, tile)
    coords = np.stack(np.meshgrid(xs, ys, indexing="xy"), -1).reshape(-1, 2).astype(np.int64)
    if segmentation is None:
        return coords
    from ..slides import PRESETS, segment_image

    base = PRESETS[segmentation]
    # a region of interest, not a slide: keep tissue above 500 um2 (a few cells), holes above 125
    params = replace(base, min_tissue_area=500.0, min_hole_area=125.0)
    mask = segment_image(rgb, params=params, mpp=mpp).mask
    frac = np.array([mask[y : y + tile, x : x + tile].mean() for x, y in coords], dtype=np.float64)
    keep = frac > min_tissue
    return coords[keep] if keep.any() else coords


def ihc_positive_percentage(
    image: str | os.PathLike[str] | np.ndarray,
    *,
    encoder: Any,
    regressor: Any,
    mpp: float = 1.0,
    magnification: float = 20.0,
    patch_size: int = 256,
    batch_size: int = 32,
    segmentation: str | None = "clam",
    name: str | None = None,
) -> IhcResult:
    """Estimate the percentage of IHC-positive cells in ``image`` by MTBBench's UNI2-h + ABMIL.

    Parameters
    ----------
    image : str or os.PathLike or numpy.ndarray
        A path or an RGB(A) uint8 array.
    encoder : torch.nn.Module
        A patch encoder (``tumorboard.models.load("uni2-h", weights=...)``) with
        ``image_size``, ``mean``, ``std`` (and ``interpolation``).
    regressor : MTBBenchRegressor
        ``tumorboard.models.MTBBenchRegressor`` (or anything with
        ``predict_percentage(features [N, D]) -> [1]``).
    mpp : float, default 1.0
        The image's microns per pixel (MTBBench: 1, i.e. 10x).
    magnification : float, default 20.0
        Magnification of the patch grid (MTBBench: 20x).
    patch_size : int, default 256
        Patch side at that magnification (MTBBench: 256 px, 128 image pixels).
    batch_size : int, default 32
        Patches per forward.
    segmentation : str or None, default "clam"
        A slides-layer preset for the tissue mask, or None to use every tile.
    name : str or None, default None
        The image name in the reply (default: the file name).

    Returns
    -------
    IhcResult
        The percentage, the tiles used and MTBBench's reply.
    """
    import torch

    from ..slides import preprocess_patches

    if not mpp > 0 or not magnification > 0:
        raise InvalidArgumentError(
            f"mpp and magnification: expected positive numbers, got {mpp}, {magnification}"
        )
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise InvalidArgumentError(f"batch_size: expected a positive int, got {batch_size!r}")
    rgb = load_rgb(image)
    level0_mag = 10.0 / mpp
    tile = max(1, round(patch_size * level0_mag / magnification))
    coords = tile_image(rgb, tile, segmentation=segmentation, mpp=mpp)
    h, w = rgb.shape[:2]
    padded = np.full((h + tile, w + tile, 3), 255, np.uint8)
    padded[:h, :w] = rgb
    patches = np.stack([padded[y : y + tile, x : x + tile] for x, y in coords])
    size = int(getattr(encoder, "image_size", 224))
    p = next(encoder.parameters())
    feats = []
    with torch.inference_mode():
        for s in range(0, len(patches), batch_size):
            x = preprocess_patches(
                patches[s : s + batch_size],
                size=size,
                mean=tuple(encoder.mean),
                std=tuple(encoder.std),
                interpolation=getattr(encoder, "interpolation", "bilinear"),
            )
            feats.append(encoder(torch.from_numpy(x).to(p.device, p.dtype)).float())
        features = torch.cat(feats)
        pct = float(regressor.predict_percentage(features).reshape(-1)[0])
    pct = min(100.0, max(0.0, pct))
    label = image_name(image, name)
    reply = (
        f"According to IHC tool around {round(pct, 1)}% of the cells in {label} are "
        "positively stained."
    )
    return IhcResult(percentage=pct, n_patches=len(coords), coords=coords, reply=reply)
