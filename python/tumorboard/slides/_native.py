"""The native batch patch reader: which libjpeg it uses and which slide levels it can read.

:class:`~tumorboard.slides.PatchLoader` reads tiled TIFF pyramids (the slides that
:class:`~tumorboard.slides.TiffFileSlide` opens: generic pyramids and Aperio SVS) through the
compiled core when it can (``_core.slides.TileReader``, csrc/slides/): one call per batch reads
the tiles with ``pread``, decodes JPEG with libjpeg-turbo, assembles each region, resizes and
normalises it into the batch buffer, all on C++ threads with the GIL released once per batch.

The core is compiled against the libjpeg API header and opens the library at run time. The
library is, in this order of preference:

1. the file named by the ``TUMORBOARD_LIBJPEG`` environment variable;
2. the libjpeg-turbo that Pillow's wheel bundles (``pillow.libs/libjpeg-*.so.62*``), which
   ``pip install tumorboard[slides]`` brings on any machine;
3. the system's libjpeg (``libjpeg.so.62``, ``libjpeg.so.8``; the one that matches the header's
   ABI is taken).

Levels the native reader does not handle (LZW, Deflate, Zstandard or WebP tiles, RGBA JPEG,
bit-reversed fill order) keep the Python tile path, which gives the same pixels.
"""

from __future__ import annotations

import ctypes.util
import functools
import glob
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import _core

__all__ = ["NativeJpeg", "native_jpeg"]

#: TIFF Compression codes the native reader decodes, by the name the core takes.
_CODECS = {1: "none", 7: "jpeg"}


@dataclass(frozen=True)
class NativeJpeg:
    """Whether the native patch reader can decode JPEG tiles in this process.

    Attributes
    ----------
    available : bool
        True when a libjpeg was loaded.
    library : str or None
        The path of the loaded libjpeg.
    abi : int
        The libjpeg ABI (``JPEG_LIB_VERSION``) this build was compiled for; 0 when it was
        built without ``jpeglib.h``.
    reason : str or None
        Why it is not available (each candidate library and why it was refused).
    """

    available: bool
    library: str | None
    abi: int
    reason: str | None


def _candidates() -> list[str]:
    """Return the libjpeg paths to try, in order of preference."""
    out: list[str] = []
    env = os.environ.get("TUMORBOARD_LIBJPEG")
    if env:
        out.append(env)
    try:
        import PIL

        libs = Path(PIL.__file__).resolve().parent.parent / "pillow.libs"
        out.extend(sorted(glob.glob(str(libs / "libjpeg*.so*"))))
    except ImportError:
        pass
    found = ctypes.util.find_library("jpeg")
    for name in (found, "libjpeg.so.62", "libjpeg.so.8", "libjpeg.so"):
        if name and name not in out:
            out.append(name)
    return out


_LOCK = threading.Lock()


@functools.cache
def native_jpeg() -> NativeJpeg:
    """Load a libjpeg for the native patch reader (once per process) and say which.

    Returns
    -------
    NativeJpeg
        What was loaded, or why nothing could be.
    """
    abi = int(_core.slides.jpeg_abi_version())
    with _LOCK:
        loaded = _core.slides.jpeg_loaded_path()
        if loaded:
            return NativeJpeg(True, loaded, abi, None)
        refusals = []
        for path in _candidates():
            why = _core.slides.jpeg_load(path)
            if not why:
                return NativeJpeg(True, _core.slides.jpeg_loaded_path(), abi, None)
            refusals.append(f"{path}: {why}")
            if abi == 0:  # built without the header: every candidate fails the same way
                break
    reason = "; ".join(refusals) if refusals else "no libjpeg found (install Pillow)"
    return NativeJpeg(False, None, abi, reason)


def jpeg_tiles_unsupported(page: Any) -> str | None:
    """Say why a page's JPEG tiles are not 3-component RGB or YCbCr streams, or return None.

    The rule both JPEG decoders of patches share (this module's and ``_gpu_decode``'s).
    """
    if int(getattr(page, "fillorder", 1)) != 1:
        return "bit-reversed fill order"
    if int(page.samplesperpixel) != 3 or page.extrasamples:
        return "JPEG tiles with an alpha channel"
    if int(page.photometric) not in (2, 6):
        return f"JPEG tiles of photometric {page.photometric.name}"
    return None


def jpeg_rgb_components(page: Any, is_jfif: bool) -> bool:
    """Whether a page's JPEG tiles hold RGB components rather than YCbCr.

    tifffile's ``jpeg_decode_colorspace``: photometric RGB without a JFIF marker (Aperio SVS)
    is decoded as RGB components; YCbCr and JFIF streams as libjpeg detects them.
    """
    return int(page.photometric) == 2 and not is_jfif


def level_spec(page: Any, tf_page_is_jfif: bool) -> tuple[dict[str, Any] | None, str | None]:
    """Describe a tifffile page for ``_core.slides.TileReader``, or say why it cannot.

    Parameters
    ----------
    page : tifffile.TiffPage
        A level's key frame: tiled, 8-bit, chunky RGB(A) (checked by the reader already).
    tf_page_is_jfif : bool
        Whether its JPEG tiles carry a JFIF marker (tifffile's ``TiffPage.is_jfif``).

    Returns
    -------
    tuple
        (level dict, None), or (None, reason).
    """
    code = int(page.compression)
    codec = _CODECS.get(code)
    if codec is None:
        return None, f"{page.compression.name} tiles are read by the Python tile path"
    if int(getattr(page, "fillorder", 1)) != 1:
        return None, "bit-reversed fill order"
    if codec == "jpeg":
        if (why := jpeg_tiles_unsupported(page)) is not None:
            return None, why
        jpeg = native_jpeg()
        if not jpeg.available:
            return None, f"no usable libjpeg ({jpeg.reason})"
    elif int(page.photometric) != 2:
        return None, f"uncompressed tiles of photometric {page.photometric.name}"
    rgb = codec == "jpeg" and jpeg_rgb_components(page, tf_page_is_jfif)
    color = "rgb" if rgb else "detect"
    spec = {
        "width": int(page.imagewidth),
        "height": int(page.imagelength),
        "tile_width": int(page.tilewidth),
        "tile_height": int(page.tilelength),
        "codec": codec,
        "color": color,
        "samples": int(page.samplesperpixel),
        "offsets": np.asarray(page.dataoffsets, dtype=np.uint64),
        "counts": np.asarray(page.databytecounts, dtype=np.uint64),
        "tables": bytes(page.jpegtables) if codec == "jpeg" and page.jpegtables else None,
    }
    return spec, None
