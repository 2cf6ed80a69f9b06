"""``--data.device_hsv`` (issue 18): the workers defer HSV and the module applies it to each training batch after
the batch reached the training device; training on the CPU keeps the worker path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from lucid_train_testing import make_shapes, tiny_data, tiny_module, tiny_trainer


def test_cpu_training_keeps_the_worker_path(tmp_path: Path) -> None:
    data = tiny_data(make_shapes(tmp_path / "shapes", n_train=4, n_val=2), device_hsv=True)
    data.train_dataloader()
    assert data.train_dataset.defer_hsv is False
    assert "hsv_gains" not in data.train_dataset[0]


def test_deferred_hsv_is_applied_to_every_training_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lucid_data.augment.hsv_torch as hsv_torch
    from lucid_train.datamodule import DetectionDataModule

    # a training device other than the CPU (the transform itself runs wherever the batch is: here the CPU)
    monkeypatch.setattr(DetectionDataModule, "_training_device", lambda self: torch.device("meta"))
    calls: list[tuple[int, ...]] = []
    original = hsv_torch.augment_hsv_batch

    def counting(images: torch.Tensor, gains: Any) -> torch.Tensor:
        calls.append(tuple(images.shape))
        return original(images, gains)

    monkeypatch.setattr(hsv_torch, "augment_hsv_batch", counting)
    data = tiny_data(make_shapes(tmp_path / "shapes", n_train=8, n_val=2), device_hsv=True, batch_size=4)
    module = tiny_module(data)
    trainer = tiny_trainer(tmp_path / "run", max_epochs=1, limit_val_batches=0)
    trainer.fit(module, datamodule=data)
    assert data.train_dataset.defer_hsv is True
    assert calls == [(4, 3, 64, 64), (4, 3, 64, 64)]  # both training batches, no validation batch
