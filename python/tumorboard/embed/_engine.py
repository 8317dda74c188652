"""The slide-collection embedding engine (``tumorboard.embed.embed_slides``).

A producer thread walks the collection: for each slide it opens the file, segments the tissue,
builds (or reuses) the TRIDENT coords file and iterates the slides layer's threaded
:class:`~tumorboard.slides.PatchLoader`, putting preprocessed batches on a bounded queue. The
calling thread takes batches off the queue and runs the model backend, so reading and decoding
overlap compute (and, on CUDA, the host-to-device copy overlaps both; see ``_backends``).

Outputs per slide follow TRIDENT's job layout exactly (mahmoodlab/TRIDENT
``trident/Processor.py``, ``run_patch_feature_extraction_job``: features under
``os.path.join(coords_dir, f'features_{enc_name}')``, and ``trident/wsi_objects/WSI.py``,
``extract_patch_features``, @a91fa84), with ``{job} = {out}/{mag}x_{patch}px_{overlap}px_overlap``:

* ``{job}/patches/{name}_patches.h5``: TRIDENT's coords file, plus the attributes that say how it
  was made (:class:`~tumorboard.slides.TilingOptions`); reused when a ``tumorboard tile`` run made
  it with the same settings.
* ``{job}/features_{encoder}/{name}.h5``: TRIDENT's features file: ``features`` [N, D] float32
  with attributes ``name``, ``savetodir``, ``encoder`` (TRIDENT's) and ``weights_fingerprint``,
  ``backend``, ``dtype`` and ``precision`` (both the precision computed in: fp32, fp16, bf16 or
  fp8), ``compiled`` (the ``torch.compile`` mode, or "no"), ``reader`` (the slide reader
  used), ``patch_loader`` ("native": the compiled batch reader, "python": the Python tile
  path, or "gpu": nvImageCodec decoding on the GPU, ``decode="gpu"``; see
  :class:`~tumorboard.slides.PatchLoader`); ``coords`` [N, 2] int64 with the coords
  file's attributes copied.
* ``{job}/embeddings_{encoder}/{name}.parquet``: columns ``slide`` (string), ``x``, ``y`` (int64,
  level-0 top-left), ``embedding`` (fixed_size_list<float32>[D]); the folder reads as one table
  (``polars.scan_parquet(dir / "*.parquet")``). The schema metadata holds ``encoder``,
  ``weights_fingerprint``, ``slide``, ``source_path`` and the tiling settings.
* ``{out}/contours_geojson/{name}.geojson``: the tissue contours (TRIDENT's folder).

A real model run with ``random_weights=True`` writes ``features_{encoder}-random-weights`` and
``embeddings_{encoder}-random-weights`` (and records that name as ``encoder``): TRIDENT's
``features_{encoder}`` folder holds only features of the model's weights.

The weights fingerprint is ``sha256:<hex>`` of the checkpoint file, ``random`` for a model built
without weights (only with ``random_weights=True`` for the real models), or
``state-sha256:<hex>`` of a module's state dict (:mod:`tumorboard.models.weights`).

Every file is written under a temporary name and renamed into place; the features .h5 is renamed
last and marks the slide complete. A rerun skips a complete slide only when its stored settings
(magnification, patch size, overlap, segmentation, tissue threshold, resolution override,
encoder, weights fingerprint, precision: bf16 features are not reused by an fp32 run) and its
source slide match; a mismatch is refused with both values
named (``force=True`` redoes it), and another magnification, patch size or overlap goes to its
own folder. Half-written slides are redone (leftover temporary files of a killed run are
removed). A slide that fails (corrupt file, no magnification, model error) or has no tissue is
recorded in the :class:`EmbedReport` and the collection goes on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import threading
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .._io import atomic_path, remove_temp_files
from .._progress import SlideProgress
from ..errors import CoreError, InvalidArgumentError, InvalidTypeError, MissingFileError
from ..slides import (
    TilingOptions,
    collect_slides,
    gpu_decode_unsupported,
    plan_slide_names,
    read_plan,
    resolve_decode_device,
    slide_name,
)
from ._backends import (
    OnnxBackend,
    TorchBackend,
    encoder_meta,
    export_onnx,
)
from ._options import EmbedOptions, resolve_options

Status = Literal["done", "skipped", "no tissue", "failed"]


@dataclass(frozen=True)
class SlideResult:
    """What happened to one slide.

    Attributes
    ----------
    slide : str
        The slide file.
    name : str
        Its output name.
    status : {"done", "skipped", "no tissue", "failed"}
        "skipped" means already complete with the same settings; "no tissue" that the slide gave
        no patch (``error`` says what was found); for "failed", ``error`` says why.
    n_patches : int, default 0
        Patches embedded (or found, when skipped).
    features_path, parquet_path : pathlib.Path or None, default None
        The slide's output files.
    error : str or None, default None
        Why the slide failed or gave no patch.
    seconds : float, default 0.0
        Time spent on the slide.
    coords_path : pathlib.Path or None, default None
        The slide's coords file.
    """

    slide: str
    name: str
    status: Status
    n_patches: int = 0
    features_path: Path | None = None
    parquet_path: Path | None = None
    error: str | None = None
    seconds: float = 0.0
    coords_path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the slide's entry of a JSON report (paths as text, the slide file absolute)."""
        return {
            "slide": os.path.abspath(self.slide),
            "name": self.name,
            "status": self.status,
            "n_patches": self.n_patches,
            "features": None if self.features_path is None else str(self.features_path),
            "parquet": None if self.parquet_path is None else str(self.parquet_path),
            "coords": None if self.coords_path is None else str(self.coords_path),
            "seconds": round(self.seconds, 3),
            "error": self.error,
        }


@dataclass(frozen=True)
class EmbedReport:
    """The result of :func:`embed_slides`.

    Attributes
    ----------
    results : tuple of SlideResult
        One :class:`SlideResult` per input (a folder: per slide file), in input order.
    encoder : str
        The encoder name used in the output folders.
    weights_fingerprint : str
        The fingerprint recorded with the features (``sha256:...``, ``state-sha256:...`` or
        ``random``).
    job_dir : pathlib.Path
        TRIDENT's ``{out}/{mag}x_{patch}px_{overlap}px_overlap`` folder of the run.
    features_dir, parquet_dir, coords_dir : pathlib.Path
        Where the outputs are (all under ``job_dir``).
    n_patches : int
        Patches embedded in this run (skipped slides not counted).
    seconds : float
        Wall-clock time of the run.
    backend : str, default "torch"
        The inference backend.
    device : str, default "cpu"
        The device the backend ran on.
    """

    results: tuple[SlideResult, ...]
    encoder: str
    weights_fingerprint: str
    job_dir: Path
    features_dir: Path
    parquet_dir: Path
    coords_dir: Path
    n_patches: int
    seconds: float
    backend: str = "torch"
    device: str = "cpu"

    def _with(self, status: str) -> tuple[SlideResult, ...]:
        return tuple(r for r in self.results if r.status == status)

    @property
    def done(self) -> tuple[SlideResult, ...]:
        """The slides embedded in this run."""
        return self._with("done")

    @property
    def skipped(self) -> tuple[SlideResult, ...]:
        """The slides skipped as already complete with the same settings."""
        return self._with("skipped")

    @property
    def no_tissue(self) -> tuple[SlideResult, ...]:
        """The slides that gave no patch."""
        return self._with("no tissue")

    @property
    def failed(self) -> tuple[SlideResult, ...]:
        """The slides that failed."""
        return self._with("failed")

    @property
    def ok(self) -> bool:
        """True when every slide is done or skipped (none failed or gave no patch)."""
        return not self.failed and not self.no_tissue

    @property
    def patches_per_second(self) -> float:
        """Throughput of the run (0 for a run of no measurable time)."""
        return self.n_patches / self.seconds if self.seconds > 0 else 0.0

    @property
    def report_path(self) -> Path:
        """Where ``tumorboard embed`` keeps the JSON report of this job and encoder."""
        return self.job_dir / f"embed_report_{self.encoder}.json"

    def summary(self) -> str:
        """Return a few lines for people: counts, throughput, every slide without features."""
        lines = [
            f"embedded {len(self.done)} slide(s), skipped {len(self.skipped)} complete, "
            f"{len(self.no_tissue)} no tissue, failed {len(self.failed)}; {self.n_patches} "
            f"patches in {self.seconds:.1f} s ({self.patches_per_second:.1f} patches/s, "
            f"{self.backend} on {self.device})",
            f"encoder {self.encoder}, weights {self.weights_fingerprint}",
            f"features: {self.features_dir}",
            f"parquet:  {self.parquet_dir}",
        ]
        for r in self.no_tissue:
            lines.append(f"NO TISSUE {r.slide}: {r.error}")
        for r in self.failed:
            lines.append(f"FAILED {r.slide}: {r.error}")
        return "\n".join(lines)


#: Appended to the encoder name of a ``random_weights=True`` run (folders and ``encoder``).
RANDOM_WEIGHTS_SUFFIX = "-random-weights"


def features_complete(features: Path, parquet: Path | None = None) -> int | None:
    """Return the number of patches of a complete slide output, or None.

    Parameters
    ----------
    features : pathlib.Path
        The features .h5 file.
    parquet : pathlib.Path or None, default None
        The matching Parquet file, checked too when given.

    Returns
    -------
    int or None
        The number of patches, or None when the output is missing, truncated or inconsistent.
    """
    if not features.is_file() or (parquet is not None and not parquet.is_file()):
        return None
    try:
        import h5py

        with h5py.File(features, "r") as f:
            feats, coords = f["features"], f["coords"]
            if feats.ndim != 2 or coords.shape != (feats.shape[0], 2):
                return None
            n = int(feats.shape[0])
        if parquet is not None:
            import pyarrow.parquet as pq

            if pq.read_metadata(parquet).num_rows != n:
                return None
    except Exception:
        return None
    return n


def _stored_attrs(features: Path) -> dict[str, Any]:
    """Return the attributes of a features file: its coords' and its features'."""
    import h5py

    from .._hdf5 import attr_from_hdf5

    with h5py.File(features, "r") as f:
        out = {k: attr_from_hdf5(v) for k, v in f["coords"].attrs.items()}
        out.update({k: attr_from_hdf5(v) for k, v in f["features"].attrs.items()})
    return out


def encoder_identity(
    model: Any,
    weights: str | os.PathLike[str] | None = None,
    *,
    random_weights: bool = False,
    encoder_name: str | None = None,
) -> tuple[str, str]:
    """Check a model and its weights, and return the encoder name and weights fingerprint.

    These are what :func:`embed_slides` records with the features and compares on a rerun. The
    real models (those with a TRIDENT name: ``uni2-h``, ``uni``, ``conch``) need their weights:
    random parameters never pass for a model unless ``random_weights=True`` says so.

    Parameters
    ----------
    model : str or torch.nn.Module
        A model name of ``tumorboard.models`` or a torch module.
    weights : str or os.PathLike or None, default None
        The checkpoint of a model name.
    random_weights : bool, default False
        Allow a real model name without weights (random parameters, for tests).
    encoder_name : str or None, default None
        The name of the ``features_{encoder}`` folders (default: TRIDENT's name of a real model,
        else the model name, or the module's ``encoder_name`` or class name). With
        ``random_weights=True`` the name gets :data:`RANDOM_WEIGHTS_SUFFIX`
        (``features_uni_v2-random-weights``), so random features never land in the folder, or
        carry the ``encoder`` attribute, of the real model's.

    Returns
    -------
    tuple of str
        ``(encoder name, weights fingerprint)``: ``sha256:<hex>`` of the checkpoint file,
        ``random`` for a name without weights, a module's ``weights_fingerprint`` attribute when
        it has one, else ``state-sha256:<hex>`` of its state dict.

    Raises
    ------
    InvalidArgumentError
        A real model name without weights (and without ``random_weights``), weights and
        ``random_weights`` together, weights or ``random_weights`` with a module, or a model
        that is not a patch encoder.
    MissingFileError
        The checkpoint does not exist.
    """
    if not isinstance(random_weights, bool):
        raise InvalidTypeError(f"random_weights: expected a bool, got {random_weights!r}")
    if isinstance(model, (str, os.PathLike)) and str(model).endswith(".onnx"):
        raise InvalidArgumentError(
            "model: pass the encoder name or module; an .onnx file carries no preprocessing "
            "metadata (use backend='onnxruntime' to run the exported graph)"
        )
    if isinstance(model, str):
        from .. import models
        from ..models.weights import RANDOM_WEIGHTS, file_fingerprint

        info = models.info(model)
        if info.kind != "encoder":
            encoders = [n for n in models.available() if models.info(n).kind == "encoder"]
            raise InvalidArgumentError(
                f"model: {model!r} is a {info.kind.replace('_', ' ')}, not a patch encoder; "
                f"patch encoders: {', '.join(encoders)}"
            )
        if weights is not None and random_weights:
            raise InvalidArgumentError(
                f"model {model!r}: pass either weights={str(weights)!r} (--weights) or "
                "random_weights=True (--random-weights), not both"
            )
        if weights is None and info.trident_name is not None and not random_weights:
            raise InvalidArgumentError(
                f"model {model!r} needs its weights: pass weights=PATH (--weights PATH; official "
                f"weights: {info.weights_source}), or random_weights=True (--random-weights) to "
                "run it with random parameters for testing; random weights never pass for a model"
            )
        name = encoder_name or info.trident_name or info.name
        if random_weights and not name.endswith(RANDOM_WEIGHTS_SUFFIX):
            name += RANDOM_WEIGHTS_SUFFIX  # never the folder of the real model's features
        fingerprint = RANDOM_WEIGHTS if weights is None else file_fingerprint(weights)
        return name, fingerprint
    if not callable(model):
        raise InvalidTypeError(f"model: expected a model name or a torch module, got {type(model)}")
    if weights is not None or random_weights:
        raise InvalidArgumentError(
            "weights= and random_weights= are only used with a model name (a module has its own)"
        )
    name = encoder_name or getattr(model, "encoder_name", None) or type(model).__name__.lower()
    fingerprint = getattr(model, "weights_fingerprint", None)
    if fingerprint is None:
        from torch import nn

        from ..models.weights import state_dict_fingerprint

        if not isinstance(model, nn.Module):
            raise InvalidTypeError(
                f"model: a {type(model).__name__} is not a torch module; give it a "
                "weights_fingerprint attribute saying which weights it computes with"
            )
        fingerprint = state_dict_fingerprint(model)
    return str(name), str(fingerprint)


def _load_runner(
    model: Any,
    weights: Any,
    backend: str,
    device: str,
    dtype: str,
    cache: Path,
    name: str,
    *,
    compile: Any = False,
    fingerprint: str | None = None,
    batch_size: int | None = None,
) -> tuple[Any, int, tuple[float, ...], tuple[float, ...], str]:
    """Return (backend runner, image size, mean, std, interpolation)."""
    from ._backends import cached_module, check_compile, prepared_key

    mode = check_compile(compile)
    cache_key = (name, fingerprint) if fingerprint is not None else None
    module = None
    if backend == "torch" and cache_key is not None and (mode is not None or dtype == "fp8"):
        from ..models import resolve_device

        dev = resolve_device(device)
        resolved = run_precision(backend, str(dev), dtype)
        module = cached_module(prepared_key(cache_key, dev, resolved, mode))
    if module is None and isinstance(model, str):
        import warnings

        from .. import models
        from ..models import RandomWeightsWarning

        with warnings.catch_warnings():
            if weights is None:  # random weights were asked for explicitly (encoder_identity)
                warnings.simplefilter("ignore", RandomWeightsWarning)
            module = models.load(model, weights=weights, device="cpu", dtype="fp32")
    elif module is None:
        module = model
    size, mean, std, interpolation = encoder_meta(module)
    if backend == "torch":
        # a compiled encoder pads every batch to batch_size: one static shape for all slides,
        # whichever slide comes first (the first slide's only batch may be a short one)
        runner: Any = TorchBackend(module, device=device, dtype=dtype, compile=compile,
                                   mean=mean, std=std, batch_size=batch_size,
                                   cache_key=cache_key)  # fmt: skip
    else:
        path = export_onnx(module, cache / f"{name}.onnx", image_size=size)
        runner = OnnxBackend(path, device=device)
        runner.embed_dim = getattr(module, "embed_dim", None)
    return runner, size, mean, std, interpolation


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


def _in_flight_depth(runner: Any) -> int:
    """Batches left in flight after a submit: one on CUDA (copy/compute overlap), else none."""
    return 1 if getattr(runner, "cuda", False) else 0


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


def _produce(
    jobs: list[_SlideJob],
    q: queue.Queue,
    stop: threading.Event,
    *,
    opts: TilingOptions,
    out: Path,
    batch_size: int,
    size: int,
    mean: tuple[float, ...],
    std: tuple[float, ...],
    interpolation: str,
    threads: int,
    patch_dtype: str = "float32",
    decode_device: str | None = None,
) -> None:
    """Stream every slide's batches into ``q``, opening the next slide while one streams.

    An opener thread opens and tiles slide k+1 and reads its first batch while this thread
    streams slide k (one slide of lookahead): the model does not wait for a slide's opening,
    tiling and first batch between slides (measured on an H100 with 20 slides of 1,024
    patches: 25.6% of the forward window idle between slides when slides were opened one
    after another). Items reach ``q`` in slide order, as before.
    """
    handoff: queue.Queue = queue.Queue(maxsize=1)
    open_kw = dict(opts=opts, out=out, batch_size=batch_size, size=size, mean=mean, std=std,
                   interpolation=interpolation, threads=threads, patch_dtype=patch_dtype,
                   decode_device=decode_device)  # fmt: skip

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


class _Writer:
    """Streams one slide's embeddings into temporary .h5 and .parquet files.

    Both files are :func:`~tumorboard._io.atomic_path` temporaries held open in one exit stack:
    :meth:`finish` renames the Parquet file and then the features file (last: it marks the slide
    complete); :meth:`abort` removes both.
    """

    def __init__(self, job: _SlideJob, attrs: dict[str, Any]) -> None:
        import h5py
        import pyarrow.parquet as pq

        self.job = job
        # the features dataset's attributes beyond name and savetodir
        self.attrs = {**attrs, "reader": job.reader, "patch_loader": job.loader}
        meta = {**(job.coords_attrs or {}), **attrs, "slide": job.name}
        self.metadata = {  # text as is, anything else as JSON (None -> null)
            k: v if isinstance(v, str) else json.dumps(v, sort_keys=True)
            for k, v in meta.items()
            if k in _PARQUET_META
        }
        for p in (job.features, job.parquet):
            p.parent.mkdir(parents=True, exist_ok=True)
            remove_temp_files(p.parent, target=p.name)  # left by a killed run
        with contextlib.ExitStack() as files:  # a failure here removes what was created
            # features first, so that it is renamed last
            self.h5_tmp = files.enter_context(atomic_path(job.features))
            self.pq_tmp = files.enter_context(atomic_path(job.parquet))
            self.h5 = h5py.File(self.h5_tmp, "w")
            self._files = files.pop_all()
        self.pq = pq
        self.pq_writer: Any = None
        self.features: Any = None
        self.rows = 0
        self.buf: list[tuple[np.ndarray, np.ndarray]] = []
        self.buf_rows = 0
        self.t_start = time.perf_counter()
        self.aborted = False
        self.ended = False  # every batch of the slide was submitted
        self.seconds = 0.0  # from the slide's start to its end item

    def end(self) -> None:
        """Mark every batch of the slide submitted (its last ones may still be in flight)."""
        self.ended = True
        self.seconds = time.perf_counter() - self.t_start

    def _schema(self, d: int) -> Any:
        import pyarrow as pa

        return pa.schema([("slide", pa.string()), ("x", pa.int64()), ("y", pa.int64()),
                          ("embedding", pa.list_(pa.float32(), d))],
                         metadata=self.metadata)  # fmt: skip

    def _flush(self) -> None:
        import pyarrow as pa

        if not self.buf:
            return
        emb = np.concatenate([b[0] for b in self.buf])
        xy = np.concatenate([b[1] for b in self.buf])
        d = emb.shape[1]
        if self.pq_writer is None:
            self.pq_writer = self.pq.ParquetWriter(self.pq_tmp, self._schema(d))
        table = pa.table(
            {
                "slide": pa.array([self.job.name] * len(xy), pa.string()),
                "x": pa.array(xy[:, 0], pa.int64()),
                "y": pa.array(xy[:, 1], pa.int64()),
                "embedding": pa.FixedSizeListArray.from_arrays(
                    pa.array(emb.reshape(-1), pa.float32()), d
                ),
            },
            schema=self._schema(d),
        )
        self.pq_writer.write_table(table)
        self.buf, self.buf_rows = [], 0

    def add(self, emb: np.ndarray, coords: np.ndarray) -> None:
        """Append one batch of embeddings [B, D] with their level-0 coords [B, 2]."""
        emb = np.ascontiguousarray(emb, dtype=np.float32)
        if emb.ndim != 2 or emb.shape[0] != coords.shape[0]:
            raise InvalidArgumentError(
                f"model returned shape {emb.shape} for a batch of {coords.shape[0]} patches; "
                "expected [B, D]"
            )
        if self.features is None:
            d = emb.shape[1]
            self.features = self.h5.create_dataset(
                "features", shape=(0, d), maxshape=(None, d), dtype=np.float32,
                chunks=(max(1, min(1024, 2**20 // (4 * d))), d),
            )  # fmt: skip
        elif emb.shape[1] != self.features.shape[1]:
            raise InvalidArgumentError(
                f"embedding width changed from {self.features.shape[1]} to {emb.shape[1]}"
            )
        n0 = self.rows
        self.features.resize(n0 + emb.shape[0], axis=0)
        self.features[n0:] = emb
        self.rows += emb.shape[0]
        self.buf.append((emb, coords))
        self.buf_rows += emb.shape[0]
        if self.buf_rows >= 16384:
            self._flush()

    def finish(self, embed_dim: int | None, savetodir: str) -> None:
        """Write the coords and attributes, close both files and rename them into place."""
        from .._hdf5 import attr_to_hdf5

        job = self.job
        if self.features is None:  # no patches: TRIDENT writes [0, D]
            d = int(embed_dim or 0)
            self.features = self.h5.create_dataset("features", shape=(0, d), maxshape=(None, d),
                                                   dtype=np.float32)  # fmt: skip
        coords = np.asarray(job.coords, dtype=np.int64).reshape(-1, 2)
        if coords.shape[0] != self.rows:
            raise CoreError(f"{self.rows} embeddings for {coords.shape[0]} patches")
        cds = self.h5.create_dataset("coords", data=coords, maxshape=(None, 2))
        for k, v in (job.coords_attrs or {}).items():
            cds.attrs[k] = attr_to_hdf5(v)
        self.features.attrs["name"] = job.name
        self.features.attrs["savetodir"] = savetodir
        for k, v in self.attrs.items():
            self.features.attrs[k] = attr_to_hdf5(v)
        width = int(self.features.shape[1])
        self.h5.close()
        self._flush()
        if self.pq_writer is None:
            self.pq.write_table(self._schema(width).empty_table(), self.pq_tmp)
        else:
            self.pq_writer.close()
        self._files.close()  # renames the Parquet file, then the features file

    def abort(self, error: BaseException) -> None:
        """Close and remove both temporary files; the slide's final files stay as they were.

        Parameters
        ----------
        error : BaseException
            Why the slide is abandoned (handed to the temporary files' context managers).
        """
        self.aborted = True
        with contextlib.suppress(Exception):
            self.h5.close()
        if self.pq_writer is not None:
            with contextlib.suppress(Exception):
                self.pq_writer.close()
        self._files.__exit__(type(error), error, error.__traceback__)


#: Keys of the Parquet schema metadata (from the coords and features attributes).
_PARQUET_META = (
    "encoder",
    "weights_fingerprint",
    "slide",
    "source_path",
    "target_magnification",
    "patch_size",
    "overlap",
    "segmentation",
    "min_tissue",
    "mpp_override",
)


def run_precision(backend: str, device: str, dtype: str) -> str:
    """Return the precision a run computes in, as its features record it (``precision``).

    The same rule as the backends: onnxruntime computes in fp32; torch in ``dtype``, where
    "auto" is bf16 on CUDA and fp32 elsewhere.
    """
    if backend != "torch":
        return "fp32"
    if dtype != "auto":
        return dtype
    if device == "cpu":
        return "fp32"
    from ..models import resolve_device

    return "bf16" if resolve_device(device).type == "cuda" else "fp32"


def _preflight(
    job: _SlideJob,
    opts: TilingOptions,
    out: Path,
    identity: dict[str, str],
    force: bool,
    precision: str,
) -> SlideResult | None:
    """Decide a slide from its stored outputs, before any model is loaded.

    Returns its result when it is skipped (complete, same settings and precision) or refused
    (made with other settings, another precision, e.g. bf16 features for an fp32 run, or from
    another slide of the same name), else None (to embed; ``job.reuse`` set when a `tile` run
    left coords made with the same settings).
    """
    if force:
        return None
    n = features_complete(job.features, job.parquet)
    if n is not None:
        stored = _stored_attrs(job.features)
        why = opts.mismatch(job.features, stored, job.path,
                            extra={**identity, "precision": precision})  # fmt: skip
        if why is not None and (stored.get("precision") == "fp8") != (precision == "fp8"):
            why += " (FP8 features and unquantised ones are not interchangeable)"
        if why is not None:
            return SlideResult(str(job.path), job.name, "failed", error=why,
                               features_path=job.features)  # fmt: skip
        return SlideResult(str(job.path), job.name, "skipped", n_patches=n,
                           features_path=job.features, parquet_path=job.parquet,
                           coords_path=job.coords_path)  # fmt: skip
    stored, why = opts.stored_coords(out, job.name, job.path)
    if why is not None:
        return SlideResult(str(job.path), job.name, "failed", error=why,
                           coords_path=job.coords_path)  # fmt: skip
    job.reuse = stored
    return None


def embed_slides(
    slides: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    model: Any,
    out: str | os.PathLike[str],
    tiling: TilingOptions | None = None,
    options: EmbedOptions | None = None,
    weights: str | os.PathLike[str] | None = None,
    random_weights: bool = False,
    encoder_name: str | None = None,
    force: bool = False,
    progress: bool = True,
    stream: Any = None,
    executor: Literal["local", "ray"] = "local",
    ray_address: str | None = None,
    **deprecated: Any,
) -> EmbedReport:
    """Embed every patch of every slide of a collection with a patch encoder.

    What decides the patches is ``tiling=`` (:class:`~tumorboard.slides.TilingOptions`, shared
    with ``tumorboard tile``); how they are computed is ``options=`` (:class:`EmbedOptions`).
    The remaining keywords say which job it is (model, weights, encoder name, output folder),
    whether to redo it, where it runs and how it reports.

    Parameters
    ----------
    slides : str or os.PathLike or iterable of them
        Slide files and folders of slides (a folder gives its slide files,
        :func:`~tumorboard.slides.collect_slides`). Missing inputs are reported failed; when
        none is a slide file, nothing runs.
    model : str or torch.nn.Module
        A model name for ``tumorboard.models.load`` ("uni2-h", "uni", "conch", "uni2-tiny",
        ...) or a torch module mapping normalised [B, 3, S, S] images to [B, D] (its
        ``image_size``, ``mean`` and ``std`` attributes set the preprocessing; 224 px and
        ImageNet statistics when absent).
    out : str or os.PathLike
        The job folder (see the module docstring for its layout).
    tiling : TilingOptions or None, default None
        How slides are tiled: magnification, patch size, overlap, tissue threshold,
        segmentation (a preset name, a :class:`~tumorboard.slides.SegmentationOptions` or
        None), its thumbnail resolution, the mpp override, the reader and the threads reading,
        preprocessing and segmenting (None: ``TilingOptions()``, 20x, 256 px, no overlap, the
        default segmentation preset, all cores).
    options : EmbedOptions or None, default None
        How the patches are embedded: batch size, backend, device, dtype, queue size,
        ``torch.compile`` and where JPEG tiles are decoded (None: ``EmbedOptions()``; see
        :class:`EmbedOptions` for each field and what the features record of it).
    weights : str or os.PathLike or None, default None
        Checkpoint of a model name. The real models (``uni2-h``, ``uni``, ``conch``) need it.
    random_weights : bool, default False
        Run a real model name with random parameters (for tests; recorded as ``random``).
    encoder_name : str or None, default None
        The name used in ``features_{encoder}`` (default: TRIDENT's name for uni2-h/uni/conch,
        else the model name or the module's ``encoder_name`` or class name).
    force : bool, default False
        Redo slides whose outputs exist, whatever settings made them.
    progress : bool, default True
        Print a line per finished slide and, at least every 2 s, a live patches/s line to
        ``stream``.
    stream : file-like or None, default None
        Where progress goes (default stderr; see ``tumorboard._progress.SlideProgress``).
    executor : {"local", "ray"}, default "local"
        Where the work runs: "local" (this process) or "ray": slides are handed one at a time to
        Ray actors (one per GPU, else per CPU), each running this engine on its slide with the
        same ``tiling`` and ``options`` (:func:`tumorboard.dist.embed_slides_ray`; needs
        ``tumorboard[dist]``). Outputs and resume behaviour are identical to a local run; a
        slide whose worker dies is retried.
    ray_address : str or None, default None
        The Ray cluster for ``executor="ray"`` (None: a new local Ray, or this process's
        connection; "auto": the cluster started with ``ray start``).
    **deprecated
        The fields of ``tiling`` (``magnification``, ``patch_size``, ``overlap``,
        ``min_tissue``, ``segmentation``, ``seg_mpp``, ``mpp``, ``reader``, ``threads``) and of
        ``options`` (``batch_size``, ``backend``, ``device``, ``dtype``, ``queue_size``,
        ``compile``, ``decode``) as separate keywords, deprecated: they give the same result
        with a :class:`DeprecationWarning` naming the new spelling, and are refused together
        with the object that holds them.

    Returns
    -------
    EmbedReport
        The per-slide results; failed and tissue-less slides are listed there, not raised.

    Raises
    ------
    InvalidArgumentError
        An option out of range, a deprecated keyword together with ``tiling=``/``options=``,
        a device, precision or decoder this machine lacks, or a real model name without
        weights (nothing has run).
    InvalidTypeError
        ``tiling`` or ``options`` of the wrong type.
    MissingFileError
        No input is a slide file, or the checkpoint does not exist (nothing has run).
    """
    t_start = time.perf_counter()
    opts, run = resolve_options("embed_slides", tiling, options, deprecated)
    batch_size, queue_size = run.batch_size, run.queue_size
    backend, device, dtype, compile, decode = (run.backend, run.device, run.dtype, run.compile,
                                               run.decode)  # fmt: skip
    if executor not in ("local", "ray"):
        raise InvalidArgumentError(f"executor: expected 'local' or 'ray', got {executor!r}")
    decode_device: str | None = None
    if decode == "gpu" and executor == "local":
        # no CUDA, or no nvImageCodec, is refused before anything runs
        decode_device = str(resolve_decode_device(device)[0])
    if backend == "torch" and executor == "local":
        # an unknown device, CUDA asked for without CUDA, or FP8 on a device without FP8 tensor
        # cores, is refused before the model loads
        from ..models import resolve_device

        dev = resolve_device(device)
        if dtype == "fp8":
            from ..models.fp8 import fp8_available

            why = fp8_available(dev)
            if why is not None:
                raise InvalidArgumentError(f"dtype='fp8': {why}; use dtype='bf16' there")
    found = collect_slides(slides)
    if not found.files:
        listed = "; ".join(f"{p}: {why}" for p, why in found.missing) or "no inputs"
        raise MissingFileError(f"slides: no slide files found ({listed})")
    missing = {
        i: SlideResult(str(p), slide_name(p), "failed", error=why)
        for i, (p, why) in enumerate(found.items)
        if why is not None
    }
    if executor == "ray":
        from ..dist import embed_slides_ray

        rep = embed_slides_ray(
            list(found.files), ray_address=ray_address, progress=progress, stream=stream,
            model=model, weights=weights, random_weights=random_weights, out=out, tiling=opts,
            options=run, encoder_name=encoder_name, force=force,
        )  # fmt: skip
        ran = iter(rep.results)
        ordered = [missing[i] if i in missing else next(ran) for i in range(len(found.items))]
        return dataclasses.replace(rep, results=tuple(ordered))
    encoder, fingerprint = encoder_identity(model, weights, random_weights=random_weights,
                                            encoder_name=encoder_name)  # fmt: skip
    identity = {"encoder": encoder, "weights_fingerprint": fingerprint}
    precision = run_precision(backend, device, dtype)
    out_dir = Path(out)
    job_dir = opts.job_dir(out_dir)
    features_dir = job_dir / f"features_{encoder}"
    parquet_dir = job_dir / f"embeddings_{encoder}"
    prog = SlideProgress(len(found.items), stream=stream, enabled=progress)
    results: dict[int, SlideResult] = {}

    def record(result: SlideResult, index: int) -> None:
        results[index] = result
        prog.finished(result)

    position = [i for i, (_, why) in enumerate(found.items) if why is None]
    for i, r in missing.items():
        record(r, i)
    jobs: list[_SlideJob] = []
    for slide in plan_slide_names(found.files):
        index = position[slide.index]  # the slide's place among all inputs
        if slide.error is not None:
            dup = SlideResult(str(slide.path), slide.name, "failed", error=slide.error)
            record(dup, index)
            continue
        nm = slide.name
        job = _SlideJob(index, slide.path, nm, features_dir / f"{nm}.h5",
                        parquet_dir / f"{nm}.parquet", opts.coords_path(out_dir, nm))  # fmt: skip
        decided = _preflight(job, opts, out_dir, identity, force, precision)
        if decided is not None:
            record(decided, job.index)
        else:
            jobs.append(job)

    n_total = 0
    runner: Any = None
    if jobs:  # the model is loaded only when a slide needs it
        out_dir.mkdir(parents=True, exist_ok=True)
        try:
            runner, size, mean, std, interpolation = _load_runner(
                model, weights, backend, device, dtype, out_dir / ".onnx", encoder,
                compile=compile, fingerprint=fingerprint, batch_size=batch_size,
            )  # fmt: skip
        except BaseException:
            prog.close()
            raise
        n_total = _run(jobs, runner, prog, record, opts=opts, out=out_dir, identity=identity,
                       backend=backend, batch_size=batch_size, queue_size=queue_size,
                       size=size, mean=mean, std=std, interpolation=interpolation,
                       features_dir=features_dir, decode_device=decode_device)  # fmt: skip
    else:
        prog.close()
    ordered = tuple(results[i] for i in sorted(results))
    return EmbedReport(
        results=ordered,
        encoder=encoder,
        weights_fingerprint=fingerprint,
        job_dir=job_dir,
        features_dir=features_dir,
        parquet_dir=parquet_dir,
        coords_dir=job_dir / "patches",
        n_patches=n_total,
        seconds=time.perf_counter() - t_start,
        backend=backend,
        device=str(getattr(runner, "device", "cpu" if device == "auto" else device)),
    )


def _run(
    jobs: list[_SlideJob],
    runner: Any,
    prog: SlideProgress,
    record: Any,
    *,
    opts: TilingOptions,
    out: Path,
    identity: dict[str, str],
    backend: str,
    batch_size: int,
    queue_size: int,
    size: int,
    mean: tuple[float, ...],
    std: tuple[float, ...],
    interpolation: str,
    features_dir: Path,
    decode_device: str | None = None,
) -> int:
    """Embed the slides of ``jobs`` (producer thread + model on this thread); return the patches."""
    q: queue.Queue = queue.Queue(maxsize=queue_size)
    stop = threading.Event()
    # on CUDA the patches cross PCIe as uint8 and are normalised on the GPU
    gpu_normalise = bool(getattr(runner, "accepts_uint8", False) and runner.cuda)
    producer = threading.Thread(
        target=_produce,
        args=(jobs, q, stop),
        kwargs=dict(
            opts=opts,
            out=out,
            batch_size=batch_size,
            size=size,
            mean=mean,
            std=std,
            interpolation=interpolation,
            threads=opts.threads or os.cpu_count() or 1,
            patch_dtype="uint8" if gpu_normalise else "float32",
            decode_device=decode_device,
        ),
        name="tb-embed-producer",
        daemon=True,
    )
    producer.start()
    precision = str(getattr(runner, "precision", "fp32"))
    attrs = {**identity, "backend": backend, "dtype": precision, "precision": precision,
             "compiled": str(getattr(runner, "compile_mode", None) or "no")}  # fmt: skip
    n_total = 0
    embed_dim: int | None = getattr(runner, "embed_dim", None)
    writer: _Writer | None = None  # the slide whose batches are arriving
    failed: set[int] = set()  # indices of jobs the model failed on: the rest is dropped
    # batches submitted but not collected, with the writer each belongs to: a slide's last
    # batch is collected (and the slide finished) after the next slide's first batch has
    # been submitted, so the GPU is not idle while a slide's files are written
    pending: list[tuple[_Writer, np.ndarray]] = []
    depth = _in_flight_depth(runner)

    def finish(w: _Writer) -> None:
        t0 = time.perf_counter()
        w.finish(embed_dim, str(features_dir))
        job = w.job
        seconds = w.seconds + time.perf_counter() - t0
        record(SlideResult(str(job.path), job.name, "done", n_patches=job.n,
                           features_path=job.features, parquet_path=job.parquet,
                           seconds=seconds, coords_path=job.coords_path), job.index)  # fmt: skip

    def fail_writer(w: _Writer | None, job: _SlideJob, cause: BaseException) -> None:
        """Abandon ``job``'s slide: its temporary files and its batches still in flight."""
        nonlocal writer
        failed.add(job.index)
        if w is not None and not w.aborted:
            w.abort(cause)  # its batches still in flight are collected and dropped
        if writer is w:
            writer = None
        err = str(cause) if isinstance(cause, _SlideError) else f"{type(cause).__name__}: {cause}"
        seconds = (time.perf_counter() - w.t_start) if w is not None else 0.0
        record(SlideResult(str(job.path), job.name, "failed", error=err, seconds=seconds,
                           coords_path=job.coords_path), job.index)  # fmt: skip
        if os.environ.get("TUMORBOARD_DEBUG"):
            traceback.print_exc()

    def collect_until(limit: int) -> None:
        nonlocal n_total, embed_dim
        while runner.in_flight > limit and pending:
            w, xy = pending.pop(0)  # results come back in submission order
            try:
                emb = runner.collect()
                if w.aborted:
                    continue
                w.add(emb, xy)
                embed_dim = int(emb.shape[1])
                n_total += emb.shape[0]
                prog.add_patches(emb.shape[0])
                prog.update(w.job.name, w.rows, w.job.n)
                if w.ended and not any(p[0] is w for p in pending):
                    finish(w)
            except Exception as exc:
                if not w.aborted:
                    fail_writer(w, w.job, exc)

    try:
        while True:
            item = q.get()
            if item is _END:
                break
            kind, job = item[0], item[1]
            if job.index in failed:  # the model failed on this slide: drop the rest of it
                continue
            if kind == "error":
                fail_writer(writer if writer is not None and writer.job is job else None, job,
                            _SlideError(job.error or "unknown error"))  # fmt: skip
                continue
            if kind == "empty":  # no patch: no features (stale ones of other settings go)
                for stale in (job.features, job.parquet):
                    stale.unlink(missing_ok=True)
                record(SlideResult(str(job.path), job.name, "no tissue", error=job.error,
                                   coords_path=job.coords_path), job.index)  # fmt: skip
                continue
            if kind == "start":
                try:
                    writer = _Writer(job, attrs)
                except Exception as exc:
                    fail_writer(None, job, exc)
                    continue
                prog.start(job.name, job.n)
                continue
            w = writer
            if w is None or w.job is not job:
                continue  # the slide was abandoned
            try:
                if kind == "batch":
                    batch = item[2]
                    runner.submit(batch.images)
                    pending.append((w, batch.coords))
                elif kind == "end":
                    w.end()
                    writer = None
                    if not any(p[0] is w for p in pending):
                        finish(w)
            except Exception as exc:
                fail_writer(w, job, exc)
                continue
            collect_until(depth)
        collect_until(0)  # the last slide's last batches
    except BaseException as exc:  # interrupted: no half-written slide is left behind
        open_writers = {id(p[0]): p[0] for p in pending}
        if writer is not None:
            open_writers[id(writer)] = writer
        for w in open_writers.values():
            if not w.aborted:
                with contextlib.suppress(Exception):
                    w.abort(exc)
        raise
    finally:
        stop.set()
        producer.join(timeout=30)
        prog.close()
    return n_total


def read_features(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Read a TRIDENT features file.

    Parameters
    ----------
    path : str or os.PathLike
        The features .h5 file.

    Returns
    -------
    tuple
        ``(features, coords, attrs)``: features [N, D] float32, coords [N, 2] int64, and the
        attributes of the ``features`` dataset (``name``, ``savetodir``, ``encoder``,
        ``weights_fingerprint``, ...).
    """
    import h5py

    from .._hdf5 import attr_from_hdf5

    with h5py.File(path, "r") as f:
        feats = np.asarray(f["features"][...], dtype=np.float32)
        coords = np.asarray(f["coords"][...], dtype=np.int64)
        attrs = {k: attr_from_hdf5(v) for k, v in f["features"].attrs.items()}
    return feats, coords, attrs
