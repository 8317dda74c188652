"""Tests of the ROUGE family (python/tumorboard/_rouge.py over csrc/text/).

Oracles:

1. rouge-score 0.1.2 (``RougeScorer(...).score(target, prediction)``): values must be identical
   (bitwise float64), with and without the Porter stemmer, on generated pairs and edge cases;
2. NLTK's ``PorterStemmer`` in NLTK_EXTENSIONS (rouge-score's) and ORIGINAL_ALGORITHM modes on a
   large generated word list;
3. Python itself for the character tables (``unicodedata``, ``str.isspace``, ``str.lower``) and
   the whitespace tokenizer (``str.split``);
4. hand-worked examples (Chinese ROUGE with the unicode tokenizer, SQuAD F1, set F1) and a
   transcription of the official SQuAD v1.1/v2.0 evaluation functions.
"""

from __future__ import annotations

import random
import re
import string
import unicodedata
from collections import Counter

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from tumorboard import _core
from tumorboard.text._rouge import (
    RougeMatrix,
    RougeResult,
    rouge,
    rouge_matrix,
    set_f1,
    token_f1,
    tokenize,
)

rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
rouge_tokenizers = pytest.importorskip("rouge_score.tokenizers")
porter = pytest.importorskip("nltk.stem.porter")

ALL_TYPES = ["rouge1", "rouge2", "rouge3", "rougeL", "rougeLsum"]

# Words with inflections that exercise every Porter step, mixed case, digits, punctuation,
# non-ASCII letters and the two non-ASCII characters whose lowercase is ASCII.
VOCAB = (
    "run running runs ran hop hopping hopped hopeful hopefulness fly flies flying flied "
    "study studies studied studying relational relate relativity conditional national "
    "nationalization happiness happy happily generously generalization sensibility "
    "rational operator feudalism decisiveness callousness formality sensitivity "
    "triplicate formative formalize electricity electrical goodness revival allowance "
    "inference airliner gyroscopic adjustable defensible irritant replacement adjustment "
    "dependent adoption homologous communism activate angularity effective bowdlerize "
    "probate rate cease controlling roll agreed feed bled motoring sing filing failing "
    "sky skies dying lying news innings outing howe proceed exceed succeed dies spied "
    "tumor tumors tumour cancer cancers biopsy biopsies mutation mutations mutational "
    "therapy therapies treated treating treatment responses responded metastatic "
    "the a an of and in on for with to is was were be been "
    "The RUNNING Tumor KRAS egfr EGFR-mutant T790M 5mg 3.5 10x PD-L1 HER2+ "
    "İstanbul \u212aelvin naïve café Ärzte 肿瘤 患者 がん 암 "
    "— ... , ; ( ) 's don't e.g. C++ ab-cd"
).split()


def _text(rng: random.Random, n_words: int, vocab: list[str] = VOCAB) -> str:
    parts = []
    for _ in range(n_words):
        parts.append(rng.choice(vocab))
        u = rng.random()
        parts.append(
            " " if u < 0.8 else "\n" if u < 0.9 else rng.choice([", ", ". ", "\n\n", "\t"])
        )
    return "".join(parts)


def _assert_identical(res: RougeResult, hyps: list[str], refs: list[str], stemmer: bool) -> None:
    scorer = rouge_scorer.RougeScorer(list(res.types), use_stemmer=stemmer)
    expected = [scorer.score(r, h) for h, r in zip(hyps, refs, strict=True)]
    for t in res.types:
        for field in ("precision", "recall", "fmeasure"):
            want = np.array([getattr(e[t], field) for e in expected], dtype=np.float64)
            got = getattr(res[t], field)
            assert got.dtype == np.float64 and got.shape == want.shape
            bad = np.flatnonzero(want.view(np.int64) != got.view(np.int64))
            assert bad.size == 0, (
                f"{t}.{field} differs at {bad[:5]}: {want[bad[:5]]} vs {got[bad[:5]]}; "
                f"hyp={hyps[bad[0]]!r} ref={refs[bad[0]]!r}"
            )


# ----------------------------------------------------------------------------- rouge-score


@pytest.mark.parametrize("stemmer", [False, True])
def test_identical_to_rouge_score_on_generated_pairs(stemmer):
    rng = random.Random(11 + stemmer)
    n = 500 if stemmer else 1000
    hyps = [_text(rng, rng.randint(0, 30)) for _ in range(n)]
    refs = [_text(rng, rng.randint(0, 30)) for _ in range(n)]
    res = rouge(hyps, refs, types=ALL_TYPES, stemmer=stemmer)
    assert isinstance(res, RougeResult) and len(res) == n
    _assert_identical(res, hyps, refs, stemmer)
    # Some pairs must actually overlap, or the comparison above would be vacuous.
    assert (res["rouge1"].fmeasure > 0).mean() > 0.5
    assert (res["rougeLsum"].fmeasure > 0).mean() > 0.5


def test_identical_to_rouge_score_on_small_vocab_multiline():
    # Tiny alphabet, many ties and repeats: stresses LCS backtracking (ROUGE-Lsum) and the
    # multi-word bit-parallel LCS (sentences longer than 64 tokens).
    rng = random.Random(5)

    def text() -> str:
        lines = []
        for _ in range(rng.randint(0, 4)):
            length = rng.choice([0, 1, 3, 10, 63, 64, 65, 130])
            lines.append(" ".join(rng.choices("abcd", k=rng.randint(0, length))))
        return "\n".join(lines)

    hyps = [text() for _ in range(200)]
    refs = [text() for _ in range(200)]
    res = rouge(hyps, refs, types=["rouge1", "rouge2", "rougeL", "rougeLsum"])
    _assert_identical(res, hyps, refs, stemmer=False)


EDGE_PAIRS = [
    ("", ""),
    ("", "the cat"),
    ("the cat", ""),
    ("...", "!!! ???"),
    (" ", "\n\n"),
    ("a", "a"),
    ("a a a a", "a"),
    ("a", "a a a a"),
    ("the the the cat", "the cat the"),
    ("Hello, WORLD!", "hello world"),
    ("1 2 3 4 5", "5 4 3 2 1"),
    ("T790M 3.5mg 10x", "t790m 3 5mg"),
    ("İstanbul İİ", "i stanbul i"),
    ("\u212aelvin \u212a", "kelvin k"),
    ("naïve café Ärzte", "na ve caf rzte"),
    ("肿瘤患者接受化疗", "患者接受放疗"),
    ("がん 암 рак", "рак"),
    ("line one\nline two\n\nline three", "line two\nline one"),
    ("a b\nc d\n", "\nb a\nd c"),
    ("x\r\ny\rz", "x y z"),
    ("sentence one.\nsentence two.", "sentence one. sentence two."),
    ("running runs ran", "run running"),
    ("generously generalizations", "generous general"),
    ("caresses ponies ties", "caress poni ti"),
    ("a\ud800b", "a b"),
]


@pytest.mark.parametrize("stemmer", [False, True])
def test_identical_to_rouge_score_edge_cases(stemmer):
    hyps = [h for h, _ in EDGE_PAIRS]
    refs = [r for _, r in EDGE_PAIRS]
    rng = random.Random(3)
    # Very long texts (several hundred tokens, many lines).
    hyps.append(_text(rng, 700))
    refs.append(_text(rng, 600))
    hyps.append(" ".join(["tumor"] * 300))
    refs.append(" ".join(["tumor", "cancer"] * 200))
    res = rouge(hyps, refs, types=ALL_TYPES, stemmer=stemmer)
    _assert_identical(res, hyps, refs, stemmer)


def test_rouge_n_beyond_nine_and_type_order():
    rng = random.Random(8)
    hyps = [" ".join(rng.choices("abc", k=rng.randint(0, 40))) for _ in range(200)]
    refs = [" ".join(rng.choices("abc", k=rng.randint(0, 40))) for _ in range(200)]
    # rouge-score only parses rouge1..rouge9; check larger N against a direct count.
    res = rouge(hyps, refs, types=["rougeL", "rouge12", "rouge2", "rouge1"])
    _assert_identical(
        RougeResult(
            types=("rougeL", "rouge2", "rouge1"),
            scores={t: res[t] for t in ("rougeL", "rouge2", "rouge1")},
            tokenizer="rouge",
            stemmer="none",
        ),
        hyps,
        refs,
        stemmer=False,
    )

    def ngrams(s: str, n: int) -> Counter:
        t = s.split()
        return Counter(tuple(t[i : i + n]) for i in range(len(t) - n + 1))

    for i, (h, r) in enumerate(zip(hyps, refs, strict=True)):
        gh, gr = ngrams(h, 12), ngrams(r, 12)
        hits = sum(min(c, gh[g]) for g, c in gr.items())
        p = hits / max(sum(gh.values()), 1)
        rc = hits / max(sum(gr.values()), 1)
        assert res["rouge12"].precision[i] == p and res["rouge12"].recall[i] == rc


def test_results_do_not_depend_on_threads():
    rng = random.Random(21)
    hyps = [_text(rng, rng.randint(0, 40)) for _ in range(2000)]
    refs = [_text(rng, rng.randint(0, 40)) for _ in range(2000)]
    a = rouge(hyps, refs, types=ALL_TYPES, stemmer=True, threads=1)
    b = rouge(hyps, refs, types=ALL_TYPES, stemmer=True, threads=3)
    for t in ALL_TYPES:
        for field in ("precision", "recall", "fmeasure"):
            assert np.array_equal(getattr(a[t], field), getattr(b[t], field))


# ----------------------------------------------------------------------------- tokenizers


@pytest.mark.parametrize("stemmer", [False, True])
def test_tokenize_matches_rouge_score_tokenizer(stemmer):
    ref_tok = rouge_tokenizers.DefaultTokenizer(use_stemmer=stemmer)
    rng = random.Random(4)
    texts = [h for h, _ in EDGE_PAIRS] + [_text(rng, rng.randint(0, 25)) for _ in range(300)]
    got = tokenize(texts, stemmer=stemmer)
    assert got == [ref_tok.tokenize(t) for t in texts]


def test_rouge_tokenizer_on_every_code_point():
    # After str.lower() only [a-z0-9] survive, so the non-ASCII code points that matter are those
    # whose lowercase contains ASCII letters or digits. All non-ASCII code points in one text
    # yield exactly two tokens: U+0130 -> "i" (+ U+0307) and U+212A KELVIN SIGN -> "k".
    ref_tok = rouge_tokenizers.DefaultTokenizer(use_stemmer=False)
    non_ascii = "".join(chr(cp) for cp in range(0x80, 0x110000) if not 0xD800 <= cp <= 0xDFFF)
    assert tokenize([non_ascii]) == [ref_tok.tokenize(non_ascii)] == [["i", "k"]]
    # Each code point between ASCII letters: all of U+0080-U+3FFF (every UTF-8 lead byte
    # pattern of the two special characters' neighbourhoods) and a sample above.
    rng = random.Random(1)
    cps = list(range(0x80, 0x4000)) + rng.sample(range(0xE000, 0x110000), 5000)
    texts = ["A" + chr(cp) + "b9" for cp in cps] + ["x\u0130y\u212az\u0130"]
    assert tokenize(texts) == [ref_tok.tokenize(t) for t in texts]


def test_character_table_matches_unicodedata():
    if unicodedata.unidata_version != _core.text.unicode_version:
        pytest.skip(
            f"table built from Unicode {_core.text.unicode_version}, "
            f"Python has {unicodedata.unidata_version}"
        )
    flags = _core.text.char_flags(np.arange(0x110000, dtype=np.uint32))
    expected = _char_flags_reference()
    bad = np.flatnonzero(flags != expected)
    assert bad.size == 0, [(hex(c), flags[c], expected[c]) for c in bad[:10]]


# Scripts written without spaces (split per character by the unicode tokenizer); the same list
# generated csrc/text/unicode_table.hpp.
NO_SPACE_RANGES = [
    (0x0E00, 0x0E7F), (0x0E80, 0x0EFF), (0x1000, 0x109F), (0x1100, 0x11FF), (0x1780, 0x17FF),
    (0x1950, 0x197F), (0x1980, 0x19DF), (0x19E0, 0x19FF), (0x1A20, 0x1AAF), (0x2E80, 0x2EFF),
    (0x2F00, 0x2FDF), (0x3005, 0x3007), (0x3021, 0x3029), (0x3038, 0x303C), (0x3040, 0x309F),
    (0x30A0, 0x30FF), (0x3100, 0x312F), (0x3130, 0x318F), (0x31A0, 0x31BF), (0x31F0, 0x31FF),
    (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xA000, 0xA4CF), (0xA960, 0xA97F), (0xA9E0, 0xA9FF),
    (0xAA60, 0xAA7F), (0xAA80, 0xAADF), (0xAC00, 0xD7AF), (0xD7B0, 0xD7FF), (0xF900, 0xFAFF),
    (0xFF66, 0xFF9F), (0xFFA0, 0xFFDC), (0x16FE0, 0x16FFF), (0x17000, 0x18D7F),
    (0x1AFF0, 0x1B2FF), (0x20000, 0x2FA1F), (0x30000, 0x323AF),
]  # fmt: skip


def _char_flags_reference() -> np.ndarray:
    """Return the flags of every code point.

    1 letter/number (L*, N*), 2 mark (M*), 4 no-space script, 8 Python regex word character
    (isalnum or '_'), 16 str.isspace().
    """
    chars = [chr(cp) for cp in range(0x110000)]
    major = np.array([unicodedata.category(c)[0] for c in chars])
    f = np.where(np.isin(major, ["L", "N"]), 1, 0) | np.where(major == "M", 2, 0)
    split = np.zeros(0x110000, dtype=bool)
    for a, b in NO_SPACE_RANGES:
        split[a : b + 1] = True
    f |= np.where(split & (f != 0), 4, 0)
    f |= np.array([8 if (c.isalnum() or c == "_") else 0 for c in chars])
    f |= np.array([16 if c.isspace() else 0 for c in chars])
    return f.astype(np.uint8)


def test_whitespace_tokenizer_is_str_split():
    ws = [chr(cp) for cp in range(0x110000) if chr(cp).isspace()]
    rng = random.Random(9)
    pieces = VOCAB + ws + ["x\u200by", "\u00ad", "ÉCOLE", "a\ud800"]
    texts = ["".join(rng.choices(pieces, k=rng.randint(0, 30))) for _ in range(300)]
    assert tokenize(texts, tokenizer="whitespace") == [t.split() for t in texts]


def test_unicode_tokenizer_hand_worked():
    got = tokenize(
        [
            "肿瘤患者，接受化疗。",
            "Ｈｅｌｌｏ　ＷＯＲＬＤ！ naïve café",
            "がんの治療 カタカナ",
            "암 환자",
            "ภาษาไทย",
            "नमस्ते दुनिया",
            "EGFR-mutant NSCLC, 3.5mg/kg; İ",
            "\u0301orphan mark",
        ],
        tokenizer="unicode",
    )
    assert got == [
        ["肿", "瘤", "患", "者", "接", "受", "化", "疗"],
        ["hello", "world", "naïve", "café"],
        ["が", "ん", "の", "治", "療", "カ", "タ", "カ", "ナ"],
        ["암", "환", "자"],
        ["ภ", "า", "ษ", "า", "ไ", "ท", "ย"],
        ["नमस्ते", "दुनिया"],  # combining vowel signs and virama stay in the word
        ["egfr", "mutant", "nsclc", "3", "5mg", "kg", "i\u0307"],
        ["orphan", "mark"],
    ]


def test_unicode_tokenizer_chinese_rouge_hand_worked():
    hyp = "肿瘤患者接受化疗"  # 肿 瘤 患 者 接 受 化 疗 (8 tokens)
    ref = "患者接受放疗"  # 患 者 接 受 放 疗 (6 tokens)
    res = rouge([hyp], [ref], types=["rouge1", "rouge2", "rougeL"], tokenizer="unicode")
    # ROUGE-1: shared 患 者 接 受 疗 = 5; P = 5/8, R = 5/6, F = 2PR/(P+R) = 5/7.
    assert res["rouge1"].precision[0] == 5 / 8
    assert res["rouge1"].recall[0] == 5 / 6
    assert res["rouge1"].fmeasure[0] == pytest.approx(5 / 7, abs=1e-15)
    # ROUGE-2: hyp bigrams 肿瘤 瘤患 患者 者接 接受 受化 化疗 (7), ref 患者 者接 接受 受放 放疗 (5);
    # shared 患者 者接 接受 = 3.
    assert res["rouge2"].precision[0] == 3 / 7
    assert res["rouge2"].recall[0] == 3 / 5
    # ROUGE-L: LCS 患者接受疗 = 5.
    assert res["rougeL"].precision[0] == 5 / 8 and res["rougeL"].recall[0] == 5 / 6
    # rouge-score (and our default tokenizer) see no tokens in Chinese text.
    assert rouge_scorer.RougeScorer(["rouge1"]).score(ref, hyp)["rouge1"].fmeasure == 0
    assert rouge([hyp], [ref], types=["rouge1"])["rouge1"].fmeasure[0] == 0


def test_unicode_tokenizer_normalizes_nfkc_and_case():
    res = rouge(["ＡＢＣ ｆｉ ①"], ["abc fi 1"], types=["rouge1"], tokenizer="unicode")
    assert res["rouge1"].fmeasure[0] == 1.0


def test_stemmer_only_touches_ascii_alnum_tokens_longer_than_three():
    assert tokenize(["Running runs tied ties"], tokenizer="whitespace", stemmer=True) == [
        ["Running", "run", "tie", "tie"]
    ]
    assert tokenize(["running café"], tokenizer="unicode", stemmer=True) == [["run", "café"]]


# ----------------------------------------------------------------------------- Porter stemmer


def _porter_words() -> list[str]:
    rng = random.Random(17)
    stems = (
        "run hop fall hiss fizz fil fail conflat troubl siz agre feed plaster bled motor sing "
        "happ enjoy relat condit ration valen hesitan digit conform radic differ vil analog "
        "vietnam predic oper feud decis hope callous formal sensit sensib trip elect good "
        "reviv allow infer airlin gyroscop adjust defens irrit replac depend adopt homolog "
        "commun activ angular effect bowdler prob rat ceas control roll gener cri spi di li ti "
        "fli tr sy syzyg toy y yy ay geo theo archaeo philo nation cat pon caress ski inn out "
        "cann how proc exc succ tann bowl ecolog beauti use care heal pupp bus gas"
    ).split()
    suffixes = (
        " s es ies ied ing ed eed ly ally alli ational tional enci anci izer abli bli entli eli "
        "ousli ization ation ator alism iveness fulness ousness aliti iviti biliti fulli logi "
        "icate ative alize iciti ical ful ness al ance ence er ic able ible ant ement ment ent "
        "ion sion tion ou ism ate iti ous ive ize e ll y ings ations izations ers"
    ).split(" ")
    words = set()
    for s in stems:
        for x in suffixes:
            words.add(s + x)
            words.add(s + x + rng.choice(suffixes))
    letters = "abcdefghijklmnopqrstuvwxyz"
    weights = [8, 2, 3, 3, 10, 2, 2, 3, 8, 1, 1, 4, 2, 5, 7, 2, 1, 6, 6, 6, 4, 1, 2, 1, 6, 1]
    for _ in range(4000):
        w = "".join(rng.choices(letters, weights, k=rng.randint(1, 14)))
        words.add(w + rng.choice(suffixes) if rng.random() < 0.5 else w)
    for _ in range(500):
        words.add("".join(rng.choices("yaeiouyyy", k=rng.randint(1, 8))) + rng.choice(suffixes))
        words.add(str(rng.randint(0, 10**6)) + rng.choice(suffixes))
    return sorted(words)


# NLTK's irregular forms and the rule-order special cases of its implementation.
PORTER_SPECIAL = (
    "sky skies dying lying tying news innings inning outings outing cannings canning howe "
    "proceed exceed succeed dies flies spied died cries generously feed agreed bled sing "
    "hopping hissing fizzed failing filing conflated troubled sized enjoy happy sensibiliti "
    "analogousli vileli radicalli differentli conformabli archaeology geology theology "
    "hopefulli y ys s ss sss ies ied eed ed ing a"
).split()


@pytest.mark.parametrize("mode", ["nltk", "original"])
def test_porter_matches_nltk(mode):
    stemmer = porter.PorterStemmer(
        mode=porter.PorterStemmer.NLTK_EXTENSIONS
        if mode == "nltk"
        else porter.PorterStemmer.ORIGINAL_ALGORITHM
    )
    words = _porter_words() + PORTER_SPECIAL
    assert len(words) > 10000
    got = _core.text.porter_stem(words, mode)
    want = [stemmer.stem(w) for w in words]
    bad = [(w, a, b) for w, a, b in zip(words, want, got, strict=True) if a != b]
    assert not bad, bad[:20]


def test_porter_known_stems():
    # From Porter (1980) and NLTK's documentation.
    nltk_mode = dict(
        zip(
            "caresses ponies ties flies dies skies dying relational conditional rational "
            "generalizations happy enjoy hopping".split(),
            "caress poni tie fli die sky die relat condit ration gener happi enjoy hop".split(),
            strict=True,
        )
    )
    assert _core.text.porter_stem(list(nltk_mode), "nltk") == list(nltk_mode.values())
    # The original algorithm: 'ies' -> 'i' always, y -> i after any vowel-containing stem.
    assert _core.text.porter_stem(["ties", "dies", "enjoy"], "original") == ["ti", "di", "enjoi"]


# ----------------------------------------------------------------------------- rouge_matrix


@pytest.mark.parametrize("rtype", ["rouge1", "rouge2", "rouge4", "rougeL", "rougeLsum"])
def test_rouge_matrix_equals_per_pair_rouge(rtype):
    rng = random.Random(len(rtype) * 31 + ord(rtype[-1]))
    a = [_text(rng, rng.randint(0, 20)) for _ in range(23)] + [""]
    b = [_text(rng, rng.randint(0, 20)) for _ in range(17)] + ["..."]
    m = rouge_matrix(a, b, type=rtype, stemmer=True)
    assert isinstance(m, RougeMatrix) and m.shape == (24, 18)
    hyps = [x for x in a for _ in b]
    refs = [y for _ in a for y in b]
    pairs = rouge(hyps, refs, types=[rtype], stemmer=True)
    for field in ("precision", "recall", "fmeasure"):
        assert np.array_equal(getattr(m, field).reshape(-1), getattr(pairs[rtype], field))
    # Orientation: (i, j) scores a[i] as the prediction against b[j] as the target.
    scorer = rouge_scorer.RougeScorer([rtype], use_stemmer=True)
    s = scorer.score(b[3], a[5])[rtype]
    assert (m.precision[5, 3], m.recall[5, 3], m.fmeasure[5, 3]) == tuple(s)
    df = m.to_polars()
    assert df.columns == ["i", "j", "precision", "recall", "fmeasure"] and df.height == 24 * 18
    assert df.filter((pl.col("i") == 5) & (pl.col("j") == 3))["fmeasure"][0] == m.fmeasure[5, 3]


def test_rouge_matrix_hand_worked_and_empty():
    m = rouge_matrix(["a b", "c"], ["a", "b c d"])
    # a[0] = "a b" vs b[1] = "b c d": 1 shared unigram; P = 1/2 (of a's 2), R = 1/3.
    assert m.precision[0, 1] == 0.5 and m.recall[0, 1] == 1 / 3
    assert m.precision[1, 0] == 0 and m.fmeasure[1, 0] == 0
    e = rouge_matrix([], ["x"])
    assert e.shape == (0, 1)


# ----------------------------------------------------------------------------- token F1


def _squad_normalize(s: str) -> str:
    # The official SQuAD v1.1 / v2.0 normalize_answer.
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def _squad_v2_f1(pred: str, gold: str) -> float:
    # The official SQuAD v2.0 compute_f1 (v1.1 differs only when both sides are empty).
    gold_toks = _squad_normalize(gold).split() if gold else []
    pred_toks = _squad_normalize(pred).split() if pred else []
    common = Counter(gold_toks) & Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        return float(gold_toks == pred_toks)
    if num_same == 0:
        return 0.0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


def test_token_f1_hand_worked():
    preds = ["The cat sat on the mat.", "Paris", "", "an apple", "", "EGFR exon-19"]
    refs = ["a cat on a mat", "paris, France", "", "the", "something", "egfr exon19 deletion"]
    got = token_f1(preds, refs)
    # 1: pred tokens cat sat on mat (4), ref cat on mat (3): same 3, P 3/4, R 1, F = 6/7.
    # 2: pred paris (1), ref paris france (2): P 1, R 1/2, F = 2/3.
    # 3: both empty -> 1 (SQuAD v2.0). 4: "apple" vs "" -> 0. 5: empty pred -> 0.
    # 6: punctuation is deleted, not split: exon19 matches; egfr exon19 vs + deletion: F = 4/5.
    assert got.tolist() == pytest.approx([6 / 7, 2 / 3, 1.0, 0.0, 0.0, 4 / 5], abs=1e-15)
    v1 = token_f1(preds, refs, both_empty=0.0)
    assert v1[2] == 0.0 and np.array_equal(np.delete(v1, 2), np.delete(got, 2))


def test_token_f1_matches_official_script():
    rng = random.Random(13)
    pieces = VOCAB + ["a", "an", "the", "The", "An", "théâtre", "a_b", "the—end", "x-the", "¿the?"]
    preds = [" ".join(rng.choices(pieces, k=rng.randint(0, 8))) for _ in range(1000)]
    refs = [" ".join(rng.choices(pieces, k=rng.randint(0, 8))) for _ in range(1000)]
    got = token_f1(preds, refs)
    want = np.array([_squad_v2_f1(p, r) for p, r in zip(preds, refs, strict=True)])
    assert np.array_equal(got, want)


def test_token_f1_no_normalization():
    got = token_f1(["The Cat", "a b"], ["the cat", "a\u3000b"], tokenizer="whitespace")
    assert got.tolist() == [0.0, 1.0]


# ----------------------------------------------------------------------------- set F1


def _set_f1_reference(pred_tokens: list[str], ref_tokens: list[str]) -> float:
    # RadA-BenchPlat's calculate_metrics (F1 part) on given tokens.
    p, r = set(pred_tokens), set(ref_tokens)
    if not p or not r:
        return 0
    common = r & p
    precision = len(common) / len(p)
    recall = len(common) / len(r)
    return 2 * (precision * recall) / (precision + recall) if precision + recall > 0 else 0


def test_set_f1_hand_worked():
    got = set_f1(
        ["the cat the cat sat", "", "dog", "Tumor shrank"], ["cat sat down", "x", "", "tumor"]
    )
    # 1: P = {the, cat, sat}, R = {cat, sat, down}: 2 shared, p = r = 2/3, F = 2/3.
    assert got.tolist() == pytest.approx([2 / 3, 0.0, 0.0, 2 / 3], abs=1e-15)


def test_set_f1_tokenizers_match_reference_formula():
    from nltk.tokenize import NLTKWordTokenizer

    rng = random.Random(19)
    preds = [_text(rng, rng.randint(0, 15)) for _ in range(300)]
    refs = [_text(rng, rng.randint(0, 15)) for _ in range(300)]
    tb = NLTKWordTokenizer()
    tok = rouge_tokenizers.DefaultTokenizer(use_stemmer=False)
    for name, split in (
        ("rouge", tok.tokenize),
        ("whitespace", lambda s: s.lower().split()),
        ("treebank", lambda s: tb.tokenize(s.lower())),
    ):
        got = set_f1(preds, refs, tokenizer=name)
        want = [_set_f1_reference(split(p), split(r)) for p, r in zip(preds, refs, strict=True)]
        assert np.array_equal(got, np.array(want, dtype=np.float64)), name
    assert set_f1(["A b"], ["a B"], tokenizer="whitespace", lowercase=False)[0] == 0.0


# ----------------------------------------------------------------------------- API


def test_input_containers_and_to_polars():
    hyps = ["the cat sat", "a dog", ""]
    refs = ["the cat", "dogs", "x"]
    base = rouge(hyps, refs, types=["rouge1", "rougeL"])
    for h, r in (
        (tuple(hyps), tuple(refs)),
        (np.array(hyps, dtype=object), np.array(refs)),
        (pl.Series(hyps), pl.Series(refs)),
        (pa.array(hyps), pa.chunked_array([refs[:1], refs[1:]])),
    ):
        other = rouge(h, r, types=["rouge1", "rougeL"])
        assert np.array_equal(other.fmeasure("rouge1"), base["rouge1"].fmeasure)
    df = base.to_polars()
    assert df.columns == [
        "rouge1_precision", "rouge1_recall", "rouge1_fmeasure",
        "rougeL_precision", "rougeL_recall", "rougeL_fmeasure",
    ]  # fmt: skip
    assert df.height == 3 and df["rouge1_fmeasure"][0] == base.fmeasure("rouge1")[0]
    # "the cat sat" vs "the cat": LCS 2, P = 2/3, R = 1.
    assert base.precision("rougeL")[0] == 2 / 3 and base.recall("rougeL")[0] == 1.0


def test_validation_errors():
    with pytest.raises(ValueError, match=r"hyps\[1\] is null"):
        rouge(["a", None], ["a", "b"])
    with pytest.raises(ValueError, match=r"refs\[0\] is null"):
        rouge(["a"], pl.Series([None], dtype=pl.String))
    with pytest.raises(ValueError, match=r"hyps\[1\] is null \(NaN\)"):
        rouge(np.array(["a", np.nan], dtype=object), ["a", "b"])
    with pytest.raises(ValueError, match=r"refs\[2\] is null"):
        rouge(["a", "b", "c"], pa.array(["a", "b", None]), tokenizer="unicode")
    with pytest.raises(TypeError, match=r"hyps\[0\]: expected a str, got int"):
        rouge([3], ["a"])
    with pytest.raises(TypeError, match="two strings .* or two sequences"):
        rouge("abc", ["abc"])
    with pytest.raises(ValueError, match="same length, got 1 and 2"):
        rouge(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="invalid rouge type 'rouge0'"):
        rouge(["a"], ["a"], types=["rouge0"])
    with pytest.raises(ValueError, match="invalid rouge type 'rougeX'"):
        rouge_matrix(["a"], ["a"], type="rougeX")
    with pytest.raises(ValueError, match="duplicates"):
        rouge(["a"], ["a"], types=["rouge1", "rouge1"])
    with pytest.raises(ValueError, match="tokenizer"):
        rouge(["a"], ["a"], tokenizer="nltk")
    with pytest.raises(ValueError, match="stemmer"):
        rouge(["a"], ["a"], stemmer="snowball")
    with pytest.raises(ValueError, match="threads"):
        rouge(["a"], ["a"], threads=0)
    with pytest.raises(ValueError, match=r"refs\[1\] is null"):
        rouge_matrix(["a"], ["b", None])
    with pytest.raises(ValueError, match=r"hyps\[0\] is null"):
        token_f1([None], ["a"])
    with pytest.raises(ValueError, match=r"refs\[0\] is null"):
        set_f1(["a"], [None], tokenizer="treebank")
    with pytest.raises(ValueError, match="tokenizer: .* got 'lower'"):
        token_f1(["a"], ["a"], tokenizer="lower")
    with pytest.raises(KeyError, match="not computed"):
        rouge(["a"], ["a"], types=["rouge1"])["rougeL"]


def test_empty_inputs():
    res = rouge([], [], types=["rouge1", "rougeLsum"])
    assert len(res) == 0 and res["rouge1"].fmeasure.shape == (0,)
    assert token_f1([], []).shape == (0,) and set_f1([], []).shape == (0,)
    assert tokenize([]) == []


# ---- one vocabulary: hyps, refs and tokenizer= everywhere; one pair gives Python scalars ----


def test_one_pair_gives_python_scalars_equal_to_the_batch():
    from rouge_score import rouge_scorer

    hyp, ref = "The cat sat on the mat today", "a cat was sitting on the mat"
    one = rouge(hyp, ref, stemmer=True)
    want = rouge_scorer.RougeScorer(list(one.types), use_stemmer=True).score(ref, hyp)
    for t in one.types:
        assert type(one.fmeasure(t)) is float and one.fmeasure(t) == want[t].fmeasure
        assert one[t].precision == want[t].precision and one[t].recall == want[t].recall
        assert one.fmeasure(t) == rouge([hyp], [ref], stemmer=True).fmeasure(t)[0]
    assert len(one) == 1 and one.to_polars().height == 1 and one["rougeL"].to_polars().height == 1
    f1 = token_f1(hyp, ref)
    assert type(f1) is float and f1 == token_f1([hyp], [ref])[0] == _squad_v2_f1(hyp, ref)
    assert token_f1("The Cat", "the cat", tokenizer="whitespace") == 0.0
    s1 = set_f1(hyp, ref, tokenizer="whitespace")
    assert type(s1) is float and s1 == set_f1([hyp], [ref], tokenizer="whitespace")[0]
    assert tokenize("Hello, World") == ["hello", "world"] == tokenize(["Hello, World"])[0]


def test_rouge_matrix_takes_hyps_and_refs():
    m = rouge_matrix(hyps=["a b", "c"], refs=["a", "b c d"], type="rouge1")
    assert m.shape == (2, 2) and m.fmeasure[0, 0] == rouge("a b", "a").fmeasure("rouge1")
    with pytest.raises(TypeError):
        rouge_matrix(a=["a"], b=["a"])  # one vocabulary: the old names are gone
