"""Detection objective: task-aligned assignment, BCE classification, CIoU box loss, DFL or L1 distances.

Every rule and constant follows ``shared/fixtures/README.md``, section "detection_loss_*.pt" ("The loss (per
branch, as verified bit-exactly)"); the terms are the classification/box/distribution losses of YOLOv8-style
anchor-free detectors (DFL: Li et al., "Generalized Focal Loss", NeurIPS 2020; CIoU: Zheng et al., AAAI 2020).

Dense formulation: every term is evaluated over the whole anchor grid and positives are selected with
``torch.where`` — no boolean-mask gathers and no ``nonzero`` — so one step traces as a single graph and
gradients stay finite for images without ground truth and for degenerate predicted boxes on background anchors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from lucid_core.assign import Assignment, TaskAlignedAssigner
from lucid_core.geometry.anchors import make_anchors
from lucid_core.geometry.iou import bbox_ciou
from lucid_core.loss.gains import DETECTION_GAINS, branch_topk, class_weights, resolve_gains
from lucid_core.loss.targets import PaddedTargets, pack_targets
from lucid_core.outputs import BranchOutput, TrainOutput

DFL_TARGET_MARGIN = 0.01  # DFL targets are clamped to [0, reg_max - 1 - 0.01] (fixture README, step 6)


class BranchLoss(NamedTuple):
    """Loss of one head branch (fixture "Branch record")."""

    loss_vector_times_bs: Tensor  # (3,) [box, cls, dfl|l1] with gains, × batch size
    loss_items: Tensor  # (3,) same without the batch-size factor, detached
    total: Tensor  # () sum of loss_vector_times_bs (what backward() is called on)
    assignment: Assignment
    target_scores_sum: Tensor  # () S = max(Σ target_scores, 1)
    details: Mapping[str, Any] | None = None  # task terms' intermediates (debugging / fixture checks)


def decode_distances(boxes: Tensor, reg_max: int) -> tuple[Tensor, Tensor | None]:
    """Branch ``boxes`` (B, 4·reg_max, A) -> (distances (B, A, 4) in grid units, DFL logits (B, A, 4, reg_max) | None)."""
    batch, channels, num_anchors = boxes.shape
    if channels != 4 * reg_max:
        raise ValueError(
            f"detection loss: boxes have {channels} channels, expected 4·reg_max = {4 * reg_max}"
        )
    per_anchor = boxes.permute(0, 2, 1)
    if reg_max == 1:
        return per_anchor, None
    logits = per_anchor.reshape(batch, num_anchors, 4, reg_max)
    project = torch.arange(reg_max, dtype=boxes.dtype, device=boxes.device)
    return logits.softmax(3).matmul(project), logits


def distances_to_boxes(distances: Tensor, anchor_points: Tensor) -> Tensor:
    """(left, top, right, bottom) distances from anchor points -> xyxy, same units."""
    left_top, right_bottom = distances.chunk(2, -1)
    return torch.cat((anchor_points - left_top, anchor_points + right_bottom), -1)


def boxes_to_distances(anchor_points: Tensor, boxes: Tensor) -> Tensor:
    """xyxy boxes -> (left, top, right, bottom) distances from the anchor points, same units."""
    top_left, bottom_right = boxes.chunk(2, -1)
    return torch.cat((anchor_points - top_left, bottom_right - anchor_points), -1)


def distribution_focal_loss(logits: Tensor, target: Tensor) -> Tensor:
    """DFL (GFL paper, eq. 6): logits (..., 4, reg_max), target distances (..., 4) in [0, reg_max - 1) -> (...,).

    ``-[(i + 1 - t)·log_softmax_i + (t - i)·log_softmax_{i+1}]`` with i = floor(t), averaged over the 4 sides.
    """
    left = target.long()
    right = left + 1
    weight_left = right - target
    weight_right = 1 - weight_left
    log_probs = logits.log_softmax(-1)
    nll_left = -log_probs.gather(-1, left.unsqueeze(-1)).squeeze(-1)
    nll_right = -log_probs.gather(-1, right.unsqueeze(-1)).squeeze(-1)
    return (nll_left * weight_left + nll_right * weight_right).mean(-1)


def normalised_l1_loss(pred_px: Tensor, target_px: Tensor, imgsz_hw: tuple[int, int]) -> Tensor:
    """Mean over the 4 sides of |pred − target| with distances divided by (W, H, W, H) -> (...,)."""
    height, width = imgsz_hw
    scale = torch.tensor([width, height, width, height], dtype=pred_px.dtype, device=pred_px.device)
    return F.l1_loss(pred_px / scale, target_px / scale, reduction="none").mean(-1)


def classification_bce_sum(
    pred_scores: Tensor, target_scores: Tensor, cls_weights: Tensor | None = None
) -> Tensor:
    """Σ of the binary cross-entropy of the class logits (B, A, C) against the soft targets; with ``cls_weights``
    (C,) each class's column is multiplied by its weight first (docs/TRAINING.md, "Class weighting")."""
    bce = F.binary_cross_entropy_with_logits(pred_scores, target_scores, reduction="none")
    if cls_weights is not None:
        bce = bce * cls_weights.to(device=bce.device, dtype=bce.dtype)
    return bce.sum()


def class_weight_tensor(weights: Sequence[float] | None) -> Tensor | None:
    """``weights`` (one per class) as a float32 tensor, ``None`` when unweighted."""
    return None if weights is None else torch.tensor([float(w) for w in weights], dtype=torch.float32)


def detection_branch_loss(
    boxes: Tensor,
    scores: Tensor,
    level_shapes: Sequence[tuple[int, int]],
    strides: Sequence[float],
    targets: PaddedTargets,
    *,
    assigner: TaskAlignedAssigner,
    reg_max: int,
    gains: tuple[float, float, float] = (7.5, 0.5, 1.5),
    assigner_extras: Mapping[str, Tensor] | None = None,
    cls_weights: Tensor | None = None,
) -> BranchLoss:
    """Loss of one branch from its raw outputs (fixture ``head_outputs``) and padded ground truth.

    Args:
        boxes: (B, 4·reg_max, A) distance logits (reg_max > 1) or distances (reg_max 1), grid units.
        scores: (B, nc, A) class logits.
        level_shapes: (h_l, w_l) per level; strides: per level. The image size is (h_0·s_0, w_0·s_0).
        targets: padded ground truth in pixels (:func:`pack_targets`).
        gains: (box, cls, dfl|l1).
        assigner_extras: per-task tensors handed to the assigner's ``extras`` (e.g. the mask-aware assigner's
            coefficients, prototypes and ground-truth masks); ``None`` for detection.
        cls_weights: (C,) per-class weights of the classification term (:func:`classification_bce_sum`);
            ``None``: unweighted (the reference).
    """
    boxes = boxes.float()
    scores = scores.float()
    batch = scores.shape[0]
    imgsz_hw = (int(level_shapes[0][0] * strides[0]), int(level_shapes[0][1] * strides[0]))
    anchor_grid, stride_tensor = make_anchors(level_shapes, strides, device=scores.device)
    if anchor_grid.shape[0] != scores.shape[2]:
        raise ValueError(
            f"detection loss: level shapes {list(level_shapes)} give {anchor_grid.shape[0]} anchors, "
            f"scores have {scores.shape[2]}"
        )
    pred_scores = scores.permute(0, 2, 1).contiguous()  # (B, A, C)
    pred_dist, dfl_logits = decode_distances(boxes, reg_max)  # (B, A, 4)
    pred_boxes = distances_to_boxes(pred_dist, anchor_grid)  # (B, A, 4) grid units

    assignment = assigner(
        pred_scores.detach().sigmoid(),
        (pred_boxes.detach() * stride_tensor).to(targets.gt_bboxes.dtype),
        anchor_grid * stride_tensor,
        targets.gt_labels,
        targets.gt_bboxes,
        targets.mask_gt,
        assigner_extras,
    )
    target_scores = assignment.target_scores
    fg = assignment.fg_mask.unsqueeze(-1)  # (B, A, 1)
    target_scores_sum = target_scores.sum().clamp(min=1)

    cls_loss = classification_bce_sum(pred_scores, target_scores, cls_weights) / target_scores_sum

    # Foreground-only terms, evaluated densely on safe stand-in boxes for background anchors.
    weight = target_scores.sum(-1)  # (B, A): the assigned soft score, 0 on background
    target_grid = assignment.target_bboxes / stride_tensor
    unit_box = torch.cat((anchor_grid - 0.5, anchor_grid + 0.5), -1).expand_as(pred_boxes)
    safe_pred = torch.where(fg, pred_boxes, unit_box)
    safe_target = torch.where(fg, target_grid, unit_box)
    ciou = bbox_ciou(safe_pred, safe_target)
    zero = torch.zeros_like(weight)
    box_loss = torch.where(assignment.fg_mask, (1.0 - ciou) * weight, zero).sum() / target_scores_sum

    if dfl_logits is not None:
        target_dist = boxes_to_distances(anchor_grid, target_grid).clamp(0, reg_max - 1 - DFL_TARGET_MARGIN)
        dist_loss = distribution_focal_loss(dfl_logits, target_dist)
    else:
        pred_px = pred_dist * stride_tensor
        target_px = boxes_to_distances(anchor_grid, target_grid) * stride_tensor
        dist_loss = normalised_l1_loss(pred_px, target_px, imgsz_hw)
    dist_loss = torch.where(assignment.fg_mask, dist_loss * weight, zero).sum() / target_scores_sum

    loss = torch.stack((box_loss * gains[0], cls_loss * gains[1], dist_loss * gains[2]))
    loss_vector_times_bs = loss * batch
    return BranchLoss(
        loss_vector_times_bs, loss.detach(), loss_vector_times_bs.sum(), assignment, target_scores_sum
    )


def _small_target_stride(strides: Sequence[float]) -> float:
    """The reference widens small targets to its second stride (the first if there is only one)."""
    return float(strides[1] if len(strides) > 1 else strides[0])


class DetectionLoss:
    """One-to-many detection objective (YOLOv8 / YOLO11, and YOLO26's one-to-many branch).

    ``loss(output, batch) -> (total, loss_items)``: ``total`` is the scalar to call ``backward()`` on (the loss
    vector times the batch size, summed — the reference's batch-size convention), ``loss_items`` the detached
    per-term losses (box, cls, dfl|l1) with gains applied, not times the batch size. ``cls_weights``: one weight
    per class of the classification term (``None``, the default: unweighted, as the reference).
    """

    def __init__(
        self,
        num_classes: int,
        reg_max: int,
        strides: Sequence[float],
        box: float = 7.5,
        cls: float = 0.5,
        dfl: float = 1.5,
        topk: int = 10,
        alpha: float = 0.5,
        beta: float = 6.0,
        small_target: bool = True,
        topk2: int | None = None,
        cls_weights: Sequence[float] | None = None,
    ) -> None:
        if reg_max < 1:
            raise ValueError(f"DetectionLoss: reg_max must be >= 1, got {reg_max}")
        self.num_classes = num_classes
        self.reg_max = reg_max
        self.strides = tuple(float(s) for s in strides)
        self.gains = (float(box), float(cls), float(dfl))
        self.cls_weights = class_weight_tensor(cls_weights)  # None: unweighted (the reference)
        self.assigner = TaskAlignedAssigner(
            topk=topk,
            num_classes=num_classes,
            alpha=alpha,
            beta=beta,
            topk2=topk2,
            small_target_stride=_small_target_stride(self.strides) if small_target else None,
        )
        self.loss_names: tuple[str, ...] = (
            "box_loss",
            "cls_loss",
            "dfl_loss" if reg_max > 1 else "l1_loss",
        )

    def pack(self, batch: Mapping[str, Tensor], batch_size: int, imgsz_hw: tuple[int, int]) -> PaddedTargets:
        """Padded ground truth; M = per-image maximum in eager mode, N (static) while compiling."""
        rows = batch["batch_idx"].shape[0] if torch.compiler.is_compiling() else None
        return pack_targets(batch, batch_size, imgsz_hw, rows=rows)

    def branch(
        self, branch: BranchOutput, level_shapes: Sequence[tuple[int, int]], targets: PaddedTargets
    ) -> BranchLoss:
        """Loss of one branch against already packed targets."""
        return detection_branch_loss(
            branch.boxes,
            branch.scores,
            level_shapes,
            self.strides,
            targets,
            assigner=self.assigner,
            reg_max=self.reg_max,
            gains=self.gains,
            cls_weights=self.cls_weights,
        )

    def branch_loss(
        self,
        output: TrainOutput,
        branch: BranchOutput,
        targets: PaddedTargets,
        batch: Mapping[str, Any],
        *,
        one2one: bool = False,
    ) -> BranchLoss:
        """:class:`~lucid_core.loss.objective.BranchObjective` entry point: detection needs only the branch."""
        return self.branch(branch, list(output.level_shapes), targets)

    def __call__(self, output: TrainOutput, batch: Mapping[str, Tensor]) -> tuple[Tensor, Tensor]:
        level_shapes = list(output.level_shapes)
        targets = self.pack(batch, output.one2many.scores.shape[0], _imgsz(level_shapes, self.strides))
        result = self.branch(output.one2many, level_shapes, targets)
        return result.total, result.loss_items


def detection_objective(
    model: Any,
    *,
    gains: Mapping[str, float] | None = None,
    one2one: bool = False,
    topk: int = 10,
    alpha: float = 0.5,
    beta: float = 6.0,
    o2o_topk: int = 7,
    o2o_topk2: int = 1,
) -> DetectionLoss:
    """Task-table factory (``lucid_core.tasks``): the detection objective of one branch of ``model``.

    ``gains`` may hold ``box``, ``cls``, ``dfl`` (reference defaults 7.5, 0.5, 1.5) and ``cls_weights``
    (:func:`lucid_core.loss.gains.class_weights`); other keys are ignored. The one-to-one branch (``one2one``)
    uses top-``o2o_topk`` then ``o2o_topk2`` anchors per ground truth (fixture ``assigner_params``).
    """
    g = resolve_gains(DETECTION_GAINS, gains)
    k, k2 = branch_topk(one2one, topk, o2o_topk, o2o_topk2)
    return DetectionLoss(
        int(model.num_classes),
        int(model.reg_max),
        tuple(float(s) for s in model.strides),
        box=g["box"],
        cls=g["cls"],
        dfl=g["dfl"],
        topk=k,
        topk2=k2,
        alpha=alpha,
        beta=beta,
        cls_weights=class_weights(gains, int(model.num_classes)),
    )


def _imgsz(level_shapes: Sequence[tuple[int, int]], strides: Sequence[float]) -> tuple[int, int]:
    return int(level_shapes[0][0] * strides[0]), int(level_shapes[0][1] * strides[0])
