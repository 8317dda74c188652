"""JSON-schema descriptions of the tools, usable as OpenAI / Anthropic function tools.

Each schema has ``name``, ``description`` and ``parameters`` (a JSON Schema object) covering the
arguments an agent supplies; the model arguments (``model``, ``encoder``, ``regressor``) are bound
by the harness. :func:`openai_tool` and :func:`anthropic_tool` wrap a schema in each API's format.
"""

from __future__ import annotations

import copy
from typing import Any

from ..errors import InvalidArgumentError

_IMAGE = {
    "type": "string",
    "description": "Path or file name of the image (PNG, JPEG or TIFF) to analyse.",
}

CONCH_ZERO_SHOT_SCHEMA: dict[str, Any] = {
    "name": "conch_zero_shot",
    "description": (
        "Classify an H&E region of interest zero-shot with the CONCH pathology vision-language "
        "model: returns the most similar of the given labels, its probability and a confidence "
        "bin (very low, low, medium, high, very high). CONCH is not perfect; use your own "
        "reasoning too."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "image": _IMAGE,
            "labels": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "minItems": 1,
                "description": "Candidate labels, e.g. ['adenocarcinoma', 'normal mucosa'].",
            },
        },
        "required": ["image", "labels"],
        "additionalProperties": False,
    },
}

IHC_POSITIVE_PERCENTAGE_SCHEMA: dict[str, Any] = {
    "name": "ihc_positive_percentage",
    "description": (
        "Estimate the percentage of positively stained cells in an immunohistochemistry (IHC) "
        "image with a UNI2-h foundation-model embedding and an attention-MIL regressor "
        "(MTBBench's IHC tool). Returns a number in [0, 100]."
    ),
    "parameters": {
        "type": "object",
        "properties": {"image": _IMAGE},
        "required": ["image"],
        "additionalProperties": False,
    },
}

DAB_POSITIVE_FRACTION_SCHEMA: dict[str, Any] = {
    "name": "dab_positive_fraction",
    "description": (
        "Classical baseline without model weights: separate haematoxylin, eosin and DAB by "
        "colour deconvolution (Ruifrok & Johnston) and return the fraction of the tissue area "
        "of an IHC image that is DAB-positive (brown), as a fraction and a percentage."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "image": _IMAGE,
            "dab_threshold": {
                "type": "number",
                "minimum": 0,
                "default": 0.15,
                "description": "DAB optical density at or above which a pixel is positive.",
            },
            "tissue_threshold": {
                "type": "number",
                "minimum": 0,
                "default": 0.15,
                "description": "Total optical density at or above which a pixel is tissue.",
            },
        },
        "required": ["image"],
        "additionalProperties": False,
    },
}

TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    s["name"]: s
    for s in (CONCH_ZERO_SHOT_SCHEMA, IHC_POSITIVE_PERCENTAGE_SCHEMA, DAB_POSITIVE_FRACTION_SCHEMA)
}


def _schema(tool: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(tool, dict):
        return tool
    if tool not in TOOL_SCHEMAS:
        raise InvalidArgumentError(f"unknown tool {tool!r}; expected one of {sorted(TOOL_SCHEMAS)}")
    return TOOL_SCHEMAS[tool]


def openai_tool(tool: str | dict[str, Any]) -> dict[str, Any]:
    """Return a tool as an OpenAI Chat Completions function tool.

    Parameters
    ----------
    tool : str or dict
        A tool name (a key of :data:`TOOL_SCHEMAS`) or a schema.

    Returns
    -------
    dict
        ``{"type": "function", "function": {name, description, parameters}}``.
    """
    return {"type": "function", "function": copy.deepcopy(_schema(tool))}


def anthropic_tool(tool: str | dict[str, Any]) -> dict[str, Any]:
    """Return a tool as an Anthropic Messages API tool.

    Parameters
    ----------
    tool : str or dict
        A tool name (a key of :data:`TOOL_SCHEMAS`) or a schema.

    Returns
    -------
    dict
        ``{name, description, input_schema}``.
    """
    s = _schema(tool)
    return {
        "name": s["name"],
        "description": s["description"],
        "input_schema": copy.deepcopy(s["parameters"]),
    }
