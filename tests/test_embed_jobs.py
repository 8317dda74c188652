"""``tumorboard tile`` and ``tumorboard embed`` as a user runs them, and ``embed_slides`` reruns.

Each test drives the command line in a subprocess (``python -m tumorboard.cli``) or the public
API on small real slides (pyramidal JPEG-tiled TIFFs read by OpenSlide, and PNG images with
``--mpp``), and checks what lands on disk: TRIDENT's job layout, the settings and weights
fingerprint stored with the features, the merged JSON reports and the exit statuses.

Oracles: file paths and attributes read back with h5py and pyarrow; the weights fingerprint
recomputed with ``hashlib.sha256`` over the checkpoint's bytes; features of another run compared
element by element; timestamps of the progress lines against the encoder's own clock.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
h5py = pytest.importorskip("h5py")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("openslide")
pytest.importorskip("tifffile")

from test_slides_readers import synthetic_image, write_test_slide  # noqa: E402
from tumorboard.embed import EmbedOptions, embed_slides, read_features  # noqa: E402
from tumorboard.slides import TilingOptions  # noqa: E402

JOB20 = "20x_256px_0px_overlap"


def cli(*args: str) -> subprocess.CompletedProcess:
    """Run ``tumorboard ARGS...`` the way a user does and return the finished process."""
    return subprocess.run(
        [sys.executable, "-m", "tumorboard.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """Check a refused command: exit 2, one ``tumorboard: error:`` line, no traceback."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tumorboard: error: "), proc.stderr
    return lines[0]


def png(path: Path, width: int = 256, height: int = 256, seed: int = 0) -> Path:
    """Write a noisy RGB image (tissue-like everywhere); read with ``--mpp 0.5`` it is 20x."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 255, (height, width, 3), dtype=np.uint8)).save(path)
    return path


@pytest.fixture(scope="module")
def slide(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("slides") / "case01.tif"
    write_test_slide(path)  # 2048 x 1536 px at 0.5 um/px (20x), two tissue blobs
    return path


def test_rerun_at_another_magnification_embeds_into_its_own_folder(slide, tmp_path):
    out = tmp_path / "job"
    common = ["embed", str(slide), "--out", str(out), "--model", "uni2-tiny", "--no-seg",
              "--batch-size", "16", "--quiet"]  # fmt: skip
    first = cli(*common)
    assert first.returncode == 0, first.stderr
    f20 = out / JOB20 / "features_uni2-tiny" / "case01.h5"
    feats20, coords20, attrs20 = read_features(f20)
    assert len(coords20) == 8 * 6  # the whole 20x grid of 256 px patches
    mtime = f20.stat().st_mtime_ns

    second = cli(*common, "--magnification", "10")
    assert second.returncode == 0, second.stderr
    assert "embedded 1 slide(s), skipped 0" in second.stdout  # not "skipped" as complete
    f10 = out / "10x_256px_0px_overlap" / "features_uni2-tiny" / "case01.h5"
    feats10, coords10, _ = read_features(f10)
    assert len(coords10) == 4 * 3 and feats10.shape == (12, 48)
    assert (out / "10x_256px_0px_overlap" / "embeddings_uni2-tiny" / "case01.parquet").is_file()
    assert f20.stat().st_mtime_ns == mtime  # the 20x features are untouched
    with h5py.File(f10, "r") as f:
        assert f["coords"].attrs["target_magnification"] == 10

    third = cli(*common, "--magnification", "10")
    assert third.returncode == 0 and "skipped 1 complete" in third.stdout


def test_other_settings_in_the_same_folder_are_refused_naming_both_values(slide, tmp_path):
    out = tmp_path / "job"
    kw = dict(model="uni2-tiny", out=out, options=EmbedOptions(batch_size=16), progress=False)
    first = embed_slides(slide, tiling=TilingOptions(segmentation=None, threads=1), **kw)
    assert [r.status for r in first.results] == ["done"] and first.results[0].n_patches == 48
    features = first.results[0].features_path
    before = features.read_bytes()

    bwh = TilingOptions(segmentation="bwh_biopsy", seg_mpp=4.0, threads=1)
    again = embed_slides(slide, tiling=bwh, **kw)
    (res,) = again.results
    assert res.status == "failed" and not again.ok
    assert str(features) in res.error
    assert "segmentation None (stored) vs {" in res.error and "(this run)" in res.error
    assert "'sthresh': 15" in res.error and "--force" in res.error
    assert features.read_bytes() == before  # nothing was overwritten

    redo = embed_slides(slide, tiling=bwh, force=True, **kw)
    assert [r.status for r in redo.results] == ["done"]
    assert 0 < redo.results[0].n_patches < 48  # only the tissue patches now
    with h5py.File(features, "r") as f:
        assert json.loads(f["coords"].attrs["segmentation"])["sthresh"] == 15


def test_weights_fingerprint_is_stored_and_other_weights_are_refused(slide, tmp_path):
    import warnings

    from tumorboard import models
    from tumorboard.models import save_state_dict

    paths = []
    for seed in (0, 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = models.load("uni2-tiny", device="cpu", dtype="fp32", seed=seed)
        paths.append(save_state_dict(module, tmp_path / f"tiny{seed}.pt"))
    sha = ["sha256:" + hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]
    out = tmp_path / "job"
    common = ["embed", str(slide), "--out", str(out), "--model", "uni2-tiny", "--no-seg",
              "--magnification", "10", "--quiet"]  # fmt: skip

    done = cli(*common, "--weights", str(paths[0]))
    assert done.returncode == 0, done.stderr
    job = out / "10x_256px_0px_overlap"
    _, _, attrs = read_features(job / "features_uni2-tiny" / "case01.h5")
    assert attrs["weights_fingerprint"] == sha[0] and attrs["encoder"] == "uni2-tiny"
    meta = pq.read_schema(job / "embeddings_uni2-tiny" / "case01.parquet").metadata
    assert meta[b"weights_fingerprint"].decode() == sha[0]
    assert meta[b"encoder"] == b"uni2-tiny" and meta[b"target_magnification"] == b"10"
    report = json.loads((job / "embed_report_uni2-tiny.json").read_text())
    assert report["weights_fingerprint"] == sha[0]

    other = cli(*common, "--weights", str(paths[1]))
    assert other.returncode == 1
    assert f"weights_fingerprint '{sha[0]}' (stored) vs '{sha[1]}' (this run)" in other.stdout
    _, _, attrs = read_features(job / "features_uni2-tiny" / "case01.h5")
    assert attrs["weights_fingerprint"] == sha[0]  # the earlier features stay


@pytest.mark.parametrize("model", ["uni2-h", "conch"])
def test_real_model_without_weights_is_refused_before_any_work(tmp_path, model):
    image = png(tmp_path / "roi.png")
    out = tmp_path / "job"
    proc = cli("embed", str(image), "--mpp", "0.5", "--no-seg", "--model", model,
               "--out", str(out))  # fmt: skip
    line = one_line_error(proc)
    assert f"model {model!r} needs its weights" in line
    assert "--weights" in line and "--random-weights" in line
    assert not list(out.rglob("*.h5")) and not list(out.rglob("*.parquet"))


def test_random_weights_run_a_real_model_and_are_recorded_as_random(tmp_path):
    image = png(tmp_path / "roi.png")
    out = tmp_path / "job"
    proc = cli("embed", str(image), "--mpp", "0.5", "--no-seg", "--model", "uni",
               "--random-weights", "--out", str(out), "--quiet")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # never TRIDENT's folder of the real model (features_uni_v1): the name says random weights
    assert not (out / JOB20 / "features_uni_v1").exists()
    assert "features_uni_v1-random-weights" in proc.stdout
    feats, coords, attrs = read_features(out / JOB20 / "features_uni_v1-random-weights" / "roi.h5")
    assert feats.shape == (1, 1024) and coords.tolist() == [[0, 0]]
    assert attrs["weights_fingerprint"] == "random"
    assert attrs["encoder"] == "uni_v1-random-weights"
    parquet = out / JOB20 / "embeddings_uni_v1-random-weights" / "roi.parquet"
    meta = pq.read_schema(parquet).metadata
    assert meta[b"weights_fingerprint"] == b"random"
    assert (out / JOB20 / "embed_report_uni_v1-random-weights.json").is_file()
    both = cli("embed", str(image), "--mpp", "0.5", "--model", "uni", "--random-weights",
               "--weights", str(tmp_path / "w.pt"), "--out", str(out))  # fmt: skip
    assert "not both" in one_line_error(both)


def test_folders_lists_and_reports_that_keep_earlier_slides(slide, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(slide, folder / "a.tif")
    write_test_slide(folder / "b.tif", synthetic_image(seed=3)[::-1].copy())
    (folder / "notes.txt").write_text("not a slide")
    listing = tmp_path / "list.txt"
    listing.write_text("# slides of the first batch\nin/a.tif\n")
    out = tmp_path / "job"
    seg = ["--preset", "bwh_biopsy", "--seg-mpp", "4"]

    first = cli("tile", "--slide-list", str(listing), "--out", str(out), *seg)
    assert first.returncode == 0, first.stderr
    assert "patches/s" in first.stderr  # the live progress line
    second = cli("tile", str(folder / "b.tif"), "--out", str(out), *seg, "--quiet")
    assert second.returncode == 0, second.stderr
    report = json.loads((out / JOB20 / "tile_report.json").read_text())
    assert {e["name"]: e["status"] for e in report["slides"]} == {"a": "done", "b": "done"}
    assert report["counts"]["done"] == 2
    for name in ("a", "b"):
        assert (out / "contours_geojson" / f"{name}.geojson").is_file()

    # embed a folder: the coords `tile` made with the same settings are used
    emb = cli("embed", str(folder), str(tmp_path / "gone.svs"), "--out", str(out), *seg,
              "--model", "uni2-tiny", "--quiet")  # fmt: skip
    assert emb.returncode == 1  # the missing input
    assert "FAILED" in emb.stdout and "gone.svs: no such file" in emb.stdout
    rep_path = out / JOB20 / "embed_report_uni2-tiny.json"
    status = {e["name"]: e["status"] for e in json.loads(rep_path.read_text())["slides"]}
    assert status == {"a": "done", "b": "done", "gone": "failed"}
    for name in ("a", "b"):
        coords = h5py.File(out / JOB20 / "patches" / f"{name}_patches.h5", "r")["coords"][...]
        _, fcoords, _ = read_features(out / JOB20 / "features_uni2-tiny" / f"{name}.h5")
        np.testing.assert_array_equal(fcoords, coords)

    # a later run on one slide keeps the others in the report
    again = cli("embed", str(folder / "a.tif"), "--out", str(out), *seg, "--model", "uni2-tiny",
                "--quiet")  # fmt: skip
    assert again.returncode == 0 and "skipped 1 complete" in again.stdout
    status = {e["name"]: e["status"] for e in json.loads(rep_path.read_text())["slides"]}
    assert status == {"a": "skipped", "b": "done", "gone": "failed"}


def test_embed_writes_tissue_contours(slide, tmp_path):
    out = tmp_path / "job"
    rep = embed_slides(
        slide,
        model="uni2-tiny",
        out=out,
        tiling=TilingOptions(segmentation="bwh_biopsy", seg_mpp=4.0, magnification=10),
        progress=False,
    )
    assert rep.ok
    contours = json.loads((out / "contours_geojson" / "case01.geojson").read_text())
    assert contours["type"] == "FeatureCollection" and len(contours["features"]) >= 2


def test_inputs_are_checked_before_the_model_loads(tmp_path):
    bad_weights = tmp_path / "weights.pt"
    bad_weights.write_bytes(b"not a checkpoint")
    out = tmp_path / "job"
    proc = cli("embed", str(tmp_path / "missing.svs"), str(tmp_path / "empty"), "--out",
               str(out), "--model", "uni2-tiny", "--weights", str(bad_weights))  # fmt: skip
    line = one_line_error(proc)
    assert "missing.svs: no such file" in line and "empty: no such file" in line
    assert "checkpoint" not in line  # refused before the weights were read
    (tmp_path / "empty").mkdir()
    proc = cli("tile", str(tmp_path / "empty"), "--out", str(out))
    assert "folder holds no slide files" in one_line_error(proc)
    assert "no slides given" in one_line_error(cli("tile", "--out", str(out)))


def test_slide_without_tissue_is_its_own_status(tmp_path):
    blank = np.full((1536, 2048, 3), 240, np.uint8)  # glass only
    path = tmp_path / "blank.tif"
    write_test_slide(path, blank)
    out = tmp_path / "job"
    tiled = cli("tile", str(path), "--out", str(out), "--quiet")
    assert tiled.returncode == 1
    assert "0 done" in tiled.stdout and "1 no tissue" in tiled.stdout
    (entry,) = json.loads((out / JOB20 / "tile_report.json").read_text())["slides"]
    assert entry["status"] == "no tissue" and entry["n_patches"] == 0
    # the reason says what was found (a blank slide: nothing passes the saturation threshold)
    assert "blank" in entry["error"] and "--no-seg" in entry["error"]

    emb = cli("embed", str(path), "--out", str(out), "--model", "uni2-tiny", "--quiet")
    assert emb.returncode == 1 and "NO TISSUE" in emb.stdout
    assert not (out / JOB20 / "features_uni2-tiny" / "blank.h5").exists()
    (entry,) = json.loads((out / JOB20 / "embed_report_uni2-tiny.json").read_text())["slides"]
    assert entry["status"] == "no tissue"


def test_reader_option_reaches_the_slides(slide, tmp_path):
    runs = {}
    for reader in ("openslide", "tifffile"):
        out = tmp_path / reader
        rep = embed_slides(
            slide,
            model="uni2-tiny",
            out=out,
            tiling=TilingOptions(reader=reader, segmentation=None, magnification=10),
            progress=False,
        )
        assert rep.ok
        runs[reader] = read_features(rep.results[0].features_path)
        assert runs[reader][2]["reader"] == reader
        # OpenSlide reads per patch in Python; the tifffile reader's JPEG tiles go native
        assert runs[reader][2]["patch_loader"] == ("native" if reader == "tifffile" else "python")
    np.testing.assert_array_equal(runs["tifffile"][1], runs["openslide"][1])
    np.testing.assert_allclose(runs["tifffile"][0], runs["openslide"][0], atol=1e-5)
    tiled = cli("tile", str(slide), "--out", str(tmp_path / "t"), "--reader", "tifffile",
                "--no-seg", "--quiet")  # fmt: skip
    assert tiled.returncode == 0
    (entry,) = json.loads((tmp_path / "t" / JOB20 / "tile_report.json").read_text())["slides"]
    assert entry["reader"] == "tifffile"


def test_same_name_slides_from_different_folders_never_share_outputs(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    first = png(tmp_path / "x" / "a.png", width=512)
    second = png(tmp_path / "y" / "a.png", width=768, seed=1)
    out = tmp_path / "job"
    tiling = TilingOptions(mpp=0.5, segmentation=None)
    kw = dict(model="uni2-tiny", out=out, tiling=tiling, progress=False)
    assert [r.status for r in embed_slides(first, **kw).results] == ["done"]
    (res,) = embed_slides(second, **kw).results  # a later run, the other folder
    assert res.status == "failed"
    assert str(first.resolve()) in res.error and str(second) in res.error
    assert "same output name" in res.error
    _, coords, _ = read_features(out / JOB20 / "features_uni2-tiny" / "a.h5")
    assert len(coords) == 2  # still the first slide's features
    # in one run, the second one is refused as before
    both = embed_slides([first, second], **kw).results
    assert [r.status for r in both] == ["skipped", "failed"]
    assert "duplicate slide name 'a'" in both[1].error


class _Clock(io.StringIO):
    """A stream that remembers when each line was written."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[float, str]] = []

    def write(self, text: str) -> int:
        for line in text.splitlines():
            self.lines.append((time.perf_counter(), line))
        return super().write(text)


class _Slow(torch.nn.Module):
    """A 4-d encoder whose forward takes 2.6 s (a big model on a slow device)."""

    image_size, mean, std, embed_dim, encoder_name = 32, (0.5,) * 3, (0.25,) * 3, 4, "slow"

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(3, 4)
        self.calls: list[tuple[float, float]] = []

    def forward(self, x):
        t0 = time.perf_counter()
        time.sleep(2.6)
        self.calls.append((t0, time.perf_counter()))
        return self.proj(x.mean(dim=(2, 3)))


def test_progress_every_two_seconds_with_patches_per_second(tmp_path):
    image = png(tmp_path / "roi.png", width=512)
    model = _Slow()
    clock = _Clock()
    rep = embed_slides(
        image,
        model=model,
        out=tmp_path / "job",
        tiling=TilingOptions(mpp=0.5, segmentation=None),
        options=EmbedOptions(batch_size=2),
        stream=clock,
    )
    assert rep.ok and rep.results[0].n_patches == 2
    ((start, end),) = model.calls  # one batch: one long forward
    during = [line for t, line in clock.lines if start + 1.0 < t < end]
    assert during, clock.getvalue()  # a line while the forward ran (not only per batch)
    assert all("patches/s" in line and "roi" in line for line in during)


def test_embedding_vocabulary(tmp_path):
    image = png(tmp_path / "roi.png", width=512)
    rep = embed_slides([image], model="uni2-tiny", out=tmp_path / "job", mpp=0.5,
                       magnification=10, patch_size=128, overlap=0, threads=1,
                       executor="local", segmentation=None, progress=False)  # fmt: skip
    assert rep.ok and rep.job_dir == tmp_path / "job" / "10x_128px_0px_overlap"
    assert rep.features_dir == rep.job_dir / "features_uni2-tiny"
    assert rep.results[0].n_patches == 2  # 512 x 256 px at 20x is 256 x 128 px at 10x
    for old in ({"mag": 10}, {"patch": 128}, {"workers": 1}):
        with pytest.raises(TypeError):
            embed_slides([image], model="uni2-tiny", out=tmp_path / "x", mpp=0.5, **old)
    with pytest.raises(ValueError, match="executor= picks where the work runs"):
        embed_slides([image], model="uni2-tiny", out=tmp_path / "x", mpp=0.5, backend="ray")
    with pytest.raises(ValueError, match="threads: expected an integer >= 1, got -3"):
        embed_slides([image], model="uni2-tiny", out=tmp_path / "x", mpp=0.5, threads=-3)


def test_another_precision_is_not_reused_as_complete(tmp_path):
    image = png(tmp_path / "roi.png", 512, 256)
    out = tmp_path / "job"
    common = ["embed", str(image), "--mpp", "0.5", "--no-seg", "--model", "uni2-tiny",
              "--device", "cpu", "--out", str(out), "--quiet"]  # fmt: skip
    first = cli(*common, "--dtype", "bf16")
    assert first.returncode == 0, first.stderr
    path = out / JOB20 / "features_uni2-tiny" / "roi.h5"
    feats, _, attrs = read_features(path)
    assert attrs["precision"] == "bf16" and feats.shape[0] == 2
    assert "skipped 1 complete" in cli(*common, "--dtype", "bf16").stdout  # same precision

    fp32 = cli(*common, "--dtype", "fp32")
    assert fp32.returncode == 1, fp32.stdout + fp32.stderr
    assert "skipped 0 complete" in fp32.stdout and "failed 1" in fp32.stdout
    assert "precision 'bf16' (stored) vs 'fp32' (this run)" in fp32.stdout
    assert "--force" in fp32.stdout
    np.testing.assert_array_equal(read_features(path)[0], feats)  # the bf16 features stay

    redo = cli(*common, "--dtype", "fp32", "--force")
    assert redo.returncode == 0 and "embedded 1 slide(s)" in redo.stdout, redo.stdout
    assert read_features(path)[2]["precision"] == "fp32"
    auto = cli(*common)  # --dtype auto on the CPU computes in fp32: the same precision
    assert auto.returncode == 0 and "skipped 1 complete" in auto.stdout, auto.stdout


def test_cli_messages_name_flags_not_keywords(tmp_path):
    image = png(tmp_path / "roi.png")
    # a per-slide failure: a plain image without --mpp
    tiled = cli("tile", str(image), "--out", str(tmp_path / "t"), "--quiet")
    assert tiled.returncode == 1, tiled.stderr
    line = next(ln for ln in tiled.stdout.splitlines() if "FAILED" in ln)
    assert "pass --mpp (microns per pixel" in line and "mpp=" not in line
    # refusals before any work, printed as the one error line
    common = ["embed", str(image), "--mpp", "0.5", "--model", "uni2-tiny", "--out",
              str(tmp_path / "e"), "--quiet"]  # fmt: skip
    onnx = one_line_error(cli(*common, "--backend", "onnxruntime", "--dtype", "fp8"))
    assert "--backend onnxruntime: --compile and --dtype fp8 are options of --backend torch" in onnx
    assert "=" not in onnx
    gpu = one_line_error(cli(*common, "--backend", "onnxruntime", "--decode", "gpu"))
    assert "--decode gpu feeds decoded patches" in gpu and "(use --decode cpu)" in gpu
    both = one_line_error(cli(*common[:-5], "--model", "uni", "--random-weights", "--weights",
                              str(tmp_path / "w.pt"), "--out", str(tmp_path / "e")))  # fmt: skip
    assert "--random-weights, not both" in both and "random_weights=" not in both
