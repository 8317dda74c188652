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


def _deferred_never(stmt: ast.stmt) -> bool:
    """Tell whether a module-level statement never runs when the module is imported.

    ``if TYPE_CHECKING:`` (the names are for the type checker only) and
    ``if __name__ == "__main__":`` (it runs in the ``__main__`` module of ``python -m``, a
    different module object, never in the imported one).
    """
    if not isinstance(stmt, ast.If):
        return False
    test = stmt.test
    if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
        return True
    if isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING":
        return True
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _module_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Map each module to the tumorboard modules it imports, function-level imports included.

    A relative import is resolved to its absolute name; ``from P import n`` is an edge to the
    module ``P.n`` when there is one, else to ``P`` (a package means its ``__init__``).
    """
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        out = graph.setdefault(name, set())
        tree = ast.parse(path.read_text())
        for stmt in tree.body:
            if _deferred_never(stmt):
                continue
            for node in ast.walk(stmt):
                if isinstance(node, ast.ImportFrom):
                    if node.level:
                        parts = base[: len(base) - (node.level - 1)]
                        mod = ".".join(parts + ([node.module] if node.module else []))
                    else:
                        mod = node.module or ""
                    targets = [f"{mod}.{a.name}" for a in node.names]
                    out.update(t if t in mods else mod for t in targets)
                elif isinstance(node, ast.Import):
                    for a in node.names:
                        mod = a.name
                        while mod and mod not in mods:  # `import p.m` of an extension module
                            mod = mod.rpartition(".")[0]
                        out.add(mod)
        out.intersection_update(mods)
        out.discard(name)
    return graph


#: Import edges the no-cycle test still allows, each with why; one that no longer exists fails
#: the test, so that the list only shrinks. Empty: the last one (``embed._engine`` ->
#: ``dist`` for ``executor="ray"``) is resolved by name through ``tumorboard._executors``.
KNOWN_CYCLE_EDGES: set[tuple[str, str]] = set()


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """Return one cycle of ``graph`` as a path (first node repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_module_graph_has_no_cycle():
    """No module imports itself through others, counting imports made inside functions.

    Every module under ``python/tumorboard`` is read with ``ast``; all its imports count,
    at any depth (a function-level import still ties the two modules together), except the
    module-level ``if TYPE_CHECKING:`` blocks, which never execute, and the
    ``if __name__ == "__main__":`` blocks, which run in the ``__main__`` module of
    ``python -m`` and not in the imported module. The edges of :data:`KNOWN_CYCLE_EDGES` are
    left out, and each must still exist.
    """
    graph = _module_graph(_modules())
    for src, dst in KNOWN_CYCLE_EDGES:
        assert dst in graph[src], f"{src} -> {dst} is gone: remove it from KNOWN_CYCLE_EDGES"
        graph[src].discard(dst)
    cycle = _find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_cycle_finder_names_the_path():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _find_cycle(graph) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


def test_removed_tile_main_still_works_for_one_release_with_a_warning(tmp_path):
    import pytest
    from tumorboard.slides import cli as tile_cli

    with pytest.warns(DeprecationWarning, match=r"tumorboard\.cli\.main\(\['tile'"):
        main = tile_cli.main
    assert main(["tile", str(tmp_path / "missing.tif"), "--out", str(tmp_path / "o")]) == 2


def test_ray_executors_resolve_by_name():
    from tumorboard import _executors
    from tumorboard.errors import InvalidArgumentError

    for job, (module, name) in _executors.RAY_ENTRIES.items():
        src = (ROOT / "python" / module.replace(".", "/") / "__init__.py").read_text()
        assert name in src, f"{module} does not export {name} (the {job} executor)"
    try:
        _executors.ray_entry("train")
    except InvalidArgumentError as exc:
        assert "job: expected one of ['embed', 'score'], got 'train'" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("an unknown job was accepted")
