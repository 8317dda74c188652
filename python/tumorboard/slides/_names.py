"""Slide collections: which files are the slides, and one naming rule for their outputs.

:func:`collect_slides` turns what a user gives (slide files, folders of slides, a text file
listing slides) into the slide files and the inputs that are missing, before any work starts.
Every per-slide output (coords ``{name}_patches.h5``, tissue ``{name}.geojson``, features
``{name}.h5`` and ``{name}.parquet``) is named by :func:`slide_name`, and a collection is
planned once with :func:`plan_slide_names`: the first slide with a name keeps it, a later slide
with the same name is a duplicate (its outputs would overwrite the first one's) and is reported
failed by ``tumorboard tile``, ``embed_slides`` and its Ray executor alike.
The slide and image extensions a folder is searched for (:data:`SLIDE_EXTENSIONS`,
:data:`IMAGE_EXTENSIONS`) live here too, so that the readers depend on this module and not
the other way round.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import MissingFileError

__all__ = [
    "IMAGE_EXTENSIONS",
    "SLIDE_EXTENSIONS",
    "CollectedSlides",
    "PlannedSlide",
    "collect_slides",
    "plan_slide_names",
    "slide_name",
]

#: Extensions opened as plain images (one level, mpp given by the user).
IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp"})
#: Extensions tried as whole-slide images (OpenSlide first, tiffslide as the fallback).
SLIDE_EXTENSIONS = frozenset(
    {".svs", ".ndpi", ".mrxs", ".scn", ".tif", ".tiff", ".vms", ".vmu", ".bif", ".svslide"}
)

#: Multi-dot extensions that count as one (the OME-TIFF specification's ``*.ome.tif(f)`` files).
_COMPOUND_SUFFIXES = (".ome.tiff", ".ome.tif")


def slide_name(path: str | os.PathLike[str]) -> str:
    """Name the outputs of a slide file: its file name without the extension.

    Parameters
    ----------
    path : str or os.PathLike
        The slide file.

    Returns
    -------
    str
        The file name without its extension; ``.ome.tiff`` and ``.ome.tif`` count as one
        extension (``case.ome.tiff`` -> ``case``).
    """
    p = Path(path)
    lower = p.name.lower()
    for suffix in _COMPOUND_SUFFIXES:
        if lower.endswith(suffix) and len(p.name) > len(suffix):
            return p.name[: -len(suffix)]
    return p.stem


@dataclass(frozen=True)
class PlannedSlide:
    """One slide of a planned collection.

    Attributes
    ----------
    index : int
        Its position in the input.
    path : pathlib.Path
        The slide file.
    name : str
        Its output name (:func:`slide_name`).
    duplicate_of : pathlib.Path or None
        The earlier slide that has the same name (this one is then not processed), else None.
    """

    index: int
    path: Path
    name: str
    duplicate_of: Path | None = None

    @property
    def error(self) -> str | None:
        """Why the slide is not processed (a duplicate name), or None when it is."""
        if self.duplicate_of is None:
            return None
        return (
            f"duplicate slide name {self.name!r} (also {self.duplicate_of}); "
            "outputs are named by slide"
        )


def plan_slide_names(paths: Iterable[str | os.PathLike[str]]) -> tuple[PlannedSlide, ...]:
    """Name every slide of a collection and mark the duplicates.

    Parameters
    ----------
    paths : iterable of str or os.PathLike
        The slide files, in processing order.

    Returns
    -------
    tuple of PlannedSlide
        One entry per path, in input order; a slide whose name an earlier slide already has
        gets ``duplicate_of`` set (and an ``error``).
    """
    seen: dict[str, Path] = {}
    plan = []
    for i, raw in enumerate(paths):
        p = Path(raw)
        name = slide_name(p)
        first = seen.setdefault(name, p)
        plan.append(PlannedSlide(i, p, name, None if first is p else first))
    return tuple(plan)


@dataclass(frozen=True)
class CollectedSlides:
    """The slide files of a collection, and the inputs that gave none, in input order.

    Attributes
    ----------
    items : tuple of tuple of (pathlib.Path, str or None)
        Every slide file with None, and every input that is not there or holds no slide with
        the reason ("no such file", "folder holds no slide files"), in input order (a folder's
        files sorted by name).
    """

    items: tuple[tuple[Path, str | None], ...]

    @property
    def files(self) -> tuple[Path, ...]:
        """The slide files, in input order."""
        return tuple(p for p, why in self.items if why is None)

    @property
    def missing(self) -> tuple[tuple[Path, str], ...]:
        """The inputs that gave no slide file, each with its reason."""
        return tuple((p, why) for p, why in self.items if why is not None)


def _slide_list(path: Path) -> list[Path]:
    if not path.is_file():
        raise MissingFileError(f"--slide-list: no such file: {path}")
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = line.strip()
        if entry and not entry.startswith("#"):
            p = Path(entry).expanduser()
            out.append(p if p.is_absolute() else path.parent / p)
    return out


def collect_slides(
    inputs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] = (),
    *,
    slide_list: str | os.PathLike[str] | None = None,
) -> CollectedSlides:
    """Find the slide files of a collection and the inputs that are missing.

    Parameters
    ----------
    inputs : path or iterable of paths, default ()
        Slide files and folders of slides. A folder contributes its files (not its
        subfolders) whose extension is a slide or image extension
        (:data:`~tumorboard.slides.SLIDE_EXTENSIONS`, :data:`~tumorboard.slides.IMAGE_EXTENSIONS`),
        sorted by name; a file is taken as given, whatever its extension.
    slide_list : path or None, default None
        A text file with one slide file or folder per line (blank lines and lines starting
        with ``#`` are skipped; relative paths are relative to the list's folder), read after
        ``inputs``.

    Returns
    -------
    CollectedSlides
        The slide files and the missing inputs, each with its reason.

    Raises
    ------
    MissingFileError
        If ``slide_list`` is given and does not exist.
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    paths = [Path(p) for p in inputs]
    if slide_list is not None:
        paths += _slide_list(Path(slide_list))
    exts = SLIDE_EXTENSIONS | IMAGE_EXTENSIONS
    items: list[tuple[Path, str | None]] = []
    for p in paths:
        if p.is_dir():
            found = sorted(
                q
                for q in p.iterdir()
                if q.is_file() and not q.name.startswith(".") and q.suffix.lower() in exts
            )
            if not found:
                items.append((p, "folder holds no slide files"))
            items.extend((q, None) for q in found)
        elif p.exists():
            items.append((p, None))
        else:
            items.append((p, "no such file"))
    return CollectedSlides(tuple(items))
