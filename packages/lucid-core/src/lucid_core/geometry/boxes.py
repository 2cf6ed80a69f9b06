"""Axis-aligned box format conversions (xyxy <-> centre/size)."""

from __future__ import annotations

import torch
from torch import Tensor


def xywh_to_xyxy(boxes: Tensor) -> Tensor:
    """(cx, cy, w, h) -> (x1, y1, x2, y2) on the last dimension."""
    cx, cy, w, h = boxes.unbind(-1)
    return torch.stack((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2), -1)


def xyxy_to_xywh(boxes: Tensor) -> Tensor:
    """(x1, y1, x2, y2) -> (cx, cy, w, h) on the last dimension."""
    x1, y1, x2, y2 = boxes.unbind(-1)
    return torch.stack(((x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1), -1)
