"""The patch encoders beyond UNI, UNI2-h and CONCH v1, under TRIDENT's names.

Each module declares its registry rows as ``ENTRIES`` (a tuple of
:class:`tumorboard.models._info.Entry`); the registry appends them to its own.

* :mod:`.timm_vits` - ViTs in the timm state-dict layout;
* :mod:`.timm_vits_b` - kaiko.ai, Lunit, GPFM and OpenMidnight ViTs (timm layout);
* :mod:`.hf_vits` - ViTs in the Hugging Face ``transformers`` layout;
* :mod:`.cnns` - CNN and hybrid encoders;
* :mod:`.keep` - KEEP's image tower (CLIP-style).
"""

from __future__ import annotations

from .cnns import ENTRIES as _CNNS
from .hf_vits import ENTRIES as _HF
from .keep import ENTRIES as _KEEP
from .timm_vits import ENTRIES as _TIMM
from .timm_vits_b import ENTRIES as _TIMM_B

__all__ = ["ENTRIES"]

ENTRIES = _TIMM + _TIMM_B + _HF + _CNNS + _KEEP
