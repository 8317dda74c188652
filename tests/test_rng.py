"""Tests of the bootstrap engine's random-number building blocks and of the label hashing.

The building blocks are csrc/common/rng.hpp and csrc/stats/binomial.hpp; the stable label
hashing is python/tumorboard/_keys.py.

* Philox4x32-10 against the Random123 known-answer vectors and a pure-Python reference;
* the binomial sampler (sequential inversion for n*p < 10, BTRS otherwise, p > 1/2 by symmetry)
  against scipy.stats.binom with chi-square goodness-of-fit tests and moment checks;
* the stable 64-bit hashes of labels: hard-coded values (they key Poisson weights and group
  streams, so they must never change), an independent pure-Python FNV-1a + SplitMix64 reference,
  and invariance to chunking, slicing and the label dtype (str / categorical / enum / numpy).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats as sps
from tumorboard import _core
from tumorboard._keys import combine_hashes, hash_labels

M64 = (1 << 64) - 1
M32 = (1 << 32) - 1

# ------------------------------------------------------------------------------------------------
# Philox4x32-10


def _philox_reference(counter, key, rounds=10):
    """Straight transcription of Random123's philox4x32 round function."""
    c = [int(x) & M32 for x in counter]
    k = [int(x) & M32 for x in key]
    for _ in range(rounds):
        p0 = 0xD2511F53 * c[0]
        p1 = 0xCD9E8D57 * c[2]
        hi0, lo0 = p0 >> 32, p0 & M32
        hi1, lo1 = p1 >> 32, p1 & M32
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0]
        k = [(k[0] + 0x9E3779B9) & M32, (k[1] + 0xBB67AE85) & M32]
    return c


# Known-answer vectors of Random123 (kat_vectors, philox4x32 with 10 rounds).
PHILOX_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    (
        (0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF),
        (0xFFFFFFFF, 0xFFFFFFFF),
        (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD),
    ),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize("counter,key,expected", PHILOX_KAT)
def test_philox_known_answers(counter, key, expected):
    out = _core.testing.philox4x32(list(counter), list(key))
    assert [int(x) for x in out] == list(expected)
    assert _philox_reference(counter, key) == list(expected)  # the reference itself is right


def test_philox_matches_reference_on_random_inputs():
    rng = np.random.default_rng(20240601)
    for _ in range(200):
        counter = [int(x) for x in rng.integers(0, 2**32, 4, dtype=np.uint64)]
        key = [int(x) for x in rng.integers(0, 2**32, 2, dtype=np.uint64)]
        assert [int(x) for x in _core.testing.philox4x32(counter, key)] == _philox_reference(
            counter, key
        )


def test_philox_output_bits_are_balanced():
    # Consecutive counters (the way the Poisson scheme uses them) give uniform 32-bit words.
    words = np.array(
        [_core.testing.philox4x32([i, 7, 11, 13], [42, 0]) for i in range(4096)], dtype=np.uint64
    ).ravel()
    bits = ((words[:, None] >> np.arange(32, dtype=np.uint64)) & np.uint64(1)).astype(float)
    # 16384 words: each bit's mean has sd 1/(2*128) ~ 0.0039; 6 sd bound.
    assert np.all(np.abs(bits.mean(axis=0) - 0.5) < 6 * 0.5 / np.sqrt(words.size))


# ------------------------------------------------------------------------------------------------
# Binomial sampler


def _grouped_chisquare(draws: np.ndarray, n: int, p: float, min_expected: float = 5.0):
    """Chi-square goodness of fit of integer draws to Binomial(n, p), pooling sparse bins."""
    total = draws.size
    obs = np.bincount(draws, minlength=n + 1).astype(float)
    assert obs.size == n + 1, "a draw fell outside [0, n]"
    exp = total * sps.binom.pmf(np.arange(n + 1), n, p)
    obs_g, exp_g = [], []
    acc_o = acc_e = 0.0
    for o, e in zip(obs, exp, strict=True):
        acc_o += o
        acc_e += e
        if acc_e >= min_expected:
            obs_g.append(acc_o)
            exp_g.append(acc_e)
            acc_o = acc_e = 0.0
    obs_g[-1] += acc_o  # the sparse right tail joins the last bin
    exp_g[-1] += acc_e
    obs_g, exp_g = np.array(obs_g), np.array(exp_g)
    exp_g *= obs_g.sum() / exp_g.sum()
    assert len(obs_g) >= 2
    return sps.chisquare(obs_g, exp_g).pvalue


BINOMIAL_CASES = [
    # inversion branch: n * p < 10
    (1, 0.5),
    (5, 0.3),
    (40, 0.2),  # n p = 8
    (21, 0.47),  # n p = 9.87, just below the switch
    (10**9, 3e-9),  # huge n, tiny p: inversion from q^n
    (100, 0.95),  # p > 1/2 -> n - Binomial(n, 0.05): inversion after the mirror
    # BTRS branch: n * p >= 10
    (25, 0.4),  # n p = 10, right at the switch
    (60, 0.5),
    (1000, 0.3),
    (100_000, 0.5),
    (1000, 0.97),  # mirror to p = 0.03, n p = 30: BTRS
    (5000, 0.7),
]


@pytest.mark.parametrize("n,p", BINOMIAL_CASES)
def test_binomial_sampler_matches_scipy(n, p):
    count = 100_000
    draws = np.asarray(_core.testing.binomial_draws(n, p, count, 12345 + n))
    assert draws.shape == (count,)
    assert draws.min() >= 0 and draws.max() <= n
    mean, var = n * p, n * p * (1 - p)
    # Moments: the sample mean has sd sqrt(var / count); the sample variance about
    # var * sqrt(2 / count) (plus a kurtosis term that is small here). 5 sd bounds.
    assert abs(draws.mean() - mean) < 5 * np.sqrt(var / count)
    assert abs(draws.var() - var) < 5 * var * np.sqrt(2.0 / count) + 5 * np.sqrt(var / count)
    if n <= 200_000:
        pval = _grouped_chisquare(draws, n, p)
        assert pval > 1e-3, f"Binomial({n}, {p}) draws fail chi-square: p = {pval:.2e}"


def test_binomial_sampler_large_n_is_unbiased():
    # n = 10^9 at p = 1/2 (BTRS with large lgamma arguments): mean and variance only.
    n, p, count = 10**9, 0.5, 50_000
    draws = np.asarray(_core.testing.binomial_draws(n, p, count, 7)).astype(float)
    sd = np.sqrt(n * p * (1 - p))
    assert abs(draws.mean() - n * p) < 5 * sd / np.sqrt(count)
    assert abs(draws.std() / sd - 1.0) < 5 * np.sqrt(0.5 / count)
    # standardized draws look normal (KS against N(0, 1); n p q = 2.5e8, so the lattice is fine)
    z = (draws - n * p) / sd
    assert sps.kstest(z, "norm").pvalue > 1e-3


def test_binomial_sampler_edge_cases():
    assert np.all(np.asarray(_core.testing.binomial_draws(50, 0.0, 1000, 1)) == 0)
    assert np.all(np.asarray(_core.testing.binomial_draws(50, 1.0, 1000, 1)) == 50)
    assert np.all(np.asarray(_core.testing.binomial_draws(0, 0.3, 1000, 1)) == 0)
    assert np.all(np.asarray(_core.testing.binomial_draws(0, 1.0, 1000, 1)) == 0)
    one = np.asarray(_core.testing.binomial_draws(1, 0.25, 40_000, 3))
    assert set(np.unique(one)) <= {0, 1}
    assert abs(one.mean() - 0.25) < 5 * np.sqrt(0.25 * 0.75 / one.size)
    assert np.asarray(_core.testing.binomial_draws(10, 0.3, 0, 1)).shape == (0,)


def test_binomial_sampler_is_reproducible_and_seeded():
    a = np.asarray(_core.testing.binomial_draws(1000, 0.3, 5000, 99))
    b = np.asarray(_core.testing.binomial_draws(1000, 0.3, 5000, 99))
    c = np.asarray(_core.testing.binomial_draws(1000, 0.3, 5000, 100))
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    # a prefix of a longer run is the shorter run (one sequential stream)
    assert np.array_equal(np.asarray(_core.testing.binomial_draws(1000, 0.3, 100, 99)), a[:100])


def test_binomial_sampler_consecutive_draws_uncorrelated():
    d = np.asarray(_core.testing.binomial_draws(200, 0.5, 100_000, 5)).astype(float)
    r = np.corrcoef(d[:-1], d[1:])[0, 1]
    assert abs(r) < 5 / np.sqrt(d.size)


# ------------------------------------------------------------------------------------------------
# Stable hashing of labels


def _mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _stable_hash(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for byte in data:
        h ^= byte
        h = (h * 0x100000001B3) & M64
    return _mix64(h ^ len(data))


# Computed once with the engine (and confirmed by the pure-Python reference above). These values
# key Poisson-bootstrap weights and group streams: changing them changes published intervals.
EXPECTED_STRING_HASHES = {
    "a": 9266097309480679803,
    "b": 11014855429321381517,
    "c": 3902587327401293331,
    "": 17665956581633026203,
    "model-A": 12729027918906420028,
    "ünï": 6086709809101975664,
}


def test_string_hashes_are_fixed():
    labels = list(EXPECTED_STRING_HASHES)
    got = hash_labels(pl.Series(labels))
    assert got.dtype == np.uint64
    assert [int(x) for x in got] == list(EXPECTED_STRING_HASHES.values())
    assert [_stable_hash(s.encode("utf-8")) for s in labels] == list(
        EXPECTED_STRING_HASHES.values()
    )


def test_string_hashes_match_reference_on_random_strings():
    rng = np.random.default_rng(3)
    alphabet = list("abcXYZ019 -_/é漢😀")
    labels = ["".join(rng.choice(alphabet, size=int(rng.integers(0, 12)))) for _ in range(300)]
    got = [int(x) for x in hash_labels(pl.Series(labels))]
    assert got == [_stable_hash(s.encode("utf-8")) for s in labels]


def test_numeric_hashes_are_fixed():
    assert int(hash_labels(pl.Series([5]))[0]) == 13168350753275463132
    assert int(hash_labels(pl.Series([-1]))[0]) == 13029008266876403067
    assert int(hash_labels(pl.Series([1.5]))[0]) == 9832619553069098951
    # integers hash by value (mix64 of the two's-complement word), floats by their bits
    for v in (0, 1, -7, 2**62, -(2**63)):
        assert int(hash_labels(pl.Series([v], dtype=pl.Int64))[0]) == _mix64(v & M64)
    bits = int(np.float64(1.5).view(np.uint64))
    assert int(hash_labels(pl.Series([1.5]))[0]) == _mix64(bits ^ 0x9E3779B97F4A7C15)


def test_mix64_matches_reference():
    x = np.random.default_rng(0).integers(0, 2**63, 500, dtype=np.uint64) * np.uint64(2)
    x[:3] = [0, 1, np.uint64(M64)]
    assert [int(v) for v in _core.stats.mix64(x)] == [_mix64(int(v)) for v in x]


def test_string_hash_independent_of_array_chunks_slices_and_dtype():
    labels = ["alpha", "beta", "gamma", "alpha", "", "δέλτα", "beta"]
    ref = hash_labels(pl.Series(labels))
    expected = np.array([_stable_hash(s.encode()) for s in labels], dtype=np.uint64)
    assert np.array_equal(ref, expected)
    # the same string hashes the same wherever it appears
    assert ref[0] == ref[3] and ref[1] == ref[6]
    # different arrays / chunkings
    chunked = pl.concat([pl.Series(labels[:2]), pl.Series(labels[2:5]), pl.Series(labels[5:])],
                        rechunk=False)  # fmt: skip
    assert chunked.n_chunks() == 3
    assert np.array_equal(hash_labels(chunked), ref)
    # a slice (non-zero Arrow offset) hashes its own elements
    assert np.array_equal(hash_labels(pl.Series(labels).slice(2, 4)), ref[2:6])
    assert np.array_equal(hash_labels(chunked.slice(1, 5)), ref[1:6])
    # other containers and dtypes of the same strings
    assert np.array_equal(hash_labels(pl.Series(labels).cast(pl.Categorical)), ref)
    assert np.array_equal(
        hash_labels(pl.Series(labels, dtype=pl.Enum(sorted(set(labels), reverse=True)))), ref
    )
    assert np.array_equal(hash_labels(np.array(labels)), ref)
    assert np.array_equal(hash_labels(np.array(labels, dtype=object)), ref)
    # the strings in another array, in another order
    perm = [6, 0, 5, 2]
    assert np.array_equal(hash_labels(pl.Series([labels[i] for i in perm])), ref[perm])


def test_numeric_hash_independent_of_dtype():
    v = [3, -2, 0, 100]
    ref = hash_labels(pl.Series(v, dtype=pl.Int64))
    for dt in (pl.Int8, pl.Int16, pl.Int32, pl.UInt8, pl.UInt16, pl.UInt32):
        if dt in (pl.UInt8, pl.UInt16, pl.UInt32):
            vv = [x for x in v if x >= 0]
            assert np.array_equal(hash_labels(pl.Series(vv, dtype=dt)),
                                  hash_labels(pl.Series(vv, dtype=pl.Int64)))  # fmt: skip
        else:
            assert np.array_equal(hash_labels(pl.Series(v, dtype=dt)), ref)
    assert np.array_equal(hash_labels(np.array(v, dtype=np.int32)), ref)
    # booleans are 0 / 1
    assert np.array_equal(hash_labels(pl.Series([True, False])), hash_labels(pl.Series([1, 0])))
    # floats: by value of the float64, -0.0 == 0.0; float32 values widen exactly
    f = hash_labels(pl.Series([1.5, -0.0, 0.0, 0.25]))
    assert f[1] == f[2]
    assert np.array_equal(hash_labels(pl.Series([1.5, -0.0, 0.0, 0.25], dtype=pl.Float32)), f)
    # floats and integers of the same value are different labels
    assert hash_labels(pl.Series([2.0]))[0] != hash_labels(pl.Series([2]))[0]


def test_hashes_distinguish_labels():
    labels = [f"item-{i}" for i in range(20_000)]
    h = hash_labels(pl.Series(labels))
    assert np.unique(h).size == h.size
    ints = hash_labels(pl.Series(np.arange(20_000)))
    assert np.unique(ints).size == ints.size


def test_combine_hashes_is_order_dependent_and_stable():
    a = hash_labels(pl.Series(["x", "y"]))
    b = hash_labels(pl.Series(["y", "x"]))
    ab = combine_hashes([a, b])
    ba = combine_hashes([b, a])
    assert not np.array_equal(ab, ba)
    # ("x", "y") and ("y", "x") are different composite keys
    assert ab[0] != ab[1]
    # reference: h = mix64((h * golden) ^ col) starting from 0
    g = 0x9E3779B97F4A7C15
    ref = []
    for x, y in zip(a, b, strict=True):
        h = _mix64(((0 * g) & M64) ^ int(x))
        h = _mix64(((h * g) & M64) ^ int(y))
        ref.append(h)
    assert [int(v) for v in ab] == ref


def test_unhashable_labels_are_rejected():
    with pytest.raises(ValueError, match="cannot be hashed"):
        hash_labels(pl.Series([[1, 2], [3]]))
