"""Tests of segment ids from token ids (python/tumorboard/seqmask.py over csrc/seqmask/).

Oracles: a plain-Python leftmost-longest scanner written here (``_reference``), hand-worked
examples, and, for ``marker_token_ids``, character-level labels of a real text mapped through a
Hugging Face fast tokenizer's offset mapping (a byte-level BPE trained in the test, nothing
downloaded).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from tumorboard import seqmask

# Token alphabet of the synthetic streams: 1 "Thought", 2 ":", 3 "Action", 4 " Input",
# 5 "Observation", 6 and 0 filler. "Action" alone (3) is a prefix of "Action Input:" (3, 4, 2)
# and " Input:" (4, 2) is a suffix of it: both must lose against the longest marker.
MARKERS = {
    "thought": [[1, 2], [4, 2]],
    "action": [[3, 2], [3]],
    "action_input": [[3, 4, 2]],
    "observation": [[5, 2]],
}


def _reference(ids: list[int], markers: dict, mark_markers: bool) -> list[int]:
    """Leftmost-longest scan: at each position take the longest marker starting there."""
    pats = [(tuple(v), seqmask.SEGMENT_LABELS[k]) for k, vs in markers.items() for v in vs]
    found = []
    i = 0
    while i < len(ids):
        best = None
        for pat, lab in pats:
            if tuple(ids[i : i + len(pat)]) == pat and (best is None or len(pat) > len(best[0])):
                best = (pat, lab)
        if best is None:
            i += 1
            continue
        found.append((i, i + len(best[0]), best[1]))
        i += len(best[0])
    seg = [0] * len(ids)
    for k, (start, end, lab) in enumerate(found):
        stop = found[k + 1][0] if k + 1 < len(found) else len(ids)
        for j in range(start if mark_markers else end, stop):
            seg[j] = lab
    return seg


def test_hand_worked_example() -> None:
    #         BOS  Thought :  a  b  Action  Input :  c  Obs :  d  Action :  e
    ids = [0, 1, 2, 7, 7, 3, 4, 2, 8, 5, 2, 9, 3, 2, 6]
    seg = seqmask.segment_ids(ids, markers=MARKERS)
    assert seg.dtype == np.int8
    assert seg.tolist() == [0, 0, 0, 1, 1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 2]
    seg = seqmask.segment_ids(ids, markers=MARKERS, mark_markers=True)
    assert seg.tolist() == [0, 1, 1, 1, 1, 3, 3, 3, 3, 0, 0, 0, 2, 2, 2]


def test_action_alone_is_a_prefix_marker() -> None:
    # "Action" (3) followed by " Input" without ":" is the one-token action variant, and the
    # span runs over " Input".
    assert seqmask.segment_ids([3, 4, 7], markers=MARKERS).tolist() == [0, 2, 2]
    assert seqmask.segment_ids([3, 4, 2, 7], markers=MARKERS).tolist() == [0, 0, 0, 3]


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("mark_markers", [False, True])
def test_random_streams_match_reference(dtype: type, mark_markers: bool) -> None:
    rng = np.random.default_rng(7)
    lengths = rng.integers(0, 60, size=300)
    lengths[:3] = [0, 1, 0]
    probs = np.array([0.2, 0.12, 0.2, 0.14, 0.14, 0.08, 0.12])
    ids = rng.choice(7, size=int(lengths.sum()), p=probs).astype(dtype)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    expected = np.concatenate(
        [
            np.asarray(
                _reference(ids[a:b].tolist(), MARKERS, mark_markers),
                dtype=np.int8,
            )
            for a, b in zip(offsets[:-1], offsets[1:], strict=True)
        ]
    )
    for threads in (1, 3):
        got = seqmask.segment_ids(
            ids, offsets, markers=MARKERS, mark_markers=mark_markers, threads=threads
        )
        np.testing.assert_array_equal(got, expected)
    assert set(np.unique(expected)) == {0, 1, 2, 3}


def test_sequences_do_not_leak_into_each_other() -> None:
    ids = [1, 2, 7, 7, 7]
    got = seqmask.segment_ids(ids, [0, 2, 5], markers=MARKERS)
    assert got.tolist() == [0, 0, 0, 0, 0]
    got = seqmask.segment_ids(np.array([[1, 2, 7], [7, 3, 2]]), markers=MARKERS)
    assert got.tolist() == [[0, 0, 1], [0, 0, 0]]


def test_ignore_ids_zero_without_breaking_spans() -> None:
    got = seqmask.segment_ids([1, 2, 7, 99, 7], markers=MARKERS, ignore_ids=[99])
    assert got.tolist() == [0, 0, 1, 0, 1]


def test_padded_left_and_right_with_torch() -> None:
    torch = pytest.importorskip("torch")
    ids = torch.tensor([[0, 0, 1, 2, 7], [1, 2, 7, 0, 0]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 0, 0]])
    seg = seqmask.segment_ids_padded(ids, mask, markers=MARKERS)
    assert isinstance(seg, torch.Tensor) and seg.dtype == torch.int8
    assert seg.tolist() == [[0, 0, 0, 0, 1], [0, 0, 1, 0, 0]]
    # Without a mask every position counts; numpy in, numpy out.
    seg = seqmask.segment_ids_padded(ids.numpy(), markers=MARKERS)
    assert isinstance(seg, np.ndarray)
    assert seg.tolist() == [[0, 0, 0, 0, 1], [0, 0, 1, 1, 1]]


def test_validation_errors() -> None:
    with pytest.raises(ValueError, match=r"offsets: expected to run from 0 to len\(input_ids\)"):
        seqmask.segment_ids([1, 2, 3], [0, 2], markers=MARKERS)
    with pytest.raises(ValueError, match="non-decreasing"):
        seqmask.segment_ids([1, 2, 3], [0, 2, 1, 3], markers=MARKERS)
    with pytest.raises(ValueError, match="unknown marker 'answer'"):
        seqmask.segment_ids([1, 2], markers={"answer": [1]})
    with pytest.raises(ValueError, match="both 'thought' and 'action'"):
        seqmask.segment_ids([1, 2], markers={"thought": [1], "action": [[1]]})
    with pytest.raises(ValueError, match="empty token sequence"):
        seqmask.segment_ids([1, 2], markers={"thought": [[1], []]})
    with pytest.raises(TypeError, match="integer token ids"):
        seqmask.segment_ids([1.5, 2.0], markers=MARKERS)
    with pytest.raises(ValueError, match="1-D"):
        seqmask.segment_ids(np.zeros((1, 1, 1), dtype=np.int64), markers=MARKERS)


TEXT = (
    "You are a pathology agent.\nThought: the slide shows glands\n"
    'Action: conch_zero_shot\nAction Input: {"labels": ["tumor"]}\n'
    "Observation: tumor 0.93 Thought: enough evidence. Action: answer Action Input:done"
)


def _tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([TEXT] * 5 + ["Thought:\nAction:\n"] * 5, trainer=trainer)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok)


def _char_labels(text: str, mark_markers: bool) -> list[int]:
    """Character-level oracle: label of every character of ``text``."""
    lab = [0] * len(text)
    hits = [
        (m.start(), m.end(), {"Thought:": 1, "Action:": 2, "Action Input:": 3}.get(m[0], 0))
        for m in re.finditer(r"Action Input:|Action:|Thought:|Observation:", text)
    ]
    for k, (s, e, v) in enumerate(hits):
        stop = hits[k + 1][0] if k + 1 < len(hits) else len(text)
        for j in range(s if mark_markers else e, stop):
            lab[j] = v
    return lab


@pytest.mark.parametrize("mark_markers", [False, True])
def test_marker_token_ids_on_a_real_tokenizer(mark_markers: bool) -> None:
    tok = _tokenizer()
    markers = seqmask.marker_token_ids(tok)
    assert set(markers) == set(seqmask.DEFAULT_MARKERS)
    for name, variants in markers.items():
        assert variants == tuple(sorted(set(variants)))
        for v in variants:
            assert tok.decode(list(v)).strip() == seqmask.DEFAULT_MARKERS[name].strip()
    # Line-start and after-space forms of "Thought:" tokenize differently here.
    assert len(markers["thought"]) >= 2
    enc = tok(TEXT, add_special_tokens=False, return_offsets_mapping=True)
    seg = seqmask.segment_ids(enc["input_ids"], markers=markers, mark_markers=mark_markers)
    chars = _char_labels(TEXT, mark_markers)
    # A token's label is the label of its last character (marker tokens may carry a merged
    # leading space, which the character oracle leaves unlabelled).
    expected = [chars[e - 1] for _, e in enc["offset_mapping"]]
    assert seg.tolist() == expected
    assert {1, 2, 3} <= set(seg.tolist())
