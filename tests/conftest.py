"""Test-session setup shared by every module.

The Triton kernels are tested in Triton's interpreter (no GPU here), which must be switched on
before triton is first imported; setting it once for the session, ahead of every test module,
keeps the kernel tests in this process whatever the collection order.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
