"""Sliced inference for small objects on large images: tile, predict per tile in batches, merge.

The tiles and their merge are :mod:`lucid_core.tiles` (the DOTA devkit's split and tile-merge rule); the per-frame
prediction is :func:`lucid_core.inference.sliced_frame_detections`, which ``predict(..., slice=...)`` runs on
every frame of any source. :func:`predict_sliced` is the same on in-memory images (files, arrays, tensors).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from lucid_core.decode import DEFAULT_IOU, DEFAULT_MAX_DET, PREDICT_CONF
from lucid_core.decode.selection import class_filter
from lucid_core.inference import ImageInput, as_rgb_tensor, sliced_frame_detections, wants_channels_last
from lucid_core.models import YOLOModel
from lucid_core.results import Detections
from lucid_core.tiles import (
    MERGE_NMS_IOU,
    TileDetections,
    merge_tiles,
    polygon_nms,
    slice_windows,
    tile_windows,
)

__all__ = [
    "MERGE_NMS_IOU",
    "TileDetections",
    "merge_tiles",
    "polygon_nms",
    "predict_sliced",
    "slice_windows",
    "tile_windows",
]


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
    into one :class:`Detections` per image (original pixels, on the CPU):
    :func:`~lucid_core.inference.sliced_frame_detections` of each image.

    Tiles are forwarded ``batch`` at a time, each letterboxed to ``imgsz`` and decoded like a whole image
    (``conf``, ``iou``, ``max_det`` per tile); ``max_det`` also caps the merged result. An image no larger than
    ``slice`` is one tile: the result of ``predict_prepared``.
    """
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    class_filter(classes, net.num_classes, torch.device("cpu"))  # a bad list fails before any image is read
    memory_format = torch.channels_last if wants_channels_last(net) else torch.contiguous_format
    results: list[Detections] = []
    for item in _images(images):
        bgr = np.ascontiguousarray(as_rgb_tensor(item).permute(1, 2, 0).numpy()[..., ::-1])
        results.append(
            sliced_frame_detections(
                net,
                bgr,
                mode=mode,
                imgsz=imgsz,
                slice=slice,
                overlap=overlap,
                batch=batch,
                conf=conf,
                iou=iou,
                max_det=max_det,
                device=device,
                retina_masks=retina_masks,
                classes=classes,
                agnostic_nms=agnostic_nms,
                merge_iou=merge_iou,
                memory_format=memory_format,
            )
        )
    return results
