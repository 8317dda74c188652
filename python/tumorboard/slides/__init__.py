"""Whole-slide images: readers, tissue segmentation, patch grid, preprocessing, coords files.

The patch preprocessing is fused, the patch loader threaded, and the coords files are in
TRIDENT's layout.

Typical use::

    from tumorboard import slides

    with slides.open("case.svs") as slide:                  # reader="auto"
        tissue = slides.segment_tissue(slide)               # 1.25x thumbnail; fragments >= 0.1 mm2
        if tissue.empty:
            print(tissue.empty_reason)                      # "no tissue: largest region ..."
        grid = slides.patch_grid(slide, tissue, magnification=20, patch_size=256)
        slides.write_coords(slides.coords_path("job", slide.name), grid)
        for batch in slides.PatchLoader(slide, grid, batch_size=64, size=224):
            ...  # batch.images: (64, 3, 224, 224) float32, batch.coords: level-0 (x, y)

The loader reads JPEG-tiled TIFF pyramids through the compiled core, a whole batch per GIL-free
call (:func:`native_jpeg` says which libjpeg it opened); ``PatchLoader(..., decode="gpu")``
decodes them with nvImageCodec on a CUDA device instead (:class:`GpuTileDecoder`, ``pip install
"tumorboard[gpu]"``), yielding torch tensors on the device.

Readers: ``open(path, reader="auto")`` reads tiled generic TIFF pyramids and Aperio SVS tile by
tile with tifffile and imagecodecs (:class:`TiffFileSlide`: the same pixels as OpenSlide, several
times faster for patch loading), other slides with OpenSlide (SVS with JPEG 2000, NDPI, MRXS,
SCN, ...), then tiffslide, and PNG/JPEG as a plain image; ``reader="openslide"`` (or
``"tiffslide"``, ``"tifffile"``, ``"image"``) forces one.

Segmentation areas are in square microns (:class:`SegmentationOptions`); the ``default`` preset
finds any tissue fragment of 0.1 mm2 or more at any scan resolution, and CLAM's presets (``clam``,
``tcga``, ``bwh_biopsy``, ``otsu``) are kept under their names.

The compiled core does the per-pixel work (csrc/tiling/); OpenSlide, tiffslide and Pillow come
with ``pip install tumorboard[slides]``, h5py with ``[embed]``.
"""

from __future__ import annotations

from typing import Any

from .._constants import IMAGENET_MEAN, IMAGENET_STD
from ._gpu_decode import GpuTileDecoder, gpu_decode_unsupported, resolve_decode_device
from ._grid import PatchGrid, patch_grid, read_plan
from ._h5 import (
    CoordsFile,
    CoordsFileError,
    coords_complete,
    coords_path,
    patch_dir,
    read_complete_coords,
    read_coords,
    write_coords,
)
from ._loader import PatchBatch, PatchLoader
from ._names import (
    IMAGE_EXTENSIONS,
    SLIDE_EXTENSIONS,
    CollectedSlides,
    PlannedSlide,
    collect_slides,
    plan_slide_names,
    slide_name,
)
from ._native import NativeJpeg, native_jpeg
from ._preprocess import preprocess_patches, resize
from ._readers import (
    ImageSlide,
    OpenSlideSlide,
    Slide,
    SlideError,
    SlideResolutionError,
    TiffFileSlide,
    TiffSlideSlide,
    direct_tiff_unsupported,
    magnification_from_mpp,
    mpp_from_properties,
    open,
)
from ._segment import (
    CLAM_LEVEL0_MPP,
    DEFAULT_PRESET,
    DEFAULT_SEGMENTATION_MPP,
    PRESETS,
    SegmentationOptions,
    TissueMask,
    TissuePolygon,
    segment_image,
    segment_tissue,
)
from ._segment import (
    deprecated_name as _deprecated_name,
)
from ._tiling import TiledSlide, TilingOptions
from ._validate import READERS

__all__ = [
    "CLAM_LEVEL0_MPP",
    "DEFAULT_PRESET",
    "DEFAULT_SEGMENTATION_MPP",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "IMAGE_EXTENSIONS",
    "PRESETS",
    "READERS",
    "SLIDE_EXTENSIONS",
    "CollectedSlides",
    "CoordsFile",
    "CoordsFileError",
    "GpuTileDecoder",
    "ImageSlide",
    "NativeJpeg",
    "OpenSlideSlide",
    "PatchBatch",
    "PatchGrid",
    "PatchLoader",
    "PlannedSlide",
    "SegmentationOptions",
    "Slide",
    "SlideError",
    "SlideResolutionError",
    "TiffFileSlide",
    "TiffSlideSlide",
    "TiledSlide",
    "TilingOptions",
    "TissueMask",
    "TissuePolygon",
    "collect_slides",
    "coords_complete",
    "coords_path",
    "direct_tiff_unsupported",
    "gpu_decode_unsupported",
    "magnification_from_mpp",
    "mpp_from_properties",
    "native_jpeg",
    "open",
    "patch_dir",
    "patch_grid",
    "plan_slide_names",
    "preprocess_patches",
    "read_complete_coords",
    "read_coords",
    "read_plan",
    "resolve_decode_device",
    "resize",
    "segment_image",
    "segment_tissue",
    "slide_name",
    "write_coords",
]


def __getattr__(name: str) -> Any:
    # ``SegmentationParams``, renamed ``SegmentationOptions``, with a DeprecationWarning
    return _deprecated_name(__name__, name)
