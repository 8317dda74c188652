"""Tests of the inter-rater agreement statistics.

The statistics live in python/tumorboard/_agreement.py and, in C++, in
csrc/stats/agreement.cpp.

Three layers are checked:

* the row builders together with ``_evaluate_reference`` (a pure-NumPy mirror of the C++
  formulas) against statsmodels, the krippendorff package and published / hand-worked examples;
* the public functions, which evaluate the same rows in C++ through the bootstrap engine, against
  the same references and against ``_evaluate_reference`` (so the C++ and NumPy formulas agree);
* the bootstrap path: ``ci=True`` brackets the estimate, is reproducible for a fixed seed and does
  not depend on the number of threads.
"""

from __future__ import annotations

import math
from itertools import combinations

import krippendorff
import numpy as np
import pytest
from statsmodels.stats import inter_rater
from tumorboard.errors import InvalidArgumentError, InvalidTypeError
from tumorboard.stats import (
    AgreementResult,
    BootstrapOptions,
    cohen_kappa,
    fleiss_kappa,
    gwet_ac1,
    krippendorff_alpha,
    mean_pairwise_agreement,
    pabak,
    rating_table,
)
from tumorboard.stats import _agreement as agr

TOL = 1e-12

# ------------------------------------------------------------------------------------------------
# Pure-NumPy reference of the C++ formulas (evaluate(sums, weight) for every statistic).


def _ratio(num: float, den: float) -> float:
    return num / den if den != 0 else math.nan


def _chance_corrected(p_o: float, p_e: float) -> float:
    return _ratio(p_o - p_e, 1.0 - p_e)


def _evaluate_reference(name: str, sums, weight: float, params) -> float:
    """Compute statistic `name` from column sums and total item weight, as the C++ code does."""
    s = np.asarray(sums, dtype=np.float64)
    p = np.asarray(params, dtype=np.float64)
    if name == "cohen_kappa":
        q = int(p[0])
        w = p[1:].reshape(q, q)
        table = s.reshape(q, q)
        if weight <= 0:
            return math.nan
        p_o = float((w * table).sum()) / weight
        p_e = float((w * np.outer(table.sum(axis=1), table.sum(axis=0))).sum()) / weight**2
        return _chance_corrected(p_o, p_e)
    if name == "fleiss_kappa":
        m = p[1]
        if weight <= 0:
            return math.nan
        ratings = weight * m
        p_bar = s[0] / (ratings * (m - 1.0))
        p_e = float(((s[1:] / ratings) ** 2).sum())
        return _chance_corrected(p_bar, p_e)
    if name == "pabak":
        q = p[0]
        return (q * s[0] / weight - 1.0) / (q - 1.0) if weight > 0 else math.nan
    if name == "gwet_ac1":
        q = int(p[0])
        p_a = _ratio(s[0], s[1])
        if s[q + 2] == 0:
            return math.nan
        pi = s[2 : q + 2] / s[q + 2]
        p_e = float((pi * (1.0 - pi)).sum()) / (q - 1)
        return _chance_corrected(p_a, p_e)
    if name == "krippendorff_alpha":
        q, metric, values = int(p[0]), int(p[1]), p[2:]
        o = s.reshape(q, q)
        marg = o.sum(axis=1)
        n = marg.sum()
        idx = np.arange(q)
        if metric == 0:
            d = (idx[:, None] != idx[None, :]).astype(float)
        elif metric == 1:
            cum = np.concatenate([[0.0], np.cumsum(marg)])
            lo, hi = np.minimum.outer(idx, idx), np.maximum.outer(idx, idx)
            d = (cum[hi + 1] - cum[lo] - (marg[:, None] + marg[None, :]) / 2.0) ** 2
            d[idx, idx] = 0.0
        elif metric == 2:
            d = (values[:, None] - values[None, :]) ** 2
        else:
            tot = values[:, None] + values[None, :]
            diff = values[:, None] - values[None, :]
            d = np.divide(diff, tot, out=np.zeros_like(tot), where=tot != 0) ** 2
        observed = float((o * d).sum())
        expected = float((np.outer(marg, marg) * d).sum())
        return 1.0 - _ratio((n - 1.0) * observed, expected)
    if name == "mean_pairwise_agreement":
        agree, rated = s[0::2], s[1::2]
        used = rated > 0
        return float((agree[used] / rated[used]).mean()) if used.any() else math.nan
    raise KeyError(name)


def _reference(prepared) -> float:
    rows = prepared.rows
    return _evaluate_reference(
        prepared.statistic, rows.sum(axis=0), float(rows.shape[0]), prepared.params
    )


# ------------------------------------------------------------------------------------------------
# Data


def _pairs_from_table(table) -> tuple[np.ndarray, np.ndarray]:
    """Two raters' labels (0..q-1) reproducing a q x q contingency table (rows: rater A)."""
    t = np.asarray(table)
    q = t.shape[0]
    cells = np.repeat(np.arange(q * q), t.reshape(-1))
    return cells // q, cells % q


def _table_from_pairs(a, b, q) -> np.ndarray:
    t = np.zeros((q, q))
    np.add.at(t, (a, b), 1)
    return t


# Cohen (1960), Table 2 as counts of N = 200: p_o = .70, p_e = .41, kappa = .29/.59 = .492.
COHEN_1960 = np.array([[88, 14, 18], [10, 40, 10], [2, 6, 12]])

# Gwet (2014), Handbook of Inter-Rater Reliability, 4th ed.: two abstractors x 100 pregnancies, and
# 223 patients by clinical vs research diagnosis (datasets of the irrCAC package).
CONT3X3_ABSTRACTORS = np.array([[13, 0, 0], [0, 20, 7], [0, 4, 56]])
CONT4X4_DIAGNOSIS = np.array([[40, 4, 4, 17], [6, 25, 2, 13], [4, 1, 21, 12], [15, 5, 9, 45]])

# Fleiss (1971), Table 1: 30 patients, 6 psychiatrists each, 5 diagnoses; kappa = .430.
FLEISS_1971 = np.array(
    [
        [0, 0, 0, 6, 0], [0, 3, 0, 0, 3], [0, 1, 4, 0, 1], [0, 0, 0, 0, 6], [0, 3, 0, 3, 0],
        [2, 0, 4, 0, 0], [0, 0, 4, 0, 2], [2, 0, 3, 1, 0], [2, 0, 0, 4, 0], [0, 0, 0, 0, 6],
        [1, 0, 0, 5, 0], [1, 1, 0, 4, 0], [0, 3, 3, 0, 0], [1, 0, 0, 5, 0], [0, 2, 0, 3, 1],
        [0, 0, 5, 0, 1], [3, 0, 0, 1, 2], [5, 1, 0, 0, 0], [0, 2, 0, 4, 0], [1, 0, 2, 0, 3],
        [0, 0, 0, 0, 6], [0, 1, 0, 5, 0], [0, 2, 0, 1, 3], [2, 0, 0, 4, 0], [1, 0, 0, 4, 1],
        [0, 5, 0, 1, 0], [4, 0, 0, 0, 2], [0, 2, 0, 4, 0], [1, 0, 5, 0, 0], [0, 0, 0, 0, 6],
    ]
)  # fmt: skip

# The 10 subjects x 14 raters x 5 categories example (Wikipedia, "Fleiss' kappa"): kappa = .210.
FLEISS_WIKIPEDIA = np.array(
    [
        [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
    ]
)  # fmt: skip

# Krippendorff (2011), section C: 4 observers x 12 units, values 1..5, missing data.
# Published: nominal .743, ordinal .815, interval .849, ratio .797. Gwet (2014, p. 120) uses the
# same ratings (transposed) for AC1: p_a = .818, p_e = .190, AC1 = .775.
nan = np.nan
KRIPPENDORFF_2011 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ]
)

# Gwet (2014): 5 observers x 15 units on the scale 0..3 (irrCAC "raw_5observers"): AC1 = .497,
# p_a = .616, p_e = .236.
GWET_5_OBSERVERS = np.array(
    [
        [1, 1, 2, nan, 0, 0, 1, 1, 2, 2, nan, 0, 1, 3, 1],
        [1, 1, 3, 0, 0, 0, 0, nan, 2, 1, 1, 0, 2, 3, 1],
        [2, 0, 3, 0, 0, 0, 2, 2, 2, 1, 0, 0, 2, 2, 1],
        [nan, 1, 3, nan, nan, nan, nan, 0, nan, 1, 0, 0, 2, 2, nan],
        [2, nan, nan, 0, 0, 0, 1, nan, 2, nan, nan, nan, nan, 3, 1],
    ]
).T  # (n_items, n_raters)


def _random_labels(rng, n_items, n_raters, q, p_missing=0.0, p_copy=0.6):
    truth = rng.integers(0, q, n_items)
    noise = rng.integers(0, q, (n_items, n_raters))
    labels = np.where(rng.random((n_items, n_raters)) < p_copy, truth[:, None], noise).astype(float)
    labels[rng.random(labels.shape) < p_missing] = np.nan
    return labels


# ------------------------------------------------------------------------------------------------
# Cohen's kappa


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_kappa_matches_statsmodels(weights):
    rng = np.random.default_rng(7)
    for q in (2, 3, 5):
        labels = _random_labels(rng, 150, 2, q).astype(int)
        a, b = labels[:, 0], labels[:, 1]
        table = _table_from_pairs(a, b, q)
        if weights is None:
            expected = inter_rater.cohens_kappa(table, return_results=False)
        else:  # statsmodels' wt= takes the category scores 0..q-1 and builds distances from them
            expected = inter_rater.cohens_kappa(table, wt=weights, return_results=False)
        prepared = agr._prepare_cohen_kappa(a, b, weights=weights)
        assert prepared.rows.shape == (150, q * q)
        assert _reference(prepared) == pytest.approx(expected, abs=TOL)
        res = cohen_kappa(a, b, weights=weights)
        assert res.estimate == pytest.approx(expected, abs=TOL)
        assert res.estimate == pytest.approx(_reference(prepared), abs=TOL)


def test_cohen_kappa_worked_examples():
    # Cohen (1960): p_o = .44 + .20 + .06 = .70; marginals A (.60, .30, .10), B (.50, .30, .20),
    # p_e = .60*.50 + .30*.30 + .10*.20 = .41; kappa = (.70 - .41) / (1 - .41) = 29/59 = .4915.
    a, b = _pairs_from_table(COHEN_1960)
    assert cohen_kappa(a, b).estimate == pytest.approx(29 / 59, abs=TOL)
    assert _reference(agr._prepare_cohen_kappa(a, b)) == pytest.approx(29 / 59, abs=TOL)

    # Hand-worked weighted kappa: table [[2,1,0],[0,2,1],[1,0,3]] (N = 10), linear weights
    # w = 1 - |i-j|/2. p_o = (2+2+3)/10 + .5*(1+1)/10 = .8; both marginals (.3, .3, .4);
    # p_e = (.09+.09+.16) + .5*(.09+.09+.12+.12) = .34 + .21 = .55; kappa_w = .25/.45 = 5/9.
    a, b = _pairs_from_table([[2, 1, 0], [0, 2, 1], [1, 0, 3]])
    assert cohen_kappa(a, b, weights="linear").estimate == pytest.approx(5 / 9, abs=TOL)

    # Gwet (2014) tables, published to 3 decimals by irrCAC.
    for table, published in (
        (CONT3X3_ABSTRACTORS, {None: 0.796, "linear": 0.843, "quadratic": 0.892}),
        (CONT4X4_DIAGNOSIS, {None: 0.432, "linear": 0.407, "quadratic": 0.383}),
    ):
        a, b = _pairs_from_table(table)
        for weights, value in published.items():
            assert round(cohen_kappa(a, b, weights=weights).estimate, 3) == value


def test_cohen_kappa_labels_and_categories():
    a = ["benign", "malignant", "benign", "benign", "malignant", "benign"]
    b = ["benign", "malignant", "malignant", "benign", "malignant", "benign"]
    codes = [0, 1, 0, 0, 1, 0], [0, 1, 1, 0, 1, 0]
    assert cohen_kappa(a, b).estimate == pytest.approx(cohen_kappa(*codes).estimate, abs=TOL)
    # Category order drives the weights: reversing a 3-point scale leaves linear kappa unchanged,
    # an order that breaks adjacency changes it.
    x = np.array(["low", "mid", "high", "mid", "low", "high", "mid"])
    y = np.array(["low", "high", "high", "mid", "mid", "high", "low"])
    scale = ["low", "mid", "high"]
    k_scale = cohen_kappa(x, y, weights="linear", categories=scale).estimate
    k_rev = cohen_kappa(x, y, weights="linear", categories=scale[::-1]).estimate
    k_sorted = cohen_kappa(x, y, weights="linear").estimate  # high < low < mid
    assert k_scale == pytest.approx(k_rev, abs=TOL)
    assert k_scale != pytest.approx(k_sorted, abs=1e-6)
    # An unused declared category leaves unweighted kappa unchanged.
    k3 = cohen_kappa(x, y, categories=["low", "mid", "high", "unknown"]).estimate
    assert k3 == pytest.approx(cohen_kappa(x, y).estimate, abs=TOL)
    # Both raters use one category only: chance agreement is 1 and kappa is undefined.
    assert math.isnan(cohen_kappa([1, 1, 1], [1, 1, 1], categories=[0, 1]).estimate)


# ------------------------------------------------------------------------------------------------
# Fleiss' kappa


def test_fleiss_kappa_matches_statsmodels_and_published():
    for table, published in ((FLEISS_1971, 0.430), (FLEISS_WIKIPEDIA, 0.210)):
        expected = inter_rater.fleiss_kappa(table, method="fleiss")
        prepared = agr._prepare_fleiss_kappa(table)
        assert _reference(prepared) == pytest.approx(expected, abs=TOL)
        res = fleiss_kappa(table)
        assert res.estimate == pytest.approx(expected, abs=TOL)
        assert round(res.estimate, 3) == published
        assert res.n_items == table.shape[0]
    rng = np.random.default_rng(3)
    labels = _random_labels(rng, 120, 5, 4).astype(int)
    table, cats = rating_table(labels)
    assert list(cats) == [0, 1, 2, 3] and table.shape == (120, 4) and (table.sum(1) == 5).all()
    expected = inter_rater.fleiss_kappa(table, method="fleiss")
    assert fleiss_kappa(table).estimate == pytest.approx(expected, abs=TOL)
    assert _reference(agr._prepare_fleiss_kappa(table)) == pytest.approx(expected, abs=TOL)


def test_rating_table_missing_and_categories():
    labels = [["a", "b", None], ["b", "b", "b"], [None, None, "c"]]
    table, cats = rating_table(np.array(labels, dtype=object))
    assert list(cats) == ["a", "b", "c"]
    np.testing.assert_array_equal(table, [[1, 1, 0], [0, 3, 0], [0, 0, 1]])
    table, cats = rating_table([[1.0, np.nan], [2.0, 1.0]], categories=[2.0, 1.0, 0.0])
    np.testing.assert_array_equal(table, [[0, 1, 0], [1, 1, 0]])
    with pytest.raises(ValueError, match="labels"):
        rating_table([["a", "z"]], categories=["a", "b"])


# ------------------------------------------------------------------------------------------------
# PABAK


def test_pabak_worked_examples():
    # Binary: 40 agreements out of 50 -> 2 * .8 - 1 = .6.
    a = np.array([1] * 30 + [0] * 10 + [1] * 6 + [0] * 4)
    b = np.array([1] * 30 + [0] * 10 + [0] * 6 + [1] * 4)
    assert pabak(a, b).estimate == pytest.approx(0.6, abs=TOL)
    # Three categories, p_o = .89: (3 * .89 - 1) / 2 = .835 (Brennan-Prediger .835 in Gwet 2014);
    # four categories, p_o = 131/223: (4 p_o - 1) / 3 = .450 (published .450).
    a, b = _pairs_from_table(CONT3X3_ABSTRACTORS)
    assert pabak(a, b).estimate == pytest.approx((3 * 0.89 - 1) / 2, abs=TOL)
    a, b = _pairs_from_table(CONT4X4_DIAGNOSIS)
    assert pabak(a, b).estimate == pytest.approx((4 * 131 / 223 - 1) / 3, abs=TOL)
    assert round(pabak(a, b).estimate, 3) == 0.450
    assert _reference(agr._prepare_pabak(a, b)) == pytest.approx((4 * 131 / 223 - 1) / 3, abs=TOL)
    # A declared scale larger than the observed labels.
    assert pabak([0, 1, 1], [0, 1, 0], n_categories=5).estimate == pytest.approx(
        (5 * 2 / 3 - 1) / 4, abs=TOL
    )


# ------------------------------------------------------------------------------------------------
# Gwet's AC1


def _ac1_two_raters(table) -> float:
    """Gwet's (2008) two-rater AC1 from a q x q contingency table."""
    p = np.asarray(table, float) / np.sum(table)
    q = p.shape[0]
    pi = (p.sum(axis=1) + p.sum(axis=0)) / 2.0
    p_e = float((pi * (1 - pi)).sum()) / (q - 1)
    return (np.trace(p) - p_e) / (1 - p_e)


def test_gwet_ac1_two_raters():
    rng = np.random.default_rng(11)
    for q in (2, 3, 4):
        labels = _random_labels(rng, 90, 2, q).astype(int)
        table, _ = rating_table(labels, categories=range(q))
        expected = _ac1_two_raters(_table_from_pairs(labels[:, 0], labels[:, 1], q))
        assert _reference(agr._prepare_gwet_ac1(table)) == pytest.approx(expected, abs=TOL)
        assert gwet_ac1(table).estimate == pytest.approx(expected, abs=TOL)
    # Gwet (2014) tables, published to 3 decimals: .849 and .456.
    for contingency, published in ((CONT3X3_ABSTRACTORS, 0.849), (CONT4X4_DIAGNOSIS, 0.456)):
        a, b = _pairs_from_table(contingency)
        table, _ = rating_table(np.column_stack([a, b]))
        value = gwet_ac1(table).estimate
        assert value == pytest.approx(_ac1_two_raters(contingency), abs=TOL)
        assert round(value, 3) == published
    # Hand-worked high-agreement example (the "kappa paradox" of Gwet 2008): 100 items, 90 rated
    # "+" by both raters, 5 "+/-", 5 "-/+". p_a = .90; both raters say "+" 95% of the time, so
    # pi_+ = .95, pi_- = .05 and p_e = (.95 * .05 + .05 * .95) / (2 - 1) = .095;
    # AC1 = (.90 - .095) / (1 - .095) = .8895, while Cohen's p_e = .95^2 + .05^2 = .905 gives
    # kappa = (.90 - .905) / (1 - .905) = -.0526.
    a, b = _pairs_from_table([[90, 5], [5, 0]])
    table, _ = rating_table(np.column_stack([a, b]))
    assert gwet_ac1(table).estimate == pytest.approx(0.805 / 0.905, abs=TOL)
    assert cohen_kappa(a, b).estimate == pytest.approx(-0.005 / 0.095, abs=TOL)


def test_gwet_ac1_missing_ratings_published():
    # Krippendorff's data as an items x raters matrix, with Gwet's (2014) p_a, p_e and AC1.
    labels = KRIPPENDORFF_2011.T
    table, cats = rating_table(labels)
    assert list(cats) == [1, 2, 3, 4, 5]
    prepared = agr._prepare_gwet_ac1(table)
    s = prepared.rows.sum(axis=0)
    p_a = s[0] / s[1]
    pi = s[2:7] / s[7]
    p_e = float((pi * (1 - pi)).sum()) / 4
    assert (round(p_a, 3), round(p_e, 3)) == (0.818, 0.190)
    assert round(gwet_ac1(table).estimate, 3) == 0.775
    assert gwet_ac1(table).estimate == pytest.approx(_reference(prepared), abs=TOL)
    table, _ = rating_table(GWET_5_OBSERVERS)
    assert round(gwet_ac1(table).estimate, 3) == 0.497


def test_gwet_ac1_drops_unrated_items():
    table = np.array([[2, 0], [1, 1], [0, 0], [0, 3], [1, 0]])
    res = gwet_ac1(table)
    assert res.n_items == 4
    # p_a over items with >= 2 ratings: (1 + 0 + 1) / 3; pi = mean of (1, .5, 0, 1) = .625 for
    # category 0 over the 4 rated items; p_e = 2 * .625 * .375 = .46875.
    p_a, p_e = 2 / 3, 2 * 0.625 * 0.375
    assert res.estimate == pytest.approx((p_a - p_e) / (1 - p_e), abs=TOL)


# ------------------------------------------------------------------------------------------------
# Krippendorff's alpha


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_krippendorff_alpha_matches_package(level):
    rng = np.random.default_rng(5)
    for n_raters, n_units, q in ((3, 60, 4), (5, 40, 6), (2, 80, 3)):
        data = _random_labels(rng, n_units, n_raters, q, p_missing=0.3).T + 1.0  # values 1..q
        data[:, 0] = np.nan  # a unit nobody rated
        data[1:, 1] = np.nan  # a unit with a single value
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        prepared = agr._prepare_krippendorff_alpha(data, level_of_measurement=level)
        assert _reference(prepared) == pytest.approx(expected, abs=TOL)
        res = krippendorff_alpha(data, level_of_measurement=level)
        assert res.estimate == pytest.approx(expected, abs=TOL)
        m = np.sum(~np.isnan(data), axis=0)
        assert res.n_items == int((m >= 2).sum())
    # Unequally spaced values exercise the interval and ratio metrics.
    data = np.where(np.isnan(data), np.nan, data**2 / 3.0)
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
    assert krippendorff_alpha(data, level_of_measurement=level).estimate == pytest.approx(
        expected, abs=TOL
    )


def test_krippendorff_alpha_published_example():
    published = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}
    for level, value in published.items():
        res = krippendorff_alpha(KRIPPENDORFF_2011, level_of_measurement=level)
        assert round(res.estimate, 3) == value
        expected = krippendorff.alpha(
            reliability_data=KRIPPENDORFF_2011, level_of_measurement=level
        )
        assert res.estimate == pytest.approx(expected, abs=TOL)
        assert res.n_items == 11  # unit 12 has a single value
    words = np.array(["very low", "low", "mid", "high", "very high"], dtype=object)
    as_words = np.full(KRIPPENDORFF_2011.shape, None, dtype=object)
    present = ~np.isnan(KRIPPENDORFF_2011)
    as_words[present] = words[KRIPPENDORFF_2011[present].astype(int) - 1]
    res = krippendorff_alpha(as_words, level_of_measurement="ordinal", value_domain=list(words))
    assert round(res.estimate, 3) == 0.815
    assert round(krippendorff_alpha(as_words).estimate, 3) == 0.743


# ------------------------------------------------------------------------------------------------
# Mean pairwise agreement


def _mean_pairwise_loop(labels) -> float:
    labels = np.asarray(labels, float)
    ratios = []
    for i, j in combinations(range(labels.shape[1]), 2):
        both = ~np.isnan(labels[:, i]) & ~np.isnan(labels[:, j])
        if both.any():
            ratios.append(np.mean(labels[both, i] == labels[both, j]))
    return float(np.mean(ratios))


def test_mean_pairwise_agreement():
    rng = np.random.default_rng(2)
    labels = _random_labels(rng, 100, 4, 3, p_missing=0.25)
    expected = _mean_pairwise_loop(labels)
    prepared = agr._prepare_mean_pairwise_agreement(labels)
    assert prepared.rows.shape[1] == 12
    assert _reference(prepared) == pytest.approx(expected, abs=TOL)
    assert mean_pairwise_agreement(labels).estimate == pytest.approx(expected, abs=TOL)
    # Hand-worked: raters (1,2) both rated items 1-2 and agree on both: 2/2; raters (1,3) both
    # rated items 1-2 and agree on item 1: 1/2; raters (2,3) both rated items 1-3 and agree on
    # items 1 and 3: 2/3. Mean (1 + 1/2 + 2/3) / 3 = 13/18.
    labels = [["x", "x", "x"], ["y", "y", "z"], [None, "z", "z"], ["w", None, None]]
    res = mean_pairwise_agreement(np.array(labels, dtype=object))
    assert res.estimate == pytest.approx(13 / 18, abs=TOL)
    assert res.n_items == 3  # the last item has a single rating


# ------------------------------------------------------------------------------------------------
# Bootstrap path


def _ci_cases():
    rng = np.random.default_rng(13)
    two = _random_labels(rng, 150, 2, 3).astype(int)
    many = _random_labels(rng, 150, 4, 3)
    full_table, _ = rating_table(_random_labels(rng, 150, 5, 3))
    miss_table, _ = rating_table(many)
    return [
        ("cohen_kappa", lambda **kw: cohen_kappa(two[:, 0], two[:, 1], weights="linear", **kw)),
        ("fleiss_kappa", lambda **kw: fleiss_kappa(full_table, **kw)),
        ("pabak", lambda **kw: pabak(two[:, 0], two[:, 1], **kw)),
        ("gwet_ac1", lambda **kw: gwet_ac1(miss_table, **kw)),
        (
            "krippendorff_alpha",
            lambda **kw: krippendorff_alpha(many.T, level_of_measurement="ordinal", **kw),
        ),
        ("mean_pairwise_agreement", lambda **kw: mean_pairwise_agreement(many, **kw)),
    ]


@pytest.mark.parametrize("name,call", _ci_cases(), ids=[c[0] for c in _ci_cases()])
def test_bootstrap_interval(name, call):
    point = call()
    assert isinstance(point, AgreementResult) and point.statistic == name
    assert math.isnan(point.ci_low) and math.isnan(point.ci_high) and math.isnan(point.se)
    assert point.n_resamples == 0 and point.n_items > 0

    res = call(ci=True, options=BootstrapOptions(n_resamples=300, seed=42, threads=1))
    assert res.estimate == point.estimate
    assert res.ci_low <= res.estimate <= res.ci_high
    assert res.ci_high - res.ci_low > 0 and 0 < res.se < 0.5
    assert (res.n_resamples, res.level, res.method) == (300, 0.95, "percentile")
    assert res.n_items == point.n_items
    again = call(ci=True, options=BootstrapOptions(n_resamples=300, seed=42, threads=2))
    assert again == res  # deterministic and bit-identical across thread counts
    other = call(ci=True, options=BootstrapOptions(n_resamples=300, seed=43, threads=2))
    assert (other.ci_low, other.ci_high) != (res.ci_low, res.ci_high)
    bca = call(ci=True, options=BootstrapOptions(n_resamples=300, seed=42, method="bca", level=0.9))
    assert bca.ci_low <= bca.estimate <= bca.ci_high
    assert (bca.method, bca.level) == ("bca", 0.9)


def test_engine_rejects_inconsistent_params():
    from tumorboard.stats import bootstrap_sufficient

    prepared = agr._prepare_cohen_kappa([0, 1, 1], [0, 1, 0])
    with pytest.raises(ValueError):
        bootstrap_sufficient(
            prepared.rows,
            statistic="cohen_kappa",
            params=prepared.params[:-1].copy(),
            options=BootstrapOptions(n_resamples=10, threads=1),
            estimate_only=True,
        )


# ------------------------------------------------------------------------------------------------
# Input validation


def test_input_validation():
    with pytest.raises(ValueError, match="rater_a and rater_b"):
        cohen_kappa([0, 1, 1], [0, 1])
    with pytest.raises(ValueError, match="rater_a"):
        cohen_kappa([], [])
    with pytest.raises(ValueError, match="rater_a"):
        cohen_kappa([[0, 1]], [[0, 1]])
    with pytest.raises(ValueError, match="at least 2 categories"):
        cohen_kappa([1, 1], [1, 1])
    with pytest.raises(ValueError, match="missing"):
        cohen_kappa([0, 1, np.nan], [0, 1, 1])
    with pytest.raises(ValueError, match="weights"):
        cohen_kappa([0, 1], [1, 0], weights="cubic")
    with pytest.raises(ValueError, match="categories"):
        cohen_kappa([0, 1, 2], [0, 1, 1], categories=[0, 1])
    with pytest.raises(ValueError, match="n_categories"):
        pabak([0, 1, 2], [0, 1, 1], n_categories=2)
    with pytest.raises(ValueError, match="at least 2 categories"):
        pabak(["a", "a"], ["a", "a"])
    with pytest.raises(ValueError, match="same number of ratings"):
        fleiss_kappa([[2, 1], [1, 1]])
    with pytest.raises(ValueError, match="table"):
        fleiss_kappa([[1, 0], [0, 1]])  # fewer than 2 ratings per item
    with pytest.raises(ValueError, match="table"):
        fleiss_kappa([[3], [3]])  # one category
    with pytest.raises(ValueError, match="table"):
        gwet_ac1([[1.5, 0.5]])
    with pytest.raises(ValueError, match="table"):
        gwet_ac1([1, 2, 3])
    with pytest.raises(ValueError, match="reliability_data"):
        krippendorff_alpha([1, 2, 3])
    with pytest.raises(ValueError, match="reliability_data"):
        krippendorff_alpha([[1, np.nan], [np.nan, 2]])  # no pairable unit
    with pytest.raises(ValueError, match="reliability_data"):
        krippendorff_alpha([[1, 1], [1, 1]])  # a single value
    with pytest.raises(InvalidArgumentError, match="level_of_measurement"):
        krippendorff_alpha([[1, 2], [1, 2]], level_of_measurement="cardinal")
    with pytest.raises(ValueError, match="numeric"):
        krippendorff_alpha([["a", "b"], ["a", "b"]], level_of_measurement="interval")
    with pytest.raises(ValueError, match="value_domain"):
        krippendorff_alpha([["a", "b"], ["a", "b"]], level_of_measurement="ordinal")
    with pytest.raises(ValueError, match="labels"):
        mean_pairwise_agreement([[1], [2]])
    with pytest.raises(ValueError, match="labels"):
        mean_pairwise_agreement([[1, np.nan], [np.nan, 2]])
    with pytest.raises(InvalidArgumentError, match="options: bootstrap options were given"):
        cohen_kappa([0, 1], [1, 0], options=BootstrapOptions(n_resamples=10))
    with pytest.raises(InvalidArgumentError, match="ci: expected True or False"):
        fleiss_kappa([[1, 1], [2, 0]], ci="yes")
    with pytest.raises(InvalidTypeError, match="options"):
        gwet_ac1([[1, 1], [2, 0]], ci=True, options={"n_resamples": 10})


def test_agreement_result_is_a_one_row_table():
    r = cohen_kappa([1, 0, 1, 1, 0, 1], [1, 0, 0, 1, 0, 1], ci=True,
                    options=BootstrapOptions(n_resamples=200, seed=2))  # fmt: skip
    df = r.to_polars()
    assert df.height == 1 and df.columns[:5] == ["statistic", "estimate", "se", "ci_low", "ci_high"]
    assert df.row(0, named=True)["estimate"] == r.estimate and r.interval() == (r.ci_low, r.ci_high)


def test_krippendorff_alpha_values_that_overflow_are_refused():
    from tumorboard.errors import NumericOverflowError

    small = np.array([[1.0, -1.0, 0.5, 0.25], [1.0, 0.5, 0.75, 0.25]])
    want = krippendorff.alpha(reliability_data=small, level_of_measurement="interval")
    for scale in (1e150, 1e200, 1e308):  # (2 * scale)^2 * n^2 overflows from ~1e153 on
        huge = small * scale
        if scale == 1e150:  # still inside float64: the same alpha (alpha is scale-free)
            got = krippendorff_alpha(huge, level_of_measurement="interval").estimate
            assert got == pytest.approx(want, abs=TOL)
            continue
        with pytest.raises(NumericOverflowError, match="interval metric.*overflows") as info:
            krippendorff_alpha(huge, level_of_measurement="interval")
        assert isinstance(info.value, OverflowError) and "rescale" in str(info.value)
    with pytest.raises(NumericOverflowError, match="ratio metric"):
        krippendorff_alpha(np.abs(small) * 1e308, level_of_measurement="ratio")
    # nominal and ordinal alpha never compute with the values themselves
    nominal = krippendorff_alpha(small * 1e308, level_of_measurement="nominal").estimate
    assert nominal == pytest.approx(
        krippendorff.alpha(reliability_data=small, level_of_measurement="nominal"), abs=TOL
    )
