"""Inference backends of the embedding engine: torch (CPU or CUDA) and onnxruntime.

Both take a preprocessed NCHW float32 numpy batch and return float32 embeddings [B, D]. The torch
backend on CUDA copies each batch from pinned host memory on a separate stream, so the copy of
batch k+1 overlaps the forward of batch k (``submit`` returns before the forward finishes and
``collect`` waits for it); on CPU both steps run synchronously.
"""

from __future__ import annotations

import os
import warnings
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np

from .._constants import IMAGENET_MEAN, IMAGENET_STD
from .._io import atomic_path
from ..errors import InvalidArgumentError, MissingDependencyError

DTYPES = ("auto", "fp32", "fp16", "bf16")


def encoder_meta(module: Any) -> tuple[int, tuple[float, ...], tuple[float, ...], str]:
    """Return the ``(image_size, mean, std, interpolation)`` of an encoder.

    224 px, ImageNet statistics and bilinear resizing when the module does not say.
    """
    size = int(getattr(module, "image_size", 224))
    mean = tuple(float(v) for v in getattr(module, "mean", IMAGENET_MEAN))
    std = tuple(float(v) for v in getattr(module, "std", IMAGENET_STD))
    interpolation = str(getattr(module, "interpolation", "bilinear"))
    return size, mean, std, interpolation


class TorchBackend:
    """A torch encoder run on CPU or CUDA.

    Parameters
    ----------
    module : torch.nn.Module
        The encoder.
    device : str, default "auto"
        "auto" (CUDA when available), "cpu", "cuda[:i]".
    dtype : {"auto", "fp32", "fp16", "bf16"}, default "auto"
        "auto" is bf16 autocast on CUDA, fp32 on CPU; "fp16" and "bf16" autocast.
    """

    name = "torch"

    def __init__(self, module: Any, *, device: str = "auto", dtype: str = "auto") -> None:
        import torch

        if dtype not in DTYPES:
            raise InvalidArgumentError(f"dtype must be one of {DTYPES}, got {dtype!r}")
        from ..models import resolve_device

        self.torch = torch
        self.device = resolve_device(device)
        self.cuda = self.device.type == "cuda"
        if dtype == "auto":
            dtype = "bf16" if self.cuda else "fp32"
        self.dtype = dtype
        self.autocast = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
        self.module = module.eval().to(self.device)
        self.embed_dim = getattr(module, "embed_dim", None)
        self.copy_stream = torch.cuda.Stream(self.device) if self.cuda else None
        self._pending: deque[tuple[Any, Any, Any]] = deque()

    def _forward(self, x: Any) -> Any:
        torch = self.torch
        with torch.inference_mode():
            if self.autocast is None:
                return self.module(x).float()
            with torch.autocast(self.device.type, dtype=self.autocast):
                return self.module(x).float()

    def submit(self, images: np.ndarray) -> None:
        """Start the forward of one batch (asynchronously on CUDA)."""
        torch = self.torch
        x = torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32))
        if not self.cuda:
            self._pending.append((self._forward(x).numpy(), None, None))
            return
        x = x.pin_memory()
        with torch.cuda.stream(self.copy_stream):
            xg = x.to(self.device, non_blocking=True)
            copied = torch.cuda.Event()
            copied.record(self.copy_stream)
        compute = torch.cuda.current_stream(self.device)
        compute.wait_event(copied)
        xg.record_stream(compute)
        y = self._forward(xg)
        host = torch.empty(y.shape, dtype=torch.float32, pin_memory=True)
        host.copy_(y, non_blocking=True)
        done = torch.cuda.Event()
        done.record(compute)
        self._pending.append((host, done, x))

    def collect(self) -> np.ndarray:
        """Return the embeddings of the oldest submitted batch (waits for it)."""
        out, done, _keep = self._pending.popleft()
        if done is None:
            return out
        done.synchronize()
        return out.numpy().copy()

    @property
    def in_flight(self) -> int:
        """Number of submitted batches not yet collected."""
        return len(self._pending)

    def __call__(self, images: np.ndarray) -> np.ndarray:
        self.submit(images)
        return self.collect()


class OnnxBackend:
    """An ONNX encoder run by onnxruntime.

    The CUDA execution provider is used when ``device`` asks for CUDA and onnxruntime-gpu is
    installed, else the CPU one. The graph takes one float32 NCHW input.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.onnx`` file.
    device : str, default "auto"
        "auto", "cpu" or "cuda[:i]".
    threads : int or None, default None
        onnxruntime intra-op threads (default: onnxruntime's).
    """

    name = "onnxruntime"

    def __init__(self, path: str | os.PathLike[str], *, device: str = "auto",
                 threads: int | None = None) -> None:  # fmt: skip
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise MissingDependencyError.for_extra(
                "backend='onnxruntime'", package="onnxruntime", extra="gpu", cause=exc
            ) from exc
        available = ort.get_available_providers()
        want_cuda = device != "cpu" and "CUDAExecutionProvider" in available
        if device.startswith("cuda") and not want_cuda:
            raise InvalidArgumentError(f"device={device!r} but onnxruntime has no CUDA provider")
        providers = (
            ["CUDAExecutionProvider", "CPUExecutionProvider"]
            if want_cuda
            else ["CPUExecutionProvider"]
        )
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = int(threads)
        self.path = Path(path)
        self.session = ort.InferenceSession(str(self.path), opts, providers=providers)
        self.input_name = self.session.get_inputs()[0].name
        self.device = "cuda" if want_cuda else "cpu"
        self._pending: deque[np.ndarray] = deque()
        self.embed_dim: int | None = None

    def submit(self, images: np.ndarray) -> None:
        """Run one batch (synchronously) and queue its embeddings."""
        x = np.ascontiguousarray(images, dtype=np.float32)
        (y,) = self.session.run(None, {self.input_name: x})[:1]
        self._pending.append(np.asarray(y, dtype=np.float32))

    def collect(self) -> np.ndarray:
        """Return the embeddings of the oldest submitted batch."""
        return self._pending.popleft()

    @property
    def in_flight(self) -> int:
        """Number of submitted batches not yet collected."""
        return len(self._pending)

    def __call__(self, images: np.ndarray) -> np.ndarray:
        self.submit(images)
        return self.collect()


def export_onnx(module: Any, path: str | os.PathLike[str], *, image_size: int) -> Path:
    """Export ``module`` to ONNX with a dynamic batch axis.

    The models package's encoders (modules with ``embed_dim``, ``image_size``, ``mean``, ``std``)
    go through ``tumorboard.models.export_onnx``, others through ``torch.onnx.export``
    (TorchScript exporter, opset 17).

    Parameters
    ----------
    module : torch.nn.Module
        The encoder.
    path : str or os.PathLike
        The ``.onnx`` file to write (replaced if it exists).
    image_size : int
        Side of the example input.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    p = Path(path)  # an existing file is replaced (the module may have changed since)
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        from ..models import export_onnx as models_export
    except ImportError:
        models_export = None
    has_meta = all(hasattr(module, a) for a in ("embed_dim", "image_size", "mean", "std"))
    with atomic_path(p) as tmp:
        if models_export is not None and has_meta:
            models_export(module, tmp, opset=17, image_size=image_size)
        else:
            import torch

            x = torch.zeros(1, 3, image_size, image_size)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter
                torch.onnx.export(
                    module.eval().cpu(),
                    (x,),
                    str(tmp),
                    input_names=["images"],
                    output_names=["embeddings"],
                    dynamic_axes={"images": {0: "batch"}, "embeddings": {0: "batch"}},
                    opset_version=17,
                    dynamo=False,
                )
    return p
