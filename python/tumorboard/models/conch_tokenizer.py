"""CONCH's text tokenizer through the ``tokenizers`` package.

CONCH ships a byte-level BPE tokenizer as a Hugging Face tokenizer JSON
(``conch_byte_level_bpe_uncased.json``: 32007 ids, NFD + StripAccents + Lowercase normaliser,
ByteLevel pre-tokenizer). Users supply that file; this module applies CONCH's encoding rules
(mahmoodlab/CONCH ``conch/open_clip_custom/custom_tokenizer.py``@141cc09) on top of it:

1. normalise and split the text with the JSON's own normaliser, pre-tokenizer and BPE model
   (no special tokens from its post-processor);
2. keep at most ``max_length - 2`` = 125 text ids (truncation from the right);
3. ``<start_of_text>`` + ids + ``<end_of_text>`` (the end marker survives truncation);
4. right-pad with ``<pad>`` to ``max_length`` = 127;
5. append one more ``<pad>``: 128 ids, the input of the text tower (which drops the last one).

Special ids are looked up in the tokenizer by their content (``<pad>``, ``<start_of_text>``,
``<end_of_text>``; 0, 1 and 2 in the released file).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import (
    InvalidArgumentError,
    InvalidTypeError,
    MissingDependencyError,
    MissingFileError,
)

__all__ = ["ConchTokenizer"]

PAD_TOKEN = "<pad>"
BOS_TOKEN = "<start_of_text>"
EOS_TOKEN = "<end_of_text>"


class ConchTokenizer:
    """Encodes text the way CONCH's ``tokenize`` does: ``tok(texts) -> int64 [N, 128]``.

    Parameters
    ----------
    path : str or os.PathLike
        The tokenizer JSON (``conch_byte_level_bpe_uncased.json``).
    max_length : int, default 127
        Ids before the extra pad (127 in CONCH).
    """

    def __init__(self, path: str | os.PathLike[str], *, max_length: int = 127) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - tokenizers is in the embed extra
            raise MissingDependencyError.for_extra(
                "ConchTokenizer", package="tokenizers", extra="embed", cause=exc
            ) from exc
        p = Path(path)
        if not p.is_file():
            raise MissingFileError(f"tokenizer JSON not found: {p}")
        if max_length < 3:
            raise InvalidArgumentError(
                f"max_length: expected at least 3 (BOS, EOS, one token), got {max_length}"
            )
        try:
            self._tok = Tokenizer.from_file(str(p))
        except Exception as exc:
            raise InvalidArgumentError(f"{p}: not a readable tokenizer JSON ({exc})") from exc
        self._tok.no_truncation()
        self._tok.no_padding()
        self.path = p
        self.max_length = int(max_length)
        ids = {}
        for name, token in (("pad", PAD_TOKEN), ("bos", BOS_TOKEN), ("eos", EOS_TOKEN)):
            tid = self._tok.token_to_id(token)
            if tid is None:
                raise InvalidArgumentError(
                    f"{p}: the tokenizer has no {token!r} token; is this CONCH's?"
                )
            ids[name] = int(tid)
        self.pad_id, self.bos_id, self.eos_id = ids["pad"], ids["bos"], ids["eos"]

    @property
    def context_length(self) -> int:
        """Ids per encoded text (``max_length + 1``)."""
        return self.max_length + 1

    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included (32007 in the released file)."""
        return int(self._tok.get_vocab_size(with_added_tokens=True))

    def encode(self, texts: str | Sequence[str]) -> np.ndarray:
        """Return the token ids ``int64 [N, max_length + 1]`` of one text or a sequence of texts."""
        if isinstance(texts, str):
            texts = [texts]
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InvalidTypeError(f"texts[{i}]: expected a str, got {type(t).__name__}")
        out = np.full((len(texts), self.context_length), self.pad_id, dtype=np.int64)
        if not texts:
            return out
        keep = self.max_length - 2
        for row, enc in enumerate(self._tok.encode_batch(texts, add_special_tokens=False)):
            body = enc.ids[:keep]
            out[row, 0] = self.bos_id
            out[row, 1 : 1 + len(body)] = body
            out[row, 1 + len(body)] = self.eos_id
        return out

    __call__ = encode

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        """Return the text of one row of ids, special tokens removed."""
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=True)

    def __repr__(self) -> str:
        return f"ConchTokenizer({str(self.path)!r}, vocab_size={self.vocab_size})"
