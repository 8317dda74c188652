"""ONNX export of the patch encoders and an onnxruntime inference backend.

:func:`export_onnx` traces an encoder (``[B, 3, S, S] -> [B, D]``) with a dynamic batch axis at
one image size ``S``; position embeddings resampled for that size are folded in as constants.
The model's metadata records the name, embedding width, image size and normalisation, so an
:class:`OnnxEncoder` presents the same attributes as the torch module (``embed_dim``,
``image_size``, ``mean``, ``std``, ``interpolation``) and the same call: normalised images in
(numpy or torch), ``[B, D]`` out.

On CUDA, :class:`OnnxEncoder` binds inputs and outputs to device buffers (onnxruntime IO
binding): a CUDA torch tensor is read in place and the result is written straight into a CUDA
torch tensor, with no host round trip. Without a usable GPU it runs on the CPU provider.

This module imports torch only when it needs it: ``OnnxEncoder`` works with numpy and
onnxruntime alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._json import json_text
from ..errors import (
    InvalidArgumentError,
    InvalidTypeError,
    MissingDependencyError,
    MissingFileError,
)

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch import nn

__all__ = ["OnnxEncoder", "export_onnx"]

INPUT_NAME = "pixel_values"
OUTPUT_NAME = "embedding"
_META_KEY = "tumorboard.encoder"
_NP_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


@contextlib.contextmanager
def _fixed_pos_embeds(module: nn.Module, size: int) -> Iterator[None]:
    """Precompute every ViT's position embedding for ``size`` so tracing records a constant.

    Antialiased bicubic resampling (timm-layout ViTs, ``Dinov2WithRegistersModel``) has no ONNX
    operator; the Hugging Face-layout ViTs (:class:`~tumorboard.models.hf_vit.Embeddings`) are
    fixed the same way.
    """
    import torch

    from .hf_vit import Embeddings
    from .vit import VisionTransformer

    fixed: list[nn.Module] = []
    try:
        for m in module.modules():
            if isinstance(m, VisionTransformer):
                g = size // m.config.patch_size
                with torch.no_grad():
                    m._pos_embed_fixed = {(g, g): m.pos_embed_for_grid(g, g).detach().clone()}
            elif isinstance(m, Embeddings):
                g = size // m.config.patch_size
                with torch.no_grad():
                    pos = m.position_embeddings_for_grid(g, g).detach().clone()
                m._pos_embed_fixed = {(g, g): pos}
            else:
                continue
            fixed.append(m)
        yield
    finally:
        for m in fixed:
            m._pos_embed_fixed = {}


def export_onnx(
    module: nn.Module,
    path: str | os.PathLike[str],
    *,
    opset: int = 17,
    image_size: int | None = None,
    batch_size: int = 2,
) -> Path:
    """Export an encoder to ONNX with a dynamic batch axis.

    Input ``pixel_values [batch, 3, S, S]`` in the module's dtype, output ``embedding
    [batch, D]``. Uses torch's TorchScript-based exporter (``dynamo=False``), which needs no
    onnxscript.

    Parameters
    ----------
    module : torch.nn.Module
        An encoder from :func:`tumorboard.models.load` (anything with ``embed_dim``,
        ``image_size``, ``mean``, ``std`` whose ``forward`` maps ``[B, 3, S, S]`` to
        ``[B, D]``), in float32 or float16 (onnxruntime's CPU provider runs float32 only).
    path : str or os.PathLike
        The ``.onnx`` file to write; models over 2 GB store their weights as external data next
        to it (torch's exporter decides).
    opset : int, default 17
        ONNX opset (17 has LayerNormalization).
    image_size : int or None, default None
        The fixed input size; default ``module.image_size``.
    batch_size : int, default 2
        Batch of the tracing input (the exported batch axis is dynamic).

    Returns
    -------
    pathlib.Path
        The path.
    """
    import torch

    for attr in ("embed_dim", "image_size", "mean", "std"):
        if not hasattr(module, attr):
            raise InvalidTypeError(
                f"module has no {attr!r}: export_onnx takes the encoders of load()"
            )
    params = list(module.parameters())
    if not params:
        raise InvalidArgumentError("module has no parameters")
    dtype, device = params[0].dtype, params[0].device
    if dtype not in (torch.float32, torch.float16):
        raise InvalidArgumentError(
            f"export a float32 or float16 model (module.float() / .half()), got {dtype}: "
            "onnxruntime has no bfloat16 kernels for most of these operators"
        )
    if any(p.is_meta for p in params):
        raise InvalidArgumentError("module has tensors on the meta device; load its weights first")
    size = int(module.image_size if image_size is None else image_size)
    if batch_size < 1:
        raise InvalidArgumentError(f"batch_size: expected an integer >= 1, got {batch_size}")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(0)
    dummy = torch.randn(batch_size, 3, size, size, generator=gen).to(device=device, dtype=dtype)
    was_training = module.training
    module.eval()
    try:
        with (
            _fixed_pos_embeds(module, size),
            torch.no_grad(),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore", DeprecationWarning)  # legacy exporter notice
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            torch.onnx.export(
                module,
                (dummy,),
                str(out),
                dynamo=False,
                input_names=[INPUT_NAME],
                output_names=[OUTPUT_NAME],
                dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}},
                opset_version=int(opset),
                do_constant_folding=True,
            )
    finally:
        module.train(was_training)
    meta = {
        "name": str(getattr(module, "name", type(module).__name__)),
        "embed_dim": int(module.embed_dim),  # type: ignore[arg-type]
        "image_size": size,
        "mean": [float(m) for m in module.mean],  # type: ignore[union-attr]
        "std": [float(s) for s in module.std],  # type: ignore[union-attr]
        "interpolation": str(getattr(module, "interpolation", "bilinear")),
    }
    _write_metadata(out, {_META_KEY: json_text(meta)})
    return out


def _write_metadata(path: Path, props: dict[str, str]) -> None:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    existing = {p.key: p for p in model.metadata_props}
    for key, value in props.items():
        if key in existing:
            existing[key].value = value
        else:
            entry = model.metadata_props.add()
            entry.key, entry.value = key, value
    onnx.save(model, str(path))


def _cuda_usable() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


class OnnxEncoder:
    """An exported encoder run by onnxruntime, called like the torch module.

    Parameters
    ----------
    path : str or os.PathLike
        A file written by :func:`export_onnx`.
    device : str, default "auto"
        ``"auto"`` (CUDA when onnxruntime has the CUDA provider and a GPU is usable), ``"cuda"``,
        ``"cuda:i"`` or ``"cpu"``.
    providers : sequence or None, default None
        Explicit onnxruntime providers (overrides ``device``).
    threads : int or None, default None
        Intra-op threads of the CPU provider (default: onnxruntime's).

    Attributes
    ----------
    name, embed_dim, image_size, mean, std, interpolation
        From the export metadata.
    device : {"cuda", "cpu"}
        Where the session actually runs.
    providers : tuple
        The session's providers in priority order.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        device: str = "auto",
        providers: Sequence[str | tuple[str, dict[str, Any]]] | None = None,
        threads: int | None = None,
    ) -> None:
        try:
            import onnxruntime as ort
        except ImportError as exc:  # pragma: no cover - onnxruntime is in the gpu extra
            raise MissingDependencyError.for_extra(
                "OnnxEncoder", package="onnxruntime", extra="gpu", cause=exc
            ) from exc
        p = Path(path)
        if not p.is_file():
            raise MissingFileError(f"ONNX model not found: {p}")
        self.path = p
        available = ort.get_available_providers()
        device_id = 0
        if providers is None:
            dev = device.lower()
            if dev == "auto":
                want_cuda = "CUDAExecutionProvider" in available and _cuda_usable()
            elif dev == "cpu":
                want_cuda = False
            elif dev.startswith("cuda"):
                if "CUDAExecutionProvider" not in available:
                    raise InvalidArgumentError(
                        f"device {device!r}: this onnxruntime has no CUDAExecutionProvider "
                        f"(available: {', '.join(available)}); install onnxruntime-gpu"
                    )
                want_cuda = True
                if ":" in dev:
                    device_id = int(dev.split(":", 1)[1])
            else:
                raise InvalidArgumentError(
                    f"device: expected 'auto', 'cpu' or 'cuda[:i]', got {device!r}"
                )
            providers = (
                [("CUDAExecutionProvider", {"device_id": device_id}), "CPUExecutionProvider"]
                if want_cuda
                else ["CPUExecutionProvider"]
            )
        options = ort.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = int(threads)
        self._session = ort.InferenceSession(str(p), sess_options=options, providers=providers)
        self.providers = tuple(self._session.get_providers())
        self.device = "cuda" if self.providers[0] == "CUDAExecutionProvider" else "cpu"
        self._device_id = device_id
        meta_map = self._session.get_modelmeta().custom_metadata_map
        if _META_KEY not in meta_map:
            raise InvalidArgumentError(f"{p}: no tumorboard metadata; export it with export_onnx")
        meta = json.loads(meta_map[_META_KEY])
        self.name: str = meta["name"]
        self.embed_dim: int = int(meta["embed_dim"])
        self.image_size: int = int(meta["image_size"])
        self.mean = tuple(float(m) for m in meta["mean"])
        self.std = tuple(float(s) for s in meta["std"])
        self.interpolation: str = meta.get("interpolation", "bilinear")
        inp = self._session.get_inputs()[0]
        if inp.type not in _NP_TYPES:
            raise InvalidArgumentError(f"{p}: unsupported input type {inp.type}")
        self._np_dtype = _NP_TYPES[inp.type]
        self._input_name = inp.name
        self._output_name = self._session.get_outputs()[0].name

    def _check(self, shape: Sequence[int]) -> None:
        s = self.image_size
        if len(shape) != 4 or tuple(shape[1:]) != (3, s, s):
            raise InvalidArgumentError(f"expected images [B, 3, {s}, {s}], got shape {list(shape)}")

    def __call__(self, x: Any) -> Any:
        """Return the embeddings ``[B, embed_dim]`` of normalised images ``[B, 3, S, S]``.

        A numpy array for numpy input, a torch tensor (on the input's device) for torch input.
        """
        if isinstance(x, np.ndarray):
            self._check(x.shape)
            arr = np.ascontiguousarray(x, dtype=self._np_dtype)
            if self.device == "cpu":
                return self._session.run([self._output_name], {self._input_name: arr})[0]
            import torch

            return self._run_torch(torch.from_numpy(arr)).cpu().numpy()
        try:
            import torch
        except ImportError:  # pragma: no cover
            torch = None  # type: ignore[assignment]
        if torch is not None and isinstance(x, torch.Tensor):
            self._check(tuple(x.shape))
            return self._run_torch(x)
        raise InvalidTypeError(f"expected a numpy array or a torch tensor, got {type(x).__name__}")

    def _run_torch(self, x: torch.Tensor) -> torch.Tensor:
        """Run ``x`` with IO binding, without copies through numpy.

        The input is read from ``x``'s memory and the output written into a new tensor on the
        session's device.
        """
        import torch

        dtype = torch.float32 if self._np_dtype is np.float32 else torch.float16
        if self.device == "cuda":
            target = torch.device("cuda", self._device_id)
        else:
            target = torch.device("cpu")
        src_device = x.device
        xb = x.detach().to(device=target, dtype=dtype).contiguous()
        out = torch.empty((xb.shape[0], self.embed_dim), dtype=dtype, device=target)
        binding = self._session.io_binding()
        kind, index = ("cuda", self._device_id) if target.type == "cuda" else ("cpu", 0)
        binding.bind_input(
            self._input_name, kind, index, self._np_dtype, tuple(xb.shape), xb.data_ptr()
        )
        binding.bind_output(
            self._output_name, kind, index, self._np_dtype, tuple(out.shape), out.data_ptr()
        )
        if target.type == "cuda":
            torch.cuda.current_stream(target).synchronize()  # xb is ready before ORT reads it
        self._session.run_with_iobinding(binding)
        return out if out.device == src_device else out.to(src_device)

    def __repr__(self) -> str:
        return (
            f"OnnxEncoder({str(self.path)!r}, name={self.name!r}, embed_dim={self.embed_dim}, "
            f"image_size={self.image_size}, device={self.device!r})"
        )
