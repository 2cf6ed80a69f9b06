"""Exact area and IoU of convex polygons (oriented boxes), batched: no per-pair Python loop.

The intersection of two convex polygons is computed with Sutherland–Hodgman clipping (Sutherland & Hodgman,
"Reentrant polygon clipping", CACM 17(1), 1974): the subject polygon is clipped in turn by the half-plane left of
each edge of the (counter-clockwise) clip polygon. Clipping a convex polygon by one half-plane adds at most one
vertex, so every intermediate polygon of a ``P``-gon clipped by a ``Q``-gon fits in ``P + Q`` slots; all pairs are
clipped at once on padded ``(..., P + Q, 2)`` vertex arrays with a per-pair vertex count. Areas are the shoelace
formula. This is the IoU the DOTA devkit uses for Task 1 (its ``polyiou`` extension: exact polygon
intersection over union); degenerate pairs (zero union) get IoU 0.

Inputs may be clockwise or counter-clockwise (each polygon is reoriented by the sign of its shoelace area) but
must be convex: DOTA quadrilaterals and ``rboxes_to_polygons`` corners are. Computation is in float64 unless the
caller passes another floating dtype explicitly.
"""

from __future__ import annotations

import torch
from torch import Tensor

from lucid_core.geometry.rotated import polygons_to_xyxy, rboxes_to_polygons

#: pairs per chunk in `pairwise_polygon_iou` / `paired_polygon_iou` (bounds memory to ~100 MB for quadrilaterals)
PAIR_CHUNK = 262_144


def polygon_area(polygons: Tensor) -> Tensor:
    """Unsigned shoelace area of simple polygons ``(..., P, 2)`` → ``(...)``."""
    return signed_polygon_area(polygons).abs()


def signed_polygon_area(polygons: Tensor) -> Tensor:
    """Shoelace area ``(..., P, 2)`` → ``(...)``: positive for counter-clockwise vertices (y up)."""
    x, y = polygons[..., 0], polygons[..., 1]
    return 0.5 * (x * torch.roll(y, -1, -1) - torch.roll(x, -1, -1) * y).sum(-1)


def _counter_clockwise(polygons: Tensor) -> Tensor:
    flip = signed_polygon_area(polygons) < 0
    return torch.where(flip[..., None, None], polygons.flip(-2), polygons)


def _check_polygons(name: str, polygons: Tensor) -> None:
    if polygons.ndim < 2 or polygons.shape[-1] != 2 or polygons.shape[-2] < 3:
        raise ValueError(f"{name}: expected polygons (..., P >= 3, 2), got {tuple(polygons.shape)}")


def convex_intersection_area(subject: Tensor, clip: Tensor) -> Tensor:
    """Area of the intersection of convex polygons ``(..., P, 2)`` and ``(..., Q, 2)`` (broadcast) → ``(...)``.

    Sutherland–Hodgman on padded vertex arrays (module docstring); a vertex exactly on a clip edge counts as
    inside, so touching polygons give area 0 and identical ones their own area (to rounding).
    """
    _check_polygons("subject", subject)
    _check_polygons("clip", clip)
    dtype = torch.promote_types(subject.dtype, clip.dtype)
    if not dtype.is_floating_point:
        dtype = torch.float64
    subject = _counter_clockwise(subject.to(dtype))
    clip = _counter_clockwise(clip.to(dtype))
    batch = (subject[..., 0, 0] + clip[..., 0, 0]).shape  # broadcast leading dims (no sympy import)
    p, q = subject.shape[-2], clip.shape[-2]
    cap = p + q
    pts = subject.new_zeros((*batch, cap, 2))
    pts[..., :p, :] = subject.expand(*batch, p, 2)
    count = torch.full(batch, p, dtype=torch.int64, device=subject.device)
    clip = clip.expand(*batch, q, 2)
    slots = torch.arange(cap, device=subject.device)
    for k in range(q):
        a = clip[..., k, :]  # (..., 2)
        edge = clip[..., (k + 1) % q, :] - a
        valid = slots < count[..., None]  # (..., cap)
        nxt = torch.where(slots + 1 < count[..., None], slots + 1, 0)
        cur = pts
        following = torch.gather(pts, -2, nxt[..., None].expand(*nxt.shape, 2))
        rel_c = cur - a[..., None, :]
        rel_n = following - a[..., None, :]
        side_c = edge[..., None, 0] * rel_c[..., 1] - edge[..., None, 1] * rel_c[..., 0]
        side_n = edge[..., None, 0] * rel_n[..., 1] - edge[..., None, 1] * rel_n[..., 0]
        in_c = side_c >= 0
        in_n = side_n >= 0
        crossing = valid & (in_c != in_n)
        denom = torch.where(crossing, side_c - side_n, torch.ones_like(side_c))
        t = (side_c / denom)[..., None]
        crossing_pt = cur + t * (following - cur)
        # each vertex emits itself (if inside) then the crossing point of its outgoing edge (if any)
        candidates = torch.stack((cur, crossing_pt), -2).reshape(*batch, 2 * cap, 2)
        keep = torch.stack((valid & in_c, crossing), -1).reshape(*batch, 2 * cap)
        # stable compaction of the kept candidates to the front
        order = torch.argsort((~keep).to(torch.int8), dim=-1, stable=True)[..., :cap]
        pts = torch.gather(candidates, -2, order[..., None].expand(*order.shape, 2))
        count = keep.sum(-1)
    valid = slots < count[..., None]
    nxt = torch.where(slots + 1 < count[..., None], slots + 1, 0)
    following = torch.gather(pts, -2, nxt[..., None].expand(*nxt.shape, 2))
    cross = pts[..., 0] * following[..., 1] - following[..., 0] * pts[..., 1]
    area = 0.5 * torch.where(valid, cross, torch.zeros_like(cross)).sum(-1)
    return torch.where(count >= 3, area, torch.zeros_like(area)).clamp(min=0)


def _check_paired(polygons1: Tensor, polygons2: Tensor, what: str) -> tuple[Tensor, Tensor]:
    _check_polygons("polygons1", polygons1)
    _check_polygons("polygons2", polygons2)
    if polygons1.ndim != 3 or polygons2.ndim != 3 or polygons1.shape[0] != polygons2.shape[0]:
        raise ValueError(
            f"{what} needs (N, P, 2) and (N, Q, 2), got {tuple(polygons1.shape)} and {tuple(polygons2.shape)}"
        )
    dtype = torch.promote_types(polygons1.dtype, polygons2.dtype)
    if not dtype.is_floating_point:
        dtype = torch.float64
    return polygons1.to(dtype), polygons2.to(dtype)


def paired_intersection_area(polygons1: Tensor, polygons2: Tensor) -> Tensor:
    """Intersection areas of convex polygons pair by pair: ``(N, P, 2)``, ``(N, Q, 2)`` → ``(N,)``.

    Pairs whose axis-aligned hulls do not overlap are 0 without clipping; the others are clipped in chunks of
    `PAIR_CHUNK` pairs.
    """
    polygons1, polygons2 = _check_paired(polygons1, polygons2, "paired_intersection_area")
    box1, box2 = polygons_to_xyxy(polygons1), polygons_to_xyxy(polygons2)
    overlap = (torch.minimum(box1[:, 2], box2[:, 2]) > torch.maximum(box1[:, 0], box2[:, 0])) & (
        torch.minimum(box1[:, 3], box2[:, 3]) > torch.maximum(box1[:, 1], box2[:, 1])
    )
    inter = polygons1.new_zeros(polygons1.shape[0])
    idx = torch.nonzero(overlap).reshape(-1)
    for start in range(0, int(idx.numel()), PAIR_CHUNK):
        sel = idx[start : start + PAIR_CHUNK]
        inter[sel] = convex_intersection_area(polygons1[sel], polygons2[sel])
    return inter


def paired_polygon_iou(polygons1: Tensor, polygons2: Tensor) -> Tensor:
    """IoU of convex polygons pair by pair: ``(N, P, 2)`` and ``(N, Q, 2)`` → ``(N,)`` (0 where the union is 0)."""
    polygons1, polygons2 = _check_paired(polygons1, polygons2, "paired_polygon_iou")
    inter = paired_intersection_area(polygons1, polygons2)
    union = polygon_area(polygons1) + polygon_area(polygons2) - inter
    positive = union > 0
    return torch.where(positive, inter / torch.where(positive, union, torch.ones_like(union)), 0.0)


def pairwise_polygon_iou(polygons1: Tensor, polygons2: Tensor) -> Tensor:
    """IoU matrix of convex polygons ``(N, P, 2)`` × ``(M, Q, 2)`` → ``(N, M)``."""
    _check_polygons("polygons1", polygons1)
    _check_polygons("polygons2", polygons2)
    if polygons1.ndim != 3 or polygons2.ndim != 3:
        raise ValueError(
            f"pairwise_polygon_iou needs (N, P, 2) and (M, Q, 2), got {tuple(polygons1.shape)} and "
            f"{tuple(polygons2.shape)}"
        )
    n, m = polygons1.shape[0], polygons2.shape[0]
    i = torch.arange(n, device=polygons1.device).repeat_interleave(m)
    j = torch.arange(m, device=polygons1.device).repeat(n)
    return paired_polygon_iou(polygons1[i], polygons2[j]).reshape(n, m)


def rbox_iou(rboxes1: Tensor, rboxes2: Tensor, *, pairwise: bool = True) -> Tensor:
    """Exact IoU of rotated boxes ``(cx, cy, w, h, theta)``: ``(N, 5)`` × ``(M, 5)`` → ``(N, M)`` when
    ``pairwise``, else pair by pair ``(N, 5)``, ``(N, 5)`` → ``(N,)``. Corners from `rboxes_to_polygons`."""
    p1 = rboxes_to_polygons(rboxes1.to(torch.float64))
    p2 = rboxes_to_polygons(rboxes2.to(torch.float64))
    return pairwise_polygon_iou(p1, p2) if pairwise else paired_polygon_iou(p1, p2)
