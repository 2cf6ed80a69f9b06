"""Every task of the task table trains through the one Lightning module (issue 15's seam): a short fit of each
task's synthetic shapes logs the objective's own loss names, finite losses, the task's metrics (box + mask /
keypoint mAP, rotated mAP) and the task's fitness; a segment fit is byte-identical across two runs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from lucid_train_testing import TINY_IMGSZ, recorded_losses, state_hash, tiny_trainer

from lucid_core.tasks import TASKS

FAST_FAMILY = "yolo26"
#: the tasks the data pipeline trains today: every task scored by an IoU type (classification's folder reader and
#: data module are not built yet)
DENSE_TASKS = [name for name, spec in TASKS.items() if spec.iou_types]


def _fit(task: str, family: str, root: Path, *, epochs: int = 1) -> tuple[object, object]:
    from lucid_data.synth import synthesize
    from lucid_train import YOLODataModule, YOLOLitModule

    torch.manual_seed(0)
    yaml_path = synthesize(task, root / "data", n_train=8, n_val=2, imgsz=TINY_IMGSZ, seed=0)
    data = YOLODataModule(root=str(yaml_path), imgsz=TINY_IMGSZ, batch_size=4, workers=0, task=task)
    module = YOLOLitModule(
        family=family,
        task=task,
        num_classes=data.num_classes,
        names=data.names,
        imgsz=data.imgsz,
        task_options=data.task_options,
    )
    trainer = tiny_trainer(root / "run", max_epochs=epochs)
    trainer.fit(module, datamodule=data)
    return module, trainer


def _check_task_run(task: str, module: object, trainer: object) -> None:
    spec = TASKS[task]
    names = module.loss_names  # type: ignore[attr-defined]
    assert tuple(names) == tuple(module.criterion.loss_names)  # type: ignore[attr-defined]
    assert names[0] == "box_loss" and "cls_loss" in names
    items = module.train_epoch_items  # type: ignore[attr-defined]
    assert set(items) == set(names) and all(math.isfinite(v) for v in items.values())
    assert recorded_losses(trainer) and all(math.isfinite(v) for v in recorded_losses(trainer))  # type: ignore[arg-type]
    metrics = module.val_metrics  # type: ignore[attr-defined]
    for key in spec.metric_keys("mAP50-95") + spec.metric_keys("mAP50"):
        assert key in metrics and 0.0 <= metrics[key] <= 1.0, (key, metrics)
    assert metrics["metrics/fitness"] == pytest.approx(spec.fitness(metrics))


@pytest.mark.parametrize("task", DENSE_TASKS)
def test_every_task_trains_through_the_one_module(task: str, tmp_path: Path) -> None:
    module, trainer = _fit(task, FAST_FAMILY, tmp_path)
    _check_task_run(task, module, trainer)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["yolov8", "yolo11"])
@pytest.mark.parametrize("task", DENSE_TASKS)
def test_every_task_trains_for_the_classic_families(task: str, family: str, tmp_path: Path) -> None:
    module, trainer = _fit(task, family, tmp_path)
    _check_task_run(task, module, trainer)


def test_a_segment_fit_is_byte_identical_across_runs(tmp_path: Path) -> None:
    first, first_trainer = _fit("segment", FAST_FAMILY, tmp_path / "a")
    second, second_trainer = _fit("segment", FAST_FAMILY, tmp_path / "b")
    assert recorded_losses(first_trainer) == recorded_losses(second_trainer)  # type: ignore[arg-type]
    assert state_hash(first.model) == state_hash(second.model)  # type: ignore[attr-defined]
    assert state_hash(first.ema_model) == state_hash(second.ema_model)  # type: ignore[attr-defined]


def test_a_task_model_refuses_a_dataset_of_another_task(tmp_path: Path) -> None:
    from lucid_data.synth import synthesize
    from lucid_train import YOLODataModule
    from lucid_train.errors import TrainingSetupError

    yaml_path = synthesize("detect", tmp_path / "data", n_train=2, n_val=1, imgsz=TINY_IMGSZ, seed=0)
    with pytest.raises(TrainingSetupError, match=r"'detect' dataset but --model\.task is 'segment'"):
        YOLODataModule(root=str(yaml_path), imgsz=TINY_IMGSZ, batch_size=2, workers=0, task="segment")
