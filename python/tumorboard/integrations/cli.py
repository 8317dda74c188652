"""The ``tumorboard mcp`` verb (the MCP SDK is imported only when the verb runs)."""

from __future__ import annotations

import sys
from typing import Any

from .._args import UsageError, positive_int
from .._verbs import verb_help

__all__ = ["add_mcp_parser", "run_mcp"]


def add_mcp_parser(subparsers: Any) -> None:
    """Add the ``tumorboard mcp`` verb.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The sub-parsers of the ``tumorboard`` parser.
    """
    p = subparsers.add_parser(
        "mcp",
        help=verb_help("mcp"),
        description="Serve conch_zero_shot, ihc_positive_percentage and dab_positive_fraction "
        "as MCP tools (needs tumorboard[mcp]; the model tools need tumorboard[embed] and their "
        "weights). A tool whose weights are not given is listed as unavailable with the reason. "
        "Default transport: stdio; --http PORT serves streamable HTTP on 127.0.0.1:PORT/mcp.",
    )
    p.add_argument("--http", type=_port, metavar="PORT",
                   help="serve streamable HTTP on 127.0.0.1:PORT (0: a free port)")  # fmt: skip
    p.add_argument("--conch-weights", metavar="FILE", help="CONCH checkpoint (pytorch_model.bin)")
    p.add_argument("--conch-tokenizer", metavar="FILE",
                   help="CONCH tokenizer (conch_byte_level_bpe_uncased.json)")  # fmt: skip
    p.add_argument("--conch-model", default="conch", choices=["conch", "conch-tiny"],
                   help="CONCH configuration (default conch)")  # fmt: skip
    p.add_argument("--conch-image-size", type=positive_int, metavar="PX",
                   help="CONCH input size (MTBBench: 1024; default the model's)")  # fmt: skip
    p.add_argument("--uni2-weights", metavar="FILE", help="UNI2-h checkpoint")
    p.add_argument("--uni2-model", default="uni2-h", choices=["uni2-h", "uni2-tiny"],
                   help="patch encoder configuration (default uni2-h)")  # fmt: skip
    p.add_argument("--ihc-weights", metavar="FILE",
                   help="MTBBench's ABMIL IHC regressor checkpoint")  # fmt: skip
    p.add_argument("--ihc-hidden", type=positive_int, metavar="N",
                   help="the regressor's hidden size (default MTBBench's)")  # fmt: skip
    p.add_argument("--device", default="auto", help="where the models run (default auto)")
    p.add_argument(
        "--image-root", metavar="DIR",
        help="only serve image paths inside DIR (relative paths are taken from it)",
    )  # fmt: skip
    p.set_defaults(func=run_mcp)


def _port(text: str) -> int:
    """Parse a TCP port (0..65535) for ``--http``."""
    try:
        v = int(text)
    except ValueError:
        raise UsageError(f"expected a port number, got {text!r}") from None
    if not 0 <= v < 65536:
        raise UsageError(f"expected a port in 0..65535, got {v}")
    return v


def run_mcp(args: Any) -> int:
    """Run ``tumorboard mcp``: load the weights, then serve until interrupted.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options.

    Returns
    -------
    int
        0 when the server stops.
    """
    from .mcp import McpOptions, ToolServer, serve

    ihc = {"hidden": args.ihc_hidden} if args.ihc_hidden else {}
    options = McpOptions(
        conch_weights=args.conch_weights, conch_tokenizer=args.conch_tokenizer,
        conch_model=args.conch_model, conch_image_size=args.conch_image_size,
        uni2_weights=args.uni2_weights, uni2_model=args.uni2_model, ihc_weights=args.ihc_weights,
        ihc_options=ihc, device=args.device, image_root=args.image_root,
    )  # fmt: skip
    tools = ToolServer(options)
    for t in tools.tools.values():
        state = "available" if t.reason is None else f"unavailable: {t.reason}"
        print(f"tumorboard mcp: {t.name}: {state}", file=sys.stderr, flush=True)

    def ready(where: str) -> None:
        print(f"tumorboard mcp: serving on {where}", file=sys.stderr, flush=True)

    serve(tools, http_port=args.http, ready=ready)
    return 0
