"""PRISM's slide aggregator (tumorboard.models.prism) and ``--slide-encoder prism``.

Oracles: the key table of paige-ai/Prism's ``image_resampler`` (Hugging Face remote code
``perceiver.py`` with ``config.json``'s ``perceiver_config``: 513 latents of 1280, 8 Perceiver
layers, cross-attention blocks shared from layer 1 and the 6-block transformer from layer 0,
Virchow's 2560-d input) written out key by key, with its unique parameter count (99,037,440);
a dense reference written here the way the remote code runs one slide (explicit softmax
cross-attention with PRISM's float mask of ones, torch's own ``nn.MultiheadAttention`` call,
GEGLU written out, the keys and values of a shared block taken from the layer that owns it);
permutations of the tiles; one-slide-at-a-time calls against one varlen call; the slide
features written by ``tumorboard embed`` read back with h5py.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tumorboard import models  # noqa: E402
from tumorboard.errors import InvalidArgumentError, WeightsError  # noqa: E402
from tumorboard.models import CheckpointKeyError, save_state_dict  # noqa: E402
from tumorboard.models.prism import PRISM_TINY, PrismSlideEncoder, prism  # noqa: E402
from tumorboard.models.slide_encoder import load_slide_encoder  # noqa: E402

P = "image_resampler."


def tiny(seed=0, **over):
    torch.manual_seed(seed)
    config = {**PRISM_TINY, **over}
    enc = PrismSlideEncoder(config.pop("in_dim"), **config).eval()
    with torch.no_grad():  # LayerNorms start at 1/0: make them matter
        for name, p in enc.named_parameters():
            if "norm" in name:
                p.add_(0.3 * torch.randn_like(p))
    return enc


def ff_table(prefix, width, mult=1):
    return {f"{prefix}norm.weight": (width,), f"{prefix}norm.bias": (width,),
            f"{prefix}net.0.weight": (2 * mult * width, width),
            f"{prefix}net.0.bias": (2 * mult * width,),
            f"{prefix}net.2.weight": (width, mult * width),
            f"{prefix}net.2.bias": (width,)}  # fmt: skip


def prism_table(width=1280, f=2560, latents=512, depth=8, tf=6):
    t = {f"{P}cls_norm.weight": (width,), f"{P}cls_norm.bias": (width,),
         f"{P}img_norm.weight": (width,), f"{P}img_norm.bias": (width,),
         f"{P}perceiver.latents": (latents + 1, width)}  # fmt: skip
    for i in range(depth):  # every alias of a shared block is a key of torch's state dict
        x = f"{P}perceiver.layers.{i}.xattn."
        t |= {f"{x}xattn.x_norm.weight": (width,), f"{x}xattn.x_norm.bias": (width,),
              f"{x}xattn.to_q.weight": (width, width), f"{x}xattn.to_kv.weight": (2 * width, f),
              f"{x}xattn.to_out.weight": (width, width)}  # fmt: skip
        t |= ff_table(f"{x}ff.", width)
        for j in range(tf):
            b = f"{P}perceiver.layers.{i}.tf.{j}."
            t |= {f"{b}mhsa.norm.weight": (width,), f"{b}mhsa.norm.bias": (width,),
                  f"{b}mhsa.mha.in_proj_weight": (3 * width, width),
                  f"{b}mhsa.mha.out_proj.weight": (width, width)}  # fmt: skip
            t |= ff_table(f"{b}ff.", width)
    return t


def full_checkpoint(enc):
    """Return a whole PRISM state dict: these keys plus decoder and contrastive-head keys."""
    return {**enc.state_dict(),
            "text_decoder.model.biogpt.embed_tokens.weight": torch.zeros(7, 4),
            "text_decoder.model.output_projection.weight": torch.zeros(7, 4),
            "img_to_latents.to_latents.weight": torch.zeros(10, enc.embed_dim),
            "text_to_latents.to_latents.weight": torch.zeros(10, 4),
            "temperature": torch.tensor(2.6593)}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# keys, loading, registry
# ---------------------------------------------------------------------------------------------


def test_key_set_at_full_size_on_meta():
    with torch.device("meta"):
        enc = prism()
    got = {k: tuple(v.shape) for k, v in enc.state_dict().items()}
    assert got == prism_table()
    assert (enc.in_dim, enc.embed_dim) == (2560, 1280)
    per = enc.image_resampler.perceiver
    # the sharing: layers 2..7 reuse layer 1's cross-attention, every layer layer 0's transformer
    assert all(per.layers[i]["xattn"] is per.layers[1]["xattn"] for i in range(2, 8))
    assert per.layers[0]["xattn"] is not per.layers[1]["xattn"]
    assert all(per.layers[i]["tf"] is per.layers[0]["tf"] for i in range(8))
    assert per.layers[0]["tf"][0]["mhsa"].mha.num_heads == 8
    assert sum(p.numel() for p in enc.parameters()) == 99_037_440  # unique parameters


def test_registry_row_is_built_without_coordinates():
    row = models.slide_encoder_info("prism")
    assert row.status == "built" and row.reason is None and not row.uses_coords
    assert (row.trident_patch_encoder, row.magnification, row.patch_size) == ("virchow", 20, 224)
    assert (row.in_dim, row.embed_dim, row.precision) == (2560, 1280, "fp16")


def test_a_full_prism_checkpoint_loads_its_perceiver_strictly(tmp_path):
    enc = tiny(1)
    path = tmp_path / "model.safetensors"
    save_state_dict(full_checkpoint(enc), path)
    got = load_slide_encoder("prism", weights=path)
    assert isinstance(got, PrismSlideEncoder) and not got.training
    assert (got.in_dim, got.embed_dim, len(got.image_resampler.perceiver.layers)) == (24, 16, 3)
    for k, v in enc.state_dict().items():
        assert torch.equal(got.state_dict()[k], v), k
    f = torch.randn(9, 24)
    with torch.no_grad():
        torch.testing.assert_close(got.forward_varlen(f, torch.tensor([0, 9])),
                                   enc.forward_varlen(f, torch.tensor([0, 9])))  # fmt: skip

    state = full_checkpoint(enc)
    del state[f"{P}perceiver.layers.0.tf.1.ff.net.2.bias"]
    save_state_dict(state, tmp_path / "broken.safetensors")
    with pytest.raises(CheckpointKeyError, match=r"perceiver\.layers\.0\.tf\.1\.ff\.net\.2\.bias"):
        load_slide_encoder("prism", weights=tmp_path / "broken.safetensors")
    state = full_checkpoint(enc)
    state[f"{P}perceiver.layers.0.xattn.xattn.to_q.weight"] = torch.zeros(16, 15)
    save_state_dict(state, tmp_path / "shape.safetensors")
    with pytest.raises(CheckpointKeyError, match=r"to_q.weight.*\[16, 15\]"):
        load_slide_encoder("prism", weights=tmp_path / "shape.safetensors")


def test_shared_blocks_stored_once_or_bare_are_accepted(tmp_path):
    enc = tiny(2, depth=4)
    full = enc.state_dict()
    # a file that keeps one name per shared tensor: layers 2, 3 xattn and layers 1-3 tf absent
    once = {k: v for k, v in full.items()
            if not any(f"layers.{i}.xattn." in k for i in (2, 3))
            and not any(f"layers.{i}.tf." in k for i in (1, 2, 3))}  # fmt: skip
    adapted = enc.adapt_state_dict(once)
    assert adapted.keys() == full.keys()
    save_state_dict(once, tmp_path / "once.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = load_slide_encoder("prism", weights=tmp_path / "once.pt")
    # layers 0 and 1 only: the depth is not in the file, the published 8 is used
    assert len(got.image_resampler.perceiver.layers) == 8
    # a bare PerceiverResampler state dict (no image_resampler. prefix)
    bare = {k.removeprefix(P): v for k, v in full.items()}
    assert enc.adapt_state_dict(bare).keys() == full.keys()
    # aliases that disagree cannot be loaded into one shared block
    bad = dict(full)
    bad[f"{P}perceiver.layers.3.xattn.xattn.to_q.weight"] = torch.zeros(16, 16)
    with pytest.raises(WeightsError, match=r"layers\.3\.xattn\.\* to repeat .*layers\.1\.xattn"):
        enc.adapt_state_dict(bad)


def test_random_weights_warn_and_are_the_published_size():
    with pytest.warns(models.RandomWeightsWarning, match="prism"):
        enc = load_slide_encoder("prism", seed=2)
    assert (enc.in_dim, enc.embed_dim) == (2560, 1280)
    assert len(enc.image_resampler.perceiver.layers) == 8


# ---------------------------------------------------------------------------------------------
# the forward against a dense reference
# ---------------------------------------------------------------------------------------------


def geglu_ff(ff, x):
    h = ff.net[0](ff.norm(x))
    a, gate = h.chunk(2, dim=-1)
    return ff.net[2](a * torch.nn.functional.gelu(gate))


def reference(enc, tiles):
    """One slide (batch 1) the way PRISM's remote code runs it, written densely here."""
    per = enc.image_resampler.perceiver
    x = per.latents[None]  # [1, 513, width]
    c = tiles[None]
    mask = torch.ones(1, per.latents.shape[0], tiles.shape[0])  # PRISM's float mask of ones
    kv = None
    for i, layer in enumerate(per.layers):
        xa = layer["xattn"]["xattn"]
        if i <= 1:  # share_xattn_start_layer: layers 0 and 1 project the tiles themselves
            kv = xa.to_kv(c).chunk(2, dim=-1)
        q = xa.to_q(xa.x_norm(x))
        k, v = kv
        w = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]) + mask, dim=-1)
        x = x + xa.to_out(w @ v)
        x = x + geglu_ff(layer["xattn"]["ff"], x)
        for block in layer["tf"]:
            mhsa = block["mhsa"]
            h = mhsa.norm(x)
            x = x + mhsa.mha(h, h, h, need_weights=False)[0]
            x = x + geglu_ff(block["ff"], x)
    return enc.image_resampler.cls_norm(x[0, 0])


def test_forward_matches_the_dense_reference():
    enc = tiny(3)
    for n in (1, 2, 17, 40):
        f = torch.randn(n, 24)
        with torch.no_grad():
            got = enc.forward_varlen(f, torch.tensor([0, n]))
            want = reference(enc, f)
        torch.testing.assert_close(got[0], want, rtol=1e-4, atol=1e-5)


def test_the_tile_order_does_not_matter():
    enc = tiny(4)
    f = torch.randn(23, 24)
    perm = torch.randperm(23)
    with torch.no_grad():
        a = enc.forward_varlen(f, torch.tensor([0, 23]))
        b = enc.forward_varlen(f[perm], torch.tensor([0, 23]))
        c = enc.forward_varlen(f[:22], torch.tensor([0, 22]))
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(a, c, atol=1e-4)  # every tile counts


def test_varlen_batch_equals_one_slide_at_a_time_and_padded():
    enc = tiny(6)
    lengths = [5, 0, 17, 1, 9]
    parts = [torch.randn(n, 24) for n in lengths]
    feats = torch.cat(parts)
    offsets = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]))
    with torch.no_grad():
        got = enc.forward_varlen(feats, offsets)
        for i, f in enumerate(parts):
            one = enc.forward_varlen(f, torch.tensor([0, len(f)]))
            torch.testing.assert_close(got[i], one[0], rtol=1e-5, atol=1e-6)
        assert torch.equal(got[1], torch.zeros(16))  # no tile: zeros
        n = max(lengths)
        pad = torch.zeros(5, n, 24)
        mask = torch.zeros(5, n, dtype=torch.bool)
        for i, f in enumerate(parts):
            pad[i, : len(f)], mask[i, : len(f)] = f, True
        padded = enc(pad, mask)
    torch.testing.assert_close(padded, got, rtol=1e-5, atol=1e-6)


def test_bad_inputs_name_what_was_expected():
    enc = tiny(9)
    with pytest.raises(InvalidArgumentError, match=r"features: expected a \[sum N_i, 24\]"):
        enc.forward_varlen(torch.zeros(4, 23), torch.tensor([0, 4]))
    with pytest.raises(InvalidArgumentError, match=r"features: expected a \[B, N, 24\]"):
        enc(torch.zeros(4, 24))
    with pytest.raises(InvalidArgumentError, match="n_heads: expected a divisor of width 16"):
        PrismSlideEncoder(24, width=16, n_heads=5)
    with pytest.raises(InvalidArgumentError, match="share_tf_start_layer: expected an int >= 0"):
        PrismSlideEncoder(24, width=16, share_tf_start_layer=-1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_equals_the_cpu_at_full_size():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", models.RandomWeightsWarning)
        enc = load_slide_encoder("prism", seed=3)
    f = torch.randn(3000, 2560)
    off = torch.tensor([0, 1000, 3000])
    with torch.inference_mode():
        cpu = enc.forward_varlen(f, off)
        gpu = enc.cuda().forward_varlen(f.cuda(), off.cuda())
    torch.testing.assert_close(gpu.cpu(), cpu, rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------------------------------------
# end to end: tumorboard embed --slide-encoder prism on a generated slide
# ---------------------------------------------------------------------------------------------


def test_cli_embed_slide_encoder_prism_end_to_end(tmp_path, monkeypatch, capsys):
    """``tumorboard embed --slide-encoder prism`` with a tiny PRISM checkpoint.

    prism reads Virchow tile features at 20x / 224 px; Virchow at full size is too slow for a
    CPU test, so the registry row is pointed at the tiny UNI2-h twin's 48-d features at 256 px
    (the command runs in this process so that the row change applies).
    """
    pytest.importorskip("h5py")
    pytest.importorskip("openslide")
    pytest.importorskip("tifffile")
    import dataclasses

    import h5py
    import pyarrow.parquet as pq
    from test_slides_readers import write_test_slide
    from tumorboard.cli import main
    from tumorboard.embed import read_features
    from tumorboard.models import _slide_info

    slide = tmp_path / "case01.tif"
    write_test_slide(slide)
    row = dataclasses.replace(models.slide_encoder_info("prism"), patch_encoder="uni2-tiny",
                              trident_patch_encoder=None, patch_size=256, in_dim=None)  # fmt: skip
    monkeypatch.setitem(_slide_info._table()[1], "prism", row)
    enc = tiny(10, in_dim=48)
    weights = save_state_dict(full_checkpoint(enc), tmp_path / "model.safetensors")
    out = tmp_path / "job"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny patch encoder's random weights
        rc = main(["embed", str(slide), "--out", str(out), "--slide-encoder", "prism",
                   "--slide-weights", str(weights), "--random-weights", "--no-seg",
                   "--threads", "1", "--batch-size", "16", "--quiet"])  # fmt: skip
    printed = capsys.readouterr()
    assert rc == 0, printed.err
    assert "slide embeddings: 1 done" in printed.out
    job = out / "20x_256px_0px_overlap"
    (folder,) = [p for p in job.glob("slide_features_prism*") if p.is_dir()]
    feats, coords, _ = read_features(next(job.glob("features_uni2-tiny*/case01.h5")))
    with h5py.File(folder / "case01.h5", "r") as f:
        vec = f["features"][...]
        assert f["features"].attrs["n_patches"] == len(coords) == 48
        assert np.array_equal(f["coords"][...], coords)
    assert vec.shape == (16,)
    with torch.no_grad():
        want = reference(enc, torch.from_numpy(feats))
    np.testing.assert_allclose(vec, want.numpy(), rtol=1e-4, atol=1e-5)
    table = pq.read_table(job / f"{folder.name}.parquet")
    assert table.column("slide").to_pylist() == ["case01"]
    assert table.schema.field("embedding").type.list_size == 16
    np.testing.assert_array_equal(np.asarray(table.column("embedding")[0].as_py()), vec)
