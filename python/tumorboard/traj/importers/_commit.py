"""The commit of one import batch into the store: compare with the stored rows, write once.

The parsed files of an import (:class:`_Entry`) are compared with the store under its write
lock: items already stored with the same digest are left alone, those with another digest are
replaced, of several records with one key the later wins, MTBBench units are kept, superseded
or replaced whole, and records that reuse a stored key for another question are refused (or,
with ``replace``, listed). What is new is then committed as one atomic batch together with the
store parts it replaces (:meth:`~tumorboard.traj.Store.commit_batch`); should the rows of some
files not form tables, only those files are skipped (:func:`_write_isolated`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ...errors import InvalidArgumentError
from ..schema import conform, schema_of
from ..store import Store
from ._common import ItemConflictError, MalformedLog, Parsed, _rows_table
from ._report import SHOWN_WARNINGS


@dataclass
class _Entry:
    """One parsed file in an import."""

    index: int
    path: Path
    content_hash: str
    parsed: Parsed
    status: str = "new"  # new | unchanged | skipped
    items: Any = None  # pyarrow.Table of its items, with the _file and _row columns
    n_written: int = 0
    n_events: int = 0
    notes: list[str] = field(default_factory=list)


def _remove_new_empty_store(st: Store) -> None:
    """Remove a store this import created when nothing was committed to it (refused import)."""
    import shutil

    try:
        if all(not st.parts(t) for t in ("runs", "items", "events", "imports")):
            shutil.rmtree(st.path, ignore_errors=True)
    except Exception:  # noqa: BLE001 - the error being raised matters, not this clean-up
        pass


def _write_isolated(
    st: Store,
    format: str,
    fp: bytes,
    entries: list[_Entry],
    skipped: list[tuple[str, str]],
    warnings: list[tuple[str, str]],
    failed: list[str],
    *,
    replace: bool = False,
    own_parts: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Run :func:`_write`; if the rows of the files do not form tables, skip the bad files.

    The rows of each file are then converted alone; a file whose rows do not fit the schema is
    skipped with the reason (never the whole batch), and the batch is written without it.
    """
    statuses = [e.status for e in entries]
    n_skipped, n_warnings = len(skipped), len(warnings)
    try:
        return _write(
            st, format, fp, entries, skipped, warnings, replace=replace, own_parts=own_parts
        )
    except ItemConflictError:
        raise
    except InvalidArgumentError:
        bad = [(e, why) for e in entries if e.status == "new" and (why := _unfit(e)) is not None]
        if not bad:
            raise
    del skipped[n_skipped:], warnings[n_warnings:]
    for e, status in zip(entries, statuses, strict=True):
        e.status, e.n_written, e.n_events = status, 0, 0
    for e, why in bad:
        e.status = "skipped"
        skipped.append((str(e.path), why))
        failed.append(str(e.path))
    if not any(e.status == "new" for e in entries):
        return {}
    return _write(st, format, fp, entries, skipped, warnings, replace=replace, own_parts=own_parts)


def _unfit(e: _Entry) -> str | None:
    """Return why a parsed file's rows do not form conforming tables (None if they do)."""
    p = e.parsed
    for table, rows in (("runs", p.runs), ("items", p.items), ("events", p.events)):
        if not rows:
            continue
        try:
            _rows_table([{k: v for k, v in r.items() if k != "_row"} for r in rows], table)
        except InvalidArgumentError as exc:
            return f"rows do not fit the store's schema: {exc}"[:300]
    return None


def _items_of(entries: Sequence[_Entry]) -> tuple[pa.Table, Any]:
    """Return the items of the live entries as one table, and a polars frame of their keys.

    The frame has run_id, patient_id, item_id, digest, source, ``_file`` (the entry's index),
    ``_row`` (the item's row in its file) and ``_i`` (the row in the table).
    """
    import polars as pl

    key_schema = {"run_id": pl.String, "patient_id": pl.String, "item_id": pl.String,
                  "digest": pl.String, "source": pl.String, "question": pl.String}  # fmt: skip
    tables = []
    frames = []
    dict_rows: list[dict[str, Any]] = []
    dict_files: list[int] = []
    dict_pos: list[int] = []
    for e in entries:
        p = e.parsed
        if p.items_table is not None:
            n = p.items_table.num_rows
            tables.append(p.items_table)
            kf = p.keys_frame
            if "question" not in kf.columns:
                kf = kf.with_columns(pl.lit(None, dtype=pl.String).alias("question"))
            frames.append(
                kf.select(list(key_schema)).with_columns(
                    pl.lit(e.index, pl.Int32).alias("_file"),
                    pl.int_range(n, dtype=pl.Int32).alias("_row"),
                )
            )
        else:
            dict_rows += p.items
            dict_files += [e.index] * len(p.items)
            dict_pos += range(len(p.items))
    if dict_rows:
        tables.append(_rows_table(dict_rows, "items"))
        cols: dict[str, Any] = {c: [r.get(c) for r in dict_rows] for c in key_schema}
        frames.append(
            pl.DataFrame(cols, schema=key_schema).with_columns(
                pl.Series("_file", dict_files, dtype=pl.Int32),
                pl.Series("_row", dict_pos, dtype=pl.Int32),
            )
        )
    items = pa.concat_tables(tables) if tables else schema_of("items").empty_table()
    # one chunk per column: the group-bys and joins that compare the keys run several times
    # faster on contiguous columns than on one chunk per file or piece (0.17 s -> 0.04 s of CPU
    # to find repeated keys among 200k); a single frame is rechunked too
    keys = (
        pl.concat(frames).rechunk()
        if frames
        else pl.DataFrame(schema={**key_schema, "_file": pl.Int32, "_row": pl.Int32})
    )
    return items, keys.with_row_index("_i")


def _write(
    st: Store,
    format: str,
    fp: bytes,
    entries: list[_Entry],
    skipped: list[tuple[str, str]],
    warnings: list[tuple[str, str]],
    *,
    replace: bool = False,
    own_parts: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Compare the live entries with the store, then write one batch (the write lock is held).

    ``own_parts`` names the items parts that hold what earlier batches of the same import wrote
    (an import committed in several batches; :func:`own_parts_after` keeps it): a record with the
    key of a stored row in one of them replaces it as a later record of one batch replaces an
    earlier one (with a warning, never refused as another question), and the result counts
    it in ``n_again`` so that the import's totals count each key once. Part names, not keys:
    memory does not grow with the rows an import has written.
    """
    import polars as pl
    import pyarrow.compute as pc

    live = [e for e in entries if e.status == "new"]
    items, keys = _items_of(live)
    by_index = {e.index: e for e in live}
    unit_files = {e.index for e in live if e.parsed.unit is not None}
    key = ["run_id", "patient_id", "item_id"]

    # within this import: of several records with one key, the last one wins
    loose = keys.filter(~pl.col("_file").is_in(list(unit_files)))
    repeated = loose.group_by(key).len().filter(pl.col("len") > 1).select(key)
    dup = (
        loose.join(repeated, on=key, how="semi", nulls_equal=True)
        if repeated.height
        else loose.clear()
    )
    drop_rows: set[int] = set()
    if dup.height:
        last = dup.group_by(key, maintain_order=True).agg(
            pl.col("_i").last(), pl.col("source").last()
        )
        winner = {tuple(r[:3]): (r[3], r[4]) for r in last.rows()}
        shown = 0
        for r in dup.rows(named=True):
            i_win, src_win = winner[(r["run_id"], r["patient_id"], r["item_id"])]
            if r["_i"] != i_win:
                drop_rows.add(r["_i"])
                if shown < SHOWN_WARNINGS:
                    shown += 1
                    warnings.append(
                        (r["source"], f"replaced by {src_win} (same run, patient and item id)")
                    )
        if len(drop_rows) > shown:
            warnings.append(
                (
                    str(entries[0].path) if len(entries) == 1 else "(this import)",
                    f"{len(drop_rows) - shown:,} more records replaced by later records with "
                    "the same run, patient and item id",
                )
            )

    # against the store
    run_ids = keys.get_column("run_id").unique().sort().to_list()
    existing = _stored_rows(st, keys, run_ids, [by_index[i].parsed.unit for i in unit_files],
                            [p for e in live for p in e.parsed.legacy_sources])  # fmt: skip
    hide_items = pl.DataFrame(schema={k: pl.String for k in key})
    hide_units = pl.DataFrame(schema={"run_id": pl.String, "patient_id": pl.String})
    n_replaced = 0
    n_unchanged = 0
    n_again = 0
    if existing.height:
        # units (one MTBBench log per patient and run): unchanged, superseded or replaced whole
        units = [by_index[i].parsed.unit for i in unit_files]
        old_units = (
            existing.join(
                pl.DataFrame(units, schema=["run_id", "patient_id"], orient="row"),
                on=["run_id", "patient_id"],
                how="semi",
            ).partition_by(["run_id", "patient_id"], as_dict=True)
            if units
            else {}
        )
        mine_of = keys.partition_by("_file", as_dict=True) if unit_files else {}
        for e in [by_index[i] for i in sorted(unit_files)]:
            run_id, patient = e.parsed.unit  # type: ignore[misc]
            old = old_units.get((run_id, patient))
            if old is None:
                continue
            mine = mine_of[(e.index,)]
            old_ids = set(old.get_column("item_id").to_list())
            new_ids = set(mine.get_column("item_id").to_list())
            if (
                old_ids == new_ids
                and old.height == mine.height
                and set(old.get_column("digest").to_list())
                == set(mine.get_column("digest").to_list())
            ):
                e.status = "unchanged"
                n_unchanged += mine.height
                continue
            stored = _newest_source(old.get_column("source").to_list())
            if stored is not None and stored[0] > e.parsed.order:
                e.status = "skipped"
                skipped.append(
                    (
                        str(e.path),
                        f"superseded by the newer log {Path(stored[1]).name} of patient "
                        f"{patient!r} in run {run_id!r}, already in the store",
                    )
                )
                continue
            n_replaced += len(old_ids & new_ids)
            hide_units = pl.concat(
                [hide_units, pl.DataFrame({"run_id": [run_id], "patient_id": [patient]})]
            )
        # keyed items: unchanged (same digest) or replaced
        loose = keys.filter(
            ~pl.col("_file").is_in(list(unit_files)) & ~pl.col("_i").is_in(list(drop_rows))
        )
        joined = loose.join(
            existing.select(*key, pl.col("digest").alias("_old"),
                            pl.col("source").alias("_old_source"), pl.col("__part").alias("_part")),
            on=key,
            how="inner",
            nulls_equal=True,
        )  # fmt: skip
        again_keys = None
        joined_new = joined
        if own_parts and joined.height:
            in_mine = pl.col("_part").is_in(list(own_parts))
            again = joined.filter(in_mine)
            if again.height:
                again_keys = again.select("_i")
                for r in again.head(SHOWN_WARNINGS).rows(named=True):
                    warnings.append((r["_old_source"], f"replaced by {r['source']} (same run, "
                                     "patient and item id)"))  # fmt: skip
                if again.height > SHOWN_WARNINGS:
                    warnings.append(("(this import)", f"{again.height - SHOWN_WARNINGS:,} more "
                                     "records replaced by later records with the same run, "
                                     "patient and item id"))  # fmt: skip
                joined_new = joined.filter(~in_mine)
        _check_questions(st, run_ids, joined_new, replace=replace, warnings=warnings)
        # unchanged: the key's one stored row has the same digest; anything else (another
        # digest, a Recorder's row without one, several rows) is replaced, every stored row
        per_key = joined.group_by("_i").agg(
            pl.len().alias("_n"),
            (pl.col("digest") == pl.col("_old")).fill_null(False).sum().alias("_same"),
        )
        unchanged = (pl.col("_n") == 1) & (pl.col("_same") == 1)
        if again_keys is not None:  # written by this import: the later record wins, always
            unchanged = unchanged & ~pl.col("_i").is_in(again_keys.get_column("_i").implode())
        same = per_key.filter(unchanged).get_column("_i")
        n_unchanged += same.len()
        drop_rows.update(same.to_list())
        changed_rows = per_key.filter(~unchanged).get_column("_i")
        changed = loose.filter(pl.col("_i").is_in(changed_rows.implode())).select(key).unique()
        n_replaced += changed.height
        if again_keys is not None:
            n_again = int(changed_rows.is_in(again_keys.get_column("_i").implode()).sum())
            n_replaced -= n_again
        hide_items = changed
        # formats whose items are identified without the patient (inspect: eval, sample and
        # epoch): a stored item of another patient id is the same item, replaced
        by_item = [e.index for e in live if e.parsed.keyed_without_patient]
        if by_item:
            mine = loose.filter(pl.col("_file").is_in(by_item)).select(
                "run_id", "item_id", pl.col("patient_id").alias("_new_patient")
            )
            moved = (
                existing.join(mine, on=["run_id", "item_id"], how="inner")
                .filter(pl.col("patient_id").ne_missing(pl.col("_new_patient")))
                .select(key)
                .unique()
            )
            if moved.height:
                n_replaced += moved.height
                hide_items = pl.concat([hide_items, moved]).unique()
        # items an earlier tumorboard keyed by line number (L<line>) from the same files
        prefixes = [p for e in live for p in e.parsed.legacy_sources]
        if prefixes:
            legacy = (
                existing.filter(
                    pl.col("item_id").str.contains(r"^L\d+$")
                    & pl.any_horizontal([pl.col("source").str.starts_with(p) for p in prefixes])
                )
                .select(key)
                .unique()
            )
            if legacy.height:
                n_replaced += legacy.height
                hide_items = pl.concat([hide_items, legacy]).unique()
                warnings.append(
                    (
                        prefixes[0][:-1] if len(prefixes) == 1 else "(this import)",
                        f"{legacy.height:,} items an earlier tumorboard keyed by line number "
                        "(L<line>) replaced by the same records keyed by their content",
                    )
                )
    live = [e for e in live if e.status == "new"]
    keep_files = {e.index for e in live}
    mask = pl.col("_file").is_in(list(keep_files)) & ~pl.col("_i").is_in(list(drop_rows))
    kept = keys.filter(mask)
    n_items = kept.height
    if n_items == 0 and hide_items.height == 0 and hide_units.height == 0:
        for e in live:
            e.status = "unchanged"
        return {"n_unchanged": n_unchanged}
    keep_all = kept.height == items.num_rows
    items_out = items if keep_all else items.filter(keys.select(mask).to_series().to_arrow())
    per_file = dict(kept.group_by("_file").len().rows())
    for e in live:
        e.n_written = per_file.get(e.index, 0)
    with_events = [
        e.index
        for e in live
        if (e.parsed.events or e.parsed.events_table is not None) and e.parsed.unit is None
    ]
    pairs = kept.filter(pl.col("_file").is_in(with_events)).select("_file", "_row")
    files, item_rows = (pairs.get_column(c).to_numpy() for c in ("_file", "_row"))
    order = np.lexsort((item_rows, files))  # by file, then row
    files, item_rows = files[order], item_rows[order]
    bounds = (
        np.searchsorted(files, with_events, side="left"),
        np.searchsorted(files, with_events, side="right"),
    )
    kept_rows = {f: item_rows[a:b] for f, a, b in zip(with_events, *bounds, strict=True)}
    events_out, n_events_per = _events_of(live, kept_rows)
    for e in live:
        e.n_events = n_events_per.get(e.index, 0)
    runs_out, hide_runs = _runs_of(st, live, kept)

    replace: dict[str, list[tuple[Path, pa.Table]]] = {}
    if hide_items.height or hide_units.height:
        replace["items"] = _swaps(st, "items", hide_items, hide_units)
        replace["events"] = _swaps(st, "events", hide_items, hide_units)
    if hide_runs.height:
        replace["runs"] = _swaps(st, "runs", None, None, runs=hide_runs)
    now = datetime.now(timezone.utc)  # noqa: UP017 (py3.10 target)
    # the batch id: what is written (keys and digests) and replaced, so that re-running a killed
    # import against the same store rewrites the same names
    h = hashlib.blake2b(fp, digest_size=12)
    for buf in items_out.column("digest").combine_chunks().buffers():  # keys are in the digests
        if buf is not None:
            h.update(buf)
    for table, swaps in sorted(replace.items()):
        h.update(f"{table}:{','.join(p.name for p, _ in swaps)}".encode())
    batch = h.hexdigest()
    imports = _rows_table(
        [
            {
                "content_hash": e.content_hash,
                "source": str(e.path),
                "format": format,
                "batch": batch,
                "n_items": e.n_written,
                "n_events": e.n_events,
                "imported_at": now,
            }
            for e in live
            if e.n_written or e.n_events
        ],
        "imports",
    )
    parts = st.commit_batch(
        batch,
        {"runs": runs_out, "items": items_out, "events": events_out},
        imports,
        replace=replace,
    )
    runs_written = sorted(set(items_out.column("run_id").to_pylist()) | set(
        runs_out.column("run_id").to_pylist()))  # fmt: skip
    bench = pc.unique(runs_out.column("benchmark")).to_pylist() if runs_out.num_rows else []
    if not bench and runs_written:
        bench = (
            st.runs().filter(pl.col("run_id").is_in(runs_written)).select("benchmark").unique()
            .collect().get_column("benchmark").to_list()
        )  # fmt: skip
    return {
        "n_items": n_items,
        "n_new": n_items - n_replaced,
        "n_replaced": n_replaced,
        "n_unchanged": n_unchanged,
        "n_events": events_out.num_rows,
        "runs": tuple(runs_written),
        "benchmarks": tuple(sorted(b for b in bench if b is not None)),
        "batch": batch,
        "n_again": n_again,
        "parts": parts,
        "units": bool(unit_files),
    }


def own_parts_after(own: frozenset[str], result: dict[str, Any]) -> frozenset[str]:
    """Return the items parts that hold what an import has written, after one more batch.

    ``own`` before the batch, ``result`` what :func:`_write` returned for it. The batch's new
    items parts join (unless the batch held MTBBench units: a unit is replaced whole, never
    as a later record of the import); a part of ``own`` that the batch replaced leaves, and
    its copy, holding the rows it keeps, joins.
    """
    parts = result.get("parts")
    if parts is None:
        return own
    copies = parts.copies.get("items", {})
    out = set(own) - set(parts.removed.get("items", ()))
    out |= {copy for source, copy in copies.items() if source in own}
    if not result.get("units"):
        out |= set(parts.added.get("items", ()))
    return frozenset(out)


def _stored_rows(st: Store, keys: Any, run_ids: list[str], units: list[Any],
                 legacy: list[str]) -> Any:  # fmt: skip
    """Return the stored item rows a batch is compared with (key, digest, source, part).

    Only the rows that can matter are read, so that memory follows the batch, not the store:
    those of the batch's (run, item) pairs (a key, or an item keyed without its patient), of
    its MTBBench units (run, patient) and, where its files may have them, items an earlier
    tumorboard keyed by line number (``L<line>``).
    """
    import polars as pl

    key = ["run_id", "patient_id", "item_id"]
    wanted_keys = keys.lazy().select("run_id", "item_id").unique()  # (only where parts exist)
    pairs = pl.DataFrame(units, schema=["run_id", "patient_id"], orient="row").lazy()
    out = []
    # a group of parts at a time (parts in store order, rows in part order, as one scan of
    # the whole store gives them): memory holds one group's key columns and the matching rows,
    # not the key columns of every stored row of the batch's runs. The keys are matched first;
    # the digests and sources are read only for the rows that match (none, for new items), and
    # each row's part is named from the parts' row counts (a file path per stored row cost
    # more than the keys).
    for paths, counts in _part_groups(st.parts("items")):
        lf = st._scan_paths("items", paths)
        if not paths:  # an empty store: nothing to match (the batch's keys are not even read)
            empty = lf.select(*key, "digest", "source").with_row_index("_r").clear().collect()
            part = _part_names(paths, counts, empty.get_column("_r"))
            out.append(empty.select(*key, "digest", "source", part))
            continue
        scan = lf.select(key).with_row_index("_r").filter(pl.col("run_id").is_in(run_ids))
        frames = [scan.join(wanted_keys, on=["run_id", "item_id"], how="semi", nulls_equal=True)]
        if units:
            frames.append(scan.join(pairs, on=["run_id", "patient_id"], how="semi"))
        if legacy:
            frames.append(scan.filter(pl.col("item_id").str.contains(r"^L\d+$")))
        both = frames[0] if len(frames) == 1 else pl.concat(frames).unique(subset="_r")
        rows = both.select("_r").collect().get_column("_r").sort()
        if rows.len():
            found = (
                lf.select(*key, "digest", "source")
                .with_row_index("_r")
                .join(rows.to_frame().lazy(), on="_r", how="semi")
                .collect()
                .sort("_r")
            )
        elif out:
            continue
        else:
            found = lf.select(*key, "digest", "source").with_row_index("_r").clear().collect()
        out.append(found.select(*key, "digest", "source", _part_names(paths, counts, rows)))
    return out[0] if len(out) == 1 else pl.concat(out)


def _part_names(paths: Sequence[Path], counts: Sequence[int], rows: Any) -> Any:
    """Return the file names of the parts that hold ``rows`` (row numbers over ``paths``)."""
    import polars as pl

    at = np.searchsorted(np.cumsum(counts), rows.to_numpy(), side="right")
    return pl.Series("__part", [p.name for p in paths], pl.String).gather(at)


#: Stored rows of items parts read at a time when a batch is compared with the store.
_GROUP_ROWS = 1 << 19


def _part_groups(paths: Sequence[Path]) -> Iterator[tuple[list[Path], list[int]]]:
    """Yield the parts in order with their row counts, about :data:`_GROUP_ROWS` rows a group."""
    import pyarrow.parquet as pq

    group: list[Path] = []
    counts: list[int] = []
    for p in paths:
        group.append(p)
        counts.append(pq.read_metadata(p).num_rows)
        if sum(counts) >= _GROUP_ROWS:
            yield group, counts
            group, counts = [], []
    if group or not paths:
        yield group, counts


def _check_questions(st: Store, run_ids: list[str], joined: Any, *, replace: bool,
                     warnings: list[tuple[str, str]]) -> None:  # fmt: skip
    """Refuse (or, with ``replace``, list) records that reuse a stored key for another question.

    ``joined`` holds the new records' keys, ``digest`` and ``question`` beside the stored
    digest ``_old``. A record with the stored digest holds the stored question, so the stored
    questions are read only for the keys whose digest differs (none on an unchanged re-import).
    """
    import polars as pl

    key = ["run_id", "patient_id", "item_id"]
    suspects = joined.filter(
        pl.col("question").is_not_null() & pl.col("digest").ne_missing(pl.col("_old"))
    )
    if not suspects.height:
        return
    stored = (
        st._scan_paths("items", st.parts("items"))
        .filter(pl.col("run_id").is_in(run_ids))
        .join(suspects.select(key).unique().lazy(), on=key, how="semi", nulls_equal=True)
        .select(*key, pl.col("question").alias("_q"))
        .collect()
    )
    clash = (
        suspects.join(stored, on=key, how="inner", nulls_equal=True)
        .filter(pl.col("_q").is_not_null() & (pl.col("question") != pl.col("_q")))
        .unique(subset=key, maintain_order=True)
    )
    if not clash.height:
        return

    def short(text: str) -> str:
        one = " ".join(text.split())
        return one if len(one) <= 60 else one[:57] + "..."

    lines = [
        f"{r['source']}: run {r['run_id']!r}, item {r['item_id']!r}: stored question "
        f"{short(r['_q'])!r}, this record's {short(r['question'])!r}"
        for r in clash.head(SHOWN_WARNINGS).rows(named=True)
    ]
    more = clash.height - len(lines)
    if replace:
        warnings += [(ln.split(": run ", 1)[0], "replaced an item of another question: "
                      + ln.split(": ", 1)[1]) for ln in lines]  # fmt: skip
        if more:
            warnings.append(("(this import)", f"{more:,} more items of another question replaced"))
        return
    raise ItemConflictError(
        f"{clash.height:,} record(s) would replace stored items that hold another question "
        "(same run and item id); nothing was written. Give the records their own item ids, "
        "name what identifies an item with --item-key, or pass --replace to replace them:\n  "
        + "\n  ".join(lines)
        + (f"\n  ... and {more:,} more" if more else "")
    )


def _newest_source(sources: Sequence[str | None]) -> tuple[float, str] | None:
    """Return (timestamp, source) of the newest MTBBench log among stored item sources."""
    from .mtbbench import split_filename

    best: tuple[float, str] | None = None
    for s in set(sources):
        if s is None:
            continue
        try:
            _, ts = split_filename(Path(s).name)
        except MalformedLog:
            continue
        if ts is not None and (best is None or ts > best[0]):
            best = (float(ts), s)
    return best


#: The kept rows of a file none of whose items is kept.
_NO_ROWS = np.zeros(0, dtype=np.int64)


def _events_of(
    live: Sequence[_Entry], kept_rows: Mapping[int, np.ndarray]
) -> tuple[pa.Table, dict[int, int]]:
    """Return the events of the kept items and the count per file.

    ``kept_rows`` holds, per file with events, the rows of its items that are kept (ascending).
    A unit's file (MTBBench) is kept or dropped whole, so all its events go with it.
    """
    import pyarrow.compute as pc

    rows: list[dict[str, Any]] = []
    tables: list[pa.Table] = []
    counts: dict[int, int] = {}
    for e in live:
        p = e.parsed
        if p.events_table is not None:
            item_rows = np.ascontiguousarray(kept_rows.get(e.index, _NO_ROWS), dtype=np.int32)
            # from the buffer: pa.array() would import pandas (half a second) for its checks
            mine = pa.Array.from_buffers(
                pa.int32(), len(item_rows), [None, pa.py_buffer(item_rows)]
            )
            t = p.events_table.filter(pc.is_in(p.events_table.column("_row"), value_set=mine))
            tables.append(t.drop_columns(["_row"]))
            counts[e.index] = t.num_rows
            continue
        if p.unit is not None:
            kept = p.events
        else:
            mine_set = set(kept_rows.get(e.index, _NO_ROWS).tolist())
            kept = [ev for ev in p.events if ev["_row"] in mine_set]
        rows += kept
        counts[e.index] = len(kept)
    if tables:
        if rows:
            tables.append(_rows_table(rows, "events"))
        return pa.concat_tables(tables), counts
    return _rows_table(rows, "events"), counts


def _runs_of(st: Store, live: Sequence[_Entry], kept: Any) -> tuple[pa.Table, Any]:
    """Return the run rows to write and the runs they replace in the store.

    A run already stored with the same benchmark, track, model, tools and config is not
    written again; one stored with other values is replaced (MTBBench runs keep the earliest
    creation time).
    """
    import polars as pl

    wanted = set(kept.get_column("run_id").unique().to_list())
    runs: dict[str, dict[str, Any]] = {}
    for e in live:
        for r in e.parsed.runs:
            rid = r["run_id"]
            if rid not in wanted:
                continue
            prev = runs.get(rid)
            if prev is None:
                runs[rid] = dict(r)
            elif r.get("created_at") and (
                prev.get("created_at") is None or r["created_at"] < prev["created_at"]
            ):
                prev["created_at"] = r["created_at"]
    cols = ("benchmark", "track", "model", "tools", "config")
    existing = (
        st.runs().filter(pl.col("run_id").is_in(list(runs))).collect().rows(named=True)
        if runs
        else []
    )
    stored: dict[str, list[dict[str, Any]]] = {}
    for r in existing:
        stored.setdefault(r["run_id"], []).append(r)
    out: list[dict[str, Any]] = []
    replaced: list[str] = []
    for rid, r in runs.items():
        old = stored.get(rid)
        if not old:
            out.append(r)
            continue
        if all(o[c] == r.get(c) for o in old for c in cols):
            continue
        times = [t for t in [r.get("created_at"), *(o["created_at"] for o in old)] if t]
        r["created_at"] = min(times) if times else None
        out.append(r)
        replaced.append(rid)
    return _rows_table(out, "runs"), pl.DataFrame(
        {"run_id": replaced}, schema={"run_id": pl.String}
    )


def _swaps(
    st: Store, table: str, items: Any, units: Any, *, runs: Any = None
) -> list[tuple[Path, pa.Table]]:
    """Return (part, rows to keep) for every visible part of ``table`` with rows to hide.

    Hidden: rows of the ``items`` keys, rows of the (run_id, patient_id) ``units``, or (runs
    table) rows of the ``runs`` ids.
    """
    import polars as pl

    key = ["run_id", "patient_id", "item_id"]
    parts = st.parts(table)
    if not parts:
        return []
    if (
        runs is None
        and not (items is not None and items.height)
        and not (units is not None and units.height)
    ):
        return []
    names: set[str] = set()
    # the parts with rows to hide, a group of parts at a time (see _stored_rows)
    for paths, counts in _part_groups(parts):
        lf = st._scan_paths(table, paths).with_row_index("_r")
        hits = []
        if runs is not None:
            hits.append(lf.join(runs.lazy(), on="run_id", how="semi"))
        if items is not None and items.height:
            hits.append(lf.join(items.lazy(), on=key, how="semi", nulls_equal=True))
        if units is not None and units.height:
            hits.append(lf.join(units.lazy(), on=key[:2], how="semi", nulls_equal=True))
        rows = pl.concat([h.select("_r") for h in hits]).unique().collect().get_column("_r")
        if rows.len():
            names.update(_part_names(paths, counts, rows.sort()).unique().to_list())
    out = []
    by_name = {p.name: p for p in parts}
    for name in sorted(names):
        path = by_name[name]
        df = pl.read_parquet(path).with_row_index("__r")
        drop = []
        if runs is not None:
            drop.append(df.join(runs, on="run_id", how="semi"))
        if items is not None and items.height and "item_id" in df.columns:
            drop.append(df.join(items, on=key, how="semi", nulls_equal=True))
        if units is not None and units.height and "patient_id" in df.columns:
            drop.append(df.join(units, on=key[:2], how="semi", nulls_equal=True))
        gone = pl.concat([d.select("__r") for d in drop]).unique()
        kept = df.join(gone, on="__r", how="anti").sort("__r").drop("__r")
        out.append((path, conform(kept.to_arrow(), table)))
    return out
