"""YOLO26's mask-aware task-aligned assigner: the overlap is the mean of box CIoU and predicted-mask IoU.

Rule from ``shared/fixtures/README.md``, section "segment_loss_yolov8n-seg.pt, segment_loss_yolo26n-seg.pt",
"YOLO26 mask-aware assignment" (A1–A4); only step 2 of the task-aligned rule (the overlap u) changes:

- A1. Box metric on the candidate pairs: ``m = s^alpha · CIoU⁺^beta + 1e-9`` (0 off the candidates).
- A2. Per real ground-truth row, its ``K = min(3 · topk, A)`` anchors of largest ``m``; for those that are
  candidates the mask IoU of the predicted mask (``coefficients · prototypes > 0`` on the detached prototypes at
  prototype size, cropped to the *predicted* box scaled to prototype pixels) against the row's binary mask at
  prototype size (not cropped): ``|P ∧ G| / max(|P| + |G| − |P ∧ G|, 1)``. Other pairs: 0.
- A3. ``u = (CIoU⁺ + mask IoU) / 2`` on every candidate pair; it replaces the overlap everywhere in the
  task-aligned rule (alignment, top-k, conflict argmax, top-k2, soft scores).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import torch
from torch import Tensor

from lucid_core.assign.task_aligned import TaskAlignedAssigner

MASK_SELECTION_EPS = 1e-9  # A1: added to the box metric of candidate pairs (a CIoU⁺ = 0 pair can still win)
MASK_IOU_PAIRS_PER_TOPK = 3  # A2: K = 3 · topk pairs per ground-truth row get a mask IoU
PAIR_CHUNK_ELEMENTS = 1 << 24  # bound on (pairs × prototype pixels) materialised at once


class MaskIoUPairs(NamedTuple):
    """Every (image, ground-truth row, anchor) pair whose mask IoU was computed (A2), in (b, gt, a) order."""

    b: Tensor  # (P,) int64
    gt: Tensor  # (P,) int64
    a: Tensor  # (P,) int64
    box_ciou: Tensor  # (P,) float32 CIoU⁺
    mask_iou: Tensor  # (P,) float32
    overlap: Tensor  # (P,) float32 u = (CIoU⁺ + mask IoU) / 2
    pred_mask_pixels: Tensor  # (P,) int64
    gt_mask_pixels: Tensor  # (P,) int64
    intersection: Tensor  # (P,) int64


def inside_boxes(boxes_xyxy: Tensor, height: int, width: int) -> Tensor:
    """(N, H, W) bool: pixel (row i, column c) is inside box n iff ``x1 <= c < x2`` and ``y1 <= i < y2``.

    Integer pixel indices compared with the float box, no rounding (fixture README, segment loss S3 and A2).
    """
    x1, y1, x2, y2 = boxes_xyxy[:, :, None, None].unbind(1)  # each (N, 1, 1)
    cols = torch.arange(width, device=boxes_xyxy.device, dtype=boxes_xyxy.dtype).view(1, 1, -1)
    rows = torch.arange(height, device=boxes_xyxy.device, dtype=boxes_xyxy.dtype).view(1, -1, 1)
    return (cols >= x1) & (cols < x2) & (rows >= y1) & (rows < y2)


class MaskAwareAssigner(TaskAlignedAssigner):
    """Task-aligned assigner whose overlap is ``(CIoU⁺ + mask IoU) / 2`` (YOLO26 segment, A1–A4).

    ``extras`` of :meth:`__call__` must hold:

    - ``mask_coef`` (B, A, nm): predicted mask coefficients per anchor (detached);
    - ``proto`` (B, nm, Hp, Wp): prototypes (detached, at prototype size);
    - ``gt_masks`` (B, M, Hp, Wp) bool: each ground-truth row's binary mask at prototype size;
    - ``box_scale`` (): prototype pixels per input pixel (``Hp / H``).

    After every call :attr:`last_mask_iou_pairs` holds the pairs whose mask IoU was computed (for fixture
    checks and debugging; it is overwritten by the next call).
    """

    def __init__(
        self,
        topk: int = 10,
        num_classes: int = 80,
        alpha: float = 0.5,
        beta: float = 6.0,
        eps: float = 1e-9,
        topk2: int | None = None,
        small_target_stride: float | None = None,
    ) -> None:
        super().__init__(topk, num_classes, alpha, beta, eps, topk2, small_target_stride)
        self.last_mask_iou_pairs: MaskIoUPairs | None = None

    def __repr__(self) -> str:
        return "MaskAware" + super().__repr__()

    def overlaps(
        self,
        gt_bboxes: Tensor,
        pd_bboxes: Tensor,
        is_candidate: Tensor,
        class_scores: Tensor,
        extras: Mapping[str, Tensor],
    ) -> Tensor:
        """(B, M, A) overlap ``u = (CIoU⁺ + mask IoU) / 2`` on candidates, 0 elsewhere (A1–A3)."""
        for key in ("mask_coef", "proto", "gt_masks", "box_scale"):
            if key not in extras:
                raise KeyError(
                    f"MaskAwareAssigner: extras must hold 'mask_coef', 'proto', 'gt_masks' and 'box_scale'; "
                    f"missing {key!r} (got {sorted(extras)})"
                )
        ciou = super().overlaps(
            gt_bboxes, pd_bboxes, is_candidate, class_scores, extras
        )  # CIoU⁺ on candidates
        zero = torch.zeros_like(ciou)
        metric = torch.where(
            is_candidate, class_scores.pow(self.alpha) * ciou.pow(self.beta) + MASK_SELECTION_EPS, zero
        )
        num_anchors = metric.shape[-1]
        pairs_per_row = min(MASK_IOU_PAIRS_PER_TOPK * self.topk, num_anchors)
        top_idx = torch.topk(metric, pairs_per_row, dim=-1, largest=True).indices  # (B, M, K)
        selected = is_candidate.gather(-1, top_idx)  # (B, M, K) candidates among the K best

        mask_coef = extras["mask_coef"].detach()
        proto = extras["proto"].detach()
        gt_masks = extras["gt_masks"]
        box_scale = extras["box_scale"]
        inter, pred_pixels = self._pred_mask_counts(mask_coef, proto, gt_masks, pd_bboxes, top_idx, box_scale)
        gt_pixels = gt_masks.flatten(2).sum(-1).unsqueeze(-1).expand_as(inter)  # (B, M, K)
        union = (pred_pixels + gt_pixels - inter).clamp(min=1)
        mask_iou_k = torch.where(
            selected, inter.to(ciou.dtype) / union.to(ciou.dtype), torch.zeros_like(ciou[..., :1])
        )
        mask_iou = zero.scatter(-1, top_idx, mask_iou_k)
        overlap = torch.where(is_candidate, (ciou + mask_iou) / 2, zero)

        b, gt, k = torch.nonzero(selected, as_tuple=True)
        a = top_idx[b, gt, k]
        order = torch.argsort(((b * selected.shape[1] + gt) * num_anchors + a), stable=True)
        b, gt, k, a = b[order], gt[order], k[order], a[order]
        self.last_mask_iou_pairs = MaskIoUPairs(
            b=b,
            gt=gt,
            a=a,
            box_ciou=ciou[b, gt, a],
            mask_iou=mask_iou[b, gt, a],
            overlap=overlap[b, gt, a],
            pred_mask_pixels=pred_pixels[b, gt, k],
            gt_mask_pixels=gt_pixels[b, gt, k],
            intersection=inter[b, gt, k],
        )
        return overlap

    @staticmethod
    def _pred_mask_counts(
        mask_coef: Tensor,
        proto: Tensor,
        gt_masks: Tensor,
        pd_bboxes: Tensor,
        top_idx: Tensor,
        box_scale: Tensor,
    ) -> tuple[Tensor, Tensor]:
        """(B, M, K) int64 ``|P ∧ G|`` and ``|P|`` of the predicted masks of the selected anchors (A2)."""
        batch, rows, pairs = top_idx.shape
        num_masks, height, width = proto.shape[1:]
        inter = torch.zeros((batch, rows, pairs), dtype=torch.int64, device=proto.device)
        pred_pixels = torch.zeros_like(inter)
        if rows == 0 or pairs == 0:
            return inter, pred_pixels
        rows_per_chunk = max(1, PAIR_CHUNK_ELEMENTS // max(1, pairs * height * width))
        for b in range(batch):
            flat_proto = proto[b].reshape(num_masks, height * width)
            for start in range(0, rows, rows_per_chunk):
                stop = min(rows, start + rows_per_chunk)
                idx = top_idx[b, start:stop].reshape(-1)  # (R·K,)
                logits = (mask_coef[b, idx] @ flat_proto).view(-1, height, width)
                boxes = pd_bboxes[b, idx] * box_scale
                pred = (logits > 0) & inside_boxes(boxes, height, width)
                gt = gt_masks[b, start:stop].unsqueeze(1).expand(-1, pairs, -1, -1).reshape(-1, height, width)
                inter[b, start:stop] = (pred & gt).flatten(1).sum(-1).view(stop - start, pairs)
                pred_pixels[b, start:stop] = pred.flatten(1).sum(-1).view(stop - start, pairs)
        return inter, pred_pixels
