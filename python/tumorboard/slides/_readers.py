"""Whole-slide image readers: OpenSlide, tiffslide and plain images behind one ``Slide`` API.

Conventions follow OpenSlide: ``read_region`` takes the top-left corner in level-0 pixels and a
size in pixels of the requested level. Regions are returned as ``(h, w, 3)`` uint8 RGB; pixels
outside the slide (transparent in OpenSlide) are white.

Microns per pixel are read from the property keys TRIDENT uses (``openslide.mpp-x``,
``openslide.mirax.MPP``, ``aperio.MPP``, ``hamamatsu.XResolution``, ``openslide.comment``, then
``tiff.XResolution`` with its unit), and the objective magnification is binned from the mpp as
TRIDENT does (mahmoodlab/TRIDENT ``trident/wsi_objects/WSI.py``, ``_fetch_magnification``,
@a91fa84): mpp < 0.16 -> 80x, < 0.2 -> 60x, < 0.3 -> 40x, < 0.6 -> 20x, < 1.2 -> 10x, < 2.4 -> 5x.

Readers, by name (``open(path, reader=...)``): ``openslide`` (:class:`OpenSlideSlide`),
``tiffslide`` (:class:`TiffSlideSlide`), ``tifffile`` (:class:`TiffFileSlide`, the direct tile
reader) and ``image`` (:class:`ImageSlide`). ``auto`` picks the direct tile reader for the files
it reads exactly as OpenSlide does (tiled 8-bit RGB generic TIFF pyramids and Aperio SVS with
uncompressed, JPEG, LZW, Deflate, Zstandard or WebP tiles), OpenSlide for every other slide
(tiffslide when OpenSlide is missing or refuses the file) and :class:`ImageSlide` for PNG/JPEG.

OpenSlide, tiffslide and Pillow come with the ``slides`` extra and are imported lazily.
"""

from __future__ import annotations

import abc
import contextlib
import ctypes
import functools
import logging
import math
import os
import re
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .. import _core
from ..errors import InvalidArgumentError, MissingDependencyError
from ..errors import SlideError as SlideError  # re-exported
from ..errors import SlideResolutionError as SlideResolutionError  # re-exported
from . import _validate
from ._names import IMAGE_EXTENSIONS, slide_name

Reader = Literal["auto", "openslide", "tiffslide", "tifffile", "image"]

_MAG_BINS = ((0.16, 80), (0.2, 60), (0.3, 40), (0.6, 20), (1.2, 10), (2.4, 5))


class _ReaderProblems:
    """How many log records a slide's third-party reader emitted, and the first of them."""

    def __init__(self) -> None:
        self.count = 0
        self.first: str | None = None
        self.reported = False

    def add(self, message: str) -> None:
        """Count one record (the first is kept for the report)."""
        self.count += 1
        if self.first is None:
            self.first = message.splitlines()[0][:300] if message else ""


#: Loggers of the third-party readers. On a damaged file tifffile logs one line per bad tag or
#: page (hundreds for one file), and tiffslide's fsspec/asyncio stack logs tracebacks; while a
#: slide is being opened or read their records are counted instead and reported once, as one
#: warning naming the file (a file that cannot be read is reported by its SlideError).
_READER_LOGGERS = ("tifffile", "tiffslide", "asyncio", "fsspec", "zarr")
_LOG_LOCAL = threading.local()
#: The sinks of the reads in progress (id -> [sink, number of threads using it]).
_ACTIVE_SINKS: dict[int, list[Any]] = {}
_ACTIVE_LOCK = threading.Lock()


class _ReaderLogFilter(logging.Filter):
    """Route reader log records of threads that read a slide to that slide's problem count."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(_TIFFFILE_QUIET.local, "depth", 0):
            return False  # auto's probe of the file: not the reader's business
        sink = getattr(_LOG_LOCAL, "sink", None)
        if sink is None and record.name.split(".")[0] in ("asyncio", "fsspec"):
            # fsspec runs its event loop on a thread of its own: charge the slide being read
            with _ACTIVE_LOCK:
                sink = next((entry[0] for entry in _ACTIVE_SINKS.values()), None)
        if sink is None:
            return True
        sink.add(record.getMessage())
        return False


_READER_FILTER = _ReaderLogFilter()
_FILTERED_LOGGERS = [0]  # how many loggers existed when the filter was last attached


def _attach_reader_filter() -> None:
    """Attach the filter to the readers' loggers and to every child logger they created.

    A logger's filters do not apply to records of its children (``zarr.core.sync`` propagates
    past ``zarr``'s filter), so each existing child gets the filter too; the walk runs only
    when loggers were added since the last one (``addFilter`` ignores a filter it has).
    """
    registry = logging.root.manager.loggerDict
    if len(registry) == _FILTERED_LOGGERS[0]:
        return
    for name in _READER_LOGGERS:
        logging.getLogger(name).addFilter(_READER_FILTER)
    for name, logger in list(registry.items()):
        if isinstance(logger, logging.Logger) and name.split(".")[0] in _READER_LOGGERS:
            logger.addFilter(_READER_FILTER)
    _FILTERED_LOGGERS[0] = len(registry)


_attach_reader_filter()


@contextlib.contextmanager
def _collect_reader_logs(sink: _ReaderProblems) -> Iterator[None]:
    """Count the reader log records of this thread (and of fsspec's loop) into ``sink``."""
    _attach_reader_filter()
    previous = getattr(_LOG_LOCAL, "sink", None)
    _LOG_LOCAL.sink = sink
    key = id(sink)
    with _ACTIVE_LOCK:
        _ACTIVE_SINKS.setdefault(key, [sink, 0])[1] += 1
    try:
        yield
    finally:
        _LOG_LOCAL.sink = previous
        with _ACTIVE_LOCK:
            entry = _ACTIVE_SINKS[key]
            entry[1] -= 1
            if entry[1] == 0:
                del _ACTIVE_SINKS[key]


def _report_problems(path: Path, reader: str, sink: _ReaderProblems) -> None:
    """Warn once per slide that its reader complained about the file while reading it."""
    if sink.count and not sink.reported:
        sink.reported = True
        warnings.warn(
            f"{path}: the {reader} reader reported {sink.count} problem(s) with this file "
            f"(first: {sink.first}); parts of it may be damaged",
            RuntimeWarning,
            stacklevel=3,
        )


def _quiet_reader(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run a read method with the reader's log records counted and reported once."""

    @functools.wraps(method)
    def wrapper(self: Slide, *args: Any, **kwargs: Any) -> Any:
        if getattr(_LOG_LOCAL, "sink", None) is not None:  # nested in another read
            return method(self, *args, **kwargs)
        with _collect_reader_logs(self._problems):
            out = method(self, *args, **kwargs)
        _report_problems(self.path, self.reader, self._problems)
        return out

    return wrapper


def _missing_extra(what: str, exc: ImportError) -> MissingDependencyError:
    return MissingDependencyError.for_extra("reading slides", package=what, extra="slides",
                                            cause=exc)  # fmt: skip


def magnification_from_mpp(mpp: float) -> int:
    """Return the objective magnification of a level-0 resolution, binned as TRIDENT does.

    Parameters
    ----------
    mpp : float
        Level-0 microns per pixel.

    Returns
    -------
    int
        80, 60, 40, 20, 10 or 5.

    Raises
    ------
    InvalidArgumentError
        For mpp >= 2.4 (coarser than 5x) or a non-positive mpp (it is a ``ValueError``).
    """
    if not (mpp > 0 and math.isfinite(mpp)):
        raise InvalidArgumentError(f"mpp must be a positive number, got {mpp!r}")
    for upper, mag in _MAG_BINS:
        if mpp < upper:
            return mag
    raise InvalidArgumentError(
        f"mpp {mpp} is coarser than 5x (2.4 um/px); cannot assign a magnification"
    )


def _as_float(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) and x > 0 else None


def mpp_from_properties(props: Mapping[str, Any]) -> float | None:
    """Return the level-0 microns per pixel from slide properties, or None.

    Parameters
    ----------
    props : Mapping
        Slide properties, with OpenSlide or tiffslide key names.

    Returns
    -------
    float or None
        The mpp rounded to 4 decimals as TRIDENT does; None when no key gives a value.
    """

    def rounded(x: float | None) -> float | None:
        return None if x is None else round(x, 4)

    for key in ("openslide.mpp-x", "tiffslide.mpp-x", "openslide.mirax.MPP", "aperio.MPP"):
        if (x := _as_float(props.get(key))) is not None:
            return rounded(x)
    # Hamamatsu stores its TIFF resolution in pixels per centimetre.
    if (x := _as_float(props.get("hamamatsu.XResolution"))) is not None:
        return rounded(10000.0 / x)
    comment = props.get("openslide.comment")
    if isinstance(comment, str):
        m = re.search(r"MPP\s*=\s*([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)", comment)
        if m and (x := _as_float(m.group(1))) is not None:
            return rounded(x)
    res = _as_float(props.get("tiff.XResolution"))
    unit = str(props.get("tiff.ResolutionUnit", "")).lower()
    if res is not None:
        if unit == "centimeter":
            return rounded(10000.0 / res)
        if unit == "inch":
            return rounded(25400.0 / res)
    return None


#: Property keys a resolution is read from (named in the message about an unusable one).
_RESOLUTION_KEYS = ("openslide.mpp-x", "tiffslide.mpp-x", "openslide.mirax.MPP", "aperio.MPP",
                    "hamamatsu.XResolution", "tiff.XResolution", "tiff.ResolutionUnit")  # fmt: skip


def _objective_power(props: Mapping[str, Any]) -> float | None:
    for key in ("openslide.objective-power", "tiffslide.objective-power", "aperio.AppMag"):
        if (x := _as_float(props.get(key))) is not None:
            return x
    return None


class Slide(abc.ABC):
    """A multi-resolution image read like OpenSlide; safe to read from several threads at once.

    Attributes
    ----------
    path : pathlib.Path
        The file.
    name : str
        The output name of the slide (:func:`~tumorboard.slides.slide_name`: the file name
        without its extension, ``.ome.tiff`` counted as one; TRIDENT's slide name).
    reader : str
        The reader's name: "openslide", "tiffslide", "tifffile" or "image".
    level_dimensions : tuple of (int, int)
        (width, height) of each level, level 0 first.
    level_downsamples : tuple of float
        Level-0 pixels per level pixel.
    mpp : float or None
        Level-0 microns per pixel (user-given, else from the properties), or None.
    magnification : int or None
        Level-0 objective magnification (binned from mpp, else the objective-power property), or
        None.
    properties : dict
        The reader's properties.
    """

    reader: str = ""
    #: Pixel layout of ``_read_raw``: "argb32" (uint32 per pixel) or "rgb".
    raw_format: str = "rgb"

    def __init__(self, path: str | os.PathLike[str], *, mpp: float | None = None) -> None:
        self.path = Path(path)
        self.name = slide_name(self.path)
        self.level_dimensions: tuple[tuple[int, int], ...] = ()
        self.level_downsamples: tuple[float, ...] = ()
        self.properties: dict[str, Any] = {}
        self._mpp_override = mpp
        self._problems = _ReaderProblems()

    def _init_resolution(self) -> None:
        if self._mpp_override is not None:
            mpp = _as_float(self._mpp_override)
            if mpp is None:
                raise InvalidArgumentError(
                    f"mpp must be a positive number, got {self._mpp_override!r}"
                )
            self.mpp: float | None = mpp
        else:
            self.mpp = mpp_from_properties(self.properties)
            if self.mpp is not None and not (math.isfinite(self.mpp) and self.mpp > 0):
                tags = {k: self.properties[k] for k in _RESOLUTION_KEYS if k in self.properties}
                raise SlideResolutionError(
                    self.path,
                    f"its resolution metadata {tags} gives {self.mpp} um/px at level 0, which "
                    "is no usable resolution (TRIDENT rounds mpp to 4 decimals); pass mpp= "
                    "(--mpp) to give the resolution",
                )
        self.magnification: int | None = None
        if self.mpp is not None:
            try:
                self.magnification = magnification_from_mpp(self.mpp)
            except ValueError:
                self.magnification = None
        if self.magnification is None and (op := _objective_power(self.properties)) is not None:
            self.magnification = int(round(op))

    # -- geometry ---------------------------------------------------------------------------

    @property
    def level_count(self) -> int:
        """Number of levels."""
        return len(self.level_dimensions)

    @property
    def dimensions(self) -> tuple[int, int]:
        """Level-0 (width, height)."""
        return self.level_dimensions[0]

    def best_level_for_downsample(self, downsample: float) -> int:
        """Return the deepest level whose downsample is <= ``downsample`` (level 0 if none)."""
        best = 0
        for i, ds in enumerate(self.level_downsamples):
            if ds <= downsample + 1e-9:
                best = i
        return best

    def _check_level(self, level: int) -> None:
        if not 0 <= level < self.level_count:
            raise InvalidArgumentError(f"level must be in [0, {self.level_count - 1}], got {level}")

    # -- reading ----------------------------------------------------------------------------

    @_quiet_reader
    def read_region(
        self, location: tuple[int, int], level: int, size: tuple[int, int]
    ) -> np.ndarray:
        """Read a region of a level as RGB; white outside the slide.

        Parameters
        ----------
        location : tuple of int
            (x, y) of the top-left corner in level-0 pixels.
        level : int
            The level to read.
        size : tuple of int
            (w, h) in pixels of ``level``.

        Returns
        -------
        numpy.ndarray
            (h, w, 3) uint8 RGB.
        """
        self._check_level(level)
        w, h = (int(v) for v in size)
        if w <= 0 or h <= 0:
            raise InvalidArgumentError(f"size must be positive, got {size}")
        x, y = (int(v) for v in location)
        if self.raw_format == "argb32":
            buf = np.empty((h, w), np.uint32)
            self._read_raw(x, y, level, w, h, buf)
            return _core.tiling.argb32_to_rgb(buf, 1)
        out = np.empty((h, w, 3), np.uint8)
        self._read_raw(x, y, level, w, h, out)
        return out

    @abc.abstractmethod
    def _read_raw(self, x: int, y: int, level: int, w: int, h: int, out: np.ndarray) -> None:
        """Read a region into ``out``, white outside the slide; thread-safe.

        ``out`` is (h, w) uint32 for argb32, (h, w, 3) uint8 for rgb.
        """

    @_quiet_reader
    def read_level(self, level: int, *, threads: int | None = None) -> np.ndarray:
        """Read a whole level as (h, w, 3) uint8, in horizontal strips on ``threads`` threads."""
        self._check_level(level)
        w, h = self.level_dimensions[level]
        ds = self.level_downsamples[level]
        out = np.empty((h, w, 3), np.uint8)
        strip = max(1, min(h, (4 << 20) // max(w, 1)))
        starts = list(range(0, h, strip))

        def read(y0: int) -> None:
            rows = min(strip, h - y0)
            out[y0 : y0 + rows] = self.read_region((0, _level0_coord(y0, ds)), level, (w, rows))

        _parallel_map(read, starts, threads)
        return out

    @_quiet_reader
    def read_downsampled(
        self, downsample: float, *, threads: int | None = None
    ) -> tuple[np.ndarray, tuple[float, float]]:
        """Read the whole slide at about ``downsample`` x.

        The deepest level at or above that resolution, resized (PIL-exact antialiased bilinear) to
        round(level-0 size / downsample).

        Parameters
        ----------
        downsample : float
            Level-0 pixels per output pixel.
        threads : int or None, default None
            Reader threads (default: all cores).

        Returns
        -------
        tuple
            ``(image, (sx, sy))`` with sx, sy the exact level-0 pixels per image pixel.
        """
        downsample = _validate.positive(downsample, "downsample")
        n_threads = _validate.check_threads(threads)
        w0, h0 = self.dimensions
        tw, th = max(1, round(w0 / downsample)), max(1, round(h0 / downsample))
        level = self.best_level_for_downsample(downsample)
        img = self.read_level(level, threads=threads)
        if img.shape[:2] != (th, tw):
            img = _core.tiling.resize(img, th, tw, "bilinear", n_threads)
        return img, (w0 / tw, h0 / th)

    def get_thumbnail(self, size: tuple[int, int]) -> np.ndarray:
        """Return an RGB thumbnail fitting in ``size`` = (w, h), aspect ratio kept."""
        w0, h0 = self.dimensions
        ds = max(w0 / size[0], h0 / size[1], 1.0)
        return self.read_downsampled(ds)[0]

    @abc.abstractmethod
    def close(self) -> None:
        """Release the file handle(s)."""

    def __enter__(self) -> Slide:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({str(self.path)!r}, levels={self.level_count}, "
            f"dimensions={self.dimensions}, mpp={self.mpp}, magnification={self.magnification})"
        )


def _parallel_map(fn: Any, items: list[int], threads: int | None) -> None:
    """Run fn on every item on up to ``threads`` threads (default: all cores)."""
    n = _validate.check_threads(threads) or os.cpu_count() or 1
    if n <= 1 or len(items) <= 1:
        for item in items:
            fn(item)
        return
    sink = getattr(_LOG_LOCAL, "sink", None)

    def run(item: int) -> None:  # the worker counts its reader log records as the caller does
        if sink is None:
            fn(item)
            return
        with _collect_reader_logs(sink):
            fn(item)

    with ThreadPoolExecutor(max_workers=min(n, len(items))) as pool:
        list(pool.map(run, items))


def _level0_coord(v: int, ds: float) -> int:
    """Return a level-0 coordinate that maps back to level coordinate ``v`` by ``int(c / ds)``.

    That is the mapping OpenSlide's and tiffslide's read_region use; for reading a level from
    row ``v``.
    """
    c = math.ceil(v * ds)
    while c > 0 and int(c / ds) > v:
        c -= 1
    while int(c / ds) < v:
        c += 1
    return c


def _pad_white(out: np.ndarray, rx0: int, ry0: int, level_w: int, level_h: int) -> tuple:
    """White the part of ``out`` outside the level; return the in-bounds slices.

    ``out`` has its origin at (rx0, ry0) in level space; the part outside [0, level_w) x
    [0, level_h) is set to white. Returns the in-bounds slices (of out, of the level).
    """
    h, w = out.shape[:2]
    ox0, oy0 = max(0, -rx0), max(0, -ry0)
    ox1, oy1 = max(ox0, min(w, level_w - rx0)), max(oy0, min(h, level_h - ry0))
    if ox0 > 0 or oy0 > 0 or ox1 < w or oy1 < h:
        out[...] = 255
    return (slice(oy0, oy1), slice(ox0, ox1)), (ry0 + oy0, rx0 + ox0)


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


def _page_unsupported(page: Any) -> str | None:
    """Say why the direct tile reader cannot read a TIFF page, or return None."""
    if (
        not page.is_tiled
        or page.dtype != np.uint8
        or page.samplesperpixel not in (3, 4)
        or page.planarconfig != 1
    ):
        return f"is not a tiled 8-bit RGB(A) image (shape {page.shape})"
    return None


_TIFF_MAGIC = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")
#: File kinds (tifffile's ``TiffFile.flags``) that auto reads with the direct tile reader: generic
#: pyramids and Aperio SVS. Vendor formats with their own metadata or tile layout (NDPI, Philips,
#: Leica SCN, Ventana BIF, OME, ...) go to OpenSlide.
_AUTO_TIFF_KINDS = frozenset({"shaped", "uniform", "svs"})
#: Tile compressions auto reads directly (TIFF code: imagecodecs codec); their decoders give
#: OpenSlide's pixels. JPEG 2000 (Aperio 33003/33005) stays with OpenSlide.
_AUTO_CODECS = {1: None, 5: "LZW", 7: "JPEG8", 8: "ZLIB", 32946: "ZLIB", 50000: "ZSTD",
                50001: "WEBP"}  # fmt: skip


class _ThreadQuiet(logging.Filter):
    """Drop log records of the current thread while it is inside :func:`_quiet_tifffile`."""

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(self.local, "depth", 0)


_TIFFFILE_QUIET = _ThreadQuiet()
_TIFFFILE_QUIET_LOCK = threading.Lock()


@contextlib.contextmanager
def _quiet_tifffile() -> Iterator[None]:
    """Silence tifffile's warnings about a file in this thread (auto's probe of the file).

    A file that is not for the direct reader is OpenSlide's to report; the probe stays quiet.
    """
    logger = logging.getLogger("tifffile")
    with _TIFFFILE_QUIET_LOCK:
        if _TIFFFILE_QUIET not in logger.filters:
            logger.addFilter(_TIFFFILE_QUIET)
    local = _TIFFFILE_QUIET.local
    local.depth = getattr(local, "depth", 0) + 1
    try:
        yield
    finally:
        local.depth -= 1


def direct_tiff_unsupported(path: str | os.PathLike[str]) -> str | None:
    """Say why ``reader="auto"`` does not read a file with :class:`TiffFileSlide`.

    Parameters
    ----------
    path : str or os.PathLike
        The slide file.

    Returns
    -------
    str or None
        None when the direct tile reader applies: a TIFF that tifffile parses as a generic
        pyramid or an Aperio SVS whose levels are all tiled 8-bit RGB(A) (chunky) with
        uncompressed, JPEG, LZW, Deflate, Zstandard or WebP tiles that imagecodecs decodes.
        Otherwise the reason, e.g. "not a TIFF file" or "level 0 has APERIO_JP2000_YCBC tiles".
    """
    p = Path(path)
    try:
        with p.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if magic not in _TIFF_MAGIC:
        return "not a TIFF file"
    try:
        import imagecodecs
        import tifffile
    except ImportError:
        return "tifffile and imagecodecs are not installed"
    try:
        with _quiet_tifffile(), tifffile.TiffFile(str(p)) as tf:
            kinds = set(tf.flags) - _AUTO_TIFF_KINDS
            if kinds:
                return f"a {'/'.join(sorted(kinds))} TIFF (its own metadata: OpenSlide reads it)"
            pages = [lv.keyframe for lv in tf.series[0].levels]
            for i, pg in enumerate(pages):
                if (why := _page_unsupported(pg)) is not None:
                    return f"level {i} {why}"
                code = int(pg.compression)
                if code not in _AUTO_CODECS:
                    return f"level {i} has {pg.compression.name} tiles"
                codec = _AUTO_CODECS[code]
                if codec is not None and not getattr(getattr(imagecodecs, codec, None),
                                                     "available", False):  # fmt: skip
                    return f"level {i}: imagecodecs has no {codec} decoder"
                photometric = int(pg.photometric)
                if not (photometric == 2 or (photometric == 6 and code == 7)):
                    return f"level {i} has {pg.photometric.name} pixels"
            if not pages:
                return "no image levels"
    except Exception as exc:  # tifffile raises TiffFileError, ValueError, IndexError, ...
        return f"tifffile cannot parse it ({type(exc).__name__}: {exc})"
    return None


class TiffFileSlide(Slide):
    """A tiled pyramidal TIFF read tile by tile with tifffile.

    Each needed tile's bytes are read with ``os.pread`` and decoded by imagecodecs (libjpeg-turbo
    for JPEG), both without the GIL. The fast path for patch loading; for JPEG tiles the pixels
    equal OpenSlide's (same decoder). Levels are tifffile's ``series[0].levels`` (generic TIFF
    pyramids, SVS, OME-TIFF SubIFDs). ``open(path)`` picks it by itself where it applies (see
    :func:`open`).
    """

    reader = "tifffile"
    raw_format = "rgb"

    def __init__(self, path: str | os.PathLike[str], *, mpp: float | None = None) -> None:
        super().__init__(path, mpp=mpp)
        try:
            import tifffile
        except ImportError as exc:
            raise _missing_extra("tifffile", exc) from exc
        try:
            self._tf = tifffile.TiffFile(str(self.path))
            levels = list(self._tf.series[0].levels)
            pages = [lv.keyframe for lv in levels]
        except Exception as exc:  # TiffFileError, ValueError, IndexError, struct.error, ...
            raise SlideError(self.path, f"tifffile cannot open it ({exc})") from exc
        for i, pg in enumerate(pages):
            if (why := _page_unsupported(pg)) is not None:
                self._tf.close()
                raise SlideError(self.path, f"level {i} {why}")
        self._pages = pages
        self._fd = -1
        try:
            # tifffile builds each page's decoder lazily; build them here, before threads
            # share them (a damaged header fails here: ZeroDivisionError, ValueError, ...)
            self._decoders = [pg.decode for pg in pages]
            self.level_dimensions = tuple((int(p.imagewidth), int(p.imagelength)) for p in pages)
            w0, h0 = self.level_dimensions[0]
            self.level_downsamples = tuple(
                (w0 / w + h0 / h) / 2.0 for w, h in self.level_dimensions
            )  # OpenSlide's definition
            self.properties = self._tiff_properties(pages[0])
        except Exception as exc:  # noqa: BLE001 - any parser error of a damaged header
            self._tf.close()
            raise SlideError(self.path, f"tifffile cannot read its levels ({exc!r})") from exc
        self._fd = os.open(self.path, os.O_RDONLY)
        self._native: dict[int, Any] = {}
        self._native_lock = threading.Lock()
        self._init_resolution()

    def native_reader(self, level: int) -> tuple[Any, str | None]:
        """Return the compiled batch reader of ``level``, or why it has none.

        Parameters
        ----------
        level : int
            The pyramid level.

        Returns
        -------
        tuple
            (``_core.slides.TileReader``, None) when the level's tiles are uncompressed or JPEG
            (with a usable libjpeg), else (None, the reason). Built once per level.
        """
        self._check_level(level)
        with self._native_lock:
            if level not in self._native:
                from ._native import level_spec

                page = self._pages[level]
                spec, why = level_spec(page, bool(page.is_jfif))
                reader: Any = None
                if spec is not None:
                    try:
                        reader = _core.slides.TileReader(str(self.path), [spec])
                    except (ValueError, RuntimeError) as exc:
                        why = f"its tile table cannot be used ({exc})"
                self._native[level] = (reader, why)
            return self._native[level]

    @staticmethod
    def _tiff_properties(page: Any) -> dict[str, Any]:
        props: dict[str, Any] = {"tumorboard.reader": "tifffile"}
        tags = page.tags
        for name in ("XResolution", "YResolution"):
            if name in tags:
                num, den = tags[name].value
                if den:
                    props[f"tiff.{name}"] = num / den
        if "ResolutionUnit" in tags:
            unit = int(tags["ResolutionUnit"].value)
            props["tiff.ResolutionUnit"] = {1: "none", 2: "inch", 3: "centimeter"}.get(unit, "")
        desc = page.description or ""
        if desc:
            props["tiff.ImageDescription"] = desc
            m = re.search(r"\|\s*MPP\s*=\s*([0-9.]+)", desc)
            if desc.startswith("Aperio") and m:
                props["aperio.MPP"] = m.group(1)
            m = re.search(r"\|\s*AppMag\s*=\s*([0-9.]+)", desc)
            if desc.startswith("Aperio") and m:
                props["aperio.AppMag"] = m.group(1)
        return props

    def _tile_bytes(self, level: int, index: int) -> bytes:
        """Return the stored bytes of tile ``index`` of ``level`` (empty for a sparse tile)."""
        page = self._pages[level]
        offset, count = page.dataoffsets[index], page.databytecounts[index]
        data = os.pread(self._fd, count, offset) if count else b""
        if len(data) != count:
            raise SlideError(self.path, f"truncated: tile {index} of level {level} is cut short")
        return data

    def _tile(self, level: int, index: int) -> np.ndarray | None:
        page = self._pages[level]
        data = self._tile_bytes(level, index)
        if not data:
            return None  # sparse tile: background
        try:
            arr = self._decoders[level](data, index, jpegtables=page.jpegtables)[0]
        except Exception as exc:
            raise SlideError(
                self.path, f"tile {index} of level {level} is corrupt ({exc})"
            ) from exc
        return arr.reshape(arr.shape[-3:])

    def _read_raw(self, x: int, y: int, level: int, w: int, h: int, out: np.ndarray) -> None:
        ds = self.level_downsamples[level]
        self._read_level_rect(level, int(x / ds), int(y / ds), w, h, out)

    def _read_level_rect(
        self, level: int, rx0: int, ry0: int, w: int, h: int, out: np.ndarray
    ) -> None:
        """Read [rx0, rx0 + w) x [ry0, ry0 + h) of ``level`` (level pixels) into ``out``."""
        lw, lh = self.level_dimensions[level]
        _pad_white(out, rx0, ry0, lw, lh)
        page = self._pages[level]
        tw, th = page.tilewidth, page.tilelength
        ntx = -(-lw // tw)
        x0, y0 = max(rx0, 0), max(ry0, 0)
        x1, y1 = min(rx0 + w, lw), min(ry0 + h, lh)
        for ty in range(y0 // th, (y1 - 1) // th + 1 if y1 > y0 else 0):
            for tx in range(x0 // tw, (x1 - 1) // tw + 1 if x1 > x0 else 0):
                tile = self._tile(level, ty * ntx + tx)
                ax0, ay0 = max(x0, tx * tw), max(y0, ty * th)
                ax1, ay1 = min(x1, (tx + 1) * tw), min(y1, (ty + 1) * th)
                dst = out[ay0 - ry0 : ay1 - ry0, ax0 - rx0 : ax1 - rx0]
                if tile is None:
                    dst[...] = 255
                else:
                    dst[...] = tile[
                        ay0 - ty * th : ay1 - ty * th, ax0 - tx * tw : ax1 - tx * tw, :3
                    ]

    @_quiet_reader
    def read_level(self, level: int, *, threads: int | None = None) -> np.ndarray:
        self._check_level(level)
        w, h = self.level_dimensions[level]
        th = self._pages[level].tilelength
        out = np.empty((h, w, 3), np.uint8)
        rows = list(range(0, h, th))

        def read(y0: int) -> None:  # one row of tiles, straight into the output
            n = min(th, h - y0)
            self._read_level_rect(level, 0, y0, w, n, out[y0 : y0 + n])

        _parallel_map(read, rows, threads)
        return out

    def close(self) -> None:
        with self._native_lock:
            self._native.clear()  # the compiled readers close their descriptors
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._tf.close()


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
                f"image must be (h, w, 3|4) uint8, got shape {arr.shape} dtype {arr.dtype}"
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
