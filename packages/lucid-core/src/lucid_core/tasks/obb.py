"""Oriented boxes: (cx, cy, w, h, θ) per instance, suppressed by rotated IoU."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from lucid_core.heads.obb import OBBHead
from lucid_core.loss.terms.obb import OBBLoss, obb_objective
from lucid_core.tasks.base import DecodeLayout, Task, int_attribute

if TYPE_CHECKING:
    from lucid_core.interop.unpickler import StandInModule
    from lucid_core.models.config import ModelConfig, ScaleRow
    from lucid_core.models.family import FamilySpec

__all__ = ["OBB", "OBBTask"]


class OBBTask(Task):
    """Rotated boxes: one angle row (radians) after the classes; the box columns are centre and size."""

    def configure(self, config: ModelConfig, options: Mapping[str, Any]) -> None:
        config.num_angles = int(options.get("num_angles", 1))

    def build_head(
        self, common: dict[str, Any], config: ModelConfig, family: FamilySpec, row: ScaleRow
    ) -> OBBHead:
        assert config.num_angles is not None
        return OBBHead(**common, num_angles=config.num_angles, angle_sigmoid=family.obb_angle_sigmoid)

    def branch_objective(self, model: Any, *, one2one: bool, **options: Any) -> OBBLoss:
        return obb_objective(model, one2one=one2one, **options)

    def decode_layout(
        self,
        extra: int,
        *,
        kpt_shape: tuple[int, int] | None,
        proto: Tensor | None,
        input_hw: tuple[int, int] | None,
    ) -> tuple[int | None, DecodeLayout]:
        return 1, DecodeLayout(kpt_shape, input_hw)

    def rotated_boxes(self, xywh: Tensor, extras: Tensor) -> Tensor | None:
        return torch.cat((xywh, extras[:, :1]), 1)

    def reference_options(
        self, head: StandInModule, state: Mapping[str, Tensor], head_prefix: str
    ) -> dict[str, Any]:
        ne = int_attribute(head, "ne")
        return {"num_angles": ne} if ne is not None else {}


OBB = OBBTask(
    name="obb",
    suffix="-obb",
    options=(("num_angles", 1),),
    iou_types=("rotated",),
    target_fields=("rboxes",),
    reference_head="OBB",
    validation_batch_factor=1,
)
