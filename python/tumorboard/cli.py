"""The ``tumorboard`` command line.

The verbs: ``tumorboard --version``, ``tumorboard demo``, ``tumorboard bench``,
``tumorboard import`` (agent logs into a trajectory store) and ``tumorboard score`` (a store
into a report with bootstrap CIs), ``tumorboard tile`` (tissue segmentation and TRIDENT coords
.h5 for slides), ``tumorboard embed`` (patch features with a foundation model, TRIDENT
features .h5 + Parquet), ``tumorboard store check`` (a store against its manifest, with
``--repair``) and ``tumorboard mcp`` (the agent tools as a Model Context Protocol server).
Verbs are added as features land.

Errors. Every verb fails the same way: one line on standard error, ``tumorboard: error: ...``,
naming the file, record or option and its value, and exit status 2, without a traceback. That
holds for bad options (checked by argparse before any work, with the types of
:mod:`tumorboard._args`), for every :class:`~tumorboard.errors.TumorboardError` and ``OSError``
a verb raises, for a missing optional dependency (with the pip command that installs it) and for
a corrupt Parquet part of a store (named). Anything else is a bug: one line saying so, exit
status 70 (``EX_SOFTWARE`` of BSD's sysexits.h), and the traceback with ``--debug`` or
``TUMORBOARD_DEBUG=1``. Warnings are printed as one line each, ``tumorboard: warning: ...``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
import warnings
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from . import __version__
from ._args import ArgumentParser, UsageError, cli_message, positive_int, seed
from ._score_cli import _bootstrap_options, _emit_report  # noqa: F401 (importable from here)
from ._verbs import VERBS, verb_help
from .errors import (
    FileFormatError,
    InvalidArgumentError,
    MissingDependencyError,
    MissingFileError,
    TumorboardError,
)


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
            raise InvalidArgumentError(
                f"--only: unknown benchmark(s) {', '.join(map(repr, unknown))}; have: "
                f"{', '.join(names)}"
            )
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


def _mib(value: float | None) -> int | None:
    """Turn a ``--max-*-mb`` value (MiB; 0 = no limit) into bytes (None = no limit)."""
    if value is None:
        return None
    return None if value == 0 else int(value * 2**20)


def _nonnegative_mb(text: str) -> float:
    """Parse a ``--max-*-mb`` value: a number of MiB >= 0 (0: no limit)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of MiB, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of MiB >= 0, got {text!r}")
    return value


def _cmd_import(args: argparse.Namespace) -> int:
    """Run ``tumorboard import``: print the report; warnings also go to standard error.

    The exit status is 1 when a log file could not be imported or a record was rejected (the
    good ones are imported all the same), else 0.
    """
    from ._progress import CountProgress
    from .traj import import_logs

    what = {"jsonl": "lines", "inspect": "samples"}.get(args.format, "records")
    printer = CountProgress("import", what=what)
    extra: dict[str, Any] = {}
    if args.format == "jsonl":
        extra = {"item_key": args.item_key}
    elif args.item_key is not None:
        raise InvalidArgumentError(
            f"--item-key: only `tumorboard import jsonl` keys items by content, not {args.format!r}"
        )
    if args.format == "inspect":
        extra = {"patient_key": args.patient_key, "reader": args.reader}
    elif args.patient_key is not None or args.reader != "auto":
        raise InvalidArgumentError(
            f"--patient-key/--reader: only `tumorboard import inspect` has them, not "
            f"{args.format!r}"
        )
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
            replace=args.replace,
            max_line_bytes=_mib(args.max_line_mb),
            max_file_bytes=_mib(args.max_file_mb),
            cases=args.cases,
            progress=lambda files, total, records, _bytes: printer.update(files, total, records),
            **extra,
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
    if report.failed:
        shown = ", ".join(Path(f).name for f in report.failed[:3])
        more = f" and {len(report.failed) - 3} more" if len(report.failed) > 3 else ""
        print(
            f"tumorboard: warning: {len(report.failed)} log file(s) could not be imported: "
            f"{shown}{more}",
            file=sys.stderr,
        )
    if report.rejected:
        where, reason = report.rejected[0]
        print(
            f"tumorboard: warning: {len(report.rejected)} record(s) rejected, first {where}: "
            f"{reason}",
            file=sys.stderr,
        )
    return 0 if report.ok else 1


def _cmd_store_check(args: argparse.Namespace) -> int:
    """Run ``tumorboard store check``: print what is wrong (and repaired); 1 if any remains."""
    from .traj import Store

    store = Store(args.store, create=False)
    result = store.check(repair=args.repair, read=not args.quick)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(result)
    if not result.ok:
        print(
            f"tumorboard: warning: {len(result.remaining)} problem(s) remain in {args.store}"
            + ("" if args.repair else "; rerun with --repair to repair them"),
            file=sys.stderr,
        )
        return 1
    return 0


def add_demo_parser(sub: Any) -> None:
    """Add the ``demo`` sub-command to ``sub`` (the top parser's sub-parsers)."""
    demo = sub.add_parser(
        "demo",
        help=verb_help("demo"),
    )
    demo.add_argument("--seed", type=seed, default=0)
    demo.add_argument("--n-resamples", type=positive_int, default=1000)
    demo.add_argument(
        "--out",
        metavar="DIR",
        default=None,
        help="folder for the demo's outputs (default: a fresh temporary folder; a non-empty "
        "folder gets a new subfolder, nothing is overwritten)",
    )
    demo.set_defaults(func=_cmd_demo)


def add_bench_parser(sub: Any) -> None:
    """Add the ``bench`` sub-command to ``sub`` (the top parser's sub-parsers)."""
    bench = sub.add_parser("bench", help=verb_help("bench"))
    bench.add_argument("--quick", action="store_true", help="smaller workloads (~1 minute)")
    bench.add_argument("--only", nargs="+", metavar="NAME", help="e.g. bench_bootstrap")
    bench.add_argument("--dir", help="the benchmarks directory (default: ./benchmarks)")
    bench.add_argument("--json-dir", default="bench-results", help="where to write JSON results")
    bench.set_defaults(func=_cmd_bench)


def add_import_parser(sub: Any) -> None:
    """Add the ``import`` sub-command to ``sub`` (the top parser's sub-parsers)."""
    imp = sub.add_parser(
        "import",
        help=verb_help("import"),
        description="Import agent logs into a trajectory store. Re-imports are idempotent by "
        "item: items already stored unchanged are left alone, changed ones are replaced (latest "
        "wins, keyed by run, patient and item id). Malformed files and lines are skipped and "
        "reported (file, or file:line, and the reason) and the rest is imported; the exit "
        "status is then 1. Fields the benchmark needs that the records leave empty are warned "
        "about.",
    )
    imp.add_argument(
        "format", choices=["mtbbench", "jsonl", "react", "radabench", "inspect"],
        help="log format (inspect: inspect_ai .eval/.json logs, needs tumorboard[inspect])",
    )  # fmt: skip
    imp.add_argument(
        "src", nargs="+", help="log files or folders (searched recursively)"
    )  # fmt: skip
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
        "mtbbench, radabench, lammi, medinsight, medbench, inspect (jsonl: also which benchmark "
        "fields the records carry; default: the format's, or the records' 'benchmark')",
    )
    imp.add_argument(
        "--map",
        action="append",
        metavar="FIELD=KEY",
        help="jsonl: read FIELD from the record key KEY (dotted for nested objects)",
    )
    imp.add_argument("--run-name", help="suffix that keeps repeated runs of a model apart")
    imp.add_argument(
        "--item-key",
        metavar="KEY[,KEY...]",
        help="jsonl: the record keys whose values identify an item without an item_id "
        "(default: task, patient_id and question); the item id is a digest of them",
    )
    imp.add_argument(
        "--max-line-mb",
        type=_nonnegative_mb,
        default=64,
        metavar="MB",
        help="jsonl: reject a line longer than this many MiB before parsing it (default 64; "
        "0: no limit)",
    )
    imp.add_argument(
        "--max-file-mb",
        type=_nonnegative_mb,
        default=8192,
        metavar="MB",
        help="skip a log file larger than this many MiB before reading it (default 8192; "
        "0: no limit)",
    )
    imp.add_argument(
        "--replace",
        action="store_true",
        help="replace stored items whose key a record reuses with another question (without "
        "it such an import is refused, nothing written)",
    )
    imp.add_argument(
        "--cases",
        metavar="FILE",
        help="radabench: the pipelines' cases JSON (combined_cases*.json) with the reference "
        "answers of the text metrics",
    )
    imp.add_argument(
        "--patient-key",
        metavar="KEY",
        help="inspect: the sample metadata key of the patient id, for `score --cluster patient` "
        "(default: patient_id)",
    )
    imp.add_argument(
        "--reader",
        choices=["auto", "direct", "inspect"],
        default="auto",
        help="inspect: read samples with inspect_ai's reader or the log members directly "
        "(auto = direct; both give the same rows)",
    )
    imp.add_argument("--json", action="store_true", help="print the import report as JSON")
    imp.add_argument(
        "--strict",
        action="store_true",
        help="fail (exit 2, nothing imported) when any file is skipped or any record dropped, "
        "replaced or left without a field the benchmark needs",
    )
    imp.set_defaults(func=_cmd_import)


def add_store_parser(sub: Any) -> None:
    """Add the ``store`` sub-command (``store check``) to ``sub``."""
    store = sub.add_parser(
        "store",
        help=verb_help("store"),
        description="Look after a trajectory store.",
    )
    store_sub = store.add_subparsers(dest="store_command", metavar="ACTION", required=True)
    check = store_sub.add_parser(
        "check",
        help="check a store against its manifest; --repair repairs what can be repaired",
        description="Check a trajectory store against its manifest: the commit log, every "
        "listed part (present, its committed size and rows, readable), part files no commit "
        "lists, leftovers of interrupted writers. With --repair: missing or damaged parts are "
        "dropped from the manifest (damaged files and stray parts are moved to _quarantine/, "
        "never deleted), a damaged log is rebuilt from the records left, leftovers are "
        "deleted. Exit status 0 when no problem remains, 1 when some do.",
    )
    check.add_argument("store", help="the store directory")
    check.add_argument("--repair", action="store_true", help="repair what can be repaired")
    check.add_argument(
        "--quick",
        action="store_true",
        help="check sizes, footers and row counts only, without decoding every part",
    )
    check.add_argument("--json", action="store_true", help="print the result as JSON")
    check.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help=_DEBUG_HELP)  # fmt: skip
    check.set_defaults(func=_cmd_store_check)


def build_parser(*, verbs: Collection[str] | None = None) -> argparse.ArgumentParser:
    """Build the ``tumorboard`` argument parser with its sub-commands.

    Parameters
    ----------
    verbs : collection of str, optional
        The verbs whose options are built (their modules imported); the others are listed
        with their help line only, which is all ``tumorboard --help`` shows. None (the
        default) builds every verb.

    Returns
    -------
    argparse.ArgumentParser
        The parser; each built sub-command's namespace carries its handler as ``func``.
    """
    parser = ArgumentParser(
        prog="tumorboard",
        description="Engine for clinical AI-agent benchmarks: scoring with bootstrap CIs, "
        "trajectory storage, slide embedding and agent tools.",
    )
    parser.add_argument("--version", action="version", version=f"tumorboard {__version__}")
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_line, where) in VERBS.items():
        if verbs is None or name in verbs:
            module, function = where.split(":")
            getattr(importlib.import_module(module), function)(sub)
        else:
            sub.add_parser(name, help=help_line)
    for verb in sub.choices.values():  # --debug after the verb too; SUPPRESS keeps the top's
        verb.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                          help=_DEBUG_HELP)  # fmt: skip
    return parser


def _verb_of(argv: Sequence[str]) -> str | None:
    """Return the verb a command line names (its first word that is not an option), if any."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in VERBS else None
    return None


#: Exit status of an unexpected exception (a bug): ``EX_SOFTWARE`` of BSD's sysexits.h.
EXIT_INTERNAL = 70
_DEBUG_ENV = "TUMORBOARD_DEBUG"
_DEBUG_HELP = f"show the traceback of an unexpected error (or set {_DEBUG_ENV}=1)"

#: Modules of the optional extras: (pip package, extra), for an ImportError a verb lets escape.
_EXTRA_MODULES = {
    "torch": ("torch", "embed"), "safetensors": ("safetensors", "embed"),
    "tokenizers": ("tokenizers", "embed"), "h5py": ("h5py", "slides"),
    "openslide": ("openslide-python", "slides"), "tiffslide": ("tiffslide", "slides"),
    "tifffile": ("tifffile", "slides"), "PIL": ("pillow", "slides"),
    "imagecodecs": ("imagecodecs", "slides"), "onnxruntime": ("onnxruntime", "gpu"),
    "onnx": ("onnx", "gpu"), "triton": ("triton", "gpu"), "ray": ("ray", "dist"),
    "inspect_ai": ("inspect-ai", "inspect"), "mcp": ("mcp", "mcp"),
}  # fmt: skip


def _line(text: object) -> str:
    """Return a message on one line: its lines joined by "; " (the CLI prints one line)."""
    return "; ".join(part.strip() for part in str(text).splitlines() if part.strip())


def _error(message: object) -> None:
    """Print ``tumorboard: error: MESSAGE`` as one line on standard error."""
    print(f"tumorboard: error: {_line(message)}", file=sys.stderr, flush=True)


def _missing_extra(exc: ImportError, verb: str) -> MissingDependencyError | None:
    """Return the missing-dependency error of an ImportError of a known extra, else None."""
    top = (exc.name or "").split(".")[0]
    if top not in _EXTRA_MODULES:
        return None
    package, extra = _EXTRA_MODULES[top]
    return MissingDependencyError.for_extra(f"tumorboard {verb}", package=package, extra=extra,
                                            cause=exc)  # fmt: skip


def corrupt_part(store: str | os.PathLike[str]) -> FileFormatError | None:
    """Find the Parquet parts of a store that cannot be read, and say which.

    Used when reading a store failed inside polars or pyarrow, whose messages do not name the
    file: :meth:`Store.verify <tumorboard.traj.Store.verify>` checks every listed part (size,
    footer, page checksums) and decodes it with polars, the engine scoring reads with. When
    the manifest itself cannot be read, every part file under the table folders is opened
    and read with pyarrow instead.

    Parameters
    ----------
    store : str or os.PathLike
        The store directory.

    Returns
    -------
    FileFormatError or None
        The error naming the first unreadable part (a ``CorruptStoreError`` when the manifest
        reads) and the reader's complaint, or None when every part reads.
    """
    import pyarrow.parquet as pq

    from .traj import CorruptStoreError, Store

    root = Path(store)
    tables = ("runs", "items", "events", "imports")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Store(root, create=False).read(lambda st: st.verify(read=True))
        return None
    except CorruptStoreError as exc:
        return exc
    except (TumorboardError, OSError):
        parts = sorted(
            p
            for t in tables
            if (root / t).is_dir()
            for p in (root / t).glob("*.parquet")
            if not p.name.startswith(".")
        )
    for part in parts:
        try:
            pq.read_table(part, page_checksum_verification=True)
        except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ...
            return FileFormatError(
                part,
                f"corrupt Parquet part ({type(exc).__name__}: {_line(exc)}); restore it "
                f"from a copy, or run `tumorboard store check {root} --repair` (which drops "
                "it from the store's manifest), then rerun",
            )
    return None


def _diagnose(args: argparse.Namespace, exc: BaseException) -> TumorboardError | None:
    """Turn an exception a verb let escape into a user-facing error, when it is one."""
    if isinstance(exc, ImportError):
        return _missing_extra(exc, str(getattr(args, "command", "")))
    module = type(exc).__module__.split(".")[0]
    store = getattr(args, "store", None)
    if module in ("polars", "pyarrow") and store is not None:
        return corrupt_part(store)
    return None


@contextlib.contextmanager
def _one_line_warnings() -> Iterator[None]:
    """Print each warning as one line ``tumorboard: warning: ...`` on standard error."""

    def show(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
        """Print one warning on one line."""
        print(f"tumorboard: warning: {_line(message)}", file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tumorboard`` command line.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name; ``sys.argv[1:]`` when None.

    Returns
    -------
    int
        The exit status: the command's own (0, or 1 where a batch verb skipped bad items);
        2 for any error, printed as one line ``tumorboard: error: ...`` on standard error
        (a bad option, a missing or unreadable file, a bad value, a missing optional
        dependency, a corrupt store part); 70 for an unexpected exception (one line, and the
        traceback with ``--debug`` or ``TUMORBOARD_DEBUG=1``); 130 when interrupted. Without
        a command the help is printed and the status is 0. ``--help`` and ``--version`` exit
        through ``SystemExit(0)`` as argparse does.
    """
    if list(sys.argv[1:] if argv is None else argv) == ["--version"]:
        # answered before the parser is built: building it imports every verb's options
        print(f"tumorboard {__version__}")
        raise SystemExit(0)
    argv = list(sys.argv[1:] if argv is None else argv)
    verb = _verb_of(argv)
    parser = build_parser(verbs=() if verb is None else (verb,))
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        _error(f"{exc} (see `{exc.prog} --help`)")
        return 2
    debug = bool(getattr(args, "debug", False)) or os.environ.get(_DEBUG_ENV, "") not in ("", "0")
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        with _one_line_warnings():
            return int(args.func(args))
    except KeyboardInterrupt:
        if debug:
            raise
        print("tumorboard: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of our output went away (e.g. `| head`)
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (TumorboardError, OSError) as exc:
        if debug:
            raise
        # tile and embed run library functions whose messages name keywords: show flags
        _error(cli_message(exc) if args.command in ("tile", "embed") else exc)
        return 2
    except Exception as exc:
        known = _diagnose(args, exc)
        if debug:
            raise
        if known is not None:
            _error(known)
            return 2
        _error(
            f"unexpected {type(exc).__name__}: {exc} (this is a bug in tumorboard; rerun with "
            f"--debug or {_DEBUG_ENV}=1 for the traceback)"
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
