r"""RadA-BenchPlat evaluation-pipeline logs into items (``tumorboard import radabench DIR``).

RadA-BenchPlat is Zheng et al. 2025, arXiv 2412.09529. Its evaluation pipelines
(``MAGIC-AI4Med/RadABench`` at commit ``acbcf87``, ``EvalPlat/EvalPipeline_*.py``) save every
(case, question) run with ``Utils/utils.py:saveINFO`` under a result folder::

    <result>/logouts/<case index>/<chain>.txt    the run's log text (opened in append mode)
    <result>/info/<case index>/<chain>.json      {"TOOLINFO": {"TOOLn": {"Category", "type", ...}},
                                                  "TOOLDES": ..., "TOOLBOX": ...}

``<chain>`` is the ground-truth tool chain id (``012``, ``0123568``, ...). A run that raised
goes through ``handle_exception``, which appends ``An error occurred:``, ``Error Type: <name>``,
``Error Message: <str(e)>``, ``Traceback:`` and the traceback to the log before saving it.

Each log becomes one item (patient = the case folder, item = task = the chain) whose
``items.extra`` carries what the official ``EvalPlat/EvalMetrics`` scripts extract from it, the
way they extract it, quirks included, so that ``tumorboard score --benchmark radabench
--convention code`` reproduces their aggregates:

* ``completed``: the multi-hop I/O script's failure regex
  ``Error Type: (\w+)\nError Message: (.+?)\nTraceback:`` finds nothing. It has no DOTALL, so
  an exception whose message spans several lines is **not** detected and the case counts as
  completed (flag ``error_not_detected``; the import warns).
* ``called_tool_ids``: every ``'Tool': 'TOOLn'`` of each ``Call Dict: ({[^}]+})`` match. The
  dict is cut at its first ``}``, so a call whose text holds a ``}`` before its ``'Tool'`` key
  loses its tool (flag ``truncated_call_dict``); ``Deny Call Dict:`` matches too (it has no
  tool). Ids missing from the run's ``TOOLINFO`` stay in this list (the performance script's
  win rate scans ids) but are dropped from ``called_tools`` (flag ``unknown_tool_id``).
* ``called_tools``: ``TOOLINFO[id]["Category"]`` of the known ids, in call order.
* ``plan_tools``: the first ``Tool Chain: [...]``'s ``*name*`` entries mapped with the scripts'
  ``tool_name_dict``; names it lacks are dropped (it spells "Indicator Evaluator Tool" where the
  prompt says "Indicator Evaluation Tool", and has no "Anomaly Biomarker Quantification Tool").
* ``gt_tools``: the scripts' ``map_dict[chain]``; ``milestone``: the performance script's
  ``key_map[chain]``; ``candidate_tools``: its ``max_tool_dict[chain]`` (worst to best).
* ``response``: the performance script's conclusion, ``Conclusion:(.*?)(?=\n\n|$)`` (DOTALL)
  stripped; ``log``: the whole text (the performance script leaves out of its text metrics every
  log holding ``Error`` or ``error`` anywhere).
* ``missing_category`` (runs of the ``multiDenyl1`` pipeline, where a category of the chain has
  no tool; its LLAMA runs are saved under ``multiIDenyl1``, a misspelling of
  ``EvalPipeline_multihop_denyl1.py`` line 84, imported as track ``multiDenyl1``):
  ``multihop_deny1.py``'s ``deny_map[chain]``; the scorer's unsolvability awareness
  (``Deny Call Dict:`` in the log) and grounding (the first ``'Category'`` value names it) then
  follow that script. The ``multiDenyl2``/``multiDenyl3`` pipelines grade grounding by other
  rules (anatomy/modality match; ``<INVALID>`` text) that the scorer does not implement.
* ``reference_answer`` (with ``cases=``, the pipelines' ``combined_cases*.json``): entry
  ``list(cases.values())[case]["QA"][chain]["A"]``, "" when the question has no answer (scored
  0 and counted, as the script does); null when the case index is past the list (the script
  skips such folders).

``log_to_file`` opens the log in append mode, so running a pipeline again over the same folder
appends a second run to the file; the scripts read the file as one run (the union of the calls,
the first conclusion, an error anywhere) and so does the import (flag ``runs_appended``; the
import warns).

Single-hop logs (a ``<Decomposition>`` block and no ``Call Dict:``; ``singlehop_generalEval.py``)
give ``called_tools`` = the categories of the decomposition's ``<Tool>`` ids (a ``Biomarker
Quantifier`` becomes ``"<type> Biomarker Quantifier"``; unknown ids dropped) sorted stably by
their ground-truth order, against the single-hop ``map_dict``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..._json import json_text, load_json
from ...errors import InvalidArgumentError
from ._common import (
    ImportOptions,
    MalformedLog,
    Parsed,
    digest,
    files_with_suffix,
    input_text,
    run_key,
)

__all__ = ["GT_CHAINS", "PIPELINE_ALIASES", "discover", "parse", "pipeline_name"]

LOG_DIR = "logouts"
INFO_DIR = "info"

# Facts from MAGIC-AI4Med/RadABench@acbcf87 EvalPlat/EvalMetrics (the scripts' tables).
_AC, _MC, _OS = "Anatomy Classifier", "Modality Classifier", "Organ Segmentor"
_AD, _DD, _DI = "Anomaly Detector", "Disease Diagnoser", "Disease Inferencer"
_BQ, _IE, _RG, _TR = (
    "Biomarker Quantifier", "Indicator Evaluator", "Report Generator", "Treatment Recommender",
)  # fmt: skip
_OBQ, _ABQ = "Organ Biomarker Quantifier", "Anomaly Biomarker Quantifier"

#: Ground-truth category chains of the multi-hop scripts (``map_dict``).
GT_CHAINS: dict[str, list[str]] = {
    "012": [_AC, _MC, _OS],
    "013": [_AC, _MC, _AD],
    "014": [_AC, _MC, _DD],
    "0123": [_AC, _MC, _OS, _AD],
    "0126": [_AC, _MC, _OS, _OBQ],
    "0136": [_AC, _MC, _AD, _ABQ],
    "01235": [_AC, _MC, _OS, _AD, _DI],
    "01348": [_AC, _MC, _AD, _DD, _RG],
    "0123568": [_AC, _MC, _OS, _AD, _DI, _BQ, _BQ, _RG],
    "01235678": [_AC, _MC, _OS, _AD, _DI, _BQ, _BQ, _IE, _RG],
    "012356789": [_AC, _MC, _OS, _AD, _DI, _BQ, _BQ, _IE, _RG, _TR],
}
#: The single-hop script's chains: the two biomarker steps are typed.
SINGLE_HOP_CHAINS: dict[str, list[str]] = {
    **GT_CHAINS,
    "0123568": [_AC, _MC, _OS, _AD, _DI, _OBQ, _ABQ, _RG],
    "01235678": [_AC, _MC, _OS, _AD, _DI, _OBQ, _ABQ, _IE, _RG],
    "012356789": [_AC, _MC, _OS, _AD, _DI, _OBQ, _ABQ, _IE, _RG, _TR],
}
#: The plan's tool names -> categories (the scripts' ``tool_name_dict``, its gaps included).
PLAN_NAMES = {
    "Anatomy Classification Tool": _AC,
    "Modality Classification Tool": _MC,
    "Organ Segmentation Tool": _OS,
    "Anomaly Detection Tool": _AD,
    "Disease Diagnosis Tool": _DD,
    "Disease Inference Tool": _DI,
    "Organ Biomarker Quantification Tool": _OBQ,
    "Biomarker Quantification Tool": _BQ,
    "Indicator Evaluator Tool": _IE,
    "Report Generation Tool": _RG,
    "Treatment Recommendation Tool": _TR,
}
#: The performance script's key (milestone) category per chain (``key_map``).
MILESTONES = {
    "012": _OS, "013": _AD, "014": _DD, "0123": _OS, "01235": _DI, "0126": _BQ, "0136": _BQ,
    "01348": _AD, "0123568": _DD, "01235678": _IE, "012356789": _IE,
}  # fmt: skip
#: The category the unsolvable runs (pipeline ``multiDenyl1``) have no tool for, per chain
#: (``multihop_deny1.py``'s ``deny_map``).
DENY_CATEGORIES = {
    "012": _AC, "013": _MC, "014": _DD, "0123": _OS, "01235": _AD, "0126": _BQ, "0136": _BQ,
    "01348": _AD, "0123568": _DD, "01235678": _RG, "012356789": _TR,
}  # fmt: skip
#: The performance script's candidate tool ids per chain, worst to best (``max_tool_dict``).
CANDIDATES = {
    "012": ["TOOL3", "TOOL4", "TOOL5"],
    "013": ["TOOL5", "TOOL6", "TOOL7"],
    "014": ["TOOL9", "TOOL11", "TOOL7", "TOOL8", "TOOL10"],
    "0123": ["TOOL3", "TOOL4", "TOOL5"],
    "0126": ["TOOL10", "TOOL11"],
    "0136": ["TOOL11", "TOOL12"],
    "01235": ["TOOL7", "TOOL8", "TOOL10", "TOOL9", "TOOL11"],
    "01348": ["TOOL5", "TOOL6", "TOOL7"],
    "0123568": ["TOOL7", "TOOL8", "TOOL10", "TOOL9", "TOOL11"],
    "01235678": ["TOOL12", "TOOL14", "TOOL13", "TOOL15"],
    "012356789": ["TOOL12", "TOOL14", "TOOL13", "TOOL15"],
}

_FAILURE = re.compile(r"Error Type: (\w+)\nError Message: (.+?)\nTraceback:")
_ERROR_BLOCK = re.compile(r"\nError Type: \w+\nError Message: ")
_CALL_START = re.compile(r"(?<!Deny )Call Dict: \{")
_TOOL_ID = re.compile(r"'Tool': 'TOOL(\d+)'")
_PLAN_NAME = re.compile(r"\*(.*?)\*")
_CONCLUSION = re.compile(r"Conclusion:(.*?)(?=\n\n|$)", re.DOTALL)
_HEADER = re.compile(r"^Case (\d+), Question (\d+), (\w+): (.*)$", re.MULTILINE)
_PIPELINE_PREFIXES = ("multi", "single")
#: Result folders the official pipelines misspell, read as the track they run: the LLAMA branch
#: of ``EvalPipeline_multihop_denyl1.py`` (line 84) writes ``LLAMA/multiIDenyl1``, and the LLAMA,
#: Mixtral and Qwen branches of ``EvalPipeline_multihop_denyl2.py`` (lines 84, 91, 103) write
#: ``multiIDenyl2`` (MAGIC-AI4Med/RadABench@acbcf87).
PIPELINE_ALIASES = {"multiIDenyl1": "multiDenyl1", "multiIDenyl2": "multiDenyl2"}

_CASES_CACHE: dict[tuple[str, int], list[Any]] = {}


# The scripts' patterns ``Call Dict: ({[^}]+})``, ``Tool Chain: \[(.*?)\]``,
# ``<Decomposition>(.*?)</Decomposition>`` (DOTALL) and ``<Tool>\s*(.*?)\s*</Tool>`` take time
# quadratic in the log under Python's backtracking ``re`` when an opener repeats without its
# closer (a 128 KiB log of ``<Tool>`` ran 70 s). The functions below return exactly what the
# patterns match (``re.findall`` / ``re.search`` semantics) in one pass over the text.


def _call_dicts(text: str) -> list[str]:
    """Return what ``re.findall(r"Call Dict: ({[^}]+})", text)`` returns, in linear time."""
    out: list[str] = []
    opener = "Call Dict: {"
    pos = 0
    while (i := text.find(opener, pos)) >= 0:
        body = i + len(opener)
        j = text.find("}", body)
        if j < 0:
            break  # no "}" left: no later opener can match either
        if j == body:
            pos = i + 1  # "{}": ``[^}]+`` needs a character; the search goes on
            continue
        out.append(text[body - 1 : j + 1])
        pos = j + 1
    return out


def _plan_text(text: str) -> str | None:
    r"""Return group 1 of ``re.search(r"Tool Chain: \[(.*?)\]", text)`` in linear time."""
    opener = "Tool Chain: ["
    pos = 0
    while (i := text.find(opener, pos)) >= 0:
        body = i + len(opener)
        end = text.find("\n", body)
        end = len(text) if end < 0 else end
        j = text.find("]", body, end)
        if j >= 0:
            return text[body:j]
        pos = end  # ``.`` stops at the line's end: no opener of this line can match
    return None


def _decomposition(text: str) -> str | None:
    """Return group 1 of the ``<Decomposition>(.*?)</Decomposition>`` (DOTALL) search."""
    i = text.find("<Decomposition>")
    if i < 0:
        return None
    body = i + len("<Decomposition>")
    j = text.find("</Decomposition>", body)
    return None if j < 0 else text[body:j]


def _decomposition_tools(block: str) -> list[str]:
    r"""Return ``re.findall(r"<Tool>\s*(.*?)\s*</Tool>", block)``, stripped, in linear time.

    From a ``<Tool>``, the pattern matches up to the first ``</Tool>`` whose text in between,
    stripped of whitespace, holds no newline (``.`` does not cross one); when the first
    ``</Tool>`` fails so do the later ones (the newline stays inside), and the search goes on
    at the next ``<Tool>``.
    """
    out: list[str] = []
    pos = 0
    close = -1  # the first "</Tool>" at or after the current opener
    last_nl = -1  # the last newline before the stripped end of the text up to ``close``
    end = -1  # the stripped end of the text before ``close``
    n = len(block)
    while (i := block.find("<Tool>", pos)) >= 0:
        body = i + len("<Tool>")
        if close < body:
            close = block.find("</Tool>", body)
            if close < 0:
                break
            end = close
            while end > body and block[end - 1].isspace():
                end -= 1
            last_nl = block.rfind("\n", body, end)
        start = body
        while start < end and block[start].isspace():
            start += 1
        if start >= end:
            out.append("")
        elif last_nl >= start:
            pos = i + 1
            continue
        else:
            out.append(block[start:end])
        pos = min(close + len("</Tool>"), n)
    return out


def discover(src: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Return the log files under ``src``: every ``logouts/<case>/<chain>.txt``.

    ``src`` may be one result folder (holding ``logouts/`` and ``info/``), a folder of several
    (e.g. ``<model>/<pipeline>/``), or one log file. Files are ordered by result folder, then
    case index and chain naturally (the scripts' ``natural_sort_key``); hidden paths are left
    out. The second element lists ``.txt`` files under a ``logouts`` folder that are not at
    ``logouts/<case>/<chain>.txt``.
    """
    if src.is_file():
        return [src], []
    files, odd = [], []
    for p in files_with_suffix(src, (".txt",)):
        if p.parent.parent.name == LOG_DIR:
            files.append(p)
        elif LOG_DIR in p.parts[:-1]:
            odd.append((str(p), f"not at {LOG_DIR}/<case index>/<chain>.txt"))
    files.sort(key=lambda p: (str(p.parent.parent.parent), _natural(p.parent.name),
                              _natural(p.name)))  # fmt: skip
    return files, sorted(odd)


def _natural(s: str) -> list[Any]:
    """Return the natural-sort key of ``s`` (digit runs compare as integers)."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t.lower()) for t in re.split(r"(\d+)", s)]


def _tool_info(path: Path, case: str, chain: str) -> tuple[dict[str, Any], bytes]:
    """Return the run's ``TOOLINFO`` and the info file's bytes; MalformedLog when unusable."""
    info = path.parent.parent.parent / INFO_DIR / case / f"{chain}.json"
    try:
        raw = info.read_bytes()
    except OSError:
        raise MalformedLog(
            f"no {INFO_DIR}/{case}/{chain}.json beside the log (saveINFO writes it with the "
            "run's TOOLINFO, which maps the called tool ids to categories)"
        ) from None
    try:
        doc = load_json(raw)
    except InvalidArgumentError as exc:
        raise MalformedLog(f"{info}: {exc}") from None
    toolinfo = doc.get("TOOLINFO") if isinstance(doc, dict) else None
    if not isinstance(toolinfo, dict):
        raise MalformedLog(f"{info}: expected an object with a 'TOOLINFO' object")
    for tid, entry in toolinfo.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("Category"), str):
            raise MalformedLog(f"{info}: TOOLINFO[{tid!r}] has no 'Category' string")
    return toolinfo, raw


def _cases(path: str) -> list[Any]:
    """Return the values of the pipelines' cases file, in file order (read once per version)."""
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        raise MalformedLog(f"cases file {path}: no such file") from None
    key = (os.path.abspath(path), stamp)
    if key not in _CASES_CACHE:
        try:
            with open(path, "rb") as f:
                doc = load_json(f.read())
        except OSError as exc:
            raise MalformedLog(f"cases file {path}: unreadable ({exc.strerror or exc})") from None
        except InvalidArgumentError as exc:
            raise MalformedLog(f"cases file {path}: {exc}") from None
        if not isinstance(doc, dict):
            raise MalformedLog(f"cases file {path}: expected an object of cases")
        _CASES_CACHE.clear()
        _CASES_CACHE[key] = list(doc.values())
    return _CASES_CACHE[key]


def _reference(cases_path: str, case: str, chain: str) -> str | None:
    """Return the reference answer the performance script uses ("" without one; None: no case)."""
    cases = _cases(cases_path)
    if not case.isdigit() or int(case) >= len(cases):
        return None
    entry = cases[int(case)]
    qa = entry.get("QA", {}) if isinstance(entry, dict) else {}
    qa_chain = qa.get(chain, {}) if isinstance(qa, dict) else {}
    answer = qa_chain.get("A", "") if isinstance(qa_chain, dict) else ""
    return answer if isinstance(answer, str) else str(answer)


def pipeline_name(folder: str) -> str | None:
    """Return the pipeline (track) a result folder name stands for, or None when it names none.

    A folder starting with ``multi`` or ``single`` names a pipeline; the misspellings of the
    official pipelines (:data:`PIPELINE_ALIASES`) give the pipeline they run.

    Parameters
    ----------
    folder : str
        The name of the folder above ``logouts``.

    Returns
    -------
    str or None
        The pipeline name, e.g. ``"multiDenyl1"`` for ``"multiIDenyl1"``.

    Examples
    --------
    >>> pipeline_name("multiIDenyl1"), pipeline_name("multiGeneral"), pipeline_name("GPT4")
    ('multiDenyl1', 'multiGeneral', None)
    """
    if not folder.startswith(_PIPELINE_PREFIXES):
        return None
    return PIPELINE_ALIASES.get(folder, folder)


def _run_names(path: Path, opts: ImportOptions) -> tuple[str, str]:
    """Return (model, track): the folders above ``logouts`` (``<model>/<pipeline>/logouts``)."""
    base = path.parent.parent.parent
    pipeline = pipeline_name(base.name)
    folder = base.parent.name if pipeline else base.name
    model = opts.model or opts.model_map.get(folder, folder) or "unknown"
    track = opts.track or pipeline or "default"
    return model, track


def extract(text: str, toolinfo: dict[str, Any], chain: str) -> dict[str, Any]:
    """Extract what the official EvalMetrics scripts read from one log (module docstring).

    Parameters
    ----------
    text : str
        The log.
    toolinfo : dict
        The run's ``TOOLINFO`` (tool id -> {"Category", "type", ...}).
    chain : str
        The chain id (the log file's stem).

    Returns
    -------
    dict
        ``completed``, ``called_tool_ids``, ``called_tools``, ``plan_tools``, ``gt_tools``,
        ``response`` (None when the log has no conclusion), ``single_hop`` and ``flags`` (the
        quirks met: ``error_not_detected``, ``truncated_call_dict``, ``unknown_tool_id``), and
        ``unknown_ids``.
    """
    flags: list[str] = []
    single_hop = "<Decomposition>" in text and "Call Dict:" not in text
    completed = _FAILURE.search(text) is None
    if completed and _ERROR_BLOCK.search(text):
        flags.append("error_not_detected")
    ids: list[str] = []
    called: list[str] = []
    unknown: list[str] = []
    if single_hop:
        gt = SINGLE_HOP_CHAINS[chain]
        block = _decomposition(text)
        raw_ids = _decomposition_tools(block) if block is not None else []
        for tid in raw_ids:
            ids.append(tid)
            entry = toolinfo.get(tid)
            if entry is None:
                unknown.append(tid)
                continue
            cat = entry["Category"]
            if cat == _BQ:
                cat = f"{entry.get('type')} {_BQ}"
            called.append(cat)
        order = {c: i for i, c in enumerate(gt)}
        called = sorted(called, key=lambda c: order.get(c, len(gt)))
    else:
        gt = GT_CHAINS[chain]
        for d in _call_dicts(text):
            m = _TOOL_ID.search(d)
            if m is None:
                continue
            tid = "TOOL" + m.group(1)
            ids.append(tid)
            if tid in toolinfo:
                called.append(toolinfo[tid]["Category"])
            else:
                unknown.append(tid)
        n_dicts = len(_CALL_START.findall(text))
        if n_dicts > len(ids):
            flags.append("truncated_call_dict")
    if unknown:
        flags.append("unknown_tool_id")
    plan: list[str] = []
    pm = _plan_text(text)
    if pm is not None:
        plan = [PLAN_NAMES[n] for n in _PLAN_NAME.findall(pm) if n in PLAN_NAMES]
    cm = _CONCLUSION.search(text)
    return {
        "completed": completed,
        "called_tool_ids": ids,
        "called_tools": called,
        "plan_tools": plan,
        "gt_tools": list(gt),
        "response": cm.group(1).strip() if cm else None,
        "single_hop": single_hop,
        "flags": flags,
        "unknown_ids": unknown,
    }


def parse(path: Path, raw: bytes, opts: ImportOptions, fp: bytes = b"") -> Parsed:
    """Parse one pipeline log (``logouts/<case>/<chain>.txt``) into a run, an item and events.

    Parameters
    ----------
    path : pathlib.Path
        The log file; its folder is the case index, its stem the chain id, and the run's
        ``info/<case>/<chain>.json`` is read beside ``logouts``.
    raw : bytes
        The log's content (UTF-8).
    opts : ImportOptions
        The import's options (``cases``: the pipelines' cases JSON, for the reference answers).
    fp : bytes, default b""
        The import's options fingerprint, the start of the item digest (with the log, the info
        file and the reference answer).

    Returns
    -------
    Parsed
        One run, one item (benchmark fields in ``extra``) and one ``tool_call`` event per call
        the scripts count; the quirks met are warnings.

    Raises
    ------
    MalformedLog
        A log not at ``logouts/<case>/<chain>.txt``, a chain the scripts do not know, or a
        missing or unusable info file.
    """
    if path.parent.parent.name != LOG_DIR:
        raise MalformedLog(f"not a pipeline log: expected {LOG_DIR}/<case index>/<chain>.txt")
    case = path.parent.name
    chain = path.name.split(".")[0]
    if chain not in GT_CHAINS:
        raise MalformedLog(
            f"unknown chain {chain!r} (the file name is the chain id; the scripts know "
            f"{', '.join(GT_CHAINS)})"
        )
    toolinfo, info_raw = _tool_info(path, case, chain)
    text = raw.decode("utf-8")
    got = extract(text, toolinfo, chain)
    out = Parsed(n_records=1)
    where = str(path)
    if "error_not_detected" in got["flags"]:
        why = "an error with a multi-line message: the official scripts do not detect it and "
        out.warnings.append((where, why + "count the run as completed (kept so)"))
    n_runs = len(_HEADER.findall(text))
    if n_runs > 1:
        got["flags"].append("runs_appended")
        why = f"{n_runs} runs appended to one log (log_to_file opens it in append mode); the "
        out.warnings.append((where, why + "official scripts read them as one (kept so)"))
    if "truncated_call_dict" in got["flags"]:
        why = "a Call Dict cut at its first '}' before its 'Tool' key: the official scripts "
        out.warnings.append((where, why + "lose that call (kept so)"))
    if got["unknown_ids"]:
        ids = ", ".join(sorted(set(got["unknown_ids"])))
        why = f"tool id(s) {ids} not in the run's TOOLINFO: left out of called_tools, kept in "
        out.warnings.append((where, why + "called_tool_ids (as the official scripts do)"))
    reference = _reference(opts.cases, case, chain) if opts.cases else None
    model, track = _run_names(path, opts)
    benchmark = opts.benchmark or "radabench"
    run_id = run_key(benchmark, track, model, "tools", opts.run_name)
    out.runs.append({
        "run_id": run_id, "benchmark": benchmark, "track": track, "model": model,
        "tools": True, "created_at": None, "config": json_text({"importer": "radabench"}),
    })  # fmt: skip
    header = _HEADER.search(text)
    extra: dict[str, Any] = {
        "gt_tools": got["gt_tools"],
        "called_tools": got["called_tools"],
        "called_tool_ids": got["called_tool_ids"],
        "plan_tools": got["plan_tools"],
        "completed": got["completed"],
        "log": text,
        "milestone": None if got["single_hop"] else MILESTONES[chain],
        "candidate_tools": None if got["single_hop"] else CANDIDATES[chain],
        "missing_category": DENY_CATEGORIES[chain] if _is_deny1(path) else None,
    }
    if reference is not None:
        extra["reference_answer"] = reference
    flags = list(got["flags"])
    if not got["completed"]:
        flags.append("execution_error")
    if got["response"] is None:
        flags.append("no_conclusion")
    ref_bytes = b"" if reference is None else reference.encode()
    out.items.append({
        "run_id": run_id, "patient_id": case, "item_id": chain,
        "position": int(header.group(2)) if header else None, "task": chain,
        "question": header.group(4) if header else None, "options": None, "gold": None,
        "gold_text": None, "response": got["response"], "parsed_answer": None,
        "correct": None, "correct_source": "missing", "n_files": None, "files_accessed": None,
        "files_hallucinated": None, "latency_s": None, "attempts": None, "flags": flags,
        "extra": json_text({k: v for k, v in extra.items() if v is not None}), "source": where,
        "digest": digest(fp, raw, info_raw, ref_bytes),
    })  # fmt: skip
    for step, (tid, call) in enumerate(_calls(text, got["single_hop"])):
        entry = toolinfo.get(tid)
        out.events.append({
            "run_id": run_id, "patient_id": case, "item_id": chain, "step": step, "_row": 0,
            "role": "assistant", "kind": "tool_call",
            "tool": entry["Category"] if entry else None, "input": input_text(call),
            "output": None, "ok": entry is not None,
            "error": None if entry else f"{tid} is not in the run's TOOLINFO",
        })  # fmt: skip
    return out


def _is_deny1(path: Path) -> bool:
    """Tell whether the log belongs to a ``multiDenyl1`` (unsolvable, level 1) result folder.

    The LLAMA runs' ``multiIDenyl1`` folder (:data:`PIPELINE_ALIASES`) is one.
    """
    name = path.parent.parent.parent.name
    return (pipeline_name(name) or name).lower().startswith("multidenyl1")


def _calls(text: str, single_hop: bool) -> list[tuple[str, str]]:
    """Return (tool id, call text) of each call the scripts count, in order."""
    if single_hop:
        block = _decomposition(text)
        return [(t, t) for t in _decomposition_tools(block)] if block is not None else []
    out = []
    for d in _call_dicts(text):
        m = _TOOL_ID.search(d)
        if m is not None:
            out.append(("TOOL" + m.group(1), d))
    return out
