"""Agent-facing tools built on pathology foundation models, each with a JSON-schema description.

The descriptions (``TOOL_SCHEMAS``, and ``tool.schema`` on every function) let an agent harness
expose each tool as a function tool (:func:`openai_tool`, :func:`anthropic_tool`).

* :func:`conch_zero_shot` -- CONCH labels an H&E region of interest zero-shot (MTBBench's CONCH
  tool: label, probability, confidence bin, reply sentence).
* :func:`ihc_positive_percentage` -- UNI2-h patch embeddings pooled and regressed by MTBBench's
  ABMIL model: the percentage of IHC-positive cells.
* :func:`dab_positive_fraction` -- a colour-deconvolution baseline that needs no weights.
"""

from __future__ import annotations

from ._conch import (
    BINS,
    CONCH_CAVEAT,
    ConchResult,
    conch_zero_shot,
    confidence_bin,
    mtbbench_reply,
    preprocess_conch,
)
from ._dab import (
    DEFAULT_DAB_THRESHOLD,
    DEFAULT_TISSUE_THRESHOLD,
    HED_FROM_RGB,
    RGB_FROM_HED,
    DabResult,
    color_deconvolution,
    dab_positive_fraction,
)
from ._ihc import IhcResult, ihc_positive_percentage, tile_image
from ._schemas import (
    CONCH_ZERO_SHOT_SCHEMA,
    DAB_POSITIVE_FRACTION_SCHEMA,
    IHC_POSITIVE_PERCENTAGE_SCHEMA,
    TOOL_SCHEMAS,
    anthropic_tool,
    openai_tool,
)

conch_zero_shot.schema = CONCH_ZERO_SHOT_SCHEMA  # type: ignore[attr-defined]
ihc_positive_percentage.schema = IHC_POSITIVE_PERCENTAGE_SCHEMA  # type: ignore[attr-defined]
dab_positive_fraction.schema = DAB_POSITIVE_FRACTION_SCHEMA  # type: ignore[attr-defined]

__all__ = [
    "BINS",
    "CONCH_CAVEAT",
    "CONCH_ZERO_SHOT_SCHEMA",
    "DAB_POSITIVE_FRACTION_SCHEMA",
    "DEFAULT_DAB_THRESHOLD",
    "DEFAULT_TISSUE_THRESHOLD",
    "HED_FROM_RGB",
    "IHC_POSITIVE_PERCENTAGE_SCHEMA",
    "RGB_FROM_HED",
    "TOOL_SCHEMAS",
    "ConchResult",
    "DabResult",
    "IhcResult",
    "anthropic_tool",
    "color_deconvolution",
    "conch_zero_shot",
    "confidence_bin",
    "dab_positive_fraction",
    "ihc_positive_percentage",
    "mtbbench_reply",
    "openai_tool",
    "preprocess_conch",
    "tile_image",
]
