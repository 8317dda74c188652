"""Poisson-bootstrap partial sums that merge exactly across shards.

Each record (or cluster) gets the weight W ~ Poisson(1) in resample b, drawn from a Philox block
keyed by (seed, record key, b) (Chamandy et al. 2012). Shards hold exact 128-bit fixed-point
per-resample column sums; adding the partials of any split of the data gives bit-for-bit the
partials of the whole, so :meth:`PoissonPartials.finalize` returns identical intervals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from .. import _core
from .._deprecate import options_keywords
from .._results import table
from .._typing import Labels, Values
from ..errors import InvalidArgumentError, NumericOverflowError
from . import _validate
from ._bootstrap import BootstrapResult, check_numbers, result, single
from ._options import BootstrapOptions


def _shift_left(hi: np.ndarray, lo: np.ndarray, bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shift (hi, lo) 128-bit two's-complement integers left by `bits`.

    ``bits`` is 0..64 per column (the last axis); raises NumericOverflowError (an OverflowError)
    if a result does not fit in 128 bits.
    """
    out_hi, out_lo = hi.copy(), lo.copy()
    for d in (int(x) for x in np.unique(bits)):
        if d == 0:
            continue
        sel = bits == d
        h, l_ = hi[..., sel], lo[..., sel]
        if d < 64:
            nh = ((h.view(np.uint64) << np.uint64(d)) | (l_ >> np.uint64(64 - d))).view(np.int64)
            nl = l_ << np.uint64(d)
            fits = (nh >> np.int64(d)) == h
        else:
            nh, nl = l_.view(np.int64), np.zeros_like(l_)
            fits = (nh >> np.int64(63)) == h
        if not fits.all():
            raise NumericOverflowError(
                "Poisson partial sums overflow 128 bits when aligning scales"
            )
        out_hi[..., sel], out_lo[..., sel] = nh, nl
    return out_hi, out_lo


def _add128(ah: np.ndarray, al: np.ndarray, bh: np.ndarray, bl: np.ndarray):
    """Add two 128-bit two's-complement integers given as (high, low) words."""
    lo = al + bl  # wraps modulo 2^64
    carry = (lo < al).astype(np.int64)
    return ah + bh + carry, lo


@dataclass(frozen=True, eq=False)
class PoissonPartials:
    """Per-group, per-resample exact sums of one shard (or of several merged shards).

    Combine shards with ``a + b`` or :meth:`merge`; turn them into intervals with
    :meth:`finalize`. Group keys align by value, so shards may hold different groups.

    Attributes
    ----------
    keys : dict of str to numpy.ndarray
        Group key columns, name -> values.
    hi, lo : numpy.ndarray
        ``(groups, n_resamples + 1, k)`` high (int64) and low (uint64) words of the exact
        fixed-point column sums; the last resample slot holds the full data.
    weight : numpy.ndarray
        ``(groups, n_resamples + 1)`` summed item counts.
    scale : numpy.ndarray
        ``(k,)`` binary fixed-point scale per column.
    n, n_units : numpy.ndarray
        Items and resampling units per group.
    statistic : str
        The engine statistic.
    n_resamples : int
        Resamples B.
    seed : int
        The seed of the Poisson weights.
    cluster_keys : tuple of numpy.ndarray or None
        With clusters: the sorted stable keys of the clusters in each group. A cluster may span
        shards, so merged unit counts come from the union of these, not from a sum.
    """

    keys: dict[str, np.ndarray]
    hi: np.ndarray  # (groups, n_resamples + 1, k) high words; last resample slot = full data
    lo: np.ndarray
    weight: np.ndarray  # (groups, n_resamples + 1) summed item counts
    scale: np.ndarray  # (k,) binary fixed-point scale per column
    n: np.ndarray
    n_units: np.ndarray
    statistic: str
    n_resamples: int
    seed: int
    #: With clusters: the sorted stable keys of the clusters in each group. A cluster may span
    #: shards, so merged unit counts come from the union of these, not from a sum.
    cluster_keys: tuple[np.ndarray, ...] | None = None

    def __len__(self) -> int:
        return int(self.n.shape[0])

    def full_sums(self) -> np.ndarray:
        """Return the exact column sums of the full data (no resampling) per group, as floats.

        Returns
        -------
        numpy.ndarray
            ``(groups, k)`` float64: the fixed-point sums of the last resample slot scaled back
            (each is the nearest float to the exact sum).
        """
        hi = self.hi[:, -1, :].astype(object)
        lo = self.lo[:, -1, :].astype(object)
        exact = hi * (1 << 64) + lo
        out = np.empty(exact.shape, dtype=np.float64)
        for idx, value in np.ndenumerate(exact):
            # int / int is correctly rounded in Python, for any scale (2**1100 is no float)
            out[idx] = int(value) / (1 << int(self.scale[idx[1]]))
        return out

    def to_polars(self) -> pl.DataFrame:
        """Return one row per group: the key columns, n, n_units and the full-data column sums.

        The sums are ``sum_1 .. sum_k`` (:meth:`full_sums`), the numbers the statistic of the
        whole shard is computed from; the per-resample sums stay in ``hi``/``lo``.

        Returns
        -------
        polars.DataFrame
            One row per group.
        """
        sums = self.full_sums()
        cols = {**self.keys, "n": self.n, "n_units": self.n_units}
        cols.update({f"sum_{j + 1}": sums[:, j] for j in range(sums.shape[1])})
        return table(cols)

    def _group_tuples(self) -> list[tuple]:
        """Return the group keys as tuples, in group order (one empty tuple without groups)."""
        cols = [np.asarray(v).tolist() for v in self.keys.values()]
        return list(zip(*cols, strict=True)) if cols else [()]

    def merge(self, *others: PoissonPartials) -> PoissonPartials:
        """Return the exact sum of this shard's partials and others'.

        Parameters
        ----------
        *others : PoissonPartials
            Partials of other shards, with the same statistic, B, seed and columns.

        Returns
        -------
        PoissonPartials
            The merged partials; group keys align by value.

        Raises
        ------
        InvalidArgumentError
            Partials with a different statistic, B, seed, columns or group keys, or with and
            without clusters.
        NumericOverflowError
            The sums overflow 128 bits when aligning scales.
        """
        out = self
        for other in others:
            out = out._merge_one(other)
        return out

    def __add__(self, other: PoissonPartials) -> PoissonPartials:
        return self.merge(other)

    def _merge_one(self, other: PoissonPartials) -> PoissonPartials:
        """Return the exact sum of two shards' partials, groups aligned by key value."""
        for attr in ("statistic", "n_resamples", "seed"):
            if getattr(self, attr) != getattr(other, attr):
                raise InvalidArgumentError(
                    f"cannot merge Poisson partials with different {attr}: "
                    f"{getattr(self, attr)!r} vs {getattr(other, attr)!r}"
                )
        if self.hi.shape[2] != other.hi.shape[2] or list(self.keys) != list(other.keys):
            raise InvalidArgumentError(
                "cannot merge Poisson partials with different columns or group keys"
            )
        if (self.cluster_keys is None) != (other.cluster_keys is None):
            raise InvalidArgumentError("cannot merge Poisson partials with and without clusters")
        scale = np.maximum(self.scale, other.scale)
        a_hi, a_lo = _shift_left(self.hi, self.lo, scale - self.scale)
        b_hi, b_lo = _shift_left(other.hi, other.lo, scale - other.scale)
        ta, tb = self._group_tuples(), other._group_tuples()
        union = sorted(set(ta) | set(tb)) if self.keys else [()]
        pos = {t: i for i, t in enumerate(union)}
        ia = np.array([pos[t] for t in ta], dtype=np.int64)
        ib = np.array([pos[t] for t in tb], dtype=np.int64)
        g = len(union)
        shape = (g, *self.hi.shape[1:])
        hi = np.zeros(shape, np.int64)
        lo = np.zeros(shape, np.uint64)
        weight = np.zeros((g, self.weight.shape[1]), np.int64)
        n = np.zeros(g, np.int64)
        n_units = np.zeros(g, np.int64)
        for idx, h, l_, part in ((ia, a_hi, a_lo, self), (ib, b_hi, b_lo, other)):
            hi[idx], lo[idx] = _add128(hi[idx], lo[idx], h, l_)
            weight[idx] += part.weight
            n[idx] += part.n
            n_units[idx] += part.n_units
        cluster_keys = None
        if self.cluster_keys is not None and other.cluster_keys is not None:
            merged: list[np.ndarray] = [np.zeros(0, np.uint64)] * g
            for idx, part in ((ia, self), (ib, other)):
                for i, ck in zip(idx.tolist(), part.cluster_keys, strict=True):
                    merged[i] = np.union1d(merged[i], ck)
            cluster_keys = tuple(merged)
            n_units = np.array([len(ck) for ck in merged], dtype=np.int64)
        keys = {name: np.array([t[j] for t in union]) for j, name in enumerate(self.keys)}
        return PoissonPartials(keys, hi, lo, weight, scale, n, n_units, self.statistic,
                               self.n_resamples, self.seed, cluster_keys)  # fmt: skip

    def finalize(
        self, *, options: BootstrapOptions | None = None, return_distribution: bool = False
    ) -> BootstrapResult:
        """Compute the intervals from the (merged) partials.

        Parameters
        ----------
        options : BootstrapOptions, optional
            The level, method and threads of the interval. Its ``n_resamples`` and ``seed`` must
            be those the partials were drawn with (default: those, with the default level and
            method). BCa needs a jackknife over all records, which partials do not carry: use
            "percentile" or "basic" here, or ``bootstrap(scheme="poisson")`` with "bca" on the
            whole data.
        return_distribution : bool, default False
            Also return the (groups, B) bootstrap distribution.

        Returns
        -------
        BootstrapResult
            Scheme "poisson", one entry per group of the (merged) partials (Python scalars
            when the partials were computed without groups).

        Raises
        ------
        InvalidArgumentError
            Options whose n_resamples or seed differ from the partials', or method "bca".
        """
        if options is None:
            options = BootstrapOptions(n_resamples=self.n_resamples, seed=self.seed)
        opts = BootstrapOptions.resolve(options)
        for name in ("n_resamples", "seed"):
            if getattr(opts, name) != getattr(self, name):
                raise InvalidArgumentError(
                    f"options: {name}={getattr(opts, name)} but the partials were drawn with "
                    f"{name}={getattr(self, name)}"
                )
        if opts.method == "bca":
            raise InvalidArgumentError(
                "options: method 'bca' needs the jackknife over every record, which Poisson "
                "partials do not carry; use 'percentile' or 'basic', or "
                "bootstrap(..., scheme='poisson') on the whole data"
            )
        accel = np.full(self.n.shape[0], np.nan)
        out = _core.stats.poisson_finalize(
            self.hi, self.lo, self.weight, self.scale, self.n, self.n_units, accel,
            self.statistic, [], 0, opts.method, opts.level, opts.engine_threads,
            _validate.flag(return_distribution, name="return_distribution"),
        )  # fmt: skip
        check_numbers(out, self.keys, statistic=self.statistic)
        res = result(out, self.keys, statistic=self.statistic, scheme="poisson", options=opts,
                     n_resamples=self.n_resamples)  # fmt: skip
        return single(res, grouped=bool(self.keys))


@options_keywords(BootstrapOptions)
def poisson_partials(
    values: Values,
    *,
    groups: Labels | None = None,
    clusters: Labels | None = None,
    keys: Labels | None = None,
    statistic: str = "mean",
    options: BootstrapOptions | None = None,
) -> PoissonPartials:
    """Compute the Poisson-bootstrap partial sums of one shard of the data.

    Parameters
    ----------
    values : array_like
        Per-item values, as in :func:`~tumorboard.stats.bootstrap`.
    groups : labels, optional
        One set of partials per group; shards may hold different groups.
    clusters : labels, optional
        Resampling clusters: the weight is keyed by the cluster label and all records of a
        cluster share it (a cluster may span shards).
    keys : labels, optional
        A stable key per record (integers or strings), so that its weights do not depend on
        which shard holds it. Required unless ``clusters`` is given.
    statistic : {"mean", "sum", "ratio", "f1"}, default "mean"
        As in :func:`~tumorboard.stats.bootstrap`.
    options : BootstrapOptions, optional
        ``n_resamples``, ``seed`` and ``threads`` of the draws (level and method apply at
        :meth:`PoissonPartials.finalize`). Every shard must use the same n_resamples and seed.

    Returns
    -------
    PoissonPartials
        The shard's exact partial sums.

    Raises
    ------
    InvalidArgumentError
        An invalid argument, or neither ``keys`` nor ``clusters``.
    """
    arr = _validate.values(values)
    _validate.statistic(statistic, arr)
    opts = BootstrapOptions.resolve(options)
    if keys is None and clusters is None:
        raise InvalidArgumentError(
            "keys: Poisson partials need stable record keys (or clusters) so that weights do "
            "not depend on how the data are split"
        )
    _validate.poisson_magnitudes(arr)
    lay = _validate.layout(arr.shape[0], groups=groups, clusters=clusters)
    _validate.resample_memory(opts.n_resamples, lay.n_groups, arr.shape[1], scheme="poisson",
                              return_distribution=False)  # fmt: skip
    out = _core.stats.poisson_partials(
        arr, lay.group, lay.n_groups, lay.cluster, lay.n_clusters,
        _validate.record_keys(keys, arr.shape[0]), lay.cluster_keys, statistic, [], 0,
        opts.n_resamples, opts.seed, opts.engine_threads, False,
    )  # fmt: skip
    cluster_keys = None
    if lay.cluster is not None:
        cluster_keys = _cluster_keys_per_group(lay.group, lay.n_groups, lay.cluster,
                                               lay.cluster_keys)  # fmt: skip
    return PoissonPartials(lay.keys, out["hi"], out["lo"], out["weight"], out["scale"],
                           out["n"], out["n_units"], statistic, opts.n_resamples, opts.seed,
                           cluster_keys)  # fmt: skip


def _cluster_keys_per_group(group: np.ndarray | None, n_groups: int, cluster: np.ndarray,
                            cluster_keys: np.ndarray) -> tuple[np.ndarray, ...]:  # fmt: skip
    """Return the sorted unique stable cluster keys of each group (vectorized over records)."""
    g = np.zeros_like(cluster) if group is None else group
    pairs = np.unique(np.column_stack([g, cluster]), axis=0)
    keys = cluster_keys[pairs[:, 1]]
    bounds = np.searchsorted(pairs[:, 0], np.arange(n_groups + 1))
    return tuple(np.sort(keys[bounds[i] : bounds[i + 1]]) for i in range(n_groups))
