"""Workloads of ``bench_store`` at scale: scoring a 10M-item store, and the CLI's start-up.

* **score at scale**: a store of 50 models x 20 tasks x 10,000 items (10M; 1M with
  ``--quick``), ten items per patient, scored as ``tumorboard score STORE --cluster patient``
  does (``tumorboard.score.mtbbench.score(store, cluster="patient_id")``: per (model, task)
  accuracy and the overall rows with 1000-resample clustered CIs), in a fresh process whose peak
  memory is reported. Anchor: reading the columns the scorer needs with polars alone
  (``scan_parquet(...).select(...).collect()``), in a fresh process too. Target: <= 10x the
  anchor.
* **streaming import**: one JSON-lines file of about 60 MB and one of about 240 MB imported,
  each in a fresh process, with the import committed in batches of 32 MiB of input and the
  file read in blocks of 16 MiB (``_batch.BATCH_BYTES``, ``jsonl.BLOCK_BYTES``: the defaults,
  256 and 64 MiB, scaled down so that the run takes a minute), against the same imports in one
  batch. Reported: the peak memory of each; what streaming promises is that the peak stays
  flat as the input grows four times (one batch's rows at a time), where one batch grows with
  it.
* **CLI start**: ``tumorboard --version`` and ``tumorboard --help`` as a user runs them (a new
  interpreter each time), against ``python -c pass``. Target: <= 0.25 s.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

try:
    from ._timing import Result
except ImportError:  # run as a script
    from _timing import Result

ANCHOR_POLARS_COLUMNS = "polars read of the scored columns"
ANCHOR_PYTHON = "python -c pass"
ANCHOR_ONE_BATCH = "the same import in one batch"
ITEMS_PER_PATIENT = 10

#: The child scripts' peak memory: Linux's VmHWM, which exec resets (``getrusage``'s ru_maxrss
#: keeps the forking parent's peak, so a child of a large benchmark process reported the
#: parent's peak instead of its own).
_PEAK = """
def peak_gb():
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e9
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
"""

_SCORE = """
import json, resource, sys, time
t0 = time.perf_counter()
from tumorboard.score import mtbbench
from tumorboard.stats import BootstrapOptions
from tumorboard.traj import Store
rep = mtbbench.score(Store(sys.argv[1], create=False), cluster="patient_id",
                     options=BootstrapOptions(n_resamples=1000, seed=0))
s = time.perf_counter() - t0
print(json.dumps({"s": s, "rows": rep.table.height,
                  "peak_gb": peak_gb()}))
"""
_READ = """
import json, resource, sys, time
t0 = time.perf_counter()
import polars as pl
df = pl.scan_parquet(sys.argv[1] + "/items/*.parquet").select(
    "run_id", "patient_id", "item_id", "task", "correct").collect()
s = time.perf_counter() - t0
print(json.dumps({"s": s, "rows": df.height,
                  "peak_gb": peak_gb()}))
"""


def write_scale_store(root: Path, *, models: int, tasks: int, items: int, seed: int = 0) -> int:
    """Write a store of ``models`` runs x ``tasks`` tasks x ``items`` 0/1 answers; return rows.

    One items part per model (as one import per run writes); patients hold
    :data:`ITEMS_PER_PATIENT` consecutive items of every task.
    """
    import numpy as np
    import polars as pl
    from tumorboard.traj import Store

    rng = np.random.default_rng(seed)
    store = Store(root, fsync=False)
    store.write_runs(
        pl.DataFrame(
            {
                "run_id": [f"run-{m:02d}" for m in range(models)],
                "benchmark": "mtbbench",
                "track": "multimodal",
                "model": [f"model-{m:02d}" for m in range(models)],
                "tools": False,
            }
        )
    )
    task = np.repeat(np.arange(tasks), items)
    item = np.tile(np.arange(items), tasks)
    for m in range(models):
        skill = rng.uniform(0.4, 0.9, tasks)[task]
        store.write_items(
            pl.DataFrame(
                {
                    "run_id": f"run-{m:02d}",
                    "patient_id": pl.Series(item // ITEMS_PER_PATIENT).cast(pl.String),
                    "item_id": pl.Series(task * items + item).cast(pl.String),
                    "task": pl.Series(task).cast(pl.String),
                    "correct": rng.random(task.size) < skill,
                }
            )
        )
    return models * tasks * items


_IMPORT = """
import json, resource, sys, time
from tumorboard.traj.importers import _batch, jsonl
_batch.BATCH_BYTES, jsonl.BLOCK_BYTES = int(sys.argv[3]), int(sys.argv[4])
from tumorboard.traj import Store, import_logs
t0 = time.perf_counter()
r = import_logs("jsonl", sys.argv[1], Store(sys.argv[2], fsync=False))
s = time.perf_counter() - t0
print(json.dumps({"s": s, "rows": r.n_items, "parts": len(Store(sys.argv[2]).parts("items")),
                  "peak_gb": peak_gb()}))
"""


def stream_import(ctx: Any, lines: Any) -> list[Result]:
    """Peak memory of streamed and one-batch imports of a file, and of one 4x and 8x larger.

    The 8x file is imported streamed only (in one batch it would need ~6 GB): its peak shows
    whether the streamed peak levels off (the allocators' caches fill within the first tens
    of seconds) or keeps growing with the input.
    """
    small = 60_000 if ctx.quick else 250_000
    sizes = (small, 4 * small, 8 * small)
    text = lines(small)
    out = []
    peaks: dict[str, list[float]] = {"streamed": [], "one batch": []}
    for n in sizes:
        src = ctx.tmp / f"stream-{n}.jsonl"
        with open(src, "w") as fh:
            for rep in range(n // small):
                # distinct ids per copy: every line a new item
                fh.write("\n".join(t.replace('"id": "', f'"id": "{rep}-', 1) for t in text))
                fh.write("\n")
        mb = src.stat().st_size / 1e6
        name = f"import one {mb:.0f} MB JSON-lines file ({n:,} lines): peak memory"
        ctx.log(name)
        runs = {}
        modes = (("streamed", 32 << 20, 16 << 20), ("one batch", 1 << 40, 1 << 40))
        for label, batch, block in modes[: 1 if n == sizes[-1] else 2]:
            store = ctx.tmp / f"stream-store-{n}-{batch}"
            runs[label] = _child(_IMPORT, str(src), str(store), str(batch), str(block))
            peaks[label].append(runs[label]["peak_gb"])
            ctx.log(f"  {label}: {runs[label]['s']:.2f} s, {runs[label]['peak_gb']:.2f} GB peak, "
                    f"{runs[label]['parts']} items part(s)")  # fmt: skip
            shutil.rmtree(store, ignore_errors=True)
        src.unlink()
        ok = all(r["rows"] == n for r in runs.values())
        ctx.workloads[name] = {"mb": mb, **{f"{k}_{m}": v[m] for k, v in runs.items()
                                            for m in ("s", "peak_gb", "parts")}}  # fmt: skip
        one = runs.get("one batch")
        one_s = math.nan if one is None else one["s"]
        out.append(Result(
            name, runs["streamed"]["s"], ANCHOR_ONE_BATCH, one_s, one_s / runs["streamed"]["s"],
            check="ok (every line imported)" if ok else "WARN: lines lost",
            note=f"peak {runs['streamed']['peak_gb']:.2f} GB streamed" + (
                " (streamed only)" if one is None
                else f" vs {one['peak_gb']:.2f} GB in one batch")))  # fmt: skip
    growth = {f"streamed {k}x": peaks["streamed"][i] / peaks["streamed"][0]
              for i, k in ((1, 4), (2, 8))}  # fmt: skip
    growth["one batch 4x"] = peaks["one batch"][1] / peaks["one batch"][0]
    ctx.log("  peak growth: " + ", ".join(f"{k} the input {v:.2f}x" for k, v in growth.items()))
    ctx.workloads["streaming import: peak growth for 4x and 8x the input"] = growth
    return out


def _child(code: str, *args: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", _PEAK + code, *args], check=True,
                         capture_output=True, text=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def score_at_scale(ctx: Any, *, repeat: int = 2) -> list[Result]:
    """Score a 10M-item store (1M quick) against a polars read of its columns."""
    models, tasks, items = (50, 20, 1_000) if ctx.quick else (50, 20, 10_000)
    root = ctx.tmp / "scale-store"
    n = write_scale_store(root, models=models, tasks=tasks, items=items)
    name = (
        f"score a {n / 1e6:g}M-item store ({models} models x {tasks} tasks, clustered by "
        "patient): per (model, task) + overall CIs, B=1k"
    )
    ctx.log(name)
    read = min((_child(_READ, str(root)) for _ in range(repeat)), key=lambda r: r["s"])
    ours = min((_child(_SCORE, str(root)) for _ in range(repeat)), key=lambda r: r["s"])
    ctx.log(f"  polars read: {read['s']:.2f} s ({read['peak_gb']:.2f} GB peak)")
    ctx.log(f"  tumorboard score: {ours['s']:.2f} s ({ours['peak_gb']:.2f} GB peak)")
    ctx.workloads[name] = {
        "items": n, "score_s": ours["s"], "read_s": read["s"], "score_peak_gb": ours["peak_gb"],
        "read_peak_gb": read["peak_gb"], "target": "<= 10x the polars read",
    }  # fmt: skip
    slowdown = ours["s"] / read["s"]
    return [
        Result.make(name, ours["s"], ANCHOR_POLARS_COLUMNS, read["s"],
                    check=f"ok ({ours['rows']} report rows)",
                    note=f"{slowdown:.1f}x the read (target <= 10x); peak "
                    f"{ours['peak_gb']:.2f} GB vs {read['peak_gb']:.2f} GB; imports included"),
    ]  # fmt: skip


def cli_start(ctx: Any, *, repeat: int = 5) -> list[Result]:
    """Time ``tumorboard --version`` and ``--help`` (fresh interpreters) against ``python``."""

    def best(argv: list[str]) -> float:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True)
            times.append(time.perf_counter() - t0)
        return min(times)

    bare = best([sys.executable, "-c", "pass"])
    out = []
    for flag in ("--version", "--help"):
        s = best([sys.executable, "-m", "tumorboard.cli", flag])
        ctx.log(f"  tumorboard {flag}: {s:.3f} s (python -c pass: {bare:.3f} s)")
        out.append(
            Result.make(f"CLI start: tumorboard {flag}", s, ANCHOR_PYTHON, bare,
                        check="ok", note="target <= 0.25 s"),
        )  # fmt: skip
    ctx.workloads["CLI start"] = {"python_s": bare, "target_s": 0.25}
    return out
