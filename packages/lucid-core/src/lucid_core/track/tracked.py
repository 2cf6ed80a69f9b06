"""The trackers' input (one frame's detections, checked) and output (:class:`TrackedDetections`).

A frame is a :class:`~lucid_core.results.Detections` (axis-aligned boxes, or rotated boxes in ``rboxes``; masks and
keypoints ride along) or an ``(N, 6)`` array ``x1, y1, x2, y2, score, class``. Rows with a non-finite value or an
empty box are dropped and counted (``TrackedDetections.dropped``), never passed to the filters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from lucid_core.results import Detections

__all__ = ["FrameDetections", "TrackedDetections", "as_frame", "select"]

Array = NDArray[np.float64]


@dataclass
class TrackedDetections:
    """The detections of one frame that belong to a confirmed track, with the track IDs.

    ``detections`` holds those rows of the input (every field: boxes, scores, labels, masks, keypoints, rboxes),
    ``ids`` their track IDs (1, 2, … per video, int64), ``indices`` their row in the input ``Detections``.
    ``track_boxes`` is the filtered box of each track after this frame's update, in the input's box form
    (``(N, 4)`` xyxy, or ``(N, 5)`` rotated boxes when the input had ``rboxes``). A results object exposes
    ``ids`` as ``boxes.id``.
    """

    detections: Detections
    ids: Tensor  # (N,) int64
    indices: Tensor  # (N,) int64
    track_boxes: Tensor  # (N, 4) xyxy or (N, 5) cx, cy, w, h, theta; float32
    dropped: int = 0  # input rows skipped in this frame (non-finite values or an empty box)

    def __len__(self) -> int:
        return int(self.ids.shape[0])


@dataclass
class FrameDetections:
    """One frame's valid detections as float64 NumPy arrays, with their rows in the input."""

    source: Detections | NDArray[np.float64]  # the input (an (N, 6) array as given)
    xywh: Array  # (N, 4) cx, cy, w, h (rotated: the rbox's own w, h)
    xyxy: Array  # (N, 4) axis-aligned box (rotated: the hull)
    scores: Array  # (N,)
    labels: NDArray[np.int64]  # (N,)
    angles: Array | None  # (N,) radians for rotated boxes
    index: NDArray[np.int64]  # (N,) rows of the input
    dropped: int

    def __len__(self) -> int:
        return int(self.scores.shape[0])


def _as_array(data: Any) -> NDArray[np.float64]:
    array = data.detach().cpu().numpy() if isinstance(data, Tensor) else np.asarray(data)
    if array.size == 0:
        return np.zeros((0, 6))
    if array.ndim != 2 or array.shape[1] != 6:
        raise ValueError(
            f"detections: expected an (N, 6) array x1, y1, x2, y2, score, class, got shape {tuple(array.shape)}"
        )
    return np.asarray(array, dtype=np.float64)


def _numpy(t: Tensor, dtype: type, width: int | None = None) -> NDArray[Any]:
    array: NDArray[Any] = t.detach().cpu().numpy().astype(dtype, copy=False)
    return array.reshape(-1, width) if width else array.reshape(-1)


def as_frame(detections: Detections | Any) -> FrameDetections:
    """Check and convert one frame's detections (module docstring); raises ValueError on a wrong shape."""
    source: Detections | NDArray[np.float64]
    if isinstance(detections, Detections):
        source = detections
        boxes = _numpy(source.boxes, np.float64, 4)
        scores = _numpy(source.scores, np.float64)
        labels = _numpy(source.labels, np.int64)
        rboxes = None if source.rboxes is None else _numpy(source.rboxes, np.float64, 5)
    else:
        source = _as_array(detections)
        boxes, scores, rboxes = source[:, :4], source[:, 4], None
        labels = np.where(np.isfinite(source[:, 5]), source[:, 5], -1).astype(np.int64)
    if not (len(boxes) == len(scores) == len(labels)):
        raise ValueError(
            f"detections: {len(boxes)} boxes, {len(scores)} scores and {len(labels)} labels differ in number"
        )
    if rboxes is not None:
        if len(rboxes) != len(scores):
            raise ValueError(f"detections: {len(rboxes)} rboxes for {len(scores)} scores")
        valid = np.isfinite(rboxes).all(1) & (rboxes[:, 2] > 0) & (rboxes[:, 3] > 0)
        xywh, angles = rboxes[:, :4], rboxes[:, 4]
    else:
        wh = boxes[:, 2:] - boxes[:, :2]
        valid = (wh > 0).all(1)
        xywh = np.concatenate([(boxes[:, :2] + boxes[:, 2:]) / 2, wh], axis=1)
        angles = None
    valid &= np.isfinite(boxes).all(1) & np.isfinite(scores)
    index = np.flatnonzero(valid)
    return FrameDetections(
        source=source,
        xywh=xywh[index],
        xyxy=boxes[index],
        scores=scores[index],
        labels=labels[index],
        angles=None if angles is None else angles[index],
        index=index.astype(np.int64),
        dropped=int(len(scores) - len(index)),
    )


def select(source: Detections | NDArray[np.float64], rows: NDArray[np.int64]) -> Detections:
    """The rows ``rows`` of every field of a ``Detections``, or of an ``(N, 6)`` array as ``Detections``."""
    if not isinstance(source, Detections):
        picked = source[rows]
        return Detections(
            boxes=torch.from_numpy(picked[:, :4].astype(np.float32)),
            scores=torch.from_numpy(picked[:, 4].astype(np.float32)),
            labels=torch.from_numpy(np.where(np.isfinite(picked[:, 5]), picked[:, 5], -1).astype(np.int64)),
        )
    index = torch.from_numpy(rows)

    def pick(t: Tensor | None) -> Tensor | None:
        return None if t is None else t[index.to(t.device)]

    return Detections(
        boxes=source.boxes[index.to(source.boxes.device)],
        scores=source.scores[index.to(source.scores.device)],
        labels=source.labels[index.to(source.labels.device)],
        masks=pick(source.masks),
        keypoints=pick(source.keypoints),
        rboxes=pick(source.rboxes),
    )
