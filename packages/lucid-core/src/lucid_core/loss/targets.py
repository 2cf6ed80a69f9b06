"""Packing of a flat target batch into padded per-image ground truth for the assigner.

Rule from ``shared/fixtures/README.md`` ("detection_loss_*.pt", "Targets"): targets are packed per image in order
of appearance into (B, M, ·) with M the largest number of objects in one image; boxes are scaled to pixels first
and then converted from centre/size to xyxy (this order matters for bit-exactness); ``mask_gt`` marks rows whose
coordinate sum is positive.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import torch
from torch import Tensor

from lucid_core.geometry.boxes import xywh_to_xyxy


class PaddedTargets(NamedTuple):
    """Ground truth of a batch, padded to M rows per image."""

    gt_labels: Tensor  # (B, M, 1) float32 class ids
    gt_bboxes: Tensor  # (B, M, 4) float32 xyxy pixels, zero for padding rows
    mask_gt: Tensor  # (B, M, 1) float32, 1.0 for real rows


def _require(batch: Mapping[str, Tensor], key: str, ndim: int, last: int | None) -> Tensor:
    if key not in batch:
        raise KeyError(
            f"target batch: missing key {key!r} (needs 'batch_idx', 'cls', 'bboxes'); got {sorted(batch)}"
        )
    value = batch[key]
    if value.ndim != ndim or (last is not None and value.shape[-1] != last):
        want = f"({'N' if ndim == 1 else f'N, {last}'})"
        raise ValueError(f"target batch: {key!r} must have shape {want}, got {tuple(value.shape)}")
    return value


def pack_targets(
    batch: Mapping[str, Tensor],
    batch_size: int,
    imgsz_hw: tuple[int, int],
    rows: int | None = None,
) -> PaddedTargets:
    """Pack ``batch_idx`` (N,), ``cls`` (N, 1), ``bboxes`` (N, 4) normalised cxcywh into padded pixel xyxy rows.

    ``rows`` fixes M. ``None`` uses the largest per-image count (the reference's M; data-dependent, so it reads a
    value from the tensor). Any ``rows`` >= that count gives the same assignment — extra rows are padding, which
    selects nothing — and ``rows = N`` is always enough, which is what the loss uses while being compiled.
    """
    batch_idx = _require(batch, "batch_idx", 1, None)
    cls = _require(batch, "cls", 2, 1)
    bboxes = _require(batch, "bboxes", 2, 4)
    num = batch_idx.shape[0]
    if cls.shape[0] != num or bboxes.shape[0] != num:
        raise ValueError(
            f"target batch: 'batch_idx' {tuple(batch_idx.shape)}, 'cls' {tuple(cls.shape)} and 'bboxes' "
            f"{tuple(bboxes.shape)} disagree on the number of instances"
        )
    device = bboxes.device
    image = batch_idx.to(device).long()  # (N,)
    if num > 0 and not torch.compiler.is_compiling():
        low, high = int(image.min()), int(image.max())
        if low < 0 or high >= batch_size:
            raise ValueError(
                f"target batch: 'batch_idx' values must lie in [0, {batch_size - 1}] for a batch of {batch_size} "
                f"images, got range [{low}, {high}]"
            )
    membership = (image.unsqueeze(1) == torch.arange(batch_size, device=device).unsqueeze(0)).long()  # (N, B)
    if rows is None:
        rows = int(membership.sum(0).max()) if num > 0 else 0
    height, width = imgsz_hw
    scale = torch.tensor([width, height, width, height], dtype=bboxes.dtype, device=device)
    labels = torch.zeros((batch_size, rows, 1), dtype=bboxes.dtype, device=device)
    boxes = torch.zeros((batch_size, rows, 4), dtype=bboxes.dtype, device=device)
    if num > 0 and rows > 0:
        # Rank of every instance inside its image, in order of appearance.
        rank = (membership.cumsum(0) - 1).gather(1, image.clamp(0, batch_size - 1).unsqueeze(1)).squeeze(1)
        labels = labels.index_put((image, rank), cls.to(bboxes.dtype))
        boxes = boxes.index_put((image, rank), xywh_to_xyxy(bboxes * scale))
    mask_gt = (boxes.sum(-1, keepdim=True) > 0).to(bboxes.dtype)
    return PaddedTargets(labels, boxes, mask_gt)
