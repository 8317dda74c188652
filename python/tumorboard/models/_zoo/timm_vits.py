"""ViT patch encoders in the timm state-dict layout (TRIDENT names)."""

from __future__ import annotations

from .._info import Entry

__all__ = ["ENTRIES"]

ENTRIES: tuple[Entry, ...] = ()
