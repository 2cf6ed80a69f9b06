"""Tiles of a large image and the merge of their detections (sliced inference, DOTA scene splitting).

Tiling: windows of ``slice`` pixels stepping ``slice − overlap`` with the last window flush with the edge
(:func:`tile_windows`, the DOTA devkit's split); every window of an image has the same size, so tiles are
letterboxed alike and forwarded as one batch. Merging (:func:`merge_tiles`) follows the DOTA tile-merge rule:
detections are mapped back by their tile's offset, then greedy NMS per class (all classes with ``agnostic``) at
IoU ``merge_iou`` (0.1) on the exact box, or rotated-box polygon, keeps the best of each overlapping group.
Before that, a detection touching an inner tile edge (an edge that is not the image border) is dropped when
another tile contains its whole box: that tile sees at least as much of the object, so a cut object is reported
once, from the tile that sees it whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torchvision
from torch import Tensor

from lucid_core.decode import DEFAULT_MAX_DET
from lucid_core.geometry.polygon_iou import paired_polygon_iou
from lucid_core.geometry.rotated import rboxes_to_polygons
from lucid_core.results import Detections

__all__ = [
    "MERGE_NMS_IOU",
    "TileDetections",
    "Window",
    "merge_tiles",
    "polygon_nms",
    "slice_windows",
    "tile_windows",
]

#: IoU above which merging suppresses the lower-scoring of two same-class detections (the DOTA devkit's value)
MERGE_NMS_IOU = 0.1
#: a box side within this many pixels of an inner tile edge touches it
EDGE_TOLERANCE = 1.0

Window = tuple[int, int, int, int]


def tile_windows(height: int, width: int, tile_size: int = 1024, overlap: int = 200) -> list[Window]:
    """(x0, y0, x1, y1) windows covering the scene; stride tile_size − overlap, last window flush with the edge."""
    if not 0 <= overlap < tile_size:
        raise ValueError(f"overlap must be in [0, tile_size), got overlap={overlap} tile_size={tile_size}")
    stride = tile_size - overlap

    def starts(n: int) -> list[int]:
        if n <= tile_size:
            return [0]
        s = list(range(0, n - tile_size, stride))
        return [*s, n - tile_size]

    return [
        (x, y, min(x + tile_size, width), min(y + tile_size, height))
        for y in starts(height)
        for x in starts(width)
    ]


def slice_windows(height: int, width: int, slice: int = 640, overlap: float = 0.2) -> list[Window]:
    """:func:`tile_windows` of ``slice``-pixel tiles overlapping by the fraction ``overlap`` (rounded to pixels)."""
    if slice <= 0:
        raise ValueError(f"slice must be a positive number of pixels, got {slice}")
    if not 0.0 <= overlap < 1.0:
        raise ValueError(f"overlap must be a fraction in [0, 1), got {overlap}")
    return tile_windows(height, width, slice, min(round(slice * overlap), slice - 1))


def polygon_nms(polygons: np.ndarray, scores: np.ndarray, iou_threshold: float = MERGE_NMS_IOU) -> np.ndarray:
    """Indices kept by greedy polygon NMS (highest score first; ties keep the earlier row), descending score.

    Only pairs whose axis-aligned hulls overlap get the exact polygon IoU (others have IoU 0).
    """
    polygons = np.asarray(polygons, dtype=np.float64).reshape(-1, 4, 2)
    n = polygons.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    polys = polygons[order]
    lo, hi = polys.min(1), polys.max(1)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    block = 2048
    for start in range(0, n, block):
        r = slice(start, min(start + block, n))
        near = (lo[r, None, :] < hi[None, :, :]).all(-1) & (hi[r, None, :] > lo[None, :, :]).all(-1)
        i, j = np.nonzero(near)
        i = i + start
        later = j > i
        rows.append(i[later])
        cols.append(j[later])
    pi, pj = np.concatenate(rows), np.concatenate(cols)
    if pi.size:
        iou = paired_polygon_iou(torch.from_numpy(polys[pi]), torch.from_numpy(polys[pj])).numpy()
        over = iou > iou_threshold
        pi, pj = pi[over], pj[over]
    # CSR adjacency: for each box, the later boxes it suppresses when kept
    starts = np.searchsorted(pi, np.arange(n + 1))
    suppressed = np.zeros(n, dtype=bool)
    keep: list[int] = []
    for k in range(n):
        if suppressed[k]:
            continue
        keep.append(k)
        suppressed[pj[starts[k] : starts[k + 1]]] = True
    return np.asarray(order[np.asarray(keep, dtype=np.int64)], dtype=np.int64)


@dataclass
class TileDetections:
    """One tile's detections in tile pixels (masks: the tile's size) and the tile's window in the image."""

    window: Window
    detections: Detections


def _shift(det: Detections, x0: int, y0: int) -> Detections:
    """Boxes, rotated boxes and keypoints moved by (x0, y0); masks are left in the tile frame."""
    offset = torch.tensor([x0, y0], dtype=det.boxes.dtype)
    out = Detections(
        boxes=det.boxes + offset.repeat(2), scores=det.scores, labels=det.labels, masks=det.masks
    )
    if det.rboxes is not None:
        rboxes = det.rboxes.clone()
        rboxes[:, :2] += offset.to(rboxes.dtype)
        out.rboxes = rboxes
    if det.keypoints is not None:
        keypoints = det.keypoints.clone()
        keypoints[..., :2] += offset.to(keypoints.dtype)
        out.keypoints = keypoints
    return out


def _cut_and_seen_elsewhere(
    boxes: Tensor, tile: int, windows: Sequence[Window], image_hw: tuple[int, int]
) -> Tensor:
    """Which image-pixel ``boxes`` of tile ``tile`` touch an inner edge of it while another window holds them."""
    x0, y0, x1, y1 = windows[tile]
    h, w = image_hw
    tol = EDGE_TOLERANCE
    touches = torch.zeros(len(boxes), dtype=torch.bool)
    if x0 > 0:
        touches |= boxes[:, 0] <= x0 + tol
    if y0 > 0:
        touches |= boxes[:, 1] <= y0 + tol
    if x1 < w:
        touches |= boxes[:, 2] >= x1 - tol
    if y1 < h:
        touches |= boxes[:, 3] >= y1 - tol
    held = torch.zeros(len(boxes), dtype=torch.bool)
    for k, (a0, b0, a1, b1) in enumerate(windows):
        if k != tile:
            held |= (boxes[:, 0] >= a0) & (boxes[:, 1] >= b0) & (boxes[:, 2] <= a1) & (boxes[:, 3] <= b1)
    return touches & held


def merge_tiles(
    tiles: Sequence[TileDetections],
    image_hw: tuple[int, int],
    *,
    merge_iou: float = MERGE_NMS_IOU,
    max_det: int = DEFAULT_MAX_DET,
    agnostic: bool = False,
) -> Detections:
    """Tile detections → one image's detections (module docstring), best score first, at most ``max_det``.

    Masks (tile-sized) are pasted into ``image_hw``-sized masks; the other fields are shifted by the tile origin.
    """
    windows = [t.window for t in tiles]
    parts: list[Detections] = []
    origins: list[tuple[int, int]] = []  # (tile, row in that tile's detections) of every candidate
    for index, tile in enumerate(tiles):
        det = tile.detections.to("cpu")
        if len(det) == 0:
            continue
        shifted = _shift(det, tile.window[0], tile.window[1])
        keep = ~_cut_and_seen_elsewhere(shifted.boxes, index, windows, image_hw)
        rows = torch.nonzero(keep).flatten()
        parts.append(shifted.select(rows))
        origins.extend((index, int(r)) for r in rows)
    h, w = image_hw
    if not parts:
        empty = Detections.empty()
        if any(t.detections.masks is not None for t in tiles):
            empty.masks = torch.zeros((0, h, w), dtype=torch.bool)
        return empty
    boxes = torch.cat([p.boxes for p in parts])
    scores = torch.cat([p.scores for p in parts])
    labels = torch.cat([p.labels for p in parts])
    groups = torch.zeros_like(labels) if agnostic else labels
    rboxes = [p.rboxes for p in parts if p.rboxes is not None]
    if len(rboxes) == len(parts):
        polygons = rboxes_to_polygons(torch.cat(rboxes).double()).numpy()
        kept_rows = []
        group_np, score_np = groups.numpy(), scores.double().numpy()
        for g in np.unique(group_np):
            members = np.flatnonzero(group_np == g)
            kept_rows.append(members[polygon_nms(polygons[members], score_np[members], merge_iou)])
        keep = torch.from_numpy(np.concatenate(kept_rows))
    else:
        keep = torchvision.ops.batched_nms(boxes.float(), scores.float(), groups, merge_iou)
    keep = keep[torch.argsort(scores[keep], descending=True, stable=True)][:max_det]
    merged = Detections(boxes=boxes[keep], scores=scores[keep], labels=labels[keep])
    if len(rboxes) == len(parts):
        merged.rboxes = torch.cat(rboxes)[keep]
    keypoints = [p.keypoints for p in parts if p.keypoints is not None]
    if len(keypoints) == len(parts):
        merged.keypoints = torch.cat(keypoints)[keep]
    if all(p.masks is not None for p in parts):
        masks = torch.zeros((len(keep), h, w), dtype=torch.bool)
        for out_row, k in enumerate(keep.tolist()):
            tile, row = origins[k]
            x0, y0, x1, y1 = tiles[tile].window
            tile_masks = tiles[tile].detections.masks
            assert tile_masks is not None
            masks[out_row, y0:y1, x0:x1] = tile_masks[row].cpu()
        merged.masks = masks
    return merged
