"""Shared pieces of the log importers: options, the per-file result and the error type."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..._json import json_text
from ...errors import InvalidArgumentError


class MalformedLog(InvalidArgumentError):
    """A log file that cannot be imported; the message is the reason shown in the report."""


@dataclass(frozen=True)
class ImportOptions:
    """Options of one import (see :func:`tumorboard.traj.import_logs`).

    Attributes
    ----------
    track, model, benchmark : str or None
        Values forced on every record (None: from the files).
    model_map : mapping of str to str
        Folder name -> display model name.
    field_map : mapping of str to str
        jsonl only: schema field -> key (dotted path) in the records.
    run_name : str or None
        Appended to derived run ids.
    """

    track: str | None = None
    model: str | None = None
    model_map: Mapping[str, str] = field(default_factory=dict)
    benchmark: str | None = None
    field_map: Mapping[str, str] = field(default_factory=dict)
    run_name: str | None = None


@dataclass
class Parsed:
    """Rows from one log file.

    ``unit`` is the (run_id, patient_id) the file covers when a file holds exactly one patient
    of one run (MTBBench); only the newest file (largest ``order``) of a unit is imported.

    Attributes
    ----------
    runs, items, events : list of dict
        Rows of the runs, items and events tables.
    warnings : list of (str, str)
        (file[:line], reason) for problems inside the file.
    unit : tuple of (str, str) or None
        The (run_id, patient_id) the file covers, if it covers exactly one.
    order : float
        Orders the files of one unit (newest largest).
    """

    runs: list[dict[str, Any]] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    unit: tuple[str, str] | None = None
    order: float = 0.0


def input_text(value: Any) -> str | None:
    """Return a value for the ``events.input`` column.

    Text that already is JSON stays as is, other text is encoded as a JSON string, other values
    as JSON; None stays None.
    """
    if value is None:
        return None
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError:
            return json_text(value)
        return value
    return json_text(value)


def run_key(*parts: Any) -> str:
    """Return a deterministic run id from its identifying parts.

    The non-empty parts joined with ":", e.g. ``mtbbench:multimodal:gpt-4o:tools``.
    """
    return ":".join(str(p) for p in parts if p is not None and p != "")


def dedupe(names: list[str]) -> tuple[list[str], bool]:
    """Return the names without repeats (first occurrence kept) and whether there were repeats."""
    out = list(dict.fromkeys(names))
    return out, len(out) != len(names)
