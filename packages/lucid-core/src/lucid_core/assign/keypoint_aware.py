"""YOLO26's keypoint-aware task-aligned assignment (pose, both head branches).

Rules from ``shared/fixtures/README.md``, section "pose_loss_*.pt", step 3 ("YOLO26 assignment"): the detection
assigner (:class:`~lucid_core.assign.task_aligned.TaskAlignedAssigner`, small-box expansion on) with

- *candidates* further gated by pyramid level: with ``side = sqrt(max(area, 0))`` of the ground-truth box in
  pixels, an anchor of stride ``s`` passes when ``(side >= 2·s or s is the smallest stride)`` and
  ``(side <= 12·s or s is the largest stride)``; a row left without any gated candidate keeps its ungated ones;
- *overlap* = the OKS between the anchor's predicted keypoints and the row's keypoints when the row has a keypoint
  with ``v > 0``: ``Σ_k vis_k·exp(−d_k / (((2σ_k)²·(area·0.53 + 1e-9))·2)) / max(Σ_k vis_k, 1)`` (pixels); the
  clamped box CIoU otherwise.

Everything downstream (alignment metric, top-k, conflicts, soft scores) is the base assigner's, so the
classification targets and box weights are OKS-scaled.

``extras`` passed to ``__call__``: ``pred_kpts_px`` (B, A, K, 2) detached predicted keypoints in pixels,
``gt_kpts_px`` (B, M, K, 3) padded ground-truth keypoints (x, y pixels, v flag) and ``stride_tensor`` (A, 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from lucid_core.assign.task_aligned import TaskAlignedAssigner

__all__ = ["KeypointAwareAssigner"]

OKS_EPS = 1e-9  # added to the scaled area in the OKS denominator (fixture README, step 3.3)


def _require(extras: Mapping[str, Tensor], key: str) -> Tensor:
    if key not in extras:
        raise KeyError(
            f"KeypointAwareAssigner: extras must hold {key!r} (with 'pred_kpts_px', 'gt_kpts_px', "
            f"'stride_tensor'); got {sorted(extras)}"
        )
    return extras[key]


class KeypointAwareAssigner(TaskAlignedAssigner):
    """Task-aligned assigner with a pyramid-level gate and OKS overlaps (YOLO26 pose).

    Args:
        sigmas: (K,) per-keypoint OKS sigmas (the same the pose loss uses).
        strides: the model's level strides; the smallest has no lower size bound, the largest no upper one.
        level_range: ``(low, high)`` multiples of the stride a box side must lie within (reference (2, 12)).
        oks_area_factor: the box area is scaled by this for the OKS scale (reference 0.53).
        Other arguments as for :class:`TaskAlignedAssigner`.
    """

    def __init__(
        self,
        sigmas: Tensor,
        strides: Sequence[float],
        topk: int = 10,
        num_classes: int = 1,
        alpha: float = 0.5,
        beta: float = 6.0,
        eps: float = 1e-9,
        topk2: int | None = None,
        small_target_stride: float | None = None,
        level_range: tuple[float, float] = (2.0, 12.0),
        oks_area_factor: float = 0.53,
    ) -> None:
        super().__init__(topk, num_classes, alpha, beta, eps, topk2, small_target_stride)
        sigmas = torch.as_tensor(sigmas, dtype=torch.float32)
        if sigmas.ndim != 1 or sigmas.numel() < 1 or not bool((sigmas > 0).all()):
            raise ValueError(
                f"KeypointAwareAssigner: sigmas must be K >= 1 positive values, got {sigmas.tolist()}"
            )
        if not strides:
            raise ValueError("KeypointAwareAssigner: strides must not be empty")
        low, high = (float(v) for v in level_range)
        if not 0 <= low <= high:
            raise ValueError(
                f"KeypointAwareAssigner: level_range must be 0 <= low <= high, got {level_range}"
            )
        self.sigmas = sigmas
        self.min_stride = float(min(strides))
        self.max_stride = float(max(strides))
        self.level_range = (low, high)
        self.oks_area_factor = float(oks_area_factor)

    def __repr__(self) -> str:
        return (
            f"KeypointAwareAssigner(topk={self.topk}, topk2={self.topk2}, num_classes={self.num_classes}, "
            f"alpha={self.alpha}, beta={self.beta}, small_target_stride={self.small_target_stride}, "
            f"level_range={self.level_range}, oks_area_factor={self.oks_area_factor}, K={self.sigmas.numel()})"
        )

    def candidates(
        self, anc_points: Tensor, gt_bboxes: Tensor, real: Tensor, extras: Mapping[str, Tensor]
    ) -> Tensor:
        """Detection candidates gated by pyramid level (rows without a gated candidate keep the ungated ones)."""
        inside = self._candidates(anc_points, gt_bboxes, real)  # (B, M, A)
        stride = _require(extras, "stride_tensor").view(1, 1, -1).to(gt_bboxes.dtype)  # (1, 1, A)
        wh = gt_bboxes[..., 2:4] - gt_bboxes[..., 0:2]
        side = (wh[..., 0] * wh[..., 1]).clamp(min=0).sqrt().unsqueeze(-1)  # (B, M, 1)
        low, high = self.level_range
        lower_ok = (side >= low * stride) | (stride == self.min_stride)
        upper_ok = (side <= high * stride) | (stride == self.max_stride)
        gated = inside * (lower_ok & upper_ok).to(inside.dtype)
        keeps_any = (gated * real).sum(-1, keepdim=True) > 0  # (B, M, 1)
        return torch.where(keeps_any, gated, inside)

    def row_uses_oks(self, extras: Mapping[str, Tensor]) -> Tensor:
        """(B, M) bool: the row has at least one keypoint with ``v > 0`` (its overlap is the OKS)."""
        gt_kpts = _require(extras, "gt_kpts_px")
        return (gt_kpts[..., 2] > 0).any(-1)

    def keypoint_similarity(self, gt_bboxes: Tensor, extras: Mapping[str, Tensor], pairs: Tensor) -> Tensor:
        """(B, M, A) OKS of the anchors' predicted keypoints against the rows' keypoints (fixture step 3.3),
        evaluated only on the (row, anchor) ``pairs`` (B, M, A) bool, zero elsewhere (memory stays O(pairs·K))."""
        gt_kpts = _require(extras, "gt_kpts_px").to(gt_bboxes.dtype)  # (B, M, K, 3)
        pred = _require(extras, "pred_kpts_px").to(gt_bboxes.dtype)  # (B, A, K, 2)
        sigmas = self.sigmas.to(device=gt_bboxes.device, dtype=gt_bboxes.dtype)
        if gt_kpts.shape[2] != sigmas.numel() or pred.shape[2] != sigmas.numel():
            raise ValueError(
                f"KeypointAwareAssigner: {sigmas.numel()} sigmas, but ground truth has {gt_kpts.shape[2]} "
                f"and predictions {pred.shape[2]} keypoints"
            )
        b, j, a = pairs.nonzero(as_tuple=True)
        box = gt_bboxes[b, j]  # (P, 4)
        area = ((box[:, 2] - box[:, 0]) * (box[:, 3] - box[:, 1])) * self.oks_area_factor  # (P,)
        gt = gt_kpts[b, j]  # (P, K, 3)
        dist = (pred[b, a, :, 0] - gt[..., 0]).pow(2) + (pred[b, a, :, 1] - gt[..., 1]).pow(2)  # (P, K)
        scale = ((2 * sigmas).pow(2) * (area.unsqueeze(-1) + OKS_EPS)) * 2  # (P, K)
        vis = (gt[..., 2] > 0).to(gt_bboxes.dtype)
        oks = (vis * torch.exp(-dist / scale)).sum(-1) / vis.sum(-1).clamp(min=1)
        out = torch.zeros(pairs.shape, dtype=gt_bboxes.dtype, device=gt_bboxes.device)
        return out.index_put((b, j, a), oks)

    def overlaps(
        self,
        gt_bboxes: Tensor,
        pd_bboxes: Tensor,
        is_candidate: Tensor,
        class_scores: Tensor,
        extras: Mapping[str, Tensor],
    ) -> Tensor:
        """OKS for rows with a visible keypoint, the clamped CIoU otherwise; zero outside candidates."""
        box = super().overlaps(gt_bboxes, pd_bboxes, is_candidate, class_scores, extras)
        oks_pairs = is_candidate & self.row_uses_oks(extras).unsqueeze(-1)  # (B, M, A)
        oks = self.keypoint_similarity(gt_bboxes, extras, oks_pairs)
        return torch.where(oks_pairs, oks, box)
