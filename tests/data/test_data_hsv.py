"""HSV augmentation as the reference since 8.3.79 (issue 12): additive hue shift, saturation 0 stays 0."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from lucid_data.augment import augment_hsv
from lucid_data.augment.hsv import hsv_luts


class _FixedDraw(np.random.Generator):
    """A generator whose ``uniform(-1, 1, 3)`` returns fixed values (the gains' U(-1, 1) draws)."""

    def __init__(self, draws: list[float]) -> None:
        super().__init__(np.random.PCG64(0))
        self.draws = np.asarray(draws, dtype=np.float64)

    def uniform(self, low: float = 0.0, high: float = 1.0, size: object = None) -> np.ndarray:  # type: ignore[override]
        return self.draws.copy()


def _hue(image_rgb: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(image_rgb, cv2.COLOR_RGB2HSV)[..., 0].astype(int)


@pytest.mark.parametrize("draw", [1.0, -1.0, 0.5])
def test_pure_red_changes_hue_additively(draw: float) -> None:
    """Red has hue 0: a multiplicative hue gain keeps it at 0, the additive shift moves it by r_h * 180."""
    red = np.zeros((8, 8, 3), np.uint8)
    red[..., 0] = 255
    assert (_hue(red) == 0).all()
    hgain = 0.1
    out = augment_hsv(red, _FixedDraw([draw, 0.0, 0.0]), hgain, 0.7, 0.4)
    expected = int((0 + draw * hgain * 180) % 180)
    assert (_hue(out) != 0).all()
    assert np.abs(_hue(out) - expected).max() <= 1  # HSV -> RGB -> HSV rounding


def test_luts_follow_the_reference_formulas() -> None:
    gains = np.array([0.01, -0.3, 0.2])
    lut_hue, lut_sat, lut_val = hsv_luts(gains)
    x = np.arange(256, dtype=np.float64)
    np.testing.assert_array_equal(lut_hue, ((x + 0.01 * 180) % 180).astype(np.uint8))
    np.testing.assert_array_equal(lut_sat[1:], np.clip(x * 0.7, 0, 255).astype(np.uint8)[1:])
    np.testing.assert_array_equal(lut_val, np.clip(x * 1.2, 0, 255).astype(np.uint8))
    assert all(lut.dtype == np.uint8 for lut in (lut_hue, lut_sat, lut_val))


def test_saturation_zero_stays_zero() -> None:
    """lut_sat[0] = 0: grey pixels (saturation 0) stay grey even with a saturation gain > 1."""
    _, lut_sat, _ = hsv_luts(np.array([0.0, 0.7, 0.0]))
    assert lut_sat[0] == 0 and lut_sat[100] == 170
    grey = np.full((4, 4, 3), 128, np.uint8)
    out = augment_hsv(grey, _FixedDraw([0.3, 1.0, 0.0]), 0.015, 0.7, 0.4)
    assert (out[..., 0] == out[..., 1]).all() and (out[..., 1] == out[..., 2]).all()


@pytest.mark.parametrize("draws", [[1.0, -1.0, 0.5], [-0.3, 0.9, -0.7], [0.0, 0.0, 0.0]])
def test_one_per_channel_lut_pass_equals_the_planewise_tables(draws: list[float]) -> None:
    """The (256, 1, 3) table applied in one cv2.LUT gives the bytes of splitting the HSV planes, mapping each through
    its own table (hsv_luts) and merging - on RGB and on the fast path's RGBA scratch input, in one pass and in
    the caller's plane buffers."""
    from lucid_data.augment.hsv import augment_hsv_into

    rgb = np.random.default_rng(3).integers(0, 256, (37, 53, 3), dtype=np.uint8)
    gains = np.asarray(draws) * np.array([0.015, 0.7, 0.4])
    hue, sat, val = cv2.split(cv2.cvtColor(rgb, cv2.COLOR_RGB2HSV))
    tables = hsv_luts(gains)
    planewise = cv2.merge([cv2.LUT(p, t) for p, t in zip((hue, sat, val), tables)])
    expected = cv2.cvtColor(planewise, cv2.COLOR_HSV2RGB)
    assert np.array_equal(augment_hsv(rgb, _FixedDraw(draws)), expected)
    rgba = cv2.cvtColor(rgb, cv2.COLOR_RGB2RGBA)
    out = np.empty_like(rgb)
    result = augment_hsv_into(
        rgba, _FixedDraw(draws), 0.015, 0.7, 0.4, hsv_buffer=np.empty_like(rgb), out=out
    )
    assert result is out and np.array_equal(out, expected)
    planes = [np.full(rgb.shape[:2], 7, np.uint8) for _ in range(3)]  # stale bytes must not matter
    result = augment_hsv_into(
        rgba, _FixedDraw(draws), 0.015, 0.7, 0.4, hsv_buffer=np.empty_like(rgb), out=out, planes=planes
    )
    assert result is out and np.array_equal(out, expected)
