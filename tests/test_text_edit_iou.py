"""Tests of the edit metrics (python/tumorboard/_edit.py) and IoU (python/tumorboard/_iou.py).

Oracles: rapidfuzz called directly (the functions must only wrap it) and hand-worked examples
written out below.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from rapidfuzz.distance import Levenshtein
from tumorboard.text._edit import levenshtein, one_minus_ned, sequence_levenshtein
from tumorboard.text._iou import box_iou, iou, mask_iou, set_iou

TOOLS = ["Anatomy Classifier", "Modality Classifier", "Organ Segmentor", "Anomaly Detector",
         "Disease Inferencer", "Report Generator"]  # fmt: skip


def random_chains(rng: random.Random, n: int) -> list[list[str]]:
    return [[rng.choice(TOOLS) for _ in range(rng.randint(0, 8))] for _ in range(n)]


def random_strings(rng: random.Random, n: int, alphabet: str = "abcde肝癌影像") -> list[str]:
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(n)]


# ----------------------------------------------------------------------------------- levenshtein


def test_levenshtein_hand_cases() -> None:
    assert levenshtein("kitten", "sitting") == 3  # k->s, e->i, +g
    assert levenshtein([], []) == 0
    assert levenshtein(["a", "b"], []) == 2
    # element level: one multi-character tool name is one element
    gt = ["Anatomy Classifier", "Modality Classifier", "Organ Segmentor"]
    assert levenshtein(gt, ["Anatomy Classifier", "Organ Segmentor"]) == 1  # one deletion
    assert levenshtein(gt, ["Modality Classifier", "Anatomy Classifier", "Organ Segmentor"]) == 2
    assert levenshtein(["ab"], ["a", "b"]) == 2  # not character level
    # substitution cost 2 makes a substitution a deletion plus an insertion
    assert levenshtein(["a"], ["b"], weights=(1, 1, 2)) == 2


def test_levenshtein_matches_rapidfuzz() -> None:
    rng = random.Random(1)
    a, b = random_chains(rng, 300), random_chains(rng, 300)
    expected = [Levenshtein.distance(x, y) for x, y in zip(a, b, strict=True)]
    assert [levenshtein(x, y) for x, y in zip(a, b, strict=True)] == expected
    got = sequence_levenshtein(a, b)
    assert got.dtype == np.int64
    assert got.tolist() == expected
    s, t = random_strings(rng, 200), random_strings(rng, 200)
    assert sequence_levenshtein(s, t).tolist() == [
        Levenshtein.distance(x, y) for x, y in zip(s, t, strict=True)
    ]
    w = (2, 1, 3)
    assert sequence_levenshtein(a, b, weights=w).tolist() == [
        Levenshtein.distance(x, y, weights=w) for x, y in zip(a, b, strict=True)
    ]


def test_sequence_levenshtein_pairwise_matrix() -> None:
    rng = random.Random(2)
    a, b = random_chains(rng, 7), random_chains(rng, 5)
    m = sequence_levenshtein(a, b, pairwise=True)
    assert m.shape == (7, 5)
    for i in range(7):
        for j in range(5):
            assert m[i, j] == Levenshtein.distance(a[i], b[j])
    assert sequence_levenshtein([], [["x"]], pairwise=True).shape == (0, 1)
    assert sequence_levenshtein([], []).shape == (0,)


def test_levenshtein_errors() -> None:
    with pytest.raises(ValueError, match="same number of items"):
        sequence_levenshtein([["a"]], [["a"], ["b"]])
    with pytest.raises(TypeError, match=r"hyps\[1\]"):
        sequence_levenshtein([["a"], None], [["a"], ["b"]])
    with pytest.raises(TypeError, match="ordered sequence"):
        levenshtein({"a", "b"}, ["a"])
    with pytest.raises(ValueError, match="weights"):
        levenshtein("a", "b", weights=(1, 1))


# --------------------------------------------------------------------------------- 1 - NED


def test_one_minus_ned_hand_cases() -> None:
    assert one_minus_ned("kitten", "sitting") == pytest.approx(1 - 3 / 7)
    assert type(one_minus_ned("kitten", "sitting")) is float  # one pair: a Python scalar
    assert float(one_minus_ned("abc", "abc")) == 1.0
    # a long wrong answer: d = 6 > |ref| = 2, 1 - 6/2 = -2 is clipped at 0
    assert float(one_minus_ned("abcdefgh", "ab")) == 0.0
    # Chinese, character level: 肝癌 vs 肝脏癌: one insertion, |ref| = 3
    assert float(one_minus_ned("肝癌", "肝脏癌")) == pytest.approx(2 / 3)
    # empty reference: 1 when the prediction is empty too, else 0; `empty` overrides the first
    out = one_minus_ned(["", "x", ""], ["", "", "ab"])
    assert out.tolist() == [1.0, 0.0, 0.0]
    assert math.isnan(float(one_minus_ned("", "", empty=float("nan"))))
    # token sequences: one batch item per list
    assert one_minus_ned([["a", "b", "c", "d"]], [["a", "x", "c", "d"]]).tolist() == [0.75]


def test_one_minus_ned_matches_definition_with_rapidfuzz() -> None:
    rng = random.Random(3)
    p, r = random_strings(rng, 500), random_strings(rng, 500)
    expected = []
    for x, y in zip(p, r, strict=True):
        if len(y) == 0:
            expected.append(1.0 if len(x) == 0 else 0.0)
        else:
            expected.append(max(0.0, 1.0 - Levenshtein.distance(x, y) / len(y)))
    got = one_minus_ned(p, r)
    assert got.shape == (500,)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-15)
    assert ((got >= 0) & (got <= 1)).all()


def test_one_minus_ned_errors() -> None:
    with pytest.raises(ValueError, match="same number"):
        one_minus_ned(["a", "b"], ["a"])
    with pytest.raises(TypeError, match="None"):
        one_minus_ned(None, "a")


# ------------------------------------------------------------------------------------------ IoU


def test_set_iou_hand_cases() -> None:
    assert set_iou({"a", "b", "c"}, ["b", "c", "d"]) == 0.5  # 2 / 4
    assert set_iou(["a", "a"], ["a"]) == 1.0  # duplicates ignored
    assert set_iou({1}, {2}) == 0.0
    assert set_iou(set(), set()) == 1.0
    assert math.isnan(set_iou([], [], empty=float("nan")))
    assert iou({1, 2, 3}, {2, 3, 4}) == 0.5
    batch = iou([[1, 2], [3], []], [[2], [3], []], kind="set")
    assert batch.tolist() == [0.5, 1.0, 1.0]
    mat = iou([{1, 2}, {3}], [{2}, {3}, {4}], kind="set", pairwise=True)
    np.testing.assert_array_equal(mat, [[0.5, 0.0, 0.0], [0.0, 1.0, 0.0]])
    with pytest.raises(TypeError):
        set_iou("abc", {"a"})


def test_box_iou_hand_cases() -> None:
    # overlap 1x1, areas 4 and 4: 1 / 7
    assert float(box_iou([0, 0, 2, 2], [1, 1, 3, 3])) == pytest.approx(1 / 7)
    # containment: 1 / 16
    assert float(box_iou([0, 0, 4, 4], [1, 1, 2, 2])) == pytest.approx(1 / 16)
    # touching edges: zero-area intersection
    assert float(box_iou([0, 0, 1, 1], [1, 0, 2, 1])) == 0.0
    # half overlap along x: inter 1*2 = 2, union 4 + 4 - 2 = 6
    assert float(box_iou([0, 0, 2, 2], [1, 0, 3, 2])) == pytest.approx(1 / 3)
    # zero-area boxes: union 0 -> `empty`
    assert float(box_iou([1, 1, 1, 1], [1, 1, 1, 1])) == 1.0
    assert float(box_iou([1, 1, 1, 1], [2, 2, 2, 2], empty=0.0)) == 0.0
    # a degenerate box against a real one: union = 4, IoU 0
    assert float(box_iou([0, 0, 0, 0], [0, 0, 2, 2])) == 0.0
    # broadcasting (4,) against (n, 4)
    got = box_iou([0, 0, 2, 2], [[1, 1, 3, 3], [0, 0, 2, 2], [5, 5, 6, 6]])
    np.testing.assert_allclose(got, [1 / 7, 1.0, 0.0])


def test_box_iou_pairwise_matches_elementwise() -> None:
    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 10, size=(6, 2))
    a = np.hstack([xy, xy + rng.uniform(0, 5, size=(6, 2))])
    xy = rng.uniform(0, 10, size=(4, 2))
    b = np.hstack([xy, xy + rng.uniform(0, 5, size=(4, 2))])
    m = box_iou(a, b, pairwise=True)
    assert m.shape == (6, 4)
    for i in range(6):
        for j in range(4):
            x1, y1 = max(a[i, 0], b[j, 0]), max(a[i, 1], b[j, 1])
            x2, y2 = min(a[i, 2], b[j, 2]), min(a[i, 3], b[j, 3])
            inter = max(0.0, x2 - x1) * max(0.0, y2 - y1)
            area_a = (a[i, 2] - a[i, 0]) * (a[i, 3] - a[i, 1])
            area_b = (b[j, 2] - b[j, 0]) * (b[j, 3] - b[j, 1])
            assert m[i, j] == pytest.approx(inter / (area_a + area_b - inter), abs=1e-12)
    np.testing.assert_allclose(box_iou(a[:4], b), np.diag(m[:4]))
    assert iou(a, b, kind="box", pairwise=True).shape == (6, 4)


def test_box_iou_errors() -> None:
    with pytest.raises(ValueError, match="x2 < x1"):
        box_iou([2, 0, 1, 1], [0, 0, 1, 1])
    with pytest.raises(ValueError, match="shape"):
        box_iou([0, 0, 1], [0, 0, 1, 1])
    with pytest.raises(ValueError, match="NaN"):
        box_iou([0, 0, np.nan, 1], [0, 0, 1, 1])


def test_mask_iou_hand_cases() -> None:
    a = np.zeros((4, 4), dtype=bool)
    b = np.zeros((4, 4), dtype=bool)
    a[0:2, 0:2] = True  # 4 pixels
    b[1:3, 1:3] = True  # 4 pixels, 1 shared
    assert float(mask_iou(a, b)) == pytest.approx(1 / 7)
    assert float(mask_iou(a, a)) == 1.0
    empty = np.zeros((4, 4), dtype=bool)
    assert float(mask_iou(empty, empty)) == 1.0
    assert math.isnan(float(mask_iou(empty, empty, empty=float("nan"))))
    assert float(mask_iou(a, empty)) == 0.0
    # batched (n, H, W) against one (H, W) target
    stack = np.stack([a, b, empty])
    np.testing.assert_allclose(mask_iou(stack, a), [1.0, 1 / 7, 0.0])
    # pairwise matrix
    m = mask_iou(stack, np.stack([a, b]), pairwise=True)
    np.testing.assert_allclose(m, [[1.0, 1 / 7], [1 / 7, 1.0], [0.0, 0.0]])
    # 0/1 integer masks are accepted; other integers are not
    assert float(mask_iou(a.astype(np.uint8), b.astype(np.int64))) == pytest.approx(1 / 7)
    with pytest.raises(ValueError, match="0 and 1"):
        mask_iou(a.astype(int) * 2, b)
    with pytest.raises(ValueError, match=r"\(H, W\)"):
        mask_iou(a, np.zeros((3, 4), dtype=bool))
    # auto: bool arrays are masks
    assert float(iou(a, b)) == pytest.approx(1 / 7)


def test_iou_auto_dispatch_and_errors() -> None:
    assert float(iou(np.array([0, 0, 2, 2]), np.array([1, 1, 3, 3]))) == pytest.approx(1 / 7)
    with pytest.raises(TypeError, match="kind="):
        iou("abc", "abd")
    with pytest.raises(ValueError, match="kind"):
        iou({1}, {1}, kind="circle")  # type: ignore[arg-type]


def test_text_facade_reexports() -> None:
    text = pytest.importorskip("tumorboard.text", exc_type=ImportError)
    assert text.one_minus_ned is one_minus_ned
    assert text.levenshtein is levenshtein
    assert text.sequence_levenshtein is sequence_levenshtein
    assert text.iou is iou


# ---- one vocabulary: hyps, refs, tokenizer=, threads=; one pair gives a Python scalar ----


def test_edit_metrics_take_hyps_refs_tokenizer_and_threads() -> None:
    hyps = ["the tumour is large", "no metastasis seen", ""]
    refs = ["the tumor is large", "metastasis seen", ""]
    chars = one_minus_ned(hyps=hyps, refs=refs, threads=1)
    assert chars.tolist() == one_minus_ned(hyps, refs, threads=None).tolist()
    # word level: "tumour" vs "tumor" is one substituted word of 4; "no" one deleted word of 2
    words = one_minus_ned(hyps, refs, tokenizer="whitespace")
    assert words.tolist() == [0.75, 0.5, 1.0]
    assert one_minus_ned(hyps, refs, tokenizer="rouge").tolist() == [0.75, 0.5, 1.0]
    assert sequence_levenshtein(hyps, refs, tokenizer="whitespace").tolist() == [1, 1, 0]
    assert levenshtein("no metastasis seen", "metastasis seen", tokenizer="whitespace") == 1
    assert levenshtein(hyp="kitten", ref="sitting") == 3
    d = sequence_levenshtein("kitten", "sitting")
    assert type(d) is int and d == 3  # one pair of strings: a scalar
    with pytest.raises(TypeError):
        one_minus_ned(preds=hyps, refs=refs)  # the old name is gone
    with pytest.raises(TypeError):
        sequence_levenshtein(hyps, refs, workers=2)
    with pytest.raises(ValueError, match="tokenizer"):
        one_minus_ned(hyps, refs, tokenizer="bpe")
    with pytest.raises(ValueError, match="threads"):
        one_minus_ned(hyps, refs, threads=0)


def test_one_box_or_mask_pair_gives_a_python_float() -> None:
    one = box_iou([0, 0, 2, 2], [1, 1, 3, 3])
    assert type(one) is float and one == pytest.approx(1 / 7)
    assert isinstance(box_iou([[0, 0, 2, 2]], [[1, 1, 3, 3]]), np.ndarray)
    a = np.zeros((4, 4), dtype=bool)
    a[:2, :2] = True
    assert type(mask_iou(a, a)) is float and type(iou(a, a, kind="mask")) is float
    assert mask_iou(a[None], a[None]).shape == (1,)
