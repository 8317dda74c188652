"""``tumorboard demo`` end to end.

Every announced output exists and reads back with h5py, pyarrow and the Store; a second run into
the same folder never overwrites the first; without torch the slide part is skipped with the
reason and the rest still runs.
"""

from __future__ import annotations

import sys

import numpy as np
import polars as pl
import pytest
from tumorboard._demo import run_demo, sample_slide_image
from tumorboard.traj import Store


def test_demo_writes_and_explains_every_output(tmp_path, capsys):
    pytest.importorskip("torch")
    h5py = pytest.importorskip("h5py")
    pq = pytest.importorskip("pyarrow.parquet")
    out = run_demo(seed=0, n_resamples=100, out=tmp_path / "demo")
    text = capsys.readouterr().out
    assert out == tmp_path / "demo"
    job = "embed/20x_256px_0px_overlap"
    for rel in ("slides/sample_case.tif", f"{job}/features_uni2-tiny/sample_case.h5",
                f"{job}/embeddings_uni2-tiny/sample_case.parquet",
                "embed/20x_256px_0px_overlap/patches/sample_case_patches.h5",
                "slides/sample_case_roi.png", "report.md"):  # fmt: skip
        assert (out / rel).is_file(), rel
        assert rel in text  # announced with its meaning
    assert "Paired bootstrap" in text  # the original scoring demo still runs
    with h5py.File(out / "embed/20x_256px_0px_overlap/features_uni2-tiny/sample_case.h5", "r") as f:
        feats, coords = f["features"][...], f["coords"][...]
    assert feats.shape[1] == 48 and feats.shape[0] == coords.shape[0] > 0
    table = pq.read_table(
        out / "embed/20x_256px_0px_overlap/embeddings_uni2-tiny/sample_case.parquet"
    )
    np.testing.assert_array_equal(np.asarray(table["x"]), coords[:, 0])
    items = Store(out / "trajectories").items(with_runs=True).collect()
    assert items.height == 48 and set(items["model"]) == {"agent-with-tools",
                                                          "agent-without-tools"}  # fmt: skip
    # the tool outputs of the slide part are in the log
    events = Store(out / "trajectories").events().collect()
    assert {"dab_positive_fraction", "ihc_positive_percentage"} <= set(
        events.filter(pl.col("tool").is_not_null())["tool"].to_list()
    )
    report = (out / "report.md").read_text()
    assert "accuracy" in report and "agent-with-tools" in report
    for tool in ("dab_positive_fraction", "ihc_positive_percentage"):
        assert f"[tools] {tool}" in text
    # a second run into the same, now non-empty folder goes to a fresh sub-folder
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    out2 = run_demo(seed=0, n_resamples=100, out=out)
    assert out2.parent == out and out2 != out
    assert {p: p.stat().st_mtime_ns for p in before} == before


def test_demo_without_torch_skips_the_slide_part(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now fails, find_spec: None
    out = run_demo(seed=1, n_resamples=50, out=tmp_path / "d")
    text = capsys.readouterr().out
    assert "[slides] skipped: missing torch" in text
    assert (out / "report.md").is_file() and not (out / "slides").exists()
    assert Store(out / "trajectories").items().collect().height == 48


def test_sample_slide_is_deterministic_and_has_tissue():
    a = sample_slide_image(seed=3, width=256, height=192)
    b = sample_slide_image(seed=3, width=256, height=192)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (192, 256, 3) and a.dtype == np.uint8
    assert (a[0, 0] > 230).all()  # the corner is glass
    assert (a.min(-1) < 200).mean() > 0.2  # tissue covers a good part
