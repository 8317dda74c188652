"""Error messages follow the house style "NAME: expected WHAT, got VALUE".

The package's raised errors (and warnings) once mixed that style with "NAME must be WHAT",
"NAME must have WHAT", "offsets must start at ...", "column X must hold ...". This scan keeps the
old style from coming back: every string literal in a ``raise X(...)`` call or a
``warnings.warn(...)`` call (f-strings' constant parts included) under ``python/tumorboard`` and
under the top-level ``kernels`` folder (installed as ``tumorboard.kernels``) is checked for the
word "must" in any form ("must be", "must have", "must start", "must hold", "must match", ...).
The kernels are scanned at their source: ``python/tumorboard/kernels`` is a link to that
folder in a build tree (and absent from a fresh checkout), so it is skipped inside the package.

A message built in a variable first (``msg = "..."; raise X(msg)``) is not seen by the scan.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python" / "tumorboard"
KERNELS = ROOT / "kernels"
LINKED = "kernels"  # python/tumorboard/kernels -> ../../kernels, scanned as KERNELS
_OLD_STYLE = re.compile(r"\bmust\b")


def _literals(node: ast.AST) -> Iterator[tuple[int, str]]:
    """Yield (line, text) for every string constant inside ``node`` (f-string parts too)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.lineno, sub.value


def _message_calls(tree: ast.AST) -> Iterator[ast.Call]:
    """Yield the calls that build a raised exception or a warning."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            yield node.exc
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name == "warn":
                yield node


def old_style_messages(source: str, filename: str) -> list[str]:
    """Return "file:line: text" for each message literal in ``source`` that says "must"."""
    found = set()
    for call in _message_calls(ast.parse(source, filename=filename)):
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            for line, text in _literals(arg):
                if _OLD_STYLE.search(text):
                    found.add((line, text))
    return [f"{filename}:{line}: {text!r}" for line, text in sorted(found)]


def _sources() -> list[Path]:
    out = [p for p in sorted(PACKAGE.rglob("*.py")) if p.relative_to(PACKAGE).parts[0] != LINKED]
    return out + sorted(KERNELS.rglob("*.py"))


def test_scan_finds_the_old_style():
    src = (
        "def f(x, name):\n"
        "    if x:\n"
        "        raise ValueError(f'{name} must be positive, got {x}')\n"
        "    raise TypeError('must be ' 'a string')\n"
        "import warnings\n"
        "warnings.warn('x must be set', UserWarning)\n"
        "raise E(p, msg=f'{p}: expected a list, got {p}')\n"
        "raise ValueError(f'offsets must start at 0, got {x}')\n"
        "raise ValueError(f'out must have shape (2, 3), got {x}')\n"
        "raise TypeError(f'column {p!r} must hold strings')\n"
        "raise ValueError(f'{p}: expected 0 or 1 (the mustard flag), got {x}')\n"
    )
    found = old_style_messages(src, "mod.py")
    assert [f.split(":")[1] for f in found] == ["3", "4", "6", "8", "9", "10"]


def test_scan_covers_the_package():
    paths = _sources()
    rels = {p.relative_to(ROOT).as_posix() for p in paths}
    pkg = "python/tumorboard/"
    assert {pkg + "cli.py", pkg + "slides/_loader.py", pkg + "traj/fields.py"} <= rels
    assert {pkg + "models/abmil.py", pkg + "models/vit.py", pkg + "models/_zoo/cnns.py"} <= rels
    assert {"kernels/abmil.py", "kernels/segment_scale.py", "kernels/_utils.py"} <= rels
    assert not any(r.startswith(pkg + LINKED + "/") for r in rels)  # each kernel file once
    assert len(rels) == len(paths)


def test_no_must_messages():
    found = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        found += old_style_messages(path.read_text(encoding="utf-8"), rel)
    assert not found, (
        'messages in the "must ..." style; write "NAME: expected WHAT, got VALUE":\n'
        + "\n".join(found)
    )
