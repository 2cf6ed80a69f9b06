"""Random erasing (Zhong et al., arXiv:1708.04896) with torchvision's ``RandomErasing`` rule, drawn from a numpy
generator.

With probability ``p`` one rectangle is set to ``value``: up to 10 tries draw an area fraction ``U(scale)`` of the
image and an aspect ratio (h / w) log-uniform in ``ratio``, ``h = round(√(area·ratio))``,
``w = round(√(area/ratio))``; the first with ``h < H`` and ``w < W`` is placed uniformly; when none fits the image
is unchanged. Defaults are torchvision's (scale (0.02, 0.33), ratio (0.3, 3.3), value 0: black in the 0-1 input
the models read).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["ERASE_RATIO", "ERASE_SCALE", "random_erasing", "random_erasing_window"]

#: area fraction range of the erased rectangle (torchvision default)
ERASE_SCALE = (0.02, 0.33)
#: aspect ratio (h / w) range of the erased rectangle (torchvision default)
ERASE_RATIO = (0.3, 3.3)
_ATTEMPTS = 10


def random_erasing_window(
    hw: tuple[int, int],
    rng: np.random.Generator,
    *,
    scale: tuple[float, float] = ERASE_SCALE,
    ratio: tuple[float, float] = ERASE_RATIO,
) -> tuple[int, int, int, int] | None:
    """``(top, left, height, width)`` of the rectangle to erase in an ``hw`` image, or None when no try fits."""
    h_img, w_img = int(hw[0]), int(hw[1])
    if not 0 <= scale[0] <= scale[1] <= 1:
        raise ValueError(f"random erasing: scale must satisfy 0 <= low <= high <= 1, got {scale}")
    if not 0 < ratio[0] <= ratio[1]:
        raise ValueError(f"random erasing: ratio must satisfy 0 < low <= high, got {ratio}")
    area = h_img * w_img
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(_ATTEMPTS):
        erase_area = area * float(rng.uniform(scale[0], scale[1]))
        aspect = math.exp(float(rng.uniform(*log_ratio)))
        h = round(math.sqrt(erase_area * aspect))
        w = round(math.sqrt(erase_area / aspect))
        if h < h_img and w < w_img:
            top = int(rng.integers(0, h_img - h + 1))
            left = int(rng.integers(0, w_img - w + 1))
            return top, left, h, w
    return None


def random_erasing(
    image: np.ndarray,
    rng: np.random.Generator,
    *,
    p: float = 0.4,
    scale: tuple[float, float] = ERASE_SCALE,
    ratio: tuple[float, float] = ERASE_RATIO,
    value: int = 0,
) -> np.ndarray:
    """``image`` (HWC) with one rectangle set to ``value`` with probability ``p`` (module docstring); one
    ``rng.random()`` decides, then :func:`random_erasing_window` draws. A new array when erased, else ``image``."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"random erasing: p is a probability in [0, 1], got {p!r}")
    if p == 0.0 or rng.random() >= p:
        return image
    window = random_erasing_window(image.shape[:2], rng, scale=scale, ratio=ratio)
    if window is None:
        return image
    top, left, h, w = window
    out = image.copy()
    out[top : top + h, left : left + w] = value
    return out
