"""``embed_slides(slide_encoder=)`` and ``tumorboard embed --slide-encoder`` on a real slide.

A small pyramidal JPEG-tiled TIFF (read by OpenSlide) is embedded with the tiny UNI2-h twin and
pooled by ``mean-uni2-tiny`` and by an ``abmil`` checkpoint written here. Oracles: TRIDENT's
slide-features layout (``slide_features_{name}/{slide}.h5`` with ``features`` [D] and ``coords``
int64) read back with h5py and pyarrow; the mean of the patch features computed with numpy; the
ABMIL module run on the patch features by hand; file bytes and modification times across reruns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
h5py = pytest.importorskip("h5py")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("openslide")
pytest.importorskip("tifffile")

from test_slides_readers import write_test_slide  # noqa: E402
from tumorboard.embed import (  # noqa: E402
    EmbedOptions,
    SlideEmbedReport,
    embed_slides,
    read_features,
    read_slide_features,
)
from tumorboard.errors import InvalidArgumentError  # noqa: E402
from tumorboard.models import save_state_dict  # noqa: E402
from tumorboard.models.abmil import ABMILSlideEncoder  # noqa: E402
from tumorboard.slides import TilingOptions  # noqa: E402

JOB = "20x_256px_0px_overlap"
NO_SEG = TilingOptions(segmentation=None, threads=1)


def cli(*args: str) -> subprocess.CompletedProcess:
    """Run ``tumorboard ARGS...`` the way a user does and return the finished process."""
    return subprocess.run(
        [sys.executable, "-m", "tumorboard.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


@pytest.fixture(scope="module")
def slide(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("slides") / "case01.tif"
    write_test_slide(path)  # 2048 x 1536 px at 0.5 um/px (20x): 48 patches of 256 px at 20x
    return path


def run(slide, out, **kw):
    kw.setdefault("tiling", NO_SEG)
    return embed_slides(slide, out=out, options=EmbedOptions(batch_size=16), progress=False, **kw)


def test_mean_slide_features_in_tridents_layout(slide, tmp_path):
    out = tmp_path / "job"
    rep = run(slide, out, slide_encoder="mean-uni2-tiny")
    assert isinstance(rep, SlideEmbedReport) and rep.ok
    (res,) = rep.results
    path = out / JOB / "slide_features_mean-uni2-tiny" / "case01.h5"
    assert res.status == "done" and res.features_path == path and res.n_patches == 48
    feats, coords, _ = read_features(out / JOB / "features_uni2-tiny" / "case01.h5")
    with h5py.File(path, "r") as f:
        vec, xy = f["features"][...], f["coords"][...]
        assert f["features"].dtype == np.float32 and vec.shape == (48,)
        assert f["coords"].dtype == np.int64 and np.array_equal(xy, coords)
        a = dict(f["features"].attrs)
        assert a["encoder"] == "mean-uni2-tiny" and a["weights_fingerprint"] == "none"
        assert a["patch_encoder"] == "uni2-tiny" and a["n_patches"] == 48
        assert f["coords"].attrs["target_magnification"] == 20
    np.testing.assert_allclose(vec, feats.astype(np.float64).mean(0), rtol=1e-5, atol=1e-7)

    table = pq.read_table(out / JOB / "slide_features_mean-uni2-tiny.parquet")
    assert table.column("slide").to_pylist() == ["case01"]
    assert table.schema.field("embedding").type.list_size == 48
    assert table.schema.metadata[b"encoder"] == b"mean-uni2-tiny"
    np.testing.assert_array_equal(np.asarray(table.column("embedding")[0].as_py()), vec)

    got = read_slide_features(out, "mean-uni2-tiny")  # the out folder: one job folder below
    assert got.names == ("case01",) and got.features.shape == (1, 48)
    np.testing.assert_array_equal(got.features[0], vec)
    frame = read_slide_features(out / JOB, "mean-uni2-tiny").to_polars()
    assert frame.columns == ["slide", "n_patches", "embedding"] and frame["n_patches"][0] == 48


def test_abmil_from_a_checkpoint_resumes_and_refuses_other_weights(slide, tmp_path):
    out = tmp_path / "job"
    torch.manual_seed(0)
    enc = ABMILSlideEncoder(48, hidden=16, n_heads=1, gated=True).eval()
    w1 = save_state_dict(enc, tmp_path / "abmil.pt")
    first = run(slide, out, model="uni2-tiny", slide_encoder="abmil", slide_weights=w1)
    (res,) = first.results
    assert res.status == "done", res.error
    feats, _, _ = read_features(out / JOB / "features_uni2-tiny" / "case01.h5")
    with torch.no_grad():
        want = enc(torch.from_numpy(feats)[None])[0].numpy()
    np.testing.assert_allclose(read_slide_features(out / JOB, "abmil").features[0], want,
                               rtol=1e-4, atol=1e-6)  # fmt: skip
    before = res.features_path.read_bytes()
    mtime = res.features_path.stat().st_mtime_ns

    again = run(slide, out, model="uni2-tiny", slide_encoder="abmil", slide_weights=w1)
    assert [r.status for r in again.results] == ["skipped"]
    assert again.patch_report.skipped and res.features_path.stat().st_mtime_ns == mtime

    torch.manual_seed(1)
    w2 = save_state_dict(ABMILSlideEncoder(48, hidden=16, n_heads=1, gated=True),
                         tmp_path / "other.pt")  # fmt: skip
    refused = run(slide, out, model="uni2-tiny", slide_encoder="abmil", slide_weights=w2)
    (r,) = refused.results
    assert r.status == "failed" and not refused.ok
    assert "weights_fingerprint 'sha256:" in r.error and "(stored) vs 'sha256:" in r.error
    assert str(res.features_path) in r.error and "--force" in r.error
    assert res.features_path.read_bytes() == before  # nothing was overwritten

    redo = run(slide, out, model="uni2-tiny", slide_encoder="abmil", slide_weights=w2,
               force=True)  # fmt: skip
    assert [r.status for r in redo.results] == ["done"]
    assert res.features_path.read_bytes() != before


def test_a_refused_slide_encoder_run_does_no_work(slide, tmp_path):
    out = tmp_path / "job"
    cases = [
        (dict(slide_encoder="threads"), "'threads' is not built"),
        (dict(slide_encoder="titan"), "'titan' needs its weights: pass slide_weights=PATH"),
        (dict(slide_encoder="feather", model="uni2-h"), "feather reads conch_v15 features"),
        (dict(slide_encoder="feather", random_weights=True,
              tiling=TilingOptions(patch_size=256)), "feather runs at 20x with 512 px"),
        (dict(slide_encoder="feather_uni_v2"), "needs its weights: pass slide_weights=PATH"),
        (dict(slide_encoder="mean-uni2-tiny", slide_weights=slide), "has no parameters"),
        (dict(slide_encoder="abmil"), "expected model= .*got None"),
        (dict(model="uni2-tiny", slide_weights=slide), "expected together with slide_encoder"),
    ]  # fmt: skip
    for kw, message in cases:
        with pytest.raises(InvalidArgumentError, match=message):
            run(slide, out, **kw)
    assert not out.exists()


def test_cli_slide_encoder_as_a_user_sees_it(slide, tmp_path):
    out = tmp_path / "job"
    common = ["embed", str(slide), "--out", str(out), "--slide-encoder", "mean-uni2-tiny",
              "--no-seg", "--batch-size", "16", "--quiet"]  # fmt: skip
    first = cli(*common)
    assert first.returncode == 0, first.stderr
    assert "slide embeddings: 1 done, 0 skipped complete" in first.stdout
    assert "patch encoder uni2-tiny" in first.stdout
    assert f"slide features: {out / JOB / 'slide_features_mean-uni2-tiny'}" in first.stdout
    report = json.loads((out / JOB / "embed_report_mean-uni2-tiny.json").read_text())
    assert "mean-uni2-tiny" in json.dumps(report) and "case01" in json.dumps(report)
    assert (out / JOB / "embed_report_uni2-tiny.json").is_file()

    second = cli(*common)
    assert second.returncode == 0
    assert "slide embeddings: 0 done, 1 skipped complete" in second.stdout

    refused = cli("embed", str(slide), "--out", str(out), "--slide-encoder", "threads")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("tumorboard: error: ") and "'threads' is not built" in line

    listed = cli("models", "--slide-encoders", "--json")
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["feather"]["patch_encoder"] == "conch_v15" and rows["feather"]["status"] == "built"
    assert rows["titan"]["status"] == "built" and rows["titan"]["uses_coords"]
    assert rows["gigapath"]["status"] == "built" and rows["gigapath"]["uses_coords"]
    assert rows["prism"]["status"] == "built" and rows["prism"]["embed_dim"] == 1280
    assert rows["threads"]["status"] == "not built" and rows["threads"]["reason"]
