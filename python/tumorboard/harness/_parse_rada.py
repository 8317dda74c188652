"""RadA-BenchPlat tool-call blocks: ``<Call>``, ``<EndCall>`` and ``<NoCall>``.

Zheng et al. 2025, arXiv 2412.09529; ``MAGIC-AI4Med/RadABench``, ``EvalPlat@acbcf87``. A block
holds ``<Purpose>``, ``<Tool>``, ``<Input>`` (and for NoCall ``<Category>``, ``<Anatomy>``,
``<Modality>``, ``<Ability>``) fields (:func:`parse_rada_calls`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Literal


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
