"""Scorer inputs read from a trajectory store: one builder per benchmark.

Every scorer takes a frame with its documented columns; :func:`store_frame` builds that frame
from a :class:`~tumorboard.traj.Store` (its items joined with their runs, their events, and the
benchmark fields in ``items.extra``), so ``mtbbench.score(store)``, ``score.get(name)(store)``
and ``tumorboard score STORE --benchmark NAME`` score what ``tumorboard import`` or a
``Recorder`` wrote. Where each column comes from (also in docs/trajectory-schema.md):

* every benchmark: ``model``, ``track``, ``tools`` from the run; ``task`` and ``patient_id``
  from the item.
* mtbbench: ``correct``, ``files_accessed``, ``files_hallucinated``, ``response`` (items
  columns).
* radabench: ``gt_tools`` and the optional fields (``plan_tools``, ``milestone``, ...) from
  ``extra``; ``called_tools`` from ``extra``, else the ``tool`` of the item's ``tool_call`` and
  ``action`` events in step order (an empty chain for an item of a run that recorded events,
  null, "no tool record", for one of a run without any); ``completed`` from ``extra``, else,
  for runs that recorded events, no ``tool_call``/``observation`` event of the item failed
  (``ok`` false);
  ``response`` from the item; ``reference_answer`` from ``extra``, else ``gold_text``, else
  ``gold``.
* lammi: ``tool_calls`` from ``extra``, else one call per ``tool_call`` event (name = tool,
  success = ok) and per ``action`` event with a tool (success = ok of the observation that
  follows it; no call for an item of a run that recorded events, null, "no tool record", for
  one of a run without any); ``response`` from the item; ``output_valid`` from ``extra``,
  else a non-empty response whose answer letter was read when the question has options;
  ``mc_prediction`` = ``parsed_answer`` and ``mc_answer`` = ``gold`` where the gold is an
  option letter; ``expected_tools``, ``answer_consistency`` and ``hallucination`` from
  ``extra``.
* medinsight: ``case_id`` = ``patient_id/item_id``; ``gt_insights``, ``score_matrix`` and the
  judge lists from ``extra``; ``insights`` from ``extra``, else the response's non-empty lines
  (list markers removed).
* medbench: ``dimension``, ``metric`` and the metric's fields from ``extra``; ``correct`` from
  the item; ``item_id`` = ``extra.item_group`` (option-shuffled instances of one item), else
  the item id; ``prediction`` = response; ``reference`` = ``gold_text``, else ``gold``.
* inspect: one row per (item, scorer) from ``extra.scorers`` and ``extra.score_values``
  (``tumorboard import inspect`` writes them); ``sample_id`` from ``extra``; an item without
  scores (an errored sample) gives a null value for each scorer of its run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import polars as pl

from ..errors import InvalidArgumentError
from ..traj import BENCHMARK_FIELDS, Store
from ..traj.fields import polars_dtype

__all__ = ["store_frame"]

_KEY = ["run_id", "patient_id", "item_id"]
_COMMON = ["track", "model", "tools", "task", "patient_id"]


def is_store(df: Any) -> bool:
    """Tell whether ``df`` is a trajectory Store or a path (a scorer then reads a store).

    Parameters
    ----------
    df : Any
        A scorer's input.

    Returns
    -------
    bool
        True for a Store, a str or an os.PathLike.
    """
    return isinstance(df, (Store, str, os.PathLike))


def store_frame(
    store: Store | str | os.PathLike[str],
    benchmark: str,
    *,
    tracks: Sequence[str] | None = None,
) -> pl.DataFrame:
    """Return the input frame of ``benchmark``'s scorer, read from a trajectory store.

    Parameters
    ----------
    store : Store, str or os.PathLike
        The store or its directory (must exist).
    benchmark : str
        A scorer name (``tumorboard.score.benchmarks()``); the items of runs of this benchmark
        are read.
    tracks : sequence of str, optional
        Only these tracks.

    Returns
    -------
    polars.DataFrame
        One row per item with the columns the scorer reads (module docstring).

    Raises
    ------
    InvalidArgumentError
        An unknown benchmark, no items of ``benchmark`` (the message lists the benchmarks the
        store has), none left in ``tracks``, or an item lacking a field the scorer needs.
    MissingFileError
        No store at the path.
    CorruptStoreError
        A part read is missing or damaged (a page that fails its checksum, a file polars
        cannot decode); the message names it. A part that a concurrent compaction removes is
        no error: the read is made again from the new manifest (``Store.read``).
    """
    if benchmark not in _BUILDERS:
        raise InvalidArgumentError(
            f"benchmark: expected one of {sorted(_BUILDERS)}, got {benchmark!r}"
        )
    st = store if isinstance(store, Store) else Store(store, create=False)
    return st.read(lambda s: _frame(s, benchmark, tracks))


def _frame(st: Store, benchmark: str, tracks: Sequence[str] | None) -> pl.DataFrame:
    """Build :func:`store_frame`'s frame from one state of the store (run by ``Store.read``)."""
    st.verify(("runs", "items"))
    items = st.items(with_runs=True)
    # the runs table is small: a benchmark no run has cannot have items (the items' own check,
    # a join of every item, runs only to word the error)
    runs = st.scan("runs").select(pl.col("benchmark").unique()).collect().get_column("benchmark")
    if benchmark not in runs.to_list():
        raise _no_items(st, items, benchmark)
    # as items.filter(benchmark == ...), but the runs are filtered before the join, an inner
    # join of the same rows in the same order (a left join then a filter of every item costs
    # more than the read of a large store's columns)
    runs_of = (
        st.scan("runs")
        .select("run_id", "benchmark", "track", "model", "tools")
        .unique(subset="run_id", keep="first", maintain_order=True)
        .filter(pl.col("benchmark") == benchmark)
        .with_columns(pl.col("tools").fill_null(False))
    )
    lf = st.items().join(runs_of, on="run_id", how="inner", maintain_order="left")
    if tracks:
        lf = lf.filter(pl.col("track").is_in(list(tracks)))
    frame = _BUILDERS[benchmark](st, lf)
    if frame.height == 0 and not tracks:
        raise _no_items(st, items, benchmark)
    if frame.height == 0:
        raise InvalidArgumentError(
            f"{st.path}: no items of benchmark {benchmark!r} left in tracks "
            f"{', '.join(tracks or ())}"
        )
    return frame


def _no_items(st: Store, items: Any, benchmark: str) -> InvalidArgumentError:
    """Return the error for a store without items of ``benchmark``, naming those it has."""
    present = items.select(pl.col("benchmark").unique()).collect().get_column("benchmark")
    have = ", ".join(sorted(str(b) for b in present.drop_nulls().to_list())) or "none"
    hint = (
        "; import with --benchmark to record which benchmark a run belongs to"
        if have != "none"
        else ""
    )
    return InvalidArgumentError(
        f"{st.path}: no items of benchmark {benchmark!r} (benchmarks present: {have}){hint}"
    )


def resolve(df: Any, benchmark: str) -> Any:
    """Return a scorer's input: the store's frame for a Store or path, else ``df`` itself.

    Parameters
    ----------
    df : Any
        What the scorer was given.
    benchmark : str
        The scorer.

    Returns
    -------
    Any
        ``store_frame(df, benchmark)`` for a store, else ``df``.
    """
    return store_frame(df, benchmark) if is_store(df) else df


# ----------------------------------------------------------------------------- helpers


def _extra(lf: Any, benchmark: str) -> Any:
    """Add one column per benchmark field, decoded from ``items.extra``."""
    fields = BENCHMARK_FIELDS[benchmark]
    dtype = pl.Struct({f: polars_dtype(k) for f, k in fields.items()})
    return lf.with_columns(pl.col("extra").str.json_decode(dtype).alias("__x")).with_columns(
        pl.col("__x").struct.field(f).alias(f"x_{f}") for f in fields
    )


def _collect(lf: Any, benchmark: str) -> pl.DataFrame:
    """Collect, turning a JSON decoding failure of ``extra`` into a clear error."""
    try:
        return lf.collect()
    except pl.exceptions.ComputeError as exc:
        first = str(exc).splitlines()[0]
        raise InvalidArgumentError(
            f"items.extra: the stored fields of benchmark {benchmark!r} do not have the types "
            f"of tumorboard.traj.fields.BENCHMARK_FIELDS[{benchmark!r}] ({first})"
        ) from None


def _events(st: Store, frame: pl.DataFrame) -> pl.DataFrame:
    """Return the events of the frame's runs, ordered by item and step."""
    st.verify("events")
    runs = frame.get_column("run_id").unique().to_list()
    return (
        st.events()
        .filter(pl.col("run_id").is_in(runs))
        .select(*_KEY, "step", "kind", "tool", "input", "ok")
        .sort([*_KEY, "step"], nulls_last=True)
        .collect()
    )


def _join(frame: pl.DataFrame, other: pl.DataFrame) -> pl.DataFrame:
    """Left-join per-item values on the item key (a null patient matches a null patient)."""
    return frame.join(other, on=_KEY, how="left", nulls_equal=True, maintain_order="left")


def _optional(frame: pl.DataFrame, names: Sequence[str]) -> list[pl.Expr]:
    """Return the ``x_<name>`` columns that hold any value, renamed to ``name``."""
    return [
        pl.col(f"x_{n}").alias(n)
        for n in names
        if f"x_{n}" in frame.columns and frame.get_column(f"x_{n}").null_count() < frame.height
    ]


def _require(frame: pl.DataFrame, column: str, benchmark: str, field: str) -> None:
    """Raise for the first item whose ``column`` is null, naming the item and the field."""
    bad = frame.filter(pl.col(column).is_null())
    if bad.height:
        r = bad.row(0, named=True)
        raise InvalidArgumentError(
            f"{benchmark}: {bad.height} of {frame.height} items have no {field!r} (first: run "
            f"{r['run_id']!r}, patient {r['patient_id']!r}, item {r['item_id']!r}); import the "
            f"logs with --benchmark {benchmark} and a {field!r} field per record"
        )


# ----------------------------------------------------------------------------- builders


def _mtbbench(st: Store, lf: Any) -> pl.DataFrame:
    """Return MTBBench's scorer input: the items' correctness and file lists."""
    del st
    return lf.select(
        *_COMMON, "correct", "files_accessed", "files_hallucinated", "response"
    ).collect()


def _radabench(st: Store, lf: Any) -> pl.DataFrame:
    """Return RadA-BenchPlat's scorer input (tool chains from extra or the events)."""
    frame = _collect(
        _extra(lf.select(*_COMMON, "run_id", "item_id", "response", "gold", "gold_text",
                         "extra"), "radabench"),
        "radabench",
    )  # fmt: skip
    _require(frame, "x_gt_tools", "radabench", "gt_tools")
    ev = _events(st, frame)
    tools = (
        ev.filter(pl.col("kind").is_in(["tool_call", "action"]) & pl.col("tool").is_not_null())
        .group_by(_KEY, maintain_order=True)
        .agg(pl.col("tool").alias("__called"))
    )
    failed = (
        ev.filter(pl.col("kind").is_in(["tool_call", "observation"]))
        .group_by(_KEY)
        .agg((pl.col("ok") == False).any().alias("__failed"))  # noqa: E712
    )
    with_events = set(ev.get_column("run_id").unique().to_list())
    frame = _join(_join(frame, tools), failed)
    frame = frame.with_columns(
        # a case of a run with events that called no tool: an empty chain; null = no record
        pl.coalesce(
            "x_called_tools",
            "__called",
            pl.when(pl.col("run_id").is_in(list(with_events))).then(pl.lit([], pl.List(pl.String))),
        ).alias("called_tools"),
        pl.coalesce(
            "x_completed",
            pl.when(pl.col("run_id").is_in(list(with_events))).then(
                ~pl.col("__failed").fill_null(False)
            ),
        ).alias("__completed"),
        pl.coalesce("x_reference_answer", "gold_text", "gold").alias("__reference"),
    )
    cols: list[Any] = [*_COMMON, pl.col("x_gt_tools").alias("gt_tools"), "called_tools"]
    done = frame.get_column("__completed")
    if done.null_count() < frame.height:
        if done.null_count():
            _require(frame, "__completed", "radabench", "completed")
        cols.append(pl.col("__completed").alias("completed"))
    cols += _optional(
        frame,
        ["log", "plan_tools", "called_tool_ids", "candidate_tools", "selection_ranks",
         "selection_sizes", "milestone", "unsolvable", "missing_category", "aware", "grounded"],
    )  # fmt: skip
    if frame.get_column("__reference").null_count() < frame.height:
        cols += ["response", pl.col("__reference").alias("reference_answer")]
    return frame.select(cols)


def _lammi(st: Store, lf: Any) -> pl.DataFrame:
    """Return LAMMI-Pathology's scorer input (tool calls from extra or the events)."""
    frame = _collect(
        _extra(lf.select(*_COMMON, "run_id", "item_id", "options", "gold", "response",
                         "parsed_answer", "extra"), "lammi"),
        "lammi",
    )  # fmt: skip
    ev = _events(st, frame)
    nxt = [pl.col(c).shift(-1).over(_KEY) for c in ("kind", "ok")]
    ev = ev.with_columns(nxt[0].alias("__next_kind"), nxt[1].alias("__next_ok"))
    success = (
        pl.when(pl.col("kind") == "tool_call")
        .then(pl.col("ok"))
        .when(pl.col("__next_kind") == "observation")
        .then(pl.col("__next_ok"))
    )
    calls = (
        ev.filter(
            (pl.col("kind") == "tool_call")
            | ((pl.col("kind") == "action") & pl.col("tool").is_not_null())
        )
        .with_columns(
            pl.struct(
                pl.col("tool").alias("name"), pl.col("input"), success.alias("success")
            ).alias("__call")
        )
        .group_by(_KEY, maintain_order=True)
        .agg(pl.col("__call").alias("__calls"))
    )
    frame = _join(frame, calls)
    # a sample of a run with events that called no tool: no call; null = no tool record
    with_events = ev.get_column("run_id").unique().to_list()
    no_call = pl.when(pl.col("run_id").is_in(with_events)).then(pl.lit([], calls.schema["__calls"]))
    mc = frame.get_column("options").list.len().fill_null(0) > 0
    valid = (
        pl.col("response").is_not_null()
        & (pl.col("response").str.strip_chars() != "")
        & (~pl.lit(mc) | pl.col("parsed_answer").is_not_null())
    )
    frame = frame.with_columns(
        pl.coalesce("x_tool_calls", "__calls", no_call).alias("tool_calls"),
        pl.coalesce("x_output_valid", valid).alias("output_valid"),
        pl.when(pl.col("gold").str.contains(r"^[A-Z]$")).then(pl.col("gold")).alias("__mc"),
    )
    cols: list[Any] = [*_COMMON, "tool_calls", "output_valid", "response"]
    cols += _optional(frame, ["expected_tools", "answer_consistency", "hallucination"])
    if frame.get_column("__mc").null_count() < frame.height:
        cols += [pl.col("parsed_answer").alias("mc_prediction"), pl.col("__mc").alias("mc_answer")]
    return frame.select(cols)


_BULLET = r"^\s*(?:[-*\u2022]|\d+[.)])\s+"


def _medinsight(st: Store, lf: Any) -> pl.DataFrame:
    """Return MedInsightBench's scorer input (insights from extra or the response's lines)."""
    del st
    frame = _collect(
        _extra(lf.select(*_COMMON, "run_id", "item_id", "response", "extra"), "medinsight"),
        "medinsight",
    )
    lines = (
        pl.col("response")
        .fill_null("")
        .str.split("\n")
        .list.eval(pl.element().str.replace(_BULLET, "").str.strip_chars())
        .list.eval(pl.element().filter(pl.element() != ""))
    )
    frame = frame.with_columns(
        pl.concat_str(["patient_id", "item_id"], separator="/", ignore_nulls=True).alias("case_id"),
        pl.coalesce("x_insights", lines).alias("insights"),
    )
    cols: list[Any] = [*_COMMON, "case_id", "insights"]
    matrix = frame.get_column("x_score_matrix")
    if matrix.null_count() < frame.height:
        _require(frame, "x_score_matrix", "medinsight", "score_matrix")
        cols.append(pl.col("x_score_matrix").alias("score_matrix"))
    else:
        _require(frame, "x_gt_insights", "medinsight", "gt_insights")
    if frame.get_column("x_gt_insights").null_count() < frame.height:
        cols.append(pl.col("x_gt_insights").alias("gt_insights"))
    cols += _optional(frame, ["insight_precision_scores", "insight_novelty_votes"])
    return frame.select(cols)


def _medbench(st: Store, lf: Any) -> pl.DataFrame:
    """Return MedBench's scorer input (dimension, metric and metric fields from extra)."""
    del st
    frame = _collect(
        _extra(lf.select(*_COMMON, "run_id", "item_id", "correct", "response", "gold",
                         "gold_text", "extra"), "medbench"),
        "medbench",
    )  # fmt: skip
    _require(frame, "x_dimension", "medbench", "dimension")
    _require(frame, "x_metric", "medbench", "metric")
    cols: list[Any] = [
        *_COMMON,
        pl.col("x_dimension").alias("dimension"),
        pl.col("x_metric").alias("metric"),
        "correct",
        pl.coalesce("x_item_group", "item_id").alias("item_id"),
        pl.col("response").alias("prediction"),
        pl.coalesce("gold_text", "gold").alias("reference"),
    ]
    cols += _optional(
        frame,
        ["pred_labels", "gold_labels", "keypoint_hits", "pred_box", "gold_box", "judge_output",
         "score"],
    )  # fmt: skip
    return frame.select(cols)


def _inspect(st: Store, lf: Any) -> pl.DataFrame:
    """Return the inspect scorer's input: one row per (item, scorer) with its value."""
    del st
    frame = _collect(
        _extra(lf.select(*_COMMON, "run_id", "item_id", "extra"), "inspect"), "inspect"
    )
    _require(frame, "x_scorers", "inspect", "scorers")
    base = frame.select(*_COMMON, "run_id", "item_id", pl.col("x_sample_id").alias("sample_id"),
                        pl.col("x_scorers").alias("scorer"),
                        pl.col("x_score_values").alias("value"))  # fmt: skip
    bad = base.filter(pl.col("scorer").list.len() != pl.col("value").list.len())
    if bad.height:
        r = bad.row(0, named=True)
        raise InvalidArgumentError(
            f"inspect: item {r['item_id']!r} of run {r['run_id']!r} has "
            f"{len(r['scorer'])} scorers but {len(r['value'])} score values"
        )
    scored = base.filter(pl.col("scorer").list.len() > 0).explode("scorer", "value")
    empty = base.filter(pl.col("scorer").list.len() == 0).drop("scorer", "value")
    if empty.height:
        names = scored.select("run_id", "scorer").unique(maintain_order=True)
        empty = empty.join(names, on="run_id", how="inner").with_columns(
            pl.lit(None, pl.Float64).alias("value")
        )
        scored = pl.concat([scored, empty.select(scored.columns)], how="vertical")
    if scored.height == 0 and base.height:
        raise InvalidArgumentError(
            f"inspect: none of the {base.height} stored samples has a score: every one ended in "
            "an error or was not scored (inspect_ai scores no errored sample), so there is "
            "nothing to grade; see each item's extra.error"
        )
    return scored.with_columns(pl.col("sample_id").fill_null(pl.col("item_id"))).drop("item_id")


_BUILDERS: dict[str, Callable[[Store, Any], pl.DataFrame]] = {
    "mtbbench": _mtbbench,
    "radabench": _radabench,
    "lammi": _lammi,
    "medinsight": _medinsight,
    "medbench": _medbench,
    "inspect": _inspect,
}
