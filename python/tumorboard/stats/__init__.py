"""Statistics for benchmark scoring.

Bootstrap confidence intervals (C++ engine), paired bootstrap tests, Poisson-bootstrap partials
that merge across shards, inter-rater agreement, model comparisons (:func:`compare`: paired
differences matched on item identity, McNemar, sign-flip permutation, Holm/Bonferroni/BH) and
closed-form proportion intervals (:func:`proportion_interval`: Wilson, Agresti-Coull,
Clopper-Pearson, cluster-robust CR1, design-effect Wilson).

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
from ._compare import Comparison, ComparisonRow, compare
from ._multiple import CORRECTIONS, adjust_pvalues
from ._options import BootstrapOptions
from ._paired_tests import McNemarResult, SignFlipResult, mcnemar, sign_flip_test
from ._poisson import PoissonPartials, poisson_partials
from ._power import PowerPlan, detectable_effect, plan_sample_size, power
from ._proportions import INTERVALS, ProportionInterval, proportion_interval
from ._ranks import RankIntervals, rank_intervals

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
    "CORRECTIONS",
    "Comparison",
    "ComparisonRow",
    "INTERVALS",
    "McNemarResult",
    "ProportionInterval",
    "SignFlipResult",
    "adjust_pvalues",
    "compare",
    "mcnemar",
    "proportion_interval",
    "PowerPlan",
    "RankIntervals",
    "detectable_effect",
    "plan_sample_size",
    "power",
    "rank_intervals",
    "sign_flip_test",
]
