"""Parsing what agents write: answers, file requests, tool calls and reasoning traces.

Formats and the benchmarks they come from:

* MTBBench (Vasilev et al., NeurIPS 2025 Datasets & Benchmarks; ``goodfire-ai/mtbbench``,
  ``neurips25/models/agent*.py@ae2f8fe``): ``[ANSWER: C) text]`` (the last tag of a message counts;
  the answer is valid when its first character is a choice letter followed by ``)``, ``]`` or a
  space, or is a lone letter, compared case-insensitively), ``[REQUEST: file.ext]`` (spaces inside
  the name are dropped), ``[CONCH: image.jpg, (option 1), (option 2)]``, and the re-prompt protocol
  in :class:`AnswerProtocol`.
* ReAct (Yao et al., ICLR 2023) and LAMMI-style traces: ``Thought:`` / ``Action:`` /
  ``Action Input:`` / ``Observation:`` blocks, numbered variants (``Thought 1:``, ``Act 1:``,
  ``Obs 1:``), ``Action: Finish[answer]`` and ``Final Answer:``.
* RadA-BenchPlat (Zheng et al. 2025, arXiv 2412.09529; ``MAGIC-AI4Med/RadABench``,
  ``EvalPlat@acbcf87``): ``<Call>``, ``<EndCall>`` and ``<NoCall>`` blocks holding ``<Purpose>``,
  ``<Tool>``, ``<Input>`` (and for NoCall ``<Category>``, ``<Anatomy>``, ``<Modality>``,
  ``<Ability>``).

Everything is pure Python on one string except :func:`parse_answers`, the batch version of
:func:`parse_answer` used by bulk writers (polars regexes, scalar fallback for the rest).

Linear time. Every parser here sees model output, which may be hostile (a response of
``"The answer"`` and a million spaces, a thousand unclosed ``[ANSWER:`` tags), so each one runs
in time linear in its input: no pattern has two adjacent quantifiers that can match the same
characters (the source of catastrophic backtracking, Friedl, *Mastering Regular Expressions*,
3rd ed., ch. 6), bracketed tags are found by scanning for the opener and the next ``]``
(:func:`bracket_tags`), and wildcards are matched by a set-of-states simulation instead of a
backtracking regex. ``tests/test_fuzz_imports.py`` runs every parser on 1 MB adversarial
strings under a deadline. The polars regexes of :func:`parse_answers` run on Rust's
``regex`` crate, which guarantees linear time.

This module is the face: the parsers live in one private module per format, re-exported here.
:mod:`._tags` scans bracketed tags; :mod:`._parse_answers` reads multiple-choice answers and
options (MTBBench's acceptance and grading rules included); :mod:`._parse_mtbbench` reads
MTBBench's file requests and CONCH calls; :mod:`._parse_react` splits ReAct traces;
:mod:`._parse_rada` reads RadA-BenchPlat's call blocks; :mod:`._protocol` is MTBBench's
answer protocol (:class:`AnswerProtocol`).
"""

from __future__ import annotations

from ._parse_answers import _OPTION_LINE as _OPTION_LINE  # re-exported (tests)
from ._parse_answers import _PHRASE as _PHRASE  # re-exported (tests)
from ._parse_answers import CACHED_CHARS as CACHED_CHARS  # re-exported
from ._parse_answers import LETTERS as LETTERS  # re-exported
from ._parse_answers import (
    Answer,
    answer_letter,
    mtbbench_correct,
    mtbbench_valid,
    parse_answer,
    parse_answers,
    parse_options,
)
from ._parse_mtbbench import NAME_MAX as NAME_MAX  # re-exported
from ._parse_mtbbench import WILDCARD_BUDGET as WILDCARD_BUDGET  # re-exported
from ._parse_mtbbench import (
    ConchCall,
    FileRequest,
    parse_conch,
    parse_requests,
    split_requests,
)
from ._parse_mtbbench import _wildcard_match as _wildcard_match  # re-exported (tests)
from ._parse_rada import RadaCall, parse_rada_calls
from ._parse_rada import _rada_fields as _rada_fields  # re-exported (tests)
from ._parse_react import _REACT_MARKER as _REACT_MARKER  # re-exported (tests)
from ._parse_react import ReActStep, ReActTrace, parse_react
from ._protocol import AnswerProtocol, Turn
from ._tags import bracket_tags

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
