"""JSON-lines logs: one JSON object per line, one question per object.

The format is for harnesses that log their own way.

Field mapping: every field below is read from the record key of the same name unless
``field_map`` maps it to another key; a dotted key (``meta.model``) reads nested objects.

========================  ====================================================================
run fields                ``run_id`` (default: derived), ``benchmark`` (default: the import's
                          ``benchmark`` or "jsonl"), ``track`` ("default"), ``model``
                          (required, or the import's ``model``), ``tools`` (False),
                          ``config`` (any JSON, stored as text)
item fields               ``patient_id``, ``item_id`` (default ``L<line>``), ``position``
                          (default: order of the patient's records in the run), ``task``
                          ("default"), ``question``, ``options`` (list of strings; default:
                          parsed from the question), ``gold`` (a letter, ``"C) text"`` or
                          free text), ``response``, ``parsed_answer``, ``correct`` (bool),
                          ``files_accessed``, ``files_hallucinated`` (lists of names),
                          ``latency_s``, ``attempts``, ``flags``
events                    ``events``: a list of objects with the events columns ``role``,
                          ``kind`` (message, thought, action, tool_call, observation,
                          file_access, answer, reprompt), ``tool``, ``input`` (any JSON),
                          ``output``, ``ok``, ``error``, ``latency_s``, ``step`` (default:
                          list order)
========================  ====================================================================

Where ``correct`` is absent it is graded: the answer parsed from ``response`` (or
``parsed_answer``) against the gold letter (``correct_source="graded"``, else "missing" with
the flag ``ungraded``). An import's ``model``/``benchmark``/``track`` override the records'.
A line that is not a JSON object or has a value of the wrong type is skipped and listed as a
warning ``file:line``; a file without any valid line is skipped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..._json import json_text
from ...errors import InvalidArgumentError
from ...harness.parsing import answer_letter, parse_answer, parse_options
from ..schema import EVENT_KINDS, output_text
from ._common import ImportOptions, MalformedLog, Parsed, dedupe, input_text, run_key

RUN_FIELDS = ("run_id", "benchmark", "track", "model", "tools", "config")
ITEM_FIELDS = (
    "patient_id",
    "item_id",
    "position",
    "task",
    "question",
    "options",
    "gold",
    "response",
    "parsed_answer",
    "correct",
    "files_accessed",
    "files_hallucinated",
    "latency_s",
    "attempts",
    "flags",
)
FIELDS = RUN_FIELDS + ITEM_FIELDS + ("events",)
_MISSING = object()


def discover(src: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Return the files to import: ``src`` itself, or every ``*.jsonl`` / ``*.ndjson`` under it.

    Hidden files and folders are left out. The second element (files skipped while
    discovering) is always empty for this format.
    """
    if src.is_file():
        return [src], []
    files = sorted(
        p
        for ext in ("*.jsonl", "*.ndjson")
        for p in src.rglob(ext)
        if not any(part.startswith(".") for part in p.relative_to(src).parts)
    )
    return files, []


def _get(record: Mapping[str, Any], key: str) -> Any:
    """Return the value at a dotted key of a record, or ``_MISSING``."""
    value: Any = record
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


class _Bad(InvalidArgumentError):
    """A record that cannot be imported; the line becomes a warning."""


def _str(value: Any, name: str, *, ids: bool = False) -> str | None:
    """Return a string field (with ``ids``, integers are converted); None stays None."""
    if value is None or isinstance(value, str):
        return value
    if ids and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise _Bad(f"{name!r} must be a string, got {json.dumps(value)[:40]}")


def _int(value: Any, name: str) -> int | None:
    """Return an integer field (not a bool); None stays None."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _Bad(f"{name!r} must be an integer, got {json.dumps(value)[:40]}")


def _float(value: Any, name: str) -> float | None:
    """Return a numeric field as a float (not a bool); None stays None."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise _Bad(f"{name!r} must be a number, got {json.dumps(value)[:40]}")


def _bool(value: Any, name: str) -> bool | None:
    """Return a boolean field; None stays None."""
    if value is None or isinstance(value, bool):
        return value
    raise _Bad(f"{name!r} must be true or false, got {json.dumps(value)[:40]}")


def _strs(value: Any, name: str) -> list[str] | None:
    """Return a list-of-strings field; None stays None."""
    if value is None:
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise _Bad(f"{name!r} must be a list of strings")


def parse(path: Path, raw: bytes, opts: ImportOptions) -> Parsed:
    """Parse one JSON-lines file into rows; bad lines become warnings.

    Parameters
    ----------
    path : pathlib.Path
        The file (named in warnings).
    raw : bytes
        Its content (UTF-8).
    opts : ImportOptions
        The import's options.

    Returns
    -------
    Parsed
        The runs, items and events rows, and the warnings.

    Raises
    ------
    MalformedLog
        The file has no valid record.
    InvalidArgumentError
        ``field_map`` names an unknown field.
    """
    unknown = [k for k in opts.field_map if k not in FIELDS]
    if unknown:
        raise InvalidArgumentError(
            f"field_map: unknown field {unknown[0]!r}; fields: {', '.join(FIELDS)}"
        )
    text = raw.decode("utf-8")
    out = Parsed()
    runs: dict[str, dict[str, Any]] = {}
    positions: dict[tuple[str, str | None], int] = {}
    n_lines = 0
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        n_lines += 1
        where = f"{path}:{lineno}"
        try:
            record = json.loads(line)
        except ValueError as exc:
            out.warnings.append((where, f"not valid JSON ({exc.args[0][:60]})"))
            continue
        if not isinstance(record, dict):
            out.warnings.append((where, "expected a JSON object"))
            continue
        try:
            run, item, events = _rows(record, lineno, opts, positions)
        except _Bad as exc:
            out.warnings.append((where, str(exc)))
            continue
        runs.setdefault(run["run_id"], run)
        out.items.append(item)
        out.events += events
    if not out.items:
        reason = "empty file" if n_lines == 0 else "no valid record (see warnings)"
        raise MalformedLog(
            reason
            if not out.warnings
            else f"no valid record; first problem: line {out.warnings[0][0].rsplit(':', 1)[1]}:"
            f" {out.warnings[0][1]}"
        )
    out.runs = list(runs.values())
    return out


def _rows(
    record: dict[str, Any],
    lineno: int,
    opts: ImportOptions,
    positions: dict[tuple[str, str | None], int],
) -> tuple[dict, dict, list[dict]]:
    """Return the run, item and event rows of one record (raises _Bad for a bad record)."""

    def get(name: str) -> Any:
        """Return a field through ``field_map`` (None when missing)."""
        value = _get(record, opts.field_map.get(name, name))
        return None if value is _MISSING else value

    model = opts.model or _str(get("model"), "model")
    if not model:
        raise _Bad("no model (give the record a 'model' or the import a model)")
    benchmark = opts.benchmark or _str(get("benchmark"), "benchmark") or "jsonl"
    track = opts.track or _str(get("track"), "track") or "default"
    tools = bool(_bool(get("tools"), "tools"))
    run_id = _str(get("run_id"), "run_id", ids=True) or run_key(
        benchmark, track, model, "tools" if tools else "no-tools", opts.run_name
    )
    config = get("config")
    run = {
        "run_id": run_id,
        "benchmark": benchmark,
        "track": track,
        "model": model,
        "tools": tools,
        "config": json_text(config) if config is not None else None,
        "created_at": None,
    }

    flags = list(_strs(get("flags"), "flags") or [])
    patient = _str(get("patient_id"), "patient_id", ids=True)
    item_id = _str(get("item_id"), "item_id", ids=True) or f"L{lineno}"
    position = _int(get("position"), "position")
    key = (run_id, patient)
    if position is None:
        position = positions.get(key, 0)
    positions[key] = position + 1
    question = _str(get("question"), "question")
    options = _strs(get("options"), "options")
    if options is None and question:
        options = list(parse_options(question)) or None
    gold_raw = get("gold")
    if gold_raw is not None and not isinstance(gold_raw, str):
        gold_raw = json_text(gold_raw)
    gold = answer_letter(gold_raw) if gold_raw is not None else None
    gold_text = gold_raw if gold is not None and gold_raw != gold else None
    if gold is None:
        gold = gold_raw
    response = _str(get("response"), "response")
    parsed = _str(get("parsed_answer"), "parsed_answer")
    if parsed is None and response is not None:
        parsed = parse_answer(response, options=options).letter
    correct = _bool(get("correct"), "correct")
    if correct is not None:
        source = "log"
    elif gold is not None and (parsed is not None or response is not None):
        correct, source = parsed is not None and parsed == gold, "graded"
    else:
        source = "missing"
        flags.append("ungraded")
    accessed = _strs(get("files_accessed"), "files_accessed")
    hallucinated = _strs(get("files_hallucinated"), "files_hallucinated")
    if accessed is not None:
        accessed, dup = dedupe(accessed)
        if dup:
            flags.append("duplicate_files_accessed")
    if hallucinated is not None:
        hallucinated, dup = dedupe(hallucinated)
        if dup:
            flags.append("duplicate_files_hallucinated")
    item = {
        "run_id": run_id,
        "patient_id": patient,
        "item_id": item_id,
        "position": position,
        "task": _str(get("task"), "task") or "default",
        "question": question,
        "options": options,
        "gold": gold,
        "gold_text": gold_text,
        "response": response,
        "parsed_answer": parsed,
        "correct": correct,
        "correct_source": source,
        "n_files": len(accessed) if accessed is not None else None,
        "files_accessed": accessed,
        "files_hallucinated": hallucinated,
        "latency_s": _float(get("latency_s"), "latency_s"),
        "attempts": _int(get("attempts"), "attempts"),
        "flags": flags,
    }
    events = []
    raw_events = get("events")
    if raw_events is not None:
        if not isinstance(raw_events, list):
            raise _Bad("'events' must be a list of objects")
        for step, e in enumerate(raw_events):
            if not isinstance(e, dict):
                raise _Bad(f"events[{step}] must be an object")
            kind = e.get("kind")
            if kind not in EVENT_KINDS:
                raise _Bad(f"events[{step}].kind must be one of {', '.join(EVENT_KINDS)}")
            output = e.get("output")
            events.append(
                {
                    "run_id": run_id,
                    "patient_id": patient,
                    "item_id": item_id,
                    "step": _int(e.get("step", step), f"events[{step}].step"),
                    "role": _str(e.get("role"), f"events[{step}].role"),
                    "kind": kind,
                    "tool": _str(e.get("tool"), f"events[{step}].tool"),
                    "input": input_text(e.get("input")),
                    "output": output_text(output),
                    "ok": _bool(e.get("ok"), f"events[{step}].ok"),
                    "error": _str(e.get("error"), f"events[{step}].error"),
                    "latency_s": _float(e.get("latency_s"), f"events[{step}].latency_s"),
                }
            )
    return run, item, events
