"""The coverage columns of every report row: ``n_graded``, ``n_ungraded`` and ``n_missing``.

The definitions are those of :mod:`tumorboard.score.report` (its table schema), stated once
there; this module computes them from per-item flags so that every scorer counts the same way:

* an item is *ungraded* for a metric when its value could not be computed from what it records
  (no readable answer, no response to compare, no tool or file record, no judge score); the
  scorer either counts it as wrong / 0 (it is then one of the row's ``n`` items) or leaves it out
  (it is not);
* ``n_ungraded`` counts the ungraded items of the row's group in either case;
* ``n_graded`` = ``n`` minus the ungraded items counted in ``n``: ``n - n_ungraded`` where the
  scorer counts them, ``n`` where it leaves them out;
* ``n_missing`` counts the ungraded items that have no response at all (null or blank), a part
  of ``n_ungraded``; null when the input has no response column.

Overall and other aggregate rows carry the sums over their tasks (the rule of MTBBench's
accuracy rows, Vasilev et al. 2025, whose "Overall" pools the task questions).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from .report import COVERAGE_COLUMNS, OVERALL

__all__ = ["COVERAGE_COLUMNS", "Grouping", "coverage_counts", "no_response", "with_coverage"]

#: The joint codes of a frame's group columns as :func:`tumorboard._keys.factorize` gives them:
#: each row's group code, the key values of each group, the number of groups.
Grouping = tuple[np.ndarray, dict[str, np.ndarray], int]


def no_response(frame: pl.DataFrame, column: str = "response") -> pl.Expr | None:
    """Return the flag "no response at all" (null or blank text), or None without the column.

    Parameters
    ----------
    frame : polars.DataFrame
        The scorer's frame.
    column : str, default "response"
        The response column (a string column; a list column counts an empty list as none).

    Returns
    -------
    polars.Expr or None
        A Boolean expression, or None when ``frame`` has no such column.
    """
    if column not in frame.columns:
        return None
    dtype = frame.schema[column]
    col = pl.col(column)
    if isinstance(dtype, pl.List):
        return col.is_null() | (col.list.len() == 0)
    if dtype == pl.String:
        return col.is_null() | (col.str.strip_chars() == "")
    return col.is_null()


def coverage_counts(
    frame: pl.DataFrame,
    group_cols: Sequence[str],
    *,
    ungraded: str | None,
    missing: str | None,
    counted: str | None = None,
    overall: bool = True,
    grouping: Grouping | None = None,
) -> pl.DataFrame:
    """Count the ungraded, missing and counted-ungraded items of ``frame`` per group.

    Parameters
    ----------
    frame : polars.DataFrame
        The items of one metric (those in ``n`` and those left out as ungraded).
    group_cols : sequence of str
        The group columns of the rows (with ``task``: also one "overall" row per group of the
        other columns, holding the sums over its tasks, when ``overall``).
    ungraded : str, optional
        The Boolean column flagging the ungraded items; None: every item is graded.
    missing : str, optional
        The Boolean column flagging the items without any response; None: unknown (null).
    counted : str, optional
        The Boolean column flagging the items in ``n`` (default: all of them).
    overall : bool, default True
        Add the "overall" rows when ``task`` is a group column.
    grouping : Grouping, optional
        The joint codes of ``group_cols`` over the rows of ``frame``, when the caller has them
        (:func:`tumorboard._keys.factorize`): the counts are then integer bincounts, the same
        numbers as the polars group-by without hashing the keys again.

    Returns
    -------
    polars.DataFrame
        The group columns, ``n_ungraded``, ``n_missing`` and ``_ug_in_n`` (the ungraded items in
        ``n``), all Int64.
    """
    keys = list(group_cols)
    ug = pl.col(ungraded).fill_null(False) if ungraded is not None else pl.lit(False)
    inn = pl.col(counted).fill_null(False) if counted is not None else pl.lit(True)
    miss = (
        (ug & pl.col(missing).fill_null(False)).sum().cast(pl.Int64)
        if missing is not None
        else pl.lit(None, dtype=pl.Int64)
    )
    if grouping is not None:
        flags = frame.select(ug.alias("ug"), inn.alias("inn"),
                             (pl.col(missing).fill_null(False) if missing is not None
                              else pl.lit(False)).alias("miss"))  # fmt: skip
        ugv, innv, missv = (flags.get_column(c).to_numpy() for c in ("ug", "inn", "miss"))
        counts = group_counts(
            frame, keys, grouping,
            {"n_ungraded": ugv, "n_missing": ugv & missv, "_ug_in_n": ugv & innv},
        )  # fmt: skip
        if missing is None:
            counts = counts.with_columns(pl.lit(None, dtype=pl.Int64).alias("n_missing"))
    else:
        counts = frame.group_by(keys).agg(
            ug.sum().cast(pl.Int64).alias("n_ungraded"),
            miss.alias("n_missing"),
            (ug & inn).sum().cast(pl.Int64).alias("_ug_in_n"),
        )
    if not overall or "task" not in keys:
        return counts
    sums = ("n_ungraded", "n_missing", "_ug_in_n")
    over = (
        counts.group_by([k for k in keys if k != "task"])
        .agg(
            pl.col(c).sum()
            if c != "n_missing" or missing is not None
            else pl.lit(None, dtype=pl.Int64).alias(c)
            for c in sums
        )  # fmt: skip
        .with_columns(pl.lit(OVERALL).alias("task"))
        .select(*keys, *sums)
    )
    return pl.concat([counts, over], how="vertical")


def group_counts(
    frame: pl.DataFrame,
    group_cols: Sequence[str],
    grouping: Grouping,
    flags: dict[str, np.ndarray],
) -> pl.DataFrame:
    """Count the rows of each group where each Boolean flag is set, by integer bincounts.

    Parameters
    ----------
    frame : polars.DataFrame
        The rows (it gives the key columns' types).
    group_cols : sequence of str
        The group columns, in the order of ``grouping``'s keys.
    grouping : Grouping
        The joint codes of ``group_cols`` over the rows.
    flags : dict of str to numpy.ndarray
        Output column name -> one Boolean per row.

    Returns
    -------
    polars.DataFrame
        One row per group: the key columns (typed as in ``frame``), then one Int64 count per
        flag.
    """
    codes, key_values, n_groups = grouping
    cols = [pl.Series(c, key_values[c], dtype=frame.schema[c]) for c in group_cols]
    for name, flag in flags.items():
        hits = np.bincount(codes[np.asarray(flag, dtype=bool)], minlength=n_groups)
        cols.append(pl.Series(name, hits.astype(np.int64, copy=False), dtype=pl.Int64))
    return pl.DataFrame(cols)


def with_coverage(
    part: pl.DataFrame,
    frame: pl.DataFrame,
    group_cols: Sequence[str],
    *,
    ungraded: str | None,
    missing: str | None,
    counted: str | None = None,
    grouping: Grouping | None = None,
) -> pl.DataFrame:
    """Append ``n_graded``, ``n_ungraded`` and ``n_missing`` to one metric's report rows.

    Parameters
    ----------
    part : polars.DataFrame
        The metric's report rows (with ``n`` and the group columns).
    frame : polars.DataFrame
        The metric's items (:func:`coverage_counts`).
    group_cols : sequence of str
        The group columns of the rows.
    ungraded, missing, counted : str, optional
        As in :func:`coverage_counts`.
    grouping : Grouping, optional
        As in :func:`coverage_counts`.

    Returns
    -------
    polars.DataFrame
        ``part`` with the three columns (Int64) appended; ``n_missing`` null where ``missing``
        is None.
    """
    keys = list(group_cols)
    counts = coverage_counts(frame, keys, ungraded=ungraded, missing=missing, counted=counted,
                             grouping=grouping)  # fmt: skip
    part = part.drop([c for c in (*COVERAGE_COLUMNS, "_ug_in_n") if c in part.columns])
    out = part.join(counts, on=keys, how="left", nulls_equal=True, maintain_order="left")
    out = out.with_columns(
        pl.col("n_ungraded").fill_null(0),
        pl.col("_ug_in_n").fill_null(0),
        (pl.col("n_missing").fill_null(0) if missing is not None else pl.col("n_missing")),
    )
    return out.with_columns(
        (pl.col("n") - pl.col("_ug_in_n")).cast(pl.Int64).alias("n_graded")
    ).select(*(c for c in part.columns), *COVERAGE_COLUMNS)
