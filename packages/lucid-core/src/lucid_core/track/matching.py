"""Association costs and thresholded linear assignment for the trackers (and the tracking metrics).

The solver is ``scipy.optimize.linear_sum_assignment`` (the ``tracking`` extra). :func:`match` solves the
assignment *with a reject option*: leaving a row and a column unmatched costs ``thresh``, so the pairs chosen
maximise ``Σ (thresh − cost)`` over pairs cheaper than ``thresh`` — a pair above the threshold is never forced in,
and a cheap pair is never dropped to make room for a costly one.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from lucid_core.geometry.polygon_iou import rbox_iou
from lucid_core.track.config import TRACKING_EXTRA, MissingExtraError

__all__ = [
    "box_iou",
    "fuse_score",
    "linear_sum_assignment",
    "match",
    "require_solver",
    "rotated_iou",
]

Array = NDArray[np.float64]
IntArray = NDArray[np.int64]


@cache
def _solver() -> Callable[..., tuple[Any, Any]]:
    try:
        from scipy.optimize import linear_sum_assignment as solve  # the `tracking` extra of lucid-core
    except ImportError as exc:
        raise MissingExtraError(f"tracking needs scipy (linear assignment): {TRACKING_EXTRA}") from exc
    return solve  # type: ignore[no-any-return]


def require_solver() -> None:
    """Raise the one-line ImportError naming the ``tracking`` extra when scipy is missing."""
    _solver()


def linear_sum_assignment(matrix: Array, *, maximize: bool = False) -> tuple[IntArray, IntArray]:
    """Optimal one-to-one assignment of the rows and columns of ``matrix`` (scipy's solver): ``(rows, cols)``."""
    if matrix.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy()
    rows, cols = _solver()(matrix, maximize=maximize)
    return np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)


def match(cost: Array, thresh: float) -> tuple[IntArray, IntArray, IntArray]:
    """Thresholded assignment: ``(matches (K, 2) [row, col], unmatched rows, unmatched cols)``.

    Only pairs with ``cost < thresh`` are matched; among those the chosen set maximises ``Σ (thresh − cost)``
    (module docstring). Unmatched indices are ascending.
    """
    n, m = cost.shape
    if n == 0 or m == 0:
        return np.zeros((0, 2), dtype=np.int64), np.arange(n), np.arange(m)
    gain = np.maximum(thresh - cost, 0.0)
    rows, cols = linear_sum_assignment(gain, maximize=True)
    keep = gain[rows, cols] > 0
    rows, cols = rows[keep], cols[keep]
    free_rows = np.ones(n, dtype=bool)
    free_rows[rows] = False
    free_cols = np.ones(m, dtype=bool)
    free_cols[cols] = False
    return np.stack([rows, cols], axis=1), np.flatnonzero(free_rows), np.flatnonzero(free_cols)


def box_iou(boxes1: Array, boxes2: Array) -> Array:
    """IoU of axis-aligned boxes ``(N, 4)`` x ``(M, 4)`` xyxy → ``(N, M)``; a pair with zero union has IoU 0."""
    a = np.asarray(boxes1, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(boxes2, dtype=np.float64).reshape(-1, 4)
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)))
    iw = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    ih = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    inter = np.clip(iw, 0, None) * np.clip(ih, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    iou: Array = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
    return iou


def rotated_iou(rboxes1: Array, rboxes2: Array) -> Array:
    """Exact IoU of rotated boxes ``(N, 5)`` x ``(M, 5)`` (cx, cy, w, h, θ) → ``(N, M)`` (polygon clipping)."""
    a = np.asarray(rboxes1, dtype=np.float64).reshape(-1, 5)
    b = np.asarray(rboxes2, dtype=np.float64).reshape(-1, 5)
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)))
    iou = rbox_iou(torch.from_numpy(a), torch.from_numpy(b), pairwise=True)
    return np.asarray(iou.numpy(), dtype=np.float64)


def fuse_score(cost: Array, scores: Array) -> Array:
    """``1 − IoU·score``: an IoU cost ``(N, M)`` weighted by the detection scores ``(M,)``."""
    return 1.0 - (1.0 - cost) * np.asarray(scores, dtype=np.float64)[None, :]
