"""Tests of the layout of ``tumorboard.score`` (python/tumorboard/score/__init__.py).

* every scorer is a module named after its benchmark that defines ``score``; the module is not
  shadowed by a function of the same name, whichever way it is imported; ``score.get`` returns
  the module's ``score`` and ``score.benchmarks`` lists the modules;
* each scorer validates its input frame exactly once (``_validate.input_frame``), however many
  metrics it summarizes, and the public ``summarize`` validates once too;
* the scorers' ``options=`` gives bit-identical intervals to the keywords it replaced (values
  computed with ``mtbbench(frame, n_resamples=300, level=0.9, seed=2, cluster="patient_id")``
  before the change);
* the ``tumorboard score`` flags map to one BootstrapOptions.
"""

from __future__ import annotations

import importlib
import inspect
import types

import polars as pl
import pytest
import tumorboard.score as score
import tumorboard.score.mtbbench
from tumorboard.cli import _bootstrap_options, build_parser
from tumorboard.score import _validate, mtbbench, summarize
from tumorboard.stats import BootstrapOptions

BENCHMARKS = ("inspect", "lammi", "medbench", "medinsight", "mtbbench", "radabench")
FAST = BootstrapOptions(n_resamples=20, seed=1)
CALL = pl.Struct({"name": pl.String, "input": pl.String, "success": pl.Boolean})


@pytest.mark.parametrize("name", BENCHMARKS)
def test_scorer_module_is_not_shadowed(name):
    module = importlib.import_module(f"tumorboard.score.{name}")
    assert isinstance(module, types.ModuleType)
    assert module.__name__ == f"tumorboard.score.{name}"
    assert getattr(score, name) is module  # the package attribute is the module
    assert callable(module.score) and score.get(name) is module.score
    assert "score" in getattr(module, "__all__", ["score"])
    assert score.benchmarks() == list(BENCHMARKS)


def test_import_statement_gives_the_module():
    assert isinstance(tumorboard.score.mtbbench, types.ModuleType)
    assert mtbbench is tumorboard.score.mtbbench


def _frames() -> dict[str, pl.DataFrame]:
    gt = ["Anatomy Classifier", "Modality Classifier", "Organ Segmentor"]
    return {
        "mtbbench": pl.DataFrame({
            "model": ["a"] * 6 + ["b"] * 6, "task": ["t1", "t2", "t3"] * 4,
            "correct": [True, False, True, True, True, False] * 2,
            "files_accessed": [1, 2, 0, 1, 3, 1] * 2, "files_hallucinated": [0, 1, 0, 0, 0, 1] * 2,
        }),
        "radabench": pl.DataFrame({
            "model": ["m"] * 4, "task": ["x", "x", "y", "y"], "gt_tools": [gt] * 4,
            "called_tools": [gt, gt[:2], [gt[0], "X"], gt], "completed": [True, False, True, True],
        }),
        "lammi": pl.DataFrame(
            {"model": ["m"] * 3, "task": ["v", "v", "r"],
             "tool_calls": [[{"name": "zoom", "input": "x", "success": True}], [], None],
             "output_valid": [True, False, True]},
            schema_overrides={"tool_calls": pl.List(CALL)},
        ),
        "medinsight": pl.DataFrame({
            "model": ["a", "a", "b"], "case_id": [1, 2, 1],
            "score_matrix": [[[1.0, 0.0]], [[0.8]], [[0.3, 0.6]]],
        }),
        "inspect": pl.DataFrame({
            "model": ["m"] * 6, "task": ["t"] * 6, "scorer": ["match", "includes"] * 3,
            "value": [1.0, 0.0, 0.0, 1.0, None, 1.0], "sample_id": ["a", "a", "b", "b", "c", "c"],
        }),
        "medbench": pl.DataFrame({
            "model": ["m"] * 6, "task": ["t1", "t1", "t2", "t2", "t3", "t3"],
            "dimension": ["d1", "d1", "d1", "d1", "d2", "d2"],
            "metric": ["accuracy"] * 4 + ["score"] * 2,
            "correct": [True, False, True, True, None, None], "score": [None] * 4 + [0.5, 1.0],
        }),
    }  # fmt: skip


@pytest.mark.parametrize("name", BENCHMARKS)
def test_scorer_validates_its_frame_once(name, monkeypatch):
    calls: list[str] = []
    original = _validate.input_frame

    def counting(df, **kw):
        calls.append(kw["where"])
        return original(df, **kw)

    monkeypatch.setattr(_validate, "input_frame", counting)
    report = score.get(name)(_frames()[name], options=FAST)
    # several metrics were summarized, from a frame validated once
    assert report.table.height > 1 and report.table["metric"].n_unique() >= 1
    assert calls == [name]


@pytest.mark.parametrize("name", BENCHMARKS)
def test_every_scorer_takes_the_shared_keywords(name):
    """``tumorboard score`` calls every scorer as f(frame, options=, cluster=, convention=)."""
    params = inspect.signature(score.get(name)).parameters
    for kw in ("options", "cluster", "convention"):
        assert params[kw].kind is inspect.Parameter.KEYWORD_ONLY, (name, kw)
    report = score.get(name)(_frames()[name], options=FAST, cluster=None, convention=None)
    assert report.convention  # every report names the convention it used


def test_public_summarize_validates_once(monkeypatch):
    calls: list[str] = []
    original = _validate.input_frame
    monkeypatch.setattr(
        _validate, "input_frame", lambda df, **kw: calls.append(kw["where"]) or original(df, **kw)
    )
    frame = _frames()["mtbbench"]
    t = summarize(frame, value="correct", benchmark="toy", metric="accuracy", options=FAST)
    assert t.height == 2 * 4  # 2 models x (3 tasks + overall)
    assert calls == ["summarize(metric='accuracy')"]


def test_scorer_options_match_the_keyword_path():
    correct = [c == "1" for c in "0110010111000101111111110010011100100000"]
    frame = pl.DataFrame({
        "model": ["m"] * 20 + ["n"] * 20, "task": (["t1"] * 10 + ["t2"] * 10) * 2,
        "correct": correct, "patient_id": [f"p{i % 7}" for i in range(40)],
    })  # fmt: skip
    opts = BootstrapOptions(n_resamples=300, level=0.9, seed=2)
    table = mtbbench.score(frame, options=opts, cluster="patient_id").table
    got = table.select("ci_low", "ci_high", "boot_mean").to_numpy().tolist()
    # np.percentile of the resampled accuracies, to the last bit (the engine computed numpy's
    # linear index as n q + (1 - q) - 1 until 2026-11-28, one ulp lower here: 0.2992857142857142)
    assert got[0] == [0.29928571428571427, 0.8333333333333334, 0.5863503071003067]
    assert got[2] == [0.39421620046620043, 0.7595454545454546, 0.593591709216709]
    assert got[5] == [0.28255050505050505, 0.5775757575757576, 0.44207641432641454]  # (was ...505)
    notes = " ".join(mtbbench.score(frame, options=opts).notes)
    assert "0.9 percentile interval of 300 bootstrap resamples (seed 2)" in notes


def test_cli_flags_map_to_one_options_object():
    args = build_parser().parse_args(
        ["score", "store", "--n-resamples", "250", "--level", "0.9", "--method", "basic",
         "--seed", "4", "--threads", "2"]
    )  # fmt: skip
    assert _bootstrap_options(args) == BootstrapOptions(
        n_resamples=250, level=0.9, method="basic", seed=4, threads=2
    )
    default = build_parser().parse_args(["score", "store"])
    assert _bootstrap_options(default) == BootstrapOptions()
