"""inspect_ai evaluation logs: ``.eval`` (zip) and ``.json`` logs written by ``inspect eval``.

inspect_ai (UK AI Security Institute, https://inspect.aisi.org.uk, repository
``UKGovernmentBEIS/inspect_ai``) writes one log per evaluated task: an ``EvalLog`` whose
``eval`` spec names the task, the model and the epochs, and whose samples (``EvalSample``:
id, epoch, input, target, messages, output, scores, metadata, events, model usage, error,
limit) hold one run of one dataset sample each. A ``.eval`` log is a zip archive with the
members ``header.json`` (the log without samples), ``samples/<id>_epoch_<n>.json`` (one per
sample), ``summaries.json`` and ``reductions.json``; a log still being written (or left by a
crash) has ``_journal/start.json`` in place of ``header.json``. A ``.json`` log is the whole
``EvalLog`` as one JSON document (``samples`` a list).

What becomes what:

========================  ====================================================================
runs                      one per log: ``run_id`` = ``inspect:<task>:<model>:<eval_id>``
                          (with ``run_name`` appended); benchmark "inspect" (or the import's);
                          ``tools`` true when any sample called a tool; ``config`` a JSON
                          object with the eval id, inspect's run id, task id and version,
                          epochs, status, scorers, the model's generate config, the dataset
                          and the log's own metric results
items                     one per (sample, epoch): ``item_id`` = ``<sample id>:<epoch>``,
                          ``patient_id`` = the sample metadata value at ``patient_key``
                          (default "patient_id"; null when absent), ``position`` = the sample's
                          index in the dataset, ``task`` = the task name, ``question`` = the
                          input (a list of messages as their texts, one per paragraph),
                          ``gold`` = the target (a list of targets as JSON), ``response`` = the
                          output's completion, ``parsed_answer`` and ``correct`` from the
                          first scorer (inspect's headline: ``C``/``I``, true/false or 1/0;
                          other values leave ``correct`` null), ``latency_s`` = total time,
                          ``attempts`` = 1 + error retries, ``flags`` ``error`` and
                          ``limit:<type>``; ``extra`` a JSON object: ``epoch``, ``sample_id``,
                          ``eval_id``, ``scores`` ({scorer: {value, answer, explanation,
                          metadata}}), ``scorers`` and ``score_values`` (each scorer's value as
                          a number where it has one: C=1, I=0, P=0.5, N=0, booleans, numbers,
                          numeric text), ``metadata``, ``usage`` (tokens per model),
                          ``working_time``, ``error``, ``limit``
events                    one per message of the sample's final conversation, in order:
                          ``message`` (role system/user/assistant; an assistant message's
                          ``input`` holds the model call's ``{model, usage}`` and its
                          ``latency_s`` the call's time, from the sample's model events) and,
                          after an assistant message, one ``tool_call`` per call it made:
                          ``tool`` = function, ``input`` = the arguments (JSON), ``output`` =
                          the tool message's result, ``ok`` false with ``error`` where the
                          tool failed, ``latency_s`` from the sample's tool event
========================  ====================================================================

Re-imports are idempotent by (eval id, sample id, epoch): the run id holds the eval id and the
item id the sample id and epoch; the item digest covers the rows the sample gave.

Bad samples. A sample that cannot become rows is rejected alone, as ``<log>#<id>:<epoch>``
with the reason, and the log's other samples are imported: a ``.eval`` member that is not
JSON, fails its CRC, is nested too deeply, or holds a lone surrogate or an integer past 64 bits
(named by its JSONPath, :func:`tumorboard._json.load_json`), and any sample whose values do not
fit their columns (text where a number belongs, ...). A ``.json`` log whose text breaks off
keeps the samples read before the break and rejects the rest.

Readers. ``reader="inspect"`` uses inspect_ai's own streaming reader
(``inspect_ai.log.read_eval_log_samples``, one ``EvalSample`` at a time) and turns each sample
into rows from its ``model_dump``; ``reader="direct"`` reads the log's members itself: the zip
members of a ``.eval`` log one at a time (deflate or zstd, decoded with ``zlib`` or
``zstandard``), or the ``samples`` array of a ``.json`` log with ``ijson``, one sample at a
time. Both give the same rows (tests/test_inspect_import.py checks it). ``"auto"`` (the
default) is the direct reader: inspect's reader opens a new zip reader (which reads the
archive's directory of all samples) for every sample, so its time grows quadratically with the
number of samples (``benchmarks/bench_inspect.py`` measures both). Either way memory is bounded
by one sample and the Arrow columns of the rows built so far (built :data:`CHUNK_SAMPLES`
samples at a time).
"""

from __future__ import annotations

import io
import json
import math
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..._json import json_text, load_json, may_break_limits
from ...errors import InvalidArgumentError, MissingDependencyError
from ._common import (
    ImportOptions,
    MalformedLog,
    NotOfFormat,
    Parsed,
    _rows_table,
    digest,
    files_with_suffix,
    run_key,
)

__all__ = ["READERS", "discover", "parse", "read_samples"]

READERS = ("auto", "direct", "inspect")
#: Samples turned into Arrow rows at a time (progress is reported after each chunk).
CHUNK_SAMPLES = 2_000
#: The sample metadata key read as the patient id when the import names none.
DEFAULT_PATIENT_KEY = "patient_id"

_ATTACHMENT = "attachment://"
_ZSTD = 93  # the zip compression method of Zstandard (APPNOTE.TXT 4.4.5)
_SCORE_NUMBERS = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}  # inspect_ai value_to_float


_MODULES: dict[str, Any] = {}


def _need(module: str) -> Any:
    """Import ``module`` (an inspect_ai dependency) or raise MissingDependencyError."""
    import importlib

    if module in _MODULES:
        return _MODULES[module]
    try:
        _MODULES[module] = importlib.import_module(module)
        return _MODULES[module]
    except ImportError as exc:
        raise MissingDependencyError.for_extra(
            "tumorboard import inspect", package="inspect-ai", extra="inspect", cause=exc
        ) from None


def discover(src: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Return the logs to import: ``src`` itself, or every ``*.eval`` and ``*.json`` under it.

    Hidden files and folders, and inspect's log listing ``logs.json``, are left out.

    Parameters
    ----------
    src : pathlib.Path
        A log file or a folder.

    Returns
    -------
    list of pathlib.Path
        The log files, sorted.
    list of (str, str)
        Files skipped while discovering (always empty for this format).
    """
    if src.is_file():
        return [src], []
    files = [p for p in files_with_suffix(src, (".eval", ".json")) if p.name != "logs.json"]
    return files, []


# ----------------------------------------------------------------------------- direct reader


def _member_bytes(zf: zipfile.ZipFile, fh: Any, info: zipfile.ZipInfo) -> bytes:
    """Return the decompressed bytes of one zip member (stored, deflate or zstd)."""
    if info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        return zf.read(info)
    if info.compress_type != _ZSTD:
        raise MalformedLog(
            f"zip member {info.filename}: compression method {info.compress_type} (expected "
            "stored, deflate or zstd)"
        )
    # the raw member: local file header (APPNOTE.TXT 4.3.7), 30 bytes + name + extra field
    fh.seek(info.header_offset)
    head = fh.read(30)
    if len(head) != 30 or head[:4] != b"PK\x03\x04":
        raise MalformedLog(f"zip member {info.filename}: bad local file header")
    skip = int.from_bytes(head[26:28], "little") + int.from_bytes(head[28:30], "little")
    fh.seek(info.header_offset + 30 + skip)
    raw = fh.read(info.compress_size)
    dctx = _MODULES.get("_dctx")
    if dctx is None:
        dctx = _MODULES["_dctx"] = _need("zstandard").ZstdDecompressor()
    # inspect_ai writes members over 200 MiB as several zstd frames: read across them
    reader = dctx.stream_reader(io.BytesIO(raw), read_across_frames=True)
    out = reader.read()
    if zlib.crc32(out) != info.CRC:
        raise MalformedLog(f"zip member {info.filename}: CRC mismatch (corrupt log)")
    return out


def _load_member(raw: bytes) -> Any:
    """Parse a member's JSON; raise InvalidArgumentError naming what breaks a limit.

    ``json.loads`` first (``load_json``'s walk over the containers would cost as much again on
    every sample); only text that may hold a lone surrogate escape or an out-of-range number
    (``may_break_limits``, a cheap scan) is read again by ``load_json``, whose message names
    the place.
    """
    try:
        value = json.loads(raw)
    except RecursionError:
        raise InvalidArgumentError("JSON nested too deeply to read") from None
    except ValueError as exc:  # UnicodeDecodeError included
        raise InvalidArgumentError(f"not valid JSON ({str(exc)[:100]})") from None
    return load_json(raw) if may_break_limits(raw) else value


def _split_member(name: str) -> tuple[str, int] | None:
    """Return (sample id, epoch) of a ``samples/<id>_epoch_<n>.json`` member name."""
    if not name.startswith("samples/") or not name.endswith(".json"):
        return None
    stem = name[len("samples/") : -len(".json")]
    sid, sep, epoch = stem.rpartition("_epoch_")
    if not sep or not epoch.isdigit():
        return None
    return sid, int(epoch)


def _direct_eval(path: Path) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """Return the header and a generator of the samples of a ``.eval`` log, read directly."""
    fh = open(path, "rb")  # noqa: SIM115 - closed by the generator
    try:
        zf = zipfile.ZipFile(fh)
        infos = {i.filename: i for i in zf.infolist()}
    except (zipfile.BadZipFile, OSError) as exc:
        fh.close()
        raise MalformedLog(f"not a zip archive ({exc})") from None
    head_name = "header.json" if "header.json" in infos else "_journal/start.json"
    if head_name not in infos:
        fh.close()
        raise MalformedLog("no header.json or _journal/start.json (not an inspect_ai log)")
    try:
        header = _load_member(_member_bytes(zf, fh, infos[head_name]))
    except (InvalidArgumentError, MalformedLog, zipfile.BadZipFile, zlib.error) as exc:
        fh.close()
        raise MalformedLog(f"{head_name}: {exc}") from None
    if not isinstance(header, dict):
        fh.close()
        raise MalformedLog(f"{head_name}: not a JSON object (not an inspect_ai log)")
    members: dict[tuple[str, int], zipfile.ZipInfo] = {}
    for name, info in infos.items():
        key = _split_member(name)
        if key is not None:
            members[key] = info
    order = _sample_order(header, members)

    def samples() -> Iterator[dict[str, Any] | _BadSample]:
        try:
            for key in order:
                info = members[key]
                try:
                    yield _load_member(_member_bytes(zf, fh, info))
                except (InvalidArgumentError, MalformedLog, zipfile.BadZipFile, zlib.error) as exc:
                    # one damaged member costs its sample, not the samples after it
                    reason = str(exc).removeprefix(f"zip member {info.filename}: ")
                    yield _BadSample(f"{key[0]}:{key[1]}", f"{info.filename}: {reason}")
        finally:
            fh.close()

    return header, samples()


@dataclass(frozen=True)
class _BadSample:
    """A sample the direct reader could not read: its ``<id>:<epoch>`` and the reason."""

    item_id: str
    reason: str


def _sample_order(header: Mapping[str, Any], members: Mapping[tuple[str, int], Any]) -> list:
    """Order (sample id, epoch) keys as inspect's reader does: dataset order, then epoch."""
    ids = ((header.get("eval") or {}).get("dataset") or {}).get("sample_ids") or []
    rank = {str(s): i for i, s in enumerate(ids)}
    return sorted(members, key=lambda k: (rank.get(k[0], len(rank)), k[0], k[1]))


def _direct_json(path: Path) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """Return the header and a generator of the samples of a ``.json`` log, read with ijson."""
    ijson = _need("ijson")
    header: dict[str, Any] = {}
    with open(path, "rb") as fh:
        try:
            builder = None
            key = None
            for prefix, event, value in ijson.parse(fh, use_float=True):
                if prefix == "" and event == "map_key":
                    if builder is not None:
                        header[key] = builder.value
                    builder = None
                    key = value
                    if key == "samples":
                        break
                    builder = ijson.ObjectBuilder()
                elif prefix == "" and event == "end_map":
                    if builder is not None:
                        header[key] = builder.value
                    break
                elif builder is not None:
                    builder.event(event, value)
                elif prefix == "" and event != "start_map":
                    raise NotOfFormat("not a JSON object (not an inspect_ai log)")
        except ijson.JSONError as exc:
            raise MalformedLog(f"not JSON ({exc})") from None
    if not isinstance(header.get("eval"), dict):
        raise NotOfFormat("no 'eval' object before 'samples' (not an inspect_ai log)")

    def samples() -> Iterator[dict[str, Any]]:
        with open(path, "rb") as fh:
            try:
                yield from ijson.items(fh, "samples.item", use_float=True)
            except ijson.JSONError as exc:
                raise MalformedLog(f"samples: not JSON ({exc})") from None

    return header, samples()


# ----------------------------------------------------------------------------- inspect reader


def _inspect_reader(path: Path) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """Return the header and samples as read by inspect_ai's own streaming reader."""
    log = _need("inspect_ai.log")
    try:
        head = log.read_eval_log(str(path), header_only=True)
    except Exception as exc:  # inspect raises pydantic, zip and JSON errors
        reason = f"{type(exc).__name__}: {exc}"
        raise MalformedLog(f"inspect_ai cannot read the log ({reason})") from None
    header = head.model_dump(mode="json", exclude={"samples", "reductions"})

    def samples() -> Iterator[dict[str, Any]]:
        try:
            for s in log.read_eval_log_samples(str(path), all_samples_required=False):
                yield s.model_dump(mode="json")
        except RuntimeError as exc:  # a log without sample ids
            raise MalformedLog(f"inspect_ai cannot read the samples ({exc})") from None

    return header, samples()


def read_samples(
    path: str | Path, *, reader: str = "auto"
) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """Open an inspect_ai log: its header and a generator of its samples, one at a time.

    Parameters
    ----------
    path : str or pathlib.Path
        A ``.eval`` or ``.json`` log.
    reader : {"auto", "direct", "inspect"}, default "auto"
        "inspect": inspect_ai's ``read_eval_log_samples``; "direct" (and "auto"): the zip
        members or the JSON ``samples`` array read here (module docstring).

    Returns
    -------
    dict
        The log without its samples (``eval``, ``status``, ``results``, ...).
    iterator of dict
        The samples as JSON objects, with attachments resolved.

    Raises
    ------
    MalformedLog
        The file is not an inspect_ai log.
    InvalidArgumentError
        An unknown reader.
    MissingDependencyError
        inspect-ai (or its zstandard / ijson) is not installed.
    """
    if reader not in READERS:
        raise InvalidArgumentError(f"reader: expected one of {READERS}, got {reader!r}")
    path = Path(path)
    if reader == "inspect":
        header, it = _inspect_reader(path)
    elif path.suffix.lower() == ".eval":
        header, it = _direct_eval(path)
    else:
        header, it = _direct_json(path)
    return header, (_resolve(s) if isinstance(s, dict) else s for s in it)


#: Sample fields whose text inspect may move into ``attachments`` and that rows are made of
#: (the events are read only for ids, usage and times, which are never attachments).
_RESOLVED = ("input", "target", "messages", "output", "scores", "metadata", "error")


def _resolve(sample: dict[str, Any]) -> dict[str, Any]:
    """Replace ``attachment://<hash>`` strings of the fields rows are made of by their text."""
    att = sample.pop("attachments", None) or {}
    if not att:
        return sample

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            if v.startswith(_ATTACHMENT):
                return att.get(v[len(_ATTACHMENT) :], v)
            return v
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    for key in _RESOLVED:
        if key in sample:
            sample[key] = walk(sample[key])
    return sample


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


def parse(
    path: Path,
    opts: ImportOptions,
    fp: bytes = b"",
    tick: Callable[[int], None] | None = None,
    *,
    reader: str = "auto",
    patient_key: str | None = None,
) -> Parsed:
    """Parse one inspect_ai log into rows, streaming its samples.

    Parameters
    ----------
    path : pathlib.Path
        A ``.eval`` or ``.json`` log.
    opts : ImportOptions
        The import's options (``model``, ``benchmark``, ``track`` and ``run_name`` apply).
    fp : bytes, default b""
        The import's options fingerprint, the start of every item digest.
    tick : callable, optional
        Called with the number of samples read so far after each chunk of
        :data:`CHUNK_SAMPLES` samples.
    reader : {"auto", "direct", "inspect"}, default "auto"
        Which reader reads the samples (:func:`read_samples`).
    patient_key : str, optional
        The sample metadata key of the patient id (default :data:`DEFAULT_PATIENT_KEY`).

    Returns
    -------
    Parsed
        The run row, the items as an Arrow table and the events as Arrow tables.

    Raises
    ------
    MalformedLog
        Not an inspect_ai log, or a log without any sample.
    """
    import numpy as np
    import polars as pl
    import pyarrow as pa

    patient_key = patient_key or DEFAULT_PATIENT_KEY
    header, samples = read_samples(path, reader=reader)
    ev = header.get("eval") or {}
    if not isinstance(ev, Mapping) or not ev.get("task"):
        raise MalformedLog("the header has no eval.task (not an inspect_ai log)")
    model = opts.model or ev.get("model")
    eval_id = ev.get("eval_id") or ev.get("run_id")
    run_id = run_key("inspect", ev.get("task"), model, eval_id, opts.run_name)
    rank = {str(s): i for i, s in enumerate((ev.get("dataset") or {}).get("sample_ids") or [])}
    source = str(path)
    out = Parsed(keyed_without_patient=True)
    pending: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    item_tables: list[pa.Table] = []
    event_tables: list[pa.Table] = []
    used_tools = False
    n_read = n_kept = 0
    errored: list[str] = []  # "id:epoch (message)" of the samples that ended in an error

    def reject(where: str, why: str) -> None:
        out.rejected.append((f"{path}#{where}", why[:300]))

    def tables(rows: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> tuple[Any, Any]:
        """Return the items and events tables of ``rows`` (events with their item's row)."""
        t_items = _rows_table([item for item, _ in rows], "items")
        evs = [e for _, es in rows for e in es]
        if not evs:
            return t_items, None
        t_events = _rows_table(evs, "events")
        pos = np.fromiter((n_kept + k for k, (_, es) in enumerate(rows) for _ in es),
                          dtype=np.int32, count=len(evs))  # fmt: skip
        return t_items, t_events.append_column("_row", pa.array(pos))

    def flush() -> None:
        nonlocal n_kept
        if not pending:
            return
        try:
            t_items, t_events = tables(pending)
        except InvalidArgumentError:
            # a value that does not fit its column (a lone surrogate, a number where text
            # belongs): find the samples that hold one and leave only them out
            good = []
            for item, evs in pending:
                try:
                    _rows_table([item], "items")
                    if evs:
                        _rows_table(evs, "events")
                except InvalidArgumentError as exc:
                    reject(item["item_id"], f"skipped: {exc}")
                else:
                    good.append((item, evs))
            pending[:] = good
            if not pending:
                return
            t_items, t_events = tables(pending)
        item_tables.append(t_items)
        if t_events is not None:
            event_tables.append(t_events)
        n_kept += len(pending)
        pending.clear()

    it = iter(samples)
    while True:
        try:
            sample = next(it)
        except StopIteration:
            break
        except MalformedLog as exc:
            # the reader cannot go on (a truncated or damaged JSON log): keep what it read
            if n_read == 0:
                raise
            reject(
                f"samples {n_read + 1}..", f"skipped: the samples after the first {n_read}: {exc}"
            )
            break
        n_read += 1
        if isinstance(sample, _BadSample):
            reject(sample.item_id, f"skipped: {sample.reason}")
            continue
        if not isinstance(sample, Mapping):
            reject(str(n_read - 1), "skipped: a sample that is not a JSON object")
            continue
        try:
            item, evs, used = _item(sample, header, opts, patient_key, fp, run_id, rank, source)
        except MalformedLog as exc:
            reject(f"{sample.get('id')}:{sample.get('epoch')}", f"skipped: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - a sample of an unexpected shape costs itself
            where = f"{sample.get('id')}:{sample.get('epoch')}"
            reject(where, f"skipped: cannot be read ({type(exc).__name__}: {exc})")
            continue
        used_tools |= used
        if sample.get("error"):
            where = f"{sample.get('id')}:{sample.get('epoch')}"
            errored.append(f"{where} ({_error_text(sample['error'])})")
        pending.append((item, evs))
        if len(pending) == CHUNK_SAMPLES:
            flush()
            if tick is not None:
                tick(n_read)
    flush()
    out.n_records = n_read
    if n_kept == 0:
        status = header.get("status")
        if out.rejected:
            where, why = out.rejected[0]
            raise MalformedLog(f"none of its {n_read} samples could be read ({where}: {why})")
        raise MalformedLog(f"no samples in the log (status {status!r})")
    config = {
        "eval_id": eval_id,
        "inspect_run_id": ev.get("run_id"),
        "task": ev.get("task"),
        "task_id": ev.get("task_id"),
        "task_version": ev.get("task_version"),
        "epochs": (ev.get("config") or {}).get("epochs"),
        "status": header.get("status"),
        "scorers": [s.get("name") for s in ev.get("scorers") or () if isinstance(s, Mapping)],
        "model_generate_config": _no_nulls(ev.get("model_generate_config") or {}),
        "dataset": _no_nulls(
            {k: v for k, v in (ev.get("dataset") or {}).items() if k != "sample_ids"}
        ),  # fmt: skip
        "results": _no_nulls(_results(header.get("results"))),
        "inspect_model": ev.get("model"),
    }
    out.runs = [
        {
            "run_id": run_id,
            "benchmark": opts.benchmark or "inspect",
            "track": opts.track or "default",
            "model": model,
            "tools": used_tools,
            "config": json_text(config),
            "created_at": _created(ev.get("created")),
        }
    ]
    out.items_table = pa.concat_tables(item_tables)
    out.events_table = pa.concat_tables(event_tables) if event_tables else None
    keys = out.items_table.select(["run_id", "patient_id", "item_id", "digest", "source"])
    out.keys_frame = pl.DataFrame(
        [pl.Series(c, keys.column(c).to_pylist(), dtype=pl.String) for c in keys.column_names]
    )
    if errored and len(errored) == n_kept:
        out.warnings.append(
            (
                str(path),
                f"every one of its {n_kept} samples ended in an error, so none has a score "
                f"(first: {errored[0][:200]}); the log has nothing to grade",
            )
        )
    if header.get("status") not in (None, "success"):
        out.warnings.append(
            (
                str(path),
                f"log status {header.get('status')!r}: imported the {n_kept} samples it holds",
            )
        )
    return out


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
