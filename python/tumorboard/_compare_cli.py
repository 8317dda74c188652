"""The ``tumorboard compare`` verb: pairwise model comparisons of a trajectory store.

It reads the store's items with their runs, takes one value per (system, item) from a column
(``correct`` by default: the 0/1 grade every importer writes), keys items by
(task, patient_id, item_id) and runs :func:`tumorboard.stats.compare` per task and overall,
clustered by patient by default, within each (benchmark, track) of the store: systems of
different tracks answer different questions and are never paired. A system is a model; where
one model has runs on several tracks or with and without tools, each (model, track, tools) is
its own system. Items with no value (ungraded answers) are left out and counted on standard
error.

Building the parser imports nothing heavy; polars and the store load when the verb runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ._args import level, positive_int, seed
from ._verbs import verb_help

__all__ = ["add_compare_parser", "add_plan_parser"]


def add_compare_parser(sub: Any) -> None:
    """Add the ``compare`` sub-command to ``sub`` (the top parser's sub-parsers)."""
    p = sub.add_parser(
        "compare",
        help=verb_help("compare"),
        description="Compare every pair of models of a store (or each against --baseline) on "
        "the items both answered, per task and overall: the paired difference with a paired "
        "bootstrap CI (clustered by patient by default), exact McNemar (0/1 values) or sign-"
        "flip permutation p-values, p-values adjusted within each task (--correction), and "
        "win/tie/loss counts. Items only one model has are counted, never paired.",
    )
    p.add_argument("store", help="the store directory")
    p.add_argument(
        "--metric", default=None,
        help="the items column compared (default: correct, the 0/1 grade), or for "
        "MedInsightBench items a per-case metric of its scorer: insight_recall, "
        "insight_precision or insight_f1 (the default with --rank-statistic f1_of_means)",
    )  # fmt: skip
    p.add_argument("--benchmark", help="only runs of this benchmark (default: all)")
    p.add_argument("--track", nargs="+", help="only these tracks")
    p.add_argument("--baseline", help="compare each model against this one only")
    p.add_argument(
        "--correction", choices=["holm", "bonferroni", "bh", "none"], default="holm",
        help="multiple-comparison correction within each task (default holm)",
    )  # fmt: skip
    p.add_argument(
        "--cluster", choices=["patient", "none"], default="patient",
        help="resample and sign-flip whole patients (default) or single items",
    )  # fmt: skip
    p.add_argument("--n-resamples", type=positive_int, default=1000,
                   help="bootstrap resamples (default 1000)")  # fmt: skip
    p.add_argument("--n-permutations", type=positive_int, default=10_000,
                   help="sign patterns of the permutation test (default 10000)")  # fmt: skip
    p.add_argument("--level", type=level, default=0.95, help="confidence level (default 0.95)")
    p.add_argument("--method", choices=["percentile", "basic", "bca"], default="percentile",
                   help="bootstrap interval method (default percentile)")  # fmt: skip
    p.add_argument("--seed", type=seed, default=0, help="random seed (default 0)")
    p.add_argument("--ranks", action="store_true",
                   help="also the bootstrap rank intervals of the models per task and overall "
                   "(rank CI, P(best), tied with the best; shared Poisson resamples)")  # fmt: skip
    p.add_argument(
        "--rank-statistic", choices=["mean", "bleu", "f1_of_means"], default="mean",
        help="what --ranks ranks: mean (default), the mean of --metric; bleu, corpus BLEU of "
        "each model's responses against the items' references (gold_text, else gold), "
        "resampled through its sufficient statistics as sacrebleu defines it; f1_of_means, "
        "MedInsightBench's insight F1 (the F1 of the mean insight recall and mean insight "
        "precision), resampled through the per-case recall and precision (implies --ranks)",
    )  # fmt: skip
    p.add_argument(
        "--bleu-tokenize", choices=["13a", "zh", "char", "none"], default="13a",
        help="the BLEU tokenizer of --rank-statistic bleu (sacrebleu's names; default 13a)",
    )  # fmt: skip
    p.add_argument("--format", choices=["md", "csv", "json", "html", "svg"], default="md",
                   help="md (default), csv (the comparisons), json ({'comparisons': [...], "
                   "'ranks': {task: [...]}}), html (forest plot, p-value heatmaps, rank "
                   "plots and the tables in one page) or svg (each of those pictures as its "
                   "own .svg file in the directory --out names)")  # fmt: skip
    p.add_argument("--out", metavar="FILE",
                   help="write to FILE (atomically) instead of stdout; with --format svg, the "
                   "directory the files go to (created if missing)")  # fmt: skip
    p.set_defaults(func=_cmd_compare)


def add_plan_parser(sub: Any) -> None:
    """Add the ``plan`` sub-command: items and patients needed to detect a difference."""
    p = sub.add_parser(
        "plan",
        help=verb_help("plan"),
        description="Sample size of a two-sided comparison of two models (normal "
        "approximation, as statsmodels' NormalIndPower): the items per model, and the "
        "patients when items are nested in patients (design effect 1 + (m - 1) ICC); with "
        "--items N instead of --delta, the minimum detectable difference of N items.",
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--delta", type=float, help="the difference of means to detect")
    what.add_argument("--items", type=positive_int,
                      help="items per model: print the minimum detectable difference")  # fmt: skip
    p.add_argument("--sd", type=float, default=None,
                   help="SD of the per-item differences (paired) or values (independent); "
                   "default 0.5, the largest a 0/1 outcome has")  # fmt: skip
    p.add_argument("--alpha", type=float, default=0.05, help="two-sided level (default 0.05)")
    p.add_argument("--power", type=float, default=0.8, help="power to reach (default 0.8)")
    p.add_argument("--design", choices=["paired", "independent"], default="paired",
                   help="paired (same items for both models, default) or independent")  # fmt: skip
    p.add_argument("--icc", type=float, default=0.0,
                   help="intra-class correlation of a patient's items (default 0)")  # fmt: skip
    p.add_argument("--items-per-patient", type=positive_int, default=1,
                   help="items per patient (default 1)")  # fmt: skip
    p.add_argument("--simulate", type=positive_int, metavar="N", default=None,
                   help="also the power by simulation at the planned items (or at the detectable "
                   "difference): N simulated paired 0/1 data sets with the ICC, each tested by "
                   "the clustered paired bootstrap (stats.power(method='simulation'))")  # fmt: skip
    p.add_argument("--n-resamples", type=positive_int, default=1000,
                   help="bootstrap resamples per simulated data set (default 1000)")  # fmt: skip
    p.add_argument("--seed", type=seed, default=0, help="simulation seed (default 0)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=_cmd_plan)


def _cmd_plan(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from .stats import BootstrapOptions, detectable_effect, plan_sample_size, power

    sd = 0.5 if args.sd is None else args.sd
    kw = dict(sd=sd, alpha=args.alpha, target_power=args.power, design=args.design,
              icc=args.icc, items_per_cluster=args.items_per_patient)  # fmt: skip

    def simulated(delta: float, n: int) -> dict[str, Any]:
        """Return the simulated power at (delta, n) and its Monte Carlo error (--simulate)."""
        if args.simulate is None:
            return {}
        got = power(delta, n, sd=sd, alpha=args.alpha, design=args.design, icc=args.icc,
                    items_per_cluster=args.items_per_patient, method="simulation",
                    n_simulations=args.simulate, seed=args.seed,
                    options=BootstrapOptions(n_resamples=args.n_resamples,
                                             seed=args.seed))  # fmt: skip
        se = (got * (1.0 - got) / args.simulate) ** 0.5
        return {"simulated_power": got, "simulation_se": se, "n_simulations": args.simulate}

    def sim_text(sim: dict[str, Any]) -> str:
        """Return the sentence of the simulated power ("" without --simulate)."""
        if not sim:
            return ""
        return (f"; simulated power {sim['simulated_power']:.3f} +- {sim['simulation_se']:.3f} "
                f"({sim['n_simulations']:,} data sets, clustered paired bootstrap)")  # fmt: skip

    if args.delta is not None:
        plan = plan_sample_size(args.delta, **kw)  # type: ignore[arg-type]
        sim = simulated(args.delta, plan.n_items)
        if args.json:
            print(json.dumps({**asdict(plan), **sim}, indent=2))
        else:
            print(f"{plan.n_items:,} items per model ({plan.n_clusters:,} patients of "
                  f"{plan.items_per_cluster}) detect a difference of {plan.delta:g} with "
                  f"power {plan.power:.3f} at alpha {plan.alpha:g} ({plan.design}, sd {plan.sd:g}, "
                  f"design effect {plan.design_effect:.3f}){sim_text(sim)}")  # fmt: skip
        return 0
    mde = detectable_effect(args.items, **kw)  # type: ignore[arg-type]
    sim = simulated(mde, args.items)
    if args.json:
        print(json.dumps({"n_items": args.items, "detectable_effect": mde, **kw, **sim},
                         indent=2))  # fmt: skip
    else:
        print(f"{args.items:,} items per model detect a difference of {mde:.4f} with power "
              f"{args.power:g} at alpha {args.alpha:g} ({args.design}, sd {sd:g}, icc "
              f"{args.icc:g}, {args.items_per_patient} item(s) per patient)"
              f"{sim_text(sim)}")  # fmt: skip
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    import polars as pl

    from ._io import atomic_path
    from ._progress import CountProgress
    from .errors import InvalidArgumentError
    from .stats import BootstrapOptions, compare
    from .traj import Store

    store = Store(args.store, create=False)

    def read(st: Any) -> Any:
        st.verify(("runs", "items"))
        return st.items(with_runs=True).collect()

    insight = args.metric in _INSIGHT_METRICS or args.rank_statistic == "f1_of_means"
    if args.metric is None:
        args.metric = "insight_f1" if args.rank_statistic == "f1_of_means" else "correct"
    if insight:
        items = _insight_items(store, args)
    else:
        items = store.read(read)
    if args.metric not in items.columns:
        raise InvalidArgumentError(
            f"--metric {args.metric}: expected a column of the store's items "
            f"({', '.join(sorted(items.columns))}), or for MedInsightBench items one of "
            f"{', '.join(_INSIGHT_METRICS)}"
        )
    if args.benchmark is not None:
        have = sorted(str(b) for b in items.get_column("benchmark").drop_nulls().unique())
        if args.benchmark not in have:
            raise InvalidArgumentError(
                f"--benchmark {args.benchmark}: expected one of the store's ({', '.join(have)})"
            )
        items = items.filter(pl.col("benchmark") == args.benchmark)
    if args.track:
        items = items.filter(pl.col("track").is_in(args.track))
    if args.bleu_tokenize != "13a" and args.rank_statistic != "bleu":
        raise InvalidArgumentError(
            f"--bleu-tokenize {args.bleu_tokenize}: only with --rank-statistic bleu"
        )
    if args.rank_statistic != "mean":
        args.ranks = True
    if args.ranks and args.format == "csv":
        raise InvalidArgumentError(
            "--ranks: expected --format md, json, html or svg (csv holds one table)"
        )
    if args.format == "svg":
        _svg_directory(args.out)
    dtype = items.schema[args.metric]
    if not (dtype.is_numeric() or dtype == pl.Boolean):
        raise InvalidArgumentError(
            f"--metric {args.metric}: expected numbers or booleans, got {dtype}"
        )
    items = items.with_columns(pl.col(args.metric).cast(pl.Float64).alias("_value"))
    missing = items.filter(pl.col("_value").is_null() | pl.col("_value").is_nan()).height
    texts = _texts(items) if args.rank_statistic == "bleu" else None
    items = items.filter(pl.col("_value").is_not_null() & pl.col("_value").is_not_nan())
    if missing:
        print(f"tumorboard: note: {missing:,} item(s) without a {args.metric} value left out",
              file=sys.stderr)  # fmt: skip
    opts = BootstrapOptions(n_resamples=args.n_resamples, level=args.level, method=args.method,
                            seed=args.seed)  # fmt: skip
    items = items.with_columns(
        pl.col("benchmark").cast(pl.Utf8).fill_null(""),
        pl.col("track").cast(pl.Utf8).fill_null(""),
    )
    groups = items.select("benchmark", "track").unique().sort("benchmark", "track")
    subs = []
    for bench, track in groups.rows():
        sub = items.filter((pl.col("benchmark") == bench) & (pl.col("track") == track))
        subs.append((bench, track, sub.with_columns(_system_labels(sub))))
    # each track's distinct models (polars' unique, not a Python set of every row's label)
    track_systems = [set(sub.get_column("_system").unique().to_list()) for *_, sub in subs]
    known = sorted(set().union(*track_systems))
    if args.baseline is not None and args.baseline not in known:
        raise InvalidArgumentError(
            f"baseline: expected one of the models {known}, got {args.baseline!r}"
        )
    sections = []
    # a line on standard error every 2 s once a run takes longer than 2 s
    printer = CountProgress("compare", what="comparisons", of="benchmark tracks")
    finished = 0  # comparisons of the tracks before this one
    with printer:
        for k, (bench, track, sub) in enumerate(subs):
            where = f"{bench or '(no benchmark)'} / {track or '(no track)'}"
            systems = track_systems[k]
            if len(systems) < 2 or (args.baseline is not None and args.baseline not in systems):
                why = "one model" if len(systems) < 2 else f"no {args.baseline!r}"
                print(f"tumorboard: note: {where}: {why}, nothing to compare", file=sys.stderr)
                continue
            rows = _rows(sub, cluster=args.cluster == "patient")

            def show(done: int, total: int, k: int = k, before: int = finished) -> None:
                printer.update(k, len(subs), before + done)

            result = compare(
                rows["values"], models=rows["models"], items=rows["items"], tasks=rows["tasks"],
                clusters=rows["clusters"], baseline=args.baseline, correction=args.correction,
                options=opts, n_permutations=args.n_permutations, progress=show,
            )  # fmt: skip
            finished += len(result.rows)
            if texts is not None:
                ranks = _bleu_ranks(texts, bench, track, sub, args, opts)
            elif args.rank_statistic == "f1_of_means":
                rp = sub.select("insight_recall", "insight_precision").to_numpy()
                ranks = _ranks({**rows, "values": rp}, opts, statistic="f1_of_means")
            else:
                ranks = _ranks(rows, opts) if args.ranks else {}
            sections.append((bench, track, where, result, ranks))
    if not sections:
        raise InvalidArgumentError(
            f"{args.store}: no benchmark and track with two models to compare"
            + (f" (--baseline {args.baseline})" if args.baseline else "")
        )
    if args.format == "svg":
        for path in _write_svgs(sections, args.out):
            print(f"wrote {path}")
        return 0
    ranked_by = {
        "bleu": "corpus BLEU",
        "f1_of_means": "insight F1 (F1 of the mean recall and mean precision)",
    }.get(args.rank_statistic, f"mean {args.metric}")
    text = _render(sections, args.format, ranked_by=ranked_by, metric=args.metric)
    if args.out:
        with atomic_path(args.out) as tmp:
            tmp.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0


#: MedInsightBench's per-case metrics, computed from the store as its scorer computes them.
_INSIGHT_METRICS = ("insight_recall", "insight_precision", "insight_f1")


def _insight_items(store: Any, args: argparse.Namespace) -> Any:
    """Return the MedInsightBench items with each case's insight recall, precision and F1.

    The values are those :func:`tumorboard.score.medinsight.score` averages (ROUGE-1 F matrices
    of the insights, or the stored score matrices); a case is keyed by its patient and item.
    Refuses a metric that is not one of :data:`_INSIGHT_METRICS` and a ``--benchmark`` other
    than medinsight.
    """
    import polars as pl

    from .errors import InvalidArgumentError
    from .score import store_frame
    from .score.medinsight import case_scores

    if args.metric not in _INSIGHT_METRICS:
        raise InvalidArgumentError(
            f"--rank-statistic f1_of_means: expected --metric {', '.join(_INSIGHT_METRICS)} "
            f"(MedInsightBench's per-case metrics, compared pairwise), got {args.metric}"
        )
    if args.benchmark not in (None, "medinsight"):
        raise InvalidArgumentError(
            f"--metric {args.metric}: a MedInsightBench metric; expected --benchmark medinsight "
            f"(or none), got {args.benchmark}"
        )
    cases = case_scores(store_frame(store, "medinsight", tracks=args.track))
    task = pl.col("task") if "task" in cases.columns else pl.lit(None, pl.Utf8).alias("task")
    return cases.with_columns(
        pl.lit("medinsight").alias("benchmark"), task, pl.col("case_id").alias("item_id")
    )


def _svg_directory(out: str | None) -> Any:
    """Return the directory of ``--format svg`` (``--out``), refusing a missing or file path."""
    from pathlib import Path

    from .errors import InvalidArgumentError

    if not out:
        raise InvalidArgumentError(
            "--out: expected a directory for --format svg (one file per picture), got none"
        )
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise InvalidArgumentError(f"--out: expected a directory for --format svg, got a file "
                                   f"{out!r}")  # fmt: skip
    return path


def _write_svgs(sections: list[tuple[str, str, str, Any, dict[str, Any]]], out: str) -> list[Any]:
    """Write each section's pictures as .svg files into ``out`` (atomically); return the paths.

    One section's files are ``forest.svg``, ``pvalues-TASK.svg`` and ``ranks-TASK.svg``
    (:meth:`Comparison.to_svg`); with several, each name starts with ``BENCHMARK-TRACK-``.
    """
    from ._io import atomic_path

    directory = _svg_directory(out)
    directory.mkdir(parents=True, exist_ok=True)
    several = len(sections) > 1
    written = []
    for bench, track, _where, result, ranks in sections:
        prefix = f"{bench or 'none'}-{track or 'none'}-" if several else ""
        for name, svg in result.to_svg(ranks, prefix=prefix).items():
            path = directory / (prefix + name)
            with atomic_path(path) as tmp:
                tmp.write_text(svg, encoding="utf-8")
            written.append(path)
    return written


def _rows(items: Any, *, cluster: bool) -> dict[str, Any]:
    """Return the arrays :func:`~tumorboard.stats.compare` takes, from one group's items."""
    import polars as pl

    patient = items.get_column("patient_id").cast(pl.Utf8).fill_null("")
    # the label columns stay polars Series: compare() codes them in polars' own buffers
    return {
        "values": items.get_column("_value").to_numpy(),
        "models": items.get_column("_system").cast(pl.Utf8),
        "items": patient + "\x1f" + items.get_column("item_id").cast(pl.Utf8),
        "tasks": items.get_column("task").cast(pl.Utf8).fill_null(""),
        "clusters": patient if cluster else None,
    }


def _render(
    sections: list[tuple[str, str, str, Any, dict[str, Any]]],
    fmt: str,
    *,
    ranked_by: str = "",
    metric: str = "correct",
) -> str:
    """Render the comparisons of each (benchmark, track) in ``fmt``.

    One section is written as before sections existed; several get a heading each (md, html),
    ``benchmark`` and ``track`` columns (csv, json rows) and rank keys ``benchmark / track /
    task`` (json).
    """
    import polars as pl

    from .stats import Comparison

    several = len(sections) > 1
    if fmt == "md":
        out = []
        for _bench, _track, where, result, ranks in sections:
            text = (f"## {where}\n\n" if several else "") + result.to_markdown() + "\n"
            for task, r in ranks.items():
                text += (f"\nRanks by {ranked_by}, {task} ({r.n_valid:,} of "
                         f"{r.n_resamples:,} resamples):\n\n")  # fmt: skip
                text += r.to_markdown() + "\n"
            out.append(text)
        return "\n".join(out)
    if fmt == "csv":
        frames = [result.to_polars().select(pl.lit(bench).alias("benchmark"),
                                             pl.lit(track).alias("track"), pl.all())
                  for bench, track, _where, result, _ranks in sections]  # fmt: skip
        return pl.concat(frames, how="vertical").write_csv()
    if fmt == "html":
        return Comparison.page_html([(where if several else None, result, ranks)
                                 for _b, _t, where, result, ranks in sections])  # fmt: skip
    doc: dict[str, Any] = {"comparisons": [], "ranks": {}, "ranked_by": ranked_by,
                           "metric": metric}  # fmt: skip
    for bench, track, where, result, ranks in sections:
        doc["comparisons"] += [{"benchmark": bench, "track": track, **d}
                               for d in result.to_dicts()]  # fmt: skip
        for task, r in ranks.items():
            doc["ranks"][f"{where} / {task}" if several else task] = r.to_dicts()
    return json.dumps(doc, indent=2, allow_nan=True) + "\n"


def _ranks(
    rows: dict[str, Any], opts: Any, *, statistic: str = "mean", params: Any = None
) -> dict[str, Any]:
    """Rank intervals per task (sorted) and overall, on the rows the comparisons use.

    ``rows["values"]`` holds one value per row (``statistic="mean"``) or the sufficient
    statistics of an engine statistic (``"bleu"``: :func:`tumorboard.text.bleu_statistics`).
    """
    import numpy as np
    import polars as pl

    from .stats import rank_intervals

    cols = {"task": rows["tasks"], "model": rows["models"], "item": rows["items"]}
    if rows["clusters"] is not None:
        cols["cluster"] = rows["clusters"]
    frame = pl.DataFrame(cols)
    # an item is the same item within its task (compare keys them the same way)
    frame = frame.with_columns(pl.concat_str("task", pl.lit("\x1f"), "item").alias("key"))
    task_of = frame.get_column("task")
    out = {}
    for task in [*sorted(task_of.unique().to_list()), "overall"]:
        sel = (task_of == task).to_numpy() if task != "overall" else np.ones(len(frame), bool)
        sub = frame.filter(pl.Series(sel)) if task != "overall" else frame
        if sub.get_column("model").n_unique() < 2:
            continue
        out[task] = rank_intervals(rows["values"][sel], models=sub.get_column("model"),
                                   items=sub.get_column("key"),
                                   clusters=sub.get_column("cluster") if "cluster" in cols
                                   else None, statistic=statistic, params=params,
                                   options=opts)  # fmt: skip
    return out


def _texts(items: Any) -> Any:
    """Return the items that have a response and a reference (gold_text, else gold) for BLEU.

    Refuses a store where no item has both, naming what is missing.
    """
    import polars as pl

    from .errors import InvalidArgumentError

    ref = pl.coalesce(
        pl.col("gold_text").cast(pl.Utf8) if "gold_text" in items.columns else pl.lit(None),
        pl.col("gold").cast(pl.Utf8) if "gold" in items.columns else pl.lit(None),
    )
    out = items.with_columns(ref.alias("_reference")).filter(
        pl.col("response").is_not_null() & pl.col("_reference").is_not_null()
    )
    if out.height == 0:
        raise InvalidArgumentError(
            "--rank-statistic bleu: no item has both a response and a reference (gold_text or "
            "gold); import the logs with the reference text in a gold or gold_text field"
        )
    left = items.height - out.height
    if left:
        print(f"tumorboard: note: {left:,} item(s) without a response or a reference left out "
              "of the BLEU ranks", file=sys.stderr)  # fmt: skip
    return out


def _bleu_ranks(texts: Any, bench: str, track: str, sub: Any, args: Any, opts: Any) -> Any:
    """Rank the systems of one (benchmark, track) by corpus BLEU (sacrebleu's definition).

    The rows are the section's items with a response and a reference; the systems are labelled
    as in the comparisons (``sub``'s ``_system``, by (model, track, tools)).
    """
    import polars as pl

    from .text import bleu_statistic_params, bleu_statistics

    rows = texts.with_columns(
        pl.col("benchmark").cast(pl.Utf8).fill_null(""), pl.col("track").cast(pl.Utf8).fill_null("")
    ).filter((pl.col("benchmark") == bench) & (pl.col("track") == track))
    systems = sub.select("model", "track", "tools", "_system").unique()
    rows = rows.join(systems, on=["model", "track", "tools"], how="inner", nulls_equal=True,
                     maintain_order="left")  # fmt: skip
    if rows.height == 0:
        return {}
    arrays = _rows(rows.with_columns(pl.lit(0.0).alias("_value")),
                   cluster=args.cluster == "patient")  # fmt: skip
    arrays["values"] = bleu_statistics(
        rows.get_column("response").to_list(),
        rows.get_column("_reference").to_list(),
        tokenizer=args.bleu_tokenize,
    )
    return _ranks(arrays, opts, statistic="bleu", params=bleu_statistic_params())


def _system_labels(items: Any) -> Any:
    """Label each row's system: the model, or ``model (track, tools)`` where one is ambiguous.

    Returns a String Series named ``_system`` (polars expressions: no Python per row).
    """
    import polars as pl

    model = pl.col("model").cast(pl.Utf8).fill_null("None")
    combos = items.select(model, "track", "tools").unique()
    ambiguous = combos.group_by("model").len().filter(pl.col("len") > 1).get_column("model")
    tools = (
        pl.when(pl.col("tools").fill_null(False))
        .then(pl.lit("tools"))
        .otherwise(pl.lit("no tools"))
    )
    track = pl.col("track").cast(pl.Utf8).fill_null("None")
    label = (
        pl.when(model.is_in(ambiguous.to_list()))
        .then(pl.format("{} ({}, {})", model, track, tools))
        .otherwise(model)
    )
    return items.select(label.alias("_system")).to_series()
