"""Sliced inference for small objects on large images: tile, predict per tile in batches, merge.

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
from typing import Any, Literal

import numpy as np
import torch
import torchvision
from torch import Tensor

from lucid_core.decode import DEFAULT_IOU, DEFAULT_MAX_DET, PREDICT_CONF
from lucid_core.decode.selection import class_filter
from lucid_core.geometry.letterbox import (
    LetterboxInfo,
    letterbox,
)
from lucid_core.geometry.polygon_iou import paired_polygon_iou
from lucid_core.geometry.rotated import rboxes_to_polygons
from lucid_core.inference import (
    ImageInput,
    as_rgb_tensor,
    detections_to_original,
    forward_for_decode,
    wants_channels_last,
)
from lucid_core.models import TrainOutput, YOLOModel
from lucid_core.postprocess import postprocess
from lucid_core.results import Detections

__all__ = [
    "MERGE_NMS_IOU",
    "TileDetections",
    "merge_tiles",
    "polygon_nms",
    "predict_sliced",
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


def _images(images: ImageInput | Sequence[ImageInput]) -> list[ImageInput]:
    """One image or a list/tuple of images; a BCHW tensor counts as B images."""
    items = list(images) if isinstance(images, list | tuple) else [images]
    out: list[ImageInput] = []
    for item in items:
        out.extend(item.unbind(0) if isinstance(item, Tensor) and item.ndim == 4 else [item])
    return out


def predict_sliced(
    net: YOLOModel,
    images: ImageInput | Sequence[ImageInput],
    *,
    mode: Literal["nms", "topk"],
    imgsz: int | tuple[int, int] = 640,
    conf: float = PREDICT_CONF,
    iou: float = DEFAULT_IOU,
    max_det: int = DEFAULT_MAX_DET,
    device: str | torch.device = "cpu",
    retina_masks: bool = False,
    classes: Sequence[int] | None = None,
    agnostic_nms: bool = False,
    slice: int = 640,
    overlap: float = 0.2,
    batch: int = 8,
    merge_iou: float = MERGE_NMS_IOU,
) -> list[Detections]:
    """:func:`lucid_core.inference.predict_prepared` on ``slice``-pixel tiles overlapping by ``overlap``, merged
    into one :class:`Detections` per image (original pixels, on the CPU; module docstring).

    Tiles are forwarded ``batch`` at a time, each letterboxed to ``imgsz`` and decoded like a whole image
    (``conf``, ``iou``, ``max_det`` per tile); ``max_det`` also caps the merged result. An image no larger than
    ``slice`` is one tile: the result of ``predict_prepared``.
    """
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    class_filter(classes, net.num_classes, torch.device("cpu"))  # a bad list fails before any image is read
    stride = max(net.strides)
    channels_last = wants_channels_last(net)
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    results: list[Detections] = []
    for item in _images(images):
        rgb = as_rgb_tensor(item)
        h, w = int(rgb.shape[1]), int(rgb.shape[2])
        windows = slice_windows(h, w, slice, overlap)
        tiles: list[TileDetections] = []
        for start in range(0, len(windows), batch):
            chunk = windows[start : start + batch]
            padded: list[Tensor] = []
            info: LetterboxInfo | None = None
            for x0, y0, x1, y1 in chunk:
                tile, info = letterbox(rgb[:, y0:y1, x0:x1], imgsz, auto=True, stride=stride)
                padded.append(tile)
            assert info is not None  # every window of an image has the same size: one letterbox for all
            x = torch.stack(padded).to(device=device, dtype=torch.float32, memory_format=memory_format) / 255
            with torch.inference_mode():
                output = forward_for_decode(net, x, mode)
            if isinstance(output, TrainOutput):
                raise RuntimeError("predict: the model returned training outputs in eval mode")
            for i, window in enumerate(chunk):
                one: Any = (
                    tuple(t[i : i + 1] for t in output) if isinstance(output, tuple) else output[i : i + 1]
                )
                (det,) = postprocess(
                    one,
                    task=net.task,
                    nc=net.num_classes,
                    mode=mode,
                    conf=conf,
                    iou=iou,
                    max_det=max_det,
                    kpt_shape=net.kpt_shape,
                    input_hw=info.input_hw,
                    retina_letterbox=info if retina_masks else None,
                    classes=classes,
                    agnostic=agnostic_nms,
                )
                tiles.append(
                    TileDetections(
                        window, detections_to_original(det.to("cpu"), info, masks_in_original=retina_masks)
                    )
                )
        if len(tiles) == 1:
            results.append(tiles[0].detections)
        else:
            results.append(
                merge_tiles(tiles, (h, w), merge_iou=merge_iou, max_det=max_det, agnostic=agnostic_nms)
            )
    return results
