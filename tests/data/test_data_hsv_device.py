"""Batched on-device HSV (issue 18 ``--data.device_hsv``): the worker path's transform from the worker path's draws.

A dataset with ``defer_hsv`` draws the gains where the worker path draws them and skips the pixel work, so its
geometry (targets, every later draw) is byte-identical; ``augment_hsv_batch`` then gives the worker path's pixels:
RGB -> HSV exactly as OpenCV, HSV -> RGB as OpenCV's vector path (fused multiply-add, truncated). OpenCV converts
each row in blocks of its vector width and the last ``W mod block`` pixels with a scalar loop that rounds instead;
rows whose width is a multiple of the block (every stride-aligned training size) are therefore byte-identical, and
the scalar tail is within one level. Exactness needs OpenCV's vector path to fuse (FMA hardware; probed below);
elsewhere the tests check the one-level bound.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from lucid_data.augment.hsv import hsv_luts
from lucid_data.augment.hsv_torch import _hsv8_to_rgb, _rgb_to_hsv8, augment_hsv_batch
from lucid_data.collate import collate
from lucid_data.dataset import DetectionDataset
from lucid_data.synth import synthesize


def _vector_block() -> int:
    """OpenCV's HSV -> RGB block width here: HSV (0, 1, 1) gives G = 0 in the vector path (0.996 truncated) and
    G = 1 in the scalar tail (rounded), so the tail of a 1-pixel-high row shows where the blocks end."""
    for width in range(2, 130):
        row = np.tile(np.array([0, 1, 1], np.uint8), (1, width, 1))
        green = cv2.cvtColor(row, cv2.COLOR_HSV2RGB)[0, :, 1]
        if green[0] == 0:  # the first pixel went through the vector path: the block is the first such width
            return width
    return 1 << 30  # no vector path at all


def _vector_path_fuses(block: int) -> bool:
    """HSV (1, 90, 85): G is 56 with a fused 1 - s*f and 55 with a rounded product, in the vector path."""
    if block > 4096:
        return False
    row = np.tile(np.array([1, 90, 85], np.uint8), (1, block, 1))
    return bool(cv2.cvtColor(row, cv2.COLOR_HSV2RGB)[0, 0, 1] == 56)


BLOCK = _vector_block()  # probed once for the installed OpenCV
FUSED = _vector_path_fuses(BLOCK)
EXACT_AT_64 = FUSED and 64 % BLOCK == 0  # a 64-pixel-wide row is all vector path


def _to_rgb(hsv: np.ndarray) -> np.ndarray:
    return _hsv8_to_rgb(torch.from_numpy(hsv).permute(2, 0, 1)[None].long())[0].permute(1, 2, 0).numpy()


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


def _check_against_opencv(hsv: np.ndarray) -> None:
    """``hsv`` (H, W, 3): ours equals cv2 in the vector-path columns (where it fuses), within one level elsewhere."""
    ours = _to_rgb(hsv).astype(int)
    expected = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB).astype(int)
    diff = np.abs(ours - expected).max(-1)
    assert diff.max() <= 1, diff.max()
    width = hsv.shape[1]
    vector_columns = width - width % BLOCK
    if FUSED:
        bad = np.argwhere(diff[:, :vector_columns] > 0)
        assert len(bad) == 0, (len(bad), hsv[tuple(bad[0])] if len(bad) else None)


def test_hsv_to_rgb_is_opencv_vector_path_on_sampled_domain() -> None:
    rng = np.random.default_rng(0)
    hsv = rng.integers(0, 256, (512, 1024, 3), dtype=np.uint8)
    hsv[..., 0] %= 180  # the hue tables only produce 0..179
    hsv[0, :6] = [[0, 1, 1], [0, 255, 255], [179, 255, 255], [30, 128, 77], [0, 0, 200], [150, 1, 255]]
    _check_against_opencv(hsv)


@pytest.mark.slow
def test_hsv_to_rgb_is_opencv_vector_path_on_the_whole_uint8_domain() -> None:
    h, s, v = np.meshgrid(np.arange(256), np.arange(256), np.arange(256), indexing="ij")
    _check_against_opencv(np.stack([h, s, v], -1).reshape(4096, 4096, 3).astype(np.uint8))


@pytest.mark.parametrize("width", [7, 50, 131])
def test_the_scalar_tail_of_a_row_is_within_one_level(width: int) -> None:
    hsv = np.random.default_rng(width).integers(0, 256, (40, width, 3), dtype=np.uint8)
    hsv[..., 0] %= 180
    _check_against_opencv(hsv)


@pytest.mark.parametrize("seed", [0, 1])
def test_batch_transform_is_the_worker_transform(seed: int) -> None:
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (3, 48, 64, 3), dtype=np.uint8)
    gains = rng.uniform(-1, 1, (3, 3)) * np.array([0.015, 0.7, 0.4])
    out = augment_hsv_batch(
        torch.from_numpy(images).permute(0, 3, 1, 2).contiguous(), torch.from_numpy(gains)
    )
    expected = np.stack([_worker_path(im, g) for im, g in zip(images, gains)]).astype(int)
    diff = np.abs(out.permute(0, 2, 3, 1).numpy().astype(int) - expected)
    if EXACT_AT_64:
        assert diff.max() == 0, diff.max()
    else:
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
        if EXACT_AT_64:
            assert torch.equal(moved, a["images"])  # the worker path's bytes
        else:
            diff = (moved.int() - a["images"].int()).abs()
            assert int(diff.max()) <= 1 and float(diff.float().mean()) < 0.1
        assert not torch.equal(b["images"], a["images"])  # the deferred images are the un-HSV'd ones
