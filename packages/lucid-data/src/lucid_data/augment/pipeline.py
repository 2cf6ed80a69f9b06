"""The training augmentation pipeline and its configuration (`AugmentConfig`, reference defaults).

Order (documented reference training transforms): [mosaic of 4 on a 2·imgsz canvas | letterbox to imgsz] →
copy-paste (p 0) → random affine cropping back to imgsz → mixup (p 0, partner built the same way) → HSV →
vertical flip (p 0) → horizontal flip (p 0.5, keypoints reordered by flip_idx).

Reproducibility (issue 5): every random draw, including the choice of mosaic and mixup partners, comes from the
`numpy.random.Generator` passed in, which the dataset seeds with `SeedSequence([seed, epoch, index, rank])`, so a
sample is a function of those four numbers only, whatever the worker layout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from lucid_data.augment.affine import random_affine
from lucid_data.augment.copy_paste import copy_paste_flip
from lucid_data.augment.flip import flip_horizontal, flip_vertical
from lucid_data.augment.hsv import augment_hsv
from lucid_data.augment.letterbox import letterbox_train
from lucid_data.augment.mixup import mixup
from lucid_data.augment.mosaic import mosaic4
from lucid_data.targets import Targets

__all__ = ["AugmentConfig", "AugmentPipeline", "ImageLoader"]

ImageLoader = Callable[[int], tuple[np.ndarray, Targets]]
"""index → (HWC uint8 RGB image resized so its long side is imgsz, its targets in those pixels)."""


@dataclass
class AugmentConfig:
    """Augmentation hyper-parameters; defaults are the reference's documented training defaults.

    mosaic 1.0, degrees 0, translate 0.1, scale 0.5, shear 0, perspective 0, hsv_h 0.015, hsv_s 0.7, hsv_v 0.4,
    flipud 0, fliplr 0.5, mixup 0, copy_paste 0, border fill 114, close_mosaic 10 (mosaic is switched off for the
    last `close_mosaic` epochs).
    """

    mosaic: float = 1.0
    degrees: float = 0.0
    translate: float = 0.1
    scale: float = 0.5
    shear: float = 0.0
    perspective: float = 0.0
    hsv_h: float = 0.015
    hsv_s: float = 0.7
    hsv_v: float = 0.4
    flipud: float = 0.0
    fliplr: float = 0.5
    mixup: float = 0.0
    copy_paste: float = 0.0
    fill: int = 114
    close_mosaic: int = 10

    def __post_init__(self) -> None:
        for name in ("mosaic", "flipud", "fliplr", "mixup", "copy_paste"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"AugmentConfig.{name} is a probability in [0, 1], got {value!r}")
        for name in ("translate", "scale", "hsv_h", "hsv_s", "hsv_v"):
            if getattr(self, name) < 0:
                raise ValueError(f"AugmentConfig.{name} must be >= 0, got {getattr(self, name)!r}")
        if self.close_mosaic < 0:
            raise ValueError(f"AugmentConfig.close_mosaic must be >= 0, got {self.close_mosaic!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AugmentConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"AugmentConfig: unknown option(s) {unknown}; known: {sorted(known)}")
        return cls(**data)


class AugmentPipeline:
    """Build one augmented training sample (imgsz x imgsz) from the dataset's image loader."""

    def __init__(
        self,
        config: AugmentConfig,
        imgsz: int,
        num_images: int,
        load: ImageLoader,
        flip_idx: list[int] | None = None,
    ) -> None:
        self.config = config
        self.imgsz = int(imgsz)
        self.num_images = int(num_images)
        self.load = load
        self.flip_idx = flip_idx

    def _affine(
        self, image: np.ndarray, targets: Targets, rng: np.random.Generator
    ) -> tuple[np.ndarray, Targets]:
        c = self.config
        return random_affine(
            image,
            targets,
            rng,
            out_hw=(self.imgsz, self.imgsz),
            degrees=c.degrees,
            translate=c.translate,
            scale=c.scale,
            shear=c.shear,
            perspective=c.perspective,
            fill=c.fill,
        )

    def base(
        self, index: int, rng: np.random.Generator, *, mosaic_enabled: bool
    ) -> tuple[np.ndarray, Targets]:
        """Mosaic (or letterbox) + copy-paste + random affine: an imgsz x imgsz image and its targets."""
        c = self.config
        if mosaic_enabled and c.mosaic > 0 and rng.random() < c.mosaic:
            partners = rng.integers(0, self.num_images, 3)
            loaded = [self.load(int(i)) for i in (index, *partners)]
            image, targets = mosaic4(
                [x[0] for x in loaded], [x[1] for x in loaded], rng, self.imgsz, fill=c.fill
            )
        else:
            image, targets = self.load(index)
            image, targets = letterbox_train(image, targets, self.imgsz, fill=c.fill, scaleup=False)
        image, targets = copy_paste_flip(image, targets, rng, c.copy_paste)
        return self._affine(image, targets, rng)

    def __call__(
        self, index: int, rng: np.random.Generator, *, mosaic_enabled: bool = True
    ) -> tuple[np.ndarray, Targets]:
        c = self.config
        image, targets = self.base(index, rng, mosaic_enabled=mosaic_enabled)
        if c.mixup > 0 and rng.random() < c.mixup:
            partner = int(rng.integers(0, self.num_images))
            image2, targets2 = self.base(partner, rng, mosaic_enabled=mosaic_enabled)
            image, targets = mixup(image, targets, image2, targets2, rng)
        image = augment_hsv(image, rng, c.hsv_h, c.hsv_s, c.hsv_v)
        if c.flipud > 0 and rng.random() < c.flipud:
            image, targets = flip_vertical(image, targets)
        if c.fliplr > 0 and rng.random() < c.fliplr:
            image, targets = flip_horizontal(image, targets, self.flip_idx)
        return image, targets
