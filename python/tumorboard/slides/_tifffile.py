"""The direct tile reader (:class:`TiffFileSlide`) and the check that ``reader="auto"`` uses it.

:class:`TiffFileSlide` reads tiled pyramidal TIFFs tile by tile with tifffile and imagecodecs
(and hands its levels to the compiled batch reader); :func:`direct_tiff_unsupported` says why a
file is not for it (``auto`` then opens it with OpenSlide).
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np

from .. import _core
from ..errors import SlideError
from ._base import Slide, _missing_extra, _pad_white, _parallel_map
from ._reader_logs import _quiet_reader, _quiet_tifffile


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
