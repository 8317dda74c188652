"""Distributed scoring of a trajectory store with the exactly mergeable Poisson bootstrap.

Every shard (a set of the store's Parquet parts of the items table) is reduced to
:class:`~tumorboard.stats.PoissonPartials`: per-(track, model, tools, task) exact fixed-point sums
of the answers' correctness under Poisson(1) weights keyed by the record key (run_id, patient_id,
item_id) (Chamandy et al. 2012, "Estimating uncertainty for massive data streams"). Partials of
any split add up to the partials of the whole bit for bit, so the merged result does not depend
on the number of shards or on where they were computed. ``executor="local"`` and
``executor="ray"`` run the same shard function and the same merge; only the place where
:func:`shard_partials` runs differs (``executor`` names where work runs across tumorboard;
``backend`` only ever names a compute backend, such as torch or onnxruntime).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl

from ..errors import InvalidArgumentError
from ..score.report import DEFAULT_TRACK, Report, sort_table
from ..stats import BootstrapOptions, BootstrapResult, PoissonPartials, poisson_partials
from ..traj.schema import empty
from ..traj.store import Store

GROUP_COLUMNS = ("track", "model", "tools", "task")
KEY_COLUMNS = ("run_id", "patient_id", "item_id")
Executor = Literal["local", "ray"]
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class StoreScore:
    """Accuracy per (track, model, tools, task) of a store with Poisson-bootstrap intervals.

    Attributes
    ----------
    result : BootstrapResult
        The intervals (``result.to_polars()``: one row per group).
    partials : PoissonPartials
        The merged partial sums (merge more shards into them with ``+``).
    benchmark : str
        The benchmark scored.
    n_shards : int
        How many shards were reduced.
    executor : {"local", "ray"}
        Where the shards were reduced.
    options : BootstrapOptions
        The bootstrap options of the draws and the interval.
    """

    result: BootstrapResult
    partials: PoissonPartials
    benchmark: str
    n_shards: int
    executor: str
    options: BootstrapOptions

    def to_polars(self) -> pl.DataFrame:
        """Return the accuracy table: one row per (track, model, tools, task).

        Returns
        -------
        polars.DataFrame
            The table of :meth:`report`.
        """
        return self.report().to_polars()

    def report(self) -> Report:
        """Render the scores as a :class:`~tumorboard.score.Report`.

        Returns
        -------
        Report
            Metric "accuracy" per (track, model, tools, task), plus an ``n_correct`` column and
            the coverage columns ``n_graded``, ``n_ungraded`` and ``n_missing``, null here (the
            partial sums do not keep them).
        """
        res = self.result
        keys = self.partials.keys
        n = res.n.astype(np.int64)
        table = pl.DataFrame(
            {
                "benchmark": [self.benchmark] * len(res),
                "track": pl.Series(keys["track"], dtype=pl.String),
                "model": pl.Series(keys["model"], dtype=pl.String),
                "tools": pl.Series(keys["tools"], dtype=pl.Boolean),
                "task": pl.Series(keys["task"], dtype=pl.String),
                "metric": ["accuracy"] * len(res),
                "n": n,
                "estimate": res.estimate,
                "boot_mean": res.boot_mean,
                "ci_low": res.ci_low,
                "ci_high": res.ci_high,
                "pm": (res.ci_high - res.ci_low) / 2,
                "n_correct": np.rint(res.estimate * n).astype(np.int64),
                # the partial sums do not keep which answers had no grade: unknown, not 0
                **{c: pl.Series([None] * len(res), dtype=pl.Int64)
                   for c in ("n_graded", "n_ungraded", "n_missing")},
            }
        )  # fmt: skip
        notes = (
            "accuracy: share of correct answers (a missing answer counts as wrong); "
            f"boot_mean, ci_low, ci_high: mean and {self.options.level:g} "
            f"{self.options.method} interval of "
            f"{res.n_resamples} Poisson-bootstrap resamples keyed by (run_id, patient_id, "
            f"item_id) (seed {res.seed}); identical for any number of shards; "
            "pm = (ci_high - ci_low) / 2.",
            f"computed from {self.n_shards} shard(s) with executor {self.executor!r}.",
            "n_graded, n_ungraded, n_missing: not computed on the distributed path (null); "
            "score with executor='local' for the coverage of every row.",
        )
        return Report(sort_table(table), benchmark=self.benchmark, title=self.benchmark,
                      notes=notes, convention="tumorboard (per-task accuracy with an exactly "
                      "mergeable Poisson-bootstrap interval; no overall row)")  # fmt: skip


def _items_schema() -> Any:
    """Return the polars schema of the items table."""
    return pl.from_arrow(empty("items")).schema  # type: ignore[union-attr]


def shard_partials(
    item_parts: Sequence[str],
    runs: pl.DataFrame,
    *,
    benchmark: str,
    tracks: Sequence[str] | None = None,
    options: BootstrapOptions | None = None,
) -> PoissonPartials | None:
    """Compute the Poisson partials of the items in one shard of a store's items parts.

    Parameters
    ----------
    item_parts : sequence of str
        Parquet paths of the store's items table.
    runs : polars.DataFrame
        run_id, benchmark, track, model, tools; one row per run (joined with the items).
    benchmark : str
        Only items of runs of this benchmark.
    tracks : sequence of str, optional
        Only these tracks.
    options : BootstrapOptions, optional
        The resamples, seed and threads of the draws (every shard must use the same).

    Returns
    -------
    PoissonPartials or None
        Per-(track, model, tools, task) partials of the answers' correctness, keyed by
        (run_id, patient_id, item_id); None when no item of ``benchmark`` (and ``tracks``) is
        in these parts.

    Raises
    ------
    InvalidArgumentError
        A scored item without a task.
    """
    if not item_parts:
        return None
    lf = pl.scan_parquet(
        [str(p) for p in item_parts],
        schema=_items_schema(),
        missing_columns="insert",
        extra_columns="ignore",
        hive_partitioning=False,
        glob=False,
    ).select(*KEY_COLUMNS, "task", "correct")
    frame = (
        lf.join(runs.lazy(), on="run_id", how="inner")
        .filter(pl.col("benchmark") == benchmark)
        .with_columns(
            pl.col("track").fill_null(DEFAULT_TRACK),
            pl.col("tools").fill_null(False),
            pl.col("correct").fill_null(False),
            pl.col("patient_id").fill_null(""),
        )
    )
    if tracks:
        frame = frame.filter(pl.col("track").is_in(list(tracks)))
    df = frame.collect()
    if df.height == 0:
        return None
    if df.get_column("task").null_count():
        bad = df.filter(pl.col("task").is_null()).row(0, named=True)
        raise InvalidArgumentError(
            f"items: task is null for record (run_id={bad['run_id']!r}, "
            f"item_id={bad['item_id']!r}); every scored item needs a task"
        )
    return poisson_partials(
        df.get_column("correct").cast(pl.Float64).to_numpy(),
        groups=df.select(GROUP_COLUMNS),
        keys=df.select(KEY_COLUMNS),
        statistic="mean",
        options=options,
    )


def split_parts(parts: Sequence[Path], shards: int) -> list[list[str]]:
    """Split ``parts`` (in name order) into ``min(shards, len(parts))`` contiguous shards.

    The shards are near-equal in the number of parts.

    Parameters
    ----------
    parts : sequence of pathlib.Path
        The Parquet parts, in name order.
    shards : int
        The number of shards wanted.

    Returns
    -------
    list of list of str
        The part paths of each shard (at least one shard).
    """
    k = max(1, min(shards, len(parts)))
    bounds = np.linspace(0, len(parts), k + 1).round().astype(int)
    return [[str(p) for p in parts[a:b]] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _runs_frame(store: Store) -> pl.DataFrame:
    """Return the store's runs (run_id, benchmark, track, model, tools), one row per run."""
    return (
        store.scan("runs")
        .select("run_id", "benchmark", "track", "model", "tools")
        .unique(subset="run_id", keep="first", maintain_order=True)
        .collect()
    )


def _check_int(value: Any, name: str, minimum: int) -> int:
    """Return ``value`` as an int, checking that it is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InvalidArgumentError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return int(value)


def score_store(
    store: Store | str | os.PathLike[str],
    *,
    benchmark: str = "mtbbench",
    tracks: Sequence[str] | None = None,
    options: BootstrapOptions | None = None,
    executor: Executor = "local",
    shards: int | None = None,
    ray_address: str | None = None,
    progress: Progress | None = None,
) -> StoreScore:
    """Score a store's accuracy per (track, model, tools, task) with Poisson-bootstrap CIs.

    The percentile (or basic) intervals are computed per shard of Parquet parts and merged
    exactly.

    Parameters
    ----------
    store : Store, str or os.PathLike
        A :class:`~tumorboard.traj.Store` or its directory (must exist).
    benchmark : str, default "mtbbench"
        Only items of runs of this benchmark.
    tracks : sequence of str, optional
        Only these tracks (None: all).
    options : BootstrapOptions, optional
        The bootstrap (:class:`~tumorboard.stats.BootstrapOptions`: B, confidence level,
        interval method "percentile" or "basic", Philox seed, threads).
    executor : {"local", "ray"}, default "local"
        Where the shards are reduced: "local" (one after another in this process) or "ray"
        (one Ray task per shard). Both merge the same partials in the same order, so results
        are bit-identical to each other and to any other shard count.
    shards : int, optional
        Number of shards (contiguous runs of parts; at most the number of parts). Default: 1
        locally, one per part on Ray.
    ray_address : str, optional
        The cluster for ``executor="ray"`` (None: a running connection of this process, else a
        new local Ray instance; "auto": the cluster of ``ray start``).
    progress : callable, optional
        Called as ``progress(done, total)`` after each shard is merged.

    Returns
    -------
    StoreScore
        ``.report()`` renders it like the scorers' reports.

    Raises
    ------
    InvalidArgumentError
        A bad option (a ValueError), or no items of ``benchmark`` in the store.
    MissingDependencyError
        ``executor="ray"`` without Ray (an ImportError naming the pip command of ``[dist]``).
    ClusterError
        The Ray address is unreachable (a ConnectionError).
    """
    opts = BootstrapOptions.resolve(options)
    if opts.method == "bca":
        raise InvalidArgumentError(
            "options: method 'bca' needs the jackknife over every record, which shard partials "
            "do not carry; use 'percentile' or 'basic'"
        )
    if executor not in ("local", "ray"):
        raise InvalidArgumentError(f"executor: expected 'local' or 'ray', got {executor!r}")
    if not isinstance(benchmark, str) or not benchmark:
        raise InvalidArgumentError(f"benchmark: expected a benchmark name, got {benchmark!r}")
    st = store if isinstance(store, Store) else Store(store, create=False)
    parts = st.parts("items")
    if shards is None:
        shards = 1 if executor == "local" else max(1, len(parts))
    shards = _check_int(shards, "shards", 1)
    groups = split_parts(parts, shards) if parts else []
    runs = _runs_frame(st)
    shard_opts = dict(benchmark=benchmark, tracks=list(tracks) if tracks else None,
                      options=opts)  # fmt: skip
    partials: list[PoissonPartials | None]
    if executor == "local":
        partials = []
        for i, g in enumerate(groups):
            partials.append(shard_partials(g, runs, **shard_opts))
            if progress is not None:
                progress(i + 1, len(groups))
    else:
        from ._tasks import map_shards

        partials = map_shards(shard_partials, groups, runs, shard_opts, ray_address=ray_address,
                              progress=progress)  # fmt: skip
    present = [p for p in partials if p is not None]
    if not present:
        raise InvalidArgumentError(f"{st.path}: no items of benchmark {benchmark!r}"
                         + (f" in tracks {list(tracks)}" if tracks else ""))  # fmt: skip
    merged = present[0].merge(*present[1:])
    result = merged.finalize(options=opts)
    return StoreScore(result, merged, benchmark, len(groups), executor, opts)
