"""Slide features: one embedding per slide from its patch features, in TRIDENT's layout.

``embed_slides(..., slide_encoder=NAME)`` runs in two stages. First the patch features of the
patch encoder the slide encoder reads (:func:`tumorboard.models.slide_encoder_info`; TRIDENT
``slide_to_patch_encoder_name``), at its magnification and patch size, exactly as a patch run
(``features_{encoder}/``, resumed and refused per slide). Then the slide encoder pools each
slide's features, many slides per forward (concatenated, no padding:
``forward_varlen``), and writes, under ``{job} = {out}/{mag}x_{patch}px_{overlap}px_overlap``
(mahmoodlab/TRIDENT ``trident/Processor.py``, ``run_slide_feature_extraction_job``:
``slide_features_{slide_encoder}``, @04e4c2b). An encoder that uses coordinates (``titan``,
``gigapath``) also gets each slide's ``coords`` and their ``patch_size_level0`` attribute (its
grid unit, as TRIDENT passes ``batch['attributes']['patch_size_level0']``). It writes:

* ``{job}/slide_features_{name}/{slide}.h5``: ``features`` [D] float32 with attributes ``name``,
  ``savetodir``, ``encoder`` (TRIDENT's) and ``weights_fingerprint`` (the slide encoder's:
  ``sha256:<hex>`` of its checkpoint, ``random``, or ``none`` for ``mean-*``),
  ``patch_encoder``, ``patch_weights_fingerprint``, ``precision`` (the slide encoder's),
  ``patch_precision`` and ``n_patches``; ``coords`` [N, 2] int64, the patches pooled, with the
  coords attributes of the patch features (the tiling settings).
* ``{job}/slide_features_{name}.parquet``: every slide of that folder made with this run's
  settings: ``slide`` (string), ``n_patches`` (int64), ``embedding``
  (fixed_size_list<float32>[D]); the schema metadata holds the encoders, fingerprints and
  tiling settings. It is rewritten after every run, so it lists earlier runs' slides too.

Each .h5 is written under a temporary name and renamed into place. A rerun skips a slide whose
file is complete and was made with the same tiling settings, slide and patch encoders, weights
and precisions from the same number of patches; a mismatch is refused naming both values
(``force=True`` redoes it). A slide whose patch features were recomputed in this run gets its
slide features recomputed too.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._io import atomic_path, remove_temp_files
from ..errors import InvalidArgumentError, MissingFileError
from ..slides import TilingOptions
from ._options import (
    RANDOM_WEIGHTS_SUFFIX,
    TILING_FIELDS,
    EmbedOptions,
    resolve_options,
    run_precision,
)
from ._outputs import _stored_attrs
from ._report import EmbedReport, SlideEmbedReport, SlideResult

__all__ = ["SlideFeatures", "read_slide_features"]

#: The weights fingerprint of an encoder without parameters (``mean-*``).
NO_WEIGHTS = "none"
#: Rows of patch features per slide-encoder forward (slides are packed up to it; a larger
#: slide runs alone); an encoder's ``max_rows`` attribute lowers it (TITAN's activations are
#: width x 4 per token).
MAX_ROWS = 1 << 18

_TABLE_META = ("encoder", "weights_fingerprint", "patch_encoder", "patch_weights_fingerprint",
               "precision", "target_magnification", "patch_size", "overlap", "segmentation",
               "min_tissue", "mpp_override")  # fmt: skip


@dataclass(frozen=True)
class SlideFeatures:
    """The slide embeddings of one slide encoder in a job (:func:`read_slide_features`).

    Attributes
    ----------
    names : tuple of str
        The slides, sorted.
    features : numpy.ndarray
        ``[S, D]`` float32, row ``i`` the embedding of ``names[i]``.
    n_patches : numpy.ndarray
        ``[S]`` int64, the patches each embedding pools.
    attrs : dict
        The ``features`` attributes of the first slide (``encoder``, ``weights_fingerprint``,
        ...; empty without slides).
    folder : pathlib.Path
        The ``slide_features_{name}`` folder read.
    """

    names: tuple[str, ...]
    features: np.ndarray
    n_patches: np.ndarray
    attrs: dict[str, Any]
    folder: Path

    def to_polars(self) -> Any:
        """Return ``slide`` (str), ``n_patches`` (int64), ``embedding`` (array[f32, D]) rows."""
        import polars as pl

        d = int(self.features.shape[1]) if self.features.ndim == 2 else 0
        return pl.DataFrame(
            {
                "slide": list(self.names),
                "n_patches": self.n_patches,
                "embedding": self.features,
            },
            schema={"slide": pl.String, "n_patches": pl.Int64,
                    "embedding": pl.Array(pl.Float32, d)},
        )  # fmt: skip


def _slide_complete(path: Path) -> int | None:
    """Return the number of patches of a complete slide-features file, or None."""
    if not path.is_file():
        return None
    try:
        import h5py

        with h5py.File(path, "r") as f:
            feats, coords = f["features"], f["coords"]
            if feats.ndim != 1 or coords.ndim != 2 or coords.shape[1] != 2:
                return None
            return int(coords.shape[0])
    except Exception:
        return None


def _folder(job_dir: str | os.PathLike[str], name: str) -> Path:
    job = Path(job_dir)
    candidates = [name]
    try:
        from ..models import slide_encoder_info

        base = name.removesuffix("-random-weights")
        canon = slide_encoder_info(base).name + name[len(base) :]
        candidates.append(canon)
    except Exception:  # a name of no registry row: read the folder as named (TRIDENT's)
        pass
    for cand in candidates:
        if (job / f"slide_features_{cand}").is_dir():
            return job / f"slide_features_{cand}"
        found = sorted(job.glob(f"*/slide_features_{cand}"))
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise InvalidArgumentError(
                f"job_dir: expected one slide_features_{cand} folder under {job}, got "
                f"{len(found)} ({', '.join(str(p.parent.name) for p in found)}); pass one of them"
            )
    raise MissingFileError(f"{job}: no slide_features_{name} folder (nor one level below)")


def read_slide_features(job_dir: str | os.PathLike[str], name: str) -> SlideFeatures:
    """Read every slide embedding of one slide encoder in a job.

    Parameters
    ----------
    job_dir : str or os.PathLike
        TRIDENT's ``{mag}x_{patch}px_{overlap}px_overlap`` folder (or the ``out`` folder above
        it, when one such folder holds ``slide_features_{name}``).
    name : str
        The slide encoder (``feather``, ``mean-uni2-h`` or ``mean-uni_v2``, ``titan`` for a
        folder TRIDENT wrote, ...).

    Returns
    -------
    SlideFeatures
        The embeddings, one row per complete ``{slide}.h5`` (half-written files are ignored).

    Raises
    ------
    MissingFileError
        No ``slide_features_{name}`` folder.
    InvalidArgumentError
        Several folders one level below ``job_dir`` hold it, or the embeddings differ in width.
    """
    import h5py

    from .._hdf5 import attr_from_hdf5

    folder = _folder(job_dir, name)
    names, rows, counts = [], [], []
    attrs: dict[str, Any] = {}
    for path in sorted(folder.glob("*.h5")):
        n = _slide_complete(path)
        if n is None:
            continue
        with h5py.File(path, "r") as f:
            rows.append(np.asarray(f["features"][...], dtype=np.float32))
            if not attrs:
                attrs = {k: attr_from_hdf5(v) for k, v in f["features"].attrs.items()}
        names.append(path.stem)
        counts.append(n)
    widths = {r.shape[0] for r in rows}
    if len(widths) > 1:
        raise InvalidArgumentError(
            f"{folder}: expected embeddings of one width, got widths {sorted(widths)}"
        )
    matrix = np.stack(rows) if rows else np.zeros((0, 0), np.float32)
    return SlideFeatures(tuple(names), matrix, np.asarray(counts, np.int64), attrs, folder)


def _write_slide(path: Path, emb: np.ndarray, coords: np.ndarray, coords_attrs: dict[str, Any],
                 attrs: dict[str, Any]) -> None:  # fmt: skip
    import h5py

    from .._hdf5 import attr_to_hdf5

    path.parent.mkdir(parents=True, exist_ok=True)
    remove_temp_files(path.parent, target=path.name)  # left by a killed run
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        fd = f.create_dataset("features", data=np.asarray(emb, np.float32).reshape(-1))
        cd = f.create_dataset("coords", data=np.asarray(coords, np.int64).reshape(-1, 2),
                              maxshape=(None, 2))  # fmt: skip
        for k, v in coords_attrs.items():
            cd.attrs[k] = attr_to_hdf5(v)
        fd.attrs["name"] = path.stem
        fd.attrs["savetodir"] = str(path.parent)
        for k, v in attrs.items():
            fd.attrs[k] = attr_to_hdf5(v)


def _write_table(table: Path, folder: Path, opts: TilingOptions, identity: dict[str, Any]) -> None:
    """Write the Parquet table of the folder's slides made with this run's settings."""
    import h5py
    import pyarrow as pa
    import pyarrow.parquet as pq

    names, rows, counts = [], [], []
    meta: dict[str, Any] = {}
    for path in sorted(folder.glob("*.h5")) if folder.is_dir() else []:
        n = _slide_complete(path)
        if n is None:
            continue
        stored = _stored_attrs(path)
        if opts.mismatch(path, stored, stored.get("source_path") or path, extra=identity):
            continue  # made with other settings: not this table's
        with h5py.File(path, "r") as f:
            rows.append(np.asarray(f["features"][...], np.float32))
        names.append(path.stem)
        counts.append(n)
        meta = meta or stored
    d = rows[0].shape[0] if rows else 0
    metadata = {k: v if isinstance(v, str) else json.dumps(v, sort_keys=True)
                for k, v in {**meta, **identity}.items() if k in _TABLE_META}  # fmt: skip
    schema = pa.schema([("slide", pa.string()), ("n_patches", pa.int64()),
                        ("embedding", pa.list_(pa.float32(), d))], metadata=metadata)  # fmt: skip
    flat = np.concatenate(rows) if rows else np.zeros(0, np.float32)
    data = pa.table(
        {
            "slide": pa.array(names, pa.string()),
            "n_patches": pa.array(counts, pa.int64()),
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), d),
        },
        schema=schema,
    )
    with atomic_path(table) as tmp:
        pq.write_table(data, tmp)


def _patch_model(info: Any, model: Any) -> Any:
    """Return the patch model of a slide-encoder run, refusing one the encoder cannot read."""
    if info.patch_encoder is None:
        if model is None:
            raise InvalidArgumentError(
                f"model: {info.name} reads the features of any patch encoder; expected model= "
                "(--model) naming it, got None"
            )
        return model
    if model is None:
        return info.patch_encoder
    from .. import models

    if not isinstance(model, str) or models.info(model).name != info.patch_encoder:
        shown = model if isinstance(model, str) else type(model).__name__
        raise InvalidArgumentError(
            f"model: {info.name} reads {info.patch_encoder} features (TRIDENT "
            f"{info.trident_patch_encoder}); expected model={info.patch_encoder!r} or none, "
            f"got {shown!r}"
        )
    return model


def _tiling(info: Any, tiling: TilingOptions | None, opts: TilingOptions,
            deprecated: dict[str, Any]) -> TilingOptions:  # fmt: skip
    """Return the tiling of a slide-encoder run: the encoder's magnification and patch size."""
    if info.magnification is None:
        return opts
    given = tiling is not None or any(k in TILING_FIELDS for k in deprecated)
    if not given:
        return dataclasses.replace(opts, magnification=info.magnification,
                                   patch_size=info.patch_size)  # fmt: skip
    if (opts.magnification, opts.patch_size) != (info.magnification, info.patch_size):
        raise InvalidArgumentError(
            f"tiling: {info.name} runs at {info.magnification:g}x with {info.patch_size} px "
            f"patches (TRIDENT), got {opts.magnification:g}x with {opts.patch_size} px "
            f"(--magnification {info.magnification:g} --patch-size {info.patch_size}, or leave "
            "them out)"
        )
    return opts


def _batches(items: list[tuple[Any, int]], max_rows: int) -> Iterable[list[Any]]:
    """Group (item, rows) into consecutive lists of at most ``max_rows`` rows (one if larger)."""
    group: list[Any] = []
    rows = 0
    for item, n in items:
        if group and rows + n > max_rows:
            yield group
            group, rows = [], 0
        group.append(item)
        rows += n
    if group:
        yield group


def embed_slide_features(
    slides: Any,
    *,
    slide_encoder: str,
    slide_weights: str | os.PathLike[str] | None,
    model: Any,
    out: str | os.PathLike[str],
    tiling: TilingOptions | None,
    options: EmbedOptions | None,
    deprecated: dict[str, Any],
    weights: Any,
    random_weights: bool,
    encoder_name: str | None,
    force: bool,
    progress: bool,
    stream: Any,
    executor: str,
    ray_address: str | None,
    embed_patches: Callable[..., EmbedReport],
) -> SlideEmbedReport:
    """Run :func:`~tumorboard.embed.embed_slides` with ``slide_encoder=`` (module docstring).

    ``embed_patches`` is ``embed_slides`` itself, run without ``slide_encoder`` for the patch
    stage (handed in, so that this module does not import the engine).
    """
    from .. import models
    from ..models.weights import RANDOM_WEIGHTS, file_fingerprint

    t_start = time.perf_counter()
    info = models.slide_encoder_info(slide_encoder)
    if info.status != "built":
        models.load_slide_encoder(info.name)  # raises, saying why it is not built
    patch_model = _patch_model(info, model)
    if not info.needs_weights:
        if slide_weights is not None:
            raise InvalidArgumentError(
                f"slide_weights: {info.name} has no parameters, got {str(slide_weights)!r}"
            )
        fingerprint = NO_WEIGHTS
    elif slide_weights is not None:
        fingerprint = file_fingerprint(slide_weights)
    elif random_weights:
        fingerprint = RANDOM_WEIGHTS
    else:
        raise InvalidArgumentError(
            f"slide_encoder {info.name!r} needs its weights: pass slide_weights=PATH "
            f"(--slide-weights PATH; weights: {info.weights_source}), or random_weights=True "
            "(--random-weights) to run it with random parameters for testing"
        )
    opts, run = resolve_options("embed_slides", tiling, options, deprecated, stacklevel=4)
    opts = _tiling(info, tiling, opts, deprecated)
    patch = embed_patches(
        slides, model=patch_model, out=out, tiling=opts, options=run, weights=weights,
        random_weights=random_weights, encoder_name=encoder_name, force=force,
        progress=progress, stream=stream, executor=executor, ray_address=ray_address,
    )  # fmt: skip
    random = fingerprint == RANDOM_WEIGHTS or patch.encoder.endswith(RANDOM_WEIGHTS_SUFFIX)
    name = info.name + (RANDOM_WEIGHTS_SUFFIX if random else "")
    identity = {
        "encoder": name,
        "weights_fingerprint": fingerprint,
        "patch_encoder": patch.encoder,
        "patch_weights_fingerprint": patch.weights_fingerprint,
        "precision": "fp32",
        "patch_precision": run_precision(run.backend, run.device, run.dtype),
    }
    folder = patch.job_dir / f"slide_features_{name}"
    table = patch.job_dir / f"slide_features_{name}.parquet"
    results: list[SlideResult | None] = []
    todo: list[tuple[int, SlideResult, Path]] = []
    for r in patch.results:
        if r.status not in ("done", "skipped") or r.features_path is None:
            results.append(r)  # failed or no tissue: the patch stage's result and error
            continue
        target = folder / f"{r.name}.h5"
        n = _slide_complete(target)
        if n is not None and not force and r.status == "skipped":
            why = opts.mismatch(target, _stored_attrs(target), r.slide,
                                extra={**identity, "n_patches": r.n_patches})  # fmt: skip
            if why is not None:
                results.append(SlideResult(r.slide, r.name, "failed", error=why,
                                           features_path=target))  # fmt: skip
            else:
                results.append(SlideResult(r.slide, r.name, "skipped", n_patches=n,
                                           features_path=target,
                                           coords_path=r.coords_path))  # fmt: skip
            continue
        results.append(None)
        todo.append((len(results) - 1, r, target))
    device = "cpu"
    if todo:
        device = _encode(todo, results, info, slide_weights, identity, run)
    if any(r is not None and r.status in ("done", "skipped") for r in results):
        _write_table(table, folder, opts, identity)
    return SlideEmbedReport(
        results=tuple(r for r in results if r is not None),
        slide_encoder=name,
        weights_fingerprint=fingerprint,
        slide_features_dir=folder,
        table_path=table,
        patch_report=patch,
        seconds=time.perf_counter() - t_start,
        device=device,
    )


def _encode(
    todo: list[tuple[int, SlideResult, Path]],
    results: list[SlideResult | None],
    info: Any,
    slide_weights: Any,
    identity: dict[str, Any],
    run: EmbedOptions,
) -> str:
    """Pool the slides of ``todo`` in varlen batches and write them; return the device used."""
    import warnings

    import h5py
    import torch

    from .. import models
    from .._hdf5 import attr_from_hdf5
    from ..models import RandomWeightsWarning
    from ._outputs import read_features

    with h5py.File(todo[0][1].features_path, "r") as f:
        in_dim = int(f["features"].shape[1])
    with warnings.catch_warnings():
        if slide_weights is None:  # random parameters were asked for explicitly
            warnings.simplefilter("ignore", RandomWeightsWarning)
        encoder = models.load_slide_encoder(info.name, weights=slide_weights, in_dim=in_dim)
    if encoder.in_dim != in_dim:
        raise InvalidArgumentError(
            f"slide_weights: {info.name} reads {encoder.in_dim}-d features, got "
            f"{identity['patch_encoder']} features of width {in_dim}"
        )
    dev = models.resolve_device(run.device)
    encoder = encoder.to(dev)
    sizes = [(item, int(item[1].n_patches)) for item in todo]
    for group in _batches(sizes, getattr(encoder, "max_rows", MAX_ROWS)):
        t0 = time.perf_counter()
        loaded = []
        for index, r, target in group:
            try:
                feats, coords, _ = read_features(r.features_path)
                with h5py.File(r.features_path, "r") as f:
                    cattrs = {k: attr_from_hdf5(v) for k, v in f["coords"].attrs.items()}
                if info.uses_coords and "patch_size_level0" not in cattrs:
                    raise InvalidArgumentError(
                        f"{info.name} reads the grid unit of the coords: expected the coords "
                        f"attribute patch_size_level0, got {', '.join(sorted(cattrs)) or 'none'}"
                    )
                loaded.append((index, r, target, feats, coords, cattrs))
            except Exception as exc:
                results[index] = SlideResult(r.slide, r.name, "failed",
                                             error=f"{r.features_path}: {exc}")  # fmt: skip
        if not loaded:
            continue
        lengths = [len(x[3]) for x in loaded]
        offsets = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.long)
        x = torch.from_numpy(np.concatenate([x[3] for x in loaded])).to(dev, torch.float32)
        kw = {}
        if info.uses_coords:  # titan, gigapath: level-0 coordinates, grid unit of each slide
            kw["coords"] = torch.from_numpy(np.concatenate([item[4] for item in loaded])).to(dev)
            kw["patch_size_level0"] = [int(item[5]["patch_size_level0"]) for item in loaded]
        with torch.inference_mode():
            emb = encoder.forward_varlen(x, offsets.to(dev), **kw).float().cpu().numpy()
        seconds = (time.perf_counter() - t0) / len(loaded)
        for row, (index, r, target, _, coords, cattrs) in enumerate(loaded):
            attrs = {**identity, "n_patches": int(lengths[row])}
            try:
                _write_slide(target, emb[row], coords, cattrs, attrs)
            except Exception as exc:
                results[index] = SlideResult(r.slide, r.name, "failed",
                                             error=f"{target}: {exc}")  # fmt: skip
                continue
            results[index] = SlideResult(r.slide, r.name, "done", n_patches=lengths[row],
                                         features_path=target, seconds=seconds,
                                         coords_path=r.coords_path)  # fmt: skip
    return str(dev)
