"""TITAN's slide encoder (tumorboard.models.titan) and ``embed_slides(slide_encoder="titan")``.

Oracles: the key table of MahmoodLab/TITAN's ``vision_encoder`` (Hugging Face remote code
``vision_transformer.py`` and ``configuration_titan.py``: width 768, depth 6, 12 heads, MLP 3072,
an MLP patch embedding from 768, a 1-query contrastive pooler with 8 heads, ``proj``), written
out key by key; ALiBi's slopes written as numbers; a dense reference written here the way
TITAN's code runs one slide (a full H x W grid filled with ``index_add_``, an all-zero-cell
background mask, the bias from a numpy meshgrid of every cell, explicit softmax attention, and
torch's own ``nn.MultiheadAttention`` call for the pooler); permutations, translations and
rescalings of the coordinates; one-slide-at-a-time calls against one varlen call; the slide
features written by ``embed_slides`` read back with h5py.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tumorboard import models  # noqa: E402
from tumorboard.errors import InvalidArgumentError  # noqa: E402
from tumorboard.models import CheckpointKeyError, save_state_dict  # noqa: E402
from tumorboard.models.slide_encoder import load_slide_encoder  # noqa: E402
from tumorboard.models.titan import (  # noqa: E402
    TITAN_TINY,
    TitanSlideEncoder,
    alibi_bias,
    alibi_slopes,
    titan,
)

SLOPES_12 = [2.0**-e for e in (1, 2, 3, 4, 5, 6, 7, 8, 0.5, 1.5, 2.5, 3.5)]


def tiny(seed=0, **over):
    torch.manual_seed(seed)
    config = {**TITAN_TINY, **over}
    enc = TitanSlideEncoder(config.pop("in_dim"), **config).eval()
    with torch.no_grad():  # the class token and LayerNorms start at 0/1: make them matter
        for name, p in enc.named_parameters():
            if "norm" in name or "ln_" in name or "cls_token" in name:
                p.add_(0.3 * torch.randn_like(p))
    return enc


def titan_table(width=768, depth=6, f=768, hidden=3072):
    p = "vision_encoder."
    t = {
        f"{p}patch_embed.0.weight": (width, f),
        f"{p}patch_embed.0.bias": (width,),
        f"{p}cls_token": (1, 1, width),
        f"{p}norm.weight": (width,),
        f"{p}norm.bias": (width,),
        f"{p}proj": (width, width),
        f"{p}attn_pool_contrastive.query": (1, width),
        f"{p}attn_pool_contrastive.attn.in_proj_weight": (3 * width, width),
        f"{p}attn_pool_contrastive.attn.in_proj_bias": (3 * width,),
        f"{p}attn_pool_contrastive.attn.out_proj.weight": (width, width),
        f"{p}attn_pool_contrastive.attn.out_proj.bias": (width,),
        f"{p}attn_pool_contrastive.ln_q.weight": (width,),
        f"{p}attn_pool_contrastive.ln_q.bias": (width,),
        f"{p}attn_pool_contrastive.ln_k.weight": (width,),
        f"{p}attn_pool_contrastive.ln_k.bias": (width,),
    }
    for i in range(depth):
        b = f"{p}blocks.modules_list.{i}."
        t |= {f"{b}norm1.weight": (width,), f"{b}norm1.bias": (width,),
              f"{b}attn.qkv.weight": (3 * width, width), f"{b}attn.qkv.bias": (3 * width,),
              f"{b}attn.proj.weight": (width, width), f"{b}attn.proj.bias": (width,),
              f"{b}norm2.weight": (width,), f"{b}norm2.bias": (width,),
              f"{b}mlp.fc1.weight": (hidden, width), f"{b}mlp.fc1.bias": (hidden,),
              f"{b}mlp.fc2.weight": (width, hidden), f"{b}mlp.fc2.bias": (width,)}  # fmt: skip
    return t


# ---------------------------------------------------------------------------------------------
# keys, loading, registry
# ---------------------------------------------------------------------------------------------


def test_key_set_at_full_size_on_meta():
    with torch.device("meta"):
        enc = titan()
    got = {k: tuple(v.shape) for k, v in enc.state_dict().items()}
    assert got == titan_table()
    assert (enc.in_dim, enc.embed_dim, enc.n_heads) == (768, 768, 12)
    assert enc.vision_encoder.attn_pool_contrastive.attn.num_heads == 8
    assert sum(math.prod(s) for s in got.values()) == 46_076_160


def test_registry_row_is_built_with_coordinates():
    row = models.slide_encoder_info("titan")
    assert row.status == "built" and row.reason is None and row.uses_coords
    assert (row.trident_patch_encoder, row.magnification, row.patch_size) == ("conch_v15", 20, 512)
    assert (row.in_dim, row.embed_dim, row.precision) == (768, 768, "fp16")


def test_checkpoint_loads_strictly_dropping_text_and_captioning_pooler(tmp_path):
    enc = tiny(1)
    state = dict(enc.state_dict())
    extra = {
        "text_encoder.token_embedding.weight": torch.zeros(5, 4),
        "text_encoder.transformer.resblocks.0.attn.in_proj_weight": torch.zeros(12, 4),
        "vision_encoder.attn_pool.query": torch.zeros(128, 48),
        "vision_encoder.attn_pool.attn.in_proj_weight": torch.zeros(144, 48),
    }
    path = tmp_path / "model.safetensors"
    save_state_dict({**state, **extra}, path)
    got = load_slide_encoder("titan", weights=path)
    assert isinstance(got, TitanSlideEncoder) and not got.training
    assert (got.in_dim, got.embed_dim, len(got.vision_encoder.blocks.modules_list)) == (16, 48, 2)
    for k, v in state.items():
        assert torch.equal(got.state_dict()[k], v), k
    rng = np.random.default_rng(0)
    f = torch.from_numpy(rng.standard_normal((9, 16), dtype=np.float32))
    c = torch.from_numpy(rng.integers(0, 4, (9, 2)) * 512)
    with torch.no_grad():
        a = enc.forward_varlen(f, torch.tensor([0, 9]), coords=c, patch_size_level0=512)
        b = got.forward_varlen(f, torch.tensor([0, 9]), coords=c, patch_size_level0=512)
    torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)  # the same weights, loaded

    broken = {k: v for k, v in state.items() if not k.endswith("attn_pool_contrastive.query")}
    save_state_dict(broken, tmp_path / "broken.safetensors")
    with pytest.raises(CheckpointKeyError, match="attn_pool_contrastive.query"):
        load_slide_encoder("titan", weights=tmp_path / "broken.safetensors")


def test_random_weights_warn_and_are_the_published_size():
    with pytest.warns(models.RandomWeightsWarning, match="titan"):
        enc = load_slide_encoder("titan", seed=2)
    assert (enc.in_dim, enc.embed_dim) == (768, 768)
    assert len(enc.vision_encoder.blocks.modules_list) == 6


# ---------------------------------------------------------------------------------------------
# the 2-D ALiBi bias and the forward against hand-written references
# ---------------------------------------------------------------------------------------------


def test_alibi_slopes():
    np.testing.assert_array_equal(alibi_slopes(12).numpy(), np.float32(SLOPES_12))
    np.testing.assert_array_equal(alibi_slopes(8).numpy(), np.float32([2.0**-e for e in
                                                                       range(1, 9)]))  # fmt: skip
    assert alibi_slopes(1).tolist() == [2.0**-8]
    with pytest.raises(InvalidArgumentError, match="n_heads: expected a positive int"):
        alibi_slopes(0)


def test_alibi_bias_against_the_formula():
    grid = torch.tensor([[0, 0], [0, 2], [3, 1], [1, 1]])
    got = alibi_bias(grid, alibi_slopes(12)).numpy()
    assert got.shape == (12, 5, 5) and got.dtype == np.float32
    for h, m in enumerate(SLOPES_12):
        for i in range(5):
            for j in range(5):
                if i == 0 or j == 0:
                    want = 0.0
                else:
                    (xi, yi), (xj, yj) = grid[i - 1].tolist(), grid[j - 1].tolist()
                    want = -m * math.hypot(xi - xj, yi - yj)
                assert got[h, i, j] == pytest.approx(want, rel=1e-6, abs=1e-7)


def reference(enc, feats, coords, size):
    """One slide the way TITAN's remote code runs it, written densely here."""
    ve = enc.vision_encoder
    f = feats.shape[1]
    g = torch.div(coords - coords.min(0).values, size, rounding_mode="floor")
    h, w = (int(v) + 1 for v in g.max(0).values)
    grid = torch.zeros(h, w, f)
    grid.view(-1, f).index_add_(0, g[:, 0] * w + g[:, 1], feats)
    bg = (grid != 0).any(-1)  # [H, W]
    x = torch.cat((ve.cls_token[0], ve.patch_embed(grid.reshape(h * w, f))))
    x = x[torch.cat((torch.tensor([True]), bg.reshape(-1)))]
    gx, gy = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    pts = np.stack([gx[bg.numpy()], gy[bg.numpy()]], 1)
    dist = np.sqrt(((pts[:, None] - pts[None]) ** 2).sum(-1))
    heads = enc.n_heads
    slopes = np.float32(SLOPES_12[:heads] if heads == 12 else alibi_slopes(heads).numpy())
    n = len(pts)
    bias = torch.zeros(heads, n + 1, n + 1)
    bias[:, 1:, 1:] = torch.from_numpy(-slopes[:, None, None] * np.float32(dist)[None])
    hd = x.shape[1] // heads
    for blk in ve.blocks.modules_list:
        qkv = blk.attn.qkv(blk.norm1(x)).reshape(n + 1, 3, heads, hd).permute(1, 2, 0, 3)
        q, k, v = qkv
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(hd) + bias, dim=-1)
        x = x + blk.attn.proj((att @ v).transpose(0, 1).reshape(n + 1, -1))
        x = x + blk.mlp.fc2(torch.nn.functional.gelu(blk.mlp.fc1(blk.norm2(x))))
    x = ve.norm(x)
    pool = ve.attn_pool_contrastive
    q = pool.ln_q(pool.query)[:, None]  # [1 query, batch 1, width]
    kv = pool.ln_k(x)[:, None]
    out, _ = pool.attn(q, kv, kv, need_weights=False)
    return out[0, 0]


def random_slide(rng, n, f=16, side=7, size=512):
    cells = rng.choice(side * side, size=n, replace=False)
    coords = np.stack([cells // side, cells % side], 1) * size + rng.integers(0, 3, (1, 2)) * 100
    feats = rng.standard_normal((n, f)).astype(np.float32)
    return torch.from_numpy(feats), torch.from_numpy(coords.astype(np.int64))


def test_forward_matches_the_dense_reference():
    enc = tiny(3)
    rng = np.random.default_rng(3)
    for n in (1, 2, 13, 30):
        f, c = random_slide(rng, n)
        with torch.no_grad():
            got = enc.forward_varlen(f, torch.tensor([0, n]), coords=c, patch_size_level0=512)
            want = reference(enc, f, c, 512)
        torch.testing.assert_close(got[0], want, rtol=1e-4, atol=1e-5)


def test_patches_in_one_cell_add_up_and_all_zero_cells_are_background():
    enc = tiny(4)
    rng = np.random.default_rng(4)
    f, c = random_slide(rng, 10)
    half = f[3] / 2
    doubled_f = torch.cat((f[:3], half[None], f[4:], half[None], torch.zeros(1, 16)))
    doubled_c = torch.cat((c, c[3:4] + torch.tensor([[100, 200]]), torch.tensor([[9000, 9000]])))
    with torch.no_grad():
        a = enc.forward_varlen(f, torch.tensor([0, 10]), coords=c, patch_size_level0=512)
        b = enc.forward_varlen(doubled_f, torch.tensor([0, 12]), coords=doubled_c,
                               patch_size_level0=512)  # fmt: skip
        want = reference(enc, doubled_f, doubled_c, 512)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(b[0], want, rtol=1e-4, atol=1e-5)


def test_only_the_coordinates_matter_not_the_order_or_origin():
    enc = tiny(5)
    rng = np.random.default_rng(5)
    f, c = random_slide(rng, 20)
    off = torch.tensor([0, 20])

    def run(feats, coords, size=512):
        with torch.no_grad():
            return enc.forward_varlen(feats, off, coords=coords, patch_size_level0=size)

    base = run(f, c)
    perm = torch.from_numpy(rng.permutation(20))
    # the grid orders the tokens, so a permutation WITH the coordinates gives the same tokens
    assert torch.equal(run(f[perm], c[perm]), base)
    assert torch.equal(run(f, c + torch.tensor([[5120, 1024]])), base)  # translation
    assert torch.equal(run(f, c * 2, 1024), base)  # a 40x slide: twice the level-0 unit
    swapped = c.clone()
    swapped[[0, 1]] = c[[1, 0]]
    assert not torch.allclose(run(f, swapped), base, atol=1e-4)  # coordinates change it
    spread = c.clone()
    spread[:, 0] *= 3
    assert not torch.allclose(run(f, spread), base, atol=1e-4)  # distances change it


def test_varlen_batch_equals_one_slide_at_a_time_and_padded():
    enc = tiny(6)
    rng = np.random.default_rng(6)
    lengths, sizes = [5, 0, 17, 1, 9], [512, 512, 1024, 256, 512]
    parts = [random_slide(rng, n, size=s) for n, s in zip(lengths, sizes, strict=True)]
    feats = torch.cat([p[0] for p in parts])
    coords = torch.cat([p[1] for p in parts])
    offsets = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]))
    with torch.no_grad():
        got = enc.forward_varlen(feats, offsets, coords=coords, patch_size_level0=sizes)
        for i, (f, c) in enumerate(parts):
            one = enc.forward_varlen(f, torch.tensor([0, len(f)]), coords=c,
                                     patch_size_level0=sizes[i])  # fmt: skip
            torch.testing.assert_close(got[i], one[0], rtol=1e-5, atol=1e-6)
        assert torch.equal(got[1], torch.zeros(48))  # no patch: zeros
        n = max(lengths)
        pad_f, pad_c = torch.zeros(5, n, 16), torch.zeros(5, n, 2, dtype=torch.long)
        mask = torch.zeros(5, n, dtype=torch.bool)
        for i, (f, c) in enumerate(parts):
            pad_f[i, : len(f)], pad_c[i, : len(f)], mask[i, : len(f)] = f, c, True
        padded = enc(pad_f, mask, coords=pad_c, patch_size_level0=torch.tensor(sizes))
    torch.testing.assert_close(padded, got, rtol=1e-5, atol=1e-6)


def test_small_attention_blocks_give_the_same_result(monkeypatch):
    import tumorboard.models.titan as titan_module

    enc = tiny(7)
    f, c = random_slide(np.random.default_rng(7), 25)
    with torch.no_grad():
        whole = enc.forward_varlen(f, torch.tensor([0, 25]), coords=c, patch_size_level0=512)
        monkeypatch.setattr(titan_module, "_BLOCK_ELEMENTS", 12 * 26 * 3)  # 3 query rows
        blocked = enc.forward_varlen(f, torch.tensor([0, 25]), coords=c, patch_size_level0=512)
        monkeypatch.setattr(titan_module, "_DIST_ELEMENTS", 0)  # distances per block, per layer
        recomputed = enc.forward_varlen(f, torch.tensor([0, 25]), coords=c,
                                        patch_size_level0=512)  # fmt: skip
    torch.testing.assert_close(blocked, whole, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(recomputed, whole, rtol=1e-5, atol=1e-6)


def test_project_maps_into_the_vision_language_space():
    enc = tiny(8)
    z = torch.randn(3, 48)
    p = enc.project(z)
    torch.testing.assert_close(
        p, torch.nn.functional.normalize(z @ enc.vision_encoder.proj, dim=-1)
    )
    torch.testing.assert_close(p.norm(dim=-1), torch.ones(3))


def test_bad_inputs_name_what_was_expected():
    enc = tiny(9)
    f, c = torch.zeros(4, 16), torch.zeros(4, 2, dtype=torch.long)
    off = torch.tensor([0, 4])
    cases = [
        (dict(features=torch.zeros(4, 15), offsets=off, coords=c, patch_size_level0=512),
         r"features: expected a \[sum N_i, 16\] tensor"),
        (dict(features=f, offsets=off, coords=c[:3], patch_size_level0=512),
         r"coords: expected shape \[4, 2\]"),
        (dict(features=f, offsets=off, coords=c.float(), patch_size_level0=512),
         "coords: expected integer coordinates"),
        (dict(features=f, offsets=off, coords=c, patch_size_level0=0),
         "patch_size_level0: expected a positive int"),
        (dict(features=f, offsets=off, coords=c, patch_size_level0=[512, 512]),
         "patch_size_level0: expected one value or 1"),
    ]  # fmt: skip
    for kw, message in cases:
        with pytest.raises(InvalidArgumentError, match=message):
            enc.forward_varlen(**kw)
    with pytest.raises(InvalidArgumentError, match="n_heads: expected a divisor of width 48"):
        TitanSlideEncoder(16, width=48, n_heads=5)


# ---------------------------------------------------------------------------------------------
# end to end: embed_slides(slide_encoder="titan") on a generated slide
# ---------------------------------------------------------------------------------------------


def test_embed_slides_titan_end_to_end(tmp_path, monkeypatch):
    """The whole path with a tiny TITAN over the tiny UNI2-h twin's 48-d features.

    TITAN reads CONCH v1.5 features at 20x / 512 px; CONCH v1.5 at full size is too slow for a
    CPU test, so the registry row is pointed at ``uni2-tiny`` at 20x / 256 px for this test
    (everything else, the coordinates and ``patch_size_level0`` included, is the real path).
    """
    pytest.importorskip("h5py")
    pytest.importorskip("openslide")
    pytest.importorskip("tifffile")
    import dataclasses

    import h5py
    from test_slides_readers import write_test_slide
    from tumorboard.embed import EmbedOptions, embed_slides, read_features, read_slide_features
    from tumorboard.models import _slide_info
    from tumorboard.slides import TilingOptions

    slide = tmp_path / "case01.tif"
    write_test_slide(slide)
    row = dataclasses.replace(models.slide_encoder_info("titan"), patch_encoder="uni2-tiny",
                              trident_patch_encoder=None, patch_size=256, in_dim=None)  # fmt: skip
    monkeypatch.setitem(_slide_info._table()[1], "titan", row)
    enc = tiny(10, in_dim=48)
    weights = save_state_dict(enc, tmp_path / "titan.safetensors")
    out = tmp_path / "job"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny patch encoder's random weights
        rep = embed_slides(slide, out=out, slide_encoder="titan", slide_weights=weights,
                           random_weights=True, tiling=TilingOptions(segmentation=None, threads=1),
                           options=EmbedOptions(batch_size=16), progress=False)  # fmt: skip
    (res,) = rep.results
    assert res.status == "done", res.error
    job = out / "20x_256px_0px_overlap"
    feats, coords, _ = read_features(next((job).glob("features_uni2-tiny*/case01.h5")))
    with h5py.File(res.features_path, "r") as f:
        vec = f["features"][...]
        size0 = int(f["coords"].attrs["patch_size_level0"])
        assert f["features"].attrs["n_patches"] == len(coords) == 48
        assert np.array_equal(f["coords"][...], coords)
    assert size0 == 256 and vec.shape == (48,)
    with torch.no_grad():
        want = reference(enc, torch.from_numpy(feats), torch.from_numpy(coords), size0)
    np.testing.assert_allclose(vec, want.numpy(), rtol=1e-4, atol=1e-5)
    got = read_slide_features(job, res.features_path.parent.name.removeprefix("slide_features_"))
    np.testing.assert_array_equal(got.features[0], vec)
