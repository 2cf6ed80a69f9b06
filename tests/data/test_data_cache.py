"""RAM cache: size estimate and refusal with the numbers; cached and uncached samples are identical."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from lucid_data import cache as cache_module
from lucid_data.augment import AugmentConfig
from lucid_data.cache import CacheTooLargeError, RamImageCache, available_memory_bytes, estimate_cache_bytes
from lucid_data.dataset import DetectionDataset
from lucid_data.synth import synthesize


@pytest.fixture(scope="module")
def pose_yaml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthesize("pose", tmp_path_factory.mktemp("c") / "pose", n_train=6, n_val=2, imgsz=40, seed=4)


@pytest.mark.parametrize("augment", [True, False])
def test_cached_and_uncached_samples_are_identical(pose_yaml: Path, augment: bool) -> None:
    cfg = AugmentConfig(mixup=0.5, degrees=10)
    plain = DetectionDataset(pose_yaml, imgsz=64, augment=augment, augment_config=cfg, seed=1)
    cached = DetectionDataset(pose_yaml, imgsz=64, augment=augment, augment_config=cfg, seed=1, cache="ram")
    assert cached.cache is not None and len(cached.cache) == len(plain)
    # training caches the long-side-resized image (40 → 64), evaluation the original decode
    side = 64 if augment else 40
    assert cached.cache.stored_bytes == len(plain) * side * side * 3 == cached.cache.needed_bytes
    for ds in (plain, cached):
        ds.set_epoch(3)
    for i in range(len(plain)):
        a, b = plain[i], cached[i]
        assert torch.equal(a["image"], b["image"])
        np.testing.assert_array_equal(a["targets"].boxes, b["targets"].boxes)
        np.testing.assert_array_equal(a["targets"].keypoints, b["targets"].keypoints)


def test_cache_refuses_with_the_numbers(pose_yaml: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(
        CacheTooLargeError, match=r"2 images need .*\(1200 bytes\).*\(1000 bytes\) are available"
    ):
        RamImageCache([(10, 20), (10, 20)], available_bytes=1000, max_fraction=1.0)
    monkeypatch.setattr(cache_module, "available_memory_bytes", lambda: 1000)
    with pytest.raises(CacheTooLargeError, match=r"6 images need .*\(73728 bytes\)"):
        DetectionDataset(pose_yaml, imgsz=64, augment=True, cache="ram")


def test_meminfo_is_parsed(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2000000 kB\n")
    assert available_memory_bytes(meminfo) == 2000000 * 1024
    assert available_memory_bytes() > 0
    assert estimate_cache_bytes([(2, 3), (4, 5)]) == (6 + 20) * 3
