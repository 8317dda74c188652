"""Fused ABMIL Triton kernels (tumorboard.kernels.abmil), forward and backward.

Run natively on CUDA tensors where a GPU is present (``kernel_device`` fixture, conftest.py),
with realistic sizes added (bags up to 20k instances of D=1536), and in the Triton interpreter
on CPU tensors elsewhere (tiny shapes: about a millisecond per program).

Oracles: the ABMIL module's padded entry point run bag by bag in float64 (independent of the
variable-length code), the pure-torch variable-length reference in float64 differentiated by
autograd, and hand-worked facts (a one-instance bag has weight 1 and pools to itself; an empty
bag pools to 0; weights sum to 1 per bag).
"""

from __future__ import annotations

# tests/conftest.py switches Triton's interpreter on (TRITON_INTERPRET=1) before any test module
# imports triton when there is no CUDA device.
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton", reason="triton is not installed (the tumorboard[gpu] extra)")

from tumorboard.kernels import abmil as K  # noqa: E402
from tumorboard.models.abmil import ABMIL  # noqa: E402

D = 40  # not a multiple of the tiles: exercises the masks
LENGTHS = [0, 1, 37, 5, 0, 20]


def offsets_of(lengths):
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int64)


def make_module(*, n_heads, gated, n_branches, hidden=24, seed=0):
    torch.manual_seed(seed)
    m = ABMIL(D, hidden=hidden, n_heads=n_heads, gated=gated, n_branches=n_branches).eval()
    with torch.no_grad():  # larger score spread than the default init
        for p in m.parameters():
            p.mul_(3.0)
    return m


def features(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, D, generator=g)


@pytest.mark.parametrize(
    ("n_heads", "gated", "n_branches"), [(1, False, 1), (3, True, 2), (2, True, 1)]
)
def test_forward_matches_module_bag_by_bag(n_heads, gated, n_branches, kernel_device):
    m = make_module(n_heads=n_heads, gated=gated, n_branches=n_branches)
    off = offsets_of(LENGTHS)
    x = features(int(off[-1]))
    got, scores = m.to(kernel_device).forward_varlen(
        x.to(kernel_device), off.to(kernel_device), return_scores=True, backend="triton"
    )
    got, scores = got.cpu(), scores.cpu()
    m64 = m.cpu().double()
    x64 = x.double()
    for b, n in enumerate(LENGTHS):
        rows = x64[int(off[b]) : int(off[b + 1])]
        if n == 0:  # empty bag: z = 0, so the output is the condensing layer's bias (or 0)
            want = torch.zeros(n_branches, D, dtype=torch.float64)
            if n_heads > 1:
                want = want + m64.condensing_layer.bias
        else:
            want, s = m64(rows[None])
            want = want[0]
            # module scores are [1, R, H, N]; ours [T, H, R]
            torch.testing.assert_close(
                scores[int(off[b]) : int(off[b + 1])].double(),
                s[0].permute(2, 1, 0),
                rtol=1e-4,
                atol=1e-4,
            )
        torch.testing.assert_close(got[b].double(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_against_float64_reference(dtype, kernel_device):
    torch.manual_seed(2)
    h, k, r = 2, 20, 2
    off = offsets_of([3, 0, 1, 29])
    # inputs representable in the low precision, so only accumulation and output rounding differ
    x = features(int(off[-1])).to(dtype)
    wa, wg = ((torch.randn(h, k, D) * 0.3).to(dtype) for _ in range(2))
    ba, bg, bs = torch.randn(h, k) * 0.1, torch.randn(h, k) * 0.1, torch.randn(h, r)
    ws = torch.randn(h, r, k)
    args = [t.to(kernel_device) for t in (x, off, wa, ba, ws, bs, wg, bg)]
    got = K.abmil_pool(*args, return_weights=True, backend="triton")
    got = K.ABMILResult(got.pooled.cpu(), got.scores.cpu(), got.weights.cpu())
    ref = K.abmil_reference(
        x.double(), off, wa.double(), ba.double(), ws.double(), bs.double(), wg.double(),
        bg.double(), return_weights=True,
    )  # fmt: skip
    assert got.pooled.dtype == dtype and got.pooled.shape == (4, h, r, D)
    assert got.scores.dtype == torch.float32 and got.weights.dtype == torch.float32
    eps = 1e-2 if dtype == torch.bfloat16 else 2e-3
    torch.testing.assert_close(got.scores.double(), ref.scores, rtol=eps, atol=eps)
    torch.testing.assert_close(got.weights.double(), ref.weights, rtol=eps, atol=eps)
    torch.testing.assert_close(got.pooled.double(), ref.pooled, rtol=2 * eps, atol=2 * eps)


def test_weights_edge_bags_and_float32_reference(kernel_device):
    m = make_module(n_heads=2, gated=True, n_branches=1)
    off = offsets_of(LENGTHS)
    x = features(int(off[-1]), seed=3)
    wts = K.module_weights(m)
    dev = [t.to(kernel_device) for t in wts]
    got = K.abmil_pool(
        x.to(kernel_device), off.to(kernel_device), *dev, return_weights=True, backend="triton"
    )
    got = K.ABMILResult(got.pooled.cpu(), got.scores.cpu(), got.weights.cpu())
    ref = K.abmil_reference(x.double(), off, *(t.double() for t in wts), return_weights=True)
    ref = K.ABMILResult(ref.pooled.float(), ref.scores.float(), ref.weights.float())
    torch.testing.assert_close(got.pooled, ref.pooled, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got.weights, ref.weights, rtol=1e-5, atol=1e-6)
    # per-bag sums are 1 for non-empty bags
    seg = torch.repeat_interleave(torch.arange(len(LENGTHS)), torch.tensor(LENGTHS))
    sums = torch.zeros(len(LENGTHS), 2, 1).index_add_(0, seg, got.weights)
    for b, n in enumerate(LENGTHS):
        assert torch.allclose(sums[b], torch.full((2, 1), float(n > 0)), atol=1e-6)
    one = int(off[1])  # bag 1 holds one instance: weight 1, pools to the instance itself
    assert torch.equal(got.weights[one], torch.ones(2, 1))
    torch.testing.assert_close(got.pooled[1, :, 0], x[one].expand(2, D), rtol=0, atol=1e-6)
    assert torch.equal(got.pooled[0], torch.zeros(2, 1, D))  # empty bags pool to 0
    assert torch.equal(got.pooled[4], torch.zeros(2, 1, D))


def test_backward_matches_torch_path(kernel_device):
    m = make_module(n_heads=2, gated=True, n_branches=2, seed=4)
    off = offsets_of([7, 0, 1, 12])
    x0 = features(int(off[-1]), seed=5)
    g = torch.Generator().manual_seed(6)
    w_out = torch.randn(4, 2, D, generator=g)
    w_sc = torch.randn(int(off[-1]), 2, 2, generator=g)

    def grads(backend, device, dtype):
        mm = m.to(device=device, dtype=dtype)
        mm.zero_grad()
        x = x0.to(device=device, dtype=dtype).detach().requires_grad_(True)
        out, s = mm.forward_varlen(x, off.to(device), return_scores=True, backend=backend)
        wo, wsc = w_out.to(device, dtype), w_sc.to(device, s.dtype)
        ((out * wo).sum() + (s * wsc).sum()).backward()
        return [x.grad.cpu().double()] + [p.grad.cpu().double() for p in mm.parameters()]

    got = grads("triton", kernel_device, torch.float32)
    want = grads("torch", "cpu", torch.float64)
    assert len(got) == len(want) and all(gr is not None for gr in got)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_all_bags_empty_and_no_bags_rows(kernel_device):
    m = make_module(n_heads=1, gated=False, n_branches=1).to(kernel_device)
    x = torch.zeros(0, D, device=kernel_device)
    off = torch.tensor([0, 0, 0], device=kernel_device)
    res = K.abmil_pool(x, off, *K.module_weights(m), backend="triton")
    assert res.pooled.shape == (2, 1, 1, D)
    assert torch.equal(res.pooled.cpu(), torch.zeros(2, 1, 1, D))
    assert res.scores.shape == (0, 1, 1)


def test_input_validation(kernel_device):
    # on the kernel's device, so that the inputs are checked, not the device (CPU tensors
    # are refused for backend="triton" on a CUDA machine)
    m = make_module(n_heads=1, gated=True, n_branches=1).to(kernel_device)
    wa, ba, ws, bs, wg, bg = K.module_weights(m)
    x = features(6).to(kernel_device)

    def t(values):
        return torch.tensor(values, device=kernel_device)

    with pytest.raises(ValueError, match="offsets: expected to run from 0 to the number of rows"):
        K.abmil_pool(x, t([0, 5]), wa, ba, ws, bs, wg, bg, backend="triton")
    with pytest.raises(ValueError, match="non-decreasing"):
        K.abmil_pool(x, t([0, 4, 2, 6]), wa, ba, ws, bs, wg, bg, backend="triton")
    with pytest.raises(TypeError, match="offsets: expected integers"):
        K.abmil_pool(x, t([0.0, 6.0]), wa, ba, ws, bs, wg, bg, backend="triton")
    with pytest.raises(ValueError, match="wa: expected"):
        K.abmil_pool(x[:, :8], t([0, 6]), wa, ba, ws, bs, backend="triton")
    with pytest.raises(ValueError, match="given together"):
        K.abmil_pool(x, t([0, 6]), wa, ba, ws, bs, wg, None, backend="triton")
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        K.abmil_pool(x.double(), t([0, 6]), wa, ba, ws, bs, backend="triton")
    with pytest.raises(ValueError, match="backend: expected"):
        K.abmil_pool(x, t([0, 6]), wa, ba, ws, bs, backend="cuda")


@pytest.mark.parametrize("gated", [True, False])
def test_analytic_backward_against_float64_autograd(gated, kernel_device, kernel_sizes):
    """Check the fused backward against float64 autograd through the reference.

    The fused backward is the pool backward + scores backward kernels + two GEMMs. Gradients of
    both the pooled output and the raw scores are checked, at realistic sizes on CUDA (bf16
    there) and tiny ones in the interpreter.
    """
    cuda = kernel_device == "cuda"
    d, k, h, r = kernel_sizes["dim"], kernel_sizes["hidden"], 2, 1
    g = torch.Generator().manual_seed(21)
    lengths = torch.randint(1, kernel_sizes["bag_max"] + 1, (kernel_sizes["n_bags"],), generator=g)
    lengths[0] = kernel_sizes["bag_max"]  # one bag of the largest size
    off = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    t = int(off[-1])
    dtype = torch.bfloat16 if cuda else torch.float32
    leaves64 = [
        torch.randn(t, d, generator=g, dtype=torch.float64),
        torch.randn(h, k, d, generator=g, dtype=torch.float64) / d**0.5,
        torch.randn(h, k, generator=g, dtype=torch.float64) * 0.1,
        torch.randn(h, r, k, generator=g, dtype=torch.float64) / k**0.5,
        torch.randn(h, r, generator=g, dtype=torch.float64) * 0.1,
        torch.randn(h, k, d, generator=g, dtype=torch.float64) / d**0.5 if gated else None,
        torch.randn(h, k, generator=g, dtype=torch.float64) * 0.1 if gated else None,
    ]
    # inputs representable in the kernel dtype, so only the arithmetic differs
    leaves64 = [v.to(dtype).double() if v is not None else None for v in leaves64]
    gp = torch.randn(len(lengths), h, r, d, generator=g, dtype=torch.float64)
    gs = torch.randn(t, h, r, generator=g, dtype=torch.float64)

    def run(leaves, device, fn):
        vs = [v.detach().to(device).requires_grad_(True) if v is not None else None
              for v in leaves]  # fmt: skip
        res = fn(vs[0], off.to(device), *vs[1:])
        loss = (res.pooled.double() * gp.to(device)).sum()
        (loss + (res.scores.double() * gs.to(device)).sum()).backward()
        return [v.grad.cpu().double() if v is not None else None for v in vs]

    want = run(leaves64, kernel_device, K.abmil_reference)
    # x and the GEMM weights in the kernel dtype, biases and scoring vectors in float32
    low = [
        None if v is None else v.to(dtype) if i in (0, 1, 5) else v.float()
        for i, v in enumerate(leaves64)
    ]
    got = run(low, kernel_device, lambda *a: K.abmil_pool(*a, backend="triton"))
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    for name, a, b in zip(("x", "wa", "ba", "ws", "bs", "wg", "bg"), got, want, strict=True):
        if b is None:
            assert a is None, name
            continue
        rel = float((a - b).norm() / max(float(b.norm()), 1e-12))
        assert rel < tol, f"d{name}: relative error {rel:.2e}"
