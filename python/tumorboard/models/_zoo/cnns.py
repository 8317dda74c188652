"""CNN and hybrid patch encoders (TRIDENT names)."""

from __future__ import annotations

from .._info import Entry

__all__ = ["ENTRIES"]

ENTRIES: tuple[Entry, ...] = ()
