"""Every encoder family runs through what UNI2-h has: ONNX, the uint8 input path, resume, FP8.

One tiny random-weight encoder per architecture family (``tumorboard.models._zoo.families``:
timm ViT with and without registers and CLS+mean pooling, CONCH v1.5's attentional pooler, the
Hugging Face ViTModel / Dinov2 / Dinov2-with-registers / Midnight layouts, KEEP's head and L2
norm, Swin with its conv stem, the truncated ResNet-50).

Oracles: the torch module itself for its ONNX export run by onnxruntime (CPU provider, within
1e-4); the engine's float32 path for its uint8 path (patches shipped as uint8 and normalised by
the backend, as on CUDA: equal features); the stored features' bytes and the refusal message
of the UNI2-h rerun tests (``test_embed_jobs``) for resume; the float32 module for the emulated
FP8 one (cosine, the documented whole-model floor of ``test_embed_compile``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("h5py")
pytest.importorskip("openslide")
pytest.importorskip("tifffile")

from test_slides_readers import write_test_slide  # noqa: E402
from tumorboard import models  # noqa: E402
from tumorboard.embed import (  # noqa: E402
    EmbedOptions,
    _backends,
    _engine,
    embed_slides,
    read_features,
)
from tumorboard.errors import InvalidArgumentError  # noqa: E402
from tumorboard.models._zoo.families import FAMILIES, family_encoder  # noqa: E402
from tumorboard.models.fp8 import Fp8Linear, fp8_linears, quantize_fp8  # noqa: E402
from tumorboard.slides import TilingOptions  # noqa: E402

#: The whole-model FP8 floor of test_embed_compile (random blocks compound the rounding).
FP8_MODEL_COSINE = 0.98


def scrambled(family: str) -> torch.nn.Module:
    """Build the family's tiny encoder with every parameter moved off its init."""
    m = family_encoder(family)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    return m


@pytest.fixture(scope="module")
def slide(tmp_path_factory):
    """Write a 768 x 512 px slide at 20x: 3 x 2 patches of 256 px without segmentation."""
    path = tmp_path_factory.mktemp("families") / "case.tif"
    img = np.random.default_rng(0).integers(0, 256, (512, 768, 3), dtype=np.uint8)
    write_test_slide(path, img, levels=2)
    return path


@pytest.mark.parametrize("family", FAMILIES)
def test_onnx_export_matches_torch(family, tmp_path):
    pytest.importorskip("onnxruntime")
    m = scrambled(family)
    path = models.export_onnx(m, tmp_path / f"{family}.onnx")
    enc = models.OnnxEncoder(path, device="cpu")
    s = m.image_size
    assert (enc.embed_dim, enc.image_size, enc.interpolation) == (m.embed_dim, s, m.interpolation)
    assert enc.mean == pytest.approx(m.mean) and enc.std == pytest.approx(m.std)
    for batch in (1, 3):  # the traced batch is 2: the batch axis is dynamic
        x = torch.randn(batch, 3, s, s, generator=torch.Generator().manual_seed(batch))
        with torch.no_grad():
            want = m(x)
        got = enc(x.numpy())
        assert got.shape == (batch, m.embed_dim)
        np.testing.assert_allclose(got, want.numpy(), atol=1e-4, rtol=1e-4)
        assert float(want.abs().max()) > 1e-2


def test_onnx_export_of_registers_at_another_input_size(tmp_path):
    """Dinov2-with-registers resamples its grid with antialiased bicubic (no ONNX operator)."""
    pytest.importorskip("onnxruntime")
    from tumorboard.models.hf_vit import HFVisionTransformer

    small = scrambled("hf-dinov2-registers")
    m = HFVisionTransformer(small.config, name="regs", image_size=2 * small.image_size)
    m.load_state_dict(small.state_dict())
    enc = models.OnnxEncoder(models.export_onnx(m, tmp_path / "r.onnx"), device="cpu")
    x = torch.randn(2, 3, m.image_size, m.image_size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(enc(x.numpy()), want, atol=1e-4, rtol=1e-4)
    assert m.embeddings._pos_embed_fixed == {}  # nothing left fixed after the export


def _embed(slide, module, out, *, segmentation=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return embed_slides([slide], model=module, encoder_name=module.name, out=out,
                            tiling=TilingOptions(segmentation=segmentation, seg_mpp=4.0,
                                                 threads=1),
                            options=EmbedOptions(batch_size=4, device="cpu", dtype="fp32"),
                            progress=False)  # fmt: skip


@pytest.mark.parametrize("family", FAMILIES)
def test_uint8_path_resume_and_refusal(family, slide, tmp_path, monkeypatch):
    m = scrambled(family)
    first = _embed(slide, m, tmp_path / "f32")
    assert first.ok and [r.status for r in first.results] == ["done"], first.summary()
    path = first.results[0].features_path
    assert path.parent.name == f"features_{m.name}"
    feats, coords, _ = read_features(path)
    assert feats.shape == (6, m.embed_dim) == (len(coords), m.embed_dim)
    before = path.read_bytes()

    # the uint8 path of CUDA runs (patches shipped as uint8, normalised by the backend), forced
    # on the CPU: the producer makes uint8 batches and TorchBackend normalises them
    produce, normalise, seen = _engine._produce, _backends.normalize_uint8, []

    def produce_uint8(*args, **kw):
        return produce(*args, **{**kw, "patch_dtype": "uint8"})

    def counting(x, mean, std):
        seen.append(x.dtype)
        return normalise(x, mean, std)

    with monkeypatch.context() as mp:
        mp.setattr(_engine, "_produce", produce_uint8)
        mp.setattr(_backends, "normalize_uint8", counting)
        u8 = _embed(slide, m, tmp_path / "u8")
    assert u8.ok and seen == [torch.uint8, torch.uint8], (u8.summary(), seen)
    got, got_coords, _ = read_features(u8.results[0].features_path)
    np.testing.assert_array_equal(got_coords, coords)
    np.testing.assert_allclose(got, feats, atol=1e-5, rtol=0)

    again = _embed(slide, m, tmp_path / "f32")  # resume: complete, same settings
    assert [r.status for r in again.results] == ["skipped"]
    other = _embed(slide, m, tmp_path / "f32", segmentation="bwh_biopsy")  # other tiling
    (res,) = other.results
    assert res.status == "failed" and not other.ok
    assert str(path) in res.error and "segmentation None (stored) vs {" in res.error
    assert path.read_bytes() == before  # nothing was overwritten


@pytest.mark.parametrize("family", FAMILIES)
def test_fp8_picks_each_familys_block_linears(family):
    m = scrambled(family)
    names = fp8_linears(m)
    if family == "resnet-trunk":  # a CNN: no transformer block linears
        assert names == []
        with pytest.raises(InvalidArgumentError, match="ResNetTrunk has no 'blocks'"):
            quantize_fp8(m, emulate=True)
        return
    assert names and all(".attn" in n or "attention" in n or "mlp" in n or "intermediate" in n
                         or ".output." in n for n in names)  # fmt: skip
    for head in ("attn_pool_contrast", "visual_head", "downsample"):  # outside the blocks
        assert not any(head in n for n in names)
    q = quantize_fp8(m, emulate=True)
    assert sum(isinstance(x, Fp8Linear) for x in q.modules()) == len(fp8_linears(m, emulate=True))
    x = torch.randn(3, 3, m.image_size, m.image_size, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        cos = torch.nn.functional.cosine_similarity(m(x), q(x), dim=-1)
    assert float(cos.min()) >= FP8_MODEL_COSINE


def test_fp8_leaves_out_linears_scaled_mm_cannot_take():
    """Virchow's SwiGLU fc2 takes 3416 features (not a multiple of 16): it stays in bf16."""
    with torch.device("meta"):
        virchow = models.build("virchow")
        resnet = models.build("resnet50")
    names = fp8_linears(virchow)
    assert len(names) == 32 * 3 and not any(n.endswith("mlp.fc2") for n in names)
    assert len(fp8_linears(virchow, emulate=True)) == 32 * 4
    assert fp8_linears(resnet) == []
