"""RandAugment (Cubuk et al., arXiv:1909.13719) with torchvision's op space, drawn from a numpy generator.

:func:`rand_augment` applies ``num_ops`` operations, each picked uniformly from :data:`RANDAUGMENT_OPS` (14 ops),
at bin ``magnitude`` of ``num_bins`` and, for a signed op, with a random sign: the op space, magnitudes and draw
order of ``torchvision.transforms.RandAugment`` (defaults 2 ops, magnitude 9 of 31 bins, nearest interpolation,
black fill), whose public functional ops do the pixels. Only the random source differs: the sample's
``np.random.Generator``, so a sample stays a function of its (seed, epoch, index) key and no global RNG is touched.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as tvf

from lucid_data.augment.tensor_image import to_chw_tensor, to_hwc_array

__all__ = ["RANDAUGMENT_OPS", "apply_op", "op_magnitude", "rand_augment"]

#: op names in torchvision's order (a draw picks the index); the second item: whether the magnitude gets a sign
RANDAUGMENT_OPS: tuple[tuple[str, bool], ...] = (
    ("Identity", False),
    ("ShearX", True),
    ("ShearY", True),
    ("TranslateX", True),
    ("TranslateY", True),
    ("Rotate", True),
    ("Brightness", True),
    ("Color", True),
    ("Contrast", True),
    ("Sharpness", True),
    ("Posterize", False),
    ("Solarize", False),
    ("AutoContrast", False),
    ("Equalize", False),
)

_INTERPOLATION = {"nearest": InterpolationMode.NEAREST, "bilinear": InterpolationMode.BILINEAR}


def op_magnitude(name: str, magnitude: int, num_bins: int, hw: tuple[int, int]) -> float:
    """The unsigned magnitude of op ``name`` at bin ``magnitude`` of ``num_bins`` for an ``hw`` image (torchvision's
    table, computed in float32 as it is; AutoAugment reads it with 10 bins)."""
    if not 0 <= magnitude < num_bins:
        raise ValueError(f"RandAugment: magnitude must be in [0, {num_bins}), got {magnitude}")
    linear = {
        "ShearX": 0.3,
        "ShearY": 0.3,
        "TranslateX": 150.0 / 331.0 * hw[1],
        "TranslateY": 150.0 / 331.0 * hw[0],
        "Rotate": 30.0,
        "Brightness": 0.9,
        "Color": 0.9,
        "Contrast": 0.9,
        "Sharpness": 0.9,
    }
    if name in linear:
        return float(torch.linspace(0.0, linear[name], num_bins)[magnitude])
    if name == "Posterize":
        return float(8 - (torch.arange(num_bins) / ((num_bins - 1) / 4)).round().int()[magnitude])
    if name == "Solarize":
        return float(torch.linspace(255.0, 0.0, num_bins)[magnitude])
    if name in ("Identity", "AutoContrast", "Equalize", "Invert"):
        return 0.0
    raise ValueError(f"RandAugment: unknown op {name!r}; known: {[n for n, _ in RANDAUGMENT_OPS]}")


def apply_op(
    image: torch.Tensor,
    name: str,
    magnitude: float,
    interpolation: Literal["nearest", "bilinear"] = "nearest",
) -> torch.Tensor:
    """Op ``name`` at the signed ``magnitude`` on a uint8 ``(C, H, W)`` tensor (torchvision's functional ops, black
    fill; shears about the top-left corner, as torchvision's RandAugment and AutoAugment). The 14 RandAugment ops and
    AutoAugment's ``Invert``."""
    mode = _INTERPOLATION[interpolation]
    result: torch.Tensor
    if name in ("ShearX", "ShearY"):
        shear = math.degrees(math.atan(magnitude))
        result = tvf.affine(
            image,
            angle=0.0,
            translate=[0, 0],
            scale=1.0,
            shear=[shear, 0.0] if name == "ShearX" else [0.0, shear],
            interpolation=mode,
            fill=None,
            center=[0, 0],
        )
    elif name in ("TranslateX", "TranslateY"):
        shift = [int(magnitude), 0] if name == "TranslateX" else [0, int(magnitude)]
        result = tvf.affine(
            image, angle=0.0, translate=shift, scale=1.0, interpolation=mode, shear=[0.0, 0.0], fill=None
        )
    elif name == "Rotate":
        result = tvf.rotate(image, magnitude, interpolation=mode, fill=None)
    elif name == "Brightness":
        result = tvf.adjust_brightness(image, 1.0 + magnitude)
    elif name == "Color":
        result = tvf.adjust_saturation(image, 1.0 + magnitude)
    elif name == "Contrast":
        result = tvf.adjust_contrast(image, 1.0 + magnitude)
    elif name == "Sharpness":
        result = tvf.adjust_sharpness(image, 1.0 + magnitude)
    elif name == "Posterize":
        result = tvf.posterize(image, int(magnitude))
    elif name == "Solarize":
        result = tvf.solarize(image, magnitude)
    elif name == "AutoContrast":
        result = tvf.autocontrast(image)
    elif name == "Equalize":
        result = tvf.equalize(image)
    elif name == "Invert":
        result = tvf.invert(image)
    elif name == "Identity":
        result = image
    else:
        raise ValueError(f"RandAugment: unknown op {name!r}; known: {[n for n, _ in RANDAUGMENT_OPS]}")
    return result


def rand_augment(
    image: np.ndarray,
    rng: np.random.Generator,
    *,
    num_ops: int = 2,
    magnitude: int = 9,
    num_bins: int = 31,
    interpolation: Literal["nearest", "bilinear"] = "nearest",
) -> np.ndarray:
    """RandAugment of an HWC uint8 RGB ``image`` (module docstring); per op one ``rng.integers(14)`` for the op and,
    for a signed op, one ``rng.integers(2)`` for the sign (1: negative). Returns a new HWC uint8 array."""
    out = to_chw_tensor(image, "RandAugment")
    hw = (int(image.shape[0]), int(image.shape[1]))
    for _ in range(num_ops):
        name, signed = RANDAUGMENT_OPS[int(rng.integers(len(RANDAUGMENT_OPS)))]
        value = op_magnitude(name, magnitude, num_bins, hw)
        if signed and int(rng.integers(2)):
            value = -value
        out = apply_op(out, name, value, interpolation)
    return to_hwc_array(out)
