"""Geometry shared by every augmentation: move a `Targets` through a 3x3 pixel transform, clip, filter.

Every annotation type follows the transform:

- axis-aligned boxes: the 4 corners are transformed and the box is their hull, clipped to the canvas;
- polygons: transformed vertex by vertex and clipped to the canvas rectangle with Sutherland–Hodgman
  (Sutherland & Hodgman, "Reentrant polygon clipping", CACM 1974); the box is recomputed from the clipped
  polygon, so segment boxes are exact;
- rotated boxes `(cx, cy, w, h, θ)` (corner convention of `lucid_data.targets`): their polygon — the labelled
  corners when the instance has them (DOTA / YOLO-OBB quadrilaterals), else the box's own 4 corners — is
  transformed; its minimum-area rectangle gives the box's angle, and the polygon clipped to the canvas *as a
  polygon* (not as its envelope) gives the box's extent along that angle's axes (`clipped_rboxes_in_frame`), in
  the reference's canonical form (`w` the longer side, θ ∈ [−π/4, 3π/4); `lucid_data.readers.geometry`, fixture
  README "obb_loss_*.pt" label convention). A cut box keeps its angle: the reference's training losses at lr 0
  agree with this and not with a minimum-area refit of the cut shape, which turns toward the border
  (docs/TRAINING.md "Rotated boxes at the canvas border"). Where the cut is oblique the box's corners may stick
  out of the canvas; the clipped polygon itself never does;
- keypoints: transformed; any point outside the canvas is marked invisible (v = 0, x = y = 0).

Degenerate instances are dropped with the reference-style candidate filter (documented augmentation defaults):
the clipped box must be wider and taller than 2 px, keep more than `area_thr` of its unclipped transformed area
(0.10 for boxes, 0.01 when polygons define the instance: segments, and rotated boxes, whose labelled polygon travels
with them; measured black box for rotated boxes, docs/TRAINING.md "Rotated boxes at the canvas border") and have an
aspect ratio below 100.
"""

from __future__ import annotations

import numpy as np

from lucid_data.readers.geometry import canonical_rboxes as _canonical_rboxes
from lucid_data.readers.geometry import min_area_rboxes
from lucid_data.readers.geometry import rboxes_to_corners as _rboxes_to_corners
from lucid_data.targets import Targets

__all__ = [
    "canonical_rboxes",
    "clip_polygon",
    "clipped_rboxes_in_frame",
    "polygons_to_min_area_rboxes",
    "rboxes_to_corners",
    "transform_points",
    "warp_targets",
]

WH_THRESHOLD = 2.0
ASPECT_THRESHOLD = 100.0
AREA_THRESHOLD_BOXES = 0.10
AREA_THRESHOLD_SEGMENTS = 0.01
_EPS = 1e-9


def transform_points(points: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Apply a 3x3 homogeneous transform to points (..., 2); the perspective divide is done when needed."""
    pts = np.asarray(points, dtype=np.float64)
    flat = pts.reshape(-1, 2)
    out = flat @ matrix[:2, :2].T + matrix[:2, 2]
    if not (matrix[2, 0] == 0 and matrix[2, 1] == 0 and matrix[2, 2] == 1):
        z = flat @ matrix[2, :2] + matrix[2, 2]
        z = np.where(np.abs(z) < _EPS, _EPS, z)
        out = out / z[:, None]
    result: np.ndarray = out.reshape(pts.shape)
    return result


def clip_polygon(polygon: np.ndarray, width: float, height: float) -> np.ndarray:
    """Clip a polygon (P, 2) to the rectangle [0, width] x [0, height] (Sutherland–Hodgman); (Q, 2) float64."""
    pts = np.asarray(polygon, dtype=np.float64).reshape(-1, 2)
    if len(pts) and pts.min(0).min() >= 0 and pts[:, 0].max() <= width and pts[:, 1].max() <= height:
        return pts
    # (axis, limit, keep_greater): x >= 0, x <= w, y >= 0, y <= h
    for axis, limit, keep_ge in (
        (0, 0.0, True),
        (0, float(width), False),
        (1, 0.0, True),
        (1, float(height), False),
    ):
        if len(pts) == 0:
            break
        coord = pts[:, axis]
        inside = coord >= limit if keep_ge else coord <= limit
        if inside.all():
            continue
        nxt = np.roll(pts, -1, axis=0)
        nxt_inside = np.roll(inside, -1)
        out: list[np.ndarray] = []
        for p, q, p_in, q_in in zip(pts, nxt, inside, nxt_inside):
            if p_in:
                out.append(p)
            if p_in != q_in:
                t = (limit - p[axis]) / (q[axis] - p[axis])
                cross = p + t * (q - p)
                cross[axis] = limit
                out.append(cross)
        pts = np.asarray(out, dtype=np.float64).reshape(-1, 2)
    return pts


def rboxes_to_corners(rboxes: np.ndarray) -> np.ndarray:
    """(N, 5) (cx, cy, w, h, θ) → (N, 4, 2) corners c+v1+v2, c+v1−v2, c−v1−v2, c−v1+v2 (fixture convention)."""
    return _rboxes_to_corners(rboxes)


def canonical_rboxes(rboxes: np.ndarray) -> np.ndarray:
    """Same rectangles in the reference's canonical form: `w` ≥ `h`, θ ∈ [−π/4, 3π/4) (float64)."""
    return _canonical_rboxes(rboxes)


def polygons_to_min_area_rboxes(polygons: list[np.ndarray]) -> np.ndarray:
    """Minimum-area rectangle of each polygon as canonical (cx, cy, w, h, θ); (N, 5) float64.

    Polygons with fewer than 3 vertices give a zero row (dropped by the callers' size checks).
    """
    out = np.zeros((len(polygons), 5), dtype=np.float64)
    usable = [i for i, poly in enumerate(polygons) if len(poly) >= 3]
    if usable:
        out[usable] = min_area_rboxes([polygons[i] for i in usable])
    return out


def clipped_rboxes_in_frame(full: np.ndarray, clipped: list[np.ndarray]) -> np.ndarray:
    """Rotated boxes of the ``clipped`` polygons, each measured in the frame of its unclipped box ``full`` (N, 5):
    the angle is kept and the centre and sides become the clipped polygon's extent along the box's own axes, in
    canonical form; (N, 5) float64. An uncut polygon gives its minimum-area rectangle back (that rectangle is the
    polygon's extent in its own frame); a polygon with fewer than 3 vertices keeps its ``full`` row."""
    out = np.asarray(full, dtype=np.float64).copy()
    for i, polygon in enumerate(clipped):
        if len(polygon) < 3:
            continue
        theta = out[i, 4]
        axes = np.array([[np.cos(theta), np.sin(theta)], [-np.sin(theta), np.cos(theta)]])  # rows: box x, y
        along = np.asarray(polygon, dtype=np.float64) @ axes.T
        low, high = along.min(0), along.max(0)
        centre = (low + high) / 2 @ axes
        out[i, :4] = (centre[0], centre[1], high[0] - low[0], high[1] - low[1])
    return canonical_rboxes(out) if len(out) else out


def _hull_boxes(points: list[np.ndarray]) -> np.ndarray:
    boxes = np.zeros((len(points), 4), dtype=np.float64)
    for i, p in enumerate(points):
        if len(p):
            boxes[i] = (p[:, 0].min(), p[:, 1].min(), p[:, 0].max(), p[:, 1].max())
    return boxes


def candidate_mask(
    before: np.ndarray,
    after: np.ndarray,
    *,
    wh_thr: float = WH_THRESHOLD,
    ar_thr: float = ASPECT_THRESHOLD,
    area_thr: float = AREA_THRESHOLD_BOXES,
) -> np.ndarray:
    """Keep instances whose box `after` (clipped) is > wh_thr px each side, keeps > area_thr of `before`'s area
    and has an aspect ratio < ar_thr (reference candidate filter, documented defaults 2 / 0.1 / 100)."""
    w1, h1 = before[:, 2] - before[:, 0], before[:, 3] - before[:, 1]
    w2, h2 = after[:, 2] - after[:, 0], after[:, 3] - after[:, 1]
    ar = np.maximum(w2 / (h2 + 1e-16), h2 / (w2 + 1e-16))
    keep: np.ndarray = (
        (w2 > wh_thr) & (h2 > wh_thr) & (w2 * h2 / (w1 * h1 + 1e-16) > area_thr) & (ar < ar_thr)
    )
    return keep


def warp_targets(
    targets: Targets,
    matrix: np.ndarray,
    out_hw: tuple[int, int],
    *,
    filter_candidates: bool = True,
    area_thr: float | None = None,
) -> Targets:
    """Move `targets` through the 3x3 pixel transform `matrix` onto an (h, w) canvas; clip, refit and filter.

    `area_thr` defaults to 0.01 when the instances carry polygons (segment, obb) and 0.10 otherwise. Masks must have
    been converted to polygons before (the dataset does that); `masks` is dropped here.
    """
    h, w = int(out_hw[0]), int(out_hw[1])
    n = len(targets)
    out = targets.copy()
    out.masks = None
    out.box_centres = None  # the boxes are recomputed below
    if n == 0:
        return out
    mat = np.asarray(matrix, dtype=np.float64)
    if out.rboxes is not None:
        # the labelled polygon when present (the reference transforms the label's vertices), else the corners
        corners = rboxes_to_corners(out.rboxes)
        polys = out.polygons if out.polygons is not None else [np.zeros((0, 2))] * n
        shapes = [transform_points(p if len(p) >= 3 else c, mat) for p, c in zip(polys, corners)]
    elif out.polygons is not None:
        shapes = [transform_points(p, mat) for p in out.polygons]
    else:
        b = out.boxes.astype(np.float64)
        shapes = []
        if mat[0, 0] == mat[1, 1] == mat[2, 2] == 1 and not (
            mat[0, 1] or mat[1, 0] or mat[2, 0] or mat[2, 1]
        ):
            # a translation (the mosaic's placements): the corners' hull moved, the same float64 values as
            # transforming the 4 corners (x·1 + y·0 + dx is x + dx exactly)
            shift = mat[:2, 2]
            before = np.concatenate(
                (np.minimum(b[:, :2], b[:, 2:]) + shift, np.maximum(b[:, :2], b[:, 2:]) + shift), 1
            )
        else:
            corners = np.stack((b[:, [0, 1]], b[:, [2, 1]], b[:, [2, 3]], b[:, [0, 3]]), 1)
            moved = transform_points(corners, mat)  # (N, 4, 2): the hull in one vectorised min/max
            before = np.concatenate((moved.min(1), moved.max(1)), 1)
    if shapes:
        before = _hull_boxes(shapes)
    if out.rboxes is not None or out.polygons is not None:
        clipped = [clip_polygon(p, w, h) for p in shapes]
        after = _hull_boxes(clipped)
        valid = np.array([len(c) >= 3 for c in clipped])
    else:
        after = before.copy()
        after[:, 0::2] = after[:, 0::2].clip(0, w)
        after[:, 1::2] = after[:, 1::2].clip(0, h)
        clipped = []
        valid = np.ones(n, dtype=bool)
    if out.polygons is not None:
        out.polygons = [c.astype(np.float32) for c in clipped]
    if out.rboxes is not None:
        refit = clipped_rboxes_in_frame(polygons_to_min_area_rboxes(shapes), clipped)
        out.rboxes = refit.astype(np.float32)
        valid &= (refit[:, 2] > 0) & (refit[:, 3] > 0)
    out.boxes = after.astype(np.float32)
    if out.keypoints is not None and out.keypoints.shape[1] > 0:
        kpt = out.keypoints.copy()
        xy = transform_points(kpt[..., :2], mat)
        inside = (xy[..., 0] >= 0) & (xy[..., 0] <= w) & (xy[..., 1] >= 0) & (xy[..., 1] <= h)
        visible = inside & (kpt[..., 2] > 0)
        kpt[..., :2] = np.where(visible[..., None], xy, 0.0)
        kpt[..., 2] = np.where(visible, kpt[..., 2], 0.0)
        out.keypoints = kpt.astype(np.float32)
    if filter_candidates:
        if area_thr is None:
            carries_polygons = out.polygons is not None or out.rboxes is not None
            area_thr = AREA_THRESHOLD_SEGMENTS if carries_polygons else AREA_THRESHOLD_BOXES
        valid &= candidate_mask(before, after, area_thr=area_thr)
    else:
        valid &= (after[:, 2] > after[:, 0]) & (after[:, 3] > after[:, 1])
    if valid.all():
        return out
    return out.select(valid)


def translation(dx: float, dy: float) -> np.ndarray:
    """3x3 pure translation."""
    m = np.eye(3)
    m[0, 2], m[1, 2] = dx, dy
    return m


def scale_translation(sx: float, sy: float, dx: float, dy: float) -> np.ndarray:
    """3x3 axis scale followed by a translation (resize + pad)."""
    m = np.eye(3)
    m[0, 0], m[1, 1], m[0, 2], m[1, 2] = sx, sy, dx, dy
    return m
