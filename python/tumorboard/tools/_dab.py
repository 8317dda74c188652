"""``dab_positive_fraction``: a classical colour-deconvolution baseline for IHC positivity.

It needs no model weights.

Colour deconvolution (Ruifrok & Johnston, "Quantification of histochemical staining by color
deconvolution", Anal. Quant. Cytol. Histol. 23(4), 2001): with optical densities
``OD_c = -log10(I_c / 255)`` per RGB channel (intensities clipped below at 1e-6 of full scale)
and the stain matrix whose rows are the published OD vectors of haematoxylin (0.65, 0.70, 0.29),
eosin (0.07, 0.99, 0.11) and DAB (0.27, 0.57, 0.78), the stain amounts are
``[H, E, DAB] = OD @ inv(M)``, clipped at 0. scikit-image's ``rgb2hed`` computes the same
quantities divided by 6 (it scales the natural log by ``log(1e-6)``).

A pixel is tissue when its total optical density (sum over R, G, B) is at least
``tissue_threshold`` (default 0.15: white background and glass are below it), and DAB-positive
when its DAB amount is at least ``dab_threshold`` (default 0.15 OD units, i.e. ``rgb2hed`` DAB
>= 0.025). The result is the DAB-positive fraction of the tissue *area*, a pixel-level
surrogate of the percentage of positive cells (it does not segment nuclei).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .._checks import finite
from ..errors import InvalidArgumentError
from ._image import image_name, load_rgb

#: Ruifrok & Johnston's stain OD vectors (rows: haematoxylin, eosin, DAB; columns: R, G, B).
RGB_FROM_HED = np.array([[0.65, 0.70, 0.29], [0.07, 0.99, 0.11], [0.27, 0.57, 0.78]])
#: Its inverse: OD (row vector) @ HED_FROM_RGB -> stain amounts.
HED_FROM_RGB = np.linalg.inv(RGB_FROM_HED)

DEFAULT_DAB_THRESHOLD = 0.15
DEFAULT_TISSUE_THRESHOLD = 0.15


def color_deconvolution(image: np.ndarray) -> np.ndarray:
    """Compute the haematoxylin, eosin and DAB amounts of an RGB uint8 image.

    By Ruifrok & Johnston's colour deconvolution (see the module docstring).

    Parameters
    ----------
    image : numpy.ndarray
        (h, w, 3|4) RGB(A) uint8 (or float in [0, 1]).

    Returns
    -------
    numpy.ndarray
        (h, w, 3) float64 stain amounts in OD units, >= 0.
    """
    rgb = load_rgb(image)
    od = -np.log10(np.maximum(rgb.astype(np.float64) / 255.0, 1e-6))
    return np.maximum(od @ HED_FROM_RGB, 0.0)


@dataclass(frozen=True)
class DabResult:
    """Result of :func:`dab_positive_fraction`.

    Attributes
    ----------
    fraction : float
        DAB-positive pixels / tissue pixels (0 when there is no tissue).
    percentage : float
        ``100 * fraction``.
    n_tissue_pixels, n_positive_pixels : int
        The counts behind it.
    dab_threshold, tissue_threshold : float
        The thresholds used (OD units).
    reply : str
        A sentence for the agent, in the style of MTBBench's IHC tool.
    """

    fraction: float
    percentage: float
    n_tissue_pixels: int
    n_positive_pixels: int
    dab_threshold: float
    tissue_threshold: float
    reply: str

    def to_dict(self) -> dict[str, float | int | str]:
        """Return the fields as a plain dict."""
        return dict(self.__dict__)


def dab_positive_fraction(
    image: str | os.PathLike[str] | np.ndarray,
    *,
    dab_threshold: float = DEFAULT_DAB_THRESHOLD,
    tissue_threshold: float = DEFAULT_TISSUE_THRESHOLD,
    name: str | None = None,
) -> DabResult:
    """Measure the fraction of the tissue area of an IHC image that is DAB-positive.

    Needs numpy only (Pillow to read files).

    Parameters
    ----------
    image : str or os.PathLike or numpy.ndarray
        A path or an (h, w, 3|4) uint8 RGB(A) array of a DAB/haematoxylin IHC image.
    dab_threshold : float, default 0.15
        DAB amount (OD units) at or above which a pixel counts as positive.
    tissue_threshold : float, default 0.15
        Total OD at or above which a pixel counts as tissue.
    name : str or None, default None
        The image name used in the reply (default: the file name).

    Returns
    -------
    DabResult
        The fraction, the counts behind it and a reply sentence.
    """
    for arg, v in (("dab_threshold", dab_threshold), ("tissue_threshold", tissue_threshold)):
        if finite(v, name=arg) < 0:
            raise InvalidArgumentError(f"{arg}: expected a non-negative number, got {v!r}")
    rgb = load_rgb(image)
    od = -np.log10(np.maximum(rgb.astype(np.float64) / 255.0, 1e-6))
    dab = np.maximum(od @ HED_FROM_RGB[:, 2], 0.0)
    tissue = od.sum(axis=-1) >= tissue_threshold
    positive = tissue & (dab >= dab_threshold)
    n_t, n_p = int(tissue.sum()), int(positive.sum())
    frac = n_p / n_t if n_t else 0.0
    pct = 100.0 * frac
    label = image_name(image, name)
    if n_t:
        reply = (
            f"According to the DAB colour-deconvolution baseline around {pct:.1f}% of the tissue "
            f"area in {label} is positively stained."
        )
    else:
        reply = f"{label} shows no tissue, so it cannot be analyzed by the DAB baseline."
    return DabResult(frac, pct, n_t, n_p, float(dab_threshold), float(tissue_threshold), reply)
