"""4-image mosaic on a 2·imgsz canvas (documented reference default `mosaic=1.0`).

The canvas (2s x 2s, fill 114) is split at a random centre (xc, yc) ~ U(s/2, 3s/2); image 0 fills the top-left
quadrant with its bottom-right corner at the centre, image 1 the top-right (bottom-left corner at the centre),
image 2 the bottom-left and image 3 the bottom-right; parts falling outside the canvas are cut. Targets are
translated and clipped to the canvas, and instances cut to slivers are dropped by the candidate filter. The
random affine that follows (border −s/2) crops the canvas back to s x s. The three partner images are drawn by
the caller from the sample's own generator, so the mosaic is a function of (seed, epoch, index, rank).
"""

from __future__ import annotations

from typing import NamedTuple

import cv2
import numpy as np

from lucid_data.augment.geometry import AREA_THRESHOLD_BOXES, candidate_mask, translation, warp_targets
from lucid_data.targets import Targets

__all__ = ["MosaicLayout", "mosaic4", "mosaic4_layout", "mosaic4_targets", "paint_mosaic"]


def _concat(parts: list[Targets], template: Targets) -> Targets:
    def cat_opt(name: str) -> np.ndarray | None:
        values = [getattr(p, name) for p in parts]
        if any(v is None for v in values):
            return None
        return np.concatenate(values, 0)

    polygons = None
    if all(p.polygons is not None for p in parts):
        polygons = [poly for p in parts for poly in (p.polygons or [])]
    return Targets(
        boxes=np.concatenate([p.boxes for p in parts], 0),
        labels=np.concatenate([p.labels for p in parts], 0),
        polygons=polygons,
        keypoints=cat_opt("keypoints"),
        rboxes=cat_opt("rboxes"),
        iscrowd=np.concatenate([p.iscrowd for p in parts], 0),
        difficult=np.concatenate([p.difficult for p in parts], 0),
        image_id=template.image_id,
        orig_size=template.orig_size,
    )


def concat_targets(parts: list[Targets], template: Targets) -> Targets:
    """Concatenate the instances of several images (optional fields kept only when every part has them)."""
    return _concat(parts, template)


class MosaicLayout(NamedTuple):
    """Where the 4 images of a mosaic go: the drawn centre and, per image, its canvas rectangle ``(x1a, y1a,
    x2a, y2a)`` and the source rectangle ``(x1b, y1b, x2b, y2b)`` copied into it (``size`` = the canvas side)."""

    xc: int
    yc: int
    size: int
    tiles: tuple[tuple[int, int, int, int, int, int, int, int], ...]


def mosaic4_layout(shapes_hw: list[tuple[int, int]], rng: np.random.Generator, imgsz: int) -> MosaicLayout:
    """Draw the mosaic centre (2 uniforms from ``rng``, y first) and place the 4 images around it."""
    s = int(imgsz)
    yc = int(rng.uniform(s / 2, 3 * s / 2))
    xc = int(rng.uniform(s / 2, 3 * s / 2))
    tiles = []
    for i, (h, w) in enumerate(shapes_hw):
        if i == 0:  # top-left
            x1a, y1a, x2a, y2a = max(xc - w, 0), max(yc - h, 0), xc, yc
            x1b, y1b, x2b, y2b = w - (x2a - x1a), h - (y2a - y1a), w, h
        elif i == 1:  # top-right
            x1a, y1a, x2a, y2a = xc, max(yc - h, 0), min(xc + w, 2 * s), yc
            x1b, y1b, x2b, y2b = 0, h - (y2a - y1a), min(w, x2a - x1a), h
        elif i == 2:  # bottom-left
            x1a, y1a, x2a, y2a = max(xc - w, 0), yc, xc, min(2 * s, yc + h)
            x1b, y1b, x2b, y2b = w - (x2a - x1a), 0, w, min(y2a - y1a, h)
        else:  # bottom-right
            x1a, y1a, x2a, y2a = xc, yc, min(xc + w, 2 * s), min(2 * s, yc + h)
            x1b, y1b, x2b, y2b = 0, 0, min(w, x2a - x1a), min(y2a - y1a, h)
        tiles.append((x1a, y1a, x2a, y2a, x1b, y1b, x2b, y2b))
    return MosaicLayout(xc, yc, 2 * s, tuple(tiles))


def paint_mosaic(
    images: list[np.ndarray],
    layout: MosaicLayout,
    canvas: np.ndarray,
    *,
    fill: int = 114,
    region: tuple[int, int, int, int] | None = None,
) -> np.ndarray:
    """Fill ``canvas`` (``layout.size`` square, uint8) with ``fill`` and copy the images into their rectangles.

    ``region`` ``(x0, y0, x1, y1)``: paint only that part of the canvas (the rest keeps whatever it held). The
    pipeline passes the part its affine warp reads (`lucid_data.augment.affine.source_region`), so the warp sees
    exactly the pixels of the whole canvas at a fraction of the filling and copying. A 4-channel canvas with
    3-channel images is painted RGBA (opaque alpha, the same RGB bytes).
    """
    n = layout.size
    x0, y0, x1, y1 = region if region is not None else (0, 0, n, n)
    canvas[y0:y1, x0:x1] = fill
    add_alpha = canvas.shape[2] == 4 and images[0].shape[2] == 3
    for img, (x1a, y1a, x2a, y2a, x1b, y1b, x2b, y2b) in zip(images, layout.tiles):
        # the tile's rectangle cut to the painted region, and the same cut of its source rectangle
        cx1, cy1, cx2, cy2 = max(x1a, x0), max(y1a, y0), min(x2a, x1), min(y2a, y1)
        if cx2 <= cx1 or cy2 <= cy1:
            continue
        src = img[y1b + cy1 - y1a : y2b - (y2a - cy2), x1b + cx1 - x1a : x2b - (x2a - cx2)]
        if add_alpha:
            cv2.cvtColor(src, cv2.COLOR_RGB2RGBA, dst=canvas[cy1:cy2, cx1:cx2])
        else:
            canvas[cy1:cy2, cx1:cx2] = src
    return canvas


def mosaic4_targets(targets: list[Targets], layout: MosaicLayout) -> Targets:
    """The 4 images' targets moved to their canvas rectangles, clipped to the canvas and concatenated."""
    n = layout.size
    if all(t.polygons is None and t.keypoints is None and t.rboxes is None for t in targets):
        return _place_boxes(targets, layout)
    placed = [
        warp_targets(tgt, translation(x1a - x1b, y1a - y1b), (n, n))
        for tgt, (x1a, y1a, _, _, x1b, y1b, _, _) in zip(targets, layout.tiles)
    ]
    return _concat(placed, targets[0])


def _place_boxes(targets: list[Targets], layout: MosaicLayout) -> Targets:
    """Boxes-only targets (detect): the 4 placements as one translate, clip and filter over the concatenation,
    row for row the values `warp_targets` gives each image (the corners' hull moved, clipped to the canvas, the
    candidate filter with the boxes' area threshold)."""
    n = layout.size
    merged = _concat(targets, targets[0])
    shifts = np.array(
        [(x1a - x1b, y1a - y1b) for (x1a, y1a, _, _, x1b, y1b, _, _) in layout.tiles], np.float64
    )
    shift = np.repeat(shifts, [len(t) for t in targets], axis=0)
    b = merged.boxes.astype(np.float64)
    before = np.concatenate(
        (np.minimum(b[:, :2], b[:, 2:]) + shift, np.maximum(b[:, :2], b[:, 2:]) + shift), 1
    )
    after = before.copy()
    after[:, 0::2] = after[:, 0::2].clip(0, n)
    after[:, 1::2] = after[:, 1::2].clip(0, n)
    merged.boxes = after.astype(np.float32)
    keep = candidate_mask(before, after, area_thr=AREA_THRESHOLD_BOXES)
    return merged if keep.all() else merged.select(keep)


def mosaic4(
    images: list[np.ndarray],
    targets: list[Targets],
    rng: np.random.Generator,
    imgsz: int,
    *,
    fill: int = 114,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, Targets]:
    """Combine 4 HWC images (long side ≤ imgsz) and their targets on a (2·imgsz, 2·imgsz) canvas.

    ``out``: a (2·imgsz, 2·imgsz, C) uint8 buffer to build the canvas in (refilled, returned) instead of a new
    array; C = 4 with 3-channel images builds an RGBA canvas (opaque alpha, RGB bytes as the 3-channel canvas),
    which the pipeline warps on OpenCV's faster 4-channel path (`lucid_data.augment.affine.warp_image`).
    """
    if len(images) != 4 or len(targets) != 4:
        raise ValueError(f"mosaic4 needs 4 images and 4 targets, got {len(images)} and {len(targets)}")
    s = int(imgsz)
    layout = mosaic4_layout([img.shape[:2] for img in images], rng, s)
    if out is None:
        canvas = np.empty((2 * s, 2 * s, images[0].shape[2]), dtype=np.uint8)
    else:
        if out.shape[:2] != (2 * s, 2 * s) or out.dtype != np.uint8:
            raise ValueError(f"mosaic4: out must be a ({2 * s}, {2 * s}, C) uint8 buffer, got {out.shape}")
        canvas = out
    paint_mosaic(images, layout, canvas, fill=fill)
    return canvas, mosaic4_targets(targets, layout)
