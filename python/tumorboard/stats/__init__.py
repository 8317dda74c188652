"""Statistics for benchmark scoring.

Bootstrap confidence intervals (C++ engine), paired bootstrap tests, Poisson-bootstrap partials
that merge across shards, and inter-rater agreement.

All resampling runs in C++ with the GIL released; the same seed gives bit-identical results on
any number of threads. Every function that resamples takes its options as one frozen, validated
:class:`BootstrapOptions` (``options=``); every public function validates its inputs once, at its
entry (``_validate.py``), and then computes.
"""

from __future__ import annotations

from ._agreement import (
    AgreementResult,
    cohen_kappa,
    fleiss_kappa,
    gwet_ac1,
    krippendorff_alpha,
    mean_pairwise_agreement,
    pabak,
    rating_table,
)
from ._bootstrap import (
    BootstrapResult,
    PairedBootstrapResult,
    bootstrap,
    bootstrap_from_indices,
    bootstrap_sufficient,
    paired_bootstrap,
)
from ._options import BootstrapOptions
from ._poisson import PoissonPartials, poisson_partials

__all__ = [
    "AgreementResult",
    "BootstrapOptions",
    "cohen_kappa",
    "fleiss_kappa",
    "gwet_ac1",
    "krippendorff_alpha",
    "mean_pairwise_agreement",
    "pabak",
    "rating_table",
    "BootstrapResult",
    "PairedBootstrapResult",
    "PoissonPartials",
    "bootstrap",
    "bootstrap_from_indices",
    "bootstrap_sufficient",
    "paired_bootstrap",
    "poisson_partials",
]
