"""A task is one module: a toy fifth task, registered from this test module with its own head and objective,
trains through the Lightning module, predicts through ``lucid_core.predict`` and evaluates through
``lucid_train.eval.evaluate_checkpoint`` without any package file knowing its name."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from lucid_train_testing import TINY_IMGSZ, recorded_losses, tiny_trainer

import lucid_core
from lucid_core.heads.detect import DetectHead
from lucid_core.loss.detection import DetectionLoss, detection_objective
from lucid_core.tasks import Task, get_task, register_task, unregister_task

TOY = "toy-boxes"


class ToyHead(DetectHead):
    """The toy task's head: a detection head under its own class (what the task object builds)."""


class ToyTask(Task):
    """Axis-aligned boxes with a heavier box gain; counts how often its objective is built."""

    objectives_built: list[bool] = []  # noqa: RUF012 - shared on purpose: the frozen dataclass has no state

    def build_head(self, common: dict[str, Any], config: Any, family: Any, row: Any) -> DetectHead:
        return ToyHead(**common)

    def branch_objective(self, model: Any, *, one2one: bool, **options: Any) -> DetectionLoss:
        self.objectives_built.append(one2one)
        return detection_objective(model, one2one=one2one, gains={"box": 5.0, "cls": 0.5, "dfl": 1.5})


@pytest.fixture
def toy_task() -> Iterator[Task]:
    task = register_task(ToyTask(name=TOY, suffix="-toy"))
    ToyTask.objectives_built.clear()
    try:
        yield task
    finally:
        unregister_task(TOY)


def test_a_task_registered_outside_the_packages_trains_predicts_and_evaluates(
    toy_task: Task, tmp_path: Path
) -> None:
    from lucid_data.synth import synthesize
    from lucid_train import YOLODataModule, YOLOLitModule
    from lucid_train.eval import evaluate_checkpoint

    assert get_task(TOY) is toy_task
    assert any(key.task == TOY and key.name == "yolo26n-toy" for key in lucid_core.list_models())

    torch.manual_seed(0)
    yaml_path = synthesize("detect", tmp_path / "data", n_train=8, n_val=2, imgsz=TINY_IMGSZ, seed=0)
    data = YOLODataModule(root=str(yaml_path), imgsz=TINY_IMGSZ, batch_size=4, workers=0, task=TOY)
    module = YOLOLitModule(
        family="yolo26",
        task=TOY,
        num_classes=data.num_classes,
        names=data.names,
        imgsz=data.imgsz,
        task_options=data.task_options,
    )
    trainer = tiny_trainer(tmp_path / "run", max_epochs=1)
    trainer.fit(module, datamodule=data)

    assert isinstance(module.model.head, ToyHead)
    assert set(ToyTask.objectives_built) == {False, True}  # both YOLO26 branches use the toy objective
    losses = recorded_losses(trainer)
    assert losses and all(math.isfinite(v) for v in losses)
    assert "metrics/mAP50-95" in module.val_metrics  # scored with the task's IoU types (bbox)

    weights = tmp_path / "toy"
    names = list(data.names.values()) if isinstance(data.names, dict) else list(data.names)
    lucid_core.save_model(module.ema_model, weights, names=names, imgsz=TINY_IMGSZ)
    loaded = lucid_core.load(weights)
    assert loaded.model.task == TOY and isinstance(loaded.model.head, ToyHead)

    image = np.full((TINY_IMGSZ, TINY_IMGSZ, 3), 127, dtype=np.uint8)
    det = lucid_core.predict(loaded.model, image, imgsz=TINY_IMGSZ, conf=0.0, max_det=5)[0].detections
    assert det.boxes.shape[1] == 4 and len(det) <= 5
    assert det.masks is None and det.keypoints is None and det.rboxes is None

    report = evaluate_checkpoint(weights, yaml_path, output=tmp_path / "eval.json", imgsz=TINY_IMGSZ, batch=2)
    assert list(report["iou_types"]) == ["bbox"] and 0.0 <= report["mAP50-95"] <= 1.0
