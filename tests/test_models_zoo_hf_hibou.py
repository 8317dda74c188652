"""Hibou-L and Hibou-B (tumorboard.models._zoo.hf_vits), DINOv2 with registers in the HF layout.

Oracles, written here from the published facts (not from the module):

* the key/shape table of the published ``model.safetensors``: the ``Dinov2ModelWithRegisters``
  layout of histai/hibou-b ``config.json``@5cc6343 (768 wide, 12 layers, 12 heads, SwiGLU with
  ``mlp_ratio`` 4, 4 registers, 224 px at patch 14) and the same at ViT-L/14 for Hibou-L;
* the parameter counts the Hugging Face pages give: Hibou-B 85.7 M, Hibou-L 304 M;
* ``transformers``' ``Dinov2WithRegistersModel`` (the same blocks, keys after mapping back to the
  checkpoint layout), whose ``pooler_output`` is TRIDENT's Hibou embedding, on a tiny config;
* PIL's bicubic resize and numpy normalisation with TRIDENT's ``HIBOU_MEAN`` / ``HIBOU_STD``.

Real-size models are built on the meta device only.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tumorboard import models  # noqa: E402
from tumorboard.errors import InvalidArgumentError  # noqa: E402
from tumorboard.models._zoo.hf_vits import HIBOU_B  # noqa: E402
from tumorboard.models.hf_vit import HFVisionTransformer  # noqa: E402
from tumorboard.models.weights import CheckpointKeyError  # noqa: E402

MEAN = (0.7068, 0.5755, 0.722)
STD = (0.195, 0.2316, 0.1816)


def hibou_table(*, dim: int, depth: int, swiglu: int) -> dict[str, tuple[int, ...]]:
    """Keys and shapes of a Hibou ``model.safetensors`` (224 px, patch 14, 4 registers)."""
    t = {
        "embeddings.cls_token": (1, 1, dim),
        "embeddings.mask_token": (1, dim),
        "embeddings.register_tokens": (1, 4, dim),
        "embeddings.position_embeddings": (1, 1 + 16 * 16, dim),
        "embeddings.patch_embeddings.projection.weight": (dim, 3, 14, 14),
        "embeddings.patch_embeddings.projection.bias": (dim,),
        "layernorm.weight": (dim,),
        "layernorm.bias": (dim,),
    }
    for i in range(depth):
        b = f"encoder.layer.{i}."
        for norm in ("norm1", "norm2"):
            t[f"{b}{norm}.weight"] = t[f"{b}{norm}.bias"] = (dim,)
        for proj in ("attention.attention.query", "attention.attention.key",
                     "attention.attention.value", "attention.output.dense"):  # fmt: skip
            t[f"{b}{proj}.weight"], t[f"{b}{proj}.bias"] = (dim, dim), (dim,)
        t[f"{b}layer_scale1.lambda1"] = t[f"{b}layer_scale2.lambda1"] = (dim,)
        t[f"{b}mlp.weights_in.weight"] = (2 * swiglu, dim)
        t[f"{b}mlp.weights_in.bias"] = (2 * swiglu,)
        t[f"{b}mlp.weights_out.weight"], t[f"{b}mlp.weights_out.bias"] = (dim, swiglu), (dim,)
    return t


#: name -> (published table, parameter count, the page's rounded count in millions)
FULL = {
    "hibou-b": (hibou_table(dim=768, depth=12, swiglu=2048), 85_741_056, 85.7),
    "hibou-l": (hibou_table(dim=1024, depth=24, swiglu=2736), 303_659_264, 304),
}


def shapes(module) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


@pytest.mark.parametrize("name", sorted(FULL))
def test_full_size_key_set_shapes_and_parameter_count(name):
    table, count, page = FULL[name]
    with torch.device("meta"):
        m = models.build(name)
    assert shapes(m) == table
    n = sum(p.numel() for p in m.parameters())
    assert n == count and round(n / 1e6, 1 if page < 100 else 0) == page


def test_full_size_matches_transformers_dinov2_with_registers():
    transformers = pytest.importorskip("transformers")
    from test_models_zoo_hf import checkpoint_shapes, hf_config

    for name in FULL:
        with torch.device("meta"):
            ours = models.build(name)
            hf = transformers.Dinov2WithRegistersModel(hf_config(ours.config))
        assert checkpoint_shapes(hf, "dinov2") == shapes(ours), name


# --- a tiny Hibou (same class, same options) against the oracle ------------------------------

TINY = replace(HIBOU_B, hidden_size=48, num_hidden_layers=2, num_attention_heads=4, mlp_hidden=192)


def randomized(seed: int = 0) -> HFVisionTransformer:
    torch.manual_seed(seed)
    m = HFVisionTransformer(TINY, name="hibou-tiny", mean=MEAN, std=STD, interpolation="bicubic")
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * 0.2)
    return m.eval()


def test_tiny_hibou_is_transformers_pooler_output(tmp_path):
    pytest.importorskip("transformers")
    from test_models_zoo_hf import load_into_transformers

    ours = randomized()
    hf, info = load_into_transformers(ours, tmp_path)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    x = torch.randn(3, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = hf(pixel_values=x)
        got, tokens = ours(x), ours.forward_features(x)
    assert got.shape == (3, 48) and tokens.shape == (3, 1 + 4 + 256, 48)
    torch.testing.assert_close(got, out.pooler_output, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tokens, out.last_hidden_state, rtol=1e-5, atol=1e-5)


def test_tiny_hibou_pools_the_class_token_by_hand():
    # [CLS, 4 registers, patches]: the embedding is the first final-norm token; the registers
    # (no position embedding, inserted after it) change the CLS through attention only.
    m = randomized()
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        emb = m.embeddings
        patches = emb.patch_embeddings.projection(x).flatten(2).transpose(1, 2)
        seq = torch.cat([emb.cls_token.expand(2, -1, -1), patches], 1) + emb.position_embeddings
        seq = torch.cat([seq[:, :1], emb.register_tokens.expand(2, -1, -1), seq[:, 1:]], 1)
        for layer in m.encoder.layer:
            seq = layer(seq)
        want = torch.nn.functional.layer_norm(
            seq, (48,), m.layernorm.weight, m.layernorm.bias, 1e-6
        )[:, 0]
        torch.testing.assert_close(m(x), want)
        # the register tokens take part: zeroing them changes the CLS embedding
        emb.register_tokens.zero_()
        assert not torch.allclose(m(x), want)


# --- strict loading with readable errors -----------------------------------------------------


def _zero_file(tmp_path, name, edit):
    with torch.device("meta"):
        ref = models.build(name)
    state = {k: torch.zeros((), dtype=v.dtype).expand(v.shape) for k, v in ref.state_dict().items()}
    edit(state)
    path = tmp_path / f"{name}.pt"
    torch.save(state, path)
    return path


def test_a_checkpoint_without_registers_is_refused_by_name(tmp_path):
    path = _zero_file(tmp_path, "hibou-l", lambda s: s.pop("embeddings.register_tokens"))
    with pytest.raises(CheckpointKeyError) as err:
        models.load("hibou_l", weights=path, device="cpu")
    assert set(err.value.missing) == {"embeddings.register_tokens"} and not err.value.unexpected
    assert "embeddings.register_tokens" in str(err.value) and "hibou-l.pt" in str(err.value)


def test_transformers5_swiglu_names_and_a_gelu_mlp_are_refused(tmp_path):
    def rename(state):
        w = state.pop("encoder.layer.0.mlp.weights_in.weight")
        state["encoder.layer.0.mlp.gate_proj.weight"] = w[:2048]
        state["encoder.layer.0.mlp.up_proj.weight"] = w[2048:]

    path = _zero_file(tmp_path, "hibou-b", rename)
    with pytest.raises(CheckpointKeyError) as err:
        models.load("hibou-b", weights=path, device="cpu")
    assert set(err.value.missing) == {"encoder.layer.0.mlp.weights_in.weight"}
    assert set(err.value.unexpected) == {
        "encoder.layer.0.mlp.gate_proj.weight",
        "encoder.layer.0.mlp.up_proj.weight",
    }

    def gelu(state):  # a Dinov2 file with the GELU MLP of the same ratio: wrong widths
        state["encoder.layer.1.mlp.weights_out.weight"] = torch.zeros(()).expand(768, 3072)

    path = _zero_file(tmp_path, "hibou-b", gelu)
    with pytest.raises(CheckpointKeyError, match="encoder.layer.1.mlp.weights_out.weight"):
        models.load("hibou-b", weights=path, device="cpu")


# --- transform, registry row, embedding engine -----------------------------------------------


def test_transform_is_pil_bicubic_224_with_hibou_statistics():
    from PIL import Image
    from tumorboard.slides import preprocess_patches

    info = models.info("hibou_l")
    assert (info.image_size, info.interpolation, info.mean, info.std) == (224, "bicubic", MEAN, STD)
    rng = np.random.default_rng(5)
    patches = rng.integers(0, 256, (3, 256, 256, 3), dtype=np.uint8)
    got = preprocess_patches(patches, size=info.image_size, mean=info.mean, std=info.std,
                             interpolation=info.interpolation, threads=1)  # fmt: skip
    mean, std = np.float32(MEAN), np.float32(STD)
    for p, g in zip(patches, got, strict=True):
        # torchvision Resize(224, BICUBIC, antialias=True) on a PIL image is PIL's resize
        a = np.asarray(Image.fromarray(p).resize((224, 224), Image.BICUBIC), np.float32)
        np.testing.assert_array_equal(g, ((a / np.float32(255) - mean) / std).transpose(2, 0, 1))


def test_registry_rows():
    large, base = models.info("hibou_l"), models.info("HIBOU-B")
    assert (large.name, large.trident_name, base.name, base.trident_name) == (
        "hibou-l", "hibou_l", "hibou-b", None
    )  # fmt: skip
    assert (large.embed_dim, base.embed_dim) == (1024, 768)
    for row in (large, base):
        assert row.kind == "encoder" and row.gpu_dtype == torch.float32
        assert (row.magnification, row.patch_size, row.license) == (20.0, 224, "Apache-2.0")
        assert row.pooling.startswith("class token") and "registers dropped" in row.pooling
    assert large.gated is True and "histai/hibou-L" in large.weights_source


def test_image_size_option():
    with torch.device("meta"):
        assert models.build("hibou-l", image_size=448).image_size == 448
    with pytest.raises(InvalidArgumentError, match="multiple of the patch size 14"):
        models.build("hibou-b", image_size=230)


def test_embedding_without_weights_is_refused_even_without_a_trident_name(tmp_path):
    pytest.importorskip("tifffile")
    from test_slides_readers import write_test_slide
    from tumorboard.embed import embed_slides

    slide = tmp_path / "a.tif"
    write_test_slide(slide)
    for name in ("hibou-b", "hibou_l"):
        with pytest.raises(InvalidArgumentError, match="needs its weights.*histai"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                embed_slides([slide], model=name, out=tmp_path / "out", progress=False)


def test_a_tiny_hibou_embeds_a_slide_in_tridents_layout(tmp_path):
    # The full-size models embed through the same path (random weights: tens of seconds on CPU);
    # a tiny Hibou of the same class, options, statistics and filter runs here.
    pytest.importorskip("tifffile")
    from test_slides_readers import write_test_slide
    from tumorboard.embed import EmbedOptions, embed_slides, read_features
    from tumorboard.slides import TilingOptions

    slide = tmp_path / "a.tif"
    write_test_slide(slide)
    options = EmbedOptions(batch_size=16, device="cpu")
    rep = embed_slides([slide], model=randomized(), encoder_name="hibou-tiny",
                       out=tmp_path / "o", tiling=TilingOptions(threads=1), options=options,
                       progress=False)  # fmt: skip
    assert rep.ok and len(rep.done) == 1, rep.summary()
    feats, coords, attrs = read_features(rep.done[0].features_path)
    assert feats.shape == (len(coords), 48) and len(coords) > 0 and np.isfinite(feats).all()
    assert rep.done[0].features_path.parent.name == "features_hibou-tiny"
