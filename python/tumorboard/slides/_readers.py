"""Whole-slide image readers: OpenSlide, tiffslide and plain images behind one ``Slide`` API.

Conventions follow OpenSlide: ``read_region`` takes the top-left corner in level-0 pixels and a
size in pixels of the requested level. Regions are returned as ``(h, w, 3)`` uint8 RGB; pixels
outside the slide (transparent in OpenSlide) are white.

Microns per pixel and the objective magnification are read from the slide's properties as
TRIDENT does (:mod:`._metadata`).

Readers, by name (``open(path, reader=...)``): ``openslide`` (:class:`OpenSlideSlide`),
``tiffslide`` (:class:`TiffSlideSlide`), ``tifffile`` (:class:`TiffFileSlide`, the direct tile
reader) and ``image`` (:class:`ImageSlide`). ``auto`` picks the direct tile reader for the files
it reads exactly as OpenSlide does (tiled 8-bit RGB generic TIFF pyramids and Aperio SVS with
uncompressed, JPEG, LZW, Deflate, Zstandard or WebP tiles), OpenSlide for every other slide
(tiffslide when OpenSlide is missing or refuses the file) and :class:`ImageSlide` for PNG/JPEG.

OpenSlide, tiffslide and Pillow come with the ``slides`` extra and are imported lazily.

This module holds the library-backed readers (OpenSlide, tiffslide, plain images) and
:func:`open`, the automatic choice; the :class:`Slide` base class is in :mod:`._base`, the
direct tile reader in :mod:`._tifffile`, the resolution metadata in :mod:`._metadata` and the
capture of the third-party readers' log records in :mod:`._reader_logs`. Their names stay
importable from here.
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..errors import InvalidArgumentError
from ..errors import SlideError as SlideError  # re-exported
from ..errors import SlideResolutionError as SlideResolutionError  # re-exported
from . import _validate
from ._base import Slide as Slide  # re-exported
from ._base import _missing_extra, _pad_white
from ._metadata import magnification_from_mpp as magnification_from_mpp  # re-exported
from ._metadata import mpp_from_properties as mpp_from_properties  # re-exported
from ._names import IMAGE_EXTENSIONS
from ._reader_logs import _collect_reader_logs, _quiet_reader, _ReaderProblems, _report_problems
from ._tifffile import TiffFileSlide, direct_tiff_unsupported

Reader = Literal["auto", "openslide", "tiffslide", "tifffile", "image"]


class OpenSlideSlide(Slide):
    """A slide read by OpenSlide (SVS, NDPI, MRXS, SCN, tiled TIFF, ...).

    OpenSlide's C library is thread-safe and its ctypes calls release the GIL.
    """

    reader = "openslide"
    raw_format = "argb32"

    def __init__(self, path: str | os.PathLike[str], *, mpp: float | None = None) -> None:
        super().__init__(path, mpp=mpp)
        try:
            import openslide
        except ImportError as exc:
            raise _missing_extra("openslide-python", exc) from exc
        try:
            self._osr = openslide.OpenSlide(str(self.path))
        except openslide.OpenSlideUnsupportedFormatError as exc:
            raise SlideError(self.path, f"format not supported by OpenSlide ({exc})") from exc
        except (openslide.OpenSlideError, OSError) as exc:
            raise SlideError(self.path, f"OpenSlide cannot open it ({exc})") from exc
        self.level_dimensions = tuple(tuple(int(v) for v in d) for d in self._osr.level_dimensions)
        self.level_downsamples = tuple(float(d) for d in self._osr.level_downsamples)
        self.properties = dict(self._osr.properties)
        self._init_resolution()
        from openslide import lowlevel

        # The raw read writes OpenSlide's premultiplied ARGB straight into our buffer.
        self._raw = getattr(lowlevel, "_read_region", None)
        self._errors = (openslide.OpenSlideError,)

    def _read_raw(self, x: int, y: int, level: int, w: int, h: int, out: np.ndarray) -> None:
        try:
            if self._raw is not None and out.flags.c_contiguous:
                self._raw(
                    self._osr._osr,
                    out.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)),
                    x,
                    y,
                    level,
                    w,
                    h,
                )
            else:  # public API: un-premultiplied RGBA image -> premultiply back
                rgba = np.asarray(self._osr.read_region((x, y), level, (w, h))).astype(np.uint32)
                a = rgba[..., 3]
                premul = (rgba[..., :3] * a[..., None] + 127) // 255
                out[...] = (
                    (a << 24) | (premul[..., 0] << 16) | (premul[..., 1] << 8) | premul[..., 2]
                )
        except self._errors as exc:
            raise SlideError(self.path, f"read failed at ({x}, {y}) level {level}: {exc}") from exc

    def close(self) -> None:
        self._osr.close()


class TiffSlideSlide(Slide):
    """A slide read by tiffslide (pure Python + tifffile). One TiffSlide handle per thread."""

    reader = "tiffslide"
    raw_format = "rgb"

    def __init__(self, path: str | os.PathLike[str], *, mpp: float | None = None) -> None:
        super().__init__(path, mpp=mpp)
        try:
            import tiffslide  # noqa: F401
        except ImportError as exc:
            raise _missing_extra("tiffslide", exc) from exc
        self._local = threading.local()
        self._handles: list[Any] = []
        self._lock = threading.Lock()
        ts = self._handle()
        try:
            self.level_dimensions = tuple(tuple(int(v) for v in d) for d in ts.level_dimensions)
            self.level_downsamples = tuple(float(d) for d in ts.level_downsamples)
            self.properties = dict(ts.properties)
        except Exception as exc:  # a corrupt file surfaces lazily, as any error of the parser
            self.close()
            raise SlideError(self.path, f"tiffslide cannot read its levels ({exc!r})") from exc
        if not self.level_dimensions:
            self.close()
            raise SlideError(self.path, "tiffslide found no image levels")
        self._init_resolution()

    def _handle(self) -> Any:
        ts = getattr(self._local, "ts", None)
        if ts is None:
            import tiffslide

            try:
                ts = tiffslide.TiffSlide(str(self.path))
            except Exception as exc:  # tifffile raises TiffFileError, ValueError, KeyError, ...
                raise SlideError(self.path, f"tiffslide cannot open it ({exc})") from exc
            self._local.ts = ts
            with self._lock:
                self._handles.append(ts)
        return ts

    def _read_raw(self, x: int, y: int, level: int, w: int, h: int, out: np.ndarray) -> None:
        ds = self.level_downsamples[level]
        lw, lh = self.level_dimensions[level]
        rx0, ry0 = int(x / ds), int(y / ds)  # tiffslide's own level-0 -> level mapping
        (sy, sx), (ly, lx) = _pad_white(out, rx0, ry0, lw, lh)
        rh, rw = sy.stop - sy.start, sx.stop - sx.start
        if rh <= 0 or rw <= 0:
            return
        try:
            arr = self._handle().read_region(
                (int(round(lx * ds)), int(round(ly * ds))),
                level,
                (rw, rh),
                as_array=True,
                padding=False,
            )
        except SlideError:
            raise
        except Exception as exc:
            raise SlideError(self.path, f"read failed at ({x}, {y}) level {level}: {exc}") from exc
        arr = np.asarray(arr)
        if arr.ndim == 2:
            arr = np.repeat(arr[..., None], 3, axis=2)
        out[sy, sx] = arr[:rh, :rw, :3]

    def close(self) -> None:
        with self._lock:
            for ts in self._handles:
                ts.close()
            self._handles.clear()
        self._local = threading.local()


class ImageSlide(Slide):
    """A plain image (PNG, JPEG, TIFF, ...) held in memory as one level.

    For tissue microarray cores and ROI crops. Its mpp must be given (TRIDENT's ImageWSI asks for
    it too).
    """

    reader = "image"
    raw_format = "rgb"

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        mpp: float | None = None,
        image: np.ndarray | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(path if path is not None else (name or "image"), mpp=mpp)
        if image is None:
            image = self._load(self.path)
        arr = np.asarray(image)
        if arr.ndim == 2:
            arr = np.repeat(arr[..., None], 3, axis=2)
        if arr.ndim != 3 or arr.shape[2] not in (3, 4) or arr.dtype != np.uint8:
            raise InvalidArgumentError(
                f"image: expected an (h, w, 3|4) uint8 array, got shape {arr.shape} dtype "
                f"{arr.dtype}"
            )
        self._image = np.ascontiguousarray(arr[..., :3])
        h, w = self._image.shape[:2]
        self.level_dimensions = ((w, h),)
        self.level_downsamples = (1.0,)
        self.properties = {"tumorboard.reader": "image"}
        if name is not None:
            self.name = name
        if mpp is None:
            raise InvalidArgumentError(
                f"{self.path}: a plain image has no resolution metadata; pass mpp= "
                "(microns per pixel, e.g. 0.5 for 20x)"
            )
        self._init_resolution()

    @staticmethod
    def _load(path: Path) -> np.ndarray:
        try:
            from PIL import Image
        except ImportError as exc:
            raise _missing_extra("Pillow", exc) from exc
        if not path.exists():
            raise SlideError(path, "no such file")
        try:
            with Image.open(path) as im:
                return np.asarray(im.convert("RGB"))
        except (OSError, ValueError, Image.DecompressionBombError) as exc:
            raise SlideError(path, f"cannot decode the image ({exc})") from exc

    def _read_raw(self, x: int, y: int, level: int, w: int, h: int, out: np.ndarray) -> None:
        lh, lw = self._image.shape[:2]
        (sy, sx), (ly, lx) = _pad_white(out, x, y, lw, lh)
        rh, rw = sy.stop - sy.start, sx.stop - sx.start
        if rh > 0 and rw > 0:
            out[sy, sx] = self._image[ly : ly + rh, lx : lx + rw]

    @_quiet_reader
    def read_level(self, level: int, *, threads: int | None = None) -> np.ndarray:
        self._check_level(level)
        _validate.check_threads(threads)
        return self._image.copy()

    def close(self) -> None:
        """Nothing to release: the image lives in memory."""


def open(
    path: str | os.PathLike[str], *, mpp: float | None = None, reader: Reader = "auto"
) -> Slide:
    """Open a slide or image.

    Parameters
    ----------
    path : str or os.PathLike
        The slide or image file.
    mpp : float or None, default None
        Level-0 microns per pixel (> 0); overrides the file's resolution.
    reader : {"auto", "openslide", "tiffslide", "tifffile", "image"}, default "auto"
        ``"auto"``: plain image extensions (PNG, JPEG, ...) open as an :class:`ImageSlide`
        (``mpp`` required); a tiled generic TIFF pyramid or Aperio SVS that the direct tile
        reader reads exactly (:func:`direct_tiff_unsupported` is None) as a
        :class:`TiffFileSlide`; everything else with OpenSlide, then tiffslide, then (TIFF only)
        as a plain image. ``"openslide"``, ``"tiffslide"``, ``"tifffile"`` and ``"image"`` force
        a reader. ``Slide.reader`` tells which one opened the file.

    Returns
    -------
    Slide
        The open slide. When the reader logged complaints about the file while opening or
        reading it (tifffile logs one per damaged tag), they are counted and reported once per
        slide as a ``RuntimeWarning`` naming the file, instead of one stderr line each.

    Raises
    ------
    InvalidArgumentError
        ``reader`` names no reader, or ``mpp`` is not a positive number (checked first).
    SlideError
        The file is missing, corrupt or in no supported format.
    SlideResolutionError
        The file's resolution tags give no usable mpp (0 after rounding, or infinite) and no
        ``mpp`` was passed; raised at once, without trying another reader.
    ImportError
        The needed reader is not installed (``pip install tumorboard[slides]``).
    """
    reader = _validate.reader(reader)
    if mpp is not None:
        mpp = _validate.positive(mpp, "mpp", "um/px")
    sink = _ReaderProblems()
    with _collect_reader_logs(sink):
        slide = _open(Path(path), mpp=mpp, reader=reader)
    slide._problems = sink
    _report_problems(slide.path, slide.reader, sink)
    return slide


def _open(p: Path, *, mpp: float | None, reader: str) -> Slide:
    """Open ``p`` with the reader :func:`open` chose (arguments validated)."""
    if not p.exists():
        raise SlideError(p, "no such file")
    if p.is_dir():
        raise SlideError(p, "is a directory, not a slide file")
    if reader == "openslide":
        return OpenSlideSlide(p, mpp=mpp)
    if reader == "tiffslide":
        return TiffSlideSlide(p, mpp=mpp)
    if reader == "tifffile":
        return TiffFileSlide(p, mpp=mpp)
    if reader == "image" or p.suffix.lower() in IMAGE_EXTENSIONS:
        return ImageSlide(p, mpp=mpp)
    errors: list[str] = []
    if direct_tiff_unsupported(p) is None:
        try:
            return TiffFileSlide(p, mpp=mpp)
        except SlideResolutionError:
            raise  # every reader reads the same tags: no other reader would do better
        except SlideError as exc:  # parsed a moment ago; a file changing under us: try the rest
            errors.append(f"tifffile: {str(exc).removeprefix(str(p) + ': ')}")
    missing: list[ImportError] = []
    for cls in (OpenSlideSlide, TiffSlideSlide):
        try:
            return cls(p, mpp=mpp)
        except ImportError as exc:
            missing.append(exc)
        except SlideResolutionError:
            raise
        except SlideError as exc:
            errors.append(f"{cls.reader}: {str(exc).removeprefix(str(p) + ': ')}")
        except Exception as exc:  # parsers of corrupt files raise anything; report, try the next
            errors.append(f"{cls.reader}: {type(exc).__name__}: {exc}")
    if p.suffix.lower() in (".tif", ".tiff") and mpp is not None:
        return ImageSlide(p, mpp=mpp)
    if missing and not errors:
        raise missing[0]
    raise SlideError(p, "unreadable slide; " + "; ".join(errors) if errors else "unreadable")
