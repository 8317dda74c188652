"""Error messages follow the house style "NAME: expected WHAT, got VALUE".

The package's raised errors (and warnings) once mixed that style with "NAME must be WHAT". This
scan keeps the old style from coming back: every string literal in a ``raise X(...)`` call or a
``warnings.warn(...)`` call (f-strings' constant parts included) under ``python/tumorboard`` is
checked for "must be". ``models/`` is left out until it is converted, and ``kernels/`` (a link
to the top-level ``kernels`` folder, with its own messages) is not scanned.

A message built in a variable first (``msg = "..."; raise X(msg)``) is not seen by the scan.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "tumorboard"
EXCLUDED = {"models", "kernels"}
_OLD_STYLE = re.compile(r"\bmust be\b")


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
    """Return "file:line: text" for each message literal in ``source`` that says "must be"."""
    found = set()
    for call in _message_calls(ast.parse(source, filename=filename)):
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            for line, text in _literals(arg):
                if _OLD_STYLE.search(text):
                    found.add((line, text))
    return [f"{filename}:{line}: {text!r}" for line, text in sorted(found)]


def _sources() -> list[Path]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] not in EXCLUDED:
            out.append(path)
    return out


def test_scan_finds_the_old_style():
    src = (
        "def f(x, name):\n"
        "    if x:\n"
        "        raise ValueError(f'{name} must be positive, got {x}')\n"
        "    raise TypeError('must be ' 'a string')\n"
        "import warnings\n"
        "warnings.warn('x must be set', UserWarning)\n"
        "raise E(p, msg=f'{p}: expected a list, got {p}')\n"
    )
    found = old_style_messages(src, "mod.py")
    assert [f.split(":")[1] for f in found] == ["3", "4", "6"]


def test_scan_covers_the_package():
    paths = _sources()
    rels = {p.relative_to(PACKAGE).as_posix() for p in paths}
    assert "cli.py" in rels and "slides/_loader.py" in rels and "traj/fields.py" in rels
    assert not any(r.split("/")[0] in EXCLUDED for r in rels)


def test_no_must_be_messages():
    found = []
    for path in _sources():
        rel = path.relative_to(PACKAGE.parents[1]).as_posix()
        found += old_style_messages(path.read_text(encoding="utf-8"), rel)
    assert not found, (
        'messages in the "must be" style; write "NAME: expected WHAT, got VALUE":\n'
        + "\n".join(found)
    )
