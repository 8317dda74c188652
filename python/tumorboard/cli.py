"""The ``tumorboard`` command line.

The verbs: ``tumorboard --version``, ``tumorboard demo``, ``tumorboard bench``,
``tumorboard import`` (agent logs into a trajectory store) and ``tumorboard score`` (a store
into a report with bootstrap CIs), ``tumorboard tile`` (tissue segmentation and TRIDENT coords
.h5 for slides) and ``tumorboard embed`` (patch features with a foundation model, TRIDENT
features .h5 + Parquet). Verbs are added as features land.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from . import __version__
from .errors import InvalidArgumentError, MissingFileError


def _cmd_demo(args: argparse.Namespace) -> int:
    """Run ``tumorboard demo``."""
    from ._demo import run_demo

    run_demo(seed=args.seed, n_resamples=args.n_resamples, out=args.out)
    return 0


def _find_benchmarks(directory: str | None) -> Path:
    """Return the benchmarks directory: ``--dir``, else ``./benchmarks``."""
    candidates = [Path(directory)] if directory else [Path.cwd() / "benchmarks"]
    for c in candidates:
        if (c / "bench_bootstrap.py").is_file():
            return c
    raise MissingFileError(
        "benchmarks/ not found: run `tumorboard bench` from a tumorboard source checkout "
        "or pass --dir PATH/TO/benchmarks"
    )


def load_benchmark(bench_dir: Path, name: str) -> ModuleType:
    """Import ``benchmarks/<name>.py`` as the package module ``benchmarks.<name>``.

    Importing it as a package module makes its relative imports work.

    Parameters
    ----------
    bench_dir : pathlib.Path
        The benchmarks directory; its parent is put on ``sys.path`` for the import.
    name : str
        The module name, e.g. ``"bench_bootstrap"``.

    Returns
    -------
    types.ModuleType
        The imported module.
    """
    sys.path.insert(0, str(bench_dir.parent))
    try:
        return importlib.import_module(f"{bench_dir.name}.{name}")
    finally:
        sys.path.remove(str(bench_dir.parent))


def _cmd_bench(args: argparse.Namespace) -> int:
    """Run ``tumorboard bench``: each selected benchmark's ``main``."""
    bench_dir = _find_benchmarks(args.dir)
    names = sorted(p.stem for p in bench_dir.glob("bench_*.py"))
    if args.only:
        unknown = sorted(set(args.only) - set(names))
        if unknown:
            print(f"unknown benchmark(s): {', '.join(unknown)}; have: {', '.join(names)}")
            return 2
        names = [n for n in names if n in args.only]
    status = 0
    for name in names:
        module = load_benchmark(bench_dir, name)
        argv = ["--quick"] if args.quick else []
        if args.json_dir:
            Path(args.json_dir).mkdir(parents=True, exist_ok=True)
            argv += ["--json", str(Path(args.json_dir) / f"{name}.json")]
        print(f"## {name}")
        status |= int(module.main(argv) or 0)
    return status


def _field_map(pairs: Sequence[str] | None) -> dict[str, str]:
    """Parse the ``--map FIELD=KEY`` pairs into a dict."""
    out: dict[str, str] = {}
    for pair in pairs or ():
        field, sep, key = pair.partition("=")
        if not sep or not field.strip() or not key.strip():
            raise InvalidArgumentError(
                f"--map: expected FIELD=KEY (e.g. gold=expected), got {pair!r}"
            )
        out[field.strip()] = key.strip()
    return out


def _cmd_import(args: argparse.Namespace) -> int:
    """Run ``tumorboard import``: print the report; warnings also go to standard error."""
    from ._progress import CountProgress
    from .traj import import_logs

    printer = CountProgress("import", what="lines" if args.format == "jsonl" else "records")
    with printer:
        report = import_logs(
            args.format,
            args.src,
            args.store,
            track=args.track,
            model=args.model,
            model_map=args.model_map,
            benchmark=args.benchmark,
            field_map=_field_map(args.map),
            run_name=args.run_name,
            strict=args.strict,
            progress=lambda files, total, records, _bytes: printer.update(files, total, records),
        )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report)
    summaries = [(w, r) for w, r in report.warnings if " of " in r and " lines " in r]
    shown = summaries or report.warnings[:3]
    for where, reason in shown:
        print(f"tumorboard: warning: {where}: {reason}", file=sys.stderr)
    if len(report.warnings) > len(shown):
        print(
            f"tumorboard: warning: {len(report.warnings) - len(shown)} more warning(s) in the "
            "report",
            file=sys.stderr,
        )
    if report.skipped:
        print(
            f"tumorboard: warning: {len(report.skipped)} file(s) skipped (listed in the report)",
            file=sys.stderr,
        )
    return 0


def _cmd_score(args: argparse.Namespace) -> int:
    """Run ``tumorboard score`` on a store: any benchmark's scorer, from the store."""
    from .score import benchmarks, get, store_frame
    from .traj import Store

    store = Store(args.store, create=False)
    benchmark = args.benchmark or _only_benchmark(store, benchmarks())
    if args.style == "paper" and args.format == "json":
        raise InvalidArgumentError(
            "--style paper: a table for reading (md, csv or html); --format json is the "
            "report itself (Report.to_json())"
        )
    if args.ray_address is not None or args.shards is not None:
        if benchmark != "mtbbench":
            raise InvalidArgumentError(
                f"--ray-address/--shards: the distributed path scores mtbbench accuracy, not "
                f"--benchmark {benchmark}"
            )
        report = _score_distributed(args, store)
        return _emit_report(args, report)
    frame = store_frame(store, benchmark, tracks=args.track)
    cluster = {"patient": "patient_id"}.get(args.cluster, args.cluster)
    report = get(benchmark)(frame, options=_bootstrap_options(args), cluster=cluster)
    return _emit_report(args, report)


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


def _score_distributed(args: argparse.Namespace, store: Any) -> Any:
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
    backend = "ray" if args.ray_address is not None else "local"

    def progress(done: int, total: int) -> None:
        """Show the shards scored so far on standard error."""
        print(f"\rscored {done}/{total} shards", end="\n" if done == total else "",
              file=sys.stderr, flush=True)  # fmt: skip

    result = score_store(
        store, benchmark="mtbbench", tracks=args.track, options=_bootstrap_options(args),
        backend=backend, shards=args.shards,
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


def build_parser() -> argparse.ArgumentParser:
    """Build the ``tumorboard`` argument parser with all its sub-commands.

    Returns
    -------
    argparse.ArgumentParser
        The parser; each sub-command's namespace carries its handler as ``func``.
    """
    parser = argparse.ArgumentParser(
        prog="tumorboard",
        description="Engine for clinical AI-agent benchmarks: scoring with bootstrap CIs, "
        "trajectory storage, slide embedding and agent tools.",
    )
    parser.add_argument("--version", action="version", version=f"tumorboard {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        help="the main jobs end to end on generated data: tile and embed a sample slide, run the "
        "agent tools, record and score a sample log with CIs",
    )
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--n-resamples", type=int, default=1000)
    demo.add_argument(
        "--out",
        metavar="DIR",
        default=None,
        help="folder for the demo's outputs (default: a fresh temporary folder; a non-empty "
        "folder gets a new subfolder, nothing is overwritten)",
    )
    demo.set_defaults(func=_cmd_demo)

    bench = sub.add_parser("bench", help="run the side-by-side benchmarks in benchmarks/")
    bench.add_argument("--quick", action="store_true", help="smaller workloads (~1 minute)")
    bench.add_argument("--only", nargs="+", metavar="NAME", help="e.g. bench_bootstrap")
    bench.add_argument("--dir", help="the benchmarks directory (default: ./benchmarks)")
    bench.add_argument("--json-dir", default="bench-results", help="where to write JSON results")
    bench.set_defaults(func=_cmd_bench)

    imp = sub.add_parser(
        "import",
        help="import agent logs into a trajectory store",
        description="Import agent logs into a trajectory store. Re-imports are idempotent by "
        "item: items already stored unchanged are left alone, changed ones are replaced (latest "
        "wins, keyed by run, patient and item id). Malformed files and lines are skipped and "
        "reported; fields the benchmark needs that the records leave empty are warned about.",
    )
    imp.add_argument("format", choices=["mtbbench", "jsonl", "react"], help="log format")
    imp.add_argument("src", help="a log file or a folder (searched recursively)")
    imp.add_argument("--store", required=True, help="the store directory (created if missing)")
    imp.add_argument(
        "--track", help="mtbbench: multimodal or longitudinal (default: detected per file)"
    )
    imp.add_argument("--model", help="model name for every record (default: folder / records)")
    imp.add_argument(
        "--model-map", metavar="FILE", help="folder -> model name (JSON object or CSV lines)"
    )
    imp.add_argument(
        "--benchmark",
        help="the benchmark the runs belong to, which `tumorboard score --benchmark` picks: "
        "mtbbench, radabench, lammi, medinsight, medbench (jsonl: also which benchmark fields "
        "the records carry; default: the format's, or the records' 'benchmark')",
    )
    imp.add_argument(
        "--map",
        action="append",
        metavar="FIELD=KEY",
        help="jsonl: read FIELD from the record key KEY (dotted for nested objects)",
    )
    imp.add_argument("--run-name", help="suffix that keeps repeated runs of a model apart")
    imp.add_argument("--json", action="store_true", help="print the import report as JSON")
    imp.add_argument(
        "--strict",
        action="store_true",
        help="fail (exit 2, nothing imported) when any file is skipped or any record dropped, "
        "replaced or left without a field the benchmark needs",
    )
    imp.set_defaults(func=_cmd_import)

    from .score import benchmarks

    score = sub.add_parser(
        "score",
        help="score a trajectory store with a benchmark's scorer and bootstrap CIs",
        description="Score a trajectory store: the benchmark's metrics per (track, model, "
        "tools, task) with bootstrap confidence intervals and the overall rows. Each scorer "
        "reads the columns it needs from the store (docs/trajectory-schema.md).",
    )
    score.add_argument("store", help="the store directory")
    score.add_argument(
        "--benchmark",
        choices=benchmarks(),
        default=None,
        help="the benchmark to score (default: the store's only one)",
    )
    score.add_argument(
        "--n-resamples", type=int, default=1000, help="bootstrap resamples B (default 1000)"
    )
    score.add_argument("--level", type=float, default=0.95, help="confidence level (default 0.95)")
    score.add_argument(
        "--method", choices=["percentile", "basic", "bca"], default="percentile",
        help="interval method (default percentile; the Ray/--shards path: percentile or basic)",
    )  # fmt: skip
    score.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    score.add_argument(
        "--threads", type=int, default=None, help="bootstrap worker threads (default: all cores)"
    )
    score.add_argument(
        "--cluster", help="resample whole clusters, e.g. patient (= patient_id)", default=None
    )
    score.add_argument("--track", nargs="+", help="only these tracks")
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
        type=int,
        help="split the store's Parquet parts into N shards (Poisson scheme; default: one per "
        "part on Ray); without --ray-address the shards run in this process",
    )
    score.set_defaults(func=_cmd_score)

    from .embed.cli import add_embed_parser
    from .slides.cli import add_tile_parser

    add_tile_parser(sub)
    add_embed_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tumorboard`` command line.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name; ``sys.argv[1:]`` when None.

    Returns
    -------
    int
        The exit status: the command's own, or 2 when it fails with a missing file or a bad
        value (the message is printed to standard error). Without a command the help is printed
        and the status is 0.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args))
    except (FileNotFoundError, ValueError) as exc:
        print(f"tumorboard: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
