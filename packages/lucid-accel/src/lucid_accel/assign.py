"""``--accel.fused_assignment``: the task-aligned assigner with its dense stages as Triton kernels (issue 19).

:class:`FusedAssigner` wraps a ``lucid_core.assign.TaskAlignedAssigner`` (it is installed in place of a loss's
``assigner`` by :func:`fuse_assigners`) and runs the assigner's own steps (``shared/fixtures/README.md``, section
"assigner_public.pt"), with the candidate test + class-score gather, the alignment metric and the conflict
resolution replaced by the kernels of :mod:`lucid_accel.kernels.assign`. The overlap (the task seam ``overlaps``),
top-k and target building are the wrapped assigner's / native. A task variant that overrides the candidate test
keeps its own test (only the gather, metric and conflict kernels apply).

The native assigner runs instead — with one warning — when the kernels do not apply: no Triton, a non-CUDA device
(CPU tests set ``TRITON_INTERPRET=1`` to run the kernels on the host), a non-float32 input, tracing/compiling,
exponents the metric kernel declines, or a first launch that fails.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from lucid_accel.kernels import assign as kernels
from lucid_accel.notices import FallbackNotices, tracing

PATH = "fused_assignment"


class FusedAssigner:
    """A task-aligned assigner whose dense stages run as Triton kernels; attributes forward to ``inner``."""

    def __init__(self, inner: Any, notices: FallbackNotices | None = None) -> None:
        self.inner = inner
        self.notices = notices if notices is not None else FallbackNotices()
        self.disabled = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["inner"], name)

    def __repr__(self) -> str:
        return f"FusedAssigner({self.inner!r})"

    def why_not(self, pd_scores: Tensor, pd_bboxes: Tensor, gt_bboxes: Tensor) -> str | None:
        """The reason the kernels do not apply to these inputs, or None when they do."""
        if self.disabled:
            return "disabled after a failed launch"
        from lucid_core.assign import TaskAlignedAssigner

        if type(self.inner).__call__ is not TaskAlignedAssigner.__call__:
            return f"{type(self.inner).__name__} has its own assignment pipeline"
        if importlib.util.find_spec("triton") is None:
            return "triton is not installed (pip install 'lucid-accel[cuda]')"
        if pd_scores.device.type != "cuda" and not kernels.interpreting():
            return f"device {pd_scores.device.type} (the kernels need CUDA)"
        dtypes = {pd_scores.dtype, pd_bboxes.dtype, gt_bboxes.dtype}
        if dtypes != {torch.float32}:
            return f"dtypes {sorted(str(d) for d in dtypes)} (the kernels take float32)"
        if gt_bboxes.shape[-1] != 4:
            return f"boxes with {gt_bboxes.shape[-1]} coordinates (the kernels take xyxy)"
        if tracing():
            return "tracing/compiling"
        if kernels.pow_mode(self.inner.alpha) is None or kernels.pow_mode(self.inner.beta) is None:
            return f"exponents alpha={self.inner.alpha}, beta={self.inner.beta}"
        return None

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
    ) -> Any:
        reason = self.why_not(pd_scores, pd_bboxes, gt_bboxes)
        if reason is None and gt_bboxes.shape[1] == 0:
            return self.inner(pd_scores, pd_bboxes, anc_points, gt_labels, gt_bboxes, mask_gt, extras)
        if reason is not None:
            self.notices.fallback(PATH, reason)
            return self.inner(pd_scores, pd_bboxes, anc_points, gt_labels, gt_bboxes, mask_gt, extras)
        try:
            return self._fused(pd_scores, pd_bboxes, anc_points, gt_labels, gt_bboxes, mask_gt, extras)
        except Exception as exc:  # a first launch failure: native for the rest of the run
            self.disabled = True
            self.notices.fallback(PATH, f"kernel launch failed: {type(exc).__name__}: {exc}")
            return self.inner(pd_scores, pd_bboxes, anc_points, gt_labels, gt_bboxes, mask_gt, extras)

    def _fused(
        self,
        pd_scores: Tensor,
        pd_bboxes: Tensor,
        anc_points: Tensor,
        gt_labels: Tensor,
        gt_bboxes: Tensor,
        mask_gt: Tensor,
        extras: Mapping[str, Tensor] | None,
    ) -> Any:
        """The wrapped assigner's ``__call__`` (lucid_core.assign.task_aligned) with the three kernels."""
        from lucid_core.assign import Assignment, TaskAlignedAssigner
        from lucid_core.assign.task_aligned import _one_hot_last

        inner = self.inner
        extras = {} if extras is None else extras
        _, num_anchors, num_classes = pd_scores.shape
        if num_classes != inner.num_classes:
            raise ValueError(
                f"TaskAlignedAssigner: pd_scores has {num_classes} classes, assigner built for {inner.num_classes}"
            )
        real = mask_gt.to(pd_scores.dtype)  # (B, M, 1)
        labels = gt_labels.long().squeeze(-1).clamp(min=0)  # (B, M)
        if type(inner).candidates is TaskAlignedAssigner.candidates:
            candidate, class_scores = kernels.candidates_and_scores(
                anc_points, gt_bboxes, real, labels, pd_scores, inner.small_target_stride
            )
        else:  # a task variant's own candidate test (e.g. rotated boxes); the gather stays eager
            candidate = inner.candidates(anc_points, gt_bboxes, real, extras) * real
            class_scores = pd_scores.permute(0, 2, 1).gather(
                1, labels.unsqueeze(-1).expand(-1, -1, num_anchors)
            )
            class_scores = torch.where(candidate > 0, class_scores, torch.zeros_like(class_scores))
        is_candidate = candidate > 0
        overlaps = inner.overlaps(gt_bboxes, pd_bboxes, is_candidate, class_scores, extras)
        align_metric = kernels.alignment_metric(class_scores, overlaps, inner.alpha, inner.beta)

        topk_idx = torch.topk(align_metric, inner.topk, dim=-1, largest=True).indices  # (B, M, k)
        in_topk = torch.zeros_like(align_metric).scatter_(-1, topk_idx, 1.0)
        mask_pos = kernels.resolve_conflicts(in_topk, candidate, overlaps)

        if inner.topk2 != inner.topk:
            kept_idx = torch.topk(align_metric * mask_pos, inner.topk2, dim=-1, largest=True).indices
            mask_pos = mask_pos * torch.zeros_like(mask_pos).scatter_(-1, kept_idx, 1.0)

        fg_mask = mask_pos.sum(1) > 0  # (B, A)
        target_gt_idx = mask_pos.argmax(1)  # (B, A)
        target_labels = labels.gather(1, target_gt_idx)  # (B, A)
        box_dim = gt_bboxes.shape[-1]
        target_bboxes = gt_bboxes.gather(1, target_gt_idx.unsqueeze(-1).expand(-1, -1, box_dim))

        align_metric = align_metric * mask_pos
        row_max_align = align_metric.amax(-1, keepdim=True)  # (B, M, 1)
        row_max_overlap = (overlaps * mask_pos).amax(-1, keepdim=True)  # (B, M, 1)
        norm_align = (align_metric * row_max_overlap / (row_max_align + inner.eps)).amax(1)  # (B, A)
        one_hot = _one_hot_last(target_labels, inner.num_classes, pd_scores.dtype)
        target_scores = torch.where(
            fg_mask.unsqueeze(-1), one_hot, torch.zeros_like(one_hot)
        ) * norm_align.unsqueeze(-1)
        return Assignment(target_labels, target_bboxes, target_scores, fg_mask, target_gt_idx)


def fuse_assigners(criterion: Any, notices: FallbackNotices) -> int:
    """Replace every ``assigner`` of a lucid-core loss (its branches included) by a :class:`FusedAssigner`;
    returns how many were replaced (0 for an objective without a task-aligned assigner)."""
    from lucid_core.assign import TaskAlignedAssigner

    count = 0
    seen: set[int] = set()
    stack = [criterion]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        assigner = getattr(obj, "assigner", None)
        if isinstance(assigner, FusedAssigner):  # attached by an earlier fit of the same objective
            assigner.notices = notices
            count += 1
        elif isinstance(assigner, TaskAlignedAssigner):
            obj.assigner = FusedAssigner(assigner, notices)
            count += 1
        for name in ("one2many", "one2one"):
            branch = getattr(obj, name, None)
            if branch is not None and not isinstance(branch, Tensor):
                stack.append(branch)
    return count
