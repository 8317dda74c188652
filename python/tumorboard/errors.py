"""The exceptions tumorboard raises, under one documented base class.

Every error the package raises is a :class:`TumorboardError`, so a harness can catch everything
tumorboard refuses with one ``except`` clause, and each class also keeps the builtin parent that
says what kind of failure it is (``ValueError`` for bad input, ``TypeError`` for a wrong type,
``OSError`` for a file that cannot be read), so ``except ValueError`` keeps working. The pattern
follows polars' ``polars.exceptions`` (one module, one base, one map from the compiled core).

Every exception and warning class of the package is defined here; the domain modules re-export
theirs (``from tumorboard.slides import SlideError`` is this module's class). The family:

- :class:`TumorboardError` (``Exception``), the base of every error:
  :class:`InvalidArgumentError` (``ValueError``), with :class:`UsageError` (a refused command
  line), :class:`JudgeScoreError`, :class:`ItemConflictError` and :class:`StoreVersionError`;
  :class:`InvalidTypeError` (``TypeError``); :class:`CoreError`, :class:`StateError`
  (``RuntimeError``); :class:`MissingFileError` (``FileNotFoundError``);
  :class:`MissingDependencyError` (``ImportError``); :class:`ClusterError`
  (``ConnectionError``); :class:`NumericOverflowError` (``OverflowError``).
- :class:`FileFormatError` (``OSError``), a file that cannot be read as what it should be, with
  the file as ``path``: :class:`SlideError` (and :class:`SlideResolutionError`),
  :class:`CoordsFileError`, :class:`WeightsError` (and :class:`UnsafeCheckpointError`,
  :class:`CheckpointKeyError`), :class:`MalformedLog` (and :class:`NotOfFormat`; ``path`` is
  None where the parser does not know the file) and :class:`CorruptStoreError`. The coords,
  weights and log errors are also :class:`InvalidArgumentError` (``ValueError``), as before.
- :class:`TumorboardWarning` (``UserWarning``), the base of every warning class:
  :class:`StrayPartWarning` and :class:`RandomWeightsWarning`.

Python's own protocols keep their builtin exceptions where the protocol needs exactly that
class: ``AttributeError`` from a module's ``__getattr__``, ``KeyError`` from a mapping's
``__getitem__`` and ``IndexError`` from a sequence's ``__getitem__``.

Errors raised inside the C++ core (``tumorboard._core``) arrive through one translator
(``csrc/bindings/errors.hpp``), most derived C++ class first:

=================================== ==========================================
C++ exception                       Python class
=================================== ==========================================
``tb::bindings::invalid_type``      :class:`InvalidTypeError` (TypeError)
``std::invalid_argument``           :class:`InvalidArgumentError` (ValueError)
``std::domain_error``               :class:`InvalidArgumentError` (ValueError)
``std::out_of_range``               :class:`InvalidArgumentError` (ValueError)
``std::length_error``               :class:`InvalidArgumentError` (ValueError)
``std::bad_alloc``                  ``MemoryError``
other ``std::logic_error``          :class:`CoreError` (RuntimeError)
``std::runtime_error``              :class:`CoreError` (RuntimeError)
any other ``std::exception``        :class:`CoreError` (RuntimeError)
=================================== ==========================================

The message is the C++ exception's ``what()``. ``tb::bindings::invalid_type`` is thrown by the
binding layer for a Python object of the wrong type (a list entry that is not a ``str``). A Python
exception raised by a Python call made from C++ passes through unchanged, and so do pybind11's
own argument-conversion errors (a plain ``TypeError`` for a call whose arguments do not match
the signature). ``tests/test_core_errors.py`` checks every row through ``_core.testing``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "CheckpointKeyError",
    "ClusterError",
    "CoordsFileError",
    "CoreError",
    "CorruptStoreError",
    "FileFormatError",
    "InvalidArgumentError",
    "InvalidTypeError",
    "ItemConflictError",
    "JudgeScoreError",
    "MalformedLog",
    "MissingDependencyError",
    "MissingFileError",
    "NotOfFormat",
    "NumericOverflowError",
    "PageChecksumError",
    "RandomWeightsWarning",
    "SlideError",
    "SlideResolutionError",
    "StateError",
    "StoreVersionError",
    "StrayPartWarning",
    "TumorboardError",
    "TumorboardWarning",
    "UnsafeCheckpointError",
    "UsageError",
    "WeightsError",
]


class TumorboardError(Exception):
    """Base class of every exception tumorboard raises.

    Catch it to handle anything tumorboard refused; each subclass also derives from the builtin
    exception that describes the failure (``ValueError``, ``TypeError``, ``OSError``,
    ``RuntimeError``).
    """


class InvalidArgumentError(TumorboardError, ValueError):
    """An argument or input value that is out of range, malformed or inconsistent.

    The message names the argument (or record and field) and what was expected.
    """


class InvalidTypeError(TumorboardError, TypeError):
    """An argument of the wrong type; the message names the argument and the expected type."""


class CoreError(TumorboardError, RuntimeError):
    """A failure inside the C++ core that is not the caller's input (an internal invariant)."""


class FileFormatError(TumorboardError, OSError):
    """A file that cannot be read as what it should be; ``path`` names the file.

    The base of every "this file cannot be read" error (a slide, a coords file, a checkpoint, an
    agent log, a store's part). ``path`` is the file as a string, or None where the raiser does
    not know it (a :class:`MalformedLog` raised while parsing bytes; the report names the file).
    """

    path: str | None

    def __init__(self, path: str | os.PathLike[str], message: str) -> None:
        self.path = str(path)
        super().__init__(f"{self.path}: {message}")


class MissingFileError(TumorboardError, FileNotFoundError):
    """A file or folder that should exist and does not; the message names the path."""


class MissingDependencyError(TumorboardError, ImportError):
    """An optional dependency that a call needs is not installed.

    The message names the package and a command that installs it: the extra (``[embed]``,
    ``[slides]``, ``[gpu]``, ``[dist]``) as ``pip install 'tumorboard[slides]'`` for an installed
    tumorboard, or as ``pip install '.[slides]'`` when tumorboard runs from a source checkout
    (where ``tumorboard`` is not an installed distribution pip could add the extra to), and the
    extra's packages themselves. Every site builds it with :meth:`for_extra`.
    """

    @classmethod
    def for_extra(
        cls,
        what: str,
        *,
        package: str,
        extra: str | None,
        cause: BaseException | None = None,
    ) -> MissingDependencyError:
        """Build the error for ``what``, which needs ``package`` from the extra ``extra``.

        Parameters
        ----------
        what : str
            What needs the package, e.g. ``"reading slides"`` or ``"tumorboard.dist"``.
        package : str
            The package as pip names it, e.g. ``"openslide-python"`` or ``"torch"``.
        extra : str or None
            The tumorboard extra that installs it (``"slides"``, ``"embed"``, ``"gpu"``,
            ``"dist"``); None for a package that is in no extra (then only ``pip install
            package`` is suggested).
        cause : BaseException, optional
            The ImportError that was caught; its message is kept (it tells a missing module
            from a missing shared library).

        Returns
        -------
        MissingDependencyError
            The error, with a one-line message such as ``"reading slides needs
            openslide-python, which is not installed (No module named 'openslide'); install it
            with: pip install 'tumorboard[slides]' (or only the packages: pip install ...)"``.
        """
        detail = f" ({_one_line(str(cause))})" if cause is not None and str(cause) else ""
        return cls(
            f"{what} needs {package}, which is not installed{detail}; install it with: "
            f"{_install_command(extra, package=package)}"
        )

    @staticmethod
    def install_command(extra: str | None, *, package: str | None = None) -> str:
        """Return a pip command that installs an extra, valid where tumorboard runs from.

        Parameters
        ----------
        extra : str or None
            The extra (``"slides"``, ``"embed"``, ``"gpu"``, ``"dist"``); None for a package in
            no extra.
        package : str, optional
            The package to install when ``extra`` is None.

        Returns
        -------
        str
            ``pip install 'tumorboard[EXTRA]'`` for an installed tumorboard, ``pip install
            '.[EXTRA]'`` (or ``'/path/to/checkout[EXTRA]'`` outside the checkout's root) from a
            source checkout, followed by ``(or only the packages: pip install ...)`` listing the
            extra's requirements when they are known; ``pip install PACKAGE`` without an extra.
        """
        return _install_command(extra, package=package)


def _one_line(text: str) -> str:
    """Return ``text`` with its lines joined by "; " (messages stay on one line)."""
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def _source_checkout() -> Path | None:
    """Return the root of the source checkout tumorboard runs from, or None when installed.

    A checkout is recognised by ``pyproject.toml`` (naming the project ``tumorboard``) and
    ``csrc/`` two levels above the package folder (``python/tumorboard``).
    """
    root = Path(__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return None
    if (root / "csrc").is_dir() and re.search(r'^name\s*=\s*"tumorboard"', text, re.M):
        return root
    return None


def _extra_requirements(extra: str, root: Path | None) -> list[str]:
    """Return the requirements of one extra, from the checkout's pyproject or the install."""
    if root is not None:
        try:
            import tomllib  # Python >= 3.11
        except ImportError:  # pragma: no cover - Python 3.10
            return []
        try:
            doc = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        reqs = doc.get("project", {}).get("optional-dependencies", {}).get(extra, [])
        # environment markers ("; platform_system == 'Linux'") do not belong in a command line
        return [str(r).split(";", 1)[0].strip() for r in reqs]
    try:
        from importlib.metadata import PackageNotFoundError, requires
    except ImportError:  # pragma: no cover - importlib.metadata is in the standard library
        return []
    try:
        declared = requires("tumorboard") or []
    except PackageNotFoundError:
        return []
    marker = re.compile(r"extra\s*==\s*['\"]" + re.escape(extra) + r"['\"]")
    return [r.split(";", 1)[0].strip() for r in declared if marker.search(r)]


def _install_command(extra: str | None, *, package: str | None = None) -> str:
    """Return the pip command of :meth:`MissingDependencyError.install_command`."""
    if extra is None:
        return f"pip install {package}" if package else "pip install"
    root = _source_checkout()
    if root is None:
        command = f"pip install 'tumorboard[{extra}]'"
    else:
        try:
            here = "." if Path.cwd().resolve() == root else str(root)
        except OSError:  # the working directory was removed
            here = str(root)
        command = f"pip install '{here}[{extra}]'"
    reqs = _extra_requirements(extra, root)
    if reqs:
        command += " (or only the packages: pip install " + " ".join(f"'{r}'" for r in reqs) + ")"
    return command


class StateError(TumorboardError, RuntimeError):
    """A call that the object's current state does not allow.

    For example a closed :class:`~tumorboard.traj.Recorder`, a detached adapter, or a store
    that another process is compacting.
    """


class ClusterError(TumorboardError, ConnectionError):
    """A Ray cluster that cannot be reached or joined."""


class NumericOverflowError(TumorboardError, OverflowError):
    """A result that does not fit its exact representation (e.g. 128-bit Poisson partial sums)."""


class UsageError(InvalidArgumentError):
    """A command line that the parser refused; ``prog`` names the (sub)command."""

    def __init__(self, prog: str, message: str) -> None:
        self.prog = prog
        super().__init__(message)


class JudgeScoreError(InvalidArgumentError):
    """A judge reply without exactly one valid ``<score>N</score>`` tag.

    Attributes
    ----------
    record : object
        The record (id or row position) whose reply is malformed.
    reply : str or None
        The reply text (None when the reply itself was missing).
    """

    def __init__(self, message: str, *, record: Any, reply: str | None) -> None:
        super().__init__(message)
        self.record = record
        self.reply = reply


# --- files that cannot be read: FileFormatError, with the path as ``path`` ----------------------


class SlideError(FileFormatError):
    """A slide file that cannot be opened or read (missing, corrupt, truncated, unsupported)."""


class SlideResolutionError(SlideError):
    """A slide whose resolution metadata gives no usable mpp (0 after rounding, or infinite).

    A :class:`SlideError`; ``open`` raises it at once rather than trying another reader, since
    every reader reads the same tags. Passing ``mpp=`` overrides the metadata.
    """


class CoordsFileError(FileFormatError, InvalidArgumentError):
    """A coordinates file that cannot be read: truncated, corrupt, or in no known layout."""


class WeightsError(FileFormatError, InvalidArgumentError):
    """A checkpoint that cannot be used.

    Unreadable, no state dict inside, or keys that do not match the model. ``path`` names the
    file.
    """


class UnsafeCheckpointError(WeightsError):
    """A pickled checkpoint that needs objects other than tensors and plain containers.

    tumorboard never unpickles such a file (unpickling can run arbitrary code).
    """


_LIST_LIMIT = 25  # entries shown per section of a key diff


def _shape(shape: Iterable[int]) -> str:
    """Return a tensor shape as ``[d0, d1, ...]``."""
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


class CheckpointKeyError(WeightsError):
    """Checkpoint keys that do not match the module.

    Attributes
    ----------
    missing : dict of str to tuple of int
        Keys the module has and the checkpoint lacks (with the expected shapes).
    unexpected : dict of str to tuple of int
        Keys the checkpoint has and the module lacks (with their shapes).
    mismatched : tuple of KeyMismatch
        Keys present on both sides with different shapes
        (:class:`tumorboard.models.weights.KeyMismatch`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        model: str,
        missing: Mapping[str, tuple[int, ...]],
        unexpected: Mapping[str, tuple[int, ...]],
        mismatched: Iterable[Any],
    ) -> None:
        self.model = model
        self.missing = dict(missing)
        self.unexpected = dict(unexpected)
        self.mismatched = tuple(mismatched)
        super().__init__(path, self._describe())

    def _describe(self) -> str:
        counts = (
            f"{len(self.missing)} missing, {len(self.unexpected)} unexpected, "
            f"{len(self.mismatched)} mis-shaped key(s)"
        )
        lines = [f"checkpoint does not match {self.model}: {counts}"]

        def section(title: str, rows: list[str]) -> None:
            if not rows:
                return
            lines.append(f"  {title} ({len(rows)}):")
            lines.extend(f"    {row}" for row in rows[:_LIST_LIMIT])
            if len(rows) > _LIST_LIMIT:
                lines.append(f"    ... and {len(rows) - _LIST_LIMIT} more")

        section(
            "missing from the checkpoint",
            [f"{k}  {_shape(s)}" for k, s in sorted(self.missing.items())],
        )
        section(
            "unexpected in the checkpoint",
            [f"{k}  {_shape(s)}" for k, s in sorted(self.unexpected.items())],
        )
        section(
            "mis-shaped",
            [
                f"{m.key}  expected {_shape(m.expected)}, checkpoint has {_shape(m.found)}"
                for m in sorted(self.mismatched, key=lambda m: m.key)
            ],
        )
        return "\n".join(lines)


class MalformedLog(FileFormatError, InvalidArgumentError):
    """A log file that cannot be imported; the message is the reason shown in the report.

    Unlike the other :class:`FileFormatError` classes the message is the reason alone (the
    import report puts the file beside it), and ``path`` is optional: None where the parser
    reads bytes and does not know the file.
    """

    def __init__(self, message: str, *, path: str | os.PathLike[str] | None = None) -> None:
        self.path = None if path is None else str(path)
        # not FileFormatError.__init__, which puts the path before the message
        super(FileFormatError, self).__init__(message)


class NotOfFormat(MalformedLog):
    """A file found by its name that turns out not to be a log of the format at all.

    It is skipped with the reason but does not count as failed (a stray ``config.json`` beside
    inspect_ai's ``.json`` logs is not a damaged log).
    """


class CorruptStoreError(FileFormatError):
    """A file of the store is missing, damaged or inconsistent with the manifest.

    ``path`` names the (first) file; the message names every such file found and what was
    expected. ``tumorboard store check STORE --repair`` (:meth:`Store.check`) repairs what can
    be repaired.
    """


class PageChecksumError(InvalidArgumentError):
    """A Parquet page whose bytes do not match its header's CRC, or whose header does not parse.

    Internal to the store's checks (``tumorboard.traj._pages``), which turn it into a
    :class:`CorruptStoreError` naming the part.
    """


# --- other errors of the domain packages ---------------------------------------------------------


class ItemConflictError(InvalidArgumentError):
    """A re-import would replace stored items with records of another question.

    Raised before anything is written; ``replace=True`` (``--replace``) replaces them and lists
    them in the report's warnings.
    """


class StoreVersionError(InvalidArgumentError):
    """The store was written by a newer schema version than this tumorboard reads."""


# --- warnings ------------------------------------------------------------------------------------


class TumorboardWarning(UserWarning):
    """Base class of every warning tumorboard emits.

    Filter it to silence or escalate all of them at once
    (``warnings.simplefilter("error", TumorboardWarning)``).
    """


class StrayPartWarning(TumorboardWarning):
    """A part file in a store's table folder that no commit lists: it is ignored."""


class RandomWeightsWarning(TumorboardWarning):
    """A model was built without weights: its parameters are random.

    Its outputs carry no meaning (fine for tests, demos and benchmarks of speed).
    """
