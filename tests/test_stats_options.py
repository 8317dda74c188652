"""Tests of ``tumorboard.stats.BootstrapOptions`` (python/tumorboard/stats/_options.py).

* every field is validated on construction, and a bad value raises an InvalidArgumentError
  whose message starts with the field's name; the value is frozen and stored in its canonical
  Python type; ``dataclasses.replace`` validates again;
* ``options=`` gives bit-identical results to the keyword arguments it replaced: the expected
  numbers below were computed with the keyword API (``n_resamples=``, ``level=``,
  ``method=``, ``seed=``, ``threads=``, ``ci_level=``) before it was removed, on the same
  inputs and seeds.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from tumorboard import stats, text
from tumorboard.errors import InvalidArgumentError, InvalidTypeError
from tumorboard.stats import BootstrapOptions

BAD_FIELDS = [
    ("n_resamples", 0),
    ("n_resamples", -5),
    ("n_resamples", 2**32),
    ("n_resamples", 100.0),
    ("n_resamples", True),
    ("n_resamples", "100"),
    ("level", 0),
    ("level", 1),
    ("level", 1.5),
    ("level", -0.1),
    ("level", float("nan")),
    ("level", "0.95"),
    ("level", True),
    ("method", "BCa"),
    ("method", "bootstrap-t"),
    ("method", None),
    ("seed", -1),
    ("seed", 2**64),
    ("seed", 1.5),
    ("seed", None),
    ("threads", 0),
    ("threads", -2),
    ("threads", 1.5),
    ("threads", False),
]


@pytest.mark.parametrize("field,value", BAD_FIELDS, ids=[f"{f}={v!r}" for f, v in BAD_FIELDS])
def test_bad_field_names_the_field(field, value):
    with pytest.raises(InvalidArgumentError, match=f"^{field}: expected"):
        BootstrapOptions(**{field: value})


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, np.bool_(True), 4097, "2"])
def test_threads_is_one_check_in_stats_text_and_slides(bad):
    # one check (tumorboard._checks.check_threads): same values refused, same message
    from tumorboard import slides

    want = f"^threads: expected None or an integer in \\[1, 4096\\], got {re.escape(repr(bad))}$"
    calls = (
        lambda: BootstrapOptions(threads=bad),
        lambda: text.rouge("a b", "a b", threads=bad),
        lambda: slides.resize(np.zeros((8, 8, 3), np.uint8), 4, threads=bad),
    )
    for call in calls:
        with pytest.raises(InvalidArgumentError, match=want):
            call()


def test_threads_none_means_all_cores_everywhere():
    from tumorboard import slides

    assert BootstrapOptions(threads=None).threads is None
    assert BootstrapOptions(threads=4096).engine_threads == 4096
    assert text.rouge("a b", "a b", threads=None)["rouge1"].fmeasure == 1.0
    assert slides.resize(np.zeros((8, 8, 3), np.uint8), 4, threads=None).shape[:2] == (4, 4)


def test_defaults_are_documented_values():
    o = BootstrapOptions()
    assert (o.n_resamples, o.level, o.method, o.seed, o.threads) == (
        1000, 0.95, "percentile", 0, None,
    )  # fmt: skip
    assert o.engine_threads == 0 and BootstrapOptions(threads=3).engine_threads == 3


def test_frozen_keyword_only_and_canonical_types():
    o = BootstrapOptions(n_resamples=np.int64(200), level=np.float32(0.5), seed=np.uint64(7),
                         threads=np.int32(2), method=np.str_("bca"))  # fmt: skip
    assert type(o.n_resamples) is int and o.n_resamples == 200
    assert type(o.level) is float and o.level == 0.5
    assert type(o.seed) is int and type(o.threads) is int and type(o.method) is str
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.level = 0.9  # type: ignore[misc]
    with pytest.raises(TypeError):
        BootstrapOptions(500)  # type: ignore[misc]
    assert BootstrapOptions(seed=3) == BootstrapOptions(seed=3) != BootstrapOptions(seed=4)
    assert hash(BootstrapOptions(seed=3)) == hash(BootstrapOptions(seed=3))
    with pytest.raises(InvalidArgumentError, match="^level"):
        dataclasses.replace(o, level=2.0)
    assert dataclasses.replace(o, seed=1).seed == 1


def test_options_must_be_bootstrap_options():
    with pytest.raises(InvalidTypeError, match="options: expected a tumorboard.stats"):
        stats.bootstrap([1.0, 2.0], options={"n_resamples": 10})  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------
# options= equals the former keyword path, bit for bit


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    x = rng.random(40)
    g = np.repeat(np.arange(4), 10)
    y = x + rng.normal(0, 0.1, 40)
    idx = rng.integers(0, 40, size=(50, 40))
    a = rng.integers(0, 3, 60)
    b = np.where(rng.random(60) < 0.7, a, rng.integers(0, 3, 60))
    ratings = np.stack([a, b, np.where(rng.random(60) < 0.8, a, 2)], axis=1)
    return dict(x=x, g=g, y=y, idx=idx, a=a, b=b, ratings=ratings)


def test_bootstrap_functions_match_the_keyword_path(data):
    x, g = data["x"], data["g"]
    # bootstrap(x, groups=g, n_resamples=300, level=0.9, method="bca", seed=5, threads=2)
    r = stats.bootstrap(
        x, groups=g, options=BootstrapOptions(n_resamples=300, level=0.9, method="bca", seed=5,
                                              threads=2),
    )  # fmt: skip
    assert r.ci_low.tolist() == [0.4198679425568741, 0.45081320889076726,
                                 0.26792569102026625, 0.2098635678480013]  # fmt: skip
    assert r.ci_high.tolist() == [0.7348734679217795, 0.7136265669942716,
                                  0.536936098933229, 0.4882126819058612]  # fmt: skip
    assert r.se.tolist() == [0.09681929681616944, 0.07987804649814713,
                             0.08754887531773463, 0.08288196979809581]  # fmt: skip
    # bootstrap(x, n_resamples=200, seed=3, scheme="poisson")
    r = stats.bootstrap(x, scheme="poisson", options=BootstrapOptions(n_resamples=200, seed=3))
    assert r.interval() == (0.3788545726662422, 0.5552513908132353)
    # paired_bootstrap(x, y, n_resamples=250, level=0.8, method="basic", seed=9)
    opts = BootstrapOptions(n_resamples=250, level=0.8, method="basic", seed=9)
    p = stats.paired_bootstrap(x, data["y"], options=opts)
    assert (p.ci_low, p.ci_high) == (-0.017039656237279998, 0.01571214177228398)
    assert p.p_value == 0.9840637450199203
    # poisson_partials(x, keys=..., n_resamples=150, seed=4).finalize(level=0.9, method="basic")
    opts = BootstrapOptions(n_resamples=150, seed=4)
    part = stats.poisson_partials(x, keys=np.arange(40), options=opts)
    fin = part.finalize(options=dataclasses.replace(opts, level=0.9, method="basic"))
    # (numpy's linear percentile index since 2026-11-28: one ulp from the values before,
    # 0.3759307276505488 and 0.5462072719979021)
    assert fin.interval() == (0.37593072765054913, 0.546207271997902)
    # bootstrap_from_indices(x, idx, level=0.9, method="percentile")
    r = stats.bootstrap_from_indices(
        x, data["idx"], options=BootstrapOptions(n_resamples=50, level=0.9)
    )
    assert r.interval() == (0.41511588241721326, 0.5606842003507506)


def test_agreement_statistics_match_the_keyword_path(data):
    a, b, ratings = data["a"], data["b"], data["ratings"]
    table, _ = stats.rating_table(ratings)

    def interval(res):
        return [res.estimate, res.ci_low, res.ci_high, res.se]

    # cohen_kappa(a, b, weights="linear", ci=True, n_resamples=300, level=0.9, method="bca", seed=2)
    opts = BootstrapOptions(n_resamples=300, level=0.9, method="bca", seed=2)
    assert interval(stats.cohen_kappa(a, b, weights="linear", ci=True, options=opts)) == [
        0.6291718170580964, 0.4350761271066637, 0.7743360598012078, 0.10181698718296477,
    ]  # fmt: skip
    # fleiss_kappa / gwet_ac1(table, ci=True, n_resamples=200, seed=1)
    opts = BootstrapOptions(n_resamples=200, seed=1)
    assert interval(stats.fleiss_kappa(table, ci=True, options=opts)) == [
        0.5791245791245792, 0.44620420232607866, 0.7097132140671344, 0.06845028725987537,
    ]  # fmt: skip
    assert interval(stats.gwet_ac1(table, ci=True, options=opts)) == [
        0.5854063018242126, 0.4674572268623502, 0.7202457854698169, 0.06773977686472366,
    ]  # fmt: skip
    # pabak(a, b, ci=True, n_resamples=200, seed=1, level=0.8)
    res = stats.pabak(a, b, ci=True, options=dataclasses.replace(opts, level=0.8))
    assert interval(res) == [0.675, 0.575, 0.7749999999999999, 0.08285641376204703]
    # krippendorff_alpha(ratings.T, level="ordinal", ci=True, n_resamples=200, ci_level=0.9,
    # seed=4): the measurement scale is now level_of_measurement, the confidence level is level
    opts = BootstrapOptions(n_resamples=200, level=0.9, seed=4)
    res = stats.krippendorff_alpha(ratings.T, level_of_measurement="ordinal", ci=True, options=opts)
    assert interval(res) == [
        0.40900835642899136, 0.24816291364468823, 0.5577599371989022, 0.09980334863668136,
    ]  # fmt: skip
    assert (res.level, res.n_resamples) == (0.9, 200)
    # mean_pairwise_agreement(ratings, ci=True, n_resamples=200, seed=6, method="basic")
    opts = BootstrapOptions(n_resamples=200, seed=6, method="basic")
    assert interval(stats.mean_pairwise_agreement(ratings, ci=True, options=opts)) == [
        0.7222222222222223, 0.6444444444444447, 0.800277777777778, 0.04193058053460779,
    ]  # fmt: skip


def test_corpus_bleu_matches_the_keyword_path():
    hyps = ["the cat sat on the mat", "a dog ran", "hello world there", "x y z"]
    refs = ["the cat is on the mat", "the dog ran away", "hello there world", "x y"]
    # corpus_bleu(hyps, refs, n_resamples=100, level=0.9, seed=3)
    opts = BootstrapOptions(n_resamples=100, level=0.9, seed=3)
    res = text.corpus_bleu(hyps, refs, ci=True, options=opts)
    assert res.interval() == (0.0, 30.503839273089383)
    assert (res.n_resamples, res.level, res.seed) == (100, 0.9, 3)
    assert text.corpus_bleu(hyps, refs).n_resamples == 0
