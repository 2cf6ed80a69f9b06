"""Polygon → training-mask rasterisation of segment samples: the batch layout the segment objective reads.

Rules R1–R6 of ``shared/fixtures/README.md``, section "segment_loss_yolov8n-seg.pt, segment_loss_yolo26n-seg.pt",
"Rasterisation" (reproduced exactly on the fixtures' images):

- R1 (:func:`resample_polygons`): every polygon of an image is resampled to 1000 points (``max_len + 1`` when an
  image has a longer one) by linear interpolation along the closed outline, in double, cast to float32.
- R2/R3 (:func:`rasterize_polygon`): vertices truncated to int32, filled at the full input resolution with
  ``cv2.fillPoly(..., 1)`` (8-connected outline + even–odd scan-line fill, segments clipped to the image).
- R4 (:func:`downsample_mask`): per instance ``cv2.resize`` bilinear to (H/r, W/r) (for r = 4: a pixel is on iff
  at least two of the 2×2 centre pixels of its 4×4 block are).
- R5 (:func:`overlap_index_map`): ``overlap_mask`` — instances sorted by *descending* area with area-0 instances
  **first** (ascending sort of the unsigned-64 negation of the area), index map = running maximum of
  ``(k + 1) · mask_k`` so that the later (smaller) instance wins.
- R6: ``sem_masks`` — class per mask pixel (overlap: the class of the index-map instance, the last sorted
  instance's class where the map is 0; no overlap: the smallest covering instance's class, 0 where none).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

__all__ = [
    "RESAMPLE_POINTS",
    "SegmentMasks",
    "downsample_mask",
    "instance_masks",
    "overlap_index_map",
    "rasterize_polygon",
    "resample_polygon",
    "resample_polygons",
    "segment_masks",
    "semantic_from_instances",
]

RESAMPLE_POINTS = 1000  # R1: points per polygon after resampling


def resample_polygon(polygon: np.ndarray, num_points: int = RESAMPLE_POINTS) -> np.ndarray:
    """R1: (P, 2) polygon → (num_points, 2) float32 points along its closed outline.

    The outline is closed by appending the first vertex (P + 1 points, parameters 0..P); the parameters
    ``linspace(0, P, num_points − (P + 1))`` get the integers 0..P inserted in front of equal values, and x, y are
    linearly interpolated there in double. A polygon of exactly ``num_points`` points is returned unchanged.
    """
    points = np.asarray(polygon, dtype=np.float32).reshape(-1, 2)
    count = points.shape[0]
    if count == num_points or count == 0:
        return points.copy()
    if count + 1 > num_points:
        raise ValueError(
            f"resample_polygon: a polygon of {count} points cannot be resampled to {num_points} points "
            f"(use resample_polygons, which raises the count to max_len + 1)"
        )
    closed = np.concatenate((points, points[:1]), 0).astype(np.float64)
    knots = np.arange(count + 1, dtype=np.float64)
    params = np.linspace(0, count, num_points - (count + 1))
    params = np.insert(params, np.searchsorted(params, knots), knots)
    out = np.stack([np.interp(params, knots, closed[:, i]) for i in range(2)], 1)
    return out.astype(np.float32)


def resample_polygons(polygons: Sequence[np.ndarray], num_points: int = RESAMPLE_POINTS) -> list[np.ndarray]:
    """R1 for one image: all polygons to ``num_points`` points, or ``max_len + 1`` if one is longer."""
    longest = max((len(p) for p in polygons), default=0)
    target = longest + 1 if longest > num_points else num_points
    return [resample_polygon(p, target) for p in polygons]


def rasterize_polygon(polygon_px: np.ndarray, image_hw: tuple[int, int]) -> np.ndarray:
    """R2/R3: (H, W) uint8 0/1 image of one polygon in pixels (vertices truncated toward zero, cv2.fillPoly)."""
    height, width = image_hw
    out = np.zeros((height, width), np.uint8)
    points = np.asarray(polygon_px, dtype=np.float64).reshape(-1, 2)
    if points.shape[0] == 0:
        return out
    if not np.isfinite(points).all():
        raise ValueError(
            f"rasterize_polygon: polygon has non-finite vertices: {points[~np.isfinite(points).all(1)][:3]}"
        )
    limit = float(1 << 20)  # far outside any image; keeps the int32 fixed-point arithmetic in range
    vertices = np.clip(points, -limit, limit).astype(np.int32)  # truncation toward zero
    cv2.fillPoly(out, [vertices.reshape(1, -1, 2)], 1)
    return out


def downsample_mask(mask: np.ndarray, ratio: int) -> np.ndarray:
    """R4: (H, W) 0/1 uint8 → (H / ratio, W / ratio) with ``cv2.resize`` bilinear (identity for ratio 1)."""
    if ratio < 1:
        raise ValueError(f"downsample_mask: mask ratio must be >= 1, got {ratio}")
    if ratio == 1:
        return mask.astype(np.uint8, copy=True)
    height, width = mask.shape
    resized: np.ndarray = cv2.resize(
        mask.astype(np.uint8), (width // ratio, height // ratio), interpolation=cv2.INTER_LINEAR
    )
    return resized


def instance_masks(polygons_px: Sequence[np.ndarray], image_hw: tuple[int, int], ratio: int) -> np.ndarray:
    """R2–R4: (N, H / ratio, W / ratio) uint8 0/1 masks of polygons already in input pixels (label order)."""
    height, width = image_hw
    out = np.zeros((len(polygons_px), height // ratio, width // ratio), np.uint8)
    for i, polygon in enumerate(polygons_px):
        out[i] = downsample_mask(rasterize_polygon(polygon, image_hw), ratio)
    return out


def overlap_index_map(masks: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """R5/R6 with ``overlap_mask``: (index map (h, w), sort order (N,), sem_masks (h, w) float32).

    ``order[k]`` is the label index of the k-th instance (descending area, area-0 instances first, ties in label
    order); the map holds k + 1 where the k-th sorted instance is the last to cover a pixel; ``sem_masks`` the
    class of the map's instance (of the last sorted instance where the map is 0).
    """
    count, height, width = masks.shape
    if count == 0:
        return (
            np.zeros((height, width), np.uint8),
            np.zeros(0, np.int64),
            np.zeros((height, width), np.float32),
        )
    areas = masks.reshape(count, -1).sum(1).astype(np.uint64)
    order = np.argsort(np.negative(areas), kind="stable").astype(np.int64)  # unsigned negation: area 0 first
    dtype = np.uint8 if count < 255 else np.int32
    index_map = np.zeros((height, width), dtype)
    for k, i in enumerate(order):
        np.maximum(index_map, (masks[i] > 0).astype(dtype) * dtype(k + 1), out=index_map)
    sorted_labels = np.asarray(labels, dtype=np.float32).reshape(-1)[order]
    sem = sorted_labels[index_map.astype(np.int64) - 1]  # map 0 → index −1: the last sorted instance's class
    return index_map, order, sem.astype(np.float32)


def semantic_from_instances(masks: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """R6 without overlap: (h, w) float32 class of the smallest covering instance (label order on ties), else 0."""
    count, height, width = masks.shape
    sem = np.zeros((height, width), np.float32)
    if count == 0:
        return sem
    areas = masks.reshape(count, -1).sum(1)
    labels = np.asarray(labels, dtype=np.float32).reshape(-1)
    painted = np.zeros((height, width), bool)
    for i in np.lexsort((np.arange(count), areas)):  # ascending area, label order on ties: first wins
        cover = (masks[i] > 0) & ~painted
        sem[cover] = labels[i]
        painted |= cover
    return sem


@dataclass
class SegmentMasks:
    """Training masks of one image (the per-sample part of the segment batch layout)."""

    masks: np.ndarray  # overlap: (h, w) index map; else (N, h, w) uint8 0/1 masks in label order
    sem_masks: np.ndarray  # (h, w) float32 class ids
    order: np.ndarray  # (N,) int64: target order (overlap: area sort of R5; else identity)


def segment_masks(
    polygons_px: Sequence[np.ndarray],
    labels: np.ndarray,
    image_hw: tuple[int, int],
    ratio: int,
    *,
    overlap: bool = True,
    resample: bool = True,
) -> SegmentMasks:
    """R1–R6 for one image whose polygons are in input pixels.

    ``resample`` applies R1 first (the reference resamples every polygon to 1000 points before rasterising;
    pass False for polygons that already are resampled, e.g. the fixture's ``segments_px``). The image's targets
    must be re-ordered with ``order`` when ``overlap`` (the map's values refer to the sorted order).
    """
    if ratio < 1 or image_hw[0] % ratio or image_hw[1] % ratio:
        raise ValueError(f"segment_masks: mask ratio {ratio} must divide the image size {tuple(image_hw)}")
    polygons = (
        resample_polygons(polygons_px) if resample else [np.asarray(p, np.float32) for p in polygons_px]
    )
    labels = np.asarray(labels).reshape(-1)
    if len(polygons) != labels.shape[0]:
        raise ValueError(f"segment_masks: {len(polygons)} polygons for {labels.shape[0]} labels")
    per_instance = instance_masks(polygons, image_hw, ratio)
    if overlap:
        index_map, order, sem = overlap_index_map(per_instance, labels)
        return SegmentMasks(index_map, sem, order)
    return SegmentMasks(
        per_instance, semantic_from_instances(per_instance, labels), np.arange(len(polygons), dtype=np.int64)
    )
