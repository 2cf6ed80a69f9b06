"""Letterbox resize-and-pad of an image to the network input, and the inverse mappings to original pixels.

Geometry follows shared/fixtures/README.md ("Input pipeline"): ``r = min(H/H0, W/W0)`` (capped at 1 without
``scaleup``), ``new_unpad = (max(round(W0·r), 1), max(round(H0·r), 1))`` with Python ``round``; the padding
is split ``round(d − 0.1)`` before and ``round(d + 0.1)`` after (an odd total puts the extra pixel at the
bottom/right); ``auto=True`` pads only to the minimum stride-multiple rectangle, ``auto=False`` to the full
``new_shape``. The inverse uses **per-axis** gains of the rounded resize, ``gx = new_w / W0``, ``gy = new_h / H0``.

The resize is :func:`lucid_core.geometry.resize.resize_bilinear_uint8`, an integer re-implementation of
``cv2.resize(img, new_unpad, interpolation=cv2.INTER_LINEAR)`` that is bit-exact with OpenCV on uint8 images
(lucid_core has no OpenCV dependency), so the letterboxed input equals the fixtures' ``input_uint8``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from lucid_core.geometry.resize import resize_bilinear_uint8


@dataclass(frozen=True)
class LetterboxInfo:
    """Where an original image landed inside the letterboxed network input."""

    orig_hw: tuple[int, int]  # (H0, W0) of the original image
    input_hw: tuple[int, int]  # (H, W) of the padded network input
    ratio: float  # r, the scale factor before rounding
    new_unpad_wh: tuple[int, int]  # (new_w, new_h) size of the resized image inside the input
    top: int
    bottom: int
    left: int
    right: int

    @property
    def gain_wh(self) -> tuple[float, float]:
        """Per-axis gains of the rounded resize, ``(new_w / W0, new_h / H0)``."""
        return self.new_unpad_wh[0] / self.orig_hw[1], self.new_unpad_wh[1] / self.orig_hw[0]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LetterboxInfo:
        return cls(
            orig_hw=(int(data["orig_hw"][0]), int(data["orig_hw"][1])),
            input_hw=(int(data["input_hw"][0]), int(data["input_hw"][1])),
            ratio=float(data["ratio"]),
            new_unpad_wh=(int(data["new_unpad_wh"][0]), int(data["new_unpad_wh"][1])),
            top=int(data["top"]),
            bottom=int(data["bottom"]),
            left=int(data["left"]),
            right=int(data["right"]),
        )


def _as_hw(new_shape: int | tuple[int, int] | list[int]) -> tuple[int, int]:
    if isinstance(new_shape, int):
        return new_shape, new_shape
    if len(new_shape) != 2:
        raise ValueError(f"new_shape must be an int or (h, w), got {new_shape!r}")
    return int(new_shape[0]), int(new_shape[1])


def letterbox_geometry(
    orig_hw: tuple[int, int],
    new_shape: int | tuple[int, int] | list[int],
    *,
    auto: bool = False,
    stride: int = 32,
    scaleup: bool = True,
) -> LetterboxInfo:
    """Compute the letterbox placement only (no pixels): usable with any resize backend."""
    h0, w0 = int(orig_hw[0]), int(orig_hw[1])
    if h0 <= 0 or w0 <= 0:
        raise ValueError(f"orig_hw must be positive, got {orig_hw!r}")
    target_h, target_w = _as_hw(new_shape)
    r = min(target_h / h0, target_w / w0)
    if not scaleup:
        r = min(r, 1.0)
    new_w = max(round(w0 * r), 1)
    new_h = max(round(h0 * r), 1)
    dw = float(target_w - new_w)
    dh = float(target_h - new_h)
    if auto:
        dw = dw % stride
        dh = dh % stride
    dw /= 2
    dh /= 2
    top, bottom = round(dh - 0.1), round(dh + 0.1)
    left, right = round(dw - 0.1), round(dw + 0.1)
    return LetterboxInfo(
        orig_hw=(h0, w0),
        input_hw=(new_h + top + bottom, new_w + left + right),
        ratio=r,
        new_unpad_wh=(new_w, new_h),
        top=top,
        bottom=bottom,
        left=left,
        right=right,
    )


def image_to_chw_uint8(image: Tensor | np.ndarray[Any, Any]) -> Tensor:
    """Accept a uint8 CHW tensor or an HWC (or HW) uint8 numpy array; return a uint8 CHW tensor."""
    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8:
            raise TypeError(f"image array must be uint8, got {image.dtype}")
        if image.ndim == 2:
            image = image[:, :, None]
        if image.ndim != 3:
            raise ValueError(f"image array must be HWC, got shape {image.shape}")
        return torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)
    if not isinstance(image, Tensor):
        raise TypeError(f"image must be a torch.Tensor or numpy.ndarray, got {type(image).__name__}")
    if image.dtype != torch.uint8:
        raise TypeError(f"image tensor must be uint8, got {image.dtype}")
    if image.ndim == 2:
        image = image[None]
    if image.ndim != 3:
        raise ValueError(f"image tensor must be CHW, got shape {tuple(image.shape)}")
    return image


def resize_uint8(image: Tensor, size_hw: tuple[int, int]) -> Tensor:
    """Resize a uint8 CHW tensor to ``size_hw = (h, w)`` exactly like ``cv2.INTER_LINEAR`` (returned as is if equal)."""
    if tuple(image.shape[-2:]) == tuple(size_hw):
        return image
    return resize_bilinear_uint8(image, (int(size_hw[1]), int(size_hw[0])))


def letterbox(
    image: Tensor | np.ndarray[Any, Any],
    new_shape: int | tuple[int, int] | list[int] = 640,
    *,
    auto: bool = False,
    stride: int = 32,
    scaleup: bool = True,
    fill: int = 114,
) -> tuple[Tensor, LetterboxInfo]:
    """Resize keeping the aspect ratio and pad with ``fill``; returns ``(uint8 CHW tensor, LetterboxInfo)``."""
    chw = image_to_chw_uint8(image)
    info = letterbox_geometry(
        (int(chw.shape[1]), int(chw.shape[2])), new_shape, auto=auto, stride=stride, scaleup=scaleup
    )
    new_w, new_h = info.new_unpad_wh
    resized = resize_uint8(chw, (new_h, new_w))
    out = torch.full((chw.shape[0], *info.input_hw), fill, dtype=torch.uint8, device=chw.device)
    out[:, info.top : info.top + new_h, info.left : info.left + new_w] = resized
    return out, info


def scale_boxes_back(boxes: Tensor, info: LetterboxInfo, *, clip: bool = True) -> Tensor:
    """xyxy boxes ``(..., 4)`` in input pixels → original pixels (clipped to the image unless ``clip=False``)."""
    gx, gy = info.gain_wh
    out = boxes.clone()
    out[..., 0::2] = (out[..., 0::2] - info.left) / gx
    out[..., 1::2] = (out[..., 1::2] - info.top) / gy
    if clip:
        h0, w0 = info.orig_hw
        out[..., 0::2] = out[..., 0::2].clamp(0, w0)
        out[..., 1::2] = out[..., 1::2].clamp(0, h0)
    return out


def scale_keypoints_back(keypoints: Tensor, info: LetterboxInfo, *, clip: bool = True) -> Tensor:
    """Keypoints ``(..., K, D)`` (x, y[, v]) in input pixels → original pixels; ``v`` is unchanged."""
    gx, gy = info.gain_wh
    out = keypoints.clone()
    out[..., 0] = (out[..., 0] - info.left) / gx
    out[..., 1] = (out[..., 1] - info.top) / gy
    if clip:
        h0, w0 = info.orig_hw
        out[..., 0] = out[..., 0].clamp(0, w0)
        out[..., 1] = out[..., 1].clamp(0, h0)
    return out


def scale_rboxes_back(rboxes: Tensor, info: LetterboxInfo) -> Tensor:
    """Rotated boxes ``(..., 5)`` in input pixels → original pixels: centre shifted/scaled, ``w/gx``, ``h/gy``.

    Not clipped and the angle is left as is (README, step 3).
    """
    gx, gy = info.gain_wh
    out = rboxes.clone()
    out[..., 0] = (out[..., 0] - info.left) / gx
    out[..., 1] = (out[..., 1] - info.top) / gy
    out[..., 2] = out[..., 2] / gx
    out[..., 3] = out[..., 3] / gy
    return out


def scale_masks_back(masks: Tensor, info: LetterboxInfo) -> Tensor:
    """Masks ``(N, H, W)`` in input pixels → ``(N, H0, W0)`` bool: padding cropped, bilinear resize, > 0.5."""
    h0, w0 = info.orig_hw
    if masks.shape[0] == 0:
        return torch.zeros((0, h0, w0), dtype=torch.bool, device=masks.device)
    new_w, new_h = info.new_unpad_wh
    cropped = masks[:, info.top : info.top + new_h, info.left : info.left + new_w].float()
    resized = F.interpolate(cropped[None], size=(h0, w0), mode="bilinear", align_corners=False)[0]
    return resized > 0.5
