"""Paired tests of two systems on the same items: McNemar's exact test and sign-flip permutation.

* :func:`mcnemar` - for 0/1 outcomes: the exact (binomial) McNemar test on the discordant pairs
  (McNemar 1947, *Psychometrika* 12:153-157; the exact form: Fagerland, Lydersen & Laake 2013,
  "The McNemar test for binary matched-pairs data: mid-p and asymptotic are better than exact
  conditional", *BMC Med Res Methodol* 13:91, which also defines the mid-p version reported
  beside it). Same p-value as ``statsmodels.stats.contingency_tables.mcnemar(exact=True)``.
* :func:`sign_flip_test` - for any per-item differences: the permutation test of H0 "the
  differences are symmetric about 0", flipping the sign of each item's difference (or of each
  cluster's, for clustered items: Good 2005, *Permutation, Parametric and Bootstrap Tests of
  Hypotheses*, sec. 3.1), exactly over all 2^n sign patterns when there are at most
  ``n_resamples`` of them and by Monte Carlo otherwise. Same p-value as
  ``scipy.stats.permutation_test(permutation_type="samples")`` on one sample.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _core
from ..errors import InvalidArgumentError
from ._exact import binom_cdf, binom_cdf_many, binom_pmf

__all__ = ["McNemarResult", "SignFlipResult", "mcnemar", "sign_flip_test"]

#: Discordant pairs up to which McNemar's binomial tail is summed in integers (one rounding;
#: the cost grows as the square of the count); above it, the regularised incomplete beta
#: function (as scipy's ``binom.cdf``, which statsmodels' exact McNemar calls).
_EXACT_MAX = 2_000

#: Whether the sign-flip test generates numpy's PCG64 outputs in the compiled core (else it
#: draws them with numpy and passes them in: the same patterns; tests run both).
_PCG64_IN_CORE = True


@dataclass(frozen=True)
class McNemarResult:
    """McNemar's test of two systems' 0/1 outcomes on the same items.

    Attributes
    ----------
    n : int
        Items (pairs).
    only_a, only_b : int
        Discordant pairs: items only system a got right, items only b got right.
    p_value : float
        Exact two-sided p-value: ``min(1, 2 P(X <= min(only_a, only_b)))`` with
        X ~ Binomial(only_a + only_b, 1/2); 1 without discordant pairs.
    p_mid : float
        The mid-p version: ``min(1, 2 P(X <= k) - P(X = k))`` with k = min(only_a, only_b).
    """

    n: int
    only_a: int
    only_b: int
    p_value: float
    p_mid: float


@dataclass(frozen=True)
class SignFlipResult:
    """Sign-flip permutation test of paired differences.

    Attributes
    ----------
    statistic : float
        The mean difference (over items; unchanged by clustering).
    p_value : float
        Two-sided p-value: the share of sign patterns whose mean difference is at least as far
        from 0 as the observed one (the observed pattern counted; Monte Carlo:
        ``(1 + hits) / (1 + n_resamples)``).
    n_units : int
        Units whose signs are flipped (items, or clusters).
    exact : bool
        Whether every sign pattern was enumerated.
    n_resamples : int
        Patterns evaluated (2^n_units when exact).
    """

    statistic: float
    p_value: float
    n_units: int
    exact: bool
    n_resamples: int


def _binary(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise InvalidArgumentError(
            f"{name}: expected a 1-D array of 0/1 outcomes, got {arr.ndim}-D"
        )
    if arr.dtype == bool:
        return arr
    if not np.issubdtype(arr.dtype, np.number) or not np.isin(arr, (0, 1)).all():
        raise InvalidArgumentError(f"{name}: expected 0/1 (or boolean) outcomes")
    return arr.astype(bool)


def mcnemar(a: Any, b: Any) -> McNemarResult:
    """Run McNemar's exact test (with its mid-p) on two systems' 0/1 outcomes.

    Parameters
    ----------
    a, b : array_like
        Each system's 0/1 (or boolean) outcome per item, row i of both the same item.

    Returns
    -------
    McNemarResult
        The discordant counts, the exact p-value and the mid-p value.

    Raises
    ------
    InvalidArgumentError
        Not 1-D 0/1 arrays of the same length.
    """
    va, vb = _binary(a, "a"), _binary(b, "b")
    if va.shape != vb.shape:
        raise InvalidArgumentError(
            f"a and b: expected the same length, got {va.shape[0]} and {vb.shape[0]}"
        )
    only_a = int(np.count_nonzero(va & ~vb))
    only_b = int(np.count_nonzero(vb & ~va))
    return mcnemar_counts(int(va.size), only_a, only_b)


def mcnemar_counts(n: int, only_a: int, only_b: int) -> McNemarResult:
    """Run McNemar's exact test (with its mid-p) on the discordant counts of n paired items.

    :func:`mcnemar` from the table instead of the outcomes (``compare`` counts every pair's
    discordant items at once with one matrix product).

    Parameters
    ----------
    n : int
        Paired items.
    only_a, only_b : int
        Items only a got right, items only b got right.

    Returns
    -------
    McNemarResult
        As :func:`mcnemar`.
    """
    m, k = only_a + only_b, min(only_a, only_b)
    if m == 0:
        return McNemarResult(n=n, only_a=0, only_b=0, p_value=1.0, p_mid=1.0)
    if m <= _EXACT_MAX:  # integer arithmetic, one rounding: hand-worked cases come out exact
        total = 1 << m
        term = tail = 1  # C(m, 0); C(m, i + 1) = C(m, i) (m - i) / (i + 1), exactly
        for i in range(k):
            term = term * (m - i) // (i + 1)
            tail += term
        p = min(1.0, 2 * tail / total)
        mid = min(1.0, (2 * tail - term) / total)  # 2 [P(X <= k) - P(X = k) / 2]
    else:
        cdf = binom_cdf(k, m, 0.5)
        p = min(1.0, 2.0 * cdf)
        mid = min(1.0, 2.0 * cdf - binom_pmf(k, m, 0.5))
    return McNemarResult(n=n, only_a=only_a, only_b=only_b, p_value=p, p_mid=mid)


def mcnemar_many(n: int, only_a: np.ndarray, only_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return :func:`mcnemar_counts`' p-values and mid-p values for many pairs, bit for bit.

    Pairs of more than ``_EXACT_MAX`` discordant items take the binomial distribution function
    together (:func:`._exact.binom_cdf_many`), the others one by one.
    """
    only_a = np.asarray(only_a, dtype=np.int64)
    only_b = np.asarray(only_b, dtype=np.int64)
    p = np.empty(only_a.size)
    mid = np.empty(only_a.size)
    m = only_a + only_b
    k = np.minimum(only_a, only_b)
    bulk = (m > _EXACT_MAX) & (m < 2**20)
    for i in np.flatnonzero(~bulk).tolist():
        res = mcnemar_counts(n, int(only_a[i]), int(only_b[i]))
        p[i], mid[i] = res.p_value, res.p_mid
    if bulk.any():
        kb, mb = k[bulk], m[bulk]
        cdf = binom_cdf_many(kb, mb, 0.5)
        pmf = np.array([binom_pmf(i, j, 0.5) for i, j in zip(kb.tolist(), mb.tolist(),
                                                                strict=True)])  # fmt: skip
        p[bulk] = np.minimum(1.0, 2.0 * cdf)
        mid[bulk] = np.minimum(1.0, 2.0 * cdf - pmf)
    return p, mid


def sign_flip_test(
    differences: Any,
    *,
    clusters: Any = None,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> SignFlipResult:
    """Test H0 "paired differences are symmetric about 0" by flipping their signs.

    Parameters
    ----------
    differences : array_like
        Per-item differences ``a - b`` (1-D, finite).
    clusters : array_like, optional
        A cluster label per item (e.g. the patient): the sign of a whole cluster's differences
        flips together, as items of one cluster are not independent.
    n_resamples : int, default 10000
        Sign patterns to draw; when 2^units is at most this, every pattern is enumerated.
    seed : int, default 0
        Seed of the patterns (numpy PCG64); the result does not depend on threads.

    Returns
    -------
    SignFlipResult
        The mean difference and its two-sided p-value.

    Raises
    ------
    InvalidArgumentError
        Differences not 1-D and finite, clusters of another length, or ``n_resamples`` < 1.
    """
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 1 or not np.isfinite(d).all():
        raise InvalidArgumentError("differences: expected a 1-D array of finite numbers")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise InvalidArgumentError(f"n_resamples: expected an integer >= 1, got {n_resamples!r}")
    n = d.size
    if n == 0:
        return SignFlipResult(float("nan"), 1.0, 0, True, 0)
    if clusters is None:
        return sign_flip_sums(d, d, n_resamples=n_resamples, seed=seed)
    labels = np.asarray(clusters)
    if labels.shape != d.shape:
        raise InvalidArgumentError(
            f"clusters: expected one label per difference ({n}), got shape {labels.shape}"
        )
    _, inverse = np.unique(labels, return_inverse=True)
    return sign_flip_sums(d, np.bincount(inverse.ravel(), weights=d), n_resamples=n_resamples,
                          seed=seed)  # fmt: skip


def sign_flip_sums(
    d: np.ndarray, sums: np.ndarray, *, n_resamples: int, seed: int
) -> SignFlipResult:
    """:func:`sign_flip_test` of differences ``d`` whose units (items or clusters) sum to ``sums``.

    For callers that test many pairs over one set of clusters (``stats.compare``): the
    clusters are coded once, not per pair. Arguments are not checked again.
    """
    n = d.size
    units = sums.size
    observed = float(d.sum())
    tol = _tie_tolerance(sums)
    if units <= 62 and 2**units <= n_resamples:
        total = 2**units
        hits = 0
        block = 1 << min(units, 16)
        for start in range(0, total, block):
            codes = np.arange(start, min(start + block, total), dtype=np.uint64)
            bits = (codes[:, None] >> np.arange(units, dtype=np.uint64)) & np.uint64(1)
            stats = (np.where(bits == 1, -1.0, 1.0) * sums).sum(axis=1)
            hits += int(np.count_nonzero(np.abs(stats) >= abs(observed) - tol))
        return SignFlipResult(observed / n, min(1.0, hits / total), units, True, total)
    # The patterns numpy's Generator.integers(0, 2, size=(m, units), dtype=np.int8) * 2 - 1
    # draws in chunks of m patterns (what this test drew through 2026-11): its Lemire draw
    # of {0, 1} from a byte is the byte's top bit, and the bytes are those of the 32-bit
    # outputs, low byte first, each chunk starting on a fresh output. They are read from the
    # raw 64-bit outputs (low half first) and summed in the compiled core.
    rng = np.random.default_rng(seed)
    sums = np.ascontiguousarray(sums, dtype=np.float64)
    threshold = abs(observed) - tol
    chunk = _chunk(units)
    words = _core_pcg64_words(rng)
    if words is not None:
        # numpy's default generator: its outputs generated in the core, where they are used
        hits = _core.stats.sign_flip_hits_pcg64(sums, words, n_resamples, chunk, threshold)
        p = (1.0 + hits) / (1.0 + n_resamples)
        return SignFlipResult(observed / n, min(1.0, p), units, False, n_resamples)
    hits = 0
    done = 0
    spare = np.zeros(0, dtype="<u4")  # the high half of a 64-bit output not yet used
    while done < n_resamples:
        m = min(n_resamples - done, chunk)
        need = -(-m * units // 4)
        words, spare = _next_uint32(rng, need, spare)
        hits += _core.stats.sign_flip_hits(sums, words.view(np.uint8), m, threshold)
        done += m
    p = (1.0 + hits) / (1.0 + n_resamples)
    return SignFlipResult(observed / n, min(1.0, p), units, False, n_resamples)


def sign_flip_many(
    diffs: list[np.ndarray], sums: np.ndarray, *, n_resamples: int, seed: int
) -> list[SignFlipResult]:
    """:func:`sign_flip_sums` of many pairs whose unit sums share their units (rows of ``sums``).

    Every pair draws the same patterns (the same seed, the same number of units), so where the
    core draws numpy's PCG64 patterns they are drawn once for every eight pairs and each pair's
    sums added in the same order (``_core.stats.sign_flip_hits_pcg64_many``): the results of
    :func:`sign_flip_sums` pair by pair, bit for bit. Otherwise the pairs go one by one.
    """
    units = sums.shape[1] if sums.ndim == 2 else 0
    words = _core_pcg64_words(np.random.default_rng(seed))
    if words is None or len(diffs) < 2 or (units <= 62 and 2**units <= n_resamples):
        return [sign_flip_sums(d, s, n_resamples=n_resamples, seed=seed)
                for d, s in zip(diffs, sums, strict=True)]  # fmt: skip
    sums = np.ascontiguousarray(sums, dtype=np.float64)
    observed = [float(d.sum()) for d in diffs]
    thresholds = np.array([abs(o) - _tie_tolerance(row)
                           for o, row in zip(observed, sums, strict=True)])  # fmt: skip
    hits = _core.stats.sign_flip_hits_pcg64_many(sums, thresholds, words, n_resamples,
                                                 _chunk(units))  # fmt: skip
    return [
        SignFlipResult(o / d.size, min(1.0, (1.0 + int(h)) / (1.0 + n_resamples)), units, False,
                       n_resamples)
        for o, d, h in zip(observed, diffs, hits.tolist(), strict=True)
    ]  # fmt: skip


def _tie_tolerance(sums: np.ndarray) -> float:
    """Return how close to the observed sum a pattern's sum counts as "as extreme".

    Ties up to rounding count, as scipy counts them.
    """
    return 1e-14 * max(1.0, float(np.abs(sums).sum()))


def _chunk(units: int) -> int:
    """Patterns drawn at a time (what numpy's draws of this test took, 2^22 sign bytes)."""
    return max(1, 2**22 // max(units, 1))


def _core_pcg64_words(rng: np.random.Generator) -> list[int] | None:
    """Return the state of a fresh numpy PCG64 as the core's four 64-bit words, or None.

    None where the patterns are drawn by numpy instead (another bit generator, a buffered
    32-bit half, or ``_PCG64_IN_CORE`` off).
    """
    state = rng.bit_generator.state
    if not _PCG64_IN_CORE or state["bit_generator"] != "PCG64" or state["has_uint32"]:
        return None
    pcg = state["state"]
    return [(v >> s) & 0xFFFFFFFFFFFFFFFF for v in (pcg["state"], pcg["inc"]) for s in (64, 0)]


def _next_uint32(
    rng: np.random.Generator, need: int, spare: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Return the next ``need`` 32-bit outputs of ``rng`` (as little-endian words) and the spare.

    numpy's 32-bit draws from a 64-bit generator take the low half of an output first and keep
    the high half for the next (PCG64's ``has_uint32``); ``spare`` carries that half between
    calls. The 64-bit outputs are drawn as full-range integers, which numpy returns as they
    come (``bit_generator.random_raw`` gives the same, four times slower).
    """
    k = max(0, -(-(need - spare.size) // 2))
    raw = rng.integers(0, 2**64, size=k, dtype=np.uint64)
    if sys.byteorder == "little":  # a 64-bit word's memory is its low half, then its high half
        halves = raw.view(np.uint32)
    else:  # pragma: no cover - no big-endian machine runs the tests
        halves = np.empty(2 * k, dtype="<u4")
        halves[0::2] = raw & np.uint64(0xFFFFFFFF)
        halves[1::2] = raw >> np.uint64(32)
    words = np.concatenate([spare, halves]) if spare.size else halves
    return words[:need], words[need:].copy()
