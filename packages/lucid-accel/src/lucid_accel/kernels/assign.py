"""Triton kernels for the dense stages of task-aligned assignment (``--accel.fused_assignment``).

Each kernel writes the same values as the eager expressions of ``lucid_core.assign.task_aligned``
(``shared/fixtures/README.md``, section "assigner_public.pt"): :func:`candidates_and_scores` (step 1 and the
class-score gather), :func:`alignment_metric` (step 3) and :func:`resolve_conflicts` (steps 4 and 5). Float32
only; IEEE round-to-nearest division and square root, no flush-to-zero and no multiply-add contraction outside
libdevice's ``powf`` (:func:`_launch_options`). Under ``TRITON_INTERPRET=1`` (CPU tests) ``powf`` and ``sqrt_rn``
run as ``torch.pow`` / ``torch.sqrt`` on the host, so everything else is compared with the CPU eager expressions
bit for bit. Triton is imported on first use (:func:`load_kernels`): importing this module never needs it.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

import torch
from torch import Tensor

#: the candidate test's strict-inside margin (``lucid_core.assign.task_aligned.CANDIDATE_EPS``).
CANDIDATE_EPS = 1e-9
BLOCK_ANCHORS = 256
#: exponents ``Tensor.pow`` computes without ``powf`` (ATen's pow kernels), mirrored by the metric kernel.
POW_MODES: dict[float, int] = {0.0: 0, 1.0: 1, 0.5: 2, 2.0: 3, 3.0: 4}
POW_GENERAL = 5
#: exponents ATen maps to reciprocal/rsqrt forms; the fused metric declines them (native fallback).
UNSUPPORTED_EXPONENTS = frozenset({-0.5, -1.0, -2.0})


def interpreting() -> bool:
    """True when Triton runs kernels in its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def pow_mode(exponent: float) -> int | None:
    """The metric kernel's code for ``x.pow(exponent)``, or None when the fused path declines the exponent."""
    exponent = float(exponent)
    if exponent in UNSUPPORTED_EXPONENTS:
        return None
    return POW_MODES.get(exponent, POW_GENERAL)


def load_kernels() -> ModuleType:
    """The kernel module, decorated for the current ``TRITON_INTERPRET`` mode; ImportError without Triton."""
    from lucid_accel.kernels import _triton_assign  # needs triton: the [cuda] extra

    if interpreting() != _triton_assign.INTERPRETED:
        _triton_assign = importlib.reload(_triton_assign)
    return _triton_assign


def _launch_options(fp_fusion: bool = False) -> dict[str, Any]:
    """Compile options of a launch: libdevice without flush-to-zero (``enable_reflect_ftz=False``: the eager CUDA
    kernels keep subnormals) and multiply-add contraction off, except for the metric kernel, whose only
    contractable pairs are inside libdevice's ``powf`` — contracted there as NVVM (``-fmad=true``, nvcc's
    default) contracts the same libdevice ``powf`` that the eager CUDA ``pow`` calls."""
    if interpreting():
        return {}
    return {"enable_fp_fusion": fp_fusion, "enable_reflect_ftz": False}


def _float32(*tensors: Tensor) -> None:
    for t in tensors:
        if t.dtype != torch.float32:
            raise TypeError(f"fused assignment kernels take float32 tensors, got {t.dtype}")


def candidates_and_scores(
    anc_points: Tensor,
    gt_bboxes: Tensor,
    real: Tensor,
    labels: Tensor,
    pd_scores: Tensor,
    small_target_stride: float | None,
) -> tuple[Tensor, Tensor]:
    """``(candidate, class_scores)``, both (B, M, A) float32, from anchors (A, 2), boxes (B, M, 4) xyxy,
    ``real`` (B, M, 1), class ids ``labels`` (B, M) int64 (already clamped at 0) and ``pd_scores`` (B, A, C).

    ``candidate = inside(anchor, box) · real``, inside meaning all four side distances ``> CANDIDATE_EPS`` (the box
    widened to ``small_target_stride`` around its centre when given); ``class_scores = pd_scores[b, a, label]``
    where ``candidate > 0``, else 0.
    """
    _float32(anc_points, gt_bboxes, real, pd_scores)
    k = load_kernels()
    batch, rows = gt_bboxes.shape[:2]
    num_anchors, num_classes = pd_scores.shape[1], pd_scores.shape[2]
    candidate = torch.empty((batch, rows, num_anchors), dtype=torch.float32, device=pd_scores.device)
    class_scores = torch.empty_like(candidate)
    grid = (batch * rows, k.triton.cdiv(num_anchors, BLOCK_ANCHORS))
    k.candidates_kernel[grid](
        anc_points.contiguous(),
        gt_bboxes.contiguous(),
        real.contiguous(),
        labels.contiguous(),
        pd_scores.contiguous(),
        candidate,
        class_scores,
        rows,
        num_anchors,
        num_classes,
        float(small_target_stride or 0.0),
        WIDEN=small_target_stride is not None,
        EPS=CANDIDATE_EPS,
        BLOCK=BLOCK_ANCHORS,
        **_launch_options(),
    )
    return candidate, class_scores


def alignment_metric(class_scores: Tensor, overlaps: Tensor, alpha: float, beta: float) -> Tensor:
    """``class_scores.pow(alpha) * overlaps.pow(beta)`` for (B, M, A) float32 tensors, with ``Tensor.pow``'s own
    special exponents (0, 1, 0.5, 2, 3; :data:`POW_MODES`) and ``powf`` otherwise; ValueError for the exponents
    in :data:`UNSUPPORTED_EXPONENTS`."""
    _float32(class_scores, overlaps)
    alpha_mode, beta_mode = pow_mode(alpha), pow_mode(beta)
    if alpha_mode is None or beta_mode is None:
        raise ValueError(f"fused alignment metric: exponents {alpha}, {beta} are not supported")
    k = load_kernels()
    scores, ov = class_scores.contiguous(), overlaps.contiguous()
    out = torch.empty_like(scores)
    block = 1024
    k.metric_kernel[(k.triton.cdiv(out.numel(), block),)](
        scores,
        ov,
        out,
        out.numel(),
        ALPHA=float(alpha),
        ALPHA_MODE=alpha_mode,
        BETA=float(beta),
        BETA_MODE=beta_mode,
        BLOCK=block,
        **_launch_options(fp_fusion=True),
    )
    return out


def resolve_conflicts(in_topk: Tensor, candidate: Tensor, overlaps: Tensor) -> Tensor:
    """``mask = in_topk · candidate``, then anchors with more than one claiming row (the sum over rows, in row
    order) go to the row of largest overlap (``argmax``: first maximum, NaN counts as the maximum): the (B, M, A)
    float32 ``mask_pos`` of step 5."""
    _float32(in_topk, candidate, overlaps)
    k = load_kernels()
    batch, rows, num_anchors = overlaps.shape
    out = torch.empty((batch, rows, num_anchors), dtype=torch.float32, device=overlaps.device)
    grid = (batch, k.triton.cdiv(num_anchors, BLOCK_ANCHORS))
    k.conflicts_kernel[grid](
        in_topk.contiguous(),
        candidate.contiguous(),
        overlaps.contiguous(),
        out,
        rows,
        num_anchors,
        BLOCK=BLOCK_ANCHORS,
        **_launch_options(),
    )
    return out
