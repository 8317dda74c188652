"""Small timing and reporting helpers shared by the tumorboard benchmarks.

Nothing here asserts on timings: the helpers measure, tabulate and serialise.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from tumorboard._args import positive_int  # the CLI's own type for counts >= 1

__all__ = ["Result", "best_of", "format_markdown", "positive_int", "write_json"]


def _timed(fn: Callable[[], Any], number: int) -> float:
    """Wall-clock seconds for ``number`` back-to-back calls of ``fn``."""
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return time.perf_counter() - t0


def best_of(
    fn: Callable[[], Any],
    repeat: int = 3,
    min_time: float = 0.2,
    *,
    warmup: bool = True,
    max_time: float = 15.0,
    reduce: str = "min",
) -> float:
    """Time ``fn()`` and return seconds per call.

    Parameters
    ----------
    fn:
        Zero-argument callable to time.  Its return value is discarded (wrap it in a closure
        that stores the value if you need it).
    repeat:
        Number of timed samples to aim for.
    min_time:
        Each sample loops ``fn`` enough times to last at least this many seconds, so fast
        calls are not dominated by timer resolution.  The loop count is calibrated on the
        warm-up call.
    warmup:
        Make one untimed-for-reporting call first (thread pools, page faults, caches).  When
        the warm-up itself takes at least ``max_time / 2`` seconds, start-up effects are
        negligible relative to the call and the warm-up is kept as the first sample.
    max_time:
        Soft budget in seconds for the timed samples: a new sample is not started when the
        previous one suggests the total would exceed ``max_time``.  At least one sample is
        always taken, so calls longer than ``max_time / 2`` are timed once (their warm-up
        call doubling as the sample).  This keeps multi-second calls from dominating a run.
    reduce:
        ``"min"`` (default, least noisy estimate of the achievable time) or ``"median"``.

    Returns
    -------
    float
        Seconds per call.
    """
    if repeat < 1:
        raise ValueError("repeat must be >= 1")
    if reduce not in ("min", "median"):
        raise ValueError("reduce must be 'min' or 'median'")

    samples: list[float] = []
    number = 1
    if warmup:
        t_warm = _timed(fn, 1)
        if t_warm >= max_time / 2:
            samples.append(t_warm)
        elif t_warm < min_time:
            number = max(1, math.ceil(min_time / max(t_warm, 1e-9)))

    spent = sum(samples) * number
    while len(samples) < repeat:
        # never start a sample that is predicted to overrun the budget
        if samples and spent + samples[-1] * number > max_time:
            break
        t = _timed(fn, number)
        samples.append(t / number)
        spent += t

    return min(samples) if reduce == "min" else statistics.median(samples)


@dataclass
class Result:
    """One (workload, anchor) timing comparison.

    ``ratio`` is ``anchor_s / tumorboard_s``: values above 1 mean tumorboard is faster.
    ``extrapolated`` marks anchor times scaled up from a subset of the workload.
    ``check`` is the workload's CI agreement verdict (same string on every anchor row of a
    workload); ``note`` is free-form detail.
    """

    workload: str
    tumorboard_s: float
    anchor: str
    anchor_s: float
    ratio: float
    extrapolated: bool = False
    check: str = ""
    note: str = ""

    @classmethod
    def make(
        cls, workload: str, tumorboard_s: float, anchor: str, anchor_s: float, **kwargs: Any
    ) -> Result:
        """Build a record, computing ``ratio`` from the two timings."""
        ratio = anchor_s / tumorboard_s if tumorboard_s > 0 else math.inf
        return cls(workload, tumorboard_s, anchor, anchor_s, ratio, **kwargs)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Result:
        """Rebuild a record from a mapping, ignoring unknown keys."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def _fmt_s(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 1:
        return f"{x:.2f}"
    if x >= 0.01:
        return f"{x:.3f}"
    return f"{x:.2e}"


def _fmt_ratio(x: float | None) -> str:
    if x is None or math.isnan(x):
        return "n/a"
    if math.isinf(x):
        return "inf"
    return f"{x:.1f}x" if x >= 10 else f"{x:.2f}x"


def format_markdown(
    results: Iterable[Result | Mapping[str, Any]],
    anchors: Sequence[str] | None = None,
    *,
    check_column: bool = True,
) -> str:
    """Render results as a Markdown table with one row per workload.

    Columns: ``workload | tumorboard (s) | <anchor> (s) | ratio | ... | check``.  Anchor
    columns appear in the order given by ``anchors`` (default: first-seen order).  An
    extrapolated anchor time is suffixed with ``(extrapolated)``.
    """
    recs = [r if isinstance(r, Result) else Result.from_mapping(r) for r in results]
    if anchors is None:
        anchors = list(dict.fromkeys(r.anchor for r in recs))
    rows: dict[str, dict[str, Result]] = {}
    for r in recs:
        rows.setdefault(r.workload, {})[r.anchor] = r

    header = ["workload", "tumorboard (s)"]
    for a in anchors:
        header += [f"{a} (s)", "ratio"]
    if check_column:
        header.append("check")
    align = [":---"] + ["---:"] * (len(header) - 1)
    if check_column:
        align[-1] = ":---"
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    for workload, by_anchor in rows.items():
        any_rec = next(iter(by_anchor.values()))
        cells = [workload, _fmt_s(any_rec.tumorboard_s)]
        for a in anchors:
            rec = by_anchor.get(a)
            if rec is None:
                cells += ["n/a", "n/a"]
                continue
            t = _fmt_s(rec.anchor_s)
            if rec.extrapolated:
                t += " (extrapolated)"
            cells += [t, _fmt_ratio(rec.ratio)]
        if check_column:
            cells.append(any_rec.check or "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def environment() -> dict[str, Any]:
    """Describe the machine and library versions, for the JSON record."""
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
    }
    try:
        info["affinity_cpus"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    for mod in ("numpy", "scipy", "polars", "tumorboard"):
        try:
            info[mod] = __import__(mod).__version__
        except Exception:  # optional, informational only
            info[mod] = None
    return info


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):  # numpy scalar
        return obj.item()
    if hasattr(obj, "tolist"):  # numpy array
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _finite(x: Any) -> Any:
    """Map non-finite floats to None so the output is strict JSON."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def write_json(
    results: Iterable[Result | Mapping[str, Any]],
    path: str | os.PathLike[str],
    meta: Mapping[str, Any] | None = None,
) -> None:
    """Write ``{"meta": ..., "environment": ..., "results": [...]}`` to ``path``."""
    rows = [asdict(r) if isinstance(r, Result) else dict(r) for r in results]
    doc = {"meta": dict(meta or {}), "environment": environment(), "results": rows}
    out = Path(path)
    if out.parent and not out.parent.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_finite(json.loads(json.dumps(doc, default=_json_default))), indent=2)
    out.write_text(text + "\n", encoding="utf-8")
