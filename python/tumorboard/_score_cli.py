"""The ``tumorboard score`` verb: a store scored by a benchmark's scorer, with bootstrap CIs.

The parser (:func:`add_score_parser`) imports nothing heavy; the scorers, polars and the store
load when the verb runs. Split from :mod:`tumorboard.cli`, which keeps the other verbs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from ._args import level, positive_int, seed
from ._verbs import verb_help
from .errors import InvalidArgumentError

__all__ = ["add_score_parser"]


def add_score_parser(sub: Any) -> None:
    """Add the ``score`` sub-command to ``sub`` (the top parser's sub-parsers)."""
    from ._scorer_names import SCORER_NAMES  # not .score: no polars to build the parser

    score = sub.add_parser(
        "score",
        help=verb_help("score"),
        description="Score a trajectory store: the benchmark's metrics per (track, model, "
        "tools, task) with bootstrap confidence intervals and the overall rows. Each scorer "
        "reads the columns it needs from the store (docs/trajectory-schema.md).",
    )
    score.add_argument("store", help="the store directory")
    score.add_argument(
        "--benchmark",
        choices=SCORER_NAMES,
        default=None,
        help="the benchmark to score (default: the store's only one)",
    )
    score.add_argument(
        "--n-resamples", type=positive_int, default=1000,
        help="bootstrap resamples B (default 1000)",
    )  # fmt: skip
    score.add_argument(
        "--resamples", type=positive_int, dest="resamples_deprecated", help=argparse.SUPPRESS
    )  # renamed --n-resamples; kept one release
    score.add_argument("--level", type=level, default=0.95, help="confidence level (default 0.95)")
    score.add_argument(
        "--method", choices=["percentile", "basic", "bca"], default="percentile",
        help="interval method (default percentile; the Ray/--shards path: percentile or basic)",
    )  # fmt: skip
    score.add_argument(
        "--interval",
        choices=["bootstrap", "wilson", "agresti_coull", "clopper_pearson", "normal", "cr1",
                 "wilson_deff"],
        default="bootstrap",
        help="ci_low/ci_high of the 0/1 metrics (e.g. accuracy): bootstrap (default), or a "
        "closed-form proportion interval (stats.proportion_interval; cr1 and wilson_deff need "
        "--cluster) so the report states the interval a paper or inspect_ai gives; other "
        "metrics and the overall rows keep the bootstrap, and the column interval names each "
        "row's",
    )  # fmt: skip
    score.add_argument("--seed", type=seed, default=0, help="random seed (default 0)")
    score.add_argument(
        "--threads", type=positive_int, default=None,
        help="bootstrap worker threads (default: all cores)",
    )  # fmt: skip
    score.add_argument(
        "--cluster", help="resample whole clusters, e.g. patient (= patient_id)", default=None
    )
    score.add_argument("--track", nargs="+", help="only these tracks")
    score.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when any answer has no grade (the report is still printed; without it a "
        "warning names the count)",
    )
    score.add_argument(
        "--convention",
        choices=["paper", "tumorboard", "code"],
        default=None,
        help="the scoring convention: paper = the numbers as the benchmark's paper prints them "
        "(the default of medinsight, lammi, radabench, medbench and inspect, inspect's only "
        "one; mtbbench: Overall ± as the "
        "paper's task spread), tumorboard = tumorboard's (mtbbench's default: joint-resampling "
        "CI of Overall; medinsight: mean of per-case F1; lammi: TSS = valid * s/t), code = the "
        "official scripts' aggregates (radabench); the report states the one in use",
    )
    score.add_argument(
        "--format",
        choices=["md", "csv", "json", "html"],
        default="md",
        help="md, csv, html, or json: exactly the API's Report.to_json()",
    )
    score.add_argument(
        "--style",
        choices=["long", "paper"],
        default="long",
        help="long: one row per (model, task, metric) with every column; paper: models x "
        "tasks, cells 'estimate ± half-width' (md, csv, html)",
    )
    score.add_argument("--out", metavar="FILE", help="write to FILE (atomically) instead of stdout")
    score.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="score on a Ray cluster (e.g. auto, host:6379, ray://host:10001; 'local' starts "
        "one here): Poisson-bootstrap CIs from per-shard partials, identical for any split "
        "(needs tumorboard[dist]; mtbbench accuracy)",
    )
    score.add_argument(
        "--shards",
        type=positive_int,
        help="split the store's Parquet parts into N shards (Poisson scheme; default: one per "
        "part on Ray); without --ray-address the shards run in this process",
    )
    score.set_defaults(func=_cmd_score)


def _cmd_score(args: argparse.Namespace) -> int:
    """Run ``tumorboard score`` on a store: any benchmark's scorer, from the store."""
    from .score import benchmarks, get, store_frame
    from .traj import Store

    if args.resamples_deprecated is not None:
        print("tumorboard: warning: --resamples is deprecated and will be removed in the next "
              "release; use --n-resamples", file=sys.stderr)  # fmt: skip
        args.n_resamples = args.resamples_deprecated
    store = Store(args.store, create=False)
    benchmark = args.benchmark or _only_benchmark(store, benchmarks())
    if args.style == "paper" and args.format == "json":
        raise InvalidArgumentError(
            "--style paper: a table for reading (md, csv or html); --format json is the "
            "report itself (Report.to_json())"
        )
    if args.ray_address is not None or args.shards is not None:
        if args.convention not in (None, "tumorboard"):
            raise InvalidArgumentError(
                f"--convention {args.convention}: the distributed path (--ray-address/--shards) "
                "reports tumorboard's per-task accuracy only"
            )
        if args.interval != "bootstrap":
            raise InvalidArgumentError(
                f"--interval {args.interval}: the distributed path (--ray-address/--shards) "
                "gives Poisson-bootstrap intervals only"
            )
        if benchmark != "mtbbench":
            raise InvalidArgumentError(
                f"--ray-address/--shards: the distributed path scores mtbbench accuracy, not "
                f"--benchmark {benchmark}"
            )
        report = _score_distributed(args, store, benchmark)
        return _emit_report(args, report)
    frame = store_frame(store, benchmark, tracks=args.track)
    cluster = {"patient": "patient_id"}.get(args.cluster, args.cluster)
    report = get(benchmark)(frame, options=_bootstrap_options(args), cluster=cluster,
                            convention=args.convention, interval=args.interval)  # fmt: skip
    status = _emit_report(args, report)
    return _coverage_status(report, strict=args.strict) or status


def _coverage_status(report: Any, *, strict: bool) -> int:
    """Print the report's coverage to standard error; return 1 under ``strict`` if incomplete.

    Coverage (the columns ``n_graded``, ``n_ungraded``, ``n_missing`` of every scorer's rows,
    defined in :mod:`tumorboard.score.report`): per (track, model, tools, task) the row of the
    metric with the most ungraded items, summed over the single tasks (no overall, dimension or
    per-metric rows of a combined task), and the metrics the scorer left out for lack of
    inputs (its notes).
    """
    import polars as pl

    table = report.table
    graded = ungraded = 0
    missing: int | None = None
    if "n_ungraded" in table.columns and "n_graded" in table.columns:
        rows = table.filter(pl.col("task") != "overall")
        if "aggregation" in rows.columns:  # MedBench: task rows only
            rows = rows.filter(pl.col("aggregation") == "task")
        worst = (
            rows.filter(pl.col("n_ungraded").is_not_null())
            .sort("n_ungraded", "n", descending=True, maintain_order=True)
            .unique(subset=["track", "model", "tools", "task"], keep="first")
        )
        graded = int(worst.get_column("n_graded").sum())
        ungraded = int(worst.get_column("n_ungraded").sum())
        if worst.height and worst.get_column("n_missing").null_count() == 0:
            missing = int(worst.get_column("n_missing").sum())
        if worst.height:
            print(
                f"tumorboard: coverage: {graded:,} of {graded + ungraded:,} item(s) graded, "
                f"{ungraded:,} ungraded"
                + (f" ({missing:,} with no response)" if missing is not None else "")
                + " (per task, the metric with the most ungraded items)",
                file=sys.stderr,
            )
    left_out = [n for n in report.notes if ": left out," in n]
    if ungraded:
        print(
            f"tumorboard: warning: {ungraded:,} answer(s) have no grade (no readable answer, no "
            "response or no record to grade); the n_ungraded column counts them per row and "
            "the report's notes say how they count",
            file=sys.stderr,
        )
    for note in left_out:
        print(f"tumorboard: note: {note}", file=sys.stderr)
    if strict and ungraded:
        print(
            "tumorboard: error: --strict: some answers have no grade (see above)", file=sys.stderr
        )
        return 1
    return 0


def _only_benchmark(store: Any, names: Sequence[str]) -> str:
    """Return the one scorable benchmark of ``store`` (for ``score`` without --benchmark)."""
    import polars as pl

    runs = store.runs().select(pl.col("benchmark").unique()).collect().to_series().to_list()
    present = sorted(b for b in runs if b is not None)
    scorable = [b for b in present if b in names]
    if len(scorable) == 1:
        return scorable[0]
    have = ", ".join(present) or "none"
    if not scorable:
        raise InvalidArgumentError(
            f"{store.path}: no runs of a benchmark tumorboard scores (benchmarks present: "
            f"{have}; scorers: {', '.join(names)}); import the logs with --benchmark NAME"
        )
    raise InvalidArgumentError(
        f"{store.path}: runs of several benchmarks ({', '.join(scorable)}); pick one with "
        "--benchmark"
    )


def _bootstrap_options(args: argparse.Namespace) -> Any:
    """Return the ``score`` flags as one :class:`~tumorboard.stats.BootstrapOptions`.

    The flags are --n-resamples, --level, --method, --seed and --threads; they are validated, so
    a bad value is a usage error.
    """
    from .stats import BootstrapOptions

    return BootstrapOptions(n_resamples=args.n_resamples, level=args.level, method=args.method,
                            seed=args.seed, threads=args.threads)  # fmt: skip


def _score_distributed(args: argparse.Namespace, store: Any, benchmark: str) -> Any:
    """Score a store for ``score --ray-address/--shards``.

    Poisson-bootstrap accuracy CIs from per-shard partials (``tumorboard.dist.score_store``),
    identical for any shard count.
    """
    from .dist import score_store

    if args.cluster is not None:
        raise InvalidArgumentError(
            "--cluster: clustered intervals are not available with --ray-address/--shards "
            "(the distributed path resamples records with the Poisson scheme)"
        )
    executor = "ray" if args.ray_address is not None else "local"

    def progress(done: int, total: int) -> None:
        """Show the shards scored so far on standard error."""
        print(f"\rscored {done}/{total} shards", end="\n" if done == total else "",
              file=sys.stderr, flush=True)  # fmt: skip

    result = score_store(
        store, benchmark=benchmark, tracks=args.track, options=_bootstrap_options(args),
        executor=executor, shards=args.shards,
        ray_address=None if args.ray_address == "local" else args.ray_address,
        progress=progress,
    )  # fmt: skip
    return result.report()


def _emit_report(args: argparse.Namespace, report: Any) -> int:
    """Print the report in ``--format`` (and ``--style``), or write it to ``--out``.

    ``--format json`` is exactly :meth:`~tumorboard.score.Report.to_json`.
    """
    style = {"style": args.style} if args.format != "json" else {}
    render = {"md": report.to_markdown, "csv": report.to_csv, "html": report.to_html,
              "json": report.to_json}[args.format]  # fmt: skip
    text = render(args.out, **style) if args.out else render(**style)
    if args.out:
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0
