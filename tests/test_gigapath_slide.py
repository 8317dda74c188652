"""Prov-GigaPath's slide encoder (tumorboard.models.gigapath_slide) and `--slide-encoder gigapath`.

Oracles: the key table of ``slide_encoder.pth`` (prov-gigapath/prov-gigapath
``gigapath/slide_encoder.py`` with torchscale's LongNet encoder, ``subln``: 12 layers, width 768,
FFN 3072, input 1536) written out key by key, and the parameter counts the demo notebook prints
(86,330,880, of which LongNet 85,148,160); the segment lengths it prints; a dilated attention
written here with explicit loops over (output row, head, key) from the definition (segments,
per-head dilation offsets, zero padding counted as keys, the log-sum-exp combination); full
softmax attention; the gather of a tiny example written out by hand; a 2-D sin-cos table built
with numpy's meshgrid as the reference builds it; a dense one-slide forward written here;
one-slide-at-a-time calls against one varlen call; the slide features written by
``embed_slides`` read back with h5py.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tumorboard import models  # noqa: E402
from tumorboard.errors import InvalidArgumentError  # noqa: E402
from tumorboard.models import CheckpointKeyError  # noqa: E402
from tumorboard.models.gigapath_slide import (  # noqa: E402
    GIGAPATH_TINY,
    GigaPathSlideEncoder,
    dilated_attention,
    dilated_gather,
    gigapath,
    gigapath_position_embedding,
)
from tumorboard.models.slide_encoder import load_slide_encoder  # noqa: E402


def tiny(seed=0, **over):
    torch.manual_seed(seed)
    config = {**GIGAPATH_TINY, "grid_size": 50, **over}
    enc = GigaPathSlideEncoder(config.pop("in_dim"), **config).eval()
    with torch.no_grad():  # LayerNorms start at 1/0 and the class token at 0: make them matter
        for name, p in enc.named_parameters():
            if "norm" in name or "_ln" in name or "cls_token" in name:
                p.add_(0.3 * torch.randn_like(p))
    return enc


def gigapath_table(width=768, depth=12, f=1536, hidden=3072):
    t = {"patch_embed.proj.weight": (width, f), "patch_embed.proj.bias": (width,),
         "cls_token": (1, 1, width), "norm.weight": (width,), "norm.bias": (width,),
         "encoder.layer_norm.weight": (width,), "encoder.layer_norm.bias": (width,)}  # fmt: skip
    for i in range(depth):
        b = f"encoder.layers.{i}."
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            t |= {f"{b}self_attn.{proj}.weight": (width, width),
                  f"{b}self_attn.{proj}.bias": (width,)}  # fmt: skip
        t |= {f"{b}self_attn.inner_attn_ln.weight": (width,),
              f"{b}self_attn.inner_attn_ln.bias": (width,),
              f"{b}self_attn_layer_norm.weight": (width,),
              f"{b}self_attn_layer_norm.bias": (width,),
              f"{b}ffn.fc1.weight": (hidden, width), f"{b}ffn.fc1.bias": (hidden,),
              f"{b}ffn.ffn_layernorm.weight": (hidden,), f"{b}ffn.ffn_layernorm.bias": (hidden,),
              f"{b}ffn.fc2.weight": (width, hidden), f"{b}ffn.fc2.bias": (width,),
              f"{b}final_layer_norm.weight": (width,),
              f"{b}final_layer_norm.bias": (width,)}  # fmt: skip
    return t


# ---------------------------------------------------------------------------------------------
# keys, loading, registry
# ---------------------------------------------------------------------------------------------


def test_key_set_at_full_size_on_meta():
    with torch.device("meta"):
        enc = gigapath()
    got = {k: tuple(v.shape) for k, v in enc.state_dict().items()}
    assert got == gigapath_table()
    assert (enc.in_dim, enc.embed_dim, enc.n_heads, enc.layer) == (1536, 768, 16, 11)
    assert enc.segment_lengths == (1024, 5792, 32768, 185363, 1048576)
    assert enc.dilated_ratios == (1, 2, 4, 8, 16)
    # the counts the reference prints when it builds gigapath_slide_enc12l768d
    assert sum(math.prod(s) for s in got.values()) == 86_330_880
    assert sum(p.numel() for p in enc.encoder.parameters()) == 85_148_160
    # get_optimal_segment_length(262144, 256): int(2 ** linspace(log2 1024, log2 1024**2, 5))
    assert list(enc.segment_lengths) == [int(2**e) for e in np.linspace(10, 20, 5)]


def test_registry_row_is_built_with_coordinates():
    row = models.slide_encoder_info("gigapath")
    assert row.status == "built" and row.reason is None and row.uses_coords
    assert (row.trident_patch_encoder, row.magnification, row.patch_size) == ("gigapath", 20, 256)
    assert (row.in_dim, row.embed_dim, row.precision) == (1536, 768, "fp16")
    assert "slide_encoder.pth" in row.weights_source


def test_checkpoint_loads_strictly_from_the_model_dict(tmp_path):
    enc = tiny(1, grid_size=1000)
    state = dict(enc.state_dict())
    path = tmp_path / "slide_encoder.pth"
    torch.save({"model": state}, path)  # the published file's layout
    got = load_slide_encoder("gigapath", weights=path)
    assert isinstance(got, GigaPathSlideEncoder) and not got.training
    assert (got.in_dim, got.embed_dim, len(got.encoder.layers)) == (16, 64, 3)
    assert got.layer == 3  # layer 11, or the last of a checkpoint with fewer
    for k, v in state.items():
        assert torch.equal(got.state_dict()[k], v), k

    gone = "encoder.layers.1.self_attn.inner_attn_ln.bias"
    broken = {k: v for k, v in state.items() if k != gone}
    broken["decoder_embed.weight"] = torch.zeros(3, 3)
    torch.save({"model": broken}, tmp_path / "broken.pth")
    with pytest.raises(CheckpointKeyError) as err:
        load_slide_encoder("gigapath", weights=tmp_path / "broken.pth")
    assert "encoder.layers.1.self_attn.inner_attn_ln.bias" in str(err.value)
    assert "decoder_embed.weight" in str(err.value)
    bad = dict(state)
    bad["encoder.layers.0.ffn.ffn_layernorm.weight"] = torch.zeros(7)
    torch.save(bad, tmp_path / "shape.pth")
    with pytest.raises(CheckpointKeyError, match=r"ffn_layernorm.weight.*\[7\]"):
        load_slide_encoder("gigapath", weights=tmp_path / "shape.pth")


def test_random_weights_warn_and_are_the_published_size():
    with pytest.warns(models.RandomWeightsWarning, match="gigapath"):
        enc = load_slide_encoder("gigapath", seed=2)
    assert (enc.in_dim, enc.embed_dim, len(enc.encoder.layers)) == (1536, 768, 12)


# ---------------------------------------------------------------------------------------------
# dilated attention against references written here
# ---------------------------------------------------------------------------------------------


def test_gather_of_a_tiny_example_by_hand():
    # 10 tokens, 4 heads; token t of head h holds 100 h + t
    x = (torch.arange(10.0)[:, None] + 100 * torch.arange(4.0)[None])[..., None]
    got = dilated_gather(x, 4, 2)[..., 0]  # segments of 4 (the last padded), dilation 2
    # heads 0, 1 keep offset 0 of each segment, heads 2, 3 offset 1; padding is 0
    want = [[[0, 2], [100, 102], [201, 203], [301, 303]],
            [[4, 6], [104, 106], [205, 207], [305, 307]],
            [[8, 0], [108, 0], [209, 0], [309, 0]]]  # fmt: skip
    assert got.tolist() == want
    # 3 heads and dilation 2: the heads are padded to 4 (groups of 2), head 2 gets offset 1
    got3 = dilated_gather(x[:5, :3], 8, 2)[..., 0]  # one segment of 5, padded to 6
    assert got3.tolist() == [[[0, 2, 4], [100, 102, 104], [201, 203, 0]]]
    assert dilated_gather(x, 16, 1)[..., 0].tolist() == [x[:, :, 0].T.tolist()]


def full_attention(q, k, v):
    w = torch.softmax(torch.einsum("lhd,mhd->hlm", q, k) / math.sqrt(q.shape[-1]), dim=-1)
    return torch.einsum("hlm,mhd->lhd", w, v)


def brute_dilated(q, k, v, segs, ratios):
    """Dilated attention with explicit loops, from the definition (float64)."""
    q, k, v = (t.double() for t in (q, k, v))
    length, heads, d = q.shape
    zero = torch.zeros(d, dtype=torch.float64)
    outs, lses = [], []
    for w, r in zip(segs, ratios, strict=True):
        g = min(w, length)
        gp = -(-g // r) * r
        group = (-(-heads // r) * r) // r
        o = torch.zeros(length, heads, d, dtype=torch.float64)
        s = torch.full((length, heads), -1e8, dtype=torch.float64)
        for t in range(length):  # the output row, in the padded-segment layout
            seg, within = divmod(t, gp)
            for h in range(heads):
                off = h // group
                if within % r != off:
                    continue
                qp = seg * g + within
                qv = q[qp, h] if within < g and qp < length else zero
                ks, vs = [], []
                for j in range(gp // r):
                    kp = seg * g + off + j * r
                    real = off + j * r < g and kp < length
                    ks.append(k[kp, h] if real else zero)
                    vs.append(v[kp, h] if real else zero)
                logits = torch.stack(ks) @ qv / math.sqrt(d)
                lse = torch.logsumexp(logits, 0)
                o[t, h] = torch.softmax(logits, 0) @ torch.stack(vs)
                s[t, h] = lse if lse != 0 else -1e8
        outs.append(o)
        lses.append(s)
    weights = torch.softmax(torch.stack(lses), dim=0)
    return sum(wt[..., None] * o for wt, o in zip(weights, outs, strict=True)).float()


def test_short_sequence_with_dilation_one_is_full_attention():
    torch.manual_seed(0)
    q, k, v = (torch.randn(9, 4, 8) for _ in range(3))
    got = dilated_attention(q, k, v, [16], [1])
    torch.testing.assert_close(got, full_attention(q, k, v), rtol=1e-5, atol=1e-6)
    # two branches with dilation 1 and segments longer than the sequence see the same keys:
    # their equal lse give each weight 1/2, so the result is still full attention
    got2 = dilated_attention(q, k, v, [16, 32], [1, 1])
    torch.testing.assert_close(got2, full_attention(q, k, v), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("length", "heads", "segs", "ratios"),
    [
        (13, 4, (4, 8, 16), (1, 2, 4)),  # several segments, padded segment and dilation
        (13, 16, (1024, 5792, 32768, 185363, 1048576), (1, 2, 4, 8, 16)),  # the published
        (11, 3, (6, 16), (1, 2)),  # heads not a multiple of the ratio
        (20, 4, (5, 7), (2, 4)),  # segments not a multiple of the ratio, several of them
    ],
)
def test_dilated_attention_matches_the_loop_reference(length, heads, segs, ratios):
    torch.manual_seed(length + heads)
    q, k, v = (torch.randn(length, heads, 4) for _ in range(3))
    got = dilated_attention(q, k, v, segs, ratios)
    torch.testing.assert_close(got, brute_dilated(q, k, v, segs, ratios), rtol=1e-5, atol=1e-5)


def test_blockwise_torch_path_equals_the_fused_cpu_kernel(monkeypatch):
    import tumorboard.models.gigapath_slide as module

    torch.manual_seed(1)
    q, k, v = (torch.randn(30, 4, 4) for _ in range(3))
    fused = dilated_attention(q, k, v, (8, 16), (1, 2))
    monkeypatch.setattr(module, "_FUSED_CPU", False)
    whole = dilated_attention(q, k, v, (8, 16), (1, 2))
    monkeypatch.setattr(module, "_BLOCK_ELEMENTS", 20)  # blocks of query rows and of batch
    blocked = dilated_attention(q, k, v, (8, 16), (1, 2))
    torch.testing.assert_close(whole, fused, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(blocked, whole, rtol=1e-6, atol=1e-6)
    want = brute_dilated(q, k, v, (8, 16), (1, 2))
    torch.testing.assert_close(blocked, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# position embedding and the forward against a dense reference
# ---------------------------------------------------------------------------------------------


def sincos_table(width, grid, rows=None):
    """Build the table as the reference does: numpy meshgrid (w first), float64, cls row 0.

    ``rows`` keeps only the first rows of the grid (the table's first ``rows * grid`` entries).
    """
    gw, gh = np.meshgrid(np.arange(grid, dtype=np.float32),
                         np.arange(rows or grid, dtype=np.float32))  # fmt: skip

    def one(dim, pos):
        omega = 1.0 / 10000 ** (np.arange(dim // 2, dtype=float) / (dim / 2.0))
        out = np.einsum("m,d->md", pos.reshape(-1), omega)
        return np.concatenate([np.sin(out), np.cos(out)], axis=1)

    emb = np.concatenate([one(width // 2, gw), one(width // 2, gh)], axis=1)
    return np.concatenate([np.zeros((1, width)), emb]).astype(np.float32)


def test_position_embedding_rows_of_the_table():
    table = sincos_table(16, 7)
    p = torch.tensor([0, 1, 6, 7, 20, 48])
    got = gigapath_position_embedding(p, 16, 7).numpy()
    np.testing.assert_allclose(got, table[p.numpy() + 1], rtol=1e-6, atol=1e-6)
    # first half: e(g_y), second half: e(g_x); for width 16, e(t) = [sin(t w_k), cos(t w_k)]
    # with w_k = 10000^(-k/4), k = 0..3
    row = gigapath_position_embedding(torch.tensor([3 * 7 + 5]), 16, 7)[0].tolist()
    for t, half in ((5, row[:8]), (3, row[8:])):
        want = [math.sin(t * 10000 ** (-k / 4)) for k in range(4)]
        want += [math.cos(t * 10000 ** (-k / 4)) for k in range(4)]
        assert half == pytest.approx(want, rel=1e-6, abs=1e-7)


def reference(enc, feats, coords, size):
    """One slide the way LongNetViT + TRIDENT run it, written densely here."""
    g = torch.floor(coords.float() / size)
    table = torch.from_numpy(sincos_table(enc.embed_dim, enc.grid_size, int(g[:, 0].max()) + 1))
    pos = (g[:, 0] * enc.grid_size + g[:, 1]).long() + 1
    x = enc.patch_embed.proj(feats) + table[pos]
    x = torch.cat((enc.cls_token[0] + table[:1], x))
    heads = enc.n_heads
    hd = enc.embed_dim // heads
    states = [x]
    for layer in enc.encoder.layers:
        sa = layer.self_attn
        h = layer.self_attn_layer_norm(x)
        q, k, v = (p(h).reshape(-1, heads, hd) for p in (sa.q_proj, sa.k_proj, sa.v_proj))
        a = brute_dilated(q, k, v, enc.segment_lengths, enc.dilated_ratios).reshape(len(x), -1)
        x = x + sa.out_proj(sa.inner_attn_ln(a))
        f = layer.ffn
        x = x + f.fc2(f.ffn_layernorm(torch.nn.functional.gelu(f.fc1(layer.final_layer_norm(x)))))
        states.append(x)
    return enc.norm(states[enc.layer][1:].mean(0))


def random_slide(rng, n, f=16, side=7, size=256, origin=(3, 5)):
    cells = rng.choice(side * side, size=n, replace=False)
    xy = np.stack([cells // side + origin[0], cells % side + origin[1]], 1) * size
    coords = xy + rng.integers(0, size // 2, (n, 2))  # inside the tile: same grid cell
    feats = rng.standard_normal((n, f)).astype(np.float32)
    return torch.from_numpy(feats), torch.from_numpy(coords.astype(np.int64))


def test_forward_matches_the_dense_reference():
    enc = tiny(3)
    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 19):
        f, c = random_slide(rng, n)
        with torch.no_grad():
            got = enc.forward_varlen(f, torch.tensor([0, n]), coords=c, patch_size_level0=256)
            want = reference(enc, f, c, 256)
        torch.testing.assert_close(got[0], want, rtol=1e-4, atol=1e-4)


def test_the_embedding_is_layer_11s_mean_over_tiles():
    enc = tiny(4)
    f, c = random_slide(np.random.default_rng(4), 9)
    off = torch.tensor([0, 9])
    with torch.no_grad():
        base = enc.forward_varlen(f, off, coords=c, patch_size_level0=256)
        # layers after `layer` and the encoder's final norm do not enter it
        for p in (*enc.encoder.layers[2].parameters(), *enc.encoder.layer_norm.parameters()):
            p.mul_(3.0).add_(1.0)
        assert torch.equal(enc.forward_varlen(f, off, coords=c, patch_size_level0=256), base)
        enc.layer = 3
        assert not torch.allclose(enc.forward_varlen(f, off, coords=c, patch_size_level0=256),
                                  base, atol=1e-4)  # fmt: skip


def test_coordinates_change_the_output():
    enc = tiny(5)
    rng = np.random.default_rng(5)
    f, c = random_slide(rng, 12)
    off = torch.tensor([0, 12])

    def run(coords, size=256):
        with torch.no_grad():
            return enc.forward_varlen(f, off, coords=coords, patch_size_level0=size)

    base = run(c)
    # within the same tile: the same grid cell, the same output
    assert torch.equal(run(c - c % 256 + 17), base)
    assert torch.equal(run(c * 2, 512), base)  # a 40x slide: twice the level-0 unit
    swapped = c.clone()
    swapped[[0, 1]] = c[[1, 0]]
    assert not torch.allclose(run(swapped), base, atol=1e-4)  # positions matter
    assert not torch.allclose(run(c + 256 * 3), base, atol=1e-4)  # absolute, not relative
    # the tile order matters too (segments and dilation pick positions by index) ...
    perm = torch.from_numpy(rng.permutation(12))
    with torch.no_grad():
        moved = enc.forward_varlen(f[perm], off, coords=c[perm], patch_size_level0=256)
    assert not torch.allclose(moved, base, atol=1e-4)
    # ... but not with one branch of dilation 1 and segments longer than the slide
    dense = tiny(5, segment_lengths=(64,), dilated_ratios=(1,))
    with torch.no_grad():
        a = dense.forward_varlen(f, off, coords=c, patch_size_level0=256)
        b = dense.forward_varlen(f[perm], off, coords=c[perm], patch_size_level0=256)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_varlen_batch_equals_one_slide_at_a_time_and_padded():
    enc = tiny(6)
    rng = np.random.default_rng(6)
    lengths, sizes = [5, 0, 17, 1, 9], [256, 256, 512, 128, 256]
    parts = [random_slide(rng, n, size=s) for n, s in zip(lengths, sizes, strict=True)]
    feats = torch.cat([p[0] for p in parts])
    coords = torch.cat([p[1] for p in parts])
    offsets = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]))
    with torch.no_grad():
        got = enc.forward_varlen(feats, offsets, coords=coords, patch_size_level0=sizes)
        for i, (f, c) in enumerate(parts):
            one = enc.forward_varlen(f, torch.tensor([0, len(f)]), coords=c,
                                     patch_size_level0=sizes[i])  # fmt: skip
            torch.testing.assert_close(got[i], one[0], rtol=1e-5, atol=1e-5)
        assert torch.equal(got[1], torch.zeros(64))  # no tile: zeros
        n = max(lengths)
        pad_f, pad_c = torch.zeros(5, n, 16), torch.zeros(5, n, 2, dtype=torch.long)
        mask = torch.zeros(5, n, dtype=torch.bool)
        for i, (f, c) in enumerate(parts):
            pad_f[i, : len(f)], pad_c[i, : len(f)], mask[i, : len(f)] = f, c, True
        padded = enc(pad_f, mask, coords=pad_c, patch_size_level0=torch.tensor(sizes))
    torch.testing.assert_close(padded, got, rtol=1e-5, atol=1e-5)


def test_bad_inputs_name_what_was_expected():
    enc = tiny(9)
    f, c = torch.zeros(4, 16), torch.zeros(4, 2, dtype=torch.long)
    off = torch.tensor([0, 4])
    cases = [
        (dict(features=torch.zeros(4, 15), offsets=off, coords=c, patch_size_level0=256),
         r"features: expected a \[sum N_i, 16\] tensor"),
        (dict(features=f, offsets=off, coords=c[:3], patch_size_level0=256),
         r"coords: expected shape \[4, 2\]"),
        (dict(features=f, offsets=off, coords=c.float(), patch_size_level0=256),
         "coords: expected integer coordinates"),
        (dict(features=f, offsets=off, coords=c + 256 * 50, patch_size_level0=256),
         r"coords: expected tiles on Prov-GigaPath's 50 x 50 grid"),
        (dict(features=f, offsets=off, coords=c - 1, patch_size_level0=256),
         "negative coordinates"),
        (dict(features=f, offsets=off, coords=c, patch_size_level0=[256, 256]),
         "patch_size_level0: expected one value or 1"),
        (dict(features=f, offsets=off, coords=c, patch_size_level0=0),
         "patch_size_level0: expected positive ints"),
    ]  # fmt: skip
    for kw, message in cases:
        with pytest.raises(InvalidArgumentError, match=message):
            enc.forward_varlen(**kw)
    with pytest.raises(InvalidArgumentError, match="layer: expected at most depth"):
        GigaPathSlideEncoder(16, width=64, depth=3, layer=4)
    with pytest.raises(InvalidArgumentError, match="segment_lengths, dilated_ratios"):
        GigaPathSlideEncoder(16, width=64, segment_lengths=(4, 8), dilated_ratios=(1,))
    q = torch.zeros(5, 2, 4)
    with pytest.raises(InvalidArgumentError, match=r"q, k, v: expected three \[L, H, d\]"):
        dilated_attention(q, q, q[:4], [8], [1])
    with pytest.raises(InvalidArgumentError, match="segment_lengths, dilated_ratios"):
        dilated_attention(q, q, q, [8], [0])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_blockwise_path_equals_the_cpu_at_full_size():
    """The published configuration on 2,000 tiles (branch 1 cuts them into two segments)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", models.RandomWeightsWarning)
        enc = load_slide_encoder("gigapath", seed=3)
    f, c = random_slide(np.random.default_rng(3), 2000, f=1536, side=60)
    off = torch.tensor([0, 1200, 2000])
    with torch.inference_mode():
        cpu = enc.forward_varlen(f, off, coords=c, patch_size_level0=256)
        gpu = enc.cuda().forward_varlen(f.cuda(), off.cuda(), coords=c.cuda(),
                                        patch_size_level0=256)  # fmt: skip
    torch.testing.assert_close(gpu.cpu(), cpu, rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------------------------------------
# end to end: embed_slides(slide_encoder="gigapath") on a generated slide
# ---------------------------------------------------------------------------------------------


def test_cli_embed_slide_encoder_gigapath_end_to_end(tmp_path, monkeypatch, capsys):
    """``tumorboard embed --slide-encoder gigapath`` with a tiny Prov-GigaPath checkpoint.

    gigapath reads Prov-GigaPath tile features at 20x / 256 px; that tile encoder at full size
    is too slow for a CPU test, so the registry row is pointed at the tiny UNI2-h twin's 48-d
    features (everything else, the coordinates and ``patch_size_level0`` included, is the real
    path; the command runs in this process so that the row change applies).
    """
    pytest.importorskip("h5py")
    pytest.importorskip("openslide")
    pytest.importorskip("tifffile")
    import dataclasses

    import h5py
    import pyarrow.parquet as pq
    from test_slides_readers import write_test_slide
    from tumorboard.cli import main
    from tumorboard.embed import read_features, read_slide_features
    from tumorboard.models import _slide_info

    slide = tmp_path / "case01.tif"
    write_test_slide(slide)
    row = dataclasses.replace(models.slide_encoder_info("gigapath"), patch_encoder="uni2-tiny",
                              trident_patch_encoder=None, in_dim=None)  # fmt: skip
    monkeypatch.setitem(_slide_info._table()[1], "gigapath", row)
    weights = tmp_path / "slide_encoder.pth"
    torch.save({"model": tiny(10, in_dim=48, grid_size=1000).state_dict()}, weights)
    out = tmp_path / "job"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny patch encoder's random weights
        rc = main(["embed", str(slide), "--out", str(out), "--slide-encoder", "gigapath",
                   "--slide-weights", str(weights), "--random-weights", "--no-seg",
                   "--threads", "1", "--batch-size", "16", "--quiet"])  # fmt: skip
    printed = capsys.readouterr()
    assert rc == 0, printed.err
    assert "slide embeddings: 1 done" in printed.out
    job = out / "20x_256px_0px_overlap"
    (folder,) = [p for p in job.glob("slide_features_gigapath*") if p.is_dir()]
    feats, coords, _ = read_features(next(job.glob("features_uni2-tiny*/case01.h5")))
    with h5py.File(folder / "case01.h5", "r") as f:
        vec = f["features"][...]
        size0 = int(f["coords"].attrs["patch_size_level0"])
        assert f["features"].attrs["n_patches"] == len(coords) == 48
        assert f["features"].attrs["weights_fingerprint"].startswith("sha256:")
        assert np.array_equal(f["coords"][...], coords)
    assert size0 == 256 and vec.shape == (64,)
    loaded = load_slide_encoder("gigapath", weights=weights)  # the published branches, layer 3
    assert loaded.segment_lengths[0] == 1024 and loaded.layer == 3
    with torch.no_grad():
        want = reference(loaded, torch.from_numpy(feats), torch.from_numpy(coords), size0)
    np.testing.assert_allclose(vec, want.numpy(), rtol=1e-4, atol=1e-4)
    got = read_slide_features(job, folder.name.removeprefix("slide_features_"))
    np.testing.assert_array_equal(got.features[0], vec)
    table = pq.read_table(job / f"{folder.name}.parquet")
    assert table.column("slide").to_pylist() == ["case01"]
    np.testing.assert_array_equal(np.asarray(table.column("embedding")[0].as_py()), vec)
