"""Trajectory storage: a versioned Arrow schema, a Parquet store, a recorder and importers.

The parts: the Arrow schema, the Parquet-backed :class:`Store`, the :class:`Recorder` harnesses
call, and importers for existing agent logs::

    from tumorboard.traj import Recorder, Store

    store = Store("store")
    with Recorder(store, benchmark="mtbbench", track="multimodal", model="gpt-4o") as rec:
        with rec.item(patient_id="104", item_id="q3", task="digital_pathology",
                      question=text, options=options, gold="C") as it:
            it.request_files(["PrimaryTumor_HE_104.jpg"], available=files)
            it.answer(response)
    store.items(with_runs=True).group_by("model", "task").agg(pl.col("correct").mean())

Benchmark-specific item fields (RadA-BenchPlat's ground-truth tool chain, MedBench's dimension,
...) live in ``items.extra``; :data:`BENCHMARK_FIELDS` lists them. The schema is documented in
docs/trajectory-schema.md.
"""

from __future__ import annotations

from .fields import BENCHMARK_FIELDS
from .importers import FORMATS, ImportReport, import_logs
from .recorder import FlushInfo, ItemRecorder, Recorder
from .schema import SCHEMA_VERSION, conform, schema_of
from .store import (
    CompactionResult,
    CorruptStoreError,
    Store,
    StoreCheck,
    StoreProblem,
    StoreVersionError,
    StrayPartWarning,
)

__all__ = [
    "BENCHMARK_FIELDS",
    "FORMATS",
    "SCHEMA_VERSION",
    "CompactionResult",
    "CorruptStoreError",
    "FlushInfo",
    "ImportReport",
    "ItemRecorder",
    "Recorder",
    "Store",
    "StoreCheck",
    "StoreProblem",
    "StoreVersionError",
    "StrayPartWarning",
    "conform",
    "import_logs",
    "schema_of",
]
