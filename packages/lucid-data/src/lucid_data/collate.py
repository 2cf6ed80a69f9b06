"""Batch assembly: `collate(samples) -> dict`, exactly the "Batches" table of docs/INTERFACES.md.

Keys: images (B, 3, H, W) uint8; batch_idx (N,) float32 sorted; cls (N, 1) float32; bboxes (N, 4) normalised
cx, cy, w, h; keypoints (N, K, 3) with x, y normalised (pose); rboxes (N, 5) normalised cx, cy, w, h and θ radians
(obb); segment: masks at the dataset's mask ratio r — (B, H/r, W/r) index maps (overlap_mask, the default:
value k+1 = the image's k-th target, targets sorted by mask area) or (N, H/r, W/r) uint8 0/1 per-instance masks —,
sem_masks (B, H/r, W/r) float32 class ids (`lucid_data.masks`, fixture README R1–R6) and segments (list of N
normalised (P, 2) float32 tensors); hsv_gains (B, 3) float64, only from a dataset with ``defer_hsv``; targets
(per-image `Targets` in network-input pixels); meta. Samples of an image-level task (classify: a ``"label"`` each)
give images, cls (B,) int64 (one class index per image), targets and meta.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["collate"]


def collate(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Stack dataset samples ({"image", "targets", "meta"[, "masks"]}) into one training batch."""
    if not samples:
        raise ValueError("collate: empty list of samples")
    images = torch.stack([s["image"] for s in samples])
    if "label" in samples[0]:  # image-level samples (classification): one class index per image
        return {
            "images": images,
            "cls": torch.tensor([int(s["label"]) for s in samples], dtype=torch.int64),
            "targets": [s["targets"] for s in samples],
            "meta": [s["meta"] for s in samples],
        }
    _, _, height, width = images.shape
    norm = np.array([width, height, width, height], dtype=np.float32)
    targets = [s["targets"] for s in samples]
    batch_idx, cls, bboxes = [], [], []
    for i, t in enumerate(targets):
        n = len(t)
        batch_idx.append(np.full(n, i, dtype=np.float32))
        cls.append(t.labels.astype(np.float32).reshape(-1, 1))
        bboxes.append(t.centres().reshape(-1, 4) / norm)
    batch: dict[str, Any] = {
        "images": images,
        "batch_idx": torch.from_numpy(np.concatenate(batch_idx)),
        "cls": torch.from_numpy(np.concatenate(cls).reshape(-1, 1)),
        "bboxes": torch.from_numpy(np.concatenate(bboxes).reshape(-1, 4)),
    }
    if any(t.keypoints is not None for t in targets):
        kpts = [t.keypoints for t in targets if t.keypoints is not None]
        k = kpts[0].shape[1]
        parts = []
        for t in targets:
            kp = t.keypoints if t.keypoints is not None else np.zeros((len(t), k, 3), np.float32)
            kp = kp.astype(np.float32).copy()
            kp[..., 0] /= width
            kp[..., 1] /= height
            parts.append(kp.reshape(-1, k, 3))
        batch["keypoints"] = torch.from_numpy(np.concatenate(parts))
    if any(t.rboxes is not None for t in targets):
        parts = []
        for t in targets:
            r = t.rboxes if t.rboxes is not None else np.zeros((len(t), 5), np.float32)
            r = r.astype(np.float32).reshape(-1, 5) / np.array([width, height, width, height, 1], np.float32)
            parts.append(r)
        batch["rboxes"] = torch.from_numpy(np.concatenate(parts))
    if "masks" in samples[0]:
        per_image = [s["masks"] for s in samples]
        index_maps = per_image[0].ndim == 2  # overlap_mask: one (h, w) map per image, else (n, h, w) each
        batch["masks"] = torch.from_numpy(np.stack(per_image) if index_maps else np.concatenate(per_image))
        if "sem_masks" in samples[0]:
            batch["sem_masks"] = torch.from_numpy(
                np.stack([s["sem_masks"] for s in samples]).astype(np.float32)
            )
        scale = np.array([width, height], dtype=np.float32)
        batch["segments"] = [
            torch.from_numpy((p / scale).astype(np.float32)) for t in targets for p in (t.polygons or [])
        ]
    if "hsv_gains" in samples[0]:  # deferred HSV (`--data.device_hsv`): applied to the batch on the device
        batch["hsv_gains"] = torch.stack([s["hsv_gains"] for s in samples])
    batch["targets"] = targets
    batch["meta"] = [s["meta"] for s in samples]
    return batch
