"""Tissue segmentation front end over the C++ pipeline (csrc/tiling/tissue.cpp).

The algorithm is CLAM's classic ``segmentTissue`` (Lu et al., "Data-efficient and weakly
supervised computational pathology on whole-slide images", Nat. Biomed. Eng. 2021; mahmoodlab/CLAM
``wsi_core/WholeSlideImage.py``@53e2409): RGB -> HSV
saturation, median blur (``mthresh``), binary threshold ``S > sthresh`` (or Otsu), morphological
closing with a ``close`` x ``close`` square, then connected regions filtered by area. As in CLAM the
areas ``a_t`` (tissue) and ``a_h`` (holes) are in units of 512 x 512 level-0 pixels, converted to
mask pixels with ``int(512**2 / (sx * sy))``; a region is kept when its net area (without its
holes) exceeds ``a_t``, and its ``max_n_holes`` largest holes above ``a_h`` stay holes, the
others are filled. It runs on a thumbnail at ``target_mpp`` (default 8 um/px, TRIDENT's 1.25x).

Differences from CLAM/OpenCV, by design: areas are pixel counts of the regions (OpenCV's
``contourArea`` measures the polygon through boundary pixel centres, smaller by about half the
perimeter); the polygons follow pixel edges, so they enclose exactly the mask.

Presets (CLAM ``presets/*.csv`` and ``create_patches_fp.py`` defaults, @53e2409):

============  =======  =======  =====  ========  ====  ====  ===========
preset        sthresh  mthresh  close  use_otsu  a_t   a_h   max_n_holes
============  =======  =======  =====  ========  ====  ====  ===========
clam          8        7        4      False     100   16    8
tcga          8        7        4      False     16    4     8
bwh_biopsy    15       11       2      False     1     1     2
otsu          8        7        4      True      100   16    8
============  =======  =======  =====  ========  ====  ====  ===========
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _core
from .._io import atomic_path
from .._json import json_text
from ..errors import InvalidArgumentError, InvalidTypeError

if TYPE_CHECKING:
    from ._readers import Slide

#: TRIDENT segments at 1.25x, i.e. 8 microns per pixel.
DEFAULT_SEGMENTATION_MPP = 8.0
_REF_PATCH = 512


@dataclass(frozen=True)
class SegmentationParams:
    """CLAM segmentation parameters (``segmentTissue`` seg_level params + filter_params).

    Attributes
    ----------
    sthresh : int, default 8
        Saturation threshold, tissue where S > sthresh (0-255).
    mthresh : int, default 7
        Median blur kernel size (odd; 1 disables).
    close : int, default 4
        Morphological closing kernel size (0 or 1 disables).
    use_otsu : bool, default False
        Threshold the blurred saturation with Otsu's method instead of sthresh.
    a_t : float, default 100.0
        Minimum net tissue area, in 512 x 512 level-0 patches.
    a_h : float, default 16.0
        Minimum hole area, same unit.
    max_n_holes : int, default 8
        Holes kept per region (largest first); the others are filled.
    """

    sthresh: int = 8
    mthresh: int = 7
    close: int = 4
    use_otsu: bool = False
    a_t: float = 100.0
    a_h: float = 16.0
    max_n_holes: int = 8

    def __post_init__(self) -> None:
        if not 0 <= int(self.sthresh) <= 255:
            raise InvalidArgumentError(f"sthresh must be in [0, 255], got {self.sthresh}")
        if self.mthresh < 1 or self.mthresh % 2 == 0:
            raise InvalidArgumentError(
                f"mthresh must be an odd kernel size >= 1, got {self.mthresh}"
            )
        if self.close < 0:
            raise InvalidArgumentError(f"close must be >= 0, got {self.close}")
        if self.a_t < 0 or self.a_h < 0:
            raise InvalidArgumentError(f"a_t and a_h must be >= 0, got {self.a_t}, {self.a_h}")
        if self.max_n_holes < 0:
            raise InvalidArgumentError(f"max_n_holes must be >= 0, got {self.max_n_holes}")


PRESETS: dict[str, SegmentationParams] = {
    "clam": SegmentationParams(8, 7, 4, False, 100.0, 16.0, 8),
    "tcga": SegmentationParams(8, 7, 4, False, 16.0, 4.0, 8),
    "bwh_biopsy": SegmentationParams(15, 11, 2, False, 1.0, 1.0, 2),
    "otsu": SegmentationParams(8, 7, 4, True, 100.0, 16.0, 8),
}


def resolve_params(
    preset: str = "clam", params: SegmentationParams | None = None
) -> SegmentationParams:
    """Return ``params`` if given, else the named preset."""
    if params is not None:
        if not isinstance(params, SegmentationParams):
            raise InvalidTypeError(
                f"params must be a SegmentationParams, got {type(params).__name__}"
            )
        return params
    try:
        return PRESETS[preset]
    except KeyError:
        raise InvalidArgumentError(
            f"unknown preset {preset!r}; choose one of {', '.join(sorted(PRESETS))}"
        ) from None


@dataclass(frozen=True, eq=False)
class TissuePolygon:
    """One tissue region in level-0 pixel coordinates.

    Rings are (n, 2) float64 (x, y) along mask pixel edges, not repeated at the end; the exterior
    is counter-clockwise (positive shoelace area with y down) and holes clockwise, as GeoJSON
    (RFC 7946) asks.

    Attributes
    ----------
    exterior : numpy.ndarray
        The outer ring.
    holes : tuple of numpy.ndarray
        The hole rings.
    area : float
        The net area in level-0 square pixels.
    """

    exterior: np.ndarray
    holes: tuple[np.ndarray, ...]
    area: float


@dataclass(frozen=True, eq=False)
class TissueMask:
    """Result of :func:`segment_tissue`: the tissue mask of a thumbnail and how it maps to level 0.

    Attributes
    ----------
    mask : numpy.ndarray
        (h, w) bool, True on tissue (after area filtering and hole filling).
    downsample : tuple of float
        (sx, sy) level-0 pixels per mask pixel.
    level0_size : tuple of int
        Level-0 (width, height) of the slide.
    threshold : int
        The saturation threshold used (sthresh or Otsu's).
    params : SegmentationParams
        The segmentation parameters.
    stats : dict of str to int
        Region counts: n_regions, n_kept, n_holes, n_holes_kept.
    name : str, default ""
        The slide name.
    """

    mask: np.ndarray
    downsample: tuple[float, float]
    level0_size: tuple[int, int]
    threshold: int
    params: SegmentationParams
    stats: dict[str, int] = field(default_factory=dict)
    name: str = ""

    @property
    def tissue_fraction(self) -> float:
        """Fraction of the slide area covered by tissue."""
        return float(self.mask.mean()) if self.mask.size else 0.0

    def polygons(self) -> list[TissuePolygon]:
        """Return the tissue regions as polygons with holes, in level-0 pixel coordinates.

        Regions come in raster order of their top-left pixel.
        """
        sx, sy = self.downsample
        scale = np.array([sx, sy], np.float64)
        out = []
        mask = np.ascontiguousarray(self.mask, dtype=np.bool_).view(np.uint8)
        for outer, holes, area in _core.tiling.mask_polygons(mask):
            out.append(
                TissuePolygon(
                    exterior=outer.astype(np.float64) * scale,
                    holes=tuple(h.astype(np.float64) * scale for h in holes),
                    area=float(area) * sx * sy,
                )
            )
        return out

    def to_geojson(self) -> dict[str, Any]:
        """Return a GeoJSON FeatureCollection of the tissue polygons.

        Coordinates are level-0 pixels, rings closed; readable by QuPath and geopandas like
        TRIDENT's ``contours_geojson`` files.
        """
        features = []
        for i, poly in enumerate(self.polygons()):
            rings = [poly.exterior, *poly.holes]
            coords = [_closed(r) for r in rings]
            features.append(
                {
                    "type": "Feature",
                    "id": i,
                    "geometry": {"type": "Polygon", "coordinates": coords},
                    "properties": {
                        "tissue_id": i,
                        "area": poly.area,
                        "objectType": "annotation",
                        "classification": {"name": "Tissue"},
                    },
                }
            )
        return {"type": "FeatureCollection", "features": features}

    def write_geojson(self, path: str | os.PathLike[str]) -> Path:
        """Write :meth:`to_geojson` to ``path`` (atomically) and return the path."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(p) as tmp:
            tmp.write_text(json_text(self.to_geojson()), encoding="utf-8")
        return p


def _closed(ring: np.ndarray) -> list[list[float]]:
    pts = [[_num(x), _num(y)] for x, y in ring.tolist()]
    if pts:
        pts.append(list(pts[0]))
    return pts


def _num(v: float) -> float | int:
    return int(v) if float(v).is_integer() else v


def _threads(threads: int | None) -> int:
    if threads is None:
        return 0
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise InvalidArgumentError(f"threads must be a non-negative int or None, got {threads!r}")
    return threads


def segment_image(
    image: np.ndarray,
    *,
    preset: str = "clam",
    params: SegmentationParams | None = None,
    downsample: float | tuple[float, float] = 1.0,
    level0_size: tuple[int, int] | None = None,
    name: str = "",
    threads: int | None = None,
) -> TissueMask:
    """Segment tissue in an RGB(A) uint8 image that shows a slide at ``downsample``.

    Parameters
    ----------
    image : numpy.ndarray
        (h, w, 3|4) uint8.
    preset : str, default "clam"
        A key of :data:`PRESETS`, used when ``params`` is None.
    params : SegmentationParams or None, default None
        Explicit parameters.
    downsample : float or tuple of float, default 1.0
        Level-0 pixels per image pixel, one number or (sx, sy); areas are converted with it as
        CLAM does.
    level0_size : tuple of int or None, default None
        Level-0 (width, height); default the image size times ``downsample``.
    name : str, default ""
        The slide name.
    threads : int or None, default None
        C++ threads (default: all cores).

    Returns
    -------
    TissueMask
        The mask and its mapping to level 0.
    """
    p = resolve_params(preset, params)
    arr = np.asarray(image)
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] not in (3, 4):
        raise InvalidArgumentError(
            f"image must be (h, w, 3|4) uint8, got shape {arr.shape} {arr.dtype}"
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InvalidArgumentError("image is empty")
    sx, sy = (downsample, downsample) if np.isscalar(downsample) else downsample
    sx, sy = float(sx), float(sy)
    if not (sx > 0 and sy > 0):
        raise InvalidArgumentError(f"downsample must be positive, got {downsample}")
    if level0_size is None:
        level0_size = (round(arr.shape[1] * sx), round(arr.shape[0] * sy))
    ref_area = int(_REF_PATCH**2 / (sx * sy))
    res = _core.tiling.tissue_mask(
        np.ascontiguousarray(arr),
        int(p.sthresh),
        bool(p.use_otsu),
        int(p.mthresh),
        int(p.close),
        float(p.a_t * ref_area),
        float(p.a_h * ref_area),
        int(p.max_n_holes),
        _threads(threads),
    )
    stats = {k: int(res[k]) for k in ("n_regions", "n_kept", "n_holes", "n_holes_kept")}
    return TissueMask(
        mask=res["mask"].view(np.bool_),
        downsample=(sx, sy),
        level0_size=(int(level0_size[0]), int(level0_size[1])),
        threshold=int(res["threshold"]),
        params=p,
        stats=stats,
        name=name,
    )


def slide_mpp(slide: Slide) -> float:
    """Return the slide's level-0 mpp, or 10 / magnification when only that is known."""
    if slide.mpp is not None:
        return float(slide.mpp)
    if slide.magnification:
        return 10.0 / slide.magnification
    raise InvalidArgumentError(
        f"{slide.path}: the slide has no resolution (mpp) or magnification; open it with mpp="
    )


def segment_tissue(
    slide: Slide,
    *,
    preset: str = "clam",
    params: SegmentationParams | None = None,
    target_mpp: float = DEFAULT_SEGMENTATION_MPP,
    threads: int | None = None,
) -> TissueMask:
    """Segment the tissue of a slide on a thumbnail at ``target_mpp`` microns per pixel.

    Parameters
    ----------
    slide : Slide
        The open slide.
    preset : str, default "clam"
        A CLAM preset (key of :data:`PRESETS`), used when ``params`` is None.
    params : SegmentationParams or None, default None
        Explicit parameters.
    target_mpp : float, default 8.0
        Thumbnail resolution (8 = 1.25x; never finer than level 0).
    threads : int or None, default None
        Threads (default: all cores).

    Returns
    -------
    TissueMask
        The mask and its mapping to level 0.
    """
    if not target_mpp > 0:
        raise InvalidArgumentError(f"target_mpp must be positive, got {target_mpp}")
    ds = max(1.0, target_mpp / slide_mpp(slide))
    thumb, (sx, sy) = slide.read_downsampled(ds, threads=threads)
    return segment_image(
        thumb,
        preset=preset,
        params=params,
        downsample=(sx, sy),
        level0_size=slide.dimensions,
        name=slide.name,
        threads=threads,
    )
