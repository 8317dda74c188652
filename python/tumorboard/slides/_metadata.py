"""A slide's resolution metadata: level-0 microns per pixel and objective magnification.

Microns per pixel are read from the property keys TRIDENT uses (``openslide.mpp-x``,
``openslide.mirax.MPP``, ``aperio.MPP``, ``hamamatsu.XResolution``, ``openslide.comment``, then
``tiff.XResolution`` with its unit), and the objective magnification is binned from the mpp as
TRIDENT does (mahmoodlab/TRIDENT ``trident/wsi_objects/WSI.py``, ``_fetch_magnification``,
@a91fa84): mpp < 0.16 -> 80x, < 0.2 -> 60x, < 0.3 -> 40x, < 0.6 -> 20x, < 1.2 -> 10x, < 2.4 -> 5x.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgumentError

_MAG_BINS = ((0.16, 80), (0.2, 60), (0.3, 40), (0.6, 20), (1.2, 10), (2.4, 5))


def magnification_from_mpp(mpp: float) -> int:
    """Return the objective magnification of a level-0 resolution, binned as TRIDENT does.

    Parameters
    ----------
    mpp : float
        Level-0 microns per pixel.

    Returns
    -------
    int
        80, 60, 40, 20, 10 or 5.

    Raises
    ------
    InvalidArgumentError
        For mpp >= 2.4 (coarser than 5x) or a non-positive mpp (it is a ``ValueError``).
    """
    if not (mpp > 0 and math.isfinite(mpp)):
        raise InvalidArgumentError(f"mpp: expected a positive number, got {mpp!r}")
    for upper, mag in _MAG_BINS:
        if mpp < upper:
            return mag
    raise InvalidArgumentError(
        f"mpp {mpp} is coarser than 5x (2.4 um/px); cannot assign a magnification"
    )


def _as_float(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) and x > 0 else None


def mpp_from_properties(props: Mapping[str, Any]) -> float | None:
    """Return the level-0 microns per pixel from slide properties, or None.

    Parameters
    ----------
    props : Mapping
        Slide properties, with OpenSlide or tiffslide key names.

    Returns
    -------
    float or None
        The mpp rounded to 4 decimals as TRIDENT does; None when no key gives a value.
    """

    def rounded(x: float | None) -> float | None:
        return None if x is None else round(x, 4)

    for key in ("openslide.mpp-x", "tiffslide.mpp-x", "openslide.mirax.MPP", "aperio.MPP"):
        if (x := _as_float(props.get(key))) is not None:
            return rounded(x)
    # Hamamatsu stores its TIFF resolution in pixels per centimetre.
    if (x := _as_float(props.get("hamamatsu.XResolution"))) is not None:
        return rounded(10000.0 / x)
    comment = props.get("openslide.comment")
    if isinstance(comment, str):
        m = re.search(r"MPP\s*=\s*([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)", comment)
        if m and (x := _as_float(m.group(1))) is not None:
            return rounded(x)
    res = _as_float(props.get("tiff.XResolution"))
    unit = str(props.get("tiff.ResolutionUnit", "")).lower()
    if res is not None:
        if unit == "centimeter":
            return rounded(10000.0 / res)
        if unit == "inch":
            return rounded(25400.0 / res)
    return None


#: Property keys a resolution is read from (named in the message about an unusable one).
_RESOLUTION_KEYS = ("openslide.mpp-x", "tiffslide.mpp-x", "openslide.mirax.MPP", "aperio.MPP",
                    "hamamatsu.XResolution", "tiff.XResolution", "tiff.ResolutionUnit")  # fmt: skip


def _objective_power(props: Mapping[str, Any]) -> float | None:
    for key in ("openslide.objective-power", "tiffslide.objective-power", "aperio.AppMag"):
        if (x := _as_float(props.get(key))) is not None:
            return x
    return None
