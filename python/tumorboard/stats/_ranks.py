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

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ._bootstrap import bootstrap
from ._options import BootstrapOptions

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


def _competition_ranks(x: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Rank along the last axis, 1 = best, ties sharing the best rank ("min" ranking).

    A model's rank is one plus the number of models strictly better in the same resample.
    """
    key = -x if higher_is_better else x
    return 1 + (key[..., None, :] < key[..., :, None]).sum(axis=-1)


def rank_intervals(
    values: Any,
    *,
    models: Any,
    items: Any,
    clusters: Any = None,
    statistic: str = "mean",
    higher_is_better: bool = True,
    options: BootstrapOptions | None = None,
) -> RankIntervals:
    """Bootstrap the ranks of models scored on the same items.

    Parameters
    ----------
    values : array_like
        Per (model, item) row: a value (``"mean"``, ``"sum"``) or sufficient-statistic columns
        (``"ratio"``: 2 columns, ``"f1"``: 3; e.g. BLEU's are ratios of sums).
    models, items : array_like
        The model and the stable item key of each row; the same key weighs the same in every
        model's resample.
    clusters : array_like, optional
        A cluster (e.g. patient) per row: whole clusters share one weight.
    statistic : {"mean", "sum", "ratio", "f1"}, default "mean"
        The statistic ranked.
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
        Fewer than two models, arrays of different lengths, or any argument ``bootstrap``
        refuses.
    """
    m = np.asarray(models).astype(str)
    if m.ndim != 1:
        raise InvalidArgumentError(f"models: expected a 1-D array of labels, got {m.ndim}-D")
    names = sorted(set(m.tolist()))
    if len(names) < 2:
        raise InvalidArgumentError(f"models: expected at least two models, got {names}")
    it = np.asarray(items).astype(str)
    if it.shape != m.shape:
        raise InvalidArgumentError(f"items: expected one key per row ({m.size}), got {it.shape}")
    keys = it if clusters is None else np.asarray(clusters).astype(str)
    opts = BootstrapOptions.resolve(options)
    res = bootstrap(values, groups=m, clusters=clusters, statistic=statistic, scheme="poisson",
                    keys=keys, options=opts, return_distribution=True)  # fmt: skip
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
