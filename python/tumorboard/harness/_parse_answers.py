"""Multiple-choice answers in agents' output, and MTBBench's rules to accept and grade them.

An answer is read from the last ``[ANSWER: ...]`` tag or the whole response: a leading letter
form (``C)``, ``(C)``, ``**C**``), a letter followed by its option's text, the text of one
option (exact or fuzzy), or a phrase such as "the answer is C" (:func:`parse_answer`; the batch
version :func:`parse_answers` runs the common forms as polars regexes). Also the options a
question lists (:func:`parse_options`) and MTBBench's acceptance and grading rules
(:func:`mtbbench_valid`, :func:`mtbbench_correct`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..errors import InvalidArgumentError, InvalidTypeError
from ._tags import _tags

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .._typing import Texts

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
    distinct = s.unique()
    if 2 * len(distinct) <= len(s):
        # many repeated responses (short answers, one model's habits): the fast forms depend on
        # the response alone, so each distinct one is read once and joined back in order
        read = pl.DataFrame({"r": distinct}).with_columns(fast.alias("letter"))
        letters_fast = frame.join(
            read, on="r", how="left", nulls_equal=True, maintain_order="left"
        ).get_column("letter")
    else:
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
