"""Segment-masked scaling kernels (tumorboard.kernels.segment_scale) and the fused down_proj.

Run natively on CUDA tensors where a GPU is present (``kernel_device`` fixture, conftest.py),
with realistic sizes added (T=32k tokens of D=4096; an 11008 -> 4096 down-projection), and in
the Triton interpreter on CPU tensors elsewhere.

Oracles: a hand-worked 4-token example; float64 torch expressions written here (``h * (1 +
[0; gamma][seg])`` and ``(x @ W.T + b) * scale + residual``) differentiated by autograd.
"""

from __future__ import annotations

# tests/conftest.py switches Triton's interpreter on (TRITON_INTERPRET=1) before any test module
# imports triton when there is no CUDA device.
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton", reason="triton is not installed (the tumorboard[gpu] extra)")

from tumorboard.kernels import _dispatch  # noqa: E402
from tumorboard.kernels import segment_scale as S  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


def oracle_scale(h, seg, gamma):
    zeros = torch.zeros(1, gamma.shape[1], dtype=torch.float64, device=gamma.device)
    table = torch.cat([zeros, gamma.double()])
    return h.double() * (1.0 + table[seg.long()])


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_hand_worked_example(backend, kernel_device):
    dev = kernel_device if backend == "triton" else "cpu"
    h = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]], device=dev)
    h.requires_grad_(True)
    seg = torch.tensor([0, 1, 3, 1], dtype=torch.int8, device=dev)
    gamma = torch.tensor([[0.5, -1.0], [2.0, 0.0], [0.1, 1.0]], device=dev, requires_grad=True)
    y = S.segment_scale(h, seg, gamma, backend=backend)
    # token 0 untouched; tokens 1, 3 scaled by (1.5, 0); token 2 by (1.1, 2)
    want = torch.tensor([[1.0, 2.0], [4.5, 0.0], [5.5, 12.0], [10.5, 0.0]])
    torch.testing.assert_close(y.cpu(), want)
    y.backward(torch.ones(4, 2, device=dev))
    # dgamma[k] = sum over tokens of segment k+1 of dy * h; dh = 1 + gamma[seg]
    torch.testing.assert_close(
        gamma.grad.cpu(), torch.tensor([[10.0, 12.0], [0.0, 0.0], [5.0, 6.0]])
    )
    torch.testing.assert_close(
        h.grad.cpu(), torch.tensor([[1.0, 1.0], [1.5, 0.0], [1.1, 2.0], [1.5, 0.0]])
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_backward_against_float64(dtype, kernel_device, kernel_sizes):
    g = torch.Generator().manual_seed(int(TOL[dtype] * 1e6))
    # tiny: neither a multiple of the tiles; on CUDA the T=32k x D=4096 workload
    t, d = kernel_sizes["tokens"], kernel_sizes["width"]
    h0 = torch.randn(t, d, generator=g).to(dtype)
    seg = torch.randint(0, 4, (t,), generator=g, dtype=torch.int8)
    gamma0 = torch.randn(3, d, generator=g) * 0.5
    dy = torch.randn(t, d, generator=g).to(dtype)

    h = h0.clone().to(kernel_device).requires_grad_(True)
    gamma = gamma0.clone().to(kernel_device).requires_grad_(True)
    y = S.segment_scale(h, seg.to(kernel_device), gamma, backend="triton")
    y.backward(dy.to(kernel_device))
    y, h, gamma = y.cpu(), h.grad.cpu(), gamma.grad.cpu()

    # the float64 oracle runs on the same device (fast at realistic sizes on a GPU)
    h64 = h0.double().to(kernel_device).requires_grad_(True)
    g64 = gamma0.double().to(kernel_device).requires_grad_(True)
    y64 = oracle_scale(h64, seg.to(kernel_device), g64)
    y64.backward(dy.double().to(kernel_device))
    y64, h64, g64 = y64.detach().cpu(), h64.grad.cpu(), g64.grad.cpu()

    tol = TOL[dtype]
    assert y.dtype == dtype and h.dtype == dtype and gamma.dtype == torch.float32
    torch.testing.assert_close(y.double(), y64, rtol=tol, atol=tol)
    torch.testing.assert_close(h.double(), h64, rtol=tol, atol=tol)
    # dgamma is reduced in float32 from the (rounded) inputs: close to the float64 sum
    # (the sums run over up to T/3 tokens, so the float32 error grows like sqrt(T))
    torch.testing.assert_close(gamma.double(), g64, rtol=1e-5, atol=1e-4 * (t / 53) ** 0.5)


def test_out_of_range_ids_are_identity_and_backends_agree(kernel_device):
    g = torch.Generator().manual_seed(7)
    h = torch.randn(20, 8, generator=g)
    seg = torch.tensor([0, 1, 2, 3, 4, -1, 7, 2] * 2 + [0, 0, 3, 1], dtype=torch.int8)
    gamma = torch.randn(3, 8, generator=g)
    dev = [t.to(kernel_device) for t in (h, seg, gamma)]
    y = S.segment_scale(*dev, backend="triton").cpu()
    odd = (seg < 0) | (seg > 3)
    assert torch.equal(y[odd], h[odd])
    torch.testing.assert_close(y, S.segment_scale(h, seg, gamma, backend="torch"))
    torch.testing.assert_close(y, S.segment_scale_reference(h, seg, gamma))


@pytest.mark.parametrize("path", ["fused", "cublas", "auto"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_extras", [True, False])
def test_fused_down_proj_against_float64(dtype, with_extras, path, kernel_device, kernel_sizes):
    g = torch.Generator().manual_seed(11)
    t, i, d = kernel_sizes["proj_tokens"], kernel_sizes["inner"], kernel_sizes["width"]
    x0 = torch.randn(t, i, generator=g).to(dtype)
    w0 = (torch.randn(d, i, generator=g) * 0.3).to(dtype)
    b0 = torch.randn(d, generator=g).to(dtype)
    r0 = torch.randn(t, d, generator=g).to(dtype)
    seg = torch.randint(0, 4, (t,), generator=g, dtype=torch.int8)
    gamma0 = torch.randn(3, d, generator=g) * 0.5
    dy = torch.randn(t, d, generator=g).to(dtype)

    if kernel_device == "cuda":  # realistic scale: unit-variance outputs
        w0 = (w0.float() / i**0.5).to(dtype)
    leaves = [v.clone().to(kernel_device) for v in (x0, w0, gamma0, b0, r0)]
    for v in leaves:
        v.requires_grad_(True)
    x, w, gamma, b, r = leaves
    kw = {"bias": b, "residual": r} if with_extras else {}
    y = S.fused_down_proj_segment_scale(
        x, w, seg.to(kernel_device), gamma, **kw, backend="triton", path=path
    )
    y.backward(dy.to(kernel_device))
    y = y.cpu()
    leaves = [v.grad.cpu() if v.grad is not None else None for v in leaves]

    ref = [
        v.detach().double().to(kernel_device).requires_grad_(True) for v in (x0, w0, gamma0, b0, r0)
    ]
    x64, w64, g64, b64, r64 = ref
    z64 = x64 @ w64.T + (b64 if with_extras else 0.0)
    y64 = oracle_scale(z64, seg.to(kernel_device), g64) + (r64 if with_extras else 0.0)
    y64.backward(dy.double().to(kernel_device))
    y64 = y64.detach().cpu()
    ref = [v.grad.cpu() if v.grad is not None else None for v in ref]

    tol = TOL[dtype]
    if kernel_device == "cuda" and dtype == torch.float32:
        tol = 1e-3  # cuBLAS and Triton may use TF32 for float32 GEMMs on a GPU
    assert y.dtype == dtype and y.shape == (t, d)
    torch.testing.assert_close(y.double(), y64, rtol=2 * tol, atol=2 * tol)
    n_used = 5 if with_extras else 3
    for got, want in zip(leaves[:n_used], ref[:n_used], strict=True):
        scale = float(want.abs().max())
        torch.testing.assert_close(got.double(), want, rtol=4 * tol, atol=4 * tol * max(scale, 1.0))
    if not with_extras:
        assert leaves[3] is None and leaves[4] is None


@pytest.mark.parametrize("path", ["fused", "cublas"])
def test_zero_gamma_is_identity_and_plain_gemm(path, kernel_device):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(9, 16, generator=g).to(kernel_device)
    w = torch.randn(24, 16, generator=g).to(kernel_device)
    seg = torch.tensor([1, 2, 3, 0, 1, 2, 3, 0, 1], dtype=torch.int8, device=kernel_device)
    zero = torch.zeros(3, 24, device=kernel_device)
    y = S.fused_down_proj_segment_scale(x, w, seg, zero, backend="triton", path=path)
    torch.testing.assert_close(y, x @ w.T, rtol=1e-3, atol=1e-3)
    h = torch.randn(9, 24, generator=g).to(kernel_device)
    assert torch.equal(S.segment_scale(h, seg, zero, backend="triton"), h)


def test_auto_path_is_measured_once_and_cached(kernel_device, monkeypatch):
    """Check that ``path="auto"`` times both paths once per shape bucket and device.

    It times them on the first call, then reuses the decision;
    :func:`tumorboard.kernels.dispatch_choices` reports it.
    """
    _dispatch.forget()
    calls = {"fused": 0, "cublas": 0}
    paths = dict(S.DOWN_PROJ_PATHS)
    for name, fn in paths.items():

        def counted(*a, _fn=fn, _name=name):
            calls[_name] += 1
            return _fn(*a)

        monkeypatch.setitem(S.DOWN_PROJ_PATHS, name, counted)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(20, 16, generator=g).to(kernel_device)
    w = torch.randn(8, 16, generator=g).to(kernel_device)
    seg = torch.randint(0, 4, (20,), generator=g, dtype=torch.int8).to(kernel_device)
    gamma = torch.randn(3, 8, generator=g).to(kernel_device)
    want = S.fused_down_proj_segment_scale(x, w, seg, gamma, backend="torch")
    y1 = S.fused_down_proj_segment_scale(x, w, seg, gamma, backend="triton")
    measured = dict(calls)
    assert measured["fused"] > 1 and measured["cublas"] > 1  # warm-up plus timed runs each
    y2 = S.fused_down_proj_segment_scale(x[:17], w, seg[:17], gamma, backend="triton")
    (choice,) = _dispatch.choices("fused_down_proj_segment_scale")
    assert choice.path in ("fused", "cublas") and set(choice.seconds) == {"fused", "cublas"}
    # the second call (same power-of-two bucket) ran the chosen path once, nothing else
    assert sum(calls.values()) == sum(measured.values()) + 1
    assert calls[choice.path] == measured[choice.path] + 1
    torch.testing.assert_close(y1, want, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(y2, want[:17], rtol=1e-3, atol=1e-3)
    _dispatch.forget()
    assert _dispatch.choices() == []


def test_input_validation():
    h = torch.randn(4, 6)
    seg = torch.zeros(4, dtype=torch.int8)
    gamma = torch.zeros(3, 6)
    with pytest.raises(ValueError, match=r"gamma: expected a \[3, 6\] tensor"):
        S.segment_scale(h, seg, torch.zeros(4, 6))
    with pytest.raises(ValueError, match=r"seg: expected a \[4\] tensor"):
        S.segment_scale(h, torch.zeros(5, dtype=torch.int8), gamma)
    with pytest.raises(TypeError, match="seg: expected an integer"):
        S.segment_scale(h, seg.float(), gamma)
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        S.segment_scale(h.long(), seg, gamma)
    with pytest.raises(ValueError, match="backend: expected"):
        S.segment_scale(h, seg, gamma, backend="gpu")
    with pytest.raises(ValueError, match=r"W: expected a \[D, 6\] tensor"):
        S.fused_down_proj_segment_scale(h, torch.zeros(6, 5), seg, gamma)
    with pytest.raises(ValueError, match=r"residual: expected a \[4, 6\] tensor"):
        S.fused_down_proj_segment_scale(h, torch.zeros(6, 6), seg, gamma, residual=h[:2])
    with pytest.raises(TypeError, match="dtype of x"):
        S.fused_down_proj_segment_scale(h, torch.zeros(6, 6).half(), seg, gamma)
    with pytest.raises(ValueError, match="path: expected"):
        S.fused_down_proj_segment_scale(h, torch.zeros(6, 6), seg, gamma, path="tma")


@pytest.mark.parametrize(
    ("value", "want"), [("first", "[1]"), ("all", "[1, 2, 3]"), ("", "[1, 2, 3]")]
)
def test_autotune_candidates_follow_the_environment(value, want):
    """``TUMORBOARD_TRITON_AUTOTUNE=first`` keeps the best-measured candidate only."""
    import os
    import subprocess
    import sys

    code = "from tumorboard.kernels._utils import tune_configs; print(tune_configs([1, 2, 3]))"
    env = {**os.environ, "TUMORBOARD_TRITON_AUTOTUNE": value}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == want


def test_autotune_setting_with_a_typo_is_refused():
    import os
    import subprocess
    import sys

    env = {**os.environ, "TUMORBOARD_TRITON_AUTOTUNE": "fist"}
    out = subprocess.run(
        [sys.executable, "-c", "import tumorboard.kernels._utils"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode != 0
    assert "TUMORBOARD_TRITON_AUTOTUNE: expected 'all' or 'first', got 'fist'" in out.stderr


def test_gemm_candidates_that_overflow_shared_memory_are_dropped(monkeypatch):
    """float32 operands drop the large bf16 tiles (an H100 refused them: 393,232 bytes)."""
    from tumorboard.kernels import _utils as U

    triton = pytest.importorskip("triton")
    monkeypatch.setattr(U, "_smem_limit", lambda kind, index: 232448)  # an H100's opt-in
    monkeypatch.setattr(U, "AUTOTUNE", "all")  # the CUDA suite runs with "first"
    big = triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64}, num_stages=3)
    small = triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32}, num_stages=3)
    prune = U.gemm_prune("x_ptr")["early_config_prune"]

    def operand(dtype):
        return {"x_ptr": torch.empty(0, dtype=dtype)}

    assert U._gemm_smem_bytes(big, 4) >= 393216 > 232448 >= U._gemm_smem_bytes(big, 2)
    assert prune([big, small], operand(torch.float32)) == [small]
    assert prune([big, small], operand(torch.bfloat16)) == [big, small]
    # nothing fits: the smallest candidate is kept, so that triton's error names a real tile
    assert prune([big], operand(torch.float32)) == [big]
    monkeypatch.setattr(U, "AUTOTUNE", "first")  # the first candidate that fits, alone
    assert prune([big, small], operand(torch.bfloat16)) == [big]
    assert prune([big, small], operand(torch.float32)) == [small]
