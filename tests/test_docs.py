"""Docs that run and stay true.

* README.md stays short (what it is, two commands, a tour, a map, links) and every page it
  links exists;
* every ```python block of the README runs (in a subprocess, in an empty folder);
* every ```python block under docs/ runs the same way, after the prelude that a
  ``<!-- docs-setup: NAME -->`` comment just above it names (``tests/docs_setup.py``: the data
  files and variables the block reads as a user's own, e.g. answers.parquet, a store written by
  the Recorder, an Aperio slide, checkpoints of the right classes with random weights);
* the blocks that cannot run here are marked ``<!-- docs-test: not run (REASON) -->``; they are
  exactly the list ``NOT_RUN`` below (full-size gated weights, CUDA), and they still compile
  and every name they import (``from x import y``, ``import x.y as z``, and the attributes they
  use of an imported module) resolves wherever its package is installed;
* every docstring Example (``>>>``) of the package passes under doctest.

The site itself (MkDocs + mkdocstrings, ``--strict``) is built by ``make docs``, which
``make test`` runs after the suite; the marker comments do not show on it.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import importlib.util
import re
import subprocess
import sys
from dataclasses import dataclass
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


# A docs block, with the marker comment on the line just above its fence, if any.
MARKED_FENCE = re.compile(
    r"(?:^<!-- docs-(setup|test): ([^\n]*?) -->\n)?^```python\n(.*?)^```", re.S | re.M
)
NOT_RUN_MARK = re.compile(r"not run \((.+)\)")

# The blocks that show what CI cannot have, each with its reason. The rest of each example
# runs in a block of its own.
NOT_RUN = sorted([
    ("docs/api.md", "needs CUDA: decode=\"gpu\" decodes with nvJPEG on the device"),
    ("docs/api.md", "needs the gated UNI2-h and CONCH weights"),
    ("docs/api.md", "needs the gated CONCH v1.5 weights"),
    ("docs/api.md", "needs the gated UNI2-h weights"),
    ("docs/api.md", "needs the gated UNI2-h weights"),
    ("docs/api.md", "needs the gated UNI2-h weights"),
])  # fmt: skip


@dataclass(frozen=True)
class DocsBlock:
    """One ```python block of a page under docs/."""

    page: str
    line: int
    code: str
    setup: str | None = None
    not_run: str | None = None

    @property
    def label(self) -> str:
        return f"{self.page}:{self.line}"


def _docs_blocks() -> list[DocsBlock]:
    out = []
    for path in sorted((REPO / "docs").rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        page = path.relative_to(REPO).as_posix()
        for m in MARKED_FENCE.finditer(text):
            kind, value, code = m.groups()
            line = text.count("\n", 0, m.start(3))  # the fence's line, 1-based
            setup = value if kind == "setup" else None
            reason = None
            if kind == "test":
                found = NOT_RUN_MARK.fullmatch(value)
                assert found, f"{page}:{line}: expected 'not run (REASON)', got {value!r}"
                reason = found.group(1)
            out.append(DocsBlock(page, line, code, setup, reason))
    return out


DOCS_BLOCKS = _docs_blocks()
RUNNABLE = [b for b in DOCS_BLOCKS if b.not_run is None]
NOT_RUN_BLOCKS = [b for b in DOCS_BLOCKS if b.not_run is not None]

# The subprocess: the prelude's variables become the block's globals; a traceback names the
# page and the line of the block. An optional package that is not installed (an extra this
# environment lacks) exits with MISSING and its name: the test is then skipped, not failed.
MISSING = 77
RUNNER = f"""
import sys
sys.path.insert(0, sys.argv[1])
try:
    from docs_setup import PRELUDES
    names = PRELUDES[sys.argv[2]]() if sys.argv[2] else {{}}
    code = compile(sys.argv[3], sys.argv[4], "exec")
    exec(code, {{"__name__": "__main__", **names}})
except ModuleNotFoundError as err:
    import importlib.util
    top = (err.name or "").partition(".")[0]
    if not top or top == "tumorboard" or importlib.util.find_spec(top) is not None:
        raise
    print(top, file=sys.stderr)
    sys.exit({MISSING})
"""


def test_docs_python_blocks_are_marked_and_valid():
    from docs_setup import PRELUDES

    assert len(DOCS_BLOCKS) >= 15
    for block in DOCS_BLOCKS:
        try:
            ast.parse(block.code)
        except SyntaxError as exc:  # pragma: no cover - the message is the point
            pytest.fail(f"{block.label}: {exc}")
        assert block.setup is None or block.setup in PRELUDES, f"{block.label}: {block.setup}"
    used = {b.setup for b in DOCS_BLOCKS}
    assert set(PRELUDES) <= used, f"preludes no block names: {set(PRELUDES) - used}"
    # what does not run is a short, known list; everything else runs below
    assert sorted((b.page, b.not_run) for b in NOT_RUN_BLOCKS) == NOT_RUN
    assert len(RUNNABLE) >= 13  # each example of the tour has a part that runs


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.label)
def test_docs_python_blocks_run(block, tmp_path):
    argv = [str(REPO / "tests"), block.setup or "", block.code, block.label]
    out = subprocess.run([sys.executable, "-c", RUNNER, *argv], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    if out.returncode == MISSING:
        pytest.skip(f"{block.label} needs {out.stderr.split()[-1]}, which is not installed")
    assert out.returncode == 0, f"{block.label} (setup {block.setup}) failed:\n{out.stderr[-3000:]}"


def _imports(tree: ast.AST) -> tuple[list[tuple[str, str | None]], dict[str, str]]:
    """Return the (module, name) pairs a block imports and its module aliases (alias -> module)."""
    pairs: list[tuple[str, str | None]] = []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                pairs.append((a.name, None))
                top = a.name.partition(".")[0]  # `import x.y` binds x; `import x.y as z` binds x.y
                aliases[a.asname or top] = a.name if a.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                pairs.append((node.module, a.name))
    return pairs, aliases


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module.partition(".")[0]) is not None


@pytest.mark.parametrize("block", NOT_RUN_BLOCKS, ids=lambda b: b.label)
def test_not_run_blocks_compile_and_their_imports_resolve(block):
    tree = ast.parse(block.code)
    compile(tree, block.label, "exec")
    pairs, aliases = _imports(tree)
    checked = 0
    for module, name in pairs:
        if not _installed(module):
            continue
        mod = importlib.import_module(module)
        if name is not None and not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")  # a submodule not imported yet
            except ModuleNotFoundError:
                pytest.fail(f"{block.label}: `from {module} import {name}`: {module} has no {name}")
        checked += 1
    for node in ast.walk(tree):  # tm.load_conch, ts.PatchLoader, ...: the module has them
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = aliases.get(node.value.id)
            if module is not None and _installed(module):
                mod = importlib.import_module(module)
                assert hasattr(mod, node.attr), f"{block.label}: {module} has no {node.attr!r}"
                checked += 1
    if pairs and not checked:
        pytest.skip(f"{block.label}: none of the packages it imports is installed")


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
