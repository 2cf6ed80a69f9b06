"""Pose (keypoint) objective: detection terms + OKS keypoint loss, keypoint objectness and YOLO26's RLE term.

Every rule and constant follows ``shared/fixtures/README.md``, section "pose_loss_yolo11n-pose.pt,
pose_loss_yolo26n-pose.pt" ("The loss, per branch (as verified bit-exactly)"), steps 1-11:

- detection part (box CIoU, BCE cls, DFL | L1) from :func:`lucid_core.loss.detection.detection_branch_loss`;
  YOLO11/YOLOv8 use the plain task-aligned assigner, YOLO26 the keypoint-aware one
  (:class:`lucid_core.assign.keypoint_aware.KeypointAwareAssigner`: level gate + OKS overlaps);
- keypoint decode in grid units: classic ``2·raw + (anchor − 0.5)``, YOLO26 ``raw + anchor``;
- ``pose`` = mean over foreground anchors and keypoints of ``K / (Σ m + 1e-9) · (1 − exp(−e)) · m`` with
  ``e = d / ((2σ)²·(area + 1e-9)·2)`` (an OKS-style loss; COCO keypoint sigmas, Lin et al. 2014);
- ``kobj`` = BCE of the visibility logit against "labelled" (``nd = 3`` only);
- ``rle`` (YOLO26, training outputs with sigma logits): Residual Log-likelihood Estimation (Li et al., ICCV 2021)
  with the head's RealNVP flow (:class:`lucid_core.nn.flow.RealNVP`), clamped at 0;
- gains pose 12, kobj 1, rle 1 next to the detection gains; vector
  ``[box, pose, kobj, cls, dfl|l1 (, rle)]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from lucid_core.assign import TaskAlignedAssigner
from lucid_core.assign.keypoint_aware import KeypointAwareAssigner
from lucid_core.geometry.anchors import make_anchors
from lucid_core.loss.detection import BranchLoss, class_weight_tensor, detection_branch_loss
from lucid_core.loss.gains import DETECTION_GAINS, branch_topk, class_weights, resolve_gains
from lucid_core.loss.targets import PaddedTargets, pack_targets
from lucid_core.nn.flow import RealNVP
from lucid_core.outputs import BranchOutput, TrainOutput

POSE_GAINS: dict[str, float] = {**DETECTION_GAINS, "pose": 12.0, "kobj": 1.0, "rle": 1.0}  # README meta.hyp

__all__ = [
    "COCO_KEYPOINT_SIGMAS",
    "COCO_RLE_WEIGHTS",
    "PoseLoss",
    "PoseTargets",
    "decode_keypoints",
    "default_keypoint_sigmas",
    "pack_pose_targets",
    "pose_objective",
    "resolve_keypoint_sigmas",
    "rle_keypoint_weights",
    "validate_keypoint_sigmas",
]

# COCO keypoint OKS sigmas ×10 (fixture README step 5; COCO keypoint evaluation): the one home of these values;
# the loss divides them by 10 in float32, the COCO evaluator (lucid_train.eval) in float64 as pycocotools does.
COCO_KEYPOINT_SIGMAS_X10 = (
    0.26,
    0.25,
    0.25,
    0.35,
    0.35,
    0.79,
    0.79,
    0.72,
    0.72,
    0.62,
    0.62,
    1.07,
    1.07,
    0.87,
    0.87,
    0.89,
    0.89,
)
COCO_KEYPOINT_SIGMAS: tuple[float, ...] = tuple(
    float(v) for v in (torch.tensor(COCO_KEYPOINT_SIGMAS_X10, dtype=torch.float32) / 10).tolist()
)
# RLE per-keypoint weights for COCO's 17 keypoints: elbows/knees 1.2, wrists/ankles 1.5 (fixture step 7.4).
COCO_RLE_WEIGHTS: tuple[float, ...] = (1, 1, 1, 1, 1, 1, 1, 1.2, 1.2, 1.5, 1.5, 1, 1, 1.2, 1.2, 1.5, 1.5)
COCO_KPT_SHAPE = (17, 3)

AREA_EPS = 1e-9  # in the OKS scale (fixture step 5)
COUNT_EPS = 1e-9  # in K / (Σ m + eps) (step 5)
SIGMA_EPS = 1e-9  # in ε = error / (σ + eps) (step 7.2)
RLE_ERROR_CLAMP = 100.0  # ε is clamped to [−100, 100] (step 7.3)
FLOAT32_TINY = 1.17549435e-38  # σ floor (step 7.2)


def default_keypoint_sigmas(kpt_shape: Sequence[int]) -> Tensor:
    """README step 5 defaults: COCO's sigmas for ``kpt_shape`` exactly (17, 3), otherwise ``ones(K) / K``
    (this fallback also applies to (17, 2))."""
    num_kpts, dims = int(kpt_shape[0]), int(kpt_shape[1])
    if (num_kpts, dims) == COCO_KPT_SHAPE:
        return torch.tensor(COCO_KEYPOINT_SIGMAS_X10, dtype=torch.float32) / 10
    return torch.ones(num_kpts, dtype=torch.float32) / num_kpts


def validate_keypoint_sigmas(values: Any, num_keypoints: int, source: str = "sigmas") -> Tensor:
    """(K,) float32 from ``values``: exactly ``num_keypoints`` finite positive numbers, else a clear error
    naming ``source`` (e.g. the dataset YAML and its ``kpt_sigmas`` field)."""
    try:
        sigmas = torch.as_tensor(values, dtype=torch.float32).flatten()
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"{source}: keypoint sigmas must be a list of numbers, got {values!r} ({err})"
        ) from None
    listed = [round(float(v), 6) for v in sigmas.tolist()]
    if sigmas.numel() != num_keypoints:
        raise ValueError(
            f"{source}: {sigmas.numel()} keypoint sigmas given for {num_keypoints} keypoints (kpt_shape); "
            f"give exactly one positive value per keypoint, got {listed}"
        )
    if not bool(torch.isfinite(sigmas).all()) or not bool((sigmas > 0).all()):
        raise ValueError(f"{source}: keypoint sigmas must all be finite and > 0, got {listed}")
    return sigmas


def resolve_keypoint_sigmas(kpt_shape: Sequence[int], sigmas: Any | None = None) -> Tensor:
    """The OKS sigmas of the loss (and the metric): the dataset's own when given (validated), else the README
    defaults (:func:`default_keypoint_sigmas`)."""
    if sigmas is None:
        return default_keypoint_sigmas(kpt_shape)
    return validate_keypoint_sigmas(sigmas, int(kpt_shape[0]))


def rle_keypoint_weights(kpt_shape: Sequence[int]) -> Tensor:
    """(K,) RLE weights: COCO's for (17, 3), otherwise 1 (README step 7.4)."""
    if (int(kpt_shape[0]), int(kpt_shape[1])) == COCO_KPT_SHAPE:
        return torch.tensor(COCO_RLE_WEIGHTS, dtype=torch.float32)
    return torch.ones(int(kpt_shape[0]), dtype=torch.float32)


class PoseTargets(NamedTuple):
    """Padded ground truth of a pose batch."""

    boxes: PaddedTargets  # labels, xyxy pixel boxes, mask (detection packing)
    keypoints: Tensor  # (B, M, K, 3) x, y pixels and the v flag; zero rows for padding


def pack_pose_targets(
    batch: Mapping[str, Tensor],
    batch_size: int,
    imgsz_hw: tuple[int, int],
    num_keypoints: int,
    rows: int | None = None,
) -> PoseTargets:
    """Boxes as :func:`pack_targets`; ``keypoints`` (N, K, 3|2) normalised -> (B, M, K, 3) pixels in the same
    rows (``x·W``, ``y·H``, v unchanged; a 2-D layout gets v = 1 for every keypoint; README "Padded GT
    keypoints")."""
    boxes = pack_targets(batch, batch_size, imgsz_hw, rows=rows)
    num, m = batch["batch_idx"].shape[0], boxes.gt_bboxes.shape[1]
    device, dtype = boxes.gt_bboxes.device, boxes.gt_bboxes.dtype
    out = torch.zeros((batch_size, m, num_keypoints, 3), dtype=dtype, device=device)
    if num == 0 or m == 0:
        return PoseTargets(boxes, out)
    if "keypoints" not in batch:
        raise KeyError(f"pose targets: the batch has no 'keypoints' (N, K, 3); got keys {sorted(batch)}")
    kpts = batch["keypoints"].to(device=device, dtype=dtype)
    if (
        kpts.ndim != 3
        or kpts.shape[0] != num
        or kpts.shape[1] != num_keypoints
        or kpts.shape[2] not in (2, 3)
    ):
        raise ValueError(
            f"pose targets: 'keypoints' must be (N={num}, K={num_keypoints}, 3 or 2), got {tuple(kpts.shape)}"
        )
    if kpts.shape[2] == 2:
        kpts = torch.cat((kpts, torch.ones_like(kpts[..., :1])), -1)
    height, width = imgsz_hw
    scaled = torch.stack((kpts[..., 0] * width, kpts[..., 1] * height, kpts[..., 2]), -1)
    image = batch["batch_idx"].to(device).long()
    membership = (image.unsqueeze(1) == torch.arange(batch_size, device=device).unsqueeze(0)).long()
    rank = (membership.cumsum(0) - 1).gather(1, image.clamp(0, batch_size - 1).unsqueeze(1)).squeeze(1)
    return PoseTargets(boxes, out.index_put((image, rank), scaled))


def decode_keypoints(
    kpts: Tensor,
    anchor_grid: Tensor,
    kpt_shape: Sequence[int],
    *,
    classic: bool,
    kpt_sigma: Tensor | None = None,
) -> Tensor:
    """Raw keypoints (B, K·nd, A) [+ sigma logits (B, 2K, A)] -> (B, A, K, nd [+ 2]) in grid units (README step 2).

    Classic (YOLOv8/YOLO11): ``2·raw + (anchor − 0.5)``; YOLO26: ``raw + anchor``. Visibility and sigma logits
    are left untouched.
    """
    num_kpts, dims = int(kpt_shape[0]), int(kpt_shape[1])
    batch, channels, num_anchors = kpts.shape
    if channels != num_kpts * dims:
        raise ValueError(f"pose loss: keypoints have {channels} channels, expected K·nd = {num_kpts * dims}")
    view = kpts.permute(0, 2, 1).reshape(batch, num_anchors, num_kpts, dims)
    if kpt_sigma is not None:
        if kpt_sigma.shape != (batch, 2 * num_kpts, num_anchors):
            raise ValueError(
                f"pose loss: kpt_sigma must be (B, 2K={2 * num_kpts}, A), got {tuple(kpt_sigma.shape)}"
            )
        view = torch.cat((view, kpt_sigma.permute(0, 2, 1).reshape(batch, num_anchors, num_kpts, 2)), -1)
    anchors = anchor_grid.view(1, num_anchors, 1, 2)
    xy = view[..., :2] * 2.0 + (anchors - 0.5) if classic else view[..., :2] + anchors
    return torch.cat((xy, view[..., 2:]), -1)


class PoseLoss:
    """Pose objective of one head branch (:class:`~lucid_core.loss.objective.BranchObjective`).

    Args:
        num_classes, reg_max, strides: as the model.
        kpt_shape: (K, nd) of the head.
        sigmas: (K,) OKS sigmas (:func:`resolve_keypoint_sigmas`).
        gains: box, pose, kobj, cls, dfl (also the L1 gain), rle.
        keypoint_aware: YOLO26 (keypoint decode without ×2, keypoint-aware assignment, RLE).
        flow: the head's RealNVP (YOLO26) — its parameters are trained through the RLE term.
        assigner: the branch's assigner.
        cls_weights: one weight per class of the classification term (``None``: unweighted, the reference).
    """

    def __init__(
        self,
        num_classes: int,
        reg_max: int,
        strides: Sequence[float],
        kpt_shape: Sequence[int],
        sigmas: Tensor,
        *,
        gains: Mapping[str, float],
        keypoint_aware: bool,
        assigner: TaskAlignedAssigner,
        flow: RealNVP | None = None,
        cls_weights: Sequence[float] | None = None,
    ) -> None:
        self.num_classes = int(num_classes)
        self.reg_max = int(reg_max)
        self.strides = tuple(float(s) for s in strides)
        self.kpt_shape = (int(kpt_shape[0]), int(kpt_shape[1]))
        if self.kpt_shape[1] not in (2, 3):
            raise ValueError(f"pose loss: kpt_shape must be (K, 2 or 3), got {tuple(kpt_shape)}")
        self.sigmas = validate_keypoint_sigmas(sigmas, self.kpt_shape[0])
        self.rle_weights = rle_keypoint_weights(self.kpt_shape)
        self.gains = {k: float(v) for k, v in gains.items()}
        self.cls_weights = class_weight_tensor(cls_weights)
        self.keypoint_aware = bool(keypoint_aware)
        self.assigner = assigner
        self.flow = flow
        names = [
            "box_loss",
            "pose_loss",
            "kobj_loss",
            "cls_loss",
            "dfl_loss" if self.reg_max > 1 else "l1_loss",
        ]
        if self.keypoint_aware:
            names.append("rle_loss")
        self.loss_names: tuple[str, ...] = tuple(names)

    def pack(self, batch: Mapping[str, Any], batch_size: int, imgsz_hw: tuple[int, int]) -> PoseTargets:
        """Padded boxes and keypoints (M = the largest per-image instance count)."""
        return pack_pose_targets(batch, batch_size, imgsz_hw, self.kpt_shape[0])

    def branch_loss(
        self,
        output: TrainOutput,
        branch: BranchOutput,
        targets: PoseTargets,
        batch: Mapping[str, Any],
        *,
        one2one: bool = False,
    ) -> BranchLoss:
        """Seam entry point: the loss of ``branch`` (one-to-one needs nothing detached: its head ran on detached
        features and the flow is trained by both branches)."""
        return self.branch(branch, list(output.level_shapes), targets)

    def branch(
        self, branch: BranchOutput, level_shapes: Sequence[tuple[int, int]], targets: PoseTargets
    ) -> BranchLoss:
        """Loss of one branch against already packed targets; ``details`` holds the README's intermediates."""
        if "keypoints" not in branch.extras:
            raise KeyError(
                f"pose loss: the branch output has no 'keypoints'; got extras {sorted(branch.extras)}"
            )
        scores = branch.scores
        device = scores.device
        anchor_grid, stride_tensor = make_anchors(level_shapes, self.strides, device=device)
        sigma_logits = branch.extras.get("kpt_sigma") if self.keypoint_aware else None
        pred = decode_keypoints(
            branch.extras["keypoints"].float(),
            anchor_grid,
            self.kpt_shape,
            classic=not self.keypoint_aware,
            kpt_sigma=None if sigma_logits is None else sigma_logits.float(),
        )  # (B, A, K, nd [+ 2]) grid units
        extras: dict[str, Tensor] | None = None
        if self.keypoint_aware:
            extras = {
                "pred_kpts_px": pred[..., :2].detach() * stride_tensor.view(1, -1, 1, 1),
                "gt_kpts_px": targets.keypoints,
                "stride_tensor": stride_tensor,
            }
        det = detection_branch_loss(
            branch.boxes,
            scores,
            level_shapes,
            self.strides,
            targets.boxes,
            assigner=self.assigner,
            reg_max=self.reg_max,
            gains=(self.gains["box"], self.gains["cls"], self.gains["dfl"]),
            assigner_extras=extras,
            cls_weights=self.cls_weights,
        )
        assignment = det.assignment
        fg_b, fg_a = assignment.fg_mask.nonzero(as_tuple=True)  # row-major (b, a) order
        zero = pred.new_zeros(())
        pose = kobj = rle = zero
        details: dict[str, Any] = {}
        if fg_b.numel() > 0:
            stride = stride_tensor[fg_a]  # (n, 1)
            gt_idx = assignment.target_gt_idx[fg_b, fg_a].long()
            gt = targets.keypoints[fg_b, gt_idx]  # (n, K, 3) pixels
            gt = torch.cat((gt[..., :2] / stride.unsqueeze(-1), gt[..., 2:]), -1)
            box = assignment.target_bboxes[fg_b, fg_a] / stride  # (n, 4) grid units
            area = ((box[:, 2] - box[:, 0]) * (box[:, 3] - box[:, 1])).unsqueeze(-1)  # (n, 1)
            pred_fg = pred[fg_b, fg_a]  # (n, K, nd [+ 2])
            kpt_mask = gt[..., 2] != 0
            pose = self._keypoint_loss(pred_fg, gt, kpt_mask, area)
            if self.kpt_shape[1] == 3:
                kobj = F.binary_cross_entropy_with_logits(pred_fg[..., 2], kpt_mask.to(pred_fg.dtype))
            details["keypoint_terms"] = {
                "pred_kpts_grid": pred_fg.detach(),
                "gt_kpts_grid": gt,
                "kpt_mask": kpt_mask,
                "area_grid2": area,
                "pose_loss_raw": pose.detach(),
            }
            if sigma_logits is not None and bool(kpt_mask.any()):
                rle, details["rle_terms"] = self._rle_loss(pred_fg, gt, kpt_mask)
        batch_size = scores.shape[0]
        g = self.gains
        task_terms = [pose * g.get("pose", 12.0), kobj * g.get("kobj", 1.0)]
        det_vec, det_items = det.loss_vector_times_bs, det.loss_items
        vector = [det_vec[0], *(t * batch_size for t in task_terms), det_vec[1], det_vec[2]]
        items = [det_items[0], *(t.detach() for t in task_terms), det_items[1], det_items[2]]
        if self.keypoint_aware:
            rle_term = rle * g.get("rle", 1.0)
            vector.append(rle_term * batch_size)
            items.append(rle_term.detach())
        loss_vector_times_bs = torch.stack(vector)
        return BranchLoss(
            loss_vector_times_bs,
            torch.stack(items),
            loss_vector_times_bs.sum(),
            assignment,
            det.target_scores_sum,
            details,
        )

    def _keypoint_loss(self, pred: Tensor, gt: Tensor, kpt_mask: Tensor, area: Tensor) -> Tensor:
        """README step 5: mean over n·K entries of ``K / (Σ m + 1e-9) · ((1 − exp(−e))·m)``."""
        sigmas = self.sigmas.to(device=pred.device, dtype=pred.dtype)
        dist = (pred[..., 0] - gt[..., 0]).pow(2) + (pred[..., 1] - gt[..., 1]).pow(2)  # (n, K)
        exponent = dist / (((2 * sigmas).pow(2) * (area + AREA_EPS)) * 2)
        mask = kpt_mask.to(pred.dtype)
        count_factor = kpt_mask.shape[1] / (kpt_mask.sum(1, keepdim=True).to(pred.dtype) + COUNT_EPS)
        return (count_factor * ((1 - torch.exp(-exponent)) * mask)).mean()

    def _rle_loss(self, pred: Tensor, gt: Tensor, kpt_mask: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """README step 7: RLE over the labelled keypoints of the foreground anchors, clamped at 0."""
        if self.flow is None:
            raise ValueError(
                "pose loss: the RLE term needs the head's flow model (head.flow_model), got None"
            )
        dims = self.kpt_shape[1]
        _, kpt_index = kpt_mask.nonzero(as_tuple=True)  # row-major (anchor, keypoint)
        sel_pred = pred[kpt_mask]  # (V, nd + 2)
        sel_gt = gt[kpt_mask]  # (V, 3)
        sigma = sel_pred[:, dims : dims + 2].sigmoid().clamp(min=FLOAT32_TINY)
        error = (sel_pred[:, :2] - sel_gt[:, :2]) / (sigma + SIGMA_EPS)
        finite = torch.isfinite(error).all(1)
        if not bool(finite.all()):
            sigma, error, kpt_index = sigma[finite], error[finite], kpt_index[finite]
        zero = pred.new_zeros(())
        if error.shape[0] == 0:
            return zero, {}
        error = error.clamp(-RLE_ERROR_CLAMP, RLE_ERROR_CLAMP)
        weight = self.rle_weights.to(device=pred.device, dtype=pred.dtype)[kpt_index]
        log_phi = self.flow.log_prob(error)
        per_coord = (torch.log(sigma) - log_phi.unsqueeze(1)) + (torch.log(2 * sigma) + error.abs())
        rle_raw = ((per_coord * weight.unsqueeze(1)) / error.shape[0]).sum()
        rle = rle_raw.clamp(min=0)
        terms = {
            "sigma": sigma.detach(),
            "log_phi": log_phi.detach(),
            "error_clamped": error.detach(),
            "target_weight": weight,
            "rle_raw": rle_raw.detach(),
            "rle_before_clamp": rle_raw.detach(),
        }
        return rle, terms


def pose_objective(
    model: Any,
    *,
    gains: Mapping[str, float] | None = None,
    one2one: bool = False,
    topk: int = 10,
    alpha: float = 0.5,
    beta: float = 6.0,
    sigmas: Any | None = None,
    o2o_topk: int = 7,
    o2o_topk2: int = 1,
    level_range: tuple[float, float] = (2.0, 12.0),
    oks_area_factor: float = 0.53,
    **_: Any,
) -> PoseLoss:
    """Task-table factory (``lucid_core.tasks``): the pose objective of one branch of ``model``.

    ``model`` needs ``num_classes``, ``reg_max``, ``strides`` and ``head`` with ``kpt_shape``; a head with
    ``rle = True`` (YOLO26) gets the keypoint-aware assigner, the ``raw + anchor`` decode and the RLE term
    through ``head.flow_model``. ``gains``: box 7.5, cls 0.5, dfl 1.5 (also the L1 gain), pose 12, kobj 1,
    rle 1 (README ``meta.hyp``), ``cls_weights`` (per class; unknown keys are ignored). ``sigmas``: the dataset's own OKS sigmas (K positive
    values) or ``None`` for the README defaults. The one-to-one branch (``one2one``) keeps top-``o2o_topk`` then
    ``o2o_topk2`` anchors per person (README ``assigner_params``).
    """
    head = model.head
    kpt_shape = tuple(int(v) for v in getattr(head, "kpt_shape", getattr(model, "kpt_shape", (17, 3))))
    keypoint_aware = bool(getattr(head, "rle", False))
    g = resolve_gains(POSE_GAINS, gains)
    k, k2 = branch_topk(one2one, topk, o2o_topk, o2o_topk2)
    resolved = resolve_keypoint_sigmas(kpt_shape, sigmas)
    strides = tuple(float(s) for s in model.strides)
    num_classes = int(model.num_classes)
    small_target_stride = float(strides[1] if len(strides) > 1 else strides[0])
    assigner_args: dict[str, Any] = dict(
        topk=k,
        topk2=k2,
        num_classes=num_classes,
        alpha=alpha,
        beta=beta,
        small_target_stride=small_target_stride,
    )
    assigner: TaskAlignedAssigner
    if keypoint_aware:
        assigner = KeypointAwareAssigner(
            resolved, strides, level_range=level_range, oks_area_factor=oks_area_factor, **assigner_args
        )
    else:
        assigner = TaskAlignedAssigner(**assigner_args)
    return PoseLoss(
        num_classes,
        int(model.reg_max),
        strides,
        kpt_shape,
        resolved,
        gains=g,
        keypoint_aware=keypoint_aware,
        assigner=assigner,
        flow=getattr(head, "flow_model", None) if keypoint_aware else None,
        cls_weights=class_weights(gains, num_classes),
    )
