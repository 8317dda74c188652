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
>= 0.025) and at least :data:`DAB_OVER_EOSIN` (3) times its eosin amount. The three stain
vectors are not orthogonal, so pink eosin deconvolves into about as much "DAB" as eosin (an H&E
pixel of RGB (230, 150, 190) gives E 0.155, DAB 0.145; noisy pink pixels up to about twice as
much), while brown DAB gives almost no eosin: without the second condition the eosin of an H&E
patch reads as DAB staining (an H&E patch gave "74.2% positively stained"). The result is the
DAB-positive fraction of the tissue *area*, a pixel-level surrogate of the percentage of
positive cells (it does not segment nuclei).

No DAB signal. When fewer than ``min_dab_fraction`` (default 0.01, i.e. 1%) of the tissue
pixels are DAB-positive, the image shows no DAB staining (an H&E or other non-IHC image, or an
IHC without any brown): :attr:`DabResult.dab_found` is False and the reply says that no DAB
staining was found instead of giving a percentage.
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
#: A DAB-positive pixel has at least this many times as much DAB as eosin (module docstring).
DAB_OVER_EOSIN = 3.0
#: Share of the tissue pixels below which an image shows no DAB staining (module docstring).
DEFAULT_MIN_DAB_FRACTION = 0.01


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
        A sentence for the agent, in the style of MTBBench's IHC tool; it gives no percentage
        when ``dab_found`` is False.
    dab_found : bool, default True
        Whether the image shows DAB staining: at least ``min_dab_fraction`` of the tissue
        pixels are DAB-positive (False for an H&E image, or an image without tissue).
    min_dab_fraction : float, default 0.01
        The share of the tissue used for ``dab_found``.
    """

    fraction: float
    percentage: float
    n_tissue_pixels: int
    n_positive_pixels: int
    dab_threshold: float
    tissue_threshold: float
    reply: str
    dab_found: bool = True
    min_dab_fraction: float = DEFAULT_MIN_DAB_FRACTION

    def to_dict(self) -> dict[str, float | int | str]:
        """Return the fields as a plain dict."""
        return dict(self.__dict__)


def dab_positive_fraction(
    image: str | os.PathLike[str] | np.ndarray,
    *,
    dab_threshold: float = DEFAULT_DAB_THRESHOLD,
    tissue_threshold: float = DEFAULT_TISSUE_THRESHOLD,
    min_dab_fraction: float = DEFAULT_MIN_DAB_FRACTION,
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
    min_dab_fraction : float, default 0.01
        Share of the tissue pixels (0..1) below which the image shows no DAB staining: the
        reply then says so instead of giving a percentage (``DabResult.dab_found`` is False).
    name : str or None, default None
        The image name used in the reply (default: the file name).

    Returns
    -------
    DabResult
        The fraction, the counts behind it, whether DAB staining was found, and a reply.

    References
    ----------
    A. C. Ruifrok and D. A. Johnston, "Quantification of histochemical staining by color
    deconvolution", Analytical and Quantitative Cytology and Histology 23(4):291-299, 2001
    (the stain vectors of :data:`RGB_FROM_HED`).
    """
    for arg, v in (("dab_threshold", dab_threshold), ("tissue_threshold", tissue_threshold)):
        if finite(v, name=arg) < 0:
            raise InvalidArgumentError(f"{arg}: expected a non-negative number, got {v!r}")
    if not 0.0 <= finite(min_dab_fraction, name="min_dab_fraction") <= 1.0:
        raise InvalidArgumentError(
            f"min_dab_fraction: expected a number in [0, 1], got {min_dab_fraction!r}"
        )
    rgb = load_rgb(image)
    od = -np.log10(np.maximum(rgb.astype(np.float64) / 255.0, 1e-6))
    stains = np.maximum(od @ HED_FROM_RGB[:, 1:], 0.0)  # eosin, DAB
    tissue = od.sum(axis=-1) >= tissue_threshold
    eosin, dab = stains[..., 0], stains[..., 1]
    positive = tissue & (dab >= dab_threshold) & (dab >= DAB_OVER_EOSIN * eosin)
    n_t, n_p = int(tissue.sum()), int(positive.sum())
    frac = n_p / n_t if n_t else 0.0
    pct = 100.0 * frac
    found = n_t > 0 and n_p > 0 and frac >= min_dab_fraction
    label = image_name(image, name)
    if not n_t:
        reply = f"{label} shows no tissue, so it cannot be analyzed by the DAB baseline."
    elif not found:
        reply = (
            f"No DAB (brown) staining was found in {label}: fewer than "
            f"{100 * min_dab_fraction:g}% of the tissue area is DAB-positive, so the DAB baseline "
            "gives no positive percentage (this looks like a non-IHC stain such as H&E, or an "
            "IHC without DAB signal)."
        )
    else:
        reply = (
            f"According to the DAB colour-deconvolution baseline around {pct:.1f}% of the tissue "
            f"area in {label} is positively stained."
        )
    return DabResult(frac, pct, n_t, n_p, float(dab_threshold), float(tissue_threshold), reply,
                     found, float(min_dab_fraction))  # fmt: skip
