"""The slide-collection embedding engine (``tumorboard.embed.embed_slides``).

A producer thread walks the collection: for each slide it opens the file, segments the tissue,
builds (or reuses) the TRIDENT coords file and iterates the slides layer's threaded
:class:`~tumorboard.slides.PatchLoader`, putting preprocessed batches on a bounded queue. The
calling thread takes batches off the queue and runs the model backend, so reading and decoding
overlap compute (and, on CUDA, the host-to-device copy overlaps both; see ``_backends``).

Outputs per slide (layouts of mahmoodlab/TRIDENT ``trident/wsi_objects/WSI.py``,
``extract_patch_features``, and ``trident/Processor.py``@a91fa84):

* ``{out}/features_{encoder}/{name}.h5``: TRIDENT's features file: ``features`` [N, D] float32
  with attributes ``name``, ``savetodir``, ``encoder``; ``coords`` [N, 2] int64 with the coords
  file's attributes copied. An empty slide gives [0, D] and [0, 2].
* ``{out}/embeddings_{encoder}/{name}.parquet``: columns ``slide`` (string), ``x``, ``y`` (int64,
  level-0 top-left), ``embedding`` (fixed_size_list<float32>[D]); the folder reads as one table
  (``polars.scan_parquet(dir / "*.parquet")``).
* ``{out}/{mag}x_{patch}px_0px_overlap/patches/{name}_patches.h5``: TRIDENT's coords file.

Every file is written under a temporary name and renamed into place; the features .h5 is renamed
last and marks the slide complete. A rerun skips complete slides and redoes the rest (leftover
temporary files of a killed run are removed). A slide that fails (corrupt file, no
magnification, model error) is recorded in the :class:`EmbedReport` and the collection goes on.
"""

from __future__ import annotations

import contextlib
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
from ..errors import CoreError, InvalidArgumentError, InvalidTypeError
from ..slides import plan_slide_names
from ._backends import DTYPES, OnnxBackend, TorchBackend, encoder_meta, export_onnx

#: TRIDENT's encoder names for the models whose features it also stores.
TRIDENT_ENCODER_NAMES = {"uni2-h": "uni_v2", "uni": "uni_v1", "conch": "conch_v1"}

Status = Literal["done", "skipped", "failed"]


@dataclass(frozen=True)
class SlideResult:
    """What happened to one slide.

    Attributes
    ----------
    slide : str
        The slide file.
    name : str
        Its output name.
    status : {"done", "skipped", "failed"}
        "skipped" means already complete; for "failed", ``error`` says why.
    n_patches : int, default 0
        Patches embedded (or found, when skipped).
    features_path, parquet_path : pathlib.Path or None, default None
        The slide's output files.
    error : str or None, default None
        Why the slide failed.
    seconds : float, default 0.0
        Time spent on the slide.
    """

    slide: str
    name: str
    status: Status
    n_patches: int = 0
    features_path: Path | None = None
    parquet_path: Path | None = None
    error: str | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class EmbedReport:
    """The result of :func:`embed_slides`.

    Attributes
    ----------
    results : tuple of SlideResult
        One :class:`SlideResult` per input slide, in input order.
    encoder : str
        The encoder name used in the output folders.
    features_dir, parquet_dir, coords_dir : pathlib.Path
        Where the outputs are.
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
    features_dir: Path
    parquet_dir: Path
    coords_dir: Path
    n_patches: int
    seconds: float
    backend: str = "torch"
    device: str = "cpu"

    @property
    def done(self) -> tuple[SlideResult, ...]:
        """The slides embedded in this run."""
        return tuple(r for r in self.results if r.status == "done")

    @property
    def skipped(self) -> tuple[SlideResult, ...]:
        """The slides skipped as already complete."""
        return tuple(r for r in self.results if r.status == "skipped")

    @property
    def failed(self) -> tuple[SlideResult, ...]:
        """The slides that failed."""
        return tuple(r for r in self.results if r.status == "failed")

    @property
    def ok(self) -> bool:
        """True when no slide failed."""
        return not self.failed

    @property
    def patches_per_second(self) -> float:
        """Throughput of the run (0 for a run of no measurable time)."""
        return self.n_patches / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        """Return a few lines for people: counts, throughput, and every failure with its reason."""
        lines = [
            f"embedded {len(self.done)} slide(s), skipped {len(self.skipped)} complete, "
            f"failed {len(self.failed)}; {self.n_patches} patches in {self.seconds:.1f} s "
            f"({self.patches_per_second:.1f} patches/s, {self.backend} on {self.device})",
            f"features: {self.features_dir}",
            f"parquet:  {self.parquet_dir}",
        ]
        for r in self.failed:
            lines.append(f"FAILED {r.slide}: {r.error}")
        return "\n".join(lines)


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


def _resolve_model(
    model: Any, weights: Any, backend: str, device: str, dtype: str, cache: Path
) -> tuple[Any, str, int, tuple[float, ...], tuple[float, ...], str]:
    """Return (backend runner, encoder name, image size, mean, std, interpolation)."""
    if isinstance(model, (str, os.PathLike)) and str(model).endswith(".onnx"):
        raise InvalidArgumentError(
            "model: pass the encoder name or module; an .onnx file carries no preprocessing "
            "metadata (use backend='onnxruntime' to run the exported graph)"
        )
    if isinstance(model, str):
        from .. import models

        name = TRIDENT_ENCODER_NAMES.get(model, model)
        module = models.load(model, weights=weights, device="cpu", dtype="fp32")
    else:
        if not callable(model):
            raise InvalidTypeError(
                f"model must be a model name or a torch module, got {type(model)}"
            )
        if weights is not None:
            raise InvalidArgumentError(
                "weights= is only used with a model name (the module has its own)"
            )
        module = model
        name = getattr(model, "encoder_name", None) or type(model).__name__.lower()
    size, mean, std, interpolation = encoder_meta(module)
    if backend == "torch":
        runner: Any = TorchBackend(module, device=device, dtype=dtype)
    elif backend == "onnxruntime":
        path = export_onnx(module, cache / f"{name}.onnx", image_size=size)
        runner = OnnxBackend(path, device=device)
        runner.embed_dim = getattr(module, "embed_dim", None)
    else:
        raise InvalidArgumentError(f"backend must be 'torch' or 'onnxruntime', got {backend!r}")
    return runner, name, size, mean, std, interpolation


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
    coords: np.ndarray | None = None
    coords_attrs: dict[str, Any] | None = None
    n: int = 0
    error: str | None = None
    skipped_n: int | None = None


def _produce(
    jobs: list[_SlideJob],
    q: queue.Queue,
    stop: threading.Event,
    *,
    mag: float,
    patch: int,
    batch_size: int,
    size: int,
    mean: tuple[float, ...],
    std: tuple[float, ...],
    interpolation: str,
    workers: int,
    coords_root: Path,
    segmentation: Any,
    mpp: float | None,
) -> None:
    from .. import slides

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    for job in jobs:
        if stop.is_set():
            return
        n = features_complete(job.features, job.parquet)
        if n is not None:
            job.skipped_n = n
            if not put(("skip", job)):
                return
            continue
        try:
            with slides.open(job.path, mpp=mpp) as slide:
                cpath = slides.coords_path(coords_root, job.name, magnification=mag,
                                           patch_size=patch)  # fmt: skip
                if segmentation is None:
                    tissue = None
                elif isinstance(segmentation, str):
                    tissue = slides.segment_tissue(slide, preset=segmentation)
                else:
                    tissue = slides.segment_tissue(slide, params=segmentation)
                grid = slides.patch_grid(slide, tissue, magnification=mag, patch_size=patch)
                slides.write_coords(cpath, grid)
                cf = slides.read_coords(cpath)
                job.coords = cf.coords
                job.coords_attrs = cf.attrs
                job.n = len(grid)
                if not put(("start", job)):
                    return
                loader = slides.PatchLoader(slide, grid, batch_size=batch_size, size=size,
                                            mean=mean, std=std, num_workers=workers,
                                            interpolation=interpolation)  # fmt: skip
                for batch in loader:
                    if not put(("batch", job, batch)):
                        return
            if not put(("end", job)):
                return
        except Exception as exc:  # a bad slide never stops the collection
            job.error = f"{type(exc).__name__}: {exc}"
            if not put(("error", job)):
                return
    put(_END)


class _Writer:
    """Streams one slide's embeddings into temporary .h5 and .parquet files.

    Both files are :func:`~tumorboard._io.atomic_path` temporaries held open in one exit stack:
    :meth:`finish` renames the Parquet file and then the features file (last: it marks the slide
    complete); :meth:`abort` removes both.
    """

    def __init__(self, job: _SlideJob, encoder: str) -> None:
        import h5py
        import pyarrow.parquet as pq

        self.job = job
        self.encoder = encoder
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

    def _schema(self, d: int) -> Any:
        import pyarrow as pa

        return pa.schema([("slide", pa.string()), ("x", pa.int64()), ("y", pa.int64()),
                          ("embedding", pa.list_(pa.float32(), d))])  # fmt: skip

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
        self.features.attrs["encoder"] = self.encoder
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
        with contextlib.suppress(Exception):
            self.h5.close()
        if self.pq_writer is not None:
            with contextlib.suppress(Exception):
                self.pq_writer.close()
        self._files.__exit__(type(error), error, error.__traceback__)


def _check_positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise InvalidArgumentError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def embed_slides(
    slides: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    model: Any,
    weights: str | os.PathLike[str] | None = None,
    out: str | os.PathLike[str],
    mag: float = 20,
    patch: int = 256,
    batch_size: int = 64,
    backend: Literal["torch", "onnxruntime"] = "torch",
    device: str = "auto",
    dtype: Literal["auto", "fp32", "fp16", "bf16"] = "auto",
    workers: int | None = None,
    queue_size: int = 8,
    segmentation: Any = "clam",
    mpp: float | None = None,
    encoder_name: str | None = None,
    progress: bool = True,
    stream: Any = None,
    executor: Literal["local", "ray"] = "local",
    ray_address: str | None = None,
) -> EmbedReport:
    """Embed every patch of every slide of a collection with a patch encoder.

    Parameters
    ----------
    slides : str or os.PathLike or iterable of them
        Slide paths (or one path).
    model : str or torch.nn.Module
        A model name for ``tumorboard.models.load`` ("uni2-h", "uni", "conch", "uni2-tiny",
        ...) or a torch module mapping normalised [B, 3, S, S] images to [B, D] (its
        ``image_size``, ``mean`` and ``std`` attributes set the preprocessing; 224 px and
        ImageNet statistics when absent).
    weights : str or os.PathLike or None, default None
        Checkpoint for a model name (None: random weights, with the loader's warning).
    out : str or os.PathLike
        Output folder (see the module docstring for its layout).
    mag : float, default 20
        Target magnification (TRIDENT's patcher).
    patch : int, default 256
        Patch side in pixels at that magnification; patches are resized to the encoder's image
        size.
    batch_size : int, default 64
        Patches per forward.
    backend : {"torch", "onnxruntime"}, default "torch"
        For "onnxruntime" the module is exported once to ``{out}/.onnx/{encoder}.onnx``.
    device : str, default "auto"
        "auto", "cpu" or "cuda[:i]".
    dtype : {"auto", "fp32", "fp16", "bf16"}, default "auto"
        "auto" is bf16 autocast on CUDA, fp32 on CPU (torch only).
    workers : int or None, default None
        Patch-reader threads (default: all cores).
    queue_size : int, default 8
        Batches buffered between the readers and the model.
    segmentation : str or SegmentationParams or None, default "clam"
        A tissue segmentation preset name (``tumorboard.slides.PRESETS``), a
        :class:`~tumorboard.slides.SegmentationParams`, or None to keep every grid patch.
    mpp : float or None, default None
        Override the slides' resolution (needed for plain images).
    encoder_name : str or None, default None
        The name used in ``features_{encoder}`` (default: TRIDENT's name for uni2-h/uni/conch,
        else the model name or the module's class name).
    progress : bool, default True
        Print a line per finished slide and a live patches/s line to ``stream``.
    stream : file-like or None, default None
        Where progress goes (default stderr; see ``tumorboard._progress.SlideProgress``).
    executor : {"local", "ray"}, default "local"
        "local" (this process) or "ray": slides are handed one at a time to Ray actors (one per
        GPU, else per CPU), each running this engine on its slide
        (:func:`tumorboard.dist.embed_slides_ray`; needs ``tumorboard[dist]``). Outputs and
        resume behaviour are identical to a local run; a slide whose worker dies is retried.
        (The scale-out issue calls this ``backend="ray"``; ``backend`` already selects torch
        vs onnxruntime here, so the executor has its own keyword.)
    ray_address : str or None, default None
        The Ray cluster for ``executor="ray"`` (None: a new local Ray, or this process's
        connection; "auto": the cluster started with ``ray start``).

    Returns
    -------
    EmbedReport
        The per-slide results; failed slides are listed there, not raised.
    """
    if executor == "ray":
        from ..dist import embed_slides_ray

        return embed_slides_ray(
            slides, ray_address=ray_address, progress=progress, stream=stream, model=model,
            weights=weights, out=out, mag=mag, patch=patch, batch_size=batch_size,
            backend=backend, device=device, dtype=dtype, workers=workers, queue_size=queue_size,
            segmentation=segmentation, mpp=mpp, encoder_name=encoder_name,
        )  # fmt: skip
    if executor != "local":
        raise InvalidArgumentError(f"executor must be 'local' or 'ray', got {executor!r}")
    t_start = time.perf_counter()
    if isinstance(slides, (str, os.PathLike)):
        slides = [slides]
    paths = [Path(p) for p in slides]
    batch_size = _check_positive(batch_size, "batch_size")
    patch = _check_positive(patch, "patch")
    queue_size = _check_positive(queue_size, "queue_size")
    if workers is not None:
        workers = _check_positive(workers, "workers")
    if dtype not in DTYPES:
        raise InvalidArgumentError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if not float(mag) > 0:
        raise InvalidArgumentError(f"mag must be positive, got {mag}")
    if backend == "torch":  # an unknown or absent device is refused before the model loads
        from ..models import resolve_device

        resolve_device(device)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    runner, name, size, mean, std, interpolation = _resolve_model(
        model, weights, backend, device, dtype, out_dir / ".onnx"
    )
    encoder = encoder_name or name
    features_dir = out_dir / f"features_{encoder}"
    parquet_dir = out_dir / f"embeddings_{encoder}"
    prog = SlideProgress(len(paths), stream=stream, enabled=progress)
    results: dict[int, SlideResult] = {}

    def record(result: SlideResult, index: int) -> None:
        results[index] = result
        prog.finished(result)

    jobs: list[_SlideJob] = []
    for slide in plan_slide_names(paths):
        if slide.error is not None:
            dup = SlideResult(str(slide.path), slide.name, "failed", error=slide.error)
            record(dup, slide.index)
            continue
        nm = slide.name
        jobs.append(_SlideJob(slide.index, slide.path, nm, features_dir / f"{nm}.h5",
                              parquet_dir / f"{nm}.parquet"))  # fmt: skip

    q: queue.Queue = queue.Queue(maxsize=queue_size)
    stop = threading.Event()
    producer = threading.Thread(
        target=_produce,
        args=(jobs, q, stop),
        kwargs=dict(
            mag=float(mag),
            patch=patch,
            batch_size=batch_size,
            size=size,
            mean=mean,
            std=std,
            interpolation=interpolation,
            workers=workers or os.cpu_count() or 1,
            coords_root=out_dir,
            segmentation=segmentation,
            mpp=mpp,
        ),  # fmt: skip
        name="tb-embed-producer",
        daemon=True,
    )
    producer.start()
    n_total = 0
    embed_dim: int | None = getattr(runner, "embed_dim", None)
    writer: _Writer | None = None
    failed_job: _SlideJob | None = None
    t_slide = time.perf_counter()
    pending: list[np.ndarray] = []  # coords of batches submitted but not collected
    # batches left in flight after a submit: one on CUDA (copy/compute overlap), else none
    depth = 1 if getattr(runner, "cuda", False) else 0

    def collect_until(limit: int) -> None:
        nonlocal n_total, embed_dim
        while runner.in_flight > limit:
            emb = runner.collect()
            xy = pending.pop(0)
            assert writer is not None
            writer.add(emb, xy)
            embed_dim = int(emb.shape[1])
            n_total += emb.shape[0]
            prog.add_patches(emb.shape[0])

    def fail(job: _SlideJob, cause: BaseException) -> None:
        nonlocal writer
        if writer is not None:
            writer.abort(cause)
            writer = None
        pending.clear()
        while runner.in_flight:
            runner.collect()
        err = str(cause) if isinstance(cause, _SlideError) else f"{type(cause).__name__}: {cause}"
        record(SlideResult(str(job.path), job.name, "failed", error=err,
                           seconds=time.perf_counter() - t_slide), job.index)  # fmt: skip

    try:
        while True:
            item = q.get()
            if item is _END:
                break
            kind, job = item[0], item[1]
            if kind == "skip":
                record(SlideResult(str(job.path), job.name, "skipped",
                                   n_patches=job.skipped_n or 0, features_path=job.features,
                                   parquet_path=job.parquet), job.index)  # fmt: skip
                continue
            if failed_job is job:  # the model failed on this slide: drop the rest of it
                continue
            if kind == "error":
                fail(job, _SlideError(job.error or "unknown error"))
                continue
            try:
                if kind == "start":
                    t_slide = time.perf_counter()
                    writer = _Writer(job, encoder)
                    prog.update(job.name, 0, job.n, force=True)
                elif kind == "batch":
                    batch = item[2]
                    runner.submit(batch.images)
                    pending.append(batch.coords)
                    collect_until(depth)
                    assert writer is not None
                    prog.update(job.name, writer.rows, job.n)
                elif kind == "end":
                    collect_until(0)
                    assert writer is not None
                    writer.finish(embed_dim, str(features_dir))
                    writer = None
                    record(SlideResult(
                        str(job.path), job.name, "done", n_patches=job.n,
                        features_path=job.features, parquet_path=job.parquet,
                        seconds=time.perf_counter() - t_slide,
                    ), job.index)  # fmt: skip
            except Exception as exc:
                failed_job = job
                fail(job, exc)
                if os.environ.get("TUMORBOARD_DEBUG"):
                    traceback.print_exc()
    except BaseException as exc:  # interrupted: no half-written slide is left behind
        if writer is not None:
            writer.abort(exc)
        raise
    finally:
        stop.set()
        producer.join(timeout=30)
        prog.close()
    ordered = tuple(results[i] for i in sorted(results))
    return EmbedReport(
        results=ordered,
        encoder=encoder,
        features_dir=features_dir,
        parquet_dir=parquet_dir,
        coords_dir=out_dir,
        n_patches=n_total,
        seconds=time.perf_counter() - t_start,
        backend=backend,
        device=str(getattr(runner, "device", "cpu")),
    )


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
        attributes of the ``features`` dataset.
    """
    import h5py

    with h5py.File(path, "r") as f:
        feats = np.asarray(f["features"][...], dtype=np.float32)
        coords = np.asarray(f["coords"][...], dtype=np.int64)
        attrs = {
            k: (v.decode() if isinstance(v, bytes) else v) for k, v in f["features"].attrs.items()
        }
    return feats, coords, attrs
