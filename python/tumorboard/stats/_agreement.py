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

Intervals: with ``ci=True`` every statistic gets a bootstrap confidence interval and standard
error from resampled items (units for Krippendorff's alpha), computed by the same engine as
:func:`tumorboard.stats.bootstrap` and configured by one :class:`~tumorboard.stats.BootstrapOptions`
(``options=``; default ``BootstrapOptions()``: 1000 resamples, level 0.95, percentile method,
seed 0). Results are reproducible for a seed and do not depend on the number of threads.

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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from .._deprecate import options_keywords, renamed_keywords
from .._results import interval
from ..errors import InvalidArgumentError, NumericOverflowError
from . import _validate
from ._bootstrap import run_engine
from ._options import BootstrapOptions

KappaWeights = Literal["linear", "quadratic"]
LevelOfMeasurement = Literal["nominal", "ordinal", "interval", "ratio"]

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

    def interval(self) -> tuple[float, float]:
        """Return ``(ci_low, ci_high)`` (NaN without ``ci=True``).

        Returns
        -------
        tuple of float
            The confidence interval.
        """
        return interval(self)

    def to_polars(self) -> pl.DataFrame:
        """Return the result as a one-row table.

        The columns are statistic, estimate, se, ci_low, ci_high, n_items, n_resamples, level
        and method.

        Returns
        -------
        polars.DataFrame
            One row.
        """
        names = ("statistic", "estimate", "se", "ci_low", "ci_high", "n_items", "n_resamples",
                 "level", "method")  # fmt: skip
        return pl.DataFrame({name: [getattr(self, name)] for name in names})


@dataclass(frozen=True)
class _Prepared:
    """Per-item sufficient-statistic rows and the parameters of one C++ statistic."""

    statistic: str
    rows: npt.NDArray[np.float64]  # (n_items, k), C-contiguous float64
    params: npt.NDArray[np.float64]  # 1-D float64


# ------------------------------------------------------------------------------------------------
# Label handling


def _missing_mask(values: np.ndarray, name: str) -> npt.NDArray[np.bool_]:
    """Return a mask that is True where ``values`` holds a missing rating.

    Missing is None, NaN, or the string "nan".
    """
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
    raise InvalidArgumentError(
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
        raise InvalidArgumentError(f"{name}: expected mutually comparable labels ({exc})") from exc
    if categories is None:
        cats = observed
        present_codes = inverse.reshape(-1).astype(np.int64)
    else:
        cats = np.asarray(categories)
        if cats.ndim != 1 or cats.size == 0:
            raise InvalidArgumentError("categories: expected a non-empty 1-D sequence of labels")
        position = {c.item() if isinstance(c, np.generic) else c: i for i, c in enumerate(cats)}
        if len(position) != cats.size:
            raise InvalidArgumentError("categories: expected distinct labels")
        lookup = np.empty(observed.size, dtype=np.int64)
        for j, label in enumerate(observed):  # loop over distinct labels, not items
            key = label.item() if isinstance(label, np.generic) else label
            if key not in position:
                raise InvalidArgumentError(f"{name}: label {key!r} is not one of categories")
            lookup[j] = position[key]
        present_codes = lookup[inverse.reshape(-1)]
    codes = np.full(values.shape, -1, dtype=np.int64)
    codes[~missing] = present_codes
    return codes, cats


def _two_rater_codes(
    rater_a: npt.ArrayLike, rater_b: npt.ArrayLike, categories: Any
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], np.ndarray]:
    """Encode two raters' labels with shared category codes; missing ratings are an error."""
    a = _validate.label_array(rater_a, name="rater_a", axes=("n_items",))
    b = _validate.label_array(rater_b, name="rater_b", axes=("n_items",))
    if a.shape != b.shape:
        raise InvalidArgumentError(
            f"rater_a and rater_b: expected the same number of items, got {a.size} and {b.size}"
        )
    numeric = a.dtype.kind in "biuf" and b.dtype.kind in "biuf"
    if a.dtype == b.dtype or numeric:
        both = np.concatenate([a, b])
    else:  # e.g. strings and None-padded objects: compare as Python objects
        both = np.concatenate([a.astype(object), b.astype(object)])
    codes, cats = _encode(both, categories, "rater_a/rater_b")
    if (codes < 0).any():
        raise InvalidArgumentError(
            "rater_a/rater_b: missing ratings (None/NaN) are not allowed for two-rater "
            "statistics; drop those items first"
        )
    return codes[: a.size], codes[a.size :], cats


# ------------------------------------------------------------------------------------------------
# Row builders. Each returns the rows and params of one C++ statistic (layouts documented in
# csrc/stats/agreement.cpp).


def _kappa_weights(q: int, weights: KappaWeights | None) -> npt.NDArray[np.float64]:
    """Return the agreement weights w_ij (1 on the diagonal) of Cohen's (1968) weighted kappa."""
    idx = np.arange(q, dtype=np.float64)
    dist = np.abs(idx[:, None] - idx[None, :]) / (q - 1)
    if weights is None:
        return np.eye(q)
    if weights == "linear":
        return 1.0 - dist
    return 1.0 - dist**2  # quadratic


def _prepare_cohen_kappa(
    rater_a: npt.ArrayLike,
    rater_b: npt.ArrayLike,
    *,
    weights: KappaWeights | None = None,
    categories: Sequence[Any] | None = None,
) -> _Prepared:
    """Build the rows and params of Cohen's kappa.

    Rows: one-hot of the confusion cell i*q + j (k = q*q).
    Params: [q, w_00, w_01, ..., w_(q-1)(q-1)] (agreement weights, row-major).
    """
    if weights is not None:
        _validate.choice(weights, ("linear", "quadratic"), name="weights")
    ca, cb, cats = _two_rater_codes(rater_a, rater_b, categories)
    q = int(cats.size)
    if q < 2:
        raise InvalidArgumentError(
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
    """Build the rows and params of PABAK.

    Rows: [1{a_i == b_i}] (k = 1). Params: [q].
    """
    ca, cb, cats = _two_rater_codes(rater_a, rater_b, None)
    q = _validate.n_categories(n_categories, int(cats.size))
    if q < 2:
        raise InvalidArgumentError(
            f"rater_a/rater_b: PABAK needs at least 2 categories, got {q}; pass n_categories="
        )
    rows = (ca == cb).astype(np.float64).reshape(-1, 1)
    return _Prepared("pabak", rows, np.array([float(q)]))


def _prepare_fleiss_kappa(table: npt.ArrayLike) -> _Prepared:
    """Build the rows and params of Fleiss' kappa.

    Rows: [sum_j n_ij(n_ij - 1), n_i1, ..., n_iq] (k = q + 1). Params: [q, m].
    """
    t = _validate.count_table(table)
    raters = t.sum(axis=1)
    m = raters[0]
    if (raters != m).any():
        raise InvalidArgumentError(
            "table: Fleiss' kappa needs the same number of ratings on every item, got row sums "
            f"from {int(raters.min())} to {int(raters.max())}; use gwet_ac1 or krippendorff_alpha "
            "for missing ratings"
        )
    if m < 2:
        raise InvalidArgumentError(
            f"table: Fleiss' kappa needs at least 2 ratings per item, got {int(m)}"
        )
    rows = np.empty((t.shape[0], t.shape[1] + 1), dtype=np.float64)
    rows[:, 0] = (t * (t - 1.0)).sum(axis=1)
    rows[:, 1:] = t
    return _Prepared("fleiss_kappa", rows, np.array([float(t.shape[1]), float(m)]))


def _prepare_gwet_ac1(table: npt.ArrayLike) -> _Prepared:
    """Build the rows and params of Gwet's AC1.

    Rows: [a_i, 1{r_i>=2}, r_i1/r_i, ..., r_iq/r_i, 1{r_i>=1}] (k = q + 3). Params: [q].
    a_i = sum_k r_ik (r_ik - 1) / (r_i (r_i - 1)) for r_i >= 2 (else 0). Items without any rating
    carry no information and are dropped.
    """
    t = _validate.count_table(table)
    r = t.sum(axis=1)
    t = t[r > 0]
    r = r[r > 0]
    if t.shape[0] == 0:
        raise InvalidArgumentError("table: every item has zero ratings")
    if not (r >= 2).any():
        raise InvalidArgumentError(
            "table: Gwet's AC1 needs at least one item with 2 or more ratings"
        )
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
    level_of_measurement: LevelOfMeasurement = "nominal",
    value_domain: Sequence[Any] | None = None,
) -> _Prepared:
    """Build the rows and params of Krippendorff's alpha.

    Rows: unit coincidences o_ck(u), index c*q + k (k = q*q). Params: [q, metric, v_1..v_q].
    o_ck(u) = (n_uc n_uk - [c == k] n_uc) / (m_u - 1), n_uc = number of values c in unit u and
    m_u = sum_c n_uc; units with fewer than 2 values are not pairable and are dropped.
    """
    scale = _validate.choice(level_of_measurement, tuple(_METRIC_CODES),
                             name="level_of_measurement")  # fmt: skip
    data = _validate.label_array(reliability_data, name="reliability_data",
                                 axes=("n_raters", "n_units"))  # fmt: skip
    codes, cats = _encode(data, value_domain, "reliability_data")
    q = int(cats.size)
    if q < 2:
        raise InvalidArgumentError(
            f"reliability_data: Krippendorff's alpha needs at least 2 distinct values, got {q}"
        )
    numeric = cats.dtype.kind in "iuf" or (
        cats.dtype.kind == "O" and all(isinstance(v, (int, float, np.number)) for v in cats)
    )
    if scale in ("interval", "ratio") and not numeric:
        raise InvalidArgumentError(
            f"reliability_data: level_of_measurement={scale!r} needs numeric values"
        )
    if scale == "ordinal" and not numeric and value_domain is None:
        raise InvalidArgumentError(
            "value_domain: the ordinal level of measurement with non-numeric values needs an "
            "explicit ordered value_domain"
        )
    values = cats.astype(np.float64) if numeric else np.arange(q, dtype=np.float64)
    if scale in ("interval", "ratio") and not np.isfinite(values).all():
        raise InvalidArgumentError("reliability_data: expected finite values")

    n_units = codes.shape[1]
    present = codes >= 0
    unit = np.broadcast_to(np.arange(n_units), codes.shape)[present]
    counts = np.bincount(unit * q + codes[present], minlength=n_units * q).reshape(n_units, q)
    counts = counts.astype(np.float64)
    m = counts.sum(axis=1)
    keep = m >= 2
    if not keep.any():
        raise InvalidArgumentError("reliability_data: no unit has values from at least 2 raters")
    counts, m = counts[keep], m[keep]
    pairs = counts[:, :, None] * counts[:, None, :]
    diag = np.arange(q)
    pairs[:, diag, diag] -= counts
    rows = (pairs / (m - 1.0)[:, None, None]).reshape(counts.shape[0], q * q)
    _check_alpha_range(values, scale, float(m.sum()))
    params = np.concatenate([[float(q), float(_METRIC_CODES[scale])], values])
    return _Prepared("krippendorff_alpha", np.ascontiguousarray(rows), params)


def _check_alpha_range(values: np.ndarray, scale: str, n: float) -> None:
    """Refuse interval or ratio values whose metric sums overflow float64.

    The engine sums ``n_c n_k d_ck`` over value pairs: at most ``n^2`` times the largest
    ``d``. The interval metric squares differences, ``(c - k)^2``, and the ratio metric divides
    by sums, ``c + k``; values near 1e154 (interval) or 1e308 (ratio) overflow them to ``inf``,
    which would give a NaN or a wrong alpha.
    """
    if scale not in ("interval", "ratio"):
        return
    with np.errstate(over="ignore", invalid="ignore"):
        if scale == "interval":
            bound = float(np.float64(values.max() - values.min()) ** 2 * n * n)
        else:
            bound = float(2.0 * np.abs(values).max())
    if not np.isfinite(bound):
        raise NumericOverflowError(
            f"reliability_data: the {scale} metric of Krippendorff's alpha overflows float64 "
            f"for values from {values.min():.6g} to {values.max():.6g} over {int(n)} pairable "
            "values; rescale the values (alpha does not change when every value is multiplied "
            "by the same positive factor)"
        )


def _prepare_mean_pairwise_agreement(labels: npt.ArrayLike) -> _Prepared:
    """Build the rows and params of the mean pairwise agreement.

    Rows: [agree_1, rated_1, ..., agree_P, rated_P] over rater pairs (k = 2P). Params: [P].
    Items on which no pair of raters both gave a rating are dropped.
    """
    arr = _validate.label_array(labels, name="labels", axes=("n_items", "n_raters"))
    if arr.shape[1] < 2:
        raise InvalidArgumentError(
            f"labels: expected at least 2 raters (columns), got {arr.shape[1]}"
        )
    codes, _ = _encode(arr, None, "labels")
    first, second = np.triu_indices(arr.shape[1], k=1)
    ca, cb = codes[:, first], codes[:, second]
    rated = (ca >= 0) & (cb >= 0)
    agree = rated & (ca == cb)
    keep = rated.any(axis=1)
    if not keep.any():
        raise InvalidArgumentError("labels: no item was rated by at least 2 raters")
    n_pairs = first.size
    rows = np.empty((int(keep.sum()), 2 * n_pairs), dtype=np.float64)
    rows[:, 0::2] = agree[keep]
    rows[:, 1::2] = rated[keep]
    return _Prepared("mean_pairwise_agreement", rows, np.array([float(n_pairs)]))


# ------------------------------------------------------------------------------------------------
# Engine call


def _run(prepared: _Prepared, *, ci: bool, options: BootstrapOptions | None) -> AgreementResult:
    """Estimate (and, with ``ci``, bootstrap) one prepared statistic in the C++ engine."""
    opts = BootstrapOptions.resolve(options, ci=ci)
    # The rows are built here from validated labels, so the engine is called directly.
    rows = np.ascontiguousarray(prepared.rows, dtype=np.float64)
    params = [float(x) for x in np.asarray(prepared.params, dtype=np.float64).ravel()]
    res = run_engine(
        rows, _validate.layout(rows.shape[0]), statistic=prepared.statistic, params=params,
        scheme="multinomial", record_keys=None, options=opts, return_distribution=False,
        resampler="auto", estimate_only=not ci,
    )  # fmt: skip
    return AgreementResult(
        statistic=prepared.statistic,
        estimate=float(res.estimate[0]),
        ci_low=float(res.ci_low[0]),
        ci_high=float(res.ci_high[0]),
        se=float(res.se[0]),
        n_items=int(rows.shape[0]),
        n_resamples=res.n_resamples,
        level=opts.level,
        method=opts.method,
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

    Raises
    ------
    InvalidArgumentError
        Labels of the wrong shape, or a label that is not one of ``categories``.
    """
    arr = _validate.label_array(labels, name="labels", axes=("n_items", "n_raters"))
    codes, cats = _encode(arr, categories, "labels")
    n_items, q = arr.shape[0], int(cats.size)
    present = codes >= 0
    item = np.broadcast_to(np.arange(n_items)[:, None], codes.shape)[present]
    table = np.bincount(item * q + codes[present], minlength=n_items * q).reshape(n_items, q)
    return table.astype(np.int64), cats


@options_keywords(BootstrapOptions)
def cohen_kappa(
    rater_a: npt.ArrayLike,
    rater_b: npt.ArrayLike,
    *,
    weights: KappaWeights | None = None,
    categories: Sequence[Any] | None = None,
    ci: bool = False,
    options: BootstrapOptions | None = None,
) -> AgreementResult:
    """Compute Cohen's kappa for two raters (Cohen 1960), optionally weighted (Cohen 1968).

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
        Also bootstrap kappa over items (module notes): ``ci_low``, ``ci_high`` and ``se``.
    options : BootstrapOptions, optional
        Options of that interval; default ``BootstrapOptions()``. Only with ``ci=True``.

    Returns
    -------
    AgreementResult
        ``estimate`` is NaN when chance agreement is 1 (both raters used one category only).

    Raises
    ------
    InvalidArgumentError
        Labels of different lengths or with missing values, fewer than 2 categories, unknown
        weights, or invalid options.
    """
    prepared = _prepare_cohen_kappa(rater_a, rater_b, weights=weights, categories=categories)
    return _run(prepared, ci=ci, options=options)


@options_keywords(BootstrapOptions)
def fleiss_kappa(
    table: npt.ArrayLike, *, ci: bool = False, options: BootstrapOptions | None = None
) -> AgreementResult:
    """Compute Fleiss' kappa for many raters (Fleiss 1971).

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
        Resample items to add a confidence interval and standard error (module notes).
    options : BootstrapOptions, optional
        How the interval is computed (default ``BootstrapOptions()``); needs ``ci=True``.

    Returns
    -------
    AgreementResult
        Statistic ``"fleiss_kappa"``.

    Raises
    ------
    InvalidArgumentError
        A table that is not a count table, rows with different sums or fewer than 2 ratings,
        or invalid options.
    """
    return _run(_prepare_fleiss_kappa(table), ci=ci, options=options)


@options_keywords(BootstrapOptions)
def pabak(
    rater_a: npt.ArrayLike,
    rater_b: npt.ArrayLike,
    *,
    n_categories: int | None = None,
    ci: bool = False,
    options: BootstrapOptions | None = None,
) -> AgreementResult:
    """Compute the prevalence- and bias-adjusted kappa (Byrt, Bishop & Carlin 1993).

    ``PABAK = (q p_o - 1) / (q - 1)``, which is ``2 p_o - 1`` for two categories; ``p_o`` is the
    proportion of items on which the two raters agree.

    Parameters
    ----------
    rater_a, rater_b : array_like, shape (n_items,)
        Labels of the two raters; no missing values.
    n_categories : int, optional
        Number of categories q of the scale. Default: the number of distinct observed labels.
    ci : bool, default False
        Add a bootstrap interval of PABAK and its standard error (items are resampled).
    options : BootstrapOptions, optional
        The bootstrap options, used with ``ci=True`` (default ``BootstrapOptions()``).

    Returns
    -------
    AgreementResult
        Statistic ``"pabak"``.

    Raises
    ------
    InvalidArgumentError
        Labels of different lengths or with missing values, fewer than 2 categories, or invalid
        options.
    """
    prepared = _prepare_pabak(rater_a, rater_b, n_categories=n_categories)
    return _run(prepared, ci=ci, options=options)


@options_keywords(BootstrapOptions)
def gwet_ac1(
    table: npt.ArrayLike, *, ci: bool = False, options: BootstrapOptions | None = None
) -> AgreementResult:
    """Compute Gwet's AC1 for any number of raters, missing ratings allowed (Gwet 2008).

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
        Bootstrap AC1 by resampling the rated items: interval and standard error.
    options : BootstrapOptions, optional
        Resamples, level, method, seed and threads of that bootstrap (module notes).

    Returns
    -------
    AgreementResult
        Statistic ``"gwet_ac1"``; ``n_items`` counts the items with at least one rating.

    Raises
    ------
    InvalidArgumentError
        A table that is not a count table, no item with 2 or more ratings, or invalid options.
    """
    return _run(_prepare_gwet_ac1(table), ci=ci, options=options)


@renamed_keywords(level="level_of_measurement")
@options_keywords(BootstrapOptions, "n_resamples", "method", "seed", "threads")
def krippendorff_alpha(
    reliability_data: npt.ArrayLike,
    *,
    level_of_measurement: LevelOfMeasurement = "nominal",
    value_domain: Sequence[Any] | None = None,
    ci: bool = False,
    options: BootstrapOptions | None = None,
) -> AgreementResult:
    """Compute Krippendorff's alpha (Krippendorff 2011) for any number of raters and missing data.

    ``alpha = 1 - (n - 1) sum_ck o_ck d_ck / sum_ck n_c n_k d_ck`` over the coincidence matrix
    ``o`` of pairable values, with marginals ``n_c`` and ``n = sum_c n_c``. ``d`` is the squared
    difference of the level of measurement: nominal ``[c != k]``, ordinal
    ``(sum_{g=c..k} n_g - (n_c + n_k)/2)^2``, interval ``(c - k)^2``, ratio
    ``((c - k)/(c + k))^2``. Equals ``krippendorff.alpha(reliability_data=...,
    level_of_measurement=...)`` of the ``krippendorff`` package, whose keyword name is kept.
    Units with fewer than 2 values are not pairable and are dropped; the bootstrap resamples
    units.

    Parameters
    ----------
    reliability_data : array_like, shape (n_raters, n_units)
        Value given by each rater (row) to each unit (column); ``None``/``NaN`` marks missing.
    level_of_measurement : {"nominal", "ordinal", "interval", "ratio"}, default "nominal"
        The scale of the values (it picks the metric ``d``). Interval and ratio need numeric
        values.
    value_domain : sequence, optional
        All values in scale order; required for the ordinal level with non-numeric values.
        Default: the sorted distinct observed values.
    ci : bool, default False
        Also resample units (not raters) for a confidence interval and standard error.
    options : BootstrapOptions, optional
        Options of the units bootstrap (``BootstrapOptions()`` by default; module notes).

    Returns
    -------
    AgreementResult
        Statistic ``"krippendorff_alpha"``; ``n_items`` counts the pairable units.

    Raises
    ------
    InvalidArgumentError
        Data of the wrong shape, fewer than 2 distinct values or no pairable unit, a level of
        measurement the values do not support, or invalid options.
    NumericOverflowError
        Interval or ratio values so large that the metric's sums overflow float64 (squared
        differences near 1e154 and beyond); an ``OverflowError``.
    """
    prepared = _prepare_krippendorff_alpha(
        reliability_data, level_of_measurement=level_of_measurement, value_domain=value_domain
    )
    return _run(prepared, ci=ci, options=options)


@options_keywords(BootstrapOptions)
def mean_pairwise_agreement(
    labels: npt.ArrayLike, *, ci: bool = False, options: BootstrapOptions | None = None
) -> AgreementResult:
    """Compute the mean over rater pairs of the pairwise percent agreement.

    For every pair of raters, agreement is the share of items both rated on which they gave the
    same label; the statistic is the mean over pairs that rated at least one item in common.

    Parameters
    ----------
    labels : array_like, shape (n_items, n_raters)
        Label given by each rater to each item; ``None``/``NaN`` marks a missing rating.
        Items that no two raters both rated are dropped.
    ci : bool, default False
        Whether to add an interval and standard error from resampled items.
    options : BootstrapOptions, optional
        The interval's options when ``ci=True``; see the module notes for the defaults.

    Returns
    -------
    AgreementResult
        Statistic ``"mean_pairwise_agreement"``; ``n_items`` counts the items kept.

    Raises
    ------
    InvalidArgumentError
        Fewer than 2 raters, no item rated by 2 raters, or invalid options.
    """
    return _run(_prepare_mean_pairwise_agreement(labels), ci=ci, options=options)
