"""Agent-harness helpers: parsing answers, file requests, tool calls and reasoning traces
(:mod:`tumorboard.harness.parsing`)."""

from __future__ import annotations

from .parsing import (
    Answer,
    AnswerProtocol,
    ConchCall,
    FileRequest,
    RadaCall,
    ReActStep,
    ReActTrace,
    Turn,
    answer_letter,
    mtbbench_correct,
    mtbbench_valid,
    parse_answer,
    parse_answers,
    parse_conch,
    parse_options,
    parse_rada_calls,
    parse_react,
    parse_requests,
    split_requests,
)

__all__ = [
    "Answer",
    "AnswerProtocol",
    "ConchCall",
    "FileRequest",
    "RadaCall",
    "ReActStep",
    "ReActTrace",
    "Turn",
    "answer_letter",
    "mtbbench_correct",
    "mtbbench_valid",
    "parse_answer",
    "parse_answers",
    "parse_conch",
    "parse_options",
    "parse_rada_calls",
    "parse_react",
    "parse_requests",
    "split_requests",
]
