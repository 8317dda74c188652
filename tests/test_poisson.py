"""Tests of the Poisson bootstrap (python/tumorboard/_poisson.py, csrc/stats/poisson.cpp).

* Poisson(1) weights from 32-bit words: exact thresholds (to 2^-32), moments, chi-square;
* shard partials merged with ``+`` / ``merge()`` equal the partials of the whole data bit for bit
  (2, 3 and 7 random shards, shards missing groups, string / integer / composite record keys,
  very different magnitudes across shards, clusters spanning shards), and ``finalize()`` equals
  ``bootstrap(..., scheme="poisson")`` bit for bit;
* weights are keyed by record, not position: permuting records changes nothing;
* the resampled totals have the Poisson distribution they should; Poisson intervals agree with
  multinomial ones within Monte-Carlo error; argument errors.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from _scalar_paths import assert_same_arrays, fast_and_scalar
from scipy import stats as sps
from tumorboard import _core
from tumorboard.errors import InvalidArgumentError, InvalidTypeError
from tumorboard.stats import BootstrapOptions, PoissonPartials, bootstrap, poisson_partials

PARTIAL_FIELDS = ("hi", "lo", "weight", "scale", "n", "n_units")
RESULT_FIELDS = ("n", "estimate", "boot_mean", "se", "ci_low", "ci_high", "degenerate",
                 "n_valid")  # fmt: skip


def assert_partials_equal(a: PoissonPartials, b: PoissonPartials, fields=PARTIAL_FIELDS) -> None:
    for f in fields:
        x, y = getattr(a, f), getattr(b, f)
        assert x.shape == y.shape, f
        assert np.array_equal(x, y), f"partials differ in {f}"
    assert list(a.keys) == list(b.keys)
    for name in a.keys:
        assert a.keys[name].tolist() == b.keys[name].tolist()


def assert_results_identical(r1, r2, fields=RESULT_FIELDS) -> None:
    for f in fields:
        x, y = np.asarray(getattr(r1, f)), np.asarray(getattr(r2, f))
        assert x.shape == y.shape, f
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f"results differ in {f}"
    if r1.distribution is not None or r2.distribution is not None:
        assert np.array_equal(r1.distribution, r2.distribution, equal_nan=True)
    for name in r1.keys:
        assert r1.keys[name].tolist() == r2.keys[name].tolist()


def split_into_shards(n: int, n_shards: int, seed: int) -> list[np.ndarray]:
    """Random disjoint shards covering all records (every shard non-empty)."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    cuts = np.sort(rng.choice(np.arange(1, n), n_shards - 1, replace=False))
    return [np.sort(s) for s in np.split(perm, cuts)]


# ------------------------------------------------------------------------------------------------
# Poisson(1) weights


def _thresholds() -> list[int]:
    """T[j] = smallest 32-bit word whose weight exceeds j (binary search; weights are monotone)."""
    out = []
    for j in range(16):
        lo, hi = 0, 2**32  # invariant: w(lo - 1) <= j (or lo == 0), w(hi) > j (or hi == 2^32)
        while lo < hi:
            mid = (lo + hi) // 2
            if int(_core.testing.poisson1_from_u32(np.array([mid], dtype=np.uint32))[0]) > j:
                hi = mid
            else:
                lo = mid + 1
        out.append(lo)
    return out


def test_poisson_weights_are_exact_inversion_of_poisson1():
    t = _thresholds()
    cdf = sps.poisson.cdf(np.arange(16), 1.0)
    # P(W <= j) is represented to within one part in 2^32 (rounding of 2^32 * cdf).
    for j in range(16):
        assert abs(t[j] - 2**32 * cdf[j]) <= 1.0, j
    assert t == sorted(t)
    assert t[-1] == 2**32  # every word maps to a weight in 0..15
    # exact moments of the weight over all 2^32 words
    prob = np.diff(np.array([0] + t, dtype=float)) / 2.0**32
    j = np.arange(16)
    mean = (prob * j).sum()
    assert abs(mean - 1.0) < 1e-8
    assert abs((prob * (j - mean) ** 2).sum() - 1.0) < 1e-8


def test_poisson_weights_on_a_uniform_grid_of_words():
    grid = (np.arange(2**16, dtype=np.uint64) << np.uint64(16)).astype(np.uint32)
    w = np.asarray(_core.testing.poisson1_from_u32(grid))
    assert w.min() == 0 and w.max() <= 15
    assert np.all(np.diff(w) >= 0)  # inversion: monotone in the word
    counts = np.bincount(w, minlength=16)
    expected = 2**16 * sps.poisson.pmf(np.arange(counts.size), 1.0)
    # a grid of spacing 2^16 counts each weight's word range to within one grid step
    assert np.all(np.abs(counts - expected) <= 1.0)
    # the grid truncates the far tail (P(W >= 8) < 2^-16), hence the looser moment bounds
    assert abs(w.mean() - 1.0) < 1e-3
    assert abs(w.var() - 1.0) < 3e-3
    # extremes
    ends = np.asarray(_core.testing.poisson1_from_u32(np.array([0, 2**32 - 1], dtype=np.uint32)))
    assert ends[0] == 0 and 9 <= ends[1] <= 15


def test_poisson_weights_from_random_words_chi_square():
    x = np.random.default_rng(11).integers(0, 2**32, 400_000, dtype=np.uint64).astype(np.uint32)
    w = np.asarray(_core.testing.poisson1_from_u32(x))
    m = w.size
    assert abs(w.mean() - 1.0) < 5 * np.sqrt(1.0 / m)
    # Var(s^2) ~ (mu4 - sigma^4) / m with mu4 = 4 for Poisson(1)
    assert abs(w.var() - 1.0) < 5 * np.sqrt(3.0 / m)
    obs = np.bincount(w, minlength=7).astype(float)
    obs = np.append(obs[:6], obs[6:].sum())  # 0..5, >= 6
    pmf = sps.poisson.pmf(np.arange(6), 1.0)
    exp = m * np.append(pmf, 1.0 - pmf.sum())
    assert sps.chisquare(obs, exp).pvalue > 1e-3


def test_resampled_totals_are_poisson():
    # "sum" of n ones: in every resample the total weight of n independent Poisson(1) records is
    # Poisson(n). This checks independence of the weights across records as well as resamples.
    n, b = 40, 20_000
    part = poisson_partials(
        np.ones(n),
        keys=np.arange(n),
        statistic="sum",
        options=BootstrapOptions(n_resamples=b, seed=3),
    )
    totals = part.weight[0, :b]
    assert part.weight[0, b] == n  # last slot: the full data
    res = part.finalize(return_distribution=True)
    assert np.array_equal(res.distribution, totals.astype(float))
    obs = np.bincount(totals).astype(float)
    k = np.arange(obs.size)
    exp = b * sps.poisson.pmf(k, n)
    keep = (k >= 26) & (k <= 55)  # central bins with expected counts >= ~5
    obs_g = np.concatenate([[obs[k < 26].sum()], obs[keep], [obs[k > 55].sum()]])
    exp_g = np.concatenate([[b * sps.poisson.cdf(25, n)], exp[keep], [b * sps.poisson.sf(55, n)]])
    assert sps.chisquare(obs_g, exp_g * obs_g.sum() / exp_g.sum()).pvalue > 1e-3
    # weights of different resamples are independent: consecutive totals uncorrelated
    r = np.corrcoef(totals[:-1], totals[1:])[0, 1]
    assert abs(r) < 5 / np.sqrt(b)


# ------------------------------------------------------------------------------------------------
# Exact merging of shards


def _data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    values = np.round(rng.normal(0.6, 1.0, n), 3)  # finite decimals: non-dyadic, scale capped at 64
    groups = rng.choice(["model-a", "model-b", "ünïcode", "Z"], n, p=[0.4, 0.3, 0.2, 0.1])
    keys = np.array([f"q{i:05d}" for i in rng.permutation(n)])
    return values, groups, keys


@pytest.mark.parametrize("n_shards", [2, 3, 7])
def test_shards_merge_to_the_whole_data(n_shards):
    n, b, seed = 900, 203, 17  # B not a multiple of 4 or of the 64-resample task block
    values, groups, keys = _data(n, n_shards)
    whole = poisson_partials(
        values, groups=groups, keys=keys, options=BootstrapOptions(n_resamples=b, seed=seed)
    )
    shards = [
        poisson_partials(
            values[i],
            groups=groups[i],
            keys=keys[i],
            options=BootstrapOptions(n_resamples=b, seed=seed),
        )
        for i in split_into_shards(n, n_shards, seed=n_shards)
    ]
    merged = shards[0]
    for s in shards[1:]:
        merged = merged + s
    assert_partials_equal(merged, whole)
    # merge() with several arguments, and another order of the shards
    assert_partials_equal(shards[-1].merge(*shards[:-1]), whole)
    assert_partials_equal(sum(shards[1:], shards[0]), whole)
    # finalize is bit-identical to the single-process Poisson bootstrap
    for method in ("percentile", "basic"):
        opts = BootstrapOptions(method=method, level=0.9, n_resamples=b, seed=seed)
        fin = merged.finalize(options=opts, return_distribution=True)
        ref = bootstrap(
            values,
            groups=groups,
            keys=keys,
            scheme="poisson",
            options=BootstrapOptions(method=method, level=0.9, n_resamples=b, seed=seed),
            return_distribution=True,
        )
        assert_results_identical(fin, ref, RESULT_FIELDS + ("n_units",))
        assert fin.to_polars().equals(ref.to_polars())


def test_shards_missing_groups_merge_exactly():
    n, b, seed = 400, 128, 5
    values, groups, keys = _data(n, 1)
    # shard 0: only "model-a"; shard 1: only "Z" and "ünïcode"; shard 2: the rest
    s0 = groups == "model-a"
    s1 = np.isin(groups, ["Z", "ünïcode"])
    s2 = ~(s0 | s1)
    parts = [
        poisson_partials(
            values[m],
            groups=groups[m],
            keys=keys[m],
            options=BootstrapOptions(n_resamples=b, seed=seed),
        )
        for m in (s0, s1, s2)
    ]
    assert [len(p.n) for p in parts] == [1, 2, 1]
    whole = poisson_partials(
        values, groups=groups, keys=keys, options=BootstrapOptions(n_resamples=b, seed=seed)
    )
    assert_partials_equal(parts[1] + parts[2] + parts[0], whole)
    assert_partials_equal((parts[0] + parts[1]) + parts[2], parts[0] + (parts[1] + parts[2]))
    assert list(whole.keys["groups"]) == sorted(set(groups))  # keys sorted, as in bootstrap()
    # a group split over shards, some shards lacking it: mixed random split
    idx = split_into_shards(n, 3, seed=9)
    idx[0] = idx[0][groups[idx[0]] != "Z"]  # drop "Z" from shard 0 ...
    idx[1] = np.concatenate([idx[1], np.flatnonzero(groups == "Z")])  # ... into shard 1
    idx[1] = np.unique(idx[1])
    idx[2] = np.setdiff1d(idx[2], idx[1])
    assert sum(map(len, idx)) == n
    parts = [
        poisson_partials(
            values[i],
            groups=groups[i],
            keys=keys[i],
            options=BootstrapOptions(n_resamples=b, seed=seed),
        )
        for i in idx
    ]
    merged = parts[0].merge(parts[1], parts[2])
    assert_partials_equal(merged, whole)
    ref = bootstrap(
        values,
        groups=groups,
        keys=keys,
        scheme="poisson",
        options=BootstrapOptions(n_resamples=b, seed=seed),
    )
    assert_results_identical(merged.finalize(), ref)


def test_integer_and_composite_keys_and_groups():
    n, b, seed = 500, 96, 8
    rng = np.random.default_rng(2)
    values = rng.integers(0, 5, n).astype(float)
    ikeys = rng.permutation(10 * n)[:n] - 2000  # distinct, some negative
    igroups = rng.integers(-2, 3, n)  # integer group keys, negative included
    whole = poisson_partials(
        values, groups=igroups, keys=ikeys, options=BootstrapOptions(n_resamples=b, seed=seed)
    )
    assert list(whole.keys["groups"]) == [-2, -1, 0, 1, 2]
    idx = split_into_shards(n, 3, seed=4)
    merged = poisson_partials(values[idx[0]], groups=igroups[idx[0]], keys=ikeys[idx[0]],
                              options=BootstrapOptions(n_resamples=b, seed=seed))  # fmt: skip
    for i in idx[1:]:
        merged = merged + poisson_partials(
            values[i],
            groups=igroups[i],
            keys=ikeys[i],
            options=BootstrapOptions(n_resamples=b, seed=seed),
        )
    assert_partials_equal(merged, whole)
    ref = bootstrap(
        values,
        groups=igroups,
        keys=ikeys,
        scheme="poisson",
        options=BootstrapOptions(n_resamples=b, seed=seed),
    )
    assert_results_identical(merged.finalize(), ref)
    # composite record keys (doc, question) and composite groups (model, task), via polars
    doc = rng.integers(0, 50, n)
    question = np.arange(n) % 10 + 100 * (np.arange(n) // 500)
    _, first = np.unique(np.stack([doc, question], 1), axis=0, return_index=True)
    sel = np.sort(first)  # keep one record per (doc, question)
    kdf = pl.DataFrame({"doc": doc[sel], "q": question[sel]})
    gdf = pl.DataFrame({"model": np.where(sel % 2 == 0, "m1", "m2"), "task": sel % 3})
    v = values[sel]
    whole = poisson_partials(
        v, groups=gdf, keys=kdf, options=BootstrapOptions(n_resamples=b, seed=seed)
    )
    assert list(whole.keys) == ["model", "task"]
    halves = [np.arange(sel.size) < sel.size // 3, np.arange(sel.size) >= sel.size // 3]
    parts = [
        poisson_partials(
            v[h],
            groups=gdf.filter(pl.Series(h)),
            keys=kdf.filter(pl.Series(h)),
            options=BootstrapOptions(n_resamples=b, seed=seed),
        )
        for h in halves
    ]
    assert_partials_equal(parts[1] + parts[0], whole)
    ref = bootstrap(
        v,
        groups=gdf,
        keys=kdf,
        scheme="poisson",
        options=BootstrapOptions(n_resamples=b, seed=seed),
    )
    assert_results_identical((parts[0] + parts[1]).finalize(), ref)
    assert (parts[0] + parts[1]).finalize().to_polars().equals(ref.to_polars())


def test_scale_alignment_across_magnitudes():
    # Shards whose values need very different fixed-point scales: integers in the millions,
    # dyadic fractions, and tiny values (scale capped at 64). Merging aligns the scales exactly.
    n, b, seed = 300, 80, 21
    rng = np.random.default_rng(5)
    big = rng.integers(-(10**7), 10**7, n // 3).astype(float) * 64.0  # scale 0
    mid = rng.integers(0, 2**20, n // 3) / 2.0**18  # scale <= 18
    tiny = rng.normal(0, 1e-6, n - 2 * (n // 3))  # needs > 64 bits: capped
    values = np.concatenate([big, mid, tiny])
    keys = np.array([f"r{i}" for i in range(n)])
    groups = np.where(np.arange(n) % 2 == 0, "even", "odd")
    shards = [np.arange(n // 3), np.arange(n // 3, 2 * (n // 3)), np.arange(2 * (n // 3), n)]
    parts = [
        poisson_partials(
            values[s],
            groups=groups[s],
            keys=keys[s],
            options=BootstrapOptions(n_resamples=b, seed=seed),
        )
        for s in shards
    ]
    scales = [int(p.scale[0]) for p in parts]
    assert scales[0] == 0 and 0 < scales[1] <= 18 and scales[2] == 64
    whole = poisson_partials(
        values, groups=groups, keys=keys, options=BootstrapOptions(n_resamples=b, seed=seed)
    )
    assert int(whole.scale[0]) == 64
    for order in ([0, 1, 2], [2, 0, 1], [1, 2, 0]):
        merged = parts[order[0]].merge(*[parts[i] for i in order[1:]])
        assert_partials_equal(merged, whole)
    ref = bootstrap(
        values,
        groups=groups,
        keys=keys,
        scheme="poisson",
        options=BootstrapOptions(n_resamples=b, seed=seed),
        return_distribution=True,
    )
    assert_results_identical((parts[0] + parts[1] + parts[2]).finalize(return_distribution=True),
                             ref)  # fmt: skip
    # the exact sums are faithful to float64 here (tiny values rounded to 2^-64 at most)
    for g, name in enumerate(ref.keys["groups"]):
        assert ref.estimate[g] == pytest.approx(values[groups == name].mean(), rel=1e-12)


def test_multi_column_statistics_merge_exactly():
    n, b, seed = 600, 64, 2
    rng = np.random.default_rng(8)
    ratio = np.column_stack([rng.random(n) * 3, rng.integers(1, 4, n)])
    f1 = rng.integers(0, 3, (n, 3)).astype(float)
    keys = rng.permutation(n)
    groups = rng.integers(0, 3, n)
    for stat, values in (("ratio", ratio), ("f1", f1)):
        whole = poisson_partials(values, groups=groups, keys=keys, statistic=stat,
                                 options=BootstrapOptions(n_resamples=b, seed=seed))  # fmt: skip
        assert whole.hi.shape == (3, b + 1, values.shape[1])
        parts = [poisson_partials(values[i], groups=groups[i], keys=keys[i], statistic=stat,
                                  options=BootstrapOptions(n_resamples=b, seed=seed))
                 for i in split_into_shards(n, 7, seed=1)]  # fmt: skip
        merged = parts[0].merge(*parts[1:])
        assert_partials_equal(merged, whole)
        ref = bootstrap(values, groups=groups, keys=keys, statistic=stat, scheme="poisson",
                        options=BootstrapOptions(n_resamples=b, seed=seed))  # fmt: skip
        assert_results_identical(merged.finalize(), ref)


def test_weights_follow_record_keys_not_positions():
    n, b, seed = 250, 100, 4
    values, groups, keys = _data(n, 3)
    perm = np.random.default_rng(0).permutation(n)
    a = poisson_partials(
        values, groups=groups, keys=keys, options=BootstrapOptions(n_resamples=b, seed=seed)
    )
    p = poisson_partials(
        values[perm],
        groups=groups[perm],
        keys=keys[perm],
        options=BootstrapOptions(n_resamples=b, seed=seed),
    )
    assert_partials_equal(a, p)
    # other seeds and other keys give other weights
    c = poisson_partials(
        values, groups=groups, keys=keys, options=BootstrapOptions(n_resamples=b, seed=seed + 1)
    )
    assert not np.array_equal(a.weight, c.weight)
    d = poisson_partials(
        values,
        groups=groups,
        keys=np.char.add(keys, "x"),
        options=BootstrapOptions(n_resamples=b, seed=seed),
    )
    assert not np.array_equal(a.weight, d.weight)
    # the full-data slot does not depend on the weights
    assert np.array_equal(a.hi[:, -1], c.hi[:, -1]) and np.array_equal(a.lo[:, -1], d.lo[:, -1])
    # a resample's weights do not depend on how many resamples are drawn (counter = resample)
    short = poisson_partials(
        values, groups=groups, keys=keys, options=BootstrapOptions(n_resamples=37, seed=seed)
    )
    assert np.array_equal(short.weight[:, :37], a.weight[:, :37])
    assert np.array_equal(short.hi[:, :37], a.hi[:, :37])


def test_clusters_spanning_shards_merge_exactly():
    n, b, seed = 480, 96, 12
    rng = np.random.default_rng(6)
    clusters = np.array([f"patient{c:03d}" for c in rng.integers(0, 60, n)])
    values = rng.integers(0, 2, n).astype(float)
    groups = rng.choice(["gpt", "claude"], n)
    keys = np.arange(n)
    whole = poisson_partials(
        values,
        groups=groups,
        clusters=clusters,
        keys=keys,
        options=BootstrapOptions(n_resamples=b, seed=seed),
    )
    idx = split_into_shards(n, 3, seed=2)
    assert any(len(set(clusters[idx[0]]) & set(clusters[i])) > 0 for i in idx[1:])  # spans
    parts = [
        poisson_partials(
            values[i],
            groups=groups[i],
            clusters=clusters[i],
            keys=keys[i],
            options=BootstrapOptions(n_resamples=b, seed=seed),
        )
        for i in idx
    ]
    merged = parts[0] + parts[1] + parts[2]
    # the resample sums are exact: a cluster's weight is keyed by its label in every shard
    assert_partials_equal(merged, whole, ("hi", "lo", "weight", "scale", "n"))
    ref = bootstrap(
        values,
        groups=groups,
        clusters=clusters,
        scheme="poisson",
        options=BootstrapOptions(n_resamples=b, seed=seed),
        return_distribution=True,
    )
    fin = merged.finalize(return_distribution=True)
    assert_results_identical(fin, ref)
    # clusters without record keys work too (the cluster label keys the weight)
    no_keys = [
        poisson_partials(
            values[i],
            groups=groups[i],
            clusters=clusters[i],
            options=BootstrapOptions(n_resamples=b, seed=seed),
        )
        for i in idx
    ]
    assert_partials_equal(no_keys[0].merge(*no_keys[1:]), whole, ("hi", "lo", "weight", "n"))
    # all records of a cluster share its weight: the per-cluster bootstrap of cluster sums is
    # the same as the record-level bootstrap with clusters
    g0 = groups == ref.keys["groups"][0]
    c_codes, c_inv = np.unique(clusters[g0], return_inverse=True)
    csum = np.bincount(c_inv, weights=values[g0])
    csize = np.bincount(c_inv)
    # weight of cluster c in resample r is a function of (seed, c): rebuild totals from one-record
    # shards of cluster sums and check the resampled item totals match
    per_cluster = poisson_partials(
        np.column_stack([csum, csize]),
        clusters=c_codes,
        statistic="ratio",
        options=BootstrapOptions(n_resamples=b, seed=seed),
    )
    ratio_dist = per_cluster.finalize(return_distribution=True).distribution
    assert np.allclose(ratio_dist, ref.distribution[0], rtol=1e-12, atol=0, equal_nan=True)


def test_clusters_spanning_shards_count_units_once():
    # Regression: PoissonPartials._merge_one (python/tumorboard/_poisson.py) once did
    # `n_units[idx] += part.n_units`) adds the per-shard cluster counts, so a cluster that spans
    # k shards is counted k times in the merged `n_units`. Consequences: `finalize()` reports a
    # wrong `n_units` and, worse, a group with a single cluster spread over two shards is no
    # longer flagged degenerate (summarize() tests units < 2), so it gets a non-trivial interval
    # while `bootstrap(..., scheme="poisson")` on the whole data returns the degenerate
    # ci_low == ci_high == estimate. The module docstring promises bit-identical results for any
    # split. Repro:
    #   c = np.repeat(np.arange(30), 10); y = rng.normal(size=300)
    #   g = np.where(c == 0, "solo", "many")
    #   halves by np.arange(300) % 2; statistic="sum": merged n_units = [58, 2] vs whole [29, 1],
    #   "solo" degenerate False vs True.
    n, b, seed = 300, 96, 1
    rng = np.random.default_rng(0)
    clusters = np.repeat(np.arange(30), 10)
    values = rng.normal(size=n)
    groups = np.where(clusters == 0, "solo", "many")
    halves = [np.arange(n) % 2 == 0, np.arange(n) % 2 == 1]  # every cluster spans both shards
    parts = [
        poisson_partials(
            values[h],
            groups=groups[h],
            clusters=clusters[h],
            statistic="sum",
            options=BootstrapOptions(n_resamples=b, seed=seed),
        )
        for h in halves
    ]
    merged = parts[0] + parts[1]
    whole = poisson_partials(values, groups=groups, clusters=clusters, statistic="sum",
                             options=BootstrapOptions(n_resamples=b, seed=seed))  # fmt: skip
    assert np.array_equal(merged.hi, whole.hi) and np.array_equal(merged.lo, whole.lo)
    ref = bootstrap(values, groups=groups, clusters=clusters, statistic="sum", scheme="poisson",
                    options=BootstrapOptions(n_resamples=b, seed=seed))  # fmt: skip
    assert list(ref.n_units) == [29, 1] and list(ref.degenerate) == [False, True]
    fin = merged.finalize()
    solo = list(ref.keys["groups"]).index("solo")
    assert fin.degenerate[solo], "one cluster split over two shards is not degenerate after merge"
    assert fin.ci_low[solo] == fin.ci_high[solo] == fin.estimate[solo]
    assert list(fin.n_units) == list(ref.n_units)
    assert_results_identical(fin, ref)


# ------------------------------------------------------------------------------------------------
# Poisson vs multinomial, BCa, errors


def test_poisson_intervals_agree_with_multinomial():
    # Both bootstraps estimate the same sampling distribution (to O(1/n)). With B = 4000 the
    # Monte-Carlo sd of a 2.5% quantile of a ~normal distribution is about
    # sqrt(.025 * .975 / B) / phi(1.96) * se = 0.042 se, so the difference of two independent
    # estimates has sd ~ 0.06 se; allow 5 sd (0.3 se). The se estimate itself has relative MC sd
    # 1/sqrt(2B) = 1.1% each; allow 8% for the difference (incl. the O(1/n) bias).
    rng = np.random.default_rng(10)
    n, b = 400, 4000
    cases = {
        "normal": rng.normal(2.0, 1.0, n),
        "skewed": rng.exponential(1.0, n),
        "binary": (rng.random(n) < 0.3).astype(float),
    }
    for name, x in cases.items():
        pois = bootstrap(x, scheme="poisson", options=BootstrapOptions(n_resamples=b, seed=1))
        mult = bootstrap(x, scheme="multinomial", options=BootstrapOptions(n_resamples=b, seed=2))
        assert pois.estimate == pytest.approx(x.mean(), rel=1e-12)
        assert pois.estimate == pytest.approx(mult.estimate, rel=1e-12)
        se = mult.se
        assert abs(pois.se / se - 1.0) < 0.08, name
        assert abs(pois.ci_low - mult.ci_low) < 0.3 * se, name
        assert abs(pois.ci_high - mult.ci_high) < 0.3 * se, name
        assert abs(pois.boot_mean - x.mean()) < 5 * se / np.sqrt(b), name
        assert abs(se - x.std() / np.sqrt(n)) < 0.05 * se


def test_poisson_bca_single_process():
    rng = np.random.default_rng(12)
    x = rng.exponential(1.0, 300)
    b = 4000
    bca = bootstrap(
        x, scheme="poisson", options=BootstrapOptions(method="bca", n_resamples=b, seed=3)
    )
    ref = bootstrap(
        x, scheme="multinomial", options=BootstrapOptions(method="bca", n_resamples=b, seed=4)
    )
    se = ref.se
    # BCa ends carry extra MC error from z0; allow 0.4 se.
    assert abs(bca.ci_low - ref.ci_low) < 0.4 * se
    assert abs(bca.ci_high - ref.ci_high) < 0.4 * se
    # skewed data: BCa shifts the interval to the right of the percentile interval
    pct = bootstrap(
        x, scheme="poisson", options=BootstrapOptions(method="percentile", n_resamples=b, seed=3)
    )
    assert bca.ci_low > pct.ci_low and bca.ci_high > pct.ci_high
    # same distribution as the percentile run (same seed, same keys): only the ends move
    assert bca.se == pct.se and bca.boot_mean == pct.boot_mean


def test_finalize_rejects_bca_and_bad_options():
    part = poisson_partials(
        np.arange(20.0), keys=np.arange(20), options=BootstrapOptions(n_resamples=50, seed=0)
    )
    drawn = dict(n_resamples=50, seed=0)
    with pytest.raises(InvalidArgumentError, match="bca"):
        part.finalize(options=BootstrapOptions(method="bca", **drawn))
    with pytest.raises(InvalidArgumentError, match="n_resamples=60 but the partials"):
        part.finalize(options=BootstrapOptions(n_resamples=60))
    with pytest.raises(InvalidArgumentError, match="seed=1 but the partials"):
        part.finalize(options=BootstrapOptions(n_resamples=50, seed=1))
    with pytest.raises(InvalidTypeError, match="options"):
        part.finalize(options={"level": 0.8})
    res = part.finalize(options=BootstrapOptions(method="basic", level=0.8, **drawn))
    assert res.scheme == "poisson" and res.method == "basic" and res.level == 0.8
    assert (res.n_resamples, res.seed) == (50, 0)


def test_poisson_partials_argument_errors():
    x = np.arange(10.0)
    with pytest.raises(ValueError, match="keys"):
        poisson_partials(x, options=BootstrapOptions(n_resamples=10))  # neither keys nor clusters
    with pytest.raises(ValueError, match="keys"):
        poisson_partials(x, keys=np.arange(9), options=BootstrapOptions(n_resamples=10))
    with pytest.raises(ValueError, match="values"):
        poisson_partials(
            np.array([1.0, np.nan]), keys=[0, 1], options=BootstrapOptions(n_resamples=10)
        )
    with pytest.raises(ValueError, match="n_resamples"):
        poisson_partials(x, keys=np.arange(10), options=BootstrapOptions(n_resamples=0))
    with pytest.raises(ValueError, match="statistic"):
        poisson_partials(x, keys=np.arange(10), statistic="median")
    with pytest.raises(ValueError, match="ratio"):
        poisson_partials(x, keys=np.arange(10), statistic="ratio")
    with pytest.raises(ValueError, match="groups"):
        poisson_partials(x, keys=np.arange(10), groups=np.zeros(3))
    with pytest.raises(ValueError, match="magnitude|overflow|rescale"):
        poisson_partials(
            np.array([1e35, 1.0]), keys=[0, 1], options=BootstrapOptions(n_resamples=4)
        )
    # strata are not part of the Poisson scheme
    with pytest.raises(ValueError, match="strata"):
        bootstrap(
            x, strata=np.arange(10) % 2, scheme="poisson", options=BootstrapOptions(n_resamples=10)
        )


def test_merge_rejects_incompatible_partials():
    x = np.arange(12.0)
    k = np.arange(12)
    base = poisson_partials(x, keys=k, options=BootstrapOptions(n_resamples=16, seed=1))
    with pytest.raises(ValueError, match="seed"):
        base + poisson_partials(x, keys=k, options=BootstrapOptions(n_resamples=16, seed=2))
    with pytest.raises(ValueError, match="n_resamples"):
        base + poisson_partials(x, keys=k, options=BootstrapOptions(n_resamples=17, seed=1))
    with pytest.raises(ValueError, match="statistic"):
        base + poisson_partials(
            x, keys=k, options=BootstrapOptions(n_resamples=16, seed=1), statistic="sum"
        )
    with pytest.raises(ValueError, match="group keys|columns"):
        base + poisson_partials(
            x, keys=k, groups=k % 2, options=BootstrapOptions(n_resamples=16, seed=1)
        )
    with pytest.raises(ValueError, match="group keys|columns"):
        poisson_partials(
            x, keys=k, groups={"a": k % 2}, options=BootstrapOptions(n_resamples=16, seed=1)
        ) + poisson_partials(
            x, keys=k, groups={"b": k % 2}, options=BootstrapOptions(n_resamples=16, seed=1)
        )


def test_poisson_degenerate_and_single_record_groups():
    x = np.array([1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.5])
    g = np.array(["same", "same", "same", "mixed", "mixed", "mixed", "single"])
    r = bootstrap(
        x,
        groups=g,
        scheme="poisson",
        keys=np.arange(7),
        options=BootstrapOptions(n_resamples=200, seed=0),
    )
    t = {k: i for i, k in enumerate(r.keys["groups"])}
    for name in ("same", "single"):
        i = t[name]
        assert r.degenerate[i] and r.se[i] == 0
        assert r.ci_low[i] == r.ci_high[i] == r.estimate[i]
    i = t["mixed"]
    assert not r.degenerate[i] and r.ci_low[i] < r.estimate[i] < r.ci_high[i]
    # all-zero weights give 0/0: those resamples are dropped and counted
    assert r.n_valid[t["single"]] < 200
    p_zero = np.exp(-3.0)  # a 3-record group: P(all weights zero) = e^-3
    assert abs((200 - r.n_valid[t["mixed"]]) / 200 - p_zero) < 5 * np.sqrt(p_zero / 200)


def test_partials_table_and_ungrouped_scalars():
    values = np.array([1.0, 0.25, 1.5, 3.0, -2.0])
    part = poisson_partials(values, keys=np.arange(5), groups=["a", "a", "b", "b", "b"],
                            options=BootstrapOptions(n_resamples=50, seed=1))  # fmt: skip
    table = part.to_polars()
    assert table.columns == ["groups", "n", "n_units", "sum_1"]
    assert table.rows() == [("a", 2, 2, 1.25), ("b", 3, 3, 2.5)]
    whole = poisson_partials(values, keys=np.arange(5),
                             options=BootstrapOptions(n_resamples=50, seed=1))  # fmt: skip
    assert whole.to_polars().rows() == [(5, 5, 3.75)]
    res = whole.finalize()
    assert type(res.estimate) is float and res.estimate == pytest.approx(values.mean())
    assert isinstance(part.finalize().estimate, np.ndarray)


@pytest.mark.parametrize("b", [1, 5, 64, 301])
def test_weight_matrix_is_the_engines_per_unit_draw(b):
    """``_core.stats.poisson_weights`` gives each key the weight the engine's bootstrap gives it.

    One record per unit, value 1, each its own group: the engine's resampled sum of group i in
    resample j is then exactly the weight of key i in resample j.
    """
    keys = np.random.default_rng(b).integers(0, 2**64 - 1, 37, dtype=np.uint64)
    n = keys.size
    drawn = _core.stats.poisson_partials(
        np.ones((n, 1)), np.arange(n, dtype=np.int64), n, None, 0, keys, None, "sum", [], 0, b,
        11, 2, False,
    )  # fmt: skip
    expected = drawn["lo"][:, :b, 0].astype(np.int64).T  # (B, keys)
    for threads, f64 in ((1, True), (2, False), (0, True)):
        got = _core.stats.poisson_weights(keys, b, 11, threads, f64)
        assert got.shape == (b, n) and got.dtype == (np.float64 if f64 else np.float32)
        assert np.array_equal(got.astype(np.int64), expected)
        # written into the front of a caller's larger buffer (the rest untouched), as a view
        buf = np.full(b * n + 3, -1.0, dtype=got.dtype)
        view = _core.stats.poisson_weights(keys, b, 11, threads, f64, out=buf)
        assert np.shares_memory(view, buf) and np.array_equal(view, got)
        assert (buf[b * n :] == -1).all()
    with pytest.raises(ValueError, match="at least n_resamples"):
        _core.stats.poisson_weights(keys, b, 11, 1, True, out=np.empty(b * n - 1))
    with pytest.raises(ValueError, match="no conversion"):
        _core.stats.poisson_weights(keys, b, 11, 1, True, out=np.empty(b * n, np.float32))


def test_weight_matrix_avx2_path_equals_the_scalar_path():
    # csrc/common/philox_avx2.hpp draws eight keys' Philox blocks at once where the CPU has
    # AVX2; the scalar loop (forced here) must give the same matrix, weights of 4 and more
    # (past the vector compare) and keys past the last group of eight included
    keys = np.random.default_rng(5).integers(0, 2**64 - 1, 1003, dtype=np.uint64)
    fast, scalar = fast_and_scalar(
        lambda: {f64: _core.stats.poisson_weights(keys, 257, 3, 2, f64) for f64 in (False, True)}
    )
    for f64 in (False, True):
        assert np.array_equal(fast[f64], scalar[f64])
    assert (scalar[True] >= 5).sum() > 100 and scalar[True].max() >= 7


@pytest.mark.parametrize("case", ["binary", "fractional", "wide", "clustered"])
def test_poisson_bootstrap_avx2_path_equals_the_scalar_path(case):
    # the engine's Poisson sums take eight units' weights at a time where the CPU has AVX2 (and
    # add in int64 where a group's sums fit): the same integers as the scalar loop, forced here
    rng = np.random.default_rng(len(case))
    n = 2_000 + 13  # groups of sizes that are not multiples of eight
    values = {
        "binary": (rng.random((n, 1)) < 0.6).astype(np.float64),
        "fractional": rng.normal(size=(n, 2)).round(3),
        "wide": rng.integers(-(2**60), 2**60, (n, 1)).astype(np.float64),  # past int64 sums
        "clustered": rng.integers(0, 5, (n, 2)).astype(np.float64),
    }[case]
    groups = rng.integers(0, 3, n)
    clusters = rng.integers(0, 300, n) if case == "clustered" else None
    opts = BootstrapOptions(n_resamples=203, seed=4)
    statistic = "mean" if values.shape[1] == 1 else "ratio"

    def run():
        r = bootstrap(values, groups=groups, clusters=clusters, statistic=statistic,
                            scheme="poisson", keys=np.arange(n), options=opts,
                            return_distribution=True)  # fmt: skip
        return np.asarray(r.distribution), np.asarray(r.ci_low), np.asarray(r.ci_high)

    fast, scalar = fast_and_scalar(run)
    assert_same_arrays(fast, scalar)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("n", "c", "b"), [(0, 3, 5), (1, 1, 1), (7, 2, 3), (16, 5, 4),
                                           (17, 13, 9), (300, 51, 37), (1003, 60, 257),
                                           (40, 9, 0)])  # fmt: skip
def test_weighted_sums_equal_the_weight_matrix_product(dtype, n, c, b):
    # _core.stats.poisson_weighted_sums draws the weights tile by tile and multiplies as it
    # goes: the product of the weight matrix with the columns, exactly, for integer columns
    # (negative ones too) of any width (whole vectors, blocks and a tail), any key count
    # (groups of sixteen and eight and a tail) and any resample count (quads and a tail)
    rng = np.random.default_rng(n * 131 + c)
    keys = rng.integers(0, 2**64 - 1, n, dtype=np.uint64)
    cols = rng.integers(-3, 9, (n, c)).astype(dtype)
    expected = _core.stats.poisson_weights(keys, b, 13, 1, True) @ cols.astype(np.float64)
    for threads in (1, 2, 3):
        got = _core.stats.poisson_weighted_sums(keys, cols, b, 13, threads)
        assert got.dtype == dtype and got.shape == (b, c)
        assert np.array_equal(got.astype(np.float64), expected)


def test_weighted_sums_avx2_path_equals_the_scalar_path():
    keys = np.random.default_rng(9).integers(0, 2**64 - 1, 1003, dtype=np.uint64)
    cols = {c: np.random.default_rng(c).integers(0, 20, (1003, c)).astype(np.float32)
            for c in (1, 3, 8, 25, 51)}  # fmt: skip
    fast, scalar = fast_and_scalar(
        lambda: {c: _core.stats.poisson_weighted_sums(keys, x, 203, 4, 2) for c, x in cols.items()}
    )
    for c in cols:
        assert np.array_equal(fast[c], scalar[c])


def test_weighted_sums_reject_bad_columns():
    keys = np.arange(4, dtype=np.uint64)
    with pytest.raises(ValueError, match="float32 or float64"):
        _core.stats.poisson_weighted_sums(keys, np.ones((4, 2), dtype=np.int64), 3, 0, 1)
    with pytest.raises(ValueError, match="one row per key"):
        _core.stats.poisson_weighted_sums(keys, np.ones((5, 2)), 3, 0, 1)
    with pytest.raises(ValueError, match="n_resamples"):
        _core.stats.poisson_weighted_sums(keys, np.ones((4, 2)), -1, 0, 1)


def test_weights_of_eight_and_more_avx2_path_equals_the_scalar_path():
    # the vector compare takes thresholds 0-3, then 4-7 where a lane passed them; W >= 8
    # (1e-5 a weight) is finished lane by lane: a million weights hold a few
    keys = np.random.default_rng(6).integers(0, 2**64 - 1, 1000, dtype=np.uint64)
    fast, scalar = fast_and_scalar(lambda: _core.stats.poisson_weights(keys, 1000, 8, 2, False))
    assert np.array_equal(fast, scalar)
    assert scalar.max() >= 8
    counts = np.bincount(scalar.astype(np.int64).ravel())
    assert counts[4:8].sum() > 10_000


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 1000])
def test_nonzero_overlaps_count_common_nonzero_columns(n):
    rng = np.random.default_rng(n)
    x = np.where(rng.random((7, n)) < 0.5, rng.integers(-2, 3, (7, n)), 0).astype(np.float64)
    if n:
        x[2, n // 2] = np.nan  # NaN is nonzero
    nz = (x != 0).astype(np.int64)
    for threads in (1, 2):
        got = _core.stats.nonzero_overlaps(x, threads)
        assert got.dtype == np.int64 and np.array_equal(got, nz @ nz.T)
