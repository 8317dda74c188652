"""The Poisson bootstrap of many groups that share their resampling units, as one matrix product.

When every group (e.g. model) is scored on the same items, the Poisson weight of an item in a
resample depends only on (seed, item or cluster key, resample), so every group's resampled sums
are one product: the weights ``W`` (resamples x distinct keys), drawn once per key by the engine,
times the per-key sums of every group's columns (distinct keys x groups * columns). The engine's
Poisson path draws the same weights once per (group, unit) instead: for 50 models that is 50 times
the draws and 128-bit accumulations of the same numbers.

The result is bit for bit the engine's: the values are integers (the engine's fixed-point scale
is then 0 for every column) and every partial sum of the product stays below ``2^24`` (float32)
or ``2^53`` (float64), where floating-point sums of integers are exact in any order, so the
sums equal the engine's exact 128-bit ones whatever the BLAS library or thread count; the
statistic, the distribution and the interval then come from the engine (``poisson_finalize``)
on those sums. Inputs outside that (fractional values, BCa intervals, sums too large) return
None and take the engine's own path.
"""

from __future__ import annotations

import numpy as np

from .. import _core
from . import _validate
from ._options import BootstrapOptions

#: Largest Poisson(1) weight the engine draws (from 32 bits; ``csrc/stats/poisson.cpp``).
MAX_WEIGHT = 15
#: The product is used where groups share keys: (keys x groups) at most DENSITY x records.
DENSITY = 4
#: Largest (keys x groups x columns) table of per-key sums (1 GiB of float64).
MAX_CELLS = 2**27


def _weighted_sums(keys: np.ndarray, per_key: np.ndarray, options: BootstrapOptions) -> np.ndarray:
    """Return ``W @ per_key``: every resample's weighted sums, (resamples, columns).

    ``W`` holds the engine's Poisson(1) weight of each key in each resample
    (:func:`weighted_sums`).
    """
    # equal columns have equal sums: the record counts of groups that share every key, a
    # column every group shares (e.g. BLEU's reference length with one reference)
    # (found by one fixed projection, then checked equal, so a clash only costs the saving)
    # (einsum's own loop, not a BLAS call: its worker threads would spin on the cores the
    # engine then uses)
    probe = np.einsum("i,ij->j", np.sin(np.arange(per_key.shape[0], dtype=np.float64) + 1.0),
                      per_key)  # fmt: skip
    _, first, column = np.unique(probe, return_index=True, return_inverse=True)
    if not np.array_equal(per_key[:, first[column]], per_key):
        first, column = np.arange(per_key.shape[1]), np.arange(per_key.shape[1])
    distinct = np.ascontiguousarray(per_key[:, first])
    return weighted_sums(keys, distinct, options)[:, column.ravel()]


def weighted_sums(keys: np.ndarray, cols: np.ndarray, options: BootstrapOptions) -> np.ndarray:
    """Return ``W @ cols`` in the dtype of ``cols`` (float32 or float64), (resamples, columns).

    ``W`` (resamples x keys) holds the engine's Poisson(1) weight of each key in each
    resample: the engine draws a record's weight from (seed, record key, resample) alone, so
    a key's weight is the one every record of the key gets.
    ``_core.stats.poisson_weighted_sums`` (csrc/stats/poisson.cpp) draws them tile by tile
    and multiplies as it goes, never storing the matrix, on the engine's threads. Equal to
    the product bit for bit where every partial sum of a column is an exact integer of the
    dtype (the callers' condition).
    """
    return _core.stats.poisson_weighted_sums(np.ascontiguousarray(keys, dtype=np.uint64),
                                             np.ascontiguousarray(cols), options.n_resamples,
                                             options.seed, options.engine_threads)  # fmt: skip


def poisson_shared(
    values: np.ndarray,
    lay: _validate.Layout,
    record_keys: np.ndarray,
    *,
    statistic: str,
    params: list[float],
    options: BootstrapOptions,
) -> dict[str, np.ndarray] | None:
    """Return the engine's Poisson bootstrap output of grouped rows, or None where not exact.

    Parameters
    ----------
    values : numpy.ndarray
        Validated (n, k) float64 rows.
    lay : Layout
        The validated groups and clusters (no strata: the Poisson scheme has none).
    record_keys : numpy.ndarray
        The validated uint64 record keys (the weights' keys without clusters).
    statistic : str
        The engine statistic.
    params : list of float
        Its parameters.
    options : BootstrapOptions
        Resamples, level, method, seed and threads.

    Returns
    -------
    dict or None
        What ``_core.stats.poisson_finalize`` returns (with the distribution), or None when the
        shortcut would not be bit-identical (fractional values, BCa, sums beyond 2^53) or saves
        nothing (fewer than two groups, or groups that share few keys).
    """
    n, k = values.shape
    if lay.n_groups < 2 or options.method == "bca" or options.n_resamples == 0 or n == 0:
        return None
    if not np.array_equal(values, np.round(values)):
        return None
    # The last column counts records: the engine's total item weight of each resample.
    bound = MAX_WEIGHT * max(float(np.abs(values).sum(axis=0).max()), float(n))
    if bound >= 2.0**53:
        return None
    group = np.zeros(n, dtype=np.int64) if lay.group is None else lay.group
    unit_key = record_keys if lay.cluster is None else lay.cluster_keys[lay.cluster]
    distinct, key_code = np.unique(unit_key, return_inverse=True)
    g, c = lay.n_groups, k + 1
    # per (key, group) sums of every column and the record count, (keys, groups * (k + 1))
    size = distinct.size * g * c
    if distinct.size * g > DENSITY * n or size > MAX_CELLS:
        return None  # groups share too few keys: the dense product would do mostly zeros
    cols = np.hstack([values, np.ones((n, 1))])
    flat = key_code * (g * c) + group * c
    cells = (flat[:, None] + np.arange(c)).ravel()
    per_key = np.bincount(cells, weights=cols.ravel(), minlength=size).reshape(distinct.size, -1)
    # every partial sum of a product column is at most MAX_WEIGHT times the column's sum of
    # magnitudes: one group's sums, not the whole table's (50 models' BLEU statistics fit
    # float32 where their total does not)
    column_bound = MAX_WEIGHT * float(np.abs(per_key).sum(axis=0).max(initial=0.0))
    dtype = np.float32 if column_bound < 2.0**24 else np.float64
    # exact integers, (B, g * c)
    sums = _weighted_sums(distinct, per_key.astype(dtype), options).astype(np.int64)
    full = per_key.sum(axis=0).astype(np.int64)[None, :]
    sums = np.concatenate([sums, full]).reshape(-1, g, c).transpose(1, 0, 2)  # (g, B + 1, c)
    hi = np.ascontiguousarray(np.where(sums[..., :k] < 0, -1, 0), dtype=np.int64)
    lo = np.ascontiguousarray(sums[..., :k]).view(np.uint64)
    weight = np.ascontiguousarray(sums[..., k])
    n_items = np.bincount(group, minlength=g).astype(np.int64)
    if lay.cluster is None:
        n_units = n_items
    else:
        pairs = np.unique(group * max(lay.n_clusters, 1) + lay.cluster)
        n_units = np.bincount(pairs // max(lay.n_clusters, 1), minlength=g).astype(np.int64)
    return _core.stats.poisson_finalize(
        hi, lo, weight, np.zeros(k, dtype=np.int64), n_items, n_units, np.full(g, np.nan),
        statistic, params, 0, options.method, options.level, options.engine_threads, True,
    )  # fmt: skip
