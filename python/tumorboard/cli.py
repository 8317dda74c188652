"""The ``tumorboard`` command line: ``tumorboard --version``, ``tumorboard demo``,
``tumorboard bench``. Verbs are added as features land."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from . import __version__


def _cmd_demo(args: argparse.Namespace) -> int:
    from ._demo import run_demo

    run_demo(seed=args.seed, n_resamples=args.n_resamples)
    return 0


def _find_benchmarks(directory: str | None) -> Path:
    candidates = [Path(directory)] if directory else [Path.cwd() / "benchmarks"]
    for c in candidates:
        if (c / "bench_bootstrap.py").is_file():
            return c
    raise FileNotFoundError(
        "benchmarks/ not found: run `tumorboard bench` from a tumorboard source checkout "
        "or pass --dir PATH/TO/benchmarks"
    )


def load_benchmark(bench_dir: Path, name: str) -> ModuleType:
    """Imports benchmarks/<name>.py as the package module `benchmarks.<name>` (so that its
    relative imports work)."""
    sys.path.insert(0, str(bench_dir.parent))
    try:
        return importlib.import_module(f"{bench_dir.name}.{name}")
    finally:
        sys.path.remove(str(bench_dir.parent))


def _cmd_bench(args: argparse.Namespace) -> int:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tumorboard",
        description="Engine for clinical AI-agent benchmarks: scoring with bootstrap CIs, "
        "trajectory storage, slide embedding and agent tools.",
    )
    parser.add_argument("--version", action="version", version=f"tumorboard {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="score a generated sample of agent answers with CIs")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--n-resamples", type=int, default=1000)
    demo.set_defaults(func=_cmd_demo)

    bench = sub.add_parser("bench", help="run the side-by-side benchmarks in benchmarks/")
    bench.add_argument("--quick", action="store_true", help="smaller workloads (~1 minute)")
    bench.add_argument("--only", nargs="+", metavar="NAME", help="e.g. bench_bootstrap")
    bench.add_argument("--dir", help="the benchmarks directory (default: ./benchmarks)")
    bench.add_argument("--json-dir", default="bench-results", help="where to write JSON results")
    bench.set_defaults(func=_cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
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
