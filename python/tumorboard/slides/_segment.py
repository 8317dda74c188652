"""Tissue segmentation front end over the C++ pipeline (csrc/tiling/tissue.cpp).

The algorithm is CLAM's classic ``segmentTissue`` (Lu et al., "Data-efficient and weakly
supervised computational pathology on whole-slide images", Nat. Biomed. Eng. 2021; mahmoodlab/CLAM
``wsi_core/WholeSlideImage.py``@53e2409): RGB -> HSV saturation, median blur (``mthresh``), binary
threshold ``S > sthresh`` (or Otsu), morphological closing with a ``close`` x ``close`` square,
then connected regions filtered by area: a region is kept when its net area (without its holes)
is above ``min_tissue_area``, and its ``max_n_holes`` largest holes above ``min_hole_area`` stay
holes, the others are filled. It runs on a thumbnail at ``seg_mpp`` (default 8 um/px,
TRIDENT's 1.25x).

Areas are physical: square microns, converted to thumbnail pixels with the slide's level-0 mpp
when the slide is segmented, so a preset finds the same fragments at any scan magnification.
(CLAM counts areas in 512 x 512 level-0 pixel patches, which makes its thresholds four times
larger in square microns on a 20x scan than on a 40x one.)

Differences from CLAM/OpenCV, by design: areas are pixel counts of the regions (OpenCV's
``contourArea`` measures the polygon through boundary pixel centres, smaller by about half the
perimeter); the polygons follow pixel edges, so they enclose exactly the mask.

Presets. ``default`` finds every tissue fragment of 0.1 mm2 or more (a core-needle biopsy fragment
of 1 x 0.1 mm is 0.1 mm2) with CLAM's thresholding: it keeps regions above 0.05 mm2, because the
area measured on the 8 um/px thumbnail falls short of the true one (pale edges, the median blur;
about 1% for a uniformly stained ellipse). The others are CLAM's (``presets/*.csv`` and the
``create_patches_fp.py`` defaults, @53e2409), their areas converted to um2 at level-0 0.25 um/px:
CLAM gives ``a_t``/``a_h`` "relative to a reference patch size of 512 x 512 at level 0"
(mahmoodlab/CLAM ``docs/README.md``@206bf2d, "Custom Default Segmentation Parameters") and states
no resolution; 0.25 um/px (40x) is the assumption made here, so one CLAM unit is
(512 x 0.25 um)^2 = 16,384 um2 and CLAM's numbers are unchanged on 40x scans
(:meth:`SegmentationOptions.from_clam` converts other values).

============  =======  =======  =====  ========  ===================  ===================  =====
preset        sthresh  mthresh  close  use_otsu  min_tissue_area      min_hole_area        holes
============  =======  =======  =====  ========  ===================  ===================  =====
default       8        7        4      False     50,000 um2           16,000 um2           8
clam          8        7        4      False     1,638,400 (a_t 100)  262,144 (a_h 16)     8
tcga          8        7        4      False     262,144 (a_t 16)     65,536 (a_h 4)       8
bwh_biopsy    15       11       2      False     16,384 (a_t 1)       16,384 (a_h 1)       2
otsu          8        7        4      True      1,638,400 (a_t 100)  262,144 (a_h 16)     8
============  =======  =======  =====  ========  ===================  ===================  =====

A mask with no region left is "no tissue": :attr:`TissueMask.empty` is True and
:attr:`TissueMask.empty_reason` says why, with the largest region that was found
(:attr:`TissueMask.largest_region_um2`), so a pipeline reports the slide instead of writing an
empty result.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _core
from .._io import atomic_path, remove_temp_files
from .._json import json_text
from ..errors import InvalidArgumentError, InvalidTypeError
from . import _validate

if TYPE_CHECKING:
    from ._readers import Slide

#: TRIDENT segments at 1.25x, i.e. 8 microns per pixel.
DEFAULT_SEGMENTATION_MPP = 8.0
#: The preset used when none is named.
DEFAULT_PRESET = "default"
#: Level-0 microns per pixel at which CLAM's area units (512 x 512 level-0 pixels) are converted.
CLAM_LEVEL0_MPP = 0.25
_CLAM_REF_PATCH = 512
_ALL_HOLES = 2**31 - 1


def _check_int(value: Any, name: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidTypeError(f"{name}: expected an int, got {value!r}")
    if value < low or (high is not None and value > high):
        rng = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise InvalidArgumentError(f"{name}: expected an integer {rng}, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class SegmentationOptions:
    """Tissue segmentation parameters: CLAM's thresholding and physical area filters.

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
    min_tissue_area : float, default 50000.0
        Minimum net area of a tissue region (its holes excluded), in square microns; a region is
        kept when its area is above it. The default, 0.05 mm2, finds every fragment of 0.1 mm2
        or more with room for the thumbnail's edge error.
    min_hole_area : float, default 16000.0
        Minimum area of a hole, in square microns; smaller holes are filled.
    max_n_holes : int, default 8
        Holes kept per region (largest first); the others are filled.
    """

    sthresh: int = 8
    mthresh: int = 7
    close: int = 4
    use_otsu: bool = False
    min_tissue_area: float = 50_000.0
    min_hole_area: float = 16_000.0
    max_n_holes: int = 8

    def __post_init__(self) -> None:
        _check_int(self.sthresh, "sthresh", 0, 255)
        if _check_int(self.mthresh, "mthresh", 1) % 2 == 0:
            raise InvalidArgumentError(
                f"mthresh: expected an odd kernel size >= 1, got {self.mthresh}"
            )
        _check_int(self.close, "close", 0)
        if not isinstance(self.use_otsu, (bool, np.bool_)):
            raise InvalidTypeError(f"use_otsu: expected a bool, got {self.use_otsu!r}")
        _validate.non_negative(self.min_tissue_area, "min_tissue_area", "um2")
        _validate.non_negative(self.min_hole_area, "min_hole_area", "um2")
        _check_int(self.max_n_holes, "max_n_holes", 0)

    @classmethod
    def from_clam(
        cls,
        sthresh: int = 8,
        mthresh: int = 7,
        close: int = 4,
        use_otsu: bool = False,
        a_t: float = 100,
        a_h: float = 16,
        max_n_holes: int = 8,
        *,
        level0_mpp: float = CLAM_LEVEL0_MPP,
    ) -> SegmentationOptions:
        """Convert CLAM's segmentation parameters (a preset CSV row) to physical areas.

        Parameters
        ----------
        sthresh, mthresh, close, use_otsu, max_n_holes
            As in CLAM; unchanged.
        a_t, a_h : float, default 100, 16
            CLAM's tissue and hole areas in 512 x 512 level-0 pixel patches.
        level0_mpp : float, default 0.25
            The level-0 resolution the values were chosen for (CLAM states none; 0.25 um/px,
            40x, is the assumption of the built-in presets).

        Returns
        -------
        SegmentationOptions
            The same thresholds with areas in square microns.
        """
        mpp = _validate.positive(level0_mpp, "level0_mpp", "um/px")
        unit = (_CLAM_REF_PATCH * mpp) ** 2
        a_t = _validate.non_negative(a_t, "a_t")
        a_h = _validate.non_negative(a_h, "a_h")
        return cls(sthresh, mthresh, close, use_otsu, a_t * unit, a_h * unit, max_n_holes)


PRESETS: dict[str, SegmentationOptions] = {
    "default": SegmentationOptions(8, 7, 4, False, 50_000.0, 16_000.0, 8),
    "clam": SegmentationOptions.from_clam(8, 7, 4, False, 100, 16, 8),
    "tcga": SegmentationOptions.from_clam(8, 7, 4, False, 16, 4, 8),
    "bwh_biopsy": SegmentationOptions.from_clam(15, 11, 2, False, 1, 1, 2),
    "otsu": SegmentationOptions.from_clam(8, 7, 4, True, 100, 16, 8),
}


def _smaller_preset_hint(min_tissue_area: float) -> str:
    """Name the preset (``--preset``) with the smallest minimum area below ``min_tissue_area``."""
    name, params = min(PRESETS.items(), key=lambda kv: kv[1].min_tissue_area)
    if params.min_tissue_area >= min_tissue_area:
        return ", or segment a finer thumbnail (a smaller --seg-mpp)"
    return (
        f", choose a preset with a smaller minimum (--preset {name}: "
        f"{_mm2(params.min_tissue_area)}), or segment a finer thumbnail (a smaller --seg-mpp)"
    )


def resolve_params(
    preset: str = DEFAULT_PRESET, params: SegmentationOptions | None = None
) -> SegmentationOptions:
    """Return ``params`` if given, else the named preset.

    Parameters
    ----------
    preset : str, default "default"
        A key of :data:`PRESETS`.
    params : SegmentationOptions or None, default None
        Explicit parameters; win over ``preset``.

    Returns
    -------
    SegmentationOptions
        The parameters to segment with.
    """
    if params is not None:
        if not isinstance(params, SegmentationOptions):
            raise InvalidTypeError(
                f"params: expected a SegmentationOptions, got {type(params).__name__}"
            )
        return params
    try:
        return PRESETS[preset]
    except (KeyError, TypeError):
        raise InvalidArgumentError(
            f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}"
        ) from None


def _mm2(um2: float) -> str:
    """Format an area in square microns as mm2 with 3 significant digits."""
    return f"{um2 / 1e6:.3g} mm2"


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
    params : SegmentationOptions
        The segmentation parameters.
    mpp : float
        Level-0 microns per pixel the areas were converted with.
    stats : dict of str to int
        Region counts: n_regions, n_kept, n_holes, n_holes_kept.
    name : str, default ""
        The slide name.
    """

    mask: np.ndarray
    downsample: tuple[float, float]
    level0_size: tuple[int, int]
    threshold: int
    params: SegmentationOptions
    mpp: float
    stats: dict[str, int] = field(default_factory=dict)
    name: str = ""
    _largest_um2: float | None = field(default=None, repr=False)

    @property
    def largest_region_um2(self) -> float:
        """Area of the largest tissue region, in square microns.

        For a mask with tissue, the largest region of the mask (its holes below
        ``min_hole_area`` count as tissue); for an empty mask, the largest region the area
        filter dropped, its holes excluded (0 when no pixel passed the threshold).
        """
        if self._largest_um2 is None:
            largest = _largest_region(self.mask.view(np.uint8))
            object.__setattr__(self, "_largest_um2", largest * self.pixel_area_um2)
        return float(self._largest_um2)  # type: ignore[arg-type]

    @property
    def tissue_fraction(self) -> float:
        """Fraction of the slide area covered by tissue."""
        return float(self.mask.mean()) if self.mask.size else 0.0

    @property
    def pixel_area_um2(self) -> float:
        """Area of one mask pixel in square microns."""
        sx, sy = self.downsample
        return self.mpp * sx * self.mpp * sy

    @property
    def tissue_area_um2(self) -> float:
        """Tissue area of the mask in square microns."""
        return float(np.count_nonzero(self.mask)) * self.pixel_area_um2

    @property
    def empty(self) -> bool:
        """Whether no tissue region was kept (the slide has "no tissue")."""
        return not bool(self.mask.any())

    @property
    def empty_reason(self) -> str:
        """Say why the mask is empty, with a hint; "" when it is not.

        The message gives the largest region found against the minimum area, or says that no
        pixel passed the saturation threshold, and names what to change: the
        :class:`SegmentationOptions` field, and the command-line flags of ``tumorboard tile`` /
        ``embed`` that change it (``--preset``, ``--seg-mpp``; every flag named is one the
        parser has).
        """
        if not self.empty:
            return ""
        p = self.params
        where = f" on the {self.pixel_area_um2**0.5:.3g} um/px thumbnail"
        if self.largest_region_um2 <= 0:
            how = "Otsu's" if p.use_otsu else "sthresh"
            otsu = "" if p.use_otsu else ", or threshold with Otsu's method (--preset otsu)"
            return (
                f"no tissue: nothing passes the saturation threshold {self.threshold} ({how}) and "
                f"the median blur{where}; the slide looks blank (check the file, or lower "
                f"SegmentationOptions.sthresh{otsu})"
            )
        return (
            f"no tissue: largest region {_mm2(self.largest_region_um2)} is not above the minimum "
            f"{_mm2(p.min_tissue_area)}{where}; lower SegmentationOptions.min_tissue_area"
            f"{_smaller_preset_hint(p.min_tissue_area)}"
        )

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
        remove_temp_files(p.parent, target=p.name, dead_only=True)  # left by a killed run
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


def segment_image(
    image: np.ndarray,
    *,
    mpp: float,
    preset: str = DEFAULT_PRESET,
    params: SegmentationOptions | None = None,
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
    mpp : float
        Level-0 microns per pixel of the slide; one image pixel covers ``mpp * downsample``
        microns a side. The area thresholds are converted with it.
    preset : str, default "default"
        A key of :data:`PRESETS`, used when ``params`` is None.
    params : SegmentationOptions or None, default None
        Explicit parameters.
    downsample : float or tuple of float, default 1.0
        Level-0 pixels per image pixel, one number or (sx, sy).
    level0_size : tuple of int or None, default None
        Level-0 (width, height); default the image size times ``downsample``.
    name : str, default ""
        The slide name.
    threads : int or None, default None
        C++ threads (default: all cores).

    Returns
    -------
    TissueMask
        The mask and its mapping to level 0; check :attr:`TissueMask.empty`.
    """
    p = resolve_params(preset, params)
    mpp = _validate.positive(mpp, "mpp", "um/px")
    n_threads = _validate.check_threads(threads)
    arr = np.asarray(image)
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] not in (3, 4):
        raise InvalidArgumentError(
            f"image: expected an (h, w, 3|4) uint8 array, got shape {arr.shape} {arr.dtype}"
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InvalidArgumentError("image is empty")
    sx, sy = (downsample, downsample) if np.isscalar(downsample) else downsample
    sx = _validate.positive(sx, "downsample")
    sy = _validate.positive(sy, "downsample")
    if level0_size is None:
        level0_size = (round(arr.shape[1] * sx), round(arr.shape[0] * sy))
    pixel_um2 = mpp * sx * mpp * sy
    rgb = np.ascontiguousarray(arr)
    res = _core.tiling.tissue_mask(
        rgb,
        int(p.sthresh),
        bool(p.use_otsu),
        int(p.mthresh),
        int(p.close),
        float(p.min_tissue_area / pixel_um2),
        float(p.min_hole_area / pixel_um2),
        int(p.max_n_holes),
        n_threads,
    )
    stats = {k: int(res[k]) for k in ("n_regions", "n_kept", "n_holes", "n_holes_kept")}
    largest = None
    if stats["n_kept"] == 0:
        # No region kept: measure the regions the filter dropped (same mask, no area filter).
        largest = 0.0
        if stats["n_regions"]:
            raw = _core.tiling.tissue_mask(
                rgb, int(p.sthresh), bool(p.use_otsu), int(p.mthresh), int(p.close), 0.0, 0.0,
                _ALL_HOLES, n_threads,
            )  # fmt: skip
            largest = _largest_region(raw["mask"]) * pixel_um2
    return TissueMask(
        mask=res["mask"].view(np.bool_),
        downsample=(sx, sy),
        level0_size=(int(level0_size[0]), int(level0_size[1])),
        threshold=int(res["threshold"]),
        params=p,
        mpp=mpp,
        stats=stats,
        name=name,
        _largest_um2=largest,
    )


def _largest_region(mask: np.ndarray) -> int:
    """Return the pixel count of the largest region of a 0/1 uint8 mask (holes excluded)."""
    if not mask.any():
        return 0
    return max(int(area) for _, _, area in _core.tiling.mask_polygons(mask))


def slide_mpp(slide: Slide) -> float:
    """Return the slide's level-0 mpp, or 10 / magnification when only that is known.

    Parameters
    ----------
    slide : Slide
        The open slide.

    Returns
    -------
    float
        Level-0 microns per pixel.
    """
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
    preset: str = DEFAULT_PRESET,
    params: SegmentationOptions | None = None,
    seg_mpp: float = DEFAULT_SEGMENTATION_MPP,
    threads: int | None = None,
) -> TissueMask:
    """Segment the tissue of a slide on a thumbnail at ``seg_mpp`` microns per pixel.

    Parameters
    ----------
    slide : Slide
        The open slide.
    preset : str, default "default"
        A preset (key of :data:`PRESETS`), used when ``params`` is None. The default finds every
        tissue fragment of 0.1 mm2 or more; ``clam``, ``tcga``, ``bwh_biopsy`` and ``otsu`` are
        CLAM's.
    params : SegmentationOptions or None, default None
        Explicit parameters.
    seg_mpp : float, default 8.0
        Thumbnail resolution in um/px (8 = 1.25x; never finer than level 0).
    threads : int or None, default None
        Threads (default: all cores).

    Returns
    -------
    TissueMask
        The mask and its mapping to level 0; :attr:`TissueMask.empty` is True (with
        :attr:`TissueMask.empty_reason`) when no region passes the area filter.
    """
    p = resolve_params(preset, params)
    seg_mpp = _validate.positive(seg_mpp, "seg_mpp", "um/px")
    _validate.check_threads(threads)
    mpp = slide_mpp(slide)
    ds = max(1.0, seg_mpp / mpp)
    thumb, (sx, sy) = slide.read_downsampled(ds, threads=threads)
    return segment_image(
        thumb,
        mpp=mpp,
        params=p,
        downsample=(sx, sy),
        level0_size=slide.dimensions,
        name=slide.name,
        threads=threads,
    )


#: Deprecated names of this module -> their new names (one release; :func:`deprecated_name`).
RENAMED = {"SegmentationParams": "SegmentationOptions"}


def deprecated_name(module: str, name: str) -> Any:
    """Return the object a deprecated name of ``module`` now has, with a DeprecationWarning.

    Parameters
    ----------
    module : str
        The module asked (``tumorboard.slides`` or its ``_segment``), for the messages.
    name : str
        The attribute asked.

    Returns
    -------
    object
        The object under its new name.

    Raises
    ------
    AttributeError
        ``name`` is not a deprecated name.
    """
    new = RENAMED.get(name)
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    import warnings

    warnings.warn(
        f"{module}.{name} is deprecated; use {module}.{new} (the same class)",
        DeprecationWarning,
        stacklevel=3,
    )
    return globals()[new]


def __getattr__(name: str) -> Any:
    return deprecated_name(__name__, name)
