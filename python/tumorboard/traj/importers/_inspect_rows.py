"""inspect_ai importer: one sample (and the log's header) into an item row and event rows.

:func:`_item` makes the item of one (sample, epoch): its ids, question, gold, response, the
first scorer's answer and grade, flags and the ``extra`` object (every scorer's value and
number, metadata, usage, error, limit) with the digest of the rows; :func:`_events` makes the
event rows of its final conversation (messages and tool calls, with model usage and times from
the sample's events). :func:`_results` and :func:`_created` read the header's results and
creation time for the run row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..._json import json_text
from ._common import ImportOptions, MalformedLog, digest

_SCORE_NUMBERS = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}  # inspect_ai value_to_float


# ----------------------------------------------------------------------------- rows


def _text(content: Any) -> str | None:
    """Return the text of message content: a string, or the text parts of a content list."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for c in content:
            if isinstance(c, Mapping):
                if c.get("type") == "text" and isinstance(c.get("text"), str):
                    parts.append(c["text"])
                elif c.get("type") == "reasoning":
                    continue
                else:
                    parts.append(f"[{c.get('type', 'content')}]")
            elif isinstance(c, str):
                parts.append(c)
        return "\n".join(parts)
    return json_text(content)


def _input_text(value: Any) -> str | None:
    """Return the sample input as text (a list of messages: their texts, one per paragraph)."""
    if isinstance(value, list):
        return "\n\n".join(
            t for t in (_text(m.get("content")) if isinstance(m, Mapping) else _text(m)
                        for m in value) if t
        )  # fmt: skip
    return _text(value)


def _score_number(value: Any) -> float | None:
    """Return inspect's float of a score value (``value_to_float``), None when it has none."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        v = value.strip()
        if v.upper() in _SCORE_NUMBERS:
            return _SCORE_NUMBERS[v.upper()]
        if v.lower() in ("yes", "true"):
            return 1.0
        if v.lower() in ("no", "false"):
            return 0.0
        try:
            f = float(v)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _correct(value: Any) -> bool | None:
    """Return the correctness of a headline score value: C/I, true/false, 1/0; else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().upper() in ("C", "I"):
        return value.strip().upper() == "C"
    if isinstance(value, (int, float)) and value in (0, 1):
        return value == 1
    return None


def _clean(value: Any) -> Any:
    """Return a JSON value with integral floats of score values as floats (one spelling)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


def _usage_of(events: Any) -> tuple[dict[str, Any], dict[str, float]]:
    """Return message id -> {model, usage} and -> time, and tool call id -> time, from events."""
    calls: dict[str, Any] = {}
    times: dict[str, float] = {}
    for ev in events or ():
        if not isinstance(ev, Mapping):
            continue
        kind = ev.get("event")
        if kind == "model":
            out = ev.get("output") or {}
            choices = out.get("choices") or []
            msg = (choices[0].get("message") or {}) if choices else {}
            mid = msg.get("id")
            if mid:
                calls[mid] = {"model": out.get("model") or ev.get("model"),
                              "usage": out.get("usage")}  # fmt: skip
                t = out.get("time")
                if isinstance(t, (int, float)):
                    times[mid] = float(t)
        elif kind == "tool" and ev.get("id"):
            t = ev.get("working_time")
            if isinstance(t, (int, float)):
                times["tool:" + str(ev["id"])] = float(t)
    return calls, times


def _events(
    sample: Mapping[str, Any], key: tuple[str, str | None, str]
) -> tuple[list[dict[str, Any]], bool]:
    """Return the event rows of one sample and whether it called a tool."""
    run_id, patient_id, item_id = key
    messages = sample.get("messages") or []
    calls, times = _usage_of(sample.get("events"))
    results: dict[str, Mapping[str, Any]] = {}
    for m in messages:
        if isinstance(m, Mapping) and m.get("role") == "tool" and m.get("tool_call_id"):
            results[str(m["tool_call_id"])] = m
    # the ids of the calls the assistant messages made: their results are reported with them
    called = {
        str(c.get("id"))
        for m in messages
        if isinstance(m, Mapping) and m.get("role") == "assistant"
        for c in m.get("tool_calls") or ()
        if isinstance(c, Mapping)
    }
    rows: list[dict[str, Any]] = []
    used_tools = False

    def add(**kw: Any) -> None:
        rows.append({"run_id": run_id, "patient_id": patient_id, "item_id": item_id,
                     "step": len(rows), **kw})  # fmt: skip

    for m in messages:
        if not isinstance(m, Mapping):
            continue
        role = m.get("role")
        if role == "tool":
            cid = m.get("tool_call_id")
            if cid and str(cid) in called:
                continue  # reported with its call
            err = m.get("error")
            add(role="tool", kind="observation", tool=m.get("function"),
                output=_text(m.get("content")), ok=err is None,
                error=None if err is None else _error_text(err))  # fmt: skip
            continue
        mid = m.get("id")
        usage = calls.get(mid) if role == "assistant" and mid else None
        add(role=role, kind="message", output=_text(m.get("content")),
            input=None if usage is None else json_text(_clean_usage(usage)),
            latency_s=times.get(mid) if mid else None)  # fmt: skip
        for call in m.get("tool_calls") or ():
            used_tools = True
            cid = str(call.get("id"))
            res = results.get(cid)
            err = None if res is None else res.get("error")
            add(role="assistant", kind="tool_call", tool=call.get("function"),
                input=json_text(call.get("arguments") or {}),
                output=None if res is None else _text(res.get("content")),
                ok=None if res is None else err is None,
                error=None if err is None else _error_text(err),
                latency_s=times.get("tool:" + cid))  # fmt: skip
    return rows, used_tools


def _clean_usage(usage: Mapping[str, Any]) -> dict[str, Any]:
    """Return {model, usage} without null token counts (readers differ in the nulls)."""
    u = usage.get("usage")
    if isinstance(u, Mapping):
        u = {k: v for k, v in u.items() if v is not None}
    return {"model": usage.get("model"), "usage": u}


def _error_text(err: Any) -> str:
    """Return a tool error ``{type, message}`` as one line of text."""
    if isinstance(err, Mapping):
        kind, msg = err.get("type"), err.get("message")
        return f"{kind}: {msg}" if kind else str(msg)
    return str(err)


def _no_nulls(value: Any) -> Any:
    """Drop null members of objects (inspect's model_dump writes defaults the log omits)."""
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_nulls(v) for v in value]
    return value


def _item(
    sample: Mapping[str, Any],
    header: Mapping[str, Any],
    opts: ImportOptions,
    patient_key: str,
    fp: bytes,
    run_id: str,
    rank: Mapping[str, int],
    source: str,
) -> tuple[dict[str, Any], list[dict[str, Any]], bool]:
    """Return the item row, the event rows and whether tools were called, of one sample."""
    ev = header.get("eval") or {}
    if "id" not in sample or "epoch" not in sample:
        raise MalformedLog("a sample without 'id' or 'epoch'")
    sid = str(sample["id"])
    epoch = int(sample["epoch"])
    metadata = sample.get("metadata") or {}
    pid = metadata.get(patient_key) if isinstance(metadata, Mapping) else None
    patient_id = None if pid is None else str(pid)
    item_id = f"{sid}:{epoch}"
    scores = sample.get("scores") or {}
    names = list(scores)
    head = scores[names[0]] if names else None
    head_value = head.get("value") if isinstance(head, Mapping) else None
    correct = _correct(head_value) if head is not None else None
    target = sample.get("target")
    gold = target if target is None or isinstance(target, str) else json_text(target)
    err = sample.get("error")
    limit = sample.get("limit")
    flags = []
    if err:
        flags.append("error")
    if isinstance(limit, Mapping) and limit.get("type"):
        flags.append(f"limit:{limit['type']}")
    output = sample.get("output") or {}
    extra = {
        "epoch": epoch,
        "sample_id": sid,
        "eval_id": ev.get("eval_id"),
        "scores": {
            n: _no_nulls({k: _clean(s.get(k)) if k == "value" else s.get(k)
                          for k in ("value", "answer", "explanation", "metadata")})
            for n, s in scores.items() if isinstance(s, Mapping)
        },
        "scorers": names,
        "score_values": [
            _score_number(s.get("value")) if isinstance(s, Mapping) else None
            for s in scores.values()
        ],
        "metadata": metadata,
        "usage": _no_nulls(sample.get("model_usage") or {}),
        "working_time": sample.get("working_time"),
        "error": (err.get("message") if isinstance(err, Mapping) else err) if err else None,
        "limit": _no_nulls(limit) if limit else None,
    }  # fmt: skip
    item = {
        "run_id": run_id,
        "patient_id": patient_id,
        "item_id": item_id,
        "position": rank.get(sid, len(rank)),
        "task": ev.get("task"),
        "question": _input_text(sample.get("input")),
        "gold": gold,
        "response": output.get("completion") if isinstance(output, Mapping) else None,
        "parsed_answer": head.get("answer") if isinstance(head, Mapping) else None,
        "correct": correct,
        "correct_source": "log" if correct is not None else "missing",
        "latency_s": sample.get("total_time"),
        "attempts": 1 + len(sample.get("error_retries") or ()),
        "flags": flags,
        "extra": json_text(extra),
        "source": source,
    }
    events, used = _events(sample, (run_id, patient_id, item_id))
    # the rows are dicts and lists of str, numbers, bools and None built in a fixed order:
    # their repr is deterministic (and the same for both readers), and cheaper than JSON
    item["digest"] = digest(fp, repr(item).encode(), repr(events).encode())
    return item, events, used


def _created(value: Any) -> datetime | None:
    """Parse inspect's ISO-8601 creation time."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _results(results: Any) -> dict[str, Any]:
    """Return {scorer: {metric: value}} of a log's results (None-safe)."""
    out: dict[str, Any] = {}
    if not isinstance(results, Mapping):
        return out
    for s in results.get("scores") or ():
        if isinstance(s, Mapping):
            metrics = s.get("metrics") or {}
            out[str(s.get("name"))] = {
                str(k): _clean(m.get("value")) for k, m in metrics.items() if isinstance(m, Mapping)
            }
    return out
