"""MTBBench's answer protocol: the per-question re-prompt loop as a state machine.

:class:`AnswerProtocol` classifies each model message (serve a file request, run a CONCH call,
accept an answer, re-prompt, or fail the question) and counts strikes as MTBBench's harness
does; each step returns a :class:`Turn`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..errors import InvalidArgumentError, StateError
from ._parse_answers import Answer, parse_answer
from ._parse_mtbbench import ConchCall, parse_conch, parse_requests
from ._tags import _tags, bracket_tags


@dataclass(frozen=True)
class Turn:
    """What the harness does after one model message (see :class:`AnswerProtocol`).

    Attributes
    ----------
    kind : {"request", "tool", "answer", "reprompt", "fail"}
        "request" (serve ``requests``), "tool" (run ``conch`` calls), "answer" (a valid answer:
        record it and move on), "reprompt" (ask again for a well-formed answer) or "fail" (give
        up: the question counts as wrong).
    answer : Answer or None
        The parsed answer of a message with an answer tag.
    requests : tuple of str
        The requested files.
    conch : tuple of ConchCall
        The CONCH calls.
    strikes : int
        The strike count after this message.
    """

    kind: Literal["request", "tool", "answer", "reprompt", "fail"]
    answer: Answer | None = None
    requests: tuple[str, ...] = ()
    conch: tuple[ConchCall, ...] = ()
    strikes: int = 0


class AnswerProtocol:
    """MTBBench's per-question loop, as a state machine over the model's messages.

    Each message is checked in this order (``goodfire-ai/mtbbench``,
    ``neurips25/models/agent_with_tools.py@ae2f8fe``):

    1. file requests different from the previous request of this question -> "request";
    2. with ``tools``, a CONCH call -> "tool";
    3. an answer tag: if ``max_strikes`` strikes have already accrued -> "fail"; if its content
       is valid (:func:`mtbbench_valid`) -> "answer"; otherwise one strike -> "reprompt";
    4. anything else: one strike; -> "reprompt" while strikes < ``max_strikes``, else "fail".

    So a model is re-prompted up to three times after malformed answers (the next answer then
    fails) and twice after messages with neither request nor answer (the third fails), as in
    MTBBench; strikes reset when a question ends.

    Parameters
    ----------
    max_strikes : int, default 3
        Strikes after which the question fails.
    tools : bool, default False
        Whether CONCH calls are tool calls.
    options : sequence of str, optional
        The question's options, for parsing answers.

    Raises
    ------
    InvalidArgumentError
        ``max_strikes`` is not an integer >= 1.
    """

    def __init__(
        self, *, max_strikes: int = 3, tools: bool = False, options: Sequence[str] | None = None
    ) -> None:
        if isinstance(max_strikes, bool) or not isinstance(max_strikes, int) or max_strikes < 1:
            raise InvalidArgumentError(
                f"max_strikes: expected an integer >= 1, got {max_strikes!r}"
            )
        self.max_strikes = max_strikes
        self.tools = bool(tools)
        self.options = tuple(options) if options is not None else None
        self.strikes = 0
        self._previous_requests: list[str] = []
        self.done = False

    def step(self, message: str) -> Turn:
        """Classify one model message and update the strike count.

        Parameters
        ----------
        message : str
            The model's message.

        Returns
        -------
        Turn
            What the harness does next.

        Raises
        ------
        StateError
            The question has already ended (answer or fail).
        """
        if self.done:
            raise StateError("step: the question has ended (answer or fail); start a new one")
        raw_requests = bracket_tags(message, "REQUEST")
        if raw_requests and raw_requests != self._previous_requests:
            self._previous_requests = raw_requests
            return Turn("request", requests=tuple(parse_requests(message)), strikes=self.strikes)
        if self.tools:
            calls = parse_conch(message)
            if calls:
                return Turn("tool", conch=tuple(calls), strikes=self.strikes)
        if _tags(message, "ANSWER", True)[0]:
            ans = parse_answer(message, options=self.options)
            if self.strikes >= self.max_strikes:
                return self._end("fail", ans)
            if ans.valid:
                return self._end("answer", ans)
            self.strikes += 1
            return Turn("reprompt", answer=ans, strikes=self.strikes)
        self.strikes += 1
        if self.strikes < self.max_strikes:
            return Turn("reprompt", strikes=self.strikes)
        return self._end("fail", None)

    def _end(self, kind: Literal["answer", "fail"], ans: Answer | None) -> Turn:
        """End the question: return the final turn and reset the strikes."""
        turn = Turn(kind, answer=ans, strikes=self.strikes)
        self.done = True
        self.strikes = 0
        return turn
