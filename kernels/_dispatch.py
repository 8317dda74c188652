"""Measured dispatch: pick the fastest implementation of an op once per shape and device.

Some fused kernels beat the library path on one GPU and lose on another (a Triton GEMM with a
fused epilogue against cuBLAS plus one elementwise pass, say). Rather than guess, the public ops
time each candidate on the first call with a given key (op, shape bucket, dtypes, device name),
keep the fastest in a per-process cache, and use it from then on, so the public op is never
slower than its plain alternative by more than the timing noise.

The timing runs the candidates on the caller's real inputs (they are pure functions of their
inputs), a few times each after one warm-up call (which also runs Triton's autotuner), with CUDA
events on a GPU and ``time.perf_counter`` elsewhere. :func:`choices` lists what was picked, for
benchmarks and logs; :func:`forget` empties the cache.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from tumorboard.errors import InvalidArgumentError

__all__ = ["Choice", "choices", "fastest", "forget", "shape_bucket"]

T = TypeVar("T")

_CACHE: dict[tuple[str, Hashable], Choice] = {}


@dataclass(frozen=True)
class Choice:
    """One dispatch decision.

    Attributes
    ----------
    op : str
        The op the decision is for (e.g. ``"fused_down_proj_segment_scale"``).
    key : Hashable
        The shape bucket, dtypes and device it holds for.
    path : str
        The candidate that was fastest.
    seconds : dict[str, float]
        Median seconds per call of every candidate, as measured.
    """

    op: str
    key: Hashable
    path: str
    seconds: dict[str, float]


def _median_seconds(fn: Callable[[], Any], *, cuda: bool, repeat: int) -> float:
    import torch

    samples = []
    for _ in range(repeat):
        if cuda:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
    samples.sort()
    return samples[len(samples) // 2]


def fastest(
    op: str,
    key: Hashable,
    candidates: Mapping[str, Callable[[], T]],
    *,
    cuda: bool,
    repeat: int = 5,
) -> tuple[str, T | None]:
    """Return the cached fastest candidate for ``(op, key)``, measuring it on first use.

    Parameters
    ----------
    op : str
        Name of the op.
    key : Hashable
        Shape bucket, dtypes and device name: everything the choice may depend on.
    candidates : Mapping[str, Callable[[], T]]
        Zero-argument callables computing the same result, by path name. With one candidate
        nothing is measured.
    cuda : bool
        Time with CUDA events (True) or the host clock.
    repeat : int, optional
        Timed calls per candidate (median), after one warm-up call each.

    Returns
    -------
    tuple[str, T | None]
        The chosen path and, when this call measured, the result of its last run (so the
        measuring call does not compute the op once more); None when the choice was cached.
    """
    if not candidates:
        raise InvalidArgumentError(f"{op}: no candidate implementation to dispatch to")
    hit = _CACHE.get((op, key))
    if hit is not None and hit.path in candidates:
        return hit.path, None
    if len(candidates) == 1:
        (path,) = candidates
        _CACHE[(op, key)] = Choice(op, key, path, {})
        return path, None
    seconds: dict[str, float] = {}
    results: dict[str, T] = {}
    for name, fn in candidates.items():
        results[name] = fn()  # warm-up: compilation and autotuning stay out of the timing
        seconds[name] = _median_seconds(fn, cuda=cuda, repeat=repeat)
    path = min(seconds, key=seconds.__getitem__)
    _CACHE[(op, key)] = Choice(op, key, path, seconds)
    return path, results[path]


def choices(op: str | None = None) -> list[Choice]:
    """Return the decisions made so far in this process (of one op, or all)."""
    return [c for (name, _), c in _CACHE.items() if op is None or name == op]


def forget() -> None:
    """Empty the cache, so the next call of each op measures again."""
    _CACHE.clear()


def shape_bucket(n: int) -> int:
    """Round a row count up to a power of two, so nearby sizes share one decision."""
    return 1 << max(0, int(n) - 1).bit_length()
