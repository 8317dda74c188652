"""How a slide is tiled, as one options object shared by ``tumorboard tile`` and ``embed_slides``.

:class:`TilingOptions` holds every choice that decides a slide's patch coordinates
(magnification, patch size, overlap, tissue threshold, segmentation, resolution override) and the
ones that only decide how they are computed (reader, threads). It validates itself once, names
TRIDENT's output folder for the choice, tiles an open slide (tissue GeoJSON, patch grid, coords
file) and tells whether outputs already on disk were made with the same choices.

Outputs follow TRIDENT's job layout (mahmoodlab/TRIDENT ``trident/Processor.py``@a91fa84):
``{job}/{mag}x_{patch}px_{overlap}px_overlap/patches/{name}_patches.h5`` and
``{job}/contours_geojson/{name}.geojson``. Each coords file also records, beside TRIDENT's
attributes, how it was made: ``segmentation`` (the parameters and the thumbnail resolution, as
JSON, or ``"None"``), ``min_tissue``, ``mpp_override``, and the slide it came from
(``source_path``, ``source_bytes``). A rerun uses a stored output only when these match; a
mismatch is refused with both values named, never silently reused or overwritten.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgumentError, InvalidTypeError
from ._grid import PatchGrid, patch_grid
from ._h5 import CoordsFile, coords_path, patch_dir, read_complete_coords, write_coords
from ._readers import open as open_slide
from ._segment import (
    DEFAULT_PRESET,
    DEFAULT_SEGMENTATION_MPP,
    PRESETS,
    SegmentationOptions,
    TissueMask,
    segment_tissue,
)
from ._validate import READERS

if TYPE_CHECKING:
    from ._readers import Slide

__all__ = ["TiledSlide", "TilingOptions"]


#: The coords attributes a stored output must match (TRIDENT's first, then tumorboard's).
_COMPARED = (
    "target_magnification",
    "patch_size",
    "overlap",
    "segmentation",
    "min_tissue",
    "mpp_override",
)


def _number(value: Any, name: str, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(f"{name}: expected a number, got {value!r}")
    v = float(value)
    if not (v > 0 if positive else v >= 0) or v != v or v == float("inf"):
        raise InvalidArgumentError(
            f"{name}: expected a finite number {'> 0' if positive else '>= 0'}, got {value!r}"
        )
    return v


def _int(value: Any, name: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgumentError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return int(value)


def _fmt(value: Any) -> str:
    return "not recorded" if value is _NOT_RECORDED else repr(value)


_NOT_RECORDED = object()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _differences(stored: Mapping[str, Any], expected: Mapping[str, Any]) -> list[str]:
    out = []
    for key, want in expected.items():
        have = stored.get(key, _NOT_RECORDED)
        if isinstance(want, Mapping) and isinstance(have, Mapping):
            for sub in sorted(set(want) | set(have)):
                a, b = have.get(sub, _NOT_RECORDED), want.get(sub, _NOT_RECORDED)
                if a is _NOT_RECORDED or b is _NOT_RECORDED or not _same(a, b):
                    out.append(f"{key}.{sub} {_fmt(a)} (stored) vs {_fmt(b)} (this run)")
        elif have is _NOT_RECORDED or not _same(have, want):
            out.append(f"{key} {_fmt(have)} (stored) vs {_fmt(want)} (this run)")
    return out


@dataclass(frozen=True, eq=False)
class TiledSlide:
    """The outcome of :meth:`TilingOptions.tile` for one slide.

    Attributes
    ----------
    name : str
        The slide's output name.
    grid : PatchGrid
        The kept patches.
    tissue : TissueMask or None
        The tissue mask (None without segmentation).
    coords_path : pathlib.Path
        The coords file written.
    geojson_path : pathlib.Path or None
        The tissue contours written (None without segmentation).
    """

    name: str
    grid: PatchGrid
    tissue: TissueMask | None
    coords_path: Path
    geojson_path: Path | None

    @property
    def no_tissue(self) -> str | None:
        """Say why the slide gave no patch, or None when it gave some."""
        return no_tissue_reason(self.tissue, self.grid)


def no_tissue_reason(tissue: TissueMask | None, grid: PatchGrid) -> str | None:
    """Say why a slide gave no patch (largest region and a hint), or None when it gave some.

    Parameters
    ----------
    tissue : TissueMask or None
        The slide's tissue mask (None without segmentation).
    grid : PatchGrid
        Its patch grid.

    Returns
    -------
    str or None
        The reason, or None for a grid with patches.
    """
    if len(grid):
        return None
    if tissue is None:
        w, h = grid.level0_size
        return f"no patch fits the {w}x{h} px slide at {grid.target_magnification:g}x"
    hint = "try --preset bwh_biopsy, a smaller --seg-mpp, or --no-seg to keep every patch"
    if tissue.mask.any():
        return (
            f"tissue covers {100 * tissue.tissue_fraction:.2f}% of the slide but no patch reaches "
            f"min_tissue {grid.min_tissue:g}; lower --min-tissue"
        )
    if tissue.empty and tissue.empty_reason:
        return f"{tissue.empty_reason}; --no-seg keeps every grid patch"
    largest = tissue.largest_region_um2
    n = tissue.stats.get("n_regions")
    found = f"{n} region(s) found, none kept by the area filter" if n else "no region found"
    if largest is not None:
        found += f"; the largest is {float(largest) / 1e6:.4f} mm^2"
    return f"{found}; {hint}"


@dataclass(frozen=True)
class TilingOptions:
    """How slides are tiled: one validated set of options for ``tile`` and ``embed``.

    Parameters
    ----------
    magnification : float, default 20
        Target magnification (TRIDENT's patcher); at most the slide's own.
    patch_size : int, default 256
        Patch side in pixels at that magnification.
    overlap : int, default 0
        Overlap of neighbouring patches in pixels at that magnification, below ``patch_size``.
    min_tissue : float, default 0.0
        Tissue fraction a patch needs, in [0, 1] (0 keeps any overlap with tissue).
    segmentation : str or SegmentationOptions or None, default DEFAULT_PRESET
        A preset name (:data:`~tumorboard.slides.PRESETS`), explicit parameters, or None to keep
        every grid position.
    seg_mpp : float, default 8.0
        Resolution of the segmentation thumbnail in um/px (8 = 1.25x, TRIDENT's).
    mpp : float or None, default None
        Level-0 um/px overriding the file's (needed for plain images).
    reader : str, default "auto"
        The slide reader (:data:`READERS`).
    threads : int or None, default None
        Threads for segmentation, the grid and reading patches (None: all cores).

    Raises
    ------
    InvalidArgumentError
        A value out of range, named with the option and the value.
    InvalidTypeError
        A value of the wrong type.
    """

    magnification: float = 20.0
    patch_size: int = 256
    overlap: int = 0
    min_tissue: float = 0.0
    segmentation: str | SegmentationOptions | None = DEFAULT_PRESET
    seg_mpp: float = DEFAULT_SEGMENTATION_MPP
    mpp: float | None = None
    reader: str = "auto"
    threads: int | None = None

    def __post_init__(self) -> None:
        put = object.__setattr__
        put(self, "magnification", _number(self.magnification, "magnification", positive=True))
        put(self, "patch_size", _int(self.patch_size, "patch_size", minimum=1))
        put(self, "overlap", _int(self.overlap, "overlap", minimum=0))
        if self.overlap >= self.patch_size:
            raise InvalidArgumentError(
                f"overlap: expected less than patch_size {self.patch_size}, got {self.overlap}"
            )
        tissue = _number(self.min_tissue, "min_tissue", positive=False)
        if tissue > 1:
            raise InvalidArgumentError(f"min_tissue: expected a fraction in [0, 1], got {tissue}")
        put(self, "min_tissue", tissue)
        seg = self.segmentation
        if isinstance(seg, str) and seg not in PRESETS:
            raise InvalidArgumentError(
                f"segmentation: unknown preset {seg!r}; choose one of {', '.join(sorted(PRESETS))}"
            )
        if seg is not None and not isinstance(seg, (str, SegmentationOptions)):
            raise InvalidTypeError(
                "segmentation: expected a preset name, SegmentationOptions or None, got "
                f"{type(seg).__name__}"
            )
        put(self, "seg_mpp", _number(self.seg_mpp, "seg_mpp", positive=True))
        if self.mpp is not None:
            put(self, "mpp", _number(self.mpp, "mpp", positive=True))
        if self.reader not in READERS:
            raise InvalidArgumentError(
                f"reader: expected one of {', '.join(READERS)}, got {self.reader!r}"
            )
        if self.threads is not None:
            put(self, "threads", _int(self.threads, "threads", minimum=1))

    @property
    def params(self) -> SegmentationOptions | None:
        """The segmentation parameters (the preset's for a name), or None without segmentation."""
        seg = self.segmentation
        return PRESETS[seg] if isinstance(seg, str) else seg

    def job_dir(self, out: str | os.PathLike[str]) -> Path:
        """Return TRIDENT's ``{out}/{mag}x_{patch}px_{overlap}px_overlap`` folder for these options.

        Parameters
        ----------
        out : str or os.PathLike
            The job folder.

        Returns
        -------
        pathlib.Path
            The folder of this magnification, patch size and overlap.
        """
        return patch_dir(out, self.magnification, self.patch_size, self.overlap)

    def coords_path(self, out: str | os.PathLike[str], name: str) -> Path:
        """Return where the coords of slide ``name`` go under the job folder ``out``.

        Parameters
        ----------
        out : str or os.PathLike
            The job folder.
        name : str
            The slide's output name.

        Returns
        -------
        pathlib.Path
            ``{job_dir}/patches/{name}_patches.h5``.
        """
        return coords_path(
            out,
            name,
            magnification=self.magnification,
            patch_size=self.patch_size,
            overlap=self.overlap,
        )

    def expected_attrs(self) -> dict[str, Any]:
        """Return the coords attributes an output made with these options has.

        Returns
        -------
        dict
            ``target_magnification``, ``patch_size``, ``overlap``, ``segmentation`` (the
            parameters and ``seg_mpp``, or None), ``min_tissue`` and ``mpp_override``.
        """
        params = self.params
        seg = None
        if params is not None:
            seg = {**dataclasses.asdict(params), "seg_mpp": self.seg_mpp}
        return {
            "target_magnification": self.magnification,
            "patch_size": self.patch_size,
            "overlap": self.overlap,
            "segmentation": seg,
            "min_tissue": self.min_tissue,
            "mpp_override": self.mpp,
        }

    def record(self, source: str | os.PathLike[str]) -> dict[str, Any]:
        """Return the attributes tumorboard adds to a coords file made from slide ``source``.

        Parameters
        ----------
        source : str or os.PathLike
            The slide file.

        Returns
        -------
        dict
            ``segmentation`` (with the preset's name under ``preset``), ``min_tissue``,
            ``mpp_override``, ``source_path`` (absolute) and ``source_bytes``.
        """
        exp = self.expected_attrs()
        seg = exp["segmentation"]
        if seg is not None:
            preset = self.segmentation if isinstance(self.segmentation, str) else None
            seg = {**seg, "preset": preset}
        p = Path(source)
        return {
            "segmentation": seg,
            "min_tissue": self.min_tissue,
            "mpp_override": self.mpp,
            "source_path": os.path.abspath(p),
            "source_bytes": p.stat().st_size,
        }

    def mismatch(
        self,
        path: str | os.PathLike[str],
        stored: Mapping[str, Any],
        source: str | os.PathLike[str],
        *,
        extra: Mapping[str, Any] | None = None,
    ) -> str | None:
        """Say why a stored output may not be reused for slide ``source``, or None when it may.

        Parameters
        ----------
        path : str or os.PathLike
            The stored file (named in the message).
        stored : Mapping of str to Any
            Its attributes (coords attributes, plus those of ``extra``).
        source : str or os.PathLike
            The slide of this run.
        extra : Mapping of str to Any or None, default None
            More attributes that must match (e.g. ``encoder`` and ``weights_fingerprint``).

        Returns
        -------
        str or None
            Both values of every attribute that differs, or the two slides when the stored output
            was made from another slide of the same name; None when everything matches.
        """
        src = Path(source)
        stored_bytes = stored.get("source_bytes")
        size = src.stat().st_size if src.exists() else None
        if stored_bytes is not None and size is not None and int(stored_bytes) != size:
            was = stored.get("source_path")
            if was == os.path.abspath(src):
                what = f"{src} changed since ({stored_bytes} bytes then, {size} now)"
            else:
                what = (
                    f"it was made from {was} ({stored_bytes} bytes), not from {src} "
                    f"({size} bytes), which has the same output name"
                )
            return f"{path}: {what}; rename one of the slides, use another --out, or --force"
        expected = self.expected_attrs()
        stored_view = dict(stored)
        if isinstance(stored_view.get("segmentation"), Mapping):
            stored_view["segmentation"] = {
                k: v for k, v in stored_view["segmentation"].items() if k != "preset"
            }
        diffs = _differences(stored_view, {**expected, **(extra or {})})
        if not diffs:
            return None
        return (
            f"{path} was made with other settings: {'; '.join(diffs)}. Pass --force "
            "(force=True) to redo it, or write to another --out"
        )

    def stored_coords(
        self, out: str | os.PathLike[str], name: str, source: str | os.PathLike[str]
    ) -> tuple[CoordsFile | None, str | None]:
        """Return the complete coords file of slide ``name`` under ``out`` and why not to reuse it.

        Parameters
        ----------
        out : str or os.PathLike
            The job folder.
        name : str
            The slide's output name.
        source : str or os.PathLike
            The slide of this run.

        Returns
        -------
        tuple
            ``(coords, mismatch)``: the complete TRIDENT coords file with at least one patch
            (None when there is none: a file of a slide without tissue is always redone) and
            :meth:`mismatch`'s message for it (None when it matches these options).
        """
        path = self.coords_path(out, name)
        cf = read_complete_coords(path)
        if cf is None or len(cf) == 0:
            return None, None
        return cf, self.mismatch(path, cf.attrs, source)

    def open(self, path: str | os.PathLike[str]) -> Slide:
        """Open a slide with these options' reader and resolution override.

        Parameters
        ----------
        path : str or os.PathLike
            The slide file.

        Returns
        -------
        Slide
            The open slide (a context manager).
        """
        return open_slide(path, mpp=self.mpp, reader=self.reader)  # type: ignore[arg-type]

    def tile(self, slide: Slide, out: str | os.PathLike[str], *, source: Path) -> TiledSlide:
        """Segment an open slide, build its patch grid and write its coords file and contours.

        Parameters
        ----------
        slide : Slide
            The open slide.
        out : str or os.PathLike
            The job folder: coords go to :meth:`coords_path`, the tissue contours to
            ``{out}/contours_geojson/{name}.geojson``.
        source : pathlib.Path
            The slide file (recorded in the coords file).

        Returns
        -------
        TiledSlide
            The grid, the tissue mask and the files written.
        """
        name = slide.name
        tissue = None
        geojson = None
        seg = self.segmentation
        if seg is not None:
            by = {"preset": seg} if isinstance(seg, str) else {"params": seg}
            tissue = segment_tissue(slide, **by, seg_mpp=self.seg_mpp, threads=self.threads)
            geojson = tissue.write_geojson(Path(out) / "contours_geojson" / f"{name}.geojson")
        grid = patch_grid(
            slide,
            tissue,
            magnification=self.magnification,
            patch_size=self.patch_size,
            overlap=self.overlap,
            min_tissue=self.min_tissue,
            threads=self.threads,
        )
        path = write_coords(self.coords_path(out, name), grid, attrs=self.record(source))
        return TiledSlide(name, grid, tissue, path, geojson)
