"""Classification transforms: the training crop/flip/colour augmentation and the evaluation centre crop.

Training (:func:`classify_train`, docs/TRAINING.md "Classification"): a random resized crop to ``size × size`` —
an area fraction ``U(scale)`` of the image and an aspect ratio log-uniform in ``ratio`` (torchvision's documented
``RandomResizedCrop`` rule, the Inception crop, with its ratio default (3/4, 4/3); the area range is
``(1 − s, 1)`` for the documented ``scale`` augmentation gain ``s`` = 0.5, :func:`crop_scale`; after 10 draws that
do not fit, the whole image's centre crop at the nearest allowed ratio), resized with ``cv2.INTER_LINEAR`` — then a
horizontal
flip with probability ``fliplr`` (0.5), a vertical flip with probability ``flipud`` (0) and the HSV jitter of
:func:`lucid_data.augment.hsv.augment_hsv` (``hsv_h`` 0.015, ``hsv_s`` 0.7, ``hsv_v`` 0.4: the reference's
documented colour-space defaults, docs.ultralytics.com/usage/cfg), every draw from the sample's generator.

Evaluation (:func:`classify_eval`): resize on the shorter side and centre crop
(:func:`lucid_core.geometry.center_crop.center_crop_geometry`, ``crop_fraction`` 1.0), the same pixels
``lucid_core.predict`` feeds a classifier (``cv2.INTER_LINEAR`` equals lucid-core's resize bit for bit).
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from lucid_core.geometry.center_crop import DEFAULT_CROP_FRACTION, center_crop_geometry
from lucid_core.geometry.letterbox import LetterboxInfo
from lucid_data.augment.hsv import augment_hsv

__all__ = [
    "CROP_RATIO",
    "CROP_SCALE",
    "classify_eval",
    "classify_train",
    "crop_scale",
    "random_resized_crop",
    "random_resized_crop_window",
]

#: Area fraction range of the training crop for the default ``scale`` gain 0.5 (:func:`crop_scale`).
CROP_SCALE = (0.5, 1.0)
#: Aspect-ratio (w / h) range of the training crop (torchvision ``RandomResizedCrop`` default).
CROP_RATIO = (3 / 4, 4 / 3)
_ATTEMPTS = 10


def crop_scale(gain: float) -> tuple[float, float]:
    """The crop's area range ``(1 − gain, 1)`` for the ``scale`` augmentation gain (``AugmentConfig.scale``; a gain
    of 0.92 gives torchvision's (0.08, 1)); a gain outside [0, 1) is an error naming it."""
    if not 0.0 <= gain < 1.0:
        raise ValueError(f"classification crop: the scale gain must be in [0, 1), got {gain!r}")
    return 1.0 - float(gain), 1.0


def random_resized_crop_window(
    hw: tuple[int, int],
    rng: np.random.Generator,
    *,
    scale: tuple[float, float] = CROP_SCALE,
    ratio: tuple[float, float] = CROP_RATIO,
) -> tuple[int, int, int, int]:
    """``(top, left, height, width)`` of a random crop of an ``hw`` image (module docstring rule)."""
    h, w = int(hw[0]), int(hw[1])
    if not 0 < scale[0] <= scale[1] <= 1:
        raise ValueError(f"random_resized_crop: scale must satisfy 0 < low <= high <= 1, got {scale}")
    if not 0 < ratio[0] <= ratio[1]:
        raise ValueError(f"random_resized_crop: ratio must satisfy 0 < low <= high, got {ratio}")
    area = h * w
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(_ATTEMPTS):
        target = area * float(rng.uniform(scale[0], scale[1]))
        aspect = math.exp(float(rng.uniform(*log_ratio)))
        cw = round(math.sqrt(target * aspect))
        ch = round(math.sqrt(target / aspect))
        if 0 < cw <= w and 0 < ch <= h:
            top = int(rng.integers(0, h - ch + 1))
            left = int(rng.integers(0, w - cw + 1))
            return top, left, ch, cw
    aspect = w / h  # fallback: the centre crop of the whole image at the nearest allowed ratio
    if aspect < ratio[0]:
        cw, ch = w, round(w / ratio[0])
    elif aspect > ratio[1]:
        ch, cw = h, round(h * ratio[1])
    else:
        cw, ch = w, h
    return (h - ch) // 2, (w - cw) // 2, ch, cw


def random_resized_crop(
    image: np.ndarray,
    size: int,
    rng: np.random.Generator,
    *,
    scale: tuple[float, float] = CROP_SCALE,
    ratio: tuple[float, float] = CROP_RATIO,
) -> np.ndarray:
    """A random crop of the HWC uint8 ``image`` (:func:`random_resized_crop_window`) resized to ``size × size``."""
    top, left, ch, cw = random_resized_crop_window(image.shape[:2], rng, scale=scale, ratio=ratio)
    crop = image[top : top + ch, left : left + cw]
    if (ch, cw) == (size, size):
        return np.ascontiguousarray(crop)
    resized: np.ndarray = cv2.resize(crop, (size, size), interpolation=cv2.INTER_LINEAR)
    return resized


def classify_train(
    image: np.ndarray,
    size: int,
    rng: np.random.Generator,
    *,
    fliplr: float = 0.5,
    flipud: float = 0.0,
    hsv: tuple[float, float, float] = (0.015, 0.7, 0.4),
    scale: tuple[float, float] = CROP_SCALE,
    ratio: tuple[float, float] = CROP_RATIO,
) -> np.ndarray:
    """One training sample (module docstring): random resized crop, flips, HSV jitter; RGB HWC uint8 in and out."""
    out = random_resized_crop(image, size, rng, scale=scale, ratio=ratio)
    if fliplr > 0 and rng.random() < fliplr:
        out = np.ascontiguousarray(out[:, ::-1])
    if flipud > 0 and rng.random() < flipud:
        out = np.ascontiguousarray(out[::-1])
    return augment_hsv(out, rng, *hsv)


def classify_eval(
    image: np.ndarray, size: int | tuple[int, int], *, crop_fraction: float = DEFAULT_CROP_FRACTION
) -> tuple[np.ndarray, LetterboxInfo]:
    """The evaluation input of an HWC uint8 ``image``: shorter-side resize and centre crop to ``size``, and the
    placement (a :class:`LetterboxInfo` with negative padding)."""
    info = center_crop_geometry((int(image.shape[0]), int(image.shape[1])), size, crop_fraction=crop_fraction)
    new_w, new_h = info.new_unpad_wh
    if (new_w, new_h) != (image.shape[1], image.shape[0]):
        image = cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    (h, w), top, left = info.input_hw, -info.top, -info.left
    return np.ascontiguousarray(image[top : top + h, left : left + w]), info
