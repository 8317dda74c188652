"""Every exception tumorboard raises is a TumorboardError (tumorboard.errors).

Oracle: the package's own source, read with ``ast``: each ``raise Name(...)`` in
``python/tumorboard`` and ``kernels`` must name a class that descends from
:class:`~tumorboard.errors.TumorboardError`, except the builtin exceptions that a Python
protocol requires by exact class (module ``__getattr__``, mapping and sequence ``__getitem__``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest
import tumorboard
from tumorboard import errors

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "python" / "tumorboard", ROOT / "kernels"]
#: builtins a protocol needs by class: AttributeError (module __getattr__), KeyError (mapping
#: __getitem__), IndexError (sequence __getitem__), AssertionError (unreachable branches),
#: SystemExit (the CLI's exit status)
PROTOCOL = {"AttributeError", "KeyError", "IndexError", "AssertionError", "NotImplementedError",
            "SystemExit"}  # fmt: skip
#: helpers that build an exception for the caller to raise: their result class is checked
BUILDERS = {"_missing_extra": "MissingDependencyError"}


def _error_classes() -> dict[str, type]:
    """Every exception class defined anywhere in the package, by name."""
    found: dict[str, type] = {}
    for path in sorted(Path(tumorboard.__file__).parent.rglob("*.py")):
        rel = path.relative_to(Path(tumorboard.__file__).parent).with_suffix("")
        name = ".".join(("tumorboard", *rel.parts)).removesuffix(".__init__")
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional extra that is not installed here
            continue
        for obj_name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                found.setdefault(obj_name, obj)
    return found


def _raised_names() -> list[tuple[str, int, str]]:
    out = []
    for base in SOURCES:
        for path in sorted(base.rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                    func = node.exc.func
                    if isinstance(func, ast.Name):
                        out.append((str(path.relative_to(ROOT)), node.lineno, func.id))
    return out


def test_every_raised_class_descends_from_the_base():
    classes = _error_classes()
    raised = _raised_names()
    assert len(raised) > 400  # the scan sees the package
    bad = []
    for where, line, name in raised:
        if name in PROTOCOL:
            continue
        cls = classes.get(BUILDERS.get(name, name))
        if cls is None or not issubclass(cls, errors.TumorboardError):
            bad.append(f"{where}:{line}: raise {name}")
    assert not bad, "builtin or unknown exceptions raised:\n" + "\n".join(bad)


@pytest.mark.parametrize("name", errors.__all__)
def test_documented_classes_keep_their_builtin_parent(name):
    cls = getattr(errors, name)
    assert issubclass(cls, errors.TumorboardError) and cls.__doc__
    if cls is not errors.TumorboardError:
        # a specific builtin parent (ValueError, OSError, ...), not bare Exception
        builtin = [b for b in cls.__mro__[1:] if b.__module__ == "builtins"]
        assert builtin[0] not in (Exception, BaseException), name


def test_one_except_clause_catches_a_bad_argument_from_each_layer():
    from tumorboard import stats, text

    for call in (
        lambda: stats.bootstrap([1.0, float("nan")]),
        lambda: text.rouge(["a"], ["b"], types=["rouge9x"]),
        lambda: stats.BootstrapOptions(level=2.0),
    ):
        with pytest.raises(errors.TumorboardError) as info:
            call()
        assert isinstance(info.value, ValueError)
