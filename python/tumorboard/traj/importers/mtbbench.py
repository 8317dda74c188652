"""MTBBench chat logs, as MTBBench's agents write them (Vasilev et al., NeurIPS 2025).

The agents are ``goodfire-ai/mtbbench``, ``neurips25/models/agent*.py@ae2f8fe``.

Layout: ``<model folder>/<patient>_chatlog_<unix_ts>.json``. Each file is a JSON list of question
records ``{question, answer, response, correct, files_accessed, files_hallucinated,
question_time}`` followed by one ``{"conversation": [...]}`` entry (the whole chat), which is
stored as events, attributed to the questions by the ``Question:`` prompts of the user.

Runs: a folder named ``<model>-with-tools`` is the tool-augmented run of ``<model>``
(tools=True); ``model_map`` renames folders to display names. The run id is
``mtbbench:<track>:<model>:tools|no-tools[:<run_name>]``.

Tracks and tasks:

* ``multimodal`` (HANCOCK, 15 questions per patient): the task comes from the position,
  0-8 digital_pathology, 9-12 hematology, 13-14 outcome_recurrence.
* ``longitudinal`` (MSK-CHORD, varying count): from the wording: "recur" -> recurrence,
  "alive"/"surviv" -> outcome, "progress" -> progression.

Detection (without ``track``): longitudinal when every question of the file matches a
longitudinal wording, else multimodal (a multimodal file opens with pathology questions).

Quirks handled (each leaves a flag on the item): ``correct`` missing (graded by the first
letter of the response against the gold letter, ``correct_source="graded"``; "missing" when
there is no response), responses that are not a clean letter (``response_unclean``),
duplicate file names (``duplicate_files_accessed`` / ``duplicate_files_hallucinated``, stored
once), no options in the question (``no_options``), a gold letter outside the options
(``gold_not_in_options``), unexpected question counts (``unexpected_question_count``) and
positions past the last known task (``task_unknown``). Each ``[CONCH: ...]`` call is a
``tool_call`` event; MTBBench's harness runs the first call of a message, so the reply (the
next message) is the output of that call only, and later calls of the message have none.
Patient ids may contain ``_`` and ``-``: the file name is split on its last ``_chatlog_``.
Items are keyed by run and patient and the position in the file (``item_id = q<position>``),
never by question text.
"""

from __future__ import annotations

import functools
import hashlib
import re
import reprlib
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..._json import json_text, load_json
from ...errors import InvalidArgumentError
from ...harness.parsing import (
    answer_letter,
    bracket_tags,
    mtbbench_correct,
    mtbbench_valid,
    parse_answer,
    parse_conch,
    parse_options,
    parse_requests,
    split_requests,
)
from ._common import ImportOptions, MalformedLog, Parsed, dedupe, digest, files_with_suffix, run_key

BENCHMARK = "mtbbench"
TRACKS = ("multimodal", "longitudinal")
TOOLS_SUFFIX = "-with-tools"
MULTIMODAL_QUESTIONS = 15
_CHATLOG = "_chatlog_"

_LONGITUDINAL = (
    ("recurrence", re.compile(r"\brecurr", re.IGNORECASE)),
    ("outcome", re.compile(r"\balive\b|\bsurviv", re.IGNORECASE)),
    ("progression", re.compile(r"\bprogress", re.IGNORECASE)),
)
# A line (after blanks, not newlines) starting "Question:" and a space. Equivalent to
# ``(?:^|\n)\s*Question:\s``, which rescans every run of newlines once per newline (quadratic).
_QUESTION_PROMPT = re.compile(r"^[^\S\n]*Question:\s", re.MULTILINE)
_IHC_IMAGE = re.compile(r"cells in (\S+?) are positively stained")
#: The openers of the tags an assistant message may hold, matched as their own parsers match
#: them (case-insensitively): group 1 a file request, 2 a CONCH call, 3 an answer.
_ASSISTANT_TAGS = re.compile(r"\[(?:(REQUEST)|(CONCH)|(ANSWER)):", re.IGNORECASE)


def _options(question: str) -> tuple[str, ...]:
    """Return the options listed in a question (cached: logs repeat questions per patient).

    Questions longer than 4096 characters are not cached (the cache would keep them alive).
    """
    return parse_options(question) if len(question) > 4096 else _options_cached(question)


@functools.lru_cache(maxsize=4096)
def _options_cached(question: str) -> tuple[str, ...]:
    """Return :func:`~tumorboard.harness.parsing.parse_options` of a question, cached."""
    return parse_options(question)


def multimodal_task(position: int) -> str | None:
    """Return the HANCOCK task of the question at ``position`` (0-based) in a patient's log.

    None past the last known position.
    """
    if 0 <= position <= 8:
        return "digital_pathology"
    if 9 <= position <= 12:
        return "hematology"
    if 13 <= position <= 14:
        return "outcome_recurrence"
    return None


def longitudinal_task(question: str) -> str | None:
    """Return the MSK-CHORD task from the question's wording (recurrence, outcome, progression).

    None when no wording matches.
    """
    for task, rx in _LONGITUDINAL:
        if rx.search(question):
            return task
    return None


def detect_track(questions: list[str]) -> str:
    """Detect the track: "longitudinal" when every question has a longitudinal wording.

    Otherwise (or without questions) "multimodal".
    """
    if questions and all(longitudinal_task(q) is not None for q in questions):
        return "longitudinal"
    return "multimodal"


def split_filename(name: str) -> tuple[str, int | None]:
    """Split ``<patient>_chatlog_<ts>.json`` into (patient id, unix timestamp or None).

    The patient id may itself contain ``_`` or ``-``: the name is split on its last
    ``_chatlog_``. Raises MalformedLog for a name without it.
    """
    stem = name[:-5] if name.lower().endswith(".json") else name
    patient, sep, ts = stem.rpartition(_CHATLOG)
    if not sep or not patient:
        raise MalformedLog(f"file name {name!r} does not match <patient>_chatlog_<unix_ts>.json")
    try:
        return patient, int(ts)
    except ValueError:
        return patient, None


def model_of(folder: str, model_map: Mapping[str, str], model: str | None) -> tuple[str, bool]:
    """Return the (display model name, tools) of a model folder name.

    A ``-with-tools`` suffix means tools; ``model`` overrides the name, else ``model_map``
    renames the folder (or its base name).
    """
    tools = folder.endswith(TOOLS_SUFFIX)
    base = folder[: -len(TOOLS_SUFFIX)] if tools else folder
    if model is not None:
        return model, tools
    return model_map.get(folder, model_map.get(base, base)), tools


def discover(src: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Return the chat logs under ``src`` (a file or a folder searched recursively).

    Other ``.json`` files are returned as skipped (file, reason) pairs; hidden paths are left
    out.
    """
    if src.is_file():
        return [src], []
    files: list[Path] = []
    skipped: list[tuple[str, str]] = []
    for path in files_with_suffix(src, (".json",)):  # any letter case: ..._chatlog_....JSON
        if _CHATLOG in path.name:
            files.append(path)
        else:
            skipped.append(
                (str(path), "not an MTBBench chat log (expected <patient>_chatlog_<unix_ts>.json)")
            )
    return files, skipped


def _bool(value: Any) -> bool | None:
    """Return a logged boolean (bool, 0/1 or "true"/"false"), or None for anything else."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _names(record: dict[str, Any], key: str, index: int) -> list[str]:
    """Return a record's list of file names (empty when missing)."""
    value = record.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MalformedLog(
            f"record {index}: {key!r}: expected a list of file names, got {reprlib.repr(value)}"
        )
    return value


def parse(
    path: Path, raw: bytes, opts: ImportOptions, fp: bytes = b"", content_hash: str | None = None
) -> Parsed:
    """Parse one MTBBench chat log into rows.

    Parameters
    ----------
    path : pathlib.Path
        The log file; its name gives the patient and time, its folder the model.
    raw : bytes
        Its content (UTF-8 JSON).
    opts : ImportOptions
        The import's options.
    fp : bytes, default b""
        The import's options fingerprint; every item's digest is that of ``fp`` and the file's
        content hash.
    content_hash : str, optional
        The SHA-256 hex digest of ``raw`` when the caller has it (computed otherwise).

    Returns
    -------
    Parsed
        One run row, one item per question record, the conversation's events, and the
        (run, patient) unit the file covers.

    Raises
    ------
    MalformedLog
        The file cannot be imported; the message is the reason.
    InvalidArgumentError
        An unknown forced track.
    """
    patient_id, ts = split_filename(path.name)
    try:
        doc = load_json(raw)
    except InvalidArgumentError as exc:
        raise MalformedLog(str(exc)) from None
    if not isinstance(doc, list):
        raise MalformedLog(f"expected a JSON list of question records, got {type(doc).__name__}")
    records: list[dict[str, Any]] = []
    conversation: Any = None
    for i, entry in enumerate(doc):
        if not isinstance(entry, dict):
            raise MalformedLog(f"entry {i}: expected an object, got {type(entry).__name__}")
        if "conversation" in entry and "question" not in entry:
            conversation = entry["conversation"]
            continue
        for key in ("question", "answer"):
            if not isinstance(entry.get(key), str):
                raise MalformedLog(f"record {i}: {key!r} is missing or not a string")
        records.append(entry)
    if not records:
        raise MalformedLog("no question records")

    questions = [r["question"] for r in records]
    if opts.track is not None:
        if opts.track not in TRACKS:
            raise InvalidArgumentError(f"track: expected one of {TRACKS}, got {opts.track!r}")
        track = opts.track
    else:
        track = detect_track(questions)
    model, tools = model_of(path.parent.name, opts.model_map, opts.model)
    benchmark = opts.benchmark or BENCHMARK
    run_id = run_key(benchmark, track, model, "tools" if tools else "no-tools", opts.run_name)
    created = (
        datetime.fromtimestamp(ts, timezone.utc)  # noqa: UP017 (py3.10 target)
        if ts is not None and 0 <= ts < 2**33
        else None
    )

    file_flags = []
    if track == "multimodal" and len(records) != MULTIMODAL_QUESTIONS:
        file_flags.append("unexpected_question_count")
    items: list[dict[str, Any]] = []
    content_hash = content_hash or hashlib.sha256(raw).hexdigest()
    source, dig = str(path), digest(fp, content_hash.encode())
    for pos, rec in enumerate(records):
        item = _item(rec, pos, run_id, patient_id, track, file_flags)
        item["source"], item["digest"] = source, dig
        items.append(item)

    events, attempts, conv_flag = _events(conversation, records, run_id, patient_id)
    for it, n in zip(items, attempts, strict=True):
        it["attempts"] = n
        if conv_flag:
            it["flags"].append(conv_flag)
    run = {
        "run_id": run_id,
        "benchmark": benchmark,
        "track": track,
        "model": model,
        "tools": tools,
        "created_at": created,
        "config": json_text(
            {"importer": "mtbbench", "folder": path.parent.name, "run_name": opts.run_name}
        ),
    }
    return Parsed(
        runs=[run],
        items=items,
        events=events,
        unit=(run_id, patient_id),
        order=float(ts) if ts is not None else 0.0,
        n_records=len(records),
    )


def _item(
    rec: dict[str, Any], pos: int, run_id: str, patient_id: str, track: str, file_flags: list[str]
) -> dict[str, Any]:
    """Build the items row of one question record, with its quirk flags."""
    flags = list(file_flags)
    question, answer = rec["question"], rec["answer"]
    options = list(_options(question))
    if not options:
        flags.append("no_options")
    gold = answer_letter(answer)
    if gold is None:
        flags.append("gold_unparsed")
    elif options and gold not in {o[0] for o in options}:
        flags.append("gold_not_in_options")
    if track == "multimodal":
        task = multimodal_task(pos)
    else:
        task = longitudinal_task(question)
    if task is None:
        task = "unknown"
        flags.append("task_unknown")

    response = rec.get("response")
    if response is not None and not isinstance(response, str):
        response = json_text(response)
        flags.append("response_not_text")
    parsed = None
    if response is None or not response.strip():
        flags.append("response_missing")
    else:
        parsed = parse_answer(response, options=options or None, tag_content=True).letter
        if not mtbbench_valid(response):
            flags.append("response_unclean")

    if "correct" in rec and _bool(rec["correct"]) is not None:
        correct: bool | None = _bool(rec["correct"])
        source = "log"
        if not isinstance(rec["correct"], bool):
            flags.append("correct_coerced")
    else:
        if "correct" in rec:
            flags.append("correct_invalid")
        correct = mtbbench_correct(response, answer)
        source = "missing" if correct is None else "graded"

    accessed, dup_a = dedupe(_names(rec, "files_accessed", pos))
    hallucinated, dup_h = dedupe(_names(rec, "files_hallucinated", pos))
    if dup_a:
        flags.append("duplicate_files_accessed")
    if dup_h:
        flags.append("duplicate_files_hallucinated")
    latency = rec.get("question_time")
    if isinstance(latency, bool) or not isinstance(latency, (int, float)):
        if latency is not None:
            flags.append("question_time_invalid")
        latency = None
    return {
        "run_id": run_id,
        "patient_id": patient_id,
        "item_id": f"q{pos}",
        "position": pos,
        "task": task,
        "question": question,
        "options": options,
        "gold": gold,
        "gold_text": answer,
        "response": response,
        "parsed_answer": parsed,
        "correct": correct,
        "correct_source": source,
        "n_files": len(accessed),
        "files_accessed": accessed,
        "files_hallucinated": hallucinated,
        "latency_s": float(latency) if latency is not None else None,
        "attempts": None,
        "flags": flags,
    }


def _events(
    conversation: Any, records: list[dict[str, Any]], run_id: str, patient_id: str
) -> tuple[list[dict[str, Any]], list[int | None], str | None]:
    """Return the events of the trailing conversation and the attempts per question.

    The third element is a flag for all items when the conversation is malformed or does not
    line up with the records (None otherwise, and for a missing conversation).
    """
    n = len(records)
    if conversation is None:
        return [], [None] * n, None
    if not isinstance(conversation, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in conversation
    ):
        return [], [None] * n, "conversation_malformed"

    # which question each message belongs to (-1: before the first question)
    owner: list[int] = []
    q = -1
    prompts: list[int] = []
    for idx, m in enumerate(conversation):
        content = m["content"]
        if m["role"] == "user" and "Question:" in content and _QUESTION_PROMPT.search(content):
            q += 1
            prompts.append(idx)
        owner.append(q)
    aligned = len(prompts) == n and all(
        _asked(records[k]["question"], conversation[prompts[k]]["content"]) for k in range(n)
    )
    flag = None if aligned else "conversation_unaligned"

    events: list[dict[str, Any]] = []
    steps: dict[str | None, int] = {}
    reprompts = [0] * n
    available: list[str] = []

    def add(item_id: str | None, **row: Any) -> None:
        """Append an event row with the item's next step number."""
        step = steps.get(item_id, 0)
        steps[item_id] = step + 1
        owner = int(item_id[1:]) if item_id is not None else -1
        events.append(
            {"run_id": run_id, "patient_id": patient_id, "item_id": item_id, "step": step,
             "_row": owner, **row}
        )  # fmt: skip

    for idx, m in enumerate(conversation):
        role, content = m["role"], m["content"]
        item_id = f"q{owner[idx]}" if aligned and owner[idx] >= 0 else None
        if role == "user" and "New files available" in content:
            available = bracket_tags(
                content.split("New files available", 1)[1], "FILE", ignore_case=False
            )
        if role == "user" and _is_reprompt(content):
            if aligned and owner[idx] >= 0:
                reprompts[owner[idx]] += 1
            add(item_id, role=role, kind="reprompt", output=content)
            continue
        add(item_id, role=role, kind="message", output=content)
        if role == "assistant":
            # which parsers can find anything: one scan instead of three (each parser finds
            # nothing without its opener)
            found = (
                {m.lastindex for m in _ASSISTANT_TAGS.finditer(content)} if "[" in content else ()
            )
            requested = parse_requests(content) if 1 in found else None
            if requested:
                split = split_requests(requested, available) if available else None
                add(
                    item_id,
                    role=role,
                    kind="file_access",
                    input=json_text({"requested": requested}),
                    output=json_text(
                        {"accessed": list(split.accessed), "hallucinated": list(split.hallucinated)}
                    )
                    if split
                    else None,
                    ok=(not split.hallucinated) if split else None,
                )
            nxt = conversation[idx + 1]["content"] if idx + 1 < len(conversation) else None
            failed = nxt is not None and "[ERROR" in nxt  # once: calls may be many, nxt long
            for j, call in enumerate(parse_conch(content) if 2 in found else ()):
                # MTBBench runs the first call of a message; the reply is stored with it only,
                # so a message of many calls cannot multiply a long reply
                reply = nxt if j == 0 else None
                add(
                    item_id,
                    role="tool",
                    kind="tool_call",
                    tool="conch",
                    input=json_text({"image": call.image, "options": list(call.options)}),
                    output=reply,
                    ok=None if reply is None else not failed,
                    error=reply if failed else None,
                )
            tags = bracket_tags(content, "ANSWER", keep_empty=True) if 3 in found else None
            if tags:
                add(
                    item_id,
                    role=role,
                    kind="answer",
                    output=tags[-1].strip(),
                    ok=mtbbench_valid(tags[-1]),
                )
        elif role == "user" and "[IHCTool:" in content:
            for text in bracket_tags(content, "IHCTool", ignore_case=False):
                image = _IHC_IMAGE.search(text)
                if image is None:
                    continue  # the disclaimer line
                add(
                    item_id,
                    role="tool",
                    kind="tool_call",
                    tool="ihc",
                    input=json_text({"image": image.group(1)}),
                    output=text,
                    ok=True,
                )
    attempts: list[int | None] = [r + 1 for r in reprompts] if aligned else [None] * n
    return events, attempts, flag


def _asked(question: str, prompt: str) -> bool:
    """Tell whether a user prompt asks ``question``: its first 80 characters, spaces collapsed.

    A prompt holding the whole question verbatim holds its collapsed start too, so that case
    skips collapsing the (long) prompt.
    """
    stripped = question.strip()
    if stripped and stripped in prompt:
        return True
    return _snippet(question) in _squash(prompt)


def _is_reprompt(content: str) -> bool:
    """Tell whether a user message is MTBBench's re-prompt for a final answer."""
    return content.lstrip()[:31].lower() == "please provide the final answer"


def _squash(text: str) -> str:
    """Collapse runs of whitespace into one space and strip."""
    return re.sub(r"\s+", " ", text).strip()


def _snippet(question: str) -> str:
    """Return the first 80 characters of a question, whitespace collapsed (for alignment)."""
    return _squash(question)[:80]
