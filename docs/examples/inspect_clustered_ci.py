"""An inspect_ai task that reports accuracy with a patient-clustered bootstrap interval.

Run it (offline: the task brings inspect's mock model with scripted answers; pass
``--model provider/name`` to ask a real one)::

    inspect eval docs/examples/inspect_clustered_ci.py --log-dir logs
    tumorboard import inspect logs --store store
    tumorboard score store --cluster patient

The eval summary shows ``accuracy`` next to ``bootstrap_ci`` (``ci_low``, ``ci_high``, ``pm``),
computed by tumorboard's bootstrap with whole patients resampled: four questions are asked
about each of six patients, so the questions are not independent samples. The last two
commands put the same log into a trajectory store and print tumorboard's table (accuracy per
task with patient-clustered intervals).
"""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import accuracy, match, stderr
from inspect_ai.solver import generate
from tumorboard.integrations.inspect import bootstrap_ci

_STAGES = ["I", "II", "III", "IV"]


def _samples() -> list[Sample]:
    """Four staging questions about each of six patients (patient_id in the metadata)."""
    return [
        Sample(
            id=f"p{p}-q{q}",
            input=f"Patient {p}, report {q}: what is the tumour stage? Answer with the Roman "
            "numeral only.",
            target=stage,
            metadata={"patient_id": f"P{p:03d}", "question": q},
        )
        for p in range(6)
        for q, stage in enumerate(_STAGES)
    ]


def _scripted(messages, tools, tool_choice, config) -> ModelOutput:
    """Answer as a mock model: patients 0-2 staged right, II and III of patients 3-5 wrong."""
    text = messages[-1].text
    patient, q = int(text.split()[1].rstrip(",")), int(text.split()[3].rstrip(":"))
    stage = _STAGES[q]
    if patient >= 3 and stage in ("II", "III"):
        stage = {"II": "IV", "III": "I"}[stage]
    out = ModelOutput.from_content("mockllm/model", stage)
    out.usage = ModelUsage(input_tokens=len(text.split()), output_tokens=1,
                           total_tokens=len(text.split()) + 1)  # fmt: skip
    return out


@task
def staging_with_ci() -> Task:
    """Staging questions scored with accuracy, stderr and a patient-clustered bootstrap CI."""
    return Task(
        dataset=_samples(),
        solver=generate(),
        scorer=match(),
        model=get_model("mockllm/model", custom_outputs=_scripted),
        metrics=[
            accuracy(),
            stderr(),
            bootstrap_ci(cluster="patient_id", n_resamples=2000, method="bca"),
        ],
    )
