"""Benchmark tumorboard's Triton kernels (``tumorboard.kernels``) against torch on a CUDA GPU.

Workloads, anchors and targets, measured in the same run:

* **ABMIL** - 64 bags of 1k-20k patches (lengths drawn uniformly with a fixed seed), D=1536,
  bf16, MTBBench's pooler configuration (2 gated heads of width 512). tumorboard: the fused
  variable-length kernel (``ABMIL.forward_varlen(backend="triton")``). Anchors: torch eager on
  the padded batch with a mask (``ABMIL.forward``), torch eager bag by bag, and
  ``torch.compile`` of the padded forward (compilation excluded). The note gives the achieved
  TFLOP/s of the gate/attention GEMMs (counted over the whole kernel time, so a lower bound)
  as a fraction of the bf16 dense peak. Target: >= 2x eager padded and >= 1.5x
  ``torch.compile`` of the padded forward, with the gate/attention GEMM part >= 50% of the bf16
  peak.
* **segment scale** - ``h * (1 + gamma[seg])`` at T=32k tokens, D=4096, bf16, forward and
  forward+backward, against the same expression in torch eager; the note gives the achieved
  fraction of HBM bandwidth (bytes that must move: fwd reads h, writes y; bwd reads dy and h,
  writes dh; seg and gamma are negligible). Target: forward+backward >= 85% of the HBM
  bandwidth.
* **fused down_proj** - ``(x @ W.T) * (1 + gamma[seg]) + residual`` (LLaMA-7B MLP shape,
  I=11008 -> D=4096, bf16) with the scaling and residual in the GEMM epilogue, against the
  plain cuBLAS GEMM ``x @ W.T`` and against eager GEMM + scale + add. Target: within 3% of the
  plain cuBLAS GEMM (at most 3% slower, ratio >= 0.97).

``ratio`` = anchor time / tumorboard time (above 1: tumorboard faster). Timings are CUDA-event
medians after warm-up; ``check`` compares the outputs of tumorboard and the anchor.

Without a CUDA device (or without triton) the script says so and exits 0: the GPU figures are
pending there.

Usage (from the repository root)::

    python benchmarks/bench_kernels.py [--quick] [--json PATH] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

try:
    from ._timing import Result, format_markdown, write_json
except ImportError:  # run as a script: ``python benchmarks/bench_kernels.py``
    from _timing import Result, format_markdown, write_json

#: H100 SXM / H200 dense bf16 tensor-core peak (NVIDIA datasheets: the same for both).
PEAK_BF16_FLOPS = 989e12
#: HBM bandwidth by device name, most specific first (NVIDIA datasheets: H200 4.8 TB/s HBM3e,
#: H100 NVL 3.9, H100 PCIe 2.0, H100 SXM 3.35); the H100 SXM figure for other devices.
HBM_PEAKS = (("H200", 4.8e12), ("H100 NVL", 3.9e12), ("H100 PCIe", 2.0e12), ("H100", 3.35e12))
PEAK_HBM_BYTES = 3.35e12


def hbm_peak(device_name: str | None) -> float:
    """Return the HBM datasheet bandwidth (bytes/s) of a GPU named ``device_name``."""
    for key, peak in HBM_PEAKS:
        if device_name and key in device_name:
            return peak
    return PEAK_HBM_BYTES


SEED = 0

ANCHOR_PADDED = "eager padded"
ANCHOR_LOOP = "eager per-bag loop"
ANCHOR_COMPILE = "torch.compile padded"
ANCHOR_EAGER = "torch eager"
ANCHOR_GEMM = "plain GEMM"
ANCHORS = (ANCHOR_PADDED, ANCHOR_LOOP, ANCHOR_COMPILE, ANCHOR_EAGER, ANCHOR_GEMM)

#: Derived figures of the last run (bandwidth shares, dispatcher choice), written to the JSON
#: meta as ``figures`` for the targets that are not a time ratio.
FIGURES: dict[str, Any] = {}


def _host_dispatch(fn: Callable[[], Any], device: str, calls: int = 50) -> float:
    """Seconds the host takes to issue one call of ``fn``, the device not waited for.

    On CUDA, ``calls`` back-to-back calls are timed on the host clock without synchronising in
    between: when this exceeds the device time per call the loop is dispatch-bound.
    """
    import torch

    fn()
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    seconds = (time.perf_counter() - t0) / calls
    if device == "cuda":
        torch.cuda.synchronize()
    return seconds


def _timer(device: str) -> Callable[[Callable[[], Any], int], float]:
    """Median seconds per call of ``fn`` over ``repeat`` samples (CUDA events on a GPU)."""
    import torch

    def run(fn: Callable[[], Any], repeat: int) -> float:
        fn()  # warm-up (autotuning, compilation, allocator)
        if device == "cuda":
            torch.cuda.synchronize()
        # calibrate the number of calls per sample to about 50 ms
        t0 = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        one = max(time.perf_counter() - t0, 1e-6)
        number = max(1, min(100, int(0.05 / one)))
        samples = []
        for _ in range(repeat):
            if device == "cuda":
                start, end = (
                    torch.cuda.Event(enable_timing=True),
                    torch.cuda.Event(enable_timing=True),
                )
                start.record()
                for _ in range(number):
                    fn()
                end.record()
                torch.cuda.synchronize()
                samples.append(start.elapsed_time(end) / 1e3 / number)
            else:
                t0 = time.perf_counter()
                for _ in range(number):
                    fn()
                samples.append((time.perf_counter() - t0) / number)
        return statistics.median(samples)

    return run


def _close(a: Any, b: Any, tol: float) -> str:
    err = float((a.float() - b.float()).abs().max())
    scale = max(float(b.float().abs().max()), 1.0)
    return f"ok (max err {err:.2e})" if err <= tol * scale else f"MISMATCH (max err {err:.2e})"


def bench_abmil(
    *, device: str, repeat: int, n_bags: int, lo: int, hi: int, dim: int, hidden: int
) -> list[Result]:
    import torch
    from tumorboard.models.abmil import ABMIL

    timer = _timer(device)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    g = torch.Generator().manual_seed(SEED)
    lengths = torch.randint(lo, hi + 1, (n_bags,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]).to(device)
    total = int(lengths.sum())
    x = torch.randn(total, dim, generator=g).to(device=device, dtype=dtype)
    torch.manual_seed(SEED)
    m = ABMIL(dim, hidden=hidden, n_heads=2, gated=True).to(device=device, dtype=dtype).eval()
    n_max = int(lengths.max())
    padded = x.new_zeros((n_bags, n_max, dim))
    mask = torch.zeros((n_bags, n_max), dtype=torch.bool, device=device)
    starts = offsets[:-1].tolist()
    for b, (s, n) in enumerate(zip(starts, lengths.tolist(), strict=True)):
        padded[b, :n] = x[s : s + n]
        mask[b, :n] = True
    bags = [x[s : s + n] for s, n in zip(starts, lengths.tolist(), strict=True)]

    from tumorboard.kernels import abmil as kernels_abmil
    from tumorboard.kernels._utils import tma_ok

    with torch.inference_mode():
        fused = m.forward_varlen(x, offsets, backend="triton")
        want = m(padded, mask)[0]
        check = _close(fused, want, 3e-2 if dtype == torch.bfloat16 else 1e-4)
        t_fused = timer(lambda: m.forward_varlen(x, offsets, backend="triton"), repeat)
        prepared = kernels_abmil._Prepared.of(x, *kernels_abmil.module_weights(m))
        t_scores = timer(lambda: kernels_abmil._scores(x, prepared), repeat)
        t_pad = timer(lambda: m(padded, mask), repeat)
        t_loop = timer(lambda: [m(bag[None]) for bag in bags], repeat)
        t_comp = None
        if device == "cuda":
            compiled = torch.compile(m)
            t_comp = timer(lambda: compiled(padded, mask), repeat)
    path = "persistent TMA" if tma_ok(x, prepared.wa, prepared.wg) else "pointer tiles"
    flops = 2.0 * total * dim * hidden * 2 * 2  # attention + gate GEMMs, 2 heads
    name = (
        f"ABMIL fwd {n_bags} bags {lo}-{hi} x {dim} ({str(dtype).removeprefix('torch.')}) "
        f"[path: {path}]"
    )
    note = (
        f"{total} patches; gate/attention GEMMs at {flops / t_fused / 1e12:.0f} TFLOP/s over "
        f"the whole forward = {100 * flops / t_fused / PEAK_BF16_FLOPS:.0f}% of the "
        f"{PEAK_BF16_FLOPS / 1e12:.0f} TFLOP/s bf16 peak; the scores kernel alone "
        f"{flops / t_scores / 1e12:.0f} TFLOP/s = {100 * flops / t_scores / PEAK_BF16_FLOPS:.0f}%"
    )
    out = [
        Result.make(name, t_fused, ANCHOR_PADDED, t_pad, check=check, note=note),
        Result.make(name, t_fused, ANCHOR_LOOP, t_loop, check=check),
    ]
    if t_comp is not None:
        out.append(Result.make(name, t_fused, ANCHOR_COMPILE, t_comp, check=check))

    # forward + backward (gradients of x and every weight) against eager padded autograd
    gx = torch.randn(n_bags, m.n_branches, dim, generator=g).to(device=device, dtype=dtype)
    xv = x.detach().clone().requires_grad_(True)
    xp = padded.detach().clone().requires_grad_(True)

    def fb_fused() -> None:
        m.zero_grad(set_to_none=True)
        xv.grad = None
        m.forward_varlen(xv, offsets, backend="triton").backward(gx)

    def fb_padded() -> None:
        m.zero_grad(set_to_none=True)
        xp.grad = None
        m(xp, mask)[0].backward(gx)

    fb_fused()
    gf = xv.grad.clone()
    fb_padded()
    gp = torch.cat([xp.grad[b, :n] for b, n in enumerate(lengths.tolist())])
    check_b = _close(gf, gp, 3e-2 if dtype == torch.bfloat16 else 1e-4)
    t_fb = timer(fb_fused, repeat)
    t_fb_pad = timer(fb_padded, repeat)
    name_b = (
        f"ABMIL fwd+bwd {n_bags} bags {lo}-{hi} x {dim} ({str(dtype).removeprefix('torch.')}) "
        f"[path: {'fused analytic backward' if path == 'persistent TMA' else 'recompute'}]"
    )
    out.append(Result.make(name_b, t_fb, ANCHOR_PADDED, t_fb_pad, check=check_b))
    return out


def bench_segment_scale(*, device: str, repeat: int, tokens: int, dim: int) -> list[Result]:
    import torch
    from tumorboard.kernels.segment_scale import segment_scale

    timer = _timer(device)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    g = torch.Generator().manual_seed(SEED)
    h = torch.randn(tokens, dim, generator=g).to(device=device, dtype=dtype)
    seg = torch.randint(0, 4, (tokens,), generator=g, dtype=torch.int8).to(device)
    gamma = (0.1 * torch.randn(3, dim, generator=g)).to(device)
    dy = torch.randn(tokens, dim, generator=g).to(device=device, dtype=dtype)
    hg = h.clone().requires_grad_(True)
    gg = gamma.clone().requires_grad_(True)

    def eager(hh: Any, gm: Any) -> Any:  # what a plain torch adapter writes
        table = torch.cat([gm.new_zeros((1, dim)), gm])
        return hh * (1.0 + table[seg.long()]).to(hh.dtype)

    def fwd_bwd(fn: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            hg.grad = gg.grad = None
            fn().backward(dy)

        return run

    with torch.no_grad():
        y = segment_scale(h, seg, gamma, backend="triton")
        check = _close(y, eager(h, gamma), 1e-2 if dtype == torch.bfloat16 else 1e-5)
        t_fwd = timer(lambda: segment_scale(h, seg, gamma, backend="triton"), repeat)
        t_fwd_eager = timer(lambda: eager(h, gamma), repeat)
    fb_triton = fwd_bwd(lambda: segment_scale(hg, seg, gg, backend="triton"))
    t_fb = timer(fb_triton, repeat)
    t_fb_host = _host_dispatch(fb_triton, device)
    # the backward kernel alone (dh and the dgamma partials, with their fixed-order sum): what
    # is left of fwd+bwd beyond the two kernels is autograd and launch overhead
    from tumorboard.kernels.segment_scale import _bwd_triton

    gamma_c = gamma.contiguous()
    t_bwd = timer(lambda: _bwd_triton(dy, h, seg, gamma_c), repeat)
    t_fb_eager = timer(fwd_bwd(lambda: eager(hg, gg)), repeat)
    elem = h.element_size() * tokens * dim
    peak = hbm_peak(torch.cuda.get_device_name() if h.is_cuda else None)
    t_copy = timer(lambda: h.clone(), repeat)  # the achievable bandwidth, same run
    bw_copy = 2 * elem / t_copy
    bw_fwd = 2 * elem / t_fwd
    bw_fb = 5 * elem / t_fb
    bw_bwd = 3 * elem / t_bwd
    tag = f"T={tokens} D={dim} ({str(dtype).removeprefix('torch.')})"
    FIGURES["segment_scale"] = {
        "tokens": tokens,
        "dim": dim,
        "fwd_tb_s": bw_fwd / 1e12,
        "fwd_bwd_tb_s": bw_fb / 1e12,
        "copy_tb_s": bw_copy / 1e12,
        "hbm_peak_tb_s": peak / 1e12,
        "fwd_share_of_peak": bw_fwd / peak,
        "fwd_bwd_share_of_peak": bw_fb / peak,
        "fwd_share_of_copy": bw_fwd / bw_copy,
        "fwd_bwd_share_of_copy": bw_fb / bw_copy,
        "bwd_kernel_ms": 1e3 * t_bwd,
        "bwd_kernel_tb_s": bw_bwd / 1e12,
        "bwd_kernel_share_of_copy": bw_bwd / bw_copy,
        "fwd_bwd_overhead_ms": 1e3 * (t_fb - t_fwd - t_bwd),
        # the host's time to dispatch one iteration: above the two kernels' time, the loop is
        # dispatch-bound (the GPU waits on Python and the launches)
        "fwd_bwd_host_dispatch_ms": 1e3 * t_fb_host,
    }

    def note(bw: float) -> str:
        return (
            f"{bw / 1e12:.2f} TB/s = {100 * bw / peak:.0f}% of the {peak / 1e12:.2f} TB/s HBM "
            "datasheet peak, "
            f"{100 * bw / bw_copy:.0f}% of a device-to-device copy in the same run "
            f"({bw_copy / 1e12:.2f} TB/s)"
        )

    return [
        Result.make(f"segment scale fwd {tag}", t_fwd, ANCHOR_EAGER, t_fwd_eager, check=check,
                    note=note(bw_fwd)),
        Result.make(f"segment scale fwd+bwd {tag}", t_fb, ANCHOR_EAGER, t_fb_eager, check=check,
                    note=f"{note(bw_fb)}; the backward kernel alone {1e3 * t_bwd:.3f} ms = "
                         f"{bw_bwd / 1e12:.2f} TB/s ({100 * bw_bwd / bw_copy:.0f}% of the copy), "
                         f"autograd and launches {1e3 * (t_fb - t_fwd - t_bwd):.3f} ms; the host "
                         f"dispatches one iteration in {1e3 * t_fb_host:.3f} ms"
                         f"{' (dispatch-bound)' if t_fb_host > t_fwd + t_bwd else ''}"),
    ]  # fmt: skip


def bench_down_proj(*, device: str, repeat: int, tokens: int, inner: int, dim: int) -> list[Result]:
    import torch
    from tumorboard.kernels import _dispatch
    from tumorboard.kernels.segment_scale import fused_down_proj_segment_scale

    timer = _timer(device)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    g = torch.Generator().manual_seed(SEED)
    x = torch.randn(tokens, inner, generator=g).to(device=device, dtype=dtype)
    w = (torch.randn(dim, inner, generator=g) / inner**0.5).to(device=device, dtype=dtype)
    res = torch.randn(tokens, dim, generator=g).to(device=device, dtype=dtype)
    seg = torch.randint(0, 4, (tokens,), generator=g, dtype=torch.int8).to(device)
    gamma = (0.1 * torch.randn(3, dim, generator=g)).to(device)
    table = torch.cat([gamma.new_zeros((1, dim)), gamma])[seg.long()].add_(1.0).to(dtype)

    with torch.no_grad():

        def fused() -> Any:
            return fused_down_proj_segment_scale(x, w, seg, gamma, residual=res, backend="triton")

        want = (x @ w.T).float() * table.float() + res.float()
        check = _close(fused(), want, 2e-2 if dtype == torch.bfloat16 else 1e-4)
        t_fused = timer(fused, repeat)
        t_gemm = timer(lambda: x @ w.T, repeat)
        t_eager = timer(lambda: torch.addcmul(res, x @ w.T, table), repeat)
    tflops = 2.0 * tokens * inner * dim / t_fused / 1e12
    choice = _dispatch.choices("fused_down_proj_segment_scale")[-1]
    paths = ", ".join(f"{p} {1e3 * t:.3f} ms" for p, t in sorted(choice.seconds.items()))
    FIGURES["down_proj"] = {
        "fused_s": t_fused,
        "gemm_s": t_gemm,
        "ratio_vs_gemm": t_gemm / t_fused,
        "dispatcher_path": choice.path,
        "dispatcher_seconds": dict(choice.seconds),
    }
    name = (
        f"fused down_proj T={tokens} {inner}->{dim} ({str(dtype).removeprefix('torch.')}) "
        f"[path: {choice.path}]"
    )
    note = (
        f"{tflops:.0f} TFLOP/s; target ratio vs plain GEMM >= 0.97 (at most 3% slower); "
        f"the dispatcher measured {paths or 'one path'} and chose {choice.path}"
    )
    return [
        Result.make(name, t_fused, ANCHOR_GEMM, t_gemm, check=check, note=note),
        Result.make(name, t_fused, ANCHOR_EAGER, t_eager, check=check),
    ]


#: The workload groups ``--only`` chooses from.
GROUPS = ("abmil", "segment_scale", "down_proj")


def run_results(
    *,
    quick: bool,
    repeat: int,
    device: str = "cuda",
    tiny: bool = False,
    only: Sequence[str] = GROUPS,
) -> tuple[list[Result], dict[str, Any]]:
    """Run the workloads of ``only``; ``tiny`` shrinks them to a smoke test (interpreter)."""
    t_start = time.perf_counter()
    if tiny:
        abmil = {"n_bags": 3, "lo": 5, "hi": 40, "dim": 32, "hidden": 16}
        scale = {"tokens": 48, "dim": 64}
        proj = {"tokens": 32, "inner": 48, "dim": 32}
    elif quick:
        abmil = {"n_bags": 16, "lo": 1000, "hi": 20000, "dim": 1536, "hidden": 512}
        scale = {"tokens": 8192, "dim": 4096}
        proj = {"tokens": 4096, "inner": 11008, "dim": 4096}
    else:
        abmil = {"n_bags": 64, "lo": 1000, "hi": 20000, "dim": 1536, "hidden": 512}
        scale = {"tokens": 32768, "dim": 4096}
        proj = {"tokens": 16384, "inner": 11008, "dim": 4096}
    results: list[Result] = []
    if "abmil" in only:
        results += bench_abmil(device=device, repeat=repeat, **abmil)
    if "segment_scale" in only:
        results += bench_segment_scale(device=device, repeat=repeat, **scale)
    if "down_proj" in only:
        results += bench_down_proj(device=device, repeat=repeat, **proj)
    import torch

    meta_device = torch.cuda.get_device_name() if device == "cuda" else device
    meta = {
        "quick": quick,
        "repeat": repeat,
        "device": meta_device,
        "ratio": "anchor s / tumorboard s (above 1: tumorboard faster)",
        "peak_bf16_flops": PEAK_BF16_FLOPS,
        "peak_hbm_bytes_per_s": hbm_peak(meta_device),
        "total_wall_s": time.perf_counter() - t_start,
        "figures": dict(FIGURES),
        "only": list(only),
    }
    return results, meta


def _gpu_ready() -> str | None:
    """None when a CUDA device and triton are usable, else the reason they are not."""
    try:
        import torch
    except ImportError:
        return "torch is not installed (pip install 'tumorboard[embed,gpu]')"
    from tumorboard.kernels import triton_available

    if not torch.cuda.is_available():
        return "no CUDA device"
    if not triton_available():
        return "triton is not installed (pip install 'tumorboard[gpu]')"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns a process exit status."""
    parser = argparse.ArgumentParser(
        prog="bench_kernels",
        description="GPU timings of tumorboard's Triton kernels (fused ABMIL, segment-masked "
        "scaling, fused down_proj) against torch eager, torch.compile and cuBLAS.",
    )
    parser.add_argument("--quick", action="store_true", help="smaller workloads (< 60 s)")
    parser.add_argument("--json", metavar="PATH", help="also write results as JSON to PATH")
    parser.add_argument("--repeat", type=int, default=5, help="timed samples (median)")
    parser.add_argument(
        "--only",
        default=",".join(GROUPS),
        help=f"comma-separated workload groups among {','.join(GROUPS)} (default all)",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    only = [g.strip() for g in args.only.split(",") if g.strip()]
    bad = sorted(set(only) - set(GROUPS))
    if bad or not only:
        parser.error(f"--only: expected some of {','.join(GROUPS)}, got {args.only!r}")
    reason = _gpu_ready()
    if reason is not None:
        print(f"bench_kernels: skipped, the GPU benchmarks need a CUDA device ({reason}).")
        if args.json:
            write_json([], args.json, {"quick": args.quick, "skipped": reason})
            print(f"wrote {args.json}")
        return 0
    results, meta = run_results(quick=args.quick, repeat=args.repeat, only=only)
    mode = "quick" if args.quick else "full"
    print(f"\n### tumorboard Triton kernel benchmark ({mode} mode, {meta['device']})\n")
    present = [a for a in ANCHORS if any(r.anchor == a for r in results)]
    print(format_markdown(results, present))
    for r in results:
        if r.note:
            print(f"- {r.workload}: {r.note}")
    print(f"\nratio = anchor time / tumorboard time. Total {meta['total_wall_s']:.0f} s.")
    if args.json:
        write_json(results, args.json, meta)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
