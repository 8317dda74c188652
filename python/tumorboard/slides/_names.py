"""Output names of slides: one rule for every file written per slide.

Every per-slide output (coords ``{name}_patches.h5``, tissue ``{name}.geojson``, features
``{name}.h5`` and ``{name}.parquet``) is named by :func:`slide_name`, and a collection is
planned once with :func:`plan_slide_names`: the first slide with a name keeps it, a later slide
with the same name is a duplicate (its outputs would overwrite the first one's) and is reported
failed by ``tumorboard tile``, ``embed_slides`` and its Ray executor alike.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PlannedSlide", "plan_slide_names", "slide_name"]

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
