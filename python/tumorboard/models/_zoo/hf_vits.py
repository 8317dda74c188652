"""ViT patch encoders in the Hugging Face ``transformers`` layout (TRIDENT names)."""

from __future__ import annotations

from .._info import Entry

__all__ = ["ENTRIES"]

ENTRIES: tuple[Entry, ...] = ()
