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

The engine is cut along its jobs: :mod:`._report` holds the result types (:class:`SlideResult`,
:class:`EmbedReport`), :mod:`._producer` the producer thread (slide opening, tiling, batches),
:mod:`._outputs` the features .h5 and Parquet files (writing them, reading them back); this
module holds the encoder identity, the runner loading, the rerun check (``_preflight``),
:func:`embed_slides` and the run loop ``_run``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import threading
import time
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .._progress import SlideProgress
from ..errors import InvalidArgumentError, InvalidTypeError, MissingFileError
from ..slides import (
    TilingOptions,
    collect_slides,
    plan_slide_names,
    resolve_decode_device,
    slide_name,
)
from ._backends import (
    OnnxBackend,
    TorchBackend,
    encoder_meta,
    export_onnx,
)
from ._options import RANDOM_WEIGHTS_SUFFIX as RANDOM_WEIGHTS_SUFFIX
from ._options import EmbedOptions, resolve_options, run_precision

# the result types, the output files and the producer live in their own modules; their names
# stay importable from here (tests, benchmarks and older code import them from _engine)
from ._outputs import _PARQUET_META as _PARQUET_META
from ._outputs import _stored_attrs, _Writer, features_complete
from ._outputs import read_features as read_features
from ._producer import _END, _produce, _SlideError, _SlideJob
from ._producer import _open_slide as _open_slide
from ._producer import _put as _put
from ._report import EmbedReport, SlideEmbedReport, SlideResult
from ._report import Status as Status


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
        # Every model with published weights needs them (not only TRIDENT's: Hibou-B has none
        # of TRIDENT's names); only the tiny test models run on random weights by default.
        real = info.published_weights
        if weights is None and real and not random_weights:
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


def _in_flight_depth(runner: Any) -> int:
    """Batches left in flight after a submit: one on CUDA (copy/compute overlap), else none."""
    return 1 if getattr(runner, "cuda", False) else 0


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
    model: Any = None,
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
    slide_encoder: str | None = None,
    slide_weights: str | os.PathLike[str] | None = None,
    **deprecated: Any,
) -> EmbedReport | SlideEmbedReport:
    """Embed every patch of every slide of a collection with a patch encoder.

    With ``slide_encoder=`` it also writes one embedding per slide: the patches are embedded
    with the patch encoder that slide encoder reads, at its magnification and patch size (or
    found complete), then pooled into ``slide_features_{slide_encoder}/{slide}.h5`` and a
    Parquet table of all slides (:mod:`tumorboard.embed._slide_features`), resumed and refused
    on other settings the same way.

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
    model : str or torch.nn.Module or None, default None
        Required without ``slide_encoder``. A model name for ``tumorboard.models.load``
        ("uni2-h", "uni", "conch", "uni2-tiny", ...) or a torch module mapping normalised
        [B, 3, S, S] images to [B, D] (its ``image_size``, ``mean`` and ``std`` attributes
        set the preprocessing; 224 px and ImageNet statistics when absent).
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
    slide_encoder : str or None, default None
        A built slide encoder (:func:`tumorboard.models.slide_encoders`, TRIDENT's names:
        ``mean-uni_v2`` or ``mean-uni2-h``, ``abmil``, ``feather``, ``feather_uni_v2``). Its
        patch encoder is ``model`` (None: the one it reads; another is refused) and its
        magnification and patch size are TRIDENT's for it (``tiling`` may only repeat them);
        ``mean-*`` and ``abmil`` take the tiling given. ``random_weights=True`` applies to
        both encoders.
    slide_weights : str or os.PathLike or None, default None
        The slide encoder's checkpoint (``abmil``: a TRIDENT ``ABMILSlideEncoder`` state dict;
        ``feather*``: the published ``model.safetensors``), loaded strictly.
    **deprecated
        The fields of ``tiling`` (``magnification``, ``patch_size``, ``overlap``,
        ``min_tissue``, ``segmentation``, ``seg_mpp``, ``mpp``, ``reader``, ``threads``) and of
        ``options`` (``batch_size``, ``backend``, ``device``, ``dtype``, ``queue_size``,
        ``compile``, ``decode``) as separate keywords, deprecated: they give the same result
        with a :class:`DeprecationWarning` naming the new spelling, and are refused together
        with the object that holds them.

    Returns
    -------
    EmbedReport or SlideEmbedReport
        The per-slide results; failed and tissue-less slides are listed there, not raised. A
        :class:`SlideEmbedReport` with ``slide_encoder=`` (its ``patch_report`` is the
        patch stage's :class:`EmbedReport`).

    Raises
    ------
    InvalidArgumentError
        An option out of range, a deprecated keyword together with ``tiling=``/``options=``,
        a device, precision or decoder this machine lacks, or a real model name without
        weights (nothing has run); with ``slide_encoder``: a slide encoder not built (the
        message says why), another patch encoder or tiling than it reads, or no
        ``slide_weights`` for one with parameters.
    InvalidTypeError
        ``tiling`` or ``options`` of the wrong type.
    MissingFileError
        No input is a slide file, or the checkpoint does not exist (nothing has run).
    """
    if slide_encoder is not None:
        from ._slide_features import embed_slide_features

        return embed_slide_features(
            slides, slide_encoder=slide_encoder, slide_weights=slide_weights, model=model,
            out=out, tiling=tiling, options=options, deprecated=deprecated, weights=weights,
            random_weights=random_weights, encoder_name=encoder_name, force=force,
            progress=progress, stream=stream, executor=executor, ray_address=ray_address,
            embed_patches=embed_slides,
        )  # fmt: skip
    if slide_weights is not None:
        raise InvalidArgumentError(
            f"slide_weights: expected together with slide_encoder=, got {str(slide_weights)!r} "
            "alone"
        )
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
        from .._executors import ray_entry

        rep = ray_entry("embed")(
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
