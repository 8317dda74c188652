"""Scorer of inspect_ai evaluations: every scorer's mean per task and model, with bootstrap CIs.

inspect_ai (UK AI Security Institute, https://inspect.aisi.org.uk) scores each sample with one
or more scorers and summarises them with metrics such as ``accuracy()`` and ``mean()``: the
mean of the score values as floats (``value_to_float``: C=1, I=0, P=0.5, N=0, numbers as they
are) over samples, after each sample's epochs were reduced to their mean (inspect's default
epoch reducer, ``mean_score()``); samples that ended in an error carry no score and are left
out. This scorer computes the same estimates from a trajectory store (``tumorboard import
inspect``), and adds what inspect's ``stderr()`` cannot give: bootstrap intervals, percentile,
basic or BCa, optionally resampling whole clusters (e.g. patients, ``cluster="patient_id"``),
the right interval when samples are nested in patients (Field & Welsh 2007, "Bootstrapping
clustered data", JRSS-B 69(3)).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import polars as pl

from .._typing import Frame
from ..errors import InvalidArgumentError, InvalidTypeError
from ..stats import BootstrapOptions
from . import _store, _validate
from ._coverage import with_coverage
from ._summary import KEY_COLUMNS, summarize_frame
from ._validate import string_column
from .report import Report, interval_note, interval_text, sort_table

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ..traj import Store

__all__ = ["score"]

REQUIRED = ("model", "task", "scorer", "value")
OPTIONAL = ("track", "tools", "patient_id", "sample_id", "run_id")
_CLUSTER_ALIASES = {"patient": "patient_id"}


def score(
    df: Frame | Store | str | os.PathLike[str],
    *,
    options: BootstrapOptions | None = None,
    cluster: str | None = None,
    convention: str | None = None,
    interval: str = "bootstrap",
) -> Report:
    """Score inspect_ai evaluations: each scorer's mean per (track, model, tools, task) with CIs.

    Parameters
    ----------
    df : polars DataFrame or LazyFrame, pyarrow Table, or a trajectory Store
        One row per (sample epoch, scorer). Required columns:

        * ``model`` (str), ``task`` (str): the inspect model and task;
        * ``scorer`` (str): the scorer's name; one metric row per scorer;
        * ``value`` (float): the score value as a number (null: the epoch has no score of this
          scorer, e.g. the sample errored; left out).

        Optional columns: ``track``, ``tools`` (defaults "default" and False), ``patient_id``
        (for ``cluster="patient_id"``), ``sample_id`` (with ``run_id``: the rows of one sample
        whose epochs are averaged first; default: every row is a sample). A
        :class:`~tumorboard.traj.Store` is read with :func:`~tumorboard.score.store_frame`:
        the items of its "inspect" runs, one row per stored scorer value
        (``items.extra.scorers`` / ``score_values``).
    options : BootstrapOptions, optional
        The bootstrap (default: 1000 resamples, 95% percentile interval, seed 0).
    cluster : str, optional
        None resamples samples; "patient_id" (alias "patient") resamples patients with all
        their samples; any other column name is used as given.
    convention : {"paper"}, optional
        inspect_ai's own reduction (a sample's epochs averaged, then the mean over samples, as
        its ``accuracy()``/``mean()`` report); the only one, accepted for the one switch across
        scorers (``tumorboard score --convention``).

    interval : {"bootstrap", "wilson", "agresti_coull", "clopper_pearson", "normal", "cr1", \
"wilson_deff"}, default "bootstrap"
        The interval of ``ci_low``/``ci_high``/``pm``: the bootstrap's, or a closed-form
        proportion interval (:func:`tumorboard.stats.proportion_interval`; "cr1" and
        "wilson_deff" on the ``cluster`` column, which they need) on the per-group rows of the
        0/1 metrics (every value 0 or 1, e.g. inspect's accuracy() of C/I
        scores); other metrics keep the bootstrap, and the column ``interval`` names each row's
        (:func:`tumorboard.score.summarize`).

    Returns
    -------
    Report
        Benchmark "inspect"; ``metric`` is the scorer's name, ``estimate`` the mean of the
        sample values (epochs averaged first), as inspect's ``accuracy()``/``mean()`` report
        it; ``n`` counts samples. The table also has ``n_epochs`` (scored epochs),
        ``n_unscored`` (epochs without a value, left out) and the coverage columns
        ``n_graded``, ``n_ungraded`` and ``n_missing`` (int64; definitions in
        :mod:`tumorboard.score.report`). What "graded" means here: a sample is graded by a
        scorer when at least one of its epochs has a value of that scorer; a sample without
        any (it errored, or was not scored) is left out, as inspect_ai leaves it out, and is
        ungraded, so ``n_graded`` = ``n``. ``n_missing`` is null: the scorer input has no
        response column.

    Raises
    ------
    InvalidArgumentError
        A required or cluster column is missing, or no row has a value.
    InvalidTypeError
        A column has the wrong type.
    """
    where = "inspect"
    _validate.convention(convention, allowed=("paper",), default="paper", where=where)
    opts = BootstrapOptions.resolve(options)
    df = _store.resolve(df, "inspect")
    cluster_col = _CLUSTER_ALIASES.get(cluster, cluster) if isinstance(cluster, str) else cluster
    interval = _validate.interval(interval, cluster=cluster_col, where=where)
    frame = _validate.input_frame(df, required=REQUIRED, optional=OPTIONAL, where=where,
                                  cluster=cluster_col, overall=False)  # fmt: skip
    cols = [
        frame.get_column("track"),
        string_column(frame, "model", where=where),
        frame.get_column("tools"),
        string_column(frame, "task", where=where),
        string_column(frame, "scorer", where=where),
        _validate_value(frame, where),
    ]
    n = frame.height
    row = pl.int_range(pl.len(), dtype=pl.Int64).cast(pl.String)
    if "sample_id" in frame.columns:
        has_run = "run_id" in frame.columns
        run = pl.col("run_id").cast(pl.String).fill_null("") if has_run else pl.lit("")
        sample = pl.concat_str([run, pl.col("sample_id").cast(pl.String)], separator="\x1f")
    else:
        sample = row
    cols.append(frame.select(sample.fill_null(row).alias("__sample")).to_series())
    if cluster_col is not None:
        cols.append(frame.get_column(cluster_col).cast(pl.String).alias("__cluster"))
    base = pl.DataFrame(cols)
    keys = [*KEY_COLUMNS, "scorer", "__sample"]
    unscored = base.filter(pl.col("value").is_null()).group_by(*KEY_COLUMNS, "scorer").len()
    # a sample is graded by a scorer when one of its epochs has a value; otherwise left out
    samples = base.group_by(keys).agg(pl.col("value").is_null().all().alias("__ungraded"))
    reduced = (
        base.filter(pl.col("value").is_not_null())
        .group_by(keys, maintain_order=True)
        .agg(
            pl.col("value").mean(),
            pl.len().alias("__epochs"),
            *([pl.col("__cluster").first()] if cluster_col is not None else []),
        )
    )
    if reduced.height == 0:
        raise InvalidArgumentError(
            f"{where}: none of the {n} rows has a score value (every sample unscored)"
        )
    parts = []
    for name in reduced.get_column("scorer").unique(maintain_order=True).to_list():
        sub = reduced.filter(pl.col("scorer") == name)
        t = summarize_frame(
            sub, value="value", benchmark="inspect", metric=name, group_cols=KEY_COLUMNS,
            cluster="__cluster" if cluster_col is not None else None, options=opts,
            overall=False, interval=interval,
        )  # fmt: skip
        counts = (
            sub.group_by(*KEY_COLUMNS).agg(pl.col("__epochs").sum().alias("n_epochs"))
            .join(unscored.filter(pl.col("scorer") == name).drop("scorer")
                  .rename({"len": "n_unscored"}), on=list(KEY_COLUMNS), how="left")
        )  # fmt: skip
        t = t.join(counts, on=list(KEY_COLUMNS), how="left", maintain_order="left")
        t = t.with_columns(
            pl.col("n_epochs").cast(pl.Int64),
            pl.col("n_unscored").fill_null(0).cast(pl.Int64),
        )
        mine = samples.filter(pl.col("scorer") == name).with_columns(
            pl.lit(False).alias("__in_n")  # the ungraded samples are not in n
        )
        parts.append(with_coverage(t, mine, KEY_COLUMNS, ungraded="__ungraded", missing=None,
                                   counted="__in_n"))  # fmt: skip
    table = sort_table(pl.concat(parts, how="vertical"))
    n_unscored = int(base.get_column("value").null_count())
    notes = [
        "estimate: mean of each scorer's values per sample (C=1, I=0, P=0.5, N=0; the epochs "
        "of a sample averaged first), as inspect_ai's accuracy()/mean(); n counts samples; "
        f"boot_mean, ci_low, ci_high: mean and {opts.level:g} {opts.method} interval of "
        f"{opts.n_resamples} bootstrap resamples (seed {opts.seed}); pm = (ci_high - ci_low) / 2.",
    ]
    if n_unscored:
        notes.append(
            f"{n_unscored} of {n} (epoch, scorer) rows have no score value (errored or "
            "unscored samples) and are left out, as inspect_ai leaves them out; n_unscored "
            "counts them per row."
        )
    if cluster_col is not None:
        notes.append(f"intervals resample whole clusters of column {cluster_col!r}.")
    if interval != "bootstrap":
        notes.append(interval_note(interval, opts))
    return Report(table, benchmark="inspect", title="inspect_ai evaluation", notes=tuple(notes),
                  percent=(), interval=interval_text(opts, interval=interval),
                  convention="paper (inspect_ai's reduction: epochs averaged per sample, then "
                  "the mean over samples)")  # fmt: skip


def _validate_value(frame: pl.DataFrame, where: str) -> pl.Series:
    """Return the ``value`` column as Float64 (nulls kept), refusing other types and NaN."""
    s = frame.get_column("value")
    # all null (every epoch unscored) has polars' Null dtype: no type to refuse, and score()
    # then says that no row has a value
    if s.dtype == pl.Null or s.dtype == pl.Boolean or s.dtype.is_numeric():
        s = s.cast(pl.Float64)
    else:
        raise InvalidTypeError(f"{where}: column 'value': expected numeric, got {s.dtype}")
    if s.is_nan().any() or s.is_infinite().any():
        raise InvalidArgumentError(
            f"{where}: column 'value' has NaN or infinite values; use null for unscored rows"
        )
    return s.alias("value")
