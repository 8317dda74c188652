"""Every exception tumorboard raises is a TumorboardError (tumorboard.errors).

Oracle: the package's own source, read with ``ast``: each ``raise Name(...)`` in
``python/tumorboard`` and ``kernels`` must name a class that descends from
:class:`~tumorboard.errors.TumorboardError`, except the builtin exceptions that a Python
protocol requires by exact class (module ``__getattr__``, mapping and sequence ``__getitem__``).
And the package's own classes, imported: every public exception and warning class is defined in
``tumorboard.errors`` (the domain modules re-export it), every warning derives from
:class:`~tumorboard.errors.TumorboardWarning`, and every error about a file that cannot be read
derives from :class:`~tumorboard.errors.FileFormatError` and has ``path``.
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
BUILDERS = {"_missing_extra": "MissingDependencyError", "_no_items": "InvalidArgumentError"}


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


@pytest.mark.parametrize(
    "name", [n for n in errors.__all__ if not issubclass(getattr(errors, n), Warning)]
)
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


def _package_classes() -> dict[str, type]:
    """Every exception and warning class the package itself defines, by qualified name."""
    return {
        f"{cls.__module__}.{cls.__qualname__}": cls
        for cls in _error_classes().values()
        if cls.__module__.split(".")[0] == "tumorboard"
    }


#: Where each class lived before it moved to tumorboard.errors; the old imports keep working.
RE_EXPORTS = {
    "tumorboard._args": ["UsageError"],
    "tumorboard.score.judge": ["JudgeScoreError"],
    "tumorboard.slides._readers": ["SlideError", "SlideResolutionError"],
    "tumorboard.slides": ["SlideError", "SlideResolutionError", "CoordsFileError"],
    "tumorboard.slides._h5": ["CoordsFileError"],
    "tumorboard.traj.importers._common": ["ItemConflictError", "MalformedLog", "NotOfFormat"],
    "tumorboard.traj.store": ["CorruptStoreError", "StoreVersionError", "StrayPartWarning"],
    "tumorboard.models.weights": [
        "WeightsError",
        "UnsafeCheckpointError",
        "CheckpointKeyError",
        "RandomWeightsWarning",
    ],
}
#: The errors about a file that cannot be read as what it should be.
FILE_ERRORS = [
    "CheckpointKeyError",
    "CoordsFileError",
    "CorruptStoreError",
    "MalformedLog",
    "NotOfFormat",
    "SlideError",
    "SlideResolutionError",
    "UnsafeCheckpointError",
    "WeightsError",
]


def test_every_public_exception_and_warning_class_is_defined_in_errors():
    classes = _package_classes()
    assert len(classes) > 20  # the scan sees the package
    # private classes (a leading underscore) are control flow inside one module, never raised
    # to the caller
    stray = sorted(
        name
        for name, cls in classes.items()
        if not cls.__name__.startswith("_") and cls.__module__ != "tumorboard.errors"
    )
    assert not stray, "exception or warning classes defined outside tumorboard.errors: " + str(
        stray
    )
    public = {cls for cls in classes.values() if not cls.__name__.startswith("_")}
    assert public == {getattr(errors, n) for n in errors.__all__}


@pytest.mark.parametrize("module", sorted(RE_EXPORTS))
def test_the_modules_the_classes_lived_in_re_export_them(module):
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:  # an optional extra that is not installed here
        pytest.skip(f"{module}: {exc}")
    for name in RE_EXPORTS[module]:
        assert getattr(mod, name) is getattr(errors, name), f"{module}.{name}"


def test_every_warning_derives_from_the_base():
    assert issubclass(errors.TumorboardWarning, UserWarning)
    warnings = [c for c in _package_classes().values() if issubclass(c, Warning)]
    assert len(warnings) >= 3
    bad = [c.__qualname__ for c in warnings if not issubclass(c, errors.TumorboardWarning)]
    assert not bad, bad


@pytest.mark.parametrize("name", FILE_ERRORS)
def test_file_reading_errors_derive_from_file_format_error(name):
    cls = getattr(errors, name)
    assert issubclass(cls, errors.FileFormatError)
    assert issubclass(cls, errors.TumorboardError) and issubclass(cls, OSError)
    if cls in (errors.MalformedLog, errors.NotOfFormat):
        bare, named = cls("no samples"), cls("no samples", path=Path("run.eval"))
        assert (bare.path, str(bare)) == (None, "no samples")
        assert (named.path, str(named)) == ("run.eval", "no samples")
    elif cls is errors.CheckpointKeyError:
        err = cls(Path("w.pt"), "m", {"a": (2,)}, {}, ())
        assert err.path == "w.pt" and str(err).startswith("w.pt: checkpoint does not match m")
    else:
        err = cls(Path("x.svs"), "truncated")
        assert (err.path, str(err)) == ("x.svs", "x.svs: truncated")


def test_every_error_built_from_a_path_is_a_file_format_error():
    # oracle: the constructors' signatures; a class whose constructor takes ``path`` is about a
    # file, and a file that cannot be read is a FileFormatError
    taking_path = [
        cls
        for cls in _package_classes().values()
        if issubclass(cls, Exception)
        and "path" in inspect.signature(cls.__init__).parameters
        and cls.__init__ is not Exception.__init__
    ]
    assert set(taking_path) >= {getattr(errors, n) for n in FILE_ERRORS}
    bad = [c.__qualname__ for c in taking_path if not issubclass(c, errors.FileFormatError)]
    assert not bad, bad


def test_file_errors_keep_their_value_error_parent():
    # MalformedLog, CoordsFileError and WeightsError were InvalidArgumentErrors before they became
    # FileFormatErrors: ``except ValueError`` / ``except InvalidArgumentError`` still catch them
    for name in ("MalformedLog", "NotOfFormat", "CoordsFileError", "WeightsError"):
        assert issubclass(getattr(errors, name), errors.InvalidArgumentError), name
    assert issubclass(errors.RandomWeightsWarning, UserWarning)
    assert issubclass(errors.StrayPartWarning, UserWarning)
