"""Conv + BatchNorm folding for inference: ``fuse_model(model)`` (in place).

For y = γ·(W∗x − μ)/sqrt(σ² + ε) + β the folded convolution has W' = W·γ/sqrt(σ² + ε) and
b' = β − μ·γ/sqrt(σ² + ε) (+ the scaled original bias). Each :class:`~lucid_core.nn.conv.Conv` gets a biased
``conv`` and an ``nn.Identity`` in place of ``bn``; eval outputs agree with the unfused model to float rounding.
"""

from __future__ import annotations

import torch
from torch import nn

from lucid_core.nn.conv import Conv


@torch.no_grad()
def fold_batchnorm(conv: nn.Conv2d, bn: nn.BatchNorm2d) -> nn.Conv2d:
    """A new biased ``Conv2d`` equal to ``bn(conv(x))`` with ``bn`` in eval mode."""
    fused = nn.Conv2d(
        conv.in_channels,
        conv.out_channels,
        conv.kernel_size,  # type: ignore[arg-type]
        conv.stride,  # type: ignore[arg-type]
        conv.padding,  # type: ignore[arg-type]
        conv.dilation,  # type: ignore[arg-type]
        conv.groups,
        bias=True,
        device=conv.weight.device,
        dtype=conv.weight.dtype,
    )
    assert bn.running_var is not None and bn.running_mean is not None
    gamma = bn.weight if bn.weight is not None else torch.ones_like(bn.running_var)
    beta = bn.bias if bn.bias is not None else torch.zeros_like(bn.running_var)
    scale = gamma / torch.sqrt(bn.running_var + bn.eps)
    fused.weight.copy_(conv.weight * scale.view(-1, 1, 1, 1))
    bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
    assert fused.bias is not None
    fused.bias.copy_(beta + (bias - bn.running_mean) * scale)
    fused.weight.requires_grad_(conv.weight.requires_grad)
    return fused


def fuse_model(model: nn.Module) -> nn.Module:
    """Fold every ``Conv.bn`` into its ``Conv.conv`` (in place) and return ``model``."""
    for module in model.modules():
        if isinstance(module, Conv) and isinstance(module.bn, nn.BatchNorm2d):
            module.conv = fold_batchnorm(module.conv, module.bn)
            module.bn = nn.Identity()  # type: ignore[assignment]
    return model
