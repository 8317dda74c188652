"""MADELEINE's slide encoder (tumorboard.models.madeleine) and ``embed --slide-encoder madeleine``.

Oracles: the key table of mahmoodlab/MADELEINE ``madeleine/models/Model.py`` (``MADELEINE`` with
``wsi_encoder="abmil"``, no stain encoding; ``ABMILEmbedder.pre_attn`` of three Linear /
LayerNorm / GELU / Dropout blocks 512 -> 512 -> 512 -> 2048, four ``BatchedABMIL`` heads of
width 512, ``token_projector`` 2048 -> 128, ``projector`` 2048 -> 512) written out key by key,
and its parameter count; a numpy reference written here from the formulas (LayerNorm, exact
GELU, einops' interleaved ``(e c)`` head split as strided columns, tanh x sigmoid gates,
softmax over the slide, the weighted sums flattened ``e*K + k``, the projector); permutations
of the patches; one-slide-at-a-time calls against one varlen call; the files the command line
writes read back with h5py and pyarrow.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from math import erf, sqrt

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tumorboard import models  # noqa: E402
from tumorboard.errors import InvalidArgumentError  # noqa: E402
from tumorboard.models import CheckpointKeyError, save_state_dict  # noqa: E402
from tumorboard.models.madeleine import (  # noqa: E402
    MADELEINE_TINY,
    MadeleineSlideEncoder,
    madeleine,
)
from tumorboard.models.slide_encoder import load_slide_encoder  # noqa: E402


def madeleine_table(f=512, h=512, k=4, a=512, t=128):
    p = "wsi_embedders."
    table = {}
    for i, (n_in, n_out) in zip((0, 4, 8), ((f, h), (h, h), (h, h * k)), strict=True):
        table |= {f"{p}pre_attn.{i}.weight": (n_out, n_in), f"{p}pre_attn.{i}.bias": (n_out,),
                  f"{p}pre_attn.{i + 1}.weight": (n_out,),
                  f"{p}pre_attn.{i + 1}.bias": (n_out,)}  # fmt: skip
    for j in range(k):
        q = f"{p}attn.{j}."
        table |= {f"{q}attention_a.0.weight": (a, h), f"{q}attention_a.0.bias": (a,),
                  f"{q}attention_b.0.weight": (a, h), f"{q}attention_b.0.bias": (a,),
                  f"{q}attention_c.weight": (1, a), f"{q}attention_c.bias": (1,)}  # fmt: skip
    table |= {"token_projector.weight": (t, h * k), "token_projector.bias": (t,),
              "projector.weight": (h, h * k), "projector.bias": (h,)}  # fmt: skip
    return table


def tiny(seed=0):
    torch.manual_seed(seed)
    config = dict(MADELEINE_TINY)
    enc = MadeleineSlideEncoder(config.pop("in_dim"), **config).eval()
    with torch.no_grad():  # the LayerNorms start at 1/0: make them matter
        for name, p in enc.named_parameters():
            if "pre_attn.1." in name or "pre_attn.5." in name or "pre_attn.9." in name:
                p.add_(0.3 * torch.randn_like(p))
    return enc


def slides(rng, lengths, f):
    xs = [rng.standard_normal((n, f)).astype(np.float32) for n in lengths]
    off = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.long)
    return xs, torch.from_numpy(np.concatenate(xs)), off


def reference(enc, x):
    """MADELEINE's ``encode_he`` of one slide ``x [N, F]`` in float64 numpy, and the weights."""
    p = {k: v.double().numpy() for k, v in enc.state_dict().items()}
    lin = lambda z, k: z @ p[k + ".weight"].T + p[k + ".bias"]  # noqa: E731
    gelu = np.vectorize(lambda v: 0.5 * v * (1.0 + erf(v / sqrt(2.0))))

    def norm(z, k):
        mu, var = z.mean(-1, keepdims=True), z.var(-1, keepdims=True)
        return (z - mu) / np.sqrt(var + 1e-5) * p[k + ".weight"] + p[k + ".bias"]

    z = x
    for i in (0, 4, 8):
        z = gelu(norm(lin(z, f"wsi_embedders.pre_attn.{i}"), f"wsi_embedders.pre_attn.{i + 1}"))
    k_heads = enc.n_heads
    weights = []
    for k in range(k_heads):
        t = z[:, k::k_heads]  # einops "(e c) -> e c": head k takes features k, k+K, ...
        q = f"wsi_embedders.attn.{k}."
        a = np.tanh(lin(t, q + "attention_a.0"))
        b = 1.0 / (1.0 + np.exp(-lin(t, q + "attention_b.0")))
        s = lin(a * b, q + "attention_c")[:, 0]
        w = np.exp(s - s.max())
        weights.append(w / w.sum())
    w = np.stack(weights, 1)  # [N, K]
    pooled = (w[:, np.arange(z.shape[1]) % k_heads] * z).sum(0)  # entry e*K + k
    return lin(pooled, "projector"), w


# ---------------------------------------------------------------------------------------------
# keys, loading, registry
# ---------------------------------------------------------------------------------------------


def test_key_set_at_full_size_on_meta():
    with torch.device("meta"):
        enc = madeleine()
    got = {k: tuple(v.shape) for k, v in enc.state_dict().items()}
    assert got == madeleine_table()
    assert (enc.in_dim, enc.embed_dim, enc.n_heads) == (512, 512, 4)
    assert sum(math.prod(s) for s in got.values()) == 4_996_740


def test_registry_row_is_built():
    row = models.slide_encoder_info("madeleine")
    assert row.status == "built" and row.reason is None and not row.uses_coords
    assert (row.patch_encoder, row.trident_patch_encoder) == ("conch", "conch_v1")
    assert (row.magnification, row.patch_size) == (10, 256)
    assert (row.in_dim, row.embed_dim, row.precision) == (512, 512, "bf16")
    assert "MahmoodLab/madeleine" in row.weights_source


def test_ddp_checkpoint_loads_strictly_at_full_size(tmp_path):
    torch.manual_seed(0)
    src = madeleine().eval()
    state = {f"module.{k}": v for k, v in src.state_dict().items()}  # saved under DDP
    path = save_state_dict(state, tmp_path / "model.pt")
    enc = load_slide_encoder("madeleine", weights=path)
    assert isinstance(enc, MadeleineSlideEncoder) and not enc.training
    assert not any(p.requires_grad for p in enc.parameters())
    for k, v in src.state_dict().items():
        assert torch.equal(enc.state_dict()[k], v), k
    x, off = torch.randn(50, 512), torch.tensor([0, 20, 50])
    with torch.no_grad():
        torch.testing.assert_close(enc.forward_varlen(x, off), src.forward_varlen(x, off))

    bad = {k: v for k, v in src.state_dict().items() if not k.startswith("token_projector.")}
    bad["projector.weight"] = torch.zeros(512, 512)
    bad["embedding.weight"] = torch.zeros(5, 32)  # a stain-encoding model's table
    with pytest.raises(CheckpointKeyError) as err:
        load_slide_encoder("madeleine", weights=save_state_dict(bad, tmp_path / "bad.pt"))
    msg = str(err.value)
    assert "token_projector.weight  [128, 2048]" in msg and "embedding.weight" in msg
    assert "projector.weight" in msg and "[512, 2048]" in msg and "[512, 512]" in msg
    assert "bad.pt" in msg


def test_the_checkpoint_shapes_give_widths_and_heads(tmp_path):
    src = tiny(1)
    enc = load_slide_encoder("madeleine", weights=save_state_dict(src, tmp_path / "tiny.pt"))
    assert (enc.in_dim, enc.embed_dim, enc.n_heads) == (12, 6, 3)
    _, x, off = slides(np.random.default_rng(0), [4, 9], 12)
    with torch.no_grad():
        torch.testing.assert_close(enc.forward_varlen(x, off), src.forward_varlen(x, off))
    with torch.device("meta"):
        two = madeleine(n_heads=2)
    zeros = {k: torch.zeros(v.shape) for k, v in two.state_dict().items()}
    got = load_slide_encoder("madeleine", weights=save_state_dict(zeros, tmp_path / "two.pt"))
    assert got.n_heads == 2 and got.embed_dim == 512


def test_random_weights_warn_and_are_the_published_size():
    with pytest.warns(models.RandomWeightsWarning, match="'madeleine'.*MahmoodLab/madeleine"):
        enc = load_slide_encoder("madeleine", seed=2)
    assert (enc.in_dim, enc.embed_dim, enc.n_heads) == (512, 512, 4)


# ---------------------------------------------------------------------------------------------
# the forward against the hand-written reference
# ---------------------------------------------------------------------------------------------


def test_heads_take_interleaved_features():
    enc = tiny(2)
    x = torch.randn(7, 12)
    with torch.no_grad():
        z = enc.wsi_embedders.pre_attn(x)
        t = enc.tokens(x)
    assert t.shape == (7, 6, 3)
    for k in range(3):
        torch.testing.assert_close(t[..., k], z[:, k::3], rtol=0, atol=0)


def test_varlen_batch_matches_the_reference_slide_by_slide():
    enc = tiny(3)
    xs, x, off = slides(np.random.default_rng(1), [5, 1, 17, 9], 12)
    with torch.no_grad():
        out, w = enc.forward_varlen(x, off, return_weights=True)
        for i, xi in enumerate(xs):
            ref, ref_w = reference(enc, xi.astype(np.float64))
            np.testing.assert_allclose(out[i].numpy(), ref, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(w[off[i] : off[i + 1]].numpy(), ref_w, rtol=1e-4,
                                       atol=1e-6)  # fmt: skip
            one = enc.forward_varlen(torch.from_numpy(xi), torch.tensor([0, len(xi)]))
            torch.testing.assert_close(out[i : i + 1], one, rtol=1e-5, atol=1e-6)
        # the padded entry point with a mask gives the same vectors
        pad = torch.zeros(len(xs), 17, 12)
        mask = torch.zeros(len(xs), 17, dtype=torch.bool)
        for i, xi in enumerate(xs):
            pad[i, : len(xi)], mask[i, : len(xi)] = torch.from_numpy(xi), True
        torch.testing.assert_close(enc(pad, mask), out, rtol=1e-5, atol=1e-5)


def test_attention_weights_sum_to_one_per_slide_and_head():
    enc = tiny(4)
    _, x, off = slides(np.random.default_rng(2), [3, 11, 6], 12)
    with torch.no_grad():
        _, w = enc.forward_varlen(x, off, return_weights=True)
    assert w.shape == (20, 3) and bool((w > 0).all())
    seg = torch.repeat_interleave(torch.arange(3), off.diff())
    torch.testing.assert_close(torch.zeros(3, 3).index_add_(0, seg, w), torch.ones(3, 3))


def test_permuting_the_patches_does_not_change_the_embedding():
    enc = tiny(5)
    _, x, off = slides(np.random.default_rng(3), [13, 8], 12)
    perm = torch.cat([torch.randperm(13), 13 + torch.randperm(8)])
    with torch.no_grad():
        torch.testing.assert_close(enc.forward_varlen(x[perm], off), enc.forward_varlen(x, off),
                                   rtol=1e-5, atol=1e-6)  # fmt: skip


def test_the_token_projector_does_not_enter_the_embedding():
    enc = tiny(6)
    _, x, off = slides(np.random.default_rng(4), [7, 4], 12)
    with torch.no_grad():
        before = enc.forward_varlen(x, off)
        for p in enc.token_projector.parameters():
            p.normal_()
        torch.testing.assert_close(enc.forward_varlen(x, off), before, rtol=0, atol=0)


def test_bad_inputs_name_what_was_expected():
    enc = tiny()
    with pytest.raises(InvalidArgumentError, match=r"features: expected a \[sum N_i, 12\]"):
        enc.forward_varlen(torch.zeros(4, 5), torch.tensor([0, 4]))
    with pytest.raises(InvalidArgumentError, match=r"features: expected a \[B, N, 12\]"):
        enc(torch.zeros(4, 12))
    with pytest.raises(InvalidArgumentError, match=r"mask: expected shape \[1, 4\]"):
        enc(torch.zeros(1, 4, 12), torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(InvalidArgumentError, match="offsets: expected non-decreasing"):
        enc.forward_varlen(torch.zeros(4, 12), torch.tensor([0, 3, 2, 4]))
    with pytest.raises(InvalidArgumentError, match="n_heads: expected a positive int"):
        MadeleineSlideEncoder(12, n_heads=0)


# ---------------------------------------------------------------------------------------------
# end to end: tumorboard embed --slide-encoder madeleine on generated slides
# ---------------------------------------------------------------------------------------------


def test_cli_embed_slide_encoder_madeleine_end_to_end(tmp_path, monkeypatch, capsys):
    """The whole path, as ``tumorboard embed`` runs it, with a tiny MADELEINE.

    MADELEINE reads CONCH v1 features at 10x / 256 px; the registry row is pointed at the tiny
    CONCH twin (16-d) at the same 10x / 256 px (CONCH v1 at full size is too slow for a CPU
    test). Two slides of different sizes are pooled in one varlen forward; each embedding is
    checked against the reference on that slide's features read back from disk.
    """
    pytest.importorskip("h5py")
    pytest.importorskip("openslide")
    pytest.importorskip("tifffile")
    import h5py
    import pyarrow.parquet as pq
    from test_slides_readers import synthetic_image, write_test_slide
    from tumorboard.cli import main
    from tumorboard.embed import read_features, read_slide_features
    from tumorboard.models import _slide_info

    src = tmp_path / "slides"
    src.mkdir()
    write_test_slide(src / "case01.tif")  # 2048 x 1536 at 20x: 12 patches of 256 px at 10x
    write_test_slide(src / "case02.tif", synthetic_image()[:1024, :1536])  # 6 patches
    row = dataclasses.replace(models.slide_encoder_info("madeleine"), patch_encoder="conch-tiny",
                              trident_patch_encoder=None, in_dim=None)  # fmt: skip
    monkeypatch.setitem(_slide_info._table()[1], "madeleine", row)
    torch.manual_seed(7)
    enc = MadeleineSlideEncoder(16, hidden=8, n_heads=2, attn_dim=6, token_dim=4).eval()
    weights = save_state_dict({f"module.{k}": v for k, v in enc.state_dict().items()},
                              tmp_path / "model.pt")  # fmt: skip
    out = tmp_path / "job"
    args = ["embed", str(src), "--out", str(out), "--slide-encoder", "madeleine",
            "--slide-weights", str(weights), "--random-weights", "--no-seg",
            "--batch-size", "16", "--quiet"]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny patch encoder's random weights
        assert main(args) == 0, capsys.readouterr().err
    assert "slide embeddings: 2 done, 0 skipped complete" in capsys.readouterr().out

    job = out / "10x_256px_0px_overlap"
    folder = job / "slide_features_madeleine-random-weights"  # the patch encoder's are random
    assert folder.is_dir() and (job / "embed_report_madeleine-random-weights.json").is_file()
    got = read_slide_features(job, folder.name.removeprefix("slide_features_"))
    assert got.names == ("case01", "case02") and got.n_patches.tolist() == [12, 6]
    table = pq.read_table(job / f"{folder.name}.parquet")
    assert table.column("slide").to_pylist() == ["case01", "case02"]
    assert table.schema.field("embedding").type.list_size == 8
    for i, name in enumerate(got.names):
        (patch_file,) = job.glob(f"features_conch-tiny*/{name}.h5")
        feats, coords, _ = read_features(patch_file)
        with h5py.File(folder / f"{name}.h5", "r") as f:
            vec = f["features"][...]
            assert f["features"].dtype == np.float32 and vec.shape == (8,)
            assert np.array_equal(f["coords"][...], coords)
            assert f["features"].attrs["n_patches"] == len(feats)
        ref, _ = reference(enc, feats.astype(np.float64))
        np.testing.assert_allclose(vec, ref, rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(got.features[i], vec)
        np.testing.assert_array_equal(np.asarray(table.column("embedding")[i].as_py()), vec)
