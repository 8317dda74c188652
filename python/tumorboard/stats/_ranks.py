"""Rank intervals: how sure a leaderboard's order is, from ranks on shared bootstrap resamples.

:func:`rank_intervals` bootstraps every model on shared resamples and ranks the models within
each resample: each model's rank interval, its probability of ranking first, and the models
statistically tied with the leader (rank interval reaching 1). The resamples are shared
through the Poisson scheme: every record (or cluster) gets the weight Poisson(1) keyed by
(seed, item or cluster key, resample), so the same item weighs the same for every model
(Hanley & MacGibbon 2006, "Creating non-parametric bootstrap samples using Poisson
frequencies", *Comput Methods Programs Biomed* 83:57-62); any statistic the engine computes
from sufficient statistics ranks this way, corpus-level ones (``"ratio"``, ``"f1"``) included.
The ranking of bootstrap replicates follows Hall & Miller (2009), "Using the bootstrap to
quantify the authority of an empirical ranking", *Ann Stat* 37:3929-3959.
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._keys import label_text
from ..errors import InvalidArgumentError
from . import _validate
from ._bootstrap import BootstrapResult, check_numbers, result, run_engine
from ._options import BootstrapOptions
from ._shared import poisson_shared

__all__ = ["RankIntervals", "rank_intervals"]


@dataclass(frozen=True)
class RankIntervals:
    """Bootstrap rank intervals of a set of models (1 = best).

    Attributes
    ----------
    models : tuple of str
        The models, best estimate first.
    estimate : numpy.ndarray
        Each model's statistic on the full data.
    rank : numpy.ndarray
        Each model's rank by ``estimate`` (ties share the best rank).
    rank_low, rank_high : numpy.ndarray
        The rank interval at ``level`` (integer bounds: lower and higher order statistics of
        the bootstrap ranks).
    p_best : numpy.ndarray
        Share of resamples where the model ranks first (ties at the top count for each).
    tied_with_best : numpy.ndarray
        Whether the model's rank interval reaches 1.
    n_valid : int
        Resamples where every model's statistic was defined.
    level : float
        Confidence level of the intervals.
    n_resamples, seed : int
        As in :class:`BootstrapOptions`.
    """

    models: tuple[str, ...]
    estimate: np.ndarray
    rank: np.ndarray
    rank_low: np.ndarray
    rank_high: np.ndarray
    p_best: np.ndarray
    tied_with_best: np.ndarray
    n_valid: int
    level: float
    n_resamples: int
    seed: int

    def to_dicts(self) -> list[dict[str, Any]]:
        """Return one dictionary per model, best first."""
        return [
            {"model": m, "estimate": float(self.estimate[i]), "rank": int(self.rank[i]),
             "rank_low": int(self.rank_low[i]), "rank_high": int(self.rank_high[i]),
             "p_best": float(self.p_best[i]), "tied_with_best": bool(self.tied_with_best[i])}
            for i, m in enumerate(self.models)
        ]  # fmt: skip

    def to_markdown(self) -> str:
        """Return a Markdown table: estimate, rank, rank interval, P(best), tied with the best."""
        pct = round(100 * self.level)
        lines = [f"| model | estimate | rank [{pct}% CI] | P(best) | tied with best |",
                 "|---|---|---|---|---|"]  # fmt: skip
        for d in self.to_dicts():
            lines.append(
                f"| {d['model']} | {d['estimate']:.4f} | {d['rank']} [{d['rank_low']}, "
                f"{d['rank_high']}] | {d['p_best']:.3f} | {'yes' if d['tied_with_best'] else ''} |"
            )
        return "\n".join(lines)


def _text_labels(labels: Any) -> Any:
    """Return labels as text, the keys their resampling weights are drawn from.

    Integer arrays become polars strings (the decimal text ``numpy``'s ``astype(str)`` gives,
    written in Rust: ~20x faster for 500k keys), as do polars and Arrow text columns
    (:func:`.._keys.label_text`); anything else goes through ``astype(str)``.
    """
    series = label_text(labels)
    if series is not None:
        return series
    arr = np.asarray(labels)
    if arr.ndim == 1 and arr.dtype.kind in "iu":
        import polars as pl

        return pl.Series(arr).cast(pl.String)
    return arr.astype(str)


def _competition_ranks(x: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Rank along the last axis, 1 = best, ties sharing the best rank ("min" ranking).

    A model's rank is one plus the number of models strictly better in the same resample.
    """
    key = -x if higher_is_better else x
    return 1 + (key[..., None, :] < key[..., :, None]).sum(axis=-1)


def _bootstrap_models(
    values: Any,
    models: np.ndarray,
    keys: np.ndarray,
    clusters: Any,
    statistic: Any,
    params: Any,
    options: BootstrapOptions,
) -> BootstrapResult:
    """Return every model's Poisson bootstrap distribution on the shared resamples.

    Validates as ``bootstrap`` (the four statistics of :func:`bootstrap`) or
    ``bootstrap_sufficient`` (any other engine statistic) would, then draws each key's weights
    once for all models (``_shared.poisson_shared``) where that is bit-identical to the engine's
    per-model path, and runs that path otherwise.
    """
    arr = _validate.values(values)
    if isinstance(statistic, str) and statistic in _validate.STATISTIC_COLUMNS:
        _validate.statistic(statistic, arr)
        if params is not None:
            raise InvalidArgumentError(
                f"params: expected None for statistic {statistic!r} (it takes no parameters), "
                f"got {reprlib.repr(params)}"
            )
        engine_params: list[float] = []
    else:
        statistic = _validate.engine_statistic(statistic)
        if statistic == "f1":
            _validate.f1_counts(arr, name="values")
        engine_params = _validate.params(params)
    lay = _validate.layout(arr.shape[0], groups=models, clusters=clusters)
    record_keys = _validate.record_keys(keys, arr.shape[0])
    _validate.resample_memory(options.n_resamples, lay.n_groups, arr.shape[1], scheme="poisson",
                              return_distribution=True)  # fmt: skip
    _validate.poisson_magnitudes(arr)
    out = poisson_shared(arr, lay, record_keys, statistic=statistic, params=engine_params,
                         options=options)  # fmt: skip
    if out is None:
        return run_engine(arr, lay, statistic=statistic, params=engine_params, scheme="poisson",
                          record_keys=record_keys, options=options, return_distribution=True,
                          resampler="auto")  # fmt: skip
    check_numbers(out, lay.keys, statistic=statistic)
    return result(out, lay.keys, statistic=statistic, scheme="poisson", options=options,
                  n_resamples=options.n_resamples)  # fmt: skip


def rank_intervals(
    values: Any,
    *,
    models: Any,
    items: Any,
    clusters: Any = None,
    statistic: str = "mean",
    params: Any = None,
    higher_is_better: bool = True,
    options: BootstrapOptions | None = None,
) -> RankIntervals:
    """Bootstrap the ranks of models scored on the same items.

    Parameters
    ----------
    values : array_like
        Per (model, item) row: a value (``"mean"``, ``"sum"``) or sufficient-statistic columns
        (``"ratio"``: 2 columns, ``"f1"``: 3, ``"bleu"``: the columns of
        ``tumorboard.text.bleu_statistics``).
    models, items : array_like
        The model and the stable item key of each row; the same key weighs the same in every
        model's resample.
    clusters : array_like, optional
        A cluster (e.g. patient) per row: whole clusters share one weight.
    statistic : str, default "mean"
        The statistic ranked: ``"mean"``, ``"sum"``, ``"ratio"``, ``"f1"``, or any statistic of
        summed columns the engine registers (``tumorboard._core.stats.statistic_names()``),
        e.g. ``"bleu"``: corpus BLEU of each model's resampled statistic sums, the same
        statistic ``tumorboard.text.corpus_bleu(ci=True)`` resamples.
    params : array_like, optional
        The statistic's parameters, for engine statistics that take them (``"bleu"``:
        ``tumorboard.text.bleu_statistic_params(...)``); none for the four above.
    higher_is_better : bool, default True
        Rank 1 goes to the largest statistic (False: the smallest, e.g. an error rate).
    options : BootstrapOptions, optional
        Resamples (B >= 10,000 recommended for rank probabilities), level and seed.

    Returns
    -------
    RankIntervals
        Per model, best first.

    Raises
    ------
    InvalidArgumentError
        Fewer than two models, arrays of different lengths, ``params`` with a statistic that
        takes none, or any argument ``bootstrap`` (``bootstrap_sufficient``) refuses.
    """
    m = label_text(models)
    if m is not None:
        names = sorted(m.unique().to_list())
    else:
        m = np.asarray(models).astype(str)
        if m.ndim != 1:
            raise InvalidArgumentError(f"models: expected a 1-D array of labels, got {m.ndim}-D")
        names = sorted(set(m.tolist()))
    if len(names) < 2:
        raise InvalidArgumentError(f"models: expected at least two models, got {names}")
    it = _text_labels(items)
    if len(it) != len(m) or (isinstance(it, np.ndarray) and it.ndim != 1):
        raise InvalidArgumentError(
            f"items: expected one key per row ({len(m)}), got {getattr(it, 'shape', len(it))}"
        )
    keys = it if clusters is None else _text_labels(clusters)
    opts = BootstrapOptions.resolve(options)
    res = _bootstrap_models(values, m, keys, clusters, statistic, params, opts)
    group_names = [str(g) for g in res.keys["groups"]]
    order = np.array([group_names.index(n) for n in names])
    dist = np.asarray(res.distribution)[order]  # [models, B]
    est = np.asarray(res.estimate, dtype=np.float64)[order]
    valid = ~np.isnan(dist).any(axis=0)
    ranks = _competition_ranks(dist[:, valid].T, higher_is_better).T  # [models, n_valid]
    n_valid = int(valid.sum())
    alpha = 1.0 - opts.level
    if n_valid:
        low = np.quantile(ranks, alpha / 2, axis=1, method="lower").astype(int)
        high = np.quantile(ranks, 1 - alpha / 2, axis=1, method="higher").astype(int)
        p_best = (ranks == 1).mean(axis=1)
    else:
        low = np.ones(len(names), int)
        high = np.full(len(names), len(names))
        p_best = np.full(len(names), np.nan)
    point = _competition_ranks(est[None, :], higher_is_better)[0]
    best_first = np.lexsort((np.array(names), point))
    return RankIntervals(
        models=tuple(names[i] for i in best_first), estimate=est[best_first],
        rank=point[best_first], rank_low=low[best_first], rank_high=high[best_first],
        p_best=p_best[best_first], tied_with_best=(low == 1)[best_first], n_valid=n_valid,
        level=opts.level, n_resamples=opts.n_resamples, seed=opts.seed,
    )  # fmt: skip
