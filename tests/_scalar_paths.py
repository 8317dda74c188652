"""Engine calls on their vectorised (AVX2) paths and again with the scalar paths forced.

``_core.testing.set_scalar_only`` makes the engine take its scalar random-number and draw
paths on a machine with AVX2, so that tests can compare both, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def fast_and_scalar(run: Callable[[], Any]) -> tuple[Any, Any]:
    """Return ``run()`` on the machine's fastest paths, then with the scalar paths forced."""
    from tumorboard import _core

    fast = run()
    was = _core.testing.set_scalar_only(True)
    try:
        scalar = run()
    finally:
        _core.testing.set_scalar_only(was)
    return fast, scalar


def assert_same_arrays(a: Any, b: Any) -> None:
    """Assert two sequences of arrays are equal element for element (NaN equal to NaN)."""
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)
