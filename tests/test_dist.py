"""Tests of tumorboard.dist on a local Ray started once for this module (2 CPUs).

Distributed scoring equals the single-process Poisson bootstrap bit for bit for any shard count;
distributed embedding writes byte-identical features to a local run, resumes like it, and
retries the slide of a worker that dies.
"""

from __future__ import annotations

import os
import shutil
import sys

import numpy as np
import polars as pl
import pytest

ray = pytest.importorskip("ray")

from tumorboard.dist import score_store, split_parts  # noqa: E402
from tumorboard.stats import BootstrapOptions, bootstrap  # noqa: E402
from tumorboard.traj import Store  # noqa: E402

B = 200
FIELDS = ("estimate", "boot_mean", "se", "ci_low", "ci_high", "n")


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": ":".join(sys.path)}})  # fmt: skip
    yield ray
    ray.shutdown()


def _make_store(path, n_parts: int = 4, per_part: int = 400) -> Store:
    rng = np.random.default_rng(7)
    store = Store(path, fsync=False)
    runs = [
        ("r1", "mtbbench", "multimodal", "m-a", True),
        ("r2", "mtbbench", "multimodal", "m-b", False),
        ("r3", "mtbbench", None, "m-a", None),
        ("r4", "other", "x", "m-a", True),
    ]
    store.write_runs(pl.DataFrame(runs, schema=["run_id", "benchmark", "track", "model", "tools"],
                                  orient="row"))  # fmt: skip
    for p in range(n_parts):
        n = per_part
        correct = (rng.random(n) < 0.6).tolist()
        for i in rng.choice(n, 10, replace=False):
            correct[i] = None
        patients = [f"p{j}" for j in rng.integers(0, 30, n)]
        patients[0] = None
        store.write_items(
            pl.DataFrame(
                {
                    "run_id": [runs[j][0] for j in rng.integers(0, 4, n)],
                    "patient_id": patients,
                    "item_id": [f"q{p}-{i}" for i in range(n)],
                    "task": [f"t{j}" for j in rng.integers(0, 3, n)],
                    "correct": correct,
                }
            )
        )
    return store


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return _make_store(tmp_path_factory.mktemp("dist") / "store")


def _oracle(store: Store):
    """Run the single-process Poisson bootstrap of the whole items frame (no partials involved)."""
    df = (
        store.items(with_runs=True)
        .filter(pl.col("benchmark") == "mtbbench")
        .with_columns(
            pl.col("track").fill_null("default"),
            pl.col("correct").fill_null(False),
            pl.col("patient_id").fill_null(""),
        )  # fmt: skip
        .collect()
    )
    return df, bootstrap(
        df.get_column("correct").cast(pl.Float64).to_numpy(),
        groups=df.select("track", "model", "tools", "task"),
        keys=df.select("run_id", "patient_id", "item_id"),
        scheme="poisson",
        options=BootstrapOptions(n_resamples=B, seed=3),
    )


def _same(a, b) -> None:
    for f in FIELDS:
        x, y = np.asarray(getattr(a, f)), np.asarray(getattr(b, f))
        assert x.dtype == y.dtype and x.shape == y.shape, f
        assert x.tobytes() == y.tobytes(), f


def test_local_scoring_matches_whole_data_poisson_bootstrap(store):
    df, ref = _oracle(store)
    got = score_store(store, options=BootstrapOptions(n_resamples=B, seed=3))
    _same(got.result, ref)
    # hand check of the point estimates against a plain polars group mean
    report = got.report()
    table = report.table
    assert report.convention.startswith("tumorboard (per-task accuracy")  # every report names it
    means = df.group_by("track", "model", "tools", "task").agg(
        pl.col("correct").cast(pl.Float64).mean().alias("acc"), pl.len().alias("cnt"),
        pl.col("correct").sum().alias("k"))  # fmt: skip
    joined = table.join(means, on=["track", "model", "tools", "task"])
    assert joined.height == table.height == 9  # 3 mtbbench runs x 3 tasks
    assert (joined["n"] == joined["cnt"]).all() and (joined["n_correct"] == joined["k"]).all()
    assert np.allclose(joined["estimate"], joined["acc"], rtol=0, atol=1e-12)
    assert set(table["track"]) == {"multimodal", "default"}
    # every tabular result has .to_polars(): the store score and its report give this table
    assert got.to_polars().equals(table) and got.report().to_polars().equals(table)
    assert got.executor == "local"


@pytest.mark.parametrize("shards", [1, 2, 3])
def test_ray_scoring_bit_identical_for_any_shard_count(cluster, store, shards):
    _, ref = _oracle(store)
    seen = []
    got = score_store(
        store,
        options=BootstrapOptions(n_resamples=B, seed=3),
        executor="ray",
        shards=shards,
        progress=lambda d, t: seen.append((d, t)),
    )
    assert got.n_shards == shards and got.executor == "ray"
    assert seen[-1] == (shards, shards) and len(seen) == shards
    _same(got.result, ref)
    local = score_store(store, options=BootstrapOptions(n_resamples=B, seed=3), shards=shards)
    _same(got.result, local.result)
    assert got.report().table.equals(local.report().table)


def test_split_parts_is_contiguous_and_complete():
    parts = [f"p{i}" for i in range(5)]
    assert split_parts(parts, 2) == [["p0", "p1", "p2"], ["p3", "p4"]] or split_parts(parts, 2) == [
        ["p0", "p1"],
        ["p2", "p3", "p4"],
    ]
    assert split_parts(parts, 9) == [[p] for p in parts]
    assert split_parts(parts, 1) == [parts]


def test_errors(store, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="executor: expected 'local' or 'ray', got 'spark'"):
        score_store(store, executor="spark")
    with pytest.raises(TypeError, match="backend"):
        score_store(store, backend="ray")  # one vocabulary: backend names compute backends only
    with pytest.raises(ValueError, match="shards"):
        score_store(store, shards=0)
    with pytest.raises(ValueError, match="no items of benchmark 'nope'"):
        score_store(store, benchmark="nope", options=BootstrapOptions(n_resamples=10))
    from tumorboard.dist import _ray

    with pytest.raises(ConnectionError, match="cannot reach the Ray cluster at '127.0.0.1:1'"):
        score_store(store, executor="ray", ray_address="127.0.0.1:1")
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(
        ImportError, match=r"needs ray, which is not installed.*pip install .*\[dist\]'"
    ):
        _ray.require_ray()


def test_cli_score_shards_and_ray_address(cluster, store, capsys):
    import json

    from tumorboard.cli import main

    local = score_store(store, options=BootstrapOptions(n_resamples=B, seed=3)).report().table
    for extra in (["--shards", "2"], ["--ray-address", "local", "--shards", "3"]):
        argv = [
            "score",
            str(store.path),
            "--n-resamples",
            str(B),
            "--seed",
            "3",
            "--format",
            "json",
        ]
        assert main(argv + extra) == 0
        rows = json.loads(capsys.readouterr().out)["rows"]  # Report.to_json()
        assert len(rows) == local.height == 9
        for row, ref in zip(rows, local.iter_rows(named=True), strict=True):
            assert (row["model"], row["task"], row["n"]) == (ref["model"], ref["task"], ref["n"])
            assert row["ci_low"] == ref["ci_low"] and row["ci_high"] == ref["ci_high"]
    assert main(["score", str(store.path), "--shards", "2", "--cluster", "patient"]) != 0
    assert "--cluster: clustered intervals are not available" in capsys.readouterr().err


# ----------------------------------------------------------------------------- embedding

try:
    import torch
except ImportError:  # the embedding tests skip
    torch = None

if torch is not None:

    class DieOnce(torch.nn.Module):
        """A fixed deterministic encoder whose process exits on its first forward.

        The process exits (as if OOM-killed) while ``marker`` does not exist; later forwards
        work normally.
        """

        def __init__(self, marker: str) -> None:
            super().__init__()
            self.marker = marker
            self.proj = torch.nn.Linear(147, 8)
            g = torch.Generator().manual_seed(0)
            with torch.no_grad():
                self.proj.weight.copy_(torch.randn(8, 147, generator=g) * 0.1)
                self.proj.bias.copy_(torch.randn(8, generator=g))

        def forward(self, x):
            if not os.path.exists(self.marker):
                open(self.marker, "w").close()
                os._exit(1)
            return self.proj(torch.nn.functional.avg_pool2d(x, 32).flatten(1))


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("h5py")
    pytest.importorskip("openslide")
    from test_slides_readers import write_test_slide

    d = tmp_path_factory.mktemp("slides")
    paths = [d / "case01.tif"]
    write_test_slide(paths[0])
    for name in ("case02.tif",):
        shutil.copy(paths[0], d / name)
        paths.append(d / name)
    return paths


def _same_outputs(a, b) -> None:
    import h5py
    import pyarrow.parquet as pq

    assert [r.status for r in a.results] == [r.status for r in b.results]
    assert a.encoder == b.encoder and len(a.results) == 2
    for ra, rb in zip(a.results, b.results, strict=True):
        assert ra.n_patches == rb.n_patches > 0
        with h5py.File(ra.features_path, "r") as fa, h5py.File(rb.features_path, "r") as fb:
            for name in ("features", "coords"):
                xa, xb = fa[name][...], fb[name][...]
                assert xa.dtype == xb.dtype and xa.tobytes() == xb.tobytes()
        assert pq.read_table(ra.parquet_path).equals(pq.read_table(rb.parquet_path))


def _embed_kwargs():
    from test_slides_pipeline import PARAMS
    from tumorboard.embed import EmbedOptions
    from tumorboard.slides import TilingOptions

    # the two options objects travel to the Ray actors as they are (frozen dataclasses)
    return dict(
        tiling=TilingOptions(magnification=10, segmentation=PARAMS, threads=1),
        options=EmbedOptions(batch_size=16),
        progress=False,
    )


def test_ray_embedding_equals_local_run(cluster, collection, tmp_path):
    import warnings

    from tumorboard.embed import embed_slides

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the random-weights warning of uni2-tiny
        local = embed_slides(collection, model="uni2-tiny", out=tmp_path / "local",
                             **_embed_kwargs())  # fmt: skip
        dist = embed_slides(collection, model="uni2-tiny", out=tmp_path / "ray", executor="ray",
                            **_embed_kwargs())  # fmt: skip
    assert local.ok and dist.ok and local.encoder == "uni2-tiny"
    _same_outputs(local, dist)
    # resume: a second distributed run skips every complete slide, as the local engine does
    again = embed_slides(collection, model="uni2-tiny", out=tmp_path / "ray", executor="ray",
                         **_embed_kwargs())  # fmt: skip
    assert [r.status for r in again.results] == ["skipped"] * 2


def test_killed_worker_slide_is_retried(cluster, collection, tmp_path):
    import io

    from tumorboard.embed import embed_slides

    marker = str(tmp_path / "died")
    log = io.StringIO()
    dist = embed_slides(collection, model=DieOnce(marker), out=tmp_path / "ray", executor="ray",
                        **{**_embed_kwargs(), "progress": True}, stream=log)  # fmt: skip
    assert os.path.exists(marker)  # a worker really died
    assert "worker died on" in log.getvalue() and "retrying" in log.getvalue()
    assert dist.ok and [r.status for r in dist.results] == ["done"] * 2
    local = embed_slides(collection, model=DieOnce(marker), out=tmp_path / "local",
                         **_embed_kwargs())  # fmt: skip
    _same_outputs(local, dist)


def test_mtbbench_scorer_executors(cluster, store):
    from tumorboard.score import mtbbench

    ray_rep = mtbbench.score(
        store, executor="ray", shards=2, options=BootstrapOptions(n_resamples=B, seed=3)
    )
    ref = score_store(store, options=BootstrapOptions(n_resamples=B, seed=3)).report()
    assert ray_rep.table.equals(ref.table)
    # the same store scored in this process as a frame (multinomial bootstrap): same estimates
    local = mtbbench.score(store.path, options=BootstrapOptions(n_resamples=B, seed=3)).table
    acc = local.filter((pl.col("metric") == "accuracy") & (pl.col("task") != "overall"))
    joined = acc.join(ref.table, on=["track", "model", "tools", "task"], suffix="_ray")
    assert joined.height == ref.table.height == 9
    assert (joined["n"] == joined["n_ray"]).all()
    assert (joined["n_correct"] == joined["n_correct_ray"]).all()
    assert np.array_equal(joined["estimate"].to_numpy(), joined["estimate_ray"].to_numpy())
    with pytest.raises(TypeError, match="scores a trajectory store"):
        mtbbench.score(acc, executor="ray")
    with pytest.raises(ValueError, match="cluster= is not available"):
        mtbbench.score(store, executor="ray", cluster="patient")
    with pytest.raises(ValueError, match="executor: expected"):
        mtbbench.score(store, executor="spark")


def test_ray_slide_encoder_equals_local_run(cluster, collection, tmp_path):
    """``slide_encoder=`` with ``executor="ray"`` equals a local run.

    The patch stage runs on Ray; the slide vectors are pooled in the driver.
    """
    import warnings

    import numpy as np
    from tumorboard.embed import embed_slides, read_slide_features

    runs = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # random weights
        for executor in ("local", "ray"):
            runs[executor] = embed_slides(
                collection, model="uni2-tiny", slide_encoder="abmil", random_weights=True,
                out=tmp_path / executor, executor=executor, **_embed_kwargs(),
            )  # fmt: skip
    local, dist = runs["local"], runs["ray"]
    assert local.ok and dist.ok and [r.status for r in dist.results] == ["done"] * 2
    a = read_slide_features(local.patch_report.job_dir, local.slide_encoder)
    b = read_slide_features(dist.patch_report.job_dir, dist.slide_encoder)
    assert a.names == b.names and np.array_equal(a.features, b.features)
