"""The HSV augmentation of :mod:`lucid_data.augment.hsv` on a whole batch of tensors (``--data.device_hsv``, issue 18).

The worker path converts each sample to OpenCV's 8-bit HSV (hue 0..179), maps the channels through the lookup
tables of :func:`~lucid_data.augment.hsv.hsv_luts` and converts back. Here the same steps run as tensor arithmetic
on the training device, batched: RGB → 8-bit HSV (hue ``H°/2``, saturation and value 0..255), the same tables
indexed per image (``torch.gather``; the gains are the ones the worker drew from the sample's generator, so the
distribution is the worker path's), then HSV → RGB with the sector formula.
RGB → HSV uses OpenCV's 12-bit fixed-point division tables and matches ``cv2.cvtColor`` exactly; HSV → RGB is the
float sector formula, within one level of OpenCV's (tested on random images: max 1, mean < 0.1) — the same
transform and draws, not always the same bytes.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from lucid_data.augment.hsv import hsv_luts

__all__ = ["augment_hsv_batch", "hsv_tables"]


def hsv_tables(gains: Tensor | np.ndarray) -> Tensor:
    """(B, 3, 256) uint8: the hue / saturation / value tables of each image's drawn gains (``hsv_luts``)."""
    rows = np.asarray(gains, dtype=np.float64).reshape(-1, 3)
    return torch.from_numpy(
        np.stack([np.stack(hsv_luts(g)) for g in rows]) if len(rows) else np.zeros((0, 3, 256), np.uint8)
    )


_SHIFT = 12
#: OpenCV's 8-bit RGB -> HSV division tables: round((255 << 12) / v) and round((180 << 12) / (6 · diff)), 0 at 0
_SDIV = torch.tensor([0] + [round((255 << _SHIFT) / i) for i in range(1, 256)], dtype=torch.long)
_HDIV = torch.tensor([0] + [round((180 << _SHIFT) / (6 * i)) for i in range(1, 256)], dtype=torch.long)


def _rgb_to_hsv8(rgb: Tensor) -> Tensor:
    """(B, 3, H, W) integer-valued RGB 0..255 → (B, 3, H, W) long HSV in OpenCV's 8-bit ranges, with OpenCV's
    12-bit fixed-point division tables (looked up, 256 entries each)."""
    x = rgb.long()
    r, g, b = x.unbind(1)
    v, _ = x.max(1)
    mn, _ = x.min(1)
    diff = v - mn
    half = 1 << (_SHIFT - 1)
    s = (diff * _SDIV.to(x.device)[v] + half) >> _SHIFT
    num = torch.where(v == r, g - b, torch.where(v == g, b - r + 2 * diff, r - g + 4 * diff))
    h = (num * _HDIV.to(x.device)[diff] + half) >> _SHIFT
    h = torch.where(h < 0, h + 180, h)
    return torch.stack((h, s, v), 1)


def _hsv8_to_rgb(hsv: Tensor) -> Tensor:
    """(B, 3, H, W) OpenCV 8-bit HSV (long or float) → (B, 3, H, W) uint8 RGB: the sector formula, truncated (as
    OpenCV's 8-bit output is, within one level)."""
    h = hsv[:, 0].float() * 2.0 / 60.0  # sector units 0..6
    s = hsv[:, 1].float() / 255.0
    v = hsv[:, 2].float()
    sector = torch.floor(h).remainder(6.0)
    f = h - torch.floor(h)
    p = v * (1.0 - s)
    q = v * (1.0 - s * f)
    t = v * (1.0 - s * (1.0 - f))
    choices = (
        (v, t, p),
        (q, v, p),
        (p, v, t),
        (p, q, v),
        (t, p, v),
        (v, p, q),
    )
    out = torch.zeros_like(hsv, dtype=torch.float32)
    for k, (rr, gg, bb) in enumerate(choices):
        mask = sector == k
        out[:, 0] = torch.where(mask, rr, out[:, 0])
        out[:, 1] = torch.where(mask, gg, out[:, 1])
        out[:, 2] = torch.where(mask, bb, out[:, 2])
    return torch.floor(out + 1e-3).clamp_(0, 255).to(torch.uint8)


def augment_hsv_batch(images: Tensor, gains: Tensor | np.ndarray) -> Tensor:
    """(B, 3, H, W) uint8 RGB images on any device, each with its drawn ``(r_h, r_s, r_v)`` gains (B, 3) → new
    uint8 images: the worker path's HSV transform (module docstring), computed on ``images.device``."""
    if images.dtype != torch.uint8 or images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(
            f"augment_hsv_batch: expected (B, 3, H, W) uint8 images, got {tuple(images.shape)} {images.dtype}"
        )
    tables = hsv_tables(gains).to(images.device).long()  # (B, 3, 256)
    if tables.shape[0] != images.shape[0]:
        raise ValueError(f"augment_hsv_batch: {tables.shape[0]} gain rows for {images.shape[0]} images")
    hsv = _rgb_to_hsv8(images)
    b, c, hh, ww = hsv.shape
    mapped = torch.gather(tables, 2, hsv.reshape(b, c, hh * ww)).reshape(b, c, hh, ww)
    return _hsv8_to_rgb(mapped)
