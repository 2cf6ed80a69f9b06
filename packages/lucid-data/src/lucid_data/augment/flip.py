"""Horizontal / vertical flips (documented reference defaults fliplr 0.5, flipud 0.0).

A horizontal flip maps x → W − x for boxes (x1, x2 swapped), polygons and keypoints, and reorders keypoints with
`flip_idx` (left ↔ right, data YAML of pose datasets); a rotated box keeps its centre mirrored and its direction
θ → π − θ, then returns to the canonical form (w ≥ h, θ ∈ [−π/4, 3π/4)). The boxes' centre form is mirrored as
well (cx → W − cx in float32, `Targets.box_centres`, which the batch is made from), as the reference does: its
rounding decides whether a box on the border starts at 0 or a hair inside (docs/TRAINING.md "Flipped boxes").
A vertical flip is the same on y without keypoint reordering. Both are involutions up to float rounding.
"""

from __future__ import annotations

import cv2
import numpy as np

from lucid_data.augment.geometry import canonical_rboxes
from lucid_data.targets import Targets

__all__ = ["flip_horizontal", "flip_vertical"]


def _flip_pixels(image: np.ndarray, axis: int) -> np.ndarray:
    """A contiguous mirrored copy: cv2.flip for images OpenCV takes (same bytes as numpy's reversed view, ~10x
    faster than ``np.ascontiguousarray(image[:, ::-1])`` on a 640x640x3 uint8 image; `tools/bench/data.py`)."""
    if image.ndim in (2, 3) and image.dtype == np.uint8 and (image.ndim == 2 or image.shape[2] in (3, 4)):
        return cv2.flip(image, 1 if axis == 0 else 0)
    return np.ascontiguousarray(image[:, ::-1] if axis == 0 else image[::-1])


def _flip(
    image: np.ndarray, targets: Targets, axis: int, flip_idx: list[int] | None
) -> tuple[np.ndarray, Targets]:
    size = image.shape[1] if axis == 0 else image.shape[0]
    flipped = _flip_pixels(image, axis)
    out = targets.copy()
    lo, hi = (0, 2) if axis == 0 else (1, 3)
    boxes = out.boxes.copy()
    boxes[:, lo], boxes[:, hi] = size - out.boxes[:, hi], size - out.boxes[:, lo]
    out.boxes = boxes
    centres = targets.centres().copy()  # the centre is mirrored, in float32: the reference's rounding
    centres[:, axis] = np.float32(size) - centres[:, axis]
    out.box_centres = centres
    if out.polygons is not None:
        for p in out.polygons:
            p[:, axis] = size - p[:, axis]
    if out.masks is not None:
        out.masks = np.ascontiguousarray(out.masks[:, :, ::-1] if axis == 0 else out.masks[:, ::-1])
    if out.keypoints is not None and out.keypoints.shape[1] > 0:
        kpt = out.keypoints
        labelled = kpt[..., 2] > 0
        kpt[..., axis] = np.where(labelled, size - kpt[..., axis], kpt[..., axis])
        if axis == 0 and flip_idx is not None:
            out.keypoints = np.ascontiguousarray(kpt[:, list(flip_idx)])
    if out.rboxes is not None and len(out.rboxes):
        r = out.rboxes.astype(np.float64)
        r[:, axis] = size - r[:, axis]
        r[:, 4] = np.pi - r[:, 4]
        out.rboxes = canonical_rboxes(r).astype(np.float32)
    return flipped, out


def flip_horizontal(
    image: np.ndarray, targets: Targets, flip_idx: list[int] | None = None
) -> tuple[np.ndarray, Targets]:
    """Mirror left-right; keypoints are reordered by `flip_idx` when given (pose)."""
    return _flip(image, targets, 0, flip_idx)


def flip_vertical(image: np.ndarray, targets: Targets) -> tuple[np.ndarray, Targets]:
    """Mirror top-bottom."""
    return _flip(image, targets, 1, None)
