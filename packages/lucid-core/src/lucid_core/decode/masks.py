"""Instance masks from prototypes and per-detection coefficients (YOLACT, Bolya et al. 2019), the reference
predictor's rule (``shared/fixtures/README.md``, section "import_yolo26n-seg-shapes.pt", "Mask rule").

Default path (:func:`assemble_masks`), at the letterboxed input size H x W:

1. logits at prototype resolution ``L = coefficients @ prototypes`` (no sigmoid: ``σ(x) > 0.5`` iff ``x > 0``);
2. the **uncropped** logits upsampled to (H, W), bilinear, half-pixel centres (``align_corners=False``);
3. pixel on iff logit > 0 (strict);
4. cropped **after** upsampling with the box in input pixels: pixel (r, c) stays on iff ``x1 <= c < x2`` and
   ``y1 <= r < y2`` (float box, integer indices, no rounding).

Dropping empty masks (step 5) is the caller's (:func:`lucid_core.decode.postprocess`); step 6 (padding cut, resize
to the original size) is :func:`lucid_core.geometry.letterbox.scale_masks_back`.

``retina_masks`` (:func:`assemble_masks_retina`): logits upsampled by an integer factor f ∈ {1, 2, 4}, padding cut
at that resolution, bilinear resize to the original (H0, W0), logit > 0, crop with the box in original pixels.
Cropping at prototype resolution before upsampling (the classic YOLACT order) gives smaller masks.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from lucid_core.geometry.letterbox import LetterboxInfo

__all__ = ["assemble_masks", "assemble_masks_retina", "crop_to_boxes", "mask_logits", "retina_factor"]

PROTO_STRIDE = 4  # prototypes are at 1/4 of the network input (fixture README: proto (B, 32, H/4, W/4))


def crop_to_boxes(masks: Tensor, boxes_xyxy: Tensor) -> Tensor:
    """Zero ``masks`` ``(N, H, W)`` outside each box: pixel (row r, column c) stays iff ``x1 <= c < x2`` and
    ``y1 <= r < y2`` (float box compared with integer indices). Bool masks stay bool."""
    _, h, w = masks.shape
    x1, y1, x2, y2 = boxes_xyxy[:, :, None, None].unbind(1)  # each (N, 1, 1)
    cols = torch.arange(w, device=masks.device, dtype=boxes_xyxy.dtype).view(1, 1, -1)
    rows = torch.arange(h, device=masks.device, dtype=boxes_xyxy.dtype).view(1, -1, 1)
    inside = (cols >= x1) & (cols < x2) & (rows >= y1) & (rows < y2)
    return masks & inside if masks.dtype == torch.bool else masks * inside


def mask_logits(proto: Tensor, coefficients: Tensor) -> Tensor:
    """Rule 1: ``proto`` ``(nm, Hp, Wp)``, ``coefficients`` ``(N, nm)`` → ``(N, Hp, Wp)`` float32 logits."""
    if proto.ndim != 3:
        raise ValueError(f"mask_logits: proto must be (nm, Hp, Wp), got {tuple(proto.shape)}")
    nm, hp, wp = proto.shape
    if coefficients.ndim != 2 or coefficients.shape[1] != nm:
        raise ValueError(f"mask_logits: coefficients must be (N, {nm}), got {tuple(coefficients.shape)}")
    flat = coefficients.float() @ proto.float().reshape(nm, hp * wp)
    return flat.reshape(-1, hp, wp)


def _upsample(logits: Tensor, size_hw: tuple[int, int]) -> Tensor:
    if tuple(logits.shape[1:]) == tuple(size_hw):
        return logits
    return F.interpolate(logits[None], size=size_hw, mode="bilinear", align_corners=False)[0]


def assemble_masks(
    proto: Tensor, coefficients: Tensor, boxes_xyxy: Tensor, input_hw: tuple[int, int]
) -> Tensor:
    """Default path, rules 1–4: ``(N, H, W)`` bool masks at the input size, cropped to the input-pixel boxes."""
    h, w = int(input_hw[0]), int(input_hw[1])
    logits = mask_logits(proto, coefficients)
    if logits.shape[0] == 0:
        return torch.zeros((0, h, w), dtype=torch.bool, device=proto.device)
    binary = _upsample(logits, (h, w)) > 0
    return crop_to_boxes(binary, boxes_xyxy.float())


def retina_factor(pad_total_h: int, pad_total_w: int) -> int:
    """Upsampling factor f = 4 / gcd(4, p | p // 2), p = bitwise-or of the letterbox padding totals (no padding: 1)."""
    p = int(pad_total_h) | int(pad_total_w)
    return PROTO_STRIDE // math.gcd(PROTO_STRIDE, p | (p // 2))


def assemble_masks_retina(
    proto: Tensor, coefficients: Tensor, boxes_xyxy_orig: Tensor, info: LetterboxInfo
) -> Tensor:
    """``retina_masks=True``: ``(N, H0, W0)`` bool masks at the original size, cropped to original-pixel boxes.

    Logits at prototype size, upsampled by :func:`retina_factor`, the letterbox padding cut at that resolution,
    bilinear resize to (H0, W0), logit > 0, crop with the boxes already mapped to original pixels.
    """
    h0, w0 = int(info.orig_hw[0]), int(info.orig_hw[1])
    logits = mask_logits(proto, coefficients)
    if logits.shape[0] == 0:
        return torch.zeros((0, h0, w0), dtype=torch.bool, device=proto.device)
    factor = retina_factor(info.top + info.bottom, info.left + info.right)
    hp, wp = int(logits.shape[1]), int(logits.shape[2])
    up = _upsample(logits, (hp * factor, wp * factor))
    scale = factor / PROTO_STRIDE  # upsampled pixels per input pixel
    top, bottom = round(info.top * scale), round(info.bottom * scale)
    left, right = round(info.left * scale), round(info.right * scale)
    cut = up[:, top : up.shape[1] - bottom, left : up.shape[2] - right]
    binary = _upsample(cut, (h0, w0)) > 0
    return crop_to_boxes(binary, boxes_xyxy_orig.float())
