"""``embed_slides`` on Ray: slides are handed one at a time to actors.

There is one actor per GPU, else one per CPU, each running the local engine
(:func:`tumorboard.embed.embed_slides`) on its slide.

Outputs are the local engine's per-slide files, so they are identical to a local run, and the
resume logic is the same (a complete slide is skipped by whichever actor gets it). An actor that
dies (out of memory, a crashing reader, a lost node) loses only the slide it was working on: the
actor is replaced and the slide is handed out again, up to ``max_attempts`` times; the engine's
temporary-file protocol means a half-written slide never looks complete.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from .._progress import SlideProgress
from ..errors import CoreError, InvalidArgumentError, InvalidTypeError
from ..slides import plan_slide_names
from ._ray import connect


class _EmbedWorker:
    """One Ray actor: loads a named encoder once and embeds the slides it is given.

    The driver checked the model and computed its encoder name and weights fingerprint
    (:func:`tumorboard.embed.encoder_identity`); the actor's module carries them, so its outputs
    record what a local run records.
    """

    def __init__(self, kwargs: dict[str, Any], encoder: str, fingerprint: str) -> None:
        import warnings

        kw = dict(kwargs)
        model = kw["model"]
        weights = kw.pop("weights", None)
        kw.pop("random_weights", None)
        if isinstance(model, str):
            from .. import models
            from ..models import RandomWeightsWarning

            # the same call the local engine makes for a model name, done once per actor
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RandomWeightsWarning)  # asked for explicitly
                model = models.load(model, weights=weights, device="cpu", dtype="fp32")
        model.weights_fingerprint = fingerprint
        kw["model"] = model
        kw["encoder_name"] = encoder
        self.kwargs = kw

    def embed(self, slide: str) -> Any:
        """Embed one slide with the local engine and return its ``EmbedReport``."""
        from ..embed import embed_slides

        return embed_slides([slide], progress=False, executor="local", **self.kwargs)


def embed_slides_ray(
    slides: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    ray_address: str | None = None,
    n_actors: int | None = None,
    max_attempts: int = 3,
    progress: bool = True,
    stream: TextIO | None = None,
    **kwargs: Any,
) -> Any:
    """Run :func:`tumorboard.embed.embed_slides` with the slides spread over Ray actors.

    The model and its weights are checked (and the weights fingerprinted) here, before Ray is
    reached; each actor loads the model once.

    Parameters
    ----------
    slides : str, os.PathLike or iterable of them
        The slide files.
    ray_address : str, optional
        The cluster (None: this process's connection, else a new local Ray).
    n_actors : int, optional
        Actors to start (default: one per GPU of the cluster when it has GPUs, else one per
        CPU; never more than the slides).
    max_attempts : int, default 3
        Tries per slide when its actor dies (a slide whose reading or encoding raises is
        reported failed at once, as locally).
    progress : bool, default True
        Print one line per finished slide on ``stream``.
    stream : TextIO, optional
        Where progress goes (default stderr).
    **kwargs
        The other keywords of :func:`~tumorboard.embed.embed_slides`; ``model`` and ``out`` are
        required, ``tiling`` (:class:`~tumorboard.slides.TilingOptions`) and ``options``
        (:class:`~tumorboard.embed.EmbedOptions`) travel to every actor as they are (frozen
        dataclasses, pickled). Their fields as separate keywords are deprecated, as for
        ``embed_slides``.

    Returns
    -------
    EmbedReport
        The same :class:`~tumorboard.embed.EmbedReport` as a local run.

    Raises
    ------
    InvalidTypeError
        ``model`` or ``out`` is missing.
    InvalidArgumentError
        Invalid ``max_attempts`` or ``n_actors``, or a real model name without weights
        (:func:`~tumorboard.embed.encoder_identity`).
    CoreError
        No slide was processed by a worker.
    """
    from ..embed import (
        EMBED_FIELDS,
        TILING_FIELDS,
        EmbedReport,
        SlideResult,
        encoder_identity,
        resolve_options,
    )

    t0 = time.perf_counter()
    if isinstance(slides, (str, os.PathLike)):
        slides = [slides]
    paths = [Path(p) for p in slides]
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise InvalidArgumentError(f"max_attempts: expected an integer >= 1, got {max_attempts!r}")
    if "model" not in kwargs or "out" not in kwargs:
        raise InvalidTypeError(
            "embed_slides_ray: model= and out= are required (as for embed_slides)"
        )
    kwargs = dict(kwargs)
    legacy = {k: kwargs.pop(k) for k in list(kwargs) if k in TILING_FIELDS + EMBED_FIELDS}
    tiling, options = resolve_options(
        "embed_slides_ray", kwargs.pop("tiling", None), kwargs.pop("options", None), legacy
    )
    encoder, fingerprint = encoder_identity(
        kwargs["model"],
        kwargs.get("weights"),
        random_weights=kwargs.get("random_weights", False),
        encoder_name=kwargs.get("encoder_name"),
    )
    ray = connect(ray_address)
    prog = SlideProgress(len(paths), stream=stream, enabled=progress)
    results: dict[int, Any] = {}

    def record(result: Any, index: int) -> None:
        """Keep a slide's result and print its line."""
        results[index] = result
        prog.finished(result)

    todo: deque[tuple[int, str, str]] = deque()
    for planned in plan_slide_names(paths):
        if planned.error is not None:
            dup = SlideResult(str(planned.path), planned.name, "failed", error=planned.error)
            record(dup, planned.index)
        else:
            todo.append((planned.index, str(planned.path), planned.name))
    gpus = int(ray.cluster_resources().get("GPU", 0))
    per_actor = {"num_gpus": 1} if gpus else {"num_cpus": 1}
    if n_actors is None:
        n_actors = gpus or int(ray.cluster_resources().get("CPU", 1))
    if isinstance(n_actors, bool) or not isinstance(n_actors, int) or n_actors < 1:
        raise InvalidArgumentError(f"n_actors: expected an integer >= 1, got {n_actors!r}")
    if gpus and options.device == "auto":
        options = dataclasses.replace(options, device="cuda")
    kwargs = {**kwargs, "tiling": tiling, "options": options}
    actor_cls = ray.remote(max_restarts=0, max_task_retries=0, **per_actor)(_EmbedWorker)
    kw_ref = ray.put(kwargs)
    idle = [actor_cls.remote(kw_ref, encoder, fingerprint) for _ in range(min(n_actors, len(todo)))]
    attempts: dict[int, int] = {}
    running: dict[Any, tuple[Any, int, str, str]] = {}
    reports: list[Any] = []
    try:
        while todo or running:
            while todo and idle:
                i, slide, name = todo.popleft()
                actor = idle.pop()
                attempts[i] = attempts.get(i, 0) + 1
                running[actor.embed.remote(slide)] = (actor, i, slide, name)
            live = ", ".join(sorted(n for _, _, _, n in running.values()))
            prog.update(live if len(live) <= 60 else f"{len(running)} slides", None, None)
            (ref,), _ = ray.wait(list(running), num_returns=1)
            actor, i, slide, name = running.pop(ref)
            try:
                rep = ray.get(ref)
            except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError) as err:
                ray.kill(actor, no_restart=True)
                # a fresh actor replaces the dead one
                idle.append(actor_cls.remote(kw_ref, encoder, fingerprint))
                if attempts[i] < max_attempts:
                    todo.appendleft((i, slide, name))
                    prog.message(f"worker died on {slide} (attempt {attempts[i]}); retrying")
                    continue
                msg = f"worker died {attempts[i]} time(s) on this slide: {type(err).__name__}"
                record(SlideResult(slide, name, "failed", error=msg), i)
            else:
                idle.append(actor)
                reports.append(rep)
                prog.add_patches(rep.n_patches)
                record(rep.results[0], i)
    finally:
        prog.close()
    for actor in idle:
        ray.kill(actor)
    if not reports:
        raise CoreError(
            "embed_slides_ray: no slide was processed by a worker; "
            + "; ".join(f"{r.slide}: {r.error}" for r in results.values())
        )
    first = reports[0]
    return EmbedReport(
        results=tuple(results[i] for i in sorted(results)),
        encoder=first.encoder,
        weights_fingerprint=first.weights_fingerprint,
        job_dir=first.job_dir,
        features_dir=first.features_dir,
        parquet_dir=first.parquet_dir,
        coords_dir=first.coords_dir,
        n_patches=sum(r.n_patches for r in reports),
        seconds=time.perf_counter() - t0,
        backend=first.backend,
        device=first.device,
    )
