"""AugMix (Hendrycks et al., arXiv:1912.02781) with torchvision's ``AugMix`` rule, drawn from a numpy generator.

Defaults are torchvision's: 3 chains (``width``) of 1-3 ops each (``depth`` −1: drawn per chain), op strength bin
U{0 … severity − 1} of 10 with ``severity`` 3, Dirichlet(``alpha`` = 1) weights, all 13 ops (:data:`AUGMIX_OPS`:
translations up to a third of the side, posterize 4 … 0 bits, the rest as RandAugment's table), bilinear
interpolation, black fill. Draw order as torchvision's: the skip/mix split ``rng.dirichlet([α, α])``, the chain
weights ``rng.dirichlet([α] × width)``, then per chain its depth and per op its index, strength bin and sign. The mix
``m₀·image + Σ wᵢ·chainᵢ`` is summed in float32 and truncated to uint8, as torchvision does.
"""

from __future__ import annotations

import numpy as np
import torch

from lucid_data.augment.randaugment import apply_op, op_magnitude
from lucid_data.augment.tensor_image import to_chw_tensor, to_hwc_array

__all__ = ["AUGMIX_OPS", "augmix", "augmix_magnitude"]

#: op names in torchvision's AugMix order (a draw picks the index); the second item: whether the magnitude is signed
AUGMIX_OPS: tuple[tuple[str, bool], ...] = (
    ("ShearX", True),
    ("ShearY", True),
    ("TranslateX", True),
    ("TranslateY", True),
    ("Rotate", True),
    ("Posterize", False),
    ("Solarize", False),
    ("AutoContrast", False),
    ("Equalize", False),
    ("Brightness", True),
    ("Color", True),
    ("Contrast", True),
    ("Sharpness", True),
)
_BINS = 10
_UNSCALED = frozenset({"AutoContrast", "Equalize"})  # no strength: nothing drawn for it


def augmix_magnitude(name: str, index: int, hw: tuple[int, int]) -> float:
    """The unsigned magnitude of op ``name`` at bin ``index`` of 10 for an ``hw`` image (AugMix's table)."""
    if name == "TranslateX":
        return float(torch.linspace(0.0, hw[1] / 3.0, _BINS)[index])
    if name == "TranslateY":
        return float(torch.linspace(0.0, hw[0] / 3.0, _BINS)[index])
    if name == "Posterize":
        return float((4 - (torch.arange(_BINS) / ((_BINS - 1) / 4)).round().int())[index])
    return op_magnitude(name, index, _BINS, hw)


def augmix(
    image: np.ndarray,
    rng: np.random.Generator,
    *,
    severity: int = 3,
    width: int = 3,
    depth: int = -1,
    alpha: float = 1.0,
) -> np.ndarray:
    """AugMix of an HWC uint8 RGB ``image`` (module docstring); a new HWC uint8 array."""
    batch = to_chw_tensor(image, "AugMix").unsqueeze(0)  # (1, C, H, W) uint8, as torchvision's
    if not 1 <= severity <= _BINS:
        raise ValueError(f"AugMix: severity must be in [1, {_BINS}], got {severity}")
    hw = (int(image.shape[0]), int(image.shape[1]))
    split = torch.from_numpy(np.asarray(rng.dirichlet([alpha, alpha]), dtype=np.float32))
    weights = torch.from_numpy(np.asarray(rng.dirichlet([alpha] * width), dtype=np.float32)) * split[1]
    mix = split[0] * batch
    for i in range(width):
        chain = batch
        for _ in range(depth if depth > 0 else int(rng.integers(1, 4))):
            name, signed = AUGMIX_OPS[int(rng.integers(len(AUGMIX_OPS)))]
            value = 0.0 if name in _UNSCALED else augmix_magnitude(name, int(rng.integers(severity)), hw)
            if signed and int(rng.integers(2)):
                value = -value
            chain = apply_op(chain, name, value, "bilinear")
        mix.add_(weights[i] * chain)
    return to_hwc_array(mix[0].to(torch.uint8))
