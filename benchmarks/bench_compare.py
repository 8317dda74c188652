"""Model comparisons at scale: ``stats.compare`` and ``stats.rank_intervals`` against numpy.

Pairs workload: M models answer the same N items (0/1), nested in G patients; every pair of models
(M (M - 1) / 2), the clustered paired bootstrap with B resamples (patients resampled whole),
percentile intervals and bootstrap p-values, McNemar on and the sign-flip test off
(``n_permutations=0``; it is a second resampling of its own).

Anchor: what a careful numpy user writes: per-patient sums of every model (G x M), one
multinomial draw of patient counts per resample (B x G), every model's resampled mean with one
matrix product, and every pair's interval and p-value from the B x M matrix. That is the
joint-resampling design tumorboard uses (shared Poisson weights instead of multinomial
counts), so the ratio measures the engine, not the algorithm.

Ranks workload: M models translate the same N items (short synthetic sentences, one reference
each); each model's per-item BLEU sufficient statistics are computed once
(``text.bleu_statistics``, timed apart), then ``stats.rank_intervals(statistic="bleu")`` gives
every model's corpus-BLEU rank interval and P(best) from B shared Poisson resamples. Anchor:
Poisson(1) weights per item and resample (B x N, in chunks), every model's resampled sums with
one matrix product, corpus BLEU (sacrebleu's formula, exp smoothing) of each, and the ranks
within each resample. The point estimates are checked against ``sacrebleu.corpus_bleu`` (when
installed) to the last bit.

Sign-flip workload: every pair of M models on N items in G patients, the clustered
Monte Carlo sign-flip test (``stats.sign_flip_test``, P patterns each; what ``compare`` runs per
pair by default). Anchor: the numpy implementation tumorboard used until 2026-11 (int8 sign
draws, one matrix-vector product per chunk), which draws the same patterns: the p-values must
be equal.

CLI workload: ``tumorboard compare STORE --ranks`` of a generated 1M-row store (20 models x 5
tasks x 10,000 items, ten per patient) in a fresh process, against a fresh process reading the
items' columns with polars; peak memory of both.

Usage::

    python benchmarks/bench_compare.py            # both workloads, full size
    python benchmarks/bench_compare.py --quick    # pairs: 20 x 20k items, 4k patients, B=2k;
                                                  # ranks: 20 models x 2k items, B=2k
    python benchmarks/bench_compare.py --only ranks   # 50 models x 10k items, B=10k
    python benchmarks/bench_compare.py --only signflip  # 45 pairs x 50k items, 10k patterns
    python benchmarks/bench_compare.py --only cli   # tumorboard compare --ranks, 1M-row store
    python benchmarks/bench_compare.py --json out.json

Nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

try:
    from ._timing import Result, best_of, format_markdown, write_json
except ImportError:  # run as a script
    from _timing import Result, best_of, format_markdown, write_json

ANCHOR = "numpy, vectorised"


def workload(models: int, items: int, patients: int, seed: int = 0) -> dict[str, Any]:
    """Return long-format 0/1 answers of ``models`` models on ``items`` items in ``patients``."""
    rng = np.random.default_rng(seed)
    skill = rng.uniform(0.55, 0.85, models)
    difficulty = rng.normal(0, 0.8, items)
    logits = np.log(skill / (1 - skill))[:, None] - difficulty[None, :]
    correct = (rng.random((models, items)) < 1 / (1 + np.exp(-logits))).astype(np.float64)
    patient = rng.integers(0, patients, items)
    return {
        "values": correct.ravel(),
        "models": np.repeat([f"m{m:02d}" for m in range(models)], items),
        "items": np.tile(np.arange(items).astype(str), models),
        "clusters": np.tile(patient.astype(str), models),
        "matrix": correct,
        "patient": patient,
    }


def numpy_compare(matrix: np.ndarray, patient: np.ndarray, b: int, seed: int = 0) -> np.ndarray:
    """All pairs' percentile intervals and p-values, clustered bootstrap, in numpy.

    Returns ``[pairs, 3]``: ci_low, ci_high, p_value.
    """
    rng = np.random.default_rng(seed)
    m, _ = matrix.shape
    g = int(patient.max()) + 1
    sums = np.stack([np.bincount(patient, weights=row, minlength=g) for row in matrix], 1)
    sizes = np.bincount(patient, minlength=g).astype(np.float64)
    out = []
    means = np.empty((b, m))
    step = max(1, 2**24 // max(g, 1))
    for s in range(0, b, step):
        counts = rng.multinomial(g, np.full(g, 1.0 / g), size=min(step, b - s)).astype(np.float64)
        means[s : s + counts.shape[0]] = (counts @ sums) / (counts @ sizes)[:, None]
    est = matrix.mean(axis=1)
    for i in range(m):
        d = est[i] - est[i + 1 :]
        dstar = means[:, i, None] - means[:, i + 1 :]
        lo, hi = np.quantile(dstar, [0.025, 0.975], axis=0)
        p = (1 + (np.abs(dstar - d) >= np.abs(d)).sum(0)) / (1 + b)
        out.append(np.stack([lo, hi, p], 1))
    return np.concatenate(out)


def run(models: int, items: int, patients: int, b: int) -> list[Result]:
    """Time both implementations once on the workload; check they agree.

    tumorboard runs three times: on the labels as numpy strings, as polars string columns (as
    a store or a DataFrame gives them; what ``tumorboard compare`` passes) and with item and
    patient ids as integers (as the anchor gets them); the three give the same rows, and each
    is compared with the one anchor time of this run.
    """
    from tumorboard import stats

    w = workload(models, items, patients)
    opts = stats.BootstrapOptions(n_resamples=b, seed=0)
    import polars as pl

    ids = {"items": np.tile(np.arange(items), models), "clusters": np.tile(w["patient"], models)}
    frame = {"items": pl.Series(w["items"]), "clusters": pl.Series(w["clusters"])}
    timed = {}
    for kind, labels in (("numpy string labels", w), ("polars string columns", frame),
                         ("integer item and patient ids", ids)):  # fmt: skip
        kept: dict[str, Any] = {}

        def call(labels: dict[str, Any] = labels, kept: dict[str, Any] = kept) -> None:
            kept["res"] = stats.compare(w["values"], models=w["models"], items=labels["items"],
                                        clusters=labels["clusters"], options=opts,
                                        n_permutations=0)  # fmt: skip

        # the best of two calls after a first one (which pays the process's one-time imports)
        timed[kind] = (best_of(call, repeat=2, max_time=6.0), kept["res"])
    t0 = time.perf_counter()
    ref = numpy_compare(w["matrix"], w["patient"], b)
    t_np = time.perf_counter() - t0
    (_, res), (_, res_pl), (_, res_int) = timed.values()
    rows = [r for r in res.rows if r.task == "overall"]
    got = np.array([[r.ci_low, r.ci_high] for r in rows])
    # different random streams: the intervals agree to Monte Carlo error, not to the digit
    width = np.median(ref[:, 1] - ref[:, 0])
    worst = float(np.max(np.abs(got - ref[:, :2]))) / width
    text = json.dumps(res.to_dicts())  # NaN == NaN there
    same = text == json.dumps(res_pl.to_dicts()) == json.dumps(res_int.to_dicts())
    kinds = "give the same rows" if same else "DIFFER"
    check = (f"{'ok' if worst < 0.2 and same else 'DIFFERS'} (largest bound gap {worst:.3f} of a "
             f"CI width; the three label kinds {kinds})")  # fmt: skip
    pairs = models * (models - 1) // 2
    name = f"{models} models x {items:,} items in {patients:,} patients, {pairs} pairs, B={b:,}"
    return [Result.make(f"{name}, {kind}", t, ANCHOR, t_np, check=check,
                        note=f"stats.compare ({kind}) {t:.2f} s, numpy {t_np:.2f} s")
            for kind, (t, _) in timed.items()]  # fmt: skip


def numpy_sign_flip(d: np.ndarray, inverse: np.ndarray, n_resamples: int, seed: int) -> float:
    """Return the clustered Monte Carlo sign-flip p-value as numpy (tumorboard to 2026-11) does.

    Per cluster sums, then chunks of sign patterns drawn as int8 {0, 1} * 2 - 1 and one
    matrix-vector product per chunk; ties within 1e-14 of the total count as extreme.
    """
    sums = np.bincount(inverse, weights=d)
    units = sums.size
    tol = 1e-14 * max(1.0, float(np.abs(sums).sum()))
    rng = np.random.default_rng(seed)
    hits = done = 0
    while done < n_resamples:
        m = min(n_resamples - done, max(1, 2**22 // units))
        signs = rng.integers(0, 2, size=(m, units), dtype=np.int8) * 2 - 1
        hits += int(np.count_nonzero(np.abs(signs @ sums) >= abs(float(d.sum())) - tol))
        done += m
    return min(1.0, (1.0 + hits) / (1.0 + n_resamples))


def run_sign_flip(models: int, items: int, patients: int, n_perm: int) -> list[Result]:
    """Time every pair's clustered sign-flip test against the numpy anchor; same p-values."""
    from tumorboard import stats

    w = workload(models, items, patients, seed=1)
    pairs = [(a, b) for a in range(models) for b in range(a + 1, models)]
    inverse = np.unique(w["patient"], return_inverse=True)[1].ravel()
    kept: dict[str, list[float]] = {}

    def tb() -> None:
        kept["tb"] = [stats.sign_flip_test(w["matrix"][a] - w["matrix"][b], clusters=w["patient"],
                                           n_resamples=n_perm, seed=0).p_value
                      for a, b in pairs]  # fmt: skip

    def anchor() -> None:
        kept["np"] = [numpy_sign_flip(w["matrix"][a] - w["matrix"][b], inverse, n_perm, 0)
                      for a, b in pairs]  # fmt: skip

    t_tb = best_of(tb, repeat=2, max_time=30.0)
    t_np = best_of(anchor, repeat=1, max_time=1.0)
    same = kept["tb"] == kept["np"]
    name = (f"sign-flip tests of {len(pairs)} pairs, {items:,} items in {patients:,} patients, "
            f"{n_perm:,} patterns each")  # fmt: skip
    return [Result.make(name, t_tb, ANCHOR, t_np,
                        check="ok (the same p-values)" if same else "DIFFERS",
                        note=f"stats.sign_flip_test {t_tb:.2f} s, numpy {t_np:.2f} s")]  # fmt: skip


_CLI_COMPARE = """
import json, sys, time
t0 = time.perf_counter()
from tumorboard.cli import main
status = main(["compare", sys.argv[1], *sys.argv[2:]])
s = time.perf_counter() - t0
print(json.dumps({"s": s, "status": status, "peak_gb": peak_gb()}))
"""


def run_cli(models: int, tasks: int, items: int) -> list[Result]:
    """``tumorboard compare STORE --ranks`` of a generated store, in a fresh process.

    The store: ``models`` runs x ``tasks`` tasks x ``items`` 0/1 answers, ten items per patient
    (``_store_scale.write_scale_store``); default settings (patients as clusters, B = 1,000,
    10,000 sign patterns per pair) plus rank intervals. Anchor: a fresh process reading the
    items' columns with polars alone, as the store-scale scoring row does. Peak memory of each.
    """
    import tempfile
    from pathlib import Path

    try:
        from . import _store_scale as scale
    except ImportError:  # run as a script
        import _store_scale as scale

    with tempfile.TemporaryDirectory(prefix="tb-bench-compare-") as tmp:
        root = Path(tmp) / "store"
        n = scale.write_scale_store(root, models=models, tasks=tasks, items=items)
        out = str(Path(tmp) / "compare.json")
        ours = scale._child(_CLI_COMPARE, str(root), "--ranks", "--format", "json", "--out", out)
        read = scale._child(scale._READ, str(root))
        pairs = models * (models - 1) // 2 * (tasks + 1)
        ok = ours["status"] == 0 and len(json.loads(Path(out).read_text())["comparisons"]) == pairs
    name = (f"tumorboard compare --ranks of a {n / 1e6:g}M-row store ({models} models x {tasks} "
            f"tasks, {pairs:,} comparisons, 10,000 sign patterns each)")  # fmt: skip
    return [Result.make(name, ours["s"], scale.ANCHOR_POLARS_COLUMNS, read["s"],
                        check=f"{'ok' if ok else 'FAILED'} ({pairs:,} comparisons written)",
                        note=f"peak {ours['peak_gb']:.2f} GB vs the read's "
                             f"{read['peak_gb']:.2f} GB; imports included")]  # fmt: skip


WORDS = (
    "the a tumor margin node stage grade left right upper lower lobe mass biopsy shows no "
    "evidence of invasive carcinoma with clear margins positive negative lymph nodes are "
    "involved patient received chemotherapy radiation surgery follow up scan recommended "
    "mutation detected expression high low score ratio size cm mm metastasis seen"
).split()


def bleu_workload(models: int, items: int, seed: int = 0) -> dict[str, Any]:
    """Return ``models`` models' hypotheses of ``items`` short references (3 to 20 words).

    A model keeps each reference word with its own probability (0.55 to 0.9) and otherwise
    writes a random word, and drops a word now and then, so lengths and n-gram matches vary.
    """
    rng = np.random.default_rng(seed)
    vocab = np.array(WORDS)
    lengths = rng.integers(3, 21, items)
    ref_tokens = [vocab[rng.integers(0, vocab.size, k)] for k in lengths]
    refs = [" ".join(t) for t in ref_tokens]
    skill = rng.uniform(0.55, 0.9, models)
    hyps = []
    for m in range(models):
        out = []
        for t in ref_tokens:
            keep = rng.random(t.size) < skill[m]
            words = np.where(keep, t, vocab[rng.integers(0, vocab.size, t.size)])
            out.append(" ".join(words[rng.random(t.size) > 0.05]))
        hyps.append(out)
    return {"refs": refs, "hyps": hyps, "names": [f"m{m:02d}" for m in range(models)]}


def numpy_corpus_bleu(sums: np.ndarray, order: int = 4) -> np.ndarray:
    """Corpus BLEU (sacrebleu's formula, exp smoothing) of summed statistics ``[..., 2N + 2]``."""
    matches, totals = sums[..., :order], sums[..., order : 2 * order]
    sys_len, ref_len = sums[..., 2 * order], sums[..., 2 * order + 1]
    zero = matches == 0
    halving = 2.0 ** np.cumsum(zero, axis=-1)  # exp smoothing: 1 / 2^k for the k-th zero
    with np.errstate(divide="ignore", invalid="ignore"):
        prec = np.where(zero, 100.0 / (halving * totals), 100.0 * matches / totals)
        logs = np.where(totals > 0, np.log(prec), -9999999999.0)
        bp = np.where(sys_len < ref_len,
                      np.exp(1.0 - ref_len / np.where(sys_len > 0, sys_len, 1.0)), 1.0)  # fmt: skip
    bp = np.where(sys_len > 0, bp, 0.0)
    return bp * np.exp(logs.sum(axis=-1) / order)


def numpy_rank_intervals(stats: np.ndarray, b: int, seed: int = 0) -> np.ndarray:
    """Rank intervals of corpus BLEU from Poisson-weighted sums, in numpy.

    ``stats`` is ``[models, items, k]``. Returns ``[models, 4]``: estimate, rank_low,
    rank_high, p_best.
    """
    rng = np.random.default_rng(seed)
    m, n, k = stats.shape
    flat = stats.transpose(1, 0, 2).reshape(n, m * k).astype(np.float64)
    scores = np.empty((b, m))
    step = max(1, 2**23 // n)
    for s in range(0, b, step):
        w = rng.poisson(1.0, size=(min(step, b - s), n)).astype(np.float64)
        scores[s : s + w.shape[0]] = numpy_corpus_bleu((w @ flat).reshape(-1, m, k))
    est = numpy_corpus_bleu(stats.sum(axis=1).astype(np.float64))
    ranks = 1 + (scores[:, None, :] > scores[:, :, None]).sum(axis=-1)  # [B, models]
    low = np.quantile(ranks, 0.025, axis=0, method="lower")
    high = np.quantile(ranks, 0.975, axis=0, method="higher")
    return np.stack([est, low, high, (ranks == 1).mean(axis=0)], 1)


def run_ranks(models: int, items: int, b: int) -> list[Result]:
    """Time rank intervals of corpus BLEU against the numpy anchor; check they agree."""
    from tumorboard import stats, text

    w = bleu_workload(models, items)
    t0 = time.perf_counter()
    per_model = [text.bleu_statistics(h, w["refs"]) for h in w["hyps"]]
    t_stats = time.perf_counter() - t0
    rows = np.concatenate(per_model)
    names = np.repeat(w["names"], items)
    keys = np.tile(np.arange(items), models)
    params = text.bleu_statistic_params()
    opts = stats.BootstrapOptions(n_resamples=b, seed=0)
    kept: dict[str, Any] = {}

    def tb() -> None:
        kept["tb"] = stats.rank_intervals(rows, models=names, items=keys, statistic="bleu",
                                          params=params, options=opts)  # fmt: skip

    def anchor() -> None:
        kept["np"] = numpy_rank_intervals(np.stack(per_model), b)

    # the best of two calls each (after a warm-up): this shared machine's load varies
    t_tb = best_of(tb, repeat=2, max_time=30.0)
    t_np = best_of(anchor, repeat=2, max_time=30.0)
    res, ref = kept["tb"], kept["np"]
    by = {d["model"]: d for d in res.to_dicts()}
    got = np.array([[by[n]["estimate"], by[n]["rank_low"], by[n]["rank_high"], by[n]["p_best"]]
                    for n in w["names"]])  # fmt: skip
    notes = []
    same_est = bool(np.allclose(got[:, 0], ref[:, 0], rtol=1e-12, atol=0))
    try:
        import sacrebleu
    except ImportError:
        notes.append("sacrebleu not installed: estimates not checked against it")
        exact = True
    else:
        oracle = np.array([sacrebleu.corpus_bleu(h, [w["refs"]]).score for h in w["hyps"]])
        exact = bool(np.array_equal(got[:, 0], oracle))
        notes.append(f"estimates {'==' if exact else '!='} sacrebleu.corpus_bleu")
    # different random streams: rank bounds agree to Monte Carlo error (one rank either way)
    gap = int(np.max(np.abs(got[:, 1:3] - ref[:, 1:3])))
    ok = exact and same_est and gap <= 2
    check = f"{'ok' if ok else 'DIFFERS'} (largest rank-bound gap {gap}; {'; '.join(notes)})"
    name = f"rank CIs of corpus BLEU, {models} models x {items:,} items, B={b:,}"
    return [Result.make(name, t_tb, ANCHOR, t_np, check=check,
                        note=f"stats.rank_intervals {t_tb:.2f} s, numpy {t_np:.2f} s; "
                             f"bleu_statistics of {models * items:,} pairs {t_stats:.2f} s "
                             "(once, not in either timing)")]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns a process exit status."""
    parser = argparse.ArgumentParser(prog="bench_compare", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 models x 20k items, B=2k")
    parser.add_argument("--only", choices=("pairs", "ranks", "signflip", "cli"),
                        help="run one workload")  # fmt: skip
    parser.add_argument("--json", metavar="PATH", help="also write results as JSON to PATH")
    args = parser.parse_args(argv)
    shape = (20, 20_000, 4_000, 2_000) if args.quick else (50, 100_000, 20_000, 10_000)
    rank_shape = (20, 2_000, 2_000) if args.quick else (50, 10_000, 10_000)
    flip_shape = (6, 10_000, 1_000, 2_000) if args.quick else (10, 50_000, 5_000, 10_000)
    results = []
    if args.only in (None, "pairs"):
        results += run(*shape)
    if args.only in (None, "ranks"):
        results += run_ranks(*rank_shape)
    if args.only in (None, "signflip"):
        results += run_sign_flip(*flip_shape)
    cli_shape = (6, 2, 5_000) if args.quick else (20, 5, 10_000)
    if args.only in (None, "cli"):
        results += run_cli(*cli_shape)
    print(f"\n### Model comparisons ({'quick' if args.quick else 'full'})\n")
    anchors = [ANCHOR, *sorted({r.anchor for r in results} - {ANCHOR})]
    print(format_markdown(results, anchors))
    for r in results:
        print(f"- {r.workload}: {r.note}")
    if args.json:
        write_json(results, args.json, {"quick": args.quick, "shape": shape,
                                        "rank_shape": rank_shape, "cli_shape": cli_shape,
                                        "sign_flip_shape": flip_shape})  # fmt: skip
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
