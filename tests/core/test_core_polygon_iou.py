"""Exact convex-polygon IoU (lucid_core.geometry.polygon_iou) against an exact reference on random rotated pairs,
including touching, nested and identical boxes (issue 17: equal within 1e-6 on >= 10,000 pairs).

Reference: the independent rational-arithmetic computation below: the intersection polygon is the convex hull
(Andrew's monotone chain) of the vertices of each polygon inside the other and of all proper edge crossings, all
in `fractions.Fraction` (float inputs are exact rationals), so no rounding happens before the final division. It
is a different algorithm from the clipping under test. shapely, when importable (test-only), is a second check
on the pairs that do not touch: for a touching pair whose shared edge differs by one ulp, shapely 2.2 / GEOS
returned IoU 1.0 (seed 2017 below), so it cannot be the reference for those. The 10,000-pair run is `slow`
(about 15 s in pure Python); the default run checks 800 pairs.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
import torch

from lucid_core.geometry.polygon_iou import (
    convex_intersection_area,
    paired_polygon_iou,
    pairwise_polygon_iou,
    polygon_area,
    rbox_iou,
)
from lucid_core.geometry.rotated import rboxes_to_polygons

Point = tuple[Fraction, Fraction]
Quad = list[tuple[float, float]]


def _cross(o: Point, a: Point, b: Point) -> Fraction:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def _area(poly: list[Point]) -> Fraction:
    n = len(poly)
    twice = sum(
        (poly[i][0] * poly[(i + 1) % n][1] - poly[(i + 1) % n][0] * poly[i][1] for i in range(n)), Fraction(0)
    )
    return abs(twice) / 2


def _ccw(poly: list[Point]) -> list[Point]:
    n = len(poly)
    twice = sum(
        (poly[i][0] * poly[(i + 1) % n][1] - poly[(i + 1) % n][0] * poly[i][1] for i in range(n)), Fraction(0)
    )
    return poly if twice >= 0 else poly[::-1]


def _hull(points: list[Point]) -> list[Point]:
    pts = sorted(set(points))
    if len(pts) < 3:
        return pts
    lower: list[Point] = []
    upper: list[Point] = []
    for p in pts:
        while len(lower) >= 2 and _cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    for p in reversed(pts):
        while len(upper) >= 2 and _cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return lower[:-1] + upper[:-1]


def _inside(p: Point, poly: list[Point]) -> bool:
    n = len(poly)
    return all(_cross(poly[i], poly[(i + 1) % n], p) >= 0 for i in range(n))


def _crossing(p1: Point, p2: Point, q1: Point, q2: Point) -> list[Point]:
    d1, d2 = _cross(q1, q2, p1), _cross(q1, q2, p2)
    d3, d4 = _cross(p1, p2, q1), _cross(p1, p2, q2)
    if d1 * d2 < 0 and d3 * d4 < 0:
        t = d1 / (d1 - d2)
        return [(p1[0] + t * (p2[0] - p1[0]), p1[1] + t * (p2[1] - p1[1]))]
    return []


def exact_iou_fractions(a: Quad, b: Quad) -> float:
    """IoU of two convex polygons in exact rational arithmetic (module docstring)."""
    pa = _ccw([(Fraction(x), Fraction(y)) for x, y in a])
    pb = _ccw([(Fraction(x), Fraction(y)) for x, y in b])
    pts = [p for p in pa if _inside(p, pb)] + [p for p in pb if _inside(p, pa)]
    for i in range(len(pa)):
        for j in range(len(pb)):
            pts += _crossing(pa[i], pa[(i + 1) % len(pa)], pb[j], pb[(j + 1) % len(pb)])
    hull = _hull(pts)
    inter = _area(hull) if len(hull) >= 3 else Fraction(0)
    union = _area(pa) + _area(pb) - inter
    return float(inter / union) if union > 0 else 0.0


def shapely_iou(a: Quad, b: Quad) -> float | None:
    """IoU by shapely, None when shapely is not installed."""
    try:
        from shapely.geometry import Polygon
    except ImportError:
        return None
    pa, pb = Polygon(a), Polygon(b)
    inter = pa.intersection(pb).area
    union = pa.area + pb.area - inter
    return float(inter / union) if union > 0 else 0.0


def _corners(cx: float, cy: float, w: float, h: float, theta: float) -> Quad:
    poly = rboxes_to_polygons(torch.tensor([cx, cy, w, h, theta], dtype=torch.float64))
    return [(float(x), float(y)) for x, y in poly.tolist()]


def random_pairs(n: int, seed: int) -> list[tuple[str, Quad, Quad]]:
    """Random rotated pairs of six kinds: overlapping, far, nested, identical, touching, integer quads."""
    rng = random.Random(seed)
    out: list[tuple[str, Quad, Quad]] = []
    kinds = ("overlap", "overlap", "overlap", "nested", "identical", "touching", "integer", "far")
    for i in range(n):
        kind = kinds[i % len(kinds)]
        cx, cy = rng.uniform(0, 1000), rng.uniform(0, 1000)
        w, h, th = rng.uniform(1, 120), rng.uniform(1, 120), rng.uniform(-math.pi, math.pi)
        a = _corners(cx, cy, w, h, th)
        if kind == "overlap":
            b = _corners(
                cx + rng.uniform(-0.7, 0.7) * w,
                cy + rng.uniform(-0.7, 0.7) * h,
                w * rng.uniform(0.3, 2),
                h * rng.uniform(0.3, 2),
                th + rng.uniform(-math.pi, math.pi),
            )
        elif kind == "far":
            b = _corners(cx + 3 * (w + h), cy, w, h, rng.uniform(-math.pi, math.pi))
        elif kind == "nested":  # a smaller box of any angle fits inside the inscribed circle
            s = 0.95 * min(w, h) / math.hypot(w, h)
            b = _corners(cx, cy, w * s, h * s, rng.uniform(-math.pi, math.pi))
            if rng.random() < 0.5:
                a, b = b, a
        elif kind == "identical":  # same corners, possibly reversed and rolled
            b = list(a)
            if rng.random() < 0.5:
                b = b[::-1]
            r = rng.randrange(4)
            b = b[r:] + b[:r]
        elif kind == "touching":  # shifted by one side (shared edge) or by the diagonal (shared corner)
            v1 = (a[0][0] - a[3][0], a[0][1] - a[3][1])
            v2 = (a[0][0] - a[1][0], a[0][1] - a[1][1])
            shift = v1 if rng.random() < 0.5 else (v1[0] + v2[0], v1[1] + v2[1])
            b = [(x + shift[0], y + shift[1]) for x, y in a]
        else:  # DOTA-like integer corners (convex for sides >= 8 px)
            a = [(float(round(x)), float(round(y))) for x, y in _corners(cx, cy, w + 8, h + 8, th)]
            b = [
                (float(round(x)), float(round(y)))
                for x, y in _corners(
                    cx + rng.uniform(-20, 20), cy + rng.uniform(-20, 20), w + 8, h + 8, th + 0.3
                )
            ]
        out.append((kind, a, b))
    return out


def _check_against_reference(n: int, seed: int) -> None:
    pairs = random_pairs(n, seed)
    p1 = torch.tensor([a for _, a, _ in pairs], dtype=torch.float64)
    p2 = torch.tensor([b for _, _, b in pairs], dtype=torch.float64)
    ours = paired_polygon_iou(p1, p2)
    ref = torch.tensor([exact_iou_fractions(a, b) for _, a, b in pairs], dtype=torch.float64)
    err = (ours - ref).abs()
    worst = int(err.argmax())
    assert float(err.max()) <= 1e-6, (pairs[worst], float(ours[worst]), float(ref[worst]))
    kinds = [k for k, _, _ in pairs]
    for i, (kind, a, b) in enumerate(pairs):
        if kind != "touching":
            other = shapely_iou(a, b)
            if other is None:
                break
            assert abs(other - float(ours[i])) <= 1e-6, (kind, a, b, other, float(ours[i]))
    for kind, expect in (("identical", 1.0), ("far", 0.0)):
        sel = torch.tensor([k == kind for k in kinds])
        assert torch.allclose(ours[sel], torch.full_like(ours[sel], expect), atol=1e-9), kind
    touching = torch.tensor([k == "touching" for k in kinds])
    assert float(ours[touching].max()) <= 1e-9


def test_polygon_iou_matches_the_exact_reference_on_random_pairs() -> None:
    _check_against_reference(800, seed=17)


@pytest.mark.slow
def test_polygon_iou_matches_the_exact_reference_on_10000_pairs() -> None:
    _check_against_reference(10_000, seed=2017)


def test_known_values_and_orientation() -> None:
    square = torch.tensor([[0.0, 0.0], [2.0, 0.0], [2.0, 2.0], [0.0, 2.0]], dtype=torch.float64)
    shifted = square + 1.0
    assert float(convex_intersection_area(square, shifted)) == pytest.approx(1.0, abs=1e-12)
    iou = paired_polygon_iou(square[None], shifted.flip(0)[None])  # clockwise input
    assert float(iou[0]) == pytest.approx(1 / 7, abs=1e-12)
    assert float(polygon_area(square)) == 4.0
    diamond = torch.tensor([[1.0, 0.0], [2.0, 1.0], [1.0, 2.0], [0.0, 1.0]], dtype=torch.float64)
    assert float(paired_polygon_iou(square[None], diamond[None])[0]) == pytest.approx(0.5, abs=1e-12)


def test_pairwise_equals_paired_and_rboxes() -> None:
    gen = torch.Generator().manual_seed(0)
    r1 = torch.rand(7, 5, generator=gen, dtype=torch.float64) * torch.tensor([50, 50, 20, 20, 3.0]) + 1
    r2 = torch.rand(5, 5, generator=gen, dtype=torch.float64) * torch.tensor([50, 50, 20, 20, 3.0]) + 1
    matrix = rbox_iou(r1, r2)
    assert matrix.shape == (7, 5)
    p1, p2 = rboxes_to_polygons(r1), rboxes_to_polygons(r2)
    assert torch.allclose(matrix, pairwise_polygon_iou(p1, p2))
    i, j = torch.tensor([0, 3, 6]), torch.tensor([4, 0, 2])
    assert torch.allclose(rbox_iou(r1[i], r2[j], pairwise=False), matrix[i, j])


def test_degenerate_and_bad_input() -> None:
    line = torch.tensor([[[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0]]], dtype=torch.float64)
    assert float(paired_polygon_iou(line, line)[0]) == 0.0
    with pytest.raises(ValueError, match="paired_polygon_iou needs"):
        paired_polygon_iou(torch.zeros(3, 2), torch.zeros(3, 4, 2))
