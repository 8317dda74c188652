"""Importers of existing agent logs into a :class:`~tumorboard.traj.Store`.

``import_logs(format, src, store)`` finds the log files under ``src``, parses each one and
writes what is new as one atomic import batch (see :mod:`tumorboard.traj.store`). A malformed
file is skipped and listed in the :class:`ImportReport` with the reason; the rest is imported.

Batch isolation: nothing one file or one line holds can stop the others. Each file is read and
parsed on its own; whatever it raises (bad JSON, JSON past the limits of
:func:`tumorboard._json.load_json`, bytes that are not UTF-8, any failure of the parser on a
hostile value) skips that file with the reason, and a file's bad records (lines of JSON lines,
samples of inspect logs) are rejected one by one as ``file:line`` (``file#sample``) while its
good ones are imported. Should the rows of
several files fail to form one table at write time, each file's rows are checked alone and only
the failing files are skipped. Every parser that reads model output runs in linear time
(:mod:`tumorboard.harness.parsing`), so no file can hang an import.

Re-imports are idempotent by item, not by file: every item is keyed by ``(run_id, patient_id,
item_id)`` and carries a digest of what it was made from (the record, the import options and
the importer version, ``items.digest``). An item already in the store with the same digest is
left alone; one with another digest is replaced (latest wins): the batch swaps the store parts
that hold the old rows (and their events) for copies without them, atomically with its commit.
Within one import, of two records with one key the later one wins (with a warning). MTBBench
logs cover one patient of one run each (a unit) and replace units whole: of several logs of a
unit the newest (by the timestamp in the file name) counts, also against the log the store's
rows came from.

Formats:

* ``mtbbench``: MTBBench chat logs, ``<model>/<patient>_chatlog_<unix_ts>.json``
  (:mod:`.mtbbench`).
* ``jsonl``: one JSON record per line with a documented field mapping (:mod:`.jsonl`).
* ``react``: ReAct text traces, LAMMI-style (:mod:`.react`).
* ``radabench``: RadA-BenchPlat evaluation-pipeline result folders,
  ``logouts/<case>/<chain>.txt`` with ``info/<case>/<chain>.json`` (:mod:`.radabench`).
* ``inspect``: inspect_ai evaluation logs, ``*.eval`` and ``*.json`` (:mod:`.inspect`), read
  sample by sample; needs ``tumorboard[inspect]``.

The package face: the public names, ``__all__`` and :func:`import_logs`, whose work is done in
:mod:`._batch` (options, bounds, file discovery, per-file parsing, the report assembly) and
:mod:`._commit` (the comparison with the store and the one atomic commit); :mod:`._report`
holds :class:`ImportReport`, and :mod:`._common` what the format importers share.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ..store import Store
from ._batch import FORMATS, Progress, run_import
from ._common import DEFAULT_MAX_FILE_BYTES as DEFAULT_MAX_FILE_BYTES  # re-exported
from ._common import DEFAULT_MAX_LINE_BYTES as DEFAULT_MAX_LINE_BYTES  # re-exported
from ._common import ImportOptions, ItemConflictError, MalformedLog
from ._common import NotOfFormat as NotOfFormat  # re-exported
from ._common import Parsed as Parsed  # re-exported
from ._report import SHOWN_WARNINGS as SHOWN_WARNINGS  # re-exported
from ._report import ImportReport

__all__ = [
    "FORMATS",
    "ImportOptions",
    "ImportReport",
    "ItemConflictError",
    "MalformedLog",
    "import_logs",
]


def import_logs(
    format: str,
    src: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    store: Store | str | os.PathLike[str],
    *,
    track: str | None = None,
    model: str | None = None,
    model_map: Mapping[str, str] | str | os.PathLike[str] | None = None,
    benchmark: str | None = None,
    field_map: Mapping[str, str] | None = None,
    run_name: str | None = None,
    patient_key: str | None = None,
    reader: str = "auto",
    strict: bool = False,
    progress: Progress | None = None,
    cases: str | os.PathLike[str] | None = None,
    item_key: str | Sequence[str] | None = None,
    replace: bool = False,
    max_line_bytes: int | None = DEFAULT_MAX_LINE_BYTES,
    max_file_bytes: int | None = DEFAULT_MAX_FILE_BYTES,
) -> ImportReport:
    """Import the logs under ``src`` into ``store``.

    Parameters
    ----------
    format : {"mtbbench", "jsonl", "react", "radabench", "inspect"}
        The log format.
    src : str, os.PathLike or a sequence of them
        A log file or a directory searched recursively, or several.
    store : Store, str or os.PathLike
        A Store or its path (created when missing).
    track : str, optional
        Force the track (mtbbench: "multimodal" or "longitudinal"; default: detected per file
        from the questions); for other formats the default track.
    model : str, optional
        Force the model name (default: from the folder name or the records).
    model_map : mapping, str or os.PathLike, optional
        Folder name -> display model name; a mapping, or a JSON object file, or a text file of
        ``folder,display`` lines.
    benchmark : str, optional
        The benchmark the runs belong to (recorded in ``runs.benchmark``; ``tumorboard score
        --benchmark`` picks them by it). Default: the format's ("mtbbench"), or the records'
        ``benchmark`` field, else "jsonl" / "react". For jsonl it also decides which benchmark
        fields the records may carry (:data:`tumorboard.traj.fields.BENCHMARK_FIELDS`).
    field_map : mapping of str to str, optional
        jsonl only: schema field -> key (dotted path) in the records.
    run_name : str, optional
        Appended to derived run ids, to keep repeated runs of one model apart.
    patient_key : str, optional
        inspect only: the sample metadata key whose value is the item's ``patient_id``
        (default "patient_id"), so that scores can be clustered by patient.
    reader : {"auto", "direct", "inspect"}, default "auto"
        inspect only: read the samples with inspect_ai's own reader ("inspect") or the log's
        members directly ("direct"; "auto"); both give the same rows
        (:mod:`tumorboard.traj.importers.inspect`).
    item_key : str or sequence of str, optional
        jsonl only: the record keys (dotted paths; a comma-separated string or a list) whose
        values identify an item that has no ``item_id``. Default: the item's task, patient id
        and question. Either way a record without an id gets ``q`` and a digest of those
        values (``.1``, ``.2``... for repeats in one run), so that the same records in another
        order, or split over other files, are the same items.
    replace : bool, default False
        Replace stored items whose key a record reuses with another question; without it such
        an import is refused (:class:`ItemConflictError`) before anything is written.
    max_line_bytes : int or None, default 64 MiB
        jsonl: a longer line is rejected alone, before it is parsed (None: no limit).
    max_file_bytes : int or None, default 8 GiB
        A larger log file is skipped before it is read (None: no limit). Special files (FIFOs,
        devices, links to them) are always skipped with the reason.
    strict : bool, default False
        Fail (write nothing) when any file is skipped or any record is dropped, replaced by a
        later one, or leaves a needed field empty.
    progress : callable, optional
        Called as ``progress(files_done, files_total, records, bytes_done)`` while files are
        read (large files several times).
    cases : str or os.PathLike, optional
        radabench only: the pipelines' cases JSON (``combined_cases*.json``), whose
        ``QA[chain]["A"]`` are the reference answers of the text metrics.

    Returns
    -------
    ImportReport
        What was imported, left unchanged, skipped (with reasons) and written.

    Raises
    ------
    InvalidArgumentError
        An unknown format, an invalid model map or field map, a ``field_map`` for another format
        than jsonl, or (``strict``) any problem in the logs, listed in the message.
    MissingFileError
        ``src`` (or the model-map file) does not exist, or holds no log file of the format.
    """
    return run_import(
        format,
        src,
        store,
        track=track,
        model=model,
        model_map=model_map,
        benchmark=benchmark,
        field_map=field_map,
        run_name=run_name,
        patient_key=patient_key,
        reader=reader,
        strict=strict,
        progress=progress,
        cases=cases,
        item_key=item_key,
        replace=replace,
        max_line_bytes=max_line_bytes,
        max_file_bytes=max_file_bytes,
    )
