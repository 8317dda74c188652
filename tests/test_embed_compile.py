"""Compiled encoders, FP8 quantisation and uint8 host-to-device patches of the embedding engine.

Oracles: FP8 E4M3 rounding recomputed in numpy from the format's definition (Micikevicius et al.,
arXiv:2209.05433: 4 exponent bits with bias 7, 3 mantissa bits, subnormals below 2^-6, max 448)
and the scaled product in float64; hand-worked scales; the unquantised layer in float32 and
bfloat16 (cosine similarity); the eager encoder for the compiled one; the C++ float32
preprocessing for uint8 patches normalised by torch (bit for bit). On CUDA the same tests run
natively (FP8 through ``torch._scaled_mm`` where the GPU has FP8 tensor cores); on CPU an FP8
request is checked to be refused with a clear error.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("h5py")
pytest.importorskip("openslide")

from conftest import CUDA  # noqa: E402
from test_embed_jobs import cli as _cli  # noqa: E402
from test_slides_pipeline import PARAMS  # noqa: E402
from test_slides_readers import write_test_slide  # noqa: E402
from tumorboard import models, slides  # noqa: E402
from tumorboard.embed import (  # noqa: E402
    EmbedOptions,
    TorchBackend,
    _backends,  # noqa: E402
    embed_slides,
    normalize_uint8,
    read_features,
)
from tumorboard.errors import InvalidArgumentError  # noqa: E402
from tumorboard.models.fp8 import (  # noqa: E402
    E4M3_MAX,
    Fp8Linear,
    fp8_available,
    quantize_fp8,
    quantize_rowwise,
)

JOB = "20x_256px_0px_overlap"
DEVICE = "cuda" if CUDA else "cpu"
HAS_FP8 = fp8_available(DEVICE) is None
#: The documented floor of the cosine similarity of FP8 outputs to unquantised ones (models.fp8).
FP8_COSINE = 0.998
#: ... and of a whole random-weight uni2-tiny encoder at LayerScale 1 to the float32 one.
FP8_MODEL_COSINE = 0.98


def e4m3_round(v: np.ndarray) -> np.ndarray:
    """Round float64 values to the nearest E4M3 value (ties to even), saturating at 448."""
    a = np.abs(v)
    e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    e = np.maximum(e, -6.0)  # below 2^-6 the spacing is the subnormals' 2^-9
    step = 2.0 ** (e - 3)
    r = np.round(a / step) * step  # numpy rounds half to even
    return np.sign(v) * np.minimum(r, 448.0)


def fp8_oracle(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rowwise/per-channel scaled E4M3 product, from the definition, in float64."""
    sx = np.maximum(np.abs(x).max(axis=1, keepdims=True), 1e-12) / 448.0
    sw = np.maximum(np.abs(w).max(axis=1, keepdims=True), 1e-12) / 448.0
    # the layer divides in float32, as the oracle must to round the same values
    xq = e4m3_round((x.astype(np.float32) / sx.astype(np.float32)).astype(np.float64))
    wq = e4m3_round((w.astype(np.float32) / sw.astype(np.float32)).astype(np.float64))
    return (xq @ wq.T) * sx.astype(np.float32) * sw.astype(np.float32).T + b


def cosine_min(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a.float(), b.float(), dim=-1).min())


def test_rowwise_scales_hand_worked():
    x = torch.tensor([[0.5, -1.0, 2.0], [0.0, 0.0, 0.0], [3.0, 0.0, -448.0]])
    q, s = quantize_rowwise(x)
    assert q.dtype == torch.float8_e4m3fn and s.shape == (3, 1)
    # row 0: scale 2/448, values 112, -224, 448 are exact E4M3 numbers -> exact round trip
    assert float(s[0, 0]) == pytest.approx(2.0 / 448.0, rel=1e-7)
    assert q[0].float().tolist() == [112.0, -224.0, 448.0]
    torch.testing.assert_close(q[0].float() * s[0], x[0], rtol=1e-6, atol=0)
    assert q[1].float().tolist() == [0.0, 0.0, 0.0]  # an all-zero row stays zero (no NaN)
    assert float(s[2, 0]) == 1.0 and q[2].float().tolist() == [3.0, 0.0, -448.0]
    assert E4M3_MAX == float(torch.finfo(torch.float8_e4m3fn).max)


def test_e4m3_cast_matches_the_format_definition():
    g = np.random.default_rng(0)
    v = np.concatenate([g.normal(0, 50, 5000), g.normal(0, 0.01, 2000), [0.0, 1e-4, 440.0, 447.0]])
    got = torch.tensor(v, dtype=torch.float32).to(torch.float8_e4m3fn).double().numpy()
    np.testing.assert_array_equal(got, e4m3_round(v.astype(np.float32).astype(np.float64)))


@pytest.mark.parametrize("k, n", [(48, 144), (128, 48)])  # uni2-tiny's qkv and fc2
def test_emulated_fp8_linear_equals_the_oracle(k, n):
    g = torch.Generator().manual_seed(k)
    lin = torch.nn.Linear(k, n)
    x = torch.randn(37, k, generator=g) * 3
    got = Fp8Linear(lin, emulate=True)(x)
    want = fp8_oracle(x.double().numpy(), lin.weight.detach().double().numpy(),
                      lin.bias.detach().double().numpy())  # fmt: skip
    np.testing.assert_allclose(got.numpy(), want, rtol=2e-5, atol=2e-5)


# uni2-tiny's qkv; UNI2-h's qkv, proj, fc1 (packed SwiGLU) and fc2
@pytest.mark.parametrize(
    "k, n", [(48, 144), (1536, 4608), (1536, 1536), (1536, 8192), (4096, 1536)]
)
def test_fp8_linear_cosine_to_bf16(k, n):
    g = torch.Generator().manual_seed(n)
    lin = torch.nn.Linear(k, n)
    x = torch.randn(64, k, generator=g)
    with torch.no_grad():
        ref32 = lin(x)
        ref16 = torch.nn.functional.linear(x.bfloat16(), lin.weight.bfloat16(),
                                           lin.bias.bfloat16())  # fmt: skip
        got = Fp8Linear(lin, emulate=True)(x)
    assert cosine_min(got, ref32) >= FP8_COSINE
    assert cosine_min(got, ref16) >= FP8_COSINE
    assert cosine_min(got, ref32) < 1 - 1e-6  # it really is quantised


@pytest.mark.parametrize("bias", [True, False])
def test_scaled_mm_path_equals_the_emulation(bias):
    """The ``torch._scaled_mm`` call that GPUs run agrees with the emulation to bf16 rounding.

    torch 2.13 has a CPU kernel too, so the operand layout, scale shapes, bias and bfloat16
    output of the native path are checked here, before a GPU ever runs it.
    """
    g = torch.Generator().manual_seed(5)
    # on a GPU where there is one (torch before 2.13 has no CPU kernel for row-wise scales)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    lin = torch.nn.Linear(48, 144, bias=bias).to(dev)
    x = (torch.randn(2, 37, 48, generator=g) * 3).to(dev)  # [..., K] with a batch dim, as in a ViT
    native, emulated = Fp8Linear(lin), Fp8Linear(lin, emulate=True)
    with torch.no_grad():
        got, want = native(x), emulated(x)
    assert got.dtype == torch.bfloat16 and got.shape == want.shape == (2, 37, 144)
    # float32 accumulation, then one or two roundings to bfloat16 (8 significant bits)
    err = (got.float() - want).abs()
    assert float(err.max()) <= 2**-7 * float(want.abs().max())
    assert float(err.max()) > 0  # it really went through the bf16 output of _scaled_mm
    with pytest.raises(InvalidArgumentError, match="multiples of 16"):
        Fp8Linear(torch.nn.Linear(40, 144))


def _tiny_vit() -> torch.nn.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = models.load("uni2-tiny", device="cpu", dtype="fp32").eval()
    with torch.no_grad():  # LayerScale 1 instead of 1e-5: the blocks count in the output
        for name, p in m.named_parameters():
            if name.endswith("gamma"):
                p.fill_(1.0)
    return m


def test_fp8_tiny_vit_emulated_cosine_and_copy():
    m = _tiny_vit()
    x = torch.randn(8, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    q = quantize_fp8(m, emulate=True)
    assert q is not m and not any(isinstance(x, Fp8Linear) for x in m.modules())
    assert sum(isinstance(x, Fp8Linear) for x in q.modules()) == 4 * 2  # 4 linears x 2 blocks
    assert q.precision == "fp8"
    with torch.inference_mode():
        ref, got = m(x), q(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            got_autocast = q(x).float()
    # random blocks at full LayerScale compound the rounding: documented floor 0.98 (0.991 here)
    assert FP8_MODEL_COSINE <= cosine_min(got, ref) < 1 - 1e-7
    assert cosine_min(got_autocast, ref) >= FP8_MODEL_COSINE  # the rest in bf16 too (0.993)
    with pytest.raises(InvalidArgumentError, match="no 'blocks'"):
        quantize_fp8(torch.nn.Linear(4, 4))


def test_fp8_on_this_device():
    """Native FP8 where the GPU has it (against the emulation), else a clear refusal."""
    m = _tiny_vit()
    if HAS_FP8:
        x = torch.randn(8, 3, 224, 224, generator=torch.Generator().manual_seed(2))
        native = TorchBackend(m, device=DEVICE, dtype="fp8")
        emulated = quantize_fp8(m, emulate=True)
        with torch.inference_mode():
            want = emulated(x)
        # same quantisation; the rest of the model in bf16 (native) or float32 (emulated)
        assert cosine_min(torch.from_numpy(native(x.numpy())), want) >= FP8_MODEL_COSINE
        return
    with pytest.raises(InvalidArgumentError, match=r"dtype='fp8'.*(FP8|8\.9)"):
        TorchBackend(m, device=DEVICE, dtype="fp8")


def test_uint8_patches_normalised_by_torch_equal_the_cpu_path():
    g = np.random.default_rng(3)
    raw = g.integers(0, 256, (5, 300, 260, 3), dtype=np.uint8)
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    f32 = slides.preprocess_patches(raw, size=224, mean=mean, std=std)
    u8 = slides.preprocess_patches(raw, size=224, dtype="uint8")
    assert u8.dtype == np.uint8 and u8.shape == (5, 3, 224, 224)
    for i in range(5):  # the resized pixels themselves (PIL-exact resize)
        np.testing.assert_array_equal(u8[i].transpose(1, 2, 0), slides.resize(raw[i], 224))
    m = torch.tensor(mean, dtype=torch.float32)
    s = torch.tensor(std, dtype=torch.float32)
    np.testing.assert_array_equal(normalize_uint8(torch.from_numpy(u8), m, s).numpy(), f32)
    # the backend takes either and gives the same embeddings
    lin = torch.nn.Sequential(torch.nn.AvgPool2d(32), torch.nn.Flatten(), torch.nn.Linear(147, 8))
    be = TorchBackend(lin, device=DEVICE, dtype="fp32", mean=mean, std=std)
    np.testing.assert_array_equal(be(u8), be(f32))
    with pytest.raises(InvalidArgumentError, match="mean and std"):
        TorchBackend(lin, device=DEVICE, dtype="fp32")(u8)


def test_normalize_uint8_divides_by_device_tensors_only():
    """No division by a Python number, which CUDA computes as a multiply by its reciprocal.

    PyTorch's CUDA true-division kernel turns ``t / c`` with a CPU scalar ``c`` into
    ``t * (1 / c)`` (aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu): for ``c = 255`` that is
    one ulp off ``u / 255`` for 126 of the 256 uint8 values (checked here in numpy), so the
    GPU's batch would not equal the CPU path's. Every divisor must be a tensor on x's device.
    """
    from torch.overrides import TorchFunctionMode

    u = np.arange(256, dtype=np.float32)
    assert int((u / np.float32(255) != u * (np.float32(1) / np.float32(255))).sum()) == 126
    divisors = []

    class Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if getattr(func, "__name__", "") in ("div", "div_", "true_divide", "__truediv__"):
                divisors.append(args[1] if len(args) > 1 else kwargs.get("other"))
            return func(*args, **(kwargs or {}))

    x = torch.from_numpy(np.arange(256, dtype=np.uint8).reshape(1, 1, 16, 16).repeat(3, 1))
    m = torch.tensor([0.485, 0.456, 0.406], device=DEVICE)
    sd = torch.tensor([0.229, 0.224, 0.225], device=DEVICE)
    with Record():
        got = normalize_uint8(x.to(DEVICE), m, sd)
    assert len(divisors) == 2, divisors
    assert all(isinstance(d, torch.Tensor) and d.device == got.device for d in divisors)
    want = (u / np.float32(255) - np.float32(0.485)) / np.float32(0.229)  # C++ LUT, channel 0
    np.testing.assert_array_equal(got[0, 0].cpu().numpy().ravel(), want)


class PoolEncoder(torch.nn.Module):
    """A small encoder whose compile is quick on CPU (about 10 s of inductor codegen)."""

    image_size = 224
    embed_dim = 16
    encoder_name = "pool"

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.proj = torch.nn.Linear(147, 16)
        with torch.no_grad():
            self.proj.weight.copy_(torch.randn(16, 147, generator=g) * 0.1)
            self.proj.bias.copy_(torch.randn(16, generator=g))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.proj(torch.nn.functional.avg_pool2d(x, 32).flatten(1)))


@pytest.fixture(scope="module")
def two_slides(tmp_path_factory):
    d = tmp_path_factory.mktemp("compile")
    paths = [d / "a.tif", d / "b.tif"]
    img = write_test_slide(paths[0])
    write_test_slide(paths[1], np.ascontiguousarray(img[::-1]))
    return paths


def test_compiled_engine_equals_eager_and_compiles_once(two_slides, tmp_path):
    import torch._dynamo

    enc = PoolEncoder()
    kw = dict(model=enc, batch_size=7, threads=1, progress=False, segmentation=PARAMS,
              device=DEVICE, dtype="fp32")  # fmt: skip
    eager = embed_slides(two_slides, out=tmp_path / "eager", **kw)
    torch._dynamo.reset()
    _backends._PREPARED.clear()
    torch._dynamo.utils.counters.clear()
    comp = embed_slides(two_slides, out=tmp_path / "comp", compile=True, **kw)
    assert eager.ok and comp.ok and len(comp.done) == 2
    n = [r.n_patches for r in comp.done]
    assert all(k % 7 for k in n), n  # every slide ends with a padded partial batch
    for a, b in zip(eager.done, comp.done, strict=True):
        fe, ce, ae = read_features(a.features_path)
        fc, cc, ac = read_features(b.features_path)
        np.testing.assert_array_equal(ce, cc)
        np.testing.assert_allclose(fc, fe, rtol=1e-4, atol=1e-4)  # fp32 sum order only
        assert ae["compiled"] == "no" and ac["compiled"] == "default"
        assert ac["precision"] == ac["dtype"] == "fp32"
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert graphs == 1  # one static shape for both slides and their padded last batches
    again = embed_slides(two_slides[:1], out=tmp_path / "again", compile=True, **kw)
    assert again.ok and torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs
    np.testing.assert_array_equal(read_features(again.done[0].features_path)[0],
                                  read_features(comp.done[0].features_path)[0])  # fmt: skip
    with pytest.raises(InvalidArgumentError, match="compile"):
        embed_slides(two_slides, out=tmp_path / "bad", compile="fastest", **kw)
    with pytest.raises(InvalidArgumentError, match="backend='torch'"):
        embed_slides(
            two_slides,
            out=tmp_path / "bad",
            model=enc,
            options=EmbedOptions(compile=True, backend="onnxruntime"),
            progress=False,
        )


def test_compiled_engine_pads_to_batch_size_when_the_first_slide_is_short(two_slides, tmp_path):
    # the first slide's only batch is shorter than batch_size: the static shape must still be
    # batch_size, not that short batch (a later full batch was refused as "exceeding" it)
    small = tmp_path / "small.tif"
    with slides.open(two_slides[0]) as s:
        img = s.read_level(0)
    write_test_slide(small, np.ascontiguousarray(img[:, : img.shape[1] // 4]))
    enc = PoolEncoder()
    kw = dict(model=enc, threads=1, progress=False, segmentation=PARAMS, device=DEVICE,
              dtype="fp32")  # fmt: skip
    eager = embed_slides([small, two_slides[0]], out=tmp_path / "eager", batch_size=64, **kw)
    n_small, n_big = (r.n_patches for r in eager.done)
    assert 0 < n_small < n_big, (n_small, n_big)
    batch = n_small + 1  # the small slide: one short batch; the big one: a full batch first
    _backends._PREPARED.clear()
    comp = embed_slides([small, two_slides[0]], out=tmp_path / "comp", batch_size=batch,
                        compile=True, **kw)  # fmt: skip
    assert comp.ok, [r.error for r in comp.failed]
    for a, b in zip(eager.done, comp.done, strict=True):
        fe, fc = read_features(a.features_path)[0], read_features(b.features_path)[0]
        np.testing.assert_allclose(fc, fe, rtol=1e-4, atol=1e-4)
    # the backend alone: batch_size= fixes the static shape of a compiled encoder
    x = np.zeros((2, 3, 224, 224), np.float32)
    be = TorchBackend(enc, device=DEVICE, dtype="fp32", compile=True, batch_size=batch)
    assert be(x).shape == (2, 16) and be.static_batch == batch
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        TorchBackend(enc, device=DEVICE, compile=True, batch_size=0)


def test_cli_fp8_and_compile_options(two_slides, tmp_path, monkeypatch):
    out = tmp_path / "out"
    if not HAS_FP8:
        proc = _cli("embed", str(two_slides[0]), "--model", "uni2-tiny", "--out", str(out),
                    "--dtype", "fp8", "--device", DEVICE, "--quiet")  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert "--dtype fp8" in proc.stderr and "8.9" in proc.stderr
        assert not out.exists()  # refused before any work
    proc = _cli("embed", str(two_slides[0]), "--model", "uni2-tiny", "--out", str(out),
                "--compile-mode", "max-autotune")  # fmt: skip
    assert proc.returncode == 2 and "--compile-mode needs --compile" in proc.stderr
    # the parsed flags reach the engine
    from tumorboard.embed import _engine
    from tumorboard.embed.cli import add_embed_parser, run_embed

    parser = argparse.ArgumentParser()
    add_embed_parser(parser.add_subparsers())
    seen = {}

    def fake(slides_, **kw):
        seen.update(kw)
        raise InvalidArgumentError("stop here")

    monkeypatch.setattr(_engine, "embed_slides", fake)
    args = parser.parse_args(["embed", str(two_slides[0]), "--out", str(out), "--compile",
                              "--compile-mode", "max-autotune", "--dtype", "fp8"])  # fmt: skip
    assert run_embed(args) == 2
    opts = seen["options"]  # the CLI passes EmbedOptions, never the old keywords
    assert opts.compile_mode == "max-autotune" and opts.dtype == "fp8"
    assert "compile" not in seen and "dtype" not in seen
    args = parser.parse_args(["embed", str(two_slides[0]), "--out", str(out), "--compile"])
    run_embed(args)
    assert seen["options"].compile is True


def test_patch_loader_uint8_batches_equal_float32_after_device_normalisation(two_slides):
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    with slides.open(two_slides[0]) as s:
        grid = slides.patch_grid(s, None, magnification=20, patch_size=256)
        kw = dict(batch_size=16, size=224, mean=mean, std=std, threads=2)
        f32 = list(slides.PatchLoader(s, grid, **kw))
        u8 = list(slides.PatchLoader(s, grid, dtype="uint8", **kw))
    assert len(u8) == len(f32) > 1 and all(b.images.dtype == np.uint8 for b in u8)
    m = torch.tensor(mean, dtype=torch.float32, device=DEVICE)
    sd = torch.tensor(std, dtype=torch.float32, device=DEVICE)
    for a, b in zip(f32, u8, strict=True):
        np.testing.assert_array_equal(a.coords, b.coords)
        x = torch.from_numpy(b.images).to(DEVICE)
        np.testing.assert_array_equal(normalize_uint8(x, m, sd).cpu().numpy(), a.images)


def test_resume_never_mixes_fp8_and_unquantised_features(two_slides, tmp_path):
    import h5py

    kw = dict(model=PoolEncoder(), out=tmp_path, batch_size=16, threads=1, progress=False,
              segmentation=PARAMS, device="cpu", dtype="fp32")  # fmt: skip
    first = embed_slides(two_slides[:1], **kw)
    assert first.ok and read_features(first.done[0].features_path)[2]["precision"] == "fp32"
    assert embed_slides(two_slides[:1], **kw).skipped  # same precision: reused
    with h5py.File(first.done[0].features_path, "r+") as f:  # as an FP8 run would have stored it
        f["features"].attrs["precision"] = "fp8"
    rep = embed_slides(two_slides[:1], **kw)
    assert not rep.ok and len(rep.failed) == 1
    assert "FP8 features" in rep.failed[0].error and "--force" in rep.failed[0].error
    redo = embed_slides(two_slides[:1], force=True, **kw)
    assert redo.ok and read_features(redo.done[0].features_path)[2]["precision"] == "fp32"
