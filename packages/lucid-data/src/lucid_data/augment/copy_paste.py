"""Copy-paste (Ghiasi et al., "Simple Copy-Paste is a Strong Data Augmentation Method for Instance
Segmentation", CVPR 2021), "flip" mode, off by default (p 0); segment datasets only (needs polygons).

Each instance is picked with probability p; its horizontally mirrored copy (same image) is pasted when the
mirrored box overlaps every existing box by less than 30 % of the copy's area (intersection over the copy's
area, the reference's documented threshold). Pixels are copied through the rasterised polygon.
"""

from __future__ import annotations

import cv2
import numpy as np

from lucid_data.augment.mosaic import concat_targets
from lucid_data.targets import Targets

__all__ = ["copy_paste_flip"]

IOA_THRESHOLD = 0.30


def _ioa(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    iw = (np.minimum(box[2], boxes[:, 2]) - np.maximum(box[0], boxes[:, 0])).clip(0)
    ih = (np.minimum(box[3], boxes[:, 3]) - np.maximum(box[1], boxes[:, 1])).clip(0)
    area = max((box[2] - box[0]) * (box[3] - box[1]), 1e-9)
    ioa: np.ndarray = iw * ih / area
    return ioa


def copy_paste_flip(
    image: np.ndarray, targets: Targets, rng: np.random.Generator, p: float
) -> tuple[np.ndarray, Targets]:
    """Paste mirrored copies of randomly chosen instances (polygons required; no-op when p == 0)."""
    if p <= 0 or targets.polygons is None or len(targets) == 0:
        return image, targets
    w = image.shape[1]
    picks = rng.random(len(targets)) < p
    if not picks.any():
        return image, targets
    out_img = image.copy()
    mirrored_img = image[:, ::-1]
    boxes = targets.boxes.copy()
    new_boxes, new_polys, sources = [], [], []
    for i in np.flatnonzero(picks):
        b = targets.boxes[i]
        fb = np.array([w - b[2], b[1], w - b[0], b[3]], dtype=np.float32)
        if (_ioa(fb, boxes) >= IOA_THRESHOLD).any():
            continue
        poly = targets.polygons[i].copy()
        poly[:, 0] = w - poly[:, 0]
        mask = np.zeros(image.shape[:2], np.uint8)
        cv2.fillPoly(mask, [np.round(poly).astype(np.int32)], 1)
        out_img[mask.astype(bool)] = mirrored_img[mask.astype(bool)]
        boxes = np.concatenate([boxes, fb[None]], 0)
        new_boxes.append(fb)
        new_polys.append(poly)
        sources.append(i)
    if not sources:
        return image, targets
    extra = targets.select(np.asarray(sources, dtype=np.int64))
    extra.boxes = np.stack(new_boxes)
    extra.polygons = new_polys
    if extra.keypoints is not None:
        extra.keypoints = np.zeros_like(extra.keypoints)
    return out_img, concat_targets([targets, extra], targets)
