"""Atomic file writes: one temporary-name scheme and one context manager for the whole package.

Every file tumorboard writes for others to read (store parts and manifests, coords and features
files, segmentation GeoJSON, exported ONNX graphs, reports) goes through :func:`atomic_path`: the
content is written under a temporary name in the target's own directory and renamed over the
target only once complete. The rename is ``os.replace``, which is atomic within one filesystem
(POSIX, IEEE Std 1003.1-2017, ``rename()``: "If the link named by the new argument exists, it
shall be removed and old renamed to new [...] there shall be no point at which a link named new
does not exist"), so a reader sees either the old file or the whole new one, never a part.

The one temporary-name scheme is ``.{name}.{pid}.{token}.tmp``: hidden (a leading dot), in the
target's directory (same filesystem), naming the target ``name``, the writing process ``pid``
and 8 random hex digits ``token``. Listings skip these names (:func:`is_temp_name`); files left
by a killed writer are found and removed with :func:`temp_files` and :func:`remove_temp_files`.

Permissions. The temporary file is created private to its owner (mode ``0o600``, as
``tempfile.mkstemp`` creates its files), so a half-written file is never readable by others.
Before the rename it gets the mode the user expects of a file they asked for: the mode of the
file it replaces, when there is one (as ``sed -i`` and editors keep it), else ``0o666 & ~umask``,
the mode ``open()`` would give a new file (0644 under the usual umask 022; POSIX,
IEEE Std 1003.1-2017, ``umask()``: "the file permission bits [...] of the mode argument [...] are
cleared"). The umask is read from ``/proc/self/status`` where the kernel reports it (Linux 4.7
and later), which changes nothing; elsewhere ``os.umask`` is set and restored under a lock.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_path", "current_umask", "is_temp_name", "remove_temp_files", "temp_files"]

_TEMP_RE = re.compile(r"^\.(?P<target>.+)\.(?P<pid>[0-9]+)\.(?P<token>[0-9a-f]{8})\.tmp$", re.S)
_UMASK_LOCK = threading.Lock()
_PRIVATE = 0o600


def current_umask() -> int:
    """Return the process's file mode creation mask without changing it for other threads.

    Returns
    -------
    int
        The umask, e.g. ``0o022``.
    """
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:  # no reader of the umask alone: set it and put it back at once
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _final_mode(target: Path) -> int:
    """Return the permission bits a finished file gets: the replaced file's, else the umask's."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        return 0o666 & ~current_umask()


def _new_temp(target: Path) -> Path:
    """Create an empty, uniquely named temporary sibling of ``target`` and return its path.

    Parameters
    ----------
    target : pathlib.Path
        The file the temporary file will be renamed to.

    Returns
    -------
    pathlib.Path
        ``{target.parent}/.{target.name}.{pid}.{token}.tmp``, created exclusively (``O_EXCL``),
        so two writers never share a temporary file, and private to its owner (mode 0600).
    """
    while True:
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _PRIVATE)
        except FileExistsError:  # pragma: no cover - 2**32 tokens per process and target
            continue
        os.close(fd)
        return tmp


def _fsync(path: Path, *, directory: bool = False) -> None:
    """Flush a file's (or a directory's) data and metadata to stable storage.

    Parameters
    ----------
    path : pathlib.Path
        The file or directory.
    directory : bool, default False
        Open ``path`` as a directory (after a rename, the directory entry is what must reach the
        disk). Platforms that cannot open directories skip this silently.
    """
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    try:
        fd = os.open(path, flags)
    except OSError:  # directories cannot be opened on some platforms
        if directory:
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not directory:
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, fsync: bool = False) -> Iterator[Path]:
    """Yield a temporary path to write; rename it over ``path`` when the block succeeds.

    The temporary file is created empty and private (mode 0600) in ``path``'s directory under
    the package's one temporary-name scheme (module docstring). When the ``with`` block ends
    normally it gets the mode of the file it replaces, or ``0o666 & ~umask`` for a new file
    (0644 under the usual umask), and replaces ``path`` (``os.replace``: an existing file is
    swapped atomically, readers never see a partial file). When the block raises anything,
    ``KeyboardInterrupt`` included, or the rename fails, the temporary file is removed, ``path``
    is left as it was, and the exception propagates.

    Parameters
    ----------
    path : str or os.PathLike
        The target file. Its directory must exist.
    fsync : bool, default False
        Flush the written file to stable storage before the rename and the directory after it,
        so the new content survives a power loss (not only a crash of the process). Writers that
        promise durability (the trajectory store by default) set it; it costs two ``fsync``
        calls per file.

    Yields
    ------
    pathlib.Path
        The temporary path to write the content to (the file exists, is empty and is private
        to its owner; writers may truncate or replace it).

    Raises
    ------
    OSError
        The temporary file cannot be created (e.g. the directory is missing or read-only), or
        the rename fails; nothing is left behind.

    Examples
    --------
    >>> with atomic_path("report.md") as tmp:  # doctest: +SKIP
    ...     tmp.write_text("# Report", encoding="utf-8")
    """
    target = Path(path)
    tmp = _new_temp(target)
    try:
        yield tmp
        with contextlib.suppress(OSError):  # filesystems without modes (FAT, some mounts)
            os.chmod(tmp, _final_mode(target))
        if fsync:
            _fsync(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    if fsync:
        _fsync(target.parent, directory=True)


def is_temp_name(name: str) -> bool:
    """Tell whether a file name is a temporary file of :func:`atomic_path`.

    Parameters
    ----------
    name : str
        A file name (no directory).

    Returns
    -------
    bool
        True for names of the form ``.{target}.{pid}.{token}.tmp``.
    """
    return _TEMP_RE.match(name) is not None


def temp_files(directory: str | os.PathLike[str], *, target: str | None = None) -> list[Path]:
    """List the temporary files of :func:`atomic_path` in a directory.

    Parameters
    ----------
    directory : str or os.PathLike
        The directory to list (missing: no files).
    target : str, optional
        Only the temporary files of the target with this file name (e.g. ``"case01.h5"``);
        all of them when None.

    Returns
    -------
    list of pathlib.Path
        The temporary files, sorted by name.
    """
    folder = Path(directory)
    if not folder.is_dir():
        return []
    found = []
    for p in folder.iterdir():
        m = _TEMP_RE.match(p.name)
        if m is not None and (target is None or m.group("target") == target):
            found.append(p)
    return sorted(found)


def remove_temp_files(
    directory: str | os.PathLike[str],
    *,
    target: str | None = None,
    min_age_s: float = 0.0,
    dead_only: bool = False,
) -> int:
    """Remove temporary files of :func:`atomic_path` left in a directory by killed writers.

    Parameters
    ----------
    directory : str or os.PathLike
        The directory to clean.
    target : str, optional
        Only the temporary files of the target with this file name; all of them when None.
    min_age_s : float, default 0.0
        Only files not modified for at least this many seconds, so that a concurrent writer's
        file in progress survives (the trajectory store uses an hour).
    dead_only : bool, default False
        Only files whose writing process (the ``pid`` in the name) no longer runs on this
        machine, so that another live process writing the same target keeps its file.

    Returns
    -------
    int
        The number of files removed (files that vanish or cannot be removed are skipped).
    """
    now = time.time()
    removed = 0
    for p in temp_files(directory, target=target):
        if dead_only and _writer_alive(p.name):
            continue
        with contextlib.suppress(OSError):
            if min_age_s <= 0 or now - p.stat().st_mtime >= min_age_s:
                p.unlink()
                removed += 1
    return removed


def _writer_alive(name: str) -> bool:
    """Tell whether the writer named in a temporary file name still runs (POSIX ``kill``)."""
    m = _TEMP_RE.match(name)
    if m is None:
        return False
    pid = int(m.group("pid"))
    if pid == os.getpid():
        return True  # this process's own file: it may be in progress in another thread
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # exists under another user, or unknowable: keep the file
    return True
