"""kaiko.ai, Lunit, GPFM and OpenMidnight encoders (tumorboard.models._zoo.timm_vits_b).

Oracles, written here from the published facts (not from the module):

* key/shape tables of the published checkpoints: timm's ``vision_transformer.py`` layout for the
  kaiko (1aurent), Lunit (1aurent) and GPFM (``GPFM.pth``) files, the DINOv2 layout for kaiko's
  ``vitl14.pth`` release and OpenMidnight's ``teacher_checkpoint_load.pt``;
* parameter counts the model cards and files state: Lunit ViT-S/8 21.7 M (1aurent card), kaiko
  ViT-B 343 MB and ViT-L/14 1.22 GB of float32 safetensors, timm's ViT-S ``.dino`` cards 21.7 M,
  GPFM 303 M, DINOv2 ViT-g/14 1.1 B;
* a hand-written DINOv2 forward (class row of ``pos_embed`` added to CLS, registers inserted
  after the position embedding, explicit softmax attention, packed SwiGLU on the first half) that
  a checkpoint in the DINOv2 layout must reproduce once loaded;
* the bicubic antialiased grid resampling computed directly with ``F.interpolate``.

Real-size models are built on the meta device only.
"""

from __future__ import annotations

import math
import warnings

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from tumorboard import models  # noqa: E402
from tumorboard.models._zoo.timm_vits_b import DinoV2LayoutViT  # noqa: E402
from tumorboard.models.vit import VisionTransformer, ViTConfig  # noqa: E402
from tumorboard.models.weights import CheckpointKeyError, save_state_dict  # noqa: E402

NAMES = (
    "kaiko-vits8",
    "kaiko-vits16",
    "kaiko-vitb8",
    "kaiko-vitb16",
    "kaiko-vitl14",
    "lunit-vits8",
    "gpfm",
    "openmidnight",
)


def timm_table(*, dim, depth, patch, n_pos, hidden, regs=0, layerscale=False):
    """Keys and shapes of a timm ``VisionTransformer`` checkpoint (GELU MLP, ``num_classes=0``)."""
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
                b + "mlp.fc2.weight": (dim, hidden),
                b + "mlp.fc2.bias": (dim,),
            }
        )
        if layerscale:
            t[b + "ls1.gamma"] = (dim,)
            t[b + "ls2.gamma"] = (dim,)
    return t


def dinov2_table(*, dim, depth, patch, grid, regs, swiglu_hidden=None, mlp_hidden=None):
    """Keys and shapes of a DINOv2 (facebookresearch/dinov2) ``DinoVisionTransformer`` backbone.

    ``pos_embed`` covers CLS plus the patch grid; ``register_tokens`` and ``mask_token`` are
    parameters; a fused SwiGLU FFN has ``w12`` (``2 * hidden`` outputs) and ``w3``.
    """
    t = {
        "cls_token": (1, 1, dim),
        "pos_embed": (1, 1 + grid * grid, dim),
        "register_tokens": (1, regs, dim),
        "mask_token": (1, dim),
        "patch_embed.proj.weight": (dim, 3, patch, patch),
        "patch_embed.proj.bias": (dim,),
        "norm.weight": (dim,),
        "norm.bias": (dim,),
    }
    for i in range(depth):
        b = f"blocks.{i}."
        for n in ("norm1", "norm2"):
            t[b + n + ".weight"] = (dim,)
            t[b + n + ".bias"] = (dim,)
        t[b + "attn.qkv.weight"] = (3 * dim, dim)
        t[b + "attn.qkv.bias"] = (3 * dim,)
        t[b + "attn.proj.weight"] = (dim, dim)
        t[b + "attn.proj.bias"] = (dim,)
        t[b + "ls1.gamma"] = (dim,)
        t[b + "ls2.gamma"] = (dim,)
        if swiglu_hidden:
            t[b + "mlp.w12.weight"] = (2 * swiglu_hidden, dim)
            t[b + "mlp.w12.bias"] = (2 * swiglu_hidden,)
            t[b + "mlp.w3.weight"] = (dim, swiglu_hidden)
            t[b + "mlp.w3.bias"] = (dim,)
        else:
            t[b + "mlp.fc1.weight"] = (mlp_hidden, dim)
            t[b + "mlp.fc1.bias"] = (mlp_hidden,)
            t[b + "mlp.fc2.weight"] = (dim, mlp_hidden)
            t[b + "mlp.fc2.bias"] = (dim,)
    return t


#: The published checkpoints' tables (timm layout) and parameter counts (rounded as stated).
def _s(patch, n_pos):
    return timm_table(dim=384, depth=12, patch=patch, n_pos=n_pos, hidden=1536)


def _b(patch, n_pos):
    return timm_table(dim=768, depth=12, patch=patch, n_pos=n_pos, hidden=3072)


_L14 = timm_table(dim=1024, depth=24, patch=14, n_pos=37 * 37, hidden=4096, regs=4,
                  layerscale=True)  # fmt: skip
_GPFM = timm_table(dim=1024, depth=24, patch=14, n_pos=257, hidden=4096, layerscale=True)
TIMM_CHECKPOINTS = {
    # name: (table, stated count, the statement's rounding step); file sizes are float32 bytes
    "kaiko-vits8": (_s(8, 785), 21.7e6, 1e5),
    "kaiko-vits16": (_s(16, 197), 21.7e6, 1e5),
    "kaiko-vitb8": (_b(8, 785), 343e6 / 4, 1e6 / 4),
    "kaiko-vitb16": (_b(16, 197), 343e6 / 4, 1e6 / 4),
    "kaiko-vitl14": (_L14, 1.22e9 / 4, 1e7 / 4),
    "lunit-vits8": (_s(8, 785), 21.7e6, 1e5),
    "gpfm": (_GPFM, 303e6, 1e6),
}


def shapes(module_or_state):
    state = module_or_state
    if isinstance(module_or_state, torch.nn.Module):
        state = module_or_state.state_dict()
    return {k: tuple(v.shape) for k, v in state.items()}


def meta_state(table):
    return {k: torch.empty(s, device="meta") for k, s in table.items()}


def quiet_load(name, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", models.RandomWeightsWarning)
        return models.load(name, device="cpu", **kw)


@pytest.mark.parametrize("name", sorted(TIMM_CHECKPOINTS))
def test_timm_layout_keys_shapes_and_parameter_count(name):
    table, count, rounding = TIMM_CHECKPOINTS[name]
    with torch.device("meta"):
        m = models.build(name)
    assert shapes(m) == table
    n = sum(p.numel() for p in m.parameters())
    assert n == sum(math.prod(s) for s in table.values())
    assert abs(n - count) <= rounding / 2, (name, n)  # the stated figure, to its precision
    assert m.norm.eps == 1e-6 and m.blocks[0].attn.qkv.bias is not None
    assert isinstance(m.blocks[0].mlp.act, torch.nn.GELU)


def test_openmidnight_adapts_the_dinov2_checkpoint_exactly():
    with torch.device("meta"):
        m = models.build("openmidnight")
    # DINOv2 ViT-g/14 (vit_giant2): 1536 wide, 40 blocks, 24 heads, fused SwiGLU with
    # (int(4 * 1536 * 2 / 3) + 7) // 8 * 8 = 4096 hidden features; 224 px crops: 16 x 16 grid.
    hidden = (int(4 * 1536 * 2 / 3) + 7) // 8 * 8
    assert hidden == 4096
    published = dinov2_table(dim=1536, depth=40, patch=14, grid=16, regs=4, swiglu_hidden=hidden)
    adapted = m.adapt_state_dict(meta_state(published))
    assert shapes(adapted) == shapes(m)
    n = sum(p.numel() for p in m.parameters())
    assert n == sum(math.prod(s) for k, s in published.items() if k != "mask_token") - 1536
    assert round(n / 1e9, 1) == 1.1  # DINOv2 ViT-g/14: 1.1 B parameters
    assert m.blocks[0].attn.num_heads == 24 and len(m.blocks) == 40
    assert isinstance(m.blocks[0].mlp.act, torch.nn.SiLU)
    assert m.pos_embed.shape == (1, 256, 1536) and m.reg_token.shape == (1, 4, 1536)


def test_kaiko_vitl14_also_loads_kaikos_dinov2_release():
    with torch.device("meta"):
        m = models.build("kaiko-vitl14")
    # kaiko-ai/towards_large_pathology_fms vitl14.pth: DINOv2 layout at 518 px (37 x 37 grid).
    published = dinov2_table(dim=1024, depth=24, patch=14, grid=37, regs=4, mlp_hidden=4096)
    assert shapes(m.adapt_state_dict(meta_state(published))) == shapes(m)
    assert m.image_size == 224 and m.config.image_size == 518  # TRIDENT: 224 input, 518 backbone


def test_timm_layout_passes_through_the_adapter_unchanged():
    with torch.device("meta"):
        m = models.build("kaiko-vitl14")
    state = m.state_dict()
    adapted = m.adapt_state_dict(state)
    assert list(adapted) == list(state) and all(adapted[k] is state[k] for k in state)


# --- pooling and the DINOv2 token layout, by hand on a tiny configuration ---------------------

TINY = ViTConfig(
    image_size=28,
    patch_size=7,
    embed_dim=24,
    depth=2,
    num_heads=2,
    mlp_hidden=32,
    mlp="swiglu",
    init_values=1.0,
    reg_tokens=3,
    no_embed_class=True,
)


def random_dinov2_state(seed=0):
    g = torch.Generator().manual_seed(seed)
    table = dinov2_table(dim=24, depth=2, patch=7, grid=4, regs=3, swiglu_hidden=16)
    state = {}
    for k, s in table.items():
        v = 0.2 * torch.randn(s, generator=g)
        if k.endswith(("norm1.weight", "norm2.weight", "norm.weight", "gamma")):
            v = v + 1.0
        state[k] = v
    return state


def dinov2_forward(sd, x, *, heads=2):
    """DINOv2 ``forward_features(x)["x_norm_clstoken"]`` written out in float64."""
    sd = {k: v.double() for k, v in sd.items()}
    x = x.double()
    d = sd["cls_token"].shape[-1]
    b = x.shape[0]
    p = F.conv2d(x, sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"], stride=7)
    tokens = torch.cat([sd["cls_token"].expand(b, 1, d), p.flatten(2).transpose(1, 2)], dim=1)
    tokens = tokens + sd["pos_embed"]  # CLS row and patch grid
    regs = sd["register_tokens"].expand(b, -1, -1)
    tokens = torch.cat([tokens[:, :1], regs, tokens[:, 1:]], dim=1)  # registers: no position
    for i in range(2):
        pre = f"blocks.{i}."

        def ln(t, name, pre=pre):
            return F.layer_norm(t, (d,), sd[pre + name + ".weight"], sd[pre + name + ".bias"], 1e-6)

        y = ln(tokens, "norm1")
        q, k, v = (y @ sd[pre + "attn.qkv.weight"].T + sd[pre + "attn.qkv.bias"]).split(d, -1)

        def split(t):
            return t.reshape(b, -1, heads, d // heads).transpose(1, 2)

        att = torch.softmax(split(q) @ split(k).transpose(-1, -2) / math.sqrt(d // heads), -1)
        o = (att @ split(v)).transpose(1, 2).reshape(b, -1, d)
        o = o @ sd[pre + "attn.proj.weight"].T + sd[pre + "attn.proj.bias"]
        tokens = tokens + sd[pre + "ls1.gamma"] * o
        y = ln(tokens, "norm2")
        x1, x2 = (y @ sd[pre + "mlp.w12.weight"].T + sd[pre + "mlp.w12.bias"]).chunk(2, -1)
        o = (F.silu(x1) * x2) @ sd[pre + "mlp.w3.weight"].T + sd[pre + "mlp.w3.bias"]
        tokens = tokens + sd[pre + "ls2.gamma"] * o
    out = F.layer_norm(tokens, (d,), sd["norm.weight"], sd["norm.bias"], 1e-6)
    return out[:, 0], out


def test_dinov2_layout_checkpoint_reproduces_the_dinov2_forward_and_pools_cls():
    state = random_dinov2_state()
    m = DinoV2LayoutViT(TINY).eval()
    m.load_state_dict(m.adapt_state_dict(state), strict=True)
    x = torch.randn(3, 3, 28, 28, generator=torch.Generator().manual_seed(1))
    want_cls, want_tokens = dinov2_forward(state, x)
    with torch.no_grad():
        got = m(x)
        tokens = m.forward_features(x)
    assert got.shape == (3, 24) and tokens.shape == (3, 1 + 3 + 16, 24)
    torch.testing.assert_close(got.double(), want_cls, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(tokens.double(), want_tokens, atol=1e-5, rtol=1e-5)
    # The embedding is the class token alone: not the registers, not a patch mean.
    assert torch.equal(got, tokens[:, 0])
    assert not torch.allclose(got, tokens[:, 4:].mean(1), atol=1e-3)
    assert not torch.allclose(got, tokens[:, 1], atol=1e-3)


def test_block_chunked_dinov2_keys_are_flattened():
    state = random_dinov2_state()
    chunked = {}
    for k, v in state.items():  # DINOv2 block_chunks=2 over 2 blocks: blocks.{chunk}.{i}.
        if k.startswith("blocks."):
            i = int(k.split(".")[1])
            k = f"blocks.{i}.{k.split('.', 1)[1]}"
        chunked[k] = v
    m = DinoV2LayoutViT(TINY)
    assert shapes(m.adapt_state_dict(chunked)) == shapes(m)


def test_cls_token_pooling_of_timm_layout_models_by_hand():
    cfg = ViTConfig(image_size=16, patch_size=8, embed_dim=8, depth=1, num_heads=2, mlp_hidden=16)
    torch.manual_seed(0)
    m = VisionTransformer(cfg).eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        tokens = m.forward_features(x)
        assert torch.equal(m(x), tokens[:, 0])
    assert tokens.shape == (2, 1 + 4, 8)


def test_kaiko_vitl14_resamples_its_518_grid_to_the_224_input():
    # Same layout as kaiko-vitl14 (registers, patches-only pos_embed), scaled down: grid 6 -> 3.
    cfg = ViTConfig(image_size=42, patch_size=7, embed_dim=8, depth=1, num_heads=2, mlp_hidden=16,
                    init_values=1e-5, reg_tokens=4, no_embed_class=True)  # fmt: skip
    torch.manual_seed(0)
    m = DinoV2LayoutViT(cfg, image_size=21)
    grid = m.pos_embed.detach().reshape(1, 6, 6, 8).permute(0, 3, 1, 2)
    want = F.interpolate(grid, size=(3, 3), mode="bicubic", antialias=True)
    want = want.permute(0, 2, 3, 1).reshape(1, 9, 8)
    torch.testing.assert_close(m.pos_embed_for_grid(3, 3).detach(), want)
    with torch.device("meta"):
        real = models.build("kaiko-vitl14")
        big = models.build("kaiko-vitl14", image_size=448)
    assert real.pos_embed.shape == (1, 37 * 37, 1024) and real.image_size == 224
    assert big.image_size == 448 and big.pos_embed.shape == (1, 37 * 37, 1024)


# --- load: round trips and refusals ------------------------------------------------------------


def test_random_state_dict_round_trips_bit_identically(tmp_path):
    name = "lunit-vits8"
    source = quiet_load(name, seed=3)
    path = save_state_dict(source, tmp_path / f"{name}.safetensors")
    loaded = models.load(name, weights=path, device="cpu")
    for (ka, va), (kb, vb) in zip(
        source.state_dict().items(), loaded.state_dict().items(), strict=True
    ):
        assert ka == kb and torch.equal(va, vb), ka
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(0))  # 4 x 4 patches
    with torch.no_grad():
        assert torch.equal(loaded(x), source(x))


def test_openmidnight_loads_a_dinov2_layout_file(tmp_path):
    with torch.device("meta"):
        m = models.build("openmidnight")
    published = dinov2_table(dim=1536, depth=40, patch=14, grid=16, regs=4, swiglu_hidden=4096)
    # One number per key, zero-stride: kilobytes on disk whatever the shapes.
    state = {k: torch.full((), float(i)).expand(s) for i, (k, s) in enumerate(published.items())}
    path = tmp_path / "teacher_checkpoint_load.pt"
    torch.save(state, path)
    loaded = models.load("openmidnight", weights=path, device="cpu", dtype="fp32")
    got = loaded.state_dict()
    assert list(got) == list(m.state_dict())
    index = {k: float(i) for i, k in enumerate(published)}
    assert got["reg_token"].flatten()[0] == index["register_tokens"]
    assert got["cls_token"].flatten()[0] == index["cls_token"] + index["pos_embed"]  # folded
    assert got["pos_embed"].flatten()[0] == index["pos_embed"]
    assert got["blocks.7.mlp.fc1.weight"].flatten()[0] == index["blocks.7.mlp.w12.weight"]
    assert got["blocks.39.mlp.fc2.bias"].flatten()[0] == index["blocks.39.mlp.w3.bias"]

    state["blocks.3.mlp.w4.weight"] = state.pop("blocks.3.mlp.w3.weight")
    torch.save(state, path)
    with pytest.raises(CheckpointKeyError) as err:
        models.load("openmidnight", weights=path, device="cpu")
    assert err.value.missing and set(err.value.missing) == {"blocks.3.mlp.fc2.weight"}
    assert set(err.value.unexpected) == {"blocks.3.mlp.w4.weight"}
    assert "blocks.3.mlp.fc2.weight" in str(err.value)


def test_renamed_key_is_refused_with_a_readable_error(tmp_path):
    with torch.device("meta"):
        m = models.build("kaiko-vits8")
    state = {k: torch.zeros(()).expand(v.shape) for k, v in m.state_dict().items()}
    state["blocks.5.attn.qkv.kernel"] = state.pop("blocks.5.attn.qkv.weight")
    path = tmp_path / "renamed.pt"
    torch.save(state, path)
    with pytest.raises(CheckpointKeyError) as err:
        models.load("kaiko_vits8", weights=path, device="cpu")
    message = str(err.value)
    assert "blocks.5.attn.qkv.weight" in message and "blocks.5.attn.qkv.kernel" in message
    assert "missing" in message and "unexpected" in message


# --- registry rows ------------------------------------------------------------------------------

_KAIKO = ((0.5,) * 3, "bilinear", torch.float32, "kaiko-non-commercial", False, 256)
_IMAGENET = (0.485, 0.456, 0.406)
ROWS = {
    # name: (dim, mean, interpolation, gpu dtype, license, gated, patch size)
    "kaiko-vits8": (384, *_KAIKO),
    "kaiko-vits16": (384, *_KAIKO),
    "kaiko-vitb8": (768, *_KAIKO),
    "kaiko-vitb16": (768, *_KAIKO),
    "kaiko-vitl14": (1024, *_KAIKO),
    # TRIDENT normalises Lunit with ImageNet's statistics (timm's stock .dino data config)
    "lunit-vits8": (384, _IMAGENET, "bicubic", torch.float32, "lunit-non-commercial", False, 224),
    "gpfm": (1024, _IMAGENET, "bicubic", torch.float16, "CC-BY-NC-4.0", False, 224),
    "openmidnight": (1536, _IMAGENET, "bilinear", torch.float16, "Apache-2.0", None, 224),
}


@pytest.mark.parametrize("name", NAMES)
def test_registry_row(name):
    dim, mean, interp, dtype, lic, gated, patch = ROWS[name]
    info = models.info(name)
    assert info.name == info.trident_name == name and info.kind == "encoder"
    assert (info.embed_dim, info.image_size, info.mean, info.interpolation) == (
        dim,
        224,
        mean,
        interp,
    )
    assert (info.gpu_dtype, info.license, info.gated) == (dtype, lic, gated)
    assert (info.magnification, info.patch_size) == (20.0, patch)
    assert info.pooling.startswith("class token") and info.weights_source.startswith("Hugging Face")
    with torch.device("meta"):
        m = models.build(name)
    assert (m.name, m.embed_dim, m.image_size, m.mean, m.std) == (
        name, dim, 224, info.mean, info.std
    )  # fmt: skip
    assert m.interpolation == interp


def test_image_size_option_where_trident_allows_it():
    with torch.device("meta"):
        for name in NAMES[:-1]:
            patch = models.build(name).config.patch_size
            assert models.build(name, image_size=patch * 32).image_size == patch * 32
    with pytest.raises(TypeError, match="unexpected option.*image_size"):
        models.build("openmidnight", image_size=448)
    with pytest.raises(ValueError, match="multiple of the patch size 14"):
        models.build("gpfm", image_size=230)
