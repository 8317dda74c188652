"""``conch_zero_shot``: CONCH zero-shot labelling of a region of interest, as MTBBench does it.

MTBBench's CONCH tool is goodfire-ai/mtbbench ``neurips25/tools/conch.py`` and
``neurips25/models/agent_with_tools.py``@ae2f8fe; the model is mahmoodlab/CONCH
``conch/open_clip_custom/`` (``coca_model.py``, ``vision_tower.py``, ``transformer.py``)@141cc09.

Preprocessing is CONCH's: resize the shorter side to the model's image size (bicubic, Pillow's
filter), centre crop, scale to [0, 1], normalise with the OpenAI CLIP statistics. The probability
of each label is ``softmax(exp(logit_scale) * img @ txt.T)`` over the labels' prompt embeddings
(L2-normalised; a prompt ensemble averages the normalised prompt embeddings and re-normalises).
The reported probability is the maximum rounded to 2 decimals; its bin: [0, 0.2) "very low",
[0.2, 0.4) "low", [0.4, 0.6) "medium", [0.6, 0.8) "high", [0.8, 1] "very high". The reply is
MTBBench's ``The image resembles {label} with {bin} probability.``; :func:`mtbbench_reply`
joins several and appends MTBBench's caveat.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._constants import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
from ..errors import InvalidArgumentError
from ._image import load_rgb

#: MTBBench's suffix after the CONCH replies (appended with no separator).
CONCH_CAVEAT = (
    "You can use this information, but keep in mind that CONCH is not perfect and you should "
    "also use your own reasoning."
)
BINS = ("very low", "low", "medium", "high", "very high")


def confidence_bin(p: float) -> str:
    """Return MTBBench's bin of a (rounded) probability.

    [0, 0.2) "very low", [0.2, 0.4) "low", [0.4, 0.6) "medium", [0.6, 0.8) "high", [0.8, 1]
    "very high".
    """
    if not 0.0 <= p <= 1.0:
        raise InvalidArgumentError(f"probability: expected a number in [0, 1], got {p}")
    return BINS[min(int(p / 0.2 + 1e-12), 4)] if p < 1.0 else BINS[4]


@dataclass(frozen=True)
class ConchResult:
    """Result of :func:`conch_zero_shot`.

    Attributes
    ----------
    label : str
        The label with the highest probability.
    probability : float
        That probability rounded to 2 decimals (as MTBBench reports it).
    confidence : str
        Its bin ("very low", "low", "medium", "high", "very high").
    probabilities : dict of str to float
        Every label's unrounded probability, in the given order.
    reply : str
        ``The image resembles {label} with {confidence} probability.``
    """

    label: str
    probability: float
    confidence: str
    probabilities: dict[str, float]
    reply: str

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a plain dict."""
        return dict(self.__dict__)


def mtbbench_reply(results: Sequence[ConchResult]) -> str:
    """Return MTBBench's tool message for several CONCH results.

    The replies are joined by newlines, then :data:`CONCH_CAVEAT` is appended with no separator.
    """
    return "\n".join(r.reply for r in results) + CONCH_CAVEAT


def preprocess_conch(image: np.ndarray, size: int) -> np.ndarray:
    """Preprocess an RGB uint8 image as CONCH does, into (1, 3, size, size) float32.

    CONCH's resize (shorter side, bicubic), centre crop and normalisation.
    """
    from ..slides import resize

    rgb = load_rgb(image)
    h, w = rgb.shape[:2]
    # torchvision Resize(int): the shorter side becomes `size`, the longer int(size * long/short)
    nh, nw = (size, int(size * w / h)) if h <= w else (int(size * h / w), size)
    r = resize(rgb, (nh, nw), interpolation="bicubic") if (nh, nw) != (h, w) else rgb
    top = int(round((nh - size) / 2.0))
    left = int(round((nw - size) / 2.0))
    crop = r[top : top + size, left : left + size].astype(np.float32) / 255.0
    x = (crop - np.asarray(OPENAI_CLIP_MEAN, np.float32)) / np.asarray(OPENAI_CLIP_STD, np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None])


def conch_zero_shot(
    image: str | os.PathLike[str] | np.ndarray,
    labels: Sequence[str],
    *,
    model: Any,
    prompts: Sequence[Sequence[str]] | None = None,
) -> ConchResult:
    """Find the label of ``labels`` that CONCH finds most similar to ``image``.

    Parameters
    ----------
    image : str or os.PathLike or numpy.ndarray
        A path or an RGB(A) uint8 array (an H&E region of interest).
    labels : sequence of str
        The candidate labels (MTBBench passes the options of the request verbatim and uses them
        as the prompts).
    model : ConchModel
        A full CONCH model (``tumorboard.models.load_conch(weights=..., tokenizer=...)``) with
        ``encode_image``, ``encode_prompts`` / ``class_embeddings`` and ``logit_scale``.
    prompts : sequence of sequence of str or None, default None
        Optional prompt ensembles, ``prompts[i]`` for ``labels[i]`` (default: each label is its
        own single prompt).

    Returns
    -------
    ConchResult
        The label, its probability and bin, and MTBBench's reply.
    """
    import torch

    labels = [str(lab) for lab in labels] if not isinstance(labels, str) else [labels]
    if len(labels) < 1 or any(not lab.strip() for lab in labels):
        raise InvalidArgumentError("labels: expected a non-empty list of non-empty strings")
    if prompts is not None and len(prompts) != len(labels):
        raise InvalidArgumentError(
            f"prompts: expected one list per label ({len(labels)}), got {len(prompts)}"
        )
    size = int(model.image_size)
    x = preprocess_conch(load_rgb(image), size)
    p = next(model.parameters())
    with torch.inference_mode():
        img = model.encode_image(torch.from_numpy(x).to(p.device, p.dtype))
        if prompts is None:
            txt = model.encode_prompts(labels)
        else:
            txt = model.class_embeddings([list(q) for q in prompts])
        probs = model.zero_shot_probs(img.float(), txt.float())[0].double().cpu().numpy()
    i = int(np.argmax(probs))
    prob = round(float(probs[i]), 2)
    conf = confidence_bin(prob)
    return ConchResult(
        label=labels[i],
        probability=prob,
        confidence=conf,
        probabilities={lab: float(v) for lab, v in zip(labels, probs, strict=True)},
        reply=f"The image resembles {labels[i]} with {conf} probability.",
    )
