"""``Recorder``: the call harnesses make to log questions, file requests, tool calls and answers.

Rows are buffered as tuples in a Python list and turned into Arrow columns in bulk (one
``pyarrow.array`` conversion per column) at each flush: every ``flush_every`` items or
``flush_seconds`` seconds (checked when an item closes), and at exit. A flush writes one items
part and one events part, each atomically (temporary file + rename), so a process killed at any
moment loses at most the unflushed buffer and leaves the store readable. ``record_many``
writes a whole table of items at once (the bulk path: no per-row Python work).

One question in flight is an :class:`ItemRecorder` (:mod:`._recorder_item`); the checks of
recorded values and the conversion of buffered rows to Arrow are in :mod:`._recorder_values`.
This module holds the run: :class:`Recorder` (its API, buffer, flushes and commits) and
:class:`FlushInfo`.
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
from ..harness.parsing import answer_letter, parse_answers
from ._recorder_item import ItemRecorder
from ._recorder_values import (
    _EVENT_CHECKS,
    _EVENT_COLS,
    _ITEM_CHECKS,
    _ITEM_COLS,
    _KINDS,
    _build,
    _check_row,
    _extra,
    _id,
    _is_int,
    _is_str_list,
    _source_columns,
)
from .schema import EVENT_KINDS, ITEMS, RUNS, conform
from .store import Store

if TYPE_CHECKING:  # pragma: no cover - typing only
    import os

    from .._typing import Frame


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
                f"record: correct_source: expected log, graded or missing, got {src!r}"
            )
        events = [dict(e) for e in events]
        for e in events:
            bad = [k for k in e if k not in _EVENT_COLS or k in ("run_id", "patient_id", "item_id")]
            if bad:
                raise InvalidArgumentError(f"record: unknown or reserved events column {bad[0]!r}")
            _check_row(e, _EVENT_CHECKS, "record events")
            if e.get("kind") not in _KINDS:
                raise InvalidArgumentError(
                    f"record events: kind: expected one of {EVENT_KINDS}, got {e.get('kind')!r}"
                )
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
