"""Oriented-box head: detection head + angle branch ``cv4`` (one logit per anchor).

Decode (shared/fixtures/README.md, ``output_unfused``): θ = (sigmoid(raw) − 0.25)·π for the classic head; the
YOLO26 head (``angle_sigmoid=False``) uses the raw output as radians, unbounded, in training and at inference
(README "obb_loss_*.pt", "Head output layout"); centre = anchor + the
offset ((d_r − d_l)/2, (d_b − d_t)/2) rotated by θ; w = d_l + d_r, h = d_t + d_b; all × stride.
Angle branch width ``max(ch0 // 4, ne)`` (shared/weights/checkpoints.json, YOLOv8n-OBB).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from lucid_core.heads.detect import DetectHead, conv_stack


def sigmoid_angle_radians(raw: Tensor) -> Tensor:
    """Classic OBB angle activation θ = (sigmoid(raw) − 0.25)·π ∈ (−π/4, 3π/4) (π as a double scalar)."""
    return (raw.sigmoid() - 0.25) * math.pi


class OBBHead(DetectHead):
    """Detection head with ``num_angles`` (1) angle logits per anchor, extras key ``"angle"``."""

    task_extras = ("angle",)

    def __init__(
        self,
        num_classes: int,
        in_channels: tuple[int, ...],
        strides: tuple[int, ...],
        reg_max: int = 16,
        depthwise_cls: bool = True,
        end2end: bool = False,
        num_angles: int = 1,
        angle_sigmoid: bool = True,
    ) -> None:
        self.ne = num_angles
        self.angle_sigmoid = angle_sigmoid
        super().__init__(num_classes, in_channels, strides, reg_max, depthwise_cls, end2end)

    def _build_extras(self) -> None:
        hidden = max(self.in_channels[0] // 4, self.ne)
        self.cv4 = nn.ModuleList(conv_stack(c, hidden, self.ne) for c in self.in_channels)

    def branch_module_names(self) -> tuple[str, ...]:
        return ("cv2", "cv3", "cv4")

    def _task_outputs(self, feats: list[Tensor], prefix: str) -> dict[str, Tensor]:
        mods: nn.ModuleList = getattr(self, prefix + "cv4")
        return {"angle": torch.cat([m(f).flatten(2) for m, f in zip(mods, feats, strict=True)], 2)}

    def angle_radians(self, raw: Tensor) -> Tensor:
        """The angle in radians from the raw angle output (the activation of this head's family)."""
        return sigmoid_angle_radians(raw) if self.angle_sigmoid else raw

    def decode_boxes(
        self, dist: Tensor, anchors: Tensor, stride: Tensor, extras: dict[str, Tensor]
    ) -> Tensor:
        theta = self.angle_radians(extras["angle"])
        cos, sin = theta.cos(), theta.sin()
        lt, rb = dist.chunk(2, 1)
        off = (rb - lt) / 2
        off_x, off_y = off[:, :1], off[:, 1:2]
        centre = torch.cat((off_x * cos - off_y * sin, off_x * sin + off_y * cos), 1) + anchors
        return torch.cat((centre, lt + rb), 1) * stride

    def decode_extras(self, extras: dict[str, Tensor], anchors: Tensor, stride: Tensor) -> list[Tensor]:
        return [self.angle_radians(extras["angle"])]
