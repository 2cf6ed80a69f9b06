"""Per-image detection results shared by decoders, ``predict``, evaluation and visualisation."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Detections:
    """Detections of one image; all coordinates in one pixel frame (network input or original image)."""

    boxes: Tensor  # (N, 4) xyxy float32 (axis-aligned hull for rotated boxes)
    scores: Tensor  # (N,) float32
    labels: Tensor  # (N,) int64 contiguous class index
    masks: Tensor | None = None  # (N, H, W) bool
    keypoints: Tensor | None = None  # (N, K, 3) x, y, visibility score
    rboxes: Tensor | None = None  # (N, 5) cx, cy, w, h, theta (radians)

    def __len__(self) -> int:
        return int(self.scores.shape[0])

    @classmethod
    def empty(cls, device: torch.device | str | None = None) -> Detections:
        return cls(
            boxes=torch.zeros((0, 4), device=device),
            scores=torch.zeros((0,), device=device),
            labels=torch.zeros((0,), dtype=torch.int64, device=device),
        )

    def to(self, device: torch.device | str) -> Detections:
        def mv(t: Tensor | None) -> Tensor | None:
            return None if t is None else t.to(device)

        return Detections(
            boxes=self.boxes.to(device),
            scores=self.scores.to(device),
            labels=self.labels.to(device),
            masks=mv(self.masks),
            keypoints=mv(self.keypoints),
            rboxes=mv(self.rboxes),
        )
