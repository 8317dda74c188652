"""Statistics for benchmark scoring: bootstrap confidence intervals (C++ engine), paired
bootstrap tests, Poisson-bootstrap partials that merge across shards, and inter-rater agreement.

All resampling runs in C++ with the GIL released; the same seed gives bit-identical results on
any number of threads.
"""

from __future__ import annotations

from ._bootstrap import (
    BootstrapResult,
    PairedBootstrapResult,
    bootstrap,
    bootstrap_from_indices,
    paired_bootstrap,
)
from ._poisson import PoissonPartials, poisson_partials

__all__ = [
    "BootstrapResult",
    "PairedBootstrapResult",
    "PoissonPartials",
    "bootstrap",
    "bootstrap_from_indices",
    "paired_bootstrap",
    "poisson_partials",
]
