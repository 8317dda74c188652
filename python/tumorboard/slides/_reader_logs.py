"""The third-party slide readers' log records: counted per slide and reported once.

While a slide is opened or read, the records of tifffile, tiffslide and their stack are counted
into the slide's :class:`_ReaderProblems` and reported as one ``RuntimeWarning`` naming the file
(:func:`_quiet_reader` wraps the read methods); :func:`_quiet_tifffile` silences tifffile while
``reader="auto"`` probes a file.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._base import Slide


class _ReaderProblems:
    """How many log records a slide's third-party reader emitted, and the first of them."""

    def __init__(self) -> None:
        self.count = 0
        self.first: str | None = None
        self.reported = False

    def add(self, message: str) -> None:
        """Count one record (the first is kept for the report)."""
        self.count += 1
        if self.first is None:
            self.first = message.splitlines()[0][:300] if message else ""


#: Loggers of the third-party readers. On a damaged file tifffile logs one line per bad tag or
#: page (hundreds for one file), and tiffslide's fsspec/asyncio stack logs tracebacks; while a
#: slide is being opened or read their records are counted instead and reported once, as one
#: warning naming the file (a file that cannot be read is reported by its SlideError).
_READER_LOGGERS = ("tifffile", "tiffslide", "asyncio", "fsspec", "zarr")
_LOG_LOCAL = threading.local()
#: The sinks of the reads in progress (id -> [sink, number of threads using it]).
_ACTIVE_SINKS: dict[int, list[Any]] = {}
_ACTIVE_LOCK = threading.Lock()


class _ReaderLogFilter(logging.Filter):
    """Route reader log records of threads that read a slide to that slide's problem count."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(_TIFFFILE_QUIET.local, "depth", 0):
            return False  # auto's probe of the file: not the reader's business
        sink = getattr(_LOG_LOCAL, "sink", None)
        if sink is None and record.name.split(".")[0] in ("asyncio", "fsspec"):
            # fsspec runs its event loop on a thread of its own: charge the slide being read
            with _ACTIVE_LOCK:
                sink = next((entry[0] for entry in _ACTIVE_SINKS.values()), None)
        if sink is None:
            return True
        sink.add(record.getMessage())
        return False


_READER_FILTER = _ReaderLogFilter()
_FILTERED_LOGGERS = [0]  # how many loggers existed when the filter was last attached


def _attach_reader_filter() -> None:
    """Attach the filter to the readers' loggers and to every child logger they created.

    A logger's filters do not apply to records of its children (``zarr.core.sync`` propagates
    past ``zarr``'s filter), so each existing child gets the filter too; the walk runs only
    when loggers were added since the last one (``addFilter`` ignores a filter it has).
    """
    registry = logging.root.manager.loggerDict
    if len(registry) == _FILTERED_LOGGERS[0]:
        return
    for name in _READER_LOGGERS:
        logging.getLogger(name).addFilter(_READER_FILTER)
    for name, logger in list(registry.items()):
        if isinstance(logger, logging.Logger) and name.split(".")[0] in _READER_LOGGERS:
            logger.addFilter(_READER_FILTER)
    _FILTERED_LOGGERS[0] = len(registry)


_attach_reader_filter()


@contextlib.contextmanager
def _collect_reader_logs(sink: _ReaderProblems) -> Iterator[None]:
    """Count the reader log records of this thread (and of fsspec's loop) into ``sink``."""
    _attach_reader_filter()
    previous = getattr(_LOG_LOCAL, "sink", None)
    _LOG_LOCAL.sink = sink
    key = id(sink)
    with _ACTIVE_LOCK:
        _ACTIVE_SINKS.setdefault(key, [sink, 0])[1] += 1
    try:
        yield
    finally:
        _LOG_LOCAL.sink = previous
        with _ACTIVE_LOCK:
            entry = _ACTIVE_SINKS[key]
            entry[1] -= 1
            if entry[1] == 0:
                del _ACTIVE_SINKS[key]


def _report_problems(path: Path, reader: str, sink: _ReaderProblems) -> None:
    """Warn once per slide that its reader complained about the file while reading it."""
    if sink.count and not sink.reported:
        sink.reported = True
        warnings.warn(
            f"{path}: the {reader} reader reported {sink.count} problem(s) with this file "
            f"(first: {sink.first}); parts of it may be damaged",
            RuntimeWarning,
            stacklevel=3,
        )


def _quiet_reader(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run a read method with the reader's log records counted and reported once."""

    @functools.wraps(method)
    def wrapper(self: Slide, *args: Any, **kwargs: Any) -> Any:
        if getattr(_LOG_LOCAL, "sink", None) is not None:  # nested in another read
            return method(self, *args, **kwargs)
        with _collect_reader_logs(self._problems):
            out = method(self, *args, **kwargs)
        _report_problems(self.path, self.reader, self._problems)
        return out

    return wrapper


class _ThreadQuiet(logging.Filter):
    """Drop log records of the current thread while it is inside :func:`_quiet_tifffile`."""

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(self.local, "depth", 0)


_TIFFFILE_QUIET = _ThreadQuiet()
_TIFFFILE_QUIET_LOCK = threading.Lock()


@contextlib.contextmanager
def _quiet_tifffile() -> Iterator[None]:
    """Silence tifffile's warnings about a file in this thread (auto's probe of the file).

    A file that is not for the direct reader is OpenSlide's to report; the probe stays quiet.
    """
    logger = logging.getLogger("tifffile")
    with _TIFFFILE_QUIET_LOCK:
        if _TIFFFILE_QUIET not in logger.filters:
            logger.addFilter(_TIFFFILE_QUIET)
    local = _TIFFFILE_QUIET.local
    local.depth = getattr(local, "depth", 0) + 1
    try:
        yield
    finally:
        local.depth -= 1
