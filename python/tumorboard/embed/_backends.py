"""Inference backends of the embedding engine: torch (CPU or CUDA) and onnxruntime.

Both take a preprocessed NCHW float32 numpy batch and return float32 embeddings [B, D]; the torch
backend also takes uint8 batches (resized, not normalised: 4x fewer bytes to copy) and normalises
them on its device exactly as the CPU path does (:func:`normalize_uint8`). The torch backend on
CUDA copies each batch from pinned host memory on a separate stream, so the copy of batch k+1
overlaps the forward of batch k (``submit`` returns before the forward finishes and ``collect``
waits for it); on CPU both steps run synchronously. It runs the encoder eager or
``torch.compile``'d with static batch shapes (batches padded to the first one's size), in fp32,
fp16/bf16 autocast, or FP8 block linears (:mod:`tumorboard.models.fp8`); compiled and FP8 encoders
are kept for later runs of the same model and weights in the process.
"""

from __future__ import annotations

import os
import warnings
from collections import OrderedDict, deque
from pathlib import Path
from typing import Any

import numpy as np

from .._constants import IMAGENET_MEAN, IMAGENET_STD
from .._io import atomic_path
from ..errors import InvalidArgumentError, MissingDependencyError

DTYPES = ("auto", "fp32", "fp16", "bf16", "fp8")
#: ``compile=`` values besides bool: ``torch.compile`` modes.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def check_compile(compile: Any) -> str | None:
    """Return the ``torch.compile`` mode of a ``compile=`` argument (None: eager).

    Parameters
    ----------
    compile : bool or str
        False (eager), True (mode "default") or one of :data:`COMPILE_MODES`.

    Returns
    -------
    str or None
        The mode, or None for eager.

    Raises
    ------
    InvalidArgumentError
        Any other value.
    """
    if compile is False or compile is None:
        return None
    if compile is True:
        return "default"
    if isinstance(compile, str) and compile in COMPILE_MODES:
        return compile
    raise InvalidArgumentError(
        f"compile: expected a bool or one of {', '.join(COMPILE_MODES)}, got {compile!r}"
    )


def encoder_meta(module: Any) -> tuple[int, tuple[float, ...], tuple[float, ...], str]:
    """Return the ``(image_size, mean, std, interpolation)`` of an encoder.

    224 px, ImageNet statistics and bilinear resizing when the module does not say.
    """
    size = int(getattr(module, "image_size", 224))
    mean = tuple(float(v) for v in getattr(module, "mean", IMAGENET_MEAN))
    std = tuple(float(v) for v in getattr(module, "std", IMAGENET_STD))
    interpolation = str(getattr(module, "interpolation", "bilinear"))
    return size, mean, std, interpolation


def normalize_uint8(x: Any, mean: Any, std: Any) -> Any:
    """Normalise uint8 NCHW patches on their device: ``(u / 255 - mean) / std`` in float32.

    The same float32 operations, in the same order, as torchvision's ``ToTensor`` +
    ``Normalize`` and as the C++ preprocessing (``csrc/tiling/resample.cpp``), so the result
    equals the CPU path's float32 batch bit for bit (IEEE division and subtraction). The 255
    is a tensor on ``x``'s device, not a Python number: PyTorch's CUDA kernel divides by a
    CPU scalar as a multiply by its reciprocal (``aten/src/ATen/native/cuda/
    BinaryDivTrueKernel.cu``), which rounds ``u / 255`` one ulp off for 126 of the 256 values.

    Parameters
    ----------
    x : torch.Tensor
        [B, 3, H, W] uint8.
    mean, std : torch.Tensor
        [3] float32 on ``x``'s device.

    Returns
    -------
    torch.Tensor
        [B, 3, H, W] float32.
    """
    y = x.float()
    y.div_(y.new_full((), 255.0))  # float32, on x's device
    return y.sub_(mean.view(1, 3, 1, 1)).div_(std.view(1, 3, 1, 1))


#: Prepared (moved, quantised, compiled) encoders kept across runs of this process, keyed by
#: (model identity, device, precision, compile mode); the least recently used one goes first.
_PREPARED: OrderedDict[tuple[Any, ...], tuple[Any, Any]] = OrderedDict()
_PREPARED_MAX = 2


def prepared_key(key: Any, device: Any, dtype: str, mode: str | None) -> tuple[Any, ...]:
    """Return the cache key of a prepared encoder (see :class:`TorchBackend` ``cache_key``)."""
    return (key, str(device), dtype, mode)


def cached_module(key: tuple[Any, ...]) -> Any:
    """Return the prepared module stored under ``key`` (from :func:`prepared_key`), or None."""
    hit = _PREPARED.get(key)
    return None if hit is None else hit[0]


def _same_device(a: Any, b: Any) -> bool:
    """Whether two torch devices are the same device (a bare "cuda" is the current CUDA one).

    ``torch.device("cuda") != torch.device("cuda:0")``, but a tensor made on the current CUDA
    device always carries its index: compare the resolved indices.
    """
    if a.type != b.type:
        return False
    if a.type != "cuda" or (a.index is not None and b.index is not None):
        return a == b
    import torch

    current = torch.cuda.current_device()
    return (current if a.index is None else a.index) == (current if b.index is None else b.index)


class TorchBackend:
    """A torch encoder run on CPU or CUDA, eager or compiled, in fp32, fp16, bf16 or FP8.

    Parameters
    ----------
    module : torch.nn.Module
        The encoder.
    device : str, default "auto"
        "auto" (CUDA when available), "cpu", "cuda[:i]".
    dtype : {"auto", "fp32", "fp16", "bf16", "fp8"}, default "auto"
        "auto" is bf16 autocast on CUDA, fp32 on CPU; "fp16" and "bf16" autocast; "fp8"
        quantises the ViT block linears to E4M3 (:func:`tumorboard.models.fp8.quantize_fp8`:
        rowwise activation scales, per-channel weight scales, ``torch._scaled_mm``) and runs the
        rest under bf16 autocast; it needs a GPU of compute capability >= 8.9 (Ada, Hopper) and
        works on a copy of ``module``.
    compile : bool or str, default False
        ``torch.compile`` the encoder (True: mode "default", or a mode of
        :data:`COMPILE_MODES`) with static shapes: every batch is padded to the first batch's
        size (``batch_size`` when given), so a run compiles one graph per (model, batch size,
        dtype). The compiled encoder
        is reused by later backends with the same ``cache_key`` in this process (torch's
        inductor also caches the generated code on disk, across processes).
    mean, std : sequence of float or None, default None
        The encoder's normalisation, needed to take uint8 batches (:meth:`submit`).
    batch_size : int or None, default None
        The static batch size of a compiled encoder: every batch is padded to it (the engine
        passes its ``batch_size``). None: the first batch's size, so a later, larger batch is
        refused.
    cache_key : object or None, default None
        Identifies the module's weights (the engine passes the encoder name and weights
        fingerprint): a compiled or FP8 encoder prepared under the same key, device, dtype and
        compile mode earlier in this process is reused. None: nothing is reused or kept.

    Raises
    ------
    InvalidArgumentError
        An unknown dtype or compile mode, or ``dtype="fp8"`` on a device without FP8 tensor
        cores (the message names the device and its compute capability).
    """

    name = "torch"

    def __init__(
        self,
        module: Any,
        *,
        device: str = "auto",
        dtype: str = "auto",
        compile: bool | str = False,
        mean: Any = None,
        std: Any = None,
        batch_size: int | None = None,
        cache_key: Any = None,
    ) -> None:
        import torch

        if dtype not in DTYPES:
            raise InvalidArgumentError(f"dtype: expected one of {DTYPES}, got {dtype!r}")
        from ..models import resolve_device

        self.torch = torch
        self.device = resolve_device(device)
        self.cuda = self.device.type == "cuda"
        if dtype == "auto":
            dtype = "bf16" if self.cuda else "fp32"
        if dtype == "fp8":
            from ..models.fp8 import fp8_available

            why = fp8_available(self.device)
            if why is not None:
                raise InvalidArgumentError(f"dtype='fp8': {why}; use dtype='bf16' there")
        self.dtype = dtype
        self.compile_mode = check_compile(compile)
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(
                batch_size, int) or batch_size <= 0):  # fmt: skip
            raise InvalidArgumentError(
                f"batch_size: expected a positive int or None, got {batch_size!r}"
            )
        self.autocast = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16,
                         "fp8": torch.bfloat16}[dtype]  # fmt: skip
        self.embed_dim = getattr(module, "embed_dim", None)
        key = None
        if cache_key is not None and (self.compile_mode is not None or dtype == "fp8"):
            key = prepared_key(cache_key, self.device, dtype, self.compile_mode)
        hit = None if key is None else _PREPARED.get(key)
        if hit is not None:
            _PREPARED.move_to_end(key)
            self.module, self.forward_fn = hit
        else:
            if dtype == "fp8":
                from ..models.fp8 import quantize_fp8

                module = quantize_fp8(module)  # a copy: the caller's module stays as it was
            self.module = module.eval().to(self.device)
            self.forward_fn = self.module
            if self.compile_mode is not None:
                self.forward_fn = torch.compile(self.module, mode=self.compile_mode, dynamic=False)
            if key is not None:
                _PREPARED[key] = (self.module, self.forward_fn)
                while len(_PREPARED) > _PREPARED_MAX:
                    _PREPARED.popitem(last=False)
        self.static_batch: int | None = batch_size
        self.mean = self.std = None
        if mean is not None and std is not None:
            self.mean = torch.tensor([float(v) for v in mean], dtype=torch.float32,
                                     device=self.device)  # fmt: skip
            self.std = torch.tensor([float(v) for v in std], dtype=torch.float32,
                                    device=self.device)  # fmt: skip
        self.copy_stream = torch.cuda.Stream(self.device) if self.cuda else None
        self._pending: deque[tuple[Any, Any, Any, int]] = deque()

    @property
    def precision(self) -> str:
        """The precision the encoder computes in: "fp32", "fp16", "bf16" or "fp8"."""
        return self.dtype

    @property
    def accepts_uint8(self) -> bool:
        """Whether :meth:`submit` takes uint8 batches (normalised on the device)."""
        return self.mean is not None

    def _forward(self, x: Any) -> Any:
        torch = self.torch
        with torch.inference_mode():
            if x.dtype == torch.uint8:
                x = normalize_uint8(x, self.mean, self.std)
            if self.autocast is None:
                return self.forward_fn(x).float()
            with torch.autocast(self.device.type, dtype=self.autocast):
                return self.forward_fn(x).float()

    def _pad(self, x: Any) -> tuple[Any, int]:
        """Pad a batch to the static batch size of a compiled encoder; return it and its rows."""
        n = int(x.shape[0])
        if self.compile_mode is None:
            return x, n
        if self.static_batch is None:
            self.static_batch = n
        if n > self.static_batch:
            raise InvalidArgumentError(
                f"compiled encoder: a batch of {n} patches exceeds the static batch size "
                f"{self.static_batch} (TorchBackend(batch_size=) or the first batch's size)"
            )
        if n < self.static_batch:
            pad = self.torch.zeros((self.static_batch - n, *x.shape[1:]), dtype=x.dtype,
                                   device=x.device)  # fmt: skip
            x = self.torch.cat([x, pad])
        return x, n

    def submit(self, images: Any) -> None:
        """Start the forward of one batch (asynchronously on CUDA).

        Parameters
        ----------
        images : numpy.ndarray or torch.Tensor
            [B, 3, H, W] float32 normalised patches, or uint8 patches when the backend was given
            ``mean`` and ``std`` (shipped as uint8 and normalised on the device). A torch tensor
            already on the backend's device (GPU-decoded patches, ``decode="gpu"``) is used
            where it is, with no copy.
        """
        torch = self.torch
        if isinstance(images, torch.Tensor):
            self._submit_tensor(images)
            return
        if images.dtype == np.uint8:
            if self.mean is None:
                raise InvalidArgumentError(
                    "uint8 patches need the encoder's mean and std (TorchBackend(mean=, std=))"
                )
            x = torch.from_numpy(np.ascontiguousarray(images))
        else:
            x = torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32))
        x, n = self._pad(x)
        if not self.cuda:
            self._pending.append((self._forward(x)[:n].numpy(), None, None, n))
            return
        x = x.pin_memory()
        with torch.cuda.stream(self.copy_stream):
            xg = x.to(self.device, non_blocking=True)
            copied = torch.cuda.Event()
            copied.record(self.copy_stream)
        compute = torch.cuda.current_stream(self.device)
        compute.wait_event(copied)
        xg.record_stream(compute)
        self._launch(xg, compute, x, n)

    def _launch(self, xg: Any, compute: Any, keep: Any, n: int) -> None:
        """Run the forward on ``compute`` and queue its copy to pinned host memory.

        ``keep`` (the batch the caller must not free before the copy lands) is held with it.
        """
        torch = self.torch
        y = self._forward(xg)
        host = torch.empty(y.shape, dtype=torch.float32, pin_memory=True)
        host.copy_(y, non_blocking=True)
        done = torch.cuda.Event()
        done.record(compute)
        self._pending.append((host, done, keep, n))

    def _submit_tensor(self, x: Any) -> None:
        torch = self.torch
        if x.dtype == torch.uint8 and self.mean is None:
            raise InvalidArgumentError(
                "uint8 patches need the encoder's mean and std (TorchBackend(mean=, std=))"
            )
        if not _same_device(x.device, self.device):
            raise InvalidArgumentError(
                f"x: expected a batch on the encoder's device {self.device}, got one on "
                f"{x.device}; decode GPU-decoded patches on the encoder's device"
            )
        if x.dtype != torch.uint8:
            x = x.float()
        x, n = self._pad(x)
        if not self.cuda:
            self._pending.append((self._forward(x)[:n].numpy(), None, None, n))
            return
        compute = torch.cuda.current_stream(self.device)
        x.record_stream(compute)  # made on the decoder's stream, read on this one
        self._launch(x, compute, x, n)

    def collect(self) -> np.ndarray:
        """Return the embeddings of the oldest submitted batch (waits for it)."""
        out, done, _keep, n = self._pending.popleft()
        if done is None:
            return out
        done.synchronize()
        return out[:n].numpy().copy()

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
