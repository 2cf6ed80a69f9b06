"""Anchor points of a dense multi-level prediction grid.

Convention (shared/fixtures/README.md, "Conventions"): levels are enumerated in stride order, row-major inside a
level (row outer, column inner); the anchor of cell (row, col) is (col + 0.5, row + 0.5) in grid units.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def make_anchors(
    level_shapes: Sequence[tuple[int, int]],
    strides: Sequence[float],
    *,
    offset: float = 0.5,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> tuple[Tensor, Tensor]:
    """Return ``(anchor_points_grid (A, 2) as (x, y), stride_tensor (A, 1))`` for the given (h, w) levels.

    The sizes may be traced (an export with a dynamic input size); the grid is built in float32 and cast to
    ``dtype`` (ONNX's ``Range`` has no float16), which is exact for grids up to 2048 cells a side.
    """
    points: list[Tensor] = []
    stride_rows: list[Tensor] = []
    for (h, w), s in zip(level_shapes, strides, strict=True):
        sx = torch.arange(w, dtype=torch.float32, device=device) + offset
        sy = torch.arange(h, dtype=torch.float32, device=device) + offset
        yy, xx = torch.meshgrid(sy, sx, indexing="ij")
        points.append(torch.stack((xx, yy), -1).view(-1, 2))
        stride_rows.append(torch.full((h * w, 1), float(s), dtype=torch.float32, device=device))
    return torch.cat(points).to(dtype), torch.cat(stride_rows).to(dtype)
