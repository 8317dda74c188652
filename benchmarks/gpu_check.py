"""``make gpu-check``: every GPU claim measured in one bounded run, written as a results file.

On a machine with a CUDA device, in order (each step a subprocess with its own time limit, cut
at the run's overall ``--budget``; a step whose needs are missing is skipped with the reason):

1. **env** - device, driver, CUDA, torch, triton, nvImageCodec and libjpeg, commit, cores.
2. **build** - when ``tumorboard._core`` does not import: ``pip wheel --no-build-isolation
   --no-deps .`` (with ``build/jpeg-include`` or ``.jpeg-include`` as the libjpeg headers where
   the system has none), installed into ``build/gpu-site`` for the later steps.
3. **tests** - the test modules with CUDA paths, natively (every test in them).
4. **kernels** - ``benchmarks/bench_kernels.py`` (ABMIL, segment scale, fused down_proj).
5. **embed** - ``benchmarks/bench_embed.py --gpu`` (loader alone at 1/2/4/cores-1 threads and
   with ``--decode gpu``; bare forward eager / compiled / FP8 / max-autotune with MFU and
   cosine; end to end against the TRIDENT-style loop on the same slides and coordinates; GPU
   idle between slides in a 20-slide run).
6. **encoders** - ``bench_embed.py --gpu --encoders``: every patch encoder's bare forward.

It writes ``benchmarks/results/{gpu}-{date}.json`` and ``.md`` (device, driver, library
versions, commit, every figure, and each target of the GPU issue with its measured value and
whether it is met), and ``--copy-to DIR`` copies them there with the logs (one tar). Without a
CUDA device it writes nothing and says the GPU figures are pending (``--allow-cpu`` runs the
steps at tiny size, to check the driver itself).

``python benchmarks/gpu_check.py readme`` regenerates the GPU section of docs/benchmarks.md from
the newest results file of each GPU (between ``<!-- gpu-results:begin -->`` and
``<!-- gpu-results:end -->``). ``merge`` folds the files of separate calls on one GPU into one,
oldest first, as ``--update`` would have (for a lent machine that empties its output folder and
re-copies the working tree between commands, where an ``--update`` run finds no earlier file).

Usage (from the repository root)::

    make gpu-check                      # = python benchmarks/gpu_check.py
    python benchmarks/gpu_check.py [--budget S] [--steps env,kernels,...] [--patches N]
    python benchmarks/gpu_check.py readme
    python benchmarks/gpu_check.py merge OLDEST.json ... NEWEST.json   # one GPU's calls, in order
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
WORK = ROOT / "build" / "gpu-check"
SITE = ROOT / "build" / "gpu-site"
STEPS = ("env", "build", "tests", "kernels", "embed", "encoders")
README_BEGIN = "<!-- gpu-results:begin -->"
README_END = "<!-- gpu-results:end -->"

#: The tests with CUDA paths (they run their kernels and decoders natively on a GPU), cheapest
#: and most central first: a step cut at its time limit keeps what ran.
CUDA_TESTS = (
    "test_kernels_abmil.py",
    "test_kernels_segment_scale.py",
    "test_models_abmil.py",
    "test_models_adapter.py",
    "test_slides_gpu_decode.py",
    "test_embed_engine.py::test_gpu_decode_features_match_cpu_decode",
    "test_embed_engine.py::test_gpu_decode_refusals",
    "test_embed_compile.py",
)

#: Seconds each step may take at most (the overall budget cuts them further). On a lease that
#: allows one 10-minute command, split the run: ``--steps build,kernels,embed`` first, then
#: ``--update --steps tests,encoders``.
STEP_CAPS = {"build": 180.0, "tests": 240.0, "kernels": 120.0, "embed": 420.0, "encoders": 150.0}


# ---- environment ---------------------------------------------------------------------------


def _cmd(args: Sequence[str]) -> str | None:
    try:
        out = subprocess.run(list(args), capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _version(module: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:  # not installed, or no metadata
        return None


def commit() -> str | None:
    """Return the commit measured: ``$TUMORBOARD_COMMIT``, else ``git rev-parse HEAD``."""
    env = os.environ.get("TUMORBOARD_COMMIT")
    if env:
        return env
    head = _cmd(["git", "-C", str(ROOT), "rev-parse", "HEAD"])
    if head is None:
        return None
    dirty = _cmd(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"])
    return head + ("-dirty" if dirty else "")


def environment() -> dict[str, Any]:
    """Device, driver and library versions of this machine (nothing here needs tumorboard)."""
    env: dict[str, Any] = {
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "commit": commit(),
        "host_cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cuda_available": False,
    }
    try:
        import torch

        env["torch"] = torch.__version__
        env["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            p = torch.cuda.get_device_properties(0)
            env.update(cuda_available=True, gpu=p.name, sm_count=p.multi_processor_count,
                       gpu_memory_gib=round(p.total_memory / 2**30, 1),
                       compute_capability=f"{p.major}.{p.minor}")  # fmt: skip
            env["cudnn"] = torch.backends.cudnn.version()
    except ImportError:
        env["torch"] = None
    smi = _cmd(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                "--format=csv,noheader"])  # fmt: skip
    if smi:
        env["nvidia_smi"] = smi.splitlines()[0]
        env["driver"] = smi.splitlines()[0].split(",")[1].strip()
    for mod in ("triton", "numpy", "pyarrow", "h5py", "tifffile", "imagecodecs", "pillow",
                "openslide-python", "openslide-bin", "nvidia-nvimgcodec-cu13",
                "nvidia-nvimgcodec-cu12", "polars", "tumorboard"):  # fmt: skip
        v = _version(mod)
        if v is not None:
            env[mod] = v
    return env


def gpu_slug(name: str | None) -> str:
    """Return a file-name form of a GPU name: 'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3'."""
    if not name:
        return "cpu"
    s = re.sub(r"^nvidia\s+", "", name.strip().lower())
    return re.sub(r"[^a-z0-9]+", "-", s).strip("-") or "gpu"


# ---- running steps -------------------------------------------------------------------------


def run_step(name: str, args: Sequence[str], *, timeout: float, env: dict[str, str],
             cwd: Path = ROOT) -> dict[str, Any]:  # fmt: skip
    """Run one step's command, its output teed to our stdout and ``build/gpu-check/{name}.log``.

    Returns ``{"status": "ok" | "failed" | "timeout", "seconds", "returncode", "log"}``. A
    step past ``timeout`` is killed with its whole process group.
    """
    WORK.mkdir(parents=True, exist_ok=True)
    log_path = WORK / f"{name}.log"
    print(f"\n=== gpu-check: {name} (at most {timeout:.0f} s): {' '.join(args)}", flush=True)
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(list(args), cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1,
                                start_new_session=True)  # fmt: skip
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                sys.stdout.write(line)
                log.write(line)
            proc.wait()
        finally:
            timer.cancel()
    seconds = time.monotonic() - t0
    status = "timeout" if timed_out.is_set() else ("ok" if proc.returncode == 0 else "failed")
    print(f"=== gpu-check: {name} {status} in {seconds:.0f} s", flush=True)
    return {"status": status, "seconds": round(seconds, 1), "returncode": proc.returncode,
            "log": log_path.name}  # fmt: skip


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def junit_counts(path: Path) -> dict[str, Any] | None:
    """Count passed / failed / errors / skipped tests of a JUnit XML file, with failing ids."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "missing_module": 0}
    failing: list[str] = []
    skipped: list[str] = []
    missing: dict[str, list[str]] = {}
    for case in root.iter("testcase"):
        tid = f"{case.get('classname', '')}::{case.get('name', '')}"
        bad = [c for c in case if c.tag in ("failure", "error")]
        if bad:
            text = " ".join((c.get("message") or "") + " " + (c.text or "") for c in bad)
            gone = re.search(r"No module named '([\w.]+)'", text)
            if gone:  # a package this machine lacks (not a defect of the code under test)
                counts["missing_module"] += 1
                missing.setdefault(gone.group(1).split(".")[0], []).append(tid)
            elif any(c.tag == "failure" for c in bad):
                counts["failed"] += 1
                failing.append(tid)
            else:
                counts["errors"] += 1
                failing.append(tid)
        elif any(c.tag == "skipped" for c in case):
            counts["skipped"] += 1
            msg = next((c.get("message", "") for c in case if c.tag == "skipped"), "")
            skipped.append(f"{tid}: {msg}"[:200])
        else:
            counts["passed"] += 1
    return {**counts, "failing": failing, "skipped_ids": skipped, "missing": missing}


# ---- targets -------------------------------------------------------------------------------


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not math.isnan(float(x)) else None


def _kernel_ratio(kernels: Any, prefix: str, anchor: str) -> float | None:
    for r in (kernels or {}).get("results", []):
        if str(r.get("workload", "")).startswith(prefix) and r.get("anchor") == anchor:
            return _num(r.get("ratio"))
    return None


def evaluate_targets(steps: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of the GPU issue with its measured figure and whether it is met.

    ``met`` is True / False, or None where the figure is missing (its step skipped, failed or
    cut off); ``measured`` says what was read, ``where`` which figure it is.
    """
    embed = _get(steps, "embed", "data") or {}
    kernels = _get(steps, "kernels", "data") or {}
    e2e = embed.get("end_to_end") or {}
    bare = embed.get("bare") or {}
    out: list[dict[str, Any]] = []

    def add(workload: str, target: str, checks: list[tuple[float | None, float, str]],
            measured: str) -> None:  # fmt: skip
        vals = [v for v, _, _ in checks]
        met = None if any(v is None for v in vals) else all(
            (v >= lim) if op == ">=" else (v <= lim) for v, lim, op in checks
        )  # fmt: skip
        out.append({"workload": workload, "target": target, "measured": measured, "met": met})

    def fmt(v: float | None, spec: str, suffix: str = "") -> str:
        return "n/a" if v is None else f"{v:{spec}}{suffix}"

    comp = e2e.get("bf16 compiled svs-like") or {}
    r, x = _num(comp.get("patches_per_s")), _num(comp.get("ratio"))
    add(
        "UNI2-h end to end, SVS-like, compiled bf16",
        ">= 1,300 patches/s and >= 2.5x TRIDENT",
        [(r, 1300, ">="), (x, 2.5, ">=")],
        f"{fmt(r, '.0f')} patches/s, {fmt(x, '.2f', 'x')}",
    )
    fp8 = e2e.get("fp8 compiled svs-like") or {}
    r = _num(fp8.get("patches_per_s"))
    cos = _num(fp8.get("cosine_to_eager"))  # real slides' features against bf16 eager
    if cos is None:
        cos = _num(_get(bare, "fp8 compiled", "cosine"))  # the bare forward's random batch
    add("the same, FP8", ">= 1,600 patches/s, cosine to bf16 >= 0.998",
        [(r, 1600, ">="), (cos, 0.998, ">=")], f"{fmt(r, '.0f')} patches/s, cosine "
        f"{fmt(cos, '.4f')}")  # fmt: skip
    rates = _get(embed, "loader", "rates") or {}
    top = max((int(k) for k in rates), default=None)
    r15 = _num(rates.get(str(top))) if top is not None else None
    u8 = _num(_get(embed, "loader", "uint8_rate", "patches_per_s"))
    add(
        f"patch loader alone, {top if top is not None else 'cores-1'} threads (CPU decode)",
        ">= 3,000 patches/s",
        [(r15, 3000, ">=")],
        f"{fmt(r15, '.0f')} patches/s (float32 batches)"
        + (f"; uint8 batches, the engine's path to a GPU: {u8:.0f}" if u8 is not None else ""),
    )
    gd = _get(embed, "loader", "gpu_decode") or {}
    rg, diff = _num(gd.get("patches_per_s")), _num(gd.get("max_uint8_diff"))
    add("patch loader, GPU decode", ">= the CPU decode, max difference <= 8 uint8",
        [(rg, r15 if r15 is not None else math.inf, ">="), (diff, 8, "<=")]
        if r15 is not None else [(None, 0, ">=")],
        f"{fmt(rg, '.0f')} patches/s, max diff {fmt(diff, '.0f')}"
        + (f" ({gd.get('skipped') or gd.get('error')})" if "patches_per_s" not in gd
           and gd else ""))  # fmt: skip
    a_pad = _kernel_ratio(kernels, "ABMIL fwd ", "eager padded")
    a_comp = _kernel_ratio(kernels, "ABMIL fwd ", "torch.compile padded")
    add(
        "ABMIL, 64 bags of 1k-20k x 1536, bf16",
        ">= 2x eager padded, >= 1.5x torch.compile",
        [(a_pad, 2.0, ">="), (a_comp, 1.5, ">=")],
        f"{fmt(a_pad, '.2f', 'x')} eager padded, {fmt(a_comp, '.2f', 'x')} torch.compile",
    )
    seg = _get(kernels, "meta", "figures", "segment_scale") or {}
    f1, f2 = _num(seg.get("fwd_share_of_peak")), _num(seg.get("fwd_bwd_share_of_peak"))
    c1, c2 = _num(seg.get("fwd_share_of_copy")), _num(seg.get("fwd_bwd_share_of_copy"))
    add("segment-masked scale, T = 32k, D = 4096", ">= 85% of HBM bandwidth fwd and fwd+bwd",
        [(f1, 0.85, ">="), (f2, 0.85, ">=")],
        f"fwd {fmt(f1 and 100 * f1, '.0f', '%')}, fwd+bwd {fmt(f2 and 100 * f2, '.0f', '%')} "
        f"of the {fmt(_num(seg.get('hbm_peak_tb_s')) or 3.35, '.2f')} TB/s datasheet peak "
        f"({fmt(c1 and 100 * c1, '.0f', '%')} / "
        f"{fmt(c2 and 100 * c2, '.0f', '%')} of a device copy in the same run)")  # fmt: skip
    dp = _get(kernels, "meta", "figures", "down_proj") or {}
    ratio = _num(dp.get("ratio_vs_gemm"))
    picked = dp.get("dispatcher_path")
    secs = dp.get("dispatcher_seconds") or {}
    fastest = min(secs, key=secs.__getitem__) if secs else None
    ok = None if ratio is None else (ratio >= 0.97 or (picked is not None and picked == fastest))
    out.append({"workload": "fused down_proj + scale + residual",
                "target": ">= 0.97x cuBLAS GEMM, or the dispatcher picks the faster path",
                "measured": f"{fmt(ratio, '.2f', 'x')} the GEMM; dispatcher chose {picked} "
                            f"(fastest measured: {fastest})", "met": ok})  # fmt: skip
    idle = embed.get("idle") or {}
    share = _num(idle.get("between_slides_share"))
    add(f"GPU idle between slides, {idle.get('slides', 20)}-slide run", "<= 2% of wall time",
        [(share, 0.02, "<=")], f"{fmt(share and 100 * share, '.2f', '%')} between slides, "
        f"{fmt(_num(idle.get('idle_share')) and 100 * idle['idle_share'], '.2f', '%')} idle "
        "in all")  # fmt: skip
    return out


# ---- the results file ----------------------------------------------------------------------


def _md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def _kernel_lines(kernels: dict[str, Any]) -> list[str]:
    rows = []
    for r in kernels.get("results", []):
        ratio = _num(r.get("ratio"))
        rows.append([r.get("workload", ""), r.get("anchor", ""),
                     f"{1e3 * r['tumorboard_s']:.3f}" if _num(r.get("tumorboard_s")) else "n/a",
                     f"{1e3 * r['anchor_s']:.3f}" if _num(r.get("anchor_s")) else "n/a",
                     f"{ratio:.2f}x" if ratio is not None else "n/a",
                     r.get("check", "")])  # fmt: skip
    lines = _md_table(["workload", "anchor", "tumorboard ms", "anchor ms", "ratio", "check"], rows)
    notes = [f"- {r['workload']}: {r['note']}" for r in kernels.get("results", []) if r.get("note")]
    return lines + ([""] + notes if notes else [])


def render_markdown(results: dict[str, Any]) -> str:
    """Render the ``.md`` twin of a results file (also what the README's GPU section shows)."""
    env = results.get("env", {})
    steps = results.get("steps", {})
    gpu = env.get("gpu", "no GPU")
    out = [f"### GPU results: {gpu}, {env.get('date_utc', '')} UTC", ""]
    out.append(
        f"Commit `{env.get('commit')}`; driver {env.get('driver', 'n/a')}, CUDA "
        f"{env.get('torch_cuda', 'n/a')}, torch {env.get('torch', 'n/a')}, triton "
        f"{env.get('triton', 'n/a')}, {env.get('host_cores', '?')} host cores; "
        f"`{results.get('command', 'make gpu-check')}`."
    )
    runs = results.get("runs", [])
    if len(runs) > 1:
        out += ["", "Runs merged into this file (`gpu_check.py --update` or `merge`):", ""]
        out += [
            f"- `{str(r.get('commit'))[:12]}` at {r.get('date_utc')} UTC: "
            f"{', '.join(r.get('steps', []))} (`{r.get('command')}`)"
            for r in runs
        ]
    out += ["", "| step | status | seconds | note |", "|---|---|---|---|"]
    for name in STEPS:
        s = steps.get(name)
        if s is None:
            continue
        note = s.get("reason") or ""
        if name == "tests" and s.get("counts"):
            c = s["counts"]
            note = (f"{c['passed']} passed, {c['failed']} failed, {c['errors']} errors, "
                    f"{c['skipped']} skipped")  # fmt: skip
            if c.get("missing_module"):
                mods = ", ".join(f"{m} ({len(v)})" for m, v in c["missing"].items())
                note += (f"; {c['missing_module']} not runnable here, a package missing on "
                         f"this machine: {mods}")  # fmt: skip
            if c["failing"]:
                note += "; failing: " + ", ".join(c["failing"][:8])
        out.append(f"| {name} | {s.get('status')} | {s.get('seconds', '')} | {note} |")
    out += ["", "#### Targets", ""]
    rows = [[t["workload"], t["target"], t["measured"],
             {True: "met", False: "**not met**", None: "not measured"}[t["met"]]]
            for t in results.get("targets", [])]  # fmt: skip
    out += _md_table(["workload", "target", "measured", ""], rows)
    if results.get("findings"):
        out += ["", "#### Findings (what limits each target, what broke)", ""]
        out += [f"- {f}" for f in results["findings"]]
    embed = _get(steps, "embed", "data")
    if embed and embed.get("lines"):
        out += ["", "#### Embedding (`bench_embed.py --gpu`)", ""]
        out += [ln for ln in embed["lines"] if not ln.startswith("### ")]
    kernels = _get(steps, "kernels", "data")
    if kernels and kernels.get("results"):
        out += ["", "#### Kernels (`bench_kernels.py`)", ""] + _kernel_lines(kernels)
    enc = _get(steps, "encoders", "data")
    if enc and enc.get("lines"):
        out += ["", "#### Patch encoders, bare forward (`bench_embed.py --gpu --encoders`)", ""]
        out += [ln for ln in enc["lines"] if not ln.startswith("### ")]
    text = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def latest_results(folder: Path = RESULTS) -> Path | None:
    """Return the newest results file (by its run's date, then its name), or None."""
    files = latest_per_gpu(folder)
    return files[0] if files else None


def latest_per_gpu(folder: Path = RESULTS) -> list[Path]:
    """Return the newest results file of each GPU model, newest first.

    One H100 file, one H200 file, ...: figures of different cards are never merged or compared.
    """
    newest: dict[str, tuple[str, str, Path]] = {}
    for p in folder.glob("*.json"):
        env = (_load_json(p) or {}).get("env", {})
        key = (env.get("date_utc", ""), p.name, p)
        gpu = gpu_slug(env.get("gpu"))
        if gpu not in newest or key[:2] > newest[gpu][:2]:
            newest[gpu] = key
    return [k[2] for k in sorted(newest.values(), key=lambda k: k[:2], reverse=True)]


def readme_section(results_paths: Sequence[Path]) -> str:
    """Return the text between the README's GPU-results markers, from ``results_paths``.

    ``results_paths``: the newest results file of each GPU, newest first.
    """
    if not results_paths:
        return ("No GPU results file yet: `make gpu-check` on a CUDA machine writes one to "
                "`benchmarks/results/`.\n")  # fmt: skip
    rels = [f"`{p.relative_to(ROOT) if p.is_relative_to(ROOT) else p}`" for p in results_paths]
    parts = [
        f"Generated from {', '.join(rels)} (the newest results file of each GPU, newest "
        "first) by `python benchmarks/gpu_check.py readme`; do not edit by hand.\n"
    ]
    parts += [render_markdown(json.loads(p.read_text())) for p in results_paths]
    return "\n".join(parts)


#: The document whose GPU section is generated (between README_BEGIN and README_END).
GPU_DOC = ROOT / "docs" / "benchmarks.md"


def update_readme(readme: Path = GPU_DOC, folder: Path = RESULTS) -> bool:
    """Rewrite the GPU section of docs/benchmarks.md from the newest results file of each GPU.

    Returns whether the text changed.
    """
    text = readme.read_text()
    if README_BEGIN not in text or README_END not in text:
        raise SystemExit(f"{readme}: no '{README_BEGIN}' ... '{README_END}' block to fill")
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    new = f"{head}{README_BEGIN}\n{readme_section(latest_per_gpu(folder))}{README_END}{tail}"
    if new == text:
        return False
    tmp = readme.with_name(readme.name + ".tmp")
    tmp.write_text(new)
    os.replace(tmp, readme)
    return True


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _measured(record: Any) -> bool:
    """Whether a figure record holds a measurement or an error (not only a skip)."""
    return not (isinstance(record, dict) and "skipped" in record and "patches_per_s" not in record)


def merge_step(name: str, old: dict[str, Any] | None, new: dict[str, Any],
               run: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """Merge a partial re-run of a step into the record of an earlier run (``--update``).

    Tests, build and the encoder table are replaced whole. Kernel rows are replaced by workload
    (without its ``[path: ...]`` tag) and anchor, and their derived figures by name. Embedding
    figure records (an end-to-end row, a bare-forward row, the GPU-decode loader, the idle run)
    are replaced one by one where the re-run measured them (a skip keeps the earlier figure);
    the re-run's own context (collection sizes, the TRIDENT-style rates of its collections,
    its printed tables) goes to ``reruns``. A step that failed or was cut off keeps the earlier
    figures, its own outcome under ``rerun``.
    """
    if old is None or name not in ("kernels", "embed") or not isinstance(old.get("data"), dict):
        return new
    if not isinstance(new.get("data"), dict):
        return {**old, "rerun": {k: v for k, v in new.items() if k != "data"}}
    od, nd = old["data"], new["data"]
    if name == "kernels":

        def key(r: dict[str, Any]) -> tuple[str, str]:
            return (str(r.get("workload", "")).split(" [path:")[0], str(r.get("anchor")))

        fresh = {key(r) for r in nd.get("results", [])}
        rows = [r for r in od.get("results", []) if key(r) not in fresh]
        meta = dict(od.get("meta", {}))
        meta["figures"] = {**meta.get("figures", {}), **nd.get("meta", {}).get("figures", {})}
        data = {**od, "results": rows + list(nd.get("results", [])), "meta": meta}
    else:
        data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in od.items()}
        for part in ("end_to_end", "bare", "loader"):
            for k, rec in (nd.get(part) or {}).items():
                if _measured(rec):
                    data.setdefault(part, {})[k] = rec
        if _measured(nd.get("idle")) and nd.get("idle") is not None:
            data["idle"] = nd["idle"]
        head = (
            f"Re-measured at commit `{str(run.get('commit'))[:12]}` "
            f"({run.get('date_utc')} UTC), sections {', '.join(nd.get('sections', []))}:"
        )
        new_lines = [ln for ln in nd.get("lines", []) if not ln.startswith("### ")]
        data["lines"] = [*od.get("lines", []), "", head, "", *new_lines]
        context = {k: nd.get(k) for k in ("sections", "patches", "trident_style", "budget_s")}
        data["reruns"] = [
            *od.get("reruns", []),
            {"commit": run.get("commit"), "date_utc": run.get("date_utc"), **context},
        ]
    merged = {**new, "data": data}
    merged["seconds"] = round(float(old.get("seconds", 0)) + float(new.get("seconds", 0)), 1)
    return merged


def _runs_of(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Return a results file's runs (a file written before runs were recorded: its one run)."""
    return results.get("runs") or [{"commit": results["env"].get("commit"),
                                     "date_utc": results["env"].get("date_utc"),
                                     "command": results.get("command"),
                                     "steps": list(results.get("steps", {}))}]  # fmt: skip


def _results_paths(folder: Path, env: dict[str, Any]) -> tuple[Path, Path]:
    """Return the .json and .md paths of the results of ``env``'s GPU and day in ``folder``."""
    stem = f"{gpu_slug(env.get('gpu'))}-{str(env.get('date_utc', ''))[:10]}"
    return folder / f"{stem}.json", folder / f"{stem}.md"


def merge_results(paths: Sequence[Path]) -> dict[str, Any]:
    """Merge results files of one GPU, oldest first, as ``--update`` runs would have.

    For calls whose results folder does not survive between them (a lent machine that empties
    its output folder and re-copies the working tree for each command): each call writes its own
    file, and ``gpu_check.py merge OLDEST.json ... NEWEST.json`` folds them into one, each later
    file's steps merged into the earlier record by :func:`merge_step` and its runs appended.
    """
    if not paths:
        raise SystemExit("gpu_check merge: name the results files to merge, oldest first")
    loaded = []
    for p in paths:
        data = _load_json(Path(p))
        if data is None or not isinstance(data.get("steps"), dict):
            raise SystemExit(f"gpu_check merge: {p} is not a gpu-check results file (no 'steps')")
        loaded.append(data)
    base = loaded[0]
    gpus = {gpu_slug(d.get("env", {}).get("gpu")) for d in loaded}
    if len(gpus) > 1:
        raise SystemExit(f"gpu_check merge: the files measured different GPUs ({sorted(gpus)}); "
                         "figures of different cards are kept in separate files")  # fmt: skip
    base["runs"] = _runs_of(base)
    for later in loaded[1:]:
        runs = _runs_of(later)
        for name, rec in later["steps"].items():
            base["steps"][name] = merge_step(name, base["steps"].get(name), rec, runs[-1])
        base["runs"].extend(runs)
        base["findings"] = [*base.get("findings", []), *later.get("findings", [])]
        base["wall_s"] = round(float(base.get("wall_s", 0)) + float(later.get("wall_s", 0)), 1)
    if not base.get("findings"):
        base.pop("findings", None)
    base["targets"] = evaluate_targets(base["steps"])
    return base


# ---- the run -------------------------------------------------------------------------------


def _pythonpath_env(extra: Path | None) -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if extra is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(extra), os.environ.get("PYTHONPATH", "")) if p
        )
    return env


def _core_imports(env: dict[str, str]) -> str | None:
    """None when ``tumorboard._core`` imports in a fresh interpreter under ``env``, else why."""
    out = subprocess.run([sys.executable, "-c", "import tumorboard._core"], env=env,
                         capture_output=True, text=True, cwd="/", check=False)  # fmt: skip
    return None if out.returncode == 0 else (out.stderr.strip().splitlines() or ["?"])[-1]


def build_step(timeout: float) -> tuple[dict[str, Any], Path | None]:
    """Build the wheel here and install it into ``build/gpu-site`` (no network, no deps)."""
    wheel_dir = WORK / "wheel"
    shutil.rmtree(wheel_dir, ignore_errors=True)
    args = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w",
            str(wheel_dir), str(ROOT)]  # fmt: skip
    if not Path("/usr/include/jpeglib.h").exists():
        for inc in (ROOT / "build" / "jpeg-include", ROOT / ".jpeg-include"):
            if (inc / "jpeglib.h").exists():
                args += ["-C", f"cmake.define.TUMORBOARD_JPEG_INCLUDE_DIR={inc}"]
                break
    t0 = time.monotonic()
    res = run_step("build", args, timeout=timeout, env=_pythonpath_env(None))
    if res["status"] != "ok":
        return res, None
    wheels = sorted(wheel_dir.glob("tumorboard-*.whl"))
    shutil.rmtree(SITE, ignore_errors=True)
    inst = run_step("install", [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                                "--no-compile", "--target", str(SITE), *map(str, wheels)],
                    timeout=120, env=_pythonpath_env(None))  # fmt: skip
    res["seconds"] = round(time.monotonic() - t0, 1)
    if inst["status"] != "ok":
        return {**inst, "reason": "pip install of the built wheel failed"}, None
    return res, SITE


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns a process exit status."""
    parser = argparse.ArgumentParser(
        prog="gpu_check",
        description="Measure every GPU claim in one bounded run and write "
        "benchmarks/results/{gpu}-{date}.json and .md ('readme': regenerate the GPU section of "
        "docs/benchmarks.md from the latest results file).",
    )
    parser.add_argument("action", nargs="?", default="run", choices=("run", "readme", "merge"))
    parser.add_argument("files", nargs="*", type=Path,
                        help="merge: results files of one GPU, oldest first")  # fmt: skip
    parser.add_argument("--budget", type=float, default=560.0, metavar="SECONDS",
                        help="the whole run's time limit; later steps get what is left "
                        "(default 560)")  # fmt: skip
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"comma-separated subset of {','.join(STEPS)}")  # fmt: skip
    parser.add_argument(
        "--patches",
        type=int,
        default=16000,
        help="patches of the two embedding collections together (default 16000)",
    )
    parser.add_argument(
        "--build",
        choices=("auto", "always", "never"),
        default="auto",
        help="build the wheel first: when the core does not import (auto)",
    )
    parser.add_argument(
        "--copy-to",
        metavar="DIR",
        help="also copy the results files and a tar of the logs into DIR",
    )
    parser.add_argument(
        "--allow-cpu",
        action="store_true",
        help="run without CUDA at tiny sizes (checks the driver; no results "
        "file is written to benchmarks/results unless --results-dir is given)",
    )
    parser.add_argument(
        "--results-dir",
        metavar="DIR",
        default=None,
        help="where the results files go (default benchmarks/results)",
    )
    parser.add_argument(
        "--kernels-only",
        default=None,
        metavar="GROUPS",
        help="kernels step: only these workload groups (bench_kernels.py --only)",
    )
    parser.add_argument(
        "--embed-sections",
        default=None,
        metavar="SECTIONS",
        help="embed step: only these sections (bench_embed.py --sections)",
    )
    parser.add_argument(
        "--update",
        action="store_true",
        help="merge this run's steps into today's results file for this GPU instead of "
        "replacing it (a partial re-run after a fix keeps the other figures, each run's "
        "commit recorded)",
    )
    args = parser.parse_args(argv)
    if args.action == "readme":
        changed = update_readme()
        state = "updated" if changed else "already up to date"
        print(f"docs/benchmarks.md GPU section {state} from "
              f"{latest_results() or 'no results file'}")  # fmt: skip
        return 0
    if args.action == "merge":
        merged = merge_results(args.files)
        folder = Path(args.results_dir) if args.results_dir else RESULTS
        json_path, md_path = _results_paths(folder, merged["env"])
        _write_atomic(json_path, json.dumps(merged, indent=1, default=str) + "\n")
        _write_atomic(md_path, render_markdown(merged))
        print(f"gpu_check merge: {len(args.files)} files -> {json_path} and {md_path}")
        return 0
    if args.files:
        parser.error("results files are named only with 'merge'")
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        parser.error(f"--steps: unknown step(s) {', '.join(unknown)}; expected among "
                     f"{', '.join(STEPS)}")  # fmt: skip
    start = time.monotonic()

    def left() -> float:
        return args.budget - (time.monotonic() - start)

    env_info = environment()
    cuda = bool(env_info.get("cuda_available"))
    if not cuda and not args.allow_cpu:
        print("gpu-check: no CUDA device here (torch "
              f"{env_info.get('torch') or 'not installed'}): the GPU figures are pending. "
              "Run `make gpu-check` on a CUDA machine; nothing was written.")  # fmt: skip
        return 0
    given = list(sys.argv[1:] if argv is None else argv)
    results: dict[str, Any] = {"schema": 1, "env": env_info,
                               "command": "make gpu-check" + (f" GPU_CHECK_ARGS='{' '.join(given)}'"
                                                              if given else ""),
                               "budget_s": args.budget, "steps": {}}  # fmt: skip
    out_dir = Path(args.results_dir) if args.results_dir else (RESULTS if cuda else None)
    if out_dir is None:
        out_dir = WORK / "results"
    json_path, md_path = _results_paths(out_dir, env_info)
    this_run = {"commit": env_info.get("commit"), "date_utc": env_info["date_utc"],
                "command": results["command"], "steps": steps}  # fmt: skip
    base = _load_json(json_path) if args.update else None
    if args.update and base is None:
        print(f"gpu-check: --update found no results file of this GPU for today at {json_path}: "
              "this run writes a new one. Where each call starts from a fresh copy of the tree, "
              "keep each call's file and fold them with `gpu_check.py merge OLDEST.json ... "
              "NEWEST.json`.", flush=True)  # fmt: skip
    if base is not None:
        base["runs"] = _runs_of(base)
        base["runs"].append(this_run)
        results = base
    else:
        results["runs"] = [this_run]
    steps_out: dict[str, Any] = results["steps"]
    merged_from = dict(steps_out)  # the earlier runs' records of the steps re-run now

    def save() -> None:
        results["targets"] = evaluate_targets(steps_out)
        results["wall_s"] = round(time.monotonic() - start, 1)
        _write_atomic(json_path, json.dumps(results, indent=1, default=str) + "\n")
        _write_atomic(md_path, render_markdown(results))
        if args.copy_to:
            dest = Path(args.copy_to)
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(json_path, dest / json_path.name)
            shutil.copy2(md_path, dest / md_path.name)
            with tarfile.open(dest / "gpu-check-logs.tar.gz", "w:gz") as tar:
                for p in sorted(WORK.glob("*.log")) + sorted(WORK.glob("*.xml")):
                    tar.add(p, arcname=p.name)

    steps_out["env"] = {"status": "ok", "seconds": 0.0}
    site: Path | None = None
    env = _pythonpath_env(None)
    why = _core_imports(env)
    if why is not None and (SITE / "tumorboard").is_dir():  # built by an earlier gpu-check
        env_site = _pythonpath_env(SITE)
        if _core_imports(env_site) is None and args.build != "always":
            env, why, site = env_site, None, SITE
    if "build" in steps and (args.build == "always" or (args.build == "auto" and why)):
        res, site = build_step(min(STEP_CAPS["build"], max(1.0, left())))
        steps_out["build"] = res
        env = _pythonpath_env(site) if site else env
        why = _core_imports(env)
    elif "build" in steps:
        steps_out["build"] = {"status": "skipped", "reason": "tumorboard._core already imports"
                              if why is None else f"--build never ({why})"}  # fmt: skip
    save()
    if why is not None:
        for name in steps:
            steps_out.setdefault(
                name, {"status": "skipped", "reason": f"tumorboard does not import: {why}"}
            )
        save()
        print(f"gpu-check: tumorboard does not import ({why}); wrote {json_path}")
        return 1
    env_info["tumorboard"] = subprocess.run(
        [sys.executable, "-c", "import tumorboard; print(tumorboard.__version__)"], env=env,
        capture_output=True, text=True, cwd="/", check=False).stdout.strip() or None  # fmt: skip
    env_info["libjpeg"] = subprocess.run(
        [sys.executable, "-c", "from tumorboard import slides; print(slides.native_jpeg())"],
        env=env, capture_output=True, text=True, cwd="/", check=False,
    ).stdout.strip()[:300] or None  # fmt: skip

    py = sys.executable
    bench = ROOT / "benchmarks"
    plan: list[tuple[str, list[str], Path | None]] = []
    if "tests" in steps:
        x_path = WORK / "junit.xml"
        # one test past 60 s fails with its stack (pytest-timeout, where installed) instead of
        # eating the step's whole time
        per_test = ["--timeout=60"] if importlib.util.find_spec("pytest_timeout") else []
        plan.append(("tests", [py, "-m", "pytest", "-v", "-p", "no:cacheprovider",
                               "--durations=15", f"--junitxml={x_path}", *per_test,
                               *CUDA_TESTS], x_path))  # fmt: skip
    if "kernels" in steps:
        k_json = WORK / "kernels.json"
        only = ["--only", args.kernels_only] if args.kernels_only else []
        plan.append(("kernels", [py, str(bench / "bench_kernels.py"), "--json", str(k_json),
                                 *only], k_json))  # fmt: skip
    if "embed" in steps:
        e_json = WORK / "embed.json"
        patches = args.patches if cuda else 256
        sec = ["--sections", args.embed_sections] if args.embed_sections else []
        plan.append(("embed", [py, str(bench / "bench_embed.py"), "--gpu", "--patches",
                               str(patches), "--json", str(e_json), *sec], e_json))  # fmt: skip
    if "encoders" in steps:
        n_json = WORK / "encoders.json"
        plan.append(("encoders", [py, str(bench / "bench_embed.py"), "--gpu", "--encoders",
                                  "--json", str(n_json)], n_json))  # fmt: skip
    for name, cmd, data_path in plan:
        budget = min(STEP_CAPS[name], left() - 5)
        if budget < 20:
            steps_out[name] = {"status": "skipped", "reason": "time budget"}
            save()
            continue
        if data_path is not None and data_path.exists():
            data_path.unlink()
        if name in ("embed", "encoders"):
            cmd = [*cmd, "--budget", f"{max(10.0, budget - 15):.0f}"]
        step_env = env
        if name == "tests":  # the log tells a kernel still autotuning from a hung one
            step_env = {**env, "TRITON_PRINT_AUTOTUNING": "1"}
        res = run_step(name, cmd, timeout=budget, env=step_env,
                       cwd=ROOT / "tests" if name == "tests" else ROOT)  # fmt: skip
        if name == "tests":
            res["counts"] = junit_counts(data_path) if data_path else None
        elif data_path is not None:
            res["data"] = _load_json(data_path)
        res["commit"] = env_info.get("commit")
        steps_out[name] = merge_step(name, merged_from.get(name), res, this_run)
        save()
    save()
    print(f"\ngpu-check: wrote {json_path} and {md_path} in {time.monotonic() - start:.0f} s\n")
    print(render_markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
