"""FP8 (E4M3) linear layers for the ViT encoders: rowwise activation and per-channel weight scales.

The scaling recipe is the one NVIDIA's FP8 training and inference papers and PyTorch's ``torchao``
``Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())`` use: every block linear
``y = x W^T + b`` becomes

* weights quantised once, per output channel: ``s_w[n] = max_k |W[n, k]| / 448`` and
  ``W_q = round_e4m3(W / s_w)``;
* activations quantised at every call, per row (token): ``s_x[m] = max_k |x[m, k]| / 448`` and
  ``x_q = round_e4m3(x / s_x)``;
* ``y[m, n] = s_x[m] s_w[n] sum_k x_q[m, k] W_q[n, k] + b[n]``, accumulated in float32 and
  returned in bfloat16.

448 is the largest finite E4M3 value (Micikevicius et al., "FP8 Formats for Deep Learning",
arXiv:2209.05433, Table 1; the OCP 8-bit floating point specification). On GPUs with FP8 tensor
cores (compute capability >= 8.9: Ada, Hopper, Blackwell) the product runs as one
``torch._scaled_mm`` call (cuBLASLt with rowwise ``scale_a`` [M, 1] and ``scale_b`` [1, N]);
elsewhere :func:`quantize_fp8` can *emulate* it: the same E4M3 casts of activations and weights,
then a float32 matmul and the same scaling, which is how the tests check the quantisation math on
CPU against the unquantised model.

Only the transformer blocks' linears are quantised (``attn.qkv``, ``attn.proj``, ``mlp.fc1``,
``mlp.fc2``: >99% of UNI2-h's FLOPs; :func:`fp8_linears` names them for every encoder family,
Hugging Face layout and Swin included); the patch embedding, norms, attention's softmax and
heads outside the blocks stay in the autocast precision. A model without block linears (the
``resnet50`` CNN) is refused.

Accuracy. E4M3 keeps 3 mantissa bits: a relative rounding error of at most 2^-4 per value, about
0.036 RMS, on both operands, so an output row carries a relative error near 0.05 and its cosine
similarity to the exact row is about 1 - 0.05^2 / 2 ~= 0.9987. The documented floor, checked by
the tests (CPU emulation, Gaussian activations, random weights), is a minimum cosine over rows of
**0.998** to both the float32 and the bfloat16 layer, for uni2-tiny's shapes and every full-size
UNI2-h block linear (1536->4608, 1536->1536, 1536->8192, 4096->1536; measured 0.9992). Errors
compound through the blocks: the whole random-weight uni2-tiny encoder with LayerScale 1 (so the
blocks count) gives 0.991 to float32 (bf16 autocast alone: 0.99995), floor 0.98. The issue's H100
run of full UNI2-h (random weights) measured min cosine 0.9988 of FP8 features to bf16 eager;
``benchmarks/bench_embed.py --gpu`` prints that figure on the GPU it runs on.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import torch
from torch import nn

from ..errors import InvalidArgumentError

#: Largest finite float8_e4m3fn value (arXiv:2209.05433, Table 1).
E4M3_MAX = 448.0
#: Smallest scale used for an all-zero row or channel (keeps x / s finite).
_MIN_AMAX = 1e-12
#: Compute capability from which CUDA GPUs have FP8 tensor cores (Ada 8.9, Hopper 9.0).
FP8_MIN_CAPABILITY = (8, 9)

#: The block linears quantised by :func:`quantize_fp8` (names inside each ``blocks.{i}``).
BLOCK_LINEARS = ("attn.qkv", "attn.proj", "mlp.fc1", "mlp.fc2")


def quantize_rowwise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantise a matrix to E4M3 with one scale per row.

    Parameters
    ----------
    x : torch.Tensor
        [M, K], any float dtype (the scale is computed in float32).

    Returns
    -------
    tuple of torch.Tensor
        ``(q, scale)``: q [M, K] ``torch.float8_e4m3fn`` and scale [M, 1] float32 with
        ``x ~= q * scale`` (``scale = max|row| / 448``).
    """
    xf = x.float()
    amax = xf.abs().amax(dim=-1, keepdim=True).clamp_min(_MIN_AMAX)
    scale = amax / E4M3_MAX
    q = (xf / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q, scale


def fp8_available(device: torch.device | str) -> str | None:
    """Return None when ``device`` has FP8 tensor cores, else why not (for an error message).

    Parameters
    ----------
    device : torch.device or str
        The device the encoder runs on.

    Returns
    -------
    str or None
        None for a CUDA GPU of compute capability >= 8.9, else a sentence naming the device.
    """
    dev = torch.device(device)
    if dev.type != "cuda":
        return (
            f"device {dev} has no FP8 tensor cores; FP8 needs an NVIDIA GPU of compute "
            "capability >= 8.9 (Ada, Hopper, Blackwell)"
        )
    cap = torch.cuda.get_device_capability(dev)
    if tuple(cap) < FP8_MIN_CAPABILITY:
        name = torch.cuda.get_device_name(dev)
        return (
            f"{name} ({dev}) has compute capability {cap[0]}.{cap[1]}; FP8 tensor cores need "
            ">= 8.9 (Ada, Hopper, Blackwell)"
        )
    return None


class Fp8Linear(nn.Module):
    """A linear layer computed in FP8 E4M3 with rowwise activation and per-channel weight scales.

    Parameters
    ----------
    linear : torch.nn.Linear
        The layer to quantise (its weight is quantised once, here).
    emulate : bool, default False
        Compute with E4M3 casts and a float32 matmul (any device) instead of
        ``torch._scaled_mm`` (CUDA, compute capability >= 8.9).

    Notes
    -----
    ``torch._scaled_mm`` needs both inner and output features to be multiples of 16, which
    every UNI/UNI2-h linear is; other shapes are refused at construction when not emulated.
    """

    def __init__(self, linear: nn.Linear, *, emulate: bool = False) -> None:
        super().__init__()
        n, k = linear.weight.shape
        if not emulate and (n % 16 or k % 16):
            raise InvalidArgumentError(
                f"FP8 linear: expected in_features and out_features that are multiples of 16 for "
                f"torch._scaled_mm, got {k} and {n}"
            )
        self.in_features, self.out_features = int(k), int(n)
        self.emulate = bool(emulate)
        with torch.no_grad():
            q, scale = quantize_rowwise(linear.weight.detach())  # per output channel
        self.register_buffer("weight_fp8", q)
        self.register_buffer("weight_scale", scale.reshape(1, n).contiguous())
        bias = None if linear.bias is None else linear.bias.detach().float().clone()
        self.register_buffer("bias", bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``x W^T + b`` computed in FP8 (bfloat16 output; float32 when emulated).

        Parameters
        ----------
        x : torch.Tensor
            [..., in_features].

        Returns
        -------
        torch.Tensor
            [..., out_features].
        """
        lead = x.shape[:-1]
        xq, xs = quantize_rowwise(x.reshape(-1, self.in_features))
        if self.emulate:
            with torch.autocast(x.device.type, enabled=False):
                y = xq.float() @ self.weight_fp8.float().t()
                y = y * xs * self.weight_scale
                if self.bias is not None:
                    y = y + self.bias
        else:
            y = torch._scaled_mm(
                xq,
                self.weight_fp8.t(),  # [K, N] column-major, as cuBLASLt wants
                scale_a=xs,
                scale_b=self.weight_scale,
                out_dtype=torch.bfloat16,
            )
            if self.bias is not None:
                y = y + self.bias.to(torch.bfloat16)
        return y.reshape(*lead, self.out_features)

    def extra_repr(self) -> str:
        """Describe the layer for ``print(module)``."""
        mode = "emulated" if self.emulate else "scaled_mm"
        return f"in_features={self.in_features}, out_features={self.out_features}, {mode}"


#: Where the transformer blocks of the zoo's encoders sit: timm-layout ViTs (``blocks.{i}``, also
#: under CONCH v1.5's ``trunk.`` and KEEP's ``visual.``), Swin (``layers.{s}.blocks.{i}``) and the
#: Hugging Face layout (``encoder.layer.{i}``).
_BLOCK_PATH = re.compile(r"(?:^|\.)(?:blocks|encoder\.layer)\.\d+\.")


def fp8_linears(module: nn.Module, *, emulate: bool = False) -> list[str]:
    """Name the linear layers :func:`quantize_fp8` replaces in an encoder.

    Every ``nn.Linear`` inside a transformer block (the paths of :data:`_BLOCK_PATH`): timm
    ``attn.qkv``, ``attn.proj``, ``mlp.fc1``, ``mlp.fc2``; Hugging Face ``attention.attention.
    {query,key,value}``, ``attention.output.dense``, the MLP's; Swin's window attention and MLP.
    Heads and poolers outside the blocks (CONCH v1.5's attentional pooler, KEEP's
    ``visual_head``, Swin's patch merging) keep the autocast precision. Unless ``emulate``, a
    linear whose in or out features are not multiples of 16 (``torch._scaled_mm``) is left out.

    Parameters
    ----------
    module : torch.nn.Module
        The encoder.
    emulate : bool, default False
        Whether the layers will be emulated (then every block linear is eligible).

    Returns
    -------
    list of str
        Qualified module names, in module order; empty for a model without block linears (a
        CNN such as ``resnet50``).
    """
    out = []
    for name, m in module.named_modules():
        if not isinstance(m, nn.Linear) or not _BLOCK_PATH.search(name + "."):
            continue
        n, k = m.weight.shape
        if emulate or not (n % 16 or k % 16):
            out.append(name)
    return out


def quantize_fp8(module: Any, *, emulate: bool = False, inplace: bool = False) -> Any:
    """Replace the transformer-block linears of an encoder by :class:`Fp8Linear` layers.

    Parameters
    ----------
    module : torch.nn.Module
        An encoder with transformer blocks (:func:`fp8_linears` says which layers: the ViTs in
        the timm and Hugging Face layouts, CONCH v1.5's trunk, KEEP's tower, Swin).
    emulate : bool, default False
        Emulate the FP8 matmul (E4M3 casts + float32 matmul) so it runs on any device.
    inplace : bool, default False
        Modify ``module`` itself instead of a deep copy.

    Returns
    -------
    torch.nn.Module
        The quantised module (``module`` itself when ``inplace``), with attribute
        ``precision = "fp8"``.

    Raises
    ------
    InvalidArgumentError
        The module has no eligible block linears (e.g. ``resnet50``, a CNN).
    """
    if not isinstance(module, nn.Module):
        raise InvalidArgumentError(f"FP8: expected a torch module, got {type(module).__name__}")
    names = fp8_linears(module, emulate=emulate)
    if not names:
        raise InvalidArgumentError(
            f"FP8: {type(module).__name__} has no 'blocks' or 'encoder.layer' linears with in and "
            "out features that are multiples of 16 (FP8 quantises a transformer's block "
            "linears); use dtype='bf16' for it"
        )
    out = module if inplace else copy.deepcopy(module)
    for name in names:
        parent_name, _, attr = name.rpartition(".")
        parent = out.get_submodule(parent_name) if parent_name else out
        setattr(parent, attr, Fp8Linear(getattr(parent, attr), emulate=emulate))
    out.precision = "fp8"
    return out
