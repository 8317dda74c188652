"""KEEP's image tower (tumorboard.models._zoo.keep), TRIDENT's ``keep`` encoder.

Oracles, written here from the published facts (not from the module):

* the key/shape table of the image side of KEEP's checkpoint: timm ``vit_large_patch16_224``
  (LayerScale, ``num_classes=0``) under ``visual.``, ``visual_head.0`` (1024 -> 768) and
  ``visual_head.2`` (768 -> 768), beside a BERT under ``text.`` and ``logit_scale``
  (MAGIC-AI4Med/KEEP ``quick_start/keep_inference.py``); the released file is 1.66 GB of
  float32, which the vision tower, head and a PubMedBERT-base text tower account for;
* ``encode_image`` written out by hand: final-norm class token, ``Linear``, exact GELU,
  ``Linear``, L2 normalisation;
* PIL's bicubic resize to 224 and ImageNet statistics (``Resize(224, BICUBIC)``,
  ``CenterCrop(224)`` on a square patch).

Real-size models are built on the meta device only.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from test_models_zoo_timm_b import timm_table  # noqa: E402
from tumorboard import models  # noqa: E402
from tumorboard.models._zoo.keep import KeepVision  # noqa: E402
from tumorboard.models.vit import ViTConfig  # noqa: E402
from tumorboard.models.weights import CheckpointKeyError  # noqa: E402

IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))


def keep_table() -> dict[str, tuple[int, ...]]:
    visual = timm_table(dim=1024, depth=24, patch=16, n_pos=197, hidden=4096, layerscale=True)
    t = {f"visual.{k}": v for k, v in visual.items()}
    t.update({
        "visual_head.0.weight": (768, 1024), "visual_head.0.bias": (768,),
        "visual_head.2.weight": (768, 768), "visual_head.2.bias": (768,),
    })  # fmt: skip
    return t


def shapes(module) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


def test_full_size_key_set_shapes_and_parameter_count():
    with torch.device("meta"):
        m = models.build("keep")
    assert shapes(m) == keep_table()
    n = sum(p.numel() for p in m.parameters())
    assert n == 303_350_784 + 1024 * 768 + 768 + 768 * 768 + 768
    # + PubMedBERT-base (109.48 M with its pooler) + logit_scale = the 1.66 GB float32 file
    assert round((n + 109_482_240 + 1) * 4 / 1e9, 2) == 1.66


# --- the tower on a tiny config against encode_image by hand ---------------------------------

TINY = ViTConfig(image_size=32, patch_size=16, embed_dim=32, depth=2, num_heads=4, mlp_hidden=64,
                 init_values=1e-5)  # fmt: skip


def randomized(seed: int = 0) -> KeepVision:
    torch.manual_seed(seed)
    m = KeepVision(name="keep-tiny", config=TINY, projection_dim=24)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    return m.eval()


def test_tiny_keep_is_encode_image_by_hand():
    m = randomized()
    x = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        cls = m.visual.forward_features(x)[:, 0]  # timm global_pool="token", num_classes=0
        h0, h2 = m.visual_head[0], m.visual_head[2]
        z = F.gelu(cls @ h0.weight.T + h0.bias) @ h2.weight.T + h2.bias
        want = z / z.norm(dim=-1, keepdim=True)
        got = m(x)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got.norm(dim=-1), torch.ones(3))
    assert m.embed_dim == 24 and got.shape == (3, 24)


# --- loading a full KEEP checkpoint ----------------------------------------------------------


def _full_checkpoint(tiny: KeepVision, *, layerscale_name: str = "gamma") -> dict:
    state = {k: v.clone() for k, v in tiny.state_dict().items()}
    for k in [k for k in state if k.endswith(".gamma")]:
        state[k[: -len("gamma")] + layerscale_name] = state.pop(k)
    state["text.embeddings.word_embeddings.weight"] = torch.zeros(10, 8)
    state["text.pooler.dense.bias"] = torch.zeros(8)
    state["logit_scale"] = torch.tensor(3.2)
    return state


@pytest.mark.parametrize("layerscale_name", ["gamma", "weight"])
def test_the_text_tower_is_dropped_and_both_layerscale_names_load(layerscale_name):
    source = randomized()
    target = KeepVision(name="keep-tiny", config=TINY, projection_dim=24)
    state = target.adapt_state_dict(_full_checkpoint(source, layerscale_name=layerscale_name))
    target.load_state_dict(state, strict=True)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(target.eval()(x), source(x))


def test_an_unknown_or_missing_key_is_refused_readably(tmp_path):
    with torch.device("meta"):
        ref = models.build("keep")
    state = {k: torch.zeros((), dtype=v.dtype).expand(v.shape) for k, v in ref.state_dict().items()}
    state["text.encoder.layer.0.output.dense.weight"] = torch.zeros(()).expand(768, 3072)
    state["logit_scale"] = torch.zeros(())
    del state["visual_head.2.bias"]
    state["visual.head.weight"] = torch.zeros(()).expand(1000, 1024)  # a classifier: not KEEP's
    path = tmp_path / "keep.bin"
    torch.save(state, path)
    with pytest.raises(CheckpointKeyError) as err:
        models.load("keep", weights=path, device="cpu")
    assert set(err.value.missing) == {"visual_head.2.bias"}
    assert set(err.value.unexpected) == {"visual.head.weight"}
    assert "visual_head.2.bias" in str(err.value) and "keep.bin" in str(err.value)


# --- transform, registry row, embedding ------------------------------------------------------


def test_transform_is_pil_bicubic_224_with_imagenet_statistics():
    from PIL import Image
    from tumorboard.slides import preprocess_patches

    info = models.info("KEEP")
    assert (info.image_size, info.interpolation) == (224, "bicubic")
    assert (info.mean, info.std) == IMAGENET
    patches = np.random.default_rng(9).integers(0, 256, (2, 256, 256, 3), dtype=np.uint8)
    got = preprocess_patches(patches, size=224, mean=info.mean, std=info.std,
                             interpolation="bicubic", threads=1)  # fmt: skip
    mean, std = np.float32(IMAGENET[0]), np.float32(IMAGENET[1])
    for p, g in zip(patches, got, strict=True):
        a = np.asarray(Image.fromarray(p).resize((224, 224), Image.BICUBIC), np.float32)
        np.testing.assert_array_equal(g, ((a / np.float32(255) - mean) / std).transpose(2, 0, 1))


def test_registry_row():
    row = models.info("keep")
    assert (row.name, row.trident_name, row.embed_dim, row.gpu_dtype) == (
        "keep", "keep", 768, torch.float16
    )  # fmt: skip
    assert (row.license, row.gated, row.magnification, row.patch_size) == ("MIT", False, 20.0, 256)
    assert "Astaxanthin/KEEP" in row.weights_source and "L2" in row.pooling
    with torch.device("meta"):
        m = models.build("keep", image_size=448)
    assert (m.image_size, m.mean, m.std, m.interpolation) == (448, *IMAGENET, "bicubic")


def test_a_tiny_keep_embeds_a_slide_with_unit_norm_features(tmp_path):
    pytest.importorskip("tifffile")
    from test_slides_readers import write_test_slide
    from tumorboard.embed import EmbedOptions, embed_slides, read_features
    from tumorboard.slides import TilingOptions

    slide = tmp_path / "a.tif"
    write_test_slide(slide)
    tiny = KeepVision(name="keep-tiny", config=TINY, projection_dim=24, image_size=224)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = embed_slides([slide], model=tiny.eval(), encoder_name="keep-tiny",
                           out=tmp_path / "o", tiling=TilingOptions(threads=1),
                           options=EmbedOptions(batch_size=16, device="cpu"),
                           progress=False)  # fmt: skip
    assert rep.ok and len(rep.done) == 1, rep.summary()
    feats, coords, _ = read_features(rep.done[0].features_path)
    assert feats.shape == (len(coords), 24) and len(coords) > 0
    np.testing.assert_allclose(np.linalg.norm(feats, axis=1), 1.0, rtol=1e-3)
