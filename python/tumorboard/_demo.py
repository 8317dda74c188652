"""``tumorboard demo``: per-(model, task) accuracy with patient-clustered 95% CIs for a generated
sample of MTBBench-style agent answers, and a paired comparison of the two best models."""

from __future__ import annotations

import numpy as np
import polars as pl

from .stats import bootstrap, paired_bootstrap

MODELS = ("gpt-4o", "llama-3.3-70b", "qwen2.5-72b")
TASKS = ("digital_pathology", "hematology", "outcome_prediction", "recurrence")


def generate_answers(*, seed: int = 0, n_patients: int = 40, n_questions: int = 5) -> pl.DataFrame:
    """A reproducible sample: each patient answers n_questions per task; correctness depends on
    the model, the task and a per-patient difficulty (so questions are nested in patients)."""
    rng = np.random.default_rng(seed)
    skill = {"gpt-4o": 0.8, "llama-3.3-70b": 0.45, "qwen2.5-72b": 0.3}
    task_shift = dict(zip(TASKS, (0.2, 0.0, -0.4, -0.2), strict=True))
    difficulty = rng.normal(0.0, 0.8, size=n_patients)
    noise = rng.random((len(MODELS), len(TASKS), n_patients, n_questions))
    rows = []
    for mi, model in enumerate(MODELS):
        for ti, task in enumerate(TASKS):
            logit = skill[model] + task_shift[task] - difficulty[:, None]
            p = 1.0 / (1.0 + np.exp(-logit))
            correct = noise[mi, ti] < p
            patients = np.repeat(np.arange(n_patients), n_questions)
            rows.append(
                pl.DataFrame(
                    {
                        "model": model,
                        "task": task,
                        "patient_id": [f"P{p:03d}" for p in patients],
                        "question": np.tile(np.arange(n_questions), n_patients),
                        "correct": correct.ravel(),
                    }
                )
            )
    return pl.concat(rows)


def run_demo(*, seed: int = 0, n_resamples: int = 1000) -> None:
    df = generate_answers(seed=seed)
    print(f"tumorboard demo: {df.height} generated answers "
          f"({len(MODELS)} models x {len(TASKS)} tasks x 40 patients x 5 questions)\n")  # fmt: skip
    res = bootstrap(
        df["correct"].to_numpy(),
        groups=df.select("model", "task"),
        clusters=df["patient_id"],
        n_resamples=n_resamples,
        seed=seed,
    )
    table = (
        res.to_polars()
        .select("model", "task", "n", "estimate", "ci_low", "ci_high", "se")
        .rename({"estimate": "accuracy"})
    )
    with pl.Config(tbl_rows=50, tbl_cols=10, float_precision=3, tbl_hide_dataframe_shape=True):
        print("Accuracy per (model, task), 95% percentile CI, patients resampled as clusters:")
        print(table)
    a = df.filter(pl.col("model") == MODELS[0]).sort("task", "patient_id", "question")
    b = df.filter(pl.col("model") == MODELS[1]).sort("task", "patient_id", "question")
    paired = paired_bootstrap(
        a["correct"].to_numpy(),
        b["correct"].to_numpy(),
        clusters=a["patient_id"],
        n_resamples=n_resamples,
        seed=seed,
    )
    print(
        f"\nPaired bootstrap {MODELS[0]} - {MODELS[1]} (all tasks): "
        f"difference {paired.difference[0]:+.3f}, "
        f"95% CI [{paired.ci_low[0]:+.3f}, {paired.ci_high[0]:+.3f}], "
        f"p = {paired.p_value[0]:.4f}"
    )
