"""Exact power-of-two scaling that keeps the engine's sums inside the float64 range.

The engine sums per-record values in float64 and then squares and cubes deviations of the
statistic (standard error; the BCa jackknife acceleration ``sum(d^3) / (6 (sum d^2)^1.5)``,
Efron & Tibshirani 1993, eq. 14.15). Finite values near 1e308 overflow those sums (a mean of
``[1e308, 1e308]`` would be ``inf``), and values near 1e-300 underflow the squares (a spread
would read as zero). Multiplying by a power of two is exact in IEEE 754 arithmetic away from
overflow and underflow, and every operation of the engine (sums, ratios, order statistics, the
normal quantiles of BCa) commutes with it, so the engine runs on values scaled into a safe range
and the results are scaled back: bit for bit the numbers an unbounded-exponent float64 would
give. The statistics this applies to, and how their outputs scale:

========== ============================================ =========================================
statistic  columns sharing one factor (per group)       output multiplier
========== ============================================ =========================================
mean, sum  the one column (both halves when paired)     1 / s
ratio      numerators; denominators (two factors)       s_den / s_num
f1         TP, FP, FN together                          1 (scale-free)
========== ============================================ =========================================

Values already in the safe range are left untouched (no copy, the same bits as before). Other
engine statistics are not rescaled; :func:`check_result` still refuses a non-finite outcome.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Largest and smallest magnitude (per group and column role) left unscaled: sums of n values
#: stay below 2^250 and cubes of deviations below 2^750; squares of spreads of values above
#: 2^-250 stay normal.
SAFE_HIGH_LOG2 = 250
SAFE_LOW_LOG2 = -250

#: Column roles per statistic: columns with the same role share one scale factor.
ROLES = {"mean": (0,), "sum": (0,), "ratio": (0, 1), "f1": (0, 0, 0)}


@dataclass(frozen=True)
class Scaling:
    """Scaled engine input and the factor that maps each group's outputs back.

    Attributes
    ----------
    values : numpy.ndarray
        The (n, k) values the engine runs on (the input itself when no group needed scaling).
    exponent : numpy.ndarray or None
        Per group, the power of two (an integer exponent, applied with ``numpy.ldexp``) that
        multiplies the estimate, bootstrap mean, standard error, interval bounds and
        distribution; None when nothing was scaled.
    """

    values: np.ndarray
    exponent: np.ndarray | None


def _group_max(absval: np.ndarray, group: np.ndarray | None, n_groups: int) -> np.ndarray:
    """Return the per-group maximum of a 1-D array of magnitudes (0 for an empty group)."""
    if group is None:
        return np.array([absval.max(initial=0.0)])
    out = np.zeros(n_groups)
    np.maximum.at(out, group, absval)
    return out


def plan(
    values: np.ndarray, group: np.ndarray | None, n_groups: int, *, statistic: str,
    paired_split: int = 0,
) -> Scaling:  # fmt: skip
    """Return the values the engine should run on and the multipliers of its outputs.

    Parameters
    ----------
    values : numpy.ndarray
        Validated finite (n, k) float64 values.
    group : numpy.ndarray or None
        Group code of each record (None: one group).
    n_groups : int
        Number of groups.
    statistic : str
        The engine statistic; only those of ``ROLES`` are rescaled.
    paired_split : int, default 0
        Columns of system a for paired statistics (0: not paired); both halves share factors.

    Returns
    -------
    Scaling
        The (possibly scaled) values and the per-group output multipliers.
    """
    roles = ROLES.get(statistic)
    k = values.shape[1]
    if roles is None or values.size == 0:
        return Scaling(values, None)
    if paired_split:
        roles = roles + roles
    if len(roles) != k:
        return Scaling(values, None)
    n_max = max(values.shape[0], 1)
    # the fast path: every magnitude is safe. The largest comes from max and min, and "no
    # non-zero magnitude below 2^SAFE_LOW_LOG2" is "the values in (-tiny, tiny) are the zeros":
    # no |values| copy (a 10M-item score checks 80 MB of values, twice)
    top = max(float(values.max()), -float(values.min()))
    tiny = 2.0**SAFE_LOW_LOG2
    near_zero = np.count_nonzero((values > -tiny) & (values < tiny))
    if top <= 2.0**SAFE_HIGH_LOG2 / n_max and near_zero == np.count_nonzero(values == 0):
        return Scaling(values, None)
    absval = np.abs(values)
    n_roles = max(roles) + 1
    exponent = np.zeros((n_groups, n_roles), dtype=np.int64)
    for r in range(n_roles):
        cols = [j for j, role in enumerate(roles) if role == r]
        m = _group_max(absval[:, cols].max(axis=1), group, n_groups)
        _, e = np.frexp(m)  # m = f * 2^e with f in [0.5, 1): m * 2^-e in [0.5, 1)
        count = np.bincount(group, minlength=n_groups) if group is not None else np.array([n_max])
        hi = (np.log2(np.where(m > 0, m, 1.0)) + np.log2(np.maximum(count, 1))) > SAFE_HIGH_LOG2
        lo = (m > 0) & (m < 2.0**SAFE_LOW_LOG2)
        exponent[:, r] = np.where(hi | lo, e, 0)
    if not exponent.any():
        return Scaling(values, None)
    col_exp = exponent[:, list(roles)]  # (n_groups, k)
    row_exp = col_exp[group] if group is not None else np.broadcast_to(col_exp, values.shape)
    scaled = np.ldexp(values, -row_exp)
    if statistic in ("mean", "sum"):
        out_exp = exponent[:, 0]
    elif statistic == "ratio":
        out_exp = exponent[:, 0] - exponent[:, 1]
    else:
        out_exp = np.zeros(n_groups, dtype=np.int64)
    return Scaling(np.ascontiguousarray(scaled), out_exp)


def apply(out: dict, exponent: np.ndarray | None) -> dict:
    """Scale the engine's outputs back by each group's power of two (in place; returns ``out``).

    Parameters
    ----------
    out : dict
        The engine's output dictionary (estimate, boot_mean, se, ci_low, ci_high and, if
        requested, distribution).
    exponent : numpy.ndarray or None
        Per-group exponents from :func:`plan`; None leaves ``out`` unchanged.

    Returns
    -------
    dict
        ``out``.
    """
    if exponent is None:
        return out
    with np.errstate(over="ignore", under="ignore"):  # overflow is refused by check_numbers
        for name in ("estimate", "boot_mean", "se", "ci_low", "ci_high"):
            if name in out:
                out[name] = np.ldexp(np.asarray(out[name], dtype=np.float64), exponent)
        if out.get("distribution") is not None:
            out["distribution"] = np.ldexp(out["distribution"], exponent[:, None])
    return out
