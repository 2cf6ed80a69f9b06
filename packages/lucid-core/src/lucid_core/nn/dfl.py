"""Distribution Focal Loss integral (Li et al. 2020, "Generalized Focal Loss"): expectation of a softmax over bins.

A frozen 1x1 convolution holding the bin values 0..reg_max-1 (``dfl.conv.weight`` of shape (1, reg_max, 1, 1),
shared/weights/README.md); it is counted in the parameter totals but never trained.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class DFL(nn.Module):
    """``(B, 4 * reg_max, A)`` bin logits -> ``(B, 4, A)`` expected distances (grid units)."""

    def __init__(self, reg_max: int = 16) -> None:
        super().__init__()
        self.reg_max = reg_max
        self.conv = nn.Conv2d(reg_max, 1, 1, bias=False).requires_grad_(False)
        with torch.no_grad():
            self.conv.weight.copy_(torch.arange(reg_max, dtype=torch.float32).view(1, reg_max, 1, 1))

    def forward(self, x: Tensor) -> Tensor:
        b, _, a = x.shape
        probs = x.view(b, 4, self.reg_max, a).transpose(2, 1).softmax(1)  # (B, reg_max, 4, A)
        out: Tensor = self.conv(probs)
        return out.view(b, 4, a)
