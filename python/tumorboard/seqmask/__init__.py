"""Segment ids from token ids: the masks of LAMMI-Pathology's trajectory-aware adapter.

LAMMI-Pathology (arXiv 2602.18773, its training figure) scales every FFN output by
``1 + γ_k`` where ``k`` is the segment of the token: the text after ``Thought:`` (1), after
``Action:`` (2) and after ``Action Input:`` (3); everything else (image tokens, BOS, the prompt
before the first marker) gets 0. This module computes those ids for a batch of token sequences in
the C++ core (``csrc/seqmask/``): one Aho-Corasick pass per sequence over all marker
tokenizations at once (Aho & Corasick, CACM 18(6), 1975), sequences in parallel.

Rules (the paper's figure leaves them open; these are our choices):

* Overlapping marker occurrences resolve **leftmost-longest**: ``Action Input:`` is one marker,
  never ``Action`` followed by text, whatever prefix the two tokenizations share.
* A span runs from its marker to the next marker or the end of the sequence. ``Observation:``
  (label 0) closes the open span: the tool output after it is 0 until the next marker.
* **Marker tokens themselves** get 0 by default (the figure marks "the text after" a marker);
  with ``mark_markers=True`` they get their span's label (``Observation:`` stays 0 either way).
* Token ids listed in ``ignore_ids`` (image placeholder tokens, BOS, padding) are set to 0 after
  matching; they neither open nor close spans.

Typical use::

    from tumorboard import seqmask

    markers = seqmask.marker_token_ids(tokenizer)          # every tokenization variant
    seg = seqmask.segment_ids(ids, offsets, markers=markers)            # int8 [T]
    seg = seqmask.segment_ids_padded(batch["input_ids"], batch["attention_mask"],
                                     markers=markers)                    # int8 [B, L]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .. import _core
from ..errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "DEFAULT_MARKERS",
    "SEGMENT_LABELS",
    "marker_token_ids",
    "segment_ids",
    "segment_ids_padded",
]

SEGMENT_LABELS: Mapping[str, int] = {"thought": 1, "action": 2, "action_input": 3, "observation": 0}
"""Segment id of each marker name; 0 (``observation``) closes the open span."""

DEFAULT_MARKERS: Mapping[str, str] = {
    "thought": "Thought:",
    "action": "Action:",
    "action_input": "Action Input:",
    "observation": "Observation:",
}
"""The ReAct markers of LAMMI-Pathology's trajectories (and ``Observation:``, which ends a span)."""

# Contexts a marker is tokenized in by marker_token_ids: (text before, text after). Before: start
# of the text, after a word and a space, at the start of a line, after a blank line. After:
# nothing, a space, a newline, a word (catches tokenizers that merge ":" with what follows).
_BEFORE = ("", "ok ", "ok\n", "ok\n\n")
_AFTER = ("", " ", "\n", " I")

MarkerIds = Mapping[str, Sequence[int] | Sequence[Sequence[int]]]


def _is_torch(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _as_int_array(x: Any, name: str) -> np.ndarray:
    if _is_torch(x):
        x = x.detach().cpu().numpy()
    arr = np.asarray(x)
    if arr.size == 0 and arr.dtype.kind not in "iu":
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise InvalidTypeError(f"{name}: expected integer token ids, got dtype {arr.dtype}")
    return arr


def _compile(markers: MarkerIds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flatten ``markers`` into (patterns, pattern_offsets, labels) for the C++ matcher."""
    if not isinstance(markers, Mapping) or not markers:
        raise InvalidTypeError(
            "markers: expected a non-empty mapping name -> token ids (or a list of token-id "
            f"variants), names from {sorted(SEGMENT_LABELS)}"
        )
    seen: dict[tuple[int, ...], str] = {}
    patterns: list[int] = []
    offsets = [0]
    labels: list[int] = []
    for name, value in markers.items():
        if name not in SEGMENT_LABELS:
            raise InvalidArgumentError(
                f"markers: unknown marker {name!r}; expected {sorted(SEGMENT_LABELS)}"
            )
        items = list(value)
        if not items:
            raise InvalidArgumentError(f"markers[{name!r}] is empty")
        variants = items if not isinstance(items[0], (int, np.integer)) else [items]
        for variant in variants:
            try:
                key = tuple(int(t) for t in variant)
            except TypeError as exc:
                raise InvalidTypeError(
                    f"markers[{name!r}]: expected token ids or a list of token-id lists"
                ) from exc
            if not key:
                raise InvalidArgumentError(f"markers[{name!r}] has an empty token sequence")
            if key in seen:
                if seen[key] != name:
                    raise InvalidArgumentError(
                        f"markers: token sequence {list(key)} is both {seen[key]!r} and {name!r}"
                    )
                continue
            seen[key] = name
            patterns.extend(key)
            offsets.append(len(patterns))
            labels.append(SEGMENT_LABELS[name])
    return (
        np.asarray(patterns, dtype=np.int64),
        np.asarray(offsets, dtype=np.int64),
        np.asarray(labels, dtype=np.int8),
    )


def _ignore(seg: np.ndarray, ids: np.ndarray, ignore_ids: Sequence[int]) -> None:
    if len(ignore_ids):
        seg[np.isin(ids, np.asarray(list(ignore_ids), dtype=np.int64))] = 0


def segment_ids(
    input_ids: Any,
    offsets: Any = None,
    *,
    markers: MarkerIds,
    mark_markers: bool = False,
    ignore_ids: Sequence[int] = (),
    threads: int = 0,
) -> np.ndarray:
    """Compute the segment id (0 none, 1 thought, 2 action, 3 action input) of every token.

    Parameters
    ----------
    input_ids : array_like of int
        Token ids, int32 or int64 (numpy, torch or a list): 1-D ``[T]`` holding the sequences of
        a variable-length batch back to back, or 2-D ``[B, L]`` (B sequences of length L, no
        padding; see :func:`segment_ids_padded` for padded batches).
    offsets : array_like of int or None, default None
        ``[B + 1]`` sequence boundaries into a 1-D ``input_ids`` (``offsets[0] == 0``,
        ``offsets[-1] == T``, non-decreasing); None: one sequence (1-D) or the rows (2-D).
    markers : Mapping
        Name -> token ids, or name -> list of token-id variants; names from
        :data:`SEGMENT_LABELS` (``thought``, ``action``, ``action_input``, ``observation``).
        :func:`marker_token_ids` builds it from a tokenizer.
    mark_markers : bool, default False
        Give the marker tokens their span's label (default: 0, the span starts after the
        marker).
    ignore_ids : sequence of int, default ()
        Token ids forced to 0 (image tokens, BOS, padding); they do not break spans.
    threads : int, default 0
        Worker threads over sequences (0: all cores). The result does not depend on it.

    Returns
    -------
    numpy.ndarray
        int8 array shaped like ``input_ids``. Spans run from a marker to the next marker or the
        end of the sequence; ``Observation:`` closes a span; overlapping markers resolve
        leftmost-longest (module docstring).
    """
    ids = _as_int_array(input_ids, "input_ids")
    shape = ids.shape
    if ids.ndim == 2:
        if offsets is not None:
            raise InvalidArgumentError("offsets: expected None when input_ids is 2-D [B, L]")
        b, length = shape
        off = np.arange(b + 1, dtype=np.int64) * length
        ids = ids.reshape(-1)
    elif ids.ndim == 1:
        if offsets is None:
            off = np.asarray([0, ids.shape[0]], dtype=np.int64)
        else:
            off = _as_int_array(offsets, "offsets").astype(np.int64, copy=False)
            if off.ndim != 1 or off.shape[0] < 1:
                raise InvalidArgumentError(
                    f"offsets: expected a 1-D [B + 1] array, got shape {off.shape}"
                )
            if off[0] != 0 or off[-1] != ids.shape[0]:
                raise InvalidArgumentError(
                    f"offsets: expected to run from 0 to len(input_ids) = {ids.shape[0]}, "
                    f"got {int(off[0])} .. {int(off[-1])}"
                )
            if np.any(np.diff(off) < 0):
                raise InvalidArgumentError("offsets: expected non-decreasing values")
    else:
        raise InvalidArgumentError(
            f"input_ids: expected a 1-D [T] or 2-D [B, L] array, got shape {shape}"
        )
    if not isinstance(threads, (int, np.integer)) or threads < 0:
        raise InvalidArgumentError(f"threads: expected an integer >= 0, got {threads!r}")
    if ids.dtype != np.int32:
        ids = ids.astype(np.int64, copy=False)
    patterns, pattern_offsets, labels = _compile(markers)
    seg = _core.seqmask.segment_ids(
        np.ascontiguousarray(ids),
        np.ascontiguousarray(off),
        patterns,
        pattern_offsets,
        labels,
        bool(mark_markers),
        int(threads),
    )
    _ignore(seg, ids, ignore_ids)
    return seg.reshape(shape)


def segment_ids_padded(
    input_ids: Any,
    attention_mask: Any = None,
    *,
    markers: MarkerIds,
    mark_markers: bool = False,
    ignore_ids: Sequence[int] = (),
    threads: int = 0,
) -> Any:
    """Compute :func:`segment_ids` of a padded ``[B, L]`` batch; padding gets 0.

    Each row's sequence is its attended tokens in order, so left and right padding both work.

    Parameters
    ----------
    input_ids : array_like of int
        ``[B, L]`` token ids (numpy, torch or a list).
    attention_mask : array_like or None, default None
        ``[B, L]``; tokens where it is 0 are padding. None: no padding.
    markers, mark_markers, ignore_ids, threads
        As in :func:`segment_ids`.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        ``[B, L]`` int8: a torch tensor on ``input_ids``' device when ``input_ids`` is a torch
        tensor, else a numpy array.
    """
    ids = _as_int_array(input_ids, "input_ids")
    if ids.ndim != 2:
        raise InvalidArgumentError(f"input_ids: expected a 2-D [B, L] array, got shape {ids.shape}")
    if attention_mask is None:
        seg = segment_ids(
            ids,
            markers=markers,
            mark_markers=mark_markers,
            ignore_ids=ignore_ids,
            threads=threads,
        )
    else:
        mask = np.asarray(_numpy(attention_mask))
        if mask.shape != ids.shape:
            raise InvalidArgumentError(
                f"attention_mask shape {mask.shape} does not match input_ids shape {ids.shape}"
            )
        keep = mask != 0
        off = np.zeros(ids.shape[0] + 1, dtype=np.int64)
        np.cumsum(keep.sum(axis=1), out=off[1:])
        flat = segment_ids(
            ids[keep],
            off,
            markers=markers,
            mark_markers=mark_markers,
            ignore_ids=ignore_ids,
            threads=threads,
        )
        seg = np.zeros(ids.shape, dtype=np.int8)
        seg[keep] = flat
    if _is_torch(input_ids):
        import torch

        return torch.from_numpy(seg).to(input_ids.device)
    return seg


def _numpy(x: Any) -> Any:
    return x.detach().cpu().numpy() if _is_torch(x) else x


def marker_token_ids(
    tokenizer: Any, strings: Mapping[str, str] = DEFAULT_MARKERS
) -> dict[str, tuple[tuple[int, ...], ...]]:
    r"""Find every token-id sequence a Hugging Face fast tokenizer produces for each marker.

    BPE and SentencePiece tokenizers split the same marker differently by context: ``Thought:``
    at the start of the text or of a line is typically ``["Thought", ":"]`` (LLaMA:
    ``["▁Thought", ":"]`` at the start, ``["Th", "ought", ":"]`` after a newline) while after a
    space it is ``["ĠThought", ":"]`` (GPT-2/Qwen2 byte-level BPE), and some vocabularies merge
    the colon with what follows (``":\n"``). Each marker is therefore tokenized in the contexts
    (start of text, after ``"ok "``, after ``"ok\n"``, after ``"ok\n\n"``) x (followed by
    nothing, a space, a newline, ``" I"``), and the tokens whose character span (offset mapping)
    overlaps the marker are kept as one variant. A variant can thus include a merged leading
    space or a merged trailing ``":\n"``; those tokens count as marker tokens (0 unless
    ``mark_markers``). Variants containing the unknown token are dropped. Contexts not listed
    (e.g. a marker glued to the previous word) are not detected.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerFast
        A ``transformers`` fast tokenizer (needs ``return_offsets_mapping``).
    strings : Mapping of str to str, default DEFAULT_MARKERS
        Marker name -> string.

    Returns
    -------
    dict of str to tuple of tuple of int
        Name -> sorted, distinct token-id variants, ready for ``segment_ids(markers=...)``.
    """
    if not isinstance(strings, Mapping) or not strings:
        raise InvalidTypeError("strings: expected a non-empty mapping marker name -> marker string")
    unk = getattr(tokenizer, "unk_token_id", None)
    out: dict[str, tuple[tuple[int, ...], ...]] = {}
    for name, text in strings.items():
        if name not in SEGMENT_LABELS:
            raise InvalidArgumentError(
                f"strings: unknown marker {name!r}; expected {sorted(SEGMENT_LABELS)}"
            )
        if not isinstance(text, str) or not text.strip():
            raise InvalidArgumentError(
                f"strings[{name!r}]: expected a non-empty string, got {text!r}"
            )
        variants: set[tuple[int, ...]] = set()
        for before in _BEFORE:
            for after in _AFTER:
                full = before + text + after
                lo, hi = len(before), len(before) + len(text)
                try:
                    enc = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
                except NotImplementedError as exc:
                    raise InvalidTypeError(
                        "tokenizer: expected a Hugging Face fast tokenizer (offset mappings), got "
                        f"{type(tokenizer).__name__}"
                    ) from exc
                ids = enc["input_ids"]
                spans = enc["offset_mapping"]
                variant = tuple(
                    int(t)
                    for t, (s, e) in zip(ids, spans, strict=True)
                    if s < e and s < hi and e > lo
                )
                if variant and (unk is None or unk not in variant):
                    variants.add(variant)
        if not variants:
            raise InvalidArgumentError(
                f"tokenizer produced no tokens for marker {name!r} ({text!r})"
            )
        out[name] = tuple(sorted(variants))
    return out
