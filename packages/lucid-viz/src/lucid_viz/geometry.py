"""Corners of rotated rectangles, for drawing them as polygons (never as their upright envelope).

Source: shared/fixtures/README.md, "import_<checkpoint>.pt", post-processing step 3: for ``(cx, cy, w, h, θ)``
the corners are ``c + v1 + v2, c + v1 − v2, c − v1 − v2, c − v1 + v2`` with ``v1 = (w/2·cosθ, w/2·sinθ)`` and
``v2 = (−h/2·sinθ, h/2·cosθ)`` (image axes: x right, y down; θ in radians).
"""

from __future__ import annotations

import numpy as np


def rboxes_to_corners(rboxes: np.ndarray) -> np.ndarray:
    """(N, 5) ``cx, cy, w, h, theta`` → (N, 4, 2) corner points in the order of the fixture README."""
    boxes = np.asarray(rboxes, dtype=np.float64)
    if boxes.ndim != 2 or boxes.shape[1] != 5:
        raise ValueError(f"rboxes: expected shape (N, 5) cx, cy, w, h, theta; got {tuple(boxes.shape)}")
    centre = boxes[:, None, 0:2]
    cos, sin = np.cos(boxes[:, 4]), np.sin(boxes[:, 4])
    half_w, half_h = boxes[:, 2] / 2.0, boxes[:, 3] / 2.0
    v1 = np.stack([half_w * cos, half_w * sin], axis=-1)[:, None, :]
    v2 = np.stack([-half_h * sin, half_h * cos], axis=-1)[:, None, :]
    signs = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, -1.0], [-1.0, 1.0]])  # (v1, v2) sign per corner
    return centre + signs[None, :, 0:1] * v1 + signs[None, :, 1:2] * v2
