"""Resize on the shorter side, then a centre crop: the classification network input (no padding).

The reference's classification preprocessing for validation and prediction (docs.ultralytics.com/usage/cfg,
``crop_fraction`` 1.0 for classification; torchvision's ``Resize`` + ``CenterCrop``): the image is scaled by
``r = max(H / H0, W / W0) / crop_fraction`` (the shorter side then spans the crop, enlarged by
``1 / crop_fraction``), resized to ``(max(round(W0·r), 1), max(round(H0·r), 1))`` with ``cv2.INTER_LINEAR``
arithmetic (:func:`lucid_core.geometry.resize.resize_bilinear_uint8`), and the centred ``H × W`` window is kept,
its offset ``round((new − size) / 2)`` as torchvision's ``CenterCrop`` rounds it.

The placement is a :class:`~lucid_core.geometry.letterbox.LetterboxInfo` whose padding is negative (a crop is a
letterbox with negative margins), so every inverse mapping (``scale_boxes_back`` …) applies unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import Tensor

from lucid_core.geometry.letterbox import LetterboxInfo, image_to_chw_uint8, resize_uint8

__all__ = ["DEFAULT_CROP_FRACTION", "center_crop", "center_crop_geometry"]

#: The reference's documented classification ``crop_fraction`` (the crop spans the whole shorter side).
DEFAULT_CROP_FRACTION = 1.0


def _size_hw(size: int | tuple[int, int] | list[int]) -> tuple[int, int]:
    if isinstance(size, int):
        return size, size
    if len(size) != 2:
        raise ValueError(f"size must be an int or (h, w), got {size!r}")
    return int(size[0]), int(size[1])


def center_crop_geometry(
    orig_hw: tuple[int, int],
    size: int | tuple[int, int] | list[int],
    *,
    crop_fraction: float = DEFAULT_CROP_FRACTION,
) -> LetterboxInfo:
    """Placement (no pixels) of the shorter-side resize + centre crop of an ``orig_hw`` image to ``size``."""
    h0, w0 = int(orig_hw[0]), int(orig_hw[1])
    if h0 <= 0 or w0 <= 0:
        raise ValueError(f"orig_hw must be positive, got {orig_hw!r}")
    th, tw = _size_hw(size)
    if th <= 0 or tw <= 0:
        raise ValueError(f"size must be positive, got {size!r}")
    if not 0.0 < crop_fraction <= 1.0:
        raise ValueError(f"crop_fraction must be in (0, 1], got {crop_fraction!r}")
    r = max(th / h0, tw / w0) / crop_fraction
    new_w, new_h = max(round(w0 * r), 1), max(round(h0 * r), 1)
    new_w, new_h = max(new_w, tw), max(new_h, th)  # rounding never leaves the crop window outside the image
    top, left = round((new_h - th) / 2), round((new_w - tw) / 2)
    return LetterboxInfo(
        orig_hw=(h0, w0),
        input_hw=(th, tw),
        ratio=r,
        new_unpad_wh=(new_w, new_h),
        top=-top,
        bottom=-(new_h - th - top),
        left=-left,
        right=-(new_w - tw - left),
    )


def center_crop(
    image: Tensor | np.ndarray[Any, Any],
    size: int | tuple[int, int] | list[int],
    *,
    crop_fraction: float = DEFAULT_CROP_FRACTION,
) -> tuple[Tensor, LetterboxInfo]:
    """``(uint8 CHW tensor of size (h, w), placement)`` of a uint8 CHW tensor or HWC array (module docstring)."""
    chw = image_to_chw_uint8(image)
    info = center_crop_geometry((int(chw.shape[1]), int(chw.shape[2])), size, crop_fraction=crop_fraction)
    new_w, new_h = info.new_unpad_wh
    resized = resize_uint8(chw, (new_h, new_w))
    th, tw = info.input_hw
    return resized[:, -info.top : -info.top + th, -info.left : -info.left + tw].contiguous(), info
