"""The :class:`Slide` base class: a multi-resolution image read like OpenSlide.

A reader subclasses :class:`Slide` with its levels and properties and one ``_read_raw`` (a
region into a buffer, white outside the slide); the base gives the rest of the API: geometry,
``read_region``, whole levels on several threads, downsampled reads and thumbnails. The helpers
the readers share (whitening out-of-slide pixels, the threaded map, the missing-extra error) sit
beside it.

Conventions follow OpenSlide: ``read_region`` takes the top-left corner in level-0 pixels and a
size in pixels of the requested level. Regions are returned as ``(h, w, 3)`` uint8 RGB; pixels
outside the slide (transparent in OpenSlide) are white.
"""

from __future__ import annotations

import abc
import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from .. import _core
from ..errors import InvalidArgumentError, MissingDependencyError, SlideResolutionError
from . import _validate
from ._metadata import (
    _RESOLUTION_KEYS,
    _as_float,
    _objective_power,
    magnification_from_mpp,
    mpp_from_properties,
)
from ._names import slide_name
from ._reader_logs import _LOG_LOCAL, _collect_reader_logs, _quiet_reader, _ReaderProblems


def _missing_extra(what: str, exc: ImportError) -> MissingDependencyError:
    return MissingDependencyError.for_extra("reading slides", package=what, extra="slides",
                                            cause=exc)  # fmt: skip


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
                    f"mpp: expected a positive number, got {self._mpp_override!r}"
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
            raise InvalidArgumentError(
                f"level: expected an integer in [0, {self.level_count - 1}], got {level}"
            )

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
            raise InvalidArgumentError(f"size: expected a positive width and height, got {size}")
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
