"""Instance-mask assembly from prototypes and per-detection coefficients (YOLACT, Bolya et al. 2019).

mask = sigmoid(coefficients · prototypes), zeroed outside the detection's box (cropped at prototype
resolution), bilinearly upsampled (half-pixel centres) to the network input size, then thresholded at 0.5.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def crop_to_boxes(masks: Tensor, boxes_xyxy: Tensor) -> Tensor:
    """Zero ``masks`` ``(N, H, W)`` outside each box (pixel index i is inside when ``x1 <= i < x2``)."""
    _, h, w = masks.shape
    x1, y1, x2, y2 = boxes_xyxy[:, :, None].unbind(1)  # each (N, 1)
    cols = torch.arange(w, device=masks.device, dtype=boxes_xyxy.dtype)[None, None, :]
    rows = torch.arange(h, device=masks.device, dtype=boxes_xyxy.dtype)[None, :, None]
    inside = (cols >= x1[:, None]) & (cols < x2[:, None]) & (rows >= y1[:, None]) & (rows < y2[:, None])
    return masks * inside


def assemble_masks(
    proto: Tensor, coefficients: Tensor, boxes_xyxy: Tensor, input_hw: tuple[int, int]
) -> Tensor:
    """``proto`` ``(nm, Hp, Wp)``, ``coefficients`` ``(N, nm)``, boxes ``(N, 4)`` input pixels → ``(N, H, W)`` bool."""
    if proto.ndim != 3:
        raise ValueError(f"assemble_masks: proto must be (nm, Hp, Wp), got {tuple(proto.shape)}")
    nm, hp, wp = proto.shape
    if coefficients.ndim != 2 or coefficients.shape[1] != nm:
        raise ValueError(f"assemble_masks: coefficients must be (N, {nm}), got {tuple(coefficients.shape)}")
    n = int(coefficients.shape[0])
    h, w = input_hw
    if n == 0:
        return torch.zeros((0, h, w), dtype=torch.bool, device=proto.device)
    probs = torch.sigmoid(coefficients.float() @ proto.float().reshape(nm, -1)).reshape(n, hp, wp)
    scale = torch.tensor([wp / w, hp / h, wp / w, hp / h], device=boxes_xyxy.device, dtype=torch.float32)
    cropped = crop_to_boxes(probs, boxes_xyxy.float() * scale)
    upsampled = F.interpolate(cropped[None], size=(h, w), mode="bilinear", align_corners=False)[0]
    return upsampled > 0.5
