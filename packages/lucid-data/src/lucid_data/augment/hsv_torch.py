"""The HSV augmentation of :mod:`lucid_data.augment.hsv` on a whole batch of tensors (``--data.device_hsv``).

The worker path's steps as tensor arithmetic on the training device, batched: RGB → OpenCV's 8-bit HSV (12-bit
fixed-point division tables, as ``cv2.cvtColor``), the lookup tables of :func:`~lucid_data.augment.hsv.hsv_luts`
indexed per image with the gains the worker drew, then HSV → RGB with OpenCV's float32 sector formula. RGB → HSV
matches ``cv2.cvtColor`` byte for byte; HSV → RGB matches OpenCV's vector path, so a canvas whose width is a
multiple of OpenCV's block is the worker path's bytes and its rounded scalar tail is within one level
(docs/TRAINING.md, "Input pipeline options"; ``tests/data/test_data_hsv_device.py``).
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


#: OpenCV's sector table: which of (v, p, q, t) becomes (b, g, r) in hue sector k (OpenCV's HSV -> RGB order)
_SECTOR_BGR = torch.tensor([[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]])


def _one_minus_product(a: Tensor, b: Tensor) -> Tensor:
    """float32 ``1 − a·b`` rounded once, as a fused multiply-add computes it (OpenCV's vector path): the float64
    product of two float32 values is exact, and the one float64 → float32 rounding gives the fused result on the
    whole domain used here (tested exhaustively against ``cv2.cvtColor``)."""
    return (1.0 - a.double() * b.double()).float()


def _hsv8_to_rgb(hsv: Tensor) -> Tensor:
    """(B, 3, H, W) OpenCV 8-bit HSV (integer-valued) → (B, 3, H, W) uint8 RGB, as ``cv2.COLOR_HSV2RGB``:
    h·(6/180) reduced to [0, 6), sector ⌊h⌋ and fraction f; tab = (v, v·(1 − s), v·(1 − s·f), v·(1 − s·(1 − f)))
    with s, v scaled by 1/255 in float32; the channels picked by the sector table, × 255 and truncated."""
    one = torch.ones((), dtype=torch.float32, device=hsv.device)
    h = hsv[:, 0].float() * torch.tensor(6.0 / 180.0, dtype=torch.float32, device=hsv.device)
    h = torch.where(h >= 6.0, h - 6.0, h)  # OpenCV's 8-bit hue is 0..255, so h·6/180 < 9: one wrap
    scale = torch.tensor(1.0 / 255.0, dtype=torch.float32, device=hsv.device)
    s = hsv[:, 1].float() * scale
    v = hsv[:, 2].float() * scale
    sector = torch.floor(h)
    f = h - sector
    tab = torch.stack(
        (v, v * (one - s), v * _one_minus_product(s, f), v * _one_minus_product(s, one - f)), 1
    )  # (B, 4, H, W)
    index = _SECTOR_BGR.to(hsv.device)[sector.long()].permute(0, 3, 1, 2).flip(1)  # (B, 3, H, W): r, g, b
    rgb = torch.gather(tab, 1, index) * torch.tensor(255.0, dtype=torch.float32, device=hsv.device)
    return rgb.clamp_(0, 255).to(torch.uint8)  # float → uint8 truncates, as OpenCV's 8-bit output does here


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
