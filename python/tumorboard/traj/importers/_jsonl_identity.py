"""JSON-lines importer: the identity of a record without an item id, made from its content.

The id is ``q`` and 16 hex digits of a stable 64-bit hash of the record's task, patient id and
question, or of the values of its ``--item-key`` keys (``ImportOptions.item_key``); records of
one run that share them get ``.1``, ``.2``, ... in the order of their lines' digests, so that
the same records in another order get the same ids. A record with nothing that identifies it
is rejected.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..._json import json_text
from ._common import ImportOptions
from ._jsonl_fields import _key_field

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ._jsonl_rows import _State

_NO_IDENTITY = (
    "nothing identifies the item: no item id and no question (map the id with --map "
    "item_id=KEY, or name the keys that identify an item with --item-key KEY[,KEY...])"
)
#: The prefix of item ids made from content (a record without an item id).
CONTENT_ID_PREFIX = "q"


def _identities(df: Any, objects: Mapping[str, list[Any]], opts: ImportOptions) -> Any:
    """Add ``_idh``, the hash of what identifies each row without an item id; drop the others.

    With ``opts.item_key`` it hashes the JSON text of those record keys' values; else the
    task, the patient id and the question, each hashed by :func:`tumorboard._keys.hash_labels`
    and combined in that order (a record of neither kind is dropped). ``_idh`` is null on rows
    that have an item id. Returns the frame and the line numbers of the rows dropped.
    """
    import polars as pl

    from ..._keys import combine_hashes, hash_labels

    def col(name: str) -> pl.Series:
        if name in df.columns:
            return df.get_column(name).cast(pl.String)
        return pl.Series(name, [None] * df.height, dtype=pl.String)

    item_id = col("item_id")
    need = item_id.is_null() | (item_id == "")
    if not need.any():  # every row has its item id: nothing to hash
        return df.with_columns(pl.lit(None, dtype=pl.UInt64).alias("_idh")), []
    if opts.item_key:
        index = df.get_column("_i").to_list()
        values = [objects.get(_key_field(k)) or [None] * (max(index, default=-1) + 1)
                  for k in opts.item_key]  # fmt: skip
        idents = []
        for i in index:
            parts = [v[i] for v in values]
            idents.append(
                None if all(p is None for p in parts) else "\x1f".join(json_text(p) for p in parts)
            )
        text = pl.Series("_ident", idents, dtype=pl.String)
        has = text.is_not_null()
        hashes = hash_labels(text.fill_null(""))
    else:
        question = col("question")
        has = question.is_not_null() & (question != "")
        parts = [col("task").fill_null("default"), col("patient_id").fill_null(""),
                 question.fill_null("")]  # fmt: skip
        hashes = combine_hashes([hash_labels(p) for p in parts])
    idh = pl.Series("_idh", hashes, dtype=pl.UInt64)
    df = df.with_columns(pl.when(need & has).then(idh).otherwise(None).alias("_idh"))
    lost = need & ~has
    dropped = df.filter(lost).get_column("_line").to_list() if lost.any() else []
    return (df.filter(~lost) if dropped else df), dropped


def _content_item_ids(df: Any, texts: Sequence[bytes], state: _State) -> Any:
    """Give each row without an item id one made from its content (``_idh``).

    The id is ``q`` and 16 hex digits of the stable 64-bit hash :func:`_identities` made (FNV-1a
    and SplitMix64 in the compiled core, :func:`tumorboard._keys.hash_labels`: fixed forever);
    records of one run with the same identifying values get ``.1``, ``.2``, ... in the order of
    their lines' digests, so that the same records in another order get the same ids. All of
    it runs in bulk; only the lines of such repeated records are digested one by one.
    """
    import polars as pl

    old = pl.col("item_id").cast(pl.String) if "item_id" in df.columns else pl.lit(None, pl.String)
    mask = df.get_column("_idh").is_not_null()
    n_need = int(mask.sum())
    if n_need == 0:
        return df.with_columns(old.alias("item_id"))
    every = n_need == df.height
    sub = df.select("run_id", "_idh") if every else df.filter(mask).select("run_id", "_idh")
    hashes = sub.get_column("_idh").to_numpy()
    key = ["run_id", "_h"]
    sub = sub.select("run_id", pl.col("_idh").alias("_h")).with_row_index("_r")
    counts = pl.len().over(key).alias("_n")
    sub = sub.with_columns(counts, pl.lit(0, dtype=pl.Int64).alias("_occ"))
    shared = sub.filter(pl.col("_n") > 1)
    if shared.height:
        rows = shared.get_column("_r").to_list()
        lines = texts if every else [texts[i] for i in mask.arg_true().to_list()]
        digests = [int.from_bytes(hashlib.blake2b(lines[r], digest_size=8).digest(), "big")
                   for r in rows]  # fmt: skip
        occ = shared.with_columns(pl.Series("_lh", digests, dtype=pl.UInt64)).select(
            "_r", (pl.col("_lh").rank("ordinal").over(key) - 1).cast(pl.Int64).alias("_o")
        )
        sub = sub.join(occ, on="_r", how="left", maintain_order="left").with_columns(
            pl.col("_o").fill_null(0).alias("_occ")
        )
        state.n_shared += shared.height
    sizes = sub.group_by(key).agg(pl.len().cast(pl.Int64).alias("n"))
    if state.occurrences is not None:  # a later chunk: continue each text's count
        sub = sub.join(state.occurrences, on=key, how="left", maintain_order="left").with_columns(
            (pl.col("_occ") + pl.col("n").fill_null(0)).alias("_occ")
        )
        sizes = pl.concat([state.occurrences, sizes]).group_by(key).agg(pl.col("n").sum())
    state.occurrences = sizes
    hexed = _hex64(hashes)
    suffix = (
        pl.when(pl.col("_occ") > 0).then(pl.format(".{}", pl.col("_occ"))).otherwise(pl.lit(""))
    )
    ids = sub.select(pl.concat_str([pl.lit(CONTENT_ID_PREFIX), hexed, suffix])).to_series()
    if every:
        return df.with_columns(ids.alias("item_id"))
    full = df.select(old).to_series().scatter(mask.arg_true(), ids)
    return df.with_columns(full.alias("item_id"))


def _hex64(values: Any) -> Any:
    """Return 64-bit integers as 16-digit lower-case hex strings, in bulk (a polars literal)."""
    import numpy as np
    import polars as pl
    import pyarrow as pa

    big = np.ascontiguousarray(np.asarray(values, dtype=np.uint64).astype(">u8"))
    arr = pa.FixedSizeBinaryArray.from_buffers(pa.binary(8), len(big), [None, pa.py_buffer(big)])
    series = pl.from_arrow(arr).cast(pl.Binary).bin.encode("hex")
    return pl.lit(series)
