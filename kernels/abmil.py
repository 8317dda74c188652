"""Fused attention-based MIL pooling (Ilse et al., ICML 2018) over variable-length bags.

(Over the house's ~800 lines on purpose: the scores GEMM, the pooling pass and the analytic
backward share one tile configuration, one autograd Function and one dispatch; split, each part
would import the others' private pieces.)

Implements :meth:`tumorboard.models.abmil.ABMIL.forward_varlen` (TRIDENT's multi-head, optionally
gated ABMIL: mahmoodlab/TRIDENT
``trident/slide_encoder_models/model_zoo/reusable_blocks/ABMIL.py``@a91fa84) without padding and
without a per-bag loop. Bags are concatenated: ``x [T, D]`` with ``offsets [B+1]`` (bag ``i`` =
rows ``offsets[i]:offsets[i+1]``). Per head ``h`` (weights stacked over heads, ``nn.Linear``
layout)::

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
from tumorboard.errors import InvalidArgumentError, InvalidTypeError

from ._utils import (
    INTERPRET,
    choose_backend,
    import_triton,
    num_programs,
    set_allocator,
    tma_ok,
    tune_configs,
)

__all__ = ["ABMILResult", "abmil_pool", "abmil_reference", "module_weights"]

#: Hidden units per tile of the scores kernel (fixed, not autotuned: it sizes the partials).
_SCORE_BLOCK_K = 16 if INTERPRET else 128
#: Rows per tile of the scores backward (fixed: it sizes the per-tile partial sums).
_SCORE_BLOCK_N_BWD = 16 if INTERPRET else 128
#: The Triton interpreter (numpy) computes ``tl.dot`` on bfloat16 tiles wrongly (triton 3.x):
#: under ``TRITON_INTERPRET=1`` the kernels upcast bf16 tiles to fp32 before ``tl.dot``. On a
#: GPU the dot runs on bf16 tensor cores with fp32 accumulation.


@dataclass(frozen=True)
class ABMILResult:
    """Output of :func:`abmil_pool`.

    Attributes
    ----------
    pooled : torch.Tensor
        ``[B, H, R, D]`` in the dtype of ``x`` (not condensed over heads).
    scores : torch.Tensor
        Raw pre-softmax scores ``[T, H, R]`` float32.
    weights : torch.Tensor or None
        Softmax attention weights ``[T, H, R]`` float32, or None if not asked for.
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
        raise InvalidArgumentError(
            f"x: expected a [T, D] tensor, got {getattr(x, 'shape', type(x))}"
        )
    allowed = (torch.float32, torch.float16, torch.bfloat16) + (() if kernel else (torch.float64,))
    if x.dtype not in allowed:
        names = "float32, float16 or bfloat16" + ("" if kernel else " (or float64)")
        raise InvalidTypeError(f"x: expected {names}, got {x.dtype}")
    d = x.shape[1]
    if wa.ndim != 3 or wa.shape[2] != d:
        raise InvalidArgumentError(f"wa: expected shape [H, K, {d}], got {list(wa.shape)}")
    h, k = wa.shape[:2]
    if ba.shape != (h, k):
        raise InvalidArgumentError(f"ba: expected shape [{h}, {k}], got {list(ba.shape)}")
    if ws.ndim != 3 or ws.shape[0] != h or ws.shape[2] != k:
        raise InvalidArgumentError(f"ws: expected shape [{h}, R, {k}], got {list(ws.shape)}")
    if bs.shape != ws.shape[:2]:
        raise InvalidArgumentError(f"bs: expected shape {list(ws.shape[:2])}, got {list(bs.shape)}")
    if (wg is None) != (bg is None):
        raise InvalidArgumentError(
            "wg and bg: expected both given together (gated) or both None, got only "
            + ("bg" if wg is None else "wg")
        )
    if wg is not None and (wg.shape != wa.shape or bg.shape != ba.shape):
        raise InvalidArgumentError(
            f"wg/bg: expected the shapes of wa/ba {list(wa.shape)}/{list(ba.shape)}, "
            f"got {list(wg.shape)}/{list(bg.shape)}"
        )
    for name, t in (("wa", wa), ("ba", ba), ("ws", ws), ("bs", bs), ("wg", wg), ("bg", bg)):
        if t is not None and t.device != x.device:
            raise InvalidArgumentError(f"{name} is on {t.device}, x on {x.device}")
    offsets = torch.as_tensor(offsets, device=x.device)
    if offsets.ndim != 1 or offsets.numel() < 2:
        raise InvalidArgumentError(
            f"offsets: expected 1-D with B+1 >= 2 entries, got shape {list(offsets.shape)}"
        )
    if offsets.dtype.is_floating_point or offsets.dtype == torch.bool:
        raise InvalidTypeError(f"offsets: expected integers, got {offsets.dtype}")
    offsets = offsets.to(torch.int64)
    if int(offsets[0]) != 0 or int(offsets[-1]) != x.shape[0]:
        raise InvalidArgumentError(
            f"offsets: expected to run from 0 to the number of rows {x.shape[0]}, "
            f"got {int(offsets[0])} .. {int(offsets[-1])}"
        )
    if bool((offsets[1:] < offsets[:-1]).any()):
        raise InvalidArgumentError("offsets: expected non-decreasing values")
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
    """Return (pooled, scores, weights) by differentiable segment ops.

    pooled is [B,H,R,D] in x.dtype; scores and weights are [T,H,R] in float32 (float64 for
    float64 x).
    """
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
    """Pool with pure-torch variable-length ABMIL (segment ops, no padding), float32 inside.

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
    """Stack an :class:`~tumorboard.models.abmil.ABMIL`'s per-head layers into the kernel layout.

    The stacks keep autograd links to the module's parameters.

    Parameters
    ----------
    module : ABMIL
        The pooling module.

    Returns
    -------
    tuple of torch.Tensor
        ``(wa [H,K,D], ba [H,K], ws [H,R,K], bs [H,R], wg, bg)`` (``wg``/``bg`` None if not
        gated).
    """
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

    @triton.autotune(configs=tune_configs(_score_configs()), key=["D", "K", "R_PAD", "GATED"])
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

    def _tma_score_configs() -> list[triton.Config]:
        if INTERPRET:
            return [triton.Config({"BLOCK_N": 16, "BLOCK_D": 16, "WS": False})]
        return [
            triton.Config({"BLOCK_N": bn, "BLOCK_D": bd, "WS": ws}, num_warps=w, num_stages=s)
            for bn, bd, w, s, ws in (
                (128, 64, 8, 3, False),
                (128, 64, 8, 4, False),
                (128, 128, 8, 2, False),
                (128, 128, 8, 3, False),
                (64, 64, 4, 4, False),
                (128, 64, 8, 3, True),
            )
        ]

    @triton.jit
    def _tanh(x, FAST: tl.constexpr):
        """Compute tanh in float32; ``FAST`` uses the hardware approximation (1 MUFU op, ~2^-11)."""
        if FAST:
            return tl.inline_asm_elementwise(
                "tanh.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1
            )
        else:
            return 2.0 * tl.sigmoid(2.0 * x) - 1.0

    @triton.jit
    def _tile_origin(tile, per_row, n_chunks, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        """Return (row tile, head, hidden chunk, first x row, first weight row) of a tile.

        The persistent order keeps the hidden chunks of one row tile adjacent.
        """
        pid_n = tile // per_row
        head = (tile % per_row) // n_chunks
        chunk = tile % n_chunks
        return pid_n, head, chunk, pid_n * BLOCK_N, head * K + chunk * BLOCK_K

    @triton.jit
    def _preactivations(
        x_desc, wa_desc, wg_desc, on, ow, d_tiles,
        GATED: tl.constexpr, IEEE: tl.constexpr, UPCAST: tl.constexpr,
        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
    ):  # fmt: skip
        """Return the attention and gate pre-activations of one tile (GEMMs over D, fp32).

        ``x`` rows ``on:on+BLOCK_N`` against the weight rows ``ow:ow+BLOCK_K``; both GEMMs
        share each x tile. Used by the forward and the backward scores kernels (inlined).
        """
        za = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
        zg = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
        for di in range(d_tiles):
            xt = x_desc.load([on, di * BLOCK_D])
            wat = wa_desc.load([ow, di * BLOCK_D])
            if UPCAST:
                xt = xt.to(tl.float32)
                wat = wat.to(tl.float32)
            if IEEE:
                za = tl.dot(xt, wat.T, za, input_precision="ieee")
            else:
                za = tl.dot(xt, wat.T, za)
            if GATED:
                wgt = wg_desc.load([ow, di * BLOCK_D])
                if UPCAST:
                    wgt = wgt.to(tl.float32)
                if IEEE:
                    zg = tl.dot(xt, wgt.T, zg, input_precision="ieee")
                else:
                    zg = tl.dot(xt, wgt.T, zg)
        return za, zg

    @triton.autotune(configs=tune_configs(_tma_score_configs()), key=["D", "K", "H", "R", "GATED"])
    @triton.jit
    def _abmil_scores_tma_kernel(
        x_ptr, wa_ptr, ba_ptr, wg_ptr, bg_ptr, ws_ptr, part_ptr,
        T, D, K, H, NUM_PROGS,
        R: tl.constexpr, GATED: tl.constexpr, FAST: tl.constexpr, IEEE: tl.constexpr,
        UPCAST: tl.constexpr,
        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, WS: tl.constexpr,
    ):  # fmt: skip
        # Persistent: one program per SM walks the (row tile, head, hidden chunk) tiles with
        # the hidden chunks of one row tile adjacent, so the x rows are read from HBM once and
        # reused from L2 by every chunk and head. Each tile is a GEMM over D through TMA
        # descriptors (gate and attention share the x tile) whose epilogue applies the biases,
        # tanh, sigmoid, the gating and the scoring projection of its BLOCK_K hidden units,
        # and writes R partial scores per row: part[chunk, row, head * R + r]. The chunks are
        # summed afterwards in a fixed order (deterministic, no atomics).
        x_desc = tl.make_tensor_descriptor(x_ptr, [T, D], [D, 1], [BLOCK_N, BLOCK_D])
        wa_desc = tl.make_tensor_descriptor(wa_ptr, [H * K, D], [D, 1], [BLOCK_K, BLOCK_D])
        wg_desc = tl.make_tensor_descriptor(wg_ptr, [H * K, D], [D, 1], [BLOCK_K, BLOCK_D])
        n_rows = tl.cdiv(T, BLOCK_N)
        n_chunks = tl.cdiv(K, BLOCK_K)
        per_row = H * n_chunks
        d_tiles = tl.cdiv(D, BLOCK_D)
        offs_k = tl.arange(0, BLOCK_K)
        for tile in tl.range(tl.program_id(0), n_rows * per_row, NUM_PROGS, warp_specialize=WS):
            pid_n, head, chunk, on, ow = _tile_origin(tile, per_row, n_chunks, K, BLOCK_N, BLOCK_K)
            za, zg = _preactivations(
                x_desc, wa_desc, wg_desc, on, ow, d_tiles,
                GATED, IEEE, UPCAST, BLOCK_N, BLOCK_K, BLOCK_D,
            )  # fmt: skip
            ks = chunk * BLOCK_K + offs_k
            k_ok = ks < K  # a chunk past K reads the next head's rows: masked out here
            za += tl.load(ba_ptr + head * K + ks, mask=k_ok, other=0.0)[None, :]
            a = _tanh(za, FAST)
            if GATED:
                zg += tl.load(bg_ptr + head * K + ks, mask=k_ok, other=0.0)[None, :]
                a = a * (0.5 * _tanh(0.5 * zg, FAST) + 0.5)  # sigmoid
            rows = on + tl.arange(0, BLOCK_N)
            row_ok = rows < T
            out = part_ptr + (chunk * T + rows.to(tl.int64)) * (H * R) + head * R
            for r in tl.static_range(R):
                wsr = tl.load(ws_ptr + (head * R + r) * K + ks, mask=k_ok, other=0.0)
                tl.store(out + r, tl.sum(a * wsr[None, :], axis=1), mask=row_ok)

    @triton.autotune(configs=tune_configs(_pool_configs()), key=["D", "HR"])
    @triton.jit
    def _abmil_pool_kernel(
        x_ptr, s_ptr, off_ptr, out_ptr, lse_ptr, w_ptr,
        D, HR,
        stride_x,
        HR_P: tl.constexpr, WRITE_W: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    ):  # fmt: skip
        # One program per (bag, BLOCK_D feature slice) handles every head x branch, so x is
        # read from HBM once. Online softmax per branch (running max m, rescaled sum den).
        bag = tl.program_id(0)
        pid_d = tl.program_id(1)
        start = tl.load(off_ptr + bag)
        end = tl.load(off_ptr + bag + 1)
        offs_n = tl.arange(0, BLOCK_N)
        js = tl.arange(0, HR_P)
        j_ok = js < HR
        ds = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
        d_ok = ds < D
        m = tl.full((HR_P,), float("-inf"), tl.float32)
        den = tl.zeros((HR_P,), dtype=tl.float32)
        acc = tl.zeros((HR_P, BLOCK_D), dtype=tl.float32)
        for n0 in range(start, end, BLOCK_N):
            rows = n0 + offs_n
            ok = rows < end
            s = tl.load(
                s_ptr + rows[:, None].to(tl.int64) * HR + js[None, :],
                mask=ok[:, None] & j_ok[None, :],
                other=float("-inf"),
            )
            m_new = tl.maximum(m, tl.max(s, axis=0))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # padded branches stay 0
            alpha = tl.exp(m - m_safe)
            p = tl.exp(s - m_safe[None, :])  # [BLOCK_N, HR_P], 0 where masked
            den = den * alpha + tl.sum(p, axis=0)
            xt = tl.load(
                x_ptr + rows[:, None].to(tl.int64) * stride_x + ds[None, :],
                mask=ok[:, None] & d_ok[None, :],
                other=0.0,
            ).to(tl.float32)
            acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * xt[:, None, :], axis=0)
            m = m_new
        safe = tl.where(den > 0.0, den, 1.0)
        res = tl.where((den > 0.0)[:, None], acc / safe[:, None], 0.0)
        out = out_ptr + (bag * HR + js[:, None]) * D + ds[None, :]
        tl.store(out, res, mask=j_ok[:, None] & d_ok[None, :])
        if pid_d == 0:
            # log-sum-exp per branch: the backward recomputes the weights from it
            lse = tl.where(den > 0.0, m + tl.log(safe), 0.0)
            tl.store(lse_ptr + bag * HR + js, lse, mask=j_ok)
            if WRITE_W:
                for n0 in range(start, end, BLOCK_N):
                    rows = n0 + offs_n
                    ok = rows < end
                    msk = ok[:, None] & j_ok[None, :]
                    idx = rows[:, None].to(tl.int64) * HR + js[None, :]
                    s = tl.load(s_ptr + idx, mask=msk, other=0.0)
                    tl.store(w_ptr + idx, tl.exp(s - lse[None, :]), mask=msk)

    def _pool_bwd_configs() -> list[triton.Config]:
        if INTERPRET:
            return [triton.Config({"BLOCK_N": 16, "BLOCK_D": 32})]
        return [
            triton.Config({"BLOCK_N": bn, "BLOCK_D": bd}, num_warps=w)
            for bn, bd, w in ((32, 128, 4), (64, 128, 8), (16, 256, 4), (32, 256, 8))
        ]

    @triton.autotune(configs=tune_configs(_pool_bwd_configs()), key=["D", "HR", "HAS_GS"])
    @triton.jit
    def _abmil_pool_bwd_kernel(
        x_ptr, bag_ptr, s_ptr, lse_ptr, gp_ptr, c_ptr, gs_ptr, dxp_ptr, ds_ptr,
        T, D, HR, stride_x,
        HR_P: tl.constexpr, HAS_GS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    ):  # fmt: skip
        # Backward of the softmax pooling for a tile of rows, one pass over x:
        #   dx_pool[n] = sum_j w[n,j] gp[bag(n), j]
        #   ds[n, j]   = w[n,j] * (gp[bag(n), j] . x[n] - c[bag(n), j]) + g_scores[n, j]
        # with w = exp(s - lse[bag]) and c = gp . pooled (per bag and branch).
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        ok = rows < T
        rows64 = rows.to(tl.int64)
        js = tl.arange(0, HR_P)
        j_ok = js < HR
        mj = ok[:, None] & j_ok[None, :]
        bag = tl.load(bag_ptr + rows, mask=ok, other=0).to(tl.int64)
        s = tl.load(s_ptr + rows64[:, None] * HR + js[None, :], mask=mj, other=0.0)
        lse = tl.load(lse_ptr + bag[:, None] * HR + js[None, :], mask=mj, other=0.0)
        w = tl.where(mj, tl.exp(s - lse), 0.0)  # [BLOCK_N, HR_P]
        dots = tl.zeros((BLOCK_N, HR_P), dtype=tl.float32)
        for d0 in range(0, D, BLOCK_D):
            ds = d0 + tl.arange(0, BLOCK_D)
            d_ok = ds < D
            xt = tl.load(
                x_ptr + rows64[:, None] * stride_x + ds[None, :],
                mask=ok[:, None] & d_ok[None, :],
                other=0.0,
            ).to(tl.float32)
            g3 = tl.load(
                gp_ptr + (bag[:, None, None] * HR + js[None, :, None]) * D + ds[None, None, :],
                mask=mj[:, :, None] & d_ok[None, None, :],
                other=0.0,
            )  # [BLOCK_N, HR_P, BLOCK_D] fp32, read from L2 (gp is [B, HR, D])
            dots += tl.sum(g3 * xt[:, None, :], axis=2)
            dxp = tl.sum(w[:, :, None] * g3, axis=1)
            tl.store(
                dxp_ptr + rows64[:, None] * D + ds[None, :],
                dxp.to(dxp_ptr.dtype.element_ty),
                mask=ok[:, None] & d_ok[None, :],
            )
        c = tl.load(c_ptr + bag[:, None] * HR + js[None, :], mask=mj, other=0.0)
        dsv = w * (dots - c)
        if HAS_GS:
            dsv += tl.load(gs_ptr + rows64[:, None] * HR + js[None, :], mask=mj, other=0.0)
        tl.store(ds_ptr + rows64[:, None] * HR + js[None, :], dsv, mask=mj)

    def _tma_bwd_configs() -> list[triton.Config]:
        if INTERPRET:
            return [triton.Config({"BLOCK_D": 16, "WS": False})]
        return [
            triton.Config({"BLOCK_D": bd, "WS": False}, num_warps=w, num_stages=s)
            for bd, w, s in ((64, 8, 3), (64, 8, 4), (128, 8, 2), (64, 4, 4))
        ]

    @triton.autotune(configs=tune_configs(_tma_bwd_configs()), key=["D", "K", "H", "R", "GATED"])
    @triton.jit
    def _abmil_scores_bwd_kernel(
        x_ptr, wa_ptr, ba_ptr, wg_ptr, bg_ptr, ws_ptr, ds_ptr, dz_ptr, dws_ptr, dba_ptr, dbg_ptr,
        T, D, K, H, NUM_PROGS, stride_z,
        R: tl.constexpr, GATED: tl.constexpr, FAST: tl.constexpr, IEEE: tl.constexpr,
        UPCAST: tl.constexpr,
        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, WS: tl.constexpr,
    ):  # fmt: skip
        # Backward through the scores, tile by tile as in the forward: recompute the gate and
        # attention pre-activations (one GEMM over D), then in the epilogue
        #   da  = sum_r ds[:, h, r] ws[h, r]          dza = da * sig * (1 - tanh^2)
        #   dzg = da * tanh * sig * (1 - sig)
        # write dZ = [dza | dzg] (the input of the dx and dW GEMMs, done by cuBLAS) and per
        # row-tile partial sums of dws, dba, dbg (summed afterwards in a fixed order).
        x_desc = tl.make_tensor_descriptor(x_ptr, [T, D], [D, 1], [BLOCK_N, BLOCK_D])
        wa_desc = tl.make_tensor_descriptor(wa_ptr, [H * K, D], [D, 1], [BLOCK_K, BLOCK_D])
        wg_desc = tl.make_tensor_descriptor(wg_ptr, [H * K, D], [D, 1], [BLOCK_K, BLOCK_D])
        n_rows = tl.cdiv(T, BLOCK_N)
        n_chunks = tl.cdiv(K, BLOCK_K)
        per_row = H * n_chunks
        d_tiles = tl.cdiv(D, BLOCK_D)
        offs_k = tl.arange(0, BLOCK_K)
        for tile in tl.range(tl.program_id(0), n_rows * per_row, NUM_PROGS, warp_specialize=WS):
            pid_n, head, chunk, on, ow = _tile_origin(tile, per_row, n_chunks, K, BLOCK_N, BLOCK_K)
            za, zg = _preactivations(
                x_desc, wa_desc, wg_desc, on, ow, d_tiles,
                GATED, IEEE, UPCAST, BLOCK_N, BLOCK_K, BLOCK_D,
            )  # fmt: skip
            ks = chunk * BLOCK_K + offs_k
            k_ok = ks < K
            rows = on + tl.arange(0, BLOCK_N)
            row_ok = rows < T
            rows64 = rows.to(tl.int64)
            ta = _tanh(za + tl.load(ba_ptr + head * K + ks, mask=k_ok, other=0.0)[None, :], FAST)
            da = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
            for r in tl.static_range(R):
                dsr = tl.load(ds_ptr + rows64 * (H * R) + head * R + r, mask=row_ok, other=0.0)
                wsr = tl.load(ws_ptr + (head * R + r) * K + ks, mask=k_ok, other=0.0)
                da += dsr[:, None] * wsr[None, :]
            if GATED:
                zg += tl.load(bg_ptr + head * K + ks, mask=k_ok, other=0.0)[None, :]
                sg = 0.5 * _tanh(0.5 * zg, FAST) + 0.5
                a = ta * sg
                dza = da * sg * (1.0 - ta * ta)
                dzg = da * a * (1.0 - sg)
            else:
                a = ta
                dza = da * (1.0 - ta * ta)
            a = tl.where(k_ok[None, :], a, 0.0)
            dza = tl.where(row_ok[:, None] & k_ok[None, :], dza, 0.0)
            m2 = row_ok[:, None] & k_ok[None, :]
            zrow = dz_ptr + rows64[:, None] * stride_z
            tl.store(zrow + (head * K + ks)[None, :], dza.to(dz_ptr.dtype.element_ty), mask=m2)
            tl.store(dba_ptr + (pid_n * H + head) * K + ks, tl.sum(dza, axis=0), mask=k_ok)
            if GATED:
                dzg = tl.where(m2, dzg, 0.0)
                tl.store(
                    zrow + (H * K + head * K + ks)[None, :],
                    dzg.to(dz_ptr.dtype.element_ty),
                    mask=m2,
                )
                tl.store(dbg_ptr + (pid_n * H + head) * K + ks, tl.sum(dzg, axis=0), mask=k_ok)
            for r in tl.static_range(R):
                dsr = tl.load(ds_ptr + rows64 * (H * R) + head * R + r, mask=row_ok, other=0.0)
                tl.store(
                    dws_ptr + ((pid_n * H + head) * R + r) * K + ks,
                    tl.sum(dsr[:, None] * a, axis=0),
                    mask=k_ok,
                )


@dataclass(frozen=True)
class _Prepared:
    """The weights in kernel layout: x's dtype for the GEMMs, float32 for the rest."""

    wa: torch.Tensor
    ba: torch.Tensor
    wg: torch.Tensor
    bg: torch.Tensor
    ws: torch.Tensor
    bs: torch.Tensor
    gated: bool

    @classmethod
    def of(cls, x, wa, ba, ws, bs, wg, bg) -> _Prepared:  # noqa: ANN001
        wa_c = wa.detach().to(x.dtype).contiguous()
        ba_c = ba.detach().float().contiguous()
        return cls(
            wa=wa_c,
            ba=ba_c,
            wg=wg.detach().to(x.dtype).contiguous() if wg is not None else wa_c,
            bg=bg.detach().float().contiguous() if bg is not None else ba_c,
            ws=ws.detach().float().contiguous(),
            bs=bs.detach().float().contiguous(),
            gated=wg is not None,
        )


def _flags(x: torch.Tensor) -> dict[str, bool]:
    upcast = INTERPRET and x.dtype == torch.bfloat16
    return {
        "IEEE": x.dtype == torch.float32 or upcast,
        "UPCAST": upcast,
        # tanh.approx.f32 (~2^-11 relative) is below the rounding of 16-bit inputs
        "FAST": x.dtype != torch.float32 and not INTERPRET,
    }


def _scores(x: torch.Tensor, w: _Prepared) -> torch.Tensor:
    """Return the raw scores ``[T, H, R]`` float32."""
    t, d = x.shape
    h, k = w.wa.shape[:2]
    r = w.ws.shape[1]
    flags = _flags(x)
    if t == 0:
        return torch.empty((0, h, r), device=x.device, dtype=torch.float32)
    if tma_ok(x, w.wa, w.wg):
        set_allocator(x.device)
        progs = num_programs(x.device)
        # partial scores per hidden chunk, summed below in a fixed order (no atomics)
        part = torch.empty((triton.cdiv(k, _SCORE_BLOCK_K), t, h * r), device=x.device,
                           dtype=torch.float32)  # fmt: skip
        _abmil_scores_tma_kernel[(progs,)](
            x, w.wa, w.ba, w.wg, w.bg, w.ws, part, t, d, k, h, progs, BLOCK_K=_SCORE_BLOCK_K,
            R=r, GATED=w.gated, **flags,
        )  # fmt: skip
        return (part.sum(0) + w.bs.reshape(1, h * r)).reshape(t, h, r)
    scores = torch.empty((t, h, r), device=x.device, dtype=torch.float32)

    def grid_s(meta: dict) -> tuple[int, int]:
        return (triton.cdiv(t, meta["BLOCK_N"]), h)

    _abmil_scores_kernel[grid_s](
        x, w.wa, w.ba, w.wg, w.bg, w.ws, w.bs, scores, t, d, k, h, r, x.stride(0),
        GATED=w.gated, IEEE=flags["IEEE"], UPCAST=flags["UPCAST"],
        R_PAD=max(16, triton.next_power_of_2(r)),
    )  # fmt: skip
    return scores


def _pool(
    x: torch.Tensor, scores: torch.Tensor, offsets: torch.Tensor, want_weights: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Return (pooled ``[B, H, R, D]`` float32, log-sum-exp ``[B, H*R]``, weights or None)."""
    t, d = x.shape
    _, h, r = scores.shape
    n_bags = offsets.numel() - 1
    pooled = torch.empty((n_bags, h, r, d), device=x.device, dtype=torch.float32)
    lse = torch.empty((n_bags, h * r), device=x.device, dtype=torch.float32)
    weights = torch.empty((t, h, r), device=x.device, dtype=torch.float32) if want_weights else None
    if n_bags > 0:

        def grid_p(meta: dict) -> tuple[int, int]:
            return (n_bags, triton.cdiv(d, meta["BLOCK_D"]))

        _abmil_pool_kernel[grid_p](
            x, scores, offsets, pooled, lse, weights if want_weights else scores,
            d, h * r, x.stride(0), HR_P=triton.next_power_of_2(h * r), WRITE_W=want_weights,
        )  # fmt: skip
    return pooled, lse, weights


def _backward(
    x: torch.Tensor,
    offsets: torch.Tensor,
    w: _Prepared,
    scores: torch.Tensor,
    lse: torch.Tensor,
    pooled: torch.Tensor,
    g_pooled: torch.Tensor | None,
    g_scores: torch.Tensor | None,
) -> tuple[torch.Tensor, ...]:
    """Compute the analytic gradients (dx, dwa, dba, dws, dbs, dwg, dbg) of the fused forward.

    Three kernels: the pooling backward (one pass over x: ``dx_pool`` and the score
    gradients ``ds``), the scores backward (recomputes the pre-activations with the same
    persistent GEMM and writes ``dZ = [dza | dzg]`` plus partial bias/scoring sums), then two
    library GEMMs: ``dx = dx_pool + dZ @ [Wa; Wg]`` and ``[dWa; dWg] = dZ^T x``.
    """
    t, d = x.shape
    h, k = w.wa.shape[:2]
    r = w.ws.shape[1]
    hr = h * r
    n_bags = offsets.numel() - 1
    flags = _flags(x)
    gp = (
        g_pooled.float().reshape(n_bags, hr, d).contiguous()
        if g_pooled is not None
        else torch.zeros((n_bags, hr, d), device=x.device, dtype=torch.float32)
    )
    c = (gp * pooled.reshape(n_bags, hr, d)).sum(-1).contiguous()  # [B, HR]
    bag_of_row = torch.repeat_interleave(
        torch.arange(n_bags, device=x.device, dtype=torch.int32), offsets.diff()
    )
    dx = torch.empty_like(x)
    ds = torch.empty((t, hr), device=x.device, dtype=torch.float32)
    gs = g_scores.float().reshape(t, hr).contiguous() if g_scores is not None else ds
    if t > 0:

        def grid_b(meta: dict) -> tuple[int]:
            return (triton.cdiv(t, meta["BLOCK_N"]),)

        _abmil_pool_bwd_kernel[grid_b](
            x, bag_of_row, scores, lse, gp, c, gs, dx, ds, t, d, hr, x.stride(0),
            HR_P=triton.next_power_of_2(hr), HAS_GS=g_scores is not None,
        )  # fmt: skip
    n_tiles = triton.cdiv(t, _SCORE_BLOCK_N_BWD)
    # dZ = [dza | dzg]: the gate half only when there is a gate, so a plain ABMIL runs
    # half-width GEMMs below
    n_z = (2 if w.gated else 1) * h * k
    dz = torch.empty((t, n_z), device=x.device, dtype=x.dtype)
    dws_p = torch.empty((n_tiles, h, r, k), device=x.device, dtype=torch.float32)
    dba_p = torch.empty((n_tiles, h, k), device=x.device, dtype=torch.float32)
    dbg_p = torch.empty((n_tiles, h, k), device=x.device, dtype=torch.float32) if w.gated else dba_p
    if t > 0:
        set_allocator(x.device)
        progs = num_programs(x.device)
        _abmil_scores_bwd_kernel[(progs,)](
            x, w.wa, w.ba, w.wg, w.bg, w.ws, ds, dz, dws_p, dba_p, dbg_p, t, d, k, h, progs,
            dz.stride(0),
            BLOCK_N=_SCORE_BLOCK_N_BWD, BLOCK_K=_SCORE_BLOCK_K, R=r, GATED=w.gated, **flags,
        )  # fmt: skip
    w_z = w.wa.reshape(h * k, d)
    if w.gated:
        w_z = torch.cat([w_z, w.wg.reshape(h * k, d)])
    dx = torch.addmm(dx, dz, w_z) if t > 0 else dx
    dw_z = (dz.t() @ x).float() if t > 0 else x.new_zeros((n_z, d), dtype=torch.float32)
    dwa = dw_z[: h * k].reshape(h, k, d)
    dwg = dw_z[h * k :].reshape(h, k, d) if w.gated else None
    dba = dba_p.sum(0)
    dbg = dbg_p.sum(0) if w.gated else None
    dws = dws_p.sum(0)
    dbs = ds.sum(0).reshape(h, r)
    return dx, dwa, dba, dws, dbs, dwg, dbg


class _ABMILFunction(torch.autograd.Function):
    """Triton forward; analytic Triton + cuBLAS backward where TMA applies (else recompute)."""

    @staticmethod
    def forward(ctx, x, offsets, wa, ba, ws, bs, wg, bg, want_weights):  # type: ignore[override]
        x = x.contiguous()
        offsets = offsets.contiguous()
        w = _Prepared.of(x, wa, ba, ws, bs, wg, bg)
        scores = _scores(x, w)
        pooled32, lse, weights = _pool(x, scores, offsets, want_weights)
        ctx.prepared = w
        ctx.fused_backward = tma_ok(x, w.wa, w.wg)
        ctx.save_for_backward(x, offsets, wa, ba, ws, bs, wg, bg, scores, lse, pooled32)
        if weights is not None:
            ctx.mark_non_differentiable(weights)
        return pooled32.to(x.dtype), scores, weights

    @staticmethod
    def backward(ctx, g_pooled, g_scores, _g_weights):  # type: ignore[override]
        x, offsets, wa, ba, ws, bs, wg, bg, scores, lse, pooled32 = ctx.saved_tensors
        leaves = [x, wa, ba, ws, bs, wg, bg]
        wanted = [t is not None and ctx.needs_input_grad[i] for i, t in
                  zip((0, 2, 3, 4, 5, 6, 7), leaves, strict=True)]  # fmt: skip
        if ctx.fused_backward:
            grads = _backward(x, offsets, ctx.prepared, scores, lse, pooled32, g_pooled, g_scores)
            res = [
                g.to(leaf.dtype) if (want and g is not None) else None
                for g, leaf, want in zip(grads, leaves, wanted, strict=True)
            ]
            return res[0], None, res[1], res[2], res[3], res[4], res[5], res[6], None
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
    """Pool concatenated variable-length bags with ABMIL (module docstring for the math).

    Parameters
    ----------
    x : torch.Tensor
        ``[T, D]`` instance features, float32/float16/bfloat16 (accumulation is float32).
    offsets : torch.Tensor
        ``[B+1]`` integer row offsets (``0 .. T``, non-decreasing; empty bags allowed).
    wa, ba : torch.Tensor
        Attention layers ``[H, K, D]``, ``[H, K]`` (``nn.Linear`` layout, stacked).
    ws, bs : torch.Tensor
        Scoring layers ``[H, R, K]``, ``[H, R]``.
    wg, bg : torch.Tensor or None, default None
        Optional gate layers, same shapes as ``wa``/``ba`` (gated ABMIL).
    return_weights : bool, default False
        Also return the softmax weights ``[T, H, R]``.
    backend : {"auto", "triton", "torch"}, default "auto"
        ``"auto"`` (Triton on CUDA tensors when triton is installed, torch otherwise),
        ``"triton"`` (also for CPU tensors under ``TRITON_INTERPRET=1``) or ``"torch"``.

    Returns
    -------
    ABMILResult
        ``pooled`` and ``scores`` are differentiable with respect to ``x`` and every weight.
    """
    if choose_backend(backend, x.device) == "torch":
        return abmil_reference(x, offsets, wa, ba, ws, bs, wg, bg, return_weights=return_weights)
    offsets = _check(x, offsets, wa, ba, ws, bs, wg, bg)
    pooled, scores, weights = _ABMILFunction.apply(
        x, offsets, wa, ba, ws, bs, wg, bg, return_weights
    )
    return ABMILResult(pooled, scores, weights)
