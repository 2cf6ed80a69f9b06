"""Rotated task-aligned assignment for oriented boxes ``(cx, cy, w, h, θ)``.

Rules from ``shared/fixtures/README.md``, section "obb_loss_*.pt", "The loss", step 3 (the reference's
``RotatedTaskAlignedAssigner``); only steps 1 and 2 of the task-aligned rule differ (see
:mod:`lucid_core.assign.task_aligned`):

1. **candidates**: a real row's sides (w and h separately) shorter than ``stride_val`` (16 px) are widened to
   it, centre and θ kept (padding rows are never widened; only this test uses the widened box). With the
   corners ``P1 = (c + v1) + v2``, ``P2 = (c + v1) − v2``, ``P4 = (c − v1) + v2``,
   ``v1 = (w/2·cosθ, w/2·sinθ)``, ``v2 = (−h/2·sinθ, h/2·cosθ)``, edges ``e1 = P2 − P1``, ``e2 = P4 − P1`` and
   ``q = p − P1``, the anchor point p is a candidate iff ``0 ≤ q·e1 ≤ e1·e1`` and ``0 ≤ q·e2 ≤ e2·e2`` —
   inclusive and without eps (anchors exactly on an edge count, unlike the axis-aligned ``> 1e-9`` test);
2. **overlap**: u = ProbIoU(ground truth, prediction) with variance floor 0 (ground truth as box 1), clamped to
   ≥ 0, candidates only.

Ground truth and predictions are xywhr pixels; ``target_bboxes`` gathers the ground truth's 5 columns.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from lucid_core.assign.task_aligned import TaskAlignedAssigner
from lucid_core.geometry.rotated import probiou, rboxes_to_polygons

PROBIOU_FLOOR_ASSIGNER = 0.0  # fixture README constants: probiou_floor_assigner


class RotatedTaskAlignedAssigner(TaskAlignedAssigner):
    """Task-aligned assigner on rotated boxes (xywhr pixels): rotated inside test and ProbIoU overlap.

    Args: as :class:`TaskAlignedAssigner`; ``small_target_stride`` is the reference's ``stride_val`` (16 for
    strides (8, 16, 32)) below which a side is widened for the candidate test, ``None`` to disable it.
    """

    def candidates(
        self, anc_points: Tensor, gt_bboxes: Tensor, real: Tensor, extras: Mapping[str, Tensor]
    ) -> Tensor:
        """(B, M, A) float mask of anchor points inside (edges included) each row's widened rotated box."""
        if gt_bboxes.shape[-1] != 5:
            raise ValueError(
                f"RotatedTaskAlignedAssigner: gt_bboxes must be (B, M, 5) xywhr, got {tuple(gt_bboxes.shape)}"
            )
        centre = gt_bboxes[..., :2]
        size = gt_bboxes[..., 2:4]
        theta = gt_bboxes[..., 4:5]
        if self.small_target_stride is not None:
            widen = (size < self.small_target_stride) & (real > 0)
            size = torch.where(widen, torch.full_like(size, self.small_target_stride), size)
        corners = rboxes_to_polygons(torch.cat((centre, size, theta), -1))  # (B, M, 4, 2)
        p1, p2, p4 = corners[..., 0, :], corners[..., 1, :], corners[..., 3, :]
        e1 = (p2 - p1).unsqueeze(2)  # (B, M, 1, 2)
        e2 = (p4 - p1).unsqueeze(2)
        q = anc_points.view(1, 1, -1, 2) - p1.unsqueeze(2)  # (B, M, A, 2)

        def dot(u: Tensor, v: Tensor) -> Tensor:
            return u[..., 0] * v[..., 0] + u[..., 1] * v[..., 1]

        q_e1, q_e2 = dot(q, e1), dot(q, e2)
        inside = (q_e1 >= 0) & (q_e1 <= dot(e1, e1)) & (q_e2 >= 0) & (q_e2 <= dot(e2, e2))
        return inside.to(gt_bboxes.dtype)

    def overlaps(
        self,
        gt_bboxes: Tensor,
        pd_bboxes: Tensor,
        is_candidate: Tensor,
        class_scores: Tensor,
        extras: Mapping[str, Tensor],
    ) -> Tensor:
        """(B, M, A) ProbIoU(ground truth, prediction), floor 0, clamped at 0, zero outside candidates."""
        overlap = probiou(
            gt_bboxes.unsqueeze(2), pd_bboxes.unsqueeze(1), pairwise=False, floor=PROBIOU_FLOOR_ASSIGNER
        ).clamp_(min=0)
        return torch.where(is_candidate, overlap, torch.zeros_like(overlap))
