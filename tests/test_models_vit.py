"""UNI2-h / UNI ViTs in plain torch (tumorboard.models.vit).

Oracles: key/shape tables written here from the UNI ``timm_kwargs`` (mahmoodlab/UNI
``uni/get_encoder/get_encoder.py``@42715ef; full-size models built on the meta device, nothing
allocated); a hand-computed packed SwiGLU; an independent ViT forward written below from the spec
(explicit softmax attention, token layout [CLS, registers, patches], position embedding on
patches only for UNI2-h, on all tokens for UNI); the bicubic antialiased grid resampling computed
directly with F.interpolate; deterministic random init.
"""

from __future__ import annotations

import math
import warnings

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from tumorboard import models  # noqa: E402
from tumorboard.models.vit import GluMlp, VisionTransformer, ViTConfig  # noqa: E402


def vit_table(*, dim, depth, patch, n_pos, hidden, fc2_in, regs, layerscale):
    """Return the expected state-dict keys and shapes (timm ``vision_transformer.py``@aa4b5850)."""
    t = {
        "cls_token": (1, 1, dim),
        "pos_embed": (1, n_pos, dim),
        "patch_embed.proj.weight": (dim, 3, patch, patch),
        "patch_embed.proj.bias": (dim,),
        "norm.weight": (dim,),
        "norm.bias": (dim,),
    }
    if regs:
        t["reg_token"] = (1, regs, dim)
    for i in range(depth):
        b = f"blocks.{i}."
        t.update(
            {
                b + "norm1.weight": (dim,),
                b + "norm1.bias": (dim,),
                b + "attn.qkv.weight": (3 * dim, dim),
                b + "attn.qkv.bias": (3 * dim,),
                b + "attn.proj.weight": (dim, dim),
                b + "attn.proj.bias": (dim,),
                b + "norm2.weight": (dim,),
                b + "norm2.bias": (dim,),
                b + "mlp.fc1.weight": (hidden, dim),
                b + "mlp.fc1.bias": (hidden,),
                b + "mlp.fc2.weight": (dim, fc2_in),
                b + "mlp.fc2.bias": (dim,),
            }
        )
        if layerscale:
            t[b + "ls1.gamma"] = (dim,)
            t[b + "ls2.gamma"] = (dim,)
    return t


def shapes(module):
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


def test_uni2h_keys_and_shapes_match_reference_table():
    with torch.device("meta"):
        m = models.build("uni2-h")
    expected = vit_table(dim=1536, depth=24, patch=14, n_pos=256, hidden=8192, fc2_in=4096,
                         regs=8, layerscale=True)  # fmt: skip
    assert shapes(m) == expected
    n_params = sum(p.numel() for p in m.parameters())
    assert round(n_params / 1e6, 1) == 681.4  # ~681.4 M, the sum over the table
    assert (m.embed_dim, m.image_size) == (1536, 224)
    assert m.mean == (0.485, 0.456, 0.406) and m.std == (0.229, 0.224, 0.225)
    assert isinstance(m.blocks[0].mlp, GluMlp) and isinstance(m.blocks[0].mlp.act, torch.nn.SiLU)
    assert m.blocks[0].ls1.gamma.shape == (1536,)
    assert m.norm.eps == 1e-6


def test_uni_v1_keys_and_shapes_match_reference_table():
    with torch.device("meta"):
        m = models.build("uni")
    expected = vit_table(dim=1024, depth=24, patch=16, n_pos=197, hidden=4096, fc2_in=4096,
                         regs=0, layerscale=True)  # fmt: skip
    assert shapes(m) == expected
    assert m.embed_dim == 1024 and m.blocks[0].attn.num_heads == 16
    assert isinstance(m.blocks[0].mlp.act, torch.nn.GELU)


def test_swiglu_activates_the_first_half():
    # fc1 maps x = (a, b) to h = (a, b | 2a, 3b): first half (a, b), second half (2a, 3b).
    mlp = GluMlp(2, 4)
    with torch.no_grad():
        mlp.fc1.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0], [0.0, 3.0]]))
        mlp.fc1.bias.zero_()
        mlp.fc2.weight.copy_(torch.eye(2))
        mlp.fc2.bias.zero_()
    a, b = 0.7, -1.3

    def silu(v):
        return v / (1.0 + math.exp(-v))

    expected = [silu(a) * 2 * a, silu(b) * 3 * b]
    swapped = [a * silu(2 * a), b * silu(3 * b)]  # activation on the second half: wrong
    out = mlp(torch.tensor([[a, b]])).detach()[0].tolist()
    assert out == pytest.approx(expected, rel=1e-6)
    assert out != pytest.approx(swapped, rel=1e-3)


def reference_vit(m: VisionTransformer, x: torch.Tensor, pos_grid: torch.Tensor | None = None):
    """Independent forward from the timm ViT definition: returns the final-norm CLS token."""
    c = m.config
    sd = {k: v.detach().double() for k, v in m.state_dict().items()}
    x = x.double()
    d, h = c.embed_dim, c.num_heads
    p = F.conv2d(x, sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"], stride=c.patch_size)
    b = x.shape[0]
    patches = p.flatten(2).transpose(1, 2)
    cls = sd["cls_token"].expand(b, 1, d)
    regs = sd["reg_token"].expand(b, c.reg_tokens, d) if c.reg_tokens else cls[:, :0]
    pos = sd["pos_embed"] if pos_grid is None else pos_grid.double()
    if c.no_embed_class:
        tokens = torch.cat([cls, regs, patches + pos], dim=1)
    else:
        tokens = torch.cat([cls, regs, patches], dim=1) + pos
    for i in range(c.depth):
        pre = f"blocks.{i}."

        def ln(t, name, pre=pre):
            return F.layer_norm(t, (d,), sd[pre + name + ".weight"], sd[pre + name + ".bias"], 1e-6)

        y = ln(tokens, "norm1")
        qkv = y @ sd[pre + "attn.qkv.weight"].T + sd[pre + "attn.qkv.bias"]
        q, k, v = qkv.split(d, dim=-1)

        def heads(t):
            return t.reshape(b, -1, h, d // h).transpose(1, 2)

        att = torch.softmax(heads(q) @ heads(k).transpose(-1, -2) / math.sqrt(d // h), dim=-1)
        o = (att @ heads(v)).transpose(1, 2).reshape(b, -1, d)
        o = o @ sd[pre + "attn.proj.weight"].T + sd[pre + "attn.proj.bias"]
        g1 = sd.get(pre + "ls1.gamma", torch.ones(d, dtype=torch.double))
        tokens = tokens + g1 * o
        y = ln(tokens, "norm2")
        hid = y @ sd[pre + "mlp.fc1.weight"].T + sd[pre + "mlp.fc1.bias"]
        if c.mlp == "swiglu":
            first, second = hid.chunk(2, dim=-1)
            hid = F.silu(first) * second
        else:
            hid = 0.5 * hid * (1 + torch.erf(hid / math.sqrt(2)))
        o = hid @ sd[pre + "mlp.fc2.weight"].T + sd[pre + "mlp.fc2.bias"]
        g2 = sd.get(pre + "ls2.gamma", torch.ones(d, dtype=torch.double))
        tokens = tokens + g2 * o
    out = F.layer_norm(tokens, (d,), sd["norm.weight"], sd["norm.bias"], 1e-6)
    return out[:, 0]


def scramble(m, seed=1):
    """Random non-trivial parameters (LayerScale near 1 so that every block matters)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("gamma"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.add_(0.05 * torch.randn(p.shape, generator=g))
    return m


def quiet_load(name, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", models.RandomWeightsWarning)
        return models.load(name, device="cpu", **kw)


def test_uni2_tiny_forward_matches_independent_reference():
    m = scramble(quiet_load("uni2-tiny"))
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        out = m(x)
        tokens = m.forward_features(x)
    assert out.shape == (2, 48) and out.dtype == torch.float32
    assert tokens.shape == (2, 1 + 8 + 16 * 16, 48)  # [CLS, 8 registers, 256 patches]
    torch.testing.assert_close(out.double(), reference_vit(m, x), atol=2e-5, rtol=1e-4)


def test_uni_layout_with_class_in_pos_embed_matches_reference():
    cfg = ViTConfig(image_size=32, patch_size=8, embed_dim=24, depth=2, num_heads=2,
                    mlp_hidden=96, init_values=1e-5)  # fmt: skip
    torch.manual_seed(0)
    m = scramble(VisionTransformer(cfg)).eval()
    assert m.pos_embed.shape == (1, 1 + 16, 24)  # CLS row included (UNI v1 layout)
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(m(x).double(), reference_vit(m, x), atol=2e-5, rtol=1e-4)


def test_pos_embed_resampled_bicubic_antialiased_for_other_sizes():
    m = scramble(quiet_load("uni2-tiny"))
    assert m.pos_embed_for_grid(16, 16) is m.pos_embed  # native grid: unchanged
    grid = m.pos_embed.detach().reshape(1, 16, 16, 48).permute(0, 3, 1, 2)
    for side in (8, 20):  # 112 px (downsampling) and 280 px (upsampling)
        want = F.interpolate(grid, size=(side, side), mode="bicubic", antialias=True)
        want = want.permute(0, 2, 3, 1).reshape(1, side * side, 48)
        torch.testing.assert_close(m.pos_embed_for_grid(side, side).detach(), want)
        x = torch.randn(1, 3, side * 14, side * 14, generator=torch.Generator().manual_seed(side))
        with torch.no_grad():
            assert m.forward_features(x).shape == (1, 9 + side * side, 48)
            torch.testing.assert_close(
                m(x).double(), reference_vit(m, x, pos_grid=want), atol=2e-5, rtol=1e-4
            )
    with pytest.raises(ValueError, match="multiples of the patch size 14"):
        m(torch.zeros(1, 3, 100, 112))


def test_uni_with_cls_row_keeps_prefix_when_resampling():
    cfg = ViTConfig(image_size=32, patch_size=8, embed_dim=8, depth=1, num_heads=2, mlp_hidden=16)
    torch.manual_seed(0)
    m = VisionTransformer(cfg)
    pos = m.pos_embed_for_grid(2, 2).detach()
    assert pos.shape == (1, 1 + 4, 8)
    torch.testing.assert_close(pos[:, 0], m.pos_embed.detach()[:, 0])  # CLS row untouched
    grid = m.pos_embed.detach()[:, 1:].reshape(1, 4, 4, 8).permute(0, 3, 1, 2)
    want = F.interpolate(grid, size=(2, 2), mode="bicubic", antialias=True)
    torch.testing.assert_close(pos[:, 1:], want.permute(0, 2, 3, 1).reshape(1, 4, 8))


def test_random_init_is_deterministic_warns_and_leaves_global_rng_alone():
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(5))
    state = torch.random.get_rng_state()
    with pytest.warns(models.RandomWeightsWarning, match="WITHOUT weights"):
        a = models.load("uni2-tiny", device="cpu")
    assert torch.equal(torch.random.get_rng_state(), state)
    b = quiet_load("uni2-tiny")
    c = quiet_load("uni2-tiny", seed=1)
    with torch.no_grad():
        ea, eb, ec = a(x), b(x), c(x)
    assert torch.equal(ea, eb)
    assert not torch.allclose(ea, ec)
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert ka == kb and torch.equal(va, vb)


def test_dtype_device_and_options():
    m = quiet_load("uni2-tiny")
    assert next(m.parameters()).dtype == torch.float32 and not m.training  # auto on CPU: fp32
    assert models.info("uni_v2").gpu_dtype == torch.bfloat16  # TRIDENT autocast dtypes
    assert models.info("uni").gpu_dtype == torch.float16
    assert models.info("conch_v1").gpu_dtype == torch.float32
    bf = quiet_load("uni2-tiny", dtype="bf16")
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        out = bf(x)  # float32 input is cast to the parameters' dtype
    assert out.dtype == torch.bfloat16 and out.shape == (1, 48)
    big = quiet_load("uni2-tiny", image_size=448)
    assert big.image_size == 448 and big.pos_embed.shape == (1, 256, 48)
    assert set(models.available()) >= {"uni2-h", "uni", "conch", "uni2-tiny", "conch-tiny",
                                       "abmil", "mtbbench-regressor"}  # fmt: skip
    with pytest.raises(ValueError, match="unknown model 'vit-huge'.*uni2-h"):
        models.load("vit-huge")
    with pytest.raises(TypeError, match="unexpected option.*colour"):
        models.load("uni2-tiny", colour="red")
    with pytest.raises(ValueError, match="multiple of the patch size 14"):
        quiet_load("uni2-tiny", image_size=230)
    with pytest.raises(ValueError, match=r"expected images \[B, 3, H, W\]"):
        m(torch.zeros(2, 224, 224))
