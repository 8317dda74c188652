"""tumorboard's bootstrap intervals as inspect_ai metrics (``tumorboard.integrations.inspect``).

Oracles: an exactly enumerable case (six equal-size patient clusters whose means are 1 or 0.5:
the clustered bootstrap mean is 0.5 + K/12 with K ~ Binomial(6, 1/2), so the 95% percentile
interval is [0.5 + 1/12, 0.5 + 5/12]); scipy.stats.bootstrap for the unclustered percentile
interval (loosely: both are Monte Carlo); and ``tumorboard.stats.bootstrap`` on the values
read back from the log inspect wrote, for the runnable example task (docs/examples).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("inspect_ai")
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.scorer import SampleScore, Score  # noqa: E402
from tumorboard.errors import InvalidArgumentError  # noqa: E402
from tumorboard.integrations.inspect import bootstrap_ci, bootstrap_mean  # noqa: E402
from tumorboard.score import inspect as inspect_scorer  # noqa: E402
from tumorboard.stats import BootstrapOptions, bootstrap  # noqa: E402
from tumorboard.traj import import_logs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "inspect_clustered_ci.py"


def _scores(values, patients):
    return [
        SampleScore(
            score=Score(value=v), sample_id=f"s{i}", sample_metadata={"patient_id": p}
        )  # fmt: skip
        for i, (v, p) in enumerate(zip(values, patients, strict=True))
    ]


# patients 0-2 answer all four questions right, patients 3-5 two of four
VALUES = ["C"] * 12 + ["C", "I", "I", "C"] * 3
PATIENTS = [f"P{i // 4}" for i in range(24)]


def test_clustered_interval_is_the_enumerated_one():
    got = bootstrap_ci(cluster="patient_id", n_resamples=4000, seed=1)(_scores(VALUES, PATIENTS))
    assert got["ci_low"] == pytest.approx(0.5 + 1 / 12, abs=1e-12)
    assert got["ci_high"] == pytest.approx(0.5 + 5 / 12, abs=1e-12)
    assert got["pm"] == pytest.approx(4 / 24, abs=1e-12)


def test_unclustered_interval_agrees_with_scipy_and_is_narrower_than_clusters():
    scipy_stats = pytest.importorskip("scipy.stats")
    x = np.array([1.0 if v == "C" else 0.0 for v in VALUES])
    ours = bootstrap_ci(n_resamples=4000, seed=2)(_scores(VALUES, PATIENTS))
    rng = np.random.default_rng(0)
    ref = scipy_stats.bootstrap(
        (x,), np.mean, n_resamples=4000, method="percentile", random_state=rng
    ).confidence_interval
    assert ours["ci_low"] == pytest.approx(ref.low, abs=0.045)
    assert ours["ci_high"] == pytest.approx(ref.high, abs=0.045)
    # patients answer all right or all wrong: the clustered interval is the enumerated
    # K/6, K ~ Binomial(6, 1/2): [1/6, 5/6], far wider than the one over 24 questions
    alike = ["C"] * 12 + ["I"] * 12
    clustered = bootstrap_ci(cluster="patient_id", n_resamples=4000, seed=2)(
        _scores(alike, PATIENTS)
    )
    assert clustered["ci_low"] == pytest.approx(1 / 6) and clustered["ci_high"] == pytest.approx(
        5 / 6
    )
    assert bootstrap_ci(n_resamples=4000, seed=2)(_scores(alike, PATIENTS))["pm"] < 0.25


def test_mean_metric_and_the_engine_agree():
    opts = BootstrapOptions(n_resamples=500, method="bca", seed=4)
    got = bootstrap_mean(cluster="patient_id", n_resamples=500, method="bca", seed=4)(
        _scores(VALUES, PATIENTS)
    )
    x = np.array([1.0 if v == "C" else 0.0 for v in VALUES])
    ref = bootstrap(x, clusters=PATIENTS, options=opts)
    assert got == {"mean": 0.75, "se": ref.se, "ci_low": ref.ci_low, "ci_high": ref.ci_high}


def test_no_scored_sample_gives_nan_not_a_quiet_zero():
    ci = bootstrap_ci(cluster="patient_id")([])
    mean = bootstrap_mean()([])
    assert set(ci) == {"ci_low", "ci_high", "pm"} and all(np.isnan(v) for v in ci.values())
    assert set(mean) == {"mean", "se", "ci_low", "ci_high"}
    assert all(np.isnan(v) for v in mean.values())


def test_bad_input_is_refused_clearly():
    with pytest.raises(InvalidArgumentError, match="level"):
        bootstrap_ci(level=1.5)
    with pytest.raises(InvalidArgumentError, match="method"):
        bootstrap_ci(method="studentized")
    scores = _scores(["C", "I"], ["P0", "P1"])
    scores[1].sample_metadata = {}
    with pytest.raises(InvalidArgumentError, match=r"sample 's1' has no metadata 'patient_id'"):
        bootstrap_ci(cluster="patient_id")(scores)


def test_example_task_reports_the_interval_and_two_commands_give_the_table(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # inspect resolves task files relative to the working directory
    task_file = str(EXAMPLE.relative_to(ROOT))
    [log] = inspect_eval(task_file, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success"
    [sc] = log.results.scores
    m = sc.metrics
    assert m["accuracy"].value == pytest.approx(0.75)
    assert {"ci_low", "ci_high", "pm"} <= set(m)
    assert m["ci_low"].group == "bootstrap_ci"
    # the same interval from the engine, on the values inspect logged
    full = read_eval_log(log.location)
    x = np.array([1.0 if s.scores["match"].value == "C" else 0.0 for s in full.samples])
    patients = [s.metadata["patient_id"] for s in full.samples]
    ref = bootstrap(x, clusters=patients,
                    options=BootstrapOptions(n_resamples=2000, method="bca"))  # fmt: skip
    assert m["ci_low"].value == pytest.approx(ref.ci_low, abs=1e-12)
    assert m["ci_high"].value == pytest.approx(ref.ci_high, abs=1e-12)
    # from the log to tumorboard's table: import, then score (clustered by patient)
    import_logs("inspect", tmp_path / "logs", tmp_path / "store")
    opts = BootstrapOptions(n_resamples=2000, method="bca")
    table = inspect_scorer.score(tmp_path / "store", options=opts, cluster="patient").table
    [row] = table.rows(named=True)
    assert row["metric"] == "match" and row["n"] == 24
    assert row["estimate"] == pytest.approx(0.75)
    assert row["ci_low"] == pytest.approx(ref.ci_low, abs=1e-12)
    assert row["ci_high"] == pytest.approx(ref.ci_high, abs=1e-12)


def test_a_non_finite_score_names_its_sample():
    # the bootstrap's own message named "record 1", a position the user never sees in inspect
    scores = _scores([1.0, float("nan"), 0.0], ["P0", "P0", "P1"])
    for metric in (bootstrap_ci(), bootstrap_mean(cluster="patient_id")):
        with pytest.raises(InvalidArgumentError, match="sample 's1' has the score value nan"):
            metric(scores)
