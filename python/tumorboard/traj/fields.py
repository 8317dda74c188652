"""Benchmark fields: the per-item inputs of each scorer that the common items columns lack.

Every benchmark scorer (:mod:`tumorboard.score`) reads most of what it needs from the common
items and events columns (model, task, correct, response, the tool calls of the events, ...);
what is specific to one benchmark (RadA-BenchPlat's ground-truth tool chain, MedBench's
capability dimension, MedInsightBench's ground-truth insights, ...) is stored per item in the
``items.extra`` column, a JSON object with sorted keys. This module is the one list of those
fields and their types; the importers accept them (``tumorboard import jsonl --benchmark
radabench`` reads ``gt_tools`` from the records), the :class:`~tumorboard.traj.Recorder` takes
them as ``rec.item(..., extra={...})``, and ``tumorboard.score`` reads them back when it scores
a store. docs/trajectory-schema.md lists where every scorer column comes from.

Kinds (how a value is checked and stored):

==============  =================================================================
``str``         a string
``bool``        true or false
``int``         an integer
``number``      an integer or a float (stored as a float)
``flag``        true/false or a number in [0, 1] (stored as a float, true = 1.0)
``str_list``    a list of strings
``int_list``    a list of integers
``number_list`` a list of numbers
``bool_list``   a list of true/false
``matrix``      a list of equally long lists of numbers
``tool_calls``  a list of objects ``{name: str, input: any JSON, success: bool}``
                (``input`` is stored as JSON text unless it is a string)
==============  =================================================================
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .._json import json_text
from ..errors import InvalidArgumentError

__all__ = [
    "BENCHMARK_FIELDS",
    "KINDS",
    "REQUIRED_FIELDS",
    "check_value",
    "extra_fields",
    "polars_dtype",
]

KINDS = (
    "str", "bool", "int", "number", "flag", "str_list", "int_list", "number_list", "bool_list",
    "matrix", "tool_calls",
)  # fmt: skip

#: Benchmark -> {field: kind} of the fields stored in ``items.extra``.
BENCHMARK_FIELDS: dict[str, dict[str, str]] = {
    "mtbbench": {},
    "radabench": {
        "gt_tools": "str_list",
        "called_tools": "str_list",
        "plan_tools": "str_list",
        "called_tool_ids": "str_list",
        "candidate_tools": "str_list",
        "selection_ranks": "int_list",
        "selection_sizes": "int_list",
        "completed": "bool",
        "log": "str",
        "milestone": "str",
        "unsolvable": "bool",
        "missing_category": "str",
        "aware": "bool",
        "grounded": "bool",
        "reference_answer": "str",
    },
    "lammi": {
        "tool_calls": "tool_calls",
        "output_valid": "bool",
        "expected_tools": "str_list",
        "answer_consistency": "number",
        "hallucination": "flag",
    },
    "medinsight": {
        "gt_insights": "str_list",
        "insights": "str_list",
        "score_matrix": "matrix",
        "insight_precision_scores": "number_list",
        "insight_novelty_votes": "int_list",
    },
    "medbench": {
        "dimension": "str",
        "metric": "str",
        "item_group": "str",
        "pred_labels": "str_list",
        "gold_labels": "str_list",
        "keypoint_hits": "bool_list",
        "pred_box": "number_list",
        "gold_box": "number_list",
        "judge_output": "str",
        "score": "number",
    },
    "inspect": {
        "sample_id": "str",
        "epoch": "int",
        "eval_id": "str",
        "scorers": "str_list",
        "score_values": "number_list",
    },
}

#: Benchmark -> the fields every item needs to be scored (the import warns when records lack
#: them). "response" and "grade" stand for the items columns: the response text, and a grade
#: (``correct``, or a gold answer the response is graded against).
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "mtbbench": ("response", "grade"),
    "radabench": ("gt_tools",),
    "lammi": ("response",),
    "medinsight": ("gt_insights",),
    "medbench": ("dimension", "metric"),
    "inspect": ("scorers", "score_values"),
}


def extra_fields(benchmark: str | None) -> dict[str, str]:
    """Return the extra fields of a benchmark: {field: kind} (empty for other benchmarks).

    Parameters
    ----------
    benchmark : str or None
        The benchmark name, e.g. "radabench".

    Returns
    -------
    dict of str to str
        Field name -> kind.
    """
    return BENCHMARK_FIELDS.get(benchmark or "", {})


def _is_int(v: Any) -> bool:
    """Tell whether ``v`` is an int (not a bool)."""
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    """Tell whether ``v`` is a finite int or float (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _list_of(v: Any, ok: Any) -> bool:
    """Tell whether ``v`` is a list whose every element passes ``ok``."""
    return isinstance(v, list) and all(ok(x) for x in v)


def check_value(kind: str, value: Any) -> Any:
    """Check one extra-field value against its kind and return it as stored.

    Parameters
    ----------
    kind : str
        One of :data:`KINDS`.
    value : Any
        The value (not None).

    Returns
    -------
    Any
        The value to store: numbers as floats for ``number``/``flag``/``number_list``,
        tool-call inputs as text.

    Raises
    ------
    InvalidArgumentError
        The value does not fit the kind (a ValueError); the message says what was expected.
    """
    if kind == "str":
        if isinstance(value, str):
            return value
        raise InvalidArgumentError("expected a string")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        raise InvalidArgumentError("expected true or false")
    if kind == "int":
        if _is_int(value):
            return value
        raise InvalidArgumentError("expected an integer")
    if kind == "number":
        if _is_number(value):
            return float(value)
        raise InvalidArgumentError("expected a number")
    if kind == "flag":
        if isinstance(value, bool):
            return 1.0 if value else 0.0
        if _is_number(value) and 0.0 <= value <= 1.0:
            return float(value)
        raise InvalidArgumentError("expected true/false or a number in [0, 1]")
    if kind == "str_list":
        if _list_of(value, lambda x: isinstance(x, str)):
            return value
        raise InvalidArgumentError("expected a list of strings")
    if kind == "int_list":
        if _list_of(value, _is_int):
            return value
        raise InvalidArgumentError("expected a list of integers")
    if kind == "number_list":
        if _list_of(value, _is_number):
            return [float(x) for x in value]
        raise InvalidArgumentError("expected a list of numbers")
    if kind == "bool_list":
        if _list_of(value, lambda x: isinstance(x, bool)):
            return value
        raise InvalidArgumentError("expected a list of true/false")
    if kind == "matrix":
        if _list_of(value, lambda r: _list_of(r, _is_number)) and len({len(r) for r in value}) <= 1:
            return [[float(x) for x in r] for r in value]
        raise InvalidArgumentError("expected a list of equally long lists of numbers")
    if kind == "tool_calls":
        return _tool_calls(value)
    raise AssertionError(kind)  # pragma: no cover - the kinds are fixed


def _tool_calls(value: Any) -> list[dict[str, Any]]:
    """Check a list of ``{name, input, success}`` tool calls; inputs become text."""
    if not isinstance(value, list):
        raise InvalidArgumentError("expected a list of {name, input, success} objects")
    out = []
    for i, call in enumerate(value):
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise InvalidArgumentError(f"expected an object with a string 'name' at [{i}]")
        success = call.get("success")
        if success is not None and not isinstance(success, bool):
            raise InvalidArgumentError(f"expected true or false at [{i}].success")
        raw = call.get("input")
        text = raw if raw is None or isinstance(raw, str) else json_text(raw)
        out.append({"input": text, "name": call["name"], "success": success})
    return out


def polars_dtype(kind: str) -> Any:
    """Return the polars dtype an extra field of ``kind`` is read back as.

    Parameters
    ----------
    kind : str
        One of :data:`KINDS`.

    Returns
    -------
    polars.DataType
        The dtype (lists of strings are ``List(String)``, tool calls a list of
        ``Struct{name, input, success}``).
    """
    import polars as pl

    return {
        "str": pl.String,
        "bool": pl.Boolean,
        "int": pl.Int64,
        "number": pl.Float64,
        "flag": pl.Float64,
        "str_list": pl.List(pl.String),
        "int_list": pl.List(pl.Int64),
        "number_list": pl.List(pl.Float64),
        "bool_list": pl.List(pl.Boolean),
        "matrix": pl.List(pl.List(pl.Float64)),
        "tool_calls": pl.List(
            pl.Struct({"name": pl.String, "input": pl.String, "success": pl.Boolean})
        ),
    }[kind]
