"""4-image mosaic on a 2·imgsz canvas (documented reference default `mosaic=1.0`).

The canvas (2s x 2s, fill 114) is split at a random centre (xc, yc) ~ U(s/2, 3s/2); image 0 fills the top-left
quadrant with its bottom-right corner at the centre, image 1 the top-right (bottom-left corner at the centre),
image 2 the bottom-left and image 3 the bottom-right; parts falling outside the canvas are cut. Targets are
translated and clipped to the canvas, and instances cut to slivers are dropped by the candidate filter. The
random affine that follows (border −s/2) crops the canvas back to s x s. The three partner images are drawn by
the caller from the sample's own generator, so the mosaic is a function of (seed, epoch, index, rank).
"""

from __future__ import annotations

import cv2
import numpy as np

from lucid_data.augment.geometry import translation, warp_targets
from lucid_data.targets import Targets

__all__ = ["mosaic4"]


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
    yc = int(rng.uniform(s / 2, 3 * s / 2))
    xc = int(rng.uniform(s / 2, 3 * s / 2))
    if out is None:
        canvas = np.full((2 * s, 2 * s, images[0].shape[2]), fill, dtype=np.uint8)
    else:
        if out.shape[:2] != (2 * s, 2 * s) or out.dtype != np.uint8:
            raise ValueError(f"mosaic4: out must be a ({2 * s}, {2 * s}, C) uint8 buffer, got {out.shape}")
        canvas = out
        canvas[...] = fill
    add_alpha = canvas.shape[2] == 4 and images[0].shape[2] == 3
    placed: list[Targets] = []
    for i, (img, tgt) in enumerate(zip(images, targets)):
        h, w = img.shape[:2]
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
        if add_alpha:
            if y2a > y1a and x2a > x1a:
                cv2.cvtColor(img[y1b:y2b, x1b:x2b], cv2.COLOR_RGB2RGBA, dst=canvas[y1a:y2a, x1a:x2a])
        else:
            canvas[y1a:y2a, x1a:x2a] = img[y1b:y2b, x1b:x2b]
        placed.append(warp_targets(tgt, translation(x1a - x1b, y1a - y1b), (2 * s, 2 * s)))
    return canvas, _concat(placed, targets[0])
