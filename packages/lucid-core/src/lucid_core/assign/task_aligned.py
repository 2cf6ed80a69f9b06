"""Task-aligned label assignment (TOOD; Feng et al., ICCV 2021) with the reference's variants.

Rules and constants follow ``shared/fixtures/README.md``, section "assigner_public.pt" ("The rule (as
verified)"), which reproduced the reference outputs bit-exactly:

1. candidates: anchor points strictly inside the (optionally small-target-widened) ground-truth box;
2. overlap u = CIoU(ground truth, prediction) clamped to >= 0 on candidates;
3. alignment t = score^alpha * u^beta on candidates;
4. top-k anchors per ground truth by t over all anchors, kept only when they are candidates;
5. an anchor claimed by several rows goes to the row with the largest u among its candidate rows;
6. one-to-one (``topk2`` != ``topk``): each row keeps only its ``topk2`` best remaining anchors by t;
7./8. outputs and soft scores t * max(u) / (max(t) + eps) per row.

Everything is dense over the (B, M, A) grid: no boolean-mask gathers and no ``nonzero``, so the assigner traces
as one graph under ``torch.compile``.

Task variants change only steps 1 and 2 (the task seam): a subclass overrides :meth:`TaskAlignedAssigner.candidates`
(e.g. the rotated-box inside test) and/or :meth:`TaskAlignedAssigner.overlaps` (e.g. ProbIoU, OKS, box + mask
IoU), reading any per-task tensors it needs from the ``extras`` mapping passed to ``__call__``. Boxes may have any
last dimension (4 for xyxy, 5 for xywhr); ``target_bboxes`` is gathered with the ground truth's own width.

The three dense element-wise stages (candidate test + class-score gather, the alignment metric, the conflict
resolution) are the :class:`DenseStages` of :meth:`TaskAlignedAssigner.assign`: the assigner's own methods by
default, fused kernels when ``lucid_accel`` passes its own (``--accel.fused_assignment``). Every other step is
this module's, once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple, Protocol

import torch
from torch import Tensor

from lucid_core.geometry.boxes import xywh_to_xyxy, xyxy_to_xywh
from lucid_core.geometry.iou import bbox_ciou

CANDIDATE_EPS = 1e-9


class Assignment(NamedTuple):
    """Assigner outputs for a batch of B images and A anchors."""

    target_labels: Tensor  # (B, A) int64 (float32 num_classes-filled constants when M == 0)
    target_bboxes: Tensor  # (B, A, 4) xyxy pixels of the assigned ground truth (row 0 for background)
    target_scores: Tensor  # (B, A, C) soft one-hot targets, zero on background
    fg_mask: Tensor  # (B, A) bool
    target_gt_idx: (
        Tensor  # (B, A) int64 index of the assigned row (0 for background; float32 zeros when M == 0)
    )


def first_argmax(values: Tensor, dim: int) -> Tensor:
    """``values.argmax(dim)``: the index of the first maximum, computed as ``max(dim).indices`` (documented to
    return the first maximal value's index too). On CPU ``argmax`` over the short row dimension of a (B, M, A) grid is
    ~30× slower than ``max`` (11 ms against 0.35 ms at 8 × 7 × 8400, torch 2.15, 2 threads)."""
    return values.max(dim).indices


def _one_hot_last(index: Tensor, size: int, dtype: torch.dtype) -> Tensor:
    """One-hot along a new last dimension of ``size`` built with ``scatter`` (compile-friendly)."""
    out = torch.zeros((*index.shape, size), dtype=dtype, device=index.device)
    return out.scatter_(-1, index.unsqueeze(-1), 1)


class DenseStages(Protocol):
    """The dense stages of :meth:`TaskAlignedAssigner.assign` that an accelerated implementation may replace."""

    def candidates_and_scores(
        self,
        anc_points: Tensor,
        gt_bboxes: Tensor,
        real: Tensor,
        labels: Tensor,
        pd_scores: Tensor,
        extras: Mapping[str, Tensor],
    ) -> tuple[Tensor, Tensor]:
        """Steps 1 + gather: (B, M, A) float candidate mask of real rows, and the candidates' class scores."""
        ...

    def alignment_metric(self, class_scores: Tensor, overlaps: Tensor) -> Tensor:
        """Step 3: (B, M, A) ``t = score^alpha * u^beta``."""
        ...

    def resolve_conflicts(self, in_topk: Tensor, candidate: Tensor, overlaps: Tensor) -> Tensor:
        """Steps 4 (candidates of the top k) + 5: (B, M, A) float positive mask, one row per anchor."""
        ...


class TaskAlignedAssigner:
    """Dense task-aligned assigner.

    Args:
        topk: anchors selected per ground truth by alignment (10; YOLO26 one-to-one branch: 7).
        num_classes: number of classes C.
        alpha, beta: exponents of the classification score and the overlap in the alignment metric.
        eps: added to the per-row maximum alignment in the soft-score normalisation (1e-9).
        topk2: anchors kept per ground truth after conflict resolution; ``None`` means ``topk`` (no-op).
            YOLO26's one-to-one branch uses ``topk=7, topk2=1``.
        small_target_stride: when given, for the candidate test only, a ground-truth side shorter than this
            value is widened to it around the box centre (the reference passes its second stride, 16 for
            strides (8, 16, 32)). ``None`` disables the widening (the classic assigner).
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
        if topk < 1:
            raise ValueError(f"TaskAlignedAssigner: topk must be >= 1, got {topk}")
        if topk2 is not None and not 1 <= topk2 <= topk:
            raise ValueError(f"TaskAlignedAssigner: topk2 must be in [1, topk={topk}], got {topk2}")
        if num_classes < 1:
            raise ValueError(f"TaskAlignedAssigner: num_classes must be >= 1, got {num_classes}")
        if small_target_stride is not None and small_target_stride <= 0:
            raise ValueError(
                f"TaskAlignedAssigner: small_target_stride must be > 0, got {small_target_stride}"
            )
        self.topk = topk
        self.topk2 = topk if topk2 is None else topk2
        self.num_classes = num_classes
        self.alpha = alpha
        self.beta = beta
        self.eps = eps
        self.small_target_stride = small_target_stride

    def __repr__(self) -> str:
        return (
            f"TaskAlignedAssigner(topk={self.topk}, num_classes={self.num_classes}, alpha={self.alpha}, "
            f"beta={self.beta}, eps={self.eps}, topk2={self.topk2}, small_target_stride={self.small_target_stride})"
        )

    @torch.no_grad()
    def __call__(
        self,
        pd_scores: Tensor,
        pd_bboxes: Tensor,
        anc_points: Tensor,
        gt_labels: Tensor,
        gt_bboxes: Tensor,
        mask_gt: Tensor,
        extras: Mapping[str, Tensor] | None = None,
    ) -> Assignment:
        """Assign ground truth to anchors (:meth:`assign` with this assigner's own dense stages).

        Args:
            pd_scores: (B, A, C) predicted class probabilities (after the sigmoid).
            pd_bboxes: (B, A, 4) predicted boxes, xyxy pixels.
            anc_points: (A, 2) anchor points in pixels.
            gt_labels: (B, M, 1) class ids (any numeric dtype).
            gt_bboxes: (B, M, 4) ground truth, xyxy pixels; padding rows are zero.
            mask_gt: (B, M, 1) 1 for real rows, 0 for padding.
            extras: per-task tensors read by the :meth:`candidates` / :meth:`overlaps` of a subclass (unused here).
        """
        return self.assign(pd_scores, pd_bboxes, anc_points, gt_labels, gt_bboxes, mask_gt, extras)

    @torch.no_grad()
    def assign(
        self,
        pd_scores: Tensor,
        pd_bboxes: Tensor,
        anc_points: Tensor,
        gt_labels: Tensor,
        gt_bboxes: Tensor,
        mask_gt: Tensor,
        extras: Mapping[str, Tensor] | None = None,
        *,
        stages: DenseStages | None = None,
    ) -> Assignment:
        """The assignment of :meth:`__call__` with its dense stages taken from ``stages`` (default: ``self``)."""
        stages = self if stages is None else stages
        extras = {} if extras is None else extras
        batch, num_anchors, num_classes = pd_scores.shape
        if num_classes != self.num_classes:
            raise ValueError(
                f"TaskAlignedAssigner: pd_scores has {num_classes} classes, assigner built for {self.num_classes}"
            )
        num_rows = gt_bboxes.shape[1]
        device = pd_scores.device
        if num_rows == 0:
            # Reference constants for a batch without any ground-truth row (fixture "empty_gt_batch").
            return Assignment(
                target_labels=torch.full(
                    (batch, num_anchors), float(self.num_classes), dtype=pd_scores.dtype, device=device
                ),
                target_bboxes=torch.zeros_like(pd_bboxes),
                target_scores=torch.zeros_like(pd_scores),
                fg_mask=torch.zeros((batch, num_anchors), dtype=torch.bool, device=device),
                target_gt_idx=torch.zeros((batch, num_anchors), dtype=pd_scores.dtype, device=device),
            )

        real = mask_gt.to(pd_scores.dtype)  # (B, M, 1)
        labels = gt_labels.long().squeeze(-1).clamp(min=0)  # (B, M)
        # Candidates of real rows and their class scores over the dense (B, M, A) grid, zero elsewhere.
        candidate, class_scores = stages.candidates_and_scores(
            anc_points, gt_bboxes, real, labels, pd_scores, extras
        )
        overlaps = self.overlaps(gt_bboxes, pd_bboxes, candidate > 0, class_scores, extras)
        align_metric = stages.alignment_metric(class_scores, overlaps)  # (B, M, A)

        # Top-k per row over all anchors, kept when candidates; an anchor claimed twice goes to the largest overlap.
        topk_idx = torch.topk(align_metric, self.topk, dim=-1, largest=True).indices  # (B, M, k)
        in_topk = torch.zeros_like(align_metric).scatter_(-1, topk_idx, 1.0)
        mask_pos = stages.resolve_conflicts(in_topk, candidate, overlaps)  # (B, M, A)

        if self.topk2 != self.topk:
            # One-to-one: each row keeps only its topk2 best remaining anchors by alignment.
            kept_idx = torch.topk(align_metric * mask_pos, self.topk2, dim=-1, largest=True).indices
            mask_pos = mask_pos * torch.zeros_like(mask_pos).scatter_(-1, kept_idx, 1.0)

        fg_mask = mask_pos.sum(1) > 0  # (B, A)
        target_gt_idx = first_argmax(mask_pos, 1)  # (B, A)

        target_labels = labels.gather(1, target_gt_idx)  # (B, A)
        box_dim = gt_bboxes.shape[-1]
        target_bboxes = gt_bboxes.gather(
            1, target_gt_idx.unsqueeze(-1).expand(-1, -1, box_dim)
        )  # (B, A, 4|5)

        # Soft scores: per row t * max(u) / (max(t) + eps), maximum over rows per anchor.
        align_metric = align_metric * mask_pos
        row_max_align = align_metric.amax(-1, keepdim=True)  # (B, M, 1)
        row_max_overlap = (overlaps * mask_pos).amax(-1, keepdim=True)  # (B, M, 1)
        norm_align = (align_metric * row_max_overlap / (row_max_align + self.eps)).amax(1)  # (B, A)
        # The soft score at the assigned class, zero elsewhere and on background: the same values as
        # ``where(fg, one_hot, 0) * norm_align`` (1·s = s and 0·s = 0 exactly, s >= 0) in one (B, A, C) write.
        dtype = torch.promote_types(pd_scores.dtype, norm_align.dtype)
        soft = torch.where(fg_mask, norm_align, torch.zeros_like(norm_align)).to(dtype)
        target_scores = torch.zeros((batch, num_anchors, self.num_classes), dtype=dtype, device=device)
        target_scores.scatter_(-1, target_labels.unsqueeze(-1), soft.unsqueeze(-1))
        return Assignment(target_labels, target_bboxes, target_scores, fg_mask, target_gt_idx)

    def candidates_and_scores(
        self,
        anc_points: Tensor,
        gt_bboxes: Tensor,
        real: Tensor,
        labels: Tensor,
        pd_scores: Tensor,
        extras: Mapping[str, Tensor],
    ) -> tuple[Tensor, Tensor]:
        """Step 1 (:meth:`candidates` of real rows) and each candidate's predicted score of its row's class."""
        candidate = self.candidates(anc_points, gt_bboxes, real, extras) * real  # (B, M, A) float
        num_anchors = pd_scores.shape[1]
        # gathered along the contiguous class dimension of (B, A, C), then laid out (B, M, A) as before (so every
        # later stage, top-k included, sees the same contiguous layout)
        class_scores = (
            pd_scores.gather(2, labels.unsqueeze(1).expand(-1, num_anchors, -1)).permute(0, 2, 1).contiguous()
        )
        return candidate, torch.where(candidate > 0, class_scores, torch.zeros_like(class_scores))

    def alignment_metric(self, class_scores: Tensor, overlaps: Tensor) -> Tensor:
        """Step 3: ``t = score^alpha * u^beta``."""
        return class_scores.pow(self.alpha) * overlaps.pow(self.beta)

    def resolve_conflicts(self, in_topk: Tensor, candidate: Tensor, overlaps: Tensor) -> Tensor:
        """Steps 4-5: top-k anchors that are candidates; an anchor claimed by several rows goes to the row of
        largest overlap."""
        mask_pos = in_topk * candidate
        claimed = mask_pos.sum(1, keepdim=True)  # (B, 1, A)
        best_row = _one_hot_last(first_argmax(overlaps, 1), candidate.shape[1], mask_pos.dtype)
        best_row = best_row.permute(0, 2, 1)
        return torch.where(claimed > 1, best_row, mask_pos)

    def overlaps(
        self,
        gt_bboxes: Tensor,
        pd_bboxes: Tensor,
        is_candidate: Tensor,
        class_scores: Tensor,
        extras: Mapping[str, Tensor],
    ) -> Tensor:
        """Step 2: (B, M, A) overlap u of every (row, anchor) pair, zero outside ``is_candidate``.

        Detection: CIoU(ground truth, prediction) clamped at 0. ``class_scores`` (B, M, A) are the candidates'
        predicted probabilities of the row's class (zero elsewhere), for variants whose overlap depends on them.
        """
        ciou = bbox_ciou(gt_bboxes.unsqueeze(2), pd_bboxes.unsqueeze(1)).clamp_(min=0)  # (B, M, A)
        return torch.where(is_candidate, ciou, torch.zeros_like(ciou))

    def candidates(
        self, anc_points: Tensor, gt_bboxes: Tensor, real: Tensor, extras: Mapping[str, Tensor]
    ) -> Tensor:
        """Step 1: (B, M, A) float mask of anchor points strictly inside each row's candidate box."""
        return self._candidates(anc_points, gt_bboxes, real)

    def _candidates(self, anc_points: Tensor, gt_bboxes: Tensor, real: Tensor) -> Tensor:
        """(B, M, A) float mask of anchor points strictly inside each row's (optionally widened) box."""
        boxes = gt_bboxes
        if self.small_target_stride is not None:
            xywh = xyxy_to_xywh(gt_bboxes)
            size = xywh[..., 2:]
            widen = (size < self.small_target_stride) & (real > 0)
            size = torch.where(widen, torch.full_like(size, self.small_target_stride), size)
            boxes = xywh_to_xyxy(torch.cat((xywh[..., :2], size), -1))
        points = anc_points.view(1, 1, -1, 2)
        top_left, bottom_right = boxes.unsqueeze(2).chunk(2, dim=-1)  # (B, M, 1, 2) each
        deltas = torch.cat((points - top_left, bottom_right - points), dim=-1)  # (B, M, A, 4)
        return (deltas.amin(-1) > CANDIDATE_EPS).to(gt_bboxes.dtype)
