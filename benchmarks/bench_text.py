"""Benchmark ``tumorboard.text`` against rouge-score, sacrebleu and plain Python on the same data.

Workloads (anchors measured in the same run, on the same generated texts):

* **ROUGE-1 + ROUGE-L**, 10k pairs of about 25 words, without and with the Porter stemmer:
  ``rouge_score.rouge_scorer.RougeScorer(["rouge1", "rougeL"]).score`` in a loop.
* **sentence BLEU**, 10k pairs: one reused ``sacrebleu.metrics.BLEU(effective_order=True)``
  and its ``sentence_score`` in a loop.
* **corpus BLEU**, 10k pairs: ``sacrebleu.corpus_bleu``.
* **ROUGE-1 all-pairs matrix**, 50 x 50 insights (MedInsightBench matching): rouge-score called
  per pair, and a plain-Python matrix (texts tokenized once with rouge-score's tokenizer, then
  ``collections.Counter`` overlaps per pair).

Every workload checks that tumorboard's values are identical (``==``) to the anchor's; the verdict
is in the ``check`` column. ``ratio`` = anchor time / tumorboard time.

Usage (from the repository root)::

    python benchmarks/bench_text.py [--quick] [--json PATH] [--threads N]
    python -m benchmarks.bench_text --quick
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

try:
    from ._timing import Result, best_of, format_markdown, positive_int, write_json
except ImportError:  # run as a script: ``python benchmarks/bench_text.py``
    from _timing import Result, best_of, format_markdown, positive_int, write_json

ANCHOR_ROUGE = "rouge-score"
ANCHOR_SACRE = "sacrebleu"
ANCHOR_PYTHON = "plain Python"
ANCHORS = (ANCHOR_ROUGE, ANCHOR_SACRE, ANCHOR_PYTHON)
SEED = 0
MAX_TIME = 12.0

_STEMS = (
    "tumor", "patient", "biopsy", "stain", "cell", "margin", "node", "grade", "stage", "therapy",
    "respons", "surviv", "recur", "metastas", "lesion", "imag", "report", "finding", "marker",
    "express", "mutat", "receptor", "carcinoma", "infiltrat", "necros", "mitos", "nucle",
    "cytoplasm", "vessel", "invas", "treat", "radiat", "resect", "pathology", "diagnos", "evidenc",
    "suggest", "consist", "observ", "measur", "increas", "decreas", "differ", "relat", "nation",
    "happi", "generat", "condition", "organiz", "sensit",
)  # fmt: skip
_SUFFIXES = ("", "s", "ed", "ing", "es", "ation", "ational", "ness", "ly", "ies", "ive", "ment")
_FILLERS = ("the", "a", "of", "and", "in", "with", "no", "is", "was", "to", "for", "on", "at")
_PUNCT = (",", ".", ";", ":", "(", ")", "-", "%", "'s")


def make_pairs(n: int, *, words: int = 25, seed: int = SEED) -> tuple[list[str], list[str]]:
    """Generate ``n`` (hypothesis, reference) pairs of about ``words`` words.

    References are random English-like clinical sentences with punctuation and numbers;
    hypotheses are references with about a third of the words replaced, dropped or re-inflected.
    """
    rng = np.random.default_rng(seed)
    vocab = [s + suf for s in _STEMS for suf in _SUFFIXES]
    hyps, refs = [], []
    for _ in range(n):
        k = int(rng.integers(words - 8, words + 9))
        toks = []
        for _ in range(k):
            r = rng.random()
            if r < 0.3:
                toks.append(_FILLERS[int(rng.integers(len(_FILLERS)))])
            elif r < 0.36:
                toks.append(str(int(rng.integers(0, 500))) + ("." + str(int(rng.integers(10)))))
            else:
                toks.append(vocab[int(rng.integers(len(vocab)))])
            if rng.random() < 0.08:
                toks.append(_PUNCT[int(rng.integers(len(_PUNCT)))])
        ref = " ".join(toks)
        out = []
        for t in toks:
            r = rng.random()
            if r < 0.12:
                continue
            if r < 0.24:
                out.append(vocab[int(rng.integers(len(vocab)))])
            elif r < 0.32 and t[:4] in {s[:4] for s in _STEMS}:
                out.append(t + _SUFFIXES[int(rng.integers(len(_SUFFIXES)))])
            else:
                out.append(t)
        hyp = " ".join(out)
        if rng.random() < 0.5:
            hyp, ref = hyp.capitalize(), ref.capitalize()
        hyps.append(hyp)
        refs.append(ref)
    return hyps, refs


def _verdict(same: bool) -> str:
    return "identical" if same else "MISMATCH"


def _rouge_workload(
    hyps: list[str], refs: list[str], *, stemmer: bool, threads: int | None, repeat: int
) -> list[Result]:
    from rouge_score import rouge_scorer
    from tumorboard import text

    types = ("rouge1", "rougeL")
    scorer = rouge_scorer.RougeScorer(list(types), use_stemmer=stemmer)
    box: dict[str, Any] = {}

    def ours() -> None:
        box["ours"] = text.rouge(hyps, refs, types=types, stemmer=stemmer, threads=threads)

    def anchor() -> None:
        box["anchor"] = [scorer.score(r, h) for h, r in zip(hyps, refs, strict=True)]

    t_ours = best_of(ours, repeat=repeat, max_time=MAX_TIME)
    t_anchor = best_of(anchor, repeat=max(1, repeat - 2), max_time=MAX_TIME)
    same = all(
        np.array_equal(
            np.array([getattr(s[t], f) for s in box["anchor"]]),
            getattr(box["ours"][t], f),
        )
        for t in types
        for f in ("precision", "recall", "fmeasure")
    )
    name = f"ROUGE-1 + ROUGE-L, {len(hyps):,} pairs" + (", stemmer" if stemmer else "")
    return [Result.make(name, t_ours, ANCHOR_ROUGE, t_anchor, check=_verdict(same))]


def _bleu_workloads(
    hyps: list[str], refs: list[str], *, threads: int | None, repeat: int
) -> list[Result]:
    import sacrebleu
    from sacrebleu.metrics import BLEU
    from tumorboard import text

    box: dict[str, Any] = {}
    metric = BLEU(effective_order=True)

    def ours_sentence() -> None:
        box["ours"] = text.bleu(hyps, refs, threads=threads)

    def anchor_sentence() -> None:
        pairs = zip(hyps, refs, strict=True)
        box["anchor"] = [metric.sentence_score(h, [r]).score for h, r in pairs]

    t_ours = best_of(ours_sentence, repeat=repeat, max_time=MAX_TIME)
    t_anchor = best_of(anchor_sentence, repeat=max(1, repeat - 2), max_time=MAX_TIME)
    same = np.array_equal(np.asarray(box["anchor"]), np.asarray(box["ours"].score))
    out = [
        Result.make(f"sentence BLEU, {len(hyps):,} pairs", t_ours, ANCHOR_SACRE, t_anchor,
                    check=_verdict(same))
    ]  # fmt: skip

    def ours_corpus() -> None:
        box["ours_c"] = text.corpus_bleu(hyps, refs)

    def anchor_corpus() -> None:
        box["anchor_c"] = sacrebleu.corpus_bleu(hyps, [refs])

    t_ours = best_of(ours_corpus, repeat=repeat, max_time=MAX_TIME)
    t_anchor = best_of(anchor_corpus, repeat=max(1, repeat - 2), max_time=MAX_TIME)
    same = box["ours_c"].score == box["anchor_c"].score  # one corpus: a Python float
    out.append(
        Result.make(f"corpus BLEU, {len(hyps):,} pairs", t_ours, ANCHOR_SACRE, t_anchor,
                    check=_verdict(same))
    )  # fmt: skip
    return out


def _python_rouge1_matrix(a: list[str], b: list[str]) -> np.ndarray:
    """Compute the plain-Python anchor: tokenize each text once, then Counter overlaps per pair."""
    from rouge_score import tokenizers

    tok = tokenizers.DefaultTokenizer(use_stemmer=False)
    ca = [Counter(tok.tokenize(t)) for t in a]
    cb = [Counter(tok.tokenize(t)) for t in b]
    out = np.zeros((len(a), len(b)))
    for i, x in enumerate(ca):
        nx = sum(x.values())
        for j, y in enumerate(cb):
            ny = sum(y.values())
            hit = sum((x & y).values())
            p = hit / nx if nx else 0.0
            r = hit / ny if ny else 0.0
            out[i, j] = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return out


def _matrix_workload(*, threads: int | None, repeat: int, size: int) -> list[Result]:
    from rouge_score import rouge_scorer
    from tumorboard import text

    a, b = make_pairs(size, words=20, seed=SEED + 7)
    scorer = rouge_scorer.RougeScorer(["rouge1"])
    box: dict[str, Any] = {}

    def ours() -> None:
        box["ours"] = text.rouge_matrix(a, b, type="rouge1", threads=threads)

    def anchor_rouge() -> None:
        box["anchor"] = np.array([[scorer.score(y, x)["rouge1"].fmeasure for y in b] for x in a])

    def anchor_python() -> None:
        box["python"] = _python_rouge1_matrix(a, b)

    t_ours = best_of(ours, repeat=repeat, max_time=MAX_TIME)
    t_rouge = best_of(anchor_rouge, repeat=repeat, max_time=MAX_TIME)
    t_py = best_of(anchor_python, repeat=repeat, max_time=MAX_TIME)
    f = np.asarray(box["ours"].fmeasure)
    same = np.array_equal(f, box["anchor"])
    close = np.allclose(f, box["python"], rtol=1e-12, atol=0)
    name = f"ROUGE-1 all-pairs matrix, {size} x {size}"
    return [
        Result.make(name, t_ours, ANCHOR_ROUGE, t_rouge, check=_verdict(same)),
        Result.make(name, t_ours, ANCHOR_PYTHON, t_py, check=_verdict(same and close)),
    ]


def run_results(
    *, quick: bool = False, threads: int | None = None, repeat: int = 3
) -> tuple[list[Result], dict[str, Any]]:
    """Run every workload; return the results and a metadata dict."""
    t0 = time.perf_counter()
    n = 1_000 if quick else 10_000
    hyps, refs = make_pairs(n)
    results: list[Result] = []
    results += _rouge_workload(hyps, refs, stemmer=False, threads=threads, repeat=repeat)
    results += _rouge_workload(hyps, refs, stemmer=True, threads=threads, repeat=repeat)
    results += _bleu_workloads(hyps, refs, threads=threads, repeat=repeat)
    results += _matrix_workload(threads=threads, repeat=repeat, size=50)
    meta = {"quick": quick, "n_pairs": n, "threads": threads,
            "total_wall_s": time.perf_counter() - t0}  # fmt: skip
    return results, meta


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns a process exit status."""
    parser = argparse.ArgumentParser(
        prog="bench_text",
        description="Time tumorboard.text against rouge-score, sacrebleu and plain Python.",
    )
    parser.add_argument("--quick", action="store_true", help="1k pairs instead of 10k (< 30 s)")
    parser.add_argument("--json", metavar="PATH", help="also write results as JSON to PATH")
    parser.add_argument("--repeat", type=positive_int, default=3, help="timed samples (best)")
    parser.add_argument("--threads", type=positive_int, default=None,
                        help="threads for tumorboard (default: all cores)")  # fmt: skip
    args = parser.parse_args(argv)
    results, meta = run_results(quick=args.quick, threads=args.threads, repeat=args.repeat)
    print(f"\n### tumorboard text-metrics benchmark ({'quick' if args.quick else 'full'} mode)\n")
    print(format_markdown(results, ANCHORS))
    print(
        "\nratio = anchor time / tumorboard time (>1: tumorboard faster); anchors are "
        f"single-threaded. check: values compared with ==. Total {meta['total_wall_s']:.0f} s."
    )
    if args.json:
        write_json(results, args.json, meta)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
