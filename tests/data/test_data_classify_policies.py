"""RandAugment, colour jitter and random erasing of the classification transform: torchvision's rules exactly, drawn from the
sample's numpy generator (lucid_data.augment.randaugment / .color_jitter / .erasing /
.classify_policies)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import torch
from torchvision import transforms

from lucid_data import DetectionDataset, load_dataset
from lucid_data.augment.augmix import AUGMIX_OPS, augmix
from lucid_data.augment.autoaugment import IMAGENET_POLICY, auto_augment
from lucid_data.augment.classify_policies import classify_augment
from lucid_data.augment.color_jitter import color_jitter
from lucid_data.augment.erasing import random_erasing, random_erasing_window
from lucid_data.augment.pipeline import AugmentConfig
from lucid_data.augment.randaugment import RANDAUGMENT_OPS, apply_op, op_magnitude, rand_augment
from lucid_data.synth import synthesize


class TorchDraws:
    """A stand-in for ``np.random.Generator`` that draws from torch's global generator in torchvision's order, so
    ours and torchvision's transform see the same random numbers under one ``torch.manual_seed``."""

    def random(self, size: int | None = None) -> Any:
        return float(torch.rand(1).item()) if size is None else torch.rand((size,)).numpy()

    def uniform(self, low: float, high: float) -> float:
        return float(torch.empty(1).uniform_(low, high).item())

    def integers(self, low: int, high: int | None = None, size: int | None = None) -> Any:
        if high is None:
            low, high = 0, low
        if size is not None:
            return torch.randint(low, high, (size,)).numpy()
        return int(torch.randint(low, high, (1,)).item())

    def permutation(self, n: int) -> np.ndarray:
        return torch.randperm(n).numpy()

    def dirichlet(self, alpha: list[float]) -> np.ndarray:
        return torch._sample_dirichlet(torch.tensor(alpha).expand(1, -1))[0].numpy()


def _image(h: int, w: int, seed: int = 0) -> np.ndarray:
    """A structured RGB image (gradients and a disc) so every op changes pixels."""
    yy, xx = np.mgrid[0:h, 0:w]
    disc = ((yy - h / 2) ** 2 + (xx - w / 3) ** 2 < (min(h, w) / 4) ** 2) * 120
    noise = np.random.default_rng(seed).integers(0, 40, (h, w, 3))
    img = np.stack([xx * 255 // max(w - 1, 1), yy * 255 // max(h - 1, 1), disc], axis=-1) + noise
    return np.clip(img, 0, 255).astype(np.uint8)


def assert_same_as_torchvision(
    reference: Callable[[torch.Tensor], torch.Tensor],
    ours: Callable[[np.ndarray, np.random.Generator], np.ndarray],
    image: np.ndarray,
    seeds: int,
) -> None:
    """Under each torch seed in ``range(seeds)``, ``ours`` (drawing through :class:`TorchDraws`) gives torchvision's
    ``reference`` pixels exactly."""
    chw = torch.from_numpy(image.copy()).permute(2, 0, 1)
    with torch.random.fork_rng(devices=[]):
        for seed in range(seeds):
            torch.manual_seed(seed)
            expected = reference(chw).permute(1, 2, 0).numpy()
            torch.manual_seed(seed)
            found = ours(image, cast(np.random.Generator, TorchDraws()))
            np.testing.assert_array_equal(found, expected, err_msg=f"seed {seed}")


def first_index_drawn(n: int, seeds: int) -> set[int]:
    """The first ``torch.randint(n)`` under each torch seed in ``range(seeds)``: which op or policy a transform
    that draws that first picked."""
    picked = set()
    with torch.random.fork_rng(devices=[]):
        for seed in range(seeds):
            torch.manual_seed(seed)
            picked.add(int(torch.randint(n, (1,)).item()))
    return picked


@pytest.mark.parametrize("hw", [(64, 64), (48, 80)])
def test_rand_augment_equals_torchvision_under_the_same_draws(hw: tuple[int, int]) -> None:
    # 2 ops, magnitude 9 of 31, nearest, black fill
    assert_same_as_torchvision(transforms.RandAugment(), rand_augment, _image(*hw), 120)
    assert first_index_drawn(len(RANDAUGMENT_OPS), 120) == set(
        range(len(RANDAUGMENT_OPS))
    )  # every op compared


@pytest.mark.parametrize("hw", [(64, 64), (48, 80)])
def test_auto_augment_equals_torchvision_under_the_same_draws(hw: tuple[int, int]) -> None:
    # ImageNet policy, nearest, black fill
    assert_same_as_torchvision(transforms.AutoAugment(), auto_augment, _image(*hw), 150)
    assert first_index_drawn(len(IMAGENET_POLICY), 150) == set(
        range(len(IMAGENET_POLICY))
    )  # every sub-policy


@pytest.mark.parametrize("hw", [(64, 64), (48, 80)])
def test_augmix_equals_torchvision_under_the_same_draws(hw: tuple[int, int]) -> None:
    image = _image(*hw)
    # severity 3, width 3, depth 1-3, alpha 1, all ops, bilinear
    assert_same_as_torchvision(transforms.AugMix(), augmix, image, 40)
    assert len(AUGMIX_OPS) == 13
    with pytest.raises(ValueError, match="severity must be in"):
        augmix(image, np.random.default_rng(0), severity=11)


def test_every_op_changes_or_keeps_pixels_as_its_kind_says() -> None:
    image = torch.from_numpy(_image(64, 64)).permute(2, 0, 1).contiguous()
    for name, signed in RANDAUGMENT_OPS:
        value = op_magnitude(name, 9, 31, (64, 64))
        out = apply_op(image, name, -value if signed else value)
        assert out.dtype == torch.uint8 and out.shape == image.shape
        assert torch.equal(out, image) == (name == "Identity"), name


def test_op_magnitude_table() -> None:
    assert op_magnitude("Rotate", 9, 31, (64, 64)) == pytest.approx(9.0)
    assert op_magnitude("TranslateX", 30, 31, (48, 80)) == pytest.approx(150 / 331 * 80)
    assert op_magnitude("TranslateY", 30, 31, (48, 80)) == pytest.approx(150 / 331 * 48)
    assert op_magnitude("Posterize", 9, 31, (64, 64)) == 7.0
    assert op_magnitude("Solarize", 0, 31, (64, 64)) == 255.0
    with pytest.raises(ValueError, match="magnitude must be in"):
        op_magnitude("Rotate", 31, 31, (64, 64))
    assert op_magnitude("Invert", 3, 10, (64, 64)) == 0.0  # AutoAugment's extra op has no magnitude
    with pytest.raises(ValueError, match="unknown op 'Cutout'"):
        op_magnitude("Cutout", 9, 31, (64, 64))


def test_rand_augment_is_a_function_of_the_generator() -> None:
    image = _image(64, 64)
    a = rand_augment(image, np.random.default_rng(7))
    b = rand_augment(image, np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(rand_augment(image, np.random.default_rng(s)), a) for s in range(8, 12))
    read_only = image.copy()
    read_only.flags.writeable = False  # the decode cache's arrays
    np.testing.assert_array_equal(rand_augment(read_only, np.random.default_rng(7)), a)
    with pytest.raises(ValueError, match="HWC uint8"):
        rand_augment(image.astype(np.float32), np.random.default_rng(0))


@pytest.mark.parametrize("hw", [(64, 64), (40, 72)])
def test_random_erasing_equals_torchvision_under_the_same_draws(hw: tuple[int, int]) -> None:
    image = _image(*hw)
    erase = functools.partial(random_erasing, p=0.4)
    assert_same_as_torchvision(transforms.RandomErasing(p=0.4, value=0), erase, image, 200)
    erased = sum(not np.array_equal(erase(image, np.random.default_rng(seed)), image) for seed in range(200))
    assert 50 < erased < 110  # p = 0.4 of 200


@pytest.mark.parametrize("gains", [(0.4, 0.4, 0.7, 0.015), (0.9, 0.9, 0.0, 0.0), (0.0, 0.0, 0.7, 0.0)])
def test_color_jitter_equals_torchvision_under_the_same_draws(
    gains: tuple[float, float, float, float],
) -> None:
    image = _image(48, 64)
    brightness, contrast, saturation, hue = gains
    reference = transforms.ColorJitter(
        brightness=brightness, contrast=contrast, saturation=saturation, hue=hue
    )
    assert_same_as_torchvision(reference, lambda im, rng: color_jitter(im, rng, *gains), image, 40)
    assert color_jitter(image, np.random.default_rng(0)) is image  # every gain 0: nothing drawn, nothing done
    with pytest.raises(ValueError, match="hue must be in"):
        color_jitter(image, np.random.default_rng(0), hue=0.6)


def test_random_erasing_window_bounds() -> None:
    rng = np.random.default_rng(0)
    windows = [random_erasing_window((64, 64), rng) for _ in range(2000)]
    assert all(w is not None for w in windows)
    for top, left, h, w in (win for win in windows if win is not None):
        assert top >= 0 and top + h <= 64 and left >= 0 and left + w <= 64
        assert 0.02 * 4096 * 0.8 <= h * w <= 0.33 * 4096 * 1.2
        assert 0.3 * 0.7 <= h / w <= 3.3 / 0.7
    assert random_erasing(_image(8, 8), rng, p=0.0) is not None
    with pytest.raises(ValueError, match="probability"):
        random_erasing(_image(8, 8), rng, p=1.5)


def test_classify_train_policies() -> None:
    image = _image(64, 64)
    ra = classify_augment(image, 64, np.random.default_rng(3))
    same = classify_augment(image, 64, np.random.default_rng(3), hsv=(0.0, 0.0, 0.0))
    np.testing.assert_array_equal(ra, same)  # under RandAugment the colour jitter is off
    plain = classify_augment(image, 64, np.random.default_rng(3), auto_augment=None, erasing=0.0)
    jitter_off = classify_augment(
        image, 64, np.random.default_rng(3), auto_augment=None, erasing=0.0, hsv=(0, 0, 0)
    )
    assert not np.array_equal(plain, jitter_off)  # without it, colour jitter with the HSV gains applies
    erased = classify_augment(np.full((64, 64, 3), 200, np.uint8), 64, np.random.default_rng(0), erasing=1.0)
    assert (erased == 0).all(axis=-1).any()
    auto = classify_augment(image, 64, np.random.default_rng(3), auto_augment="autoaugment", erasing=0.0)
    assert auto.shape == (64, 64, 3) and not np.array_equal(
        auto, classify_augment(image, 64, np.random.default_rng(3))
    )
    mixed = classify_augment(image, 64, np.random.default_rng(3), auto_augment="augmix", erasing=0.0)
    assert mixed.shape == (64, 64, 3) and not np.array_equal(mixed, auto)
    with pytest.raises(ValueError, match="auto_augment 'trivialaugment' is not implemented"):
        classify_augment(image, 64, np.random.default_rng(0), auto_augment="trivialaugment")


def test_augment_config_classification_fields() -> None:
    config = AugmentConfig()
    assert (config.auto_augment, config.erasing) == ("randaugment", 0.4)
    assert AugmentConfig.from_dict({"auto_augment": None}).auto_augment is None
    assert AugmentConfig(auto_augment="autoaugment").auto_augment == "autoaugment"
    with pytest.raises(ValueError, match="auto_augment 'trivialaugment' is not implemented"):
        AugmentConfig(auto_augment="trivialaugment")
    with pytest.raises(ValueError, match="erasing is a probability"):
        AugmentConfig(erasing=1.2)


def test_the_dataset_applies_the_configured_policies(tmp_path: Path) -> None:
    root = synthesize("classify", tmp_path / "s", n_train=6, n_val=3, imgsz=48)

    def sample(**config: Any) -> np.ndarray:
        data = DetectionDataset(
            load_dataset(root, "train"), imgsz=32, augment=True, augment_config=AugmentConfig(**config)
        )
        return data[1]["image"].permute(1, 2, 0).numpy()

    plain = sample(auto_augment=None, erasing=0.0, hsv_h=0, hsv_s=0, hsv_v=0)
    erased = sample(auto_augment=None, erasing=1.0, hsv_h=0, hsv_s=0, hsv_v=0)
    changed = (plain != erased).any(axis=-1)
    assert changed.any() and (erased[changed] == 0).all()  # one black rectangle, the rest the same pixels
    assert not np.array_equal(sample(erasing=0.0), plain)  # RandAugment is on by default
