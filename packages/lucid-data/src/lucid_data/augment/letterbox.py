"""Training-side resizing: long-side resize of a decoded image and letterbox (resize + pad, fill 114).

The evaluation path uses `lucid_core.geometry.letterbox.letterbox` (the same letterbox as `predict`); this module
is the cv2 version used inside the augmentation pipeline, where speed matters: resizing a 640x480 coco8 image by
1.37 on one thread takes 1.1 ms with cv2.resize INTER_LINEAR, 6.1 ms with Pillow BILINEAR and 10.3 ms with torch
bilinear (`tools/bench/data.py --libs`). Geometry (shared/fixtures/README.md,
"Input pipeline"): r = min(H/H0, W/W0), new_unpad = (round(W0·r), round(H0·r)), padding split
round(d − 0.1) before / round(d + 0.1) after, constant border 114.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from lucid_data.augment.geometry import scale_translation, warp_targets
from lucid_data.targets import Targets

__all__ = ["FILL_VALUE", "letterbox_train", "resize_long_side"]

FILL_VALUE = 114


def resize_long_side(
    image: np.ndarray, imgsz: int, targets: Targets | None = None
) -> tuple[np.ndarray, Targets | None]:
    """Resize so the longer side equals `imgsz` (aspect kept, INTER_LINEAR) — the reference's per-image load
    step before mosaic/letterbox. Targets (original pixels) are scaled to the resized image."""
    h0, w0 = image.shape[:2]
    r = imgsz / max(h0, w0)
    if r == 1:
        return image, targets
    w, h = min(math.ceil(w0 * r), imgsz), min(math.ceil(h0 * r), imgsz)
    resized = cv2.resize(image, (w, h), interpolation=cv2.INTER_LINEAR)
    if targets is None:
        return resized, None
    moved = warp_targets(
        targets, scale_translation(w / w0, h / h0, 0.0, 0.0), (h, w), filter_candidates=False
    )
    return resized, moved


def letterbox_train(
    image: np.ndarray,
    targets: Targets,
    new_shape: int | tuple[int, int],
    *,
    fill: int = FILL_VALUE,
    scaleup: bool = True,
) -> tuple[np.ndarray, Targets]:
    """Letterbox an HWC image to `new_shape` (h, w) with border `fill`; targets follow (clipped, not filtered)."""
    th, tw = (new_shape, new_shape) if isinstance(new_shape, int) else new_shape
    h0, w0 = image.shape[:2]
    r = min(th / h0, tw / w0)
    if not scaleup:
        r = min(r, 1.0)
    new_w, new_h = max(round(w0 * r), 1), max(round(h0 * r), 1)
    dw, dh = (tw - new_w) / 2, (th - new_h) / 2
    top, bottom = round(dh - 0.1), round(dh + 0.1)
    left, right = round(dw - 0.1), round(dw + 0.1)
    if (new_w, new_h) != (w0, h0):
        image = cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    if top or bottom or left or right:
        image = cv2.copyMakeBorder(
            image, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(fill, fill, fill)
        )
    matrix = scale_translation(new_w / w0, new_h / h0, left, top)
    return image, warp_targets(targets, matrix, image.shape[:2], filter_candidates=False)
