"""JSON-lines importer: the fields a record is read for, their kinds and the checks of values.

The field names and their order (:data:`RUN_FIELDS`, :data:`ITEM_FIELDS`, :data:`FIELDS`),
the other names harnesses give them (:data:`FIELD_ALIASES`) and which one a file's records use,
``--map`` (:func:`check_field_map`), the dotted-key lookup, and the check of every record value
against its field's kind (an event list included); a value that fails is a :class:`_Bad` record,
rejected alone. Used by :mod:`.jsonl` and its readers (:mod:`._jsonl_read`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..._json import json_text, load_json
from ...errors import InvalidArgumentError
from ..fields import BENCHMARK_FIELDS, check_value, extra_fields
from ..schema import EVENT_KINDS, output_text, schema_of
from ._common import ImportOptions, Parsed, input_text

RUN_FIELDS = ("run_id", "benchmark", "track", "model", "tools", "config")
#: Columns of the items table the importer computes rather than reads from a record: the
#: reference's text (``gold_text``), where ``correct`` came from (``correct_source``), the file
#: count (``n_files``), the benchmark-specific ``extra`` struct, and the record's ``source`` and
#: ``digest``. ``run_id`` is a run field (:data:`RUN_FIELDS`).
COMPUTED_ITEM_COLUMNS = ("gold_text", "correct_source", "n_files", "extra", "source", "digest")
#: The item fields a record is read for: the items table's columns (``schema_of("items")``, the
#: single source of their names and order) less the run fields and the computed columns.
ITEM_FIELDS = tuple(
    name
    for name in schema_of("items").names
    if name not in RUN_FIELDS and name not in COMPUTED_ITEM_COLUMNS
)
FIELDS = RUN_FIELDS + ITEM_FIELDS + ("events",)
_ALL_EXTRA = {f: k for fields in BENCHMARK_FIELDS.values() for f, k in fields.items()}

#: Other names harnesses give the fields, tried in this order when a file's records lack the
#: field's own key and ``--map`` does not map it: the first alias the sampled records carry is
#: read as the field, and the import says so (warning naming both keys). ``id`` comes last
#: for the item id (a per-request id would be ``request_id``); ``answer``, which is as often
#: the model's free text as the reference, is not here.
FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "correct": ("is_correct", "correctness", "is_right", "score_correct"),
    "gold": ("target", "ground_truth", "gt_answer", "answer_key", "expected", "reference",
             "gold_answer", "correct_answer", "label"),
    "response": ("output", "prediction", "pred", "completion", "model_output",
                 "model_response", "generation"),
    "parsed_answer": ("predicted_answer", "pred_answer", "extracted_answer"),
    "question": ("prompt", "query", "input_text"),
    "item_id": ("question_id", "qid", "sample_id", "doc_id", "id"),
    "patient_id": ("case_id", "patient"),
}  # fmt: skip
_MISSING = object()
_KEYS_SAMPLE = 1000
_ALIAS_SAMPLE = 200  # records whose keys decide the field aliases of a file
_IDS = ("run_id", "patient_id", "item_id")
# field -> kind, for the common fields (ids accept integers, "json" is any JSON value)
_KIND = {
    "run_id": "id", "benchmark": "str", "track": "str", "model": "str", "tools": "bool",
    "config": "json", "patient_id": "id", "item_id": "id", "position": "int32", "task": "str",
    "question": "str", "options": "str_list", "gold": "gold", "response": "str",
    "parsed_answer": "str", "correct": "bool", "files_accessed": "str_list",
    "files_hallucinated": "str_list", "latency_s": "number", "attempts": "int32",
    "flags": "str_list", "events": "json",
}  # fmt: skip
_EXPECT = {
    "id": "a string", "str": "a string", "bool": "true or false", "int": "an integer",
    "int32": "a 32-bit integer",
    "number": "a number", "str_list": "a list of strings",
}  # fmt: skip


def known_fields(benchmark: str | None) -> tuple[str, ...]:
    """Return the fields a record may carry for ``benchmark`` (every benchmark's when None).

    Parameters
    ----------
    benchmark : str or None
        The import's benchmark.

    Returns
    -------
    tuple of str
        The common fields, then the benchmark fields.
    """
    extra = _ALL_EXTRA if benchmark is None else extra_fields(benchmark)
    return FIELDS + tuple(extra)


def check_field_map(field_map: Mapping[str, str], benchmark: str | None) -> None:
    """Check that ``field_map`` maps known fields to non-empty keys.

    Parameters
    ----------
    field_map : mapping of str to str
        Field -> record key.
    benchmark : str or None
        The import's benchmark (its fields are allowed too).

    Raises
    ------
    InvalidArgumentError
        An unknown field or an empty key.
    """
    allowed = known_fields(benchmark)
    for name, key in field_map.items():
        if name not in allowed:
            which = f" for benchmark {benchmark!r}" if benchmark else ""
            raise InvalidArgumentError(
                f"field_map: unknown field {name!r}{which}; fields: {', '.join(allowed)}"
            )
        if not isinstance(key, str) or not key or any(not p for p in key.split(".")):
            raise InvalidArgumentError(
                f"field_map: field {name!r} maps to {key!r}; expected a record key such as "
                "'answer' or 'meta.answer'"
            )


_I32 = (-(2**31), 2**31 - 1)


class _Bad(InvalidArgumentError):
    """A record that cannot be imported; the line becomes a warning."""


def _kind_of(name: str) -> str:
    """Return the kind of a field (common or benchmark field, or an ``--item-key`` key)."""
    if name.startswith("_key:"):
        return "json"
    return _KIND.get(name) or _ALL_EXTRA[name]


def _check(name: str, kind: str, value: Any) -> Any:
    """Check one record value of field ``name``; return it as stored (raises _Bad)."""
    if value is None:
        return None
    if kind == "id":
        if isinstance(value, str):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        raise _Bad(f"{name!r}: expected a string, got {json.dumps(value)[:40]}")
    if kind == "json":
        return value
    if kind == "gold":
        return value if isinstance(value, str) else json_text(value)
    if kind == "int32":
        if isinstance(value, int) and not isinstance(value, bool) and _I32[0] <= value <= _I32[1]:
            return value
        what = "an integer in [-2**31, 2**31 - 1]"
        raise _Bad(f"{name!r}: expected {what}, got {json.dumps(value, default=str)[:40]}")
    try:
        return check_value(kind, value)
    except ValueError as exc:
        raise _Bad(f"{name!r}: {exc}, got {json.dumps(value, default=str)[:40]}") from None


def _get(record: Mapping[str, Any], key: str) -> Any:
    """Return the value at a dotted key of a record, or ``_MISSING``."""
    if "." not in key:
        return record.get(key, _MISSING)
    value: Any = record
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _fields(opts: ImportOptions) -> list[str]:
    """Return the fields read from the records (the import's forced fields are not read)."""
    forced = {"model": opts.model, "benchmark": opts.benchmark, "track": opts.track}
    extra = _ALL_EXTRA if opts.benchmark is None else extra_fields(opts.benchmark)
    keyed = [_key_field(k) for k in opts.item_key]
    return [f for f in (*FIELDS, *extra) if not forced.get(f)] + keyed


def _events(raw_events: Any) -> list[dict[str, Any]] | None:
    """Check a record's ``events`` list and return its event rows (without the item keys)."""
    if raw_events is None:
        return None
    if not isinstance(raw_events, list):
        raise _Bad(
            f"'events': expected a list of objects, got {json.dumps(raw_events, default=str)[:40]}"
        )
    out = []
    for step, e in enumerate(raw_events):
        if not isinstance(e, dict):
            raise _Bad(f"events[{step}]: expected an object, got {json.dumps(e, default=str)[:40]}")
        kind = e.get("kind")
        if kind not in EVENT_KINDS:
            raise _Bad(
                f"events[{step}].kind: expected one of {', '.join(EVENT_KINDS)}, got "
                f"{json.dumps(kind, default=str)[:40]}"
            )
        where = f"events[{step}]"
        row = {
            "step": _check(f"{where}.step", "int32", e.get("step", step)),
            "role": _check(f"{where}.role", "str", e.get("role")),
            "kind": kind,
            "tool": _check(f"{where}.tool", "str", e.get("tool")),
            "input": input_text(e.get("input")),
            "output": output_text(e.get("output")),
            "ok": _check(f"{where}.ok", "bool", e.get("ok")),
            "error": _check(f"{where}.error", "str", e.get("error")),
            "latency_s": _check(f"{where}.latency_s", "number", e.get("latency_s")),
        }
        out.append(row)
    return out


def _apply_aliases(
    keys: dict[str, str], lines: Sequence[bytes], opts: ImportOptions, path: Path, out: Parsed
) -> None:
    """Read a field under an alias (:data:`FIELD_ALIASES`) when its own key is never there.

    The first :data:`_ALIAS_SAMPLE` records decide; each alias used is reported once.
    """
    sample: list[dict[str, Any]] = []
    for line in lines[:_ALIAS_SAMPLE]:
        try:
            record = load_json(line)
        except InvalidArgumentError:
            continue
        if isinstance(record, dict):
            sample.append(record)
    if not sample:
        return
    seen = set(_keys_seen(sample))
    taken = set(keys.values())
    for f, aliases in FIELD_ALIASES.items():
        if f not in keys or f in opts.field_map or keys[f] in seen:
            continue
        alias = next((a for a in aliases if a in seen and a not in taken), None)
        if alias is None:
            continue
        keys[f] = alias
        taken.add(alias)
        out.warnings.append(
            (
                str(path),
                f"read {alias!r} as the field {f!r} (no {f!r} key in the records; "
                f"--map {f}={alias} says so explicitly, --map {f}=KEY reads another key)",
            )
        )


def _keys_seen(sample: Sequence[Mapping[str, Any]]) -> list[str]:
    """Return the keys of the sampled records, in first-seen order (nested keys dotted)."""
    seen: dict[str, None] = {}
    for record in sample:
        for k, v in record.items():
            seen.setdefault(k, None)
            if isinstance(v, Mapping):
                for sub in v:
                    seen.setdefault(f"{k}.{sub}", None)
    return list(seen)


def _key_field(key: str) -> str:
    """Return the internal field name under which ``--item-key`` KEY is read."""
    return f"_key:{key}"
