"""ReAct traces (Yao et al., ICLR 2023) and LAMMI-style ones, split into steps.

``Thought:`` / ``Action:`` / ``Action Input:`` / ``Observation:`` blocks, numbered variants
(``Thought 1:``, ``Act 1:``, ``Obs 1:``), ``Action: Finish[answer]`` and ``Final Answer:``
(:func:`parse_react`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._tags import _tags


@dataclass(frozen=True)
class ReActStep:
    """One Thought / Action / Action Input / Observation block.

    Attributes
    ----------
    thought, action, action_input, observation : str or None
        The text of each part; None when absent.
    """

    thought: str | None = None
    action: str | None = None
    action_input: str | None = None
    observation: str | None = None


@dataclass(frozen=True)
class ReActTrace:
    """A parsed ReAct trace.

    Attributes
    ----------
    question : str or None
        The question, if written.
    steps : tuple of ReActStep
        The steps, in order.
    final_answer : str or None
        From ``Final Answer:``, ``Action: Finish[...]`` or an ``[ANSWER: ...]`` tag.
    """

    question: str | None
    steps: tuple[ReActStep, ...]
    final_answer: str | None


# After the key: blanks, an optional step number (after a blank), blanks, optional bold
# stars, blanks, the colon. Each blank run follows a mandatory non-blank token, so a long run of
# blanks is scanned once (``[ \t]*\**[ \t]*`` would rescan it per character).
_REACT_MARKER = re.compile(
    r"^[ \t>*#]*(?P<key>Question|Thought|Action[ \t]+Input|Action|Act|Observation|Obs|"
    r"Final[ \t]+Answer)(?:[ \t]+(?:\d+[ \t]*)?)?(?:\*+[ \t]*)?:\**[ \t]?",
    re.IGNORECASE | re.MULTILINE,
)
_BRACKET_ACTION = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*\[(.*)\]\s*$", re.DOTALL)


def parse_react(text: str) -> ReActTrace:
    """Split a ReAct trace into steps.

    Markers start a line (after optional spaces, ``>``, ``*`` or ``#``), are matched without
    regard to case, may carry a step number (``Thought 2:``) and markdown bold
    (``**Action:**``). A block's text runs to the next marker. ``Act``/``Obs`` are read as
    Action/Observation. An action written ``Tool[input]`` is split into action and input;
    ``Finish[x]`` ends the trace with final answer x. A new step starts at a Thought, or at an
    Action when the current step already has one.

    Parameters
    ----------
    text : str
        The trace.

    Returns
    -------
    ReActTrace
        The question, the steps and the final answer.
    """
    question: str | None = None
    final: str | None = None
    steps: list[dict[str, str | None]] = []
    matches = list(_REACT_MARKER.finditer(text))
    for k, m in enumerate(matches):
        end = matches[k + 1].start() if k + 1 < len(matches) else len(text)
        body = text[m.end() : end].strip()
        key = re.sub(r"\s+", " ", m.group("key").lower())
        key = {"act": "action", "obs": "observation"}.get(key, key)
        if key == "question":
            question = body if question is None else question
            continue
        if key == "final answer":
            final = body
            continue
        field_name = key.replace(" ", "_")
        cur = steps[-1] if steps else None
        # which fields, when already set, mean this marker starts a new step
        blocking = {
            "thought": ("thought", "action", "action_input", "observation"),
            "action": ("action", "observation"),
            "action_input": ("action_input", "observation"),
            "observation": ("observation",),
        }[field_name]
        if cur is None or any(cur.get(f) is not None for f in blocking):
            cur = {}
            steps.append(cur)
        if field_name == "action":
            bm = _BRACKET_ACTION.match(body)
            if bm:
                name, arg = bm.group(1), bm.group(2).strip()
                if name.lower() == "finish":
                    final = arg
                cur["action"], cur["action_input"] = name, arg
                continue
        cur[field_name] = body
    if final is None:
        tags, _ = _tags(text, "ANSWER", True)
        if tags:
            final = tags[-1].strip()
    built = tuple(
        ReActStep(s.get("thought"), s.get("action"), s.get("action_input"), s.get("observation"))
        for s in steps
    )
    return ReActTrace(question, built, final)
