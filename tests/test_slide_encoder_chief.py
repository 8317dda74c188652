"""CHIEF's slide encoder (tumorboard.models.chief) and ``tumorboard embed --slide-encoder chief``.

Oracles: the key table of hms-dbmi/CHIEF ``models/CHIEF.py`` ``CHIEF(size_arg="small",
dropout=True, n_classes=2)`` (768 -> 512 -> 256, gated attention as the fourth module of
``attention_net``, two classifiers, ``att_head``, ``text_to_vision``, a 19 x 768
``organ_embedding``), written out key by key, and its parameter count; a numpy reference written
here from the formulas (ReLU layer, tanh x sigmoid gate, softmax over the slide, the weighted sum
of the *input* features, CHIEF's ``WSI_feature``); permutations of the patches; one-slide-at-a-
time calls against one varlen call; the files the command line writes read back with h5py and
pyarrow.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tumorboard import models  # noqa: E402
from tumorboard.errors import InvalidArgumentError  # noqa: E402
from tumorboard.models import CheckpointKeyError, save_state_dict  # noqa: E402
from tumorboard.models.chief import CHIEF_TINY, ChiefSlideEncoder, chief  # noqa: E402
from tumorboard.models.slide_encoder import load_slide_encoder  # noqa: E402

CHIEF_TABLE = {
    "attention_net.0.weight": (512, 768),
    "attention_net.0.bias": (512,),
    "attention_net.3.attention_a.0.weight": (256, 512),
    "attention_net.3.attention_a.0.bias": (256,),
    "attention_net.3.attention_b.0.weight": (256, 512),
    "attention_net.3.attention_b.0.bias": (256,),
    "attention_net.3.attention_c.weight": (1, 256),
    "attention_net.3.attention_c.bias": (1,),
    "classifiers.weight": (2, 512),
    "classifiers.bias": (2,),
    "instance_classifiers.0.weight": (2, 512),
    "instance_classifiers.0.bias": (2,),
    "instance_classifiers.1.weight": (2, 512),
    "instance_classifiers.1.bias": (2,),
    "att_head.fc1.weight": (256, 512),
    "att_head.fc1.bias": (256,),
    "att_head.fc2.weight": (1, 256),
    "att_head.fc2.bias": (1,),
    "text_to_vision.0.weight": (512, 768),
    "text_to_vision.0.bias": (512,),
    "organ_embedding": (19, 768),
}


def tiny(seed=0):
    torch.manual_seed(seed)
    config = dict(CHIEF_TINY)
    return ChiefSlideEncoder(config.pop("in_dim"), **config).eval()


def slides(rng, lengths, f):
    xs = [rng.standard_normal((n, f)).astype(np.float32) for n in lengths]
    off = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.long)
    return xs, torch.from_numpy(np.concatenate(xs)), off


def reference(enc, x):
    """CHIEF's ``WSI_feature`` of one slide ``x [N, F]`` in float64 numpy, and the weights."""
    p = {k: v.double().numpy() for k, v in enc.state_dict().items()}
    g = "attention_net.3."
    h = np.maximum(x @ p["attention_net.0.weight"].T + p["attention_net.0.bias"], 0.0)
    a = np.tanh(h @ p[g + "attention_a.0.weight"].T + p[g + "attention_a.0.bias"])
    b = 1.0 / (1.0 + np.exp(-(h @ p[g + "attention_b.0.weight"].T + p[g + "attention_b.0.bias"])))
    s = ((a * b) @ p[g + "attention_c.weight"].T + p[g + "attention_c.bias"])[:, 0]
    w = np.exp(s - s.max())
    w /= w.sum()
    return w @ x, w


# ---------------------------------------------------------------------------------------------
# keys, loading, registry
# ---------------------------------------------------------------------------------------------


def test_key_set_at_full_size_on_meta():
    with torch.device("meta"):
        enc = chief()
    got = {k: tuple(v.shape) for k, v in enc.state_dict().items()}
    assert got == CHIEF_TABLE
    assert (enc.in_dim, enc.embed_dim) == (768, 768)
    n_params = sum(math.prod(s) for k, s in got.items() if k != "organ_embedding")
    assert n_params == sum(p.numel() for p in enc.parameters()) == 1_185_032


def test_registry_row_is_built():
    row = models.slide_encoder_info("chief")
    assert row.status == "built" and row.reason is None and not row.uses_coords
    assert (row.patch_encoder, row.trident_patch_encoder) == ("ctranspath", "ctranspath")
    assert (row.magnification, row.patch_size) == (10, 256)
    assert (row.in_dim, row.embed_dim, row.precision) == (768, 768, "fp32")
    assert "CHIEF_pretraining.pth" in row.weights_source


def test_checkpoint_loads_strictly_at_full_size(tmp_path):
    torch.manual_seed(0)
    src = chief().eval()
    with torch.no_grad():
        src.organ_embedding.normal_()
    path = save_state_dict(src, tmp_path / "CHIEF_pretraining.pth")
    enc = load_slide_encoder("chief", weights=path)
    assert isinstance(enc, ChiefSlideEncoder) and not enc.training
    assert not any(p.requires_grad for p in enc.parameters())
    for k, v in src.state_dict().items():
        assert torch.equal(enc.state_dict()[k], v), k
    x, off = torch.randn(50, 768), torch.tensor([0, 20, 50])
    with torch.no_grad():
        torch.testing.assert_close(enc.forward_varlen(x, off), src.forward_varlen(x, off))

    # every key counts, the text branch included: a missing, an extra and a mis-shaped key
    bad = {k: v for k, v in src.state_dict().items() if k != "organ_embedding"}
    bad["text_to_vision.0.weight"] = torch.zeros(512, 512)
    bad["memory.pos_mem1"] = torch.zeros(4)
    with pytest.raises(CheckpointKeyError) as err:
        load_slide_encoder("chief", weights=save_state_dict(bad, tmp_path / "bad.pth"))
    msg = str(err.value)
    assert "organ_embedding  [19, 768]" in msg and "memory.pos_mem1" in msg
    assert "text_to_vision.0.weight" in msg and "[512, 768]" in msg and "[512, 512]" in msg
    assert "bad.pth" in msg


def test_a_small_checkpoint_gives_its_configuration(tmp_path):
    src = tiny(1)
    path = save_state_dict(src, tmp_path / "chief.pth")
    enc = load_slide_encoder("chief", weights=path)
    assert (enc.in_dim, enc.embed_dim) == (12, 12)
    _, x, off = slides(np.random.default_rng(0), [4, 9], 12)
    with torch.no_grad():
        torch.testing.assert_close(enc.forward_varlen(x, off), src.forward_varlen(x, off))


def test_random_weights_warn_and_are_the_published_size():
    with pytest.warns(models.RandomWeightsWarning, match="'chief'.*CHIEF_pretraining.pth"):
        enc = load_slide_encoder("chief", seed=2)
    assert (enc.in_dim, enc.embed_dim) == (768, 768)


# ---------------------------------------------------------------------------------------------
# the forward against the hand-written reference
# ---------------------------------------------------------------------------------------------


def test_varlen_batch_matches_the_reference_slide_by_slide():
    enc = tiny(2)
    xs, x, off = slides(np.random.default_rng(1), [5, 1, 17, 9], 12)
    with torch.no_grad():
        out, w = enc.forward_varlen(x, off, return_weights=True)
        for i, xi in enumerate(xs):
            ref, ref_w = reference(enc, xi.astype(np.float64))
            np.testing.assert_allclose(out[i].numpy(), ref, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(w[off[i] : off[i + 1]].numpy(), ref_w, rtol=1e-5,
                                       atol=1e-7)  # fmt: skip
            one = enc.forward_varlen(torch.from_numpy(xi), torch.tensor([0, len(xi)]))
            torch.testing.assert_close(out[i : i + 1], one, rtol=1e-6, atol=1e-6)
        # the padded entry point with a mask gives the same vectors
        pad = torch.zeros(len(xs), 17, 12)
        mask = torch.zeros(len(xs), 17, dtype=torch.bool)
        for i, xi in enumerate(xs):
            pad[i, : len(xi)], mask[i, : len(xi)] = torch.from_numpy(xi), True
        torch.testing.assert_close(enc(pad, mask), out, rtol=1e-5, atol=1e-6)


def test_attention_weights_sum_to_one_per_slide_and_the_embedding_is_in_their_hull():
    enc = tiny(3)
    xs, x, off = slides(np.random.default_rng(2), [3, 11, 6], 12)
    with torch.no_grad():
        out, w = enc.forward_varlen(x, off, return_weights=True)
    seg = torch.repeat_interleave(torch.arange(3), off.diff())
    torch.testing.assert_close(torch.zeros(3).index_add_(0, seg, w), torch.ones(3))
    assert bool((w > 0).all())
    for i, xi in enumerate(xs):  # a convex combination of the slide's own input features
        lo, hi = torch.from_numpy(xi).min(0).values, torch.from_numpy(xi).max(0).values
        assert bool((out[i] >= lo - 1e-6).all() and (out[i] <= hi + 1e-6).all())


def test_permuting_the_patches_does_not_change_the_embedding():
    enc = tiny(4)
    _, x, off = slides(np.random.default_rng(3), [13, 8], 12)
    perm = torch.cat([torch.randperm(13), 13 + torch.randperm(8)])
    with torch.no_grad():
        torch.testing.assert_close(enc.forward_varlen(x[perm], off), enc.forward_varlen(x, off),
                                   rtol=1e-6, atol=1e-6)  # fmt: skip


def test_the_text_branch_and_the_heads_do_not_enter_the_embedding():
    enc = tiny(5)
    _, x, off = slides(np.random.default_rng(4), [7, 4], 12)
    with torch.no_grad():
        before = enc.forward_varlen(x, off)
        for name in ("classifiers", "instance_classifiers", "att_head", "text_to_vision"):
            for p in getattr(enc, name).parameters():
                p.normal_()
        enc.organ_embedding.normal_()
        torch.testing.assert_close(enc.forward_varlen(x, off), before, rtol=0, atol=0)


def test_bad_inputs_name_what_was_expected():
    enc = tiny()
    with pytest.raises(InvalidArgumentError, match=r"features: expected a \[sum N_i, 12\]"):
        enc.forward_varlen(torch.zeros(4, 5), torch.tensor([0, 4]))
    with pytest.raises(InvalidArgumentError, match=r"features: expected a \[B, N, 12\]"):
        enc(torch.zeros(4, 12))
    with pytest.raises(InvalidArgumentError, match=r"mask: expected shape \[1, 4\]"):
        enc(torch.zeros(1, 4, 12), torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(InvalidArgumentError, match="offsets: expected to run from 0"):
        enc.forward_varlen(torch.zeros(4, 12), torch.tensor([0, 3]))
    with pytest.raises(InvalidArgumentError, match="attn_dim: expected a positive int"):
        ChiefSlideEncoder(12, attn_dim=0)


# ---------------------------------------------------------------------------------------------
# end to end: tumorboard embed --slide-encoder chief on generated slides
# ---------------------------------------------------------------------------------------------


def test_cli_embed_slide_encoder_chief_end_to_end(tmp_path, monkeypatch, capsys):
    """The whole path, as ``tumorboard embed`` runs it, with a tiny CHIEF over tiny features.

    CHIEF reads CTransPath features at 10x / 256 px; the registry row is pointed at the tiny
    UNI2-h twin (48-d) at the same 10x / 256 px (CTransPath at full size is too slow for a CPU
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
    row = dataclasses.replace(models.slide_encoder_info("chief"), patch_encoder="uni2-tiny",
                              trident_patch_encoder=None, in_dim=None)  # fmt: skip
    monkeypatch.setitem(_slide_info._table()[1], "chief", row)
    torch.manual_seed(6)
    enc = ChiefSlideEncoder(48, hidden=16, attn_dim=8, n_organs=3, text_dim=10).eval()
    weights = save_state_dict(enc, tmp_path / "CHIEF_pretraining.pth")
    out = tmp_path / "job"
    args = ["embed", str(src), "--out", str(out), "--slide-encoder", "chief",
            "--slide-weights", str(weights), "--random-weights", "--no-seg",
            "--batch-size", "16", "--quiet"]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny patch encoder's random weights
        assert main(args) == 0, capsys.readouterr().err
    assert "slide embeddings: 2 done, 0 skipped complete" in capsys.readouterr().out

    job = out / "10x_256px_0px_overlap"
    folder = job / "slide_features_chief-random-weights"  # the patch encoder's are random
    assert folder.is_dir() and (job / "embed_report_chief-random-weights.json").is_file()
    got = read_slide_features(job, folder.name.removeprefix("slide_features_"))
    assert got.names == ("case01", "case02") and got.n_patches.tolist() == [12, 6]
    table = pq.read_table(job / f"{folder.name}.parquet")
    assert table.column("slide").to_pylist() == ["case01", "case02"]
    assert table.schema.field("embedding").type.list_size == 48
    for i, name in enumerate(got.names):
        (patch_file,) = job.glob(f"features_uni2-tiny*/{name}.h5")
        feats, coords, _ = read_features(patch_file)
        with h5py.File(folder / f"{name}.h5", "r") as f:
            vec = f["features"][...]
            assert f["features"].dtype == np.float32 and vec.shape == (48,)
            assert np.array_equal(f["coords"][...], coords)
            assert f["features"].attrs["n_patches"] == len(feats)
            assert f["features"].attrs["weights_fingerprint"].startswith("sha256:")
        ref, _ = reference(enc, feats.astype(np.float64))
        np.testing.assert_allclose(vec, ref, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got.features[i], vec)
        np.testing.assert_array_equal(np.asarray(table.column("embedding")[i].as_py()), vec)

    # a rerun finds both slides complete
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(args) == 0
    assert "slide embeddings: 0 done, 2 skipped complete" in capsys.readouterr().out
