"""MTBBench's request and tool tags: ``[REQUEST: ...]`` file requests and ``[CONCH: ...]`` calls.

File requests may hold comma-separated names with the wildcards ``*`` and ``?``, expanded
against the available files by a set-of-states match within a fixed budget
(:func:`parse_requests`, :func:`split_requests`); CONCH calls name an image and parenthesised
options (:func:`parse_conch`). Source: ``goodfire-ai/mtbbench``,
``neurips25/models/agent*.py@ae2f8fe``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import InvalidTypeError
from ._tags import bracket_tags

_WILDCARD = re.compile(r"[*?]")
#: The longest file name a wildcard request can match (POSIX ``NAME_MAX`` on Linux and macOS).
NAME_MAX = 255
#: Steps (pattern length x name length, summed) that expanding wildcards may take per call.
WILDCARD_BUDGET = 1 << 22
_STARS = re.compile(r"\*+")


def _wildcard_match(pattern: str, name: str) -> bool:
    """Tell whether ``name`` matches ``pattern`` whole (``*``: any run, ``?``: one character).

    Neither wildcard matches a newline. The match simulates the pattern as a set of states
    (Thompson, CACM 11(6), 1968) instead of backtracking, so it costs at most
    O(len(name) * len(pattern)); a backtracking regex (``.*a.*a.*a...``) is exponential in the
    number of stars. Runs of stars are one star, and a pattern with more non-star characters
    than the name cannot match, which bounds the pattern by the name's length. Names longer
    than :data:`NAME_MAX` characters are not file names (POSIX ``NAME_MAX``, 255 on Linux and
    macOS) and match nothing, which bounds each match by a constant.
    """
    if len(name) > NAME_MAX:
        return False
    p = _STARS.sub("*", pattern)
    m = len(p)
    if m - p.count("*") > len(name):
        return False

    def close(states: set[int]) -> set[int]:
        """Add the states reached by letting stars match nothing."""
        out = set(states)
        for i in states:
            while i < m and p[i] == "*":
                i += 1
                out.add(i)
        return out

    states = close({0})
    for ch in name:
        nxt: set[int] = set()
        for i in states:
            if i == m:
                continue
            c = p[i]
            if c == "*":
                if ch != "\n":
                    nxt.add(i)
            elif c == ch or (c == "?" and ch != "\n"):
                nxt.add(i + 1)
        if not nxt:
            return False
        states = close(nxt)
    return m in states


def _clean_name(name: str) -> str:
    """Strip a requested file name, its quotes and backticks, and drop its spaces."""
    # MTBBench drops all spaces ("some models add spaces before extension") and we also drop
    # quotes and backticks models wrap names in.
    return name.strip().strip("'\"`").replace(" ", "")


def _dedupe(names: Iterable[str]) -> list[str]:
    """Return the names without repeats, first occurrence kept."""
    return list(dict.fromkeys(names))


def parse_requests(text: str, *, available: Sequence[str] | None = None) -> list[str]:
    """Return the file names requested with ``[REQUEST: ...]`` tags, in order, without repeats.

    A tag may hold a comma-separated list (``[REQUEST: a.png, b.png]``). Names may contain the
    wildcards ``*`` and ``?``; with ``available`` they expand to the matching available names
    (in ``available`` order), and a pattern matching nothing is kept as written (so it counts
    as hallucinated in :func:`split_requests`). Names longer than :data:`NAME_MAX` match
    nothing, and patterns are expanded within a fixed budget of :data:`WILDCARD_BUDGET` steps
    (far beyond what agents write; further patterns are kept as written), so the work is
    bounded for any request.

    Parameters
    ----------
    text : str
        A model message.
    available : sequence of str, optional
        The files the agent may access, to expand wildcards against.

    Returns
    -------
    list of str
        The requested names (spaces dropped, surrounding quotes and backticks stripped).
    """
    names: list[str] = []
    for tag in bracket_tags(text, "REQUEST"):
        for part in tag.split(","):
            name = _clean_name(part)
            if name:
                names.append(name)
    if available is not None:
        names = _expand(names, available)
    return _dedupe(names)


def _expand(names: Iterable[str], available: Sequence[str]) -> list[str]:
    """Expand wildcard names against ``available``; a pattern matching nothing stays as is.

    Matching a pattern against a name costs at most len(pattern) * len(name) steps; patterns
    are expanded while the sum of those bounds stays within :data:`WILDCARD_BUDGET` (thousands
    of patterns against a usual list of files), and the rest stay as written, so no request
    can make the work quadratic.
    """
    out: list[str] = []
    total = sum(len(a) for a in available if len(a) <= NAME_MAX)
    spent = 0
    for name in _dedupe(names):
        cost = len(name) * total
        if _WILDCARD.search(name) and spent + cost <= WILDCARD_BUDGET:
            spent += cost
            hits = [a for a in available if _wildcard_match(name, a)]
            out.extend(hits if hits else [name])
        else:
            out.append(name)
    return out


@dataclass(frozen=True)
class FileRequest:
    """Requested files split into those that exist and those that do not.

    Attributes
    ----------
    accessed : tuple of str
        Requested names that are available, without duplicates, in request order.
    hallucinated : tuple of str
        Requested names that are not available, without duplicates, in request order.
    """

    accessed: tuple[str, ...]
    hallucinated: tuple[str, ...]


def split_requests(requested: Iterable[str], available: Sequence[str]) -> FileRequest:
    """Split requested names into accessed and hallucinated files, as MTBBench's harness does.

    Parameters
    ----------
    requested : iterable of str
        The requested names; wildcards are expanded against ``available``.
    available : sequence of str
        The files the agent may access.

    Returns
    -------
    FileRequest
        The accessed and hallucinated names.

    Raises
    ------
    InvalidTypeError
        ``requested`` is a single string.
    """
    if isinstance(requested, str):
        raise InvalidTypeError("requested: expected a sequence of file names, got a single string")
    names = _dedupe(_expand((_clean_name(r) for r in requested if r and r.strip()), available))
    have = set(available)
    return FileRequest(
        tuple(n for n in names if n in have), tuple(n for n in names if n not in have)
    )


@dataclass(frozen=True)
class ConchCall:
    """A ``[CONCH: image, (option 1), (option 2), ...]`` tool call.

    Attributes
    ----------
    image : str
        The image name (spaces dropped).
    options : tuple of str
        The parenthesised options.
    """

    image: str
    options: tuple[str, ...]


_CONCH_OPEN = re.compile(r"\[CONCH:\s*", re.IGNORECASE)
_CONCH_PUNCT = re.compile(r"[()\]]")


def parse_conch(text: str) -> list[ConchCall]:
    """Return every ``[CONCH: image.jpg, (option 1), (option 2)]`` call in ``text``, in order.

    Options are the top-level parenthesised groups (nested parentheses stay in the option
    text: ``(carcinoma (NOS))``); the call ends at the first ``]`` outside parentheses, or
    where the next ``[CONCH:`` call starts (so an unclosed call never swallows the calls after
    it, and each character is scanned once: linear time). Spaces inside the image name are
    dropped as MTBBench does.

    Parameters
    ----------
    text : str
        A model message.

    Returns
    -------
    list of ConchCall
        The calls.
    """
    calls: list[ConchCall] = []
    openers = [(m.start(), m.end()) for m in _CONCH_OPEN.finditer(text)]
    for k, (_, i) in enumerate(openers):
        limit = openers[k + 1][0] if k + 1 < len(openers) else len(text)
        comma = text.find(",", i, limit)
        close = text.find("]", i, limit)
        if comma < 0 or (0 <= close < comma):
            if close >= 0 and text[i:close].strip():
                calls.append(ConchCall(_clean_name(text[i:close]), ()))
            continue
        image = _clean_name(text[i:comma])
        options: list[str] = []
        depth, start = 0, -1
        for p in _CONCH_PUNCT.finditer(text, comma + 1, limit):
            ch, j = p.group(), p.start()
            if ch == "(":
                if depth == 0:
                    start = j + 1
                depth += 1
            elif ch == ")" and depth > 0:
                depth -= 1
                if depth == 0:
                    options.append(text[start:j].strip())
            elif ch == "]" and depth == 0:
                break
        calls.append(ConchCall(image, tuple(options)))
    return calls
