"""Detection: axis-aligned boxes and classes (the base every other task extends)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lucid_core.heads.detect import DetectHead
from lucid_core.loss.detection import DetectionLoss, detection_objective
from lucid_core.tasks.base import Task

if TYPE_CHECKING:
    from lucid_core.models.config import ModelConfig, ScaleRow
    from lucid_core.models.family import FamilySpec

__all__ = ["DETECT", "DetectTask"]


class DetectTask(Task):
    """Boxes and classes: the detection head, the detection objective, no extra decoded rows."""

    def build_head(
        self, common: dict[str, Any], config: ModelConfig, family: FamilySpec, row: ScaleRow
    ) -> DetectHead:
        return DetectHead(**common)

    def branch_objective(self, model: Any, *, one2one: bool, **options: Any) -> DetectionLoss:
        keys = ("gains", "topk", "alpha", "beta", "o2o_topk", "o2o_topk2")
        return detection_objective(model, one2one=one2one, **{k: v for k, v in options.items() if k in keys})


DETECT = DetectTask(name="detect", reference_head="Detect")
