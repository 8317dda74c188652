"""What the numeric guards of issue 18 cost, measured against the bootstrap they guard.

Every ``tumorboard.stats.bootstrap`` call now checks that its resample arrays fit in memory,
plans an exact power-of-two scaling of the values (``stats/_scale.py``; a no-op unless a
magnitude is near the float limits) and checks the result (``check_numbers``: no inf, F1 in
[0, 1], no inverted interval). This benchmark times those steps alone (the *guards*) and the
whole call on the same data, in the same run; the C++ cancellation token adds one relaxed
atomic load per task (and a clock read on the calling thread) and is inside the whole call.

The anchor here is the bootstrap call itself: ``ratio`` = bootstrap time / guards time, so a
ratio of 1000 means the guards cost 0.1% of the call.

Usage (from the repository root)::

    python benchmarks/bench_reliability.py [--quick] [--threads N] [--json PATH]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

try:
    from ._timing import Result, best_of, format_markdown, positive_int, write_json
except ImportError:  # run as a script: ``python benchmarks/bench_reliability.py``
    from _timing import Result, best_of, format_markdown, positive_int, write_json

ANCHOR = "whole bootstrap call"


def _workloads(quick: bool) -> list[tuple[str, int, int, int]]:
    """Return (name, n records, n groups, B) of each workload."""
    if quick:
        return [("100k x 1 group, B=500", 100_000, 1, 500),
                ("100k x 1000 groups, B=500", 100_000, 1000, 500)]  # fmt: skip
    return [("1M x 1 group, B=1000", 1_000_000, 1, 1000),
            ("1M x 100 groups, B=1000", 1_000_000, 100, 1000),
            ("100k x 1000 groups, B=2000", 100_000, 1000, 2000)]  # fmt: skip


def _measure(name: str, n: int, n_groups: int, b: int, threads: int | None) -> Result:
    """Time the guards alone and the whole bootstrap call on one workload."""
    from tumorboard import stats
    from tumorboard.stats import _bootstrap, _scale, _validate

    rng = np.random.default_rng(0)
    x = rng.normal(size=n)
    g = rng.integers(0, n_groups, n) if n_groups > 1 else None
    opts = stats.BootstrapOptions(n_resamples=b, threads=threads, seed=1)
    res = stats.bootstrap(x, groups=g, options=opts)
    lay = _validate.layout(n, groups=g)
    values = _validate.values(x)
    out = {f: np.atleast_1d(getattr(res, f))
           for f in ("estimate", "boot_mean", "se", "ci_low", "ci_high")}  # fmt: skip

    def guards() -> None:
        _validate.resample_memory(b, lay.n_groups, 1, scheme="multinomial",
                                  return_distribution=False)  # fmt: skip
        plan = _scale.plan(values, lay.group, lay.n_groups, statistic="mean")
        _scale.apply(out, plan.exponent)
        _bootstrap.check_numbers(out, res.keys, statistic="mean")

    t_guards = best_of(guards, repeat=5)
    t_call = best_of(lambda: stats.bootstrap(x, groups=g, options=opts), repeat=3)
    return Result.make(name, t_guards, ANCHOR, t_call, note="tumorboard column: the guards alone")


def main(argv: list[str] | None = None) -> int:
    """Run the workloads and print one Markdown row each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small workloads (seconds)")
    parser.add_argument("--threads", type=positive_int, default=None, help="engine threads")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)
    results = [_measure(*w, args.threads) for w in _workloads(args.quick)]
    print(format_markdown(results, [ANCHOR], check_column=False))
    if args.json:
        write_json(results, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
