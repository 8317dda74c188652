"""Benchmark ``tumorboard import inspect`` against inspect_ai's own dataframe reader.

The log: a real inspect_ai eval (mock model with a tool call and an answer, two scorers) is run
once; its samples are the templates of an N-sample ``.eval`` log (100,000; 2,000 with
``--quick``) written with inspect_ai's own log recorder (``EvalRecorder``: the writer
``inspect eval`` uses), sample ids and patient ids changed per sample. Every sample carries its
conversation (user, tool call, tool result, answer), events, scores and usage, as ``inspect
eval`` writes them.

Workloads, each in a fresh process (wall time inside it, imports excluded; peak memory = the
process's maximum resident set size, ``VmHWM``, imports included):

* **tumorboard import (direct)**: ``import_logs("inspect", log, store)``: every sample into
  a new trajectory store (items, events with tool calls and usage, runs), reading the zip
  members directly;
* **tumorboard import (inspect reader)**: the same rows, samples read by inspect_ai's
  ``read_eval_log_samples`` (only up to :data:`MAX_INSPECT_READER` samples: that reader
  reopens the log for every sample);
* anchors: reading every ``samples/*.json`` member of the log's zip and ``json.loads`` of it,
  nothing else (the floor the issue measures against: import within 1.5x of it);
  ``inspect_ai.analysis.samples_df(log, full=True)`` (a pandas frame of the samples
  with their full metadata: inspect reads every sample) and ``samples_df(log)`` (the default:
  columns from the sample summaries only, no messages, events or full metadata; less than
  tumorboard imports).

``ratio`` = anchor time / tumorboard time (>1: tumorboard faster); samples/s = N / time.
Check: the store's items, and the frame's rows, number N, and the count of correct answers of
the first scorer agrees between the store and ``samples_df``.

Needs inspect-ai, and pandas for the ``samples_df`` anchors.

Usage (from the repository root)::

    python benchmarks/bench_inspect.py [--quick] [--samples N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

try:
    from ._timing import Result, format_markdown, positive_int, write_json
except ImportError:  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _timing import Result, format_markdown, positive_int, write_json  # type: ignore

FULL_SAMPLES = 100_000
QUICK_SAMPLES = 2_000
#: The issue's anchor: reading and JSON-parsing the log's sample members alone (no rows built).
ANCHOR_MEMBERS = "read + json.loads of the sample members"
ANCHORS = ("samples_df(full=True)", "samples_df()", ANCHOR_MEMBERS)
#: Above this many samples the inspect-reader workload is not run: inspect_ai's
#: read_eval_log_samples reopens the log for every sample, so it takes time quadratic in N.
MAX_INSPECT_READER = 2_000
ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- the log


def _template(workdir: Path) -> Any:
    """Run a small real eval with inspect's mock model; return its log (with samples)."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.log import read_eval_log
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import includes, match
    from inspect_ai.solver import generate, use_tools
    from inspect_ai.tool import tool

    @tool
    def er_status():
        async def execute(patient: str):
            """Look up the oestrogen-receptor status of a patient.

            Args:
                patient: The patient id.
            """
            return "positive" if patient.endswith(("0", "2")) else "negative"

        return execute

    def outputs(messages, tools, tool_choice, config):
        last = messages[-1]
        if last.role == "tool":
            out = ModelOutput.from_content("mockllm/model", f"ANSWER: {last.text}")
        else:
            patient = messages[0].text.split()[-1].rstrip("?")
            out = ModelOutput.for_tool_call("mockllm/model", "er_status", {"patient": patient})
        out.usage = ModelUsage(input_tokens=120, output_tokens=12, total_tokens=132)
        return out

    samples = [
        Sample(
            id=f"t{i}",
            input=f"Is the tumour ER-positive for patient P{i}?",
            target="positive" if i % 3 else "negative",
            metadata={"patient_id": f"P{i}", "site": "breast"},
        )  # fmt: skip
        for i in range(8)
    ]
    task = Task(dataset=samples, solver=[use_tools(er_status()), generate()],
                scorer=[match(location="end"), includes()])  # fmt: skip
    model = get_model("mockllm/model", custom_outputs=outputs)
    [log] = inspect_eval(task, model=model, log_dir=str(workdir), display="none")
    return read_eval_log(log.location)


def make_log(path: Path, n: int) -> Path:
    """Write an ``n``-sample ``.eval`` log with inspect_ai's recorder; return its path."""
    import anyio
    from inspect_ai.log._recorders.eval import EvalRecorder

    tpl = _template(path.parent / "template")
    samples = tpl.samples
    ids = [f"s{i}" for i in range(n)]
    spec = tpl.eval.model_copy(deep=True)
    spec.dataset.sample_ids = ids
    spec.dataset.samples = n

    async def write() -> None:
        rec = EvalRecorder(str(path.parent))
        await rec.log_init(spec, str(path), clean=True)
        await rec.log_start(spec, tpl.plan)
        for i in range(n):
            t = samples[i % len(samples)]
            meta = {**t.metadata, "patient_id": f"P{i // 4}"}
            s = t.model_copy(update={"id": ids[i], "uuid": f"{t.uuid}-{i}", "metadata": meta})
            await rec.log_sample(spec, s)
            if (i + 1) % 1000 == 0:
                await rec.flush(spec)
        await rec.log_finish(spec, "success", tpl.stats, tpl.results, tpl.reductions)

    anyio.run(write)
    return path


# ----------------------------------------------------------------------------- workloads


def _child(workload: str, log: str, out: str) -> dict[str, Any]:
    """Run one workload in this (fresh) process; return its timing and checks."""
    t0 = time.perf_counter()
    if workload.startswith("tumorboard"):
        import polars as pl
        from tumorboard.traj import Store, import_logs

        reader = "inspect" if "inspect" in workload else "direct"
        report = import_logs("inspect", log, out, reader=reader)
        seconds = time.perf_counter() - t0
        items = Store(out, create=False).items().select("correct").collect()
        return {"seconds": seconds, "rows": items.height, "events": report.n_events,
                "n_correct": int(items.get_column("correct").fill_null(False).sum()),
                "n_null": int(items.select(pl.col("correct").is_null().sum()).item())}  # fmt: skip
    if workload == ANCHOR_MEMBERS:
        import zipfile

        from tumorboard.traj.importers._inspect_read import _member_bytes

        n_correct = rows = 0
        with open(log, "rb") as fh, zipfile.ZipFile(fh) as z:
            for info in z.infolist():
                if info.filename.startswith("samples/") and info.filename.endswith(".json"):
                    # the members are zstd in zip: the same decompression the import uses
                    sample = json.loads(_member_bytes(z, fh, info))
                    rows += 1
                    score = (sample.get("scores") or {}).get("match") or {}
                    n_correct += score.get("value") == "C"
        return {"seconds": time.perf_counter() - t0, "rows": rows, "n_correct": n_correct}
    from inspect_ai.analysis import samples_df

    df = samples_df(log, full=workload.endswith("full=True)"), quiet=True)
    seconds = time.perf_counter() - t0
    col = "score_match"
    n_correct = int((df[col] == "C").sum()) if col in df.columns else -1
    return {"seconds": seconds, "rows": int(len(df)), "n_correct": n_correct}


def _measure(workload: str, log: Path, out: Path, timeout: float) -> dict[str, Any]:
    """Run a workload in a child process; return its report (with its peak memory, MiB)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT / "python"), os.environ.get("PYTHONPATH", "")) if p)}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--child", workload, str(log), str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    t0 = time.monotonic()
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"seconds": float("nan"), "timed_out": True, "peak_mib": float("nan")}
    if proc.returncode != 0:
        raise RuntimeError(f"{workload} failed: {stderr.decode()[-2000:]}")
    res = json.loads(stdout.decode().strip().splitlines()[-1])
    res["wall_s"] = time.monotonic() - t0
    return res


def run_results(*, n: int, timeout: float) -> tuple[list[Result], dict[str, Any]]:
    """Make the log, run the workloads, return the results and a metadata record."""
    t_start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="bench_inspect_"))
    try:
        t0 = time.perf_counter()
        log = make_log(work / "bench.eval", n)
        t_make = time.perf_counter() - t0
        size = log.stat().st_size
        measured = {}
        workloads = ["tumorboard (direct)", *ANCHORS]
        if n <= MAX_INSPECT_READER:
            workloads.insert(1, "tumorboard (inspect reader)")
        for w in workloads:
            measured[w] = _measure(w, log, work / f"store_{len(measured)}", timeout)
            print(f"  {w}: {measured[w]}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = []
    ref = measured["samples_df()"]
    for w in [w for w in measured if w.startswith("tumorboard")]:
        m = measured[w]
        ok = m["rows"] == n and ref.get("rows") == n and m["n_correct"] == ref.get("n_correct")
        check = (f"{m['rows']:,} items, {m['events']:,} events; correct "
                 f"{m['n_correct']:,} = samples_df {ref.get('n_correct')}: "
                 f"{'ok' if ok else 'MISMATCH'}")  # fmt: skip
        for a in ANCHORS:
            am = measured[a]
            note = (f"{n / m['seconds']:,.0f} samples/s, peak {m['peak_mib']:,.0f} MiB; "
                    f"{a}: {n / am['seconds']:,.0f} samples/s, peak "
                    f"{am['peak_mib']:,.0f} MiB")  # fmt: skip
            results.append(Result.make(f"import {n:,} samples, {w}", m["seconds"], a,
                                       am["seconds"], check=check, note=note))  # fmt: skip
    meta = {"samples": n, "log_bytes": size, "make_log_s": t_make, "measured": measured,
            "total_wall_s": time.perf_counter() - t_start}  # fmt: skip
    return results, meta


def _peak_mib() -> float:
    """Return this process's peak resident memory in MiB.

    Linux's VmHWM, which exec resets (``getrusage``'s ru_maxrss keeps the parent's peak).
    """
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns a process exit status."""
    parser = argparse.ArgumentParser(
        prog="bench_inspect",
        description="Time tumorboard import inspect against inspect_ai.analysis.samples_df.",
    )
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_SAMPLES:,} samples instead of {FULL_SAMPLES:,}")  # fmt: skip
    parser.add_argument("--samples", type=positive_int, default=None, help="override N")
    parser.add_argument(
        "--timeout", type=float, default=3600.0,
        help="seconds per workload before it is stopped (default 3600)",
    )  # fmt: skip
    parser.add_argument("--json", metavar="PATH", help="also write results as JSON to PATH")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        res = _child(*args.child)
        res["peak_mib"] = _peak_mib()
        print(json.dumps(res))
        return 0
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        print("error: bench_inspect needs inspect-ai (pip install 'tumorboard[inspect]')",
              file=sys.stderr)  # fmt: skip
        return 2
    n = args.samples or (QUICK_SAMPLES if args.quick else FULL_SAMPLES)
    results, meta = run_results(n=n, timeout=args.timeout)
    print(f"\n### tumorboard import inspect benchmark ({n:,} samples, "
          f"{meta['log_bytes'] / 2**20:,.0f} MiB .eval log)\n")  # fmt: skip
    print(format_markdown(results, ANCHORS))
    for r in results:
        print(f"- {r.workload} vs {r.anchor}: {r.note}")
    print(f"\nratio = anchor time / tumorboard time (>1: tumorboard faster). Log written in "
          f"{meta['make_log_s']:.0f} s; total {meta['total_wall_s']:.0f} s.")  # fmt: skip
    if args.json:
        write_json(results, args.json, meta)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
