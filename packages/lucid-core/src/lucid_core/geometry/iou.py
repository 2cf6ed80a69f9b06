"""Axis-aligned box overlaps: plain pairwise IoU and the reference Complete-IoU (CIoU).

CIoU follows Zheng et al., "Distance-IoU Loss: Faster and Better Learning for Bounding Box Regression"
(AAAI 2020), in the exact arithmetic written in ``shared/fixtures/README.md`` ("assigner_public.pt", rule 2),
which reproduced the reference assigner and detection loss bit-exactly: eps = 1e-7 added to the heights, the
union and the enclosing diagonal, and the aspect-ratio trade-off α computed without gradient.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

CIOU_EPS = 1e-7
_FOUR_OVER_PI_SQUARED = 4 / math.pi**2


def box_iou(boxes1: Tensor, boxes2: Tensor, eps: float = CIOU_EPS) -> Tensor:
    """Pairwise IoU of ``boxes1`` (N, 4) and ``boxes2`` (M, 4), both xyxy, as an (N, M) tensor."""
    if boxes1.shape[-1] != 4 or boxes2.shape[-1] != 4:
        raise ValueError(
            f"box_iou: boxes must be (..., 4) xyxy, got {tuple(boxes1.shape)} and {tuple(boxes2.shape)}"
        )
    a1, b1 = boxes1[:, None, :2], boxes1[:, None, 2:]
    a2, b2 = boxes2[None, :, :2], boxes2[None, :, 2:]
    inter = (torch.minimum(b1, b2) - torch.maximum(a1, a2)).clamp(min=0).prod(-1)
    area1 = (b1 - a1).prod(-1)
    area2 = (b2 - a2).prod(-1)
    return inter / (area1 + area2 - inter + eps)


def bbox_ciou(box1: Tensor, box2: Tensor, eps: float = CIOU_EPS, alpha: Tensor | None = None) -> Tensor:
    """Elementwise (broadcasting) CIoU of xyxy boxes ``box1`` and ``box2`` on the last dimension.

    Returns a tensor of the broadcast shape without the last dimension. Order matters for the last bits: the
    assigner passes (ground truth, prediction), the box loss (prediction, target) — as the reference does.
    ``alpha`` fixes the aspect-ratio trade-off weight; ``None`` (the reference) computes
    ``v / (1 − iou + v + eps)`` from the boxes without gradient, so the gradient equals that of the same
    expression with α held constant (which is what passing it explicitly allows a gradient check to verify).
    """
    b1_x1, b1_y1, b1_x2, b1_y2 = box1.unbind(-1)
    b2_x1, b2_y1, b2_x2, b2_y2 = box2.unbind(-1)
    w1, h1 = b1_x2 - b1_x1, b1_y2 - b1_y1 + eps
    w2, h2 = b2_x2 - b2_x1, b2_y2 - b2_y1 + eps

    inter = (torch.minimum(b1_x2, b2_x2) - torch.maximum(b1_x1, b2_x1)).clamp(min=0) * (
        torch.minimum(b1_y2, b2_y2) - torch.maximum(b1_y1, b2_y1)
    ).clamp(min=0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union

    cw = torch.maximum(b1_x2, b2_x2) - torch.minimum(b1_x1, b2_x1)
    ch = torch.maximum(b1_y2, b2_y2) - torch.minimum(b1_y1, b2_y1)
    c2 = cw.pow(2) + ch.pow(2) + eps
    rho2 = ((b2_x1 + b2_x2 - b1_x1 - b1_x2).pow(2) + (b2_y1 + b2_y2 - b1_y1 - b1_y2).pow(2)) / 4
    v = _FOUR_OVER_PI_SQUARED * (torch.atan(w2 / h2) - torch.atan(w1 / h1)).pow(2)
    if alpha is None:
        with torch.no_grad():
            alpha = v / (v - iou + (1 + eps))
    return iou - (rho2 / c2 + v * alpha)
