"""ABMIL, TRIDENT's ABMIL slide encoder and MTBBench's regressor (tumorboard.models.abmil).

Oracles: the key/shape tables of mahmoodlab/TRIDENT ``trident/slide_encoder_models/``@a91fa84; a
numpy ABMIL written here bag by bag from the formulas (tanh, sigmoid gate, per-head branch scores,
softmax over the bag, concatenation, condensing layer); padded vs variable-length entry points;
the MTBBench regression MLP recomputed in numpy from a checkpoint built key by key from the table.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tumorboard import models  # noqa: E402
from tumorboard.models.abmil import ABMIL, ABMILSlideEncoder, MTBBenchRegressor  # noqa: E402


def encoder_table(prefix, f, hidden, n_heads):
    t = {
        f"{prefix}pre_attention_layers.0.weight": (f, f),
        f"{prefix}pre_attention_layers.0.bias": (f,),
        f"{prefix}post_attention_layers.0.weight": (f, f),
        f"{prefix}post_attention_layers.0.bias": (f,),
    }
    p = f"{prefix}image_pooler."
    for h in range(n_heads):
        t[f"{p}attention_heads.{h}.0.weight"] = (hidden, f)
        t[f"{p}attention_heads.{h}.0.bias"] = (hidden,)
        t[f"{p}gating_layers.{h}.0.weight"] = (hidden, f)
        t[f"{p}gating_layers.{h}.0.bias"] = (hidden,)
        t[f"{p}branching_layers.{h}.weight"] = (1, hidden)
        t[f"{p}branching_layers.{h}.bias"] = (1,)
    if n_heads > 1:
        t[f"{p}condensing_layer.weight"] = (f, n_heads * f)
        t[f"{p}condensing_layer.bias"] = (f,)
    return t


def shapes(m):
    return {k: tuple(v.shape) for k, v in m.state_dict().items()}


def test_slide_encoder_and_regressor_keys_match_reference_tables():
    with torch.device("meta"):
        one = ABMILSlideEncoder(1536, hidden=512, n_heads=1, gated=True)
        two = ABMILSlideEncoder(1536, hidden=512, n_heads=2, gated=True)
        reg = MTBBenchRegressor()
    assert shapes(one) == encoder_table("model.", 1536, 512, 1)
    assert shapes(two) == encoder_table("model.", 1536, 512, 2)
    assert shapes(two)["model.image_pooler.condensing_layer.weight"] == (1536, 3072)
    want = encoder_table("feature_encoder.model.", 1536, 512, 2)
    layers = {0: (1024, 1536), 3: (512, 1024), 6: (256, 512), 9: (128, 256), 11: (1, 128)}
    for idx, (o, i) in layers.items():
        want[f"regressor.{idx}.weight"] = (o, i)
        want[f"regressor.{idx}.bias"] = (o,)
    assert shapes(reg) == want
    ungated = ABMIL(8, hidden=4, n_heads=1)
    assert not any("gating" in k for k in ungated.state_dict())


def numpy_abmil(params, x, mask=None):
    """Bag-by-bag ABMIL from the formulas. x: [B, N, F]; returns pooled [B, R, F]."""
    b, n, f = x.shape
    heads = params["heads"]
    out = []
    for bi in range(b):
        keep = np.ones(n, bool) if mask is None else mask[bi]
        xb = x[bi][keep]
        per_head = []
        for hp in heads:
            a = np.tanh(xb @ hp["wa"].T + hp["ba"])
            if "wg" in hp:
                a = a * (1.0 / (1.0 + np.exp(-(xb @ hp["wg"].T + hp["bg"]))))
            s = a @ hp["ws"].T + hp["bs"]  # [n, R]
            w = np.exp(s - s.max(axis=0))
            w = w / w.sum(axis=0)
            per_head.append(w.T @ xb)  # [R, F]
        z = np.concatenate(per_head, axis=-1)  # [R, H*F]
        if "wc" in params:
            z = z @ params["wc"].T + params["bc"]
        out.append(z)
    return np.stack(out)


def params_of(m: ABMIL):
    sd = {k: v.detach().double().numpy() for k, v in m.state_dict().items()}
    heads = []
    for h in range(m.n_heads):
        hp = {
            "wa": sd[f"attention_heads.{h}.0.weight"],
            "ba": sd[f"attention_heads.{h}.0.bias"],
            "ws": sd[f"branching_layers.{h}.weight"],
            "bs": sd[f"branching_layers.{h}.bias"],
        }
        if m.gated:
            hp["wg"] = sd[f"gating_layers.{h}.0.weight"]
            hp["bg"] = sd[f"gating_layers.{h}.0.bias"]
        heads.append(hp)
    p = {"heads": heads}
    if m.n_heads > 1:
        p["wc"], p["bc"] = sd["condensing_layer.weight"], sd["condensing_layer.bias"]
    return p


@pytest.mark.parametrize(("n_heads", "gated", "n_branches"), [(1, True, 1), (3, True, 2),
                                                              (2, False, 1)])  # fmt: skip
def test_abmil_padded_and_varlen_match_numpy_oracle(n_heads, gated, n_branches):
    torch.manual_seed(0)
    m = ABMIL(6, hidden=5, n_heads=n_heads, gated=gated, n_branches=n_branches).eval()
    lengths = [4, 1, 7]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 7, 6))
    mask = np.arange(7)[None, :] < np.array(lengths)[:, None]
    x[~mask] = 1e3  # padding garbage must not leak into the result
    want = numpy_abmil(params_of(m), x, mask)
    xt = torch.tensor(x, dtype=torch.float32)
    with torch.no_grad():
        pooled, scores = m(xt, torch.tensor(mask))
        flat = torch.cat([xt[i, :n] for i, n in enumerate(lengths)])
        offsets = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]))
        var, var_scores = m.forward_varlen(flat, offsets, return_scores=True)
    assert pooled.shape == (3, n_branches, 6) and scores.shape == (3, n_branches, n_heads, 7)
    np.testing.assert_allclose(pooled.double().numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(var.double().numpy(), want, rtol=1e-5, atol=1e-5)
    # raw scores are the same numbers in both layouts: [B, R, H, N] vs [sum N, H, R]
    for i, n in enumerate(lengths):
        o = int(offsets[i])
        torch.testing.assert_close(scores[i, :, :, :n], var_scores[o : o + n].permute(2, 1, 0))


def test_varlen_empty_bag_pools_to_zero_and_offsets_are_checked():
    torch.manual_seed(1)
    m = ABMIL(4, hidden=3, n_heads=1, gated=True).eval()
    x = torch.randn(5, 4)
    with torch.no_grad():
        out = m.forward_varlen(x, torch.tensor([0, 2, 2, 5]))
        ref = m(x[None, 2:5])[0]
    assert torch.equal(out[1], torch.zeros(1, 4))
    torch.testing.assert_close(out[2], ref[0])
    with pytest.raises(ValueError, match="expected to run from 0 to the number of rows 5"):
        m.forward_varlen(x, torch.tensor([0, 2, 4]))
    with pytest.raises(ValueError, match="non-decreasing"):
        m.forward_varlen(x, torch.tensor([0, 3, 2, 5]))
    with pytest.raises(TypeError, match="offsets: expected integers"):
        m.forward_varlen(x, torch.tensor([0.0, 5.0]))
    with pytest.raises(ValueError, match=r"mask: expected shape \[B, N\]"):
        m(x[None], torch.ones(1, 4, dtype=torch.bool))


def gelu(v):
    from scipy.special import erf

    return 0.5 * v * (1.0 + erf(v / np.sqrt(2.0)))


def test_mtbbench_checkpoint_layout_loads_and_predicts(tmp_path):
    pytest.importorskip("scipy")
    with torch.device("meta"):
        table = shapes(MTBBenchRegressor())
    g = torch.Generator().manual_seed(0)
    # A checkpoint written key by key from the table, as torch.save(model.state_dict()) would.
    sd = {k: 0.05 * torch.randn(s, generator=g) for k, s in table.items()}
    sd["regressor.11.bias"] = torch.tensor([40.0])
    path = tmp_path / "ABMIL_checkpoint_regression.pt"
    torch.save(sd, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", models.RandomWeightsWarning)
        reg = models.load("mtbbench-regressor", weights=path, device="cpu")
    assert not reg.training
    assert not any(p.requires_grad for p in reg.feature_encoder.parameters())
    rng = np.random.default_rng(1)
    bags = [rng.normal(size=(n, 1536)) for n in (30, 12)]

    npd = {k: v.double().numpy() for k, v in sd.items()}

    def oracle(bag):
        e = "feature_encoder.model."
        p = e + "image_pooler."

        def lin(v, key):
            return v @ npd[key + ".weight"].T + npd[key + ".bias"]

        h = gelu(lin(bag, e + "pre_attention_layers.0"))
        heads = []
        for i in range(2):
            a, g, s = (f"{p}attention_heads.{i}.0", f"{p}gating_layers.{i}.0",
                       f"{p}branching_layers.{i}")  # fmt: skip
            heads.append({"wa": npd[a + ".weight"], "ba": npd[a + ".bias"],
                          "wg": npd[g + ".weight"], "bg": npd[g + ".bias"],
                          "ws": npd[s + ".weight"], "bs": npd[s + ".bias"]})  # fmt: skip
        pool = {"heads": heads, "wc": npd[p + "condensing_layer.weight"],
                "bc": npd[p + "condensing_layer.bias"]}  # fmt: skip
        z = numpy_abmil(pool, h[None])[0, 0]
        z = gelu(lin(z, e + "post_attention_layers.0"))
        for idx in (0, 3, 6, 9):
            z = np.maximum(lin(z, f"regressor.{idx}"), 0)
        return float(lin(z, "regressor.11")[0])

    want = [oracle(b) for b in bags]
    one = reg.predict_percentage(torch.tensor(bags[0], dtype=torch.float32))
    assert one.shape == (1,) and one.dtype == torch.float32
    assert float(one[0]) == pytest.approx(min(max(want[0], 0.0), 100.0), abs=1e-3)
    padded = torch.zeros(2, 30, 1536)
    mask = torch.zeros(2, 30, dtype=torch.bool)
    for i, b in enumerate(bags):
        padded[i, : len(b)] = torch.tensor(b)
        mask[i, : len(b)] = True
    with torch.no_grad():
        raw = reg(padded, mask)
        flat = torch.cat([torch.tensor(b, dtype=torch.float32) for b in bags])
        raw_var = reg.forward_varlen(flat, torch.tensor([0, 30, 42]))
    np.testing.assert_allclose(raw.double().numpy(), want, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(raw_var.double().numpy(), want, rtol=1e-4, atol=1e-3)
    clipped = reg.predict_percentage(flat, offsets=torch.tensor([0, 30, 42]))
    np.testing.assert_allclose(clipped.numpy(), np.clip(want, 0, 100), rtol=1e-4, atol=1e-3)


def test_load_abmil_by_name_and_clipping():
    with pytest.raises(TypeError, match="needs in_dim="):
        models.load("abmil")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", models.RandomWeightsWarning)
        enc = models.load("abmil", in_dim=16, hidden=8, n_heads=2, gated=True, device="cpu")
        reg = models.load("mtbbench-regressor", in_dim=16, device="cpu")
    assert isinstance(enc, ABMILSlideEncoder) and enc.pooler.n_heads == 2
    x = torch.randn(3, 10, 16)
    with torch.no_grad():
        assert enc(x).shape == (3, 16)
        with torch.no_grad():
            reg.regressor[11].bias.fill_(500.0)
        assert reg.predict_percentage(x).tolist() == [100.0, 100.0, 100.0]
        reg.regressor[11].bias.fill_(-500.0)
        assert reg.predict_percentage(x).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("gated", [True, False])
def test_forward_varlen_auto_dispatch_on_kernel_device(gated, kernel_device, monkeypatch):
    """Check that ``backend="auto"`` takes the fused kernel on CUDA (torch elsewhere).

    It matches the float64 torch path on the CPU, forward and backward.
    """
    import tumorboard.kernels.abmil as kernels_abmil

    calls = []
    real = kernels_abmil.abmil_pool

    def spy(*a, **kw):
        calls.append(a[0].device.type)
        return real(*a, **kw)

    monkeypatch.setattr(kernels_abmil, "abmil_pool", spy)
    torch.manual_seed(3)
    m = ABMIL(24, hidden=16, n_heads=2, gated=gated).eval()
    lengths = [5, 0, 13, 1]
    off = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
    x = torch.randn(int(off[-1]), 24)
    want = m.double().forward_varlen(x.double(), off, backend="torch")
    m = m.float().to(kernel_device)
    xd = x.to(kernel_device).requires_grad_(True)
    got = m.forward_varlen(xd, off.to(kernel_device))
    torch.testing.assert_close(got.cpu().double(), want, rtol=1e-4, atol=1e-5)
    got.sum().backward()
    assert xd.grad is not None and torch.isfinite(xd.grad).all()
    assert (calls == ["cuda"]) == (kernel_device == "cuda") and len(calls) <= 1
