"""Imports and reports pinned to their bytes: today's output is the oracle of every later change.

Speed work on the importers and scorers (compiled parsers, batches, threads) must not change one
stored value or one reported digit. Each case here writes fixed logs, imports them with the
command line, reads every stored row back, scores the store (and compares its models) as JSON,
and checks the lot against the canonical copy in ``tests/golden/<case>.json``: rows sorted,
the import time and batch id left out, the temporary folder written as ``$TMP``.

A change that is meant to alter the output (a fixed bug, a new column) rewrites the copies with
``TB_UPDATE_GOLDEN=1 python -m pytest tests/test_golden_outputs.py``; the diff of the golden
files is then the change, for review.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_import_radabench import write_results
from test_import_stream import _lines
from test_traj_import import REACT_TRACE, logs, write  # noqa: F401 - logs: the MTBBench fixture
from tumorboard.traj import Store

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("TB_UPDATE_GOLDEN") == "1"
#: A small resample count keeps each report quick; the seed fixes every interval.
BOOT = ("--n-resamples", "200", "--seed", "7")


def _cli(*args: str, ok: tuple[int, ...] = (0,)) -> str:
    """Run the command line; return its standard output (its status must be one of ``ok``)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run([sys.executable, "-m", "tumorboard.cli", *args], capture_output=True,
                         text=True, env=env, timeout=300)  # fmt: skip
    assert out.returncode in ok, (args, out.returncode, out.stderr[-2000:])
    return out.stdout


def _report(text: str) -> dict[str, Any]:
    """Return an import's ``--json`` report without what differs between runs (time, batch)."""
    doc = json.loads(text)
    for key in ("seconds", "batch"):
        doc.pop(key)
    return doc


def _plain(value: Any) -> Any:
    """Return a JSON-able copy of a stored value (timestamps as ISO text, lists kept)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def _tables(store: Path) -> dict[str, list[list[Any]]]:
    """Every stored row of every table, sorted (the import time and batch id left out)."""
    st = Store(store)
    out = {}
    for table in ("runs", "items", "events", "imports"):
        df = getattr(st, table)().collect()
        cols = sorted(c for c in df.columns if c not in ("imported_at", "batch"))
        rows = [[_plain(v) for v in row] for row in df.select(cols).rows()]
        out[table] = [cols, *sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))]
    return out


def _canonical(value: Any, tmp: Path) -> Any:
    """``value`` with the temporary folder written as ``$TMP`` (in every string)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return json.loads(text.replace(json.dumps(str(tmp))[1:-1], "$TMP"))


def _first_difference(got: Any, want: Any, where: str = "$") -> str:
    """Return the JSON path of the first place two values differ, and both values there."""
    if isinstance(got, dict) and isinstance(want, dict):
        for key in sorted(set(got) | set(want)):
            if got.get(key, "<missing>") != want.get(key, "<missing>"):
                return _first_difference(got.get(key, "<missing>"), want.get(key, "<missing>"),
                                         f"{where}.{key}")  # fmt: skip
    if isinstance(got, list) and isinstance(want, list):
        for i, (a, b) in enumerate(zip(got, want, strict=False)):
            if a != b:
                return _first_difference(a, b, f"{where}[{i}]")
        return f"{where}: {len(got)} entries, golden {len(want)}"
    return f"{where}: got {got!r:.300}, golden {want!r:.300}"


def _check(case: str, value: Any, tmp: Path) -> None:
    """Compare with (or, under TB_UPDATE_GOLDEN=1, write) the golden copy of ``case``."""
    got = _canonical(value, tmp)
    path = GOLDEN / f"{case}.json"
    if UPDATE:
        path.write_text(json.dumps(got, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    assert path.exists(), f"{path} is missing: run with TB_UPDATE_GOLDEN=1 to write it"
    want = json.loads(path.read_text())
    assert got == want, f"{case} differs from {path.name}: {_first_difference(got, want)}"


def test_mtbbench_import_score_and_compare_are_unchanged(logs, tmp_path):  # noqa: F811
    store = tmp_path / "mtb.store"
    imported = _cli("import", "mtbbench", str(logs), "--store", str(store), "--json", ok=(1,))
    scored = _cli("score", str(store), *BOOT, "--format", "json")
    clustered = _cli("score", str(store), *BOOT, "--cluster", "patient", "--method", "bca",
                     "--format", "json")  # fmt: skip
    compared = _cli("compare", str(store), *BOOT, "--ranks", "--format", "json")
    _check("mtbbench", {"import": _report(imported), "tables": _tables(store),
                        "score": json.loads(scored), "score_clustered": json.loads(clustered),
                        "compare": json.loads(compared)}, tmp_path)  # fmt: skip


def test_jsonl_import_and_score_are_unchanged(tmp_path):
    # lines with ids and without (keyed by content), a bad line, a blank one, one over the
    # line bound; a field map renames the id
    src = tmp_path / "answers.jsonl"
    src.write_text("\n".join(_lines(240, seed=5)) + "\n")
    store = tmp_path / "jl.store"
    imported = _cli("import", "jsonl", str(src), "--store", str(store), "--benchmark", "mtbbench",
                    "--map", "item_id=id", "--max-line-mb", "0.002", "--json", ok=(1,))  # fmt: skip
    scored = _cli("score", str(store), *BOOT, "--format", "json")
    _check("jsonl", {"import": _report(imported), "tables": _tables(store),
                     "score": json.loads(scored)}, tmp_path)  # fmt: skip


def test_radabench_and_react_imports_are_unchanged(tmp_path):
    root, cases = write_results(tmp_path / "results")
    store = tmp_path / "rada.store"
    imported = _cli("import", "radabench", str(root), "--store", str(store), "--cases",
                    str(cases), "--json")  # fmt: skip
    scored = _cli("score", str(store), *BOOT, "--benchmark", "radabench", "--format", "json")
    write(tmp_path / "traces" / "agent" / "case9.txt", REACT_TRACE)
    react = tmp_path / "react.store"
    imported_react = _cli("import", "react", str(tmp_path / "traces"), "--store", str(react),
                          "--json")  # fmt: skip
    _check("radabench_react", {"import": _report(imported), "tables": _tables(store),
                               "score": json.loads(scored),
                               "import_react": _report(imported_react),
                               "tables_react": _tables(react)}, tmp_path)  # fmt: skip


@pytest.mark.parametrize("case", ["mtbbench", "jsonl", "radabench_react"])
def test_golden_copies_are_checked_in(case):
    # a golden copy is data the tests compare against, never an empty placeholder
    doc = json.loads((GOLDEN / f"{case}.json").read_text())
    assert doc["tables"]["items"][1:], case
