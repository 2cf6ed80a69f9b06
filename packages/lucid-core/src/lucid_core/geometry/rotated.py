"""Rotated boxes ``(cx, cy, w, h, theta)``: ProbIoU, corner polygons and axis-aligned hulls.

ProbIoU follows shared/fixtures/README.md ("Post-processing that produced `pred`", OBB): each box is the
Gaussian with covariance built from ``(w²/12, h²/12, θ)`` and ProbIoU = 1 − Hellinger distance between the two
Gaussians (Llerena et al., "Gaussian Bounding Boxes and Probabilistic Intersection-over-Union for Object
Detection", 2021), with eps = 1e-7 placed exactly as written there; the literal evaluation order and the
variance ``floor`` follow section "obb_loss_*.pt" ("ProbIoU"), which is the same value with bit-exact gradients.
Angles are radians; the corner order is ``c + v1 + v2, c + v1 − v2, c − v1 − v2, c − v1 + v2`` with
``v1 = (w/2·cosθ, w/2·sinθ)`` and ``v2 = (−h/2·sinθ, h/2·cosθ)`` (same README section).

:func:`rboxes_to_polygons` is the one definition of those corners in the project: the assigner, the evaluators,
the data pipeline (``lucid_data``'s readers and augmentation) and the drawings (``lucid_viz``) all call it, on
tensors or on NumPy arrays.
"""

from __future__ import annotations

import math
from typing import Any, overload

import numpy as np
import torch
from torch import Tensor

PROBIOU_EPS = 1e-7


def _check_rboxes(name: str, boxes: Tensor | np.ndarray) -> None:
    if boxes.ndim < 1 or boxes.shape[-1] != 5:
        raise ValueError(
            f"{name}: expected rotated boxes with last dimension 5 (cx, cy, w, h, theta), got {tuple(boxes.shape)}"
        )


def _covariance_terms(boxes: Tensor, floor: float) -> tuple[Tensor, Tensor, Tensor]:
    """Covariance entries ``(A, B, C)`` of the Gaussian of each box (fixture README "ProbIoU").

    ``a = w²/12 + floor``, ``b = h²/12 + floor`` (square, ÷12, + floor, in this order), then
    ``A = a·cos²θ + b·sin²θ``, ``B = a·sin²θ + b·cos²θ``, ``C = (a − b)·cosθ·sinθ``; squares as ``pow(2)``.
    """
    a = boxes[..., 2].pow(2) / 12 + floor
    b = boxes[..., 3].pow(2) / 12 + floor
    cos = torch.cos(boxes[..., 4])
    sin = torch.sin(boxes[..., 4])
    return (
        a * cos.pow(2) + b * sin.pow(2),
        a * sin.pow(2) + b * cos.pow(2),
        (a - b) * cos * sin,
    )


def _probiou_broadcast(boxes1: Tensor, boxes2: Tensor, eps: float, floor: float) -> Tensor:
    """ProbIoU evaluated literally as the fixture README writes it (bit-exact values *and* gradients).

    Every occurrence of ``A1 + A2``, ``B1 + B2``, ``C1 + C2`` and of ``D = (A1 + A2)(B1 + B2) − (C1 + C2)²`` is
    its own expression (a shared sum changes the gradients by up to 6e-8, README "ProbIoU").
    """
    x1, y1 = boxes1[..., 0], boxes1[..., 1]
    x2, y2 = boxes2[..., 0], boxes2[..., 1]
    a1, b1, c1 = _covariance_terms(boxes1, floor)
    a2, b2, c2 = _covariance_terms(boxes2, floor)
    t1 = (
        ((a1 + a2) * (y1 - y2).pow(2) + (b1 + b2) * (x1 - x2).pow(2))
        / ((a1 + a2) * (b1 + b2) - (c1 + c2).pow(2) + eps)
        * 0.25
    )
    t2 = ((c1 + c2) * (x2 - x1) * (y1 - y2)) / ((a1 + a2) * (b1 + b2) - (c1 + c2).pow(2) + eps) * 0.5
    det1 = (a1 * b1 - c1.pow(2)).clamp(min=0)
    det2 = (a2 * b2 - c2.pow(2)).clamp(min=0)
    t3 = (
        torch.log(((a1 + a2) * (b1 + b2) - (c1 + c2).pow(2)) / (4 * torch.sqrt(det1 * det2) + eps) + eps)
        * 0.5
    )
    bhattacharyya = (t1 + t2 + t3).clamp(eps, 100.0)
    hellinger = torch.sqrt(1.0 - torch.exp(-bhattacharyya) + eps)
    return 1.0 - hellinger


def probiou(
    boxes1: Tensor,
    boxes2: Tensor,
    *,
    pairwise: bool = True,
    eps: float = PROBIOU_EPS,
    floor: float = 0.0,
) -> Tensor:
    """ProbIoU of rotated boxes ``(..., 5)`` as ``(cx, cy, w, h, theta)``.

    ``pairwise=True``: ``boxes1 (N, 5)``, ``boxes2 (M, 5)`` → ``(N, M)``.
    ``pairwise=False``: elementwise over broadcastable leading dimensions → ``(...)``.
    ``floor`` is added to both variances (``w²/12 + floor``): 0 for NMS and the rotated assigner, 0.01 (grid
    units²) for the OBB box loss (fixture README "obb_loss_*.pt", constants ``probiou_floor_*``).
    """
    _check_rboxes("boxes1", boxes1)
    _check_rboxes("boxes2", boxes2)
    if pairwise:
        if boxes1.ndim != 2 or boxes2.ndim != 2:
            raise ValueError(
                f"probiou(pairwise=True) needs (N, 5) and (M, 5) boxes, got {tuple(boxes1.shape)} and {tuple(boxes2.shape)}"
            )
        return _probiou_broadcast(boxes1[:, None, :], boxes2[None, :, :], eps, floor)
    return _probiou_broadcast(boxes1, boxes2, eps, floor)


@overload
def rboxes_to_polygons(rboxes: Tensor) -> Tensor: ...
@overload
def rboxes_to_polygons(rboxes: np.ndarray) -> np.ndarray: ...
def rboxes_to_polygons(rboxes: Tensor | np.ndarray) -> Tensor | np.ndarray:
    """``(..., 5)`` rotated boxes → ``(..., 4, 2)`` corners ``c+v1+v2, c+v1−v2, c−v1−v2, c−v1+v2``.

    A tensor is computed with torch (autograd flows through), a NumPy array with NumPy in its own dtype: the data
    pipeline's float64 labels keep NumPy's ``cos``/``sin``, whose last bit can differ from torch's vectorised
    ones, so the augmentation bytes do not depend on which library a caller happens to use.
    """
    _check_rboxes("rboxes", rboxes)
    xp: Any = np if isinstance(rboxes, np.ndarray) else torch
    ctr = rboxes[..., :2]
    w, h, theta = rboxes[..., 2:3], rboxes[..., 3:4], rboxes[..., 4:5]
    cos, sin = xp.cos(theta), xp.sin(theta)
    v1 = xp.concatenate((w / 2 * cos, w / 2 * sin), -1)
    v2 = xp.concatenate((-h / 2 * sin, h / 2 * cos), -1)
    corners: Tensor | np.ndarray = xp.stack((ctr + v1 + v2, ctr + v1 - v2, ctr - v1 - v2, ctr - v1 + v2), -2)
    return corners


def polygons_to_xyxy(polygons: Tensor) -> Tensor:
    """``(..., P, 2)`` polygons → ``(..., 4)`` axis-aligned hull ``x1, y1, x2, y2``."""
    mins = polygons.amin(-2)
    maxs = polygons.amax(-2)
    return torch.cat((mins, maxs), -1)


def rboxes_to_xyxy(rboxes: Tensor) -> Tensor:
    """``(..., 5)`` rotated boxes → ``(..., 4)`` axis-aligned hull of their corners."""
    return polygons_to_xyxy(rboxes_to_polygons(rboxes))


def polygons_to_rboxes(polygons: Tensor) -> Tensor:
    """Minimum-area enclosing rectangle of each quadrilateral ``(..., 4, 2)`` → ``(..., 5)``.

    The minimum-area rectangle of a convex polygon has a side collinear with one of the polygon's edges
    (Freeman & Shapira 1975, rotating calipers), so each of the four edge directions is tried. The result's
    ``theta`` is the direction of the chosen edge folded into ``[0, π/2)`` and ``w`` is the extent along that
    direction, so that ``rboxes_to_polygons`` reproduces the rectangle. Degenerate (zero-length) edges are skipped.
    """
    if polygons.ndim < 2 or polygons.shape[-2:] != (4, 2):
        raise ValueError(f"polygons: expected (..., 4, 2), got {tuple(polygons.shape)}")
    pts = polygons.to(torch.float64)
    edges = torch.roll(pts, -1, dims=-2) - pts  # (..., 4, 2)
    angles = torch.atan2(edges[..., 1], edges[..., 0]).remainder(math.pi / 2)  # (..., 4)
    cos, sin = torch.cos(angles), torch.sin(angles)
    # project every point on each candidate frame: u along the edge, v across it
    u = (
        pts[..., None, :, 0] * cos[..., :, None] + pts[..., None, :, 1] * sin[..., :, None]
    )  # (..., 4 frames, 4 pts)
    v = -pts[..., None, :, 0] * sin[..., :, None] + pts[..., None, :, 1] * cos[..., :, None]
    u_min, u_max = u.amin(-1), u.amax(-1)
    v_min, v_max = v.amin(-1), v.amax(-1)
    area = (u_max - u_min) * (v_max - v_min)
    degenerate = edges.norm(dim=-1) <= 1e-12
    area = area.masked_fill(degenerate, float("inf"))
    best = area.argmin(-1, keepdim=True)

    def pick(t: Tensor) -> Tensor:
        return torch.gather(t, -1, best).squeeze(-1)

    th = pick(angles)
    uc = (pick(u_min) + pick(u_max)) / 2
    vc = (pick(v_min) + pick(v_max)) / 2
    cx = uc * torch.cos(th) - vc * torch.sin(th)
    cy = uc * torch.sin(th) + vc * torch.cos(th)
    w = pick(u_max) - pick(u_min)
    h = pick(v_max) - pick(v_min)
    return torch.stack((cx, cy, w, h, th), -1).to(
        polygons.dtype if polygons.is_floating_point() else torch.float32
    )
