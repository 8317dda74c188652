"""Text metrics for agent answers, with values identical to the reference libraries.

* ROUGE-N, ROUGE-L and ROUGE-Lsum identical to ``rouge-score`` (its tokenizer and its Porter
  stemmer: rouge-score 0.1.2 calls ``nltk.stem.porter.PorterStemmer()``, whose default mode is
  ``NLTK_EXTENSIONS``; the original 1980 algorithm is available as ``stemmer="porter-original"``),
  plus a ``unicode`` tokenizer for Chinese and other scripts written without spaces
  (rouge-score scores them 0), and the all-pairs ``rouge_matrix`` MedInsightBench matches
  insights with.
* Sentence and corpus BLEU identical to ``sacrebleu`` (tokenizers ``13a``, ``zh``, ``char``,
  ``none``; smoothing ``none``, ``floor``, ``add-k``, ``exp``), with per-item sufficient
  statistics that the bootstrap engine turns into corpus-BLEU confidence intervals.
* ``token_f1`` (SQuAD's multiset token F1) and ``set_f1`` (unique-token F1 as RadA-BenchPlat
  computes it).
* Edit metrics through rapidfuzz: ``one_minus_ned`` (MedBench v4) and Levenshtein distances
  over sequences of tool names (RadA-BenchPlat tool chains).
* ``iou`` for sets, axis-aligned boxes and binary masks.

Tokenizing and scoring run in C++ with the GIL released, in parallel over pairs.
"""

from __future__ import annotations

from ._bleu import (
    BleuResult,
    CorpusBleuResult,
    bleu,
    bleu_statistic_params,
    bleu_statistics,
    corpus_bleu,
)
from ._edit import levenshtein, one_minus_ned, sequence_levenshtein
from ._iou import box_iou, iou, mask_iou, set_iou
from ._rouge import RougeMatrix, RougeResult, rouge, rouge_matrix, set_f1, token_f1, tokenize

__all__ = [
    "BleuResult",
    "CorpusBleuResult",
    "RougeMatrix",
    "RougeResult",
    "bleu",
    "bleu_statistic_params",
    "bleu_statistics",
    "corpus_bleu",
    "box_iou",
    "iou",
    "mask_iou",
    "set_iou",
    "levenshtein",
    "one_minus_ned",
    "rouge",
    "rouge_matrix",
    "sequence_levenshtein",
    "set_f1",
    "token_f1",
    "tokenize",
]
