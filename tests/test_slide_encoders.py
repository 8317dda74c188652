"""Slide encoders (tumorboard.models.slide_encoder and the slide-encoder registry).

Oracles: TRIDENT's slide-encoder names and their patch encoders, magnifications and patch sizes
(mahmoodlab/TRIDENT ``trident/slide_encoder_models/load.py``@04e4c2b and README@0120b8b); the
ABMILSlideEncoder key table (load.py, written out here key by key) and FEATHER's (mahmoodlab/MIL-Lab
``src/models/abmil.py``, ``base.yaml``@186fe41: patch_embed 512, gated attention 384); numpy
encoders written here slide by slide from the formulas (mean; ReLU embedding, tanh x sigmoid
gate, softmax over the slide, weighted sum; TRIDENT's GELU pre/post layers); permutations of
the patches; one-slide-at-a-time calls against one varlen call.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tumorboard import models  # noqa: E402
from tumorboard.errors import InvalidArgumentError, WeightsError  # noqa: E402
from tumorboard.models import CheckpointKeyError, save_state_dict  # noqa: E402
from tumorboard.models.abmil import ABMILSlideEncoder  # noqa: E402
from tumorboard.models.slide_encoder import (  # noqa: E402
    FeatherSlideEncoder,
    MeanSlideEncoder,
    feather,
    feather_uni_v2,
    load_slide_encoder,
)


def shapes(module):
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


def abmil_table(f, hidden, n_heads):
    t = {
        "model.pre_attention_layers.0.weight": (f, f),
        "model.pre_attention_layers.0.bias": (f,),
        "model.post_attention_layers.0.weight": (f, f),
        "model.post_attention_layers.0.bias": (f,),
    }
    for h in range(n_heads):
        p = "model.image_pooler."
        t |= {f"{p}attention_heads.{h}.0.weight": (hidden, f),
              f"{p}attention_heads.{h}.0.bias": (hidden,),
              f"{p}gating_layers.{h}.0.weight": (hidden, f),
              f"{p}gating_layers.{h}.0.bias": (hidden,),
              f"{p}branching_layers.{h}.weight": (1, hidden),
              f"{p}branching_layers.{h}.bias": (1,)}  # fmt: skip
    if n_heads > 1:
        t |= {"model.image_pooler.condensing_layer.weight": (f, n_heads * f),
              "model.image_pooler.condensing_layer.bias": (f,)}  # fmt: skip
    return t


def feather_table(f):
    return {
        "model.patch_embed.0.weight": (512, f),
        "model.patch_embed.0.bias": (512,),
        "model.global_attn.attention_a.0.weight": (384, 512),
        "model.global_attn.attention_a.0.bias": (384,),
        "model.global_attn.attention_b.0.weight": (384, 512),
        "model.global_attn.attention_b.0.bias": (384,),
        "model.global_attn.attention_c.weight": (1, 384),
        "model.global_attn.attention_c.bias": (1,),
    }


# ---------------------------------------------------------------------------------------------
# the registry
# ---------------------------------------------------------------------------------------------


def test_registry_has_tridents_names_and_pairings():
    names = models.slide_encoders()
    for n in ("threads", "titan", "prism", "chief", "gigapath", "madeleine", "feather",
              "feather_uni_v2", "care", "abmil"):  # fmt: skip
        assert n in names
    for m in models.available():
        i = models.info(m)
        if i.kind == "encoder":
            row = models.slide_encoder_info(f"mean-{i.trident_name or i.name}")
            assert row.patch_encoder == i.name and row.embed_dim == i.embed_dim
            assert models.slide_encoder_info(f"mean-{i.name}") is row  # tumorboard spelling
    pair = {n: models.slide_encoder_info(n) for n in names}
    want = {  # TRIDENT README: patch encoder, --mag, --patch_size
        "titan": ("conch_v15", 20, 512), "threads": ("conch_v15", 20, 512),
        "prism": ("virchow", 20, 224), "chief": ("ctranspath", 10, 256),
        "gigapath": ("gigapath", 20, 256), "madeleine": ("conch_v1", 10, 256),
        "feather": ("conch_v15", 20, 512), "feather_uni_v2": ("uni_v2", 20, 256),
        "care": ("conch_v15", 20, 512),
    }  # fmt: skip
    for n, (enc, mag, size) in want.items():
        row = pair[n]
        assert (row.trident_patch_encoder, row.magnification, row.patch_size) == (enc, mag, size)
    assert (pair["feather"].in_dim, pair["feather"].embed_dim) == (768, 512)
    assert (pair["feather_uni_v2"].in_dim, pair["feather_uni_v2"].embed_dim) == (1536, 512)
    built = {n for n, r in pair.items() if r.status == "built"}
    assert {"feather", "feather_uni_v2", "abmil", "titan", "gigapath", "prism",
            "mean-uni_v2"} <= built  # fmt: skip
    assert {"chief", "madeleine"} <= built
    for n in ("threads", "care"):
        assert pair[n].status == "not built" and pair[n].reason
    assert pair["titan"].uses_coords and pair["gigapath"].uses_coords
    assert models.slide_encoder_info("FEATHER-UNI-V2") is pair["feather_uni_v2"]


def test_unknown_and_not_built_names_are_refused_with_the_reason():
    with pytest.raises(InvalidArgumentError, match=r"slide_encoder: expected one of .*titan"):
        models.slide_encoder_info("tiitan")
    with pytest.raises(InvalidArgumentError, match="'threads' is not built.*coming soon"):
        load_slide_encoder("threads")


def test_care_is_listed_with_what_is_missing():
    # CARE's layers and keys are only in the gated Hugging Face repository's remote code: the
    # refusal says so, and the row keeps TRIDENT's pairing and output width.
    row = models.slide_encoder_info("care")
    assert (row.in_dim, row.embed_dim, row.precision, row.uses_coords) == (768, 512, "fp32", True)
    with pytest.raises(InvalidArgumentError, match=r"'care' is not built.*gated Zipper-1/CARE"):
        load_slide_encoder("care")


# ---------------------------------------------------------------------------------------------
# key sets at full size, strict loading
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_heads", [1, 2])
def test_abmil_key_set_at_full_size_on_meta(n_heads):
    with torch.device("meta"):
        enc = ABMILSlideEncoder(1536, hidden=512, n_heads=n_heads, gated=True)
    assert shapes(enc) == abmil_table(1536, 512, n_heads)


@pytest.mark.parametrize(("build", "f"), [(feather, 768), (feather_uni_v2, 1536)])
def test_feather_key_set_at_full_size_on_meta(build, f):
    with torch.device("meta"):
        enc = build()
    assert shapes(enc) == feather_table(f)
    assert enc.embed_dim == 512 and enc.in_dim == f


def test_feather_checkpoint_loads_strictly_and_drops_the_classifier(tmp_path):
    torch.manual_seed(0)
    src = feather()
    state = dict(src.state_dict())
    state["model.classifier.weight"] = torch.zeros(108, 512)  # a PC-108 head: not the embedding
    state["model.classifier.bias"] = torch.zeros(108)
    path = save_state_dict(state, tmp_path / "model.safetensors")
    enc = load_slide_encoder("feather", weights=path)
    x, off = torch.randn(40, 768), torch.tensor([0, 15, 40])
    torch.testing.assert_close(enc.forward_varlen(x, off), src.eval().forward_varlen(x, off))

    bad = {k: v for k, v in src.state_dict().items() if "attention_b" not in k}
    bad["model.global_attn.gate.weight"] = torch.zeros(384, 512)
    with pytest.raises(CheckpointKeyError) as err:
        load_slide_encoder("feather", weights=save_state_dict(bad, tmp_path / "bad.safetensors"))
    msg = str(err.value)
    assert "model.global_attn.attention_b.0.weight  [384, 512]" in msg
    assert "model.global_attn.gate.weight" in msg and "bad.safetensors" in msg


def test_abmil_checkpoint_gives_its_configuration(tmp_path):
    torch.manual_seed(1)
    src = ABMILSlideEncoder(24, hidden=8, n_heads=2, gated=True).eval()
    path = save_state_dict(src, tmp_path / "abmil.pt")
    enc = load_slide_encoder("abmil", weights=path)
    assert enc.pooler.n_heads == 2 and enc.pooler.hidden == 8 and enc.pooler.gated
    x, off = torch.randn(30, 24), torch.tensor([0, 7, 30])
    torch.testing.assert_close(enc.forward_varlen(x, off), src.forward_varlen(x, off))
    wrong = save_state_dict({"classifier.weight": torch.zeros(2, 24)}, tmp_path / "w.pt")
    with pytest.raises(WeightsError, match="abmil: expected a TRIDENT ABMILSlideEncoder"):
        load_slide_encoder("abmil", weights=wrong)
    with pytest.raises(InvalidArgumentError, match="has no parameters"):
        load_slide_encoder("mean-uni2-h", weights=path)


def test_random_weights_warn():
    with pytest.warns(models.RandomWeightsWarning, match="feather_uni_v2"):
        enc = load_slide_encoder("feather_uni_v2", seed=3)
    assert not any(p.requires_grad for p in enc.parameters()) and not enc.training


# ---------------------------------------------------------------------------------------------
# tiny configurations against hand-written references
# ---------------------------------------------------------------------------------------------


def slides(rng, lengths, f):
    xs = [rng.standard_normal((n, f)).astype(np.float32) for n in lengths]
    off = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.long)
    return xs, torch.from_numpy(np.concatenate(xs)), off


def np_softmax(s):
    e = np.exp(s - s.max(0, keepdims=True))
    return e / e.sum(0, keepdims=True)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def gelu(z):
    from math import erf, sqrt

    return 0.5 * z * (1.0 + np.vectorize(erf)(z / sqrt(2.0)))


def np_feather(enc, x):
    p = {k: v.double().numpy() for k, v in enc.state_dict().items()}
    g = "model.global_attn."
    h = np.maximum(x @ p["model.patch_embed.0.weight"].T + p["model.patch_embed.0.bias"], 0)
    a = np.tanh(h @ p[g + "attention_a.0.weight"].T + p[g + "attention_a.0.bias"])
    b = sigmoid(h @ p[g + "attention_b.0.weight"].T + p[g + "attention_b.0.bias"])
    w = np_softmax((a * b) @ p[g + "attention_c.weight"].T + p[g + "attention_c.bias"])  # [N, K]
    return (w.T @ h).reshape(-1), w


def np_abmil(enc, x):
    p = {k: v.double().numpy() for k, v in enc.state_dict().items()}
    lin = lambda z, k: z @ p[k + ".weight"].T + p[k + ".bias"]  # noqa: E731
    z = gelu(lin(x, "model.pre_attention_layers.0"))
    pooled = []
    for h in range(enc.pooler.n_heads):
        q = f"model.image_pooler.{{}}.{h}"
        a = np.tanh(lin(z, q.format("attention_heads") + ".0"))
        a = a * sigmoid(lin(z, q.format("gating_layers") + ".0"))
        w = np_softmax(lin(a, q.format("branching_layers")))[:, 0]
        pooled.append(w @ z)
    v = np.concatenate(pooled)
    if enc.pooler.n_heads > 1:
        v = lin(v, "model.image_pooler.condensing_layer")
    return gelu(lin(v, "model.post_attention_layers.0")), None


def tiny(kind):
    torch.manual_seed(7)
    if kind == "mean":
        return MeanSlideEncoder(12)
    if kind == "abmil":
        return ABMILSlideEncoder(12, hidden=6, n_heads=2, gated=True).eval()
    return FeatherSlideEncoder(12, embed_dim=8, attn_dim=6, n_heads=2).eval()


REFERENCE = {"mean": lambda enc, x: (x.mean(0), None), "abmil": np_abmil, "feather": np_feather}


@pytest.mark.parametrize("kind", ["mean", "abmil", "feather"])
def test_varlen_batch_matches_the_reference_slide_by_slide(kind):
    enc = tiny(kind)
    xs, x, off = slides(np.random.default_rng(0), [5, 1, 17, 9], 12)
    with torch.no_grad():
        out = enc.forward_varlen(x, off, backend="torch") if kind == "feather" else \
            enc.forward_varlen(x, off)  # fmt: skip
        for i, xi in enumerate(xs):
            ref, _ = REFERENCE[kind](enc, xi.astype(np.float64))
            np.testing.assert_allclose(out[i].numpy(), ref, rtol=1e-4, atol=1e-5)
            one = enc.forward_varlen(torch.from_numpy(xi), torch.tensor([0, len(xi)]))
            torch.testing.assert_close(out[i : i + 1], one, rtol=1e-5, atol=1e-6)
        # the padded entry point with a mask gives the same vectors
        pad = torch.zeros(len(xs), 17, 12)
        mask = torch.zeros(len(xs), 17, dtype=torch.bool)
        for i, xi in enumerate(xs):
            pad[i, : len(xi)], mask[i, : len(xi)] = torch.from_numpy(xi), True
        torch.testing.assert_close(enc(pad, mask), out, rtol=1e-5, atol=1e-5)


def test_feather_attention_weights_sum_to_one_per_slide():
    enc = tiny("feather")
    xs, x, off = slides(np.random.default_rng(1), [3, 11, 6], 12)
    with torch.no_grad():
        _, w = enc.forward_varlen(x, off, return_weights=True)
    assert w.shape == (20, 2)
    sums = torch.zeros(3, 2).index_add_(0, torch.repeat_interleave(torch.arange(3), off.diff()), w)
    torch.testing.assert_close(sums, torch.ones(3, 2))
    for i, xi in enumerate(xs):  # and they are the hand-written softmax
        _, ref = np_feather(enc, xi.astype(np.float64))
        np.testing.assert_allclose(w[off[i] : off[i + 1]].numpy(), ref, rtol=1e-4, atol=1e-6)


def test_abmil_attention_weights_sum_to_one_per_slide():
    enc = tiny("abmil")
    _, x, off = slides(np.random.default_rng(2), [4, 9], 12)
    with torch.no_grad():
        h = enc.model["pre_attention_layers"](x)
        _, s = enc.pooler.forward_varlen(h, off, return_scores=True, backend="torch")
    seg = torch.repeat_interleave(torch.arange(2), off.diff())
    w = torch.cat([s[seg == i].softmax(0) for i in range(2)])
    sums = torch.zeros(2, *w.shape[1:]).index_add_(0, seg, w)
    torch.testing.assert_close(sums, torch.ones_like(sums))


@pytest.mark.parametrize("kind", ["mean", "abmil", "feather"])
def test_permuting_the_patches_does_not_change_the_embedding(kind):
    enc = tiny(kind)
    xs, x, off = slides(np.random.default_rng(3), [13, 8], 12)
    perm = torch.cat([torch.randperm(13), 13 + torch.randperm(8)])
    with torch.no_grad():
        torch.testing.assert_close(enc.forward_varlen(x[perm], off), enc.forward_varlen(x, off),
                                   rtol=1e-5, atol=1e-6)  # fmt: skip


def test_feather_training_dropout_path_pools_per_slide():
    enc = FeatherSlideEncoder(12, embed_dim=8, attn_dim=6, dropout=0.0).train()
    enc.dropout = 0.5  # the module's dropout layers stay at p=0: the per-segment path is exact
    _, x, off = slides(np.random.default_rng(4), [6, 2], 12)
    out, w = enc.forward_varlen(x, off, return_weights=True)
    ref = enc.eval().forward_varlen(x, off, backend="torch")
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    assert w.shape == (8, 1)


def test_bad_inputs_name_what_was_expected():
    enc = tiny("mean")
    with pytest.raises(InvalidArgumentError, match=r"features: expected a \[sum N_i, 12\]"):
        enc.forward_varlen(torch.zeros(4, 5), torch.tensor([0, 4]))
    with pytest.raises(InvalidArgumentError, match="offsets: expected to run from 0 to the number"):
        enc.forward_varlen(torch.zeros(4, 12), torch.tensor([0, 3]))
    with pytest.raises(InvalidArgumentError, match="in_dim: expected a positive int"):
        MeanSlideEncoder(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(InvalidArgumentError, match="in_dim: expected the patch feature"):
            load_slide_encoder("abmil")


@pytest.mark.parametrize("name", ["feather", "abmil"])
def test_kernel_path_matches_the_torch_path(name, kernel_device, kernel_sizes):
    """The fused varlen ABMIL kernel (CUDA, or Triton's interpreter on CPU) pools the same."""
    pytest.importorskip("triton")
    d, k = kernel_sizes["dim"], kernel_sizes["hidden"]
    torch.manual_seed(5)
    if name == "feather":
        enc = FeatherSlideEncoder(d, embed_dim=d, attn_dim=k, n_heads=2).eval()
    else:
        enc = ABMILSlideEncoder(d, hidden=k, n_heads=1, gated=True).eval()
    enc = enc.to(kernel_device)
    lengths = [kernel_sizes["bag_max"], 1, kernel_sizes["bag_max"] // 2]
    x = torch.randn(sum(lengths), d, device=kernel_device)
    off = torch.tensor([0, *np.cumsum(lengths)], device=kernel_device)
    with torch.no_grad():
        if name == "feather":
            fused = enc.forward_varlen(x, off, backend="triton")
            ref = enc.forward_varlen(x, off, backend="torch")
        else:
            h = enc.model["pre_attention_layers"](x)
            fused = enc.pooler.forward_varlen(h, off, backend="triton")
            ref = enc.pooler.forward_varlen(h, off, backend="torch")
    torch.testing.assert_close(fused, ref, rtol=2e-4, atol=2e-4)
