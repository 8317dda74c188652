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

The work is split by job: :mod:`._inspect_read` opens a log and streams its samples (both
readers), :mod:`._inspect_rows` turns one sample into rows; this module finds the logs and
builds a log's tables from its samples, chunk by chunk (:func:`parse`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..._json import json_text
from ...errors import InvalidArgumentError
from ._common import ImportOptions, MalformedLog, Parsed, _rows_table, files_with_suffix, run_key
from ._inspect_read import READERS, _BadSample, read_samples
from ._inspect_read import _member_bytes as _member_bytes  # re-exported
from ._inspect_rows import _created, _error_text, _item, _no_nulls, _results
from ._inspect_rows import _events as _events  # re-exported

__all__ = ["READERS", "discover", "parse", "read_samples"]

#: Samples turned into Arrow rows at a time (progress is reported after each chunk).
CHUNK_SAMPLES = 2_000
#: The sample metadata key read as the patient id when the import names none.
DEFAULT_PATIENT_KEY = "patient_id"


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
        # from the buffer: pa.array() of a numpy array would import pandas (half a second)
        row = pa.Array.from_buffers(pa.int32(), pos.size, [None, pa.py_buffer(pos)])
        return t_items, t_events.append_column("_row", row)

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
