"""Corners of rotated rectangles, for drawing them as polygons (never as their upright envelope).

Source: shared/fixtures/README.md, "import_<checkpoint>.pt", post-processing step 3: for ``(cx, cy, w, h, θ)``
the corners are ``c + v1 + v2, c + v1 − v2, c − v1 − v2, c − v1 + v2`` with ``v1 = (w/2·cosθ, w/2·sinθ)`` and
``v2 = (−h/2·sinθ, h/2·cosθ)`` (image axes: x right, y down; θ in radians). The formula's one home is
``lucid_core.geometry.rotated.rboxes_to_polygons``; here it runs on float64 NumPy arrays.
"""

from __future__ import annotations

import numpy as np

from lucid_core.geometry.rotated import rboxes_to_polygons


def rboxes_to_corners(rboxes: np.ndarray) -> np.ndarray:
    """(N, 5) ``cx, cy, w, h, theta`` → (N, 4, 2) corner points in the order of the fixture README."""
    boxes = np.asarray(rboxes, dtype=np.float64)
    if boxes.ndim != 2 or boxes.shape[1] != 5:
        raise ValueError(f"rboxes: expected shape (N, 5) cx, cy, w, h, theta; got {tuple(boxes.shape)}")
    return rboxes_to_polygons(boxes)
