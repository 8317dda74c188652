"""Bracketed tags (``[TAG: ...]``) found in linear time: the scanner every tag parser shares.

MTBBench's answer, request and file tags, and the answer tag ReAct traces may end with, are all
read with :func:`bracket_tags` (or its raw form :func:`_tags`, which also tells where the first
unclosed opener ends).
"""

from __future__ import annotations

import re

_OPENERS: dict[tuple[str, bool], re.Pattern[str]] = {}


def _opener(tag: str, ignore_case: bool) -> re.Pattern[str]:
    """Return the compiled opener ``[TAG:`` of a bracketed tag (cached)."""
    key = (tag, ignore_case)
    rx = _OPENERS.get(key)
    if rx is None:
        rx = _OPENERS[key] = re.compile(
            r"\[" + re.escape(tag) + ":", re.IGNORECASE if ignore_case else 0
        )
    return rx


def _tags(text: str, tag: str, ignore_case: bool) -> tuple[list[str], int]:
    """Return the raw contents of the closed ``[TAG: ...]`` tags and the first unclosed opener.

    A tag's content runs from its opener to the first ``]`` after it; the next tag is looked
    for after that ``]`` (tags do not overlap). Once an opener has no ``]`` after it, no later
    one has either, so the scan stops: every character is looked at a bounded number of times.
    The second element is the end of the first opener without a ``]`` after it (-1 if none).
    """
    rx = _opener(tag, ignore_case)
    out: list[str] = []
    pos = 0
    while True:
        m = rx.search(text, pos)
        if m is None:
            return out, -1
        close = text.find("]", m.end())
        if close < 0:
            return out, m.end()
        out.append(text[m.end() : close])
        pos = close + 1


def bracket_tags(
    text: str, tag: str, *, ignore_case: bool = True, keep_empty: bool = False
) -> list[str]:
    r"""Return the stripped contents of the closed ``[TAG: ...]`` tags in ``text``, in order.

    A tag runs from ``[TAG:`` to the first ``]`` after it, as MTBBench's tags do
    (``[ANSWER: C) text]``, ``[REQUEST: file.png]``, ``[FILE: name]``, ``[IHCTool: ...]``;
    ``goodfire-ai/mtbbench``, ``neurips25/models/agent*.py@ae2f8fe``). The scan is linear in
    the length of ``text`` (a regex such as ``\[TAG:\s*([^\]]*)\]`` is quadratic on many
    unclosed tags, and its ``\s*`` before a class that also matches spaces adds another
    factor).

    Parameters
    ----------
    text : str
        A model message or a harness message.
    tag : str
        The tag name, e.g. ``"ANSWER"``.
    ignore_case : bool, default True
        Match the tag name without regard to case.
    keep_empty : bool, default False
        Keep tags whose content is empty after stripping (``[ANSWER: ]`` is an answer tag,
        ``[REQUEST: ]`` requests nothing).

    Returns
    -------
    list of str
        The contents, stripped of surrounding whitespace.
    """
    contents, _ = _tags(text, tag, ignore_case)
    out = [c.strip() for c in contents]
    return out if keep_empty else [c for c in out if c]
