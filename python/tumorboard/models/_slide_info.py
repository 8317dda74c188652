"""The slide-encoder registry: TRIDENT's slide encoder names and what each needs and gives.

One :class:`SlideEncoderInfo` row per name of TRIDENT's slide encoder registry
(mahmoodlab/TRIDENT ``trident/slide_encoder_models/load.py``@04e4c2b, ``encoder_registry`` and
``slide_to_patch_encoder_name``; the magnification and patch size of each are those of its
``--slide_encoder NAME --patch_size P --mag M`` line in TRIDENT's README@0120b8b): a
``mean-{patch encoder}`` row per patch encoder of :func:`tumorboard.models.available`, ``abmil``,
``feather``, ``feather_uni_v2``, ``titan``, ``chief``, ``madeleine``, ``gigapath`` and
``prism`` (built), and ``threads`` and ``care`` (listed with the reason they are not built).

``care`` (Zhang et al., "CARE: A Molecular-Guided Foundation Model with Adaptive Region Modeling
for Whole Slide Image Analysis", CVPR 2026, arXiv 2602.21637): its row is TRIDENT's
``CARESlideEncoder`` (``load.py``@a91fa84, added in bb82938, PR #218): CONCH v1.5 features at
20x / 512 px, coordinates divided by ``patch_size_level0``, float32, the model's 512-d
``wsi_embedding``. It is not built because no public source found gives the architecture: the
model code is remote code inside the gated Hugging Face repository Zipper-1/CARE, and
zdipath/CARE@7cd2301 (``care_wsi_encoder_api_temp.py``) imports ``models.CARE.CareSSL``
(``embed_dim=512, id_dim=768, num_heads=8, num_region=8``), a module absent from every commit
of that repository, and loads its checkpoint with ``strict=False``. Neither gives the layer list
nor the checkpoint's key names and shapes, which a strict loader needs.

The rows need no torch; the ``mean-*`` rows are made from the patch-encoder registry when first
asked for.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

from ..errors import InvalidArgumentError, InvalidTypeError

__all__ = ["SlideEncoderInfo", "slide_encoder_info", "slide_encoders"]

Status = Literal["built", "not built"]

_FEATHER_SOURCE = "Hugging Face MahmoodLab/abmil.base.{}.pc108-24k, model.safetensors (gated)"


@dataclass(frozen=True)
class SlideEncoderInfo:
    """What the registry knows about a slide encoder.

    Attributes
    ----------
    name : str
        TRIDENT's name, used in the ``slide_features_{name}`` folders.
    patch_encoder : str or None
        The tumorboard name of the patch encoder whose features it reads (None: any, the one
        given as ``model=``).
    trident_patch_encoder : str or None
        That patch encoder's TRIDENT name (its ``features_{name}`` folder), None for any.
    magnification : float or None
        The magnification TRIDENT runs it at (None: the tiling's).
    patch_size : int or None
        The patch side in pixels TRIDENT runs it at (None: the tiling's).
    in_dim : int or None
        The width of the patch features it reads (None: that of the patch encoder).
    embed_dim : int or None
        The width of the slide embedding (None: ``in_dim``, or not recorded).
    precision : str or None
        The precision TRIDENT runs it in on CUDA ("fp32", "fp16", "bf16"; None: not recorded).
    status : {"built", "not built"}
        Whether tumorboard has the architecture.
    reason : str or None
        Why it is not built (None for a built one).
    uses_coords : bool
        Whether the patch coordinates are an input.
    weights_source : str
        Where the weights come from (tumorboard never downloads them).
    """

    name: str
    patch_encoder: str | None
    trident_patch_encoder: str | None
    magnification: float | None
    patch_size: int | None
    in_dim: int | None
    embed_dim: int | None
    precision: str | None
    status: Status
    reason: str | None
    uses_coords: bool
    weights_source: str

    @property
    def needs_weights(self) -> bool:
        """Whether it has parameters (every slide encoder but the ``mean-*`` ones)."""
        return not self.name.startswith("mean-")


def _row(name: str, patch: str | None, trident_patch: str | None, mag: float | None,
         size: int | None, in_dim: int | None, dim: int | None, precision: str | None,
         weights: str, *, reason: str | None = None,
         coords: bool = False) -> SlideEncoderInfo:  # fmt: skip
    status: Status = "built" if reason is None else "not built"
    return SlideEncoderInfo(name, patch, trident_patch, mag, size, in_dim, dim, precision, status,
                            reason, coords, weights)  # fmt: skip


#: The rows other than ``mean-*``, in TRIDENT's registry order.
_ROWS = (
    _row("threads", "conch_v15", "conch_v15", 20.0, 512, 768, None, None,
         "not released (TRIDENT: 'Coming Soon')",
         reason="neither weights nor architecture are published (TRIDENT lists it as coming "
         "soon)"),
    _row("titan", "conch_v15", "conch_v15", 20.0, 512, 768, 768, "fp16",
         "Hugging Face MahmoodLab/TITAN, model.safetensors (gated)", coords=True),
    _row("prism", "virchow", "virchow", 20.0, 224, 2560, 1280, "fp16",
         "Hugging Face paige-ai/Prism (gated; only its image_resampler.* keys are used)"),
    _row("chief", "ctranspath", "ctranspath", 10.0, 256, 768, 768, "fp32",
         "hms-dbmi/CHIEF model_weight/CHIEF_pretraining.pth (Google Drive link in CHIEF's "
         "README)"),
    _row("gigapath", "gigapath", "gigapath", 20.0, 256, 1536, 768, "fp16",
         "Hugging Face prov-gigapath/prov-gigapath, slide_encoder.pth (gated)", coords=True),
    _row("madeleine", "conch", "conch_v1", 10.0, 256, 512, 512, "bf16",
         "Hugging Face MahmoodLab/madeleine, model.pt (gated)"),
    _row("feather", "conch_v15", "conch_v15", 20.0, 512, 768, 512, "fp32",
         _FEATHER_SOURCE.format("conch_v15")),
    _row("feather_uni_v2", "uni2-h", "uni_v2", 20.0, 256, 1536, 512, "fp32",
         _FEATHER_SOURCE.format("uni_v2")),
    _row("care", "conch_v15", "conch_v15", 20.0, 512, 768, 512, "fp32",
         "Hugging Face Zipper-1/CARE (gated)", coords=True,
         reason="its layers and checkpoint key names are not public: the model is Hugging Face "
         "remote code inside the gated Zipper-1/CARE repository, and the authors' GitHub "
         "zdipath/CARE only calls it (its models.CARE.CareSSL module is in none of its commits; "
         "it loads the weights with strict=False)"),
    _row("abmil", None, None, None, None, None, None, "fp32",
         "your own training run (TRIDENT ABMILSlideEncoder layout, model.* keys)"),
)  # fmt: skip


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-")


@functools.lru_cache(maxsize=1)
def _table() -> tuple[tuple[SlideEncoderInfo, ...], dict[str, SlideEncoderInfo]]:
    from ._registry import available, info

    means = []
    for model in available():
        m = info(model)
        if m.kind != "encoder":
            continue
        means.append(_row(f"mean-{m.trident_name or m.name}", m.name, m.trident_name,
                          None, None, m.embed_dim, m.embed_dim, "fp32",
                          "none (no parameters: the mean of the patch features)"))  # fmt: skip
    rows = _ROWS + tuple(means)
    lookup = {_key(r.name): r for r in rows}
    for r in means:  # mean-{tumorboard name} as well as mean-{TRIDENT name}
        lookup.setdefault(_key(f"mean-{r.patch_encoder}"), r)
    return rows, lookup


def slide_encoders() -> tuple[str, ...]:
    """List the slide encoder names, built or not.

    Returns
    -------
    tuple of str
        TRIDENT's names (``titan``, ``feather``, ``abmil``, ``mean-uni_v2``, ...), in registry
        order; :func:`slide_encoder_info` says which are built.
    """
    return tuple(r.name for r in _table()[0])


def slide_encoder_info(name: str) -> SlideEncoderInfo:
    """Look up a slide encoder by name.

    Parameters
    ----------
    name : str
        A name of :func:`slide_encoders`; ``_`` and ``-`` are equivalent and ``mean-`` takes a
        tumorboard patch encoder name too (``mean-uni2-h`` is ``mean-uni_v2``).

    Returns
    -------
    SlideEncoderInfo
        Its registry row.

    Raises
    ------
    InvalidArgumentError
        An unknown name.
    InvalidTypeError
        ``name`` is not a str.
    """
    if not isinstance(name, str):
        raise InvalidTypeError(f"slide_encoder: expected a name (str), got {type(name).__name__}")
    row = _table()[1].get(_key(name))
    if row is None:
        raise InvalidArgumentError(
            f"slide_encoder: expected one of {', '.join(slide_encoders())}, got {name!r}"
        )
    return row
