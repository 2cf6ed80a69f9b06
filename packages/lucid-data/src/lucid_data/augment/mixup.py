"""MixUp (Zhang et al., "mixup: Beyond Empirical Risk Minimization", ICLR 2018), off by default (p 0).

Two augmented samples of the same size are blended with a ratio r ~ Beta(32, 32) (the reference's documented
choice, concentrated around 0.5) and their instances are concatenated.
"""

from __future__ import annotations

import numpy as np

from lucid_data.augment.mosaic import concat_targets
from lucid_data.targets import Targets

__all__ = ["mixup"]


def mixup(
    image: np.ndarray, targets: Targets, image2: np.ndarray, targets2: Targets, rng: np.random.Generator
) -> tuple[np.ndarray, Targets]:
    """Blend two same-size HWC uint8 images and concatenate their targets."""
    if image.shape != image2.shape:
        raise ValueError(f"mixup needs images of the same shape, got {image.shape} and {image2.shape}")
    r = rng.beta(32.0, 32.0)
    blended = (image.astype(np.float32) * r + image2.astype(np.float32) * (1 - r)).astype(np.uint8)
    return blended, concat_targets([targets, targets2], targets)
