"""What an embedding run reports: one :class:`SlideResult` per slide, one :class:`EmbedReport`.

:func:`~tumorboard.embed.embed_slides` returns an :class:`EmbedReport`; ``tumorboard embed``
prints its :meth:`~EmbedReport.summary` and writes its JSON form (:meth:`SlideResult.to_dict`
per slide) to :attr:`~EmbedReport.report_path`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Status = Literal["done", "skipped", "no tissue", "failed"]


@dataclass(frozen=True)
class SlideResult:
    """What happened to one slide.

    Attributes
    ----------
    slide : str
        The slide file.
    name : str
        Its output name.
    status : {"done", "skipped", "no tissue", "failed"}
        "skipped" means already complete with the same settings; "no tissue" that the slide gave
        no patch (``error`` says what was found); for "failed", ``error`` says why.
    n_patches : int, default 0
        Patches embedded (or found, when skipped).
    features_path, parquet_path : pathlib.Path or None, default None
        The slide's output files.
    error : str or None, default None
        Why the slide failed or gave no patch.
    seconds : float, default 0.0
        Time spent on the slide.
    coords_path : pathlib.Path or None, default None
        The slide's coords file.
    """

    slide: str
    name: str
    status: Status
    n_patches: int = 0
    features_path: Path | None = None
    parquet_path: Path | None = None
    error: str | None = None
    seconds: float = 0.0
    coords_path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the slide's entry of a JSON report (paths as text, the slide file absolute)."""
        return {
            "slide": os.path.abspath(self.slide),
            "name": self.name,
            "status": self.status,
            "n_patches": self.n_patches,
            "features": None if self.features_path is None else str(self.features_path),
            "parquet": None if self.parquet_path is None else str(self.parquet_path),
            "coords": None if self.coords_path is None else str(self.coords_path),
            "seconds": round(self.seconds, 3),
            "error": self.error,
        }


class _ByStatus:
    """The per-status views of a report's ``results`` (shared by both report types)."""

    results: tuple[SlideResult, ...]

    def _with(self, status: str) -> tuple[SlideResult, ...]:
        return tuple(r for r in self.results if r.status == status)

    @property
    def done(self) -> tuple[SlideResult, ...]:
        """The slides embedded in this run."""
        return self._with("done")

    @property
    def skipped(self) -> tuple[SlideResult, ...]:
        """The slides skipped as already complete with the same settings."""
        return self._with("skipped")

    @property
    def no_tissue(self) -> tuple[SlideResult, ...]:
        """The slides that gave no patch."""
        return self._with("no tissue")

    @property
    def failed(self) -> tuple[SlideResult, ...]:
        """The slides that failed."""
        return self._with("failed")

    @property
    def ok(self) -> bool:
        """True when every slide is done or skipped (none failed or gave no patch)."""
        return not self.failed and not self.no_tissue

    def to_polars(self) -> Any:
        """Return one row per slide: the fields of :class:`SlideResult` (paths as text)."""
        import polars as pl

        rows = [r.to_dict() for r in self.results]
        return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()


@dataclass(frozen=True)
class EmbedReport(_ByStatus):
    """The result of :func:`embed_slides`.

    Attributes
    ----------
    results : tuple of SlideResult
        One :class:`SlideResult` per input (a folder: per slide file), in input order.
    encoder : str
        The encoder name used in the output folders.
    weights_fingerprint : str
        The fingerprint recorded with the features (``sha256:...``, ``state-sha256:...`` or
        ``random``).
    job_dir : pathlib.Path
        TRIDENT's ``{out}/{mag}x_{patch}px_{overlap}px_overlap`` folder of the run.
    features_dir, parquet_dir, coords_dir : pathlib.Path
        Where the outputs are (all under ``job_dir``).
    n_patches : int
        Patches embedded in this run (skipped slides not counted).
    seconds : float
        Wall-clock time of the run.
    backend : str, default "torch"
        The inference backend.
    device : str, default "cpu"
        The device the backend ran on.
    """

    results: tuple[SlideResult, ...]
    encoder: str
    weights_fingerprint: str
    job_dir: Path
    features_dir: Path
    parquet_dir: Path
    coords_dir: Path
    n_patches: int
    seconds: float
    backend: str = "torch"
    device: str = "cpu"

    @property
    def patches_per_second(self) -> float:
        """Throughput of the run (0 for a run of no measurable time)."""
        return self.n_patches / self.seconds if self.seconds > 0 else 0.0

    @property
    def report_path(self) -> Path:
        """Where ``tumorboard embed`` keeps the JSON report of this job and encoder."""
        return self.job_dir / f"embed_report_{self.encoder}.json"

    def summary(self) -> str:
        """Return a few lines for people: counts, throughput, every slide without features."""
        lines = [
            f"embedded {len(self.done)} slide(s), skipped {len(self.skipped)} complete, "
            f"{len(self.no_tissue)} no tissue, failed {len(self.failed)}; {self.n_patches} "
            f"patches in {self.seconds:.1f} s ({self.patches_per_second:.1f} patches/s, "
            f"{self.backend} on {self.device})",
            f"encoder {self.encoder}, weights {self.weights_fingerprint}",
            f"features: {self.features_dir}",
            f"parquet:  {self.parquet_dir}",
        ]
        for r in self.no_tissue:
            lines.append(f"NO TISSUE {r.slide}: {r.error}")
        for r in self.failed:
            lines.append(f"FAILED {r.slide}: {r.error}")
        return "\n".join(lines)


@dataclass(frozen=True)
class SlideEmbedReport(_ByStatus):
    """The result of :func:`embed_slides` with ``slide_encoder=``: one embedding per slide.

    Attributes
    ----------
    results : tuple of SlideResult
        One per input, in input order; ``features_path`` is the slide's
        ``slide_features_{name}/{slide}.h5`` and ``n_patches`` the patches it pools. A slide
        whose patch features failed or had no tissue keeps that status and error.
    slide_encoder : str
        The slide encoder's name in the output folder (TRIDENT's, with ``-random-weights`` for
        a run on random parameters).
    weights_fingerprint : str
        The slide encoder's weights (``sha256:...``, ``random``, or ``none`` for ``mean-*``).
    slide_features_dir : pathlib.Path
        ``{job_dir}/slide_features_{slide_encoder}``.
    table_path : pathlib.Path
        The Parquet table of every slide of that folder (``slide_features_{name}.parquet``).
    patch_report : EmbedReport
        The patch-feature stage (embedded, or found complete).
    seconds : float
        Wall-clock time of the whole run.
    device : str, default "cpu"
        Where the slide encoder ran.
    """

    results: tuple[SlideResult, ...]
    slide_encoder: str
    weights_fingerprint: str
    slide_features_dir: Path
    table_path: Path
    patch_report: EmbedReport
    seconds: float
    device: str = "cpu"

    @property
    def job_dir(self) -> Path:
        """TRIDENT's ``{out}/{mag}x_{patch}px_{overlap}px_overlap`` folder of the run."""
        return self.patch_report.job_dir

    @property
    def report_path(self) -> Path:
        """Where ``tumorboard embed`` keeps the JSON report of this job and slide encoder."""
        return self.job_dir / f"embed_report_{self.slide_encoder}.json"

    def summary(self) -> str:
        """Return a few lines for people: counts, both encoders, every slide without a vector."""
        p = self.patch_report
        lines = [
            f"slide embeddings: {len(self.done)} done, {len(self.skipped)} skipped complete, "
            f"{len(self.no_tissue)} no tissue, failed {len(self.failed)} in {self.seconds:.1f} s "
            f"(slide encoder on {self.device})",
            f"slide encoder {self.slide_encoder}, weights {self.weights_fingerprint}; patch "
            f"encoder {p.encoder}, weights {p.weights_fingerprint} (patches: {len(p.done)} "
            f"slide(s) embedded, {len(p.skipped)} found complete, {p.n_patches} patches)",
            f"slide features: {self.slide_features_dir}",
            f"table: {self.table_path}",
        ]
        for r in self.no_tissue:
            lines.append(f"NO TISSUE {r.slide}: {r.error}")
        for r in self.failed:
            lines.append(f"FAILED {r.slide}: {r.error}")
        return "\n".join(lines)
