"""The timm-layout encoder zoo (tumorboard.models._zoo.timm_vits).

Oracles: key/shape tables written here from the published configurations (timm
``vit_huge_patch14_224`` / ``vit_giant_patch14_dinov2`` / ``vit_giant_patch14_reg4_dinov2`` /
``vit_base_patch14_reg4_dinov2`` as TRIDENT ``load.py``@a91fa84 overrides them; CONCH v1.5's
``CONCHVisionTower``), built on the meta device; parameter counts stated by the model cards; the
pooled outputs recomputed by hand from ``forward_features`` on tiny configurations of the same
classes; strict loading of saved random state dicts.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from tumorboard import models  # noqa: E402
from tumorboard.models._zoo.timm_vits import (  # noqa: E402
    ClsMeanViT,
    ConchV15Vision,
)
from tumorboard.models.vit import VisionTransformer, ViTConfig  # noqa: E402
from tumorboard.models.weights import CheckpointKeyError, save_state_dict  # noqa: E402

ZOO = ("virchow", "virchow2", "hoptimus0", "hoptimus1", "h0-mini", "gigapath", "conch_v15")


def vit_table(*, prefix="", dim, depth, patch, n_pos, hidden, fc2_in, regs):
    """Return the expected timm ViT keys and shapes (LayerScale everywhere in this zoo)."""
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
        for name, shape in {
            "norm1.weight": (dim,),
            "norm1.bias": (dim,),
            "attn.qkv.weight": (3 * dim, dim),
            "attn.qkv.bias": (3 * dim,),
            "attn.proj.weight": (dim, dim),
            "attn.proj.bias": (dim,),
            "ls1.gamma": (dim,),
            "norm2.weight": (dim,),
            "norm2.bias": (dim,),
            "mlp.fc1.weight": (hidden, dim),
            "mlp.fc1.bias": (hidden,),
            "mlp.fc2.weight": (dim, fc2_in),
            "mlp.fc2.bias": (dim,),
            "ls2.gamma": (dim,),
        }.items():
            t[b + name] = shape
    return {prefix + k: v for k, v in t.items()}


#: name -> (table kwargs, parameter count stated by the model card / paper, tolerance).
TABLES = {
    # paige-ai/Virchow(2) cards, arXiv:2408.00738: 632 M (ViT-H/14, SwiGLU 6832 packed).
    "virchow": (
        dict(dim=1280, depth=32, patch=14, n_pos=257, hidden=6832, fc2_in=3416, regs=0),
        632e6,
        1e6,
    ),
    "virchow2": (
        dict(dim=1280, depth=32, patch=14, n_pos=261, hidden=6832, fc2_in=3416, regs=4),
        632e6,
        1e6,
    ),
    # bioptimus/H-optimus-0 and -1 cards: ViT-g/14, 1.1 B parameters.
    "hoptimus0": (
        dict(dim=1536, depth=40, patch=14, n_pos=256, hidden=8192, fc2_in=4096, regs=4),
        1.1e9,
        0.05e9,
    ),
    "hoptimus1": (
        dict(dim=1536, depth=40, patch=14, n_pos=256, hidden=8192, fc2_in=4096, regs=4),
        1.1e9,
        0.05e9,
    ),
    # H0-mini: ViT-B/14 with 4 registers; the count is the table's own sum (no card figure read).
    "h0-mini": (
        dict(dim=768, depth=12, patch=14, n_pos=256, hidden=3072, fc2_in=1536, regs=4),
        71_571_456,
        0,
    ),
    # prov-gigapath README: tile encoder 1,134,953,984 parameters.
    "gigapath": (
        dict(dim=1536, depth=40, patch=16, n_pos=197, hidden=8192, fc2_in=4096, regs=0),
        1_134_953_984,
        0,
    ),
}


#: Attention heads (timm configurations).
HEADS = {"virchow": 16, "virchow2": 16, "hoptimus0": 24, "hoptimus1": 24, "h0-mini": 12,
         "gigapath": 24}  # fmt: skip


def shapes(module):
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


def n_params(module):
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("name", sorted(TABLES))
def test_real_config_keys_shapes_and_parameter_count(name):
    table, stated, tol = TABLES[name]
    with torch.device("meta"):
        m = models.build(name)
    assert shapes(m) == vit_table(**table)
    assert abs(n_params(m) - stated) <= tol, n_params(m)
    assert m.norm.eps == 1e-6 and m.blocks[0].attn.num_heads == HEADS[name]
    assert isinstance(m.blocks[0].mlp.act, torch.nn.SiLU)  # packed SwiGLU in all six
    assert m.blocks[0].ls1.gamma.shape == (table["dim"],)


def test_conch_v15_keys_shapes_and_parameter_count():
    with torch.device("meta"):
        m = models.build("conch_v15")
    want = vit_table(prefix="trunk.", dim=1024, depth=24, patch=16, n_pos=197, hidden=4096,
                     fc2_in=4096, regs=0)  # fmt: skip
    want.update(
        {
            "attn_pool_contrast.query": (1, 768),
            "attn_pool_contrast.ln_k.weight": (1024,),
            "attn_pool_contrast.ln_k.bias": (1024,),
            "attn_pool_contrast.ln_q.weight": (768,),
            "attn_pool_contrast.ln_q.bias": (768,),
            "attn_pool_contrast.to_q.weight": (768, 768),
            "attn_pool_contrast.to_kv.weight": (1536, 1024),
            "attn_pool_contrast.to_out.weight": (768, 768),
            "ln_contrast.weight": (768,),
            "ln_contrast.bias": (768,),
        }
    )
    assert shapes(m) == want
    assert round(n_params(m) / 1e6) == 306  # ViT-L/16 (~303 M) + pooler
    assert isinstance(m.trunk.blocks[0].mlp.act, torch.nn.GELU)
    assert (m.embed_dim, m.image_size, m.interpolation) == (768, 448, "bilinear")


def test_registry_rows():
    for name in ZOO:
        info = models.info(name)
        assert info.trident_name == name and info.gated is True
        assert info.gpu_dtype == torch.float16 and info.magnification == 20.0
        assert info.pooling and info.weights_source.startswith("Hugging Face")
    assert models.info("virchow2").embed_dim == 2560 and models.info("virchow").license
    assert models.info("gigapath").patch_size == 256 and "center crop 224" in (
        models.info("gigapath").pooling or ""
    )
    assert models.info("conch_v15").patch_size == 512
    assert models.info("hoptimus0").mean == (0.707223, 0.578729, 0.703617)


def _scramble(m, seed=1):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    return m.eval()


TINY = ViTConfig(image_size=28, patch_size=14, embed_dim=24, depth=2, num_heads=2,
                 mlp_hidden=64, mlp="swiglu", init_values=1e-5, reg_tokens=4)  # fmt: skip


def test_cls_mean_pooling_excludes_registers():
    torch.manual_seed(0)
    m = _scramble(ClsMeanViT(TINY))
    x = torch.randn(3, 3, 28, 28)
    with torch.no_grad():
        tokens = m.forward_features(x)
        out = m(x)
    assert tokens.shape == (3, 1 + 4 + 4, 24) and out.shape == (3, 48) and m.embed_dim == 48
    want = torch.cat([tokens[:, 0], tokens[:, 5:].mean(dim=1)], dim=-1)
    torch.testing.assert_close(out, want)
    wrong = torch.cat([tokens[:, 0], tokens[:, 1:].mean(dim=1)], dim=-1)  # registers averaged
    assert not torch.allclose(out, wrong)
    assert list(m.state_dict()) == list(VisionTransformer(TINY).state_dict())  # no prefix


TINY_TRUNK = ViTConfig(image_size=32, patch_size=16, embed_dim=32, depth=2, num_heads=2,
                       mlp_hidden=64, init_values=1.0)  # fmt: skip


def test_conch_v15_pooler_matches_hand_computation():
    torch.manual_seed(0)
    m = _scramble(ConchV15Vision(image_size=32, config=TINY_TRUNK))
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        tokens = m.trunk.forward_features(x).double()
        out = m(x)
        sd = {k: v.double() for k, v in m.state_dict().items()}
        p = "attn_pool_contrast."
        kx = F.layer_norm(tokens, (32,), sd[p + "ln_k.weight"], sd[p + "ln_k.bias"])
        q = F.layer_norm(sd[p + "query"], (768,), sd[p + "ln_q.weight"], sd[p + "ln_q.bias"])
        q = q @ sd[p + "to_q.weight"].T
        k, v = (kx @ sd[p + "to_kv.weight"].T).chunk(2, dim=-1)
        heads = []
        for h in range(8):
            s = slice(96 * h, 96 * (h + 1))
            att = torch.softmax(q[:, s] @ k[..., s].transpose(-1, -2) / math.sqrt(96), dim=-1)
            heads.append(att @ v[..., s])
        pooled = torch.cat(heads, dim=-1) @ sd[p + "to_out.weight"].T
        want = F.layer_norm(pooled[:, 0], (768,), sd["ln_contrast.weight"], sd["ln_contrast.bias"])
    assert out.shape == (2, 768)
    torch.testing.assert_close(out.double(), want, atol=2e-5, rtol=1e-4)


def test_conch_v15_checkpoint_grid_resampled_at_load(tmp_path):
    with torch.device("meta"):
        ref = models.build("conch_v15")
    state = {  # one number per key (zero-stride views): kilobytes on disk
        k: torch.full((), float(i)).expand(v.shape)
        for i, (k, v) in enumerate(ref.state_dict().items())
    }
    big = torch.randn(1, 1 + 28 * 28, 1024, generator=torch.Generator().manual_seed(0))
    state["trunk.pos_embed"] = big  # a checkpoint saved on the 448 grid
    path = tmp_path / "c15.pt"
    torch.save(state, path)
    m = models.load("conch_v15", weights=path, device="cpu")
    grid = big[:, 1:].reshape(1, 28, 28, 1024).permute(0, 3, 1, 2)
    want = F.interpolate(grid, size=(14, 14), mode="bilinear", antialias=False)
    assert m.trunk.pos_embed.shape == (1, 197, 1024)
    torch.testing.assert_close(m.trunk.pos_embed[:, 0].detach(), big[:, 0])
    torch.testing.assert_close(
        m.trunk.pos_embed[:, 1:].detach(), want.permute(0, 2, 3, 1).reshape(1, 196, 1024)
    )


def _tiny_factory(name):
    """Return a builder of tiny modules of the registry model's class and layout."""
    big = models.info(name)
    with torch.device("meta"):
        ref = models.build(name)
    c = ref.config
    cfg = ViTConfig(image_size=28, patch_size=14, embed_dim=24, depth=2, num_heads=2,
                    mlp_hidden=64, mlp=c.mlp, init_values=c.init_values,
                    reg_tokens=c.reg_tokens, no_embed_class=c.no_embed_class)  # fmt: skip
    cls = type(ref)

    def build(**_options):
        torch.manual_seed(0)
        return cls(cfg, name=name, mean=big.mean, std=big.std)

    return build


@pytest.mark.parametrize("name", ["virchow2", "hoptimus0"])
def test_saved_random_weights_round_trip_and_bad_keys(name, tmp_path, monkeypatch):
    # The registry builder is swapped for a tiny one of the same class, so the real load path
    # (meta build, strict check, assignment) runs in milliseconds.
    from tumorboard.models import _registry

    build = _tiny_factory(name)
    entry = _registry._entry(name)
    monkeypatch.setitem(_registry._LOOKUP, name, type(entry)(entry.info, build=build))
    tiny = build()
    _scramble(tiny, seed=3)
    path = save_state_dict(tiny, tmp_path / "w.safetensors")
    loaded = models.load(name, weights=path, device="cpu")
    for (ka, va), (kb, vb) in zip(
        tiny.state_dict().items(), loaded.state_dict().items(), strict=True
    ):
        assert ka == kb and torch.equal(va, vb), ka
    x = torch.randn(2, 3, 28, 28)
    with torch.no_grad():
        assert torch.equal(loaded(x), tiny(x))

    state = dict(tiny.state_dict())
    state["blocks.0.mlp.fc1.weight_renamed"] = state.pop("blocks.0.mlp.fc1.weight")
    bad = save_state_dict(state, tmp_path / "bad.safetensors")
    with pytest.raises(CheckpointKeyError, match="blocks.0.mlp.fc1.weight") as err:
        models.load(name, weights=bad, device="cpu")
    assert set(err.value.missing) == {"blocks.0.mlp.fc1.weight"}
    assert set(err.value.unexpected) == {"blocks.0.mlp.fc1.weight_renamed"}


def test_image_size_option_resamples_at_run_time():
    with torch.device("meta"):
        m = models.build("gigapath", image_size=256)
        assert m.image_size == 256 and m.pos_embed.shape == (1, 197, 1536)
        assert m(torch.zeros(1, 3, 256, 256)).shape == (1, 1536)
        v = models.build("virchow2", image_size=448)
        assert v(torch.zeros(1, 3, 448, 448)).shape == (1, 2560)
    with pytest.raises(ValueError, match="multiple of the patch size 14"):
        models.build("hoptimus1", image_size=230)
