"""Patch grid: level-0 coordinates of the patches to embed (C++, csrc/tiling/grid.cpp).

Geometry is TRIDENT's ``WSIPatcher`` (mahmoodlab/TRIDENT ``trident/wsi_objects/WSIPatcher.py``
@a91fa84; magnification binning and read levels in ``trident/wsi_objects/WSI.py``@a91fa84):
with level-0 magnification M (binned from the mpp) and target magnification m, the downsample is
M / m, the level-0 patch side is ``round(patch_size * M / m)``, the overlap likewise, and the
step is their difference. Columns ``ceil(width / step)``, rows ``ceil(height / step)``, top-left
corners in row-major order (y outer). A patch is kept when its tissue fraction (exact area of the
square covered by the tissue mask, from an integral image) is >= ``min_tissue``, or overlaps
tissue at all for ``min_tissue = 0`` (TRIDENT's default). TRIDENT tests intersection with
simplified tissue polygons, which also keeps squares that only touch tissue along an edge; the
mask test needs positive overlap.

A target magnification above the slide's own (m > M) is refused: TRIDENT would read level 0 and
upsample the patches, inventing detail the scan does not have.

Read level (TRIDENT): a level whose downsample is within 0.1 of M / m, else the deepest level with
downsample <= M / m (level 0 when upsampling); the read size is ``round(level-0 side / level
downsample)`` pixels, resized to the model input by the preprocessing. (TRIDENT divides by
``int(level downsample)``; dividing by the exact downsample gives the same size for integral
downsamples and the right one for OpenSlide's non-integral ones such as 3.9998.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _core
from ..errors import InvalidArgumentError, InvalidTypeError
from . import _validate
from ._segment import TissueMask

if TYPE_CHECKING:
    from ._readers import Slide


@dataclass(frozen=True, eq=False)
class PatchGrid:
    """The kept patches of a slide.

    Attributes
    ----------
    coords : numpy.ndarray
        (N, 2) int64 level-0 top-left (x, y), row-major.
    tissue_fraction : numpy.ndarray
        (N,) float32 fraction of each patch covered by tissue (1 without a mask).
    patch_size : int
        Patch side at the target magnification.
    overlap : int
        Overlap at the target magnification.
    target_magnification, level0_magnification : float
        As in TRIDENT's coords attributes.
    patch_size_level0 : int
        Patch side in level-0 pixels (``round(patch_size * M / m)``).
    step_level0 : int
        Level-0 stride.
    read_level, read_size : int
        The level to read and the side read there.
    level0_size : tuple of int
        Level-0 (width, height).
    n_cols, n_rows : int
        The full grid before tissue filtering.
    min_tissue : float
        The tissue threshold used.
    name : str, default ""
        The slide name.
    """

    coords: np.ndarray
    tissue_fraction: np.ndarray
    patch_size: int
    overlap: int
    target_magnification: float
    level0_magnification: float
    patch_size_level0: int
    step_level0: int
    read_level: int
    read_size: int
    level0_size: tuple[int, int]
    n_cols: int
    n_rows: int
    min_tissue: float
    name: str = ""

    def __len__(self) -> int:
        return int(self.coords.shape[0])

    def to_polars(self) -> Any:
        """Return one row per patch: ``x``, ``y`` (level-0 top-left) and ``tissue_fraction``."""
        import polars as pl

        return pl.DataFrame({"x": self.coords[:, 0], "y": self.coords[:, 1],
                             "tissue_fraction": self.tissue_fraction})  # fmt: skip


def read_plan(
    level_downsamples: tuple[float, ...] | list[float], downsample: float, patch_size_level0: int
) -> tuple[int, int]:
    """Choose the level to read and the side to read there, by TRIDENT's rule.

    The rule is in the module docstring.

    Parameters
    ----------
    level_downsamples : tuple or list of float
        The slide's level downsamples, level 0 first.
    downsample : float
        The wanted downsample (level-0 magnification / target magnification).
    patch_size_level0 : int
        The patch side in level-0 pixels.

    Returns
    -------
    tuple of int
        ``(level, read_size)``.
    """
    if not level_downsamples:
        raise InvalidArgumentError("level_downsamples is empty")
    ds_list = [float(d) for d in level_downsamples]
    level = None
    for i, d in enumerate(ds_list):
        if abs(d - downsample) <= 0.1:
            level = i
            break
    if level is None:
        below = [i for i, d in enumerate(ds_list) if d <= downsample]
        if below:
            level = max(below, key=lambda i: ds_list[i])
        else:  # upsampling: the first (finest) level at or above the downsample
            level = min(range(len(ds_list)), key=lambda i: ds_list[i])
    read_size = max(1, round(patch_size_level0 / ds_list[level]))
    return level, int(read_size)


def _positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise InvalidArgumentError(f"{name}: expected a positive int, got {value!r}")
    return int(value)


def patch_grid(
    slide: Slide,
    tissue: TissueMask | None = None,
    *,
    magnification: float = 20,
    patch_size: int = 256,
    overlap: int = 0,
    min_tissue: float = 0.0,
    threads: int | None = None,
) -> PatchGrid:
    """Build the patch grid of ``slide`` at ``magnification`` with ``patch_size`` px patches.

    A patch is kept where ``tissue`` covers at least ``min_tissue`` of it (any overlap for 0).
    Without ``tissue`` every grid position is kept.

    Parameters
    ----------
    slide : Slide
        The open slide.
    tissue : TissueMask or None, default None
        A tissue mask of this slide.
    magnification : float, default 20
        Target magnification, at most the slide's own (``slide.magnification``).
    patch_size : int, default 256
        Patch side in pixels at the target magnification.
    overlap : int, default 0
        Overlap in pixels at the target magnification.
    min_tissue : float, default 0.0
        Tissue fraction a patch needs, in [0, 1].
    threads : int or None, default None
        C++ threads.

    Returns
    -------
    PatchGrid
        The kept patches and the grid geometry.
    """
    patch_size = _positive_int(patch_size, "patch_size")
    if isinstance(overlap, bool) or not isinstance(overlap, (int, np.integer)) or overlap < 0:
        raise InvalidArgumentError(f"overlap: expected a non-negative int, got {overlap!r}")
    if overlap >= patch_size:
        raise InvalidArgumentError(
            f"overlap: expected a value smaller than patch_size ({patch_size}), got {overlap}"
        )
    if not 0.0 <= float(min_tissue) <= 1.0:
        raise InvalidArgumentError(f"min_tissue: expected a number in [0, 1], got {min_tissue}")
    magnification = _validate.positive(magnification, "magnification")
    n_threads = _validate.check_threads(threads)
    level0_mag = slide.magnification
    if not level0_mag:
        why = (
            "no mpp in the file"
            if slide.mpp is None
            else f"its {slide.mpp} um/px is coarser than 5x, the lowest magnification TRIDENT bins"
        )
        raise InvalidArgumentError(
            f"{slide.path}: unknown level-0 magnification ({why}); open it with mpp="
        )
    if magnification > level0_mag:
        res = f", {slide.mpp} um/px" if slide.mpp is not None else ""
        raise InvalidArgumentError(
            f"{slide.path}: magnification {magnification:g}x is above the slide's native "
            f"{level0_mag}x (level 0{res}); patches would be upsampled. Use magnification <= "
            f"{level0_mag}"
        )
    ds = float(level0_mag) / float(magnification)
    size0 = max(1, round(patch_size * ds))
    step0 = size0 - round(overlap * ds)
    if step0 <= 0:
        raise InvalidArgumentError(f"overlap {overlap} leaves no step at downsample {ds}")
    w0, h0 = slide.dimensions
    mask = None
    if tissue is not None:
        if not isinstance(tissue, TissueMask):
            raise InvalidTypeError(f"tissue: expected a TissueMask, got {type(tissue).__name__}")
        if tuple(tissue.level0_size) != (w0, h0):
            raise InvalidArgumentError(
                f"tissue mask is for a {tissue.level0_size} slide, this one is {(w0, h0)}"
            )
        mask = np.ascontiguousarray(tissue.mask).view(np.uint8)
    coords, fraction, n_cols, n_rows = _core.tiling.patch_grid(
        mask, int(w0), int(h0), int(size0), int(step0), float(min_tissue), n_threads
    )
    level, read_size = read_plan(slide.level_downsamples, ds, size0)
    return PatchGrid(
        coords=coords,
        tissue_fraction=fraction,
        patch_size=patch_size,
        overlap=int(overlap),
        target_magnification=float(magnification),
        level0_magnification=float(level0_mag),
        patch_size_level0=int(size0),
        step_level0=int(step0),
        read_level=level,
        read_size=read_size,
        level0_size=(int(w0), int(h0)),
        n_cols=int(n_cols),
        n_rows=int(n_rows),
        min_tissue=float(min_tissue),
        name=slide.name,
    )
