"""Pose: boxes plus K keypoints (x, y[, visibility]) per instance."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from lucid_core.errors import CheckpointImportError
from lucid_core.geometry.letterbox import LetterboxInfo
from lucid_core.heads.pose import PoseHead
from lucid_core.loss.terms.pose import PoseLoss, pose_objective
from lucid_core.results import Detections
from lucid_core.tasks.base import DecodeLayout, Task

if TYPE_CHECKING:
    from lucid_core.interop.unpickler import StandInModule
    from lucid_core.models.config import ModelConfig, ScaleRow
    from lucid_core.models.family import FamilySpec

__all__ = ["POSE", "PoseTask"]


class PoseTask(Task):
    """Keypoints: ``K × D`` decoded rows (pixels, visibility probability); D = 2 is reported as visible."""

    def configure(self, config: ModelConfig, options: Mapping[str, Any]) -> None:
        kpt = options.get("kpt_shape", (17, 3))
        config.kpt_shape = (int(kpt[0]), int(kpt[1]))

    def build_head(
        self, common: dict[str, Any], config: ModelConfig, family: FamilySpec, row: ScaleRow
    ) -> PoseHead:
        assert config.kpt_shape is not None
        return PoseHead(**common, kpt_shape=config.kpt_shape, rle=family.pose_rle)

    def branch_objective(self, model: Any, *, one2one: bool, **options: Any) -> PoseLoss:
        return pose_objective(model, one2one=one2one, **options)

    def decode_layout(
        self,
        extra: int,
        *,
        kpt_shape: tuple[int, int] | None,
        proto: Tensor | None,
        input_hw: tuple[int, int] | None,
    ) -> tuple[int | None, DecodeLayout]:
        if kpt_shape is None:
            if extra % 3:
                raise ValueError(f"postprocess: pose with {extra} keypoint rows needs kpt_shape")
            return None, DecodeLayout((extra // 3, 3), input_hw)
        return kpt_shape[0] * kpt_shape[1], DecodeLayout(kpt_shape, input_hw)

    def attach(
        self,
        det: Detections,
        extras: Tensor,
        *,
        index: int,
        proto: Tensor | None,
        layout: DecodeLayout,
        retina_letterbox: LetterboxInfo | None,
    ) -> Detections:
        assert layout.kpt_shape is not None
        kpts = extras.float().reshape(len(det), layout.kpt_shape[0], layout.kpt_shape[1])
        if layout.kpt_shape[1] == 2:  # no visibility channel: every keypoint is reported visible
            kpts = torch.cat((kpts, torch.ones_like(kpts[..., :1])), -1)
        det.keypoints = kpts
        return det

    def reference_options(
        self, head: StandInModule, state: Mapping[str, Tensor], head_prefix: str
    ) -> dict[str, Any]:
        kpt = head.__dict__.get("kpt_shape")
        if not (isinstance(kpt, list | tuple) and len(kpt) == 2):
            raise CheckpointImportError(f"pose head {head.reference_class} has no kpt_shape (got {kpt!r})")
        return {"kpt_shape": (int(kpt[0]), int(kpt[1]))}


POSE = PoseTask(
    name="pose",
    suffix="-pose",
    options=(("kpt_shape", (17, 3)),),
    iou_types=("bbox", "keypoints"),
    target_fields=("keypoints",),
    reference_head="Pose",
)
