"""Multiple-comparison adjustment of p-values: Bonferroni, Holm and Benjamini-Hochberg.

* ``"bonferroni"`` - ``min(1, m p)``;
* ``"holm"`` - Holm's step-down (Holm 1979, "A simple sequentially rejective multiple test
  procedure", *Scand J Stat* 6:65-70): the k-th smallest p times (m - k + 1), made monotone;
  controls the family-wise error rate;
* ``"bh"`` - Benjamini & Hochberg's step-up (1995, *J R Stat Soc B* 57:289-300): the k-th
  smallest p times m / k, made monotone from the largest; controls the false discovery rate.

The same numbers as ``statsmodels.stats.multitest.multipletests`` with methods
``bonferroni``, ``holm`` and ``fdr_bh``. NaN p-values (comparisons that could not be made) are
left NaN and do not count in m.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from ..errors import InvalidArgumentError

__all__ = ["CORRECTIONS", "adjust_pvalues"]

Correction = Literal["holm", "bonferroni", "bh", "none"]

#: The names ``adjust_pvalues`` (and ``compare(correction=)``) take.
CORRECTIONS: tuple[str, ...] = ("holm", "bonferroni", "bh", "none")


def adjust_pvalues(p_values: Any, method: Correction = "holm") -> np.ndarray:
    """Adjust a family of p-values for multiple comparisons.

    Parameters
    ----------
    p_values : array_like
        The family's raw p-values in [0, 1] (NaN: not tested, left out of the family).
    method : {"holm", "bonferroni", "bh", "none"}, default "holm"
        The correction (module docstring); ``"none"`` returns the p-values unchanged.

    Returns
    -------
    numpy.ndarray
        Adjusted p-values in the input order, at most 1.

    Raises
    ------
    InvalidArgumentError
        An unknown method, or p-values outside [0, 1].
    """
    if method not in CORRECTIONS:
        raise InvalidArgumentError(
            f"correction: expected one of {', '.join(CORRECTIONS)}, got {method!r}"
        )
    p = np.asarray(p_values, dtype=np.float64).ravel()
    ok = ~np.isnan(p)
    if ((p[ok] < 0) | (p[ok] > 1)).any():
        raise InvalidArgumentError("p_values: expected probabilities in [0, 1]")
    out = p.copy()
    q = p[ok]
    m = q.size
    if m == 0 or method == "none":
        return out
    if method == "bonferroni":
        out[ok] = np.minimum(1.0, q * m)
        return out
    order = np.argsort(q, kind="stable")
    ranked = q[order]
    k = np.arange(1, m + 1, dtype=np.float64)
    if method == "holm":
        adj = np.maximum.accumulate(np.minimum(1.0, (m - k + 1) * ranked))
    else:  # bh
        adj = np.minimum.accumulate(np.minimum(1.0, ranked * m / k)[::-1])[::-1]
    back = np.empty(m)
    back[order] = adj
    out[ok] = back
    return out
