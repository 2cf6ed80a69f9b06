"""AutoAugment (Cubuk et al., arXiv:1805.09501), ImageNet policy, with torchvision's ``AutoAugment`` rule, drawn from
a numpy generator.

One of the 25 sub-policies is picked uniformly (``rng.integers(25)``); each of its two ops applies when its draw of
``rng.random(2)`` is at most the op's probability, at the op's magnitude bin of 10 (the RandAugment table,
:func:`lucid_data.augment.randaugment.op_magnitude`), negated when its draw of ``rng.integers(2, size=2)`` is 0.
torchvision's functional ops do the pixels (:func:`lucid_data.augment.randaugment.apply_op`; nearest
interpolation, black fill).
"""

from __future__ import annotations

import numpy as np

from lucid_data.augment.randaugment import RANDAUGMENT_OPS, apply_op, op_magnitude
from lucid_data.augment.tensor_image import to_chw_tensor, to_hwc_array

__all__ = ["IMAGENET_POLICY", "auto_augment"]

#: (op, probability, magnitude bin or None) pairs: torchvision's ``AutoAugmentPolicy.IMAGENET``
IMAGENET_POLICY: tuple[tuple[tuple[str, float, int | None], tuple[str, float, int | None]], ...] = (
    (("Posterize", 0.4, 8), ("Rotate", 0.6, 9)),
    (("Solarize", 0.6, 5), ("AutoContrast", 0.6, None)),
    (("Equalize", 0.8, None), ("Equalize", 0.6, None)),
    (("Posterize", 0.6, 7), ("Posterize", 0.6, 6)),
    (("Equalize", 0.4, None), ("Solarize", 0.2, 4)),
    (("Equalize", 0.4, None), ("Rotate", 0.8, 8)),
    (("Solarize", 0.6, 3), ("Equalize", 0.6, None)),
    (("Posterize", 0.8, 5), ("Equalize", 1.0, None)),
    (("Rotate", 0.2, 3), ("Solarize", 0.6, 8)),
    (("Equalize", 0.6, None), ("Posterize", 0.4, 6)),
    (("Rotate", 0.8, 8), ("Color", 0.4, 0)),
    (("Rotate", 0.4, 9), ("Equalize", 0.6, None)),
    (("Equalize", 0.0, None), ("Equalize", 0.8, None)),
    (("Invert", 0.6, None), ("Equalize", 1.0, None)),
    (("Color", 0.6, 4), ("Contrast", 1.0, 8)),
    (("Rotate", 0.8, 8), ("Color", 1.0, 2)),
    (("Color", 0.8, 8), ("Solarize", 0.8, 7)),
    (("Sharpness", 0.4, 7), ("Invert", 0.6, None)),
    (("ShearX", 0.6, 5), ("Equalize", 1.0, None)),
    (("Color", 0.4, 0), ("Equalize", 0.6, None)),
    (("Equalize", 0.4, None), ("Solarize", 0.2, 4)),
    (("Solarize", 0.6, 5), ("AutoContrast", 0.6, None)),
    (("Invert", 0.6, None), ("Equalize", 1.0, None)),
    (("Color", 0.6, 4), ("Contrast", 1.0, 8)),
    (("Equalize", 0.8, None), ("Equalize", 0.6, None)),
)
_BINS = 10
_SIGNED = frozenset(
    name for name, signed in RANDAUGMENT_OPS if signed
)  # Invert (AutoAugment only) is unsigned


def auto_augment(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """AutoAugment (ImageNet policy) of an HWC uint8 RGB ``image`` (module docstring); a new HWC uint8 array."""
    out = to_chw_tensor(image, "AutoAugment")
    hw = (int(image.shape[0]), int(image.shape[1]))
    policy = IMAGENET_POLICY[int(rng.integers(len(IMAGENET_POLICY)))]
    probs = np.asarray(rng.random(2), dtype=np.float64)
    signs = np.asarray(rng.integers(2, size=2))
    for i, (name, p, bin_index) in enumerate(policy):
        if probs[i] <= p:
            value = op_magnitude(name, bin_index, _BINS, hw) if bin_index is not None else 0.0
            if name in _SIGNED and int(signs[i]) == 0:
                value = -value
            out = apply_op(out, name, value)
    return to_hwc_array(out)
