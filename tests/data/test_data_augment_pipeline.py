"""AugmentConfig defaults/validation and the per-mechanism augmentations (HSV, letterbox, mixup, copy-paste,
pipeline determinism)."""

from __future__ import annotations

import numpy as np
import pytest

from lucid_data.augment import (
    AugmentConfig,
    AugmentPipeline,
    augment_hsv,
    copy_paste_flip,
    letterbox_train,
    mixup,
    resize_long_side,
)
from lucid_data.targets import Targets


def test_config_defaults_are_the_reference_defaults() -> None:
    c = AugmentConfig()
    assert (c.mosaic, c.degrees, c.translate, c.scale, c.shear, c.perspective) == (
        1.0,
        0.0,
        0.1,
        0.5,
        0.0,
        0.0,
    )
    assert (c.hsv_h, c.hsv_s, c.hsv_v, c.flipud, c.fliplr) == (0.015, 0.7, 0.4, 0.0, 0.5)
    assert (c.mixup, c.copy_paste, c.fill) == (0.0, 0.0, 114)
    assert AugmentConfig.from_dict(c.to_dict()) == c


def test_config_rejects_bad_values_by_name() -> None:
    with pytest.raises(ValueError, match="fliplr"):
        AugmentConfig(fliplr=1.5)
    with pytest.raises(ValueError, match=r"unknown option.*'mosiac'"):
        AugmentConfig.from_dict({"mosiac": 1.0})


def test_hsv_zero_gains_is_identity_and_gains_change_pixels() -> None:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
    assert augment_hsv(image, rng, 0, 0, 0) is image
    changed = augment_hsv(image, np.random.default_rng(1), 0.5, 0.7, 0.4)
    assert changed.shape == image.shape and changed.dtype == np.uint8
    assert not np.array_equal(changed, image)


def test_letterbox_train_pads_with_fill_and_moves_boxes() -> None:
    image = np.zeros((50, 100, 3), np.uint8)
    t = Targets(boxes=[[0, 0, 100, 50]], labels=[3])
    out, moved = letterbox_train(image, t, 200)
    assert out.shape == (200, 200, 3)
    assert (out[:50] == 114).all() and (out[150:] == 114).all() and (out[50:150] == 0).all()
    np.testing.assert_allclose(moved.boxes[0], [0, 50, 200, 150])


def test_resize_long_side_scales_targets() -> None:
    image = np.zeros((40, 80, 3), np.uint8)
    t = Targets(boxes=[[8, 4, 16, 8]], labels=[0], keypoints=[[[8, 4, 2]]])
    out, moved = resize_long_side(image, 160, t)
    assert out.shape == (80, 160, 3)
    np.testing.assert_allclose(moved.boxes[0], [16, 8, 32, 16])
    np.testing.assert_allclose(moved.keypoints[0, 0], [16, 8, 2])


def test_mixup_blends_and_concatenates() -> None:
    a = Targets(boxes=[[0, 0, 5, 5]], labels=[0])
    b = Targets(boxes=[[1, 1, 6, 6], [2, 2, 8, 8]], labels=[1, 2])
    img, t = mixup(
        np.zeros((8, 8, 3), np.uint8), a, np.full((8, 8, 3), 200, np.uint8), b, np.random.default_rng(0)
    )
    assert t.labels.tolist() == [0, 1, 2]
    assert 60 < img.mean() < 140  # Beta(32, 32) ratio is close to 0.5


def test_copy_paste_adds_mirrored_instances_with_pixels() -> None:
    image = np.zeros((20, 40, 3), np.uint8)
    image[5:15, 2:10] = 255
    poly = np.array([[2, 5], [10, 5], [10, 15], [2, 15]], np.float32)
    t = Targets(boxes=[[2, 5, 10, 15]], labels=[4], polygons=[poly])
    out, moved = copy_paste_flip(image, t, np.random.default_rng(0), p=1.0)
    assert moved.labels.tolist() == [4, 4]
    np.testing.assert_allclose(moved.boxes[1], [30, 5, 38, 15])
    assert (out[6:14, 31:37] == 255).all()
    assert copy_paste_flip(image, t, np.random.default_rng(0), p=0.0)[1] is t


def _loader(index: int) -> tuple[np.ndarray, Targets]:
    rng = np.random.default_rng(index)
    image = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    return image, Targets(
        boxes=[[10, 10, 40, 30]], labels=[index % 3], polygons=[[[10, 10], [40, 10], [40, 30], [10, 30]]]
    )


def test_pipeline_is_a_function_of_the_generator_seed() -> None:
    cfg = AugmentConfig(mixup=0.5, copy_paste=0.5, degrees=10)
    pipe = AugmentPipeline(cfg, 64, 5, _loader)
    outs = [pipe(2, np.random.default_rng(np.random.SeedSequence([0, e, 2, 0]))) for e in (0, 0, 1)]
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1].boxes, outs[1][1].boxes)
    assert not np.array_equal(outs[0][0], outs[2][0])
    assert outs[0][0].shape == (64, 64, 3)


def test_pipeline_without_mosaic_letterboxes_the_single_image() -> None:
    cfg = AugmentConfig(mosaic=1.0, translate=0, scale=0, hsv_h=0, hsv_s=0, hsv_v=0, fliplr=0)
    pipe = AugmentPipeline(cfg, 64, 5, _loader)
    image, targets = pipe(1, np.random.default_rng(0), mosaic_enabled=False)
    expected, moved = letterbox_train(*_loader(1), 64)
    np.testing.assert_array_equal(image, expected)
    np.testing.assert_allclose(targets.boxes, moved.boxes, atol=1e-4)
