"""Tests of sacrebleu-exact BLEU and of the bootstrap engine's "bleu" statistic.

BLEU is python/tumorboard/_bleu.py over csrc/text/bleu*.cpp; the statistic is in
csrc/stats/statistic.cpp.

The oracle is sacrebleu itself (2.x, ``sacrebleu/metrics/bleu.py``). Scoring 2000 pairs with
``sentence_score`` for each of ~60 configurations would take minutes, so most comparisons use
sacrebleu's own two halves: ``BLEU._extract_corpus_statistics`` (its tokenizers and n-gram
counting; per-item statistics do not depend on whether a segment is scored alone or in a
corpus) and ``BLEU._compute_score_from_stats`` (``compute_bleu`` on one item's statistics is
exactly what ``sentence_score`` returns; on summed statistics exactly what ``corpus_score``
returns). The public ``sentence_score`` / ``corpus_score`` / ``sacrebleu.corpus_bleu`` are
called directly on subsets. Every float is compared for exact equality (``==``), not closeness.

Sections:
1. tokenizers on adversarial strings (13a, zh, char, none; lowercase on/off);
2. sentence and corpus BLEU on ~2000 generated pairs for every smoothing method, 13a/zh (and
   char/none), lowercase, effective_order, single and multiple references, max_order;
3. edge cases and hand-worked examples;
4. input types and validation;
5. the "bleu" bootstrap statistic: hand-computed sums, corpus CIs, groups, clusters;
6. the CPython >= 3.12 summation rule.
"""

from __future__ import annotations

import logging
import math
import random

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import sacrebleu
from sacrebleu.metrics import BLEU
from tumorboard import _core
from tumorboard.errors import InvalidArgumentError, InvalidTypeError
from tumorboard.stats import BootstrapOptions, bootstrap_sufficient
from tumorboard.text._bleu import (
    _PY_SUM,
    bleu,
    bleu_statistic_params,
    bleu_statistics,
    corpus_bleu,
)

logging.getLogger("sacrebleu").setLevel(logging.ERROR)

SMOOTHS = [
    ("exp", None),
    ("floor", None),
    ("floor", 0.25),
    ("add-k", None),
    ("add-k", 0.5),
    ("none", None),
]


# ----------------------------------------------------------------------------- data

_WORDS = (
    "the a of patient tumor biopsy shows HER2 KRAS G12C mutation Stage IV grade 3 positive "
    "negative margin lymph node T2N1M0 it's can't U.S. e.g. i.e. Dr. vs. etc. don't "
    "3.14 1,000 -1 2-3 10-15 0.5% 12:30 $5 50/50 1.2.3 ,5 .5 5. 5, a.b a,b "
    "( ) [ ] { } \" ' ` ~ ! ? ; : @ # % ^ & * + = < > | \\ / _ -- ... ,, .., "
    "&quot; &amp; &lt; &gt; &amp;lt; &QUOT; <skipped> <SKIPPED> "
    "é É ß İ Σ ς Ω naïve CAFÉ Straße 😀 "
    "中文 肿瘤 患者 。 ， ． ＨＥＲ２ （ ） 一二三 ㈠ ⑴ ☃ ✓ ‘ ’ “ ” — – … • ‐ "
).split()
_SPACES = [" "] * 30 + [
    "  ",
    "\t",
    "\n",
    "-\n",
    "\u3000",
    "\xa0",
    "\u2028",
    "\x1c",
    "\x85",
    "\u2009",
    "\u200b",
    " \n ",
]


def _sentence(rng: random.Random, lo: int = 0, hi: int = 18) -> str:
    k = rng.randint(lo, hi)
    out = []
    for j in range(k):
        if j:
            out.append(rng.choice(_SPACES))
        out.append(rng.choice(_WORDS))
    s = "".join(out)
    if rng.random() < 0.1:
        s = rng.choice(["", " ", "\n", "  \t"]) + s + rng.choice(["", " ", "\n", ".", " ."])
    return s


def _perturb(rng: random.Random, ref: str) -> str:
    toks = ref.split(" ")
    out = [t if rng.random() < 0.75 else rng.choice(_WORDS) for t in toks]
    if out and rng.random() < 0.3:
        del out[rng.randrange(len(out))]
    if rng.random() < 0.3:
        out.insert(rng.randint(0, len(out)), rng.choice(_WORDS))
    return " ".join(out)


@pytest.fixture(scope="module")
def corpus() -> dict:
    rng = random.Random(20240601)
    n = 2000
    refs = [_sentence(rng) for _ in range(n)]
    hyps = [_perturb(rng, r) for r in refs]
    refs2 = [_perturb(rng, r) if rng.random() < 0.8 else None for r in refs]
    refs3 = [_sentence(rng, 0, 8) for _ in refs]
    return {"hyps": hyps, "refs": refs, "refs2": refs2, "refs3": refs3}


def _sacre_stats(metric: BLEU, hyps: list, streams: list) -> list:
    """Return sacrebleu's per-item statistics [hyp_len, ref_len, correct..., total...]."""
    return metric._extract_corpus_statistics(hyps, streams)


def _to_ours(row: list, order: int) -> list:
    return list(row[2 : 2 + order]) + list(row[2 + order :]) + [row[0], row[1]]


# ----------------------------------------------------------------------------- 1. tokenizers

_ALPHABET = list("abcAB 0123456789.,-&;<>/\"'()!?:@[]{}~^_`|\\+*=#$%\n\t\r\x0b\x0c\x1c\x1f") + [
    "\x85",
    "\xa0",
    "\u3000",
    "\u2028",
    "\u2029",
    "\u2009",
    "\u200b",
    "\u202f",
    "\u205f",
    "\u1680",
    "中",
    "文",
    "。",
    "，",
    "é",
    "É",
    "İ",
    "ß",
    "Σ",
    "ς",
    "😀",
    "\u2001",
    "\u2a6d",
    "\u2a6e",
    "\u2f81",
    "\ufe10",
    "\uff0c",
    "\uffef",
    "\u4db5",
    "\u4db6",
    "𠀀",
    "&quot;",
    "&amp;",
    "&lt;",
    "&gt;",
    "<skipped>",
    "-\n",
    "&amp;lt;",
    "&QUOT;",
    "<SKIPPED>",
    "\ud800",
]


def _sacre_tokens(metric: BLEU, s: str) -> str:
    return " ".join(metric._preprocess_segment(s).split())


@pytest.mark.parametrize("tokenize", ["13a", "zh", "char", "none"])
def test_tokenizers_match_sacrebleu_on_adversarial_strings(tokenize: str) -> None:
    rng = random.Random(7)
    texts = ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 30))) for _ in range(2500)]
    texts += [
        "",
        " ",
        "\n",
        ".",
        ",",
        "-",
        "3.14",
        "1,000",
        "-1",
        "a.",
        "5.",
        ".5",
        "a.,b",
        "a..b",
        "5..5",
        "5-5",
        "x-5",
        "5--",
        "&amp;quot;",
        "&&amp;amp;;",
        "<skip<skipped>ped>",
        "a-\n\nb",
        "a-\n",
        "\u3000x\u3000",
        "x\x85y",
        "ﬀ",
        "İstanbul",
        "ΣΑΣ",
    ]
    for lowercase in (False, True):
        metric = BLEU(tokenize=tokenize, lowercase=lowercase)
        got = _core.text.bleu_tokenize(texts, tokenize, lowercase)
        want = [_sacre_tokens(metric, s) for s in texts]
        bad = [(t, g, w) for t, g, w in zip(texts, got, want, strict=True) if g != w]
        assert not bad, bad[:5]


def test_zh_cjk_ranges_follow_sacrebleus_string_comparison() -> None:
    # sacrebleu lists '\u20000'..'\u2a6d6', which Python reads as '\u2000' + '0' .. '\u2a6d' +
    # '6': U+2001..U+2A6D are "Chinese", astral ideographs are not. (Whitespace code points are
    # left out of the probe: they separate tokens either way.)
    from sacrebleu.tokenizers.tokenizer_zh import TokenizerZh

    is_zh = TokenizerZh._is_chinese_char
    probe = [
        0x1FFF,
        0x2010,
        0x2A6D,
        0x2A6E,
        0x2F80,
        0x2F81,
        0x2FA1,
        0x20000,
        0x2A6D6,
        0x4E00,
        0x9FBB,
        0x9FBC,
        0xFF00,
        0xFFEF,
        0xFFF0,
        0x3400,
        0x4DB5,
        0x4DB6,
        0xFE4F,
        0xFE50,
    ]
    texts = [f"a{chr(c)}b" for c in probe]
    got = _core.text.bleu_tokenize(texts, "zh", False)
    for c, g in zip(probe, got, strict=True):
        assert (g == f"a {chr(c)} b") == is_zh(chr(c)), hex(c)


# ----------------------------------------------------------------------------- 2. vs sacrebleu


def _check_config(
    corpus: dict, tokenize: str, lowercase: bool, n_streams: int, max_order: int = 4
) -> None:
    hyps = corpus["hyps"]
    streams = [corpus["refs"], corpus["refs2"], corpus["refs3"]][:n_streams]
    refs_arg = streams[0] if n_streams == 1 else streams
    base = BLEU(tokenize=tokenize, lowercase=lowercase, max_ngram_order=max_order)
    sacre = _sacre_stats(base, hyps, streams)
    ours = bleu_statistics(
        hyps, refs_arg, tokenizer=tokenize, lowercase=lowercase, max_order=max_order
    )
    assert ours.dtype == np.int64 and ours.shape == (len(hyps), 2 * max_order + 2)
    assert ours.tolist() == [_to_ours(r, max_order) for r in sacre]
    for smooth, value in SMOOTHS:
        for eff in (True, False):
            metric = BLEU(
                tokenize=tokenize,
                lowercase=lowercase,
                smooth_method=smooth,
                smooth_value=value,
                effective_order=eff,
                max_ngram_order=max_order,
            )
            res = bleu(
                hyps,
                refs_arg,
                smooth=smooth,
                smooth_value=value,
                tokenizer=tokenize,
                lowercase=lowercase,
                effective_order=eff,
                max_order=max_order,
            )
            want = [metric._compute_score_from_stats(list(r)) for r in sacre]
            assert res.score.tolist() == [w.score for w in want], (smooth, value, eff)
            assert res.bp.tolist() == [w.bp for w in want]
            assert res.ratio.tolist() == [float(w.ratio) for w in want]
            assert res.precisions.tolist() == [w.precisions for w in want]
            assert res.sys_len.tolist() == [w.sys_len for w in want]
            assert res.ref_len.tolist() == [w.ref_len for w in want]
            cres = corpus_bleu(
                hyps,
                refs_arg,
                smooth=smooth,
                smooth_value=value,
                tokenizer=tokenize,
                lowercase=lowercase,
                effective_order=eff,
                max_order=max_order,
            )
            cwant = metric._aggregate_and_compute([list(r) for r in sacre])
            assert cres.score == cwant.score, (smooth, value, eff)
            assert cres.bp == cwant.bp and cres.precisions.tolist() == cwant.precisions
            assert cres.sys_len == cwant.sys_len and cres.ref_len == cwant.ref_len


# Each of tokenize x lowercase x references meets each value of the other two (sacrebleu's
# statistics for 2000 items take about a second per configuration).
@pytest.mark.parametrize(
    ("tokenize", "lowercase", "n_streams", "n_items"),
    [
        ("13a", False, 1, 2000),
        ("13a", True, 3, 1000),
        ("zh", False, 3, 1000),
        ("zh", True, 1, 1000),
    ],
)
def test_every_smoothing_matches_sacrebleu(
    corpus: dict, tokenize: str, lowercase: bool, n_streams: int, n_items: int
) -> None:
    part = corpus if n_items == 2000 else {k: v[2000 - n_items :] for k, v in corpus.items()}
    _check_config(part, tokenize, lowercase, n_streams)


@pytest.mark.parametrize("tokenize", ["char", "none"])
def test_char_and_none_tokenizers_match_sacrebleu(corpus: dict, tokenize: str) -> None:
    sub = {k: v[:500] for k, v in corpus.items()}
    _check_config(sub, tokenize, True, 2)


@pytest.mark.parametrize("max_order", [1, 2, 6])
def test_other_max_orders_match_sacrebleu(corpus: dict, max_order: int) -> None:
    sub = {k: v[:400] for k, v in corpus.items()}
    _check_config(sub, "13a", False, 2, max_order=max_order)


def test_public_sacrebleu_calls_agree(corpus: dict) -> None:
    hyps, refs, refs2 = corpus["hyps"][:400], corpus["refs"][:400], corpus["refs2"][:400]
    for smooth, value in SMOOTHS:
        metric = BLEU(smooth_method=smooth, smooth_value=value, effective_order=True)
        res = bleu(hyps[:150], refs[:150], smooth=smooth, smooth_value=value)
        want = [
            metric.sentence_score(h, [r]).score for h, r in zip(hyps[:150], refs[:150], strict=True)
        ]
        assert res.score.tolist() == want
        cres = corpus_bleu(hyps, refs, smooth=smooth, smooth_value=value)
        assert (
            cres.score
            == sacrebleu.corpus_bleu(hyps, [refs], smooth_method=smooth, smooth_value=value).score
        )
    # multi-reference sentence_score with the None of stream 2 dropped, as sacrebleu does
    metric = BLEU(effective_order=True)
    res = bleu(hyps[:150], [refs[:150], refs2[:150]])
    want = [
        metric.sentence_score(h, [x for x in (a, b) if x is not None]).score
        for h, a, b in zip(hyps[:150], refs[:150], refs2[:150], strict=True)
    ]
    assert res.score.tolist() == want
    assert corpus_bleu(hyps, [refs, refs2]).score == BLEU().corpus_score(hyps, [refs, refs2]).score
    assert sacrebleu.sentence_bleu(hyps[3], [refs[3]]).score == bleu([hyps[3]], [refs[3]]).score[0]


def test_results_do_not_depend_on_threads(corpus: dict) -> None:
    a = bleu_statistics(corpus["hyps"], [corpus["refs"], corpus["refs2"]], threads=1)
    b = bleu_statistics(corpus["hyps"], [corpus["refs"], corpus["refs2"]], threads=2)
    c = bleu_statistics(corpus["hyps"], [corpus["refs"], corpus["refs2"]], threads=7)
    assert np.array_equal(a, b) and np.array_equal(a, c)


# ----------------------------------------------------------------------------- 3. edge cases

EDGE_PAIRS = [
    ("", ""),
    ("", "a reference"),
    ("a hypothesis", ""),
    ("   ", "\n"),
    ("!!! ??? ...", "... ,,, ;;;"),
    (".", "."),
    ("3.14 1,000 -1 2-3 5. .5", "3.14 1,000 -1 2 - 3 5 . . 5"),
    ("pi is 3.14, not 3,14.", "Pi is 3.14 , not 3.15."),
    ("&amp;lt;b&amp;gt; &quot;x&quot; a &amp; b", '<b> "x" a & b'),
    ("A<skipped>B well-\nknown", "AB wellknown"),
    ("中文测试，很好。", "中文 测试 , 很好 ."),
    ("ＨＥＲ２陽性　乳癌", "HER2 陽性 乳癌"),
    ("Straße İstanbul ΣΑΣ naïve", "strasse istanbul σας naive"),
    ("the the the the the the the", "the cat is on the mat"),
    ("😀 🎉 ok", "😀 ok 🎉"),
    ("a\u3000b\xa0c\u2028d\x1ce\x85f", "a b c d e f"),
    (
        " ".join(["tumor"] * 1500 + ["grade", "3"] * 300),
        " ".join(["tumor"] * 1000 + ["grade"] * 500),
    ),
    ("one", "one"),
    ("one two", "one two"),
    ("one two three", "one two three four"),
]


@pytest.mark.parametrize("tokenize", ["13a", "zh"])
def test_edge_cases_match_sacrebleu(tokenize: str) -> None:
    hyps = [h for h, _ in EDGE_PAIRS]
    refs = [r for _, r in EDGE_PAIRS]
    metric = BLEU(tokenize=tokenize, effective_order=True)
    res = bleu(hyps, refs, tokenizer=tokenize)
    want = [metric.sentence_score(h, [r]) for h, r in zip(hyps, refs, strict=True)]
    assert res.score.tolist() == [w.score for w in want]
    assert res.precisions.tolist() == [w.precisions for w in want]
    for lowercase in (False, True):
        sacre = _sacre_stats(BLEU(tokenize=tokenize, lowercase=lowercase), hyps, [refs])
        st = bleu_statistics(hyps, refs, tokenizer=tokenize, lowercase=lowercase)
        assert st.tolist() == [_to_ours(r, 4) for r in sacre]
        for smooth, value in SMOOTHS:
            for eff in (True, False):
                metric = BLEU(
                    tokenize=tokenize,
                    lowercase=lowercase,
                    smooth_method=smooth,
                    smooth_value=value,
                    effective_order=eff,
                )
                res = bleu(
                    hyps,
                    refs,
                    smooth=smooth,
                    smooth_value=value,
                    tokenizer=tokenize,
                    lowercase=lowercase,
                    effective_order=eff,
                )
                want = [metric._compute_score_from_stats(list(r)) for r in sacre]
                assert res.score.tolist() == [w.score for w in want]
                assert res.precisions.tolist() == [w.precisions for w in want]
                cres = corpus_bleu(
                    hyps,
                    refs,
                    smooth=smooth,
                    smooth_value=value,
                    tokenizer=tokenize,
                    lowercase=lowercase,
                    effective_order=eff,
                )
                assert cres.score == metric._aggregate_and_compute([list(r) for r in sacre]).score


def test_hand_worked_clipping_example() -> None:
    # Papineni et al. (2002) sec. 2.1: "the" x7 against a reference with two "the": the
    # modified unigram precision is 2/7; no higher-order n-gram matches.
    st = bleu_statistics(["the the the the the the the"], ["the cat is on the mat"])
    assert st.tolist() == [[2, 0, 0, 0, 7, 6, 5, 4, 7, 6]]
    res = bleu(
        ["the the the the the the the"],
        ["the cat is on the mat"],
        smooth="none",
        effective_order=False,
    )
    assert res.precisions[0].tolist() == [100.0 * 2 / 7, 0.0, 0.0, 0.0]
    assert res.score[0] == 0.0 and res.bp[0] == 1.0


def test_closest_reference_length_ties_to_the_shorter() -> None:
    # Streams (refs[k][i]). Item 0: references of 6 and 4 tokens (and None) for a 5-token
    # hypothesis: a tie, the shorter wins. Item 1: 1, 6, 7 -> 6. Item 2: 7, 5 -> 5.
    hyp = "a b c d e"
    streams = [
        ["a b c d e f", "x", "a b c d e f g"],
        ["a b c d", "a b c d e f", "a b c d e"],
        [None, "a b c d e f g", None],
    ]
    st = bleu_statistics([hyp, hyp, hyp], streams)
    assert st[:, 9].tolist() == [4, 6, 5]
    sacre = _sacre_stats(BLEU(), [hyp] * 3, streams)
    assert [row[1] for row in sacre] == [4, 6, 5]


def test_multi_reference_clips_by_the_maximum_count() -> None:
    st = bleu_statistics(["the the the cat"], [["the cat"], ["the the mat"]])
    # unigrams: "the" x3 clipped by max(1, 2) = 2, "cat" 1 -> 3 of 4; bigrams "the the" x2
    # clipped by 1, "the cat" 1 -> 2 of 3; trigrams: none of 2 in either reference.
    assert st.tolist() == [[3, 2, 0, 0, 4, 3, 2, 1, 4, 3]]


# ----------------------------------------------------------------------------- 4. inputs


def test_input_types_give_identical_results(corpus: dict) -> None:
    hyps, refs = corpus["hyps"][:300], corpus["refs"][:300]
    want = bleu_statistics(hyps, refs, lowercase=True)
    chunked = pa.chunked_array([pa.array(refs[:100]), pa.array(refs[100:])])
    sliced = pa.array(["pad"] + refs, type=pa.string()).slice(1)
    for h, r in [
        (tuple(hyps), tuple(refs)),
        (np.array(hyps, dtype=object), np.array(refs, dtype=object)),
        (np.array(hyps), np.array(refs)),
        (pl.Series(hyps), pl.Series(refs)),
        (pa.array(hyps), chunked),
        (pa.array(hyps, type=pa.large_string()), sliced),
        (iter(hyps), refs),
    ]:
        assert np.array_equal(bleu_statistics(h, r, lowercase=True), want)
    assert np.array_equal(bleu_statistics(pa.array(hyps), [pa.array(refs)], lowercase=True), want)
    assert np.array_equal(bleu_statistics(hyps, np.array([refs])), bleu_statistics(hyps, refs))
    # Arrow nulls in a multi-reference stream are missing references, like None.
    refs2 = corpus["refs2"][:300]
    assert np.array_equal(
        bleu_statistics(hyps, [refs, pa.array(refs2)]), bleu_statistics(hyps, [refs, refs2])
    )
    assert len(bleu([], [])) == 0


def test_lone_surrogates_are_opaque_characters() -> None:
    hyps = ["a\ud800b c.", "\udfff x"]
    refs = ["a\ud800b c .", "y \udfff"]
    metric = BLEU(effective_order=True, lowercase=True)
    assert bleu(hyps, refs, lowercase=True).score.tolist() == [
        metric.sentence_score(h, [r]).score for h, r in zip(hyps, refs, strict=True)
    ]


def test_validation_errors() -> None:
    with pytest.raises(ValueError, match=r"hyps\[1\] is null \(None\)"):
        bleu(["a", None], ["a", "b"])
    with pytest.raises(ValueError, match=r"refs\[2\] is null"):
        bleu(["a", "b", "c"], ["a", "b", None])
    with pytest.raises(ValueError, match=r"hyps\[0\] is null"):
        bleu(pa.array([None, "x"]), ["a", "b"])
    with pytest.raises(ValueError, match=r"refs\[1\] is null \(NaN\)"):
        bleu(["a", "b"], ["a", float("nan")])
    with pytest.raises(TypeError, match=r"hyps\[1\]: expected a str, got int"):
        bleu(["a", 3], ["a", "b"])
    with pytest.raises(ValueError, match=r"refs: expected 2 texts .* got 3"):
        bleu(["a", "b"], ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"refs\[1\]: expected 2 texts"):
        bleu(["a", "b"], [["a", "b"], ["a"]])
    with pytest.raises(ValueError, match=r"item 1 has no reference"):
        bleu(["a", "b"], [["a", None], ["a", None]])
    with pytest.raises(TypeError, match="single str"):
        bleu(["a b"], "a b")  # a batch of hypotheses needs a sequence of references
    with pytest.raises(ValueError, match="at least one reference"):
        bleu("a b", [])
    with pytest.raises(ValueError, match="tokenizer: .* got 'intl'"):
        bleu(["a"], ["a"], tokenizer="intl")
    with pytest.raises(ValueError, match="smooth"):
        bleu(["a"], ["a"], smooth="add-1")
    with pytest.raises(ValueError, match="smooth_value"):
        bleu(["a"], ["a"], smooth="floor", smooth_value=-1)
    with pytest.raises(ValueError, match="max_order"):
        bleu(["a"], ["a"], max_order=0)
    with pytest.raises(ValueError, match="threads"):
        bleu(["a"], ["a"], threads=0)
    with pytest.raises(ValueError, match="empty input"):
        corpus_bleu([], [])
    with pytest.raises(InvalidArgumentError, match="options: bootstrap options were given"):
        corpus_bleu(["a"], ["a"], options=BootstrapOptions(n_resamples=10))
    with pytest.raises(InvalidTypeError, match="options"):
        corpus_bleu(["a"], ["a"], ci=True, options={"n_resamples": 10})


# ----------------------------------------------------------------------------- 5. bootstrap


def test_statistic_on_hand_computed_sums() -> None:
    # matches [3, 2, 1, 0], totals [4, 3, 2, 1], hyp_len 4, ref_len 5, exp smoothing:
    # p4 = 100 / (2 * 1); BP = exp(1 - 5/4); BLEU = BP * exp(mean(log p)).
    sums = np.array([3, 2, 1, 0, 4, 3, 2, 1, 4, 5], dtype=np.float64)
    p = [100.0 * 3 / 4, 100.0 * 2 / 3, 100.0 * 1 / 2, 100.0 / (2.0 * 1)]
    want = math.exp(1 - 5 / 4) * math.exp(
        (((math.log(p[0]) + math.log(p[1])) + math.log(p[2])) + math.log(p[3])) / 4
    )
    params = bleu_statistic_params(smooth="exp", max_order=4)
    assert _core.stats.evaluate_statistic("bleu", [*params[:4], 0.0], sums, 1.0) == want
    assert _core.stats.evaluate_statistic("bleu", [], sums, 1.0) == want  # defaults: N from k, exp
    # floor 0.1: p4 = 100 * 0.1 / 1; add-k 1: orders >= 2 get +1 match and +1 total.
    floor = [*p[:3], 100.0 * 0.1 / 1]
    want_floor = math.exp(1 - 5 / 4) * math.exp(_lsum([math.log(x) for x in floor]) / 4)
    assert (
        _core.stats.evaluate_statistic("bleu", [4, 1, float("nan"), 0, 0], sums, 1.0) == want_floor
    )
    addk = [75.0, 100.0 * 3 / 4, 100.0 * 2 / 3, 100.0 * 1 / 2]
    want_addk = math.exp(1 - 5 / 4) * math.exp(_lsum([math.log(x) for x in addk]) / 4)
    assert _core.stats.evaluate_statistic("bleu", [4, 2, 1.0, 0, 0], sums, 1.0) == want_addk
    # no smoothing and a zero precision: my_log(0) = -9999999999 drives BLEU to 0
    assert _core.stats.evaluate_statistic("bleu", [4, 0, float("nan"), 0, 0], sums, 1.0) == 0.0
    # effective order: with no 4-grams at all, only orders 1..3 count
    sums3 = np.array([3, 2, 1, 0, 4, 3, 2, 0, 4, 4], dtype=np.float64)
    want_eff = math.exp(_lsum([math.log(x) for x in p[:3]]) / 3)
    assert (
        _core.stats.evaluate_statistic("bleu", [4, 3, float("nan"), 1, 0], sums3, 1.0) == want_eff
    )
    assert "bleu" in _core.stats.statistic_names()
    with pytest.raises(ValueError, match="needs 10 value column"):
        _core.stats.evaluate_statistic("bleu", [4], np.zeros(8), 1.0)


def test_corpus_bleu_bootstrap_interval(corpus: dict) -> None:
    hyps, refs = corpus["hyps"], corpus["refs"]
    res = corpus_bleu(hyps, refs, ci=True, options=BootstrapOptions(n_resamples=300, seed=11))
    assert res.score == sacrebleu.corpus_bleu(hyps, [refs]).score
    assert res.bootstrap is not None and res.bootstrap.estimate == res.score
    lo, hi = res.interval()
    assert lo < res.score < hi and res.se > 0
    again = corpus_bleu(
        hyps, refs, ci=True, options=BootstrapOptions(n_resamples=300, seed=11, threads=1)
    )
    assert again.interval() == (lo, hi) and again.se == res.se
    other = corpus_bleu(hyps, refs, ci=True, options=BootstrapOptions(n_resamples=300, seed=12))
    assert other.interval() != (lo, hi)
    # the same distribution through the engine directly, from the per-item statistics
    st = bleu_statistics(hyps, refs)
    direct = bootstrap_sufficient(
        st,
        statistic="bleu",
        params=bleu_statistic_params(),
        options=BootstrapOptions(n_resamples=300, seed=11),
    )
    assert (direct.ci_low, direct.ci_high) == (lo, hi)
    # each resample is corpus BLEU of a resample: check a few against sacrebleu
    full = bootstrap_sufficient(
        st,
        statistic="bleu",
        params=bleu_statistic_params(),
        options=BootstrapOptions(n_resamples=300, seed=11),
        return_distribution=True,
    )
    assert full.distribution is not None
    assert np.all((full.distribution >= 0) & (full.distribution <= 100))
    m = 400
    idx = np.random.default_rng(0).integers(0, m, (3, m))
    via_idx = _core.stats.bootstrap_from_counts(
        st[:m].astype(np.float64),
        np.stack([np.bincount(r, minlength=m) for r in idx]).astype(np.float64),
        "bleu",
        bleu_statistic_params(),
        "percentile",
        0.95,
        True,
    )
    for b, r in enumerate(idx):
        want = sacrebleu.corpus_bleu([hyps[i] for i in r], [[refs[i] for i in r]]).score
        assert via_idx["distribution"][0, b] == want


def test_corpus_bleu_per_group_and_clusters(corpus: dict) -> None:
    hyps, refs = corpus["hyps"][:600], corpus["refs"][:600]
    model = np.array(["m1", "m2", "m3"])[np.arange(600) % 3]
    res = corpus_bleu(
        hyps, refs, groups=model, ci=True, options=BootstrapOptions(n_resamples=100, seed=3)
    )
    assert res.keys["groups"].tolist() == ["m1", "m2", "m3"] and res.n.tolist() == [200] * 3
    for g, name in enumerate(["m1", "m2", "m3"]):
        sel = np.flatnonzero(model == name)
        want = sacrebleu.corpus_bleu([hyps[i] for i in sel], [[refs[i] for i in sel]])
        assert res.score[g] == want.score
        assert res.counts[g].tolist() == want.counts and res.totals[g].tolist() == want.totals
        assert res.bootstrap is not None and res.bootstrap.estimate[g] == want.score
        assert res.ci_low[g] <= res.score[g] <= res.ci_high[g]
    df = res.to_polars()
    assert df.columns[:2] == ["groups", "n"] and df.height == 3
    no_ci = corpus_bleu(hyps, refs, groups={"model": model})
    assert np.array_equal(no_ci.score, res.score) and np.isnan(no_ci.ci_low).all()
    patient = np.arange(600) // 10
    opts = BootstrapOptions(n_resamples=200, seed=5)
    clustered = corpus_bleu(hyps, refs, clusters=patient, ci=True, options=opts)
    assert clustered.score == sacrebleu.corpus_bleu(hyps, [refs]).score
    assert clustered.bootstrap is not None and clustered.bootstrap.n_units == 60
    again = corpus_bleu(hyps, refs, clusters=patient, ci=True, options=opts, threads=1)
    assert again.interval() == clustered.interval()


# ----------------------------------------------------------------------------- 6. Python sum


def _cpython312_sum(items: list) -> float | int:
    """Sum ints and floats as CPython >= 3.12's builtin sum() does (start 0).

    A leading run of ints is summed exactly, the first float is added plainly, later floats with
    Neumaier compensation, later ints plainly; the compensation is added at the end if non-zero
    and finite. Checked against the sum() of CPython 3.12.1 and 3.13.0 on 200,000 random lists
    of this kind.
    """
    k, acc = 0, 0
    while k < len(items) and isinstance(items[k], int):
        acc += items[k]
        k += 1
    if k == len(items):
        return acc
    f, c = float(acc) + items[k], 0.0
    for x in items[k + 1 :]:
        if isinstance(x, int):
            f += float(x)
            continue
        t = f + x
        c += ((f - t) + x) if abs(f) >= abs(x) else ((x - t) + f)
        f = t
    return f + c if c and math.isfinite(c) else f


def _lsum(xs: list) -> float:
    """Left-to-right sum (CPython <= 3.11's sum() of floats), whatever Python runs this."""
    acc = 0.0
    for x in xs:
        acc += x
    return acc


def test_python_sum_rules() -> None:
    rng = np.random.default_rng(5)
    for _ in range(700):
        order = int(rng.integers(1, 7))
        hyp_len = int(rng.integers(0, 40))
        totals = [max(0, hyp_len - j) for j in range(order)]
        matches = [int(rng.integers(0, t + 1)) if rng.random() < 0.8 else 0 for t in totals]
        ref_len = int(rng.integers(0, 60))
        row = np.array([*matches, *totals, hyp_len, ref_len], dtype=np.float64)
        for smooth in ("exp", "floor", "add-k", "none"):
            for eff in (False, True):
                ref = BLEU.compute_bleu(
                    list(matches),
                    list(totals),
                    hyp_len,
                    ref_len,
                    smooth_method=smooth,
                    effective_order=eff,
                    max_ngram_order=order,
                )
                seq = _core.text.bleu_from_statistics(row[None], order, smooth, None, eff, 0)
                neu = _core.text.bleu_from_statistics(row[None], order, smooth, None, eff, 1)
                if not any(matches):
                    assert seq["score"][0] == neu["score"][0] == ref.score == 0.0
                    continue
                # the orders sacrebleu averages over (its effective-order loop)
                eff_order = order
                for j in range(order):
                    if totals[j] + (1 if smooth == "add-k" and j > 0 else 0) == 0:
                        break
                    if eff:
                        eff_order = j + 1
                terms = [math.log(x) if x != 0.0 else -9999999999 for x in ref.precisions]
                terms = terms[:eff_order]
                assert seq["score"][0] == ref.bp * math.exp(_lsum(terms) / eff_order)
                assert neu["score"][0] == ref.bp * math.exp(_cpython312_sum(terms) / eff_order)
                if _PY_SUM == 0:  # CPython <= 3.11 runs this: rule 0 is sacrebleu's own result
                    assert seq["score"][0] == ref.score


# ---- one vocabulary: tokenizer=, one hypothesis gives scalars, one corpus gives scalars ----


def test_one_hypothesis_gives_scalars_equal_to_sentence_score(corpus: dict) -> None:
    hyps, refs, refs2 = corpus["hyps"], corpus["refs"], corpus["refs2"]
    i = next(k for k in range(len(hyps)) if refs2[k] is not None and len(hyps[k].split()) > 3)
    for tok in ("13a", "zh", "char", "none"):
        metric = BLEU(tokenize=tok, effective_order=True)
        one = bleu(hyps[i], refs[i], tokenizer=tok)
        assert type(one.score) is float and type(one.bp) is float and type(one.sys_len) is int
        assert one.score == metric.sentence_score(hyps[i], [refs[i]]).score
        assert one.tokenizer == tok
        many = bleu(hyps[i], [refs[i], refs2[i]], tokenizer=tok)  # sacrebleu's (hyp, refs)
        want = metric.sentence_score(hyps[i], [refs[i], refs2[i]])
        assert many.score == want.score and many.precisions.tolist() == want.precisions
        assert bleu([hyps[i]], [refs[i]], tokenizer=tok).score.tolist() == [one.score]
    row = bleu_statistics(hyps[i], refs[i])
    assert row.shape == (10,) and row.tolist() == bleu_statistics([hyps[i]], [refs[i]])[0].tolist()
    assert bleu(hyps[i], refs[i]).to_polars().height == 1


def test_one_corpus_gives_scalars_and_groups_give_arrays(corpus: dict) -> None:
    hyps, refs = corpus["hyps"][:300], corpus["refs"][:300]
    c = corpus_bleu(hyps, refs, tokenizer="zh")
    want = sacrebleu.corpus_bleu(hyps, [refs], tokenize="zh")
    assert type(c.score) is float and c.score == want.score and type(c.n) is int and c.n == 300
    assert c.counts.tolist() == want.counts and c.precisions.tolist() == want.precisions
    assert math.isnan(c.se) and c.to_polars().height == 1
    g = corpus_bleu(hyps, refs, tokenizer="zh", groups=np.zeros(300, dtype=int))
    assert isinstance(g.score, np.ndarray) and g.score.tolist() == [want.score]
    with pytest.raises(TypeError, match="use bleu\\(\\) for one hypothesis"):
        corpus_bleu(hyps[0], refs[0])
    # the old keyword works for one release, warning with the new name (tokenizer=)
    with pytest.warns(DeprecationWarning, match="use tokenizer="):
        old = bleu(hyps, refs, tokenize="13a")
    np.testing.assert_array_equal(old.score, bleu(hyps, refs, tokenizer="13a").score)
