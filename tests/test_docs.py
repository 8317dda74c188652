"""Docs that run and stay true.

* README.md stays short (what it is, two commands, a tour, a map, links) and every page it
  links exists;
* every ```python block of the README runs (in a subprocess, in an empty folder);
* every ```python block under docs/ is valid Python (they use the reader's own data files);
* every docstring Example (``>>>``) of the package passes under doctest.

The site itself (MkDocs + mkdocstrings, ``--strict``) is built by ``make docs``, which
``make test`` runs after the suite.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks(path: Path) -> list[str]:
    return FENCE.findall(path.read_text(encoding="utf-8"))


def test_readme_is_short_and_its_links_resolve():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 500
    links = re.findall(r"\]\(((?:docs/)[^)#]+)", text)
    assert links, "the README links the docs"
    for link in links:
        assert (REPO / link).exists(), f"README links {link}, which does not exist"


@pytest.mark.parametrize("i", range(len(_blocks(REPO / "README.md"))))
def test_readme_python_blocks_run(i, tmp_path):
    code = _blocks(REPO / "README.md")[i]
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, f"README python block {i + 1} failed:\n{out.stderr[-2000:]}"


def test_docs_python_blocks_are_valid_python():
    n = 0
    for page in sorted((REPO / "docs").rglob("*.md")):
        for j, code in enumerate(_blocks(page)):
            try:
                ast.parse(code)
            except SyntaxError as exc:  # pragma: no cover - the message is the point
                pytest.fail(f"{page.relative_to(REPO)} python block {j + 1}: {exc}")
            n += 1
    assert n >= 10


def _modules_with_examples() -> list[str]:
    root = REPO / "python"
    out = []
    for path in sorted((root / "tumorboard").rglob("*.py")):
        if ">>> " in path.read_text(encoding="utf-8"):
            rel = path.relative_to(root).with_suffix("")
            out.append(".".join(p for p in rel.parts if p != "__init__"))
    return out


@pytest.mark.parametrize("name", _modules_with_examples())
def test_docstring_examples_pass(name):
    module = importlib.import_module(name)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(module, optionflags=flags, verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
