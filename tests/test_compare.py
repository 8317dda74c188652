"""Model comparisons (tumorboard.stats.compare) and their building blocks.

Oracles: statsmodels (``mcnemar``, ``multipletests``, ``proportion_confint``, the cluster-robust
covariance of an OLS on an intercept), scipy (``permutation_test``, ``binom``, ``betainc``,
``beta.ppf``) and hand-worked cases.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from tumorboard import stats
from tumorboard.errors import InvalidArgumentError
from tumorboard.stats import _exact

scipy_stats = pytest.importorskip("scipy.stats")
special = pytest.importorskip("scipy.special")
sm = pytest.importorskip("statsmodels.api")
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar  # noqa: E402
from statsmodels.stats.multitest import multipletests  # noqa: E402
from statsmodels.stats.proportion import proportion_confint  # noqa: E402


def test_exact_distributions_against_scipy():
    rng = np.random.default_rng(0)
    for _ in range(500):
        a, b = rng.uniform(0.1, 300, 2)
        x = rng.uniform()
        assert _exact.betainc(a, b, x) == pytest.approx(special.betainc(a, b, x), abs=1e-12)
    for n, p in itertools.product([1, 9, 200, 20000], [0.5, 0.07]):
        for k in sorted({0, 1, n // 3, n - 1, n}):
            assert _exact.binom_cdf(k, n, p) == pytest.approx(
                scipy_stats.binom.cdf(k, n, p), rel=1e-9, abs=1e-12
            )
            assert _exact.binom_pmf(k, n, p) == pytest.approx(
                scipy_stats.binom.pmf(k, n, p), rel=1e-9, abs=1e-12
            )
    for a, b, q in itertools.product([0.5, 3, 40], [1, 17, 900], [0.025, 0.5, 0.975]):
        assert _exact.beta_ppf(q, a, b) == pytest.approx(scipy_stats.beta.ppf(q, a, b), abs=1e-12)


@pytest.mark.parametrize("n", [2, 10, 31, 400, 5000])
def test_mcnemar_against_statsmodels_and_the_mid_p_formula(n):
    rng = np.random.default_rng(n)
    a, b = rng.random(n) < 0.7, rng.random(n) < 0.55
    got = stats.mcnemar(a, b)
    table = [[np.sum(a & b), np.sum(a & ~b)], [np.sum(~a & b), np.sum(~a & ~b)]]
    assert got.p_value == pytest.approx(sm_mcnemar(table, exact=True).pvalue, rel=1e-9)
    m, k = got.only_a + got.only_b, min(got.only_a, got.only_b)
    if m:
        mid = 2 * scipy_stats.binom.cdf(k, m, 0.5) - scipy_stats.binom.pmf(k, m, 0.5)
        assert got.p_mid == pytest.approx(min(1.0, mid), rel=1e-9)
    assert (got.only_a, got.only_b) == (int(np.sum(a & ~b)), int(np.sum(~a & b)))


def test_mcnemar_hand_worked():
    # 3 items only a got right, 0 only b: P(X <= 0 | 3, 1/2) = 1/8, two-sided 1/4; mid-p 1/8
    r = stats.mcnemar([1, 1, 1, 0, 1], [0, 0, 0, 0, 1])
    assert (r.only_a, r.only_b, r.p_value, r.p_mid) == (3, 0, 0.25, 0.125)
    assert stats.mcnemar([1, 0], [1, 0]).p_value == 1.0  # no discordant pair
    with pytest.raises(InvalidArgumentError, match="0/1"):
        stats.mcnemar([0.5, 1], [1, 0])


def test_mcnemar_of_many_pairs_is_each_pairs_bit_for_bit():
    # compare takes every pair's exact p-values together: the continued fractions of pairs of
    # more than 2,000 discordant items vectorised, the others one by one; each value is
    # mcnemar_counts' to the last bit, and near scipy's binomial distribution function
    from tumorboard.stats._paired_tests import mcnemar_counts, mcnemar_many

    rng = np.random.default_rng(3)
    only_a = np.r_[rng.integers(0, 40_000, 400), rng.integers(0, 2_500, 200), 0, 0, 9, 2_001, 3]
    only_b = np.r_[rng.integers(0, 40_000, 400), rng.integers(0, 2_500, 200), 0, 5, 9, 0, 2**20]
    p, mid = mcnemar_many(10**7, only_a, only_b)
    for i, (a, b) in enumerate(zip(only_a.tolist(), only_b.tolist(), strict=True)):
        one = mcnemar_counts(10**7, a, b)
        assert (p[i], mid[i]) == (one.p_value, one.p_mid)
    m, k = only_a + only_b, np.minimum(only_a, only_b)
    live = m > 0
    want = np.minimum(1.0, 2.0 * scipy_stats.binom.cdf(k[live], m[live], 0.5))
    np.testing.assert_allclose(p[live], want, rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("method", ["holm", "bonferroni", "bh"])
def test_adjusted_p_values_against_statsmodels(method):
    rng = np.random.default_rng(7)
    p = rng.random(25) ** 3
    want = multipletests(p, method={"bh": "fdr_bh"}.get(method, method))[1]
    np.testing.assert_allclose(stats.adjust_pvalues(p, method), want, rtol=1e-12)
    with_nan = np.r_[p[:5], np.nan]
    got = stats.adjust_pvalues(with_nan, method)
    assert np.isnan(got[-1])
    np.testing.assert_allclose(got[:5], stats.adjust_pvalues(p[:5], method))
    with pytest.raises(InvalidArgumentError, match="correction: expected one of"):
        stats.adjust_pvalues(p, "hochberg")


def test_sign_flip_exact_against_scipy():
    d = np.random.default_rng(3).normal(0.4, 1.0, 12)
    got = stats.sign_flip_test(d, n_resamples=5000)
    want = scipy_stats.permutation_test(
        (d,), np.mean, permutation_type="samples", n_resamples=5000, alternative="two-sided"
    )
    assert got.exact and got.n_resamples == 2**12
    assert got.p_value == pytest.approx(want.pvalue, rel=1e-12)
    # clustered: the signs of a cluster's sum flip together = the test on cluster sums
    clusters = np.repeat(np.arange(6), 2)
    sums = d.reshape(6, 2).sum(axis=1)
    want_c = scipy_stats.permutation_test(
        (sums,), np.sum, permutation_type="samples", n_resamples=5000, alternative="two-sided"
    )
    got_c = stats.sign_flip_test(d, clusters=clusters, n_resamples=5000)
    assert got_c.n_units == 6 and got_c.p_value == pytest.approx(want_c.pvalue, rel=1e-12)


def test_sign_flip_monte_carlo_is_seeded_and_close_to_scipy():
    d = np.random.default_rng(4).normal(0.12, 1.0, 300)
    a = stats.sign_flip_test(d, n_resamples=40_000, seed=5)
    assert a == stats.sign_flip_test(d, n_resamples=40_000, seed=5)
    want = scipy_stats.permutation_test(
        (d,), np.mean, permutation_type="samples", n_resamples=40_000, random_state=0
    ).pvalue
    assert not a.exact and abs(a.p_value - want) < 5 * np.sqrt(want * (1 - want) / 40_000) + 1e-4


def _numpy_sign_flip_p(d, clusters, n_resamples, seed):
    """Return the sign-flip p-value of the numpy code tumorboard used to 2026-11.

    That code is the anchor of ``benchmarks/bench_compare.py``'s sign-flip workload; the test
    uses the same function (one copy of the oracle).
    """
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    from benchmarks.bench_compare import numpy_sign_flip

    units = np.arange(d.size) if clusters is None else np.unique(clusters, return_inverse=True)[1]
    return numpy_sign_flip(d, units.ravel(), n_resamples, seed)


@pytest.mark.parametrize(
    ("n", "n_clusters", "n_resamples", "kind"),
    [(300, None, 40_000, "normal"), (9_001, 4_099, 3_000, "ternary"), (2_000, 611, 9_999, "cents"),
     (70, 17, 500, "normal"), (5_000, None, 2_000, "ternary")],
)  # fmt: skip
@pytest.mark.parametrize("in_core", [True, False])
def test_sign_flip_monte_carlo_draws_the_patterns_numpy_drew(
    n, n_clusters, n_resamples, kind, in_core, monkeypatch
):
    """The compiled Monte Carlo count uses numpy's patterns: the same p-value, draw for draw.

    Chunks of 2^22 // units patterns whose sign bytes end inside a 32-bit output, or inside a
    64-bit one (numpy keeps its high half for the next chunk), are among the shapes; the
    generator's outputs come from the core's PCG64 (jumped ahead per task) or from numpy.
    """
    from tumorboard.stats import _paired_tests

    monkeypatch.setattr(_paired_tests, "_PCG64_IN_CORE", in_core)
    rng = np.random.default_rng(n)
    d = {
        "normal": rng.normal(0.03, 1.0, n),
        "ternary": rng.integers(-1, 2, n).astype(float),
        "cents": np.round(rng.normal(0.0, 1.0, n), 2),
    }[kind]
    clusters = None if n_clusters is None else rng.integers(0, n_clusters, n).astype(str)
    for seed in (0, 7):
        got = stats.sign_flip_test(d, clusters=clusters, n_resamples=n_resamples, seed=seed)
        assert not got.exact
        assert got.p_value == _numpy_sign_flip_p(d, clusters, n_resamples, seed)


@pytest.mark.parametrize(("units", "n_pairs"), [(1_000, 19), (4_099, 9), (13, 3), (40, 1)])
@pytest.mark.parametrize("in_core", [True, False])
def test_sign_flip_of_many_pairs_is_each_pairs(units, n_pairs, in_core, monkeypatch):
    """Pairs on shared units take their sign-flip tests together, with each pair's own result.

    The core draws the patterns once per eight pairs and adds each pair's sums in its own
    order (``sign_flip_hits_pcg64_many``); 13 units with 8,192 patterns enumerate every
    pattern, one pair at a time, as the numpy-drawn path does.
    """
    from tumorboard import _core
    from tumorboard.stats import _paired_tests

    monkeypatch.setattr(_paired_tests, "_PCG64_IN_CORE", in_core)
    rng = np.random.default_rng(units)
    diffs = [rng.integers(-1, 2, 3 * units).astype(float) + 0.25 * (i % 3) for i in range(n_pairs)]
    cluster = rng.integers(0, units, 3 * units)
    cluster[:units] = np.arange(units)  # every unit occurs
    sums = np.stack([np.bincount(cluster, weights=d) for d in diffs])
    many = _paired_tests.sign_flip_many(diffs, sums, n_resamples=8_192, seed=4)
    one = [_paired_tests.sign_flip_sums(d, s, n_resamples=8_192, seed=4)
           for d, s in zip(diffs, sums, strict=True)]  # fmt: skip
    assert many == one
    if units > 62:
        assert not many[0].exact
        st = np.random.default_rng(4).bit_generator.state["state"]
        words = [(v >> s) & (2**64 - 1) for v in (st["state"], st["inc"]) for s in (64, 0)]
        for threads in (1, 3):
            hits = _core.stats.sign_flip_hits_pcg64_many(sums, np.full(n_pairs, 5.0), words, 999,
                                                         300, threads)  # fmt: skip
            each = [_core.stats.sign_flip_hits_pcg64(s.copy(), words, 999, 300, 5.0) for s in sums]
            assert hits.tolist() == each


def test_core_pcg64_is_numpys():
    """The core's PCG64 gives numpy's outputs, also after a jump ahead of any length."""
    from tumorboard import _core

    for seed in (0, 5, 2**63 + 11):
        gen = np.random.default_rng(seed).bit_generator
        st = gen.state["state"]
        words = [(v >> s) & (2**64 - 1) for v in (st["state"], st["inc"]) for s in (64, 0)]
        want = gen.random_raw(3000)
        assert np.array_equal(_core.stats.pcg64_outputs(words, 0, 3000), want)
        for skip in (1, 7, 1024, 2999):
            assert np.array_equal(_core.stats.pcg64_outputs(words, skip, 1), want[skip : skip + 1])
    gen = np.random.default_rng(1).bit_generator
    st = gen.state["state"]
    words = [(v >> s) & (2**64 - 1) for v in (st["state"], st["inc"]) for s in (64, 0)]
    gen.advance(10**15)
    assert _core.stats.pcg64_outputs(words, 10**15, 2).tolist() == gen.random_raw(2).tolist()


def test_sign_flip_hits_counts_every_pattern_on_any_thread_count():
    """``_core.stats.sign_flip_hits`` against a hand count, units in and out of groups of 8."""
    from tumorboard import _core

    rng = np.random.default_rng(3)
    for units in (1, 7, 8, 9, 16, 21):
        x = rng.integers(-3, 4, units).astype(float)
        bytes_ = rng.integers(0, 256, 600 * units).astype(np.uint8)
        signs = np.where(bytes_.reshape(600, units) >= 128, 1.0, -1.0)
        stat = np.abs(signs @ x)
        for threshold in (0.0, 2.0, float(np.median(stat))):
            want = int(np.count_nonzero(stat >= threshold))
            for threads in (1, 2, 3):
                assert _core.stats.sign_flip_hits(x, bytes_, 600, threshold, threads) == want
    with pytest.raises(ValueError, match="at least n_patterns"):
        _core.stats.sign_flip_hits(np.ones(4), np.zeros(7, np.uint8), 2, 1.0)
    # generated in the core: one count whatever the threads, equal to numpy's drawn bytes
    x = rng.integers(-2, 3, 37).astype(float)
    st = np.random.default_rng(9).bit_generator.state["state"]
    words = [(v >> s) & (2**64 - 1) for v in (st["state"], st["inc"]) for s in (64, 0)]
    gen = np.random.default_rng(9)
    drawn = np.concatenate([gen.integers(0, 2, size=(m, 37), dtype=np.int8) for m in (500, 500, 3)])
    want = int(np.count_nonzero(np.abs((drawn * 2 - 1) @ x) >= 3.0))
    for threads in (1, 2, 3):
        assert _core.stats.sign_flip_hits_pcg64(x, words, 1003, 500, 3.0, threads) == want


CASES = [(1, 0), (7, 1), (7, 6), (40, 0), (40, 39), (40, 40), (500, 250), (500, 3)]


@pytest.mark.parametrize(("n", "k"), CASES)
@pytest.mark.parametrize(
    ("method", "sm_method"),
    [
        ("wilson", "wilson"),
        ("agresti_coull", "agresti_coull"),
        ("clopper_pearson", "beta"),
        ("normal", "normal"),
    ],
)
def test_proportion_intervals_against_statsmodels(n, k, method, sm_method):
    y = np.r_[np.ones(k), np.zeros(n - k)]
    got = stats.proportion_interval(y, method=method, level=0.9)
    lo, hi = proportion_confint(k, n, alpha=0.1, method=sm_method)
    assert got.ci_low == pytest.approx(lo, abs=1e-10)
    assert got.ci_high == pytest.approx(hi, abs=1e-10)
    assert (got.n, got.successes, got.estimate) == (n, k, k / n)


def test_cluster_robust_intervals():
    rng = np.random.default_rng(11)
    g = rng.integers(0, 30, 400)
    y = (rng.random(400) < 0.3 + 0.4 * (g % 2)).astype(float)  # clusters differ: deff > 1
    cr1 = stats.proportion_interval(y, method="cr1", clusters=g)
    fit = sm.OLS(y, np.ones_like(y)).fit(cov_type="cluster", cov_kwds={"groups": g})
    assert cr1.se == pytest.approx(fit.bse[0], rel=1e-12)
    assert cr1.n_clusters == 30 and cr1.design_effect > 1
    deff = stats.proportion_interval(y, method="wilson_deff", clusters=g)
    p, n_eff, z = y.mean(), 400 / cr1.design_effect, 1.959963984540054
    lo, hi = proportion_confint(round(p * n_eff * 1e6) / 1e6, n_eff, method="wilson")
    center = (p + z * z / (2 * n_eff)) / (1 + z * z / n_eff)
    half = z / (1 + z * z / n_eff) * np.sqrt(p * (1 - p) / n_eff + z * z / (4 * n_eff**2))
    assert (deff.ci_low, deff.ci_high) == pytest.approx((center - half, center + half), abs=1e-12)
    assert lo == pytest.approx(deff.ci_low, abs=1e-6)  # statsmodels' Wilson at the same n_eff
    plain = stats.proportion_interval(y, method="wilson")
    assert deff.ci_high - deff.ci_low > plain.ci_high - plain.ci_low
    with pytest.raises(InvalidArgumentError, match="expected clusters="):
        stats.proportion_interval(y, method="cr1")
    with pytest.raises(InvalidArgumentError, match="assumes independent items"):
        stats.proportion_interval(y, method="wilson", clusters=g)
    with pytest.raises(InvalidArgumentError, match="method: expected one of"):
        stats.proportion_interval(y, method="jeffreys")


def test_compare_hand_worked_pairs_and_unpaired_items():
    # A and B share q1..q4; A alone has q5, B alone has q6
    values = [1, 1, 1, 0, 1, 0, 0, 1, 0, 1]
    models = ["A"] * 5 + ["B"] * 5
    items = ["q1", "q2", "q3", "q4", "q5", "q1", "q2", "q3", "q4", "q6"]
    res = stats.compare(values, models=models, items=items,
                        options=stats.BootstrapOptions(n_resamples=500, seed=1))  # fmt: skip
    (row,) = res.rows
    assert (row.task, row.model_a, row.model_b) == ("overall", "A", "B")
    assert (row.n_matched, row.n_only_a, row.n_only_b) == (4, 1, 1)
    assert (row.mean_a, row.mean_b, row.difference) == (0.75, 0.25, 0.5)
    assert (row.wins, row.ties, row.losses) == (2, 2, 0)
    assert row.test == "mcnemar" and row.p_value == 0.5 == row.p_mcnemar  # 2 vs 0 discordant
    assert row.p_adjusted == row.p_value  # a family of one
    assert res.outcome == "binary" and not res.clustered
    assert "| overall | A | B | 4 | 1/1 |" in res.to_markdown()
    assert np.isnan(row.simul_low)  # not every model has every item: no simultaneous band


def test_compare_families_corrections_and_determinism():
    rng = np.random.default_rng(2)
    rows = [(t, f"q{i}", m, float(rng.random() < p), f"pt{i // 4}")
            for t in ("t1", "t2") for i in range(80)
            for m, p in (("A", 0.8), ("B", 0.55), ("C", 0.6))]  # fmt: skip
    tasks, items, models, values, clusters = map(list, zip(*rows, strict=True))
    opts = stats.BootstrapOptions(n_resamples=400, seed=9)
    res = stats.compare(values, models=models, items=items, tasks=tasks, clusters=clusters,
                        correction="bh", options=opts)  # fmt: skip
    assert [r.task for r in res.rows] == ["t1"] * 3 + ["t2"] * 3 + ["overall"] * 3
    for task in ("t1", "t2", "overall"):
        fam = [r for r in res.rows if r.task == task]
        want = multipletests([r.p_value for r in fam], method="fdr_bh")[1]
        np.testing.assert_allclose([r.p_adjusted for r in fam], want, rtol=1e-12)
        assert all(r.test == "sign-flip" for r in fam)  # clustered: flips per patient
    assert res.rows[-3].n_matched == 160 and res.rows[-3].n_units == 20
    again = stats.compare(values, models=models, items=items, tasks=tasks, clusters=clusters,
                          correction="bh", options=opts)  # fmt: skip
    assert again.to_dicts() == res.to_dicts()
    base = stats.compare(values, models=models, items=items, tasks=tasks, baseline="B",
                         options=opts)  # fmt: skip
    assert {(r.model_a, r.model_b) for r in base.rows} == {("A", "B"), ("C", "B")}
    assert base.to_polars().height == 6


def test_compare_refuses_ambiguous_input():
    with pytest.raises(InvalidArgumentError, match="model 'A', task 'overall', item 'q1'"):
        stats.compare([1, 0, 1], models=["A", "A", "B"], items=["q1", "q1", "q1"])
    with pytest.raises(InvalidArgumentError, match="expected one cluster for every model"):
        stats.compare([1, 0], models=["A", "B"], items=["q1", "q1"], clusters=["p1", "p2"])
    # the messages name the first repeated (model, key) and the first row of another cluster
    repeat = "model 'A', task 'overall', item 'q2': expected one row per model and item, got 2"
    with pytest.raises(InvalidArgumentError, match=repeat):
        stats.compare([1, 0, 1, 1, 0], models=["A", "A", "B", "A", "B"],
                      items=["q2", "q1", "q1", "q2", "q1"])  # fmt: skip
    other = "task 'overall', item 'q2': expected one cluster for every model, got 'p2' and 'p3'"
    with pytest.raises(InvalidArgumentError, match=other):
        stats.compare([1, 0, 1, 0], models=["A", "B", "A", "B"], items=["q1", "q1", "q2", "q2"],
                      clusters=["p1", "p1", "p2", "p3"])  # fmt: skip
    with pytest.raises(InvalidArgumentError, match="at least two models"):
        stats.compare([1, 0], models=["A", "A"], items=["q1", "q2"])
    with pytest.raises(InvalidArgumentError, match="baseline: expected one of the models"):
        stats.compare([1, 0], models=["A", "B"], items=["q1", "q1"], baseline="C")
    with pytest.raises(InvalidArgumentError, match="row 1 is nan"):
        stats.compare([1, float("nan")], models=["A", "B"], items=["q1", "q1"])


# ------------------------------------------------------------ the CLI verb, as a user runs it


def _store_of_three_models(tmp_path):
    from test_logs_to_scores import cli, write_jsonl

    opts = "\nA) adenocarcinoma\nB) squamous cell carcinoma"
    records = []
    for model, every in (("model-a", 9), ("model-b", 3), ("model-c", 4)):
        for i in range(120):
            if model == "model-c" and i >= 110:  # model-c skipped the last 10 questions
                continue
            right = i % every != 0
            answer = "[ANSWER: A]" if right else "[ANSWER: B]"
            records.append({"model": model, "patient_id": f"p{i // 4}", "task": f"task{i % 2}",
                            "question": f"Case {i}: what is the most likely diagnosis?{opts}",
                            "gold": "A", "response": answer})  # fmt: skip
    log = write_jsonl(tmp_path / "logs" / "all.jsonl", records)
    out = cli("import", "jsonl", str(log), "--store", str(tmp_path / "s"))
    assert out.returncode == 0, out.stderr
    return cli, tmp_path / "s"


def test_cli_compare_on_an_imported_store(tmp_path):
    import json

    cli, store = _store_of_three_models(tmp_path)
    out = cli("compare", str(store), "--n-resamples", "300")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("| task | a | b | n | unpaired a/b | a - b [95% CI] | simultaneous")
    # model-c lacks 10 questions: counted as unpaired, not paired
    assert any(line.startswith("| overall | model-a | model-c | 110 | 10/0 |") for line in lines)
    assert sum(line.startswith("| task |") for line in lines) == 1 and len(lines) == 2 + 9
    out = cli("compare", str(store), "--baseline", "model-b", "--format", "json",
              "--correction", "bonferroni", "--out", str(tmp_path / "cmp.json"))  # fmt: skip
    assert out.returncode == 0 and "wrote" in out.stdout
    doc = json.loads((tmp_path / "cmp.json").read_text())
    rows = doc["comparisons"]
    assert doc["ranks"] == {}
    overall = {r["model_a"]: r for r in rows if r["task"] == "overall"}
    assert set(overall) == {"model-a", "model-c"} and overall["model-a"]["model_b"] == "model-b"
    a = overall["model-a"]
    assert a["mean_a"] == pytest.approx(1 - 14 / 120) and a["mean_b"] == pytest.approx(
        0.6 + 0.4 / 6
    )
    assert a["test"] == "sign-flip" and a["n_units"] == 30  # clustered by patient (default)
    assert a["p_adjusted"] == pytest.approx(min(1.0, 2 * a["p_value"]))


def test_compare_reports_progress_and_the_cli_prints_it(tmp_path, monkeypatch, capsys):
    """compare(progress=) counts every comparison; the CLI prints the count on stderr."""
    from tumorboard import _progress
    from tumorboard.cli import main

    seen = []
    rng = np.random.default_rng(2)
    values = (rng.random(3 * 40) < 0.6).astype(float)
    res = stats.compare(values, models=np.repeat(["a", "b", "c"], 40),
                        items=np.tile(np.arange(40), 3), tasks=np.tile(["t0", "t1"], 60),
                        options=stats.BootstrapOptions(n_resamples=200, seed=0),
                        n_permutations=100, progress=lambda d, t: seen.append((d, t)))  # fmt: skip
    assert seen == [(k, 9) for k in range(1, 10)] and len(res.rows) == 9  # 3 families x 3 pairs
    _, store = _store_of_three_models(tmp_path)

    class Eager(_progress.CountProgress):  # no 2 s wait before the first line
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "after": 0.0, "every": 0.0})

    monkeypatch.setattr(_progress, "CountProgress", Eager)
    assert main(["compare", str(store), "--n-resamples", "200", "--n-permutations", "100"]) == 0
    err = capsys.readouterr().err
    assert "compare: 9 comparisons" in err  # tasks task0, task1 and overall, three pairs each


def test_cli_compare_tells_what_is_wrong(tmp_path):
    cli, store = _store_of_three_models(tmp_path)
    out = cli("compare", str(store), "--metric", "corect")
    assert out.returncode == 2
    assert "--metric corect: expected a column of the store's items" in out.stderr
    assert "correct" in out.stderr
    out = cli("compare", str(store), "--baseline", "model-z")
    assert out.returncode == 2 and "baseline: expected one of the models" in out.stderr
    out = cli("compare", str(tmp_path / "nope"))
    assert out.returncode == 2 and "nope" in out.stderr


def test_cli_compare_ranks(tmp_path):
    cli, store = _store_of_three_models(tmp_path)
    out = cli("compare", str(store), "--ranks", "--n-resamples", "400")
    assert out.returncode == 0, out.stderr
    assert "Ranks by mean correct, overall (400 of 400 resamples):" in out.stdout
    block = out.stdout.split("Ranks by mean correct, overall")[1].splitlines()
    assert block[4].startswith("| model-a | 0.8833 | 1 [1, 1] | 1.000 | yes |")  # 106/120 right
    out = cli("compare", str(store), "--ranks", "--format", "csv")
    assert out.returncode == 2 and "--ranks: expected --format md, json, html or svg" in out.stderr
    page = tmp_path / "cmp.html"
    out = cli("compare", str(store), "--ranks", "--n-resamples", "200", "--format", "html",
              "--out", str(page))  # fmt: skip
    assert out.returncode == 0, out.stderr
    text = page.read_text()
    assert text.startswith("<!doctype html>") and text.count("<svg") == 1 + 3 + 3  # forest,
    # a p-value heatmap per task (task0, task1, overall), ranks per task and overall


def test_cli_compare_ranks_by_corpus_bleu(tmp_path):
    """--rank-statistic bleu ranks by corpus BLEU, equal to sacrebleu's on each model's items."""
    import json
    import random

    sacrebleu = pytest.importorskip("sacrebleu")
    from test_logs_to_scores import cli, write_jsonl

    rng = random.Random(1)
    refs = ["the biopsy shows a moderately differentiated lung adenocarcinoma",
            "no evidence of malignancy in the submitted tissue",
            "findings consistent with squamous cell carcinoma of the lung",
            "the tumour is positive for ttf1 and napsin a"]  # fmt: skip
    records = []
    for model, keep in (("fair", 0.6), ("good", 0.9), ("poor", 0.3)):
        for i in range(60):
            ref = refs[i % 4]
            words = [w if rng.random() < keep else "tissue" for w in ref.split()]
            records.append({"model": model, "patient_id": f"p{i // 4}", "task": f"t{i % 2}",
                            "item_id": f"q{i}", "question": f"Case {i}: the report?",
                            "gold": ref, "response": " ".join(words) if i != 7 else None,
                            "correct": rng.random() < keep})  # fmt: skip
    log = write_jsonl(tmp_path / "log.jsonl", records)
    assert cli("import", "jsonl", str(log), "--store", str(tmp_path / "s")).returncode == 0
    out = cli("compare", str(tmp_path / "s"), "--rank-statistic", "bleu", "--n-resamples",
              "300", "--format", "json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "3 item(s) without a response or a reference left out of the BLEU ranks" in out.stderr
    doc = json.loads(out.stdout)
    assert doc["ranked_by"] == "corpus BLEU" and set(doc["ranks"]) == {"t0", "t1", "overall"}
    overall = doc["ranks"]["overall"]
    assert [r["model"] for r in overall] == ["good", "fair", "poor"]
    for r in overall:
        mine = [x for x in records if x["model"] == r["model"] and x["response"] is not None]
        want = sacrebleu.corpus_bleu([x["response"] for x in mine], [[x["gold"] for x in mine]])
        assert r["estimate"] == pytest.approx(want.score, abs=1e-9)
    md = cli("compare", str(tmp_path / "s"), "--rank-statistic", "bleu", "--n-resamples", "100")
    assert md.returncode == 0 and "Ranks by corpus BLEU, overall" in md.stdout
    out = cli("compare", str(tmp_path / "s"), "--bleu-tokenize", "char")  # without bleu ranks
    assert out.returncode == 2 and "only with --rank-statistic bleu" in out.stderr
    # a store whose items have no reference text: told, not ranked by nothing
    bare = write_jsonl(tmp_path / "bare.jsonl", [
        {**r, "gold": None, "correct": r["correct"]} for r in records[:40]
    ])  # fmt: skip
    assert cli("import", "jsonl", str(bare), "--store", str(tmp_path / "b")).returncode == 0
    out = cli("compare", str(tmp_path / "b"), "--rank-statistic", "bleu")
    assert out.returncode == 2 and "no item has both a response and a reference" in out.stderr


def _insight_records() -> list[dict]:
    """MedInsightBench cases of three analysts of different skill (two tasks, 4 cases/patient)."""
    import random

    rng = random.Random(3)
    pool = ["mortality rises with age", "women live longer than men",
            "smoking rates fell after 2000", "obesity doubles diabetes risk",
            "income predicts access to care", "rural areas lack specialists"]  # fmt: skip
    noise = ["the data has many rows", "the sample is large", "age is recorded in years"]
    out = []
    for model, keep in (("analyst-a", 0.8), ("analyst-b", 0.5), ("analyst-c", 0.2)):
        for i in range(40):
            gt = [pool[(i + k) % 6] for k in range(3)]
            gen = [g for g in gt if rng.random() < keep] + [x for x in noise if rng.random() < 0.3]
            out.append({"model": model, "patient_id": f"p{i // 4}", "item_id": f"c{i}",
                        "task": f"t{i % 2}", "gt_insights": gt,
                        "response": "\n".join(f"- {x}" for x in gen)})  # fmt: skip
    return out


def test_cli_compare_ranks_by_insight_f1_of_means(tmp_path):
    """--rank-statistic f1_of_means ranks by MedInsightBench's insight F1, as `score` prints it.

    The F1 of mean recall and mean precision per task and overall; the pairwise table compares
    the analysts case by case.
    """
    import json

    import polars as pl
    from test_logs_to_scores import cli, write_jsonl
    from tumorboard.score.medinsight import case_scores

    log = write_jsonl(tmp_path / "mi.jsonl", _insight_records())
    store = tmp_path / "s"
    imp = cli("import", "jsonl", str(log), "--store", str(store), "--benchmark", "medinsight")
    assert imp.returncode == 0, imp.stderr
    out = cli("compare", str(store), "--rank-statistic", "f1_of_means", "--n-resamples", "300",
              "--format", "json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["metric"] == "insight_f1" and doc["ranked_by"].startswith("insight F1")
    assert set(doc["ranks"]) == {"t0", "t1", "overall"}
    scored = cli("score", str(store), "--benchmark", "medinsight", "--n-resamples", "100",
                 "--format", "json")  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    f1 = {(r["model"], r["task"]): r["estimate"] for r in json.loads(scored.stdout)["rows"]
          if r["metric"] == "insight_f1"}  # fmt: skip
    for task, ranks in doc["ranks"].items():
        assert [r["model"] for r in ranks] == ["analyst-a", "analyst-b", "analyst-c"]
        for r in ranks:  # the same F1 of means (the rank engine sums in exact fixed point,
            # the scorer in float64 row order: equal to the last bits of a double)
            assert r["estimate"] == pytest.approx(f1[(r["model"], task)], rel=1e-14), (task, r)
    # the pairwise differences are of the per-case F1 values, matched by patient and item
    cases = case_scores(store)
    mean = dict(cases.group_by("model").agg(pl.col("insight_f1").mean()).iter_rows())
    row = next(c for c in doc["comparisons"] if c["task"] == "overall"
               and (c["model_a"], c["model_b"]) == ("analyst-a", "analyst-c"))  # fmt: skip
    assert row["n_matched"] == 40 and row["n_only_a"] == row["n_only_b"] == 0
    assert row["difference"] == pytest.approx(mean["analyst-a"] - mean["analyst-c"], abs=1e-12)
    md = cli("compare", str(store), "--metric", "insight_recall", "--ranks", "--n-resamples",
             "100")  # fmt: skip
    assert md.returncode == 0 and "Ranks by mean insight_recall, overall" in md.stdout
    # what a user gets wrong is named
    bad = cli("compare", str(store), "--rank-statistic", "f1_of_means", "--metric", "correct")
    assert bad.returncode == 2
    assert "expected --metric insight_recall, insight_precision, insight_f1" in bad.stderr
    bad = cli("compare", str(store), "--metric", "insight_f1x")  # a typo: told the choices
    assert bad.returncode == 2 and "--metric insight_f1x: expected a column" in bad.stderr
    assert "or for MedInsightBench items one of insight_recall" in bad.stderr
    bad = cli("compare", str(store), "--metric", "insight_f1", "--benchmark", "mtbbench")
    assert bad.returncode == 2 and "expected --benchmark medinsight" in bad.stderr
    cli3, other = _store_of_three_models(tmp_path / "other")
    bad = cli3("compare", str(other), "--rank-statistic", "f1_of_means")
    assert bad.returncode == 2 and "medinsight" in bad.stderr


def test_cli_compare_writes_each_picture_as_an_svg_file(tmp_path):
    import xml.etree.ElementTree as ET

    cli, store = _store_of_three_models(tmp_path)
    plots = tmp_path / "plots"
    out = cli("compare", str(store), "--ranks", "--n-resamples", "200", "--format", "svg",
              "--out", str(plots))  # fmt: skip
    assert out.returncode == 0, out.stderr
    tasks = ("task0", "task1", "overall")
    expected = {"forest.svg"} | {f"{kind}-{t}.svg" for kind in ("pvalues", "ranks") for t in tasks}
    assert {p.name for p in plots.iterdir()} == expected  # no temporary file left behind
    svg = "{http://www.w3.org/2000/svg}"
    for path in plots.iterdir():
        root = ET.parse(path).getroot()
        assert root.tag == f"{svg}svg", path.name
        assert root.find(f"{svg}title") is not None
        assert f"wrote {path}" in out.stdout
    assert ET.parse(plots / "ranks-overall.svg").getroot().find(f"{svg}title").text == (
        "Ranks, overall"
    )
    # without --ranks: the forest plot and the heatmaps; the same directory is rewritten
    out = cli("compare", str(store), "--n-resamples", "200", "--format", "svg", "--out",
              str(tmp_path / "plain"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert len(list((tmp_path / "plain").iterdir())) == 1 + 3
    out = cli("compare", str(store), "--format", "svg")
    assert out.returncode == 2 and "--out: expected a directory for --format svg" in out.stderr
    out = cli("compare", str(store), "--format", "svg", "--out", str(plots / "forest.svg"))
    assert out.returncode == 2 and "got a file" in out.stderr


def test_comparison_svg_names_say_what_they_are():
    rng = np.random.default_rng(3)
    values = (rng.random(3 * 40) < 0.7).astype(float)
    models = np.repeat(["A", "B", "C"], 40)
    items = np.tile([f"q{i}" for i in range(40)], 3)
    tasks = np.tile(["dx/1", "dx 1", "stage"] * 13 + ["stage"], 3)
    opts = stats.BootstrapOptions(n_resamples=200, seed=1)
    res = stats.compare(values, models=models, items=items, tasks=tasks, options=opts,
                        n_permutations=200)  # fmt: skip
    files = res.to_svg(prefix="mtb/multimodal ")
    assert list(files) == ["mtb_multimodal_forest.svg", "mtb_multimodal_pvalues-dx_1.svg",
                           "mtb_multimodal_pvalues-dx_1-2.svg",
                           "mtb_multimodal_pvalues-stage.svg",
                           "mtb_multimodal_pvalues-overall.svg"]  # fmt: skip
    assert all(text.startswith('<?xml version="1.0"') for text in files.values())


def test_rank_intervals_against_ranks_of_the_engine_distribution():
    rng = np.random.default_rng(5)
    n, probs = 200, {"A": 0.7, "B": 0.68, "C": 0.5, "D": 0.7}
    values, models, items = [], [], []
    for m, p in probs.items():
        values += (rng.random(n) < p).astype(float).tolist()
        models += [m] * n
        items += [f"q{i}" for i in range(n)]
    values[600:800] = values[0:200]  # D answers exactly as A: always tied with it
    opts = stats.BootstrapOptions(n_resamples=1000, seed=4)
    got = stats.rank_intervals(values, models=models, items=items, options=opts)
    dist = stats.bootstrap(np.asarray(values), groups=np.asarray(models), scheme="poisson",
                           keys=np.asarray(items), options=opts,
                           return_distribution=True).distribution  # fmt: skip
    ranks = np.stack([scipy_stats.rankdata(-dist[:, b], method="min") for b in range(1000)], 1)
    for i, m in enumerate(got.models):
        row = "ABCD".index(m)
        assert got.rank_low[i] == int(np.quantile(ranks[row], 0.025, method="lower"))
        assert got.rank_high[i] == int(np.quantile(ranks[row], 0.975, method="higher"))
        assert got.p_best[i] == pytest.approx(float((ranks[row] == 1).mean()))
    by = {d["model"]: d for d in got.to_dicts()}
    assert by["A"]["p_best"] == by["D"]["p_best"] and by["A"]["rank"] == by["D"]["rank"] == 1
    assert by["C"]["rank"] == 4 and not by["C"]["tied_with_best"]
    assert got.models[-1] == "C"
    worst = stats.rank_intervals(values, models=models, items=items, options=opts,
                                 higher_is_better=False)  # fmt: skip
    assert worst.models[0] == "C" and worst.rank[0] == 1
    assert stats.rank_intervals(values, models=models, items=items, options=opts).to_dicts() == (
        got.to_dicts()
    )
    with pytest.raises(InvalidArgumentError, match="at least two models"):
        stats.rank_intervals([1.0, 0.0], models=["A", "A"], items=["q1", "q2"])


def test_rank_intervals_of_corpus_bleu_through_sufficient_statistics():
    sacrebleu = pytest.importorskip("sacrebleu")
    from tumorboard import text

    rng = np.random.default_rng(11)
    words = "the tumor is a b c stage node margin grade negative positive".split()
    refs = [" ".join(rng.choice(words, rng.integers(3, 9))) for _ in range(80)]
    hyps = {}
    for m, keep in (("A", 0.9), ("B", 0.7), ("C", 0.4)):
        hyps[m] = [" ".join(w if rng.random() < keep else str(rng.choice(words))
                            for w in r.split()) for r in refs]  # fmt: skip
    rows = np.concatenate([text.bleu_statistics(hyps[m], refs) for m in "ABC"])
    models = np.repeat(list("ABC"), len(refs))
    items = np.tile([f"q{i}" for i in range(len(refs))], 3)
    params = text.bleu_statistic_params()
    opts = stats.BootstrapOptions(n_resamples=500, seed=3)
    got = stats.rank_intervals(rows, models=models, items=items, statistic="bleu",
                               params=params, options=opts)  # fmt: skip
    by = {d["model"]: d for d in got.to_dicts()}
    for m in "ABC":  # the point estimate is sacrebleu's corpus BLEU, to the last bit
        assert by[m]["estimate"] == sacrebleu.corpus_bleu(hyps[m], [refs]).score
    dist = stats.bootstrap_sufficient(rows, statistic="bleu", params=params, groups=models,
                                      scheme="poisson", keys=items, options=opts,
                                      return_distribution=True).distribution  # fmt: skip
    ranks = np.stack([scipy_stats.rankdata(-dist[:, b], method="min") for b in range(500)], 1)
    for i, m in enumerate(got.models):
        row = "ABC".index(m)
        assert got.rank_low[i] == int(np.quantile(ranks[row], 0.025, method="lower"))
        assert got.rank_high[i] == int(np.quantile(ranks[row], 0.975, method="higher"))
        assert got.p_best[i] == pytest.approx(float((ranks[row] == 1).mean()))
    assert got.models[0] == "A"
    with pytest.raises(InvalidArgumentError, match="params: expected None"):
        stats.rank_intervals(rows[:, :1], models=models, items=items, params=params)


@pytest.mark.parametrize("clustered", [False, True])
def test_rank_intervals_shared_weights_equal_the_engine_bit_for_bit(clustered):
    # rank_intervals draws each key's Poisson weights once for every model and sums them with
    # one matrix product (stats/_shared.py); the distribution is the engine's per-model one
    from tumorboard.stats import _ranks, _shared

    rng = np.random.default_rng(2)
    n, k, models = 90, 4, 6
    rows = rng.integers(0, 9, (models * n, k)).astype(np.float64)
    names = np.repeat([f"m{i}" for i in range(models)], n)
    items = np.tile([f"q{i}" for i in range(n)], models)
    keep = rng.random(models * n) > 0.1  # some items missing for some models
    rows, names, items = rows[keep], names[keep], items[keep]
    clusters = np.char.add("p", (np.char.lstrip(items, "q").astype(int) // 4).astype(str))
    cl = clusters if clustered else None
    keys = clusters if clustered else items
    fields = ("n", "n_units", "estimate", "boot_mean", "se", "ci_low", "ci_high", "degenerate",
              "n_valid", "distribution")  # fmt: skip
    # large whole numbers: each model's sums fit float32's exact range, all models' do not
    big = rows[:, 3] * 600.0
    assert 15 * big.sum() >= 2**24 > 15 * max(big[names == g].sum() for g in set(names))
    for statistic, cols in (("ratio", slice(0, 2)), ("f1", slice(0, 3)), ("mean", slice(3, 4)),
                            ("mean", None), ("mean", "big")):  # fmt: skip
        x = (big if isinstance(cols, str) else rows[:, cols] if cols is not None
             else rows[:, 3] / 3.0)  # fractional: engine path  # fmt: skip
        for threads in (1, 2):
            opts = stats.BootstrapOptions(n_resamples=300, seed=9, threads=threads)
            got = _ranks._bootstrap_models(x, names, keys, cl, statistic, None, opts)
            ref = stats.bootstrap(x, groups=names, clusters=cl, statistic=statistic,
                                  scheme="poisson", keys=keys, options=opts,
                                  return_distribution=True)  # fmt: skip
            for f in fields:
                assert np.array_equal(np.asarray(getattr(got, f)), np.asarray(getattr(ref, f)),
                                      equal_nan=True), (statistic, f)  # fmt: skip
    assert _shared.poisson_shared(rows[:, 3:4] / 3.0, *_layout(names, items), statistic="mean",
                                  params=[], options=stats.BootstrapOptions()) is None  # fmt: skip
    own = np.char.add(names, items)  # every model on its own items: nothing shared, engine path
    assert _shared.poisson_shared(rows[:, 3:4], *_layout(names, own), statistic="mean",
                                  params=[], options=stats.BootstrapOptions()) is None  # fmt: skip


def test_rank_intervals_take_polars_and_arrow_label_columns():
    """Models, items and clusters as polars or Arrow columns rank as their numpy strings do."""
    import polars as pl
    import pyarrow as pa

    rng = np.random.default_rng(6)
    n_items = 150
    models = np.repeat(["é-model", "Z-model", "a-model", "b"], n_items)
    items = np.tile(np.char.add("q", np.arange(n_items).astype(str)), 4)
    clusters = np.tile(np.char.add("日", (np.arange(n_items) // 5).astype(str)), 4)
    values = (rng.random(models.size) < np.repeat([0.6, 0.7, 0.65, 0.5], n_items)).astype(float)
    opts = stats.BootstrapOptions(n_resamples=500, seed=3)
    want = stats.rank_intervals(values, models=models, items=items, clusters=clusters,
                                options=opts).to_dicts()  # fmt: skip
    for wrap in (pl.Series, pa.array, lambda x: pl.Series(x).cast(pl.Categorical)):
        got = stats.rank_intervals(values, models=wrap(models), items=wrap(items),
                                   clusters=wrap(clusters), options=opts).to_dicts()  # fmt: skip
        assert got == want
    with pytest.raises(InvalidArgumentError, match="items: expected one key per row"):
        stats.rank_intervals(values, models=pl.Series(models), items=pl.Series(items[:-1]),
                             options=opts)  # fmt: skip


def test_rank_intervals_integer_items_are_keyed_by_their_text():
    # integer item ids are keyed by their decimal text (the weights of "17" and of 17 agree)
    rng = np.random.default_rng(4)
    n, models = 200, 4
    rows = rng.integers(0, 2, (models * n, 1)).astype(np.float64)
    names = np.repeat([f"m{i}" for i in range(models)], n)
    ids = np.tile(np.arange(n) * 7 - 300, models)  # negatives too
    opts = stats.BootstrapOptions(n_resamples=400, seed=3)
    by_int = stats.rank_intervals(rows, models=names, items=ids, options=opts)
    by_text = stats.rank_intervals(rows, models=names, items=ids.astype(str), options=opts)
    assert by_int.to_dicts() == by_text.to_dicts()
    clusters = ids // 5
    a = stats.rank_intervals(rows, models=names, items=ids, clusters=clusters, options=opts)
    b = stats.rank_intervals(rows, models=names, items=ids.astype(str), clusters=clusters,
                             options=opts)  # fmt: skip
    assert a.to_dicts() == b.to_dicts()


def _layout(names, items):
    from tumorboard.stats import _validate

    lay = _validate.layout(len(names), groups=names)
    return lay, _validate.record_keys(items, len(names))


@pytest.mark.parametrize(("d", "n"), [(0.2, 100), (0.5, 30), (0.1, 1000), (0.35, 7)])
def test_power_against_statsmodels(d, n):
    from statsmodels.stats.power import NormalIndPower

    ref = NormalIndPower()
    assert stats.power(d, n) == pytest.approx(ref.power(d, n, 0.05, ratio=0), rel=1e-12)
    assert stats.power(d, n, design="independent") == pytest.approx(
        ref.power(d, n, 0.05, ratio=1), rel=1e-12
    )
    plan = stats.plan_sample_size(d, target_power=0.9)
    want = ref.solve_power(d, None, 0.05, 0.9, ratio=0)
    assert plan.n_items == int(np.ceil(want - 1e-9)) and plan.power >= 0.9
    assert stats.power(d, plan.n_items - 1) < 0.9 if plan.n_items > 1 else True
    mde = stats.detectable_effect(n, target_power=0.8)
    assert stats.power(mde, n) == pytest.approx(0.8, abs=1e-12)  # solved to the last digit
    assert mde == pytest.approx(ref.solve_power(None, n, 0.05, 0.8, ratio=0), rel=1e-4)


def test_power_with_patients_and_errors():
    # ICC 0.1 with 5 items per patient: design effect 1.4, items x 1.4 of the unclustered plan
    base = stats.plan_sample_size(0.05, sd=0.3, design="independent")
    clustered = stats.plan_sample_size(0.05, sd=0.3, design="independent", icc=0.1,
                                       items_per_cluster=5)  # fmt: skip
    assert clustered.design_effect == pytest.approx(1.4)
    assert abs(clustered.n_items - 1.4 * base.n_items) <= 2
    assert clustered.n_clusters == -(-clustered.n_items // 5)
    with pytest.raises(InvalidArgumentError, match="delta: expected a finite non-zero"):
        stats.plan_sample_size(0.0)
    with pytest.raises(InvalidArgumentError, match="icc: expected a number in"):
        stats.plan_sample_size(0.1, icc=1.5)


def test_compare_rows_carry_the_minimum_detectable_effect():
    rng = np.random.default_rng(8)
    values = np.r_[(rng.random(400) < 0.7), (rng.random(400) < 0.6)].astype(float)
    models = ["A"] * 400 + ["B"] * 400
    items = [f"q{i}" for i in range(400)] * 2
    opts = stats.BootstrapOptions(n_resamples=800, seed=2)
    (row,) = stats.compare(values, models=models, items=items, options=opts).rows
    # a complete family: the pair's resamples are the joint Poisson ones keyed by (task, item)
    keys = np.char.add("overall\x1f", np.asarray(items))
    joint = stats.bootstrap(values, groups=np.repeat([0, 1], 400), scheme="poisson", keys=keys,
                            options=opts, return_distribution=True)  # fmt: skip
    dstar = joint.distribution[0] - joint.distribution[1]
    d = float(values[:400].mean() - values[400:].mean())
    se = dstar.std(ddof=1)
    assert row.mde == pytest.approx((1.959963984540054 + 0.8416212335729143) * se, rel=1e-12)
    assert (row.ci_low, row.ci_high) == pytest.approx(tuple(np.quantile(dstar, [0.025, 0.975])),
                                                      abs=1e-12)  # fmt: skip
    want_p = (1 + np.count_nonzero(np.abs(dstar - d) >= abs(d))) / (1 + dstar.size)
    assert row.p_bootstrap == pytest.approx(want_p) and row.difference == pytest.approx(d)
    # the sign-flip test switched off: the bootstrap p-value is the row's test where McNemar
    # does not apply (clustered)
    off = stats.compare(values, models=models, items=items, clusters=[i[:2] for i in items],
                        options=opts, n_permutations=0).rows[0]  # fmt: skip
    assert off.test == "bootstrap" and off.p_value == off.p_bootstrap
    assert np.isnan(off.p_permutation)
    with pytest.raises(InvalidArgumentError, match="n_permutations: expected an integer >= 0"):
        stats.compare(values, models=models, items=items, n_permutations=-1)


def test_incomplete_families_fall_back_to_per_pair_paired_bootstrap():
    values = [1, 1, 1, 0, 1, 0, 0, 1, 0, 1, 0]
    models = ["A"] * 5 + ["B"] * 6
    items = ["q1", "q2", "q3", "q4", "q5", "q1", "q2", "q3", "q4", "q6", "q7"]
    opts = stats.BootstrapOptions(n_resamples=300, seed=4)
    (row,) = stats.compare(values, models=models, items=items, options=opts).rows
    ref = stats.paired_bootstrap(values[:4], values[5:9], options=opts)
    assert (row.ci_low, row.ci_high, row.p_bootstrap) == (ref.ci_low, ref.ci_high, ref.p_value)


def test_cli_plan():
    from test_logs_to_scores import cli

    out = cli("plan", "--delta", "0.05", "--icc", "0.1", "--items-per-patient", "5")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("1,099 items per model (220 patients of 5) detect a difference")
    out = cli("plan", "--items", "500", "--json")
    assert out.returncode == 0 and '"detectable_effect"' in out.stdout
    out = cli("plan", "--delta", "0.05", "--items", "3")
    assert out.returncode == 2 and "not allowed with argument" in out.stderr


def test_simultaneous_max_t_band():
    rng = np.random.default_rng(12)
    probs = {"A": 0.8, "B": 0.7, "C": 0.6, "D": 0.75}
    values = np.concatenate([(rng.random(250) < p).astype(float) for p in probs.values()])
    models = np.repeat(list(probs), 250)
    items = np.tile([f"q{i}" for i in range(250)], 4)
    opts = stats.BootstrapOptions(n_resamples=1500, seed=6)
    res = stats.compare(values, models=models, items=items, options=opts)
    # the engine's joint distribution: every model on shared Poisson resamples keyed by
    # (task, item), the key compare() gives an item ("overall" without tasks)
    keys = np.char.add("overall\x1f", items)
    joint = stats.bootstrap(values, groups=np.repeat(np.arange(4), 250), scheme="poisson",
                            keys=keys, options=opts, return_distribution=True)  # fmt: skip
    dist, est = joint.distribution, np.asarray(joint.estimate)
    pairs = list(itertools.combinations(range(4), 2))
    t = []
    for a, b in pairs:
        dstar = dist[a] - dist[b]
        t.append(np.abs(dstar - (est[a] - est[b])) / dstar.std(ddof=1))
    c = np.quantile(np.max(t, axis=0), 0.95)
    for row, (a, b), t_ab in zip(res.rows, pairs, t, strict=True):
        se = (dist[a] - dist[b]).std(ddof=1)
        assert (row.simul_low, row.simul_high) == pytest.approx(
            (row.difference - c * se, row.difference + c * se), abs=1e-12
        )
        assert c >= np.quantile(t_ab, 0.95)  # wider than any one pair's own band


def test_html_page_draws_every_comparison_and_rank(tmp_path):
    import xml.etree.ElementTree as ET

    rng = np.random.default_rng(3)
    probs = {"A": 0.8, "B": 0.7, "C": 0.6}
    values = np.concatenate([(rng.random(120) < p).astype(float) for p in probs.values()])
    models = np.repeat(list(probs), 120)
    items = np.tile([f"q{i}" for i in range(120)], 3)
    opts = stats.BootstrapOptions(n_resamples=300, seed=1)
    res = stats.compare(values, models=models, items=items, options=opts)
    ranks = {"overall": stats.rank_intervals(values, models=models, items=items, options=opts)}
    page = res.to_html(ranks)
    svgs = [page[i : page.index("</svg>", i) + 6] for i in range(len(page))
            if page.startswith("<svg", i)]  # fmt: skip
    assert len(svgs) == 3  # forest, one heatmap (one task), one rank plot
    ns = "{http://www.w3.org/2000/svg}"
    forest, heat, rank = (ET.fromstring(s) for s in svgs)  # well-formed SVG
    assert len(forest.findall(f"{ns}circle")) == len(res.rows) == 3
    texts = [t.text for t in forest.iter(f"{ns}text")]
    assert "overall: A - B" in texts and any(t and t.startswith("p = ") for t in texts)
    assert len(heat.findall(f"{ns}rect")) == 9  # 3 x 3 cells
    assert len(rank.findall(f"{ns}circle")) == 3
    assert "| overall | A | B |" in page  # the table is on the page too


def test_cli_compare_pairs_models_within_each_track(tmp_path):
    """Systems of different tracks answer different questions: never paired, one section each."""
    import json

    from test_logs_to_scores import cli, write_jsonl

    opts = "\nA) adenocarcinoma\nB) squamous cell carcinoma"
    records = []
    for track, models in (
        ("multimodal", ("gpt4o", "o4-mini")),
        ("longitudinal", ("gpt4o", "qwen")),
    ):
        for m, model in enumerate(models):
            for i in range(40):
                answer = "[ANSWER: A]" if i % (3 + m) else "[ANSWER: B]"
                records.append({"model": model, "track": track, "patient_id": f"{track}-p{i // 4}",
                                "task": "t", "question": f"{track} case {i}?{opts}", "gold": "A",
                                "response": answer})  # fmt: skip
    log = write_jsonl(tmp_path / "two.jsonl", records)
    assert cli("import", "jsonl", str(log), "--store", str(tmp_path / "s")).returncode == 0
    out = cli("compare", str(tmp_path / "s"), "--n-resamples", "200")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("## ") == 2 and "## jsonl / longitudinal" in out.stdout
    assert "| n/a" not in out.stdout  # no pair across tracks
    assert "| t | gpt4o | qwen | 40 | 0/0 |" in out.stdout
    assert "| t | gpt4o | o4-mini | 40 | 0/0 |" in out.stdout
    # a baseline one track lacks: that track is skipped with a note; unknown anywhere: refused
    out = cli("compare", str(tmp_path / "s"), "--baseline", "qwen", "--format", "json")
    assert out.returncode == 0, out.stderr
    assert "jsonl / multimodal: no 'qwen', nothing to compare" in out.stderr
    rows = json.loads(out.stdout)["comparisons"]
    assert {(r["track"], r["model_a"], r["model_b"]) for r in rows} == {
        ("longitudinal", "gpt4o", "qwen")
    }
    out = cli("compare", str(tmp_path / "s"), "--baseline", "claude")
    assert out.returncode == 2 and "baseline: expected one of the models" in out.stderr


@pytest.mark.parametrize(
    "kind", ["str", "int", "unicode", "empty", "uint8", "int_sparse", "uint64_top"]
)
def test_label_codes_equal_numpy_unique(kind):
    """Labels are coded as ``np.unique`` of their strings codes them, integers included.

    Integers take their own path (a presence table over a compact range, else their eight
    bytes; only the distinct values become strings), which must give the codes and levels of
    ``astype(str)``: "10" sorts before "9", "-1" before "0".
    """
    from tumorboard.stats._compare import _codes, _key_codes

    rng = np.random.default_rng(4)
    pool = {
        "str": [f"m{i}" for i in range(30)] + ["", "a", "a\x01", "b\x1fc"],
        "int": list(range(-5, 40)),
        "unicode": ["é", "e", "ü-x", "日本", "z", "Z", "ä\x00b"],
        "empty": ["x"],
        "uint8": np.arange(250, dtype=np.uint8)[::7],
        "int_sparse": [-(2**63), 2**63 - 1, 0, -1, 10**12, 9, 10],
        "uint64_top": np.array([2**64 - 1, 2**64 - 2, 2**63, 5], dtype=np.uint64),
    }[kind]
    labels = np.asarray(pool)[rng.integers(0, len(pool), 500)]
    codes, levels = _codes(labels)
    ref_levels, ref_codes = np.unique(labels.astype(str), return_inverse=True)
    assert levels.tolist() == ref_levels.tolist() and codes.tolist() == ref_codes.tolist()
    other = np.asarray(pool)[rng.integers(0, len(pool), 500)]
    k_codes, keys = _key_codes(labels, other)
    joined = np.char.add(np.char.add(labels.astype(str), "\x1f"), other.astype(str))
    ref_keys, ref_k = np.unique(joined, return_inverse=True)
    assert keys.tolist() == ref_keys.tolist() and k_codes.tolist() == ref_k.tolist()


@pytest.mark.parametrize("b", [0, 1, 2, 999, 4096, 10_001])
def test_row_quantile_pair_equals_numpy_quantile(b):
    """Every pair's interval comes from ``_core.stats.row_quantile_pair``: np.quantile's values.

    Rows of draws, of ties, sorted, with infinities and with a NaN (numpy: NaN), at the
    levels a comparison asks for; rows without values give NaN (numpy raises there).
    """
    from tumorboard import _core

    rng = np.random.default_rng(b)
    x = rng.normal(size=(6, b))
    x[1] = np.round(x[1] * 4) / 4  # ties
    x[2] = np.sort(x[2])
    x[3, ::17] = np.inf
    x[4, b // 2 :] = -np.inf
    if b:
        x[5, b // 3] = np.nan
    for level in (0.95, 0.9, 0.99, 0.5):
        alpha = 1.0 - level
        lo, hi = _core.stats.row_quantile_pair(x, alpha / 2.0, 1.0 - alpha / 2.0)
        if b == 0:
            assert np.isnan(lo).all() and np.isnan(hi).all()
            continue
        with np.errstate(invalid="ignore"):  # inf - inf between infinite order statistics
            want = np.quantile(x, [alpha / 2.0, 1.0 - alpha / 2.0], axis=1)
        assert np.array_equal(lo, want[0], equal_nan=True), level
        assert np.array_equal(hi, want[1], equal_nan=True), level
        one = _core.stats.row_quantile_pair(x, alpha / 2.0, 1.0 - alpha / 2.0, threads=1)
        assert np.array_equal(one[0], lo, equal_nan=True)
    with pytest.raises(ValueError, match="q_low <= q_high"):
        _core.stats.row_quantile_pair(x, 0.9, 0.1)
    with pytest.raises(ValueError, match="2-D"):
        _core.stats.row_quantile_pair(x.ravel(), 0.1, 0.9)


def _assert_codes_in_first_appearance_order(rows: np.ndarray, width: int) -> None:
    """Check ``factorize_fixed`` of the byte rows against a dict of their bytes."""
    from tumorboard import _core

    codes, first = _core.stats.factorize_fixed(np.ascontiguousarray(rows).ravel(), width)
    as_bytes = [r.tobytes() for r in rows]
    seen: dict[bytes, int] = {}
    expected = [seen.setdefault(b, len(seen)) for b in as_bytes]
    assert codes.tolist() == expected
    assert [as_bytes[i] for i in first] == list(seen)


@pytest.mark.parametrize("width", [1, 3, 8, 13, 84])
def test_factorize_fixed_codes_records_in_first_appearance_order(width):
    """Equal bytes get equal codes, counted up as records first appear.

    5,000 distinct records force the table of ``_core.stats.factorize_fixed`` to grow.
    """
    from tumorboard import _core

    rng = np.random.default_rng(width)
    distinct = min(5000, 256**width)
    pool = rng.integers(0, 256, (distinct, width), dtype=np.uint8)
    pool = np.unique(pool, axis=0)
    rows = pool[rng.integers(0, pool.shape[0], 40_000)]
    rows[::7] = pool[0]  # runs and repeats of one record
    _assert_codes_in_first_appearance_order(rows, width)
    with pytest.raises(ValueError, match="whole number of records"):
        _core.stats.factorize_fixed(np.zeros(10, np.uint8), 3)
    with pytest.raises(ValueError, match="positive record width"):
        _core.stats.factorize_fixed(np.zeros(10, np.uint8), 0)


@pytest.mark.parametrize("width", [1, 7, 8, 9, 16, 84])
def test_factorize_fixed_tells_records_apart_by_their_zero_bytes(width):
    """Records that differ only in where their zero bytes are get different codes.

    The table keys a fixed-width record by its bytes up to the last nonzero one; mostly-zero
    records (numpy's padded labels, bytes with zeros inside) must still be told apart.
    """
    from tumorboard import _core

    rng = np.random.default_rng(100 + width)
    rows = np.zeros((30_000, width), dtype=np.uint8)
    for r in rows:  # few nonzero bytes, anywhere, of few values: many near-collisions
        k = rng.integers(0, min(width, 3) + 1)
        r[rng.integers(0, width, k)] = rng.integers(1, 3, k)
    rows[::5] = 0  # the all-zero record, often and in runs
    rows[1::5] = rows[0::5]
    _assert_codes_in_first_appearance_order(rows, width)
    # numpy labels, padded with zeros to the column's width (<U1 cuts "ab" to "a")
    labels = np.array(["a", "ab", "", "a", "ba", "b", ""] * 3, dtype=f"<U{width}")
    codes, _ = _core.stats.factorize_fixed(labels.view(np.uint8), labels.dtype.itemsize)
    seen_labels: dict[str, int] = {}
    assert codes.tolist() == [seen_labels.setdefault(x, len(seen_labels)) for x in labels.tolist()]
    assert len(seen_labels) == (3 if width == 1 else 5)


def test_string_codes_sort_as_polars_sorts_strings():
    """Each string label's code is its rank among the distinct labels in polars' string order.

    ``_keys.dense_codes`` of strings goes through ``_core.stats.factorize_strings(sort=True)``.
    """
    import polars as pl
    from tumorboard._keys import dense_codes

    rng = np.random.default_rng(9)
    pool = ["", "a", "a\x00", "a\x00b", "ab", "abcdefgh", "abcdefghi", "abcdefgh\x00", "abcdefgg",
            "é", "e\u0301", "日本", "Z", "z", "\U0001f600", "p0001", "p01", "p1"]  # fmt: skip
    pool += [f"patient-{i:06d}" for i in rng.integers(0, 10**6, 3000)]
    labels = pl.Series([pool[i] for i in rng.integers(0, len(pool), 20_000)])
    levels = labels.unique().sort()
    expected = labels.cast(pl.Enum(levels)).to_physical().to_numpy()
    assert dense_codes(labels).tolist() == expected.tolist()
    assert (
        dense_codes(labels[7:300]).tolist()
        == dense_codes(pl.Series(labels[7:300].to_list())).tolist()
    )
    assert dense_codes(labels.cast(pl.Categorical)).tolist() == expected.tolist()


def test_repeated_numpy_labels_convert_to_the_same_series():
    """Long numpy string arrays are converted through their distinct labels: the same Series."""
    import polars as pl
    from tumorboard._keys import as_series

    rng = np.random.default_rng(2)
    pool = np.array(["a", "é", "", "日本x", "a\x00b", "m01", "\U0001f600 z"])
    for arr in (pool[rng.integers(0, pool.size, 9000)], np.arange(6000).astype(str)):
        got = as_series(arr, name="items", n=arr.size)
        assert got.equals(pl.Series("items", arr)) and got.name == "items"


@pytest.mark.parametrize("b", [0, 1, 2, 7, 129, 1000, 10_001])
def test_pair_summaries_equal_numpy_on_the_resampled_differences(b):
    """Every pair's summaries, computed without the [pairs, B] array, equal numpy's on it.

    ``np.quantile`` of the differences, ``std(ddof=1)`` (numpy's pairwise sums, bit for bit),
    the count of ``|d* - d| >= |d|`` and the per-resample maximum of ``|d* - d| / se`` over
    the pairs with ``se > 0``, on any thread count; a pair of equal models has se 0 and stays
    out of the maximum; rows with a NaN give NaN intervals, as ``np.quantile`` does.
    """
    from tumorboard import _core

    rng = np.random.default_rng(b)
    m = 7
    dist = rng.normal(0.6, 0.05, (m, b))
    dist[3] = dist[2]  # se 0
    dist[4] = np.round(dist[4] * 50) / 50  # ties
    if b > 3:
        dist[6, b // 2] = np.nan
    est = np.nanmean(dist, axis=1) + 1e-3 if b else np.full(m, 0.5)
    pairs = list(itertools.combinations(range(m), 2)) + [(5, 0), (1, 1)]
    a = np.array([p[0] for p in pairs])
    bb = np.array([p[1] for p in pairs])
    d = est[a] - est[bb]
    got = _core.stats.pair_summaries(dist, a, bb, d, 0.025, 0.975)
    one = _core.stats.pair_summaries(dist, a, bb, d, 0.025, 0.975, threads=1)
    for key in ("low", "high", "se", "extreme", "max_ratio"):
        assert np.array_equal(got[key], one[key], equal_nan=True), key
    dstar = dist[a] - dist[bb]
    with np.errstate(invalid="ignore", divide="ignore"):
        se = dstar.std(axis=1, ddof=1) if b > 1 else np.full(len(pairs), np.nan)
        dev = np.abs(dstar - d[:, None])
    assert np.array_equal(got["se"], se, equal_nan=True)
    assert got["extreme"].tolist() == np.count_nonzero(dev >= np.abs(d)[:, None], axis=1).tolist()
    if b:
        want = np.quantile(dstar, [0.025, 0.975], axis=1)
        assert np.array_equal(got["low"], want[0], equal_nan=True)
        assert np.array_equal(got["high"], want[1], equal_nan=True)
    live = se > 0
    assert got["any_live"] == bool(live.any())
    if live.any():
        ratio = dev / np.where(live, se, 1.0)[:, None]
        ratio[~live] = 0.0
        assert np.array_equal(got["max_ratio"], ratio.max(axis=0), equal_nan=True)
    with pytest.raises(ValueError, match="out of range"):
        _core.stats.pair_summaries(dist, a + m, bb, d, 0.025, 0.975)


def test_compare_integer_labels_equal_their_strings():
    """Integer item and cluster ids give exactly the comparison of their decimal strings."""
    rng = np.random.default_rng(21)
    n_items, n_models = 300, 4
    patient = rng.integers(0, 60, n_items)
    values = (rng.random(n_models * n_items) < 0.7).astype(float)
    models = np.repeat([f"m{i}" for i in range(n_models)], n_items)
    items = np.tile(np.arange(n_items) * 7 - 100, n_models)
    clusters = np.tile(patient, n_models)
    opts = stats.BootstrapOptions(n_resamples=400, seed=2)
    kw = {"models": models, "options": opts, "n_permutations": 50}
    as_int = stats.compare(values, items=items, clusters=clusters, **kw)
    as_str = stats.compare(values, items=items.astype(str), clusters=clusters.astype(str), **kw)
    assert as_int.to_dicts() == as_str.to_dicts()


def test_compare_takes_polars_and_arrow_label_columns_as_numpy_strings():
    """Label columns given as polars Series or Arrow arrays compare as their numpy strings.

    Strings are coded in polars' buffers (sorted byte-wise, which for UTF-8 is numpy's
    code-point order: "Z" < "a" < "é" < "日"), integers by value; a column with nulls or a
    label ending in NUL goes the numpy way (``np.asarray`` of it), whatever it gives.
    """
    import polars as pl
    import pyarrow as pa
    from tumorboard.stats._compare import _codes

    rng = np.random.default_rng(8)
    pool = np.array(["é", "Z", "a", "日本", "a\x1fb", "", "ab", "a\x01"])
    n_items, n_models = 120, 3
    items = np.char.add(pool[rng.integers(0, pool.size, n_items)], np.arange(n_items).astype(str))
    models = np.repeat(["m-é", "m-Z", "m-a"], n_items)
    values = (rng.random(n_items * n_models) < 0.6).astype(float)
    clusters = np.tile(pool[np.arange(n_items) % pool.size], n_models)
    opts = stats.BootstrapOptions(n_resamples=300, seed=4)
    kw = {"options": opts, "n_permutations": 40}
    want = stats.compare(values, models=models, items=np.tile(items, n_models), clusters=clusters,
                         tasks=np.tile(np.where(np.arange(n_items) % 2, "t1", "t0"), n_models),
                         **kw)  # fmt: skip
    tasks = pl.Series(np.tile(np.where(np.arange(n_items) % 2, "t1", "t0"), n_models))
    for wrap in (pl.Series, pa.array, lambda x: pl.Series(x).cast(pl.Categorical)):
        got = stats.compare(values, models=wrap(models), items=wrap(np.tile(items, n_models)),
                            clusters=wrap(clusters), tasks=tasks, **kw)  # fmt: skip
        assert got.to_dicts() == want.to_dicts()
    for col in (pl.Series(["a\x00", "a", "b", "b"]), pl.Series(["a", None, "b", "a"]),
                pl.Series([3, 10, -1, 3]), pl.Series([2**63, 5], dtype=pl.UInt64)):  # fmt: skip
        codes, levels = _codes(col)
        ref_levels, ref_codes = np.unique(np.asarray(col.to_numpy()).astype(str),
                                          return_inverse=True)  # fmt: skip
        assert levels.tolist() == ref_levels.tolist() and codes.tolist() == ref_codes.tolist()
    with pytest.raises(InvalidArgumentError, match="items: expected one label per value"):
        stats.compare(values, models=models, items=pl.Series(items), **kw)


def test_system_labels_name_a_model_by_track_and_tools_only_where_it_is_ambiguous():
    """A model run with and without tools in a track is told apart; other models keep names."""
    import polars as pl
    from tumorboard._compare_cli import _system_labels

    items = pl.DataFrame(
        {
            "model": ["gpt", "gpt", "llama", "gpt", "llama", "mistral"],
            "track": ["hancock", "hancock", "hancock", "hancock", "hancock", None],
            "tools": [True, False, True, None, True, None],
        },
        schema={"model": pl.String, "track": pl.String, "tools": pl.Boolean},
    )
    assert _system_labels(items).to_list() == [
        "gpt (hancock, tools)", "gpt (hancock, no tools)", "llama", "gpt (hancock, no tools)",
        "llama", "mistral",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "values",
    [
        np.tile(np.arange(1_000), 7),
        np.array([5]),
        np.array([2**62, -(2**62), 3, 3]),  # a range of 2^63: wider than the table
        np.array([-(2**63), 2**63 - 1]),  # the widest int64 range (its offset wraps)
        np.array([-7, 12, -7, 0, 99, 12]),
        np.array([], dtype=np.int64),
    ],
)
def test_integer_labels_coded_in_the_core_as_np_unique_of_their_strings(values):
    # compact_distinct finds the distinct values by a presence table over a compact range (None
    # for a wide one), compact_codes ranks each row among them; _int_codes orders them as
    # their strings sort: the codes and levels np.unique(values.astype(str)) gives
    from tumorboard import _core
    from tumorboard.stats._compare import _int_codes

    x = values.astype(np.int64)
    found = _core.stats.compact_distinct(x)
    if x.size and int(x.max()) - int(x.min()) >= 4 * x.size + 1024:
        assert found is None
    else:
        assert np.array_equal(found, np.unique(x))
        rank = np.arange(found.size)[::-1].copy()
        got = _core.stats.compact_codes(x, found, rank, 2)
        assert np.array_equal(got, rank[np.searchsorted(found, x)])
    if x.size:
        codes, levels = _int_codes(x)
        want_levels, want_codes = np.unique(x.astype(str), return_inverse=True)
        assert np.array_equal(codes, want_codes.ravel()) and np.array_equal(levels, want_levels)


def test_compact_codes_refuse_values_outside_theirs():
    from tumorboard import _core

    x = np.array([1, 2, 3], dtype=np.int64)
    with pytest.raises(ValueError, match="not among values"):
        _core.stats.compact_codes(x, np.array([1, 3]), np.array([0, 1]))
    with pytest.raises(ValueError, match="increasing"):
        _core.stats.compact_codes(x, np.array([3, 1, 2]), np.array([0, 1, 2]))


def test_value_table_finds_repeats_and_binary_values():
    from tumorboard import _core

    model = np.array([0, 1, 0, 1], dtype=np.int64)
    key = np.array([0, 0, 2, 1], dtype=np.int64)
    table, ok, binary = _core.stats.value_table(model, key, np.array([1.0, 0.0, 1.0, 0.5]), 2, 3)
    assert ok and not binary
    assert np.array_equal(table, [[1.0, np.nan, 1.0], [0.0, 0.5, np.nan]], equal_nan=True)
    _, ok, binary = _core.stats.value_table(model, key, np.array([1.0, 0.0, 1.0, 0.0]), 2, 3)
    assert ok and binary
    again = np.array([0, 1, 0, 0], dtype=np.int64)  # model 0, key 0 twice
    _, ok, _ = _core.stats.value_table(again, key[[0, 1, 2, 0]], np.ones(4), 2, 3)
    assert not ok
    with pytest.raises(ValueError, match="out of range"):
        _core.stats.value_table(model, key, np.ones(4), 2, 2)


def test_key_clusters_names_the_first_row_with_another_cluster():
    from tumorboard import _core

    key = np.array([0, 1, 0, 1, 0], dtype=np.int64)
    same = np.array([7, 3, 7, 3, 7], dtype=np.int64)
    of_key, bad = _core.stats.key_clusters(key, same, 2)
    assert of_key.tolist() == [7, 3] and bad == -1
    other = np.array([7, 3, 7, 4, 8], dtype=np.int64)
    of_key, bad = _core.stats.key_clusters(key, other, 2)
    assert of_key.tolist() == [7, 3] and bad == 3


def test_long_columns_are_coded_in_parts_with_the_codes_of_one_table():
    """Columns of more than 2^18 rows are coded in one part per thread, then merged.

    The codes (first-appearance order, or sorted) and first rows equal those of one table:
    fixed-width records with runs across the parts' boundaries, Arrow string offsets and
    polars' string views in several chunks.
    """
    import polars as pl
    import pyarrow as pa
    from tumorboard import _core
    from tumorboard._keys import dense_codes

    rng = np.random.default_rng(17)
    n = 700_001
    pool = np.unique(rng.integers(0, 256, (30_000, 5), dtype=np.uint8), axis=0)
    rows = pool[rng.integers(0, pool.shape[0], n)]
    rows[n // 2 - 5 : n // 2 + 5] = pool[3]  # a run across the middle (a boundary of 2 parts)
    _assert_codes_in_first_appearance_order(rows, 5)
    words = [f"w{i}" for i in rng.integers(0, 50_000, n)]
    arrow = pa.array(words, type=pa.large_string())
    offsets = np.frombuffer(arrow.buffers()[1], dtype=np.int64)[: n + 1]
    data = np.frombuffer(arrow.buffers()[2], dtype=np.uint8)
    codes, first = _core.stats.factorize_strings(offsets, data, sort=True)
    levels, inverse = np.unique(np.array(words), return_inverse=True)
    # numpy's order of these ASCII strings is the byte order the core sorts by
    assert np.array_equal(codes, inverse.ravel())
    assert [words[i] for i in first] == levels.tolist()
    chunked = pl.concat([pl.Series(words[:250_000]), pl.Series(words[250_000:])], rechunk=False)
    assert chunked.n_chunks() == 2
    assert np.array_equal(dense_codes(chunked), inverse.ravel())
