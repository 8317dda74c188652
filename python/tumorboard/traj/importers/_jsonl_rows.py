"""JSON-lines importer: the typed columns of a chunk's good lines into items, runs and events.

All in bulk (polars): the run of each record, its item id (:mod:`._jsonl_identity`) and
position, the options parsed from the question, the gold letter, the grade of the parsed
answer, the flags, the benchmark fields (``extra``) and the digest; :class:`_State` carries what
the chunks of one file share, and :func:`_finish` collects them with the empty-field warnings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..._json import json_text
from ...harness.parsing import answer_letter, parse_answers, parse_options
from ..fields import REQUIRED_FIELDS, extra_fields
from ..schema import schema_of
from ._common import ImportOptions, Parsed, _rows_table, line_digests
from ._jsonl_fields import _ALL_EXTRA, _kind_of
from ._jsonl_identity import _NO_IDENTITY, _content_item_ids, _identities
from ._jsonl_read import ChunkEvents, Lines, _series


@dataclass
class _State:
    """What the chunks of one file share: run rows, position counters, empty-field counts."""

    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    counts: Any = None  # polars frame run_id, patient_id, n: records seen per patient
    m: int = 0
    missing: dict[str, int] = field(default_factory=dict)
    keys_seen: list[str] = field(default_factory=list)
    benchmarks: set[str] = field(default_factory=set)
    items: list[Any] = field(default_factory=list)
    keys: list[Any] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)  # Arrow tables, with _row
    # run_id, _h, n: records given a content id so far per identity hash (the next: n)
    occurrences: Any = None
    n_shared: int = 0  # records whose identifying text another record of their run shares
    n_lines: int = 0  # non-blank lines within the line bound


def _finish(
    out: Parsed, state: _State, path: Path, opts: ImportOptions, keys: Mapping[str, str]
) -> None:
    """Collect the chunks' rows into ``out`` and add the empty-field warnings."""
    _take_rows(out, state)  # (none left when every row went out in earlier pieces)
    if state.n_shared:
        which = ", ".join(opts.item_key) if opts.item_key else "task, patient and question"
        out.warnings.append(
            (
                str(path),
                f"{state.n_shared:,} records without an item id share their {which} with "
                "another record of their run; they are told apart by an occurrence index "
                "(.1, .2, ...). Give them item ids (--map item_id=KEY) or name what "
                "identifies an item (--item-key KEY[,KEY...])",
            )
        )
    m = state.m
    seen = ", ".join(state.keys_seen[:40]) + (", ..." if len(state.keys_seen) > 40 else "")
    wanted = [f for f in opts.field_map if f in keys and f not in ("events", "config")]
    for b in sorted(state.benchmarks):
        need = REQUIRED_FIELDS.get(b, REQUIRED_FIELDS["mtbbench"])
        wanted += [f for f in need if f not in wanted]
    for f in wanted:
        n = state.missing.get(f, 0)
        if not n:
            continue
        if f == "grade":
            reason = (
                f"{n:,} of {m:,} lines have no grade (no {keys.get('correct', 'correct')!r}, "
                f"and no {keys.get('gold', 'gold')!r} with a "
                f"{keys.get('response', 'response')!r} whose answer can be read); they are "
                "ungraded (flag 'ungraded'; `score` counts them in n_ungraded)"
            )
        else:
            mapped = f" (--map {f}={opts.field_map[f]})" if f in opts.field_map else ""
            reason = f"{n:,} of {m:,} lines have no value for {keys.get(f, f)!r}{mapped}"
        out.warnings.append((str(path), f"{reason}; keys seen: {seen}"))


def _take_rows(out: Parsed, state: _State) -> None:
    """Move the runs and the rows gathered in ``state`` (items, their keys, events) into ``out``.

    A file read in pieces (:func:`.jsonl.parse_stream`) gives each piece the rows gathered
    since the last one.
    """
    import polars as pl
    import pyarrow as pa

    out.runs = list(state.runs.values())
    if state.items:
        out.items_table = pa.concat_tables(state.items)
        out.keys_frame = pl.concat(state.keys)
    if state.events:
        out.events_table = pa.concat_tables(state.events)
    state.items, state.keys, state.events = [], [], []


# ----------------------------------------------------------------------------- rows


def _build(
    out: Parsed,
    state: _State,
    path: Path,
    opts: ImportOptions,
    fp: bytes,
    columns: Mapping[str, Any],
    linenos: Sequence[int],
    texts: Sequence[bytes],
    events: ChunkEvents | None,
) -> None:
    """Turn the typed columns of one chunk's good lines into rows (in bulk), into ``state``."""
    import polars as pl

    data: dict[str, Any] = {"_line": pl.Series("_line", linenos, dtype=pl.Int64)}
    objects: dict[str, list[Any]] = {}
    for f, values in columns.items():
        s = _series(f, values, _kind_of(f))
        if isinstance(s, pl.Series):
            data[f] = s
        else:
            objects[f] = list(values)
    df = pl.DataFrame(data)

    def col(name: str, dtype: Any) -> pl.Expr:
        return pl.col(name) if name in df.columns else pl.lit(None, dtype=dtype)

    def text_or(name: str, forced: str | None, default: str) -> pl.Expr:
        if forced:
            return pl.lit(forced, dtype=pl.String)
        c = col(name, pl.String)
        return pl.when(c.is_null() | (c == "")).then(pl.lit(default)).otherwise(c)

    model = pl.lit(opts.model, dtype=pl.String) if opts.model else col("model", pl.String)
    df = df.with_columns(model.alias("_model"), pl.int_range(pl.len(), dtype=pl.Int64).alias("_i"))
    no_model = pl.col("_model").is_null() | (pl.col("_model") == "")
    bad = df.filter(no_model).get_column("_line").to_list()
    for lineno in bad:
        out.rejected.append(
            (f"{path}:{lineno}", "no model (give the record a 'model' or the import a model)")
        )
    if bad:
        df = df.filter(~no_model)
    df, unidentified = _identities(df, objects, opts)
    why = (
        f"no item id and none of the --item-key keys ({', '.join(opts.item_key)}) has a value"
        if opts.item_key
        else _NO_IDENTITY
    )
    for lineno in unidentified:
        out.rejected.append((f"{path}:{lineno}", why))
    bad = bad or unidentified
    m = df.height
    if m == 0:
        return
    # mapped keys that the records leave empty (counted before defaults fill them)
    for f in opts.field_map:
        if f in _ALL_EXTRA or f in ("response", "events", "config"):
            continue
        n = int(df.get_column(f).null_count()) if f in df.columns else m
        if f in objects:
            n = sum(1 for i in df.get_column("_i").to_list() if objects[f][i] is None)
        state.missing[f] = state.missing.get(f, 0) + n
    df = df.with_columns(
        pl.col("_model").alias("model"),
        text_or("benchmark", opts.benchmark, "jsonl").alias("benchmark"),
        text_or("track", opts.track, "default").alias("track"),
        col("tools", pl.Boolean).fill_null(False).alias("tools"),
    )
    keep = df.get_column("_i").to_list() if bad else range(len(linenos))
    tail = [pl.lit(opts.run_name)] if opts.run_name else []
    derived_run = pl.concat_str(
        [
            pl.col("benchmark"),
            pl.col("track"),
            pl.col("model"),
            pl.when(pl.col("tools")).then(pl.lit("tools")).otherwise(pl.lit("no-tools")),
            *tail,
        ],
        separator=":",
    )
    run_id = col("run_id", pl.String)
    df = df.with_columns(
        pl.when(run_id.is_null() | (run_id == "")).then(derived_run).otherwise(run_id)
        .alias("run_id"),
        col("patient_id", pl.String).alias("patient_id"),
        col("position", pl.Int64).is_not_null().alias("_pos_given"),
    )  # fmt: skip
    if isinstance(keep, range):
        kept_texts: Sequence[bytes] = texts
    elif isinstance(texts, Lines):
        kept_texts = texts.take(keep)
    else:
        kept_texts = [texts[i] for i in keep]
    df = _content_item_ids(df, kept_texts, state)
    df = _positions(df, state)
    # options: given, else parsed from the question (once per distinct question)
    df = df.with_columns(col("question", pl.String).alias("question"))
    if "options" not in df.columns:
        df = df.with_columns(pl.lit(None, dtype=pl.List(pl.String)).alias("options"))
    if df.get_column("options").null_count():
        missing_opts = pl.col("options").is_null() & (pl.col("question").fill_null("") != "")
        qs = df.filter(missing_opts).get_column("question").unique().to_list()
        if qs:
            parsed_opts = [list(parse_options(q)) or None for q in qs]
            table = pl.DataFrame(
                {"question": qs, "_opts": pl.Series(parsed_opts, dtype=pl.List(pl.String))}
            )
            df = df.join(table, on="question", how="left", maintain_order="left").with_columns(
                pl.coalesce("options", "_opts").alias("options")
            )
    # gold: a letter (with the logged text in gold_text) or free text
    if "gold" in df.columns and df.get_column("gold").null_count() < m:
        golds = df.get_column("gold").drop_nulls().unique().to_list()
        letters = pl.DataFrame(
            {"gold": golds, "_letter": [answer_letter(g) for g in golds]},
            schema={"gold": pl.String, "_letter": pl.String},
        )
        df = df.join(letters, on="gold", how="left", maintain_order="left").with_columns(
            pl.coalesce("_letter", "gold").alias("gold"),
            pl.when(pl.col("_letter").is_not_null() & (pl.col("gold") != pl.col("_letter")))
            .then(pl.col("gold"))
            .alias("gold_text"),
        )  # fmt: skip
    else:
        df = df.with_columns(
            pl.lit(None, dtype=pl.String).alias("gold"),
            pl.lit(None, dtype=pl.String).alias("gold_text"),
        )
    df = df.with_columns(
        col("response", pl.String).alias("response"),
        col("parsed_answer", pl.String).alias("parsed_answer"),
        col("correct", pl.Boolean).alias("correct"),
    )
    todo = df.select(
        pl.col("parsed_answer").is_null() & pl.col("response").is_not_null()
    ).to_series()
    if todo.any():
        sub = df.filter(todo)
        found = parse_answers(sub.get_column("response"), options=_Rows(sub.get_column("options")))
        filled = pl.Series("_parsed", [None] * m, dtype=pl.String).scatter(
            todo.arg_true(), pl.Series(found, dtype=pl.String)
        )
        df = df.with_columns(pl.coalesce("parsed_answer", filled).alias("parsed_answer"))
    # a response whose answer cannot be read is ungraded, not wrong
    gradable = pl.col("gold").is_not_null() & pl.col("parsed_answer").is_not_null()
    graded = pl.col("parsed_answer").is_not_null() & (pl.col("parsed_answer") == pl.col("gold"))
    df = df.with_columns(
        pl.when(pl.col("correct").is_not_null())
        .then(pl.lit("log"))
        .when(gradable)
        .then(pl.lit("graded"))
        .otherwise(pl.lit("missing"))
        .alias("correct_source"),
    ).with_columns(
        pl.when(pl.col("correct_source") == "graded")
        .then(graded.fill_null(False))
        .otherwise(pl.col("correct"))
        .alias("correct"),
    )
    empty = pl.lit([], dtype=pl.List(pl.String))
    flag_parts = [col("flags", pl.List(pl.String)).fill_null(empty)]
    flagged = [col("flags", pl.List(pl.String)).list.len().fill_null(0) > 0]
    flag_parts.append(
        pl.when(pl.col("correct_source") == "missing")
        .then(pl.lit(["ungraded"], dtype=pl.List(pl.String)))
        .otherwise(empty)
    )
    flagged.append(pl.col("correct_source") == "missing")
    for name in ("files_accessed", "files_hallucinated"):
        if name not in df.columns:
            df = df.with_columns(pl.lit(None, dtype=pl.List(pl.String)).alias(name))
            continue
        once = pl.col(name).list.unique(maintain_order=True)
        df = df.with_columns(
            once.alias(name),
            (once.list.len() != pl.col(name).list.len()).fill_null(False).alias(f"_dup_{name}"),
        )
        flag_parts.append(
            pl.when(pl.col(f"_dup_{name}"))
            .then(pl.lit([f"duplicate_{name}"], dtype=pl.List(pl.String)))
            .otherwise(empty)
        )
        flagged.append(pl.col(f"_dup_{name}"))
    # most records raise no flag: build the lists only when some do
    any_flag = df.select(pl.any_horizontal(flagged).any()).item()
    flags = pl.concat_list(flag_parts) if any_flag else empty
    df = df.with_columns(
        col("task", pl.String).fill_null("default").alias("task"),
        pl.col("files_accessed").list.len().cast(pl.Int32).alias("n_files"),
        col("latency_s", pl.Float64).alias("latency_s"),
        col("attempts", pl.Int64).cast(pl.Int32).alias("attempts"),
        flags.alias("flags"),
        pl.concat_str(pl.lit(f"{path}:"), pl.col("_line").cast(pl.String)).alias("source"),
    )
    # benchmark fields, as JSON text per item (only those of the item's benchmark)
    extra = _extra_column(df, objects, keep, state)
    # a position derived from the record's place in the file is left out of the digest: the
    # same records in another order are the same items, unchanged
    positions = (
        df.select(pl.when(pl.col("_pos_given")).then(pl.col("position")).otherwise(-1))
        .to_series()
        .to_numpy()
    )
    digests = line_digests(fp, df.get_column("item_id"), positions, kept_texts)
    df = df.with_columns(pl.Series("extra", extra, dtype=pl.String), digests)
    # what the benchmark needs, left empty
    state.m += m
    state.benchmarks.update(df.get_column("benchmark").unique().to_list())
    counts = df.select(
        pl.col("response").null_count().alias("response"),
        (pl.col("correct_source") == "missing").sum().alias("grade"),
    ).row(0, named=True)
    for f, n in counts.items():
        state.missing[f] = state.missing.get(f, 0) + int(n)

    runs = df.select("run_id", "benchmark", "track", "model", "tools").with_columns(
        pl.lit(None, dtype=pl.String).alias("config")
    )
    if "config" in objects:
        configs = [objects["config"][i] for i in keep]
        runs = runs.with_columns(
            pl.Series("config", [json_text(c) for c in configs], dtype=pl.String)
        )
    for r in runs.unique(subset="run_id", keep="first", maintain_order=True).to_dicts():
        state.runs.setdefault(r["run_id"], {**r, "created_at": None})
    row0 = sum(t.num_rows for t in state.items)
    items = df.select(
        [pl.col(c) if c in df.columns else pl.lit(None) for c in schema_of("items").names]
    )
    state.items.append(_arrow(items, "items"))
    state.keys.append(df.select("run_id", "patient_id", "item_id", "digest", "source", "question"))
    if events is not None:
        table = _event_rows(df, keep, len(linenos), row0, events)
        if table is not None:
            state.events.append(table)


def _event_rows(df: Any, keep: Sequence[int], n: int, row0: int, events: ChunkEvents) -> Any:
    """Return the events of the kept rows as a conforming table with an int32 ``_row`` column.

    Each event gets its item's run, patient and item id and ``_row``, its item's row among the
    items given so far; events are in row order, each row's in list order. The compiled
    reader's events are columns already; the line reader's rows become columns here.
    """
    import pyarrow as pa

    schema = schema_of("events")
    with_row = schema.append(pa.field("_row", pa.int32()))
    kept = np.arange(n, dtype=np.int64) if isinstance(keep, range) else np.asarray(keep, np.int64)
    row_of = np.full(n, -1, dtype=np.int64)  # each position's row among the kept rows
    row_of[kept] = np.arange(len(kept), dtype=np.int64)
    keys = df.select("run_id", "patient_id", "item_id").to_arrow()
    tables = []
    if events.table is not None and events.table.num_rows:
        t = events.table
        rows = row_of[t.column("_line").to_numpy()]
        if (rows < 0).any():  # events of rows dropped since (no model, no identity)
            t = t.filter(pa.array(rows >= 0))
            rows = rows[rows >= 0]
        ids = keys.take(pa.array(rows))
        arrays = [ids.column(f.name).cast(f.type) if f.name in ids.column_names
                  else t.column(f.name) for f in schema]  # fmt: skip
        arrays.append(pa.array((row0 + rows).astype(np.int32)))
        tables.append(pa.Table.from_arrays(arrays, schema=with_row))
    if events.lists:
        dicts = []
        rows_of_dicts = []
        key_rows = keys.to_pylist()
        for row, i in enumerate(kept.tolist()):
            for e in events.lists[i] or ():
                dicts.append({**key_rows[row], **e})
                rows_of_dicts.append(row0 + row)
        if dicts:
            t = _rows_table(dicts, "events")
            tables.append(t.append_column("_row", pa.array(np.array(rows_of_dicts, np.int32))))
    if not tables:
        return None
    if len(tables) == 1:
        return tables[0]
    both = pa.concat_tables(tables)
    order = np.argsort(both.column("_row").to_numpy(), kind="stable")
    return both.take(pa.array(order))


def _positions(df: Any, state: _State) -> Any:
    """Fill ``position``: given, else the order of the patient's records in the run so far."""
    import polars as pl

    key = ["run_id", "patient_id"]
    counts = state.counts
    if "position" in df.columns and df.get_column("position").null_count() < df.height:
        seen: dict[tuple[Any, Any], int] = {}
        if counts is not None:
            seen = {(r[0], r[1]): r[2] for r in counts.rows()}
        positions = []
        for k, pos in zip(df.select(key).rows(), df.get_column("position").to_list(), strict=True):
            if pos is None:
                pos = seen.get(k, 0)
            seen[k] = pos + 1
            positions.append(pos)
        df = df.with_columns(pl.Series("position", positions, dtype=pl.Int64))
        state.counts = pl.DataFrame(
            [(k[0], k[1], v) for k, v in seen.items()],
            schema={"run_id": pl.String, "patient_id": pl.String, "n": pl.Int64},
            orient="row",
        )
        return df
    # group the rows by patient once (a window over many groups is several times slower)
    groups = df.select(key).with_row_index("_r").group_by(key).agg(pl.col("_r"))
    if counts is not None:
        groups = groups.join(counts, on=key, how="left", nulls_equal=True)
        groups = groups.with_columns(pl.col("n").fill_null(0))
    else:
        groups = groups.with_columns(pl.lit(0, dtype=pl.Int64).alias("n"))
    end = pl.col("n") + pl.col("_r").list.len()
    groups = groups.with_columns(pl.int_ranges("n", end, dtype=pl.Int64).alias("position"))
    positions = groups.select("_r", "position").explode("_r", "position").sort("_r")
    df = df.with_columns(positions.get_column("position"))
    new = groups.select(*key, end.alias("n"))
    if counts is not None:
        new = pl.concat([counts.join(new, on=key, how="anti", nulls_equal=True), new])
    state.counts = new
    return df


class _Rows:
    """Row access to a polars list Series as Python lists (what parse_answers indexes)."""

    def __init__(self, series: Any) -> None:
        self.series = series

    def __len__(self) -> int:
        return len(self.series)

    def __getitem__(self, i: int) -> list[str] | None:
        v = self.series[i]
        return None if v is None else list(v)


def _extra_column(
    df: Any, objects: Mapping[str, list[Any]], keep: Sequence[int], state: _State
) -> list[str | None]:
    """Return each row's ``extra`` JSON text (the non-null fields of its benchmark).

    Counts, per benchmark field, the rows of that benchmark without it (``state.missing``).
    """
    distinct = df.get_column("benchmark").unique().to_list()
    fields_of = {b: list(extra_fields(b)) for b in distinct}
    if not any(fields_of.values()):
        return [None] * df.height
    benchmarks = df.get_column("benchmark").to_list()
    values: dict[str, list[Any]] = {}
    for fields in fields_of.values():
        for f in fields:
            if f in objects:
                values[f] = [objects[f][i] for i in keep]
            elif f in df.columns:
                values[f] = df.get_column(f).to_list()
    out: list[str | None] = []
    missing = state.missing
    for row, b in enumerate(benchmarks):
        doc = {}
        for f in fields_of[b]:
            v = values[f][row] if f in values else None
            if v is None:
                missing[f] = missing.get(f, 0) + 1
            else:
                doc[f] = v
        out.append(json_text(doc) if doc else None)
    return out


def _arrow(frame: Any, table: str) -> Any:
    """Return a polars frame of a table's columns as a conforming Arrow table."""
    import pyarrow as pa

    schema = schema_of(table)
    arrow = frame.to_arrow()
    arrays = []
    for fld in schema:
        arr = arrow.column(fld.name)
        if arr.type != fld.type:
            arr = arr.cast(fld.type)
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=schema)
