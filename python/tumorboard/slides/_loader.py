"""Patch loader: reads a slide's patches on a thread pool and yields preprocessed batches.

Each worker loads one batch at a time. On tiled TIFF pyramids with JPEG or uncompressed tiles
(:class:`~tumorboard.slides.TiffFileSlide`) the whole batch is one call into the compiled core
(``_core.slides.TileReader``): ``pread`` of the tiles, libjpeg-turbo decoding, region assembly,
the PIL-exact resize and the normalisation, straight into the batch buffer with the GIL released
once per batch, so the loader scales with cores; when iterating, C++ worker threads
(``_core.slides.Prefetcher``) produce the batches ahead of the consumer without ever taking the
GIL, so a busy Python thread beside the loader does not stall it. Elsewhere the worker reads
the regions into a raw buffer (OpenSlide's premultiplied ARGB through its C API; RGB for
tiffslide, other TIFF codecs and plain images), then runs the same fused
crop/resize/normalise (C++, GIL released) into a fresh NCHW array. Both give the same pixels.
Up to ``threads + prefetch`` batches are in flight; batches come out in grid order.

``decode="gpu"`` reads JPEG-tiled TIFF levels with :class:`~tumorboard.slides.GpuTileDecoder`
instead: nvImageCodec decodes each batch's tiles on the GPU and the batch is assembled, resized
and normalised there, coming out as a torch tensor on the device (within one uint8 step of the
CPU path's pixels). It lives here, not in the embedding engine, so that one class knows the
region semantics (corners, white fill, resize, normalisation) whichever decoder runs, and any
consumer of batches, not only ``embed_slides``, can use it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .. import _core
from .._constants import IMAGENET_MEAN, IMAGENET_STD
from ..errors import CoreError, InvalidArgumentError
from . import _validate
from ._grid import PatchGrid
from ._preprocess import (
    _NP_DTYPE,
    Interpolation,
    OutDtype,
    _check_interpolation,
    _size_pair,
)

if TYPE_CHECKING:
    from ._readers import Slide


@dataclass(frozen=True, eq=False)
class PatchBatch:
    """One batch of preprocessed patches.

    Attributes
    ----------
    images : numpy.ndarray or torch.Tensor
        (B, 3, h, w) float32 / float16, uint16 bfloat16 bit patterns, or uint8 resized pixels
        (not normalised). With ``decode="gpu"`` a torch tensor on the loader's device
        (``torch.bfloat16`` for "bfloat16").
    coords : numpy.ndarray
        (B, 2) int64 level-0 top-left corners.
    index : numpy.ndarray
        (B,) their grid positions.
    """

    images: Any
    coords: np.ndarray
    index: np.ndarray

    def __len__(self) -> int:
        return int(self.coords.shape[0])


class PatchLoader:
    """Iterable over preprocessed batches of a slide's patches.

    Parameters
    ----------
    slide : Slide
        An open :class:`~tumorboard.slides.Slide`.
    grid : PatchGrid or numpy.ndarray
        A :class:`PatchGrid` (its read level and size are used), or an (N, 2) array of level-0
        corners together with ``level`` and ``read_size``.
    batch_size : int, default 64
        Patches per batch (the last one may be smaller).
    size, mean, std, interpolation, dtype
        As in :func:`preprocess_patches` (defaults 224, ImageNet mean and std, "bilinear",
        "float32").
    threads : int or None, default None
        Reader threads, >= 1 (default: all cores).
    prefetch : int, default 2
        Extra batches read ahead of the consumer.
    level, read_size : int or None, default None
        Override the grid's read level / region side.
    native : bool or None, default None
        Use the compiled batch reader: None uses it where it applies (tiled TIFF levels with
        JPEG or uncompressed tiles and a usable libjpeg), True requires it (an error says why
        it does not apply), False never uses it.
    decode : {"cpu", "gpu"}, default "cpu"
        Where JPEG tiles are decoded. "gpu": nvImageCodec on ``device``
        (:class:`~tumorboard.slides.GpuTileDecoder`; JPEG-tiled TIFF levels only, one reader
        thread since the GPU decodes the whole batch at once; ``images`` are torch tensors on
        the device). Needs ``pip install "tumorboard[gpu]"`` and CUDA.
    device : str or None, default None
        The CUDA device of ``decode="gpu"`` (default "cuda"); unused with "cpu".

    Attributes
    ----------
    native : bool
        Whether batches are read by the compiled batch reader.
    native_reason : str or None
        Why they are not (None when they are).
    decode : str
        "cpu" or "gpu".
    """

    def __init__(
        self,
        slide: Slide,
        grid: PatchGrid | np.ndarray,
        *,
        batch_size: int = 64,
        size: int | tuple[int, int] = 224,
        mean: tuple[float, float, float] = IMAGENET_MEAN,
        std: tuple[float, float, float] = IMAGENET_STD,
        interpolation: Interpolation = "bilinear",
        dtype: OutDtype = "float32",
        threads: int | None = None,
        prefetch: int = 2,
        level: int | None = None,
        read_size: int | None = None,
        native: bool | None = None,
        decode: Literal["cpu", "gpu"] = "cpu",
        device: str | None = None,
    ) -> None:
        if isinstance(grid, PatchGrid):
            coords = grid.coords
            level = grid.read_level if level is None else level
            read_size = grid.read_size if read_size is None else read_size
        else:
            coords = np.asarray(grid)
            if level is None or read_size is None:
                raise InvalidArgumentError("with a coords array, pass level= and read_size=")
        coords = np.ascontiguousarray(coords, dtype=np.int64)
        if coords.ndim != 2 or coords.shape[1] != 2:
            raise InvalidArgumentError(f"coords: expected shape (N, 2), got {coords.shape}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise InvalidArgumentError(f"batch_size: expected a positive int, got {batch_size!r}")
        if not 0 <= int(level) < slide.level_count:
            raise InvalidArgumentError(
                f"level: expected an integer in [0, {slide.level_count - 1}], got {level}"
            )
        if int(read_size) <= 0:
            raise InvalidArgumentError(f"read_size: expected a positive integer, got {read_size}")
        if dtype not in _NP_DTYPE:
            raise InvalidArgumentError(
                f"dtype: expected 'float32', 'float16', 'bfloat16' or 'uint8', got {dtype!r}"
            )
        n_threads = _validate.check_threads(threads)
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0:
            raise InvalidArgumentError(f"prefetch: expected an integer >= 0, got {prefetch}")
        self.slide = slide
        self.coords = coords
        self.level = int(level)
        self.read_size = int(read_size)
        self.batch_size = batch_size
        self.size = _size_pair(size)
        self.mean = [float(v) for v in mean]
        self.std = [float(v) for v in std]
        if len(self.mean) != 3 or len(self.std) != 3 or any(s == 0 for s in self.std):
            raise InvalidArgumentError("mean and std need 3 values each, std non-zero")
        self.interpolation = _check_interpolation(interpolation)
        self.dtype = dtype
        self.threads = n_threads or os.cpu_count() or 1
        self.prefetch = prefetch
        self._local = threading.local()
        if native not in (None, True, False):
            raise InvalidArgumentError(f"native: expected None, True or False, got {native!r}")
        if decode not in ("cpu", "gpu"):
            raise InvalidArgumentError(f"decode: expected 'cpu' or 'gpu', got {decode!r}")
        self.decode = decode
        self._gpu: Any = None
        if decode == "gpu":
            if native:
                raise InvalidArgumentError("native=True and decode='gpu' exclude each other")
            from ._gpu_decode import GpuTileDecoder, resolve_decode_device

            dev, backend = resolve_decode_device("cuda" if device is None else device)
            self._gpu = GpuTileDecoder(slide, self.level, device=dev, backend=backend)
            native = False
        self._reader, self.native_reason = self._native_reader(native)
        self.native = self._reader is not None
        if native and not self.native:
            raise InvalidArgumentError(
                f"{self.slide.path}: the native batch reader does not apply: {self.native_reason}"
            )

    def _native_reader(self, native: bool | None) -> tuple[object | None, str | None]:
        if self._gpu is not None:
            return None, "decode='gpu'"
        if native is False:
            return None, "native=False"
        find = getattr(self.slide, "native_reader", None)
        if find is None:
            return None, f"the {self.slide.reader} reader has no native batch path"
        return find(self.level)

    def __len__(self) -> int:
        return -(-self.coords.shape[0] // self.batch_size)

    def _raw_buffer(self) -> np.ndarray:
        """Return this thread's region buffer, reused across batches.

        Fresh pages cost page faults.
        """
        buf = getattr(self._local, "raw", None)
        if buf is None:
            rs, b = self.read_size, self.batch_size
            if self.slide.raw_format == "argb32":
                buf = np.empty((b, rs, rs), np.uint32)
            else:
                buf = np.empty((b, rs, rs, 3), np.uint8)
            self._local.raw = buf
        return buf

    def load_batch(self, b: int) -> PatchBatch:
        """Read and preprocess batch ``b`` (thread-safe).

        Parameters
        ----------
        b : int
            The batch index, in [0, len(self)).

        Returns
        -------
        PatchBatch
            The batch.
        """
        start = b * self.batch_size
        stop = min(self.coords.shape[0], start + self.batch_size)
        if not 0 <= start < stop:
            raise IndexError(f"batch {b} out of range (0..{len(self) - 1})")
        cs = self.coords[start:stop]
        n, rs = stop - start, self.read_size
        if self._gpu is not None:
            images = self._gpu.load(cs, rs, size=self.size, mean=tuple(self.mean),
                                    std=tuple(self.std), interpolation=self.interpolation,
                                    dtype=self.dtype)  # fmt: skip
            return PatchBatch(images=images, coords=cs.copy(), index=np.arange(start, stop))
        if self._reader is not None:
            return self._load_native(cs, start, stop)
        fmt = self.slide.raw_format
        raw = self._raw_buffer()[:n]
        for i in range(n):
            self.slide._read_raw(int(cs[i, 0]), int(cs[i, 1]), self.level, rs, rs, raw[i])
        oh, ow = self.size
        images = np.empty((n, 3, oh, ow), _NP_DTYPE[self.dtype])
        _core.tiling.preprocess(
            raw, fmt, None, images, self.dtype, self.interpolation, self.mean, self.std, 1
        )
        return PatchBatch(images=images, coords=cs.copy(), index=np.arange(start, stop))

    def _level_xy(self, cs: np.ndarray) -> np.ndarray:
        """Level coordinates of level-0 corners, as the slide's own reads compute them."""
        return (cs / float(self.slide.level_downsamples[self.level])).astype(np.int64)

    @contextlib.contextmanager
    def _tile_errors(self) -> Iterator[None]:
        """Raise the core's truncated- or corrupt-tile errors as a SlideError naming the file."""
        try:
            yield
        except CoreError as exc:
            from ._readers import SlideError

            raise SlideError(self.slide.path, str(exc)) from exc

    def _load_native(self, cs: np.ndarray, start: int, stop: int) -> PatchBatch:
        oh, ow = self.size
        images = np.empty((stop - start, 3, oh, ow), _NP_DTYPE[self.dtype])
        with self._tile_errors():
            self._reader.load_patches(  # type: ignore[attr-defined]
                0, self._level_xy(cs), self.read_size, self.read_size, images, self.dtype,
                self.interpolation, self.mean, self.std, 1,
            )  # fmt: skip
        return PatchBatch(images=images, coords=cs.copy(), index=np.arange(start, stop))

    def _iter_native(self) -> Iterator[PatchBatch]:
        # C++ workers produce batches ahead without ever taking the GIL (prefetcher.hpp); only
        # taking a finished batch does, so a busy Python thread cannot stall production
        oh, ow = self.size
        pf = _core.slides.Prefetcher(
            self._reader, 0, self._level_xy(self.coords), self.read_size, self.read_size,
            self.batch_size, oh, ow, self.dtype, self.interpolation, self.mean, self.std,
            self.threads, self.threads + self.prefetch,
        )  # fmt: skip
        try:
            while True:
                with self._tile_errors():
                    got = pf.next()
                if got is None:
                    return
                b, images = got
                start = b * self.batch_size
                stop = start + len(images)
                yield PatchBatch(images=images, coords=self.coords[start:stop].copy(),
                                 index=np.arange(start, stop))  # fmt: skip
        finally:
            pf.close()

    def __iter__(self) -> Iterator[PatchBatch]:
        n_batches = len(self)
        if n_batches == 0:
            return
        if self._reader is not None:
            yield from self._iter_native()
            return
        # GPU decoding: one reader thread (the decoder works on a whole batch at once)
        workers = 1 if self._gpu is not None else self.threads
        if workers == 1 and self.prefetch == 0:
            for b in range(n_batches):
                yield self.load_batch(b)
            return
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tb-patches")
        pending: deque[Future[PatchBatch]] = deque()
        nxt = 0
        try:
            while nxt < n_batches and len(pending) < workers + self.prefetch:
                pending.append(pool.submit(self.load_batch, nxt))
                nxt += 1
            while pending:
                batch = pending.popleft().result()
                if nxt < n_batches:
                    pending.append(pool.submit(self.load_batch, nxt))
                    nxt += 1
                yield batch
        finally:
            for f in pending:
                f.cancel()
            pool.shutdown(wait=True)
