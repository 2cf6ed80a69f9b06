"""HWC uint8 arrays to and from the uint8 ``(C, H, W)`` tensors torchvision's functional ops take, for the
classification policies that run those ops (RandAugment, AutoAugment, AugMix, colour jitter)."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["to_chw_tensor", "to_hwc_array"]


def to_chw_tensor(image: np.ndarray, owner: str) -> torch.Tensor:
    """A ``(C, H, W)`` uint8 tensor over a copy of the HWC uint8 ``image`` (a copy: the decode cache hands out
    read-only arrays); another dtype or rank is a ValueError naming ``owner``."""
    if image.dtype != np.uint8 or image.ndim != 3:
        raise ValueError(f"{owner}: expected an HWC uint8 image, got {image.dtype} of shape {image.shape}")
    return torch.from_numpy(image.copy()).permute(2, 0, 1)


def to_hwc_array(tensor: torch.Tensor) -> np.ndarray:
    """The contiguous HWC uint8 array of a ``(C, H, W)`` tensor."""
    return np.ascontiguousarray(tensor.permute(1, 2, 0).numpy())
