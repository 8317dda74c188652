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
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..errors import InvalidArgumentError, InvalidTypeError, StateError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .._typing import Texts

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

LETTERS = "ABCDEF"

# The option text is read greedily and its trailing blanks stripped in Python: a lazy group
# followed by ``[ \t]*$`` rescans every run of blanks once per character (quadratic).
_OPTION_LINE = re.compile(r"^[ \t]*\(?([A-Z])\)[ \t]*(.*)$", re.MULTILINE)
_MARKDOWN = re.compile(r"[*_`]+")
# "answer [is] [:] [option] C": each optional part takes its own trailing whitespace, so no two
# whitespace quantifiers are adjacent (``\s*\s*\s*`` backtracks cubically on long blanks).
_PHRASE = re.compile(
    r"(?i:\b(?:final\s+answer|answer|choice|option)\b)\s*(?:(?i:is|was)\b\s*)?(?:[:=]\s*)?"
    r"(?:(?i:option|choice)\s+)?\(?([A-F])\)?(?![A-Za-z0-9])"
)
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


# ----------------------------------------------------------------------------- answers


@dataclass(frozen=True)
class Answer:
    """A parsed multiple-choice answer.

    Attributes
    ----------
    letter : str or None
        The chosen option letter, upper case, or None when none could be read.
    text : str or None
        The answer text after the letter (or the matched option's text), if any.
    raw : str
        What the answer was read from: the content of the last ``[ANSWER: ...]`` tag, or the
        whole (stripped) response when there is no tag.
    form : {"tag", "bare", "phrase", "option_text", "none"}
        How it was read: "tag" (a letter inside an answer tag), "bare" (the response starts
        with a letter form such as ``C)``), "phrase" ("the answer is C"), "option_text" (the
        text equals, or fuzzily matches, one option), or "none".
    valid : bool
        Whether MTBBench's harness would accept it as an answer: a closed answer tag (or,
        without tags, the response itself) whose content starts with a choice letter followed
        by ``)``, ``]`` or a space, or is a lone letter.
    """

    letter: str | None
    text: str | None
    raw: str
    form: Literal["tag", "bare", "phrase", "option_text", "none"]
    valid: bool


def mtbbench_valid(content: str, letters: str = LETTERS) -> bool:
    """Apply MTBBench's acceptance rule to answer-tag content.

    The content (stripped) is valid when it starts with a choice letter (case-insensitive)
    followed by ``)``, ``]`` or a space, or is a lone letter.

    Parameters
    ----------
    content : str
        The content of an answer tag.
    letters : str, default "ABCDEF"
        The allowed choice letters.

    Returns
    -------
    bool
        Whether MTBBench accepts it.
    """
    c = content.strip()
    lower = letters.lower()
    if len(c) >= 2:
        return c[0].lower() in lower and c[1] in ")] "
    return len(c) == 1 and c.lower() in lower


def mtbbench_correct(response: str | None, gold: str | None) -> bool | None:
    """Grade a response as MTBBench does: compare first characters, ignoring case.

    The first character of the stripped response must equal the first character of the
    stripped gold answer.

    Parameters
    ----------
    response : str or None
        The response (or answer-tag content).
    gold : str or None
        The gold answer, e.g. ``"C) text"``.

    Returns
    -------
    bool or None
        The grade; None when either is missing or empty.
    """
    if response is None or gold is None:
        return None
    r, g = response.strip(), gold.strip()
    if not r or not g:
        return None
    return r[0].lower() == g[0].lower()


def answer_letter(text: str | None, letters: str = LETTERS) -> str | None:
    """Return the choice letter a gold answer or option starts with, upper case, or None.

    The forms are ``"C) text"``, ``"C"`` and ``"(C) text"`` (markdown emphasis is ignored).

    Parameters
    ----------
    text : str or None
        The gold answer or option.
    letters : str, default "ABCDEF"
        The allowed choice letters.

    Returns
    -------
    str or None
        The letter, or None when the text starts with none.
    """
    if text is None:
        return None
    c = text.strip()
    if c and c[0] in letters and (len(c) == 1 or c[1] in ")]"):
        return c[0]
    return _leading_letter(_MARKDOWN.sub("", c).strip(), letters)


_LEADING = re.compile(r"\(?([A-Za-z])(?:\)|\]|\.|:)")
_LEADING_STRIP = re.compile(r"^\(?[A-Za-z][\)\]\.:]?\s*")
_OPTION_PREFIX = re.compile(r"^\s*\(?[A-Za-z][\)\]\.:]\s*")
_LETTER_THEN_TEXT = re.compile(r"([A-F])\s+(.+)", re.DOTALL)
_SPACES = re.compile(r"\s+")


def _leading_letter(c: str, letters: str) -> str | None:
    """Return the letter of a lone letter or a leading ``C)``/``(C)``/``C]``/``C.``/``C:``."""
    if not c:
        return None
    if len(c) == 1:
        return c.upper() if c.upper() in letters else None
    m = _LEADING.match(c)
    if m and m.group(1).upper() in letters:
        return m.group(1).upper()
    return None


def parse_options(question: str, letters: str = LETTERS) -> tuple[str, ...]:
    """Return the answer options listed in a question, as ``"A) text"`` strings.

    Options are lines ``A) ...``, ``B) ...`` (or ``(A) ...``) with consecutive letters from A;
    a new list starting at A replaces the previous one. Trailing spaces are dropped.

    Parameters
    ----------
    question : str
        The question text.
    letters : str, default "ABCDEF"
        The allowed choice letters.

    Returns
    -------
    tuple of str
        The options, in letter order (empty when none are listed).
    """
    found: dict[str, str] = {}
    for m in _OPTION_LINE.finditer(question):
        letter, text = m.group(1), m.group(2).rstrip(" \t")
        if letter not in letters:
            continue
        expected = letters[len(found)] if len(found) < len(letters) else None
        if letter == expected:
            found[letter] = text
        elif letter == "A":  # a new list starts: keep the latest complete one
            found = {"A": text}
    return tuple(f"{k}) {v}".rstrip() for k, v in found.items())


#: Inputs longer than this (characters) are not cached: the caches would keep them alive.
CACHED_CHARS = 4096


def _option_texts(options: tuple[str, ...], letters: str) -> dict[str, str]:
    """Map letter -> option text; cached for the usual short options (logs repeat them)."""
    if sum(map(len, options)) > CACHED_CHARS:
        return _option_texts_of(options, letters)
    return _option_texts_cached(options, letters)


@functools.lru_cache(maxsize=4096)
def _option_texts_cached(options: tuple[str, ...], letters: str) -> dict[str, str]:
    """Return :func:`_option_texts_of`, cached."""
    return _option_texts_of(options, letters)


def _option_texts_of(options: tuple[str, ...], letters: str) -> dict[str, str]:
    """Map letter -> option text (without its "C) " prefix); plain texts get letters in order."""
    out: dict[str, str] = {}
    for i, opt in enumerate(options):
        letter = answer_letter(opt, letters)
        text = opt
        if letter is not None:
            text = _OPTION_PREFIX.sub("", opt, count=1)
        else:
            letter = letters[i] if i < len(letters) else None
        if letter:
            out[letter] = text.strip()
    return out


def _norm(s: str) -> str:
    """Normalise text for option matching: no markdown, spaces collapsed, no end dots, lower."""
    return _SPACES.sub(" ", _MARKDOWN.sub("", s)).strip().strip(".").lower()


def _match_option(text: str, options: dict[str, str], fuzzy: float | None) -> str | None:
    """Return the letter of the one option ``text`` equals (else best fuzzy match), or None."""
    target = _norm(text)
    if not target:
        return None
    exact = [k for k, v in options.items() if _norm(v) == target]
    if len(exact) == 1:
        return exact[0]
    if fuzzy is None or exact:
        return None
    from rapidfuzz import fuzz

    scores = {k: fuzz.ratio(target, _norm(v)) for k, v in options.items()}
    if not scores:
        return None
    best = max(scores.values())
    winners = [k for k, s in scores.items() if s == best]
    return winners[0] if best >= fuzzy and len(winners) == 1 else None


def _choice(
    c: str, options: Sequence[str] | None, letters: str, *, in_tag: bool, fuzzy: float | None
) -> tuple[str | None, str | None, str]:
    """Read (letter, text, form) from stripped tag content or a whole stripped response."""
    n = len(c)
    if n:
        first = c[0].upper()
        if first in letters and (n == 1 or c[1] in (")] " if in_tag else ")]")):
            # MTBBench's valid form (in a tag) or "C)" / "C]" / a lone letter
            return first, c[2:].strip() or None, "tag" if in_tag else "bare"
    plain = _MARKDOWN.sub("", c).strip()
    letter = _leading_letter(plain, letters)
    if letter is not None:
        rest = _LEADING_STRIP.sub("", plain, count=1).strip()
        return letter, rest or None, "tag" if in_tag else "bare"
    opts = _option_texts(tuple(options), letters) if options else {}
    m = _LETTER_THEN_TEXT.fullmatch(plain)
    if m and m.group(1) in opts:
        # "C Squamous cell carcinoma": a bare letter followed by that option's own text
        if _match_option(m.group(2), {m.group(1): opts[m.group(1)]}, fuzzy) is not None:
            return m.group(1), m.group(2).strip(), "tag" if in_tag else "bare"
    if opts:
        hit = _match_option(plain, opts, fuzzy)
        if hit is not None:
            return hit, opts[hit], "option_text"
    m = _PHRASE.search(plain)
    if m and m.group(1) in letters:
        return m.group(1), None, "phrase"
    return None, None, "none"


def parse_answer(
    response: str | None,
    *,
    options: Sequence[str] | None = None,
    letters: str = LETTERS,
    fuzzy: float | None = 90.0,
    tag_content: bool = False,
) -> Answer:
    """Read the chosen option from an agent's response.

    Order: the last ``[ANSWER: ...]`` tag (MTBBench keeps the last one), else the whole
    response. Within that text: a leading letter form (``C``, ``C)``, ``(C)``, ``C.``,
    ``C:``, ``**C**``), a letter followed by its option's text, the text of exactly one option
    (exact after normalising case and spaces, else the single best ``rapidfuzz.fuzz.ratio``
    >= ``fuzzy``; ``fuzzy=None`` disables), and finally a phrase such as "the answer is C".
    A bare response starting with "A " is *not* read as choice A unless the rest is option A's
    text (it is usually the article).

    Parameters
    ----------
    response : str or None
        The model's message (or a logged response field).
    options : sequence of str, optional
        The question's options (``"A) text"`` or plain texts in letter order).
    letters : str, default "ABCDEF"
        The allowed choice letters (upper case).
    fuzzy : float or None, default 90.0
        Minimum rapidfuzz ratio (0-100) for fuzzy option-text matching; None disables it.
    tag_content : bool, default False
        ``response`` is already the content of an answer tag (MTBBench logs store it so): read
        it with the tag rules (``B No`` is choice B).

    Returns
    -------
    Answer
        The parsed answer (letter None, form "none" and not valid for a None response).

    Raises
    ------
    InvalidTypeError
        ``response`` is neither a string nor None.
    """
    if response is None:
        return Answer(None, None, "", "none", False)
    if not isinstance(response, str):
        raise InvalidTypeError(f"response: expected a string, got {type(response).__name__}")
    closed = True
    if tag_content:
        content, in_tag = response.strip(), True
    else:
        tags, unclosed = _tags(response, "ANSWER", True) if "[" in response else ([], -1)
        if tags:
            content, in_tag = tags[-1].strip(), True
        elif unclosed >= 0:
            content, in_tag, closed = response[unclosed:].strip(), True, False
        else:
            content, in_tag = response.strip(), False
    letter, text, form = _choice(content, options, letters, in_tag=in_tag, fuzzy=fuzzy)
    valid = closed and mtbbench_valid(content, letters)
    return Answer(letter, text, content, form, valid)  # type: ignore[arg-type]


def parse_answers(
    responses: Texts,
    *,
    options: Sequence[Sequence[str] | None] | None = None,
    letters: str = LETTERS,
    fuzzy: float | None = 90.0,
    tag_content: bool = False,
) -> list[str | None]:
    """Parse the letters of many responses at once.

    Element i equals ``parse_answer(responses[i], options=options[i], ...).letter``. The common
    forms (a closed answer tag or a response starting with ``C)``/``C]``/a lone
    letter) are read with vectorized polars regexes; every other non-null response goes
    through :func:`parse_answer`.

    Parameters
    ----------
    responses : sequence of str or None, or polars Series
        The responses.
    options : sequence of (sequence of str or None), optional
        The options of each response's question.
    letters, fuzzy, tag_content
        As in :func:`parse_answer`.

    Returns
    -------
    list of str or None
        The letter of each response.

    Raises
    ------
    InvalidArgumentError
        ``options`` of another length than ``responses``.
    """
    import polars as pl

    if isinstance(responses, pl.Series):
        s = responses.cast(pl.String)
    else:
        s = pl.Series("response", list(responses), dtype=pl.String)
    if options is not None and len(options) != len(s):
        raise InvalidArgumentError(
            f"options: expected {len(s)} entries (one per response), got {len(options)}"
        )
    cls = "".join(sorted(set(letters.upper() + letters.lower())))
    frame = pl.DataFrame({"r": s})
    if tag_content:
        body = pl.col("r").str.strip_chars()
        has_tag = pl.lit(True)
    else:
        last = pl.col("r").str.extract_all(r"(?i)\[ANSWER:\s*[^\]]*\]").list.last()
        has_tag = last.is_not_null()
        content = last.str.replace(r"(?i)^\[ANSWER:\s*", "").str.strip_suffix("]")
        body = pl.when(has_tag).then(content).otherwise(pl.col("r")).str.strip_chars()
    fast = (
        pl.when(has_tag)
        .then(body.str.extract(rf"^([{cls}])(?:[\)\] ]|$)", 1))
        .when(pl.col("r").str.contains(r"(?i)\[ANSWER:"))
        .then(pl.lit(None, dtype=pl.String))  # an unclosed tag: the scalar parser decides
        .otherwise(body.str.extract(rf"^([{cls}])(?:[\)\]]|$)", 1))
        .str.to_uppercase()
    )
    letters_fast = frame.select(fast.alias("letter")).to_series()
    out: list[str | None] = letters_fast.to_list()
    todo = (letters_fast.is_null() & s.is_not_null()).arg_true().to_list()
    if todo:
        values = s.to_list()
        for i in todo:
            opts = options[i] if options is not None else None
            out[i] = parse_answer(
                values[i], options=opts, letters=letters, fuzzy=fuzzy, tag_content=tag_content
            ).letter
    return out


# ----------------------------------------------------------------------------- file requests

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


# ----------------------------------------------------------------------------- CONCH calls


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


# ----------------------------------------------------------------------------- ReAct


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


# ----------------------------------------------------------------------------- RadA-BenchPlat


@dataclass(frozen=True)
class RadaCall:
    """A RadA-BenchPlat ``<Call>``, ``<EndCall>`` or ``<NoCall>`` block.

    ``kind`` is "call", "end_call" or "no_call"; ``fields`` maps inner tags to their text
    (Purpose, Tool, Input, Category, Anatomy, Modality, Ability, ...); ``inputs`` is the
    ``<Input>`` list (``['$a$', '$b$']``) parsed as a Python literal when it is one.

    Attributes
    ----------
    kind : {"call", "end_call", "no_call"}
        The block type.
    fields : dict of str to str
        Inner tag -> text.
    inputs : tuple of str or None
        The parsed ``<Input>``, when it is a Python literal list, tuple or string.
    """

    kind: Literal["call", "end_call", "no_call"]
    fields: dict[str, str] = field(default_factory=dict)
    inputs: tuple[str, ...] | None = None

    @property
    def tool(self) -> str | None:
        """The ``<Tool>`` text, or None."""
        return self.fields.get("Tool")

    @property
    def purpose(self) -> str | None:
        """The ``<Purpose>`` text, or None."""
        return self.fields.get("Purpose")


_RADA_BLOCK = re.compile(
    r"<(Call|EndCall|NoCall)>(.*?)(?:</\1>|(?=<(?:Call|EndCall|NoCall)>)|\Z)", re.DOTALL
)
_RADA_OPEN = re.compile(r"<(\w+)>")
_RADA_KIND = {"Call": "call", "EndCall": "end_call", "NoCall": "no_call"}


def _rada_fields(body: str) -> dict[str, str]:
    r"""Return the ``<Tag>text</Tag>`` fields of a block (a later repeat of a tag wins).

    Each ``<Tag>`` takes the text up to the first ``</Tag>`` after it; an opener without a close
    is skipped. A tag name once found unclosed is not searched for again (no later opener of it
    can close either), which keeps the scan linear where ``<(\w+)>(.*?)</\1>`` rescans the
    rest of the block for every unclosed opener.
    """
    fields: dict[str, str] = {}
    unclosed: set[str] = set()
    pos = 0
    while True:
        m = _RADA_OPEN.search(body, pos)
        if m is None:
            return fields
        name = m.group(1)
        close = -1 if name in unclosed else body.find(f"</{name}>", m.end())
        if close < 0:
            unclosed.add(name)
            pos = m.start() + 1
            continue
        fields[name] = body[m.end() : close].strip()
        pos = close + len(name) + 3


def parse_rada_calls(text: str) -> list[RadaCall]:
    """Return every ``<Call>``, ``<EndCall>`` and ``<NoCall>`` block in ``text``, in order.

    A block missing its closing tag ends at the next block or the end of the text.

    Parameters
    ----------
    text : str
        A model message.

    Returns
    -------
    list of RadaCall
        The blocks.
    """
    calls: list[RadaCall] = []
    for m in _RADA_BLOCK.finditer(text):
        fields = _rada_fields(m.group(2))
        inputs: tuple[str, ...] | None = None
        raw = fields.get("Input")
        if raw is not None:
            try:
                value = ast.literal_eval(raw)
            except (ValueError, SyntaxError):
                value = None
            if isinstance(value, (list, tuple)):
                inputs = tuple(str(v) for v in value)
            elif isinstance(value, str):
                inputs = (value,)
        calls.append(RadaCall(_RADA_KIND[m.group(1)], fields, inputs))  # type: ignore[arg-type]
    return calls


# ----------------------------------------------------------------------------- protocol


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
