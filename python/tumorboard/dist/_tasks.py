"""Ray side of distributed scoring: one task per shard, results gathered in shard order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import polars as pl

from ..stats import PoissonPartials
from ._ray import connect


def _shard_task(
    shard: Callable[..., PoissonPartials | None],
    parts: list[str],
    runs: pl.DataFrame,
    opts: dict[str, Any],
):
    """Compute one shard's partials (the body of the Ray task)."""
    return shard(parts, runs, **opts)


def map_shards(
    shard: Callable[..., PoissonPartials | None],
    groups: Sequence[list[str]],
    runs: pl.DataFrame,
    opts: dict[str, Any],
    *,
    ray_address: str | None,
    progress: Callable[[int, int], None] | None,
) -> list[PoissonPartials | None]:
    """Run :func:`~tumorboard.dist._score.shard_partials` for each shard on a Ray task.

    Parameters
    ----------
    shard : callable
        ``shard_partials`` (passed in, so that this module does not import the one that
        imports it).
    groups : sequence of list of str
        The Parquet item parts of each shard.
    runs : polars.DataFrame
        The store's runs, shared with every task.
    opts : dict
        Keyword arguments of ``shard_partials``.
    ray_address : str or None
        The cluster (see :func:`~tumorboard.dist.connect`).
    progress : callable or None
        Called with (shards done, shards) as each task finishes.

    Returns
    -------
    list of PoissonPartials or None
        The partials in shard order (the merge order), whatever order they finish in.
    """
    ray = connect(ray_address)
    task = ray.remote(num_cpus=1, max_retries=3)(_shard_task)
    runs_ref = ray.put(runs)
    refs = [task.remote(shard, g, runs_ref, opts) for g in groups]
    index = {ref: i for i, ref in enumerate(refs)}
    out: list[Any] = [None] * len(refs)
    pending = list(refs)
    done = 0
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for ref in ready:
            out[index[ref]] = ray.get(ref)
            done += 1
            if progress is not None:
                progress(done, len(refs))
    return out
