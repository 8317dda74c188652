"""Distributed scoring benchmark: Poisson bootstrap in one process vs on a local Ray.

A generated trajectory store is scored with the Poisson bootstrap in one process vs on a local
Ray with 2 workers (the overhead of the Ray path), and the shard-count independence of the
result is checked (bit-identical intervals for several shard counts).

Usage::

    python benchmarks/bench_dist.py            # 10M records
    python benchmarks/bench_dist.py --quick    # 500k records (< 60 s)
    python benchmarks/bench_dist.py --json out.json

Needs Ray (``pip install tumorboard[dist]``). Nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

try:
    from ._timing import Result, best_of, format_markdown, write_json
except ImportError:  # run as a script: ``python benchmarks/bench_dist.py``
    from _timing import Result, best_of, format_markdown, write_json

FULL_RECORDS = 10_000_000
QUICK_RECORDS = 500_000
ANCHOR = "local, 1 process"
ANCHORS = (ANCHOR,)
N_MODELS, N_TASKS, N_PATIENTS = 10, 8, 5_000
FIELDS = ("n", "estimate", "boot_mean", "se", "ci_low", "ci_high")


def make_store(path: Path, n_records: int, n_parts: int, seed: int = 0) -> Any:
    """Build a store of ``n_records`` items in ``n_parts`` parts.

    N_MODELS models x tools on/off, N_TASKS tasks, ~70% correct with 1% missing answers.
    """
    from tumorboard.traj import Store

    store = Store(path, fsync=False)
    runs = pl.DataFrame(
        {
            "run_id": [f"r{m}-{t}" for m in range(N_MODELS) for t in (0, 1)],
            "benchmark": ["mtbbench"] * (2 * N_MODELS),
            "track": ["multimodal"] * (2 * N_MODELS),
            "model": [f"model-{m}" for m in range(N_MODELS) for _ in (0, 1)],
            "tools": [bool(t) for _ in range(N_MODELS) for t in (0, 1)],
        }
    )
    store.write_runs(runs)
    rng = np.random.default_rng(seed)
    bounds = np.linspace(0, n_records, n_parts + 1).astype(np.int64)
    for p in range(n_parts):
        n = int(bounds[p + 1] - bounds[p])
        idx = pl.int_range(int(bounds[p]), int(bounds[p + 1]), eager=True)
        correct = pl.Series(rng.random(n) < 0.7)
        correct = pl.select(
            pl.when(pl.Series(rng.random(n) < 0.01)).then(None).otherwise(correct)
        ).to_series()
        frame = pl.DataFrame(
            {
                "run_id": runs["run_id"].gather(rng.integers(0, len(runs), n)),
                "patient_id": pl.Series(rng.integers(0, N_PATIENTS, n)).cast(pl.String),
                "item_id": idx.cast(pl.String),
                "task": pl.Series(rng.integers(0, N_TASKS, n)).cast(pl.String),
                "correct": correct,
            }
        )
        store.write_items(frame)
    return store


def _identical(a: Any, b: Any) -> bool:
    return all(
        np.asarray(getattr(a, f)).tobytes() == np.asarray(getattr(b, f)).tobytes() for f in FIELDS
    )


def run_results(
    *, quick: bool, records: int | None, resamples: int, repeat: int
) -> tuple[list[Result], dict[str, Any]]:
    try:
        import ray
    except ImportError as err:
        raise RuntimeError("bench_dist needs Ray: pip install tumorboard[dist]") from err
    from tumorboard.dist import score_store
    from tumorboard.stats import BootstrapOptions

    t_total = time.perf_counter()
    n = records or (QUICK_RECORDS if quick else FULL_RECORDS)
    n_parts = 8 if quick else 20
    tmp = Path(tempfile.mkdtemp(prefix="tb-bench-dist-"))
    results: list[Result] = []
    try:
        t0 = time.perf_counter()
        store = make_store(tmp / "store", n, n_parts)
        gen_s = time.perf_counter() - t0
        env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": env})  # fmt: skip
        opts = dict(options=BootstrapOptions(n_resamples=resamples, seed=0))
        out: dict[str, Any] = {}

        def local() -> None:
            out["local"] = score_store(store, executor="local", **opts)

        def on_ray() -> None:
            out["ray"] = score_store(store, executor="ray", shards=n_parts, **opts)

        local_s = best_of(local, repeat=repeat, min_time=0, max_time=60)
        ray_s = best_of(on_ray, repeat=repeat, min_time=0, max_time=60)
        same = _identical(out["local"].result, out["ray"].result)
        results.append(
            Result.make(
                f"score {n:,} records, B={resamples}: Ray, 2 workers, {n_parts} shards",
                ray_s, ANCHOR, local_s,
                check="bit-identical" if same else "DIFFERENT",
                note=f"{len(out['local'].result)} groups",
            )
        )  # fmt: skip
        verdicts = []
        for shards in sorted({1, 2, 3, 5, n_parts}):
            for executor in ("local", "ray"):
                t0 = time.perf_counter()
                r = score_store(store, executor=executor, shards=shards, **opts)
                dt = time.perf_counter() - t0
                ok = _identical(r.result, out["local"].result)
                verdicts.append(ok)
                results.append(
                    Result.make(
                        f"shard independence: {executor}, {shards} shard(s)", dt, ANCHOR, local_s,
                        check="bit-identical" if ok else "DIFFERENT",
                    )
                )  # fmt: skip
        meta = {
            "records": n,
            "parts": n_parts,
            "resamples": resamples,
            "generate_s": gen_s,
            "all_identical": bool(same and all(verdicts)),
            "total_wall_s": time.perf_counter() - t_total,
        }
        return results, meta
    finally:
        if ray.is_initialized():
            ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns a process exit status."""
    parser = argparse.ArgumentParser(
        prog="bench_dist",
        description="Time distributed (Ray) vs local Poisson-bootstrap scoring of a store.",
    )
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_RECORDS} records (< 60 s)")
    parser.add_argument("--json", metavar="PATH", help="also write results as JSON to PATH")
    parser.add_argument("--repeat", type=int, default=2, help="timed samples (best is reported)")
    parser.add_argument("--records", type=int, default=None, help="override the record count")
    parser.add_argument("--resamples", type=int, default=200, help="bootstrap resamples B")
    args = parser.parse_args(argv)
    try:
        results, meta = run_results(quick=args.quick, records=args.records,
                                    resamples=args.resamples, repeat=args.repeat)  # fmt: skip
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"\n### tumorboard distributed scoring ({'quick' if args.quick else 'full'} mode)\n")
    print(format_markdown(results, ANCHORS))
    print(
        f"\n{meta['records']:,} records in {meta['parts']} parts (generated in "
        f"{meta['generate_s']:.1f} s); ratio = local time / Ray time (<1: the Ray path's "
        f"overhead). All results bit-identical: {meta['all_identical']}. "
        f"Total {meta['total_wall_s']:.0f} s."
    )
    if args.json:
        write_json(results, args.json, meta)
        print(f"wrote {args.json}")
    return 0 if meta["all_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
