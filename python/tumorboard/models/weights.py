"""Reading, checking and writing model weights.

Checkpoints are untrusted input. Pickled files (``.bin``, ``.pt``, ``.pth``, ``.ckpt``) are read
only with ``torch.load(weights_only=True)``, which unpickles tensors and plain containers and
nothing else; a file that needs other objects is refused with :class:`UnsafeCheckpointError`
and never unpickled. ``.safetensors`` files are read with the ``safetensors`` package.

Common wrappers are unwrapped (a ``state_dict`` / ``model_state_dict`` / ``model`` / ``module`` /
``net`` entry holding the tensors) and prefixes that wrap every key (``module.`` from
``DataParallel``/``DistributedDataParallel``, ``_orig_mod.`` from ``torch.compile``) are
stripped. Loading is strict: before any tensor is copied, the checkpoint's keys and shapes are
compared with the module's and every missing, unexpected and mis-shaped key is listed in one
:class:`CheckpointKeyError` that names the file.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import zipfile
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..errors import CheckpointKeyError as CheckpointKeyError  # re-exported
from ..errors import MissingDependencyError, MissingFileError
from ..errors import RandomWeightsWarning as RandomWeightsWarning  # re-exported
from ..errors import UnsafeCheckpointError as UnsafeCheckpointError  # re-exported
from ..errors import WeightsError as WeightsError  # re-exported

__all__ = [
    "CheckpointKeyError",
    "KeyMismatch",
    "RandomWeightsWarning",
    "RANDOM_WEIGHTS",
    "UnsafeCheckpointError",
    "WeightsError",
    "check_state_dict",
    "check_state_values",
    "file_fingerprint",
    "load_state_dict",
    "read_state_dict",
    "save_state_dict",
    "state_dict_fingerprint",
]

#: Suffixes read with ``torch.load(weights_only=True)``; everything else but ``.safetensors``
#: is also tried that way.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt")
#: Top-level entries that hold the state dict in common training checkpoints, tried in order.
WRAPPER_KEYS = ("state_dict", "model_state_dict", "model", "module", "net")
#: Prefixes stripped when every key carries them (applied repeatedly, in any order).
WRAPPER_PREFIXES = ("module.", "_orig_mod.")

_HASH_CHUNK = 1 << 20

#: The weights fingerprint recorded for a model built without weights (random parameters).
RANDOM_WEIGHTS = "random"


@dataclass(frozen=True)
class KeyMismatch:
    """One key whose tensor shape differs between the module and the checkpoint.

    Attributes
    ----------
    key : str
        The parameter or buffer name.
    expected : tuple of int
        The module's shape.
    found : tuple of int
        The checkpoint's shape.
    """

    key: str
    expected: tuple[int, ...]
    found: tuple[int, ...]


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "no detail"


def _is_tensor_dict(obj: object) -> bool:
    return (
        isinstance(obj, Mapping)
        and len(obj) > 0
        and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items())
    )


def _unwrap(obj: object, path: Path) -> dict[str, torch.Tensor]:
    if _is_tensor_dict(obj):
        state = dict(obj)  # type: ignore[arg-type]
    else:
        state = None
        if isinstance(obj, Mapping):
            for key in WRAPPER_KEYS:
                if key in obj and _is_tensor_dict(obj[key]):
                    state = dict(obj[key])
                    break
        if state is None:
            if isinstance(obj, Mapping):
                top = ", ".join(repr(k) for k in list(obj)[:10]) or "none"
                what = f"a dict with top-level keys {top}"
            else:
                what = f"an object of type {type(obj).__name__}"
            raise WeightsError(
                path,
                f"no state dict found: the file holds {what}; expected a mapping of parameter "
                f"names to tensors, possibly under one of {', '.join(WRAPPER_KEYS)}",
            )
    changed = True
    while changed:
        changed = False
        for prefix in WRAPPER_PREFIXES:
            if all(k.startswith(prefix) for k in state):
                state = {k[len(prefix) :]: v for k, v in state.items()}
                changed = True
    return state


def read_state_dict(path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """Read a checkpoint into a flat ``{name: tensor}`` dict on the CPU.

    ``.safetensors`` files are read with safetensors; every other file with
    ``torch.load(weights_only=True)`` (``.bin``, ``.pt``, ``.pth``, ``.ckpt``). Wrappers and
    ``module.`` / ``_orig_mod.`` prefixes are removed (module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        The checkpoint file.

    Returns
    -------
    dict of str to torch.Tensor
        The state dict.

    Raises
    ------
    FileNotFoundError
        The file does not exist (:class:`~tumorboard.errors.MissingFileError`).
    UnsafeCheckpointError
        The pickle needs objects beyond tensors and plain containers.
    WeightsError
        The file is not a readable checkpoint, holds no state dict, or is a zip checkpoint
        (torch's format) with a member that fails its CRC-32 check.
    """
    p = Path(path)
    if not p.is_file():
        raise MissingFileError(f"checkpoint not found: {p}")
    if p.suffix.lower() == ".safetensors":
        try:
            from safetensors.torch import load_file
        except ImportError as exc:  # pragma: no cover - safetensors is in the embed extra
            raise MissingDependencyError.for_extra(
                "reading .safetensors", package="safetensors", extra="embed", cause=exc
            ) from exc
        try:
            obj: object = load_file(str(p), device="cpu")
        except Exception as exc:
            raise WeightsError(p, f"not a readable safetensors file ({exc})") from exc
        return _unwrap(obj, p)
    _check_zip_members(p)
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        text = str(exc)
        if "weights only load failed" not in text.lower():
            raise WeightsError(p, f"not a readable torch checkpoint ({_first_line(text)})") from exc
        detail = re.search(r"(?:Unsupported global: GLOBAL|unsupported GLOBAL) (\S+)", text)
        needs = f" (it needs {detail.group(1)})" if detail else ""
        raise UnsafeCheckpointError(
            p,
            f"refused: this pickled checkpoint needs Python objects other than tensors and plain "
            f"containers{needs}. tumorboard loads pickles only with torch.load(weights_only=True) "
            "because unpickling arbitrary objects can run code. Re-save just the weights from a "
            "trusted environment, e.g. torch.save(model.state_dict(), 'weights.pt') or "
            "safetensors.torch.save_file(model.state_dict(), 'weights.safetensors').",
        ) from exc
    except Exception as exc:  # torch raises RuntimeError, KeyError, EOFError... on junk files
        raise WeightsError(
            p, f"not a readable torch checkpoint ({type(exc).__name__}: {_first_line(str(exc))})"
        ) from exc
    return _unwrap(obj, p)


def _check_zip_members(path: Path) -> None:
    """Refuse a zip checkpoint (torch's format since 1.6) whose members fail their CRC-32.

    ``torch.load`` reads stored (uncompressed) members without checking their CRC, so a flipped
    byte inside a tensor would load as a wrong weight. Every member is read once and checked
    against the CRC-32 of the central directory (:meth:`zipfile.ZipFile.testzip`). Files that
    are not zip archives (legacy pickles) are left to ``torch.load``.
    """
    if not zipfile.is_zipfile(path):
        return
    try:
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
        raise WeightsError(path, f"damaged zip checkpoint ({_first_line(str(exc))})") from exc
    if bad is not None:
        raise WeightsError(
            path,
            f"damaged checkpoint: member {bad!r} fails its CRC-32 check (the file was changed "
            "or corrupted after it was saved; download or copy it again)",
        )


def check_state_dict(
    module: nn.Module,
    state: Mapping[str, torch.Tensor],
    *,
    path: str | os.PathLike[str] = "<state dict>",
    model: str | None = None,
) -> None:
    """Check that ``state`` has exactly the module's keys with the module's shapes.

    Works on modules whose tensors live on the meta device.

    Parameters
    ----------
    module : torch.nn.Module
        The model.
    state : Mapping of str to torch.Tensor
        The state dict to check.
    path : str or os.PathLike, default "<state dict>"
        The file named in the error.
    model : str or None, default None
        The model named in the error (default: the module's class name).

    Raises
    ------
    CheckpointKeyError
        Listing every missing, unexpected and mis-shaped key.
    """
    expected = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    found = {k: tuple(v.shape) for k, v in state.items()}
    missing = {k: s for k, s in expected.items() if k not in found}
    unexpected = {k: s for k, s in found.items() if k not in expected}
    mismatched = [
        KeyMismatch(k, expected[k], found[k])
        for k in expected
        if k in found and expected[k] != found[k]
    ]
    if missing or unexpected or mismatched:
        raise CheckpointKeyError(
            path, model or type(module).__name__, missing, unexpected, mismatched
        )
    check_state_values(module, state, path=path)


def _distinct_elements(t: torch.Tensor) -> torch.Tensor:
    """View ``t`` without its zero-stride (broadcast) dimensions: the same memory, once each."""
    if t.numel() == 0 or 0 not in t.stride():
        return t
    kept = [(n, st) for n, st in zip(t.shape, t.stride(), strict=True) if st]
    return t.as_strided([n for n, _ in kept], [st for _, st in kept], t.storage_offset())


def check_state_values(
    module: nn.Module,
    state: Mapping[str, torch.Tensor],
    *,
    path: str | os.PathLike[str] = "<state dict>",
) -> None:
    """Check that every tensor the module holds in floating point is finite floating point.

    Loading casts a checkpoint tensor to the module's dtype without a word: an int64 or bool
    tensor would become weights of 0 and 1, and a NaN or infinite weight makes every feature
    the model computes NaN. Both are refused here, naming the key. Tensors the module keeps in
    an integer or bool dtype (counters, index buffers) are not checked.

    Parameters
    ----------
    module : torch.nn.Module
        The model (its tensors may live on the meta device).
    state : Mapping of str to torch.Tensor
        The state dict, with the module's keys (:func:`check_state_dict` checks those first).
    path : str or os.PathLike, default "<state dict>"
        The file named in the error.

    Raises
    ------
    WeightsError
        A tensor that is not floating point where the module's is, or one with NaN or infinite
        values; the message names its key and counts the bad values.
    """
    declared = {k: v.dtype for k, v in module.state_dict().items()}
    for key, dtype in declared.items():
        t = state.get(key)
        if t is None or not dtype.is_floating_point:
            continue
        if not isinstance(t, torch.Tensor):
            raise WeightsError(path, f"{key!r}: expected a tensor, got {type(t).__name__}")
        if not t.dtype.is_floating_point:
            raise WeightsError(
                path,
                f"{key!r}: a {t.dtype} tensor where the model holds {dtype} weights; refusing "
                "to cast it (a checkpoint of another model, or a corrupted one)",
            )
        if not bool(torch.isfinite(_distinct_elements(t)).all()):
            finite = torch.isfinite(t)
            bad = int(finite.numel() - int(finite.sum()))
            raise WeightsError(
                path,
                f"{key!r}: expected finite weights, got {bad} of {t.numel()} value(s) NaN or "
                "infinite (a diverged training run or a corrupted file)",
            )


def load_state_dict(
    module: nn.Module,
    state: Mapping[str, torch.Tensor],
    *,
    path: str | os.PathLike[str] = "<state dict>",
    model: str | None = None,
) -> nn.Module:
    """Check ``state`` strictly against ``module`` (:func:`check_state_dict`), then load it.

    A module on the meta device receives the checkpoint tensors themselves
    (``load_state_dict(assign=True)``), so building a large model on ``torch.device("meta")``
    and loading into it never allocates random weights.

    Parameters
    ----------
    module : torch.nn.Module
        The model.
    state : Mapping of str to torch.Tensor
        The state dict.
    path : str or os.PathLike, default "<state dict>"
        The file named in errors.
    model : str or None, default None
        The model named in errors.

    Returns
    -------
    torch.nn.Module
        The module.
    """
    check_state_dict(module, state, path=path, model=model)
    on_meta = any(t.is_meta for t in module.state_dict().values())
    if on_meta:
        # assign=True keeps the checkpoint's dtype; match the module's declared dtypes first.
        declared = {k: v.dtype for k, v in module.state_dict().items()}
        state = {k: v.to(declared[k]) if v.dtype != declared[k] else v for k, v in state.items()}
    module.load_state_dict(dict(state), strict=True, assign=on_meta)
    leftover = [n for n, t in _named_tensors(module) if t.is_meta]
    if leftover:
        raise WeightsError(path, f"tensors left uninitialised after loading: {leftover[:5]}")
    return module


def _named_tensors(module: nn.Module) -> Iterable[tuple[str, torch.Tensor]]:
    yield from module.named_parameters()
    yield from module.named_buffers()


def save_state_dict(
    module_or_state: nn.Module | Mapping[str, torch.Tensor], path: str | os.PathLike[str]
) -> Path:
    """Write a state dict and return the path.

    ``.safetensors`` is written with safetensors, any other suffix with ``torch.save`` (a plain
    dict of tensors, loadable with ``weights_only=True``).

    Parameters
    ----------
    module_or_state : torch.nn.Module or Mapping of str to torch.Tensor
        A module (its ``state_dict()``) or a state dict.
    path : str or os.PathLike
        The file to write.

    Returns
    -------
    pathlib.Path
        The path.
    """
    p = Path(path)
    state = (
        module_or_state.state_dict()
        if isinstance(module_or_state, nn.Module)
        else dict(module_or_state)
    )
    state = {k: v.detach().to("cpu").contiguous() for k, v in state.items()}
    if p.suffix.lower() == ".safetensors":
        from safetensors.torch import save_file

        # safetensors refuses tensors that share storage; clone to separate them.
        save_file({k: v.clone() for k, v in state.items()}, str(p), metadata={"format": "pt"})
    else:
        torch.save(state, p)
    return p


def file_fingerprint(path: str | os.PathLike[str]) -> str:
    """Fingerprint a checkpoint file by its bytes: ``"sha256:"`` and the hex digest.

    The digest is the one ``sha256sum`` prints for the file, so a fingerprint stored with
    embeddings can be checked against the checkpoint with standard tools.

    Parameters
    ----------
    path : str or os.PathLike
        The checkpoint file.

    Returns
    -------
    str
        ``"sha256:<64 hex digits>"``.

    Raises
    ------
    FileNotFoundError
        The file does not exist (:class:`~tumorboard.errors.MissingFileError`).
    """
    p = Path(path)
    if not p.is_file():
        raise MissingFileError(f"checkpoint not found: {p}")
    digest = hashlib.sha256()
    with p.open("rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def state_dict_fingerprint(module_or_state: nn.Module | Mapping[str, torch.Tensor]) -> str:
    """Fingerprint the weights of a module (or a state dict) by their values.

    The sha256 runs over every tensor in key order: its name, dtype, shape and raw bytes. Two
    modules with equal parameters and buffers get the same fingerprint whatever device they are
    on; it differs from :func:`file_fingerprint` of the checkpoint they were loaded from.

    Parameters
    ----------
    module_or_state : torch.nn.Module or Mapping of str to torch.Tensor
        A module (its ``state_dict()``) or a state dict.

    Returns
    -------
    str
        ``"state-sha256:<64 hex digits>"``.
    """
    state = (
        module_or_state.state_dict()
        if isinstance(module_or_state, nn.Module)
        else dict(module_or_state)
    )
    digest = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().to("cpu").contiguous().reshape(-1)
        digest.update(f"{name}|{t.dtype}|{tuple(state[name].shape)}|".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes())
    return f"state-sha256:{digest.hexdigest()}"
