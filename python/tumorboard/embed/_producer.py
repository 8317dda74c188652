"""The producer thread of an embedding run: slides opened, tiled and read into batches.

:func:`_produce` streams every slide's preprocessed batches onto the run's bounded queue, in
slide order, while an opener thread opens and tiles the next slide (:func:`_open_slide`) and
reads its first batch; the run loop (:func:`tumorboard.embed._engine._run`) takes them off the
queue. :class:`_SlideJob` is one slide's work item: its output paths, filled in by the producer
with its coords, reader and loader.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..slides import TilingOptions, gpu_decode_unsupported, read_plan

_END = object()


class _SlideError(Exception):
    """A slide the producer could not read (its message is the reason, already formatted)."""


@dataclass
class _SlideJob:
    index: int
    path: Path
    name: str
    features: Path
    parquet: Path
    coords_path: Path
    reuse: Any = None  # a stored CoordsFile made with the same settings
    coords: np.ndarray | None = None
    coords_attrs: dict[str, Any] | None = None
    n: int = 0
    error: str | None = None
    reader: str | None = None
    loader: str | None = None


def _put(q: queue.Queue, item: Any, stop: threading.Event) -> bool:
    """Put ``item`` on ``q``, waiting while it is full; False once ``stop`` is set."""
    while not stop.is_set():
        try:
            q.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def _open_slide(
    job: _SlideJob,
    *,
    opts: TilingOptions,
    out: Path,
    batch_size: int,
    size: int,
    mean: tuple[float, ...],
    std: tuple[float, ...],
    interpolation: str,
    threads: int,
    patch_dtype: str,
    decode_device: str | None,
) -> tuple[contextlib.ExitStack, Any] | None:
    """Open and tile ``job``'s slide and start its loader; None when it has no patch.

    Returns the exit stack that holds the slide open and the loader's batch iterator, primed:
    its first batch is being read when this returns (the native prefetcher starts on the
    first ``next``), so the caller can hand the slide over while the previous one streams.
    """
    from .. import slides

    stack = contextlib.ExitStack()
    try:
        slide = stack.enter_context(opts.open(job.path))
        job.reader = str(slide.reader)
        if job.reuse is not None:  # coords of a `tile` run with the same settings
            cf = job.reuse
            ds = float(cf.attrs["level0_magnification"]) / opts.magnification
            level, read_size = read_plan(slide.level_downsamples, ds, cf.patch_size_level0)
            coords, attrs = cf.coords, cf.attrs
            reason = None
        else:
            tiled = opts.tile(slide, out, source=job.path)
            level, read_size = tiled.grid.read_level, tiled.grid.read_size
            cf = slides.read_coords(tiled.coords_path)
            coords, attrs = cf.coords, cf.attrs
            reason = tiled.no_tissue
        job.coords, job.coords_attrs, job.n = coords, attrs, len(coords)
        if reason is not None:
            job.error = reason
            stack.close()
            return None
        # decode="gpu": uint8 tensors on the model's device, normalised by the backend;
        # slides the GPU decoder does not read keep the CPU loader
        gpu = decode_device is not None and gpu_decode_unsupported(slide, level) is None
        loader = slides.PatchLoader(slide, coords, level=level, read_size=read_size,
                                    batch_size=batch_size, size=size, mean=mean, std=std,
                                    threads=threads, interpolation=interpolation,
                                    dtype="uint8" if gpu else patch_dtype,
                                    decode="gpu" if gpu else "cpu",
                                    device=decode_device)  # fmt: skip
        job.loader = "gpu" if gpu else "native" if loader.native else "python"
        batches = iter(loader)
        stack.callback(getattr(batches, "close", lambda: None))  # stops the prefetcher
        return stack, batches
    except BaseException:
        stack.close()
        raise


def _produce(jobs: list[_SlideJob], q: queue.Queue, stop: threading.Event, **open_kw: Any) -> None:
    """Stream every slide's batches into ``q``, opening the next slide while one streams.

    An opener thread opens and tiles slide k+1 and reads its first batch while this thread
    streams slide k (one slide of lookahead): the model does not wait for a slide's opening,
    tiling and first batch between slides (measured on an H100 with 20 slides of 1,024
    patches: 25.6% of the forward window idle between slides when slides were opened one
    after another). Items reach ``q`` in slide order, as before. ``open_kw`` are the keyword
    arguments of :func:`_open_slide` (tiling, loader and preprocessing settings).
    """
    handoff: queue.Queue = queue.Queue(maxsize=1)

    def opener() -> None:
        for job in jobs:
            if stop.is_set():
                break
            item: tuple[Any, ...]
            try:
                opened = _open_slide(job, **open_kw)
                if opened is None:
                    item = ("empty", job)
                else:
                    stack, batches = opened
                    try:
                        first = next(batches, None)  # read while the previous slide streams
                    except BaseException:
                        stack.close()
                        raise
                    item = ("ready", job, stack, batches, first)
            except Exception as exc:  # a bad slide never stops the collection
                job.error = f"{type(exc).__name__}: {exc}"
                item = ("error", job)
            if not _put(handoff, item, stop):
                if item[0] == "ready":
                    item[2].close()
                return
        _put(handoff, _END, stop)

    opening = threading.Thread(target=opener, name="tb-embed-opener", daemon=True)
    opening.start()
    try:
        while not stop.is_set():
            try:
                item = handoff.get(timeout=0.1)
            except queue.Empty:
                continue
            if item is _END:
                break
            if item[0] != "ready":
                if not _put(q, item, stop):
                    return
                continue
            _, job, stack, batches, first = item
            with stack:
                try:
                    if not _put(q, ("start", job), stop):
                        return
                    if first is not None:
                        if not _put(q, ("batch", job, first), stop):
                            return
                        for batch in batches:
                            if not _put(q, ("batch", job, batch), stop):
                                return
                    if not _put(q, ("end", job), stop):
                        return
                except Exception as exc:  # a bad slide never stops the collection
                    job.error = f"{type(exc).__name__}: {exc}"
                    if not _put(q, ("error", job), stop):
                        return
        _put(q, _END, stop)
    finally:
        if opening.is_alive():  # left early (the consumer stopped): stop opening slides too
            stop.set()
        opening.join(timeout=30)
        while True:  # a slide handed over but never streamed is closed (its prefetcher stops)
            try:
                left = handoff.get_nowait()
            except queue.Empty:
                break
            if left is not _END and left[0] == "ready":
                left[2].close()
