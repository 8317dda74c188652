"""``tumorboard tile``, and the options and behaviours it shares with ``tumorboard embed``.

``tile`` segments each slide's tissue, writes the tissue polygons to
``{out}/contours_geojson/{name}.geojson`` and TRIDENT's coords file
``{out}/{mag}x_{patch}px_{overlap}px_overlap/patches/{name}_patches.h5``
(:class:`~tumorboard.slides.TilingOptions`). Shared with ``embed`` (one function adds the
options to both parsers, :func:`add_slide_options`):

* inputs: slide files, folders of slides and ``--slide-list FILE`` (one path per line), checked
  before any work (:func:`collect_inputs`); a missing input is reported, the others go on, and
  when nothing is left the command stops with exit status 2 before loading anything;
* the tiling options (``--magnification``, ``--patch-size``, ``--overlap``, ``--min-tissue``,
  ``--preset`` / ``--no-seg``, ``--seg-mpp``, ``--mpp``, ``--reader``, ``--threads``), validated
  before any work;
* resume: a slide whose outputs are complete and were made with the same settings is skipped; one
  made with other settings is refused with both values named (``--force`` redoes it);
* statuses: done, skipped (complete), no tissue (with the largest region and a hint) and failed;
  the exit status is 1 when any slide failed or had no tissue;
* a JSON report next to ``patches/`` that keeps the slides of earlier runs (merged by slide file,
  the latest entry of a slide wins) (:func:`write_report`), and progress on standard error
  at least every 2 s with patches/s (``--quiet``: none).

``python -m tumorboard.slides.cli tile ...`` runs ``tumorboard tile ...``; the Python entry point
is :func:`tumorboard.cli.main` (this module never imports the top-level CLI).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .._args import cli_message, fraction, nonnegative_int, positive_float, positive_int
from .._io import atomic_path
from .._progress import SlideProgress
from .._verbs import verb_help
from ..errors import MissingFileError, TumorboardError
from ._names import CollectedSlides, collect_slides, plan_slide_names, slide_name
from ._segment import DEFAULT_PRESET, DEFAULT_SEGMENTATION_MPP, PRESETS
from ._tiling import TilingOptions
from ._validate import READERS

__all__ = [
    "STATUSES",
    "add_slide_options",
    "add_tile_parser",
    "collect_inputs",
    "run_tile",
    "tiling_options",
    "usage_error",
    "write_report",
]

#: The statuses of a slide in a report, in the order they are counted.
STATUSES = ("done", "skipped", "no tissue", "failed")

#: Option names of :class:`TilingOptions` -> their command-line flags.
_FLAGS = {
    "magnification": "--magnification",
    "patch_size": "--patch-size",
    "overlap": "--overlap",
    "min_tissue": "--min-tissue",
    "seg_mpp": "--seg-mpp",
    "mpp": "--mpp",
    "reader": "--reader",
    "threads": "--threads",
    "segmentation": "--preset",
}


def add_slide_options(p: argparse.ArgumentParser) -> None:
    """Add the inputs, tiling and resume options ``tile`` and ``embed`` share to a parser.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The verb's parser.
    """
    p.add_argument("slides", nargs="*", metavar="SLIDES", help="slide files or folders of slides")
    p.add_argument(
        "--slide-list",
        metavar="FILE",
        help="a text file with one slide file or folder per line (relative to the file)",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="job folder for the outputs")
    p.add_argument(
        "--magnification", type=positive_float, default=20, help="target magnification (default 20)"
    )
    p.add_argument(
        "--patch-size",
        type=positive_int,
        default=256,
        help="patch side in pixels at it (default 256)",
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
    p.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default=DEFAULT_PRESET,
        help=(
            f"tissue segmentation preset (default {DEFAULT_PRESET}: any tissue fragment "
            ">= 0.1 mm2; the others are CLAM's)"
        ),
    )
    p.add_argument(
        "--seg-mpp",
        type=positive_float,
        default=DEFAULT_SEGMENTATION_MPP,
        help="resolution of the segmentation thumbnail in um/px (default 8 = 1.25x)",
    )
    p.add_argument("--no-seg", action="store_true", help="no segmentation: keep every patch")
    p.add_argument(
        "--mpp",
        type=positive_float,
        default=None,
        help="level-0 um/px, overriding the file (required for plain PNG/JPEG images)",
    )
    p.add_argument("--reader", choices=READERS, default="auto", help="slide reader (default: auto)")
    p.add_argument(
        "--threads", type=positive_int, default=None, help="threads (default: all cores)"
    )
    p.add_argument(
        "--force", action="store_true", help="redo slides whose outputs exist (any settings)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress output")


def tiling_options(args: argparse.Namespace) -> TilingOptions:
    """Build the validated :class:`TilingOptions` of parsed :func:`add_slide_options` arguments.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed arguments.

    Returns
    -------
    TilingOptions
        The options.

    Raises
    ------
    InvalidArgumentError
        A value out of range; the message names the flag (``--magnification: ...``).
    """
    try:
        return TilingOptions(
            magnification=args.magnification,
            patch_size=args.patch_size,
            overlap=args.overlap,
            min_tissue=args.min_tissue,
            segmentation=None if args.no_seg else args.preset,
            seg_mpp=args.seg_mpp,
            mpp=args.mpp,
            reader=args.reader,
            threads=args.threads,
        )
    except TumorboardError as exc:
        field, sep, rest = str(exc).partition(":")
        if sep and field in _FLAGS:
            raise type(exc)(f"{_FLAGS[field]}:{rest}") from exc
        raise


def collect_inputs(args: argparse.Namespace) -> CollectedSlides:
    """Find the slide files of the parsed inputs, refusing when none is there.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed arguments (``slides`` and ``slide_list``).

    Returns
    -------
    CollectedSlides
        The slide files and the missing inputs (reported per slide by the verbs).

    Raises
    ------
    MissingFileError
        No input was given, or none of them is a slide file.
    """
    if not args.slides and not args.slide_list:
        raise MissingFileError("no slides given: pass slide files, folders or --slide-list FILE")
    found = collect_slides(args.slides, slide_list=args.slide_list)
    if not found.files:
        listed = "; ".join(f"{p}: {why}" for p, why in found.missing) or "the list is empty"
        raise MissingFileError(f"no slide files found ({listed})")
    return found


def usage_error(exc: BaseException) -> int:
    """Print a refused command as one ``tumorboard: error: ...`` line and return exit status 2.

    Parameters
    ----------
    exc : BaseException
        What was refused.

    Returns
    -------
    int
        2.
    """
    print(f"tumorboard: error: {cli_message(exc)}", file=sys.stderr)
    return 2


def write_report(
    path: str | os.PathLike[str],
    entries: Iterable[Mapping[str, Any]],
    *,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, int]:
    """Merge this run's slide entries into the JSON report at ``path`` (atomically).

    Entries are keyed by their ``slide`` (the absolute slide file): an entry of this run replaces
    the same slide's earlier one in place, other earlier slides are kept, new slides are appended.
    An unreadable earlier report is replaced.

    Parameters
    ----------
    path : str or os.PathLike
        The report file (``{"counts": ..., "slides": [...]}`` plus ``meta``).
    entries : iterable of Mapping
        This run's entries (``slide``, ``name``, ``status``, ...).
    meta : Mapping or None, default None
        Top-level fields written with the report (e.g. the encoder).

    Returns
    -------
    dict of str to int
        The counts of each status over every slide of the merged report.
    """
    p = Path(path)
    merged: dict[str, dict[str, Any]] = {}
    if p.is_file():
        try:
            earlier = json.loads(p.read_text(encoding="utf-8")).get("slides", [])
        except (ValueError, AttributeError):
            earlier = []
        for e in earlier:
            if isinstance(e, dict) and "slide" in e:
                merged[str(e["slide"])] = e
    for e in entries:
        merged[str(e["slide"])] = dict(e)
    slides = list(merged.values())
    counts = {s: sum(e.get("status") == s for e in slides) for s in STATUSES}
    p.parent.mkdir(parents=True, exist_ok=True)
    doc = {**(meta or {}), "counts": counts, "slides": slides}
    with atomic_path(p) as tmp:
        tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return counts


def add_tile_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``tile`` verb to an ``argparse`` subparsers object (sets ``func``).

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The main parser's subparsers.

    Returns
    -------
    argparse.ArgumentParser
        The ``tile`` parser.
    """
    p = subparsers.add_parser(
        "tile",
        help=verb_help("tile"),
        description="Segment tissue on a 1.25x thumbnail and write TRIDENT coords .h5 files "
        "(and tissue GeoJSON) for each slide. Complete slides made with the same settings are "
        "skipped; failed and tissue-less slides are reported (exit status 1).",
    )
    add_slide_options(p)
    p.set_defaults(func=run_tile)
    return p


def _entry(path: Path, name: str, status: str, **extra: Any) -> dict[str, Any]:
    return {"slide": os.path.abspath(path), "name": name, "status": status, **extra}


def _finished(progress: SlideProgress, entry: Mapping[str, Any]) -> None:
    progress.finished(
        SimpleNamespace(**{"n_patches": None, "seconds": None, "error": None, **entry})
    )


def _tile_one(
    path: Path, name: str, opts: TilingOptions, out: Path, *, force: bool
) -> dict[str, Any]:
    t0 = time.perf_counter()
    if not force:
        stored, why = opts.stored_coords(out, name, path)
        if stored is not None and why is not None:
            return _entry(path, name, "failed", coords=str(stored.path), error=why)
        if stored is not None:
            return _entry(path, name, "skipped", coords=str(stored.path), n_patches=len(stored))
    with opts.open(path) as slide:
        tiled = opts.tile(slide, out, source=path)
        reader = str(slide.reader)
    reason = tiled.no_tissue
    tissue = tiled.tissue
    return _entry(
        path,
        name,
        "no tissue" if reason else "done",
        coords=str(tiled.coords_path),
        contours=None if tiled.geojson_path is None else str(tiled.geojson_path),
        n_patches=len(tiled.grid),
        tissue_fraction=None if tissue is None else round(tissue.tissue_fraction, 6),
        largest_region_um2=getattr(tissue, "largest_region_um2", None),
        reader=reader,
        seconds=round(time.perf_counter() - t0, 3),
        error=reason,
    )


def run_tile(args: argparse.Namespace) -> int:
    """Run ``tumorboard tile`` for parsed arguments and return the exit status.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``tile`` arguments.

    Returns
    -------
    int
        0 when every slide is done or skipped, 1 when any failed or had no tissue, 2 when the
        command was refused before any work (bad option, no slide found).
    """
    try:
        opts = tiling_options(args)
        found = collect_inputs(args)
    except (TumorboardError, ValueError, TypeError, OSError) as exc:
        return usage_error(exc)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    entries: list[dict[str, Any]] = []
    progress = SlideProgress(len(found.items), enabled=not args.quiet)
    planned = iter(plan_slide_names(found.files))
    try:
        for path, why in found.items:
            if why is not None:
                entry = _entry(path, slide_name(path), "failed", error=why)
                entries.append(entry)
                _finished(progress, entry)
                continue
            slide = next(planned)
            if slide.error is not None:
                entry = _entry(slide.path, slide.name, "failed", error=slide.error)
            else:
                progress.start(slide.name)
                try:
                    entry = _tile_one(slide.path, slide.name, opts, out, force=args.force)
                except KeyboardInterrupt:
                    raise
                except Exception as exc:  # report and go on with the other slides
                    entry = _entry(
                        slide.path, slide.name, "failed", error=f"{type(exc).__name__}: {exc}"
                    )
                if entry["status"] == "done":
                    progress.add_patches(entry["n_patches"])
            entries.append(entry)
            _finished(progress, entry)
    finally:
        progress.close()

    report_path = opts.job_dir(out) / "tile_report.json"
    write_report(report_path, entries)
    counts = {s: sum(e["status"] == s for e in entries) for s in STATUSES}
    print(
        f"tile: {counts['done']} done, {counts['skipped']} skipped (complete), "
        f"{counts['no tissue']} no tissue, {counts['failed']} failed; report: {report_path}"
    )
    for e in entries:
        if e["status"] in ("failed", "no tissue"):
            print(f"  {e['status'].upper()} {e['slide']}: {cli_message(e['error'])}")
    return 1 if counts["failed"] or counts["no tissue"] else 0


def _deprecated_main(argv: Sequence[str] | None = None) -> int:
    """Run ``tumorboard.cli.main(argv)`` (what the removed ``main`` of this module did)."""
    import importlib

    # resolved by name at call time: this module does not import the top-level CLI, which
    # imports it (no import cycle); only the deprecated spelling takes this path
    return int(importlib.import_module("tumorboard.cli").main(argv))


def __getattr__(name: str) -> Any:
    """Keep the removed ``main`` for one release, with a DeprecationWarning naming the new one."""
    if name == "main":
        import warnings

        warnings.warn(
            "tumorboard.slides.cli.main is deprecated (it made an import cycle with the CLI); "
            "use tumorboard.cli.main(['tile', ...]) or run `tumorboard tile ...`",
            DeprecationWarning,
            stacklevel=2,
        )
        return _deprecated_main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":  # `python -m tumorboard.slides.cli tile ...` (this file as __main__)
    from tumorboard.cli import main

    sys.exit(main())
