"""Random HSV gains (documented reference defaults hsv_h 0.015, hsv_s 0.7, hsv_v 0.4).

Gains g = 1 + U(−1, 1)·(h, s, v) are drawn from the sample's generator; the image is converted to OpenCV's
8-bit HSV (hue 0..179), hue is multiplied modulo 180, saturation and value multiplied and clipped to 0..255 via
256-entry lookup tables (cv2.LUT), and converted back. Works on RGB input.
"""

from __future__ import annotations

import cv2
import numpy as np

__all__ = ["augment_hsv"]


def augment_hsv(
    image: np.ndarray, rng: np.random.Generator, hgain: float = 0.015, sgain: float = 0.7, vgain: float = 0.4
) -> np.ndarray:
    """Return a new RGB uint8 image with random hue/saturation/value gains (no-op when all gains are 0)."""
    if not (hgain or sgain or vgain):
        return image
    r = rng.uniform(-1, 1, 3) * np.array([hgain, sgain, vgain]) + 1
    hue, sat, val = cv2.split(cv2.cvtColor(image, cv2.COLOR_RGB2HSV))
    x = np.arange(0, 256, dtype=r.dtype)
    lut_hue = ((x * r[0]) % 180).astype(np.uint8)
    lut_sat = np.clip(x * r[1], 0, 255).astype(np.uint8)
    lut_val = np.clip(x * r[2], 0, 255).astype(np.uint8)
    merged = cv2.merge((cv2.LUT(hue, lut_hue), cv2.LUT(sat, lut_sat), cv2.LUT(val, lut_val)))
    return cv2.cvtColor(merged, cv2.COLOR_HSV2RGB)
