"""`--data.decode_buffer_mib` reaches the training dataset; 0 turns it off; a negative value names the flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from lucid_data.synth import synthesize
from lucid_train import YOLODataModule
from lucid_train.errors import TrainingSetupError


def test_decode_buffer_flag_reaches_the_training_dataset(tmp_path: Path) -> None:
    root = str(synthesize("detect", tmp_path / "d", n_train=2, n_val=1, imgsz=32, seed=0))
    data = YOLODataModule(root=root, imgsz=32, batch_size=2, workers=0, decode_buffer_mib=3)
    train = data.dataset(data.train_split, augment=True)
    assert train.recent is not None and train.recent.max_bytes == 3 * 2**20
    assert data.dataset(data.val_split, augment=False).recent is None  # evaluation reads each image once
    off = YOLODataModule(root=root, imgsz=32, batch_size=2, workers=0, decode_buffer_mib=0)
    assert off.dataset(off.train_split, augment=True).recent is None
    with pytest.raises(
        TrainingSetupError, match=r"data\.decode_buffer_mib: expected >= 0 \(0 = off\), got -1"
    ):
        YOLODataModule(root=root, imgsz=32, batch_size=2, workers=0, decode_buffer_mib=-1)
