"""Inter-rater agreement statistics with bootstrap confidence intervals.

Every statistic here is a function of column sums of per-item sufficient statistics: the
functions in this module build one row of numbers per item (vectorized, no Python loop over items)
and hand the row matrix to the compiled bootstrap engine, which resamples items, sums the rows and
evaluates the statistic in C++ (``csrc/stats/agreement.cpp``). The layouts of the rows are
documented next to each builder and in the C++ classes; they must stay in sync.

Labels may be integers, floats or strings. Missing ratings are ``None`` or ``NaN`` (and, for
string arrays, the string ``"nan"``, which is what NumPy turns ``np.nan`` into inside a string
array). Unless ``categories`` is given, the categories are the distinct observed labels in sorted
order (:func:`numpy.unique`); the order matters for weighted kappa and ordinal alpha.

References
----------
Byrt, T., Bishop, J. and Carlin, J. B. (1993). Bias, prevalence and kappa. Journal of Clinical
    Epidemiology, 46(5), 423-429.
Cohen, J. (1960). A coefficient of agreement for nominal scales. Educational and Psychological
    Measurement, 20(1), 37-46.
Cohen, J. (1968). Weighted kappa: nominal scale agreement with provision for scaled disagreement
    or partial credit. Psychological Bulletin, 70(4), 213-220.
Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters. Psychological
    Bulletin, 76(5), 378-382.
Gwet, K. L. (2008). Computing inter-rater reliability and its variance in the presence of high
    agreement. British Journal of Mathematical and Statistical Psychology, 61(1), 29-48.
Krippendorff, K. (2011). Computing Krippendorff's alpha-reliability. Departmental Papers (ASC),
    Annenberg School for Communication, University of Pennsylvania.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "AgreementResult",
    "cohen_kappa",
    "fleiss_kappa",
    "gwet_ac1",
    "krippendorff_alpha",
    "mean_pairwise_agreement",
    "pabak",
    "rating_table",
]

KappaWeights = Literal["linear", "quadratic"]
Level = Literal["nominal", "ordinal", "interval", "ratio"]

# Metric codes understood by the C++ "krippendorff_alpha" statistic.
_METRIC_CODES: dict[str, int] = {"nominal": 0, "ordinal": 1, "interval": 2, "ratio": 3}


@dataclass(frozen=True)
class AgreementResult:
    """An agreement estimate with its bootstrap confidence interval.

    Attributes
    ----------
    statistic : str
        Name of the statistic (``"cohen_kappa"``, ``"fleiss_kappa"``, ...).
    estimate : float
        The statistic on the full data; NaN where it is undefined (e.g. kappa when both raters
        use a single category).
    ci_low, ci_high : float
        Bootstrap confidence limits at ``level``; NaN when ``ci=False``.
    se : float
        Bootstrap standard error; NaN when ``ci=False``.
    n_items : int
        Number of items (units, subjects) that entered the computation and were resampled.
    n_resamples : int
        Bootstrap resamples drawn; 0 when ``ci=False``.
    level : float
        Confidence level of the interval.
    method : str
        Bootstrap interval method.
    """

    statistic: str
    estimate: float
    ci_low: float
    ci_high: float
    se: float
    n_items: int
    n_resamples: int
    level: float
    method: str


@dataclass(frozen=True)
class _Prepared:
    """Per-item sufficient-statistic rows and the parameters of one C++ statistic."""

    statistic: str
    rows: npt.NDArray[np.float64]  # (n_items, k), C-contiguous float64
    params: npt.NDArray[np.float64]  # 1-D float64


# ------------------------------------------------------------------------------------------------
# Label handling


def _missing_mask(values: np.ndarray, name: str) -> npt.NDArray[np.bool_]:
    """True where ``values`` holds a missing rating (None, NaN, or the string "nan")."""
    kind = values.dtype.kind
    if kind in "iub":
        return np.zeros(values.shape, dtype=bool)
    if kind == "f":
        return np.isnan(values)
    if kind in "US":
        return values == values.dtype.type("nan")
    if kind == "O":
        is_none = np.equal(values, None)
        # NaN is the only value that is not equal to itself.
        not_self = np.not_equal(values, values)
        return np.asarray(is_none | not_self, dtype=bool)
    raise ValueError(
        f"{name}: expected integer, float, string or object labels, got dtype {values.dtype}"
    )


def _encode(
    values: np.ndarray, categories: Sequence[Any] | npt.ArrayLike | None, name: str
) -> tuple[npt.NDArray[np.int64], np.ndarray]:
    """Map labels to category codes 0..q-1 (-1 for missing).

    Without ``categories`` the categories are the sorted distinct non-missing labels; with them,
    their order is kept and every non-missing label must be one of them.
    """
    missing = _missing_mask(values, name)
    present = values[~missing]
    try:
        observed, inverse = np.unique(present, return_inverse=True)
    except TypeError as exc:  # e.g. a mixture of strings and numbers in an object array
        raise ValueError(f"{name}: labels must be mutually comparable ({exc})") from exc
    if categories is None:
        cats = observed
        present_codes = inverse.reshape(-1).astype(np.int64)
    else:
        cats = np.asarray(categories)
        if cats.ndim != 1 or cats.size == 0:
            raise ValueError("categories: expected a non-empty 1-D sequence of labels")
        position = {c.item() if isinstance(c, np.generic) else c: i for i, c in enumerate(cats)}
        if len(position) != cats.size:
            raise ValueError("categories: labels must be distinct")
        lookup = np.empty(observed.size, dtype=np.int64)
        for j, label in enumerate(observed):  # loop over distinct labels, not items
            key = label.item() if isinstance(label, np.generic) else label
            if key not in position:
                raise ValueError(f"{name}: label {key!r} is not one of categories")
            lookup[j] = position[key]
        present_codes = lookup[inverse.reshape(-1)]
    codes = np.full(values.shape, -1, dtype=np.int64)
    codes[~missing] = present_codes
    return codes, cats


def _as_label_array(x: npt.ArrayLike, name: str, ndim: int) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != ndim:
        shape = "(n_items,)" if ndim == 1 else "(n_items, n_raters)"
        raise ValueError(
            f"{name}: expected a {ndim}-D array of shape {shape}, got shape {arr.shape}"
        )
    if arr.size == 0:
        raise ValueError(f"{name}: expected at least one item, got an empty array")
    return arr


def _two_rater_codes(
    rater_a: npt.ArrayLike, rater_b: npt.ArrayLike, categories: Any
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], np.ndarray]:
    a = _as_label_array(rater_a, "rater_a", 1)
    b = _as_label_array(rater_b, "rater_b", 1)
    if a.shape != b.shape:
        raise ValueError(
            f"rater_a and rater_b: expected the same number of items, got {a.size} and {b.size}"
        )
    numeric = a.dtype.kind in "biuf" and b.dtype.kind in "biuf"
    if a.dtype == b.dtype or numeric:
        both = np.concatenate([a, b])
    else:  # e.g. strings and None-padded objects: compare as Python objects
        both = np.concatenate([a.astype(object), b.astype(object)])
    codes, cats = _encode(both, categories, "rater_a/rater_b")
    if (codes < 0).any():
        raise ValueError(
            "rater_a/rater_b: missing ratings (None/NaN) are not allowed for two-rater "
            "statistics; drop those items first"
        )
    return codes[: a.size], codes[a.size :], cats


# ------------------------------------------------------------------------------------------------
# Row builders. Each returns the rows and params of one C++ statistic (layouts documented in
# csrc/stats/agreement.cpp).


def _kappa_weights(q: int, weights: KappaWeights | None) -> npt.NDArray[np.float64]:
    """Agreement weights w_ij (1 on the diagonal) for Cohen's (1968) weighted kappa."""
    idx = np.arange(q, dtype=np.float64)
    dist = np.abs(idx[:, None] - idx[None, :]) / (q - 1)
    if weights is None:
        return np.eye(q)
    if weights == "linear":
        return 1.0 - dist
    if weights == "quadratic":
        return 1.0 - dist**2
    raise ValueError(f"weights: expected None, 'linear' or 'quadratic', got {weights!r}")


def _prepare_cohen_kappa(
    rater_a: npt.ArrayLike,
    rater_b: npt.ArrayLike,
    *,
    weights: KappaWeights | None = None,
    categories: Sequence[Any] | None = None,
) -> _Prepared:
    """Rows: one-hot of the confusion cell i*q + j (k = q*q).

    Params: [q, w_00, w_01, ..., w_(q-1)(q-1)] (agreement weights, row-major).
    """
    ca, cb, cats = _two_rater_codes(rater_a, rater_b, categories)
    q = int(cats.size)
    if q < 2:
        raise ValueError(
            f"rater_a/rater_b: Cohen's kappa needs at least 2 categories, got {q}; "
            "pass categories= to declare unobserved ones"
        )
    w = _kappa_weights(q, weights)
    rows = np.zeros((ca.size, q * q), dtype=np.float64)
    rows[np.arange(ca.size), ca * q + cb] = 1.0
    params = np.concatenate([[float(q)], w.reshape(-1)])
    return _Prepared("cohen_kappa", rows, params)


def _prepare_pabak(
    rater_a: npt.ArrayLike, rater_b: npt.ArrayLike, *, n_categories: int | None = None
) -> _Prepared:
    """Rows: [1{a_i == b_i}] (k = 1). Params: [q]."""
    ca, cb, cats = _two_rater_codes(rater_a, rater_b, None)
    observed = int(cats.size)
    if n_categories is None:
        q = observed
    else:
        if isinstance(n_categories, bool) or not isinstance(n_categories, (int, np.integer)):
            raise ValueError(f"n_categories: expected an integer, got {n_categories!r}")
        q = int(n_categories)
        if q < observed:
            raise ValueError(
                f"n_categories: expected at least the {observed} distinct observed labels, got {q}"
            )
    if q < 2:
        raise ValueError(
            f"rater_a/rater_b: PABAK needs at least 2 categories, got {q}; pass n_categories="
        )
    rows = (ca == cb).astype(np.float64).reshape(-1, 1)
    return _Prepared("pabak", rows, np.array([float(q)]))


def _count_table(table: npt.ArrayLike) -> npt.NDArray[np.float64]:
    t = np.asarray(table)
    if t.ndim != 2:
        raise ValueError(
            f"table: expected a 2-D array (n_items, n_categories), got shape {t.shape}"
        )
    if t.shape[0] == 0:
        raise ValueError("table: expected at least one item (row), got none")
    if t.shape[1] < 2:
        raise ValueError(f"table: expected at least 2 categories (columns), got {t.shape[1]}")
    if t.dtype.kind not in "iuf" and t.dtype.kind != "b":
        raise ValueError(f"table: expected numeric counts, got dtype {t.dtype}")
    t = t.astype(np.float64)
    if not np.isfinite(t).all() or (t < 0).any() or (t != np.floor(t)).any():
        raise ValueError("table: expected non-negative integer counts")
    return t


def _prepare_fleiss_kappa(table: npt.ArrayLike) -> _Prepared:
    """Rows: [sum_j n_ij(n_ij - 1), n_i1, ..., n_iq] (k = q + 1). Params: [q, m]."""
    t = _count_table(table)
    raters = t.sum(axis=1)
    m = raters[0]
    if (raters != m).any():
        raise ValueError(
            "table: Fleiss' kappa needs the same number of ratings on every item, got row sums "
            f"from {int(raters.min())} to {int(raters.max())}; use gwet_ac1 or krippendorff_alpha "
            "for missing ratings"
        )
    if m < 2:
        raise ValueError(f"table: Fleiss' kappa needs at least 2 ratings per item, got {int(m)}")
    rows = np.empty((t.shape[0], t.shape[1] + 1), dtype=np.float64)
    rows[:, 0] = (t * (t - 1.0)).sum(axis=1)
    rows[:, 1:] = t
    return _Prepared("fleiss_kappa", rows, np.array([float(t.shape[1]), float(m)]))


def _prepare_gwet_ac1(table: npt.ArrayLike) -> _Prepared:
    """Rows: [a_i, 1{r_i>=2}, r_i1/r_i, ..., r_iq/r_i, 1{r_i>=1}] (k = q + 3). Params: [q].

    a_i = sum_k r_ik (r_ik - 1) / (r_i (r_i - 1)) for r_i >= 2 (else 0). Items without any rating
    carry no information and are dropped.
    """
    t = _count_table(table)
    r = t.sum(axis=1)
    t = t[r > 0]
    r = r[r > 0]
    if t.shape[0] == 0:
        raise ValueError("table: every item has zero ratings")
    if not (r >= 2).any():
        raise ValueError("table: Gwet's AC1 needs at least one item with 2 or more ratings")
    q = t.shape[1]
    pairable = r >= 2
    denom = np.where(pairable, r * (r - 1.0), 1.0)
    rows = np.empty((t.shape[0], q + 3), dtype=np.float64)
    rows[:, 0] = np.where(pairable, (t * (t - 1.0)).sum(axis=1) / denom, 0.0)
    rows[:, 1] = pairable
    rows[:, 2 : q + 2] = t / r[:, None]
    rows[:, q + 2] = 1.0
    return _Prepared("gwet_ac1", rows, np.array([float(q)]))


def _prepare_krippendorff_alpha(
    reliability_data: npt.ArrayLike,
    *,
    level: Level = "nominal",
    value_domain: Sequence[Any] | None = None,
) -> _Prepared:
    """Rows: unit coincidences o_ck(u), index c*q + k (k = q*q). Params: [q, metric, v_1..v_q].

    o_ck(u) = (n_uc n_uk - [c == k] n_uc) / (m_u - 1), n_uc = number of values c in unit u and
    m_u = sum_c n_uc; units with fewer than 2 values are not pairable and are dropped.
    """
    if level not in _METRIC_CODES:
        raise ValueError(f"level: expected one of {sorted(_METRIC_CODES)}, got {level!r}")
    data = np.asarray(reliability_data)
    if data.ndim != 2:
        raise ValueError(
            "reliability_data: expected a 2-D array of shape (n_raters, n_units), got shape "
            f"{data.shape}"
        )
    if data.size == 0:
        raise ValueError("reliability_data: expected at least one rater and one unit, got none")
    codes, cats = _encode(data, value_domain, "reliability_data")
    q = int(cats.size)
    if q < 2:
        raise ValueError(
            f"reliability_data: Krippendorff's alpha needs at least 2 distinct values, got {q}"
        )
    numeric = cats.dtype.kind in "iuf" or (
        cats.dtype.kind == "O" and all(isinstance(v, (int, float, np.number)) for v in cats)
    )
    if level in ("interval", "ratio") and not numeric:
        raise ValueError(f"reliability_data: level={level!r} needs numeric values")
    if level == "ordinal" and not numeric and value_domain is None:
        raise ValueError(
            "value_domain: the ordinal level with non-numeric values needs an explicit ordered "
            "value_domain"
        )
    values = cats.astype(np.float64) if numeric else np.arange(q, dtype=np.float64)
    if level in ("interval", "ratio") and not np.isfinite(values).all():
        raise ValueError("reliability_data: values must be finite")

    n_units = codes.shape[1]
    present = codes >= 0
    unit = np.broadcast_to(np.arange(n_units), codes.shape)[present]
    counts = np.bincount(unit * q + codes[present], minlength=n_units * q).reshape(n_units, q)
    counts = counts.astype(np.float64)
    m = counts.sum(axis=1)
    keep = m >= 2
    if not keep.any():
        raise ValueError("reliability_data: no unit has values from at least 2 raters")
    counts, m = counts[keep], m[keep]
    pairs = counts[:, :, None] * counts[:, None, :]
    diag = np.arange(q)
    pairs[:, diag, diag] -= counts
    rows = (pairs / (m - 1.0)[:, None, None]).reshape(counts.shape[0], q * q)
    params = np.concatenate([[float(q), float(_METRIC_CODES[level])], values])
    return _Prepared("krippendorff_alpha", np.ascontiguousarray(rows), params)


def _prepare_mean_pairwise_agreement(labels: npt.ArrayLike) -> _Prepared:
    """Rows: [agree_1, rated_1, ..., agree_P, rated_P] over rater pairs (k = 2P). Params: [P].

    Items on which no pair of raters both gave a rating are dropped.
    """
    arr = _as_label_array(labels, "labels", 2)
    if arr.shape[1] < 2:
        raise ValueError(f"labels: expected at least 2 raters (columns), got {arr.shape[1]}")
    codes, _ = _encode(arr, None, "labels")
    first, second = np.triu_indices(arr.shape[1], k=1)
    ca, cb = codes[:, first], codes[:, second]
    rated = (ca >= 0) & (cb >= 0)
    agree = rated & (ca == cb)
    keep = rated.any(axis=1)
    if not keep.any():
        raise ValueError("labels: no item was rated by at least 2 raters")
    n_pairs = first.size
    rows = np.empty((int(keep.sum()), 2 * n_pairs), dtype=np.float64)
    rows[:, 0::2] = agree[keep]
    rows[:, 1::2] = rated[keep]
    return _Prepared("mean_pairwise_agreement", rows, np.array([float(n_pairs)]))


# ------------------------------------------------------------------------------------------------
# Engine call


def _run(
    prepared: _Prepared,
    *,
    ci: bool,
    n_resamples: int,
    level: float,
    method: str,
    seed: int,
    threads: int | None,
) -> AgreementResult:
    if ci:
        if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)):
            raise ValueError(f"n_resamples: expected a positive integer, got {n_resamples!r}")
        if n_resamples < 1:
            raise ValueError(f"n_resamples: expected a positive integer, got {n_resamples}")
        if not (isinstance(level, (float, int)) and 0.0 < float(level) < 1.0):
            raise ValueError(f"level: expected a number strictly between 0 and 1, got {level!r}")
    # Imported here so the row builders stay usable without the compiled engine.
    from ._bootstrap import bootstrap_sufficient

    rows = np.ascontiguousarray(prepared.rows, dtype=np.float64)
    params = np.ascontiguousarray(prepared.params, dtype=np.float64)
    res = bootstrap_sufficient(
        rows,
        statistic=prepared.statistic,
        params=params,
        n_resamples=n_resamples,
        level=level,
        method=method,
        seed=seed,
        threads=threads,
        estimate_only=not ci,
    )
    nan = math.nan
    return AgreementResult(
        statistic=prepared.statistic,
        estimate=float(res.estimate[0]),
        ci_low=float(res.ci_low[0]) if ci else nan,
        ci_high=float(res.ci_high[0]) if ci else nan,
        se=float(res.se[0]) if ci else nan,
        n_items=int(rows.shape[0]),
        n_resamples=int(n_resamples) if ci else 0,
        level=float(level),
        method=str(method),
    )


# ------------------------------------------------------------------------------------------------
# Public API


def rating_table(
    labels: npt.ArrayLike, *, categories: Sequence[Any] | None = None
) -> tuple[npt.NDArray[np.int64], np.ndarray]:
    """Count, for every item, how many raters chose each category.

    Parameters
    ----------
    labels : array_like, shape (n_items, n_raters)
        Label given by each rater to each item; ``None``/``NaN`` marks a missing rating.
    categories : sequence, optional
        The categories, in the order of the table's columns. Default: the sorted distinct labels.

    Returns
    -------
    table : ndarray of int64, shape (n_items, q)
        ``table[i, j]`` is the number of raters who put item ``i`` in category ``categories[j]``.
    categories : ndarray, shape (q,)
        The category of each column.
    """
    arr = _as_label_array(labels, "labels", 2)
    codes, cats = _encode(arr, categories, "labels")
    n_items, q = arr.shape[0], int(cats.size)
    present = codes >= 0
    item = np.broadcast_to(np.arange(n_items)[:, None], codes.shape)[present]
    table = np.bincount(item * q + codes[present], minlength=n_items * q).reshape(n_items, q)
    return table.astype(np.int64), cats


def cohen_kappa(
    rater_a: npt.ArrayLike,
    rater_b: npt.ArrayLike,
    *,
    weights: KappaWeights | None = None,
    categories: Sequence[Any] | None = None,
    ci: bool = False,
    n_resamples: int = 1000,
    level: float = 0.95,
    method: str = "percentile",
    seed: int = 0,
    threads: int | None = None,
) -> AgreementResult:
    """Cohen's kappa for two raters (Cohen 1960), optionally weighted (Cohen 1968).

    ``kappa = (p_o - p_e) / (1 - p_e)`` with ``p_o = sum_ij w_ij p_ij`` and
    ``p_e = sum_ij w_ij p_i. p_.j`` over the q x q table of joint proportions ``p_ij``.

    Parameters
    ----------
    rater_a, rater_b : array_like, shape (n_items,)
        Labels of the two raters; no missing values.
    weights : {None, "linear", "quadratic"}, default None
        Agreement weights: identity (unweighted), ``1 - |i-j|/(q-1)`` or ``1 - (i-j)^2/(q-1)^2``,
        where i, j index the categories in order. The same as
        ``statsmodels.stats.inter_rater.cohens_kappa(table, wt="linear" | "quadratic")``.
    categories : sequence, optional
        All categories in order (needed for weighted kappa on labels whose sorted order is not
        the scale order, and to declare categories no rater used). Default: sorted observed labels.
    ci : bool, default False
        Compute a bootstrap confidence interval and standard error by resampling items.
    n_resamples : int, default 1000
        Number of bootstrap resamples (used when ``ci=True``).
    level : float, default 0.95
        Confidence level of the interval.
    method : str, default "percentile"
        Bootstrap interval method, passed to the engine.
    seed : int, default 0
        Seed of the resampling; results are reproducible for a fixed seed and do not depend on
        ``threads``.
    threads : int or None, default None
        Worker threads for the bootstrap (None: the engine's default).

    Returns
    -------
    AgreementResult
        ``estimate`` is NaN when chance agreement is 1 (both raters used one category only).
    """
    prepared = _prepare_cohen_kappa(rater_a, rater_b, weights=weights, categories=categories)
    return _run(
        prepared,
        ci=ci,
        n_resamples=n_resamples,
        level=level,
        method=method,
        seed=seed,
        threads=threads,
    )


def fleiss_kappa(
    table: npt.ArrayLike,
    *,
    ci: bool = False,
    n_resamples: int = 1000,
    level: float = 0.95,
    method: str = "percentile",
    seed: int = 0,
    threads: int | None = None,
) -> AgreementResult:
    """Fleiss' kappa for many raters (Fleiss 1971).

    With ``n_ij`` raters putting item i in category j and m raters per item:
    ``P_i = sum_j n_ij (n_ij - 1) / (m (m - 1))``, ``p_j = sum_i n_ij / (N m)``,
    ``kappa = (mean(P_i) - sum_j p_j^2) / (1 - sum_j p_j^2)``. Equals
    ``statsmodels.stats.inter_rater.fleiss_kappa(table, method="fleiss")``.

    Parameters
    ----------
    table : array_like, shape (n_items, q)
        Counts of ratings per item and category; every row must sum to the same m >= 2.
        Build it from raw labels with :func:`rating_table`.
    ci : bool, default False
        Compute a bootstrap confidence interval and standard error by resampling items.
    n_resamples : int, default 1000
        Number of bootstrap resamples (used when ``ci=True``).
    level : float, default 0.95
        Confidence level of the interval.
    method : str, default "percentile"
        Bootstrap interval method, passed to the engine.
    seed : int, default 0
        Seed of the resampling; results are reproducible for a fixed seed and do not depend on
        ``threads``.
    threads : int or None, default None
        Worker threads for the bootstrap (None: the engine's default).

    Returns
    -------
    AgreementResult
    """
    prepared = _prepare_fleiss_kappa(table)
    return _run(
        prepared,
        ci=ci,
        n_resamples=n_resamples,
        level=level,
        method=method,
        seed=seed,
        threads=threads,
    )


def pabak(
    rater_a: npt.ArrayLike,
    rater_b: npt.ArrayLike,
    *,
    n_categories: int | None = None,
    ci: bool = False,
    n_resamples: int = 1000,
    level: float = 0.95,
    method: str = "percentile",
    seed: int = 0,
    threads: int | None = None,
) -> AgreementResult:
    """Prevalence- and bias-adjusted kappa (Byrt, Bishop & Carlin 1993).

    ``PABAK = (q p_o - 1) / (q - 1)``, which is ``2 p_o - 1`` for two categories; ``p_o`` is the
    proportion of items on which the two raters agree.

    Parameters
    ----------
    rater_a, rater_b : array_like, shape (n_items,)
        Labels of the two raters; no missing values.
    n_categories : int, optional
        Number of categories q of the scale. Default: the number of distinct observed labels.
    ci : bool, default False
        Compute a bootstrap confidence interval and standard error by resampling items.
    n_resamples : int, default 1000
        Number of bootstrap resamples (used when ``ci=True``).
    level : float, default 0.95
        Confidence level of the interval.
    method : str, default "percentile"
        Bootstrap interval method, passed to the engine.
    seed : int, default 0
        Seed of the resampling; results are reproducible for a fixed seed and do not depend on
        ``threads``.
    threads : int or None, default None
        Worker threads for the bootstrap (None: the engine's default).

    Returns
    -------
    AgreementResult
    """
    prepared = _prepare_pabak(rater_a, rater_b, n_categories=n_categories)
    return _run(
        prepared,
        ci=ci,
        n_resamples=n_resamples,
        level=level,
        method=method,
        seed=seed,
        threads=threads,
    )


def gwet_ac1(
    table: npt.ArrayLike,
    *,
    ci: bool = False,
    n_resamples: int = 1000,
    level: float = 0.95,
    method: str = "percentile",
    seed: int = 0,
    threads: int | None = None,
) -> AgreementResult:
    """Gwet's AC1 for any number of raters, missing ratings allowed (Gwet 2008).

    With ``r_ik`` ratings of item i in category k and ``r_i = sum_k r_ik``:
    ``p_a`` is the mean over items with ``r_i >= 2`` of
    ``sum_k r_ik (r_ik - 1) / (r_i (r_i - 1))``, ``pi_k`` the mean over rated items of
    ``r_ik / r_i``, ``p_e = sum_k pi_k (1 - pi_k) / (q - 1)`` and
    ``AC1 = (p_a - p_e) / (1 - p_e)``. For two raters this is Gwet's two-rater AC1 with
    ``pi_k = (p_k. + p_.k) / 2``.

    Parameters
    ----------
    table : array_like, shape (n_items, q)
        Counts of ratings per item and category (rows may have different sums). Build it from
        raw labels with :func:`rating_table`; pass ``categories=`` there to include categories
        nobody used, since q enters ``p_e``. Items with no rating are dropped.
    ci : bool, default False
        Compute a bootstrap confidence interval and standard error by resampling items.
    n_resamples : int, default 1000
        Number of bootstrap resamples (used when ``ci=True``).
    level : float, default 0.95
        Confidence level of the interval.
    method : str, default "percentile"
        Bootstrap interval method, passed to the engine.
    seed : int, default 0
        Seed of the resampling; results are reproducible for a fixed seed and do not depend on
        ``threads``.
    threads : int or None, default None
        Worker threads for the bootstrap (None: the engine's default).

    Returns
    -------
    AgreementResult
    """
    prepared = _prepare_gwet_ac1(table)
    return _run(
        prepared,
        ci=ci,
        n_resamples=n_resamples,
        level=level,
        method=method,
        seed=seed,
        threads=threads,
    )


def krippendorff_alpha(
    reliability_data: npt.ArrayLike,
    *,
    level: Level = "nominal",
    value_domain: Sequence[Any] | None = None,
    ci: bool = False,
    n_resamples: int = 1000,
    ci_level: float = 0.95,
    method: str = "percentile",
    seed: int = 0,
    threads: int | None = None,
) -> AgreementResult:
    """Krippendorff's alpha (Krippendorff 2011) for any number of raters and missing data.

    ``alpha = 1 - (n - 1) sum_ck o_ck d_ck / sum_ck n_c n_k d_ck`` over the coincidence matrix
    ``o`` of pairable values, with marginals ``n_c`` and ``n = sum_c n_c``. ``d`` is the squared
    difference of the level of measurement: nominal ``[c != k]``, ordinal
    ``(sum_{g=c..k} n_g - (n_c + n_k)/2)^2``, interval ``(c - k)^2``, ratio
    ``((c - k)/(c + k))^2``. Equals ``krippendorff.alpha(reliability_data=...,
    level_of_measurement=level)``. Units with fewer than 2 values are not pairable and are
    dropped; the bootstrap resamples units.

    Parameters
    ----------
    reliability_data : array_like, shape (n_raters, n_units)
        Value given by each rater (row) to each unit (column); ``None``/``NaN`` marks missing.
    level : {"nominal", "ordinal", "interval", "ratio"}, default "nominal"
        Level of measurement (metric). Interval and ratio need numeric values.
    value_domain : sequence, optional
        All values in scale order; required for the ordinal level with non-numeric values.
        Default: the sorted distinct observed values.
    ci : bool, default False
        Compute a bootstrap confidence interval and standard error by resampling units.
    n_resamples : int, default 1000
        Number of bootstrap resamples (used when ``ci=True``).
    ci_level : float, default 0.95
        Confidence level of the interval (``level`` names the metric here).
    method : str, default "percentile"
        Bootstrap interval method, passed to the engine.
    seed : int, default 0
        Seed of the resampling; results are reproducible for a fixed seed and do not depend on
        ``threads``.
    threads : int or None, default None
        Worker threads for the bootstrap (None: the engine's default).

    Returns
    -------
    AgreementResult
        ``level`` of the result is the confidence level.
    """
    prepared = _prepare_krippendorff_alpha(reliability_data, level=level, value_domain=value_domain)
    return _run(
        prepared,
        ci=ci,
        n_resamples=n_resamples,
        level=ci_level,
        method=method,
        seed=seed,
        threads=threads,
    )


def mean_pairwise_agreement(
    labels: npt.ArrayLike,
    *,
    ci: bool = False,
    n_resamples: int = 1000,
    level: float = 0.95,
    method: str = "percentile",
    seed: int = 0,
    threads: int | None = None,
) -> AgreementResult:
    """Mean over rater pairs of the pairwise percent agreement.

    For every pair of raters, agreement is the share of items both rated on which they gave the
    same label; the statistic is the mean over pairs that rated at least one item in common.

    Parameters
    ----------
    labels : array_like, shape (n_items, n_raters)
        Label given by each rater to each item; ``None``/``NaN`` marks a missing rating.
        Items that no two raters both rated are dropped.
    ci : bool, default False
        Compute a bootstrap confidence interval and standard error by resampling items.
    n_resamples : int, default 1000
        Number of bootstrap resamples (used when ``ci=True``).
    level : float, default 0.95
        Confidence level of the interval.
    method : str, default "percentile"
        Bootstrap interval method, passed to the engine.
    seed : int, default 0
        Seed of the resampling; results are reproducible for a fixed seed and do not depend on
        ``threads``.
    threads : int or None, default None
        Worker threads for the bootstrap (None: the engine's default).

    Returns
    -------
    AgreementResult
    """
    prepared = _prepare_mean_pairwise_agreement(labels)
    return _run(
        prepared,
        ci=ci,
        n_resamples=n_resamples,
        level=level,
        method=method,
        seed=seed,
        threads=threads,
    )
