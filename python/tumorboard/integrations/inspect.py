"""inspect_ai metrics with tumorboard's bootstrap confidence intervals.

inspect_ai (UK AI Security Institute, https://inspect.aisi.org.uk) reports a scorer's metrics
in its eval summary; its ``stderr()`` assumes independent samples. When samples are nested in
clusters (several questions about one patient, several slides of one case) the interval must
resample whole clusters (Davison & Hinkley 1997, *Bootstrap Methods and their Application*,
§3.8; Field & Welsh 2007, "Bootstrapping clustered data", JRSS-B 69(3)). The metrics here run
tumorboard's C++ bootstrap (:func:`tumorboard.stats.bootstrap`: percentile, basic or BCa
intervals, counter-based RNG, deterministic for a seed) on the scorer's per-sample values,
clustered by a key of the samples' metadata::

    from inspect_ai import Task
    from inspect_ai.scorer import accuracy, match
    from tumorboard.integrations.inspect import bootstrap_ci

    Task(dataset=..., solver=..., scorer=match(),
         metrics=[accuracy(), bootstrap_ci(cluster="patient_id", method="bca")])

The summary then shows ``accuracy`` and, grouped under ``bootstrap_ci``, ``ci_low``,
``ci_high`` and ``pm`` (half the interval's width). A runnable example task is
docs/examples/inspect_clustered_ci.py.

Samples are what inspect hands to metrics: one score per sample, after its epochs were reduced
(mean by default), so repeated epochs never count as independent samples.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, MissingDependencyError
from ..stats import BootstrapOptions, bootstrap

try:
    from inspect_ai.scorer import Metric, SampleScore, metric, value_to_float
except ImportError as _exc:  # pragma: no cover - exercised where inspect-ai is absent
    raise MissingDependencyError.for_extra(
        "tumorboard.integrations.inspect", package="inspect-ai", extra="inspect", cause=_exc
    ) from None

__all__ = ["bootstrap_ci", "bootstrap_mean", "cluster_labels"]


def cluster_labels(scores: Sequence[SampleScore], key: str) -> list[str]:
    """Return the cluster label of every sample score: its sample metadata value at ``key``.

    Parameters
    ----------
    scores : sequence of inspect_ai.scorer.SampleScore
        The scores inspect passes to a metric.
    key : str
        The sample metadata key, e.g. "patient_id".

    Returns
    -------
    list of str
        One label per score (the value as text).

    Raises
    ------
    InvalidArgumentError
        A sample without metadata ``key`` (named by its id): its cluster is unknown, and
        treating it as a cluster of its own would narrow the interval silently.
    """
    out = []
    for s in scores:
        meta = s.sample_metadata or {}
        if key not in meta or meta[key] is None:
            raise InvalidArgumentError(
                f"bootstrap_ci: sample {s.sample_id!r} has no metadata {key!r} (the cluster "
                f"key); give every sample metadata[{key!r}] or drop cluster="
            )
        out.append(str(meta[key]))
    return out


def _values(scores: Sequence[SampleScore], to_float: Callable[[Any], float]) -> np.ndarray:
    """Return the scores' values as floats (inspect's value_to_float by default).

    A value that is NaN or infinite (a ``Score(value=nan)``, or a ``to_float`` that gives one)
    is an :class:`~tumorboard.errors.InvalidArgumentError` naming the sample, not the position
    the bootstrap would name.
    """
    out = np.fromiter((to_float(s.score.value) for s in scores), dtype=np.float64,
                      count=len(scores))  # fmt: skip
    bad = ~np.isfinite(out)
    if bad.any():
        s = scores[int(np.flatnonzero(bad)[0])]
        raise InvalidArgumentError(
            f"bootstrap_ci: sample {s.sample_id!r} has the score value {s.score.value!r}, "
            f"{out[bad][0]} as a float; expected a finite number"
        )
    return out


def _compute(
    scores: Sequence[SampleScore],
    cluster: str | None,
    options: BootstrapOptions,
    to_float: Callable[[Any], float],
) -> Any:
    """Return the tumorboard bootstrap of the scores' mean (None without scores)."""
    if not scores:
        return None
    values = _values(scores, to_float)
    clusters = None if cluster is None else cluster_labels(scores, cluster)
    return bootstrap(values, clusters=clusters, options=options)


def _options(n_resamples: int, level: float, method: str, seed: int) -> BootstrapOptions:
    """Build (and so validate) the bootstrap options when the metric is created."""
    return BootstrapOptions(n_resamples=n_resamples, level=level, method=method, seed=seed)


@metric
def bootstrap_ci(
    cluster: str | None = None,
    n_resamples: int = 1000,
    level: float = 0.95,
    method: str = "percentile",
    seed: int = 0,
    to_float: Callable[[Any], float] | None = None,
) -> Metric:
    """Bootstrap confidence interval of the mean score, optionally clustered.

    Parameters
    ----------
    cluster : str, optional
        Sample metadata key whose value labels the resampling clusters (e.g. "patient_id"):
        whole clusters are resampled with all their samples. None resamples samples.
    n_resamples : int, default 1000
        Bootstrap resamples.
    level : float, default 0.95
        Confidence level.
    method : {"percentile", "basic", "bca"}, default "percentile"
        Interval method (Efron & Tibshirani 1993, ch. 13-14; BCa's acceleration from the
        jackknife over clusters when clustered).
    seed : int, default 0
        Seed of the counter-based RNG; the same seed gives the same interval.
    to_float : callable, optional
        Score value -> float; default inspect's ``value_to_float()`` (C=1, I=0, P=0.5, N=0).

    Returns
    -------
    inspect_ai.scorer.Metric
        A metric giving ``{"ci_low", "ci_high", "pm"}`` (pm = half the width), shown by
        inspect as one group of three values; NaN when no sample was scored.

    Raises
    ------
    InvalidArgumentError
        Invalid bootstrap options (when the metric is created), or a sample without the
        cluster key (when it is computed).
    """
    opts = _options(n_resamples, level, method, seed)
    conv = to_float or value_to_float()

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        res = _compute(scores, cluster, opts, conv)
        if res is None:  # no sample scored: no interval, never a quiet 0
            return dict.fromkeys(("ci_low", "ci_high", "pm"), math.nan)
        lo, hi = float(res.ci_low), float(res.ci_high)
        return {"ci_low": lo, "ci_high": hi, "pm": (hi - lo) / 2}

    return compute


@metric
def bootstrap_mean(
    cluster: str | None = None,
    n_resamples: int = 1000,
    level: float = 0.95,
    method: str = "percentile",
    seed: int = 0,
    to_float: Callable[[Any], float] | None = None,
) -> Metric:
    """Mean score with its bootstrap standard error and interval, as in a tumorboard report.

    Parameters
    ----------
    cluster, n_resamples, level, method, seed, to_float
        As in :func:`bootstrap_ci`.

    Returns
    -------
    inspect_ai.scorer.Metric
        A metric giving ``{"mean", "se", "ci_low", "ci_high"}``: the plain mean of the
        values, the standard deviation of the bootstrap means, and the interval; NaN when no
        sample was scored.

    Raises
    ------
    InvalidArgumentError
        As in :func:`bootstrap_ci`.
    """
    opts = _options(n_resamples, level, method, seed)
    conv = to_float or value_to_float()

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        res = _compute(scores, cluster, opts, conv)
        if res is None:  # no sample scored: no mean, never a quiet 0
            return dict.fromkeys(("mean", "se", "ci_low", "ci_high"), math.nan)
        return {"mean": float(res.estimate), "se": float(res.se),
                "ci_low": float(res.ci_low), "ci_high": float(res.ci_high)}  # fmt: skip

    return compute
