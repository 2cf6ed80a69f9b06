"""``--accel.fused_assignment``: the task-aligned assigner with its dense stages as Triton kernels.

:class:`FusedAssigner` wraps a ``lucid_core.assign.TaskAlignedAssigner`` (installed in place of a loss's
``assigner`` by :func:`fuse_assigners`) and passes itself as the ``stages`` of the wrapped assigner's ``assign``
(``lucid_core.assign.DenseStages``): the candidate test + class-score gather, the alignment metric and the conflict
resolution run as the kernels of :mod:`lucid_accel.kernels.assign`; overlaps, top-k and target building stay the
wrapped assigner's own code (``shared/fixtures/README.md``, section "assigner_public.pt"). The native assigner runs
instead, with one warning, where the kernels do not apply (:meth:`FusedAssigner.why_not`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from lucid_accel.kernels import assign as kernels
from lucid_accel.notices import FallbackNotices, tracing
from lucid_core.assign import TaskAlignedAssigner

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
        own = type(self.inner)
        if own.__call__ is not TaskAlignedAssigner.__call__ or own.assign is not TaskAlignedAssigner.assign:
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
        if reason is not None:
            self.notices.fallback(PATH, reason)
            return self.inner(pd_scores, pd_bboxes, anc_points, gt_labels, gt_bboxes, mask_gt, extras)
        try:  # the wrapped assigner's own steps, with this object's kernels as its dense stages
            return self.inner.assign(
                pd_scores, pd_bboxes, anc_points, gt_labels, gt_bboxes, mask_gt, extras, stages=self
            )
        except Exception as exc:  # a first launch failure: native for the rest of the run
            self.disabled = True
            self.notices.fallback(PATH, f"kernel launch failed: {type(exc).__name__}: {exc}")
            return self.inner(pd_scores, pd_bboxes, anc_points, gt_labels, gt_bboxes, mask_gt, extras)

    def candidates_and_scores(
        self,
        anc_points: Tensor,
        gt_bboxes: Tensor,
        real: Tensor,
        labels: Tensor,
        pd_scores: Tensor,
        extras: Mapping[str, Tensor],
    ) -> tuple[Tensor, Tensor]:
        """The candidate test + class-score gather kernel; a task variant's own candidate test stays its own."""
        inner = self.inner
        if type(inner).candidates is not TaskAlignedAssigner.candidates:  # e.g. rotated boxes: eager
            result: tuple[Tensor, Tensor] = inner.candidates_and_scores(
                anc_points, gt_bboxes, real, labels, pd_scores, extras
            )
            return result
        return kernels.candidates_and_scores(
            anc_points, gt_bboxes, real, labels, pd_scores, inner.small_target_stride
        )

    def alignment_metric(self, class_scores: Tensor, overlaps: Tensor) -> Tensor:
        """The alignment-metric kernel."""
        return kernels.alignment_metric(class_scores, overlaps, self.inner.alpha, self.inner.beta)

    def resolve_conflicts(self, in_topk: Tensor, candidate: Tensor, overlaps: Tensor) -> Tensor:
        """The conflict-resolution kernel."""
        return kernels.resolve_conflicts(in_topk, candidate, overlaps)


def fuse_assigners(criterion: Any, notices: FallbackNotices) -> int:
    """Replace every ``assigner`` of a lucid-core loss (its branches included) by a :class:`FusedAssigner`;
    returns how many were replaced (0 for an objective without a task-aligned assigner)."""
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
