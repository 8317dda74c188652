"""The package's import graph: packages mirror the core, import public names only, no cycles.

Oracle: the source itself, read with ``ast`` (no import side effects). A module of package
``tumorboard.X`` may import ``tumorboard.Y`` (Y != X) only through public names: no module path
with a private component below ``tumorboard.Y``. Top-level shared helpers
(``tumorboard._io``, ``_json``, ``_keys``, ``_typing``, ...) and the extension ``_core`` are
the package's own and open to all.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "python" / "tumorboard"


def _modules() -> dict[str, Path]:
    mods = {}
    for p in PKG.rglob("*.py"):
        if "kernels" in p.relative_to(PKG).parts:
            continue  # the symlinked source tree in development checkouts
        rel = p.relative_to(PKG.parent).with_suffix("")
        mods[".".join(rel.parts).removesuffix(".__init__")] = p
    for p in (ROOT / "kernels").glob("*.py"):
        mods["tumorboard.kernels" + ("" if p.stem == "__init__" else "." + p.stem)] = p
    return mods


def _edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Map each module to the tumorboard modules it imports (at any level of the file)."""
    edges: dict[str, set[str]] = {}
    for name, path in mods.items():
        base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        out = edges.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = base[: len(base) - (node.level - 1)] + (
                        [node.module] if node.module else []
                    )
                    mod = ".".join(parts)
                else:
                    mod = node.module or ""
                if mod.startswith("tumorboard"):
                    for alias in node.names:
                        full = f"{mod}.{alias.name}"
                        out.add(full if full in mods else mod)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name.startswith("tumorboard"))
    return edges


def _package(name: str) -> str:
    return ".".join(name.split(".")[:2])


def test_packages_mirror_the_core():
    for pkg, twin in (
        ("stats", "stats"),
        ("text", "text"),
        ("slides", "tiling"),
        ("seqmask", "seqmask"),
    ):
        assert (PKG / pkg / "__init__.py").is_file(), pkg
        assert (ROOT / "csrc" / twin).is_dir(), twin
        assert (ROOT / "csrc" / "bindings" / f"{twin}.cpp").is_file(), twin
    # the old flat modules are gone
    for old in ("stats.py", "text.py", "seqmask.py", "_bootstrap.py", "_rouge.py", "_bleu.py"):
        assert not (PKG / old).exists(), old


def test_no_module_imports_another_packages_private_module():
    mods = _modules()
    bad = []
    for src, targets in _edges(mods).items():
        for t in targets:
            parts = t.split(".")
            if _package(t) in (_package(src), "tumorboard._core") or len(parts) <= 2:
                continue
            if any(p.startswith("_") for p in parts[2:]):
                bad.append(f"{src} -> {t}")
    assert not bad, "\n".join(bad)


def test_no_import_cycles_between_packages():
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for src, targets in _edges(mods).items():
        for t in targets:
            a, b = _package(src), _package(t)
            if a != b:
                graph.setdefault(a, set()).add(b)
    # the imports made at module level only: function-level imports are deferred on purpose
    # (e.g. embed -> dist for executor="ray"); the check is on the eager graph
    eager: dict[str, set[str]] = {}
    for name, path in mods.items():
        base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.level:
                mod = ".".join(
                    base[: len(base) - (node.level - 1)] + ([node.module] if node.module else [])
                )
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
            else:
                continue
            a, b = _package(name), _package(mod)
            if mod.startswith("tumorboard") and a != b:
                eager.setdefault(a, set()).add(b)
    seen: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(eager.get(node, ())):
            assert seen.get(nxt) != 1, "import cycle: " + " -> ".join([*stack, node, nxt])
            if nxt not in seen:
                visit(nxt, [*stack, node])
        seen[node] = 2

    for node in sorted(eager):
        if node not in seen:
            visit(node, [])
    assert "tumorboard.stats" in graph.get("tumorboard.score", set())
