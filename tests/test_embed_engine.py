"""The slide-collection embedding engine end to end on real pyramidal JPEG-tiled TIFFs.

Oracles: every stored embedding is recomputed by reading the patch with OpenSlide at the stored
coordinate, normalising it with numpy and calling the encoder directly; coords equal the coords
file the slides layer writes; the .h5 and Parquet files are read back with h5py and pyarrow; ONNX
runtime output is compared with torch. Resume is tested after a subprocess is SIGKILLed mid-way
through the collection, and failure isolation with a corrupt slide and an injected model error.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
h5py = pytest.importorskip("h5py")
pq = pytest.importorskip("pyarrow.parquet")
openslide = pytest.importorskip("openslide")

from test_slides_pipeline import PARAMS  # noqa: E402
from test_slides_readers import write_test_slide  # noqa: E402
from tumorboard import slides  # noqa: E402
from tumorboard._io import is_temp_name, temp_files  # noqa: E402
from tumorboard.embed import (  # noqa: E402
    EmbedOptions,
    embed_slides,
    features_complete,
    read_features,
)
from tumorboard.embed.cli import add_embed_parser  # noqa: E402
from tumorboard.errors import InvalidArgumentError, InvalidTypeError  # noqa: E402
from tumorboard.models.weights import state_dict_fingerprint  # noqa: E402
from tumorboard.slides import TilingOptions  # noqa: E402

MEAN = (0.5, 0.4, 0.3)
JOB = "20x_256px_0px_overlap"  # TRIDENT's folder of the default magnification, patch, overlap
STD = (0.2, 0.25, 0.3)

ENCODER_SRC = """
import torch
from torch import nn


class TinyEncoder(nn.Module):
    image_size = 256
    mean = (0.5, 0.4, 0.3)
    std = (0.2, 0.25, 0.3)
    embed_dim = 16
    encoder_name = "tiny"

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.proj = nn.Linear(192, 16)
        with torch.no_grad():
            self.proj.weight.copy_(torch.randn(16, 192, generator=g) * 0.1)
            self.proj.bias.copy_(torch.randn(16, generator=g))

    def forward(self, x):
        return self.proj(torch.nn.functional.avg_pool2d(x, 32).flatten(1))
"""
exec(ENCODER_SRC)  # defines TinyEncoder here and, verbatim, in the subprocess below


class FailingEncoder(TinyEncoder):  # noqa: F821
    """Raises on its 3rd call (the injected model failure)."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == 3:
            raise RuntimeError("injected failure")
        return super().forward(x)


@pytest.fixture(scope="module")
def collection(tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("collection")
    first = d / "case01.tif"
    write_test_slide(first)
    paths = [first]
    for name in ("case02.tif", "case03.tif"):
        shutil.copy(first, d / name)
        paths.append(d / name)
    return paths


def _embed_tiny(slides_: list[Path], out: Path, *, model: object = None) -> object:
    """Embed ``slides_`` with the tiny encoder as every engine test does (1 thread, batch 8)."""
    return embed_slides(
        slides_,
        model=TinyEncoder() if model is None else model,  # noqa: F821
        out=out,
        tiling=TilingOptions(threads=1, segmentation=PARAMS),
        options=EmbedOptions(batch_size=8),
        progress=False,
    )


@pytest.fixture(scope="module")
def reference(collection, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ref")
    rep = _embed_tiny(collection, out)
    assert rep.ok and len(rep.done) == 3
    return out


def oracle_embeddings(path: Path, coords: np.ndarray) -> np.ndarray:
    model = TinyEncoder().eval()  # noqa: F821
    s = openslide.OpenSlide(str(path))
    imgs = []
    for x, y in coords:
        rgb = np.asarray(s.read_region((int(x), int(y)), 0, (256, 256)).convert("RGB"))
        imgs.append(((rgb / 255.0 - MEAN) / STD).transpose(2, 0, 1))
    with torch.no_grad():
        return model(torch.tensor(np.stack(imgs), dtype=torch.float32)).numpy()


def test_outputs_match_oracle_and_layout(collection, reference):
    out = reference
    path = collection[0]
    feats, coords, attrs = read_features(out / JOB / "features_tiny" / "case01.h5")
    cf = slides.read_coords(slides.coords_path(out, "case01", magnification=20, patch_size=256))
    np.testing.assert_array_equal(coords, cf.coords)
    assert feats.shape == (len(cf), 16) and feats.dtype == np.float32 and len(cf) > 10
    assert attrs == {
        "name": "case01",
        "savetodir": str(out / JOB / "features_tiny"),
        "encoder": "tiny",
        "weights_fingerprint": state_dict_fingerprint(TinyEncoder()),  # noqa: F821
        "backend": "torch",
        "dtype": "fp32",
        "precision": "fp32",
        "compiled": "no",
        "reader": "tifffile",
        "patch_loader": "native",  # the compiled batch reader of JPEG-tiled TIFFs
    }
    np.testing.assert_allclose(feats, oracle_embeddings(path, coords), rtol=1e-4, atol=1e-4)
    with h5py.File(out / JOB / "features_tiny" / "case01.h5", "r") as f:
        assert f["coords"].dtype == np.int64
        assert f["coords"].attrs["patch_size"] == 256
        assert f["coords"].attrs["target_magnification"] == 20
        assert f["coords"].attrs["level0_magnification"] == 20
        assert f["coords"].attrs["name"] == "case01"
    table = pq.read_table(out / JOB / "embeddings_tiny" / "case01.parquet")
    etype = table.schema.field("embedding").type
    assert etype.list_size == 16 and str(etype.value_type) == "float"  # fixed_size_list<float32>
    assert table.column_names == ["slide", "x", "y", "embedding"]
    assert set(table["slide"].to_pylist()) == {"case01"}
    np.testing.assert_array_equal(np.stack([table["x"], table["y"]], 1), coords)
    emb = np.asarray(table["embedding"].combine_chunks().flatten()).reshape(-1, 16)
    np.testing.assert_array_equal(emb, feats)
    # the three copies give identical features; no temporary files are left behind
    for name in ("case02", "case03"):
        np.testing.assert_array_equal(
            read_features(out / JOB / "features_tiny" / f"{name}.h5")[0], feats
        )
    assert not [p for p in out.rglob(".*.tmp") if is_temp_name(p.name)]


def test_rerun_skips_complete_and_redoes_broken(collection, reference, tmp_path):
    out = tmp_path / "job"
    shutil.copytree(reference, out)
    # a truncated features file under the final name and a leftover temporary file
    bad = out / JOB / "features_tiny" / "case02.h5"
    bad.write_bytes(bad.read_bytes()[:200])
    (out / JOB / "features_tiny" / ".case03.h5.999.0123abcd.tmp").write_bytes(b"partial")
    (out / JOB / "features_tiny" / "case03.h5").unlink()
    assert features_complete(bad) is None
    rep = _embed_tiny(collection, out)
    assert [r.status for r in rep.results] == ["skipped", "done", "done"]
    assert rep.results[0].n_patches == features_complete(out / JOB / "features_tiny" / "case01.h5")
    for name in ("case02", "case03"):
        a = read_features(out / JOB / "features_tiny" / f"{name}.h5")[0]
        np.testing.assert_array_equal(
            a, read_features(reference / JOB / "features_tiny" / f"{name}.h5")[0]
        )
    assert not [p for p in out.rglob(".*.tmp") if is_temp_name(p.name)]


def test_resume_after_sigkill(collection, reference, tmp_path):
    out = tmp_path / "job"
    n = features_complete(reference / JOB / "features_tiny" / "case01.h5")
    kill_at = -(-n // 8) + 2  # the third forward of the second slide
    assert n > 16
    script = ENCODER_SRC + textwrap.dedent(
        f"""
        import os, signal
        from tumorboard.embed import embed_slides

        class Killer(TinyEncoder):
            calls = 0
            def forward(self, x):
                Killer.calls += 1
                if Killer.calls == {kill_at}:
                    os.kill(os.getpid(), signal.SIGKILL)
                return super().forward(x)

        from tumorboard.slides import SegmentationOptions
        PARAMS = SegmentationOptions(**{PARAMS.__dict__!r})
        embed_slides({[str(p) for p in collection]!r}, model=Killer(), out={str(out)!r},
                     batch_size=8, threads=1, progress=False, segmentation=PARAMS)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    fdir = out / JOB / "features_tiny"
    assert features_complete(fdir / "case01.h5", out / JOB / "embeddings_tiny" / "case01.parquet")
    assert not (fdir / "case02.h5").exists() and not (fdir / "case03.h5").exists()
    assert temp_files(fdir, target="case02.h5")  # the half-written file of the killed run
    rep = _embed_tiny(collection, out)
    assert [r.status for r in rep.results] == ["skipped", "done", "done"]
    for name in ("case01", "case02", "case03"):
        a = read_features(fdir / f"{name}.h5")
        b = read_features(reference / JOB / "features_tiny" / f"{name}.h5")
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
    assert not [p for p in out.rglob(".*.tmp") if is_temp_name(p.name)]


def test_bad_slides_are_reported_and_the_rest_finishes(collection, tmp_path):
    corrupt = tmp_path / "corrupt.tif"
    corrupt.write_bytes(b"II*\x00" + os.urandom(2000))
    missing = tmp_path / "missing.svs"
    items = [collection[0], corrupt, collection[1], missing, collection[2]]
    rep = _embed_tiny(items, tmp_path / "job", model=FailingEncoder())
    status = [r.status for r in rep.results]
    # the 3rd forward (inside case01) raises: case01 fails, the rest go on
    assert status == ["failed", "failed", "done", "failed", "done"]
    assert "injected failure" in rep.results[0].error
    assert "corrupt.tif" in rep.results[1].error or "unreadable" in rep.results[1].error
    assert "no such file" in rep.results[3].error
    assert not rep.ok and "FAILED" in rep.summary() and "missing.svs" in rep.summary()
    fdir = tmp_path / "job" / JOB / "features_tiny"
    assert sorted(p.name for p in fdir.iterdir()) == ["case02.h5", "case03.h5"]


@pytest.mark.parametrize("depth", [1, 3])
def test_batches_in_flight_across_slides(collection, reference, tmp_path, monkeypatch, depth):
    """With batches in flight (as on CUDA) a slide finishes after the next one has started.

    Its features are the same, a failing slide takes no other slide's batches with it, and
    the slide order of the report holds.
    """
    from tumorboard.embed import _engine

    monkeypatch.setattr(_engine, "_in_flight_depth", lambda runner: depth)
    rep = _embed_tiny(collection, tmp_path / "deep")
    assert [r.status for r in rep.results] == ["done"] * 3
    for name in ("case01", "case02", "case03"):
        got = read_features(tmp_path / "deep" / JOB / "features_tiny" / f"{name}.h5")
        want = read_features(reference / JOB / "features_tiny" / f"{name}.h5")
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    missing = tmp_path / "missing.svs"
    items = [collection[0], missing, collection[1], collection[2]]
    rep = _embed_tiny(items, tmp_path / "fail", model=FailingEncoder())
    assert [r.status for r in rep.results] == ["failed", "failed", "done", "done"]
    assert "injected failure" in rep.results[0].error and "no such file" in rep.results[1].error
    fdir = tmp_path / "fail" / JOB / "features_tiny"
    assert sorted(p.name for p in fdir.iterdir()) == ["case02.h5", "case03.h5"]
    assert not [p for p in fdir.parent.rglob("*") if ".tmp" in p.name]  # no temporary left


def test_onnxruntime_backend_matches_torch(collection, reference, tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    rep = embed_slides(
        collection[:1],
        model=TinyEncoder(),  # noqa: F821
        out=tmp_path,
        tiling=TilingOptions(segmentation=PARAMS),
        options=EmbedOptions(batch_size=16, backend="onnxruntime"),
        progress=False,
    )
    assert rep.ok and rep.backend == "onnxruntime"
    a = read_features(tmp_path / JOB / "features_tiny" / "case01.h5")[0]
    b = read_features(reference / JOB / "features_tiny" / "case01.h5")[0]
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_torch_backend_on_kernel_device_matches_cpu(collection, tmp_path, kernel_device):
    """Check that on a CUDA machine the GPU path gives the CPU features.

    The GPU path: pinned host batches, a copy stream, the encoder on the GPU in float32.
    Elsewhere both runs take the CPU path.
    """
    runs = []
    for i, dev in enumerate(("cpu", kernel_device)):
        out = tmp_path / f"{i}-{dev}"
        model = TinyEncoder()  # noqa: F821
        rep = embed_slides(
            collection[:1],
            model=model,
            out=out,
            tiling=TilingOptions(segmentation=PARAMS),
            options=EmbedOptions(batch_size=8, device=dev, dtype="fp32"),
            progress=False,
        )
        assert rep.ok and len(rep.done) == 1
        runs.append(read_features(out / JOB / "features_tiny" / "case01.h5")[0])
    assert runs[0].shape == runs[1].shape and len(runs[0]) > 10
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-4, atol=1e-4)


def test_deterministic_across_batch_sizes_and_workers(collection, reference, tmp_path):
    rep = embed_slides(
        collection[:1],
        model=TinyEncoder(),  # noqa: F821
        out=tmp_path,
        tiling=TilingOptions(threads=2, segmentation=PARAMS),
        options=EmbedOptions(batch_size=5, queue_size=1),
        progress=False,
    )
    assert rep.ok
    a = read_features(tmp_path / JOB / "features_tiny" / "case01.h5")[0]
    b = read_features(reference / JOB / "features_tiny" / "case01.h5")[0]
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_progress_and_validation(collection, tmp_path):
    import io

    buf = io.StringIO()
    embed_slides(
        collection[:1],
        model=TinyEncoder(),  # noqa: F821
        out=tmp_path,
        tiling=TilingOptions(segmentation=PARAMS),
        options=EmbedOptions(batch_size=64),
        stream=buf,
    )
    assert "patches/s" in buf.getvalue() and "case01" in buf.getvalue()
    with pytest.raises(ValueError, match="batch_size"):
        embed_slides(
            collection,
            model=TinyEncoder(),  # noqa: F821
            out=tmp_path,
            options=EmbedOptions(batch_size=0),
        )
    with pytest.raises(ValueError, match="backend"):
        embed_slides(
            collection,
            model=TinyEncoder(),  # noqa: F821
            out=tmp_path,
            options=EmbedOptions(backend="tf"),
        )
    with pytest.raises(ValueError, match="weights"):
        embed_slides(collection, model=TinyEncoder(), out=tmp_path, weights="w.bin")  # noqa: F821


def test_cli(collection, tmp_path, capsys, monkeypatch):
    parser = argparse.ArgumentParser(prog="tumorboard")
    add_embed_parser(parser.add_subparsers(dest="cmd"))
    import tumorboard.embed._engine as engine

    real = engine.embed_slides
    seen = {}

    def fake_model_name(slides_, *, model, **kw):  # route the model name to the test encoder
        seen["model"] = model
        seen["kw"] = kw
        return real(slides_, model=TinyEncoder(), **kw)  # noqa: F821

    monkeypatch.setattr(engine, "embed_slides", fake_model_name)
    args = parser.parse_args(["embed", str(collection[0]), "--model", "uni2-h", "--out",
                              str(tmp_path), "--batch-size", "16", "--quiet",
                              "--no-seg", "--threads", "1"])  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the CLI calls the new spelling
        assert args.func(args) == 0
    assert seen["model"] == "uni2-h"
    # the CLI passes the two options objects, none of the deprecated keywords
    kw = seen["kw"]
    assert kw["tiling"] == slides.TilingOptions(segmentation=None, threads=1)
    assert kw["options"] == EmbedOptions(batch_size=16)
    assert not set(kw) & {f.name for f in dataclasses.fields(slides.TilingOptions)}
    assert not set(kw) & {f.name for f in dataclasses.fields(EmbedOptions)}
    assert "embedded 1 slide(s)" in capsys.readouterr().out
    assert args.weights is None and args.backend == "torch" and args.magnification == 20
    assert features_complete(tmp_path / JOB / "features_tiny" / "case01.h5")


def test_named_tiny_model_through_models_load(collection, tmp_path):
    models = pytest.importorskip("tumorboard.models")
    if not hasattr(models, "load"):
        pytest.skip("tumorboard.models.load not available")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the random-weights warning
        rep = embed_slides(
            collection[:1],
            model="uni2-tiny",
            out=tmp_path,
            tiling=TilingOptions(magnification=10, segmentation=PARAMS),
            options=EmbedOptions(batch_size=16),
            progress=False,
        )
        enc = models.load("uni2-tiny", device="cpu", dtype="fp32")
    assert rep.ok and rep.encoder == "uni2-tiny"
    feats, coords, _ = read_features(
        tmp_path / "10x_256px_0px_overlap" / "features_uni2-tiny" / "case01.h5"
    )
    assert feats.shape == (len(coords), enc.embed_dim) and len(coords) > 0
    # oracle: the loader's preprocessing + the encoder called directly (same seed -> same weights)
    with slides.open(collection[0]) as s:
        grid = slides.read_coords(slides.coords_path(tmp_path, "case01", magnification=10))
        g = slides.patch_grid(s, None, magnification=10, patch_size=256)
        loader = slides.PatchLoader(s, grid.coords, level=g.read_level, read_size=g.read_size,
                                    batch_size=len(grid), size=enc.image_size, mean=enc.mean,
                                    std=enc.std, interpolation=enc.interpolation)  # fmt: skip
        (batch,) = list(loader)
    with torch.no_grad():
        ref = enc(torch.from_numpy(batch.images)).float().numpy()
    np.testing.assert_allclose(feats, ref, rtol=1e-4, atol=1e-4)


def test_onnx_fallback_export_for_a_plain_module(collection, tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")

    class Plain(torch.nn.Module):  # no embed_dim / image_size / mean / std: 224 px, ImageNet
        def __init__(self):
            super().__init__()
            torch.manual_seed(1)
            self.conv = torch.nn.Conv2d(3, 8, 16, stride=16)

        def forward(self, x):
            return self.conv(x).mean(dim=(2, 3))

    m = Plain()
    runs = {}
    for backend in ("torch", "onnxruntime"):
        rep = embed_slides(
            collection[:1],
            model=m,
            out=tmp_path / backend,
            tiling=TilingOptions(segmentation=PARAMS),
            options=EmbedOptions(batch_size=16, backend=backend),
            progress=False,
        )
        assert rep.ok and rep.encoder == "plain"
        runs[backend] = read_features(tmp_path / backend / JOB / "features_plain" / "case01.h5")[0]
    assert runs["torch"].shape[1] == 8
    np.testing.assert_allclose(runs["onnxruntime"], runs["torch"], rtol=1e-4, atol=1e-4)


def _gpu_decode_bound(std: tuple[float, ...]) -> float:
    """Return the largest change of TinyEncoder outputs when pixels move by one uint8 step.

    A step moves a normalised value by at most 1 / (255 min(std)); average pooling keeps that
    bound, and output i moves by at most ||W_i||_1 times it.
    """
    w = TinyEncoder().proj.weight.detach().abs().sum(1).max().item()  # noqa: F821
    return w / (255 * min(std))


@pytest.mark.parametrize("patch_size", [256, 300])  # read as is, and resized to 256
def test_gpu_decode_features_match_cpu_decode(collection, tmp_path, monkeypatch, patch_size):
    pytest.importorskip("nvidia.nvimgcodec")
    from tumorboard.slides import _gpu_decode

    # decode="gpu" on the CPU runs nvImageCodec's CPU backend (libjpeg-turbo): the whole
    # engine path (loader tensors, backend normalisation, attributes) without a GPU
    monkeypatch.setattr(_gpu_decode, "_CPU_BACKEND_FOR_TESTS", True)
    kw = {"model": TinyEncoder(), "batch_size": 8, "threads": 1, "progress": False,  # noqa: F821
          "segmentation": PARAMS, "device": "cpu", "patch_size": patch_size}  # fmt: skip
    cpu = embed_slides(collection[:1], out=tmp_path / "cpu", **kw)
    gpu = embed_slides(collection[:1], out=tmp_path / "gpu", decode="gpu", **kw)
    assert cpu.ok and gpu.ok
    want, wc, wattrs = read_features(cpu.done[0].features_path)
    got, gc, attrs = read_features(gpu.done[0].features_path)
    assert wattrs["patch_loader"] == "native" and attrs["patch_loader"] == "gpu"
    np.testing.assert_array_equal(gc, wc)
    diff = np.abs(got - want).max()
    print(f"patch {patch_size}: max |features diff| {diff:.3g}, bound {_gpu_decode_bound(STD):.3g}")
    if patch_size == 256:  # no resize: the same libjpeg-turbo pixels, the same normalisation
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=_gpu_decode_bound(STD))


def test_gpu_decode_refusals(collection, tmp_path, capsys):
    with pytest.raises(ValueError, match="decode"):
        embed_slides(
            collection,
            model=TinyEncoder(),  # noqa: F821
            out=tmp_path,
            options=EmbedOptions(decode="nvjpeg"),
        )
    with pytest.raises(ValueError, match="backend"):
        embed_slides(
            collection,
            model=TinyEncoder(),  # noqa: F821
            out=tmp_path,
            options=EmbedOptions(decode="gpu", backend="onnxruntime"),
        )
    if torch.cuda.is_available():
        return
    with pytest.raises(ValueError, match="CUDA"):
        embed_slides(
            collection,
            model=TinyEncoder(),  # noqa: F821
            out=tmp_path,
            options=EmbedOptions(decode="gpu"),
        )
    parser = argparse.ArgumentParser(prog="tumorboard")
    add_embed_parser(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["embed", str(collection[0]), "--random-weights", "--model",
                              "uni2-tiny", "--out", str(tmp_path), "--decode", "gpu",
                              "--device", "cpu", "--quiet"])  # fmt: skip
    assert args.func(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tumorboard: error: ") and "CUDA" in err[0]
    assert not list(tmp_path.iterdir())  # refused before any work


def _features(out: Path, job: str = JOB) -> dict[str, tuple]:
    found = {}
    for h5 in sorted((out / job / "features_tiny").glob("*.h5")):
        feats, coords, attrs = read_features(h5)
        found[h5.name] = (feats, coords, {k: v for k, v in attrs.items() if k != "savetodir"})
    return found


def test_options_objects_equal_deprecated_keywords(collection, tmp_path):
    tiling = slides.TilingOptions(magnification=10, segmentation=PARAMS, threads=1)
    options = EmbedOptions(batch_size=8, queue_size=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the new spelling does not warn
        new = embed_slides(collection[:2], model=TinyEncoder(), out=tmp_path / "new",  # noqa: F821
                           tiling=tiling, options=options, progress=False)  # fmt: skip
    msg = (
        r"embed_slides\(magnification=, segmentation=, threads=, batch_size=, queue_size=\) "
        r"is deprecated; use tiling=TilingOptions\(magnification=\.\.\., segmentation=\.\.\., "
        r"threads=\.\.\.\), options=EmbedOptions\(batch_size=\.\.\., queue_size=\.\.\.\)"
    )
    with pytest.warns(DeprecationWarning, match=msg) as record:
        old = embed_slides(collection[:2], model=TinyEncoder(), out=tmp_path / "old",  # noqa: F821
                           magnification=10, segmentation=PARAMS, threads=1, batch_size=8,
                           queue_size=2, progress=False)  # fmt: skip
    assert record[0].filename == __file__  # points at the caller
    assert new.ok and old.ok and new.n_patches == old.n_patches > 0
    a, b = (
        _features(tmp_path / "new", "10x_256px_0px_overlap"),
        _features(tmp_path / "old", "10x_256px_0px_overlap"),
    )
    assert a.keys() == b.keys() and len(a) == 2
    for name in a:
        np.testing.assert_array_equal(a[name][0], b[name][0])
        np.testing.assert_array_equal(a[name][1], b[name][1])
        assert a[name][2] == b[name][2]


def test_mixed_spelling_refused(collection, tmp_path):
    enc = TinyEncoder()  # noqa: F821
    with pytest.raises(InvalidArgumentError, match=r"batch_size= and options= both given"):
        embed_slides(collection[:1], model=enc, out=tmp_path, options=EmbedOptions(),
                     batch_size=8)  # fmt: skip
    with pytest.raises(InvalidArgumentError, match=r"threads=, mpp= and tiling= both given"):
        embed_slides(collection[:1], model=enc, out=tmp_path, tiling=slides.TilingOptions(),
                     threads=1, mpp=0.5)  # fmt: skip
    with pytest.raises(InvalidTypeError, match="tiling: expected a tumorboard.slides.Tiling"):
        embed_slides(collection[:1], model=enc, out=tmp_path, tiling=EmbedOptions())
    with pytest.raises(InvalidTypeError, match="options: expected a tumorboard.embed.Embed"):
        embed_slides(collection[:1], model=enc, out=tmp_path, options={"batch_size": 8})
    with pytest.raises(TypeError, match="unexpected keyword argument 'patch'"):
        embed_slides(collection[:1], model=enc, out=tmp_path, patch=128)
    assert not any(tmp_path.iterdir())  # refused before anything ran


def test_embed_options_validate_once():
    opts = EmbedOptions(batch_size=np.int64(32), compile="max-autotune", dtype="bf16")
    assert opts.batch_size == 32 and type(opts.batch_size) is int
    assert opts.compile_mode == "max-autotune" and EmbedOptions().compile_mode is None
    assert pickle.loads(pickle.dumps(opts)) == opts  # travels to Ray actors
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.batch_size = 8  # type: ignore[misc]
    with pytest.raises(TypeError):
        EmbedOptions(64)  # type: ignore[misc]  # keyword-only
    bad = [
        ({"batch_size": 0}, "batch_size: expected a positive int, got 0"),
        ({"batch_size": True}, "batch_size: expected a positive int"),
        ({"queue_size": -1}, "queue_size: expected a positive int"),
        ({"backend": "tf"}, "executor= picks where the work runs"),
        ({"dtype": "int8"}, "dtype: expected one of"),
        ({"device": "tpu"}, "device: expected 'auto', 'cpu'"),
        ({"compile": "fastest"}, "compile: expected a bool or one of"),
        ({"decode": "nvjpeg"}, "decode: expected one of 'cpu', 'gpu'"),
        ({"backend": "onnxruntime", "compile": True}, "options of backend='torch'"),
        ({"backend": "onnxruntime", "dtype": "fp8"}, "options of backend='torch'"),
        ({"backend": "onnxruntime", "decode": "gpu"}, "backend='onnxruntime' takes CPU batches"),
    ]
    for kwargs, match in bad:
        with pytest.raises(InvalidArgumentError, match=re.escape(match)):
            EmbedOptions(**kwargs)
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        dataclasses.replace(opts, batch_size=0)  # replace validates again
    with pytest.raises(InvalidTypeError, match="device: expected a str"):
        EmbedOptions(device=0)  # type: ignore[arg-type]


def test_segmentation_params_deprecated_alias():
    from tumorboard.slides import _segment

    for module in (slides, _segment):
        with pytest.warns(DeprecationWarning, match=r"SegmentationParams is deprecated; use "):
            old = module.SegmentationParams
        assert old is slides.SegmentationOptions
    assert "SegmentationParams" not in slides.__all__
    assert "SegmentationOptions" in slides.__all__
    with pytest.raises(AttributeError, match="SegmentationParam'"):
        slides.SegmentationParam  # noqa: B018
