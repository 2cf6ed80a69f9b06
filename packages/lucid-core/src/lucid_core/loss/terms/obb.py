"""Oriented-box (OBB) objective: rotated assignment, ProbIoU box loss, DFL or L1 distances, angle loss.

Every rule and constant follows ``shared/fixtures/README.md``, section "obb_loss_yolov8n.pt, obb_loss_yolo26n.pt"
("The loss (per branch)", steps 1-9); the parts not restated there (BCE class loss, DFL, top-k / conflict /
one-to-one / soft scores of the assignment, the YOLO26 end-to-end combination) are those of the detection
objective (:mod:`lucid_core.loss.detection`, whose helpers are reused here). ProbIoU: Llerena et al.,
"Gaussian Bounding Boxes and Probabilistic Intersection-over-Union for Object Detection", 2021.

Differences from detection:

- the four predicted distances (l, t, r, b) are measured in the box's own rotated frame; with the angle θ the
  decoded box is ``centre = anchor + R(θ)·((r − l)/2, (b − t)/2)``, ``w = l + r``, ``h = t + b`` (grid units);
- targets are normalised xywhr (``rboxes``); rows under 2 px in w or h are dropped before padding;
- the assigner is :class:`~lucid_core.assign.rotated.RotatedTaskAlignedAssigner`;
- box loss ``1 − ProbIoU(pred, target; floor 0.01)``; distance targets rotate the centre offset into the target's
  frame; angle loss ``exp(−ln(w_t/h_t)²/9)·sin²(2Δ')`` on the wrapped angle error;
- the classic head's angle is ``(sigmoid(raw) − 0.25)·π``, YOLO26's raw output is used as radians.

Dense formulation as in detection: every term is evaluated over the whole anchor grid on safe stand-in boxes for
background anchors and selected with ``torch.where``, so gradients stay finite without foreground.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor

from lucid_core.assign.rotated import RotatedTaskAlignedAssigner
from lucid_core.geometry.anchors import make_anchors
from lucid_core.geometry.rotated import probiou
from lucid_core.heads.obb import sigmoid_angle_radians
from lucid_core.loss.detection import (
    DFL_TARGET_MARGIN,
    BranchLoss,
    class_weight_tensor,
    classification_bce_sum,
    decode_distances,
    distribution_focal_loss,
    normalised_l1_loss,
)
from lucid_core.loss.gains import DETECTION_GAINS, branch_topk, class_weights, resolve_gains
from lucid_core.loss.targets import PaddedTargets
from lucid_core.outputs import BranchOutput, TrainOutput

__all__ = [
    "OBBLoss",
    "RotatedSizeFilter",
    "angle_loss_term",
    "decode_rotated_boxes",
    "obb_branch_loss",
    "obb_objective",
    "pack_rotated_targets",
    "rotated_box_distances",
    "rotated_size_filter",
]

SIZE_FILTER_MIN_PX = 2.0  # README constants: size_filter_min_px (rows with w·W < 2 or h·H < 2 are dropped)
PROBIOU_FLOOR_LOSS = 0.01  # README constants: probiou_floor_loss (grid units²)
ANGLE_LAMBDA = 3.0  # README constants: angle_lambda
ANGLE_LOG_EPS = 1e-9  # README constants: angle_log_eps
DEFAULT_GAINS = {**DETECTION_GAINS, "angle": 1.0}  # README meta.hyp


class RotatedSizeFilter(NamedTuple):
    """README ``size_filter``: which flat target rows survive, with their pixel sizes."""

    kept: Tensor  # (N,) bool
    w_px: Tensor  # (N,) float32 bboxes[:, 2] · W
    h_px: Tensor  # (N,) float32 bboxes[:, 3] · H


def _target_rboxes(batch: Mapping[str, Tensor]) -> Tensor:
    """Normalised xywhr rows of a batch: ``rboxes`` (collated batch) or a 5-column ``bboxes`` (fixture layout)."""
    for key in ("rboxes", "bboxes"):
        value = batch.get(key)
        if value is not None and value.ndim == 2 and value.shape[-1] == 5:
            return value
    shapes = {
        k: tuple(v.shape) for k, v in batch.items() if k in ("rboxes", "bboxes") and hasattr(v, "shape")
    }
    raise ValueError(
        "OBB target batch: needs 'rboxes' (N, 5) normalised (cx, cy, w, h, θ) — or 'bboxes' with 5 columns — "
        f"got {shapes or sorted(batch)}"
    )


def rotated_size_filter(rboxes: Tensor, imgsz_hw: tuple[int, int]) -> RotatedSizeFilter:
    """README step 2: keep rows with ``w·W ≥ 2`` and ``h·H ≥ 2`` (float32 products)."""
    height, width = imgsz_hw
    w_px = rboxes[:, 2] * width
    h_px = rboxes[:, 3] * height
    return RotatedSizeFilter((w_px >= SIZE_FILTER_MIN_PX) & (h_px >= SIZE_FILTER_MIN_PX), w_px, h_px)


def pack_rotated_targets(
    batch: Mapping[str, Tensor], batch_size: int, imgsz_hw: tuple[int, int], rows: int | None = None
) -> PaddedTargets:
    """Size-filter, then pack ``batch_idx`` (N,), ``cls`` (N, 1), normalised xywhr rows into padded pixel xywhr.

    README step 2: dropped rows do not occupy a row j; the kept rows are packed per image in order as
    ``(x·W, y·H, w·W, h·H, θ)`` (θ untouched); ``mask_gt`` = (sum of the five values > 0); M = the largest number
    of kept rows of an image (0 when none is kept). ``rows`` fixes M instead (extra rows are padding, which
    selects nothing); while compiling it is N, so the packing has static shapes and no boolean indexing.
    """
    rboxes = _target_rboxes(batch)
    if "batch_idx" not in batch or "cls" not in batch:
        raise ValueError(f"OBB target batch: needs 'batch_idx' and 'cls'; got {sorted(batch)}")
    batch_idx, cls = batch["batch_idx"], batch["cls"]
    num = rboxes.shape[0]
    if batch_idx.shape[0] != num or cls.shape[0] != num:
        raise ValueError(
            f"OBB target batch: 'batch_idx' {tuple(batch_idx.shape)}, 'cls' {tuple(cls.shape)} and the boxes "
            f"{tuple(rboxes.shape)} disagree on the number of instances"
        )
    device, dtype = rboxes.device, rboxes.dtype
    compiling = torch.compiler.is_compiling()
    image = batch_idx.to(device).long()  # (N,)
    if num > 0 and not compiling and (int(image.min()) < 0 or int(image.max()) >= batch_size):
        raise ValueError(
            f"OBB target batch: 'batch_idx' values must lie in [0, {batch_size - 1}] for a batch of {batch_size} "
            f"images, got range [{int(image.min())}, {int(image.max())}]"
        )
    kept = rotated_size_filter(rboxes, imgsz_hw).kept  # (N,)
    membership = (image.unsqueeze(1) == torch.arange(batch_size, device=device).unsqueeze(0)).long()
    membership = membership * kept.long().unsqueeze(1)  # (N, B): dropped rows belong to no image
    if rows is None:
        rows = num if compiling else (int(membership.sum(0).max()) if num > 0 else 0)
    height, width = imgsz_hw
    scale = torch.tensor([width, height, width, height], dtype=dtype, device=device)
    labels = torch.zeros((batch_size, rows, 1), dtype=dtype, device=device)
    boxes = torch.zeros((batch_size, rows, 5), dtype=dtype, device=device)
    if num > 0 and rows > 0:
        # rank of every kept row inside its image; dropped rows add zeros at a kept row's place (accumulate)
        image = image.clamp(0, batch_size - 1)
        rank = (membership.cumsum(0) - 1).gather(1, image.unsqueeze(1)).squeeze(1).clamp(0, rows - 1)
        keep = kept.to(dtype).unsqueeze(-1)
        pixels = torch.cat((rboxes[:, :4] * scale, rboxes[:, 4:]), -1)
        labels = labels.index_put((image, rank), cls.to(device, dtype).reshape(-1, 1) * keep, accumulate=True)
        boxes = boxes.index_put((image, rank), pixels * keep, accumulate=True)
    mask_gt = (boxes.sum(-1, keepdim=True) > 0).to(dtype)
    return PaddedTargets(labels, boxes, mask_gt)


def decode_rotated_boxes(distances: Tensor, theta: Tensor, anchor_points: Tensor) -> Tensor:
    """README step 1: (…, 4) rotated-frame (l, t, r, b), θ (…, 1), anchors (…, 2) → (…, 5) (cx, cy, w, h, θ)."""
    left_top, right_bottom = distances.chunk(2, -1)
    offset_x, offset_y = ((right_bottom - left_top) / 2).chunk(2, -1)
    cos, sin = torch.cos(theta), torch.sin(theta)
    centre = torch.cat((offset_x * cos - offset_y * sin, offset_x * sin + offset_y * cos), -1) + anchor_points
    return torch.cat((centre, left_top + right_bottom, theta), -1)


def rotated_box_distances(anchor_points: Tensor, rboxes: Tensor) -> Tensor:
    """README step 7: (l, t, r, b) of xywhr ``rboxes`` seen from ``anchor_points`` in the box's frame (unclamped)."""
    theta = rboxes[..., 4:5]
    cos, sin = torch.cos(theta), torch.sin(theta)
    offset = rboxes[..., :2] - anchor_points
    offset_x, offset_y = offset[..., :1], offset[..., 1:2]
    along_w = offset_x * cos + offset_y * sin
    along_h = -offset_x * sin + offset_y * cos
    half_w, half_h = rboxes[..., 2:3] / 2, rboxes[..., 3:4] / 2
    return torch.cat((half_w - along_w, half_h - along_h, half_w + along_w, half_h + along_h), -1)


def angle_loss_term(pred_theta: Tensor, target_rboxes: Tensor) -> Tensor:
    """README step 8: ``exp(−ln((w_t + 1e-9)/(h_t + 1e-9))² / λ²) · sin²(2Δ')``, Δ' = Δ − round(Δ/π)·π → (…,).

    ``pred_theta`` (…,) radians; ``target_rboxes`` (…, 5). ``round`` is half-to-even and passes no gradient, so
    dΔ'/dΔ = 1.
    """
    delta = pred_theta - target_rboxes[..., 4]
    delta = delta - torch.round(delta / torch.pi) * torch.pi
    aspect = torch.log((target_rboxes[..., 2] + ANGLE_LOG_EPS) / (target_rboxes[..., 3] + ANGLE_LOG_EPS))
    weight = torch.exp(-aspect.pow(2) / (ANGLE_LAMBDA**2))
    return weight * torch.sin(2 * delta).pow(2)


def obb_branch_loss(
    boxes: Tensor,
    scores: Tensor,
    angle: Tensor,
    level_shapes: Sequence[tuple[int, int]],
    strides: Sequence[float],
    targets: PaddedTargets,
    *,
    assigner: RotatedTaskAlignedAssigner,
    reg_max: int,
    gains: tuple[float, float, float, float] = (7.5, 0.5, 1.5, 1.0),
    cls_weights: Tensor | None = None,
) -> BranchLoss:
    """Loss of one OBB branch from its raw outputs (README ``head_outputs``) and padded xywhr ground truth.

    Args:
        boxes: (B, 4·reg_max, A) rotated-frame distance logits (reg_max > 1) or distances (reg_max 1), grid units.
        scores: (B, nc, A) class logits.
        angle: (B, 1, A) box angle θ in radians, already activated (README ``angle``).
        targets: :func:`pack_rotated_targets` output (xywhr pixels).
        gains: (box, cls, dfl|l1, angle).
        cls_weights: (C,) per-class weights of the classification term; ``None``: unweighted (the reference).

    ``details`` holds dense (B, A) per-anchor terms (``probiou``, ``weight``, ``dist_term``, ``angle_term``),
    ``target_ltrb_grid`` (B, A, 4) and ``decoded_rboxes_grid`` (B, A, 5) for checks (README ``fg_terms``).
    """
    boxes, scores, angle = boxes.float(), scores.float(), angle.float()
    batch = scores.shape[0]
    imgsz_hw = (int(level_shapes[0][0] * strides[0]), int(level_shapes[0][1] * strides[0]))
    anchor_grid, stride_tensor = make_anchors(level_shapes, strides, device=scores.device)
    if anchor_grid.shape[0] != scores.shape[2] or angle.shape != (batch, 1, scores.shape[2]):
        raise ValueError(
            f"OBB loss: level shapes {list(level_shapes)} give {anchor_grid.shape[0]} anchors; scores have "
            f"{tuple(scores.shape)}, angle {tuple(angle.shape)} (expected (B, 1, A))"
        )
    if targets.gt_bboxes.shape[-1] != 5:
        raise ValueError(f"OBB loss: targets must be xywhr (B, M, 5), got {tuple(targets.gt_bboxes.shape)}")
    pred_scores = scores.permute(0, 2, 1).contiguous()  # (B, A, C)
    pred_theta = angle.permute(0, 2, 1)  # (B, A, 1)
    pred_dist, dfl_logits = decode_distances(boxes, reg_max)  # (B, A, 4) rotated frame
    pred_rboxes = decode_rotated_boxes(pred_dist, pred_theta, anchor_grid)  # (B, A, 5) grid units

    detached = pred_rboxes.detach()
    assignment = assigner(
        pred_scores.detach().sigmoid(),
        torch.cat((detached[..., :4] * stride_tensor, detached[..., 4:]), -1).to(targets.gt_bboxes.dtype),
        anchor_grid * stride_tensor,
        targets.gt_labels,
        targets.gt_bboxes,
        targets.mask_gt,
    )
    target_scores = assignment.target_scores
    fg_mask = assignment.fg_mask
    fg = fg_mask.unsqueeze(-1)
    target_scores_sum = target_scores.sum().clamp(min=1)

    cls_loss = classification_bce_sum(pred_scores, target_scores, cls_weights) / target_scores_sum

    weight = target_scores.sum(-1)  # (B, A): target_scores_at_label, 0 on background
    target_px = assignment.target_bboxes
    target_grid = torch.cat((target_px[..., :4] / stride_tensor, target_px[..., 4:]), -1)
    unit_box = torch.cat(
        (anchor_grid, torch.ones_like(anchor_grid), torch.zeros_like(anchor_grid[:, :1])), -1
    ).expand_as(pred_rboxes)
    safe_pred = torch.where(fg, pred_rboxes, unit_box)
    safe_target = torch.where(fg, target_grid, unit_box)
    zero = torch.zeros_like(weight)

    box_iou = probiou(safe_pred, safe_target, pairwise=False, floor=PROBIOU_FLOOR_LOSS)  # (B, A)
    box_loss = torch.where(fg_mask, (1.0 - box_iou) * weight, zero).sum() / target_scores_sum

    target_ltrb = rotated_box_distances(anchor_grid, safe_target)  # (B, A, 4) grid units, unclamped
    if dfl_logits is not None:
        target_ltrb = target_ltrb.clamp(0, reg_max - 1 - DFL_TARGET_MARGIN)
        dist_term = distribution_focal_loss(dfl_logits, target_ltrb)
    else:
        dist_term = normalised_l1_loss(pred_dist * stride_tensor, target_ltrb * stride_tensor, imgsz_hw)
    dist_loss = torch.where(fg_mask, dist_term * weight, zero).sum() / target_scores_sum

    angle_term = angle_loss_term(safe_pred[..., 4], safe_target)
    angle_loss = torch.where(fg_mask, angle_term * weight, zero).sum() / target_scores_sum

    loss = torch.stack(
        (box_loss * gains[0], cls_loss * gains[1], dist_loss * gains[2], angle_loss * gains[3])
    )
    loss_vector_times_bs = loss * batch
    details = {
        "probiou": box_iou.detach(),
        "weight": weight,
        "dist_term": dist_term.detach(),
        "angle_term": angle_term.detach(),
        "target_ltrb_grid": target_ltrb.detach(),
        "decoded_rboxes_grid": detached,
    }
    return BranchLoss(
        loss_vector_times_bs,
        loss.detach(),
        loss_vector_times_bs.sum(),
        assignment,
        target_scores_sum,
        details,
    )


class OBBLoss:
    """OBB branch objective (:class:`~lucid_core.loss.objective.BranchObjective`) for one head branch.

    Args:
        num_classes, reg_max, strides: the model's.
        box, cls, dfl, angle: gains (reference defaults 7.5, 0.5, 1.5, 1.0; ``dfl`` also weighs YOLO26's L1).
        topk, topk2, alpha, beta: assigner constants (one-to-many 10/10, YOLO26 one-to-one 7/1).
        angle_sigmoid: the branch's ``extras["angle"]`` is the classic head's logit, turned into radians with
            ``(sigmoid − 0.25)·π``; ``False`` for YOLO26, whose raw output is the angle.
        cls_weights: one weight per class of the classification term (``None``: unweighted, the reference).
    """

    def __init__(
        self,
        num_classes: int,
        reg_max: int,
        strides: Sequence[float],
        *,
        box: float = 7.5,
        cls: float = 0.5,
        dfl: float = 1.5,
        angle: float = 1.0,
        topk: int = 10,
        topk2: int | None = None,
        alpha: float = 0.5,
        beta: float = 6.0,
        angle_sigmoid: bool = True,
        cls_weights: Sequence[float] | None = None,
    ) -> None:
        if reg_max < 1:
            raise ValueError(f"OBBLoss: reg_max must be >= 1, got {reg_max}")
        self.num_classes = num_classes
        self.reg_max = reg_max
        self.strides = tuple(float(s) for s in strides)
        self.gains = (float(box), float(cls), float(dfl), float(angle))
        self.cls_weights = class_weight_tensor(cls_weights)
        self.angle_sigmoid = angle_sigmoid
        stride_val = self.strides[1] if len(self.strides) > 1 else self.strides[0]  # README stride_val 16
        self.assigner = RotatedTaskAlignedAssigner(
            topk=topk,
            num_classes=num_classes,
            alpha=alpha,
            beta=beta,
            topk2=topk2,
            small_target_stride=stride_val,
        )
        self.loss_names: tuple[str, ...] = (
            "box_loss",
            "cls_loss",
            "dfl_loss" if reg_max > 1 else "l1_loss",
            "angle_loss",
        )

    def pack(self, batch: Mapping[str, Any], batch_size: int, imgsz_hw: tuple[int, int]) -> PaddedTargets:
        """Size-filtered padded xywhr ground truth (:func:`pack_rotated_targets`; M = N while compiling)."""
        return pack_rotated_targets(batch, batch_size, imgsz_hw)

    def angle_radians(self, raw: Tensor) -> Tensor:
        """The angle the loss consumes from the branch's raw ``angle`` output."""
        return sigmoid_angle_radians(raw) if self.angle_sigmoid else raw

    def branch_loss(
        self,
        output: TrainOutput,
        branch: BranchOutput,
        targets: PaddedTargets,
        batch: Mapping[str, Any],
        *,
        one2one: bool = False,
    ) -> BranchLoss:
        """Loss of ``branch`` (its ``extras["angle"]`` is required) against packed ``targets``."""
        if "angle" not in branch.extras:
            raise ValueError(
                f"OBB loss: the branch output has no 'angle' extra (got {sorted(branch.extras)}); "
                "is the model an OBB model?"
            )
        return obb_branch_loss(
            branch.boxes,
            branch.scores,
            self.angle_radians(branch.extras["angle"]),
            list(output.level_shapes),
            self.strides,
            targets,
            assigner=self.assigner,
            reg_max=self.reg_max,
            gains=self.gains,
            cls_weights=self.cls_weights,
        )


def _angle_sigmoid(model: Any) -> bool:
    """The head's angle activation; a stand-in without ``head.angle_sigmoid``: classic unless end-to-end."""
    flag = getattr(getattr(model, "head", None), "angle_sigmoid", None)
    return bool(flag) if flag is not None else not bool(getattr(model, "end2end", False))


def obb_objective(
    model: Any,
    *,
    gains: Mapping[str, float] | None = None,
    one2one: bool = False,
    topk: int = 10,
    alpha: float = 0.5,
    beta: float = 6.0,
    o2o_topk: int = 7,
    o2o_topk2: int = 1,
    **_unused: Any,
) -> OBBLoss:
    """Task-table factory (``lucid_core.tasks``, row ``obb``): the OBB objective of one branch of ``model``.

    ``gains`` may hold ``box``, ``cls``, ``dfl``, ``angle`` (reference defaults 7.5, 0.5, 1.5, 1.0) and
    ``cls_weights`` (other keys
    are ignored). The one-to-one branch uses top-``o2o_topk`` then ``o2o_topk2`` anchors per ground truth (README
    ``assigner_params``). Other task options are accepted and ignored.
    """
    g = resolve_gains(DEFAULT_GAINS, gains)
    k, k2 = branch_topk(one2one, topk, o2o_topk, o2o_topk2)
    return OBBLoss(
        int(model.num_classes),
        int(model.reg_max),
        tuple(float(s) for s in model.strides),
        box=g["box"],
        cls=g["cls"],
        dfl=g["dfl"],
        angle=g["angle"],
        topk=k,
        topk2=k2,
        alpha=alpha,
        beta=beta,
        angle_sigmoid=_angle_sigmoid(model),
        cls_weights=class_weights(gains, int(model.num_classes)),
    )
