"""Mask prototype modules of the segmentation heads (YOLACT, Bolya et al. 2019: prototypes x coefficients).

``Proto`` (YOLOv8/YOLO11): 3x3 conv, 2x transposed-conv upsampling, 3x3 conv, 1x1 conv to ``num_masks`` maps at
stride 4 from the stride-8 feature. ``MultiScaleProto`` (YOLO26): the stride-16/32 features are first projected to
the stride-8 width (1x1), upsampled, summed and fused (3x3) before the same prototype stack; a training-only
semantic-segmentation branch (two 3x3 convs + 1x1 to ``num_classes``) reads the summed feature, before the fuse
(the reference's training steps, black box: docs/TRAINING.md, "Step parity"). The widths are pinned by
shared/fixtures/model_params.json (``head_params`` and ``fused_end2end_params`` of ``yolo26*-seg``).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from lucid_core.nn.conv import Conv


class Proto(nn.Module):
    """``(B, in, H, W)`` -> ``(B, num_masks, 2H, 2W)`` prototypes."""

    def __init__(self, in_channels: int, hidden: int = 256, num_masks: int = 32) -> None:
        super().__init__()
        self.cv1 = Conv(in_channels, hidden, 3)
        self.upsample = nn.ConvTranspose2d(hidden, hidden, 2, 2, 0, bias=True)
        self.cv2 = Conv(hidden, hidden, 3)
        self.cv3 = Conv(hidden, num_masks, 1)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.cv3(self.cv2(self.upsample(self.cv1(x))))
        return out


class MultiScaleProto(nn.Module):
    """YOLO26 prototypes from all levels plus the auxiliary semantic branch (``semseg``, training only)."""

    def __init__(self, in_channels: tuple[int, ...], hidden: int, num_masks: int, num_classes: int) -> None:
        super().__init__()
        base = in_channels[0]
        self.feat_refine = nn.ModuleList(Conv(c, base, 1) for c in in_channels[1:])
        self.feat_fuse = Conv(base, base, 3)
        self.cv1 = Conv(base, hidden, 3)
        self.upsample = nn.ConvTranspose2d(hidden, hidden, 2, 2, 0, bias=True)
        self.cv2 = Conv(hidden, hidden, 3)
        self.cv3 = Conv(hidden, num_masks, 1)
        self.semseg = nn.Sequential(
            Conv(base, hidden, 3), Conv(hidden, hidden, 3), nn.Conv2d(hidden, num_classes, 1)
        )

    def summed_feature(self, feats: list[Tensor]) -> Tensor:
        """The stride-8 feature plus the projected, nearest-upsampled coarser ones (the semantic branch's input)."""
        x = feats[0]
        for refine, feat in zip(self.feat_refine, feats[1:], strict=True):
            x = x + F.interpolate(refine(feat), size=x.shape[-2:], mode="nearest")
        return x

    def forward(self, feats: list[Tensor], with_semseg: bool) -> tuple[Tensor, Tensor | None]:
        x = self.summed_feature(feats)
        proto = self.cv3(self.cv2(self.upsample(self.cv1(self.feat_fuse(x)))))
        return proto, (self.semseg(x) if with_semseg else None)
