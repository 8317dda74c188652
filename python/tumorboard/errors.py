"""The exceptions tumorboard raises, under one documented base class.

Every error the package raises is a :class:`TumorboardError`, so a harness can catch everything
tumorboard refuses with one ``except`` clause, and each class also keeps the builtin parent that
says what kind of failure it is (``ValueError`` for bad input, ``TypeError`` for a wrong type,
``OSError`` for a file that cannot be read), so ``except ValueError`` keeps working. The pattern
follows polars' ``polars.exceptions`` (one module, one base, one map from the compiled core).

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

__all__ = [
    "ClusterError",
    "CoreError",
    "FileFormatError",
    "InvalidArgumentError",
    "InvalidTypeError",
    "MissingDependencyError",
    "MissingFileError",
    "NumericOverflowError",
    "StateError",
    "TumorboardError",
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
    """A file that cannot be read as what it should be; ``path`` names the file."""

    def __init__(self, path: str | os.PathLike[str], message: str) -> None:
        self.path = str(path)
        super().__init__(f"{self.path}: {message}")


class MissingFileError(TumorboardError, FileNotFoundError):
    """A file or folder that should exist and does not; the message names the path."""


class MissingDependencyError(TumorboardError, ImportError):
    """An optional dependency that a call needs is not installed.

    The message names the package and the extra that installs it (``pip install
    tumorboard[gpu]``, ``[embed]``, ``[slides]``, ``[dist]``).
    """


class StateError(TumorboardError, RuntimeError):
    """A call that the object's current state does not allow.

    For example a closed :class:`~tumorboard.traj.Recorder`, a detached adapter, or a store
    that another process is compacting.
    """


class ClusterError(TumorboardError, ConnectionError):
    """A Ray cluster that cannot be reached or joined."""


class NumericOverflowError(TumorboardError, OverflowError):
    """A result that does not fit its exact representation (e.g. 128-bit Poisson partial sums)."""
