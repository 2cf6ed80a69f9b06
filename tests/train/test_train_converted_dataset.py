"""A dataset converted by ``lucid-data convert`` trains: coco8 (YOLO) → COCO JSON → YOLO, then one short epoch."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from lucid_train_testing import recorded_losses, tiny_data, tiny_module, tiny_trainer

from lucid_data.cli import main as lucid_data
from lucid_data.readers import load_dataset

pytestmark = pytest.mark.shared


def test_coco8_converted_to_coco_and_back_to_yolo_trains_one_epoch(shared_dir: Path, tmp_path: Path) -> None:
    source = shared_dir / "data" / "coco8" / "coco8.yaml"
    coco, yolo = tmp_path / "coco", tmp_path / "yolo"
    for split in ("train", "val"):
        assert lucid_data(["convert", str(source), str(coco), "--to", "coco", "--split", split]) == 0
    jsons = {split: next((coco / "annotations").glob(f"*_{split}.json")) for split in ("train", "val")}
    for split, path in jsons.items():
        assert lucid_data(["convert", str(path), str(yolo), "--to", "yolo", "--split", split]) == 0
    data_yaml = yolo / "data.yaml"
    for split in ("train", "val"):  # every instance made the round trip
        original = load_dataset(source, split, "detect")
        converted = load_dataset(data_yaml, split, "detect")
        assert sum(len(r.targets) for r in converted.records) == sum(len(r.targets) for r in original.records)
        assert len(json.loads(jsons[split].read_text())["images"]) == len(original.records)

    torch.set_num_threads(1)
    data = tiny_data(data_yaml, batch_size=4)
    module = tiny_module(data)
    trainer = tiny_trainer(tmp_path / "run", max_epochs=1)
    trainer.fit(module, datamodule=data)
    assert module.num_classes == len(load_dataset(source, "train", "detect").names) == 80
    losses = recorded_losses(trainer)
    assert losses and all(math.isfinite(v) for v in losses)
    assert (tmp_path / "run" / "last.ckpt").is_file() and (tmp_path / "run" / "best.safetensors").is_file()
    assert "lucid-train: 1 epoch" in (tmp_path / "run" / "summary.txt").read_text()
