"""Intersection over union (Jaccard index) of sets, axis-aligned boxes and binary masks.

``IoU(A, B) = |A ∩ B| / |A ∪ B|`` (Jaccard 1912) with ``|.|`` the number of elements of a set,
the area of a box, or the number of true pixels of a mask. When both operands are empty the
ratio is 0/0; it is defined as ``empty`` (default 1.0: an empty prediction for an empty target
is a perfect match, the usual convention for segmentation masks). Pass ``empty=float("nan")`` to
leave such pairs undefined or ``empty=0.0`` to count them as misses.

Boxes are ``(x1, y1, x2, y2)``: the corners with the smallest and the largest coordinates, in
continuous coordinates, so that the area is ``(x2 - x1) * (y2 - y1)`` (the convention of
``torchvision.ops.box_iou`` and COCO-style xyxy boxes; no "+1" for inclusive pixel indices). A
box with ``x2 < x1`` or ``y2 < y1`` is an error; a box of zero width or height has zero area, and
two such boxes have an empty union (IoU = ``empty``).

MedBench v4 scores localization tasks with box IoU; MedInsightBench-style set overlap and mask
overlap use the same function.

References
----------
Jaccard, P. (1912). The distribution of the flora in the alpine zone. New Phytologist, 11(2),
    37-50.
Everingham, M. et al. (2010). The PASCAL Visual Object Classes (VOC) challenge. IJCV 88, 303-338
    (box IoU as the detection overlap criterion).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .._checks import as_array, flag
from ..errors import InvalidArgumentError, InvalidTypeError
from ._validate import empty_value

__all__ = ["box_iou", "iou", "mask_iou", "set_iou"]

Kind = Literal["auto", "set", "box", "mask"]


def _ratio(inter: np.ndarray, union: np.ndarray, empty: float) -> npt.NDArray[np.float64]:
    """Return ``inter / union`` as float64, with ``empty`` where the union is 0."""
    inter = np.asarray(inter, dtype=np.float64)
    union = np.asarray(union, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(union > 0, inter / np.where(union > 0, union, 1.0), float(empty))
    return np.asarray(out, dtype=np.float64)


# ------------------------------------------------------------------------------------------ sets


def _as_set(x: Any, name: str) -> frozenset[Hashable]:
    """Return a collection of hashable elements as a frozenset (strings are refused)."""
    if isinstance(x, (str, bytes)) or x is None:
        raise InvalidTypeError(
            f"{name}: expected a collection of hashable elements (set, list, tuple), got "
            f"{type(x).__name__}"
        )
    if isinstance(x, np.ndarray):
        x = x.tolist()
    try:
        return frozenset(x)
    except TypeError as exc:
        raise InvalidTypeError(
            f"{name}: expected a collection of hashable elements ({exc})"
        ) from exc


def set_iou(a: Collection[Hashable], b: Collection[Hashable], *, empty: float = 1.0) -> float:
    """Compute the Jaccard index of two collections taken as sets: ``|A ∩ B| / |A ∪ B|``.

    Duplicates are ignored (``["a", "a"]`` is ``{"a"}``).

    Parameters
    ----------
    a, b : collection of hashable
        The two collections (sets, lists, tuples); strings are refused.
    empty : float, default 1.0
        The value when both collections are empty.

    Returns
    -------
    float
        The Jaccard index.

    Examples
    --------
    >>> set_iou({"a", "b", "c"}, ["b", "c", "d"])
    0.5
    """
    empty = empty_value(empty)
    sa, sb = _as_set(a, "a"), _as_set(b, "b")
    union = len(sa | sb)
    if union == 0:
        return float(empty)
    return len(sa & sb) / union


def _set_batch_iou(
    a: Sequence[Any], b: Sequence[Any], *, pairwise: bool, empty: float
) -> npt.NDArray[np.float64]:
    """Return the set IoU of two batches of collections, element-wise or all pairs."""
    sa = [_as_set(x, f"a[{i}]") for i, x in enumerate(a)]
    sb = [_as_set(x, f"b[{i}]") for i, x in enumerate(b)]
    if pairwise:
        inter = np.array([[len(x & y) for y in sb] for x in sa], dtype=np.float64)
        inter = inter.reshape(len(sa), len(sb))
        la = np.array([len(x) for x in sa], dtype=np.float64)
        lb = np.array([len(y) for y in sb], dtype=np.float64)
        return _ratio(inter, la[:, None] + lb[None, :] - inter, empty)
    if len(sa) != len(sb):
        raise InvalidArgumentError(
            f"a and b: expected the same number of sets, got {len(sa)} and {len(sb)}"
        )
    inter = np.array([len(x & y) for x, y in zip(sa, sb, strict=False)], dtype=np.float64)
    union = np.array([len(x | y) for x, y in zip(sa, sb, strict=False)], dtype=np.float64)
    return _ratio(inter, union, empty)


# ----------------------------------------------------------------------------------------- boxes


def _as_boxes(x: Any, name: str) -> npt.NDArray[np.float64]:
    """Return validated finite boxes (4,) or (n, 4) with x1 <= x2 and y1 <= y2, as float64."""
    arr = as_array(x, name=name)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
    ):
        raise InvalidTypeError(
            f"{name}: expected numeric boxes (x1, y1, x2, y2), got dtype {arr.dtype}"
        )
    if arr.ndim not in (1, 2) or arr.shape[-1] != 4:
        raise InvalidArgumentError(
            f"{name}: expected a box (4,) or boxes (n, 4) as (x1, y1, x2, y2), got shape "
            f"{arr.shape}"
        )
    arr = arr.astype(np.float64)
    flat = arr.reshape(-1, 4)
    finite = np.isfinite(flat).all(axis=1)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise InvalidArgumentError(f"{name}: box {bad} has a NaN or infinite coordinate")
    inverted = (flat[:, 2] < flat[:, 0]) | (flat[:, 3] < flat[:, 1])
    if inverted.any():
        bad = int(np.flatnonzero(inverted)[0])
        raise InvalidArgumentError(
            f"{name}: box {bad} = {flat[bad].tolist()} has x2 < x1 or y2 < y1; expected corners "
            "(x1, y1, x2, y2) with x1 <= x2 and y1 <= y2"
        )
    return arr


def _common_scale(
    ba: npt.NDArray[np.float64], bb: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Scale each pair of boxes by one power of two so that its largest coordinate is in [1, 2).

    Widths of boxes with coordinates near 1e308 overflow (``1e308 - (-1e308)``), and so do their
    areas (a box 1e200 wide has an area of 1e400); areas of boxes near 1e-200 underflow to 0.
    IoU is invariant under scaling both boxes by the same factor, and multiplying by a power of
    two is exact, so each pair is brought to coordinates of magnitude below 2 first (widths
    below 4, areas below 16). Pairs already in [2^-250, 2^250] are left as they are, so their
    result is the same, bit for bit, as without this step.
    """
    m = np.maximum(np.abs(ba).max(axis=-1), np.abs(bb).max(axis=-1))
    with np.errstate(divide="ignore"):
        safe = (m == 0) | ((m >= 2.0**-250) & (m <= 2.0**250))
    if np.all(safe):
        return ba, bb
    _, e = np.frexp(m)
    shift = np.where(safe, 0, 1 - e)[..., None]
    return np.ldexp(ba, shift), np.ldexp(bb, shift)


def box_iou(
    a: npt.ArrayLike, b: npt.ArrayLike, *, pairwise: bool = False, empty: float = 1.0
) -> float | npt.NDArray[np.float64]:
    """Compute the IoU of axis-aligned boxes ``(x1, y1, x2, y2)`` (module notes: convention).

    ``inter = max(0, min(x2a, x2b) - max(x1a, x1b)) * max(0, min(y2a, y2b) - max(y1a, y1b))``,
    ``union = area(a) + area(b) - inter``, ``IoU = inter / union`` (``empty`` when union is 0).

    Parameters
    ----------
    a, b : array_like, shape (4,) or (n, 4)
        Boxes; element-wise with numpy broadcasting (a (4,) box against (n, 4) boxes gives n
        values).
    pairwise : bool, default False
        Return the ``(n, m)`` matrix of the IoU of every box of ``a`` with every box of ``b``
        (as ``torchvision.ops.box_iou``).
    empty : float, default 1.0
        The value when the union area is 0 (both boxes have zero area).

    Returns
    -------
    float or ndarray of float64
        A float for two single boxes, the broadcast shape element-wise, (n, m) pairwise.

    Examples
    --------
    >>> box_iou([0, 0, 2, 2], [1, 1, 3, 3])  # 1 / (4 + 4 - 1)
    0.14285714285714285
    """
    empty, pairwise = empty_value(empty), flag(pairwise, name="pairwise")
    ba, bb = _as_boxes(a, "a"), _as_boxes(b, "b")
    if pairwise:
        ba, bb = ba.reshape(-1, 4)[:, None, :], bb.reshape(-1, 4)[None, :, :]
    else:
        try:
            np.broadcast_shapes(ba.shape, bb.shape)
        except ValueError as exc:
            raise InvalidArgumentError(
                f"a and b: box arrays of shapes {ba.shape} and {bb.shape} do not broadcast"
            ) from exc
    ba, bb = _common_scale(ba, bb)
    w = np.clip(np.minimum(ba[..., 2], bb[..., 2]) - np.maximum(ba[..., 0], bb[..., 0]), 0, None)
    h = np.clip(np.minimum(ba[..., 3], bb[..., 3]) - np.maximum(ba[..., 1], bb[..., 1]), 0, None)
    inter = w * h
    area_a = (ba[..., 2] - ba[..., 0]) * (ba[..., 3] - ba[..., 1])
    area_b = (bb[..., 2] - bb[..., 0]) * (bb[..., 3] - bb[..., 1])
    out = _ratio(inter, area_a + area_b - inter, empty)
    return float(out) if out.ndim == 0 else out


# ----------------------------------------------------------------------------------------- masks


def _as_mask(x: Any, name: str) -> npt.NDArray[np.bool_]:
    """Return a validated boolean mask (H, W) or stack of masks (..., H, W)."""
    arr = as_array(x, name=name)
    if arr.dtype != np.bool_:
        if arr.dtype.kind not in "iu":
            raise InvalidTypeError(
                f"{name}: expected a boolean mask (or 0/1 integers), got dtype {arr.dtype}"
            )
        other = arr[(arr != 0) & (arr != 1)]
        if other.size:
            raise InvalidArgumentError(
                f"{name}: expected an integer mask of only 0 and 1, got the value {other.flat[0]}"
            )
        arr = arr.astype(bool)
    if arr.ndim < 2:
        raise InvalidArgumentError(
            f"{name}: expected a mask (H, W) or masks (n, H, W), got shape {arr.shape}"
        )
    return arr


def mask_iou(
    a: npt.ArrayLike, b: npt.ArrayLike, *, pairwise: bool = False, empty: float = 1.0
) -> float | npt.NDArray[np.float64]:
    """Compute the IoU of binary masks: true pixels in both over true pixels in either.

    Parameters
    ----------
    a, b : array_like of bool (or 0/1 integers), shape (H, W) or (..., H, W)
        Masks; the last two axes are the image, leading axes are batch axes that broadcast
        (a single (H, W) target against (n, H, W) predictions gives n values).
    pairwise : bool, default False
        With ``a`` (n, H, W) and ``b`` (m, H, W), return the (n, m) matrix of all IoUs
        (computed as one matrix product of the flattened masks).
    empty : float, default 1.0
        The value when both masks are empty.

    Returns
    -------
    float or ndarray of float64
        A float for two (H, W) masks, the broadcast batch shape element-wise, (n, m) pairwise.
    """
    empty, pairwise = empty_value(empty), flag(pairwise, name="pairwise")
    ma, mb = _as_mask(a, "a"), _as_mask(b, "b")
    if ma.shape[-2:] != mb.shape[-2:]:
        raise InvalidArgumentError(
            f"a and b: expected masks of the same (H, W), got {ma.shape[-2:]} and {mb.shape[-2:]}"
        )
    if pairwise:
        if ma.ndim != 3 or mb.ndim != 3:
            raise InvalidArgumentError(
                f"pairwise=True needs mask stacks (n, H, W) and (m, H, W), got {ma.shape} and "
                f"{mb.shape}"
            )
        fa = ma.reshape(ma.shape[0], -1).astype(np.float64)
        fb = mb.reshape(mb.shape[0], -1).astype(np.float64)
        inter = fa @ fb.T
        union = fa.sum(axis=1)[:, None] + fb.sum(axis=1)[None, :] - inter
        return _ratio(inter, union, empty)
    try:
        np.broadcast_shapes(ma.shape, mb.shape)
    except ValueError as exc:
        raise InvalidArgumentError(
            f"a and b: mask arrays of shapes {ma.shape} and {mb.shape} do not broadcast"
        ) from exc
    inter = np.logical_and(ma, mb).sum(axis=(-2, -1))
    union = np.logical_or(ma, mb).sum(axis=(-2, -1))
    out = _ratio(inter, union, empty)
    return float(out) if out.ndim == 0 else out


# -------------------------------------------------------------------------------------- dispatch


def _is_collection_batch(x: Any) -> bool:
    """Tell whether ``x`` is a non-empty list or tuple of collections (a batch of sets)."""
    if not isinstance(x, (list, tuple)) or not x:
        return False
    return all(
        isinstance(v, (set, frozenset, list, tuple)) or (isinstance(v, np.ndarray) and v.ndim == 1)
        for v in x
    )


def _infer_kind(a: Any, b: Any) -> str:
    """Infer whether the operands of :func:`iou` are sets, boxes or masks."""
    if isinstance(a, (set, frozenset)) or isinstance(b, (set, frozenset)):
        return "set"
    arr = a if isinstance(a, np.ndarray) else None
    if arr is not None and arr.dtype == np.bool_:
        return "mask"
    if _is_collection_batch(a) and any(isinstance(v, (set, frozenset)) for v in a):
        return "set"
    try:
        probe = np.asarray(a)
    except (ValueError, TypeError):
        probe = None
    if probe is not None and probe.dtype == np.bool_ and probe.ndim >= 2:
        return "mask"
    if (
        probe is not None
        and probe.dtype != object
        and np.issubdtype(probe.dtype, np.number)
        and probe.ndim in (1, 2)
        and probe.shape[-1] == 4
    ):
        return "box"
    raise InvalidTypeError(
        "iou: cannot tell whether the inputs are sets, boxes or masks; pass "
        "kind='set', 'box' or 'mask'"
    )


def iou(
    a: Any,
    b: Any,
    *,
    kind: Kind = "auto",
    pairwise: bool = False,
    empty: float = 1.0,
) -> float | npt.NDArray[np.float64]:
    """Compute the intersection over union of sets, axis-aligned boxes or binary masks.

    ``|A ∩ B| / |A ∪ B|``, with ``empty`` (default 1.0) when both are empty; see
    :func:`set_iou`, :func:`box_iou` and :func:`mask_iou` for each kind.

    Parameters
    ----------
    a, b : sets, boxes or masks
        * ``kind="set"``: two collections (sets, lists, tuples; duplicates ignored) give a
          float; two equally long sequences of collections give an (n,) array (or (n, m) with
          ``pairwise``). A list or tuple whose elements are all lists, tuples or sets is read
          as a batch; pass a ``set`` to mean one set of tuples.
        * ``kind="box"``: arrays (4,) or (n, 4) of ``(x1, y1, x2, y2)``.
        * ``kind="mask"``: bool arrays (H, W) or (n, H, W).
    kind : {"auto", "set", "box", "mask"}, default "auto"
        "auto" infers it: Python sets (or a list of them) are sets, bool arrays of 2 or more
        dimensions are masks, numeric arrays whose last axis has length 4 are boxes; anything
        else needs an explicit ``kind``.
    pairwise : bool, default False
        All-pairs (n, m) matrix instead of element-wise values.
    empty : float, default 1.0
        The value of 0/0 (both operands empty).

    Returns
    -------
    float or ndarray of float64
        A float for two sets; otherwise as in :func:`set_iou`, :func:`box_iou` and
        :func:`mask_iou`.

    Raises
    ------
    InvalidTypeError
        ``kind="auto"`` cannot tell the kind of the inputs, or inputs of the wrong type.
    InvalidArgumentError
        An unknown ``kind``, or inputs of incompatible shapes.

    Examples
    --------
    >>> iou({1, 2, 3}, {2, 3, 4})
    0.5
    >>> iou([[0, 0, 2, 2]], [[1, 0, 3, 2]], kind="box").tolist()
    [0.3333333333333333]
    """
    empty, pairwise = empty_value(empty), flag(pairwise, name="pairwise")
    if kind == "auto":
        kind = _infer_kind(a, b)  # type: ignore[assignment]
    if kind == "set":
        if _is_collection_batch(a) or _is_collection_batch(b) or pairwise:
            if not (_is_collection_batch(a) or len(a) == 0) or not (
                _is_collection_batch(b) or len(b) == 0
            ):
                raise InvalidTypeError(
                    "iou(kind='set'): pass two collections, or two sequences of collections"
                )
            return _set_batch_iou(a, b, pairwise=pairwise, empty=empty)
        return set_iou(a, b, empty=empty)
    if kind == "box":
        return box_iou(a, b, pairwise=pairwise, empty=empty)
    if kind == "mask":
        return mask_iou(a, b, pairwise=pairwise, empty=empty)
    raise InvalidArgumentError(f"kind: expected 'auto', 'set', 'box' or 'mask', got {kind!r}")
