"""Keypoint head: detection head + keypoint branch ``cv4`` for any ``kpt_shape`` (K, D), D in {2, 3}.

YOLOv8/YOLO11: ``cv4.{i}`` = Conv3x3, Conv3x3, Conv2d 1x1 to K·D, width ``max(ch0 // 4, K·D)``
(shared/weights/checkpoints.json, YOLO11n-pose). YOLO26 (``rle=True``): ``cv4.{i}`` = shared Conv3x3, Conv3x3
feature convs of width ``max(ch0 // 4, K·(D + 2))``, then ``cv4_kpts.{i}`` (K·D raw keypoints) and ``cv4_sigma.{i}``
(K·2 RLE scale logits, extras key ``"kpt_sigma"``), plus the RealNVP ``flow_model`` used only by the RLE loss
(widths pinned by shared/fixtures/model_params.json ``params_one2many_branch`` / ``params_flow_model``).
Decode: x, y = (2·raw + anchor_grid − 0.5)·stride, v = sigmoid(raw_v) (shared/fixtures/README.md); YOLO26 (``rle``):
x, y = (raw + anchor_grid)·stride, the decode its loss trains (README "pose_loss_*.pt", step 2).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lucid_core.heads.detect import DetectHead, conv_stack
from lucid_core.nn.conv import Conv
from lucid_core.nn.flow import RealNVP


class PoseHead(DetectHead):
    """Detection head + keypoints (extras ``"keypoints"``, and ``"kpt_sigma"`` for the RLE variant)."""

    task_extras = ("keypoints",)

    def __init__(
        self,
        num_classes: int,
        in_channels: tuple[int, ...],
        strides: tuple[int, ...],
        reg_max: int = 16,
        depthwise_cls: bool = True,
        end2end: bool = False,
        kpt_shape: tuple[int, int] = (17, 3),
        rle: bool = False,
    ) -> None:
        num_kpts, dims = kpt_shape
        if num_kpts < 1 or dims not in (2, 3):
            raise ValueError(f"pose head: kpt_shape must be (K >= 1, 2 or 3), got {kpt_shape!r}")
        self.kpt_shape = (int(num_kpts), int(dims))
        self.nk = num_kpts * dims
        self.rle = rle
        super().__init__(num_classes, in_channels, strides, reg_max, depthwise_cls, end2end)

    def _build_extras(self) -> None:
        ch0 = self.in_channels[0]
        if not self.rle:
            hidden = max(ch0 // 4, self.nk)
            self.cv4 = nn.ModuleList(conv_stack(c, hidden, self.nk) for c in self.in_channels)
            return
        num_sigma = self.kpt_shape[0] * 2
        hidden = max(ch0 // 4, self.nk + num_sigma)
        self.cv4 = nn.ModuleList(
            nn.Sequential(Conv(c, hidden, 3), Conv(hidden, hidden, 3)) for c in self.in_channels
        )
        self.cv4_kpts = nn.ModuleList(nn.Conv2d(hidden, self.nk, 1) for _ in self.in_channels)
        self.cv4_sigma = nn.ModuleList(nn.Conv2d(hidden, num_sigma, 1) for _ in self.in_channels)
        self.flow_model = RealNVP()

    def branch_module_names(self) -> tuple[str, ...]:
        if self.rle:
            return ("cv2", "cv3", "cv4", "cv4_kpts", "cv4_sigma")
        return ("cv2", "cv3", "cv4")

    def training_only_module_names(self) -> tuple[str, ...]:
        return ("flow_model", "one2one_cv4_sigma") if self.rle else ()

    def auxiliary_module_names(self) -> tuple[str, ...]:
        return ("cv4_sigma", "one2one_cv4_sigma", "flow_model") if self.rle else ()

    def _task_outputs(self, feats: list[Tensor], prefix: str) -> dict[str, Tensor]:
        feat_mods: nn.ModuleList = getattr(self, prefix + "cv4")
        if not self.rle:
            kpts = torch.cat([m(f).flatten(2) for m, f in zip(feat_mods, feats, strict=True)], 2)
            return {"keypoints": kpts}
        hidden = [m(f) for m, f in zip(feat_mods, feats, strict=True)]
        kpt_mods: nn.ModuleList = getattr(self, prefix + "cv4_kpts")
        out = {"keypoints": torch.cat([m(h).flatten(2) for m, h in zip(kpt_mods, hidden, strict=True)], 2)}
        if hasattr(self, prefix + "cv4_sigma"):
            sigma_mods: nn.ModuleList = getattr(self, prefix + "cv4_sigma")
            out["kpt_sigma"] = torch.cat(
                [m(h).flatten(2) for m, h in zip(sigma_mods, hidden, strict=True)], 2
            )
        return out

    def decode_extras(self, extras: dict[str, Tensor], anchors: Tensor, stride: Tensor) -> list[Tensor]:
        raw = extras["keypoints"]
        b, _, a = raw.shape
        num_kpts, dims = self.kpt_shape
        kpts = raw.view(b, num_kpts, dims, a)
        if self.rle:
            xy = (kpts[:, :, :2] + anchors.unsqueeze(0).unsqueeze(0)) * stride
        else:
            xy = (kpts[:, :, :2] * 2.0 + (anchors - 0.5).unsqueeze(0).unsqueeze(0)) * stride
        parts = [xy]
        if dims == 3:
            parts.append(kpts[:, :, 2:3].sigmoid())
        return [torch.cat(parts, 2).view(b, self.nk, a)]
