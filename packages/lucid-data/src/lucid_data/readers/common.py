"""Shared reader pieces: label errors with `file:line`, and the polygon/rotated-box geometry readers need.

Rotated boxes: `(cx, cy, w, h, θ)` with corners `c ± v1 ± v2`, `v1 = (w/2·cosθ, w/2·sinθ)`,
`v2 = (−h/2·sinθ, h/2·cosθ)` (`../shared/fixtures/README.md`, OBB decoding). Readers fit them to labelled
corners with the minimum-area enclosing rectangle and emit the reference's canonical form (`w` the longer side,
θ ∈ [−π/4, 3π/4)); the conversion lives in `lucid_data.readers.geometry`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lucid_data.readers.geometry import min_area_rboxes, rboxes_to_corners

__all__ = [
    "LabelError",
    "LabelProblem",
    "corners_to_rbox",
    "merge_polygon_parts",
    "polygon_area",
    "rbox_to_corners",
]


@dataclass(frozen=True)
class LabelProblem:
    """One bad annotation: `file:line: reason` (line 0 when the problem is about the whole file)."""

    path: Path
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}" if self.line else f"{self.path}: {self.reason}"


class LabelError(ValueError):
    """Bad labels; `problems` lists every one found, the message shows them as `file:line: reason`."""

    def __init__(self, problems: list[LabelProblem]) -> None:
        self.problems = list(problems)
        shown = "\n".join(f"  {p}" for p in self.problems[:50])
        more = f"\n  ... and {len(self.problems) - 50} more" if len(self.problems) > 50 else ""
        super().__init__(f"{len(self.problems)} bad label(s):\n{shown}{more}")


def corners_to_rbox(corners: np.ndarray) -> np.ndarray:
    """(M, P, 2) polygons (P ≥ 3, usually the 4 DOTA corners) → (M, 5) canonical (cx, cy, w, h, θ) float32.

    Minimum-area enclosing rectangle in the reference's canonical form (`lucid_data.readers.geometry`).
    """
    return min_area_rboxes(np.asarray(corners, dtype=np.float64)).astype(np.float32)


def rbox_to_corners(rboxes: np.ndarray) -> np.ndarray:
    """(M, 5) (cx, cy, w, h, θ) → (M, 4, 2) float32 corners c+v1+v2, c+v1−v2, c−v1−v2, c−v1+v2 (computed in float64,
    `lucid_data.readers.geometry.rboxes_to_corners`)."""
    return rboxes_to_corners(rboxes).astype(np.float32)


def polygon_area(poly: np.ndarray) -> float:
    """Absolute shoelace area of a (P, 2) polygon."""
    p = np.asarray(poly, dtype=np.float64).reshape(-1, 2)
    if p.shape[0] < 3:
        return 0.0
    x, y = p[:, 0], p[:, 1]
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2)


def merge_polygon_parts(parts: list[np.ndarray]) -> np.ndarray:
    """Join the parts of a multi-part instance outline into one (P, 2) polygon with zero-width bridges.

    A YOLO segment line holds one polygon per instance, so a COCO instance drawn as several polygons is
    joined: each further part is attached at the closest pair of vertices (part i to the parts before it),
    walked once around and left again along the same bridge, so the filled area is the union of the parts.
    A single part is returned unchanged.
    """
    parts = [np.asarray(p, dtype=np.float32).reshape(-1, 2) for p in parts if len(p) >= 1]
    if not parts:
        return np.zeros((0, 2), np.float32)
    merged = parts[0]
    for part in parts[1:]:
        d = ((merged[:, None, :].astype(np.float64) - part[None, :, :]) ** 2).sum(-1)
        i, j = np.unravel_index(int(np.argmin(d)), d.shape)
        loop = np.concatenate([part[j:], part[: j + 1]])  # starts and ends at the bridge vertex
        merged = np.concatenate([merged[: i + 1], loop, merged[i:]])
    return merged
