"""``ItemRecorder``: one question in flight, its events, file requests, answer and grade.

A harness opens one with :meth:`~tumorboard.traj.recorder.Recorder.item` and calls it as the
agent works; every call appends an event row (a tuple in the events columns' order), and
:meth:`ItemRecorder.close` (``with`` does it) hands the item's row and events to its recorder's
buffer.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .._json import json_text
from ..errors import InvalidArgumentError, InvalidTypeError, StateError
from ..harness.parsing import Answer, FileRequest, answer_letter, parse_answer, split_requests
from ._recorder_values import _KINDS, _is_float
from .schema import EVENT_KINDS, output_text

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .recorder import Recorder


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
