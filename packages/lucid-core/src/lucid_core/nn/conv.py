"""Convolution units: ``Conv`` (conv without bias + BatchNorm + SiLU), depthwise ``DWConv`` and ``Concat``.

BatchNorm uses eps 1e-3 and momentum 0.03 (shared/weights/README.md, "Notes that matter for an importer").
Sub-module names ``conv`` / ``bn`` follow the reference state-dict layout (shared/weights/checkpoints.json).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

BN_EPS = 1e-3
BN_MOMENTUM = 0.03


def same_padding(kernel_size: int, dilation: int = 1) -> int:
    """Padding that keeps the spatial size for stride 1 (odd kernels)."""
    effective = dilation * (kernel_size - 1) + 1
    return effective // 2


class Conv(nn.Module):
    """``Conv2d(bias=False) -> BatchNorm2d(eps=1e-3, momentum=0.03) -> SiLU`` (activation optional)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int = 1,
        stride: int = 1,
        groups: int = 1,
        dilation: int = 1,
        act: bool = True,
    ) -> None:
        super().__init__()
        self.conv = nn.Conv2d(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            same_padding(kernel_size, dilation),
            dilation=dilation,
            groups=groups,
            bias=False,
        )
        self.bn = nn.BatchNorm2d(out_channels, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.act: nn.Module = nn.SiLU() if act else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.act(self.bn(self.conv(x)))
        return out


class DWConv(Conv):
    """Depthwise convolution unit: a :class:`Conv` with ``groups = gcd(in_channels, out_channels)``."""

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int = 1, stride: int = 1, act: bool = True
    ) -> None:
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            groups=math.gcd(in_channels, out_channels),
            act=act,
        )


class Concat(nn.Module):
    """Concatenate a list of feature maps along the channel dimension (a graph node without parameters)."""

    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, xs: list[Tensor]) -> Tensor:
        return torch.cat(xs, self.dim)
