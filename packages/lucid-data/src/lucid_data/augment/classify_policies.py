"""The classification training transform with its policies: the random resized crop and flips of
:func:`lucid_data.augment.classify.classify_train`, then the ``auto_augment`` policy (:data:`POLICY_TRANSFORMS`:
``"randaugment"`` :func:`lucid_data.augment.randaugment.rand_augment`, ``"autoaugment"`` the ImageNet policy of
:func:`lucid_data.augment.autoaugment.auto_augment`, ``"augmix"`` :func:`lucid_data.augment.augmix.augmix`) or,
with ``auto_augment=None``, colour jitter with the HSV gains (:func:`lucid_data.augment.color_jitter.color_jitter`:
brightness and contrast ``hsv_v``, saturation ``hsv_s``, hue ``hsv_h``), then random erasing with probability
``erasing`` (:func:`lucid_data.augment.erasing.random_erasing`).

Defaults are the reference's documented classification settings (docs.ultralytics.com/usage/cfg: ``auto_augment``
randaugment, ``erasing`` 0.4). That its colour jitter is off under RandAugment, and what it is without, are
measured black box (docs/TRAINING.md "Classification"). Every draw comes from the sample's generator.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lucid_data.augment.augmix import augmix
from lucid_data.augment.autoaugment import auto_augment
from lucid_data.augment.classify import CROP_RATIO, CROP_SCALE, classify_train
from lucid_data.augment.color_jitter import color_jitter
from lucid_data.augment.erasing import random_erasing
from lucid_data.augment.randaugment import rand_augment

__all__ = ["AUTO_AUGMENT_POLICIES", "POLICY_TRANSFORMS", "check_auto_augment", "classify_augment"]

#: the ``auto_augment`` policies implemented, by name (None: colour jitter with the HSV gains instead)
POLICY_TRANSFORMS: dict[str, Callable[[np.ndarray, np.random.Generator], np.ndarray]] = {
    "randaugment": rand_augment,
    "autoaugment": auto_augment,
    "augmix": augmix,
}
AUTO_AUGMENT_POLICIES = tuple(POLICY_TRANSFORMS)


def check_auto_augment(policy: str | None, owner: str = "classification augmentation") -> None:
    """Raise a ValueError naming ``policy`` when it is neither None nor in :data:`AUTO_AUGMENT_POLICIES`."""
    if policy is not None and policy not in AUTO_AUGMENT_POLICIES:
        raise ValueError(
            f"{owner}: auto_augment {policy!r} is not implemented; use one of {list(AUTO_AUGMENT_POLICIES)} or None"
        )


def classify_augment(
    image: np.ndarray,
    size: int,
    rng: np.random.Generator,
    *,
    fliplr: float = 0.5,
    flipud: float = 0.0,
    hsv: tuple[float, float, float] = (0.015, 0.7, 0.4),
    scale: tuple[float, float] = CROP_SCALE,
    ratio: tuple[float, float] = CROP_RATIO,
    auto_augment: str | None = "randaugment",
    erasing: float = 0.4,
) -> np.ndarray:
    """One classification training sample of the HWC uint8 RGB ``image`` at ``size × size`` (module docstring)."""
    check_auto_augment(auto_augment)
    out = classify_train(
        image, size, rng, fliplr=fliplr, flipud=flipud, hsv=(0.0, 0.0, 0.0), scale=scale, ratio=ratio
    )
    if auto_augment is not None:
        out = POLICY_TRANSFORMS[auto_augment](out, rng)
    else:
        hue, sat, value = hsv
        out = color_jitter(out, rng, brightness=value, contrast=value, saturation=sat, hue=hue)
    return random_erasing(out, rng, p=erasing)
