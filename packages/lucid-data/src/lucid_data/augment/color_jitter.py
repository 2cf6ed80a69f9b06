"""Colour jitter with torchvision's ``ColorJitter`` rule, drawn from a numpy generator.

Factors: brightness and contrast U(max(0, 1 − g), 1 + g), saturation likewise, hue U(−g, g) (a fraction of the
hue circle); a zero gain turns its op off. One random order of the four ops (``rng.permutation(4)``: brightness,
contrast, saturation, hue), then one ``rng.uniform`` per active op in that fixed order, as ``ColorJitter``
draws them; torchvision's functional ops do the pixels. Classification without RandAugment applies it with the
HSV gains (brightness and contrast ``hsv_v``, saturation ``hsv_s``, hue ``hsv_h``): the reference's colour
augmentation there, read black box (docs/TRAINING.md "Classification").
"""

from __future__ import annotations

import numpy as np
from torchvision.transforms import functional as tvf

from lucid_data.augment.tensor_image import to_chw_tensor, to_hwc_array

__all__ = ["color_jitter"]


def _factor_range(gain: float, name: str) -> tuple[float, float] | None:
    if gain < 0:
        raise ValueError(f"colour jitter: {name} must be >= 0, got {gain!r}")
    return None if gain == 0 else (max(0.0, 1.0 - gain), 1.0 + gain)


def color_jitter(
    image: np.ndarray,
    rng: np.random.Generator,
    brightness: float = 0.0,
    contrast: float = 0.0,
    saturation: float = 0.0,
    hue: float = 0.0,
) -> np.ndarray:
    """The HWC uint8 RGB ``image`` colour-jittered (module docstring); ``image`` itself, and no draw, when every
    gain is 0. ``hue`` must be in [0, 0.5]."""
    if not 0.0 <= hue <= 0.5:
        raise ValueError(f"colour jitter: hue must be in [0, 0.5], got {hue!r}")
    ranges = (
        _factor_range(brightness, "brightness"),
        _factor_range(contrast, "contrast"),
        _factor_range(saturation, "saturation"),
        None if hue == 0 else (-hue, hue),
    )
    if all(r is None for r in ranges):
        return image
    order = rng.permutation(4)
    factors = [None if r is None else float(rng.uniform(r[0], r[1])) for r in ranges]
    out = to_chw_tensor(image, "colour jitter")
    ops = (tvf.adjust_brightness, tvf.adjust_contrast, tvf.adjust_saturation, tvf.adjust_hue)
    for index in order:
        factor = factors[int(index)]
        if factor is not None:
            out = ops[int(index)](out, factor)
    return to_hwc_array(out)
