"""A slide's output files: the TRIDENT features .h5 and the Parquet embeddings.

:class:`_Writer` streams one slide's embeddings into both files under temporary names and
renames them into place (the features file last: it marks the slide complete);
:func:`features_complete` and :func:`_stored_attrs` read a finished slide back for the rerun
check, and :func:`read_features` reads a features file. The layout of both files is described
in :mod:`tumorboard.embed._engine`.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._io import atomic_path, remove_temp_files
from ..errors import CoreError, InvalidArgumentError

if TYPE_CHECKING:
    from ._producer import _SlideJob


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


def _numeric_array(values: np.ndarray, dtype: Any) -> Any:
    """Return ``values`` as a flat pyarrow array of ``dtype`` (no nulls) over a numpy buffer.

    The same array as ``pa.array(values.reshape(-1), pa.from_numpy_dtype(dtype))``, built from
    the buffer: ``pa.array`` imports pandas on its first call in a process (to look for pandas
    objects), 0.2-0.5 s that would land in the first slide's time.
    """
    import pyarrow as pa

    flat = np.ascontiguousarray(values, dtype=dtype).reshape(-1)
    return pa.Array.from_buffers(pa.from_numpy_dtype(flat.dtype), len(flat),
                                 [None, pa.py_buffer(flat)])  # fmt: skip


def _repeated_string(text: str, n: int) -> Any:
    """Return a pyarrow string array of ``n`` times ``text`` (``pa.array([text] * n)``)."""
    import pyarrow as pa

    raw = text.encode("utf-8")
    if len(raw) * n >= 2**31:  # past string offsets (int32); never for a slide name in practice
        return pa.array([text] * n, pa.string())
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(raw))
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(raw * n)])  # fmt: skip


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
        emb = np.concatenate([b[0] for b in self.buf]) if len(self.buf) > 1 else self.buf[0][0]
        xy = np.concatenate([b[1] for b in self.buf]) if len(self.buf) > 1 else self.buf[0][1]
        d = emb.shape[1]
        if self.pq_writer is None:
            self.pq_schema = self._schema(d)  # built once: the writer's and every table's
            self.pq_writer = self.pq.ParquetWriter(self.pq_tmp, self.pq_schema)
        table = pa.Table.from_arrays(
            [
                _repeated_string(self.job.name, len(xy)),
                _numeric_array(xy[:, 0], np.int64),
                _numeric_array(xy[:, 1], np.int64),
                pa.FixedSizeListArray.from_arrays(_numeric_array(emb, np.float32), d),
            ],
            schema=self.pq_schema,
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
        coords_attrs = cds.attrs  # one attribute manager per dataset, not one per attribute
        for k, v in (job.coords_attrs or {}).items():
            coords_attrs[k] = attr_to_hdf5(v)
        features_attrs = self.features.attrs
        features_attrs["name"] = job.name
        features_attrs["savetodir"] = savetodir
        for k, v in self.attrs.items():
            features_attrs[k] = attr_to_hdf5(v)
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
