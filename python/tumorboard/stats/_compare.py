"""Compare models on the same items: paired differences, tests and corrected p-values.

:func:`compare` answers "is model A better than model B?" for every pair of models (or every
model against a baseline), per task and over all tasks:

* pairs are matched on item identity (the ``items`` labels, within a task); items present for
  one model only are counted (``n_only_a``, ``n_only_b``), never paired;
* the paired difference of means with a paired bootstrap interval (clustered when
  ``clusters`` is given: whole clusters are resampled). Where every model of a task has every
  item, one engine call bootstraps all models on shared Poisson(1) resamples keyed by item (or
  cluster), and every pair's interval comes from that joint distribution (percentile or basic;
  BCa, and tasks with items missing for some model, use :func:`paired_bootstrap` per pair);
* p-values: the paired bootstrap's; McNemar's exact and mid-p for 0/1 outcomes; the sign-flip
  permutation test (signs flipped per cluster when clustered). ``p_value`` is the one named in
  ``test``: exact McNemar for unclustered 0/1 outcomes, the sign-flip test otherwise;
* ``p_adjusted``: ``p_value`` adjusted within each task's family of pairs (Holm by default;
  Bonferroni, Benjamini-Hochberg or none), and the report names the correction;
* win / tie / loss counts over the matched items;
* a simultaneous band for all pairs of a task at once (``simul_low``, ``simul_high``): every
  model is bootstrapped on shared Poisson(1) resamples keyed by item (or cluster), and the
  band is d +- c se with c the ``level`` quantile of max over pairs of |d* - d| / se (the
  max-T method: Westfall & Young 1993, *Resampling-Based Multiple Testing*, ch. 2; Romano &
  Wolf 2005, *Econometrica* 73:1237-1282), computed where every model has every item.

The paired analysis is what lm-evaluation-harness issue #3868 shows matters: an unpaired z-test
on paired items gave p = 0.080 where the paired test gave 0.008.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, NoReturn

import numpy as np
import polars as pl

from .. import _core
from .._keys import combine_hashes, hash_labels, label_columns, label_text, string_codes
from ..errors import InvalidArgumentError
from . import _shared, _validate
from ._bootstrap import bootstrap, paired_bootstrap
from ._exact import norm_ppf
from ._multiple import CORRECTIONS, Correction, adjust_pvalues
from ._options import BootstrapOptions
from ._paired_tests import mcnemar, mcnemar_many, sign_flip_many, sign_flip_test

__all__ = ["Comparison", "ComparisonRow", "compare"]

#: The task label of the rows over all tasks.
OVERALL = "overall"


@dataclass(frozen=True)
class ComparisonRow:
    """One comparison of model a against model b on one task (or overall).

    Attributes
    ----------
    task, model_a, model_b : str
        What is compared.
    n_matched, n_only_a, n_only_b : int
        Items both models answered (paired), and items only one of them has.
    n_units : int
        Resampling units of the matched items (clusters when clustered, else items).
    mean_a, mean_b, difference : float
        Means over the matched items and ``mean_a - mean_b``.
    ci_low, ci_high : float
        Paired bootstrap interval of the difference.
    p_bootstrap, p_permutation : float
        Two-sided p-values of the paired bootstrap and the sign-flip permutation test.
    p_mcnemar, p_mcnemar_mid : float
        McNemar's exact and mid-p values (NaN for outcomes that are not 0/1).
    test : str
        The test behind ``p_value``: ``"mcnemar"``, ``"sign-flip"`` or ``"bootstrap"`` (the
        sign-flip test switched off).
    p_value, p_adjusted : float
        That test's p-value, and the same adjusted within the task's family of pairs.
    wins, ties, losses : int
        Matched items where a scored above, equal to, below b.
    simul_low, simul_high : float
        The simultaneous band of the task's family: every pair's difference covered at once
        with probability ``options.level`` (max-T over the pairs, module docstring); NaN where
        some model lacks some item of the task.
    mde : float
        Minimum detectable effect: the difference this comparison detects with 80% power at
        the two-sided level 1 - ``options.level``, (z_{1-alpha/2} + z_{0.8}) times the
        bootstrap standard error of the difference.
    """

    task: str
    model_a: str
    model_b: str
    n_matched: int
    n_only_a: int
    n_only_b: int
    n_units: int
    mean_a: float
    mean_b: float
    difference: float
    ci_low: float
    ci_high: float
    p_bootstrap: float
    p_permutation: float
    p_mcnemar: float
    p_mcnemar_mid: float
    test: str
    p_value: float
    p_adjusted: float
    wins: int
    ties: int
    losses: int
    mde: float
    simul_low: float = float("nan")
    simul_high: float = float("nan")


@dataclass(frozen=True)
class Comparison:
    """All pairwise comparisons, with how they were made.

    Attributes
    ----------
    rows : tuple of ComparisonRow
        Per task (sorted, then ``"overall"``), per pair.
    correction : str
        The multiple-comparison correction of ``p_adjusted`` (per task family).
    outcome : str
        ``"binary"`` (0/1 outcomes) or ``"continuous"``.
    clustered : bool
        Whether items were resampled and sign-flipped by cluster.
    options : BootstrapOptions
        The bootstrap's options (resamples, level, interval method, seed).
    n_permutations : int
        Sign patterns of the permutation test.
    """

    rows: tuple[ComparisonRow, ...]
    correction: str
    outcome: str
    clustered: bool
    options: BootstrapOptions
    n_permutations: int

    def to_dicts(self) -> list[dict[str, Any]]:
        """Return the rows as dictionaries (column name -> value)."""
        # every field is a scalar: what dataclasses.asdict gives, without its deep copies
        names = [f.name for f in fields(ComparisonRow)]
        return [{n: getattr(r, n) for n in names} for r in self.rows]

    def to_polars(self) -> Any:
        """Return the rows as a polars DataFrame (one column per :class:`ComparisonRow` field)."""
        import polars as pl

        names = [f.name for f in fields(ComparisonRow)]
        return pl.DataFrame([tuple(getattr(r, n) for n in names) for r in self.rows],
                            schema=names, orient="row")  # fmt: skip

    def to_html(self, ranks: Mapping[str, Any] | None = None) -> str:
        """Return one HTML page: forest plot, p-value heatmaps, rank plots (SVG) and tables.

        Parameters
        ----------
        ranks : mapping of str to RankIntervals, optional
            Rank intervals per task to draw too (``tumorboard compare --ranks``).

        Returns
        -------
        str
            A self-contained page (inline SVG, no script).
        """
        from ._compare_html import comparison_html

        return comparison_html(self, ranks)

    def to_svg(self, ranks: Mapping[str, Any] | None = None, *, prefix: str = "") -> dict[str, str]:
        """Return the pictures of :meth:`to_html` as standalone SVG documents, by file name.

        Parameters
        ----------
        ranks : mapping of str to RankIntervals, optional
            Rank intervals per task to draw too.
        prefix : str, default ""
            Put before every name (e.g. ``"mtbbench-multimodal-"`` for one track's files).

        Returns
        -------
        dict of str to str
            ``"forest.svg"`` (the paired differences; absent when no pair has matched
            items), ``"pvalues-TASK.svg"`` per task and ``"ranks-TASK.svg"`` per task of
            ``ranks``, in that order, each after ``prefix``; in ``prefix`` and ``TASK`` every
            character outside ``A-Z a-z 0-9 . _ -`` becomes ``_`` (a clash gets ``-2``, ...).
        """
        from ._compare_html import comparison_svgs

        return comparison_svgs(self, ranks, prefix=prefix)

    @staticmethod
    def page_html(
        sections: Sequence[tuple[str | None, Comparison, Mapping[str, Any] | None]],
    ) -> str:
        """Return one HTML page of several comparisons (``tumorboard compare``: one per track).

        Parameters
        ----------
        sections : sequence of (str or None, Comparison, mapping or None)
            Each section's heading (None: none), comparison and rank intervals per task.

        Returns
        -------
        str
            A self-contained page: each section as :meth:`to_html` draws it, in order.
        """
        from ._compare_html import comparisons_html

        return comparisons_html(sections)

    def to_markdown(self) -> str:
        """Return a Markdown table: difference with its interval, p-values, wins/ties/losses."""
        pct = round(100 * self.options.level)
        head = (
            f"| task | a | b | n | unpaired a/b | a - b [{pct}% CI] | simultaneous {pct}% "
            f"| p ({self.correction}) | p raw | test | W/T/L |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|"
        )
        lines = [head]
        for r in self.rows:
            lines.append(
                f"| {r.task} | {r.model_a} | {r.model_b} | {r.n_matched} "
                f"| {r.n_only_a}/{r.n_only_b} | {_num(r.difference)} "
                f"[{_num(r.ci_low)}, {_num(r.ci_high)}] "
                f"| [{_num(r.simul_low)}, {_num(r.simul_high)}] "
                f"| {_p(r.p_adjusted)} | {_p(r.p_value)} "
                f"| {r.test} | {r.wins}/{r.ties}/{r.losses} |"
            )
        return "\n".join(lines)


def _num(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:+.4f}"


def _p(x: float) -> str:
    return "n/a" if math.isnan(x) else (f"{x:.4f}" if x >= 1e-4 else f"{x:.1e}")


def _labels(x: Any, name: str, n: int) -> np.ndarray | pl.Series:
    """Return one label per value: a polars Series as it is (an Arrow array as one), else numpy."""
    if type(x).__module__.startswith("pyarrow"):
        x = pl.Series(name, x)
    if isinstance(x, pl.Series):
        if len(x) != n:
            raise InvalidArgumentError(f"{name}: expected one label per value ({n}), got {len(x)}")
        return x
    arr = np.asarray(x)
    if arr.ndim != 1 or arr.size != n:
        raise InvalidArgumentError(
            f"{name}: expected one label per value ({n}), got shape {arr.shape}"
        )
    return arr


def _series_codes(s: pl.Series) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`_codes` of a polars column of strings or integers in place (None: not one).

    Integers are coded as :func:`_int_codes` codes them; text (:func:`.._keys.label_text`) in
    polars' own buffers (:func:`.._keys.string_codes`, sorted byte-wise: UTF-8's byte order is
    the code-point order numpy sorts strings by). Only the distinct labels become numpy
    strings. Other columns are left to the numpy path (None), so a column gives what
    ``np.asarray`` of it gives.
    """
    if s.dtype.is_integer() and len(s) and not s.null_count():
        return _int_codes(s.to_numpy())
    text = label_text(s)
    if text is None:
        return None
    codes, first = string_codes(text)
    return codes, text.gather(first).to_numpy().astype(str)


def _text(arr: np.ndarray) -> np.ndarray:
    """Return labels as a numpy string array (``astype(str)``; strings as they are)."""
    return arr if arr.dtype.kind == "U" else arr.astype(str)


def _codes(arr: np.ndarray | pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """Return the code of each label and the sorted distinct labels, as ``np.unique`` does.

    The labels are coded in order of first appearance by their fixed-width bytes
    (``_core.stats.factorize_fixed``: a hash table that compares the bytes, O(n), no sort of
    the n labels); only the distinct labels are sorted, as strings.
    """
    if isinstance(arr, pl.Series):
        coded = _series_codes(arr)
        if coded is not None:
            return coded
        arr = arr.to_numpy()
    if arr.dtype.kind in "iu" and arr.size:
        return _int_codes(arr.reshape(-1))
    text = _text(arr)
    n, width = text.size, text.dtype.itemsize
    if n == 0 or width == 0:
        levels, codes = np.unique(text, return_inverse=True)
        return codes.ravel().astype(np.int64), levels
    flat = np.ascontiguousarray(text).reshape(-1)
    codes, first = _core.stats.factorize_fixed(flat.view(np.uint8), width)
    rank, levels = _string_ranks(flat[first])
    if np.array_equal(rank, np.arange(rank.size)):  # first seen in sorted order (a sorted
        return codes, levels  # column): the codes are already the ranks
    return rank[codes], levels


def _string_ranks(levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return each distinct label's rank in string order, and the labels in that order."""
    order = np.argsort(levels, kind="stable")
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return rank, levels[order]


def _int_codes(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_codes` of integer labels, without a string per row: the same codes and levels.

    The distinct values are found by a presence table over their range where it is compact
    (``_core.stats.compact_distinct``; any integer that fits 64 signed bits), else by their
    eight bytes (``factorize_fixed``); only they are turned into strings and sorted as
    strings, the order ``astype(str)`` would give.
    """
    if arr.dtype.kind == "i" or arr.dtype.itemsize < 8:  # every value fits int64
        ints = np.ascontiguousarray(arr, dtype=np.int64)
        values = _core.stats.compact_distinct(ints)
        if values is not None:
            rank, names = _string_ranks(values.astype(str))
            return _core.stats.compact_codes(ints, values, rank), names
    ints = np.ascontiguousarray(arr, dtype=np.int64 if arr.dtype.kind == "i" else np.uint64)
    codes, first = _core.stats.factorize_fixed(ints.view(np.uint8), 8)
    rank, names = _string_ranks(ints[first].astype(str))
    return rank[codes], names


def _key_codes(
    tasks: np.ndarray | pl.Series | None, items: np.ndarray | pl.Series
) -> tuple[np.ndarray, np.ndarray]:
    """Return the code of each (task, item) and the sorted task-US-item labels (US: 0x1F).

    ``tasks`` None: every row's task is ``OVERALL`` (nothing to code).
    """
    i_code, i_levels = _codes(items)
    if tasks is None:
        # one task: every item level occurs, and a common prefix keeps their sorted order
        return i_code, np.char.add(OVERALL + "\x1f", i_levels)
    t_code, t_levels = _codes(tasks)
    pair = t_code * i_levels.size + i_code
    size = t_levels.size * i_levels.size
    if size <= 4 * pair.size + 1024:  # O(n + size): which pairs occur, and their dense codes
        seen = np.zeros(size, dtype=bool)
        seen[pair] = True
        present = np.flatnonzero(seen)
        pair_of = (np.cumsum(seen) - 1)[pair]
    else:
        present, pair_of = np.unique(pair, return_inverse=True)
    labels = np.char.add(np.char.add(t_levels[present // i_levels.size], "\x1f"),
                         i_levels[present % i_levels.size])  # fmt: skip
    rank, levels = _string_ranks(labels)
    return rank[pair_of.ravel()], levels


def _raise_repeat(pair_code: np.ndarray, names: list[str], keys: np.ndarray, n: int) -> NoReturn:
    """Raise the error of a (model, task, item) given twice: the first such pair, by code."""
    size = len(names) * keys.size
    if size <= 4 * n + 1024:
        counts = np.bincount(pair_code, minlength=size)
        uniq = np.arange(size)
    else:
        uniq, counts = np.unique(pair_code, return_counts=True)
    dup = int(uniq[np.argmax(counts > 1)])
    mi, ki = divmod(dup, keys.size)
    task, item = keys[ki].split("\x1f", 1)
    raise InvalidArgumentError(
        f"model {names[mi]!r}, task {task!r}, item {item!r}: expected one row per model "
        f"and item, got {int(counts.max())}"
    )


def compare(
    values: Any,
    *,
    models: Any,
    items: Any,
    tasks: Any = None,
    clusters: Any = None,
    baseline: str | None = None,
    correction: Correction = "holm",
    options: BootstrapOptions | None = None,
    n_permutations: int = 10_000,
    progress: Callable[[int, int], None] | None = None,
) -> Comparison:
    """Compare every pair of models (or each against ``baseline``) on the items they share.

    Parameters
    ----------
    values : array_like
        One score per (model, item) row, e.g. 0/1 correctness or a per-item metric.
    models, items : array_like
        The model and the item identity of each row; an item is the same item for two
        models when its label (within its task) is equal.
    tasks : array_like, optional
        The task of each row: comparisons per task, then over all tasks (``"overall"``, items
        keyed by task and item). Without it, one ``"overall"`` family.
    clusters : array_like, optional
        A cluster (e.g. patient) per row: the bootstrap resamples clusters and the permutation
        test flips a cluster's signs together. An item must have one cluster for every model.
    baseline : str, optional
        Compare each other model against this one only (a - baseline).
    correction : {"holm", "bonferroni", "bh", "none"}, default "holm"
        Adjustment of ``p_value`` within each task's family of comparisons.
    options : BootstrapOptions, optional
        Bootstrap resamples, level, interval method and seed (default ``BootstrapOptions()``).
    n_permutations : int, default 10000
        Sign patterns of the permutation test (all of them when there are fewer); 0 skips the
        test (``p_permutation`` NaN; ``test`` is then "bootstrap" where it would have been
        "sign-flip"), which is what makes thousands of pairs over large item sets fast.
    progress : callable, optional
        Called as ``progress(done, total)`` after each comparison (a pair within a task's
        family; ``total`` = families x pairs), e.g. to show progress of a long run. It cannot
        change the result.

    Returns
    -------
    Comparison
        One row per task and pair, with how the comparison was made.

    Raises
    ------
    InvalidArgumentError
        Arrays of different lengths, non-finite values, a (model, task, item) row given twice,
        an item in two clusters, fewer than two models, an unknown baseline or correction.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1:
        raise InvalidArgumentError(f"values: expected a 1-D array, got {v.ndim}-D")
    if not np.isfinite(v).all():
        bad = int(np.flatnonzero(~np.isfinite(v))[0])
        raise InvalidArgumentError(f"values: expected finite numbers, row {bad} is {v[bad]}")
    n = v.size
    m = _labels(models, "models", n)
    it = _labels(items, "items", n)
    tk = _labels(tasks, "tasks", n) if tasks is not None else None
    cl = _labels(clusters, "clusters", n) if clusters is not None else None
    if correction not in CORRECTIONS:
        raise InvalidArgumentError(
            f"correction: expected one of {', '.join(CORRECTIONS)}, got {correction!r}"
        )
    opts = BootstrapOptions.resolve(options)
    if (
        isinstance(n_permutations, bool)
        or not isinstance(n_permutations, int)
        or n_permutations < 0
    ):
        raise InvalidArgumentError(
            f"n_permutations: expected an integer >= 0, got {n_permutations!r}"
        )
    model_idx, levels = _codes(m)
    names = levels.tolist()
    if len(names) < 2:
        raise InvalidArgumentError(f"models: expected at least two models, got {names}")
    if baseline is not None and baseline not in names:
        raise InvalidArgumentError(
            f"baseline: expected one of the models {names}, got {baseline!r}"
        )
    # one key per (task, item); each (model, key) at most once
    key_of, keys = _key_codes(tk, it)
    # table[model, key] = value, NaN where the model has no row for the key (v has no NaN: a
    # cell set twice is a repeated row), and whether every value is 0 or 1
    table, no_repeat, binary = _core.stats.value_table(model_idx, key_of, v, len(names),
                                                       keys.size)  # fmt: skip
    if not no_repeat:
        _raise_repeat(model_idx * keys.size + key_of, names, keys, n)
    key_cluster: np.ndarray | None = None
    if cl is not None:
        # every row of a key names the key's cluster: compare each row with the key's first row
        cl_code, cl_levels = _codes(cl)
        key_cluster_code, bad = _core.stats.key_clusters(key_of, cl_code, keys.size)
        key_cluster = cl_levels[key_cluster_code]
        if bad >= 0:
            k_i = int(key_of[bad])
            task, item = keys[k_i].split("\x1f", 1)
            raise InvalidArgumentError(
                f"task {task!r}, item {item!r}: expected one cluster for every model, got "
                f"{str(key_cluster[k_i])!r} and {str(cl_levels[cl_code[bad]])!r}"
            )
    if tk is None:
        key_task = np.full(keys.size, OVERALL)
    else:
        key_task = np.array([k.split("\x1f", 1)[0] for k in keys.tolist()])
    task_names = sorted(set(key_task.tolist()))
    families = [(t, key_task == t) for t in task_names if t != OVERALL]
    families.append((OVERALL, np.ones(keys.size, dtype=bool)))
    if baseline is None:
        pairs = list(itertools.combinations(range(len(names)), 2))
    else:
        b_i = names.index(baseline)
        pairs = [(a_i, b_i) for a_i in range(len(names)) if a_i != b_i]
    rows: list[ComparisonRow] = []
    total, done = len(families) * len(pairs), 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    for task, in_task in families:
        family: list[ComparisonRow] = []
        # (the whole table where the family is every key: a view, not a copy)
        sub = table if in_task.all() else table[:, in_task]
        joint = _joint(sub, keys[in_task], key_cluster, in_task, opts, binary=binary)
        if joint is not None and opts.method != "bca" and sub.size:
            # every model has every item: all pairs at once from the shared resamples
            family, band = _complete_family(task, pairs, names, sub, key_cluster, in_task,
                                            binary, opts, n_permutations, joint, tick)  # fmt: skip
        else:
            for a_i, b_i in pairs:
                family.append(_pair(task, (a_i, b_i), names, table, in_task, key_cluster,
                                    binary, opts, n_permutations, joint))  # fmt: skip
                tick()
            band = _band(joint, pairs, opts.level)
        adjusted = adjust_pvalues([r.p_value for r in family], correction)
        rows += [_with_adjusted(r, float(p), band.get(pair))
                 for r, p, pair in zip(family, adjusted, pairs, strict=True)]  # fmt: skip
    return Comparison(rows=tuple(rows), correction=correction,
                      outcome="binary" if binary else "continuous", clustered=cl is not None,
                      options=opts, n_permutations=n_permutations)  # fmt: skip


def _with_adjusted(row: ComparisonRow, p: float, band: tuple[float, float] | None) -> ComparisonRow:
    extra = {"simul_low": band[0], "simul_high": band[1]} if band is not None else {}
    return replace(row, p_adjusted=p, **extra)


#: Pairs whose sign-flip tests run together (their differences held at once).
_FLIP_BLOCK = 64


@dataclass(frozen=True)
class _Joint:
    """Every model of a family bootstrapped on shared Poisson resamples (complete families)."""

    dist: np.ndarray  # [models, B valid]
    est: np.ndarray  # [models]
    n_units: int


def _joint(
    sub: np.ndarray,
    key_labels: np.ndarray,
    key_cluster: np.ndarray | None,
    in_task: np.ndarray,
    opts: BootstrapOptions,
    *,
    binary: bool = False,
) -> _Joint | None:
    """Bootstrap every model at once where every model has every item (else None).

    ``binary``: every value of the comparison is 0 or 1 (then integral, not checked again).

    Each item (or cluster) gets the weight Poisson(1) keyed by (seed, key, resample), the
    same for every model, so the difference of two models' resampled means is a paired
    resample: one engine call serves every pair of the family.
    """
    n_models, n_keys = sub.shape
    if n_keys == 0 or np.isnan(sub).any():
        return None
    if binary or _integral(sub):
        return _joint_by_units(sub, key_labels, key_cluster, in_task, opts, binary=binary)
    groups = np.repeat(np.arange(n_models), n_keys)
    if key_cluster is not None:
        clusters = np.tile(key_cluster[in_task].astype(str), n_models)
        rec_keys = clusters
    else:
        clusters, rec_keys = None, np.tile(key_labels.astype(str), n_models)
    res = bootstrap(sub.ravel(), groups=groups, clusters=clusters, scheme="poisson",
                    keys=rec_keys, options=opts, return_distribution=True)  # fmt: skip
    order = np.argsort(np.asarray(res.keys["groups"]).astype(int))
    dist = np.asarray(res.distribution)[order]
    dist = dist[:, ~np.isnan(dist).any(axis=0)]
    n_units = int(np.asarray(res.n_units)[order][0])
    return _Joint(dist=dist, est=np.asarray(res.estimate, dtype=np.float64)[order],
                  n_units=n_units)  # fmt: skip


def _integral(sub: np.ndarray) -> bool:
    """Whether every resampled sum of ``sub`` is an exact float64 integer (e.g. 0/1 outcomes)."""
    if not np.array_equal(sub, np.round(sub)):
        return False
    return float(np.abs(sub).max(initial=0.0)) * sub.shape[1] * 64.0 < 2.0**53


def _joint_by_units(
    sub: np.ndarray,
    key_labels: np.ndarray,
    key_cluster: np.ndarray | None,
    in_task: np.ndarray,
    opts: BootstrapOptions,
    *,
    binary: bool = False,
) -> _Joint:
    """Bootstrap integer-valued outcomes jointly as the engine does, by matrix products.

    Bit-identical to :func:`bootstrap` with ``scheme="poisson"`` on every model's records: the
    engine draws each unit's (cluster's, else item's) Poisson(1) weight keyed by (seed, unit
    key, resample), the same for every model, and sums exactly. Here the engine draws the
    weights once per unit (not once per unit and model; :func:`._shared.weighted_sums`), and
    every model's resampled sums are one product ``W^T S`` of the weights (units x B) with
    the per-unit sums (units x models); integer values keep every sum exact (checked by
    :func:`_integral`), so the order of the additions cannot change a bit.
    """
    n_models, n_keys = sub.shape
    if key_cluster is not None:
        unit_of, units = _codes(key_cluster[in_task])  # np.unique's levels and inverse
        cols = label_columns(units, name="clusters", n=units.size)
        unit_keys = combine_hashes([hash_labels(v) for v in cols.values()])
    else:
        units, unit_of = key_labels.astype(str), np.arange(n_keys)
        unit_keys = _validate.record_keys(units, units.size)
    unit_of = unit_of.ravel()
    g = units.size
    sums = np.empty((g, n_models))
    for m in range(n_models):
        sums[:, m] = np.bincount(unit_of, weights=sub[m], minlength=g)
    sizes = np.bincount(unit_of, minlength=g).astype(np.float64)
    # float32 sums are exact too while every partial sum stays below 2^24 (a weight is at
    # most 15): twice the vector width of float64
    top = 1.0 if binary else max(float(np.abs(sub).max(initial=0.0)), 1.0)
    bound = top * n_keys * 16.0
    dtype = np.float32 if bound < 2.0**24 else np.float64
    unit_cols = np.concatenate([sums, sizes[:, None]], axis=1).astype(dtype)
    # (B x units) weights @ (units x (models + 1)): exact integer sums, the models' sums and
    # the resampled sizes at once
    num = _shared.weighted_sums(unit_keys, unit_cols, opts).astype(np.float64)
    num, den = num[:, :n_models], num[:, n_models]
    with np.errstate(invalid="ignore", divide="ignore"):
        dist = (num / den[:, None]).T
    dist = np.ascontiguousarray(dist[:, den > 0])
    est = sums.sum(axis=0) / sizes.sum()
    return _Joint(dist=dist, est=est, n_units=int(g))


def _pair_arrays(joint: _Joint, pairs: list[tuple[int, int]]) -> dict[str, Any]:
    """Every pair's resampled differences summarised (``_core.stats.pair_summaries``)."""
    a = np.fromiter((p[0] for p in pairs), dtype=np.int64, count=len(pairs))
    b = np.fromiter((p[1] for p in pairs), dtype=np.int64, count=len(pairs))
    return {"a": a, "b": b, "d": joint.est[a] - joint.est[b]}


def _band(
    joint: _Joint | None,
    pairs: list[tuple[int, int]],
    level: float,
) -> dict[tuple[int, int], tuple[float, float]]:
    """Max-T simultaneous band of every pair's difference (empty without a joint bootstrap)."""
    if joint is None or joint.dist.shape[1] < 2:
        return {}
    x = _pair_arrays(joint, pairs)
    s = _core.stats.pair_summaries(joint.dist, x["a"], x["b"], x["d"], 0.0, 1.0)
    return _band_of(s["max_ratio"] if s["any_live"] else None, x["d"], s["se"], pairs, level)


def _band_of(
    max_ratio: np.ndarray | None,
    d: np.ndarray,
    se: np.ndarray,
    pairs: list[tuple[int, int]],
    level: float,
) -> dict[tuple[int, int], tuple[float, float]]:
    """Return the band d +- c se, c the ``level`` quantile of ``max_ratio``.

    ``max_ratio`` holds, per resample, the maximum over the pairs with se > 0 of
    ``|d* - d| / se`` (Romano & Wolf 2005's max-T); None where no pair has se > 0: then every
    pair's band is its difference.
    """
    if max_ratio is None:
        return {p: (float(x), float(x)) for p, x in zip(pairs, d, strict=True)}
    c = float(np.quantile(max_ratio, level))
    return {p: (float(x - c * e), float(x + c * e)) for p, x, e in zip(pairs, d, se, strict=True)}


@dataclass(frozen=True)
class _Diff:
    """A pair's difference, its bootstrap interval, standard error and p-value."""

    difference: float
    ci_low: float
    ci_high: float
    se: float
    p_value: float
    n_units: int


def _from_joint(joint: _Joint, a: int, b: int, opts: BootstrapOptions) -> _Diff:
    """Return the pair's paired bootstrap from the family's shared resamples.

    The p-value is (1 + #{|d* - d| >= |d|}) / (1 + B), as :func:`paired_bootstrap`'s.
    """
    d = float(joint.est[a] - joint.est[b])
    dstar = joint.dist[a] - joint.dist[b]
    alpha = 1.0 - opts.level
    # the interval as _complete_family takes it (np.quantile's values)
    q = _core.stats.row_quantile_pair(dstar[None, :], alpha / 2.0, 1.0 - alpha / 2.0,
                                      opts.engine_threads)  # fmt: skip
    lo, hi = float(q[0][0]), float(q[1][0])
    if opts.method == "basic":
        lo, hi = 2.0 * d - hi, 2.0 * d - lo
    se = float(dstar.std(ddof=1)) if dstar.size > 1 else float("nan")
    extreme = int(np.count_nonzero(np.abs(dstar - d) >= abs(d)))
    p = 1.0 if joint.n_units < 2 or (se == 0 and d == 0) else (1.0 + extreme) / (1.0 + dstar.size)
    return _Diff(d, lo, hi, se, min(1.0, p), joint.n_units)


def _pair(
    task: str,
    pair: tuple[int, int],
    names: list[str],
    table: np.ndarray,
    in_task: np.ndarray,
    key_cluster: np.ndarray | None,
    binary: bool,
    opts: BootstrapOptions,
    n_permutations: int,
    joint: _Joint | None,
) -> ComparisonRow:
    a_i, b_i = pair
    a, b = names[a_i], names[b_i]
    va_all, vb_all = table[a_i], table[b_i]
    has_a = in_task & ~np.isnan(va_all)
    has_b = in_task & ~np.isnan(vb_all)
    both = has_a & has_b
    va, vb = va_all[both], vb_all[both]
    n_only_a = int(np.count_nonzero(has_a & ~has_b))
    n_only_b = int(np.count_nonzero(has_b & ~has_a))
    clusters = key_cluster[both] if key_cluster is not None else None
    nan = float("nan")
    if va.size == 0:
        return ComparisonRow(task, a, b, 0, n_only_a, n_only_b, 0, nan, nan, nan, nan, nan, nan,
                             nan, nan, nan, "none", nan, nan, 0, 0, 0, nan)  # fmt: skip
    if joint is not None and opts.method != "bca":
        diff = _from_joint(joint, a_i, b_i, opts)
    else:  # items missing for some model, or BCa: this pair's own paired bootstrap
        boot = paired_bootstrap(va, vb, clusters=clusters, options=opts)
        diff = _Diff(float(boot.difference), float(boot.ci_low), float(boot.ci_high),
                     float(boot.se), float(boot.p_value), int(boot.n_units))  # fmt: skip
    p_perm = nan
    if n_permutations:
        p_perm = sign_flip_test(va - vb, clusters=clusters, n_resamples=n_permutations,
                                seed=opts.seed).p_value  # fmt: skip
    p_mc = p_mid = nan
    if binary:
        mc = mcnemar(va, vb)
        p_mc, p_mid = mc.p_value, mc.p_mid
    if binary and clusters is None:
        test, p = "mcnemar", p_mc
    elif n_permutations:
        test, p = "sign-flip", p_perm
    else:
        test, p = "bootstrap", diff.p_value
    return ComparisonRow(
        task=task, model_a=a, model_b=b, n_matched=int(va.size), n_only_a=n_only_a,
        n_only_b=n_only_b, n_units=diff.n_units, mean_a=float(va.mean()),
        mean_b=float(vb.mean()), difference=diff.difference, ci_low=diff.ci_low,
        ci_high=diff.ci_high, p_bootstrap=diff.p_value,
        p_permutation=float(p_perm), p_mcnemar=float(p_mc), p_mcnemar_mid=float(p_mid),
        test=test, p_value=float(p), p_adjusted=nan, wins=int(np.count_nonzero(va > vb)),
        ties=int(np.count_nonzero(va == vb)), losses=int(np.count_nonzero(va < vb)),
        mde=(norm_ppf(0.5 + opts.level / 2.0) + norm_ppf(0.8)) * diff.se,
    )  # fmt: skip


def _complete_family(
    task: str,
    pairs: list[tuple[int, int]],
    names: list[str],
    sub: np.ndarray,
    key_cluster: np.ndarray | None,
    in_task: np.ndarray,
    binary: bool,
    opts: BootstrapOptions,
    n_permutations: int,
    joint: _Joint,
    tick: Callable[[], None],
) -> tuple[list[ComparisonRow], dict[tuple[int, int], tuple[float, float]]]:
    """Every pair of a family where every model has every item, vectorised over the pairs.

    The same numbers as :func:`_pair` with :func:`_from_joint`: intervals, standard errors and
    bootstrap p-values of every pair in one compiled pass over the shared resamples; McNemar's
    discordant counts (and wins/ties/losses of 0/1 outcomes) from the overlaps of the models'
    outcome rows. Returns the rows and the family's simultaneous band (:func:`_band`).
    """
    n_keys = sub.shape[1]
    alpha = 1.0 - opts.level
    x = _pair_arrays(joint, pairs)
    d = x["d"]
    # every pair's d* = dist[a] - dist[b] summarised in the compiled core, pairs in parallel,
    # without the [pairs, B] array: np.quantile(d*, [alpha / 2, 1 - alpha / 2]),
    # d*.std(ddof=1) and #{|d* - d| >= |d|} bit for bit, and the per-resample maximum of
    # |d* - d| / se behind the max-T band
    s = _core.stats.pair_summaries(joint.dist, x["a"], x["b"], d, alpha / 2.0,
                                   1.0 - alpha / 2.0, opts.engine_threads)  # fmt: skip
    lo, hi, se = s["low"], s["high"], s["se"]
    if opts.method == "basic":
        lo, hi = 2.0 * d - hi, 2.0 * d - lo
    size = joint.dist.shape[1]
    p_boot = np.minimum(1.0, (1.0 + s["extreme"]) / (1.0 + size))
    p_boot = np.where((joint.n_units < 2) | ((se == 0) & (d == 0)), 1.0, p_boot)
    means = [float(row.mean()) for row in sub]
    clusters = key_cluster[in_task] if key_cluster is not None else None
    if binary:
        # items both got right, per pair of models: sub @ sub.T of the 0/1 rows as bit sets
        # (no BLAS call: its worker threads would spin on the cores the engine then uses)
        both = _core.stats.nonzero_overlaps(sub, opts.engine_threads)
        right = sub.sum(axis=1)
        # McNemar's discordant counts of every pair, and its exact p-values (mcnemar_counts)
        pa, pb = x["a"], x["b"]
        disc_a = (right[pa] - both[pa, pb]).astype(np.int64)
        disc_b = (right[pb] - both[pa, pb]).astype(np.int64)
        mc_p, mc_mid = mcnemar_many(n_keys, disc_a, disc_b)
    z = norm_ppf(0.5 + opts.level / 2.0) + norm_ppf(0.8)
    nan = float("nan")
    rows = []
    # the permutation test's clusters, coded once for every pair (sign_flip_test codes them
    # with np.unique and sums each cluster's differences with np.bincount: the same sums)
    cluster_of = None
    if n_permutations and clusters is not None:
        cluster_of = _codes(clusters)[0]  # np.unique's inverse
    p_perms = [nan] * len(pairs)
    for start in range(0, len(pairs) if n_permutations else 0, _FLIP_BLOCK):
        # the sign-flip tests of a block of pairs on the patterns they share (the same seed
        # and units; sign_flip_many), from each pair's differences and unit sums
        block = pairs[start : start + _FLIP_BLOCK]
        diffs = [sub[a_i] - sub[b_i] for a_i, b_i in block]
        unit_sums = np.stack([diff if cluster_of is None else np.bincount(cluster_of, weights=diff)
                              for diff in diffs])  # fmt: skip
        flips = sign_flip_many(diffs, unit_sums, n_resamples=n_permutations, seed=opts.seed)
        p_perms[start : start + len(block)] = [f.p_value for f in flips]
    for i, (a_i, b_i) in enumerate(pairs):
        p_perm = p_perms[i]
        p_mc = p_mid = nan
        if binary:
            only_a, only_b = int(disc_a[i]), int(disc_b[i])
            p_mc, p_mid = float(mc_p[i]), float(mc_mid[i])
            wins, losses = only_a, only_b
            ties = n_keys - wins - losses
        else:
            va, vb = sub[a_i], sub[b_i]
            wins, ties = int(np.count_nonzero(va > vb)), int(np.count_nonzero(va == vb))
            losses = n_keys - wins - ties
        if binary and clusters is None:
            test, p = "mcnemar", p_mc
        elif n_permutations:
            test, p = "sign-flip", p_perm
        else:
            test, p = "bootstrap", float(p_boot[i])
        rows.append(ComparisonRow(
            task=task, model_a=names[a_i], model_b=names[b_i], n_matched=n_keys, n_only_a=0,
            n_only_b=0, n_units=joint.n_units, mean_a=means[a_i], mean_b=means[b_i],
            difference=float(d[i]), ci_low=float(lo[i]), ci_high=float(hi[i]),
            p_bootstrap=float(p_boot[i]), p_permutation=float(p_perm), p_mcnemar=float(p_mc),
            p_mcnemar_mid=float(p_mid), test=test, p_value=float(p), p_adjusted=nan,
            wins=wins, ties=ties, losses=losses, mde=z * float(se[i]),
        ))  # fmt: skip
        tick()
    band: dict[tuple[int, int], tuple[float, float]] = {}
    if size > 1:
        band = _band_of(s["max_ratio"] if s["any_live"] else None, d, se, pairs, opts.level)
    return rows, band
