"""Instance-segmentation objective: detection terms + the prototype-mask term (+ YOLO26's semantic term).

Every rule follows ``shared/fixtures/README.md``, section "segment_loss_yolov8n-seg.pt, segment_loss_yolo26n-seg.pt"
("The loss (per branch)", S0–S6; "YOLO26 mask-aware assignment", A1–A4; "E2E"). Mask logits are
``coefficients · prototypes`` (YOLACT, Bolya et al., ICCV 2019); the semantic term is BCE + Dice (Milletari et al.,
V-Net, 2016) on the stride-8 class map.

- S0: detection terms (:func:`~lucid_core.loss.detection.detection_branch_loss`), YOLO26 with the mask-aware
  assigner (:class:`~lucid_core.assign.mask_aware.MaskAwareAssigner`). Slots: box 0, cls 2, dfl|l1 3.
- S1: no foreground anchor in the batch → seg = sem = 0 exactly (zero gradient to prototypes/coefficients).
- S2: prototypes bilinearly up-sampled to the ``masks`` size when it differs (mask term only).
- S3/S4: per fg anchor, BCE of its mask logits against its ground-truth mask, cropped to the assigned box in mask
  pixels, mean over the whole mask divided by the normalised box area; summed over the batch's fg anchors, divided
  by their count, × the **box** gain → slot 1.
- S5 (YOLO26): one-hot class target where a pixel is covered, nearest-sampled to the semantic size;
  ``(0.5 · BCE + 0.5 · Dice) ×`` box gain → slot 4 (0 for v8/YOLO11, still logged).
- One-to-one branch (``one2one=True``): detached prototypes and semantic logits (identical values, no gradient).

Batch keys read (docs/INTERFACES.md "Batches"): ``batch_idx``, ``cls``, ``bboxes`` as in detection; ``masks``
(B, H/r, W/r) index maps when ``overlap_mask`` (values k+1 = the image's k-th target) else (N, H/r, W/r) 0/1 masks
in batch order; ``sem_masks`` (B, H/r, W/r) class ids (YOLO26 only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from lucid_core.assign import TaskAlignedAssigner
from lucid_core.assign.mask_aware import MaskAwareAssigner, inside_boxes
from lucid_core.loss.detection import BranchLoss, class_weight_tensor, detection_branch_loss
from lucid_core.loss.gains import DETECTION_GAINS, branch_topk, class_weights, resolve_gains
from lucid_core.loss.targets import PaddedTargets, pack_targets
from lucid_core.outputs import BranchOutput, TrainOutput

__all__ = ["SegmentLoss", "SegmentTargets", "segment_objective"]

SEMANTIC_BCE_WEIGHT = 0.5  # S5: sem = 0.5 · bce + 0.5 · dice
SEMANTIC_DICE_WEIGHT = 0.5
DICE_SMOOTH = 1.0  # S5: d = 1 − (2I + 1) / (U + 1)


class SegmentTargets(NamedTuple):
    """Packed ground truth of a segment batch."""

    boxes: PaddedTargets  # (B, M, ·) labels, xyxy pixels, mask_gt, as in detection
    masks: Tensor  # float: (B, h, w) index maps (overlap_mask) or (N, h, w) 0/1 masks in batch order
    row_instance: Tensor  # (B, M) int64: batch instance index of each row, -1 for padding rows
    sem_masks: Tensor | None  # (B, h, w) float class ids, or None when the batch has none
    overlap_mask: bool


def _row_instance(batch_idx: Tensor, batch_size: int, rows: int) -> Tensor:
    """(B, M) batch index of every padded row (order of appearance inside an image, as :func:`pack_targets`)."""
    device = batch_idx.device
    out = torch.full((batch_size, rows), -1, dtype=torch.int64, device=device)
    num = batch_idx.shape[0]
    if num == 0 or rows == 0:
        return out
    image = batch_idx.long()
    membership = (image.unsqueeze(1) == torch.arange(batch_size, device=device).unsqueeze(0)).long()
    rank = (membership.cumsum(0) - 1).gather(1, image.unsqueeze(1)).squeeze(1)
    return out.index_put((image, rank), torch.arange(num, device=device))


class SegmentLoss:
    """Branch objective of instance segmentation (:class:`~lucid_core.loss.objective.BranchObjective`).

    Args:
        num_classes, reg_max, strides: of the model.
        box, cls, dfl: gains (reference 7.5, 0.5, 1.5); the mask and semantic terms use the **box** gain.
        topk, topk2, alpha, beta: assigner constants (one-to-one branch: topk 7, topk2 1).
        overlap_mask: ``masks`` are per-image index maps (True, the reference default) or per-instance masks.
        mask_aware: YOLO26's mask-aware assigner (A1–A4) instead of the box-only one.
        semantic: add YOLO26's semantic term (needs ``TrainOutput.semseg``).
        one2one: this is the one-to-one branch: prototypes and semantic logits are detached.
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
        topk: int = 10,
        topk2: int | None = None,
        alpha: float = 0.5,
        beta: float = 6.0,
        overlap_mask: bool = True,
        mask_aware: bool = False,
        semantic: bool = False,
        one2one: bool = False,
        cls_weights: Sequence[float] | None = None,
    ) -> None:
        self.num_classes = int(num_classes)
        self.reg_max = int(reg_max)
        self.strides = tuple(float(s) for s in strides)
        self.gains = (float(box), float(cls), float(dfl))
        self.cls_weights = class_weight_tensor(cls_weights)
        self.overlap_mask = bool(overlap_mask)
        self.mask_aware = bool(mask_aware)
        self.semantic = bool(semantic)
        self.one2one = bool(one2one)
        assigner_cls = MaskAwareAssigner if mask_aware else TaskAlignedAssigner
        self.assigner: TaskAlignedAssigner = assigner_cls(
            topk=topk,
            num_classes=self.num_classes,
            alpha=alpha,
            beta=beta,
            topk2=topk2,
            small_target_stride=float(self.strides[1] if len(self.strides) > 1 else self.strides[0]),
        )
        self.loss_names: tuple[str, ...] = (
            "box_loss",
            "seg_loss",
            "cls_loss",
            "dfl_loss" if self.reg_max > 1 else "l1_loss",
            "sem_loss",
        )

    def pack(self, batch: Mapping[str, Any], batch_size: int, imgsz_hw: tuple[int, int]) -> SegmentTargets:
        """Padded boxes (:func:`pack_targets`), the batch's masks as float and each row's instance index."""
        boxes = pack_targets(batch, batch_size, imgsz_hw)
        if "masks" not in batch:
            raise KeyError(
                f"segment loss: the batch has no 'masks' (a segment dataset collates them); got {sorted(batch)}"
            )
        masks = batch["masks"]
        num = int(batch["batch_idx"].shape[0])
        expected = batch_size if self.overlap_mask else num
        layout = "(B, H/r, W/r) index maps" if self.overlap_mask else "(N, H/r, W/r) per-instance masks"
        if masks.ndim != 3 or int(masks.shape[0]) != expected:
            raise ValueError(
                f"segment loss: 'masks' must be {layout} with {'B' if self.overlap_mask else 'N'} = {expected} "
                f"(overlap_mask={self.overlap_mask}), got shape {tuple(masks.shape)}"
            )
        device = boxes.gt_bboxes.device
        row_instance = _row_instance(batch["batch_idx"].to(device), batch_size, int(boxes.gt_bboxes.shape[1]))
        sem = batch.get("sem_masks")
        sem_masks = None if sem is None else sem.to(device=device, dtype=torch.float32)
        if self.semantic and sem_masks is None:
            raise KeyError("segment loss: the semantic term needs the batch key 'sem_masks' (B, H/r, W/r)")
        return SegmentTargets(
            boxes, masks.to(device=device, dtype=torch.float32), row_instance, sem_masks, self.overlap_mask
        )

    def _row_masks(self, targets: SegmentTargets, b: int) -> Tensor:
        """(M, h, w) float 0/1 mask of every row of image ``b`` (padding rows all zero)."""
        rows = targets.row_instance[b]
        if targets.overlap_mask:
            ids = torch.arange(1, rows.shape[0] + 1, device=rows.device, dtype=targets.masks.dtype)
            return (targets.masks[b].unsqueeze(0) == ids.view(-1, 1, 1)).to(targets.masks.dtype)
        picked = targets.masks[rows.clamp(min=0)] if targets.masks.shape[0] > 0 else None
        if picked is None:
            h, w = targets.masks.shape[1:]
            return targets.masks.new_zeros((rows.shape[0], h, w))
        return picked * (rows >= 0).to(picked.dtype).view(-1, 1, 1)

    def _assigner_extras(
        self, targets: SegmentTargets, coef: Tensor, proto: Tensor, imgsz_hw: tuple[int, int]
    ) -> dict[str, Tensor]:
        """Inputs of the mask-aware assigner: GT row masks resized (nearest) to the prototype size (A2)."""
        proto_hw = (int(proto.shape[2]), int(proto.shape[3]))
        per_image = []
        for b in range(proto.shape[0]):
            rows = self._row_masks(targets, b)
            if tuple(rows.shape[1:]) != proto_hw and rows.shape[0] > 0:
                rows = F.interpolate(rows[None], size=proto_hw, mode="nearest")[0]
            per_image.append(rows > 0.5)
        gt_masks = (
            torch.stack(per_image)
            if per_image
            else torch.zeros((0, 0, *proto_hw), dtype=torch.bool, device=proto.device)
        )
        if gt_masks.shape[1] == 0:
            gt_masks = torch.zeros((proto.shape[0], 0, *proto_hw), dtype=torch.bool, device=proto.device)
        return {
            "mask_coef": coef.detach().permute(0, 2, 1),
            "proto": proto.detach(),
            "gt_masks": gt_masks,
            "box_scale": torch.tensor(proto_hw[0] / imgsz_hw[0], dtype=torch.float32, device=proto.device),
        }

    def branch_loss(
        self,
        output: TrainOutput,
        branch: BranchOutput,
        targets: SegmentTargets,
        batch: Mapping[str, Any] | None = None,
        *,
        one2one: bool = False,
    ) -> BranchLoss:
        """Loss of ``branch`` (S0–S6); ``details`` holds the fixture's per-anchor terms and mask-IoU pairs."""
        if output.proto is None:
            raise ValueError("segment loss: the model output has no prototypes (TrainOutput.proto is None)")
        if "mask_coef" not in branch.extras:
            raise KeyError(
                f"segment loss: the branch has no 'mask_coef' extras (got {sorted(branch.extras)}); "
                "is this a segment head?"
            )
        detach = one2one or self.one2one
        proto = output.proto.float()
        semantic = None if output.semseg is None else output.semseg.float()
        if detach:
            proto = proto.detach()
            semantic = None if semantic is None else semantic.detach()
        coef = branch.extras["mask_coef"].float()  # (B, nm, A)
        level_shapes = list(output.level_shapes)
        imgsz_hw = (int(level_shapes[0][0] * self.strides[0]), int(level_shapes[0][1] * self.strides[0]))
        extras = self._assigner_extras(targets, coef, proto, imgsz_hw) if self.mask_aware else None
        det = detection_branch_loss(
            branch.boxes,
            branch.scores,
            level_shapes,
            self.strides,
            targets.boxes,
            assigner=self.assigner,
            reg_max=self.reg_max,
            gains=self.gains,
            assigner_extras=extras,
            cls_weights=self.cls_weights,
        )
        assignment = det.assignment
        fg_mask = assignment.fg_mask
        batch_size = int(fg_mask.shape[0])
        n_fg = int(fg_mask.sum())
        details: dict[str, Any] = {"n_fg": n_fg}
        if n_fg == 0:  # S1
            seg = coef.sum() * 0.0 + proto.sum() * 0.0
            sem = seg if semantic is None else seg + semantic.sum() * 0.0
        else:
            seg = self._mask_term(
                targets,
                coef,
                proto,
                assignment.target_gt_idx,
                assignment.target_bboxes,
                fg_mask,
                imgsz_hw,
                details,
            )
            if self.semantic:
                if semantic is None:
                    raise ValueError(
                        "segment loss: the semantic term needs TrainOutput.semseg (the YOLO26 head's semantic map)"
                    )
                sem = self._semantic_term(targets, semantic, details)
            else:
                sem = torch.zeros((), dtype=seg.dtype, device=seg.device)
            if self.mask_aware and isinstance(self.assigner, MaskAwareAssigner):
                details["mask_iou_pairs"] = self.assigner.last_mask_iou_pairs
        box_gain = self.gains[0]
        seg_loss, sem_loss = seg * box_gain, sem * box_gain
        vec = det.loss_vector_times_bs
        loss_vector_times_bs = torch.stack(
            (vec[0], seg_loss * batch_size, vec[1], vec[2], sem_loss * batch_size)
        )
        items = det.loss_items
        loss_items = torch.stack((items[0], seg_loss.detach(), items[1], items[2], sem_loss.detach()))
        return BranchLoss(
            loss_vector_times_bs,
            loss_items,
            loss_vector_times_bs.sum(),
            assignment,
            det.target_scores_sum,
            details,
        )

    def _mask_term(
        self,
        targets: SegmentTargets,
        coef: Tensor,
        proto: Tensor,
        target_gt_idx: Tensor,
        target_bboxes: Tensor,
        fg_mask: Tensor,
        imgsz_hw: tuple[int, int],
        details: dict[str, Any],
    ) -> Tensor:
        """S2–S4: Σ over fg anchors of the cropped, area-normalised mask BCE, divided by the fg count."""
        mask_h, mask_w = (int(s) for s in targets.masks.shape[1:])
        if (int(proto.shape[2]), int(proto.shape[3])) != (mask_h, mask_w):
            proto = F.interpolate(proto, size=(mask_h, mask_w), mode="bilinear", align_corners=False)
        height, width = imgsz_hw
        to_norm = torch.tensor([width, height, width, height], dtype=torch.float32, device=proto.device)
        to_mask = torch.tensor([mask_w, mask_h, mask_w, mask_h], dtype=torch.float32, device=proto.device)
        total = torch.zeros((), dtype=torch.float32, device=proto.device)
        terms, areas, boxes_px = [], [], []
        for b in range(fg_mask.shape[0]):
            fg = fg_mask[b]
            if not bool(fg.any()):
                continue
            rows = target_gt_idx[b][fg].long()  # (n,)
            if targets.overlap_mask:
                gt = (
                    targets.masks[b].unsqueeze(0) == (rows + 1).to(targets.masks.dtype).view(-1, 1, 1)
                ).float()
            else:
                gt = targets.masks[targets.row_instance[b][rows]]
            logits = torch.einsum("in,nhw->ihw", coef[b][:, fg].t(), proto[b])
            bce = F.binary_cross_entropy_with_logits(logits, gt, reduction="none")
            norm = target_bboxes[b][fg] / to_norm
            box_px = norm * to_mask
            area = (norm[:, 2] - norm[:, 0]) * (norm[:, 3] - norm[:, 1])
            cropped = bce * inside_boxes(box_px, mask_h, mask_w)
            term = cropped.mean(dim=(1, 2)) / area
            total = total + term.sum()
            terms.append(term.detach())
            areas.append(area.detach())
            boxes_px.append(box_px.detach())
        details["fg_anchor_mask_terms"] = torch.cat(terms)
        details["fg_anchor_box_area_norm"] = torch.cat(areas)
        details["fg_anchor_box_xyxy_mask_px"] = torch.cat(boxes_px)
        return total / fg_mask.sum()

    def _semantic_term(self, targets: SegmentTargets, semantic: Tensor, details: dict[str, Any]) -> Tensor:
        """S5: BCE + Dice of the semantic logits against the covered pixels' one-hot classes (nearest-sampled)."""
        assert targets.sem_masks is not None
        batch_size, num_classes, sem_h, sem_w = semantic.shape
        if targets.overlap_mask:
            covered = targets.masks != 0
        else:
            covered = torch.zeros(
                (batch_size, *targets.masks.shape[1:]), dtype=torch.bool, device=targets.masks.device
            )
            for b in range(batch_size):
                rows = targets.row_instance[b]
                rows = rows[rows >= 0]
                if rows.numel():
                    covered[b] = (targets.masks[rows] != 0).any(0)
        small = F.interpolate(
            torch.stack((targets.sem_masks, covered.float()), 1), size=(sem_h, sem_w), mode="nearest"
        )
        cls_map, cov_map = small[:, 0].long().clamp(0, num_classes - 1), small[:, 1] > 0
        one_hot = F.one_hot(cls_map, num_classes).permute(0, 3, 1, 2).to(semantic.dtype)
        target = one_hot * cov_map.unsqueeze(1).to(semantic.dtype)
        bce = F.binary_cross_entropy_with_logits(semantic, target, reduction="mean")
        probs = semantic.sigmoid()
        inter = (probs * target).sum((2, 3))
        union = probs.sum((2, 3)) + target.sum((2, 3))
        dice = (1 - (2 * inter + DICE_SMOOTH) / (union + DICE_SMOOTH)).mean(1).mean(0)
        details["semantic_bce"] = bce.detach()
        details["semantic_dice"] = dice.detach()
        details["semantic_target_positive_pixels"] = target.sum((2, 3)).long()
        return SEMANTIC_BCE_WEIGHT * bce + SEMANTIC_DICE_WEIGHT * dice


def segment_objective(
    model: Any,
    *,
    gains: Mapping[str, float] | None = None,
    one2one: bool = False,
    topk: int = 10,
    alpha: float = 0.5,
    beta: float = 6.0,
    overlap_mask: bool = True,
    o2o_topk: int = 7,
    o2o_topk2: int = 1,
    mask_aware: bool | None = None,
    semantic: bool | None = None,
    **_unused: Any,
) -> SegmentLoss:
    """Task-table factory (``lucid_core.tasks``): the segment objective of one branch of ``model``.

    ``gains`` may hold ``box``, ``cls``, ``dfl`` (7.5, 0.5, 1.5) and ``cls_weights`` (other keys ignored). ``mask_aware`` defaults to
    the model being end-to-end (YOLO26), ``semantic`` to its head having the multi-scale prototype module with the
    semantic branch. Other keyword options (e.g. ``mask_ratio``, a data option) are accepted and ignored.
    """
    g = resolve_gains(DETECTION_GAINS, gains)
    k, k2 = branch_topk(one2one, topk, o2o_topk, o2o_topk2)
    end2end = bool(getattr(model, "end2end", False))
    head = getattr(model, "head", None)
    return SegmentLoss(
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
        overlap_mask=overlap_mask,
        mask_aware=end2end if mask_aware is None else mask_aware,
        semantic=bool(getattr(head, "multiscale_proto", False)) if semantic is None else semantic,
        one2one=one2one,
        cls_weights=class_weights(gains, int(model.num_classes)),
    )
