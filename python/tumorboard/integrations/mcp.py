"""The agent tools as a Model Context Protocol server (``tumorboard mcp``).

The Model Context Protocol (MCP, https://modelcontextprotocol.io, specification 2025-06-18:
"Tools") is how agent runtimes discover tools (``tools/list``: name, description, JSON Schema of
the input) and call them (``tools/call``: a result, or a result with ``isError`` that the model
reads). This server is built on the official Python SDK (``mcp``, its low-level ``Server``)
and exposes the three agent tools of :mod:`tumorboard.tools` with their JSON schemas
(:data:`tumorboard.tools.TOOL_SCHEMAS`):

* ``conch_zero_shot``: needs the CONCH checkpoint and its tokenizer (``--conch-weights``,
  ``--conch-tokenizer``);
* ``ihc_positive_percentage``: needs the UNI2-h checkpoint and MTBBench's ABMIL regressor
  (``--uni2-weights``, ``--ihc-weights``);
* ``dab_positive_fraction``: the colour-deconvolution baseline, needs no weights.

Weights are loaded once, when the server starts (a checkpoint that does not load is an error
then, not at the first call). A tool whose weights were not given is still listed, its
description starting with "UNAVAILABLE: <reason>" and ``_meta`` ``{"tumorboard/available":
false, "tumorboard/reason": ...}``, and a call answers with that reason as a tool error: it
never answers from random weights.

Images are passed as ``image`` (a file path; with ``image_root`` only paths inside that folder)
or ``image_base64`` (the PNG, JPEG or TIFF file's bytes, base64-encoded; at most
:data:`MAX_IMAGE_BYTES`; an image file too; at most :data:`MAX_IMAGE_PIXELS` pixels, read from
the header before decoding). Bad arguments (a missing or unknown argument, a wrong type, a file that
does not exist or is not an image) give a tool error naming the argument, and the server keeps
serving. Results are the tool's reply sentence as text and its fields as structured content.

Transports: stdio (the default; nothing but protocol messages goes to standard output) and
streamable HTTP on a loopback port (``--http PORT``; 127.0.0.1 only, with the SDK's DNS
rebinding protection; port 0 picks a free one, printed on standard error).
"""

from __future__ import annotations

import base64
import binascii
import copy
import io
import math
import os
import reprlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, MissingDependencyError, MissingFileError, TumorboardError
from ..tools import TOOL_SCHEMAS, conch_zero_shot, dab_positive_fraction, ihc_positive_percentage

try:
    import mcp_types as types
    from mcp.server.lowlevel import Server
except ImportError as _exc:  # pragma: no cover - exercised where mcp is absent
    raise MissingDependencyError.for_extra(
        "tumorboard mcp", package="mcp", extra="mcp", cause=_exc
    ) from None

__all__ = [
    "MAX_IMAGE_BYTES",
    "MAX_IMAGE_PIXELS",
    "McpOptions",
    "ToolServer",
    "build_server",
    "serve",
]

#: Largest decoded ``image_base64`` or image file accepted (bytes).
MAX_IMAGE_BYTES = 64 * 1024 * 1024
#: Largest image accepted, in pixels (checked from the header, before any pixel is decoded):
#: 8192 x 8192, far above a tool's region of interest, and 192 MiB as RGB.
MAX_IMAGE_PIXELS = 8192 * 8192
SERVER_NAME = "tumorboard"
_LOOPBACK = "127.0.0.1"


@dataclass(frozen=True, kw_only=True)
class McpOptions:
    """What the server loads at start.

    Attributes
    ----------
    conch_weights, conch_tokenizer : str or os.PathLike or None
        The CONCH checkpoint (``pytorch_model.bin``) and tokenizer JSON; both or the tool is
        unavailable.
    conch_model : str, default "conch"
        The CONCH configuration ("conch", or "conch-tiny" for tests).
    conch_image_size : int or None
        CONCH's input size (None: the configuration's; MTBBench uses 1024).
    uni2_weights, ihc_weights : str or os.PathLike or None
        The UNI2-h checkpoint and MTBBench's ABMIL regressor checkpoint; both or the tool is
        unavailable.
    uni2_model : str, default "uni2-h"
        The patch encoder ("uni2-h", or "uni2-tiny" for tests).
    ihc_options : mapping
        Options of the regressor (``tumorboard.models.load("mtbbench-regressor", ...)``;
        default MTBBench's, with ``in_dim`` from the encoder).
    device : str, default "auto"
        Where the models run.
    image_root : str or os.PathLike or None
        When set, ``image`` paths must lie inside this folder (relative paths are taken
        from it).
    """

    conch_weights: str | os.PathLike[str] | None = None
    conch_tokenizer: str | os.PathLike[str] | None = None
    conch_model: str = "conch"
    conch_image_size: int | None = None
    uni2_weights: str | os.PathLike[str] | None = None
    uni2_model: str = "uni2-h"
    ihc_weights: str | os.PathLike[str] | None = None
    ihc_options: Mapping[str, Any] = field(default_factory=dict)
    device: str = "auto"
    image_root: str | os.PathLike[str] | None = None


@dataclass
class _Tool:
    """One served tool: its schema, whether it can answer, and how."""

    name: str
    schema: dict[str, Any]
    reason: str | None  # None: available
    run: Callable[[dict[str, Any], np.ndarray, str | None], Any] | None = None


def _input_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Return a tool's parameters with ``image_base64`` beside ``image`` (one of them needed)."""
    params = copy.deepcopy(dict(schema["parameters"]))
    props = params["properties"]
    props["image"] = dict(props["image"])
    props["image"]["description"] = (
        "Path of the image file (PNG, JPEG or TIFF) on the server's machine; or give image_base64."
    )
    props["image_base64"] = {
        "type": "string",
        "contentEncoding": "base64",
        "description": "The image file's bytes (PNG, JPEG or TIFF), base64-encoded; instead of "
        "image.",
    }
    params["required"] = [r for r in params.get("required", []) if r != "image"]
    params["oneOf"] = [{"required": ["image"]}, {"required": ["image_base64"]}]
    return params


#: The file options of :class:`McpOptions` and their ``tumorboard mcp`` flags.
_FILE_OPTIONS = {
    "conch_weights": "--conch-weights",
    "conch_tokenizer": "--conch-tokenizer",
    "uni2_weights": "--uni2-weights",
    "ihc_weights": "--ihc-weights",
}


def _check_given_files(options: McpOptions) -> None:
    """Refuse, at start, a checkpoint or tokenizer path that was given but is not a file.

    Each given path is checked, also when its partner flag is missing and the tool would be
    listed as unavailable, so a mistyped path never goes unnoticed until the first call.
    """
    for key, flag in _FILE_OPTIONS.items():
        value = getattr(options, key)
        if value is not None and not Path(value).is_file():
            what = "is a folder, not a file" if Path(value).is_dir() else "no such file"
            raise MissingFileError(f"{flag} ({key}): {what}: {value}")


class ToolServer:
    """The tools with their loaded models, and the MCP request handlers over them.

    Parameters
    ----------
    options : McpOptions, optional
        What to load (default: nothing; only ``dab_positive_fraction`` is available).

    Raises
    ------
    tumorboard.models.WeightsError, MissingFileError, InvalidArgumentError
        A checkpoint or tokenizer that was given does not exist (checked first, for every
        given path, also when the tool's other file is missing) or does not load.
    MissingDependencyError
        Weights were given but torch (``tumorboard[embed]``) is not installed.
    """

    def __init__(self, options: McpOptions | None = None) -> None:
        self.options = options or McpOptions()
        self._lock = threading.Lock()  # one model call at a time
        self.tools: dict[str, _Tool] = {}
        _check_given_files(self.options)
        self._add_conch()
        self._add_ihc()
        self.tools["dab_positive_fraction"] = _Tool(
            "dab_positive_fraction",
            TOOL_SCHEMAS["dab_positive_fraction"],
            None,
            lambda args, rgb, name: dab_positive_fraction(
                rgb,
                dab_threshold=args.get("dab_threshold", 0.15),
                tissue_threshold=args.get("tissue_threshold", 0.15),
                name=name,
            ),
        )

    # ------------------------------------------------------------------ loading

    def _models(self) -> Any:
        """Import tumorboard.models (needs torch)."""
        try:
            from .. import models
        except ImportError as exc:
            raise MissingDependencyError.for_extra(
                "tumorboard mcp with model weights", package="torch", extra="embed", cause=exc
            ) from None
        return models

    def _unavailable(self, name: str, given: tuple[tuple[str, Any], ...], what: str) -> bool:
        """List tool ``name`` as unavailable when a flag of ``given`` was not passed.

        ``given`` holds (flag, value) pairs and ``what`` says what the flags load. Returns True
        when the tool was listed so.
        """
        missing = [f for f, v in given if v is None]
        if missing:
            self.tools[name] = _Tool(
                name, TOOL_SCHEMAS[name],
                f"the server was started without {' and '.join(missing)} ({what}); it does not "
                "answer from random weights",
            )  # fmt: skip
        return bool(missing)

    def _add_conch(self) -> None:
        o = self.options
        schema = TOOL_SCHEMAS["conch_zero_shot"]
        given = (("--conch-weights", o.conch_weights), ("--conch-tokenizer", o.conch_tokenizer))
        if self._unavailable("conch_zero_shot", given, "the CONCH checkpoint and its tokenizer"):
            return
        model = self._models().load_conch(
            o.conch_model, weights=o.conch_weights, tokenizer=o.conch_tokenizer, device=o.device,
            image_size=o.conch_image_size,
        )  # fmt: skip

        def run(args: dict[str, Any], rgb: np.ndarray, name: str | None) -> Any:
            labels = args["labels"]
            return conch_zero_shot(rgb, labels, model=model)

        self.tools["conch_zero_shot"] = _Tool("conch_zero_shot", schema, None, run)

    def _add_ihc(self) -> None:
        o = self.options
        schema = TOOL_SCHEMAS["ihc_positive_percentage"]
        given = (("--uni2-weights", o.uni2_weights), ("--ihc-weights", o.ihc_weights))
        what = "the UNI2-h encoder and MTBBench's ABMIL regressor"
        if self._unavailable("ihc_positive_percentage", given, what):
            return
        models = self._models()
        encoder = models.load(o.uni2_model, weights=o.uni2_weights, device=o.device)
        opts = {"in_dim": encoder.embed_dim, **dict(o.ihc_options)}
        regressor = models.load("mtbbench-regressor", weights=o.ihc_weights, device=o.device,
                                **opts)  # fmt: skip

        def run(args: dict[str, Any], rgb: np.ndarray, name: str | None) -> Any:
            return ihc_positive_percentage(rgb, encoder=encoder, regressor=regressor, name=name)

        self.tools["ihc_positive_percentage"] = _Tool("ihc_positive_percentage", schema, None, run)

    # ------------------------------------------------------------------ MCP

    def list_tools(self) -> list[types.Tool]:
        """Return the MCP descriptions of the tools (unavailable ones say why).

        Returns
        -------
        list of mcp_types.Tool
            One per tool, with its JSON Schema and ``_meta`` availability.
        """
        out = []
        for t in self.tools.values():
            desc = t.schema["description"]
            if t.reason is not None:
                desc = f"UNAVAILABLE: {t.reason}. {desc}"
            out.append(
                types.Tool(
                    name=t.name,
                    description=desc,
                    input_schema=_input_schema(t.schema),
                    annotations=types.ToolAnnotations(
                        read_only_hint=True, idempotent_hint=True, open_world_hint=False
                    ),
                    meta={
                        "tumorboard/available": t.reason is None,
                        "tumorboard/reason": t.reason,
                    },  # fmt: skip
                )
            )
        return out

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> types.CallToolResult:
        """Run one tool call; every failure becomes a tool error result, never an exception.

        Parameters
        ----------
        name : str
            The tool.
        arguments : mapping or None
            The call's arguments.

        Returns
        -------
        mcp_types.CallToolResult
            The reply sentence as text and the result's fields as structured content, or
            ``is_error`` with one line naming what was wrong.
        """
        tool = self.tools.get(name)
        if tool is None:
            return _error(f"unknown tool {name!r}; tools: {', '.join(self.tools)}")
        if tool.reason is not None:
            return _error(f"{name} is unavailable: {tool.reason}")
        try:
            args = _check_arguments(tool.schema, arguments)
            rgb, label = self._image(args)
            with self._lock:
                result = tool.run(args, rgb, label)  # type: ignore[misc]
        except (TumorboardError, OSError, ImportError) as exc:
            return _error(f"{name}: {exc}")
        except Exception as exc:  # a bug: report it, keep serving
            return _error(f"{name}: internal error {type(exc).__name__}: {exc}")
        fields = _jsonable(asdict(result) if is_dataclass(result) else result)
        reply = fields.get("reply") if isinstance(fields, dict) else None
        text = reply if isinstance(reply, str) else str(fields)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=fields if isinstance(fields, dict) else {"result": fields},
        )

    def _image(self, args: Mapping[str, Any]) -> tuple[np.ndarray, str | None]:
        """Return the RGB array of ``image`` or ``image_base64`` and the name for the reply."""
        try:
            from PIL import Image, UnidentifiedImageError
        except ImportError as exc:
            raise MissingDependencyError.for_extra(
                "reading tool images", package="pillow", extra="slides", cause=exc
            ) from None

        has_path, has_b64 = "image" in args, "image_base64" in args
        if has_path == has_b64:
            raise InvalidArgumentError("give exactly one of 'image' (a path) or 'image_base64'")
        if has_b64:
            text = args["image_base64"]
            if len(text) > (MAX_IMAGE_BYTES * 4) // 3 + 4:
                raise InvalidArgumentError(
                    f"image_base64: larger than {MAX_IMAGE_BYTES // (1 << 20)} MiB"
                )
            try:
                raw = base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise InvalidArgumentError(f"image_base64: not valid base64 ({exc})") from None
            source: Any = io.BytesIO(raw)
            label = None
            where = "image_base64"
        else:
            path = self._path(args["image"])
            source, label, where = path, path.name, f"image {str(path)!r}"
            size = path.stat().st_size
            if size > MAX_IMAGE_BYTES:
                raise InvalidArgumentError(
                    f"{where}: {size:,} bytes, larger than {MAX_IMAGE_BYTES // (1 << 20)} MiB"
                )
        try:
            with Image.open(source) as im:
                w, h = im.size
                if w * h > MAX_IMAGE_PIXELS:
                    raise InvalidArgumentError(
                        f"{where}: {w} x {h} pixels, more than the {MAX_IMAGE_PIXELS:,} a tool "
                        "image may have (crop the region of interest)"
                    )
                rgb = np.asarray(im.convert("RGB"))
        except Image.DecompressionBombError as exc:  # a bad input, not an internal error
            raise InvalidArgumentError(f"{where}: image too large to decode ({exc})") from None
        except (UnidentifiedImageError, OSError) as exc:
            raise InvalidArgumentError(f"{where}: not a readable image ({exc})") from None
        return rgb, label

    def _path(self, value: str) -> Path:
        """Resolve an ``image`` path (inside ``image_root`` when one is set)."""
        root = self.options.image_root
        p = Path(value).expanduser()
        if root is not None:
            base = Path(root).resolve()
            p = (base / p).resolve() if not p.is_absolute() else p.resolve()
            if base != p and base not in p.parents:
                raise InvalidArgumentError(
                    f"image: {value!r} is outside the server's image folder {str(base)!r}"
                )
        if not p.is_file():
            raise MissingFileError(f"image: no such file: {value!r}")
        return p


def _error(message: str) -> types.CallToolResult:
    """Return a tool error result with one line of text."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )


_JSON_TYPES = {"string": str, "array": list, "object": dict, "boolean": bool}


def _check_arguments(schema: Mapping[str, Any], arguments: Any) -> dict[str, Any]:
    """Check call arguments against a tool's JSON Schema (the subset the tools use).

    Raises InvalidArgumentError naming the argument: unknown, missing, wrong type, a number
    below its minimum, an array shorter than ``minItems`` or with a wrong item.
    """
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise InvalidArgumentError(
            f"arguments: expected a JSON object, got {type(arguments).__name__}"
        )
    params = schema["parameters"]
    props = dict(params["properties"])
    props["image_base64"] = {"type": "string"}
    unknown = sorted(set(arguments) - set(props))
    if unknown:
        raise InvalidArgumentError(
            f"unknown argument(s) {', '.join(map(repr, unknown))}; arguments: {', '.join(props)}"
        )
    for req in params.get("required", []):
        if req == "image":
            continue
        if req not in arguments:
            raise InvalidArgumentError(f"missing argument {req!r}")
    out = dict(arguments)
    for name, value in arguments.items():
        spec = props[name]
        _check_value(name, spec, value)
    return out


def _check_value(name: str, spec: Mapping[str, Any], value: Any) -> None:
    """Check one argument value against its property schema."""
    kind = spec.get("type")
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidArgumentError(f"argument {name!r}: expected a number, got {value!r}")
        try:  # JSON allows 1e400-digit integers and, in Python's parser, NaN and Infinity
            finite = math.isfinite(float(value))
        except OverflowError:
            finite = False
        if not finite:
            raise InvalidArgumentError(
                f"argument {name!r}: expected a finite number, got {reprlib.repr(value)}"
            )
        if "minimum" in spec and value < spec["minimum"]:
            raise InvalidArgumentError(
                f"argument {name!r}: expected a number >= {spec['minimum']}, got {value!r}"
            )
        return
    typ = _JSON_TYPES.get(kind or "")
    if typ is not None and not isinstance(value, typ):
        raise InvalidArgumentError(
            f"argument {name!r}: expected {'an' if kind in ('array', 'object') else 'a'} "
            f"{kind}, got {type(value).__name__}"
        )
    if kind == "string" and spec.get("minLength") and len(value) < spec["minLength"]:
        raise InvalidArgumentError(f"argument {name!r}: expected a non-empty string")
    if kind == "array":
        if len(value) < spec.get("minItems", 0):
            raise InvalidArgumentError(
                f"argument {name!r}: expected at least {spec['minItems']} item(s)"
            )
        items = spec.get("items")
        if items:
            for i, v in enumerate(value):
                _check_value(f"{name}[{i}]", items, v)


def _jsonable(value: Any) -> Any:
    """Return a value with numpy scalars/arrays and tuples turned into JSON types."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def build_server(tools: ToolServer | McpOptions | None = None) -> Server[Any]:
    """Return the MCP server (the SDK's low-level ``Server``) over the tools.

    Parameters
    ----------
    tools : ToolServer or McpOptions, optional
        The loaded tools, or the options to load them with (default: no weights).

    Returns
    -------
    mcp.server.lowlevel.Server
        The server; run it with :func:`serve`, or connect ``mcp.Client(server)`` to it in
        the same process.
    """
    ts = tools if isinstance(tools, ToolServer) else ToolServer(tools)

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=ts.list_tools())

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        import anyio.to_thread

        return await anyio.to_thread.run_sync(ts.call, params.name, params.arguments)

    from .. import __version__

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions="Pathology agent tools: CONCH zero-shot ROI labels, IHC positive-cell "
        "percentage (UNI2-h + ABMIL), DAB-positive area fraction. Tools listed as UNAVAILABLE "
        "were not given their weights.",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


def serve(
    tools: ToolServer | McpOptions | None = None,
    *,
    http_port: int | None = None,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the tools over stdio, or streamable HTTP on 127.0.0.1, until stopped.

    Parameters
    ----------
    tools : ToolServer or McpOptions, optional
        As :func:`build_server`.
    http_port : int, optional
        Serve streamable HTTP at ``http://127.0.0.1:PORT/mcp`` (0: a free port); None: stdio.
    ready : callable, optional
        Called with the URL (HTTP) or "stdio" once the server listens.

    Raises
    ------
    InvalidArgumentError
        A port outside 0..65535.
    OSError
        The port cannot be bound.
    """
    import anyio

    server = build_server(tools)
    if http_port is None:
        from mcp.server.stdio import stdio_server

        async def run_stdio() -> None:
            async with stdio_server() as (read, write):
                if ready is not None:
                    ready("stdio")
                await server.run(read, write, server.create_initialization_options())

        anyio.run(run_stdio)
        return
    if isinstance(http_port, bool) or not isinstance(http_port, int) or not 0 <= http_port < 65536:
        raise InvalidArgumentError(f"http_port: expected a port in 0..65535, got {http_port!r}")
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((_LOOPBACK, http_port))
    port = sock.getsockname()[1]
    url = f"http://{_LOOPBACK}:{port}/mcp"
    app = server.streamable_http_app(host=_LOOPBACK)
    config = uvicorn.Config(app, host=_LOOPBACK, port=port, log_level="warning", lifespan="on")
    userver = uvicorn.Server(config)

    async def run_http() -> None:
        if ready is not None:
            ready(url)
        await userver.serve(sockets=[sock])

    try:
        anyio.run(run_http)
    finally:
        sock.close()
