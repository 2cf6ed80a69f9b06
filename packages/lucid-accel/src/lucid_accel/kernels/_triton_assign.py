"""The Triton kernels of :mod:`lucid_accel.kernels.assign` (imported lazily: this module needs Triton).

Decorated at import time: in a process with ``TRITON_INTERPRET=1`` they are Triton's interpreted functions (CPU
tests), otherwise compiled GPU kernels. See :mod:`lucid_accel.kernels.assign` for the exactness rules.
"""

# mypy: disable-error-code="untyped-decorator,no-untyped-def,misc"
from __future__ import annotations

import os
from typing import Any

import torch

from lucid_accel.capabilities import TRITON_EXTRA_HINT

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"

try:
    import triton
    import triton.language as tl
    from triton.language.extra import libdevice as _cuda_libdevice
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(TRITON_EXTRA_HINT) from exc


def _on_host(x: Any, op: Any) -> Any:
    # Triton's interpreter module, loaded only when a kernel runs under TRITON_INTERPRET=1
    from triton.runtime.interpreter import TensorHandle

    data = op(torch.from_numpy(x.handle.data)).numpy()
    return tl.core.tensor(TensorHandle(data, x.handle.dtype), x.type)


def _host_pow(x: Any, exponent: Any) -> Any:
    """Interpreter-only ``powf``: ``torch.pow`` on the block's host data (the CPU eager arithmetic)."""
    value = float(exponent.value if hasattr(exponent, "value") else exponent)
    return _on_host(x, lambda t: t.pow(value))


def _host_sqrt_rn(x: Any) -> Any:
    """Interpreter-only square root: ``torch.sqrt`` on the host (the CPU eager arithmetic, which is not
    numpy's on every build)."""
    return _on_host(x, torch.sqrt)


class _HostLibdevice:
    """Stands in for ``triton.language.extra.libdevice`` under the interpreter (which has no extern calls):
    the transcendental functions are the host platform's, everything else runs in the interpreter."""

    pow = staticmethod(_host_pow)
    sqrt_rn = staticmethod(_host_sqrt_rn)


libdevice: Any = _HostLibdevice if INTERPRETED else _cuda_libdevice


@triton.jit
def _pow(x, exponent: tl.constexpr, mode: tl.constexpr):
    if mode == 0:
        y = tl.full(x.shape, 1.0, tl.float32)
    elif mode == 1:
        y = x
    elif mode == 2:
        y = libdevice.sqrt_rn(x)
    elif mode == 3:
        y = x * x
    elif mode == 4:
        y = x * x * x
    else:
        y = libdevice.pow(x, exponent)
    return y


@triton.jit
def candidates_kernel(
    anchors_ptr,
    boxes_ptr,
    real_ptr,
    labels_ptr,
    scores_ptr,
    candidate_ptr,
    class_scores_ptr,
    num_rows,
    num_anchors,
    num_classes,
    small_stride,
    WIDEN: tl.constexpr,
    EPS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)  # b * M + m
    block = tl.program_id(1)
    image = row // num_rows
    anchor = block * BLOCK + tl.arange(0, BLOCK)
    valid = anchor < num_anchors
    x1 = tl.load(boxes_ptr + row * 4 + 0)
    y1 = tl.load(boxes_ptr + row * 4 + 1)
    x2 = tl.load(boxes_ptr + row * 4 + 2)
    y2 = tl.load(boxes_ptr + row * 4 + 3)
    real = tl.load(real_ptr + row)
    if WIDEN:
        # xyxy -> xywh, widen sides shorter than the stride (real rows only), xywh -> xyxy (eager order)
        cx = tl.math.div_rn(x1 + x2, 2.0)
        cy = tl.math.div_rn(y1 + y2, 2.0)
        w = x2 - x1
        h = y2 - y1
        w = tl.where((w < small_stride) & (real > 0), small_stride, w)
        h = tl.where((h < small_stride) & (real > 0), small_stride, h)
        half_w = tl.math.div_rn(w, 2.0)
        half_h = tl.math.div_rn(h, 2.0)
        x1 = cx - half_w
        y1 = cy - half_h
        x2 = cx + half_w
        y2 = cy + half_h
    px = tl.load(anchors_ptr + anchor * 2 + 0, mask=valid, other=0.0)
    py = tl.load(anchors_ptr + anchor * 2 + 1, mask=valid, other=0.0)
    inside = ((px - x1) > EPS) & ((py - y1) > EPS) & ((x2 - px) > EPS) & ((y2 - py) > EPS)
    candidate = tl.where(inside, 1.0, 0.0) * real
    label = tl.load(labels_ptr + row)
    score = tl.load(
        scores_ptr + (image * num_anchors + anchor).to(tl.int64) * num_classes + label,
        mask=valid & (candidate > 0),
        other=0.0,
    )
    class_score = tl.where(candidate > 0, score, 0.0)
    out = row.to(tl.int64) * num_anchors + anchor
    tl.store(candidate_ptr + out, candidate, mask=valid)
    tl.store(class_scores_ptr + out, class_score, mask=valid)


@triton.jit
def metric_kernel(
    scores_ptr,
    overlaps_ptr,
    out_ptr,
    numel,
    ALPHA: tl.constexpr,
    ALPHA_MODE: tl.constexpr,
    BETA: tl.constexpr,
    BETA_MODE: tl.constexpr,
    BLOCK: tl.constexpr,
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    valid = offs < numel
    score = tl.load(scores_ptr + offs, mask=valid, other=0.0)
    overlap = tl.load(overlaps_ptr + offs, mask=valid, other=0.0)
    metric = _pow(score, ALPHA, ALPHA_MODE) * _pow(overlap, BETA, BETA_MODE)
    tl.store(out_ptr + offs, metric, mask=valid)


@triton.jit
def conflicts_kernel(
    in_topk_ptr,
    candidate_ptr,
    overlaps_ptr,
    out_ptr,
    num_rows,
    num_anchors,
    BLOCK: tl.constexpr,
):
    image = tl.program_id(0)
    anchor = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    valid = anchor < num_anchors
    base = image.to(tl.int64) * num_rows * num_anchors + anchor
    claimed = tl.full((BLOCK,), 0.0, tl.float32)
    best = tl.full((BLOCK,), float("-inf"), tl.float32)
    best_row = tl.full((BLOCK,), 0, tl.int32)
    best_nan = tl.full((BLOCK,), 0, tl.int1)
    for m in range(num_rows):
        at = base + m * num_anchors
        mask = tl.load(in_topk_ptr + at, mask=valid, other=0.0) * tl.load(
            candidate_ptr + at, mask=valid, other=0.0
        )
        claimed = claimed + mask
        overlap = tl.load(overlaps_ptr + at, mask=valid, other=0.0)
        is_nan = overlap != overlap
        # argmax: the first maximum wins; NaN is larger than everything and the first NaN wins
        take = (~best_nan) & (is_nan | (overlap > best) | (m == 0))
        best = tl.where(take, overlap, best)
        best_row = tl.where(take, m, best_row)
        best_nan = best_nan | is_nan
    for m in range(num_rows):
        at = base + m * num_anchors
        mask = tl.load(in_topk_ptr + at, mask=valid, other=0.0) * tl.load(
            candidate_ptr + at, mask=valid, other=0.0
        )
        resolved = tl.where(claimed > 1, tl.where(best_row == m, 1.0, 0.0), mask)
        tl.store(out_ptr + at, resolved, mask=valid)
