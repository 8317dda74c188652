"""Agent-harness helpers: parsing answers, file requests, tool calls and reasoning traces.

Everything lives in :mod:`tumorboard.harness.parsing` (a face over one private module per
format) and is re-exported here.
"""

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
    bracket_tags,
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
    "bracket_tags",
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
