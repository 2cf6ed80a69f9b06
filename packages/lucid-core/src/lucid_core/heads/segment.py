"""Instance-segmentation head: detection head + mask-coefficient branch ``cv4`` + prototype module ``proto``.

YOLOv8/YOLO11: :class:`~lucid_core.nn.proto.Proto` on the stride-8 feature. YOLO26 (``multiscale_proto``):
:class:`~lucid_core.nn.proto.MultiScaleProto` with its training-only semantic branch (``TrainOutput.semseg``).
Coefficient branch width ``max(ch0 // 4, num_masks)``. Eval output: ``(decoded, proto)`` with the ``num_masks``
raw coefficients as the last rows of ``decoded``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lucid_core.heads.detect import DetectHead, conv_stack
from lucid_core.nn.proto import MultiScaleProto, Proto


class SegmentHead(DetectHead):
    """Detection head + ``num_masks`` coefficients per anchor (extras key ``"mask_coef"``) + prototypes."""

    task_extras = ("mask_coef",)

    def __init__(
        self,
        num_classes: int,
        in_channels: tuple[int, ...],
        strides: tuple[int, ...],
        reg_max: int = 16,
        depthwise_cls: bool = True,
        end2end: bool = False,
        num_masks: int = 32,
        proto_channels: int = 256,
        multiscale_proto: bool = False,
    ) -> None:
        self.nm = num_masks
        self.npr = proto_channels
        self.multiscale_proto = multiscale_proto
        super().__init__(num_classes, in_channels, strides, reg_max, depthwise_cls, end2end)

    def _build_extras(self) -> None:
        self.proto: nn.Module
        if self.multiscale_proto:
            self.proto = MultiScaleProto(self.in_channels, self.npr, self.nm, self.nc)
        else:
            self.proto = Proto(self.in_channels[0], self.npr, self.nm)
        hidden = max(self.in_channels[0] // 4, self.nm)
        self.cv4 = nn.ModuleList(conv_stack(c, hidden, self.nm) for c in self.in_channels)

    def branch_module_names(self) -> tuple[str, ...]:
        return ("cv2", "cv3", "cv4")

    def training_only_module_names(self) -> tuple[str, ...]:
        return ("proto.semseg",) if self.multiscale_proto else ()

    def auxiliary_module_names(self) -> tuple[str, ...]:
        return ("proto.semseg",) if self.multiscale_proto else ()

    def _task_outputs(self, feats: list[Tensor], prefix: str) -> dict[str, Tensor]:
        mods: nn.ModuleList = getattr(self, prefix + "cv4")
        return {"mask_coef": torch.cat([m(f).flatten(2) for m, f in zip(mods, feats, strict=True)], 2)}

    def _aux(self, feats: list[Tensor]) -> tuple[Tensor | None, Tensor | None]:
        if isinstance(self.proto, MultiScaleProto):
            with_semseg = self.training and hasattr(self.proto, "semseg")
            proto_and_semseg: tuple[Tensor, Tensor | None] = self.proto(feats, with_semseg)
            return proto_and_semseg
        proto: Tensor = self.proto(feats[0])
        return proto, None

    def decode_extras(self, extras: dict[str, Tensor], anchors: Tensor, stride: Tensor) -> list[Tensor]:
        return [extras["mask_coef"]]
