"""Model comparisons at scale: ``stats.compare`` against a vectorised numpy implementation.

Workload: M models answer the same N items (0/1), nested in G patients; every pair of models
(M (M - 1) / 2), the clustered paired bootstrap with B resamples (patients resampled whole),
percentile intervals and bootstrap p-values, McNemar on and the sign-flip test off
(``n_permutations=0``; it is a second resampling of its own).

Anchor: what a careful numpy user writes: per-patient sums of every model (G x M), one
multinomial draw of patient counts per resample (B x G), every model's resampled mean with one
matrix product, and every pair's interval and p-value from the B x M matrix. That is the
joint-resampling design tumorboard uses (shared Poisson weights instead of multinomial
counts), so the ratio measures the engine, not the algorithm.

Usage::

    python benchmarks/bench_compare.py            # 50 models x 100k items, 20k patients, B=10k
    python benchmarks/bench_compare.py --quick    # 20 models x 20k items, 4k patients, B=2k
    python benchmarks/bench_compare.py --json out.json

Nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

try:
    from ._timing import Result, format_markdown, write_json
except ImportError:  # run as a script
    from _timing import Result, format_markdown, write_json

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
    """Time both implementations once on the workload; check they agree."""
    from tumorboard import stats

    w = workload(models, items, patients)
    opts = stats.BootstrapOptions(n_resamples=b, seed=0)
    t0 = time.perf_counter()
    res = stats.compare(w["values"], models=w["models"], items=w["items"], clusters=w["clusters"],
                        options=opts, n_permutations=0)  # fmt: skip
    t_tb = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = numpy_compare(w["matrix"], w["patient"], b)
    t_np = time.perf_counter() - t0
    rows = [r for r in res.rows if r.task == "overall"]
    got = np.array([[r.ci_low, r.ci_high] for r in rows])
    # different random streams: the intervals agree to Monte Carlo error, not to the digit
    width = np.median(ref[:, 1] - ref[:, 0])
    worst = float(np.max(np.abs(got - ref[:, :2]))) / width
    check = f"{'ok' if worst < 0.2 else 'DIFFERS'} (largest bound gap {worst:.3f} of a CI width)"
    pairs = models * (models - 1) // 2
    name = f"{models} models x {items:,} items in {patients:,} patients, {pairs} pairs, B={b:,}"
    return [Result.make(name, t_tb, ANCHOR, t_np, check=check,
                        note=f"stats.compare {t_tb:.2f} s, numpy {t_np:.2f} s")]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns a process exit status."""
    parser = argparse.ArgumentParser(prog="bench_compare", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 models x 20k items, B=2k")
    parser.add_argument("--json", metavar="PATH", help="also write results as JSON to PATH")
    args = parser.parse_args(argv)
    shape = (20, 20_000, 4_000, 2_000) if args.quick else (50, 100_000, 20_000, 10_000)
    results = run(*shape)
    print(f"\n### Model comparisons ({'quick' if args.quick else 'full'})\n")
    print(format_markdown(results, [ANCHOR]))
    for r in results:
        print(f"- {r.workload}: {r.note}")
    if args.json:
        write_json(results, args.json, {"quick": args.quick, "shape": shape})
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
