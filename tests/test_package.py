"""The installed package: imports, the compiled core, the kernels subpackage and the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import tumorboard
import tumorboard._core as core
import tumorboard.kernels as kernels
from tumorboard.cli import load_benchmark, main

REPO = Path(__file__).resolve().parents[1]


def test_imports_from_the_install():
    assert tumorboard.__version__ != "0+unknown"
    assert Path(core.__file__).parent == Path(tumorboard.__file__).parent
    assert Path(kernels.__file__).parent.parent == Path(tumorboard.__file__).parent
    assert isinstance(kernels.triton_available(), bool)
    assert {"mean", "sum", "ratio", "f1", "cohen_kappa"} <= set(core.stats.statistic_names())


def test_core_evaluates_registered_statistics():
    assert core.stats.evaluate_statistic("mean", [], np.array([6.0]), 4.0) == 1.5
    assert core.stats.evaluate_statistic("f1", [], np.array([3.0, 1.0, 2.0]), 0.0) == 6.0 / 9.0
    assert np.isnan(core.stats.evaluate_statistic("ratio", [], np.array([1.0, 0.0]), 1.0))
    with pytest.raises(ValueError, match="unknown statistic 'median'"):
        core.stats.evaluate_statistic("median", [], np.array([1.0]), 1.0)
    with pytest.raises(ValueError, match="needs 3 value column"):
        core.stats.evaluate_statistic("f1", [], np.array([1.0, 2.0]), 1.0)


def test_cli_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"tumorboard {tumorboard.__version__}"


def test_console_script_runs_demo():
    out = subprocess.run(
        [sys.executable, "-m", "tumorboard.cli", "demo", "--n-resamples", "200"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Accuracy per (model, task)" in out
    assert "gpt-4o" in out and "digital_pathology" in out
    assert "Paired bootstrap" in out and "p = " in out


def test_demo_results_are_reproducible():
    from tumorboard._demo import generate_answers

    a, b = generate_answers(seed=3), generate_answers(seed=3)
    assert a.equals(b)
    assert a.height == 3 * 4 * 40 * 5
    assert a["correct"].dtype == pl.Boolean


def test_bench_reports_a_missing_benchmarks_directory(tmp_path, capsys):
    assert main(["bench", "--dir", str(tmp_path)]) == 2
    assert "benchmarks/ not found" in capsys.readouterr().err


def test_bench_rejects_unknown_names(capsys):
    if not (REPO / "benchmarks" / "bench_bootstrap.py").is_file():
        pytest.fail("benchmarks/bench_bootstrap.py is missing from the source tree")
    assert main(["bench", "--dir", str(REPO / "benchmarks"), "--only", "bench_nope"]) == 2
    assert "--only: unknown benchmark(s) 'bench_nope'" in capsys.readouterr().err


def test_bench_modules_load_through_the_cli():
    module = load_benchmark(REPO / "benchmarks", "bench_bootstrap")
    assert callable(module.main) and callable(module.run)


def test_scorer_names_match_the_scorers():
    from tumorboard import score
    from tumorboard._scorer_names import SCORER_NAMES

    assert SCORER_NAMES == tuple(score.benchmarks())


def test_cli_parser_does_not_load_polars_or_the_scorers():
    """`tumorboard embed` runs where polars is absent (a GPU machine): the parser needs neither."""
    import subprocess
    import sys

    code = (
        "import sys; from tumorboard import cli; cli.build_parser(); "
        "print(sorted(m for m in ('polars', 'tumorboard.score') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_version_constant_matches_pyproject_and_metadata():
    import importlib.metadata

    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert tumorboard.__version__ == project["version"]
    assert tumorboard.__version__ == importlib.metadata.version("tumorboard")


def test_version_answers_without_building_the_parser():
    """`tumorboard --version` imports neither the verbs' modules nor importlib.metadata."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom tumorboard import cli\ntry:\n    cli.main(['--version'])\n"
        "except SystemExit as e:\n    assert e.code == 0\n"
        "print(sorted(m for m in ('importlib.metadata', 'numpy', 'tumorboard.embed', "
        "'tumorboard.slides') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [f"tumorboard {tumorboard.__version__}", "[]"]


def test_help_and_light_verbs_import_no_heavy_module():
    """`tumorboard --help`, a typo and `tumorboard score --help` build only what they show."""
    import subprocess
    import sys

    heavy = ("numpy", "polars", "pyarrow", "torch", "tumorboard.embed", "tumorboard.slides")
    for argv in (["--help"], ["frobnicate"], ["score", "--help"], ["--debug", "models", "-h"]):
        code = (
            f"import sys\nfrom tumorboard import cli\ntry:\n    rc = cli.main({argv!r})\n"
            "except SystemExit as e:\n    rc = e.code\n"
            f"print(rc, sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        rc, loaded = out.stderr.splitlines()[-1].split(" ", 1)
        assert loaded == "[]", f"{argv}: imported {loaded}"
        if argv == ["frobnicate"]:
            assert rc == "2" and "invalid choice: 'frobnicate'" in out.stderr, out.stderr
        else:
            assert rc == "0", (argv, out.stderr)


def test_every_verb_is_listed_with_the_help_its_builder_gives():
    """The light listing (--help) and the built verbs show the same help lines."""
    import argparse

    from tumorboard import cli
    from tumorboard._verbs import VERBS

    def helps(parser: argparse.ArgumentParser) -> dict[str, str]:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return {c.dest: c.help for c in sub._choices_actions}

    light, full = helps(cli.build_parser(verbs=())), helps(cli.build_parser())
    assert light == full == {name: line for name, (line, _) in VERBS.items()}
    for name in VERBS:  # each verb built alone parses its own --help
        with pytest.raises(SystemExit) as exc:
            cli.build_parser(verbs=(name,)).parse_args([name, "--help"])
        assert exc.value.code == 0


def test_the_store_and_recorder_import_without_the_compiled_core():
    """A harness process writes trajectories with tumorboard.traj alone: no _core at import."""
    import subprocess
    import sys

    code = (
        "import sys\nsys.modules['tumorboard._core'] = None  # any import of it fails\n"
        "import tumorboard.traj, tumorboard.traj.importers\n"
        "from tumorboard.traj import Recorder, Store\nprint('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]
