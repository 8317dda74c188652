"""GPU batch decoding of JPEG-tiled TIFF patches with nvImageCodec (``decode="gpu"``).

:class:`GpuTileDecoder` reads a batch of patches of one pyramid level: it finds the tiles the
batch needs, reads their bytes with ``os.pread``, turns each into a complete JPEG interchange
stream (:func:`jpeg_stream`), decodes them all in one nvImageCodec call (nvJPEG on the GPU),
assembles the square regions on the device in one gather (white outside the level and for
sparse tiles), and resizes and normalises them there with torch. The reads and stream fix-ups
happen before the decoder's lock is taken, so loader threads overlap them with another batch's
decode; :func:`decoder_tuning` reads which nvImageCodec backends to use from the environment.
CPU decoding (the compiled reader of :class:`~tumorboard.slides.PatchLoader`) stays the
default; this path is for slides whose decoding would still starve the GPU.

The pixels: nvJPEG's inverse DCT and colour conversion may differ from libjpeg-turbo's by a unit
here and there, and the resize is torch's antialiased filter (the same PIL filters in float32
arithmetic, where PIL uses fixed point), rounded to uint8 like PIL's output: patches are within
one uint8 step of the CPU path, not bit-identical to it.

References
----------
.. [1] Adobe, "TIFF Revision 6.0", 1992, section 22 (JPEGTables, Compression=6), and
   "TIFF Technical Note #2", 1995 (Compression=7: each tile an abbreviated JPEG stream whose
   tables are the JPEGTables tag's abbreviated table-specification stream).
.. [2] ITU-T T.81 | ISO/IEC 10918-1, "Digital compression and coding of continuous-tone still
   images", 1992, annex B (markers, the interchange and abbreviated formats).
.. [3] Adobe, "Supporting the DCT Filters in PostScript Level 2", Technical Note #5116, 1992
   (the APP14 "Adobe" marker: transform 0 means the components are not colour-converted).
.. [4] NVIDIA, "nvImageCodec Python API" (``nvidia.nvimgcodec.Decoder``, ``Backend``,
   ``Image.__dlpack__``), https://docs.nvidia.com/cuda/nvimagecodec/.
"""

from __future__ import annotations

import os
import struct
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..errors import InvalidArgumentError, MissingDependencyError
from ._native import jpeg_rgb_components, jpeg_tiles_unsupported
from ._preprocess import OutDtype, _check_interpolation, _size_pair

if TYPE_CHECKING:
    import torch

    from ._readers import Slide

__all__ = ["GpuTileDecoder", "gpu_decode_unsupported", "jpeg_stream", "resolve_decode_device"]

DecodeBackend = Literal["gpu", "cpu"]

_SOI, _EOI, _SOS = b"\xff\xd8", b"\xff\xd9", 0xDA
#: APP14 "Adobe" segment (Adobe TN #5116): length 14, version 100, flags 0, transform 0
#: (components stored as they are: RGB, not YCbCr).
_ADOBE_RGB = b"\xff\xee" + struct.pack(">H5sHHHB", 14, b"Adobe", 100, 0, 0, 0)
_PIP = "nvidia-nvimgcodec-cu12"

#: The largest difference to libjpeg (uint8 levels) a decoder may show on the first tile it
#: decodes (:meth:`GpuTileDecoder._verify`); nvJPEG's IDCT and colour conversion are within 1-2.
VERIFY_MAX_DIFF = 8

#: Set only by the test-suite: ``decode="gpu"`` on a CPU device then runs nvImageCodec's CPU
#: backend (libjpeg-turbo) with CPU tensors, so the whole path is testable without a GPU.
_CPU_BACKEND_FOR_TESTS = False


def _header_segments(stream: bytes) -> list[tuple[int, int, int]]:
    """Return (marker, start, end) of each segment between SOI and SOS (T.81 B.1.1.4)."""
    out = []
    pos, n = 2, len(stream)
    while pos + 4 <= n:
        if stream[pos] != 0xFF:
            raise InvalidArgumentError(f"no marker at byte {pos}")
        marker = stream[pos + 1]
        if marker == 0xFF:  # fill byte before a marker
            pos += 1
            continue
        if marker == 0xD9:  # EOI: a tables-only stream ends here
            break
        (length,) = struct.unpack_from(">H", stream, pos + 2)
        if length < 2 or pos + 2 + length > n:
            raise InvalidArgumentError(f"segment 0x{marker:02X} at byte {pos} runs past the stream")
        out.append((marker, pos, pos + 2 + length))
        if marker == _SOS:
            break
        pos += 2 + length
    return out


def merge_jpeg_tables(tile: bytes, tables: bytes | None) -> bytes:
    """Return the interchange stream of an abbreviated tile stream and its JPEGTables.

    TIFF Technical Note 2: the JPEGTables tag holds an abbreviated table-specification stream
    (SOI, DQT/DHT segments, EOI) and each tile an abbreviated image stream that relies on it.
    The tables without their EOI followed by the tile without its SOI is one interchange stream
    any decoder reads.

    Parameters
    ----------
    tile : bytes
        The tile's stream (SOI ... EOI).
    tables : bytes or None
        The level's JPEGTables; None or empty leaves the tile as it is.

    Returns
    -------
    bytes
        The complete stream.

    Raises
    ------
    InvalidArgumentError
        The tile or the tables do not start with SOI, or the tables do not end with EOI.
    """
    if tile[:2] != _SOI:
        raise InvalidArgumentError("the tile does not start with a JPEG SOI marker")
    if not tables:
        return tile
    tables = bytes(tables)
    if tables[:2] != _SOI or tables[-2:] != _EOI:
        raise InvalidArgumentError("JPEGTables is not an SOI ... EOI stream")
    return tables[:-2] + tile[2:]


def mark_rgb(stream: bytes) -> bytes:
    """Return a JPEG stream whose components any decoder takes as RGB, not YCbCr.

    Aperio writes RGB-photometric tiles with the components stored as R, G, B and neither a
    JFIF nor an Adobe marker; libjpeg would guess YCbCr for three components, so tifffile and
    OpenSlide force RGB (tifffile's ``jpeg_decode_colorspace``). An APP14 Adobe marker with
    transform 0 (Adobe TN #5116) says the same in the stream itself; it is placed right after
    SOI and any Adobe marker already there is dropped.

    Parameters
    ----------
    stream : bytes
        An interchange JPEG stream.

    Returns
    -------
    bytes
        The stream with the marker.

    Raises
    ------
    InvalidArgumentError
        The stream is not a JPEG stream.
    """
    if stream[:2] != _SOI:
        raise InvalidArgumentError("the stream does not start with a JPEG SOI marker")
    parts = [_SOI, _ADOBE_RGB]
    pos = 2
    for marker, start, end in _header_segments(stream):
        if marker == 0xEE and stream[start + 4 : start + 9] == b"Adobe":
            parts.append(stream[pos:start])
            pos = end
    parts.append(stream[pos:])
    return b"".join(parts)


def jpeg_stream(tile: bytes, tables: bytes | None, *, rgb: bool) -> bytes:
    """Return the complete JPEG stream of a TIFF tile.

    Parameters
    ----------
    tile : bytes
        The tile's bytes.
    tables : bytes or None
        The level's JPEGTables tag (:func:`merge_jpeg_tables`).
    rgb : bool
        The components are RGB (photometric RGB without a JFIF marker; :func:`mark_rgb`).

    Returns
    -------
    bytes
        A stream that decodes to the tile's pixels as tifffile decodes them.
    """
    stream = merge_jpeg_tables(tile, tables)
    return mark_rgb(stream) if rgb else stream


def gpu_decode_unsupported(slide: Slide, level: int) -> str | None:
    """Say why a slide level cannot be read by :class:`GpuTileDecoder` (None when it can).

    Parameters
    ----------
    slide : Slide
        An open slide.
    level : int
        The pyramid level.

    Returns
    -------
    str or None
        The reason, or None for a :class:`~tumorboard.slides.TiffFileSlide` level of 8-bit RGB
        JPEG tiles (photometric RGB or YCbCr, no alpha, normal fill order).
    """
    pages = getattr(slide, "_pages", None)
    if slide.reader != "tifffile" or pages is None:
        return f"the {slide.reader} reader has no GPU decode path (tiled TIFF pyramids only)"
    page = pages[level]
    if int(page.compression) != 7:
        return f"{page.compression.name} tiles are not JPEG"
    return jpeg_tiles_unsupported(page)


def resolve_decode_device(device: Any = "cuda") -> tuple[Any, DecodeBackend]:
    """Check that GPU JPEG decoding can run on ``device``; return it and the backend.

    Parameters
    ----------
    device : str or torch.device, default "cuda"
        A CUDA device ("auto" picks CUDA when there is one).

    Returns
    -------
    tuple
        (``torch.device``, "gpu").

    Raises
    ------
    InvalidArgumentError
        ``device`` is not a CUDA device, or this machine has none.
    MissingDependencyError
        torch or nvImageCodec is not installed.
    """
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError.for_extra(
            "GPU JPEG decoding (decode='gpu')", package="torch", extra="embed", cause=exc
        ) from exc
    from ..models import resolve_device

    try:
        dev = resolve_device(device)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"GPU JPEG decoding: {exc}") from exc
    if dev.type == "cpu" and _CPU_BACKEND_FOR_TESTS:
        backend: DecodeBackend = "cpu"
    elif dev.type != "cuda":
        raise InvalidArgumentError(
            f"GPU JPEG decoding needs a CUDA device, got {str(dev)!r}; use the default CPU "
            "decoding (decode='cpu', --decode cpu) there"
        )
    else:
        backend = "gpu"
    _import_nvimgcodec()
    return dev, backend


def _import_nvimgcodec() -> Any:
    import importlib

    try:
        nvimgcodec = importlib.import_module("nvidia.nvimgcodec")
    except ImportError as exc:
        raise MissingDependencyError.for_extra(
            "GPU JPEG decoding (decode='gpu')", package=_PIP, extra="gpu", cause=exc
        ) from exc
    return nvimgcodec


@dataclass(frozen=True)
class _Batch:
    """A planned batch (:meth:`GpuTileDecoder._prepare`): its tiles' streams and pixel map.

    Region ``i``'s pixel ``(y, x)`` is pixel ``(sy[i, y], sx[i, x])`` of decoded tile slot
    ``grid[i, ry[i, y], rx[i, x]]`` (slot ``len(tiles)``: white, outside the level or sparse).
    """

    tiles: list[int]
    streams: list[bytes]
    grid: np.ndarray
    ry: np.ndarray
    rx: np.ndarray
    sy: np.ndarray
    sx: np.ndarray


#: nvImageCodec backend kinds ``TUMORBOARD_NVIMGCODEC_BACKENDS`` may name (comma-separated, in
#: order of preference): the hardware JPEG engines, CUDA decoding, CPU Huffman + GPU IDCT.
BACKEND_KINDS = ("hw_gpu_only", "gpu_only", "hybrid_cpu_gpu")


def decoder_tuning() -> tuple[list[str], str]:
    """Return the nvImageCodec backend kinds and extra decoder options set in the environment.

    ``TUMORBOARD_NVIMGCODEC_BACKENDS`` (e.g. ``hw_gpu_only,gpu_only``; unset: nvImageCodec
    chooses per image among all of them) and ``TUMORBOARD_NVIMGCODEC_OPTIONS`` (appended to the
    decoder's options, nvImageCodec's ``"<decoder>:<option>=<value>"`` syntax, e.g.
    ``nvjpeg_cuda_decoder:hybrid_huffman_threshold=0``): tuning knobs for measuring which
    decoding path is fastest on a GPU; the pixels are checked against libjpeg either way.

    Raises
    ------
    InvalidArgumentError
        An unknown backend kind.
    """
    raw = os.environ.get("TUMORBOARD_NVIMGCODEC_BACKENDS", "")
    kinds = [k.strip().lower() for k in raw.split(",") if k.strip()]
    bad = [k for k in kinds if k not in BACKEND_KINDS]
    if bad:
        raise InvalidArgumentError(
            f"TUMORBOARD_NVIMGCODEC_BACKENDS: expected a comma-separated list of "
            f"{', '.join(BACKEND_KINDS)}, got {raw!r}"
        )
    return kinds, os.environ.get("TUMORBOARD_NVIMGCODEC_OPTIONS", "").strip()


def _span_mask(rel: np.ndarray, size: int) -> np.ndarray:
    """Per region, which of ``size`` grid rows (or columns) its pixels fall in.

    ``rel`` is (n, rs): each pixel row's grid row, ``size`` where the pixel is outside the
    level. The rows used are the contiguous block between the smallest and largest.
    """
    inside = rel < size
    lo = np.where(inside, rel, size).min(axis=1)
    hi = np.where(inside, rel, -1).max(axis=1)
    k = np.arange(size)
    return (k >= lo[:, None]) & (k <= hi[:, None])


class GpuTileDecoder:
    """Batch reader of one JPEG-tiled TIFF level: nvImageCodec decode, torch resize.

    Parameters
    ----------
    slide : TiffFileSlide
        An open slide read by tifffile (:func:`gpu_decode_unsupported` says which levels).
    level : int
        The pyramid level patches are read from.
    device : str or torch.device, default "cuda"
        Where the pixels are decoded and the patches returned.
    backend : {"gpu", "cpu"}, default "gpu"
        "gpu": nvImageCodec's default backends on ``device`` (nvJPEG: hardware, hybrid or CUDA
        decoding, chosen per image), ``device`` must be CUDA. "cpu": its CPU-only backend
        (libjpeg-turbo) with CPU tensors, ``device`` must be the CPU (for tests and comparison).

    Raises
    ------
    InvalidArgumentError
        A level this path does not read, or a backend/device mismatch (no CUDA for "gpu").
    MissingDependencyError
        nvImageCodec (``nvidia-nvimgcodec-cu12``) or torch is not installed.

    Notes
    -----
    One ``decode`` call per batch decodes the batch's unique tiles (a tile shared by several
    patches is decoded once per batch). The decoder is not re-entrant: :meth:`load` holds a
    lock while it decodes and queues the batch's work on its own CUDA stream, then waits for
    that work with the lock released (another thread's batch is decoded meanwhile) and returns
    once the batch is complete.
    """

    def __init__(
        self,
        slide: Slide,
        level: int,
        *,
        device: Any = "cuda",
        backend: DecodeBackend = "gpu",
    ) -> None:
        if backend not in ("gpu", "cpu"):
            raise InvalidArgumentError(f"backend: expected 'gpu' or 'cpu', got {backend!r}")
        slide._check_level(level)
        why = gpu_decode_unsupported(slide, level)
        if why is not None:
            raise InvalidArgumentError(f"{slide.path}: level {level} cannot be GPU-decoded: {why}")
        try:
            import torch
        except ImportError as exc:
            raise MissingDependencyError.for_extra(
                "GPU JPEG decoding (decode='gpu')", package="torch", extra="embed", cause=exc
            ) from exc
        from ..models import resolve_device

        dev = resolve_device(device)
        if backend == "gpu" and dev.type != "cuda":
            raise InvalidArgumentError(
                f"GPU JPEG decoding needs a CUDA device, got device {str(dev)!r}; use the "
                "default CPU decoding (decode='cpu', --decode cpu) there"
            )
        if backend == "cpu" and dev.type != "cpu":
            raise InvalidArgumentError(f"backend='cpu' decodes to the CPU, got device {dev}")
        nvimgcodec = _import_nvimgcodec()
        self.torch = torch
        self.slide = slide
        self.level = int(level)
        self.device = dev
        self.backend = backend
        page = slide._pages[level]  # type: ignore[attr-defined]
        self._counts = np.asarray(page.databytecounts, dtype=np.int64)
        self._tables = bytes(page.jpegtables) if page.jpegtables else None
        self._rgb = jpeg_rgb_components(page, bool(page.is_jfif))
        self.tile_width, self.tile_height = int(page.tilewidth), int(page.tilelength)
        self.width, self.height = (int(v) for v in slide.level_dimensions[level])
        self._tiles_x = -(-self.width // self.tile_width)
        self._downsample = float(slide.level_downsamples[level])
        # libjpeg's "fancy" chroma upsampling, as libjpeg-turbo (the CPU path) does by default
        options = ":fancy_upsampling=1"
        if backend == "gpu":
            index = dev.index if dev.index is not None else torch.cuda.current_device()
            kinds, extra = decoder_tuning()
            kw: dict[str, Any] = {}
            if kinds:
                kw["backends"] = [nvimgcodec.Backend(getattr(nvimgcodec.BackendKind, k.upper()))
                                  for k in kinds]  # fmt: skip
            self._decoder = nvimgcodec.Decoder(
                device_id=index, options=f"{options} {extra}".strip(), **kw
            )
            self._stream = torch.cuda.Stream(dev)
        else:
            self._decoder = nvimgcodec.Decoder(
                device_id=nvimgcodec.NVIMGCODEC_DEVICE_CPU_ONLY,
                backends=[nvimgcodec.Backend(nvimgcodec.CPU_ONLY)],
                options=options,
            )
            self._stream = None
        self._lock = threading.Lock()
        self._verified = False  # the first decoded tile is checked against libjpeg

    # -- reading -----------------------------------------------------------------------------

    def _streams(self, tiles: list[int]) -> list[bytes]:
        from ._readers import SlideError

        path, lv = self.slide.path, self.level
        out = []
        for t in tiles:
            data = self.slide._tile_bytes(lv, t)  # type: ignore[attr-defined]
            try:
                out.append(jpeg_stream(data, self._tables, rgb=self._rgb))
            except InvalidArgumentError as exc:
                raise SlideError(path, f"tile {t} of level {lv} is corrupt ({exc})") from exc
        return out

    def _decode(self, tiles: list[int], streams: list[bytes]) -> dict[int, torch.Tensor]:
        """Decode ``tiles`` (non-sparse) in one call; return them as (h, w, 3) uint8 tensors.

        ``streams`` are their JPEG streams, read by :meth:`_prepare`.
        """
        from ._readers import SlideError

        torch = self.torch
        if not tiles:
            return {}
        if self._stream is not None:
            images = self._decoder.decode(streams, cuda_stream=self._stream.cuda_stream)
        else:
            images = self._decoder.decode(streams)
        out = {}
        for t, img in zip(tiles, images, strict=True):
            if img is None:
                raise SlideError(
                    self.slide.path,
                    f"tile {t} of level {self.level} is corrupt (nvImageCodec cannot decode it)",
                )
            if self._stream is not None:
                # DLPack with stream: torch's current stream (ours) waits for the decode
                arr = torch.from_dlpack(img)
            else:
                arr = torch.from_numpy(np.asarray(img.cpu()))
            if arr.ndim != 3 or arr.shape[2] < 3 or arr.dtype != torch.uint8:
                raise SlideError(
                    self.slide.path,
                    f"tile {t} of level {self.level} decodes to {tuple(arr.shape)} "
                    f"{arr.dtype}, expected (h, w, 3) uint8",
                )
            out[t] = arr
        if not self._verified:
            self._verify(tiles[0], out[tiles[0]])
        return out

    def _verify(self, tile: int, got: torch.Tensor) -> None:
        """Check the decoder against libjpeg (tifffile) on the first tile it decodes.

        nvJPEG on an H100 decoded Aperio-style tiles (RGB components, marked as such with the
        Adobe APP14 marker) as YCbCr, up to 232 levels off, where nvImageCodec's CPU backend
        and libjpeg read them right: a level whose first tile differs by more than
        :data:`VERIFY_MAX_DIFF` levels is refused rather than embedded wrong.
        """
        from ._readers import SlideError

        page = self.slide._pages[self.level]  # type: ignore[attr-defined]
        data = self.slide._tile_bytes(self.level, tile)  # type: ignore[attr-defined]
        want = np.asarray(page.decode(data, tile, jpegtables=page.jpegtables)[0])
        want = want.reshape(want.shape[-3:])[..., :3]
        h, w = min(want.shape[0], got.shape[0]), min(want.shape[1], got.shape[1])
        mine = got[:h, :w, :3].cpu().numpy().astype(np.int16)
        diff = int(np.abs(mine - want[:h, :w].astype(np.int16)).max()) if h and w else 0
        if diff > VERIFY_MAX_DIFF:
            kind = " (RGB components, as Aperio writes them)" if self._rgb else ""
            raise SlideError(
                self.slide.path,
                f"level {self.level}: nvImageCodec ({self.backend} backend) decodes tile {tile}"
                f"{kind} up to {diff} levels away from libjpeg (at most {VERIFY_MAX_DIFF} "
                "accepted); decode this slide on the CPU (decode='cpu', --decode cpu)",
            )
        self._verified = True

    def regions(self, coords: np.ndarray, read_size: int) -> torch.Tensor:
        """Read square regions of the level, as :meth:`Slide.read_region` reads them.

        Parameters
        ----------
        coords : numpy.ndarray
            (B, 2) level-0 top-left corners; the level's corner is ``int(x / downsample)``.
        read_size : int
            The region side in level pixels.

        Returns
        -------
        torch.Tensor
            (B, read_size, read_size, 3) uint8 on the device; white (255) outside the level and
            where a tile is sparse.

        Raises
        ------
        SlideError
            A truncated or corrupt tile (named with its index and level).
        """
        prepared = self._prepare(coords, read_size)
        with self._lock, self._on_stream():
            out = self._regions(prepared)
            done = self._record()
        self._wait(done)
        return out

    def _prepare(self, coords: np.ndarray, read_size: int) -> _Batch:
        """Plan a batch and read its tiles' JPEG streams.

        The file reads and stream fix-ups run in Python outside the decoder's lock: one loader
        thread prepares a batch while another decodes.
        """
        cs = np.asarray(coords, dtype=np.int64).reshape(-1, 2)
        xy = (cs / self._downsample).astype(np.int64)  # the slide's own int(x / downsample)
        rs = int(read_size)
        tw, th, lw, lh = self.tile_width, self.tile_height, self.width, self.height
        n = len(xy)
        # per region, its rows' and columns' level coordinates; outside the level: white
        ys = xy[:, 1:2] + np.arange(rs)  # (n, rs)
        xs = xy[:, 0:1] + np.arange(rs)
        ty, tx = np.floor_divide(ys, th), np.floor_divide(xs, tw)
        ty0, tx0 = ty[:, 0].clip(0), tx[:, 0].clip(0)
        # tile rows/columns relative to the region's first; `grid` slots beyond the level or of
        # sparse tiles point at the white tile
        gh = int((ty - ty0[:, None]).max(initial=0)) + 1
        gw = int((tx - tx0[:, None]).max(initial=0)) + 1
        ry = np.where((ys >= 0) & (ys < lh), ty - ty0[:, None], gh)
        rx = np.where((xs >= 0) & (xs < lw), tx - tx0[:, None], gw)
        gy = ty0[:, None] + np.arange(gh)  # (n, gh) tile rows of each region's grid
        gx = tx0[:, None] + np.arange(gw)
        ids = gy[:, :, None] * self._tiles_x + gx[:, None, :]  # (n, gh, gw)
        # the grid cells some pixel of the region inside the level falls in (a contiguous
        # block: rows rmin..rmax, columns cmin..cmax)
        used_r = _span_mask(ry, gh)
        used_c = _span_mask(rx, gw)
        ids = np.where(used_r[:, :, None] & used_c[:, None, :], ids, -1)
        flat = ids[ids >= 0]
        needed = np.unique(flat[self._counts[flat] > 0])  # sorted; sparse tiles stay white
        white = len(needed)
        grid = np.full((n, gh + 1, gw + 1), white, dtype=np.int32)
        if white:  # each cell's slot in `needed` (-1 and sparse ids are not found there)
            pos = np.searchsorted(needed, ids).clip(0, white - 1)
            grid[:, :gh, :gw] = np.where(needed[pos] == ids, pos, white)
        tiles = [int(t) for t in needed]
        i32 = np.int32
        return _Batch(
            tiles=tiles, streams=self._streams(tiles), grid=grid, ry=ry.astype(i32),
            rx=rx.astype(i32), sy=np.mod(ys, th).astype(i32), sx=np.mod(xs, tw).astype(i32),
        )  # fmt: skip

    def _regions(self, batch: _Batch) -> torch.Tensor:
        """Decode a prepared batch and assemble its regions on the device (one gather)."""
        from ._readers import SlideError

        torch = self.torch
        decoded = self._decode(batch.tiles, batch.streams)
        th, tw = self.tile_height, self.tile_width
        stack = []
        for t in batch.tiles:
            tile = decoded[t]
            if tile.shape[0] < th or tile.shape[1] < tw:
                raise SlideError(
                    self.slide.path,
                    f"tile {t} of level {self.level} decodes to {tuple(tile.shape[:2])}, "
                    f"smaller than the {th}x{tw} tile",
                )
            stack.append(tile[:th, :tw, :3])
        stack.append(torch.full((th, tw, 3), 255, dtype=torch.uint8, device=self.device))
        tiles = torch.stack(stack)  # (T + 1, th, tw, 3); the last one white

        def dev(a: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(np.ascontiguousarray(a)).to(self.device)

        grid, ry, rx = dev(batch.grid), dev(batch.ry), dev(batch.rx)
        b = torch.arange(len(batch.grid), device=self.device)[:, None, None]
        slot = grid[b, ry[:, :, None], rx[:, None, :]]  # (n, rs, rs) tile of each pixel
        return tiles[slot, dev(batch.sy)[:, :, None], dev(batch.sx)[:, None, :]]

    def load(
        self,
        coords: np.ndarray,
        read_size: int,
        *,
        size: int | tuple[int, int] = 224,
        mean: tuple[float, float, float] | None = None,
        std: tuple[float, float, float] | None = None,
        interpolation: str = "bilinear",
        dtype: OutDtype = "float32",
    ) -> torch.Tensor:
        """Read, resize and normalise a batch of patches on the device.

        Parameters
        ----------
        coords, read_size
            As in :meth:`regions`.
        size : int or (int, int), default 224
            Output side, or (height, width).
        mean, std : tuple of 3 float or None, default None
            Normalisation (ImageNet's when None).
        interpolation : {"bilinear", "bicubic"}, default "bilinear"
            PIL's antialiased filter (``torch.nn.functional.interpolate(..., antialias=True)``,
            in float32), rounded half up and clamped to uint8 as PIL's 8-bit resize is.
        dtype : {"float32", "float16", "bfloat16", "uint8"}, default "float32"
            ``(u / 255 - mean) / std`` computed in float32 then cast, or the resized uint8
            pixels.

        Returns
        -------
        torch.Tensor
            (B, 3, h, w) on the device (``torch.bfloat16`` for "bfloat16").
        """
        from .._constants import IMAGENET_MEAN, IMAGENET_STD

        torch = self.torch
        interpolation = _check_interpolation(interpolation)
        oh, ow = _size_pair(size)
        if dtype not in ("float32", "float16", "bfloat16", "uint8"):
            raise InvalidArgumentError(
                f"dtype: expected 'float32', 'float16', 'bfloat16' or 'uint8', got {dtype!r}"
            )
        mean = IMAGENET_MEAN if mean is None else mean
        std = IMAGENET_STD if std is None else std
        prepared = self._prepare(coords, read_size)
        with self._lock, self._on_stream():
            raw = self._regions(prepared).permute(0, 3, 1, 2)
            if raw.shape[2:] == (oh, ow):
                u8 = raw.contiguous()
            else:
                u8 = _resize_uint8(raw, oh, ow, interpolation)
            if dtype == "uint8":
                out = u8
            else:
                m = torch.tensor(mean, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
                s = torch.tensor(std, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
                f = u8.float()
                f.div_(f.new_full((), 255.0)).sub_(m).div_(s)  # as normalize_uint8 / the core
                out = f.to({"float32": torch.float32, "float16": torch.float16,
                            "bfloat16": torch.bfloat16}[dtype])  # fmt: skip
            done = self._record()
        self._wait(done)
        return out

    def _on_stream(self) -> Any:
        import contextlib

        if self._stream is None:
            return contextlib.nullcontext()
        return self.torch.cuda.stream(self._stream)

    def _record(self) -> Any:
        """Mark the end of this batch's work on the decoder's stream (None on the CPU)."""
        if self._stream is None:
            return None
        event = self.torch.cuda.Event()
        event.record(self._stream)
        return event

    @staticmethod
    def _wait(event: Any) -> None:
        # the batch is complete when it is handed over (the consumer may use another stream);
        # waited for after the lock is released, so another thread's batch is decoded meanwhile
        if event is not None:
            event.synchronize()


def _resize_uint8(x: torch.Tensor, oh: int, ow: int, mode: str) -> torch.Tensor:
    """Resize (B, 3, H, W) uint8 as PIL does: a horizontal pass, uint8, a vertical pass, uint8.

    Pillow's ``ImagingResample`` (``src/libImaging/Resample.c``) resamples 8-bit images in two
    separable passes, horizontal first, rounding (half up) and clamping to uint8 after each;
    each pass here is torch's antialiased filter of the same support along one axis (a pass
    that keeps an axis's size is the identity). Left: PIL's 22-bit fixed-point weights against
    float32 ones, so a value lands one step off now and then.
    """
    import torch

    _, _, h, w = x.shape
    y = x
    for size in ((h, ow), (oh, ow)):
        if tuple(y.shape[2:]) == size:
            continue
        f = torch.nn.functional.interpolate(
            y.float(), size=size, mode=mode, align_corners=False, antialias=True
        )
        y = f.add_(0.5).floor_().clamp_(0, 255).to(torch.uint8)
    return y
