"""Annotations of one image: the `Targets` container shared by readers, augmentation, evaluation and viz.

The layout is fixed by `docs/INTERFACES.md` ("Batches", `lucid_data.Targets`): numpy arrays in pixels of the
image the targets belong to (the original image for readers, the network input after augmentation).

Rotated boxes follow the convention of `../shared/fixtures/README.md` (decoding section): `(cx, cy, w, h, θ)`
with θ in radians and corners `c ± v1 ± v2`, `v1 = (w/2·cosθ, w/2·sinθ)`, `v2 = (−h/2·sinθ, h/2·cosθ)`, i.e. `w`
is the side along direction θ. Readers emit the canonical form w ≥ h, θ ∈ [−π/4, 3π/4) (see `lucid_data.readers.geometry`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

__all__ = ["Targets", "centre_form"]


def centre_form(boxes: np.ndarray) -> np.ndarray:
    """(N, 4) xyxy → (N, 4) float32 cx, cy, w, h, in float32 arithmetic (the batch layout's rounding)."""
    b = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
    out: np.ndarray = np.stack(
        ((b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2, b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]), -1
    ).astype(np.float32)
    return out


def _empty_flags() -> np.ndarray:
    return np.zeros(0, dtype=bool)


@dataclass
class Targets:
    """Instances of one image. All per-instance fields have the same leading length N.

    - boxes: (N, 4) float32, xyxy pixels (for OBB: the axis-aligned hull of the rotated box).
    - labels: (N,) int64, contiguous class index 0..nc-1.
    - polygons: list of N arrays (P_i, 2) float32 pixels (instance outlines; DOTA: the 4 labelled corners) or None.
    - masks: (N, H, W) bool or None (decoded instance masks, H, W = image size).
    - keypoints: (N, K, 3) float32 (x, y pixels; v = 0 not labelled, 1 occluded, 2 visible) or None.
    - rboxes: (N, 5) float32 (cx, cy, w, h, θ radians) or None.
    - iscrowd, difficult: (N,) bool (all False when not given).
    - image_id: dataset image id (COCO int id, or the file stem for YOLO/DOTA).
    - orig_size: (h, w) of the image these pixels refer to when read from disk.
    - box_centres: (N, 4) float32 (cx, cy, w, h pixels) or None: the same boxes in centre form where the last
      operation defined them there (a flip mirrors the centre); the batch's ``bboxes`` are made from it, else
      from ``boxes``. Anything that moves ``boxes`` resets it to None.
    """

    boxes: np.ndarray
    labels: np.ndarray
    polygons: list[np.ndarray] | None = None
    masks: np.ndarray | None = None
    keypoints: np.ndarray | None = None
    rboxes: np.ndarray | None = None
    iscrowd: np.ndarray = field(default_factory=_empty_flags)
    difficult: np.ndarray = field(default_factory=_empty_flags)
    image_id: int | str = 0
    orig_size: tuple[int, int] = (0, 0)
    box_centres: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.boxes = np.asarray(self.boxes, dtype=np.float32).reshape(-1, 4)
        n = self.boxes.shape[0]
        self.labels = np.asarray(self.labels, dtype=np.int64).reshape(-1)
        if self.labels.shape[0] != n:
            raise ValueError(f"Targets: labels has {self.labels.shape[0]} entries, boxes has {n}")
        if self.polygons is not None:
            self.polygons = [np.asarray(p, dtype=np.float32).reshape(-1, 2) for p in self.polygons]
            if len(self.polygons) != n:
                raise ValueError(f"Targets: polygons has {len(self.polygons)} entries, boxes has {n}")
        if self.masks is not None:
            self.masks = np.asarray(self.masks, dtype=bool)
            if self.masks.ndim != 3 or self.masks.shape[0] != n:
                raise ValueError(f"Targets: masks must be (N={n}, H, W), got {self.masks.shape}")
        if self.keypoints is not None:
            self.keypoints = np.asarray(self.keypoints, dtype=np.float32)
            if self.keypoints.ndim != 3 or self.keypoints.shape[0] != n or self.keypoints.shape[2] != 3:
                raise ValueError(f"Targets: keypoints must be (N={n}, K, 3), got {self.keypoints.shape}")
        if self.rboxes is not None:
            self.rboxes = np.asarray(self.rboxes, dtype=np.float32).reshape(-1, 5)
            if self.rboxes.shape[0] != n:
                raise ValueError(f"Targets: rboxes has {self.rboxes.shape[0]} rows, boxes has {n}")
        if self.box_centres is not None:
            self.box_centres = np.asarray(self.box_centres, dtype=np.float32).reshape(-1, 4)
            if self.box_centres.shape[0] != n:
                raise ValueError(f"Targets: box_centres has {self.box_centres.shape[0]} rows, boxes has {n}")
        self.iscrowd = self._flags(self.iscrowd, n, "iscrowd")
        self.difficult = self._flags(self.difficult, n, "difficult")
        self.orig_size = (int(self.orig_size[0]), int(self.orig_size[1]))

    @staticmethod
    def _flags(values: Any, n: int, name: str) -> np.ndarray:
        flags = np.asarray(values, dtype=bool).reshape(-1)
        if flags.shape[0] == 0 and n > 0:
            return np.zeros(n, dtype=bool)
        if flags.shape[0] != n:
            raise ValueError(f"Targets: {name} has {flags.shape[0]} entries, boxes has {n}")
        return flags

    def __len__(self) -> int:
        return int(self.boxes.shape[0])

    def centres(self) -> np.ndarray:
        """(N, 4) float32 cx, cy, w, h pixels: ``box_centres`` when set, else computed from ``boxes`` in float32
        (centre = (x1 + x2) / 2, size = x2 − x1)."""
        if self.box_centres is not None:
            return self.box_centres
        return centre_form(self.boxes)

    @classmethod
    def empty(
        cls,
        image_id: int | str = 0,
        orig_size: tuple[int, int] = (0, 0),
        *,
        num_keypoints: int | None = None,
        polygons: bool = False,
        masks: bool = False,
        rboxes: bool = False,
    ) -> Targets:
        """No instances, with the optional fields present (empty) for the requested task."""
        h, w = orig_size
        return cls(
            boxes=np.zeros((0, 4), np.float32),
            labels=np.zeros(0, np.int64),
            polygons=[] if polygons else None,
            masks=np.zeros((0, h, w), bool) if masks else None,
            keypoints=np.zeros((0, num_keypoints, 3), np.float32) if num_keypoints is not None else None,
            rboxes=np.zeros((0, 5), np.float32) if rboxes else None,
            image_id=image_id,
            orig_size=orig_size,
        )

    def select(self, index: np.ndarray | list[int] | slice) -> Targets:
        """Instances picked by a boolean mask (N,) or integer indices; optional fields follow."""
        idx = np.asarray(index) if not isinstance(index, slice) else np.arange(len(self))[index]
        if idx.dtype == bool:
            if idx.shape != (len(self),):
                raise ValueError(
                    f"Targets.select: boolean mask of shape {idx.shape} for {len(self)} instances"
                )
            idx = np.flatnonzero(idx)
        idx = idx.astype(np.int64).reshape(-1)
        return replace(
            self,
            boxes=self.boxes[idx],
            labels=self.labels[idx],
            polygons=[self.polygons[i] for i in idx] if self.polygons is not None else None,
            masks=self.masks[idx] if self.masks is not None else None,
            keypoints=self.keypoints[idx] if self.keypoints is not None else None,
            rboxes=self.rboxes[idx] if self.rboxes is not None else None,
            box_centres=self.box_centres[idx] if self.box_centres is not None else None,
            iscrowd=self.iscrowd[idx],
            difficult=self.difficult[idx],
        )

    def copy(self) -> Targets:
        """Deep copy of every array (augmentations may then modify in place)."""
        return replace(
            self,
            boxes=self.boxes.copy(),
            labels=self.labels.copy(),
            polygons=[p.copy() for p in self.polygons] if self.polygons is not None else None,
            masks=self.masks.copy() if self.masks is not None else None,
            keypoints=self.keypoints.copy() if self.keypoints is not None else None,
            rboxes=self.rboxes.copy() if self.rboxes is not None else None,
            box_centres=self.box_centres.copy() if self.box_centres is not None else None,
            iscrowd=self.iscrowd.copy(),
            difficult=self.difficult.copy(),
        )
