"""Hostile arguments to the stats and text APIs: refused by name, or answered with right numbers.

Issue 18 (item 6). A seeded fuzz replaces one argument of each public call at a time with a
hostile value (NaN, inf, 1e308, 10**400, complex, objects, ragged lists, wrong dtypes, huge
counts) and requires one of two outcomes: a :class:`~tumorboard.errors.TumorboardError`, or a
result that passes its mathematical check (finite where it must be, F1/IoU/ROUGE in [0, 1], BLEU
in [0, 100], an interval that is not inverted). Every call runs under a 10 s alarm (no hang).

Oracles for the numbers that used to be wrong: exact power-of-two equivariance (a bootstrap of
``x * 2^k`` is, bit for bit, the bootstrap of ``x`` times ``2^k``), exact rational arithmetic
(``fractions.Fraction``) for a mean of values near 1e308, hand-worked IoU of boxes with
coordinates near 1e308 and 1e-200, and a subprocess that must stop on SIGINT mid-bootstrap.
"""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import subprocess
import sys
import time
from fractions import Fraction

import numpy as np
import pytest
from tumorboard import stats, text
from tumorboard.errors import (
    InvalidArgumentError,
    NumericOverflowError,
    TumorboardError,
)

Opts = stats.BootstrapOptions
# the test process's own import path: the installed package under `make test`, a source
# checkout with its built extension in development
SUBPROCESS_PYTHONPATH = os.pathsep.join(p for p in sys.path if p)


class _Hang(BaseException):
    """Raised by the alarm: the call ran past its time limit."""


def _alarm(signum, frame):
    raise _Hang


HOSTILE = [
    None, np.nan, np.inf, -np.inf, 1e308, -1e308, 5e-324, 0, -1, 2**64, 10**400, -(10**400),
    1j, "x", "", b"x", object(), [], [[]], [1, [2]], np.array([1 + 1j, 2j]),
    np.array([object(), 1], dtype=object), np.array(["a", "b"]), np.zeros((2, 2, 2)),
    np.array([np.datetime64("2020-01-01")] * 2), True, np.array([1e308, 1e308, -1e308]),
    np.array([-5, 1, 2]), np.full(3, np.nan), {}, {"a": [1, 2]},
    np.array([1e-320, 2e-320, 3e-320]), 2**31, 2**63, -(2**63), 0.5, 1.5,
]  # fmt: skip

#: Keywords tried on every call (a call that does not take one raises TypeError from Python
#: itself, which the fuzz skips).
EXTRA_KEYWORDS = (
    "statistic", "scheme", "level", "method", "seed", "threads", "empty", "weights",
    "tokenizer", "stemmer", "types", "max_order", "smooth", "smooth_value", "ci",
    "n_categories", "groups", "clusters", "strata", "keys", "pairwise", "resampler",
    "return_distribution", "params", "paired_split", "lowercase", "effective_order",
)  # fmt: skip


def _calls():
    x = np.array([0.1, 0.5, 0.9, 0.4])
    g = np.array([0, 1, 0, 1])
    o = Opts(n_resamples=50)
    return [
        ("bootstrap", stats.bootstrap, (x,), {"groups": g, "options": o}),
        ("bootstrap_f1", stats.bootstrap, (np.array([[1, 2, 3], [4, 5, 6]]),),
         {"statistic": "f1", "options": o}),
        ("bootstrap_ratio", stats.bootstrap, (np.array([[1, 2], [4, 5]]),),
         {"statistic": "ratio", "options": o}),
        ("paired_bootstrap", stats.paired_bootstrap, (x, x[::-1]), {"options": o}),
        ("bootstrap_sufficient", stats.bootstrap_sufficient, (np.array([[1.0, 2], [3, 4]]),),
         {"statistic": "ratio", "options": o}),
        ("poisson_partials", stats.poisson_partials, (x,),
         {"keys": np.arange(4), "options": o}),
        ("bootstrap_from_indices", stats.bootstrap_from_indices,
         (x, np.zeros((3, 4), int)), {}),
        ("cohen_kappa", stats.cohen_kappa, ([1, 2, 1, 2], [1, 2, 2, 2]), {}),
        ("fleiss_kappa", stats.fleiss_kappa, ([[2, 0], [1, 1]],), {}),
        ("pabak", stats.pabak, ([1, 2, 1], [1, 1, 1]), {}),
        ("gwet_ac1", stats.gwet_ac1, ([[2, 0], [1, 1]],), {}),
        ("krippendorff_alpha", stats.krippendorff_alpha, ([[1, 2, 1], [1, 2, 2]],), {}),
        ("mean_pairwise_agreement", stats.mean_pairwise_agreement, ([[1, 2], [1, 1]],), {}),
        ("rating_table", stats.rating_table, ([[1, 2], [1, 1]],), {}),
        ("BootstrapOptions", Opts, (), {"n_resamples": 10}),
        ("rouge", text.rouge, (["a b"], ["a c"]), {}),
        ("rouge_matrix", text.rouge_matrix, (["a b"], ["a c"]), {}),
        ("bleu", text.bleu, (["a b c d"], ["a b c e"]), {}),
        ("corpus_bleu", text.corpus_bleu, (["a b c d"], ["a b c e"]), {}),
        ("token_f1", text.token_f1, (["a b"], ["a c"]), {}),
        ("set_f1", text.set_f1, (["a b"], ["a c"]), {}),
        ("tokenize", text.tokenize, (["a b"],), {}),
        ("levenshtein", text.levenshtein, ("ab", "ac"), {}),
        ("sequence_levenshtein", text.sequence_levenshtein, (["a"], ["b"]), {}),
        ("one_minus_ned", text.one_minus_ned, (["ab"], ["ac"]), {}),
        ("box_iou", text.box_iou, ([0, 0, 1, 1], [0, 0, 2, 2]), {}),
        ("mask_iou", text.mask_iou, (np.ones((2, 2), bool), np.eye(2, dtype=bool)), {}),
        ("set_iou", text.set_iou, ({1, 2}, {2, 3}), {}),
        ("iou", text.iou, ({1, 2}, {2, 3}), {}),
    ]  # fmt: skip


def _numbers(value):
    """Yield every float array held by a result (fields of dataclasses, dicts, sequences)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _numbers(getattr(value, f.name))
    elif isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _numbers(v)
    elif isinstance(value, (float, np.floating)) or (
        isinstance(value, np.ndarray) and value.dtype.kind == "f"
    ):
        yield np.asarray(value, dtype=np.float64)


def _within(arr, low, high):
    arr = np.asarray(arr, dtype=np.float64)
    ok = np.isnan(arr) | ((arr >= low) & (arr <= high))
    return bool(ok.all())


def check_result(name, result):
    """Assert the mathematical checks every answer of the API must pass."""
    for arr in _numbers(result):
        assert not np.isinf(arr).any(), f"{name}: infinite number returned"
    if isinstance(result, (stats.BootstrapResult, stats.PairedBootstrapResult)):
        lo, hi = np.asarray(result.ci_low), np.asarray(result.ci_high)
        both = ~np.isnan(lo) & ~np.isnan(hi)
        assert (lo[both] <= hi[both]).all(), f"{name}: inverted interval"
        assert _within(result.se, 0, np.inf), f"{name}: negative standard error"
        if result.statistic == "f1":
            # the basic interval reflects the quantiles about the estimate and may leave [0, 1]
            bounds = () if result.method == "basic" else ("ci_low", "ci_high")
            for f in ("estimate", "boot_mean", *bounds):
                assert _within(getattr(result, f), 0, 1), f"{name}: F1 {f} outside [0, 1]"
        if isinstance(result, stats.PairedBootstrapResult):
            assert _within(result.p_value, 0, 1)
    if isinstance(result, stats.AgreementResult):
        for f in ("estimate", "ci_low", "ci_high"):
            assert _within(getattr(result, f), -np.inf, 1), f"{name}: agreement above 1"
    if name in ("token_f1", "set_f1", "one_minus_ned", "box_iou", "mask_iou", "set_iou", "iou"):
        for arr in _numbers(result):
            assert _within(arr, 0, 1), f"{name}: similarity outside [0, 1]"
    if isinstance(result, (text.RougeResult, text.RougeMatrix)):
        for arr in _numbers(result):
            assert _within(arr, 0, 1), f"{name}: ROUGE outside [0, 1]"
    if isinstance(result, (text.BleuResult, text.CorpusBleuResult)):
        assert _within(result.score, 0, 100), f"{name}: BLEU outside [0, 100]"
    if name in ("levenshtein", "sequence_levenshtein"):
        assert (np.asarray(result) >= 0).all()


def _call_limited(f, args, kwargs, seconds=10.0):
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return f(*args, **kwargs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("seed", [0, 1])
def test_hostile_arguments_are_refused_by_name_or_answered_right(seed):
    rng = random.Random(seed)
    failures, n_refused, n_answered = [], 0, 0
    for name, f, args, kwargs in _calls():
        check_result(name, _call_limited(f, args, kwargs))  # the unmutated call works
        slots = [("arg", i) for i in range(len(args))] + [("kw", k) for k in EXTRA_KEYWORDS]
        slots += [("kw", k) for k in kwargs if k not in EXTRA_KEYWORDS]
        for kind, slot in slots:
            for value in rng.sample(HOSTILE, 18):
                a, kw = list(args), dict(kwargs)
                if kind == "arg":
                    a[slot] = value
                else:
                    kw[slot] = value
                where = f"{name}({kind} {slot}={value!r:.40})"
                try:
                    result = _call_limited(f, a, kw)
                except TumorboardError:
                    n_refused += 1
                    continue
                except TypeError as exc:  # Python's own: the call does not take this keyword
                    if "unexpected keyword argument" in str(exc) and kind == "kw":
                        continue
                    failures.append(f"{where}: TypeError: {exc}")
                    continue
                except _Hang:
                    failures.append(f"{where}: no answer within 10 s")
                    continue
                except BaseException as exc:  # noqa: BLE001 - every other escape is the defect
                    failures.append(f"{where}: {type(exc).__name__}: {str(exc)[:120]}")
                    continue
                try:
                    check_result(name, result)
                    n_answered += 1
                except AssertionError as exc:
                    failures.append(f"{where}: {exc}")
    assert not failures, "\n".join(failures[:30])
    assert n_refused > 1000 and n_answered > 100  # both outcomes were exercised


# ---------------------------------------------------------------------- numbers near the edges


def _fields(res, k):
    out = {}
    for f in ("estimate", "boot_mean", "se", "ci_low", "ci_high", "distribution"):
        out[f] = np.ldexp(np.asarray(getattr(res, f), dtype=np.float64), k)
    return out


@pytest.mark.parametrize("statistic", ["mean", "sum", "ratio", "f1"])
def test_bootstrap_is_exactly_scale_equivariant_across_the_float_range(statistic):
    """bootstrap(x * 2^k) == bootstrap(x) * 2^k (mean, sum), == bootstrap(x) (ratio, F1).

    Multiplying by a power of two is exact in IEEE 754 arithmetic, so an engine that computes
    right for values near 1e308 or 1e-300 gives these equalities bit for bit; before scaling,
    k = 1000 gave inf/NaN intervals flagged as not degenerate and k = -1000 zero spreads.
    """
    rng = np.random.default_rng(7)
    n = 60
    g = rng.integers(0, 3, n)
    v = {
        "mean": rng.normal(size=n),
        "sum": rng.normal(size=n),
        "ratio": np.c_[rng.normal(size=n), rng.uniform(1, 2, n)],
        "f1": rng.integers(0, 6, (n, 3)).astype(float),
    }[statistic]
    for method in ("percentile", "basic", "bca"):
        opts = Opts(n_resamples=200, method=method, seed=3)
        ref = stats.bootstrap(v, groups=g, statistic=statistic, options=opts,
                              return_distribution=True)  # fmt: skip
        for k in (1000, 900, -900, -1000):
            res = stats.bootstrap(np.ldexp(v, k), groups=g, statistic=statistic, options=opts,
                                  return_distribution=True)  # fmt: skip
            back = 0 if statistic in ("ratio", "f1") else k
            want = _fields(ref, back)
            for f, arr in want.items():
                np.testing.assert_array_equal(getattr(res, f), arr, err_msg=f"{method} {k} {f}")
            np.testing.assert_array_equal(res.degenerate, ref.degenerate)


def test_groups_far_apart_in_magnitude_are_each_right():
    """One group near 1e300 and one near 1e-300 in one call: each equals its own run."""
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=30) * 1e300, rng.normal(size=30) * 1e-300
    opts = Opts(n_resamples=300, seed=5)
    both = stats.bootstrap(np.r_[a, b], groups=np.r_[np.zeros(30), np.ones(30)].astype(int),
                           options=opts)  # fmt: skip
    for i, part in enumerate((a, b)):
        alone = stats.bootstrap(part, groups=np.full(30, i), options=opts)
        for f in ("estimate", "se", "ci_low", "ci_high"):
            assert getattr(both, f)[i] == getattr(alone, f)[0]
        assert not both.degenerate[i] and both.se[i] > 0


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_poisson_scheme_refuses_magnitudes_its_fixed_point_cannot_hold(method):
    """Values near 1e-300 rounded to 0 in the 2^-64 fixed point (estimate 0, "degenerate").

    The fixed point is what makes shard partials merge bit for bit, so its resolution stays;
    a column it cannot hold is refused by name, and small values it can hold stay right.
    """
    x = np.random.default_rng(0).normal(size=50)
    opts = Opts(n_resamples=300, method=method, seed=1)
    ref = stats.bootstrap(x, scheme="poisson", keys=np.arange(50), options=opts)
    for k in (1e-30, 1e-300):
        with pytest.raises(InvalidArgumentError, match="values: column 0 .* power of ten"):
            stats.bootstrap(x * k, scheme="poisson", keys=np.arange(50), options=opts)
        with pytest.raises(InvalidArgumentError, match="column 0"):
            stats.poisson_partials(x * k, keys=np.arange(50), options=opts)
    small = stats.bootstrap(x * 1e-6, scheme="poisson", keys=np.arange(50), options=opts)
    assert not small.degenerate
    for f in ("estimate", "se", "ci_low", "ci_high"):
        np.testing.assert_allclose(getattr(small, f) / 1e-6, getattr(ref, f), rtol=1e-9)
    # the multinomial scheme scales exactly instead: 1e-300 is as good as 1
    tiny = stats.bootstrap(x * 2.0**-990, options=opts)
    assert tiny.se == stats.bootstrap(x, options=opts).se * 2.0**-990


def test_mean_near_the_largest_float_equals_exact_arithmetic():
    x = np.array([1e308, 1e308, -1e308, 1.0])
    res = stats.bootstrap(x, options=Opts(n_resamples=500, seed=0))
    exact = float(sum(Fraction(v) for v in x) / 4)  # 2.5e307 (+ 0.25)
    assert res.estimate == exact
    assert np.isfinite([res.boot_mean, res.se, res.ci_low, res.ci_high]).all()
    assert -1e308 <= res.ci_low <= res.ci_high <= 1e308 and not res.degenerate
    ratio = stats.bootstrap(np.array([[1e308, 1e308], [1e308, 1e308]]), statistic="ratio",
                            options=Opts(n_resamples=50))  # fmt: skip
    assert ratio.estimate == 1.0 and ratio.ci_low == ratio.ci_high == 1.0


def test_a_sum_beyond_the_float_range_is_an_error_naming_the_group():
    x = np.array([1e308, 1e308, 1.0, 2.0])
    with pytest.raises(NumericOverflowError, match="statistic 'sum' of group g='big'"):
        stats.bootstrap(x, groups={"g": np.array(["big", "big", "small", "small"])},
                        statistic="sum", options=Opts(n_resamples=50))  # fmt: skip
    # every resample sum of these fits (at most 2 * 1e306): right, not refused
    ok = stats.bootstrap(np.array([1e306, 1e300]), statistic="sum", options=Opts(n_resamples=50))
    assert ok.estimate == 1e306 + 1e300 and ok.ci_high <= 2e306


def test_f1_takes_non_negative_counts_and_stays_in_the_unit_interval():
    with pytest.raises(InvalidArgumentError, match=r"record 1 has \[-1.0, 1.0, 1.0\]"):
        stats.bootstrap(np.array([[1, 0, 0], [-1, 1, 1]]), statistic="f1")
    with pytest.raises(InvalidArgumentError, match="rows: statistic 'f1'"):
        stats.bootstrap_sufficient(np.array([[1, 0, -2.0]]), statistic="f1")
    with pytest.raises(InvalidArgumentError, match="b: statistic 'f1'"):
        stats.paired_bootstrap(np.ones((3, 3)), -np.ones((3, 3)), statistic="f1")
    counts = np.array([[3, 1, 0], [0, 2, 1], [2.5, 0, 0.5]])
    res = stats.bootstrap(counts, statistic="f1", options=Opts(n_resamples=400, seed=2))
    tp, fp, fn = counts.sum(axis=0)
    assert res.estimate == 2 * tp / (2 * tp + fp + fn)
    assert 0 <= res.ci_low <= res.ci_high <= 1
    worse = counts[:, [2, 0, 1]]  # a system whose F1 is lower: the difference is negative
    diff = stats.paired_bootstrap(worse, counts, statistic="f1", options=Opts(n_resamples=200))
    tp_w, fp_w, fn_w = worse.sum(axis=0)
    assert diff.difference == 2 * tp_w / (2 * tp_w + fp_w + fn_w) - res.estimate < 0
    assert -1 <= diff.ci_low <= diff.ci_high <= 1


def test_agreement_counts_beyond_exact_floats_are_refused():
    """Counts near 1e300 overflowed n(n - 1) into a NaN Gwet AC1 returned as a result."""
    for table in ([[1e300, 0], [0, 1e300]], [[1e17, 3], [5, 1e17]]):
        for f in (stats.gwet_ac1, stats.fleiss_kappa):
            with pytest.raises(InvalidArgumentError, match="table: expected rating counts"):
                f(np.array(table))
    assert stats.gwet_ac1(np.array([[2**52, 0], [0, 2**52]])).estimate == 1.0


def test_labels_polars_cannot_sort_are_refused_not_a_panic():
    """Complex or mixed-object labels made polars panic (pyo3 PanicException, a BaseException)."""
    x = np.ones(4)
    for labels in (np.array([1j, 2j, 1j, 2j]), np.array([object(), 1, "a", 2.0], dtype=object)):
        for arg in ("groups", "clusters", "strata"):
            with pytest.raises(InvalidArgumentError, match=f"{arg}.*labels"):
                stats.bootstrap(x, **{arg: labels}, options=Opts(n_resamples=10))


def test_n_resamples_beyond_memory_fail_at_once_with_the_largest_that_fits():
    x = np.arange(2000.0)
    t0 = time.monotonic()
    with pytest.raises(InvalidArgumentError, match=r"n_resamples: .* GiB.*use n_resamples <= \d+"):
        stats.bootstrap(x, groups=np.arange(2000) % 500, options=Opts(n_resamples=2**32 - 1))
    with pytest.raises(InvalidArgumentError, match="n_resamples"):
        stats.poisson_partials(x, keys=np.arange(2000), options=Opts(n_resamples=2**32 - 1))
    assert time.monotonic() - t0 < 30  # refused before any work (generous bound)


def test_box_iou_near_the_float_limits_is_exact():
    big, half = 2.0**1023, 2.0**1022
    assert text.box_iou([0, 0, big, big], [0, 0, big, half]) == 0.5  # was 1.0 (inf / inf)
    assert text.box_iou([-big, -big, big, big], [-big, -big, 0, big]) == 0.5
    tiny = 2.0**-700
    assert text.box_iou([0, 0, tiny, tiny], [0, 0, tiny, tiny / 2]) == 0.5  # area 2^-1400 > 0
    assert text.box_iou([0, 0, 2, 2], [1, 1, 3, 3]) == 1 / 7  # ordinary boxes: unchanged
    m = text.box_iou([[0, 0, 2, 2], [0, 0, big, big]], [[1, 1, 3, 3], [0, 0, big, half]],
                     pairwise=True)  # fmt: skip
    np.testing.assert_array_equal(m, [[1 / 7, 0.0], [0.0, 0.5]])
    with pytest.raises(InvalidArgumentError, match="empty: expected a number in"):
        text.box_iou([0, 0, 0, 0], [0, 0, 0, 0], empty=5.0)
    assert np.isnan(text.box_iou([0, 0, 0, 0], [0, 0, 0, 0], empty=float("nan")))


# ----------------------------------------------------------------------------- Ctrl-C stops it

_LONG_BOOTSTRAP = """
import numpy as np
from tumorboard import stats
x = np.random.default_rng(0).normal(size=200_000)
print("ready", flush=True)
stats.bootstrap(x, options=stats.BootstrapOptions(n_resamples=2_000_000, threads=2),
                resampler="index")
print("finished", flush=True)
"""


def test_ctrl_c_stops_a_long_bootstrap():
    """SIGINT mid-bootstrap (4 * 10^11 draws, minutes of work) ends it with KeyboardInterrupt.

    The C++ loops poll the interpreter's signal handlers every 50 ms through the binding
    layer's cancellation token; before, SIGINT waited for the whole bootstrap.
    """
    env = dict(os.environ, PYTHONPATH=SUBPROCESS_PYTHONPATH)
    proc = subprocess.Popen([sys.executable, "-c", _LONG_BOOTSTRAP], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # inside the engine
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)  # generous: it stops within a second
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "finished" not in out
    assert "KeyboardInterrupt" in err and "bootstrap_multinomial" in err
    assert proc.returncode in (-signal.SIGINT, 1, 130)
