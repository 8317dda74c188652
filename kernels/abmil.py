"""Fused attention-based MIL pooling (Ilse et al., ICML 2018) over variable-length bags.

Implements :meth:`tumorboard.models.abmil.ABMIL.forward_varlen` (TRIDENT's multi-head, optionally
gated ABMIL; shared/spec/REFERENCE.md §3) without padding and without a per-bag loop. Bags are
concatenated: ``x [T, D]`` with ``offsets [B+1]`` (bag ``i`` = rows ``offsets[i]:offsets[i+1]``).
Per head ``h`` (weights stacked over heads, ``nn.Linear`` layout)::

    a_n  = tanh(Wa[h] x_n + ba[h]) * sigmoid(Wg[h] x_n + bg[h])     (gate only if given)
    s_n  = Ws[h] a_n + bs[h]                                          R scores per instance
    w    = softmax over the bag of s (per branch)                     float32
    z    = sum_n w_n x_n                                              [B, H, R, D]

Two Triton kernels, both with fp32 accumulation and autotuned tiles:

* ``_abmil_scores_kernel``: one program per tile of ``BLOCK_N`` instances and head; the gate
  and attention GEMMs (``tl.dot`` over ``D`` in ``BLOCK_D`` steps, ``BLOCK_K`` hidden columns at
  a time) with bias, tanh, sigmoid, gating and the scoring projection fused in the epilogue, so
  the hidden activations ``[T, K]`` never reach memory; it writes only the fp32 scores
  ``[T, H, R]``. Tiles ignore bag boundaries: the GEMM is as dense as for one big bag.
* ``_abmil_pool_kernel``: one program per (bag, head x branch, ``BLOCK_D`` feature slice); it
  walks the bag in ``BLOCK_N`` tiles with an online softmax (running max and rescaled sum, as in
  Milakov & Gimelshein 2018 / FlashAttention) and accumulates ``sum exp(s - m) x`` in fp32. An
  empty bag pools to 0 (the module's convention); a bag of one instance gets weight 1.

The backward pass (:class:`_ABMILFunction`) recomputes the forward with the pure-torch
reference under autograd (no activations are saved), so a module using the kernel trains.

:func:`abmil_reference` is the pure-torch variable-length reference (segment ops, no padding)
that serves CPU tensors and the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._utils import INTERPRET, choose_backend, import_triton

__all__ = ["ABMILResult", "abmil_pool", "abmil_reference", "module_weights"]

# The Triton interpreter (numpy) computes ``tl.dot`` on bfloat16 tiles wrongly (triton 3.x):
# under ``TRITON_INTERPRET=1`` the kernels upcast bf16 tiles to fp32 before ``tl.dot``. On a
# GPU the dot runs on bf16 tensor cores with fp32 accumulation.


@dataclass(frozen=True)
class ABMILResult:
    """Output of :func:`abmil_pool`.

    Attributes:
        pooled: ``[B, H, R, D]`` in the dtype of ``x`` (not condensed over heads).
        scores: raw pre-softmax scores ``[T, H, R]`` float32.
        weights: softmax attention weights ``[T, H, R]`` float32, or None if not asked for.
    """

    pooled: torch.Tensor
    scores: torch.Tensor
    weights: torch.Tensor | None


# ----------------------------------------------------------------------------------------------
# validation and the pure-torch reference
# ----------------------------------------------------------------------------------------------


def _check(
    x: torch.Tensor,
    offsets: torch.Tensor,
    wa: torch.Tensor,
    ba: torch.Tensor,
    ws: torch.Tensor,
    bs: torch.Tensor,
    wg: torch.Tensor | None,
    bg: torch.Tensor | None,
    *,
    kernel: bool = True,
) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.ndim != 2:
        raise ValueError(f"x must be a [T, D] tensor, got {getattr(x, 'shape', type(x))}")
    allowed = (torch.float32, torch.float16, torch.bfloat16) + (() if kernel else (torch.float64,))
    if x.dtype not in allowed:
        names = "float32, float16 or bfloat16" + ("" if kernel else " (or float64)")
        raise TypeError(f"x must be {names}, got {x.dtype}")
    d = x.shape[1]
    if wa.ndim != 3 or wa.shape[2] != d:
        raise ValueError(f"wa must be [H, K, {d}], got {list(wa.shape)}")
    h, k = wa.shape[:2]
    if ba.shape != (h, k):
        raise ValueError(f"ba must be [{h}, {k}], got {list(ba.shape)}")
    if ws.ndim != 3 or ws.shape[0] != h or ws.shape[2] != k:
        raise ValueError(f"ws must be [{h}, R, {k}], got {list(ws.shape)}")
    if bs.shape != ws.shape[:2]:
        raise ValueError(f"bs must be {list(ws.shape[:2])}, got {list(bs.shape)}")
    if (wg is None) != (bg is None):
        raise ValueError("wg and bg must be given together (gated) or both be None")
    if wg is not None and (wg.shape != wa.shape or bg.shape != ba.shape):
        raise ValueError(
            f"wg/bg must match wa/ba {list(wa.shape)}/{list(ba.shape)}, "
            f"got {list(wg.shape)}/{list(bg.shape)}"
        )
    for name, t in (("wa", wa), ("ba", ba), ("ws", ws), ("bs", bs), ("wg", wg), ("bg", bg)):
        if t is not None and t.device != x.device:
            raise ValueError(f"{name} is on {t.device}, x on {x.device}")
    offsets = torch.as_tensor(offsets, device=x.device)
    if offsets.ndim != 1 or offsets.numel() < 2:
        raise ValueError(f"offsets must be 1-D with B+1 >= 2 entries, got {list(offsets.shape)}")
    if offsets.dtype.is_floating_point or offsets.dtype == torch.bool:
        raise TypeError(f"offsets must be integers, got {offsets.dtype}")
    offsets = offsets.to(torch.int64)
    if int(offsets[0]) != 0 or int(offsets[-1]) != x.shape[0]:
        raise ValueError(
            f"offsets must start at 0 and end at the number of rows {x.shape[0]}, "
            f"got {int(offsets[0])} .. {int(offsets[-1])}"
        )
    if bool((offsets[1:] < offsets[:-1]).any()):
        raise ValueError("offsets must be non-decreasing")
    return offsets


def _reference_raw(
    x: torch.Tensor,
    offsets: torch.Tensor,
    wa: torch.Tensor,
    ba: torch.Tensor,
    ws: torch.Tensor,
    bs: torch.Tensor,
    wg: torch.Tensor | None,
    bg: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(pooled [B,H,R,D] in x.dtype, scores and weights [T,H,R] in float32 (float64 for float64
    x)); differentiable."""
    n_bags = offsets.numel() - 1
    h, r, d = ws.shape[0], ws.shape[1], x.shape[1]
    acc = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(acc)
    a = torch.tanh(torch.einsum("td,hkd->thk", xf, wa.to(acc)) + ba.to(acc))
    if wg is not None:
        a = a * torch.sigmoid(torch.einsum("td,hkd->thk", xf, wg.to(acc)) + bg.to(acc))
    s = torch.einsum("thk,hrk->thr", a, ws.to(acc)) + bs.to(acc)  # [T, H, R]
    seg = torch.repeat_interleave(torch.arange(n_bags, device=x.device), offsets.diff())
    flat = s.reshape(-1, h * r)
    idx = seg[:, None].expand_as(flat)
    peak = torch.full((n_bags, h * r), float("-inf"), device=x.device, dtype=acc)
    peak = peak.scatter_reduce(0, idx, flat.detach(), reduce="amax", include_self=True)
    e = torch.exp(flat - peak[seg])
    denom = torch.zeros((n_bags, h * r), device=x.device, dtype=acc).index_add(0, seg, e)
    w = e / denom[seg]  # [T, H*R]
    # one [T, D] product per (head, branch): never a [T, H*R, D] temporary
    zero = torch.zeros((n_bags, d), device=x.device, dtype=acc)
    pooled = torch.stack([zero.index_add(0, seg, xf * w[:, j, None]) for j in range(h * r)], 1)
    return pooled.reshape(n_bags, h, r, d).to(x.dtype), s, w.reshape(-1, h, r)


def abmil_reference(
    x: torch.Tensor,
    offsets: torch.Tensor,
    wa: torch.Tensor,
    ba: torch.Tensor,
    ws: torch.Tensor,
    bs: torch.Tensor,
    wg: torch.Tensor | None = None,
    bg: torch.Tensor | None = None,
    *,
    return_weights: bool = False,
) -> ABMILResult:
    """Pure-torch variable-length ABMIL (segment ops, no padding), float32 internally.

    Same arguments and result as :func:`abmil_pool` (float64 is accepted too and then used
    throughout); differentiable with ordinary autograd.
    """
    offsets = _check(x, offsets, wa, ba, ws, bs, wg, bg, kernel=False)
    pooled, s, w = _reference_raw(x, offsets, wa, ba, ws, bs, wg, bg)
    return ABMILResult(pooled, s, w if return_weights else None)


def module_weights(
    module: torch.nn.Module,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None,
           torch.Tensor | None]:  # fmt: skip
    """Stacks an :class:`~tumorboard.models.abmil.ABMIL`'s per-head layers into the kernel
    layout ``(wa [H,K,D], ba [H,K], ws [H,R,K], bs [H,R], wg, bg)`` (``wg``/``bg`` None if not
    gated). The stacks keep autograd links to the module's parameters."""
    heads = range(module.n_heads)
    wa = torch.stack([module.attention_heads[i][0].weight for i in heads])
    ba = torch.stack([module.attention_heads[i][0].bias for i in heads])
    ws = torch.stack([module.branching_layers[i].weight for i in heads])
    bs = torch.stack([module.branching_layers[i].bias for i in heads])
    wg = bg = None
    if module.gated:
        wg = torch.stack([module.gating_layers[i][0].weight for i in heads])
        bg = torch.stack([module.gating_layers[i][0].bias for i in heads])
    return wa, ba, ws, bs, wg, bg


# ----------------------------------------------------------------------------------------------
# Triton kernels
# ----------------------------------------------------------------------------------------------

triton, tl = import_triton()
if triton is not None:

    def _score_configs() -> list[triton.Config]:
        if INTERPRET:  # the interpreter runs every config: keep one small tile
            return [triton.Config({"BLOCK_N": 16, "BLOCK_K": 16, "BLOCK_D": 32})]
        return [
            triton.Config({"BLOCK_N": bn, "BLOCK_K": bk, "BLOCK_D": bd}, num_warps=w, num_stages=s)
            for bn, bk, bd, w, s in (
                (128, 128, 64, 8, 3),
                (128, 64, 64, 4, 4),
                (64, 128, 64, 4, 4),
                (128, 128, 32, 8, 4),
                (64, 64, 64, 4, 3),
                (256, 64, 64, 8, 3),
            )
        ]

    def _pool_configs() -> list[triton.Config]:
        if INTERPRET:
            return [triton.Config({"BLOCK_N": 16, "BLOCK_D": 32})]
        return [
            triton.Config({"BLOCK_N": bn, "BLOCK_D": bd}, num_warps=w)
            for bn, bd, w in ((64, 128, 4), (128, 128, 8), (32, 256, 4), (64, 256, 8))
        ]

    @triton.autotune(configs=_score_configs(), key=["D", "K", "R_PAD", "GATED"])
    @triton.jit
    def _abmil_scores_kernel(
        x_ptr, wa_ptr, ba_ptr, wg_ptr, bg_ptr, ws_ptr, bs_ptr, s_ptr,
        T, D, K, H, R,
        stride_x,
        GATED: tl.constexpr, IEEE: tl.constexpr, UPCAST: tl.constexpr, R_PAD: tl.constexpr,
        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
    ):  # fmt: skip
        pid_n = tl.program_id(0)
        head = tl.program_id(1)
        rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = rows < T
        rows64 = rows.to(tl.int64)  # T * D can pass 2**31 (64 slides of 20k x 1536)
        offs_d = tl.arange(0, BLOCK_D)
        offs_k = tl.arange(0, BLOCK_K)
        offs_r = tl.arange(0, R_PAD)
        wa_head = wa_ptr + head * K * D
        wg_head = wg_ptr + head * K * D
        s_acc = tl.zeros((BLOCK_N, R_PAD), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            ks = k0 + offs_k
            k_ok = ks < K
            za = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
            zg = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
            for d0 in range(0, D, BLOCK_D):
                ds = d0 + offs_d
                d_ok = ds < D
                xt = tl.load(
                    x_ptr + rows64[:, None] * stride_x + ds[None, :],
                    mask=row_ok[:, None] & d_ok[None, :],
                    other=0.0,
                )
                w_off = ks[None, :] * D + ds[:, None]  # [BLOCK_D, BLOCK_K] = W^T tile
                w_ok = d_ok[:, None] & k_ok[None, :]
                wat = tl.load(wa_head + w_off, mask=w_ok, other=0.0)
                if UPCAST:
                    xt = xt.to(tl.float32)
                    wat = wat.to(tl.float32)
                if IEEE:
                    za = tl.dot(xt, wat, za, input_precision="ieee")
                else:
                    za = tl.dot(xt, wat, za)
                if GATED:
                    wgt = tl.load(wg_head + w_off, mask=w_ok, other=0.0)
                    if UPCAST:
                        wgt = wgt.to(tl.float32)
                    if IEEE:
                        zg = tl.dot(xt, wgt, zg, input_precision="ieee")
                    else:
                        zg = tl.dot(xt, wgt, zg)
            za += tl.load(ba_ptr + head * K + ks, mask=k_ok, other=0.0).to(tl.float32)[None, :]
            a = 2.0 * tl.sigmoid(2.0 * za) - 1.0  # tanh
            if GATED:
                zg += tl.load(bg_ptr + head * K + ks, mask=k_ok, other=0.0).to(tl.float32)[None, :]
                a = a * tl.sigmoid(zg)
            a = tl.where(k_ok[None, :], a, 0.0)
            wst = tl.load(
                ws_ptr + head * R * K + offs_r[None, :] * K + ks[:, None],
                mask=(offs_r[None, :] < R) & k_ok[:, None],
                other=0.0,
            ).to(tl.float32)  # [BLOCK_K, R_PAD]
            s_acc = tl.dot(a, wst, s_acc, input_precision="ieee")
        bsv = tl.load(bs_ptr + head * R + offs_r, mask=offs_r < R, other=0.0).to(tl.float32)
        s_acc += bsv[None, :]
        out = s_ptr + rows[:, None] * (H * R) + head * R + offs_r[None, :]
        tl.store(out, s_acc, mask=row_ok[:, None] & (offs_r[None, :] < R))

    @triton.autotune(configs=_pool_configs(), key=["D", "HR"])
    @triton.jit
    def _abmil_pool_kernel(
        x_ptr, s_ptr, off_ptr, out_ptr, w_ptr,
        D, HR,
        stride_x,
        WRITE_W: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    ):  # fmt: skip
        bag = tl.program_id(0)
        j = tl.program_id(1)
        pid_d = tl.program_id(2)
        start = tl.load(off_ptr + bag)
        end = tl.load(off_ptr + bag + 1)
        offs_n = tl.arange(0, BLOCK_N)
        ds = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
        d_ok = ds < D
        m = tl.full((1,), float("-inf"), tl.float32)
        den = tl.zeros((1,), dtype=tl.float32)
        acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
        for n0 in range(start, end, BLOCK_N):
            rows = n0 + offs_n
            ok = rows < end
            s = tl.load(s_ptr + rows * HR + j, mask=ok, other=float("-inf"))
            m_new = tl.maximum(m, tl.max(s, axis=0))
            alpha = tl.exp(m - m_new)
            p = tl.exp(s - m_new)  # 0 where masked
            den = den * alpha + tl.sum(p, axis=0)
            xt = tl.load(
                x_ptr + rows[:, None].to(tl.int64) * stride_x + ds[None, :],
                mask=ok[:, None] & d_ok[None, :],
                other=0.0,
            ).to(tl.float32)
            acc = acc * alpha + tl.sum(p[:, None] * xt, axis=0)
            m = m_new
        safe = tl.where(den > 0.0, den, 1.0)
        res = tl.where(den > 0.0, acc / safe, 0.0)
        tl.store(out_ptr + (bag * HR + j) * D + ds, res.to(out_ptr.dtype.element_ty), mask=d_ok)
        if WRITE_W:
            if pid_d == 0:
                for n0 in range(start, end, BLOCK_N):
                    rows = n0 + offs_n
                    ok = rows < end
                    s = tl.load(s_ptr + rows * HR + j, mask=ok, other=0.0)
                    tl.store(w_ptr + rows * HR + j, tl.exp(s - m) / safe, mask=ok)


def _launch(
    x: torch.Tensor,
    offsets: torch.Tensor,
    wa: torch.Tensor,
    ba: torch.Tensor,
    ws: torch.Tensor,
    bs: torch.Tensor,
    wg: torch.Tensor | None,
    bg: torch.Tensor | None,
    want_weights: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    x = x.contiguous()
    t, d = x.shape
    h, k = wa.shape[:2]
    r = ws.shape[1]
    n_bags = offsets.numel() - 1
    # weights in x's dtype for the tensor-core GEMM; biases and scoring vectors stay fp32
    wa_c = wa.detach().to(x.dtype).contiguous()
    wg_c = wg.detach().to(x.dtype).contiguous() if wg is not None else wa_c
    ba_c = ba.detach().float().contiguous()
    bg_c = bg.detach().float().contiguous() if bg is not None else ba_c
    ws_c = ws.detach().float().contiguous()
    bs_c = bs.detach().float().contiguous()
    scores = torch.empty((t, h, r), device=x.device, dtype=torch.float32)
    if t > 0:
        r_pad = max(16, triton.next_power_of_2(r))
        upcast = INTERPRET and x.dtype == torch.bfloat16

        def grid_s(meta: dict) -> tuple[int, int]:
            return (triton.cdiv(t, meta["BLOCK_N"]), h)

        _abmil_scores_kernel[grid_s](
            x, wa_c, ba_c, wg_c, bg_c, ws_c, bs_c, scores,
            t, d, k, h, r, x.stride(0),
            GATED=wg is not None, IEEE=x.dtype == torch.float32 or upcast, UPCAST=upcast,
            R_PAD=r_pad,
        )  # fmt: skip
    pooled = torch.empty((n_bags, h, r, d), device=x.device, dtype=x.dtype)
    weights = torch.empty((t, h, r), device=x.device, dtype=torch.float32) if want_weights else None
    if n_bags > 0:

        def grid_p(meta: dict) -> tuple[int, int, int]:
            return (n_bags, h * r, triton.cdiv(d, meta["BLOCK_D"]))

        _abmil_pool_kernel[grid_p](
            x, scores, offsets.contiguous(), pooled, weights if want_weights else scores,
            d, h * r, x.stride(0), WRITE_W=want_weights,
        )  # fmt: skip
    return pooled, scores, weights


class _ABMILFunction(torch.autograd.Function):
    """Triton forward; backward by recomputing the reference under autograd."""

    @staticmethod
    def forward(ctx, x, offsets, wa, ba, ws, bs, wg, bg, want_weights):  # type: ignore[override]
        pooled, scores, weights = _launch(x, offsets, wa, ba, ws, bs, wg, bg, want_weights)
        ctx.save_for_backward(x, offsets, wa, ba, ws, bs, wg, bg)
        ctx.mark_non_differentiable(*([weights] if weights is not None else []))
        return pooled, scores, weights

    @staticmethod
    def backward(ctx, g_pooled, g_scores, _g_weights):  # type: ignore[override]
        x, offsets, wa, ba, ws, bs, wg, bg = ctx.saved_tensors
        leaves = [x, wa, ba, ws, bs, wg, bg]
        wanted = [t is not None and ctx.needs_input_grad[i] for i, t in
                  zip((0, 2, 3, 4, 5, 6, 7), leaves, strict=True)]  # fmt: skip
        with torch.enable_grad():
            inputs = [t.detach().requires_grad_(w) if t is not None else None
                      for t, w in zip(leaves, wanted, strict=True)]  # fmt: skip
            pooled, s, _ = _reference_raw(inputs[0], offsets, *inputs[1:])
            outs, grads_out = [], []
            for out, g in ((pooled, g_pooled), (s, g_scores)):
                if g is not None:
                    outs.append(out)
                    grads_out.append(g)
            sources = [t for t, w in zip(inputs, wanted, strict=True) if w]
            grads = iter(torch.autograd.grad(outs, sources, grads_out, allow_unused=True))
        res = [next(grads) if w else None for w in wanted]
        return res[0], None, res[1], res[2], res[3], res[4], res[5], res[6], None


def abmil_pool(
    x: torch.Tensor,
    offsets: torch.Tensor,
    wa: torch.Tensor,
    ba: torch.Tensor,
    ws: torch.Tensor,
    bs: torch.Tensor,
    wg: torch.Tensor | None = None,
    bg: torch.Tensor | None = None,
    *,
    return_weights: bool = False,
    backend: str = "auto",
) -> ABMILResult:
    """ABMIL pooling of concatenated variable-length bags (module docstring for the math).

    Args:
        x: ``[T, D]`` instance features, float32/float16/bfloat16 (accumulation is float32).
        offsets: ``[B+1]`` integer row offsets (``0 .. T``, non-decreasing; empty bags allowed).
        wa, ba: attention layers ``[H, K, D]``, ``[H, K]`` (``nn.Linear`` layout, stacked).
        ws, bs: scoring layers ``[H, R, K]``, ``[H, R]``.
        wg, bg: optional gate layers, same shapes as ``wa``/``ba`` (gated ABMIL).
        return_weights: also return the softmax weights ``[T, H, R]``.
        backend: ``"auto"`` (Triton on CUDA tensors when triton is installed, torch otherwise),
            ``"triton"`` (also for CPU tensors under ``TRITON_INTERPRET=1``) or ``"torch"``.

    Returns:
        :class:`ABMILResult`; ``pooled`` and ``scores`` are differentiable with respect to
        ``x`` and every weight.
    """
    if choose_backend(backend, x.device) == "torch":
        return abmil_reference(x, offsets, wa, ba, ws, bs, wg, bg, return_weights=return_weights)
    offsets = _check(x, offsets, wa, ba, ws, bs, wg, bg)
    pooled, scores, weights = _ABMILFunction.apply(
        x, offsets, wa, ba, ws, bs, wg, bg, return_weights
    )
    return ABMILResult(pooled, scores, weights)
