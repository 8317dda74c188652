"""tumorboard: the engine clinical AI-agent benchmarks run on.

Two submodules load on first attribute access (``tumorboard.stats``, ``tumorboard.kernels``):

stats
    Bootstrap confidence intervals (C++ engine), paired tests, agreement statistics.
kernels
    Triton GPU kernels (imported on demand; needs the ``gpu`` extra to run).
"""

from __future__ import annotations

from ._version import __version__

__all__ = ["__version__"]


def __getattr__(name: str):
    # Submodules load on first use so `import tumorboard` stays cheap.
    if name in {"stats", "kernels"}:
        import importlib

        return importlib.import_module(f"tumorboard.{name}")
    raise AttributeError(f"module 'tumorboard' has no attribute {name!r}")
