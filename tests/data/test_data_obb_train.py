"""OBB models train on the OBB data pipeline: a real model's training forward feeds the OBB objective, and the
imported YOLOv8n-OBB checkpoint fine-tunes with it (plain torch loop, no Lightning).

Synthetic rotated shapes (`lucid_data.synth`, task obb) → `DetectionDataset` → `collate` → `build_model` in
training mode → `build_objective` (the task table's `obb_objective`, fixture README "obb_loss_*.pt").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from lucid_core.models import build_model
from lucid_core.tasks import build_objective
from lucid_data.collate import collate
from lucid_data.dataset import DetectionDataset
from lucid_data.synth import synthesize


def _batch(root: Path, *, imgsz: int, num_classes: int, n: int = 2) -> dict[str, Any]:
    yaml_path = synthesize("obb", root, n_train=n, n_val=0, imgsz=imgsz, num_classes=num_classes, seed=3)
    dataset = DetectionDataset(yaml_path, imgsz=imgsz, augment=False, split="train", verify="none")
    batch = collate([dataset[i] for i in range(n)])
    assert batch["rboxes"].shape == (batch["batch_idx"].shape[0], 5) and batch["rboxes"].shape[0] > 0
    return batch


def _images(batch: dict[str, Any]) -> torch.Tensor:
    images: torch.Tensor = batch["images"].float() / 255
    return images


@pytest.mark.parametrize("family", ["yolov8", "yolo26"])
def test_obb_model_training_forward_feeds_the_objective(tmp_path: Path, family: str) -> None:
    torch.manual_seed(0)
    batch = _batch(tmp_path / "s", imgsz=64, num_classes=3)
    model = build_model(family, "obb", "n", 3).train()
    objective = build_objective(model, epochs=10)
    assert objective.loss_names[0] == "box_loss" and objective.loss_names[-1] == "angle_loss"
    output = model(_images(batch))
    total, items = objective(output, batch)
    assert torch.isfinite(total) and torch.isfinite(items).all() and items.shape == (4,)
    assert (
        float(items[0]) > 0 and float(items[3]) >= 0
    )  # objects were assigned (box loss) and the angle scored
    total.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    angle_grads = [p.grad for n, p in model.named_parameters() if ".cv4." in n and p.grad is not None]
    assert angle_grads and any(float(g.abs().sum()) > 0 for g in angle_grads)  # the angle tower learns


@pytest.mark.shared
def test_imported_yolov8n_obb_checkpoint_fine_tunes(shared_dir: Path, tmp_path: Path) -> None:
    """The imported YOLOv8n-OBB weights fine-tuned on synthetic shapes with another class count: class convs
    re-initialised, finite losses, weights move and the loss goes down over a few SGD steps on one batch."""
    from lucid_core.checkpoint import load_for_training

    weights = shared_dir / "weights" / "yolov8n-obb-taufibrils.pt"
    num_classes = 2
    start = load_for_training(weights, num_classes=num_classes, task="obb")
    model = start.model
    assert model.training and model.task == "obb" and model.num_classes == num_classes
    if int(start.source_config["num_classes"]) != num_classes:  # the class convs' last layers start fresh
        assert start.reinitialised and all(".cv3." in n for n in start.reinitialised), start.reinitialised
    torch.manual_seed(0)
    batch = _batch(tmp_path / "s", imgsz=128, num_classes=num_classes)
    objective = build_objective(model, epochs=10)
    images = _images(batch)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.002, momentum=0.9)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    totals = []
    for _ in range(4):
        optimizer.zero_grad()
        total, items = objective(model(images), batch)
        assert torch.isfinite(total) and torch.isfinite(items).all()
        total.backward()
        optimizer.step()
        totals.append(float(total.detach()))
    moved = sum(not torch.equal(before[n], p.detach()) for n, p in model.named_parameters())
    assert moved > 0
    assert totals[-1] < totals[0], totals
