"""kaiko.ai Midnight-12k (tumorboard.models._zoo.hf_vits), a DINOv2 ViT-g/14 in the HF layout.

Oracles, written here from the published facts (not from the module):

* the key/shape table of ``model.safetensors`` as public loaders of it read it: a ``Dinov2Model``
  (1536 wide, 40 layers, 24 heads, SwiGLU ``weights_in`` 2 x 4096, LayerScale, mask token, no
  registers) with a 1 + 37 x 37 position embedding, 1,136,480,768 parameters (the count an
  independent strict loader of the file states; "1.1 billion" in the model cards);
* ``transformers``' ``Dinov2Model``: the full-size key set after mapping back to the checkpoint
  layout, and on a tiny config of the same shape class (position grid larger than the input, as
  518 vs 224) its ``last_hidden_state``, pooled by hand as TRIDENT's ``cls_token`` and
  ``cls+mean`` return types and the model card's ``extract_classification_embedding`` do;
* PIL's bilinear resize (torchvision ``Resize(224)``; ``CenterCrop(224)`` is a no-op on the
  square result) and mean = std = 0.5.

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
from tumorboard.models._zoo.hf_vits import MIDNIGHT12K  # noqa: E402
from tumorboard.models.hf_vit import HFVisionTransformer  # noqa: E402
from tumorboard.models.weights import CheckpointKeyError  # noqa: E402


def midnight_table() -> dict[str, tuple[int, ...]]:
    dim, hidden = 1536, 4096
    t = {
        "embeddings.cls_token": (1, 1, dim),
        "embeddings.mask_token": (1, dim),
        "embeddings.position_embeddings": (1, 1 + 37 * 37, dim),
        "embeddings.patch_embeddings.projection.weight": (dim, 3, 14, 14),
        "embeddings.patch_embeddings.projection.bias": (dim,),
        "layernorm.weight": (dim,),
        "layernorm.bias": (dim,),
    }
    for i in range(40):
        b = f"encoder.layer.{i}."
        for norm in ("norm1", "norm2"):
            t[f"{b}{norm}.weight"] = t[f"{b}{norm}.bias"] = (dim,)
        for proj in ("attention.attention.query", "attention.attention.key",
                     "attention.attention.value", "attention.output.dense"):  # fmt: skip
            t[f"{b}{proj}.weight"], t[f"{b}{proj}.bias"] = (dim, dim), (dim,)
        t[f"{b}layer_scale1.lambda1"] = t[f"{b}layer_scale2.lambda1"] = (dim,)
        t[f"{b}mlp.weights_in.weight"], t[f"{b}mlp.weights_in.bias"] = (2 * hidden, dim), (8192,)
        t[f"{b}mlp.weights_out.weight"], t[f"{b}mlp.weights_out.bias"] = (dim, hidden), (dim,)
    return t


def shapes(module) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


def test_full_size_key_set_shapes_and_parameter_count():
    with torch.device("meta"):
        m = models.build("midnight12k")
    assert shapes(m) == midnight_table()
    assert sum(p.numel() for p in m.parameters()) == 1_136_480_768
    assert (m.embed_dim, m.image_size) == (1536, 224)


def test_full_size_matches_transformers_dinov2():
    transformers = pytest.importorskip("transformers")
    from test_models_zoo_hf import checkpoint_shapes, hf_config

    with torch.device("meta"):
        ours = models.build("midnight12k")
        hf = transformers.Dinov2Model(hf_config(ours.config))
    assert checkpoint_shapes(hf, "dinov2") == shapes(ours)


# --- a tiny Midnight (grid 9 x 9 stored, 4 x 4 at the input) against the oracle --------------

TINY = replace(MIDNIGHT12K, image_size=63, patch_size=7, hidden_size=48, num_hidden_layers=2,
               num_attention_heads=4, mlp_hidden=192)  # fmt: skip


def randomized(pooling: str = "cls", seed: int = 0) -> HFVisionTransformer:
    torch.manual_seed(seed)
    m = HFVisionTransformer(replace(TINY, pooling=pooling), name="midnight-tiny", image_size=28,
                            mean=(0.5,) * 3, std=(0.5,) * 3)  # fmt: skip
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * 0.2)
    return m.eval()


def test_tiny_midnight_matches_transformers_at_a_smaller_input(tmp_path):
    pytest.importorskip("transformers")
    from test_models_zoo_hf import load_into_transformers

    cls, both = randomized("cls"), randomized("cls+mean")
    hf, info = load_into_transformers(cls, tmp_path)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    x = torch.randn(3, 3, 28, 28, generator=torch.Generator().manual_seed(1))  # 9x9 -> 4x4 grid
    with torch.no_grad():
        hidden = hf(pixel_values=x).last_hidden_state
        tokens = cls.forward_features(x)
        got_cls, got_both = cls(x), both(x)
    assert hidden.shape == tokens.shape == (3, 1 + 16, 48)
    torch.testing.assert_close(tokens, hidden, rtol=1e-5, atol=1e-5)
    # TRIDENT: return_type "cls_token" -> out[:, 0]; "cls+mean" -> cat(out[:, 0], out[:, 1:].mean)
    torch.testing.assert_close(got_cls, hidden[:, 0], rtol=1e-5, atol=1e-5)
    want = torch.cat([hidden[:, 0], hidden[:, 1:].mean(1)], dim=-1)
    torch.testing.assert_close(got_both, want, rtol=1e-5, atol=1e-5)


def test_position_grid_is_resampled_bicubic_without_antialiasing():
    m = randomized()
    pos = m.embeddings.position_embeddings
    grid = pos[:, 1:].reshape(1, 9, 9, 48).permute(0, 3, 1, 2)
    want = torch.nn.functional.interpolate(grid, size=(4, 4), mode="bicubic", align_corners=False)
    want = torch.cat([pos[:, :1], want.permute(0, 2, 3, 1).reshape(1, 16, 48)], dim=1)
    with torch.no_grad():
        torch.testing.assert_close(m.embeddings.position_embeddings_for_grid(4, 4), want)


# --- strict loading, transform, registry, options --------------------------------------------


def test_a_224_grid_or_a_register_checkpoint_is_refused(tmp_path):
    with torch.device("meta"):
        ref = models.build("midnight12k")
    state = {k: torch.zeros((), dtype=v.dtype).expand(v.shape) for k, v in ref.state_dict().items()}
    state["embeddings.position_embeddings"] = torch.zeros(()).expand(1, 257, 1536)
    state["embeddings.register_tokens"] = torch.zeros(()).expand(1, 4, 1536)
    path = tmp_path / "midnight.pt"
    torch.save(state, path)
    with pytest.raises(CheckpointKeyError) as err:
        models.load("midnight12k", weights=path, device="cpu")
    message = str(err.value)
    assert set(err.value.unexpected) == {"embeddings.register_tokens"}
    assert "embeddings.position_embeddings" in message and "midnight.pt" in message


def test_transform_is_pil_bilinear_224_with_half_statistics():
    from PIL import Image
    from tumorboard.slides import preprocess_patches

    info = models.info("MIDNIGHT12K")
    assert (info.image_size, info.interpolation, info.mean, info.std) == (
        224, "bilinear", (0.5,) * 3, (0.5,) * 3
    )  # fmt: skip
    patches = np.random.default_rng(7).integers(0, 256, (2, 256, 256, 3), dtype=np.uint8)
    got = preprocess_patches(patches, size=224, mean=info.mean, std=info.std,
                             interpolation="bilinear", threads=1)  # fmt: skip
    for p, g in zip(patches, got, strict=True):
        a = np.asarray(Image.fromarray(p).resize((224, 224), Image.BILINEAR), np.float32)
        want = ((a / np.float32(255) - np.float32(0.5)) / np.float32(0.5)).transpose(2, 0, 1)
        np.testing.assert_array_equal(g, want)


def test_registry_row_and_options():
    row = models.info("midnight12k")
    assert (row.trident_name, row.embed_dim, row.gpu_dtype) == ("midnight12k", 1536, torch.float16)
    assert (row.license, row.gated, row.magnification, row.patch_size) == ("MIT", False, 20.0, 224)
    assert "kaiko-ai/midnight" in row.weights_source and row.pooling.startswith("class token")
    with torch.device("meta"):
        assert models.build("midnight12k", pooling="cls+mean").embed_dim == 3072
        assert models.build("midnight12k", image_size=392).image_size == 392
    with pytest.raises(InvalidArgumentError, match="pooling: expected 'cls' or 'cls\\+mean'"):
        models.build("midnight12k", pooling="mean")
    with pytest.raises(InvalidArgumentError, match="multiple of the patch size 14"):
        models.build("midnight12k", image_size=230)


def test_a_tiny_midnight_embeds_a_slide_with_both_poolings(tmp_path):
    pytest.importorskip("tifffile")
    from test_slides_readers import write_test_slide
    from tumorboard.embed import EmbedOptions, embed_slides, read_features
    from tumorboard.slides import TilingOptions

    slide = tmp_path / "a.tif"
    write_test_slide(slide)
    options = EmbedOptions(batch_size=16, device="cpu")
    for pooling, width in (("cls", 48), ("cls+mean", 96)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rep = embed_slides([slide], model=randomized(pooling), encoder_name=f"mn-{width}",
                               out=tmp_path / "o", tiling=TilingOptions(threads=1),
                               options=options, progress=False)  # fmt: skip
        assert rep.ok and len(rep.done) == 1, rep.summary()
        feats, coords, _ = read_features(rep.done[0].features_path)
        assert feats.shape == (len(coords), width) and np.isfinite(feats).all()
