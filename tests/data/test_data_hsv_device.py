"""Batched on-device HSV (issue 18 ``--data.device_hsv``): the worker path's transform from the worker path's draws.

A dataset with ``defer_hsv`` draws the gains where the worker path draws them and skips the pixel work, so its
geometry (targets, every later draw) is byte-identical; ``augment_hsv_batch`` then gives the worker path's pixels
within one level (RGB -> HSV exactly as OpenCV, HSV -> RGB by the float sector formula).
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from lucid_data.augment.hsv import hsv_luts
from lucid_data.augment.hsv_torch import _rgb_to_hsv8, augment_hsv_batch
from lucid_data.collate import collate
from lucid_data.dataset import DetectionDataset
from lucid_data.synth import synthesize


def _worker_path(image: np.ndarray, gains: np.ndarray) -> np.ndarray:
    hsv = cv2.cvtColor(image, cv2.COLOR_RGB2HSV)
    lut = np.stack(hsv_luts(gains), -1).reshape(256, 1, 3)
    return cv2.cvtColor(cv2.LUT(hsv, lut), cv2.COLOR_HSV2RGB)


def test_rgb_to_hsv_matches_opencv_exactly() -> None:
    rgb = np.random.default_rng(0).integers(0, 256, (2, 40, 50, 3), dtype=np.uint8)
    rgb[0, 0, :5] = [
        [0, 0, 0],
        [255, 255, 255],
        [255, 0, 0],
        [7, 7, 7],
        [0, 255, 1],
    ]  # grey, pure and edge hues
    ours = _rgb_to_hsv8(torch.from_numpy(rgb).permute(0, 3, 1, 2)).permute(0, 2, 3, 1).numpy()
    expected = np.stack([cv2.cvtColor(im, cv2.COLOR_RGB2HSV) for im in rgb])
    assert np.array_equal(ours, expected)


@pytest.mark.parametrize("seed", [0, 1])
def test_batch_transform_is_the_worker_transform_within_one_level(seed: int) -> None:
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (3, 48, 64, 3), dtype=np.uint8)
    gains = rng.uniform(-1, 1, (3, 3)) * np.array([0.015, 0.7, 0.4])
    out = augment_hsv_batch(
        torch.from_numpy(images).permute(0, 3, 1, 2).contiguous(), torch.from_numpy(gains)
    )
    expected = np.stack([_worker_path(im, g) for im, g in zip(images, gains)]).astype(int)
    diff = np.abs(out.permute(0, 2, 3, 1).numpy().astype(int) - expected)
    assert diff.max() <= 1 and diff.mean() < 0.1, (diff.max(), diff.mean())


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="uint8"):
        augment_hsv_batch(torch.zeros(1, 3, 4, 4), np.zeros((1, 3)))
    with pytest.raises(ValueError, match="gain rows"):
        augment_hsv_batch(torch.zeros(2, 3, 4, 4, dtype=torch.uint8), np.zeros((1, 3)))


def test_deferred_samples_keep_every_other_draw(tmp_path: Path) -> None:
    root = synthesize("pose", tmp_path / "pose", n_train=6, n_val=2, imgsz=48, seed=4)
    worker = DetectionDataset(root, imgsz=64, augment=True, seed=3)
    deferred = DetectionDataset(root, imgsz=64, augment=True, seed=3, defer_hsv=True)
    for epoch in (0, 1):
        worker.set_epoch(epoch)
        deferred.set_epoch(epoch)
        a = collate([worker[i] for i in range(6)])
        b = collate([deferred[i] for i in range(6)])
        assert (
            "hsv_gains" not in a and b["hsv_gains"].shape == (6, 3) and b["hsv_gains"].dtype == torch.float64
        )
        for key in ("batch_idx", "cls", "bboxes", "keypoints"):
            assert torch.equal(a[key], b[key]), key
        moved = augment_hsv_batch(b["images"], b["hsv_gains"])
        diff = (moved.int() - a["images"].int()).abs()
        assert int(diff.max()) <= 1 and float(diff.float().mean()) < 0.1
        assert not torch.equal(b["images"], a["images"])  # the deferred images are the un-HSV'd ones
