"""``score(..., interval=)`` and ``tumorboard score --interval``: closed-form proportion intervals.

Oracles: statsmodels ``proportion_confint`` (wilson, agresti_coull, beta, normal) per (model,
task) row, and the cluster-robust OLS standard error (``cov_type="cluster"``) for cr1; the
default stays the bootstrap, bit-identical to a call without ``interval=``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from tumorboard import stats
from tumorboard.errors import InvalidArgumentError
from tumorboard.score import inspect, lammi, mtbbench, summarize

sm = pytest.importorskip("statsmodels.api")
from statsmodels.stats.proportion import proportion_confint  # noqa: E402

SM_METHOD = {"wilson": "wilson", "agresti_coull": "agresti_coull",
             "clopper_pearson": "beta", "normal": "normal"}  # fmt: skip
OPTS = stats.BootstrapOptions(n_resamples=200, seed=3)


def frame(seed: int = 0) -> pl.DataFrame:
    """Two models, two tasks, 12 patients of 3 to 6 questions, with file counts."""
    rng = np.random.default_rng(seed)
    rows = []
    for model, skill in (("a", 0.7), ("b", 0.45)):
        for task in ("t1", "t2"):
            for pid in range(12):
                bump = rng.normal(0, 0.2)
                for q in range(3 + pid % 4):
                    rows.append({"model": model, "task": task, "patient_id": f"p{pid}",
                                 "correct": bool(rng.random() < skill + bump),
                                 "files_accessed": int(rng.integers(0, 4)), "q": q})  # fmt: skip
    return pl.DataFrame(rows)


@pytest.mark.parametrize("method", list(SM_METHOD))
def test_mtbbench_interval_matches_statsmodels(method):
    df = frame()
    rep = mtbbench.score(df, options=OPTS, interval=method)
    table = rep.table
    acc = table.filter((pl.col("metric") == "accuracy") & (pl.col("task") != "overall"))
    assert acc.height == 4
    for r in acc.iter_rows(named=True):
        sub = df.filter((pl.col("model") == r["model"]) & (pl.col("task") == r["task"]))
        k, n = int(sub["correct"].sum()), sub.height
        lo, hi = proportion_confint(k, n, alpha=0.05, method=SM_METHOD[method])
        assert (r["ci_low"], r["ci_high"]) == pytest.approx((lo, hi), abs=1e-10)
        assert r["pm"] == pytest.approx((hi - lo) / 2, abs=1e-12)
        assert r["interval"] == method and r["n"] == n
    # the count metric and the overall rows keep the bootstrap, and say so
    boot = mtbbench.score(df, options=OPTS)
    others = table.filter((pl.col("metric") != "accuracy") | (pl.col("task") == "overall"))
    assert set(others["interval"]) == {"bootstrap"}
    same = boot.table.filter((pl.col("metric") != "accuracy") | (pl.col("task") == "overall"))
    assert others.drop("interval").equals(same)
    assert "Wilson" in rep.interval or method != "wilson"
    assert any(n.startswith(f"interval {method}:") for n in rep.notes)


def test_default_is_the_bootstrap_bit_identical():
    df = frame()
    a = mtbbench.score(df, options=OPTS)
    b = mtbbench.score(df, options=OPTS, interval="bootstrap")
    assert a.table.equals(b.table) and "interval" not in a.table.columns
    assert a.interval == b.interval and a.notes == b.notes


def test_cr1_and_wilson_deff_on_the_cluster_column():
    df = frame(1)
    rep = mtbbench.score(df, options=OPTS, cluster="patient", interval="cr1")
    deff = mtbbench.score(df, options=OPTS, cluster="patient", interval="wilson_deff")
    for r, d in zip(rep.table.iter_rows(named=True), deff.table.iter_rows(named=True),
                    strict=True):  # fmt: skip
        if r["metric"] != "accuracy" or r["task"] == "overall":
            continue
        sub = df.filter((pl.col("model") == r["model"]) & (pl.col("task") == r["task"]))
        y = sub["correct"].cast(pl.Float64).to_numpy()
        g = sub["patient_id"].to_numpy()
        fit = sm.OLS(y, np.ones_like(y)).fit(cov_type="cluster", cov_kwds={"groups": g})
        z = 1.959963984540054
        p = y.mean()
        assert (r["ci_low"], r["ci_high"]) == pytest.approx(
            (max(0, p - z * fit.bse[0]), min(1, p + z * fit.bse[0])), abs=1e-10
        )
        want = stats.proportion_interval(y, method="wilson_deff", clusters=g)
        assert (d["ci_low"], d["ci_high"]) == (want.ci_low, want.ci_high)
        assert r["interval"] == "cr1" and d["interval"] == "wilson_deff"
    with pytest.raises(InvalidArgumentError, match=r"mtbbench: interval: expected cluster="):
        mtbbench.score(df, interval="cr1")


def test_bad_interval_and_refused_combinations():
    df = frame()
    with pytest.raises(InvalidArgumentError, match=r"interval: expected one of .*got 'exact'"):
        mtbbench.score(df, interval="exact")
    with pytest.raises(InvalidArgumentError, match="convention='paper'"):
        mtbbench.score(df, interval="wilson", convention="paper")
    with pytest.raises(InvalidArgumentError, match="summarize.*expected one of"):
        summarize(df, value="correct", benchmark="x", metric="m", interval="bogus")


def test_summarize_non_binary_metric_keeps_the_bootstrap():
    df = frame()
    got = summarize(df, value="files_accessed", benchmark="x", metric="files",
                    options=OPTS, interval="wilson")  # fmt: skip
    plain = summarize(df, value="files_accessed", benchmark="x", metric="files", options=OPTS)
    assert set(got["interval"]) == {"bootstrap"}
    assert got.drop("interval").equals(plain)


def test_inspect_and_lammi_take_the_keyword():
    df = frame().with_columns(
        pl.lit("acc").alias("scorer"), pl.col("correct").cast(pl.Float64).alias("value")
    )
    rep = inspect.score(df, options=OPTS, interval="clopper_pearson")
    r = rep.table.row(0, named=True)
    sub = df.filter((pl.col("model") == r["model"]) & (pl.col("task") == r["task"]))
    lo, hi = proportion_confint(int(sub["value"].sum()), sub.height, method="beta")
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((lo, hi), abs=1e-10)
    with pytest.raises(InvalidArgumentError, match="lammi: interval"):
        lammi.score(pl.DataFrame({"model": ["a"]}), interval="nope")


# ---------------------------------------------------------------- command line, in a subprocess


def _store(tmp_path: Path) -> Path:
    from tumorboard.cli import main

    root = tmp_path / "logs" / "alpha"
    root.mkdir(parents=True)
    for pid, right in (("1", lambda p: p % 2 == 0), ("2", lambda p: p < 5)):
        recs = [{"question": f"Question {p}?\nA) one\nB) two", "answer": "A) one",
                 "response": "A) one" if right(p) else "B) two", "correct": right(p),
                 "question_time": 1.0} for p in range(12)]  # fmt: skip
        (root / f"{pid}_chatlog_1700000000.json").write_text(json.dumps(recs))
    st = tmp_path / "store"
    assert main(["import", "mtbbench", str(tmp_path / "logs"), "--store", str(st)]) == 0
    return st


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tumorboard.cli", *argv], capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_cli_score_interval_prints_the_interval(tmp_path, capsys):
    st = _store(tmp_path)
    capsys.readouterr()
    out = _cli("score", str(st), "--interval", "wilson", "--format", "csv",
               "--n-resamples", "100")  # fmt: skip
    assert out.returncode == 0, out.stderr
    table = pl.read_csv(out.stdout.encode())
    acc = table.filter((pl.col("metric") == "accuracy") & (pl.col("task") != "overall"))
    assert acc.height >= 1
    for r in acc.iter_rows(named=True):
        k = round(r["estimate"] * r["n"])
        lo, hi = proportion_confint(k, r["n"], method="wilson")
        assert (r["ci_low"], r["ci_high"]) == pytest.approx((lo, hi), abs=1e-12)
        assert r["interval"] == "wilson"
    md = _cli("score", str(st), "--interval", "wilson", "--n-resamples", "100")
    assert md.returncode == 0, md.stderr
    assert "| interval |" in md.stdout.splitlines()[0] or "interval" in md.stdout
    assert "interval wilson:" in md.stdout
    bad = _cli("score", str(st), "--interval", "cr1", "--n-resamples", "100")
    assert bad.returncode != 0 and "expected cluster=" in bad.stderr
    bad = _cli("score", str(st), "--interval", "wilson", "--shards", "2")
    assert bad.returncode != 0 and "--interval wilson" in bad.stderr
