"""Segment-masked per-channel scaling for LAMMI-Pathology's trajectory-aware adapter.

``y = h * (1 + gamma[seg])`` with ``h [T, D]``, ``seg [T]`` int8 (0 = no segment: identity;
1 thought, 2 action, 3 action input; ids outside 1..3 are treated as 0) and ``gamma [3, D]``.
Backward: ``dh = dy * (1 + gamma[seg])`` and ``dgamma[k] = sum_{t: seg_t = k+1} dy_t * h_t``,
reduced in float32.

Triton kernels (fp32 arithmetic, output in the dtype of ``h``, autotuned tiles):

* ``_fwd_kernel``: one pass over ``h`` (read ``h`` and ``seg``, write ``y``): memory bound.
* ``_bwd_kernel``: one pass producing ``dh`` and per-program fp32 partial sums of ``dgamma``
  (``[SPLIT, 3, D]``), summed afterwards in a fixed order, so results are deterministic (no
  atomics).
* ``_down_proj_kernel``: the FFN down-projection ``x @ W.T`` (``nn.Linear`` layout) with the
  bias, the segment scaling and the residual add applied in the GEMM epilogue, so the adapter
  adds no pass over memory. Its backward recomputes ``z = x @ W.T + bias`` with one GEMM and
  reuses ``_bwd_kernel``.

:func:`segment_scale` and :func:`fused_down_proj_segment_scale` are differentiable; on CPU
tensors (or ``backend="torch"``) they are plain torch expressions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from tumorboard.errors import InvalidArgumentError, InvalidTypeError

from ._dispatch import fastest, shape_bucket
from ._utils import (
    INTERPRET,
    choose_backend,
    device_name,
    gemm_prune,
    import_triton,
    num_programs,
    set_allocator,
    tma_ok,
    tune_configs,
)

__all__ = ["fused_down_proj_segment_scale", "segment_scale", "segment_scale_reference"]

_N_SEGMENTS = 3


def _check(h: torch.Tensor, seg: torch.Tensor, gamma: torch.Tensor, name: str = "h") -> None:
    if not isinstance(h, torch.Tensor) or h.ndim != 2:
        raise InvalidArgumentError(
            f"{name}: expected a [T, D] tensor, got {getattr(h, 'shape', type(h))}"
        )
    if h.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise InvalidTypeError(f"{name}: expected float32, float16 or bfloat16, got {h.dtype}")
    if not isinstance(seg, torch.Tensor) or seg.shape != (h.shape[0],):
        raise InvalidArgumentError(
            f"seg: expected a [{h.shape[0]}] tensor, got {getattr(seg, 'shape', type(seg))}"
        )
    if seg.dtype.is_floating_point or seg.dtype == torch.bool:
        raise InvalidTypeError(f"seg: expected an integer tensor (int8), got {seg.dtype}")
    if not isinstance(gamma, torch.Tensor) or gamma.shape != (_N_SEGMENTS, h.shape[1]):
        raise InvalidArgumentError(
            f"gamma: expected a [3, {h.shape[1]}] tensor, "
            f"got {getattr(gamma, 'shape', type(gamma))}"
        )
    if seg.device != h.device or gamma.device != h.device:
        raise InvalidArgumentError(
            f"seg and gamma: expected tensors on {h.device}, got {seg.device} and {gamma.device}"
        )


def _scale_torch(seg: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """Return ``1 + gamma[seg]`` per token, ``[T, D]`` float32; id 0 (and out-of-range) -> 1."""
    g = torch.cat([gamma.new_zeros((1, gamma.shape[1])), gamma]).float()
    idx = seg.long()
    idx = torch.where((idx >= 1) & (idx <= _N_SEGMENTS), idx, 0)
    return 1.0 + g[idx]


def segment_scale_reference(
    h: torch.Tensor, seg: torch.Tensor, gamma: torch.Tensor
) -> torch.Tensor:
    """Compute ``h * (1 + gamma[seg])`` in pure torch (float32 arithmetic, result in h.dtype).

    Parameters
    ----------
    h : torch.Tensor
        ``[T, D]`` float32/float16/bfloat16 activations.
    seg : torch.Tensor
        ``[T]`` integer segment ids (as in :func:`segment_scale`).
    gamma : torch.Tensor
        ``[3, D]`` per-segment channel scales.

    Returns
    -------
    torch.Tensor
        ``[T, D]`` in ``h.dtype``.
    """
    _check(h, seg, gamma)
    return (h.float() * _scale_torch(seg, gamma)).to(h.dtype)


# ----------------------------------------------------------------------------------------------
# Triton kernels
# ----------------------------------------------------------------------------------------------

triton, tl = import_triton()
if triton is not None:

    def _ew_configs() -> list[triton.Config]:
        if INTERPRET:
            return [triton.Config({"BLOCK_T": 16, "BLOCK_D": 32})]
        return [
            triton.Config({"BLOCK_T": bt, "BLOCK_D": bd}, num_warps=w)
            for bt, bd, w in ((16, 512, 4), (32, 256, 4), (8, 1024, 8), (32, 512, 8), (64, 256, 8))
        ]

    def _bwd_configs() -> list[triton.Config]:
        if INTERPRET:
            return [triton.Config({"BLOCK_T": 16, "BLOCK_D": 32, "STAGES": 1})]
        # measured on an H100 (T=32k, D=4096, bf16): 8 x 512 tiles, 4 warps, loads of three
        # row tiles in flight: 2.68 TB/s, against 2.95 TB/s for a device-to-device copy
        return [
            triton.Config({"BLOCK_T": bt, "BLOCK_D": bd, "STAGES": st}, num_warps=w)
            for bt, bd, st, w in ((8, 512, 3, 4), (8, 256, 3, 2), (16, 256, 3, 4), (8, 1024, 3, 8))
        ]

    def _mm_configs() -> list[triton.Config]:
        if INTERPRET:
            return [triton.Config({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 2})]
        return [
            triton.Config(
                {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8},
                num_warps=w,
                num_stages=s,
            )
            for bm, bn, bk, w, s in (
                (128, 256, 64, 8, 3),
                (256, 128, 64, 8, 3),
                (128, 128, 64, 8, 4),
                (128, 128, 64, 4, 4),
                (128, 64, 64, 4, 4),
                (64, 128, 64, 4, 4),
                (64, 64, 32, 4, 3),  # fits float32 operands on any GPU (48 KiB)
            )
        ]

    def _tma_configs() -> list[triton.Config]:
        """Return the tiles of the persistent TMA GEMM (Hopper-sized: 128x256 wgmma tiles).

        Measured on an H100 at 16384 x 11008 -> 4096 bf16: 128x256x64, 8 warps, 3 stages and
        warp specialization (a producer warp feeding TMA loads) ran at 1.01x cuBLAS; 4 stages
        of 128x256x64 need more shared memory than the SM has.
        """
        if INTERPRET:
            return [
                triton.Config(
                    {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 2, "WS": False}
                )
            ]
        return [
            triton.Config(
                {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": gm, "WS": ws},
                num_warps=w,
                num_stages=s,
            )
            for bm, bn, bk, gm, w, s, ws in (
                (128, 256, 64, 8, 8, 3, True),
                (128, 256, 64, 16, 8, 3, True),
                (256, 128, 64, 8, 8, 3, True),
                (128, 256, 64, 8, 8, 3, False),
                (128, 128, 64, 8, 8, 4, True),
                (128, 128, 32, 8, 8, 3, False),  # float32 operands (96 KiB of tiles)
            )
        ]

    @triton.jit
    def _gamma_rows(gamma_ptr, sg, ds, t_ok, d_ok, D):
        """Load the ``gamma[seg - 1]`` tile in fp32, 0 where seg is outside 1..3."""
        has = (sg >= 1) & (sg <= 3) & t_ok
        g_off = (sg - 1).to(tl.int64)[:, None] * D + ds[None, :]
        return tl.load(gamma_ptr + g_off, mask=has[:, None] & d_ok[None, :], other=0.0).to(
            tl.float32
        )

    # restore_value: the library down_proj path runs this kernel in place (y is h); without
    # it every autotuning trial would scale the already-scaled output again (inf after a few
    # dozen trials, seen on an H100: the first call per shape returned inf)
    @triton.autotune(
        configs=tune_configs(_ew_configs()), key=["D", "HAS_RES"], restore_value=["y_ptr"]
    )
    @triton.jit
    def _fwd_kernel(
        h_ptr, seg_ptr, gamma_ptr, res_ptr, y_ptr, T, D, stride_h, stride_r, stride_y,
        HAS_RES: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
    ):  # fmt: skip
        ts = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
        ds = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
        t_ok = ts < T
        d_ok = ds < D
        m = t_ok[:, None] & d_ok[None, :]
        sg = tl.load(seg_ptr + ts, mask=t_ok, other=0).to(tl.int32)
        g = _gamma_rows(gamma_ptr, sg, ds, t_ok, d_ok, D)
        rows = ts.to(tl.int64)[:, None]
        hv = tl.load(h_ptr + rows * stride_h + ds[None, :], mask=m, other=0.0).to(tl.float32)
        y = hv * (1.0 + g)
        if HAS_RES:
            y += tl.load(res_ptr + rows * stride_r + ds[None, :], mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + rows * stride_y + ds[None, :], y.to(y_ptr.dtype.element_ty), mask=m)

    @triton.autotune(configs=tune_configs(_bwd_configs()), key=["D", "ROWS_PER_PROG"])
    @triton.jit
    def _bwd_kernel(
        dy_ptr, h_ptr, seg_ptr, gamma_ptr, dh_ptr, dg_ptr, T, D, ROWS_PER_PROG,
        stride_dy, stride_h, stride_dh,
        BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, STAGES: tl.constexpr,
    ):  # fmt: skip
        # One pass over dy and h, STAGES row tiles of loads in flight. The dgamma partials are
        # kept as [BLOCK_T, BLOCK_D] tiles and reduced over rows once at the end (no per-step
        # cross-thread reduction), then written per program and summed in a fixed order on the
        # host side: deterministic, no atomics.
        ds = tl.program_id(0) * BLOCK_D + tl.arange(0, BLOCK_D)
        split = tl.program_id(1)
        d_ok = ds < D
        acc1 = tl.zeros((BLOCK_T, BLOCK_D), dtype=tl.float32)
        acc2 = tl.zeros((BLOCK_T, BLOCK_D), dtype=tl.float32)
        acc3 = tl.zeros((BLOCK_T, BLOCK_D), dtype=tl.float32)
        t_start = split * ROWS_PER_PROG
        t_end = tl.minimum(t_start + ROWS_PER_PROG, T)
        for t0 in tl.range(t_start, t_end, BLOCK_T, num_stages=STAGES):
            ts = t0 + tl.arange(0, BLOCK_T)
            t_ok = ts < t_end
            m = t_ok[:, None] & d_ok[None, :]
            sg = tl.load(seg_ptr + ts, mask=t_ok, other=0).to(tl.int32)
            rows = ts.to(tl.int64)[:, None]
            dy = tl.load(dy_ptr + rows * stride_dy + ds[None, :], mask=m, other=0.0).to(tl.float32)
            hv = tl.load(h_ptr + rows * stride_h + ds[None, :], mask=m, other=0.0).to(tl.float32)
            g = _gamma_rows(gamma_ptr, sg, ds, t_ok, d_ok, D)
            tl.store(
                dh_ptr + rows * stride_dh + ds[None, :],
                (dy * (1.0 + g)).to(dh_ptr.dtype.element_ty),
                mask=m,
            )
            prod = dy * hv
            acc1 += tl.where((sg == 1)[:, None], prod, 0.0)
            acc2 += tl.where((sg == 2)[:, None], prod, 0.0)
            acc3 += tl.where((sg == 3)[:, None], prod, 0.0)
        base = dg_ptr + split * 3 * D + ds
        tl.store(base, tl.sum(acc1, axis=0), mask=d_ok)
        tl.store(base + D, tl.sum(acc2, axis=0), mask=d_ok)
        tl.store(base + 2 * D, tl.sum(acc3, axis=0), mask=d_ok)

    @triton.jit
    def _tile_ids(tile, n_m, n_n, GROUP_M: tl.constexpr):
        """Map a tile index to its (row tile, column tile) in grouped order.

        Runs of GROUP_M row tiles share W's column tiles in L2.
        """
        per_group = GROUP_M * n_n
        first_m = (tile // per_group) * GROUP_M
        group_size = tl.minimum(n_m - first_m, GROUP_M)
        return first_m + (tile % per_group) % group_size, (tile % per_group) // group_size

    @triton.autotune(
        configs=_tma_configs(),
        key=["M", "N", "K", "HAS_BIAS", "HAS_RES"],
        prune_configs_by=gemm_prune("x_ptr"),  # tiles that fit; the first alone under "first"
    )
    @triton.jit
    def _down_proj_tma_kernel(
        x_ptr, w_ptr, bias_ptr, res_ptr, seg_ptr, gamma_ptr, y_ptr,
        M, N, K, NUM_PROGS,
        HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, IEEE: tl.constexpr, UPCAST: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        GROUP_M: tl.constexpr, WS: tl.constexpr,
    ):  # fmt: skip
        # Persistent GEMM over TMA tensor descriptors (one program per SM walks the tiles in
        # grouped order), with bias, segment scaling and the residual add in the epilogue.
        x_desc = tl.make_tensor_descriptor(x_ptr, [M, K], [K, 1], [BLOCK_M, BLOCK_K])
        w_desc = tl.make_tensor_descriptor(w_ptr, [N, K], [K, 1], [BLOCK_N, BLOCK_K])
        y_desc = tl.make_tensor_descriptor(y_ptr, [M, N], [N, 1], [BLOCK_M, BLOCK_N])
        n_m = tl.cdiv(M, BLOCK_M)
        n_n = tl.cdiv(N, BLOCK_N)
        k_tiles = tl.cdiv(K, BLOCK_K)
        for tile in tl.range(tl.program_id(0), n_m * n_n, NUM_PROGS, warp_specialize=WS):
            pid_m, pid_n = _tile_ids(tile, n_m, n_n, GROUP_M)
            om = pid_m * BLOCK_M
            on = pid_n * BLOCK_N
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for ki in range(k_tiles):
                a = x_desc.load([om, ki * BLOCK_K])
                b = w_desc.load([on, ki * BLOCK_K])
                if UPCAST:
                    a = a.to(tl.float32)
                    b = b.to(tl.float32)
                if IEEE:
                    acc = tl.dot(a, b.T, acc, input_precision="ieee")
                else:
                    acc = tl.dot(a, b.T, acc)
            rm = om + tl.arange(0, BLOCK_M)
            rn = on + tl.arange(0, BLOCK_N)
            m_ok = rm < M
            n_ok = rn < N
            if HAS_BIAS:
                acc += tl.load(bias_ptr + rn, mask=n_ok, other=0.0).to(tl.float32)[None, :]
            sg = tl.load(seg_ptr + rm, mask=m_ok, other=0).to(tl.int32)
            acc = acc * (1.0 + _gamma_rows(gamma_ptr, sg, rn, m_ok, n_ok, N))
            if HAS_RES:
                r_desc = tl.make_tensor_descriptor(res_ptr, [M, N], [N, 1], [BLOCK_M, BLOCK_N])
                acc += r_desc.load([om, on]).to(tl.float32)
            y_desc.store([om, on], acc.to(y_desc.dtype))

    @triton.autotune(
        configs=_mm_configs(),
        key=["M", "N", "K", "HAS_BIAS", "HAS_RES"],
        prune_configs_by=gemm_prune("x_ptr"),  # tiles that fit; the first alone under "first"
    )
    @triton.jit
    def _down_proj_kernel(
        x_ptr, w_ptr, bias_ptr, res_ptr, seg_ptr, gamma_ptr, y_ptr,
        M, N, K,
        stride_xm, stride_wn, stride_rm, stride_ym,
        HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, IEEE: tl.constexpr, UPCAST: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        GROUP_M: tl.constexpr,
    ):  # fmt: skip
        # grouped tile order for L2 reuse of W (Triton matmul tutorial)
        pid = tl.program_id(0)
        n_m = tl.cdiv(M, BLOCK_M)
        n_n = tl.cdiv(N, BLOCK_N)
        per_group = GROUP_M * n_n
        first_m = (pid // per_group) * GROUP_M
        group_size = tl.minimum(n_m - first_m, GROUP_M)
        pid_m = first_m + (pid % per_group) % group_size
        pid_n = (pid % per_group) // group_size
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        m_ok = rm < M
        n_ok = rn < N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            ks = k0 + rk
            k_ok = ks < K
            a = tl.load(
                x_ptr + rm.to(tl.int64)[:, None] * stride_xm + ks[None, :],
                mask=m_ok[:, None] & k_ok[None, :],
                other=0.0,
            )
            b = tl.load(
                w_ptr + rn.to(tl.int64)[None, :] * stride_wn + ks[:, None],
                mask=n_ok[None, :] & k_ok[:, None],
                other=0.0,
            )
            if UPCAST:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            if IEEE:
                acc = tl.dot(a, b, acc, input_precision="ieee")
            else:
                acc = tl.dot(a, b, acc)
        if HAS_BIAS:
            acc += tl.load(bias_ptr + rn, mask=n_ok, other=0.0).to(tl.float32)[None, :]
        sg = tl.load(seg_ptr + rm, mask=m_ok, other=0).to(tl.int32)
        acc = acc * (1.0 + _gamma_rows(gamma_ptr, sg, rn, m_ok, n_ok, N))
        mask = m_ok[:, None] & n_ok[None, :]
        rows = rm.to(tl.int64)[:, None]
        if HAS_RES:
            acc += tl.load(res_ptr + rows * stride_rm + rn[None, :], mask=mask, other=0.0).to(
                tl.float32
            )
        tl.store(y_ptr + rows * stride_ym + rn[None, :], acc.to(y_ptr.dtype.element_ty), mask=mask)


def _rowmajor(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def _fwd_triton(
    h: torch.Tensor,
    seg: torch.Tensor,
    gamma: torch.Tensor,
    residual: torch.Tensor | None = None,
    *,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Compute ``h * (1 + gamma[seg]) (+ residual)`` in one pass; ``out`` may be ``h`` itself."""
    h = _rowmajor(h)
    t, d = h.shape
    y = torch.empty_like(h) if out is None else out
    res = _rowmajor(residual) if residual is not None else h
    if t and d:

        def grid(meta: dict) -> tuple[int, int]:
            return (triton.cdiv(t, meta["BLOCK_T"]), triton.cdiv(d, meta["BLOCK_D"]))

        _fwd_kernel[grid](
            h, seg, gamma, res, y, t, d, h.stride(0), res.stride(0), y.stride(0),
            HAS_RES=residual is not None,
        )  # fmt: skip
    return y


def _bwd_triton(
    dy: torch.Tensor, h: torch.Tensor, seg: torch.Tensor, gamma: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    dy, h = _rowmajor(dy), _rowmajor(h)
    t, d = h.shape
    dh = torch.empty_like(h)
    if t == 0 or d == 0:
        return dh, torch.zeros((_N_SEGMENTS, d), device=h.device, dtype=torch.float32)
    # enough row splits to fill the GPU (64 x D/512 programs: several waves of 132 SMs at
    # D=4096), few in the interpreter; the partials [n_split, 3, D] stay small next to h
    n_split = min(triton.cdiv(t, 16), 2 if INTERPRET else 64)
    rows_per = triton.cdiv(t, n_split)
    rows_per = triton.cdiv(rows_per, 64) * 64 if not INTERPRET else triton.cdiv(rows_per, 16) * 16
    n_split = triton.cdiv(t, rows_per)
    partial = torch.empty((n_split, _N_SEGMENTS, d), device=h.device, dtype=torch.float32)

    def grid(meta: dict) -> tuple[int, int]:
        return (triton.cdiv(d, meta["BLOCK_D"]), n_split)

    _bwd_kernel[grid](
        dy, h, seg, gamma, dh, partial, t, d, rows_per, dy.stride(0), h.stride(0), dh.stride(0)
    )
    return dh, partial.sum(0)


class _SegmentScaleFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, seg, gamma):  # type: ignore[override]
        gamma_c = gamma.detach().contiguous()
        ctx.save_for_backward(h, seg, gamma_c)
        return _fwd_triton(h, seg, gamma_c)

    @staticmethod
    def backward(ctx, dy):  # type: ignore[override]
        h, seg, gamma_c = ctx.saved_tensors
        dh, dg = _bwd_triton(dy, h, seg, gamma_c)
        return dh, None, dg.to(gamma_c.dtype)


def segment_scale(
    h: torch.Tensor, seg: torch.Tensor, gamma: torch.Tensor, *, backend: str = "auto"
) -> torch.Tensor:
    """Compute ``h * (1 + gamma[seg])``, differentiable in ``h`` and ``gamma``.

    The segment scaling of the LAMMI-Pathology adapter.

    Parameters
    ----------
    h : torch.Tensor
        ``[T, D]`` float32/float16/bfloat16 activations.
    seg : torch.Tensor
        ``[T]`` integer segment ids (int8): 0 none (identity), 1 thought, 2 action, 3 action
        input; other values act as 0.
    gamma : torch.Tensor
        ``[3, D]`` per-segment channel scales (any float dtype; math in float32).
    backend : {"auto", "triton", "torch"}, default "auto"
        ``"auto"`` (Triton kernel on CUDA, torch on CPU), ``"triton"`` (CPU tensors too, under
        ``TRITON_INTERPRET=1``) or ``"torch"``.

    Returns
    -------
    torch.Tensor
        ``[T, D]`` in ``h.dtype``; ``dgamma`` is reduced over tokens in float32.
    """
    _check(h, seg, gamma)
    if choose_backend(backend, h.device) == "torch":
        return (h.float() * _scale_torch(seg, gamma)).to(h.dtype)
    return _SegmentScaleFunction.apply(h, seg.contiguous(), gamma)


def _down_proj_fused(
    x: torch.Tensor,
    w: torch.Tensor,
    seg: torch.Tensor,
    gamma: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
) -> torch.Tensor:
    """Run the Triton GEMM with the bias, scaling and residual in its epilogue."""
    x, w = _rowmajor(x), _rowmajor(w)
    m, k = x.shape
    n = w.shape[0]
    y = torch.empty((m, n), device=x.device, dtype=x.dtype)
    if m == 0 or n == 0:
        return y
    res = _rowmajor(residual) if residual is not None else y
    upcast = INTERPRET and x.dtype == torch.bfloat16
    ieee = x.dtype == torch.float32 or upcast
    if tma_ok(x, w, y, res):
        set_allocator(x.device)
        progs = num_programs(x.device)
        _down_proj_tma_kernel[(progs,)](
            x, w, bias if bias is not None else y, res, seg, gamma, y, m, n, k, progs,
            HAS_BIAS=bias is not None, HAS_RES=residual is not None, IEEE=ieee, UPCAST=upcast,
        )  # fmt: skip
        return y

    def grid(meta: dict) -> tuple[int]:
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    _down_proj_kernel[grid](
        x, w, bias if bias is not None else y, res, seg, gamma, y,
        m, n, k, x.stride(0), w.stride(0), res.stride(0), y.stride(0),
        HAS_BIAS=bias is not None, HAS_RES=residual is not None, IEEE=ieee, UPCAST=upcast,
    )  # fmt: skip
    return y


def _down_proj_library(
    x: torch.Tensor,
    w: torch.Tensor,
    seg: torch.Tensor,
    gamma: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
) -> torch.Tensor:
    """Run the library GEMM (cuBLAS) plus one fused scale-and-residual pass, in place."""
    z = F.linear(x, w, bias)
    return _fwd_triton(z, seg, gamma, residual, out=z)


#: Implementations of the forward of :func:`fused_down_proj_segment_scale`, by path name.
DOWN_PROJ_PATHS = {"fused": _down_proj_fused, "cublas": _down_proj_library}


def _down_proj_triton(
    x: torch.Tensor,
    w: torch.Tensor,
    seg: torch.Tensor,
    gamma: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    path: str,
) -> torch.Tensor:
    if path != "auto":
        return DOWN_PROJ_PATHS[path](x, w, seg, gamma, bias, residual)
    key = (
        tuple(w.shape), shape_bucket(x.shape[0]), str(x.dtype), bias is not None,
        residual is not None, device_name(x.device),
    )  # fmt: skip
    chosen, out = fastest(
        "fused_down_proj_segment_scale",
        key,
        {p: (lambda f=f: f(x, w, seg, gamma, bias, residual)) for p, f in DOWN_PROJ_PATHS.items()},
        cuda=x.is_cuda,
    )
    return out if out is not None else DOWN_PROJ_PATHS[chosen](x, w, seg, gamma, bias, residual)


class _DownProjFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, seg, gamma, bias, residual, path):  # type: ignore[override]
        gamma_c = gamma.detach().contiguous()
        ctx.save_for_backward(x, w, seg, gamma_c, bias)
        ctx.has_residual = residual is not None
        return _down_proj_triton(x, w, seg, gamma_c, bias, residual, path)

    @staticmethod
    def backward(ctx, dy):  # type: ignore[override]
        x, w, seg, gamma_c, bias = ctx.saved_tensors
        z = F.linear(x, w, bias)  # recomputed: one GEMM instead of keeping [T, D] alive
        dz, dg = _bwd_triton(dy, z, seg, gamma_c)
        dx = dz @ w if ctx.needs_input_grad[0] else None
        dw = dz.t() @ x if ctx.needs_input_grad[1] else None
        db = (
            dz.float().sum(0).to(bias.dtype)
            if bias is not None and ctx.needs_input_grad[4]
            else None
        )
        dres = dy if ctx.has_residual and ctx.needs_input_grad[5] else None
        return dx, dw, None, dg.to(gamma_c.dtype), db, dres, None


def fused_down_proj_segment_scale(
    x: torch.Tensor,
    W: torch.Tensor,  # noqa: N803 (the weight matrix, as in the issue)
    seg: torch.Tensor,
    gamma: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    residual: torch.Tensor | None = None,
    backend: str = "auto",
    path: str = "auto",
) -> torch.Tensor:
    """Compute ``(x @ W.T + bias) * (1 + gamma[seg]) + residual`` with a fused epilogue.

    The scaling (and the residual add) run in the GEMM epilogue: the FFN ``down_proj`` of a
    LLaMA/Qwen2 MLP plus the adapter.

    Parameters
    ----------
    x : torch.Tensor
        ``[T, I]`` (the MLP's intermediate activations), float32/float16/bfloat16.
    W : torch.Tensor
        ``[D, I]`` down-projection weight (``nn.Linear`` layout), dtype of ``x``.
    seg : torch.Tensor
        ``[T]`` integer segment ids (as in :func:`segment_scale`).
    gamma : torch.Tensor
        ``[3, D]``.
    bias : torch.Tensor or None, default None
        Optional ``[D]``.
    residual : torch.Tensor or None, default None
        Optional ``[T, D]`` added after the scaling.
    backend : {"auto", "triton", "torch"}, default "auto"
        As in :func:`segment_scale`.
    path : {"auto", "fused", "cublas"}, default "auto"
        On the Triton backend, ``"fused"`` (one Triton GEMM, persistent with TMA descriptors
        where the strides allow, with the bias, scaling and residual in its epilogue),
        ``"cublas"`` (the library GEMM plus one fused scale-and-residual pass) or ``"auto"``:
        the faster of the two, measured on the first call per shape bucket, dtype and device and
        cached (:func:`tumorboard.kernels.dispatch_choices`).

    Returns
    -------
    torch.Tensor
        ``[T, D]`` in ``x.dtype``; differentiable in ``x``, ``W``, ``gamma``, ``bias`` and
        ``residual``.
    """
    if not isinstance(x, torch.Tensor) or x.ndim != 2:
        raise InvalidArgumentError(
            f"x: expected a [T, I] tensor, got {getattr(x, 'shape', type(x))}"
        )
    if not isinstance(W, torch.Tensor) or W.ndim != 2 or W.shape[1] != x.shape[1]:
        raise InvalidArgumentError(
            f"W: expected a [D, {x.shape[1]}] tensor, got {getattr(W, 'shape', type(W))}"
        )
    if W.dtype != x.dtype:
        raise InvalidTypeError(f"W: expected the dtype of x ({x.dtype}), got {W.dtype}")
    t, d = x.shape[0], W.shape[0]
    _check(x.new_empty((t, d)), seg, gamma, name="x @ W.T")
    if bias is not None and (bias.shape != (d,) or bias.device != x.device):
        raise InvalidArgumentError(
            f"bias: expected a [{d}] tensor on {x.device}, got {list(bias.shape)} on {bias.device}"
        )
    if residual is not None and (residual.shape != (t, d) or residual.device != x.device):
        raise InvalidArgumentError(
            f"residual: expected a [{t}, {d}] tensor on {x.device}, got {list(residual.shape)} "
            f"on {residual.device}"
        )
    if path not in ("auto", *DOWN_PROJ_PATHS):
        raise InvalidArgumentError(f"path: expected 'auto', 'fused' or 'cublas', got {path!r}")
    if choose_backend(backend, x.device) == "torch":
        y = F.linear(x, W, bias).float() * _scale_torch(seg, gamma)
        return (y if residual is None else y + residual.float()).to(x.dtype)
    return _DownProjFunction.apply(x, W, seg.contiguous(), gamma, bias, residual, path)
