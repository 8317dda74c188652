"""Every verb fails the same way: one line ``tumorboard: error: ...``, exit status 2, no traceback.

The table runs bad invocations of every verb (``demo``, ``bench``, ``import``, ``score``,
``tile``, ``embed``) as a user would, ``python -m tumorboard.cli ...`` in a subprocess, and checks
the exit status, that standard error is exactly one line starting ``tumorboard: error:``, that the
line names the option, file or value at fault, and that no traceback is printed. The
subprocesses run concurrently (each is a fresh interpreter; the table takes a few seconds).

Oracles: the option, value or file each bad invocation contains (the line must name it), and
the exit-status convention documented in ``tumorboard.cli``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from tumorboard import cli

REPO = Path(__file__).resolve().parents[1]
CUDA = False
try:  # the CUDA case needs a machine without CUDA
    import torch

    CUDA = bool(torch.cuda.is_available())
except ImportError:  # pragma: no cover - torch is in the test environment
    pass


def _env(extra_path: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TUMORBOARD_DEBUG", None)
    paths = [p for p in (extra_path, env.get("PYTHONPATH")) if p]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _blocker(root: Path, module: str) -> str:
    """Return a PYTHONPATH entry where ``import module`` fails as for a missing package."""
    folder = root / f"no-{module}"
    (folder / module).mkdir(parents=True, exist_ok=True)
    (folder / module / "__init__.py").write_text(
        f"raise ModuleNotFoundError(\"No module named '{module}'\", name={module!r})\n"
    )
    return str(folder)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """Write a store of two JSONL lines, a copy with a truncated part, a slide and a file."""
    root = tmp_path_factory.mktemp("cli-errors")
    log = root / "run.jsonl"
    log.write_text(
        "\n".join(
            json.dumps(
                {
                    "id": f"q{i}",
                    "model": "m",
                    "task": "t",
                    "response": "A",
                    "gold": "A",
                    "correct": i == 0,
                }
            )  # fmt: skip
            for i in range(2)
        )
        + "\n"
    )
    store = root / "store"
    res = subprocess.run(
        [sys.executable, "-m", "tumorboard.cli", "import", "jsonl", str(log), "--store",
         str(store), "--benchmark", "mtbbench"], capture_output=True, text=True, env=_env(),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    corrupt = root / "corrupt-store"
    shutil.copytree(store, corrupt)
    part = sorted((corrupt / "items").glob("*.parquet"))[0]
    part.write_bytes(part.read_bytes()[:100])  # truncated: no footer
    slide = root / "slide.png"
    from PIL import Image

    Image.new("RGB", (64, 64), (230, 200, 220)).save(slide)
    plain = root / "plain.txt"
    plain.write_text("not a folder\n")
    return {"root": root, "log": log, "store": store, "corrupt": corrupt, "part": part,
            "slide": slide, "plain": plain}  # fmt: skip


def _cases(f: dict[str, Path]) -> list[tuple[str, list[str], list[str], str | None]]:
    """Return (id, argv, substrings the error line must contain, blocked module) rows."""
    st, slide, out = str(f["store"]), str(f["slide"]), str(f["root"] / "out")
    log = str(f["log"])
    rows = [
        ("top-unknown-verb", ["frob"], ["'frob'"], None),
        ("top-unknown-option", ["score", st, "--frobnicate"], ["--frobnicate"], None),
        ("demo-resamples", ["demo", "--n-resamples", "0"], ["--n-resamples", "'0'"], None),
        ("demo-seed", ["demo", "--seed", "-1"], ["--seed", "'-1'"], None),
        ("demo-out-is-a-file", ["demo", "--out", str(f["plain"])], [str(f["plain"])], None),
        ("bench-no-dir", ["bench", "--dir", str(f["root"])], ["benchmarks/ not found"], None),
        (
            "bench-unknown",
            ["bench", "--dir", str(REPO / "benchmarks"), "--only", "bench_nope"],
            ["--only", "'bench_nope'"],
            None,
        ),  # fmt: skip
        ("import-format", ["import", "xml", log, "--store", st], ["'xml'"], None),
        ("import-no-store", ["import", "jsonl", log], ["--store"], None),
        (
            "import-missing-file",
            ["import", "jsonl", str(f["root"] / "gone.jsonl"), "--store", st],
            ["gone.jsonl"],
            None,
        ),  # fmt: skip
        (
            "import-map",
            ["import", "jsonl", log, "--store", st, "--map", "gold"],
            ["--map", "'gold'"],
            None,
        ),  # fmt: skip
        ("score-no-store", ["score", str(f["root"] / "nowhere")], ["nowhere"], None),
        ("score-threads", ["score", st, "--threads", "-3"], ["--threads", "'-3'"], None),
        ("score-resamples", ["score", st, "--n-resamples", "0"], ["--n-resamples", "'0'"], None),
        ("score-level", ["score", st, "--level", "1.5"], ["--level", "'1.5'"], None),
        ("score-seed", ["score", st, "--seed", "x"], ["--seed", "'x'"], None),
        ("score-shards", ["score", st, "--shards", "0"], ["--shards", "'0'"], None),
        ("score-method", ["score", st, "--method", "wild"], ["--method", "'wild'"], None),
        (
            "score-corrupt-part",
            ["score", str(f["corrupt"])],
            [str(f["part"].relative_to(f["root"])), "corrupt Parquet part"],
            None,
        ),  # fmt: skip
        (
            "score-ray-unreachable",
            ["score", st, "--ray-address", "127.0.0.1:1"],
            ["127.0.0.1:1"],
            None,
        ),  # fmt: skip
        (
            "score-ray-missing",
            ["score", st, "--ray-address", "local"],
            ["needs ray", "[dist]'", "pip install"],
            "ray",
        ),  # fmt: skip
        ("tile-no-out", ["tile", slide], ["--out"], None),
        (
            "tile-threads",
            ["tile", slide, "--out", out, "--threads", "-3"],
            ["--threads", "'-3'"],
            None,
        ),  # fmt: skip
        ("tile-mpp", ["tile", slide, "--out", out, "--mpp", "-1"], ["--mpp", "'-1'"], None),
        (
            "tile-seg-mpp",
            ["tile", slide, "--out", out, "--seg-mpp", "0"],
            ["--seg-mpp", "'0'"],
            None,
        ),  # fmt: skip
        (
            "tile-overlap",
            ["tile", slide, "--out", out, "--patch", "64", "--overlap", "64"],
            ["--overlap", "64"],
            None,
        ),  # fmt: skip
        (
            "embed-device-name",
            ["embed", slide, "--out", out, "--device", "gpu"],
            ["--device", "'gpu'"],
            None,
        ),  # fmt: skip
        (
            "embed-batch-size",
            ["embed", slide, "--out", out, "--batch-size", "0"],
            ["--batch-size", "'0'"],
            None,
        ),  # fmt: skip
        ("embed-mpp", ["embed", slide, "--out", out, "--mpp", "nan"], ["--mpp", "'nan'"], None),
        (
            "embed-torch-missing",
            ["embed", slide, "--out", out, "--model", "uni2-tiny"],
            ["needs torch", "[embed]'", "pip install"],
            "torch",
        ),  # fmt: skip
    ]
    if not CUDA:
        rows.append(("embed-cuda-absent", ["embed", slide, "--out", out, "--device", "cuda"],
                     ["'cuda'", "CUDA is not available"], None))  # fmt: skip
    return rows


@pytest.fixture(scope="module")
def results(files) -> dict[str, tuple[list[str], subprocess.CompletedProcess]]:
    """Run every case of the table concurrently; return (expected, result) per case id."""
    procs = {}
    for case_id, argv, expect, blocked in _cases(files):
        env = _env(_blocker(files["root"], blocked) if blocked else None)
        procs[case_id] = (expect, subprocess.Popen(
            [sys.executable, "-m", "tumorboard.cli", *argv], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env, cwd=files["root"],
        ))  # fmt: skip
    out = {}
    for case_id, (expect, proc) in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        out[case_id] = (expect, subprocess.CompletedProcess(proc.args, proc.returncode, stdout,
                                                            stderr))  # fmt: skip
    return out


def _problems(expect: list[str], res: subprocess.CompletedProcess) -> list[str]:
    """Return what is wrong with one bad invocation's outcome (nothing when it is right)."""
    out = []
    if "Traceback" in res.stderr + res.stdout:
        out.append("printed a traceback")
    lines = res.stderr.splitlines()
    if len(lines) != 1:
        out.append(f"{len(lines)} stderr lines")
    elif not lines[0].startswith("tumorboard: error: "):
        out.append("the line does not start with 'tumorboard: error: '")
    else:
        out += [f"the line does not name {piece!r}" for piece in expect if piece not in lines[0]]
    if res.returncode != 2:
        out.append(f"exit status {res.returncode}")
    return out


def test_every_bad_invocation_is_one_error_line_with_status_2(results):
    # one table for every verb: each row must hold (rows are reported together)
    assert len(results) >= 30
    failures = {}
    for case_id, (expect, res) in results.items():
        problems = _problems(expect, res)
        if problems:
            failures[case_id] = f"{'; '.join(problems)}\n    stderr: {res.stderr[-600:]!r}"
    assert not failures, "\n".join(f"{k}: {v}" for k, v in failures.items())


def test_bad_options_are_refused_before_any_work(files):
    out = files["root"] / "never"
    res = subprocess.run(
        [sys.executable, "-m", "tumorboard.cli", "tile", str(files["slide"]), "--out", str(out),
         "--threads", "-3"], capture_output=True, text=True, env=_env(),
    )  # fmt: skip
    assert res.returncode == 2 and not out.exists()  # the job folder was not even created


# ---- in process: unexpected exceptions, --debug, warnings -----------------------------------


def _boom(**_):
    raise ZeroDivisionError("division by zero in a verb")


def test_unexpected_exception_is_one_line_with_a_debug_hint(monkeypatch, capsys):
    import tumorboard._demo as demo

    monkeypatch.setattr(demo, "run_demo", _boom)
    monkeypatch.delenv("TUMORBOARD_DEBUG", raising=False)
    assert cli.main(["demo"]) == cli.EXIT_INTERNAL == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("tumorboard: error: unexpected ZeroDivisionError: division by zero")
    assert "rerun with --debug or TUMORBOARD_DEBUG=1" in err


@pytest.mark.parametrize("how", ["flag-before", "flag-after", "env"])
def test_debug_shows_the_traceback_which_is_hidden_otherwise(monkeypatch, capsys, how):
    import tumorboard._demo as demo

    monkeypatch.setattr(demo, "run_demo", _boom)
    monkeypatch.delenv("TUMORBOARD_DEBUG", raising=False)
    assert cli.main(["demo"]) == 70 and "Traceback" not in capsys.readouterr().err
    argv = {"flag-before": ["--debug", "demo"], "flag-after": ["demo", "--debug"],
            "env": ["demo"]}[how]  # fmt: skip
    if how == "env":
        monkeypatch.setenv("TUMORBOARD_DEBUG", "1")
    with pytest.raises(ZeroDivisionError, match="in a verb"):
        cli.main(argv)


def test_debug_shows_the_traceback_of_a_typed_error_too(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "tumorboard.cli", "score", str(tmp_path / "nowhere"), "--debug"],
        capture_output=True, text=True, env=_env(),
    )  # fmt: skip
    assert res.returncode != 0 and "Traceback" in res.stderr
    assert "MissingFileError" in res.stderr or "no trajectory store" in res.stderr


def test_warnings_are_one_line_each(monkeypatch, capsys):
    import tumorboard._demo as demo

    def warn(**_):
        warnings.warn("3 of 3 lines have no 'respnse' key\nkeys seen: id, response", stacklevel=1)
        return None

    monkeypatch.setattr(demo, "run_demo", warn)
    assert cli.main(["demo"]) == 0
    err = capsys.readouterr().err
    assert (
        err == "tumorboard: warning: 3 of 3 lines have no 'respnse' key; keys seen: id, response\n"
    )


def test_missing_extra_names_a_command_that_works_from_this_checkout(monkeypatch):
    from tumorboard import errors as errors_module
    from tumorboard.errors import MissingDependencyError

    # as it runs from this source checkout (the suite may also run against an installed wheel)
    monkeypatch.setattr(errors_module, "_source_checkout", lambda: REPO)
    monkeypatch.chdir(REPO)
    err = MissingDependencyError.for_extra(
        "reading slides", package="openslide-python", extra="slides", cause=ImportError("no")
    )
    text = str(err)
    assert isinstance(err, ImportError) and "\n" not in text
    # run from a source checkout, `tumorboard[slides]` is no installed distribution pip could
    # extend; `.[slides]` is, and the extra's own packages always are
    assert "pip install '.[slides]'" in text
    assert "'openslide-python>=1.3'" in text and "'tiffslide>=2.4'" in text
    elsewhere = MissingDependencyError.install_command("dist")
    monkeypatch.chdir("/")
    assert f"pip install '{REPO}[dist]'" in MissingDependencyError.install_command("dist")
    assert "'ray>=2.9'" in elsewhere
    assert MissingDependencyError.install_command(None, package="nltk") == "pip install nltk"
    # installed from a wheel: the distribution's name, and the extra's packages from its metadata
    monkeypatch.setattr(errors_module, "_source_checkout", lambda: None)
    assert MissingDependencyError.install_command("slides").startswith(
        "pip install 'tumorboard[slides]'"
    )
