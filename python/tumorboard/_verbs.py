"""The ``tumorboard`` command line's verbs: name, one-line help and where each is built.

The top-level parser lists every verb but builds only the one a command line names: a verb's
options live next to its code (``embed`` beside the embedding engine, ``tile`` beside the
slide readers) and importing those modules costs what the verb needs (numpy, torch, polars).
This table, which imports nothing, is what ``tumorboard --help`` needs, so the help and a
typo's "invalid choice" answer as fast as ``--version``. Each verb's builder takes its help
line from here, so it is written once.
"""

from __future__ import annotations

__all__ = ["VERBS", "verb_help"]

#: verb -> (one-line help, "module:function" that adds the verb's parser to the sub-parsers).
VERBS: dict[str, tuple[str, str]] = {
    "demo": (
        "the main jobs end to end on generated data: tile and embed a sample slide, run the "
        "agent tools, record and score a sample log with CIs",
        "tumorboard.cli:add_demo_parser",
    ),
    "bench": ("run the side-by-side benchmarks in benchmarks/", "tumorboard.cli:add_bench_parser"),
    "import": ("import agent logs into a trajectory store", "tumorboard.cli:add_import_parser"),
    "score": (
        "score a trajectory store with a benchmark's scorer and bootstrap CIs",
        "tumorboard._score_cli:add_score_parser",
    ),
    "store": (
        "look after a trajectory store (check and repair)",
        "tumorboard.cli:add_store_parser",
    ),
    "compare": (
        "compare models on the items they share: paired differences, tests, corrections",
        "tumorboard._compare_cli:add_compare_parser",
    ),
    "plan": (
        "items (and patients) needed to detect a difference between two models",
        "tumorboard._compare_cli:add_plan_parser",
    ),
    "tile": (
        "segment tissue and write patch coordinates (TRIDENT coords .h5) for slides",
        "tumorboard.slides.cli:add_tile_parser",
    ),
    "embed": (
        "embed the patches of slides with a foundation model (TRIDENT .h5 + Parquet)",
        "tumorboard.embed.cli:add_embed_parser",
    ),
    "mcp": (
        "serve the agent tools over the Model Context Protocol (stdio or HTTP)",
        "tumorboard.integrations.cli:add_mcp_parser",
    ),
    "models": (
        "list the models tumorboard can load (TRIDENT names, dims, weights to download)",
        "tumorboard.models.cli:add_models_parser",
    ),
}


def verb_help(name: str) -> str:
    """Return the one-line help of the verb ``name`` (as ``tumorboard --help`` lists it).

    Parameters
    ----------
    name : str
        A key of :data:`VERBS`.

    Returns
    -------
    str
        The help line.
    """
    return VERBS[name][0]
