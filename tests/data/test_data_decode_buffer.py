"""Recent-decode buffer (issue 18): same samples as decoding every load, fewer decodes, bounded bytes."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from lucid_data import dataset as dataset_module
from lucid_data.augment import AugmentConfig
from lucid_data.cache import RecentDecodes
from lucid_data.dataset import DetectionDataset
from lucid_data.synth import synthesize


@pytest.fixture(scope="module")
def detect_yaml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthesize("detect", tmp_path_factory.mktemp("b") / "d", n_train=6, n_val=2, imgsz=48, seed=2)


def _count_decodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = dataset_module.load_image

    def counting(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(dataset_module, "load_image", counting)
    return calls


def test_buffered_samples_equal_decoding_every_load(
    detect_yaml: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = AugmentConfig(mixup=0.5, degrees=10)
    plain = DetectionDataset(
        detect_yaml, imgsz=64, augment=True, augment_config=cfg, seed=3, decode_buffer_mib=0
    )
    buffered = DetectionDataset(detect_yaml, imgsz=64, augment=True, augment_config=cfg, seed=3)
    assert plain.recent is None and buffered.recent is not None
    calls = _count_decodes(monkeypatch)
    decodes = {"plain": 0, "buffered": 0}
    for epoch in (0, 1):
        for ds in (plain, buffered):
            ds.set_epoch(epoch)
        for i in range(len(plain)):
            before = len(calls)
            a = plain[i]
            decodes["plain"] += len(calls) - before
            before = len(calls)
            b = buffered[i]
            decodes["buffered"] += len(calls) - before
            assert torch.equal(a["image"], b["image"])
            np.testing.assert_array_equal(a["targets"].boxes, b["targets"].boxes)
            np.testing.assert_array_equal(a["targets"].labels, b["targets"].labels)
    # every image fits: the buffered dataset decoded each file once, the plain one on every load
    assert buffered.recent is not None
    assert decodes["buffered"] == buffered.recent.misses == len(buffered)
    assert decodes["plain"] > decodes["buffered"] and buffered.recent.hits > 0
    assert all(not image.flags.writeable for image in buffered.recent._images.values())


def test_evaluation_and_ram_cache_have_no_buffer(detect_yaml: Path) -> None:
    assert DetectionDataset(detect_yaml, imgsz=64, augment=False).recent is None
    assert DetectionDataset(detect_yaml, imgsz=64, augment=True, cache="ram").recent is None
    with pytest.raises(ValueError, match=r"decode_buffer_mib must be >= 0.*-1"):
        DetectionDataset(detect_yaml, imgsz=64, augment=True, decode_buffer_mib=-1)


def test_buffer_keeps_the_most_recent_within_its_bound() -> None:
    image = np.zeros((10, 10, 3), np.uint8)  # 300 bytes each
    buf = RecentDecodes(max_bytes=700)
    for i in range(3):
        buf.put(i, image.copy())
    assert len(buf) == 2 and 0 not in buf and buf.stored_bytes == 600
    assert buf.get(1) is not None  # 1 is now the most recent: 2 goes next
    buf.put(3, image.copy())
    assert 2 not in buf and 1 in buf and 3 in buf and buf.stored_bytes <= 700
    buf.put(9, np.zeros((20, 20, 3), np.uint8))  # 1200 bytes: larger than the bound, not kept
    assert 9 not in buf and buf.stored_bytes == 600
    assert buf.get(0) is None and (buf.hits, buf.misses) == (1, 1)
    clone = pickle.loads(pickle.dumps(buf))  # a spawned worker starts with an empty buffer of the same bound
    assert len(clone) == 0 and clone.stored_bytes == 0 and clone.max_bytes == 700 and len(buf) == 2
    with pytest.raises(ValueError, match=r"decode buffer size must be >= 0 bytes, got -5"):
        RecentDecodes(-5)
