"""Fine-tuning from ``--model.weights`` (issue 13): training mode, head re-initialisation, a few real steps.

The shared test fine-tunes from every checkpoint listed in ``../shared/weights/checkpoints.json`` on synthetic
data of the checkpoint's own task (pose: ../shared/data/coco8-pose, which has the checkpoint's 17 keypoints).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from lucid_train_testing import TINY_IMGSZ, recorded_losses, tiny_data, tiny_trainer
from reliability_testing import SHARED_DIR

CHECKPOINTS_JSON = SHARED_DIR / "weights" / "checkpoints.json"


def _shared_checkpoints() -> list[Any]:
    if not CHECKPOINTS_JSON.is_file():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"needs {CHECKPOINTS_JSON}"))]
    return sorted(json.loads(CHECKPOINTS_JSON.read_text()))


def _task_of(entry: dict[str, Any]) -> str:
    task = (entry.get("train_args") or {}).get("task")
    if task:
        return str(task)
    head = str(entry["head_class"]).lower()
    return {"segment": "segment", "pose": "pose", "obb": "obb"}.get(head, "detect")


def _parameters(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.named_parameters()}


def _fine_tune(
    weights: Path, task: str, tmp_path: Path, num_classes: int
) -> tuple[Any, dict[str, Any], list[float]]:
    """A tiny fit (one epoch of 2 batches) of ``task`` synthetic data from ``weights``: (module, before, losses)."""
    from lucid_data.synth import synthesize
    from lucid_train.module import DetectionLitModule

    if task == "pose":
        # task-matched means the checkpoint's keypoint layout too (17 COCO keypoints): another layout is refused
        data_yaml = SHARED_DIR / "data" / "coco8-pose" / "coco8-pose.yaml"
    else:
        data_yaml = synthesize(
            task, tmp_path / "data", n_train=4, n_val=2, imgsz=TINY_IMGSZ, num_classes=num_classes
        )
    # what lucid-train links: --model.task -> --data.task, the data's task options -> the model
    task_kwargs: dict[str, Any] = {"task": task} if task != "detect" else {}
    data = tiny_data(Path(data_yaml), batch_size=2, **task_kwargs)
    if task != "detect":
        task_kwargs["task_options"] = dict(data.task_options)
    module = DetectionLitModule(
        num_classes=data.num_classes,
        names=data.names,
        imgsz=data.imgsz,
        weights=str(weights),
        **task_kwargs,
    )
    assert module.model.training, "fine-tuning must start from a model in training mode"
    before = _parameters(module.model)
    trainer = tiny_trainer(tmp_path / "run", max_epochs=1)
    trainer.fit(module, datamodule=data)
    return module, before, recorded_losses(trainer)


def _assert_trained(module: Any, before: dict[str, torch.Tensor], losses: list[float]) -> None:
    assert losses and all(torch.isfinite(torch.tensor(loss)) for loss in losses), losses
    after = dict(module.model.named_parameters())
    moved = [k for k, v in before.items() if not torch.equal(v, after[k].detach())]
    assert len(moved) > len(before) // 2, f"only {len(moved)} of {len(before)} parameters moved"


def test_lucid_checkpoint_with_other_class_count_reinitialises_only_the_head(tmp_path: Path) -> None:
    from lucid_core.checkpoint import load_for_training, save_model
    from lucid_core.models import build_model

    source = build_model(family="yolov8", task="detect", scale="n", num_classes=5)
    save_model(source, tmp_path / "five")
    start = load_for_training(tmp_path / "five", num_classes=3)
    assert start.model.training and int(start.model.num_classes) == 3
    head = max(int(k.split(".")[1]) for k in start.model.state_dict())
    assert start.reinitialised and all(name.startswith(f"layers.{head}.") for name in start.reinitialised)
    kept = {k: v for k, v in source.state_dict().items() if not k.startswith(f"layers.{head}.")}
    loaded = start.model.state_dict()
    assert all(torch.equal(v, loaded[k]) for k, v in kept.items())
    assert any("re-initialised" in note and "5" in note for note in start.notes)

    module, before, losses = _fine_tune(
        tmp_path / "five.safetensors", "detect", tmp_path / "fit", num_classes=3
    )
    assert module.family == "yolov8" and module.hparams["family"] == "yolov8"
    _assert_trained(module, before, losses)


@pytest.mark.shared
@pytest.mark.parametrize("name", _shared_checkpoints())
def test_fine_tune_a_few_steps_from_each_shared_checkpoint(name: str, tmp_path: Path) -> None:
    entry = json.loads(CHECKPOINTS_JSON.read_text())[name]
    task = _task_of(entry)
    module, before, losses = _fine_tune(
        SHARED_DIR / "weights" / name, task, tmp_path, num_classes=int(entry["nc"]) + 1
    )
    _assert_trained(module, before, losses)
