"""Patch coordinate files in TRIDENT's and CLAM's HDF5 layouts.

Layouts as mahmoodlab/TRIDENT writes them (``trident/IO.py``, ``save_h5`` and the coords
attributes, and ``trident/Processor.py``, the folder names, @a91fa84) and as CLAM does
(mahmoodlab/CLAM ``wsi_core/WholeSlideImage.py``@53e2409).

TRIDENT (``{job}/{mag}x_{patch}px_{overlap}px_overlap/patches/{name}_patches.h5``): dataset
``coords`` int64 [N, 2] of level-0 (x, y), chunks (1, 2), maxshape (None, 2), with attributes
``patch_size``, ``patch_size_level0`` (= patch_size * level0_mag // target_mag),
``level0_magnification``, ``target_magnification``, ``overlap``, ``name``, ``savetodir``,
``level0_width``, ``level0_height`` (None stored as the string 'None', dicts as JSON).

CLAM (``patches/{slide}.h5``): ``coords`` int64 [N, 2] with ``patch_size``, ``patch_level``,
``downsample``, ``downsampled_level_dim``, ``level_dim``, ``name``, ``save_path``.

Files are written to a temporary name and renamed into place, so a file under the final name is
complete; :func:`coords_complete` also checks that it opens and has the layout. h5py comes with
the ``embed`` extra and is imported lazily.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._hdf5 import attr_from_hdf5, attr_to_hdf5
from .._io import atomic_path, remove_temp_files
from ..errors import CoordsFileError as CoordsFileError  # re-exported
from ..errors import InvalidArgumentError, MissingDependencyError

if TYPE_CHECKING:
    from ._grid import PatchGrid

TRIDENT_ATTRS = (
    "patch_size",
    "patch_size_level0",
    "level0_magnification",
    "target_magnification",
    "overlap",
    "name",
    "savetodir",
    "level0_width",
    "level0_height",
)
CLAM_ATTRS = ("patch_size", "patch_level")


def _h5py() -> Any:
    try:
        import h5py
    except ImportError as exc:
        raise MissingDependencyError.for_extra(
            "reading and writing coords files", package="h5py", extra="slides", cause=exc
        ) from exc
    return h5py


def _mag_label(mag: float) -> str:
    return f"{int(mag)}" if float(mag).is_integer() else f"{mag:g}"


def patch_dir(job_dir: str | os.PathLike[str], magnification: float, patch_size: int,
              overlap: int) -> Path:  # fmt: skip
    """Return TRIDENT's ``{job_dir}/{mag}x_{patch}px_{overlap}px_overlap`` folder."""
    return Path(job_dir) / f"{_mag_label(magnification)}x_{patch_size}px_{overlap}px_overlap"


def coords_path(
    job_dir: str | os.PathLike[str],
    name: str,
    *,
    magnification: float = 20,
    patch_size: int = 256,
    overlap: int = 0,
) -> Path:
    """Return where TRIDENT puts the coords of slide ``name``.

    That is ``{job_dir}/{mag}x_{patch}px_{overlap}px_overlap/patches/{name}_patches.h5``.
    """
    return patch_dir(job_dir, magnification, patch_size, overlap) / "patches" / f"{name}_patches.h5"


def write_coords(
    path: str | os.PathLike[str],
    grid: PatchGrid,
    *,
    savetodir: str | None = None,
    attrs: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``grid`` as a TRIDENT coords file at ``path`` (atomically) and return the path.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write.
    grid : PatchGrid
        The patches.
    savetodir : str or None, default None
        The ``savetodir`` attribute (default: the file's folder).
    attrs : Mapping of str to Any or None, default None
        More attributes of the ``coords`` dataset, stored after TRIDENT's (which they may not
        replace); ``tumorboard tile`` and ``embed_slides`` record how the coords were made.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    h5py = _h5py()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    coords = np.ascontiguousarray(grid.coords, dtype=np.int64).reshape(-1, 2)
    fixed = {
        "patch_size": int(grid.patch_size),
        "patch_size_level0": int(
            grid.patch_size * grid.level0_magnification // grid.target_magnification
        ),
        "level0_magnification": grid.level0_magnification,
        "target_magnification": grid.target_magnification,
        "overlap": int(grid.overlap),
        "name": grid.name,
        "savetodir": savetodir if savetodir is not None else str(p.parent),
        "level0_width": int(grid.level0_size[0]),
        "level0_height": int(grid.level0_size[1]),
    }
    clash = sorted(set(attrs or {}) & set(fixed))
    if clash:
        raise InvalidArgumentError(f"attrs: {clash} are TRIDENT's coords attributes")
    remove_temp_files(p.parent, target=p.name, dead_only=True)  # left by a killed run
    with atomic_path(p) as tmp, h5py.File(tmp, "w") as f:
        ds = f.create_dataset("coords", data=coords, chunks=(1, 2), maxshape=(None, 2))
        for k, v in {**fixed, **(attrs or {})}.items():
            ds.attrs[k] = attr_to_hdf5(v)
    return p


@dataclass(frozen=True, eq=False)
class CoordsFile:
    """A coords file read back.

    Attributes
    ----------
    coords : numpy.ndarray
        (N, 2) int64 top-left (x, y) in level-0 pixels.
    layout : {"trident", "clam"}
        The file's layout.
    attrs : dict
        All attributes of the ``coords`` dataset, decoded ('None' -> None, JSON -> dict).
    path : pathlib.Path
        The file.
    patch_size : int
        Patch side as stored (at the target magnification for TRIDENT, at ``patch_level`` for
        CLAM).
    patch_size_level0 : int
        Patch side in level-0 pixels.
    name : str
        The slide name (file stem without ``_patches`` when the attribute is missing).
    """

    coords: np.ndarray
    layout: str
    attrs: dict[str, Any]
    path: Path
    patch_size: int
    patch_size_level0: int
    name: str

    def __len__(self) -> int:
        return int(self.coords.shape[0])


def read_coords(path: str | os.PathLike[str]) -> CoordsFile:
    """Read a TRIDENT or CLAM coords file.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    CoordsFile
        The coordinates, layout and attributes.

    Raises
    ------
    CoordsFileError
        The file is missing, truncated or corrupt, has no (N, 2) ``coords`` dataset, or its
        attributes match neither layout.
    """
    h5py = _h5py()
    p = Path(path)
    if not p.is_file():
        raise CoordsFileError(p, "no such file")
    try:
        with h5py.File(p, "r") as f:
            if "coords" not in f:
                raise CoordsFileError(p, f"no 'coords' dataset (has {sorted(f.keys())})")
            ds = f["coords"]
            if ds.ndim != 2 or ds.shape[1] != 2:
                raise CoordsFileError(p, f"'coords': expected shape (N, 2), got {ds.shape}")
            coords = np.asarray(ds[...], dtype=np.int64)
            attrs = {k: attr_from_hdf5(v) for k, v in ds.attrs.items()}
    except CoordsFileError:
        raise
    except (OSError, KeyError, ValueError, RuntimeError) as exc:
        raise CoordsFileError(p, f"cannot read HDF5 file (truncated or corrupt?): {exc}") from exc
    stem = p.stem.removesuffix("_patches")
    if all(k in attrs for k in ("patch_size", "patch_size_level0")):
        layout = "trident"
        size0 = int(attrs["patch_size_level0"])
    elif all(k in attrs for k in CLAM_ATTRS):
        layout = "clam"
        # patches of patch_size pixels at patch_level (downsample), optionally read at
        # custom_downsample times that size and shrunk
        level_ds = attrs.get("downsample", 1)
        level_ds = level_ds[0] if isinstance(level_ds, (list, tuple)) else level_ds
        custom = attrs.get("custom_downsample") or 1
        size0 = int(round(int(attrs["patch_size"]) * float(level_ds) * float(custom)))
    else:
        raise CoordsFileError(
            p, f"attributes {sorted(attrs)} match neither the TRIDENT nor the CLAM layout"
        )
    name = attrs.get("name") or stem
    return CoordsFile(
        coords=coords,
        layout=layout,
        attrs=attrs,
        path=p,
        patch_size=int(attrs["patch_size"]),
        patch_size_level0=size0,
        name=str(name),
    )


def read_complete_coords(path: str | os.PathLike[str]) -> CoordsFile | None:
    """Return the coords file at ``path`` if it is a complete TRIDENT file, else None.

    Complete means readable with all of TRIDENT's attributes (what ``tumorboard tile`` resumes
    from); a missing, truncated, partial or foreign file gives None.
    """
    try:
        cf = read_coords(path)
    except CoordsFileError:
        return None
    return cf if cf.layout == "trident" and all(k in cf.attrs for k in TRIDENT_ATTRS) else None


def coords_complete(path: str | os.PathLike[str]) -> bool:
    """Return True when ``path`` is a complete TRIDENT coords file.

    Complete as :func:`read_complete_coords` defines it.
    """
    return read_complete_coords(path) is not None
