"""Persistent training workers (issue 18): the sampler carries the epoch state with every index, so workers that
live across epochs make the bytes that no workers (or fresh workers per epoch) make - including the epoch where
``close_mosaic`` switches mosaic off."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch

from lucid_data.augment import AugmentConfig
from lucid_data.dataset import SampleKey
from lucid_data.synth import synthesize
from lucid_train.datamodule import YOLODataModule


def _epochs(root: Path, workers: int, epochs: int) -> tuple[list[list[torch.Tensor]], YOLODataModule]:
    dm = YOLODataModule(
        root=str(root),
        imgsz=64,
        batch_size=3,
        workers=workers,
        seed=5,
        augment=AugmentConfig(close_mosaic=1),
    )
    loader = dm.train_dataloader()
    images = []
    for epoch in range(epochs):
        dm.prepare_epoch(epoch, epochs)
        loader.sampler.set_epoch(epoch)  # type: ignore[attr-defined]  (Lightning does this before each epoch)
        images.append([batch["images"] for batch in loader])
    return images, dm


def test_persistent_workers_give_the_bytes_of_no_workers(tmp_path: Path) -> None:
    root = synthesize("detect", tmp_path / "shapes", n_train=7, n_val=2, imgsz=48, seed=1)
    serial, _ = _epochs(root, workers=0, epochs=3)
    parallel, dm = _epochs(root, workers=2, epochs=3)
    loader = dm.train_dataloader()
    assert loader.persistent_workers and not dm.train_dataset.mosaic_enabled  # closed for the last epoch
    for epoch, (a, b) in enumerate(zip(serial, parallel, strict=True)):
        assert len(a) == len(b) > 0
        for x, y in zip(a, b, strict=True):
            assert torch.equal(x, y), epoch
    assert not torch.equal(serial[0][0], serial[1][0])  # each epoch draws new augmentation


def test_sample_keys_carry_the_main_process_state(tmp_path: Path) -> None:
    root = synthesize("detect", tmp_path / "shapes", n_train=4, n_val=2, imgsz=48, seed=2)
    dm = YOLODataModule(root=str(root), imgsz=64, batch_size=2, workers=1, seed=0)
    dm.prepare_epoch(4, 5)  # the last epoch: close_mosaic 10 has closed mosaic
    keys = list(dm.train_dataloader().sampler)  # type: ignore[call-overload]
    assert sorted(k.image_index for k in keys) == [0, 1, 2, 3]
    assert all(isinstance(k, SampleKey) and k.epoch == 4 and not k.mosaic_enabled for k in keys)
    fresh = dm.dataset("train", augment=True)
    sample = fresh[keys[0]]
    assert fresh.epoch == 4 and not fresh.mosaic_enabled and sample["meta"] is not None


def test_the_first_epochs_keys_carry_its_own_state(tmp_path: Path) -> None:
    """Lightning draws the first epoch's sample keys when it creates the iterator, before
    ``on_train_epoch_start``: the loader sets the state of the epoch the loop starts at - mosaic already closed
    when ``close_mosaic`` covers the whole run, the resumed epoch's augmentation stream after a resume."""
    root = synthesize("detect", tmp_path / "shapes", n_train=4, n_val=2, imgsz=48, seed=3)
    cpu = SimpleNamespace(root_device=torch.device("cpu"))
    for start, epochs, mosaic in ((0, 1, False), (0, 20, True), (3, 20, True), (12, 20, False)):
        dm = YOLODataModule(root=str(root), imgsz=64, batch_size=2, workers=1, seed=0)  # close_mosaic 10
        dm.trainer = SimpleNamespace(  # type: ignore[assignment]
            current_epoch=start, max_epochs=epochs, strategy=cpu, global_rank=0, world_size=1
        )
        keys = list(dm.train_dataloader().sampler)  # type: ignore[call-overload]
        assert {(k.epoch, k.mosaic_enabled) for k in keys} == {(start, mosaic)}, (start, epochs)
