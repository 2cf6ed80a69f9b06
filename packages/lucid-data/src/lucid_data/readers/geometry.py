"""Polygon → rotated box by the reference's label convention (the one home of this conversion in lucid-data).

Convention (``shared/fixtures/README.md``, section "obb_loss_*.pt", "Label convention", steps 2-3):

2. the **minimum-area enclosing rectangle** of the polygon — one side of the optimum lies on a convex-hull edge
   (Freeman & Shapira, "Determining the minimum-area encasing rectangle for an arbitrary closed curve", CACM
   1975), so every hull edge direction is tried in float64 and the smallest area wins;
3. **canonical form**: ``w`` = the longer side, ``h`` = the shorter, θ = direction of the ``w`` side measured
   from +x towards +y (image axes, y down), brought into **[−π/4, 3π/4)** by adding/subtracting π (float64,
   then stored as float32). An axis-aligned box gets θ = 0 when wider than tall and θ = π/2 when taller.

Ill-posed cases (README): two hull-edge rectangles of equal area (``min_area_rect_tie``) — any of them is right;
squares — any θ modulo π/2 is right. Corner order of a rotated box (README "OBB decoding"):
``c + v1 + v2, c + v1 − v2, c − v1 − v2, c − v1 + v2`` with ``v1 = (w/2·cosθ, w/2·sinθ)``,
``v2 = (−h/2·sinθ, h/2·cosθ)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from lucid_core.geometry.rotated import rboxes_to_polygons

__all__ = [
    "THETA_MAX",
    "THETA_MIN",
    "canonical_rboxes",
    "convex_hull",
    "hull_edge_rectangles",
    "min_area_rboxes",
    "rboxes_to_corners",
]

THETA_MIN = -math.pi / 4  # canonical θ range [−π/4, 3π/4) (README step 3)
THETA_MAX = 3 * math.pi / 4
TIE_RTOL = 1e-6  # areas closer than this (relative) are a min-area tie (float32 label noise is ~1e-7)


def convex_hull(points: np.ndarray) -> np.ndarray:
    """Convex hull (counter-clockwise in a y-up frame, no repeated or collinear vertices) of (P, 2) points.

    Andrew's monotone chain (Andrew, "Another efficient algorithm for convex hulls in two dimensions", 1979).
    Fewer than 3 distinct points return those points.
    """
    pts = np.unique(np.asarray(points, dtype=np.float64).reshape(-1, 2), axis=0)  # sorted by x, then y
    if len(pts) < 3:
        return pts

    def half(sequence: np.ndarray) -> list[np.ndarray]:
        chain: list[np.ndarray] = []
        for p in sequence:
            while len(chain) >= 2:
                o, a = chain[-2], chain[-1]
                if (a[0] - o[0]) * (p[1] - o[1]) - (a[1] - o[1]) * (p[0] - o[0]) > 0:
                    break
                chain.pop()
            chain.append(p)
        return chain

    lower, upper = half(pts), half(pts[::-1])
    return np.asarray(lower[:-1] + upper[:-1], dtype=np.float64)


def canonical_rboxes(rboxes: np.ndarray) -> np.ndarray:
    """(N, 5) rotated boxes → the same rectangles in canonical form (README step 3), float64.

    ``w < h`` swaps the sides and turns θ by π/2; θ is then brought into [−π/4, 3π/4) modulo π.
    """
    r = np.asarray(rboxes, dtype=np.float64).reshape(-1, 5).copy()
    swap = r[:, 2] < r[:, 3]
    w = np.where(swap, r[:, 3], r[:, 2])
    h = np.where(swap, r[:, 2], r[:, 3])
    theta = np.where(swap, r[:, 4] + math.pi / 2, r[:, 4])
    theta = np.mod(theta - THETA_MIN, math.pi) + THETA_MIN
    theta = np.where(theta >= THETA_MAX, theta - math.pi, theta)  # float rounding at the upper end
    r[:, 2], r[:, 3], r[:, 4] = w, h, theta
    return r


def hull_edge_rectangles(polygon: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every hull-edge-aligned enclosing rectangle of ``polygon``: ((E, 5) canonical rboxes, (E,) areas), float64.

    The minimum-area rectangle is one of them (README step 2); equal-area ones are the ill-posed ties.
    """
    hull = convex_hull(polygon)
    if len(hull) < 3:  # a point or a segment: a zero-height rectangle along it
        if len(hull) == 0:
            return np.zeros((1, 5)), np.zeros(1)
        a, b = hull[0], hull[-1]
        d = b - a
        rect = np.array([[*(a + b) / 2, math.hypot(*d), 0.0, math.atan2(d[1], d[0])]])
        return canonical_rboxes(rect), np.zeros(1)
    edges = np.roll(hull, -1, axis=0) - hull
    lengths = np.hypot(edges[:, 0], edges[:, 1])
    u = edges / lengths[:, None]  # (E, 2) edge directions
    v = np.stack((-u[:, 1], u[:, 0]), -1)  # normals
    proj_u = hull @ u.T  # (P, E)
    proj_v = hull @ v.T
    u_min, u_max = proj_u.min(0), proj_u.max(0)
    v_min, v_max = proj_v.min(0), proj_v.max(0)
    side_u, side_v = u_max - u_min, v_max - v_min
    centre = (u_min + u_max)[:, None] / 2 * u + (v_min + v_max)[:, None] / 2 * v
    theta = np.arctan2(u[:, 1], u[:, 0])
    rects = np.stack((centre[:, 0], centre[:, 1], side_u, side_v, theta), -1)
    return canonical_rboxes(rects), side_u * side_v


def min_area_rboxes(polygons: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
    """(N, P, 2) array or a list of (P_i, 2) polygons → (N, 5) canonical minimum-area rectangles, float64.

    Equal-area rectangles (relative difference ≤ ``TIE_RTOL``; the README's ill-posed ties, common for DOTA
    quadrilaterals) are decided by the smallest θ, so float32 and float64 copies of one label give one answer.
    """
    out = np.zeros((len(polygons), 5), dtype=np.float64)
    for i, poly in enumerate(polygons):
        rects, areas = hull_edge_rectangles(np.asarray(poly, dtype=np.float64).reshape(-1, 2))
        tied = np.flatnonzero(areas <= areas.min() * (1 + TIE_RTOL))
        out[i] = rects[tied[int(np.argmin(rects[tied, 4]))]]
    return out


def rboxes_to_corners(rboxes: np.ndarray) -> np.ndarray:
    """(N, 5) (cx, cy, w, h, θ) → (N, 4, 2) float64 corners c+v1+v2, c+v1−v2, c−v1−v2, c−v1+v2
    (``lucid_core.geometry.rotated.rboxes_to_polygons`` on the float64 array)."""
    return rboxes_to_polygons(np.asarray(rboxes, dtype=np.float64).reshape(-1, 5))
