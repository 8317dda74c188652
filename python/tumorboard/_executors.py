"""Executors resolved by name, so that a job's local code never imports its Ray twin.

``embed_slides(executor="ray")`` hands the collection to :func:`tumorboard.dist.embed_slides_ray`,
whose Ray actors run ``embed_slides(executor="local")``; ``mtbbench.score(executor="ray")``
hands the store to :func:`tumorboard.dist.score_store`. Importing ``tumorboard.dist`` from the
engine or the scorer would tie the packages in an import cycle; this low module looks the
entry point up by name when the Ray executor is asked for, and ``tumorboard.dist`` stays the
only package that imports the other two.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from .errors import InvalidArgumentError

__all__ = ["RAY_ENTRIES", "ray_entry"]

#: Job -> (module, function) of its Ray executor.
RAY_ENTRIES: dict[str, tuple[str, str]] = {
    "embed": ("tumorboard.dist", "embed_slides_ray"),
    "score": ("tumorboard.dist", "score_store"),
}


def ray_entry(job: str) -> Callable[..., Any]:
    """Return the Ray executor of ``job`` ("embed" or "score"), importing it now.

    Parameters
    ----------
    job : {"embed", "score"}
        The job.

    Returns
    -------
    callable
        :func:`tumorboard.dist.embed_slides_ray` or :func:`tumorboard.dist.score_store`.

    Raises
    ------
    InvalidArgumentError
        An unknown job.
    """
    if job not in RAY_ENTRIES:
        raise InvalidArgumentError(f"job: expected one of {sorted(RAY_ENTRIES)}, got {job!r}")
    module, name = RAY_ENTRIES[job]
    return getattr(importlib.import_module(module), name)
