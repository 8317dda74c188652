"""MedBench v4's per-unit values of each task metric, as [numerator, denominator] rows.

The metric definitions are those of :mod:`tumorboard.score.medbench` (Ding et al., "MedBench
v4", arXiv 2511.14439); :func:`per_item` computes them vectorised for the rows of one metric,
with the flag of the units that could not be graded (the coverage of :mod:`.report`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import polars as pl

from ..errors import InvalidArgumentError, InvalidTypeError
from ..text import box_iou, one_minus_ned
from ._validate import bool_column
from .judge import parse_judge_scores


def per_item(sub: pl.DataFrame, metric: str, where: str) -> pl.DataFrame:
    """Compute per-unit [num, den] (scores in [0, 1]) for the rows of one task metric.

    Returns the key columns, task, _row (first input row of the unit), _num, _den and _ungraded
    (the unit's grade or response is missing and it is scored as wrong / 0: a null ``correct``,
    ``pred_labels``, ``pred_box`` or ``prediction``, or a null key-point hit).
    """
    base = ["track", "model", "tools", "task", "dimension", "_row"]
    n = sub.height
    if metric == "accuracy":
        ok = bool_column(sub, "correct", where=where, null_as=False)
        return sub.select(base).with_columns(ok.cast(pl.Float64).alias("_num"),
                                             pl.lit(1.0).alias("_den"),
                                             sub.get_column("correct").is_null().alias("_ungraded"),
                                             )  # fmt: skip
    if metric == "strict_accuracy":
        ok = bool_column(sub, "correct", where=where, null_as=False)
        if sub.get_column("item_id").null_count():
            first = int(sub.filter(pl.col("item_id").is_null()).get_column("_row")[0])
            raise InvalidArgumentError(
                f"{where}: column 'item_id' has a missing value at row {first}"
            )
        return (
            sub.with_columns(ok.alias("_ok"), pl.col("correct").is_null().alias("_ungraded"))
            .group_by(
                ["track", "model", "tools", "task", "dimension", "item_id"], maintain_order=True
            )  # fmt: skip
            .agg(
                pl.col("_row").first(),
                pl.col("_ok").all().cast(pl.Float64).alias("_num"),
                pl.col("_ungraded").any(),
            )
            .with_columns(pl.lit(1.0).alias("_den"))
            .select(*base, "_num", "_den", "_ungraded")
        )
    if metric == "micro_f1":
        for col in ("pred_labels", "gold_labels"):
            dt = sub.schema[col]
            if not (isinstance(dt, pl.List) and dt.inner in (pl.String, pl.Null)):
                raise InvalidTypeError(f"{where}: column {col!r}: expected list[str], got {dt}")
        if sub.get_column("gold_labels").null_count():
            first = int(sub.filter(pl.col("gold_labels").is_null()).get_column("_row")[0])
            raise InvalidArgumentError(
                f"{where}: column 'gold_labels' has a missing value at row {first}"
            )
        p = pl.col("pred_labels").fill_null(pl.lit([], dtype=pl.List(pl.String))).list.unique()
        g = pl.col("gold_labels").list.unique()
        tp = p.list.set_intersection(g).list.len().cast(pl.Float64)
        fp = p.list.set_difference(g).list.len().cast(pl.Float64)
        fn = g.list.set_difference(p).list.len().cast(pl.Float64)
        return sub.select(*base, (2.0 * tp).alias("_num"), (2.0 * tp + fp + fn).alias("_den"),
                          pl.col("pred_labels").is_null().alias("_ungraded"))  # fmt: skip
    if metric == "keypoint_recall":
        dt = sub.schema["keypoint_hits"]
        if not (isinstance(dt, pl.List) and dt.inner in (pl.Boolean, pl.Null)):
            raise InvalidTypeError(
                f"{where}: column 'keypoint_hits': expected list[bool], got {dt}"
            )
        length = sub.get_column("keypoint_hits").list.len().fill_null(0)
        if (length == 0).any():
            first = int(sub.get_column("_row")[int((length == 0).arg_true()[0])])
            raise InvalidArgumentError(
                f"{where}: keypoint_hits at row {first} is missing or empty; an item needs at "
                "least one key point"
            )
        hits = pl.col("keypoint_hits").list.eval(pl.element().fill_null(False)).list.sum()
        missing = pl.col("keypoint_hits").list.eval(pl.element().is_null()).list.any()
        return sub.select(*base, (hits / pl.col("keypoint_hits").list.len()).alias("_num"),
                          pl.lit(1.0).alias("_den"), missing.alias("_ungraded"))  # fmt: skip
    if metric == "iou":
        gold_s = sub.get_column("gold_box")
        if gold_s.null_count():
            first = int(sub.filter(pl.col("gold_box").is_null()).get_column("_row")[0])
            raise InvalidArgumentError(
                f"{where}: column 'gold_box' has a missing value at row {first}"
            )
        gold = boxes(gold_s, "gold_box", where)
        pred_s = sub.get_column("pred_box")
        has_pred = pred_s.is_not_null().to_numpy()
        values = np.zeros(n, dtype=np.float64)
        if has_pred.any():
            pred = boxes(pred_s.filter(pred_s.is_not_null()), "pred_box", where)
            values[has_pred] = box_iou(pred, gold[has_pred])
        return sub.select(base).with_columns(
            pl.Series("_num", values), pl.lit(1.0).alias("_den"),
            pl.Series("_ungraded", ~has_pred, dtype=pl.Boolean),
        )  # fmt: skip
    if metric == "one_minus_ned":
        for col in ("prediction", "reference"):
            if sub.schema[col] not in (pl.String, pl.Null):
                raise InvalidTypeError(
                    f"{where}: column {col!r}: expected strings, got {sub.schema[col]}"
                )
        if sub.get_column("reference").null_count():
            first = int(sub.filter(pl.col("reference").is_null()).get_column("_row")[0])
            raise InvalidArgumentError(
                f"{where}: column 'reference' has a missing value at row {first}"
            )
        preds = sub.get_column("prediction").cast(pl.String).fill_null("").to_list()
        refs = sub.get_column("reference").cast(pl.String).to_list()
        values = one_minus_ned(preds, refs) if n else np.zeros(0)
        return sub.select(base).with_columns(pl.Series("_num", values, dtype=pl.Float64),
                                             pl.lit(1.0).alias("_den"),
                                             sub.get_column("prediction").is_null().alias("_ungraded"),
                                             )  # fmt: skip
    if metric == "judge":
        if sub.schema["judge_output"] not in (pl.String, pl.Null):
            raise InvalidTypeError(
                f"{where}: column 'judge_output': expected the judge replies as strings, got "
                f"{sub.schema['judge_output']}"
            )
        ids = sub.get_column("_row")
        scores = parse_judge_scores(sub.get_column("judge_output").cast(pl.String),
                                    ids=[f"row {i}" for i in ids.to_list()])  # fmt: skip
        return sub.select(base).with_columns(
            pl.Series("_num", scores / 5.0, dtype=pl.Float64), pl.lit(1.0).alias("_den"),
            pl.lit(False).alias("_ungraded"),
        )  # fmt: skip
    if metric == "score":
        s = sub.get_column("score")
        if not s.dtype.is_numeric():
            raise InvalidTypeError(f"{where}: column 'score': expected numeric, got {s.dtype}")
        v = s.cast(pl.Float64)
        bad = v.is_null() | v.is_nan() | (v < 0) | (v > 1)
        if bad.any():
            i = int(bad.arg_true()[0])
            raise InvalidArgumentError(
                f"{where}: column 'score': expected values in [0, 1], got {v[i]} at row "
                f"{sub['_row'][i]}"
            )
        return sub.select(base).with_columns(
            v.alias("_num"), pl.lit(1.0).alias("_den"), pl.lit(False).alias("_ungraded")
        )
    raise AssertionError(metric)  # pragma: no cover - validated by the caller


def boxes(s: pl.Series, col: str, where: str) -> npt.NDArray[np.float64]:
    """Return a column of list[f64] boxes (x1, y1, x2, y2) as an (n, 4) float64 array."""
    if isinstance(s.dtype, pl.Array):
        s = s.arr.to_list()
    if not (isinstance(s.dtype, pl.List) and s.dtype.inner.is_numeric()):
        raise InvalidTypeError(f"{where}: column {col!r}: expected list[f64] boxes "
                               f"(x1, y1, x2, y2), got {s.dtype}")  # fmt: skip
    lens = s.list.len()
    if (lens != 4).any():
        i = int((lens != 4).arg_true()[0])
        raise InvalidArgumentError(
            f"{where}: column {col!r} has a box with {lens[i]} numbers; expected 4"
        )
    arr = np.asarray(s.to_list(), dtype=np.float64).reshape(-1, 4)
    return arr
