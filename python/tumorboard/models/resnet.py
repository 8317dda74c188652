"""ResNet-50 truncated after its third stage, in plain torch with timm/torchvision keys.

The architecture is ResNet-50 v1.5 (He et al., CVPR 2016, Table 1; the stride of a downsampling
bottleneck on its 3x3 convolution, as torchvision and timm build it:
pytorch/vision ``torchvision/models/resnet.py`` and huggingface/pytorch-image-models
``timm/models/resnet.py``): a 7x7/2 convolution stem with batch norm, ReLU and a 3x3/2 max
pool, then bottleneck stages ``layer1`` (3 blocks, 256 channels), ``layer2`` (4 blocks, 512
channels, stride 2) and ``layer3`` (6 blocks, 1024 channels, stride 2). ``layer4`` and the
classifier ``fc`` are not built.

This is TRIDENT's ``resnet50`` patch encoder (mahmoodlab/TRIDENT
``trident/patch_encoder_models/load.py``@a91fa84, ``ResNet50InferenceEncoder``): timm's
``resnet50`` with ``features_only=True, out_indices=[3]`` (the ``layer3`` feature map, stride 16,
1024 channels), adaptive average pooled to ``[B, 1024]``, weights ``timm/resnet50.tv_in1k``
(torchvision's ImageNet-1k ResNet-50, ``IMAGENET1K_V1``), run in float32. Its preprocessing is a
bilinear (antialiased) resize of the shorter side to 224, a 224 center crop and ImageNet
normalisation; on the square patches tumorboard feeds it, that is one resize to 224x224.

Parameter names follow timm and torchvision (``conv1``, ``bn1``, ``layer{i}.{j}.conv{k}``,
``layer{i}.{j}.bn{k}``, ``layer{i}.0.downsample.0`` (1x1 convolution) and ``.downsample.1``
(batch norm)); batch norms carry ``running_mean``, ``running_var`` and ``num_batches_tracked``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from .._constants import IMAGENET_MEAN, IMAGENET_STD
from ..errors import InvalidArgumentError
from .vit import set_encoder_metadata

__all__ = ["Bottleneck", "ResNetTrunk", "resnet50_trunc"]

#: Blocks per stage of ResNet-50 (He et al. 2016, Table 1); the trunk keeps the first three.
RESNET50_LAYERS = (3, 4, 6, 3)
#: Bottleneck widths (the 3x3 convolution's channels) per stage; the output is 4x wider.
RESNET50_WIDTHS = (64, 128, 256, 512)
#: ``state_dict`` prefixes of a full ResNet-50 that the truncated trunk does not have.
DROPPED_PREFIXES = ("layer4.", "fc.")


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck block (torchvision/timm ``Bottleneck``, expansion 4).

    ``relu(bn3(conv3(relu(bn2(conv2(relu(bn1(conv1(x)))))))) + shortcut(x))`` with ``conv1`` 1x1,
    ``conv2`` 3x3 carrying the stride, ``conv3`` 1x1, no convolution biases; ``shortcut`` is the
    identity or ``downsample`` (1x1 convolution with the stride, then batch norm).

    Parameters
    ----------
    in_channels : int
        Input channels.
    width : int
        Channels of the 1x1 and 3x3 convolutions; the block outputs ``4 * width``.
    stride : int, default 1
        Stride of ``conv2`` and of the shortcut convolution.
    downsample : bool, default False
        Whether the shortcut is a projection (first block of a stage).
    """

    expansion = 4

    def __init__(
        self, in_channels: int, width: int, *, stride: int = 1, downsample: bool = False
    ) -> None:
        super().__init__()
        out = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, kernel_size=1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.downsample = (
            nn.Sequential(
                nn.Conv2d(in_channels, out, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(out),
            )
            if downsample
            else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the block to ``[B, C, H, W]``."""
        shortcut = x if self.downsample is None else self.downsample(x)
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + shortcut)


class ResNetTrunk(nn.Module):
    """The first ``len(layers)`` stages of a bottleneck ResNet, average pooled.

    ``forward(x) -> [B, embed_dim]``: the last stage's feature map, adaptive average pooled
    (TRIDENT's ``resnet50``). :meth:`forward_features` returns the map ``[B, embed_dim, H/16,
    W/16]`` for three stages. Inputs are cast to the parameters' dtype.

    Parameters
    ----------
    layers : tuple of int
        Blocks per stage (ResNet-50 truncated: ``(3, 4, 6)``).
    name : str, default "resnet50"
        The model name.
    image_size : int, default 224
        The input size preprocessing should produce (any size works; the pool is adaptive).
    mean, std : tuple of float, default ImageNet
        Per-channel normalisation constants.
    interpolation : {"bilinear", "bicubic"}, default "bilinear"
        The resize filter of the reference preprocessing.

    Attributes
    ----------
    name, embed_dim, image_size, mean, std, interpolation
        The encoder attributes of :func:`tumorboard.models.load`.
    """

    def __init__(
        self,
        layers: tuple[int, ...] = RESNET50_LAYERS[:3],
        *,
        name: str = "resnet50",
        image_size: int = 224,
        mean: tuple[float, float, float] = IMAGENET_MEAN,
        std: tuple[float, float, float] = IMAGENET_STD,
        interpolation: Literal["bilinear", "bicubic"] = "bilinear",
    ) -> None:
        super().__init__()
        if not 1 <= len(layers) <= 4 or any(n < 1 for n in layers):
            raise InvalidArgumentError(f"layers: 1 to 4 positive block counts, got {layers}")
        size = int(image_size)
        if size < 32:
            raise InvalidArgumentError(f"image_size: expected at least 32, got {image_size}")
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        channels = 64
        for i, (blocks, width) in enumerate(zip(layers, RESNET50_WIDTHS, strict=False)):
            stride = 1 if i == 0 else 2
            stage = [Bottleneck(channels, width, stride=stride, downsample=True)]
            channels = width * Bottleneck.expansion
            stage += [Bottleneck(channels, width) for _ in range(blocks - 1)]
            self.add_module(f"layer{i + 1}", nn.Sequential(*stage))
        self.num_stages = len(layers)
        set_encoder_metadata(self, name=name, embed_dim=channels, image_size=size, mean=mean,
                             std=std, interpolation=interpolation)  # fmt: skip
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Initialise as torchvision does: Kaiming-normal (fan-out) convolutions, unit BN."""
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def adapt_state_dict(self, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Fit a full ResNet-50 checkpoint to the trunk.

        Keys under ``layer4.`` and ``fc.`` (the stage and the classifier the trunk does not
        have) are dropped, as TRIDENT's ``features_only`` model ignores them. A batch norm
        whose ``num_batches_tracked`` is absent while its ``running_mean`` is present gets a
        zero counter, as ``torch.nn.BatchNorm2d`` itself does for checkpoints saved before
        PyTorch 0.4.1 (the counter is not used in eval mode). Every other key is checked
        strictly by the loader.

        Parameters
        ----------
        state : Mapping of str to torch.Tensor
            The checkpoint.

        Returns
        -------
        dict of str to torch.Tensor
            The adapted state dict.
        """
        out = {k: v for k, v in state.items() if not k.startswith(DROPPED_PREFIXES)}
        for key in list(out):
            if key.endswith(".running_mean"):
                counter = key.removesuffix("running_mean") + "num_batches_tracked"
                out.setdefault(counter, torch.tensor(0, dtype=torch.long))
        return out

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """Return the last stage's feature map ``[B, embed_dim, h, w]``."""
        if x.ndim != 4 or x.shape[1] != 3:
            raise InvalidArgumentError(f"expected images [B, 3, H, W], got shape {list(x.shape)}")
        x = x.to(self.conv1.weight.dtype)
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        for i in range(self.num_stages):
            x = getattr(self, f"layer{i + 1}")(x)
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the average-pooled embedding ``[B, embed_dim]``."""
        return self.forward_features(x).mean(dim=(2, 3))

    def extra_repr(self) -> str:
        """Return the name and size shown in the module's repr."""
        return f"name={self.name!r}, image_size={self.image_size}, dim={self.embed_dim}"


def resnet50_trunc(*, image_size: int | None = None) -> ResNetTrunk:
    """Build ResNet-50 truncated after ``layer3`` (TRIDENT ``resnet50``) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        The input size preprocessing produces; ``None`` (default) means TRIDENT's 224. Any size
        of at least 32 runs (the pool is adaptive).

    Returns
    -------
    ResNetTrunk
        The encoder named ``"resnet50"``: ``[B, 3, H, W] -> [B, 1024]``, ImageNet normalisation,
        8,543,296 parameters.
    """
    return ResNetTrunk(RESNET50_LAYERS[:3], name="resnet50", image_size=image_size or 224)
