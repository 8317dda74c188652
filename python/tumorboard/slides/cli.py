"""``tumorboard tile``: tissue segmentation and patch coordinates for a set of slides.

For each slide: segment tissue on a 1.25x thumbnail (CLAM preset), write the tissue polygons to
``{out}/contours_geojson/{name}.geojson``, build the patch grid and write TRIDENT's coords file
``{out}/{mag}x_{patch}px_{overlap}px_overlap/patches/{name}_patches.h5``. A slide whose coords
file exists and is complete is skipped (resume); an incomplete one is redone. A slide that fails
(corrupt, unreadable, no resolution) is reported and the others go on; the per-slide report is
printed and saved as ``tile_report.json`` next to ``patches/``. Exit status 1 when any slide
failed.

``python -m tumorboard.slides.cli tile ...`` runs it without the main ``tumorboard`` command.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .._args import fraction, nonnegative_int, positive_float, positive_int
from .._io import atomic_path
from .._progress import SlideProgress
from ..errors import InvalidArgumentError
from ._names import plan_slide_names, slide_name


def add_tile_parser(subparsers: Any) -> None:
    """Add the ``tile`` verb to an ``argparse`` subparsers object."""
    from ._segment import DEFAULT_SEGMENTATION_MPP, PRESETS

    p = subparsers.add_parser(
        "tile",
        help="segment tissue and write patch coordinates (TRIDENT coords .h5) for slides",
        description="Segment tissue on a 1.25x thumbnail and write TRIDENT coords .h5 files "
        "(and tissue GeoJSON) for each slide. Complete slides are skipped, failed ones reported.",
    )
    p.add_argument("slides", nargs="+", metavar="SLIDES", help="slide files or folders of slides")
    p.add_argument("--out", required=True, metavar="DIR", help="job folder for the outputs")
    p.add_argument(
        "--mag", type=positive_float, default=20, help="target magnification (default 20)"
    )
    p.add_argument(
        "--patch", type=positive_int, default=256, help="patch size in pixels (default 256)"
    )
    p.add_argument(
        "--overlap", type=nonnegative_int, default=0, help="patch overlap in pixels (default 0)"
    )
    p.add_argument(
        "--min-tissue",
        type=fraction,
        default=0.0,
        help="minimum tissue fraction of a patch; 0 keeps any overlap (default)",
    )
    p.add_argument("--preset", choices=sorted(PRESETS), default="clam", help="segmentation preset")
    p.add_argument(
        "--seg-mpp",
        type=positive_float,
        default=DEFAULT_SEGMENTATION_MPP,
        help="resolution of the segmentation thumbnail in um/px (default 8 = 1.25x)",
    )
    p.add_argument("--no-seg", action="store_true", help="keep every grid position")
    p.add_argument(
        "--mpp",
        type=positive_float,
        default=None,
        help="level-0 um/px, overriding the file (required for plain PNG/JPEG images)",
    )
    p.add_argument(
        "--threads", type=positive_int, default=None, help="threads (default: all cores)"
    )
    p.add_argument("--force", action="store_true", help="redo slides that are already complete")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_tile)


def _collect(paths: Sequence[str]) -> tuple[list[Path], list[dict[str, Any]]]:
    from ._readers import IMAGE_EXTENSIONS, SLIDE_EXTENSIONS

    exts = SLIDE_EXTENSIONS | IMAGE_EXTENSIONS
    files: list[Path] = []
    errors: list[dict[str, Any]] = []
    for s in paths:
        p = Path(s)
        if p.is_dir():
            found = sorted(q for q in p.iterdir() if q.is_file() and q.suffix.lower() in exts)
            if not found:
                errors.append(
                    _entry(p, slide_name(p), "failed", error="folder holds no slide files")
                )
            files.extend(found)
        elif p.exists():
            files.append(p)
        else:
            errors.append(_entry(p, slide_name(p), "failed", error="no such file"))
    return files, errors


def _entry(path: Path, name: str, status: str, **extra: Any) -> dict[str, Any]:
    return {"slide": str(path), "name": name, "status": status, **extra}


def _report(progress: SlideProgress, entry: dict[str, Any]) -> None:
    progress.finished(SimpleNamespace(**{"n_patches": None, "seconds": None, "error": None,
                                         **entry}))  # fmt: skip


def _tile_one(path: Path, name: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    from . import _h5, _readers, _segment
    from ._grid import patch_grid

    t0 = time.perf_counter()
    target = _h5.coords_path(
        out, name, magnification=args.mag, patch_size=args.patch, overlap=args.overlap
    )
    if not args.force and (done := _h5.read_complete_coords(target)) is not None:
        return _entry(path, name, "skipped", coords=str(target), n_patches=len(done))
    with _readers.open(path, mpp=args.mpp) as slide:
        tissue = None
        if not args.no_seg:
            tissue = _segment.segment_tissue(
                slide, preset=args.preset, target_mpp=args.seg_mpp, threads=args.threads
            )
            tissue.write_geojson(out / "contours_geojson" / f"{name}.geojson")
        grid = patch_grid(
            slide,
            tissue,
            magnification=args.mag,
            patch_size=args.patch,
            overlap=args.overlap,
            min_tissue=args.min_tissue,
            threads=args.threads,
        )
        _h5.write_coords(target, grid)
    return _entry(
        path,
        name,
        "done",
        coords=str(target),
        n_patches=len(grid),
        tissue_fraction=None if tissue is None else round(tissue.tissue_fraction, 6),
        seconds=round(time.perf_counter() - t0, 3),
    )


def run_tile(args: argparse.Namespace) -> int:
    """Run ``tumorboard tile`` for parsed arguments and return the exit status."""
    from ._h5 import patch_dir

    if args.overlap >= args.patch:
        raise InvalidArgumentError(
            f"--overlap: expected less than --patch ({args.patch}), got {args.overlap}"
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    files, report = _collect(args.slides)
    progress = SlideProgress(len(files) + len(report), enabled=not args.no_progress)
    for e in report:
        _report(progress, e)
    for slide in plan_slide_names(files):
        if slide.error is not None:
            entry = _entry(slide.path, slide.name, "failed", error=slide.error)
        else:
            try:
                entry = _tile_one(slide.path, slide.name, args, out)
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # report and go on with the other slides
                entry = _entry(
                    slide.path, slide.name, "failed", error=f"{type(exc).__name__}: {exc}"
                )
        report.append(entry)
        _report(progress, entry)
    progress.close()

    counts = {s: sum(e["status"] == s for e in report) for s in ("done", "skipped", "failed")}
    report_path = patch_dir(out, args.mag, args.patch, args.overlap) / "tile_report.json"
    report_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(report_path) as tmp:
        tmp.write_text(json.dumps({"counts": counts, "slides": report}, indent=2), encoding="utf-8")
    print(
        f"tile: {counts['done']} done, {counts['skipped']} skipped (complete), "
        f"{counts['failed']} failed; report: {report_path}"
    )
    for e in report:
        if e["status"] == "failed":
            print(f"  FAILED {e['slide']}: {e['error']}")
    return 1 if counts["failed"] else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tile`` command line and return the exit status.

    Parameters
    ----------
    argv : sequence of str or None, default None
        The arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        0 when every slide is done or skipped, 1 when any failed, 2 for bad arguments (one
        line ``tumorboard: error: ...``, as from the ``tumorboard`` command, whose error handling
        this runs through).
    """
    from ..cli import main as tumorboard_main

    return tumorboard_main(argv)


if __name__ == "__main__":
    sys.exit(main())
