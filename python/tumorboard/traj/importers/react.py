"""ReAct text traces into items and events.

ReAct is Yao et al., ICLR 2023; the traces are LAMMI-style ``Thought:`` / ``Action:`` /
``Action Input:`` / ``Observation:`` blocks.

Sources: a text file (``.txt``, ``.md``, ``.log``) holds one trace; leading comment lines
``# key: value`` give metadata (``model``, ``patient_id``, ``item_id``, ``task``, ``gold``,
``question``, ``benchmark``, ``track``, ``tools``). A ``.jsonl`` file holds one object per line
with the trace text under ``trace`` and the same metadata keys. The model defaults to the
import's ``model``, else the folder name; the item id to the file stem (``L<line>`` in
JSON lines); ``tools`` to true (a ReAct agent acts through tools).

Each trace becomes one item (question from ``Question:`` or the metadata, options parsed from
the question, response = the final answer, graded against ``gold`` when given) and one event
per thought, action and observation; an observation starting with "error", "exception" or
"traceback" is ``ok=False`` with the text as ``error``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..._json import json_text, load_json
from ...errors import InvalidArgumentError
from ...harness.parsing import answer_letter, parse_answer, parse_options, parse_react
from ._common import ImportOptions, MalformedLog, Parsed, digest, input_text, run_key

TEXT_SUFFIXES = (".txt", ".md", ".log")
# The value is read greedily and stripped in Python (a lazy value before ``\s*$`` is quadratic
# on long runs of blanks).
_META = re.compile(r"^#\s*([A-Za-z_]+)\s*[:=]\s*(.*)$")
_FAILED = re.compile(r"^\s*(?:error|exception|traceback)\b", re.IGNORECASE)


def discover(src: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Return the files to import: ``src`` itself, or every trace file under it.

    Trace files end in .txt, .md, .log or .jsonl; hidden paths are left out. The second
    element (files skipped while discovering) is always empty for this format.
    """
    if src.is_file():
        return [src], []
    files = sorted(
        p
        for p in src.rglob("*")
        if p.is_file()
        and p.suffix.lower() in TEXT_SUFFIXES + (".jsonl",)
        and not any(part.startswith(".") for part in p.relative_to(src).parts)
    )
    return files, []


def _front_matter(text: str) -> tuple[dict[str, str], str]:
    """Split the leading ``# key: value`` lines (lowercased keys) from the trace text."""
    meta: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _META.match(lines[i])
        if not m:
            break
        meta[m.group(1).lower()] = m.group(2).rstrip()
        i += 1
    return meta, "\n".join(lines[i:])


def parse(path: Path, raw: bytes, opts: ImportOptions, fp: bytes = b"") -> Parsed:
    """Parse one trace file (or JSON-lines file of traces) into rows.

    Parameters
    ----------
    path : pathlib.Path
        The file; its stem is the default item id, its folder the default model.
    raw : bytes
        Its content (UTF-8).
    opts : ImportOptions
        The import's options.
    fp : bytes, default b""
        The import's options fingerprint, the start of every item digest (with the trace's
        text: the file, or the line).

    Returns
    -------
    Parsed
        The runs, items and events rows; bad lines of a JSON-lines file become warnings.

    Raises
    ------
    MalformedLog
        No trace could be read from the file.
    """
    out = Parsed()
    runs: dict[str, dict[str, Any]] = {}
    if path.suffix.lower() == ".jsonl":
        for lineno, line in enumerate(raw.split(b"\n"), 1):
            if not line.strip():
                continue
            out.n_records += 1
            where = f"{path}:{lineno}"
            try:
                rec = load_json(line)
            except InvalidArgumentError as exc:
                out.rejected.append((where, str(exc)))
                continue
            if not isinstance(rec, dict) or not isinstance(rec.get("trace"), str):
                out.rejected.append((where, "expected an object with a 'trace' string"))
                continue
            meta = {k: v for k, v in rec.items() if k != "trace"}
            n_items, n_events = len(out.items), len(out.events)
            try:
                _add(out, runs, rec["trace"], meta, f"L{lineno}", path, opts,
                     source=where, dig=digest(fp, line))  # fmt: skip
            except MalformedLog as exc:
                out.rejected.append((where, str(exc)))
            except Exception as exc:  # noqa: BLE001 - one bad line never costs the others
                del out.items[n_items:], out.events[n_events:]
                out.rejected.append((where, f"cannot be read ({type(exc).__name__}: {exc})"))
        if not out.items:
            first = f"; first problem: {out.rejected[0][0]}: {out.rejected[0][1]}"
            raise MalformedLog("no valid trace in the file" + (first if out.rejected else ""))
    else:
        out.n_records = 1
        meta, body = _front_matter(raw.decode("utf-8"))
        _add(out, runs, body, meta, path.stem, path, opts, source=str(path), dig=digest(fp, raw))
    out.runs = list(runs.values())
    return out


def _add(
    out: Parsed,
    runs: dict[str, dict[str, Any]],
    trace_text: str,
    meta: Mapping[str, Any],
    default_id: str,
    path: Path,
    opts: ImportOptions,
    *,
    source: str,
    dig: str,
) -> None:
    """Add the run, the item and the events of one trace to ``out``."""
    trace = parse_react(trace_text)
    if not trace.steps and trace.final_answer is None:
        raise MalformedLog("no Thought/Action/Observation blocks and no final answer found")

    def s(key: str) -> str | None:
        """Return a metadata value as a string (None when missing)."""
        v = meta.get(key)
        return None if v is None else str(v)

    model = opts.model or s("model") or path.parent.name
    benchmark = opts.benchmark or s("benchmark") or "react"
    track = opts.track or s("track") or "default"
    tools_raw = meta.get("tools", True)
    tools = tools_raw if isinstance(tools_raw, bool) else str(tools_raw).lower() == "true"
    run_id = run_key(benchmark, track, model, "tools" if tools else "no-tools", opts.run_name)
    runs.setdefault(
        run_id,
        {
            "run_id": run_id,
            "benchmark": benchmark,
            "track": track,
            "model": model,
            "tools": tools,
            "created_at": None,
            "config": json_text({"importer": "react"}),
        },
    )
    item_id = s("item_id") or default_id
    patient = s("patient_id")
    question = trace.question or s("question")
    options = list(parse_options(question)) if question else []
    gold_raw = s("gold")
    gold = answer_letter(gold_raw) if gold_raw is not None else None
    flags = []
    response = trace.final_answer
    parsed = parse_answer(response, options=options or None).letter if response else None
    if response is None:
        flags.append("no_final_answer")
    if gold is None and gold_raw is not None:
        gold = gold_raw
    if gold is not None:
        correct, source = (parsed is not None and parsed == gold), "graded"
    else:
        correct, source = None, "missing"
    out.items.append(
        {
            "run_id": run_id,
            "patient_id": patient,
            "item_id": item_id,
            "position": None,
            "task": s("task") or "default",
            "question": question,
            "options": options or None,
            "gold": gold,
            "gold_text": gold_raw if gold_raw != gold else None,
            "response": response,
            "parsed_answer": parsed,
            "correct": correct,
            "correct_source": source,
            "n_files": None,
            "files_accessed": None,
            "files_hallucinated": None,
            "latency_s": None,
            "attempts": None,
            "flags": flags,
            "source": source,
            "digest": dig,
        }
    )
    row_index = len(out.items) - 1
    step = 0
    for st in trace.steps:
        rows = []
        if st.thought is not None:
            rows.append({"role": "assistant", "kind": "thought", "output": st.thought})
        if st.action is not None:
            rows.append(
                {
                    "role": "assistant",
                    "kind": "action",
                    "tool": st.action,
                    "input": input_text(st.action_input),
                }
            )
        elif st.action_input is not None:
            rows.append(
                {"role": "assistant", "kind": "action", "input": input_text(st.action_input)}
            )
        if st.observation is not None:
            failed = bool(_FAILED.match(st.observation))
            rows.append(
                {
                    "role": "tool",
                    "kind": "observation",
                    "tool": st.action,
                    "output": st.observation,
                    "ok": not failed,
                    "error": st.observation if failed else None,
                }
            )
        for row in rows:
            out.events.append(
                {"run_id": run_id, "patient_id": patient, "item_id": item_id, "step": step,
                 "_row": row_index, **row}
            )  # fmt: skip
            step += 1
