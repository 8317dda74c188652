"""Test-session setup shared by every module.

The Triton kernels run where they are meant to run: natively on CUDA tensors when a CUDA
device is present, and otherwise in Triton's interpreter on CPU tensors (small shapes: about a
millisecond per program). The interpreter must be switched on before triton is first imported,
so it is set here, once for the session, ahead of every test module.

Fixtures
--------
kernel_device
    ``"cuda"`` on a machine with a CUDA device, else ``"cpu"`` (interpreter).
kernel_sizes
    Workload sizes for the kernel tests: realistic on CUDA (bags up to 20k instances of
    D=1536, T=32k tokens of D=4096), tiny under the interpreter.

Every test's stores delete removed parts at once (an autouse fixture; the retention tests set
``retain_s`` themselves).
"""

from __future__ import annotations

import os

import pytest


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


CUDA = _cuda_available()
if not CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")
else:
    # one compilation per kernel and shape (the best-measured tile), not one per autotuning
    # candidate: the benchmarks autotune over every candidate and check their outputs
    os.environ.setdefault("TUMORBOARD_TRITON_AUTOTUNE", "first")


@pytest.fixture(scope="session")
def kernel_device() -> str:
    """Return the device the kernel tests run on."""
    return "cuda" if CUDA else "cpu"


@pytest.fixture(scope="session")
def kernel_sizes() -> dict[str, int]:
    """Return the workload sizes of the kernel tests on this machine."""
    if CUDA:
        return {"bag_max": 20_000, "n_bags": 4, "dim": 1536, "hidden": 512,
                "tokens": 32_768, "width": 4096, "inner": 11_008, "proj_tokens": 2048}  # fmt: skip
    return {"bag_max": 40, "n_bags": 3, "dim": 40, "hidden": 24,
            "tokens": 53, "width": 40, "inner": 24, "proj_tokens": 37}  # fmt: skip


@pytest.fixture(autouse=True, scope="session")
def _stores_delete_removed_parts_at_once():
    """Make the tests' stores delete a removed part's file at once (``retain_s=0``).

    The crash, repair and compaction tests assert what is on disk right after a commit;
    a store keeps removed parts for ``RETAIN_S`` seconds for readers that listed them, which
    ``tests/test_store_retention.py`` tests with ``retain_s`` spelled out. Session-wide, so
    that module fixtures building stores see it too.
    """
    from tumorboard.traj import _log

    default, _log.RETAIN_S = _log.RETAIN_S, 0.0
    yield
    _log.RETAIN_S = default
