"""``Recorder``: the call harnesses make to log questions, file requests, tool calls and answers.

Rows are buffered as tuples in a Python list and turned into Arrow columns in bulk (one
``pyarrow.array`` conversion per column) at each flush: every ``flush_every`` items or
``flush_seconds`` seconds (checked when an item closes), and at exit. A flush writes one items
part and one events part, each atomically (temporary file + rename), so a process killed at any
moment loses at most the unflushed buffer and leaves the store readable. ``record_many``
writes a whole table of items at once (the bulk path: no per-row Python work).
"""

from __future__ import annotations

import atexit
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from .._json import json_text
from ..errors import InvalidArgumentError, InvalidTypeError, StateError
from ..harness.parsing import (
    Answer,
    FileRequest,
    answer_letter,
    parse_answer,
    parse_answers,
    split_requests,
)
from .fields import check_value, extra_fields
from .schema import EVENT_KINDS, EVENTS, ITEMS, RUNS, conform, output_text, schema_of
from .store import Store

if TYPE_CHECKING:  # pragma: no cover - typing only
    import os

    from .._typing import Frame

_ITEM_COLS = tuple(ITEMS.names)
_EVENT_COLS = tuple(EVENTS.names)
_KINDS = frozenset(EVENT_KINDS)


@dataclass(frozen=True)
class FlushInfo:
    """What one flush wrote (passed to ``on_flush``): rows, part paths and running totals.

    Attributes
    ----------
    n_items, n_events : int
        Rows written by this flush.
    items_part, events_part : pathlib.Path or None
        The parts written (None for a table without rows).
    total_items, total_events : int
        Rows written by the recorder so far.
    """

    n_items: int
    n_events: int
    items_part: Path | None
    events_part: Path | None
    total_items: int
    total_events: int


def _is_str(v: Any) -> bool:
    """Tell whether ``v`` is a string."""
    return isinstance(v, str)


def _is_int(v: Any) -> bool:
    """Tell whether ``v`` is an int (not a bool)."""
    return isinstance(v, int) and not isinstance(v, bool)


def _is_float(v: Any) -> bool:
    """Tell whether ``v`` is an int or float (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_bool(v: Any) -> bool:
    """Tell whether ``v`` is a bool."""
    return isinstance(v, bool)


def _is_str_list(v: Any) -> bool:
    """Tell whether ``v`` is a list or tuple of strings."""
    return isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)


def _checks(schema: pa.Schema) -> dict[str, tuple[Callable[[Any], bool], str]]:
    """Return, per column, the Python type check of its values and what it expects (for errors)."""
    out: dict[str, tuple[Callable[[Any], bool], str]] = {}
    for f in schema:
        t = f.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            out[f.name] = (_is_str, "a string")
        elif pa.types.is_integer(t):
            out[f.name] = (_is_int, "an integer")
        elif pa.types.is_floating(t):
            out[f.name] = (_is_float, "a number")
        elif pa.types.is_boolean(t):
            out[f.name] = (_is_bool, "True or False")
        else:
            out[f.name] = (_is_str_list, "a list of strings")
    return out


_ITEM_CHECKS = _checks(ITEMS)
_EVENT_CHECKS = _checks(EVENTS)


def _check_row(row: Mapping[str, Any], checks: Mapping[str, Any], where: str) -> None:
    """Check the type of every non-null value of a row dict."""
    for name, value in row.items():
        if value is None:
            continue
        ok, expected = checks[name]
        if not ok(value):
            raise InvalidTypeError(f"{where}: column {name!r} expects {expected}, got {value!r}")


def _id(value: Any, name: str) -> str | None:
    """Return an id as a string (integers are converted; None stays None)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise InvalidTypeError(f"{name}: expected a string (or an integer), got {value!r}")


# Recorders not yet closed, flushed at interpreter exit. Strong references: a recorder that is
# dropped without close() keeps its buffer until exit instead of losing it to the collector.
_OPEN: set[Recorder] = set()


@atexit.register
def _flush_open_recorders() -> None:  # pragma: no cover (runs at interpreter exit)
    """Close every recorder still open at interpreter exit, so its buffer is written."""
    for rec in list(_OPEN):
        try:
            rec.close()
        except Exception:  # noqa: BLE001 - never raise at exit
            pass


class ItemRecorder:
    """One question in flight; use as ``with rec.item(...) as it:``.

    Every call appends an event (step numbers count from 0 within the item); :meth:`answer`
    parses and grades. Created by :meth:`Recorder.item`.
    """

    __slots__ = (
        "_rec",
        "patient_id",
        "item_id",
        "position",
        "task",
        "question",
        "options",
        "gold",
        "gold_text",
        "response",
        "parsed_answer",
        "correct",
        "correct_source",
        "accessed",
        "hallucinated",
        "latency_s",
        "attempts",
        "flags",
        "events",
        "extra",
        "_t0",
        "_closed",
    )

    def __init__(
        self,
        rec: Recorder,
        patient_id: str | None,
        item_id: str,
        position: int | None,
        task: str,
        question: str | None,
        options: Sequence[str] | None,
        gold: str | None,
        extra: str | None = None,
    ) -> None:
        self._rec = rec
        self.extra = extra
        self.patient_id = patient_id
        self.item_id = item_id
        self.position = position
        self.task = task
        self.question = question
        self.options = list(options) if options is not None else None
        letter = answer_letter(gold) if gold is not None else None
        self.gold = letter if letter is not None else gold
        self.gold_text = gold if gold is not None and gold != self.gold else None
        self.response: str | None = None
        self.parsed_answer: str | None = None
        self.correct: bool | None = None
        self.correct_source = "missing"
        self.accessed: list[str] = []
        self.hallucinated: list[str] = []
        self.latency_s: float | None = None
        self.attempts = 0
        self.flags: list[str] = []
        self.events: list[tuple[Any, ...]] = []
        self._t0 = time.perf_counter()
        self._closed = False

    # events ----------------------------------------------------------------

    def event(
        self,
        kind: str,
        *,
        role: str | None = None,
        tool: str | None = None,
        input: Any = None,
        output: Any = None,
        ok: bool | None = None,
        error: str | None = None,
        latency_s: float | None = None,
    ) -> None:
        """Append one event row; ``input`` is stored as JSON text, ``output`` as text.

        Parameters
        ----------
        kind : str
            One of the event kinds (``EVENT_KINDS``: message, thought, action, tool_call,
            observation, file_access, answer, reprompt).
        role, tool : str, optional
            Who produced the event, and the tool involved.
        input : Any, optional
            A JSON-able input, stored with :func:`tumorboard._json.json_text`.
        output : Any, optional
            Text stored as it is; anything else as JSON.
        ok : bool, optional
            The outcome.
        error : str, optional
            The error message of a failure.
        latency_s : float, optional
            Seconds the step took.

        Raises
        ------
        InvalidArgumentError
            An unknown kind.
        InvalidTypeError
            An argument of the wrong type.
        StateError
            The item is closed.
        """
        if kind not in _KINDS:
            raise InvalidArgumentError(f"kind: expected one of {EVENT_KINDS}, got {kind!r}")
        for name, value in (("role", role), ("tool", tool), ("error", error)):
            if value is not None and not isinstance(value, str):
                raise InvalidTypeError(f"{name}: expected a string or None, got {value!r}")
        if ok is not None and not isinstance(ok, bool):
            raise InvalidTypeError(f"ok: expected True, False or None, got {ok!r}")
        if latency_s is not None and not _is_float(latency_s):
            raise InvalidTypeError(f"latency_s: expected a number or None, got {latency_s!r}")
        if self._closed:
            raise StateError(f"item {self.item_id!r}: already closed")
        self.events.append(
            (
                len(self.events),
                role,
                kind,
                tool,
                json_text(input),
                output_text(output),
                ok,
                error,
                latency_s,
            )
        )

    def message(self, role: str, text: str) -> None:
        """Record a chat message (role system, user, assistant or tool).

        Parameters
        ----------
        role : str
            Who wrote it.
        text : str
            The message text.
        """
        self.event("message", role=role, output=text)

    def thought(self, text: str) -> None:
        """Record a ReAct thought.

        Parameters
        ----------
        text : str
            The thought.
        """
        self.event("thought", role="assistant", output=text)

    def action(self, tool: str, input: Any = None) -> None:
        """Record a ReAct action (tool name and its input).

        Parameters
        ----------
        tool : str
            The tool name.
        input : Any, optional
            Its JSON-able input.
        """
        self.event("action", role="assistant", tool=tool, input=input)

    def observation(
        self,
        text: str,
        *,
        tool: str | None = None,
        ok: bool | None = None,
        error: str | None = None,
    ) -> None:
        """Record a ReAct observation (what the environment returned).

        Parameters
        ----------
        text : str
            The observation.
        tool : str, optional
            The tool that produced it.
        ok : bool, optional
            The outcome.
        error : str, optional
            The error message of a failure.
        """
        self.event("observation", role="tool", tool=tool, output=text, ok=ok, error=error)

    def tool_call(
        self,
        tool: str,
        *,
        input: Any = None,
        output: Any = None,
        ok: bool = True,
        error: str | None = None,
        latency_s: float | None = None,
    ) -> None:
        """Record a tool call with its input, output and outcome.

        Parameters
        ----------
        tool : str
            The tool name.
        input : Any, optional
            Its JSON-able input.
        output : Any, optional
            Its output (text as it is, anything else as JSON).
        ok : bool, default True
            Whether the call succeeded.
        error : str, optional
            The error message of a failure.
        latency_s : float, optional
            Seconds the call took.
        """
        self.event(
            "tool_call",
            role="tool",
            tool=tool,
            input=input,
            output=output,
            ok=ok,
            error=error,
            latency_s=latency_s,
        )

    def request_files(self, requested: Iterable[str], *, available: Sequence[str]) -> FileRequest:
        """Record a file request, split into accessed and hallucinated files.

        Both lists accumulate over the item without duplicates.

        Parameters
        ----------
        requested : iterable of str
            The requested names; wildcards are expanded against ``available``.
        available : sequence of str
            The files the agent may access.

        Returns
        -------
        FileRequest
            The split of this request.
        """
        split = split_requests(list(requested), available)
        for name in split.accessed:
            if name not in self.accessed:
                self.accessed.append(name)
        for name in split.hallucinated:
            if name not in self.hallucinated:
                self.hallucinated.append(name)
        self.event(
            "file_access",
            role="assistant",
            input={"requested": list(requested)},
            output={"accessed": list(split.accessed), "hallucinated": list(split.hallucinated)},
            ok=not split.hallucinated,
        )
        return split

    def answer(self, response: str, *, tag_content: bool = False) -> Answer:
        """Record an answer attempt: parse it and, with a gold letter, grade it.

        ``response`` is parsed with :func:`tumorboard.harness.parsing.parse_answer` against the
        item's options, which sets ``parsed_answer`` and, with a gold letter, ``correct`` (an
        unreadable answer counts as wrong, as in MTBBench). Each call counts one attempt; the
        last one is kept.

        Parameters
        ----------
        response : str
            The agent's response.
        tag_content : bool, default False
            ``response`` is already the content of an answer tag (as in ``parse_answer``).

        Returns
        -------
        Answer
            The parsed answer.
        """
        ans = parse_answer(response, options=self.options, tag_content=tag_content)
        self.attempts += 1
        self.response = response
        self.parsed_answer = ans.letter
        if self.gold is not None:
            self.correct = ans.letter is not None and ans.letter == self.gold
            self.correct_source = "graded"
        self.event("answer", role="assistant", output=response, ok=ans.letter is not None)
        return ans

    def grade(self, correct: bool | None, *, source: str = "graded") -> None:
        """Set ``correct`` directly (free-text tasks graded elsewhere).

        Parameters
        ----------
        correct : bool or None
            The grade; None is "missing".
        source : {"graded", "log", "missing"}, default "graded"
            The ``correct_source`` recorded with a grade.
        """
        if correct is not None and not isinstance(correct, bool):
            raise InvalidTypeError(f"correct: expected True, False or None, got {correct!r}")
        if source not in ("log", "graded", "missing"):
            raise InvalidArgumentError(
                f"source: expected 'log', 'graded' or 'missing', got {source!r}"
            )
        self.correct = correct
        self.correct_source = "missing" if correct is None else source

    def flag(self, name: str) -> None:
        """Add an anomaly flag to the item (once).

        Parameters
        ----------
        name : str
            The flag, e.g. ``"exception:ValueError"``.
        """
        if name not in self.flags:
            self.flags.append(name)

    # context manager -------------------------------------------------------

    def __enter__(self) -> ItemRecorder:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.flag(f"exception:{exc_type.__name__}")
        self.close()

    def close(self) -> None:
        """Finish the item (``with`` does this); closing twice does nothing.

        The latency is the time since the item opened unless set, and the row with its events
        moves to the recorder's buffer.
        """
        if self._closed:
            return
        if self.latency_s is None:
            self.latency_s = time.perf_counter() - self._t0
        elif not _is_float(self.latency_s):
            raise InvalidTypeError(f"latency_s: expected a number, got {self.latency_s!r}")
        self._closed = True
        self._rec._add_item(self)


class Recorder:
    """Records one run of an agent on a benchmark into a :class:`Store`.

    Thread-safe: several threads may open and close items at once (buffering and flushing are
    locked); one ItemRecorder belongs to one thread.

    Parameters
    ----------
    store : Store, str or os.PathLike
        A Store or the path of one (created when missing).
    benchmark, model : str
        What is being run (written to the runs table).
    track : str, default "default"
        The benchmark track.
    tools : bool, default False
        Whether the agent has tools.
    config : mapping, optional
        The run configuration, stored as JSON text.
    run_id : str, optional
        The run key (default: a new unique id).
    flush_every : int, default 1000
        Flush after this many buffered items.
    flush_seconds : float, default 30.0
        Flush when an item closes and the last flush is older than this.
    on_flush : callable, optional
        Called with a :class:`FlushInfo` after every flush.

    Raises
    ------
    InvalidArgumentError
        An empty benchmark, model or track, or invalid flush settings.
    """

    def __init__(
        self,
        store: Store | str | os.PathLike[str],
        *,
        benchmark: str,
        model: str,
        track: str = "default",
        tools: bool = False,
        config: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        flush_every: int = 1000,
        flush_seconds: float = 30.0,
        on_flush: Callable[[FlushInfo], None] | None = None,
    ) -> None:
        for name, value in (("benchmark", benchmark), ("model", model), ("track", track)):
            if not isinstance(value, str) or not value:
                raise InvalidArgumentError(f"{name}: expected a non-empty string, got {value!r}")
        if isinstance(flush_every, bool) or not isinstance(flush_every, int) or flush_every < 1:
            raise InvalidArgumentError(
                f"flush_every: expected an integer >= 1, got {flush_every!r}"
            )
        if not flush_seconds > 0:
            raise InvalidArgumentError(
                f"flush_seconds: expected a positive number, got {flush_seconds!r}"
            )
        self.store = store if isinstance(store, Store) else Store(store)
        self.benchmark, self.model, self.track, self.tools = benchmark, model, track, bool(tools)
        self.config = dict(config or {})
        now = datetime.now(timezone.utc)  # noqa: UP017 (py3.10 target)
        self.run_id = run_id or f"{now:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:12]}"
        self.created_at = now
        self.flush_every = flush_every
        self.flush_seconds = float(flush_seconds)
        self.on_flush = on_flush
        self._lock = threading.RLock()
        # buffered rows (tuples in column order), turned into Arrow columns at each flush
        self._items: list[tuple[Any, ...]] = []
        self._events: list[tuple[Any, ...]] = []
        self._n_items = 0  # items created (for default ids)
        self._positions: dict[str | None, int] = {}
        self._run_written = False
        self._last_flush = time.monotonic()
        self.total_items = 0
        self.total_events = 0
        self.closed = False
        _OPEN.add(self)

    # items -------------------------------------------------------------------

    def item(
        self,
        *,
        patient_id: str | None = None,
        item_id: str | None = None,
        task: str = "default",
        question: str | None = None,
        options: Sequence[str] | None = None,
        gold: str | None = None,
        position: int | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> ItemRecorder:
        """Start a question; use as ``with rec.item(...) as it:``.

        Parameters
        ----------
        patient_id : str, optional
            The patient the question belongs to (an integer is converted to a string).
        item_id : str, optional
            The question's id; defaults to a running number.
        task : str, default "default"
            The task.
        question : str, optional
            The question text.
        options : sequence of str, optional
            The answer options.
        gold : str, optional
            The gold answer: a letter or ``"C) text"``.
        position : int, optional
            Defaults to the order of the patient's items in this run.
        extra : mapping, optional
            The benchmark's own fields of the item (:mod:`tumorboard.traj.fields`, e.g.
            ``{"gt_tools": [...]}`` for radabench), stored in ``items.extra``.

        Returns
        -------
        ItemRecorder
            The open item.
        """
        self._check_open()
        extra_text = _extra(extra, self.benchmark)
        patient_id, item_id = _id(patient_id, "patient_id"), _id(item_id, "item_id")
        if options is not None and not _is_str_list(options):
            raise InvalidTypeError(f"options: expected a sequence of strings, got {options!r}")
        for name, value in (("task", task), ("question", question), ("gold", gold)):
            if value is not None and not isinstance(value, str):
                raise InvalidTypeError(f"{name}: expected a string, got {value!r}")
        if position is not None and not _is_int(position):
            raise InvalidTypeError(f"position: expected an integer, got {position!r}")
        with self._lock:
            n = self._n_items
            self._n_items += 1
            if position is None:
                position = self._positions.get(patient_id, 0)
            self._positions[patient_id] = position + 1
        return ItemRecorder(
            self,
            patient_id,
            item_id if item_id is not None else f"i{n}",
            position,
            task,
            question,
            options,
            gold,
            extra_text,
        )

    def record(self, *, events: Iterable[Mapping[str, Any]] = (), **fields: Any) -> None:
        """Record one finished item in one call.

        Parameters
        ----------
        events : iterable of mapping, default ()
            Dicts of events columns (step defaults to the order; run_id, patient_id and
            item_id are filled in).
        **fields
            Items columns (run_id is filled in).

        Raises
        ------
        InvalidArgumentError
            An unknown or reserved column, or an invalid correct_source or event kind.
        InvalidTypeError
            A value of the wrong type.
        """
        self._check_open()
        unknown = [k for k in fields if k not in _ITEM_COLS or k == "run_id"]
        if unknown:
            raise InvalidArgumentError(f"record: unknown items column {unknown[0]!r}")
        for key in ("patient_id", "item_id"):
            if key in fields:
                fields[key] = _id(fields[key], key)
        if "extra" in fields and not isinstance(fields["extra"], str):
            fields["extra"] = _extra(fields["extra"], self.benchmark)
        _check_row(fields, _ITEM_CHECKS, "record")
        gold = fields.get("gold")
        if gold is not None and "gold_text" not in fields:
            letter = answer_letter(gold)
            if letter is not None and letter != gold:
                fields["gold"], fields["gold_text"] = letter, gold
        src = fields.get("correct_source")
        if src is not None and src not in ("log", "graded", "missing"):
            raise InvalidArgumentError(
                f"record: correct_source must be log, graded or missing, got {src!r}"
            )
        events = [dict(e) for e in events]
        for e in events:
            bad = [k for k in e if k not in _EVENT_COLS or k in ("run_id", "patient_id", "item_id")]
            if bad:
                raise InvalidArgumentError(f"record: unknown or reserved events column {bad[0]!r}")
            _check_row(e, _EVENT_CHECKS, "record events")
            if e.get("kind") not in _KINDS:
                raise InvalidArgumentError(f"record events: kind must be one of {EVENT_KINDS}")
        with self._lock:
            fields.setdefault("item_id", f"i{self._n_items}")
            self._n_items += 1
            if "correct_source" not in fields:
                fields["correct_source"] = "missing" if fields.get("correct") is None else "log"
            if "n_files" not in fields and fields.get("files_accessed") is not None:
                fields["n_files"] = len(set(fields["files_accessed"]))
            fields["run_id"] = self.run_id
            self._items.append(tuple(fields.get(c) for c in _ITEM_COLS))
            for step, e in enumerate(events):
                row = {
                    "step": step,
                    **e,
                    "run_id": self.run_id,
                    "patient_id": fields.get("patient_id"),
                    "item_id": fields["item_id"],
                }
                self._events.append(tuple(row.get(c) for c in _EVENT_COLS))
            self._after_item()

    def record_many(
        self, items: Frame | pa.RecordBatch, events: Frame | pa.RecordBatch | None = None
    ) -> int:
        """Write a whole table of items (and optionally events) as parts now: the bulk path.

        Where ``parsed_answer`` is missing it is parsed from ``response`` (vectorized, with the
        options), and where ``correct`` is missing it is graded against ``gold``
        (``correct_source`` "graded").

        Parameters
        ----------
        items : pyarrow Table, polars DataFrame or LazyFrame, or mapping of columns
            The items columns except ``run_id`` (filled in).
        events : pyarrow Table, polars DataFrame or LazyFrame, or mapping of columns, optional
            The events columns except ``run_id`` (filled in).

        Returns
        -------
        int
            The number of items written.

        Raises
        ------
        InvalidArgumentError
            Items of another run, or values that do not conform to the schema.
        """
        self._check_open()
        if type(items).__name__ == "LazyFrame":
            items = items.collect()
        table = conform(items, "items", defaults={"run_id": self.run_id})
        if "run_id" in _source_columns(items):
            other = pc.not_equal(table.column("run_id"), self.run_id)
            if pc.any(other).as_py():
                bad = table.column("run_id")[pc.index(other, True).as_py()].as_py()
                raise InvalidArgumentError(
                    f"items.run_id: row has run {bad!r}, not this recorder's {self.run_id!r}; "
                    "leave run_id out (it is filled in) or use Store.write_items"
                )
        table = self._grade_bulk(table, items)
        ev = None if events is None else conform(events, "events", defaults={"run_id": self.run_id})
        n_events = 0 if ev is None else ev.num_rows
        with self._lock:
            self._flush_locked()
            tables = {"items": table} if ev is None else {"items": table, "events": ev}
            written = self._commit(tables)
            items_part, events_part = written.get("items"), written.get("events")
            self.total_items += table.num_rows
            self.total_events += n_events
            if self.on_flush is not None:
                self.on_flush(
                    FlushInfo(
                        table.num_rows,
                        n_events,
                        items_part,
                        events_part,
                        self.total_items,
                        self.total_events,
                    )
                )
        return table.num_rows

    def _grade_bulk(self, table: pa.Table, source: Any) -> pa.Table:
        """Fill ``parsed_answer`` and ``correct`` where the source had no such column."""
        names = _source_columns(source)
        if "parsed_answer" not in names and "response" in names:
            opts = table.column("options").to_pylist() if "options" in names else None
            letters = parse_answers(table.column("response").to_pylist(), options=opts)
            table = table.set_column(
                table.schema.get_field_index("parsed_answer"),
                ITEMS.field("parsed_answer"),
                pa.array(letters, pa.string()),
            )
        if "correct" not in names and "gold" in names:
            gold = table.column("gold")
            parsed = table.column("parsed_answer")
            graded = pc.if_else(
                pc.is_null(gold),
                pa.scalar(None, pa.bool_()),
                pc.fill_null(pc.equal(parsed, gold), False),
            )
            src = pc.if_else(pc.is_null(graded), "missing", "graded")
            table = table.set_column(
                table.schema.get_field_index("correct"), ITEMS.field("correct"), graded
            )
            table = table.set_column(
                table.schema.get_field_index("correct_source"),
                ITEMS.field("correct_source"),
                src.cast(pa.string()),
            )
        return table

    # buffering ---------------------------------------------------------------

    def _check_open(self) -> None:
        """Raise StateError when the recorder is closed."""
        if self.closed:
            raise StateError(f"Recorder for run {self.run_id!r} is closed")

    def _add_item(self, it: ItemRecorder) -> None:
        """Buffer a closed item's row and events; flush when due."""
        with self._lock:
            self._items.append(
                (
                    self.run_id,
                    it.patient_id,
                    it.item_id,
                    it.position,
                    it.task,
                    it.question,
                    it.options,
                    it.gold,
                    it.gold_text,
                    it.response,
                    it.parsed_answer,
                    it.correct,
                    it.correct_source,
                    len(it.accessed),
                    it.accessed,
                    it.hallucinated,
                    it.latency_s,
                    it.attempts,
                    it.flags,
                    it.extra,
                    None,
                    None,
                )
            )
            if it.events:
                head = (self.run_id, it.patient_id, it.item_id)
                self._events.extend([head + e for e in it.events])
            self._after_item()

    def _after_item(self) -> None:
        """Flush when ``flush_every`` items are buffered or ``flush_seconds`` have passed."""
        if (
            len(self._items) >= self.flush_every
            or time.monotonic() - self._last_flush >= self.flush_seconds
        ):
            self._flush_locked()

    def flush(self) -> FlushInfo | None:
        """Write the buffered items and events now.

        Returns
        -------
        FlushInfo or None
            What was written; None if the buffer was empty.
        """
        with self._lock:
            return self._flush_locked()

    def _run_table(self) -> pa.Table:
        """Return the run's row as a runs table."""
        return pa.Table.from_pylist(
            [
                {
                    "run_id": self.run_id,
                    "benchmark": self.benchmark,
                    "track": self.track,
                    "model": self.model,
                    "tools": self.tools,
                    "config": json_text(self.config),
                    "created_at": self.created_at,
                }
            ],
            schema=RUNS,
        )

    def _commit(self, tables: dict[str, pa.Table]) -> dict[str, Path]:
        """Write ``tables`` (and the run's row, the first time) as one commit of the store.

        The run row, items and events of a flush become visible together or, when the process
        dies before the commit, not at all; a failed commit leaves the buffer and the run row
        to the next flush.
        """
        if not self._run_written:
            tables = {"runs": self._run_table(), **tables}
        written = self.store.write_parts(tables, op=f"recorder {self.run_id}")
        self._run_written = True
        return written

    def _flush_locked(self) -> FlushInfo | None:
        """Write the buffer as one commit: an items part and an events part (lock held)."""
        self._last_flush = time.monotonic()
        n_items = len(self._items)
        n_events = len(self._events)
        if n_items == 0 and n_events == 0:
            return None
        tables = {}
        if n_items:
            tables["items"] = _build(self._items, "items")
        if n_events:
            tables["events"] = _build(self._events, "events")
        written = self._commit(tables)
        self._items = []
        self._events = []
        self.total_items += n_items
        self.total_events += n_events
        info = FlushInfo(
            n_items,
            n_events,
            written.get("items"),
            written.get("events"),
            self.total_items,
            self.total_events,
        )
        if self.on_flush is not None:
            self.on_flush(info)
        return info

    def close(self) -> None:
        """Flush what is buffered and close (the run row is written even for an empty run)."""
        if self.closed:
            return
        with self._lock:
            self._flush_locked()
            if not self._run_written:
                self._commit({})
            self.closed = True
        _OPEN.discard(self)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Recorder(run_id={self.run_id!r}, model={self.model!r}, "
            f"benchmark={self.benchmark!r}, items={self.total_items})"
        )


def _extra(extra: Mapping[str, Any] | None, benchmark: str) -> str | None:
    """Check an item's benchmark fields against the benchmark's kinds; return their JSON text.

    Fields of a benchmark :mod:`tumorboard.traj.fields` knows are checked against their kinds;
    other benchmarks' fields are stored as given (JSON-able values).
    """
    if extra is None:
        return None
    if not isinstance(extra, Mapping) or not all(isinstance(k, str) for k in extra):
        raise InvalidTypeError(f"extra: expected a mapping of field name -> value, got {extra!r}")
    kinds = extra_fields(benchmark)
    doc = {}
    for name, value in extra.items():
        if value is None:
            continue
        if kinds:
            if name not in kinds:
                raise InvalidArgumentError(
                    f"extra: {benchmark} has no field {name!r}; fields: {', '.join(kinds)}"
                )
            try:
                value = check_value(kinds[name], value)
            except ValueError as exc:
                raise InvalidTypeError(f"extra: field {name!r} {exc}, got {value!r}") from None
        doc[name] = value
    return json_text(doc) if doc else None


def _source_columns(data: Any) -> set[str]:
    """Return the column names of a table, frame or mapping of columns."""
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return set(data.schema.names)
    if hasattr(data, "columns"):
        return set(data.columns)
    return set(data)


def _build(rows: list[tuple[Any, ...]], table: str) -> pa.Table:
    """Convert row tuples to an Arrow table of the table's schema (one conversion per column)."""
    schema = schema_of(table)
    arrays = []
    for field, values in zip(schema, zip(*rows, strict=True), strict=True):
        try:
            arrays.append(pa.array(values, type=field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
            raise InvalidArgumentError(
                f"{table}.{field.name}: a recorded value does not convert to {field.type}: {exc}"
            ) from None
    return pa.Table.from_arrays(arrays, schema=schema)
