"""ResNet-50 trunk and CTransPath (Swin-T + conv stem) in plain torch (models.resnet, models.swin).

Oracles, none of them the code under test:

* key/shape tables written here from the published layouts: timm/torchvision ResNet-50
  (``timm/models/resnet.py``; He et al. 2016, Table 1: 3, 4, 6 bottlenecks of width 64, 128,
  256) and timm 0.5 ``swin_tiny_patch4_window7_224`` with TransPath's ``ConvStem``
  (Xiyue-Wang/TransPath ``ctran.py``); the five ``attn_mask`` keys are the list TRIDENT asserts
  for the CTransPath checkpoint (mahmoodlab/TRIDENT ``trident/patch_encoder_models/load.py``
  @a91fa84);
* parameter counts from published totals: torchvision ResNet-50 25,557,032 minus ``layer4``
  (14,964,736) and ``fc`` (2,049,000) = 8,543,296; torchvision/timm Swin-T 28,288,354 minus the
  head (768 * 1000 + 1000) = 27,519,354, plus the conv stem (5,388) minus the 4x4 patch
  convolution (4,704) = 27,520,038;
* numerics by hand: a bottleneck from ``torch.nn.functional`` calls, window partition by
  explicit indexing, the shifted-window mask from region labels read off a 4x4 grid, the
  relative position index for a 2x2 window written out, window attention with an explicit
  softmax, the patch-merging order on a labelled grid.
"""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from tumorboard import models  # noqa: E402
from tumorboard.errors import InvalidArgumentError  # noqa: E402
from tumorboard.models.resnet import Bottleneck  # noqa: E402
from tumorboard.models.swin import (  # noqa: E402
    CTRANSPATH,
    PatchMerging,
    SwinTransformer,
    WindowAttention,
    relative_position_index,
    shifted_window_mask,
    window_partition,
    window_reverse,
)
from tumorboard.models.weights import CheckpointKeyError  # noqa: E402


def shapes(module):
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


def bn(t, prefix, n):
    for s in ("weight", "bias", "running_mean", "running_var"):
        t[f"{prefix}.{s}"] = (n,)
    t[f"{prefix}.num_batches_tracked"] = ()


def resnet50_trunk_table():
    t = {"conv1.weight": (64, 3, 7, 7)}
    bn(t, "bn1", 64)
    cin = 64
    for stage, (blocks, w) in enumerate(zip((3, 4, 6), (64, 128, 256), strict=True), start=1):
        for j in range(blocks):
            p = f"layer{stage}.{j}"
            t[f"{p}.conv1.weight"] = (w, cin if j == 0 else 4 * w, 1, 1)
            bn(t, f"{p}.bn1", w)
            t[f"{p}.conv2.weight"] = (w, w, 3, 3)
            bn(t, f"{p}.bn2", w)
            t[f"{p}.conv3.weight"] = (4 * w, w, 1, 1)
            bn(t, f"{p}.bn3", 4 * w)
            if j == 0:
                t[f"{p}.downsample.0.weight"] = (4 * w, cin, 1, 1)
                bn(t, f"{p}.downsample.1", 4 * w)
        cin = 4 * w
    return t


def ctranspath_table():
    t = {"patch_embed.proj.0.weight": (12, 3, 3, 3)}
    bn(t, "patch_embed.proj.1", 12)
    t["patch_embed.proj.3.weight"] = (24, 12, 3, 3)
    bn(t, "patch_embed.proj.4", 24)
    t["patch_embed.proj.6.weight"] = (96, 24, 1, 1)
    t["patch_embed.proj.6.bias"] = (96,)
    t["patch_embed.norm.weight"] = t["patch_embed.norm.bias"] = (96,)
    windows = (64, 16, 4, 1)  # (56/7)^2, (28/7)^2, (14/7)^2; the 7x7 stage is one window
    for s, (depth, heads) in enumerate(zip((2, 2, 6, 2), (3, 6, 12, 24), strict=True)):
        d = 96 * 2**s
        for j in range(depth):
            p = f"layers.{s}.blocks.{j}"
            t[f"{p}.norm1.weight"] = t[f"{p}.norm1.bias"] = (d,)
            t[f"{p}.attn.relative_position_bias_table"] = (169, heads)
            t[f"{p}.attn.relative_position_index"] = (49, 49)
            t[f"{p}.attn.qkv.weight"] = (3 * d, d)
            t[f"{p}.attn.qkv.bias"] = (3 * d,)
            t[f"{p}.attn.proj.weight"] = (d, d)
            t[f"{p}.attn.proj.bias"] = (d,)
            t[f"{p}.norm2.weight"] = t[f"{p}.norm2.bias"] = (d,)
            t[f"{p}.mlp.fc1.weight"] = (4 * d, d)
            t[f"{p}.mlp.fc1.bias"] = (4 * d,)
            t[f"{p}.mlp.fc2.weight"] = (d, 4 * d)
            t[f"{p}.mlp.fc2.bias"] = (d,)
            if j % 2 and s < 3:
                t[f"{p}.attn_mask"] = (windows[s], 49, 49)
        if s < 3:
            t[f"layers.{s}.downsample.norm.weight"] = (4 * d,)
            t[f"layers.{s}.downsample.norm.bias"] = (4 * d,)
            t[f"layers.{s}.downsample.reduction.weight"] = (2 * d, 4 * d)
    t["norm.weight"] = t["norm.bias"] = (768,)
    return t


# --- layouts and sizes --------------------------------------------------------------------------


def test_resnet50_trunk_keys_shapes_and_size():
    with torch.device("meta"):
        m = models.build("resnet50")
    assert shapes(m) == resnet50_trunk_table()
    assert len(m.state_dict()) == 258
    assert sum(p.numel() for p in m.parameters()) == 25_557_032 - 14_964_736 - 2_049_000
    assert (m.embed_dim, m.image_size, m.interpolation) == (1024, 224, "bilinear")
    assert models.info("resnet50").trident_name == "resnet50"


def test_ctranspath_keys_shapes_and_size():
    with torch.device("meta"):
        m = models.build("ctranspath")
        plain = SwinTransformer(dataclasses.replace(CTRANSPATH, stem="patch"))
    assert shapes(m) == ctranspath_table()
    masks = sorted(k for k in m.state_dict() if k.endswith("attn_mask"))
    assert masks == [
        "layers.0.blocks.1.attn_mask",
        "layers.1.blocks.1.attn_mask",
        "layers.2.blocks.1.attn_mask",
        "layers.2.blocks.3.attn_mask",
        "layers.2.blocks.5.attn_mask",
    ]
    swin_t_without_head = 28_288_354 - (768 * 1000 + 1000)
    assert sum(p.numel() for p in plain.parameters()) == swin_t_without_head
    stem = 12 * 27 + 2 * 12 + 24 * 12 * 9 + 2 * 24 + 96 * 24 + 96
    assert sum(p.numel() for p in m.parameters()) == swin_t_without_head - (96 * 48 + 96) + stem
    assert sum(p.numel() for p in m.parameters()) == 27_520_038
    assert (m.embed_dim, m.image_size, m.interpolation) == (768, 224, "bilinear")


# --- hand-checked numerics ----------------------------------------------------------------------


def _randomise_bn(module, g):
    for m in module.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            n = m.num_features
            m.weight.data = torch.rand(n, generator=g) + 0.5
            m.bias.data = torch.randn(n, generator=g)
            m.running_mean = torch.randn(n, generator=g)
            m.running_var = torch.rand(n, generator=g) + 0.5


def test_bottleneck_matches_functional_composition():
    g = torch.Generator().manual_seed(0)
    block = Bottleneck(8, 4, stride=2, downsample=True).eval()
    _randomise_bn(block, g)
    x = torch.randn(2, 8, 9, 9, generator=g)

    def bnf(t, m):
        return F.batch_norm(t, m.running_mean, m.running_var, m.weight, m.bias, False, 0.0, 1e-5)

    y = F.relu(bnf(F.conv2d(x, block.conv1.weight), block.bn1))
    y = F.relu(bnf(F.conv2d(y, block.conv2.weight, stride=2, padding=1), block.bn2))
    y = bnf(F.conv2d(y, block.conv3.weight), block.bn3)
    short = bnf(F.conv2d(x, block.downsample[0].weight, stride=2), block.downsample[1])
    want = F.relu(y + short)
    with torch.no_grad():
        got = block(x)
    assert got.shape == (2, 16, 5, 5)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_window_partition_by_indexing_and_round_trip():
    x = torch.randn(2, 6, 9, 5)
    w = window_partition(x, 3)
    assert w.shape == (2 * 2 * 3, 3, 3, 5)
    # window k of image b covers rows 3*(k // 3) ... and columns 3*(k % 3) ... (row-major)
    for b in range(2):
        for k in range(6):
            r, c = 3 * (k // 3), 3 * (k % 3)
            assert torch.equal(w[b * 6 + k], x[b, r : r + 3, c : c + 3])
    assert torch.equal(window_reverse(w, 3, 6, 9), x)


def test_relative_position_index_window_2_by_hand():
    # tokens (0,0), (0,1), (1,0), (1,1); index = (dr + 1) * 3 + (dc + 1)
    want = torch.tensor([[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]])
    assert torch.equal(relative_position_index(2), want)
    idx3 = relative_position_index(3)
    assert idx3.shape == (9, 9) and idx3.dtype == torch.int64
    assert idx3.min() == 0 and idx3.max() == 24 and torch.all(idx3.diagonal() == 12)


def test_shifted_window_mask_4x4_window_2_shift_1_by_hand():
    # Region labels after the cyclic shift: row/column bands [0,2), [2,3), [3,4) -> 0, 1, 2;
    # label = 3 * row band + column band. Tokens per 2x2 window (row-major), read off the grid:
    labels = [[0, 0, 0, 0], [1, 2, 1, 2], [3, 3, 6, 6], [4, 5, 7, 8]]
    want = torch.tensor([[[0.0 if a == b else -100.0 for b in lab] for a in lab] for lab in labels])
    got = shifted_window_mask(4, 4, 2, 1)
    assert torch.equal(got, want)
    assert got.dtype == torch.float32


def test_window_attention_matches_explicit_softmax():
    g = torch.Generator().manual_seed(1)
    attn = WindowAttention(8, 2, 2)
    torch.nn.init.normal_(attn.relative_position_bias_table, generator=g)
    x = torch.randn(2 * 4, 4, 8, generator=g)  # 2 images x 4 windows of 2x2 tokens
    mask = shifted_window_mask(4, 4, 2, 1)
    with torch.no_grad():
        got = attn(x, mask)
        qkv = attn.qkv(x).reshape(8, 4, 3, 2, 4).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        table = attn.relative_position_bias_table
        idx = [[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]  # as above
        bias = torch.stack([table[torch.tensor(idx)][..., h] for h in range(2)])  # [2, 4, 4]
        logits = q @ k.transpose(-2, -1) / 2.0 + bias  # head_dim 4: scale 1/2
        logits = logits + mask.repeat(2, 1, 1)[:, None]  # window w of image b is row b*4+w
        out = (logits.softmax(-1) @ v).transpose(1, 2).reshape(8, 4, 8)
        want = attn.proj(out)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_patch_merging_concatenation_order():
    merge = PatchMerging(1)
    seen = []
    merge.norm.register_forward_pre_hook(lambda mod, args: seen.append(args[0]))
    grid = torch.tensor([[10.0 * r + c for c in range(4)] for r in range(4)])
    merge(grid[None, :, :, None])
    # 2x2 neighbourhood (row, col): [x(0,0), x(1,0), x(0,1), x(1,1)]
    assert seen[0][0, 0, 0].tolist() == [0.0, 10.0, 1.0, 11.0]
    assert seen[0][0, 1, 1].tolist() == [22.0, 32.0, 23.0, 33.0]


# --- loading ------------------------------------------------------------------------------------


def random_state(name, seed):
    """Make a state dict with the model's keys, shapes and dtypes, random values (no init)."""
    g = torch.Generator().manual_seed(seed)
    with torch.device("meta"):
        m = models.build(name)
    return {
        k: torch.randn(v.shape, generator=g).to(v.dtype)
        if v.dtype.is_floating_point
        else torch.randint(0, 49, v.shape, generator=g, dtype=v.dtype)
        for k, v in m.state_dict().items()
    }


@pytest.mark.parametrize("name", ["resnet50", "ctranspath"])
def test_random_state_dict_round_trips_bit_identically(name, tmp_path):
    state = random_state(name, 3)
    torch.save(state, tmp_path / f"{name}.pt")
    loaded = models.load(name, weights=tmp_path / f"{name}.pt", device="cpu")
    got = loaded.state_dict()
    assert list(got) == list(state)
    for key, value in state.items():
        assert got[key].dtype == value.dtype and torch.equal(got[key], value), key


@pytest.mark.parametrize("name", ["resnet50", "ctranspath"])
def test_renamed_key_is_refused_readably(name, tmp_path):
    with torch.device("meta"):
        m = models.build(name)
    state = {k: torch.zeros(v.shape, dtype=v.dtype) for k, v in m.state_dict().items()}
    old = "layer2.0.conv2.weight" if name == "resnet50" else "layers.1.blocks.0.attn.qkv.weight"
    new = old.replace("conv2", "conv_2").replace("qkv", "q_k_v")
    state[new] = state.pop(old)
    path = tmp_path / "renamed.pt"
    torch.save(state, path)
    with pytest.raises(CheckpointKeyError) as err:
        models.load(name, weights=path, device="cpu")
    assert set(err.value.missing) == {old} and set(err.value.unexpected) == {new}
    assert old in str(err.value) and new in str(err.value)


def test_resnet50_takes_a_full_imagenet_checkpoint(tmp_path):
    """layer4 and fc are dropped; a missing BN counter (pre-0.4.1 files) becomes 0."""
    trunk = random_state("resnet50", 5)
    state = dict(trunk)
    state["layer4.0.conv1.weight"] = torch.zeros(512, 1024, 1, 1)
    state["fc.weight"], state["fc.bias"] = torch.zeros(1000, 2048), torch.zeros(1000)
    del state["bn1.num_batches_tracked"]
    torch.save(state, tmp_path / "full.pt")
    loaded = models.load("resnet50", weights=tmp_path / "full.pt", device="cpu").state_dict()
    assert list(loaded) == list(trunk) and loaded["bn1.num_batches_tracked"].item() == 0
    for key, value in trunk.items():
        if key != "bn1.num_batches_tracked":
            assert torch.equal(loaded[key], value), key


def test_ctranspath_refuses_other_input_sizes():
    with torch.device("meta"):
        m = models.build("ctranspath")
        with pytest.raises(InvalidArgumentError, match=r"\[B, 3, 224, 224\]"):
            m(torch.zeros(1, 3, 256, 256))
