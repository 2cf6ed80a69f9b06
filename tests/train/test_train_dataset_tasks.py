"""Segment/pose/OBB datasets given to detection training: read with their own task, trained on instance boxes.

`lucid_data.load_dataset(path, split, task=None)` probes the task (a YAML `kpt_shape` → pose, 4-corner lines → obb,
polygons → segment); `DetectionDataModule` serves every dataset's instance boxes, and a non-detect `--model.task`
is a one-paragraph setup error naming what is supported (docs/TRAINING.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from lucid_train_testing import TINY_IMGSZ, tiny_cli_args, tiny_data

from lucid_train.cli import main


def _synth(task: str, root: Path) -> Path:
    from lucid_data.synth import synthesize

    return Path(synthesize(task, root, n_train=4, n_val=2, imgsz=TINY_IMGSZ, seed=0))


@pytest.mark.parametrize("task", ["segment", "pose", "obb"])
def test_non_detect_dataset_is_read_with_its_own_task_and_serves_boxes(task: str, tmp_path: Path) -> None:
    data = tiny_data(_synth(task, tmp_path / task), batch_size=2)
    assert data.source_task == task
    batch = next(iter(data.train_dataloader()))
    boxes = [t.boxes for t in batch["targets"]]
    assert sum(len(b) for b in boxes) > 0
    assert all(torch.as_tensor(b).shape[-1] == 4 for b in boxes if len(b))
    gt = data.val_source()
    assert gt.task == task and sum(len(r.targets.boxes) for r in gt.records) > 0


def test_pose_dataset_trains_as_detect_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    yaml_path = _synth("pose", tmp_path / "pose")
    run = tmp_path / "run"
    code = main(["fit", *tiny_cli_args(yaml_path, run, "--data.batch_size", "2")])
    assert code == 0
    assert (run / "last.ckpt").is_file() and "final mAP50-95" in capsys.readouterr().out
    summary = (run / "summary.txt").read_text()
    # yolo26's other decode path and the fitness that chose best, beside the box figures
    assert " e2e/mAP50-95 " in summary and "best fitness " in summary


@pytest.mark.parametrize("model_task", ["segment", "obb"])
def test_a_model_task_other_than_the_datasets_is_a_one_paragraph_error(
    model_task: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    yaml_path = _synth("pose", tmp_path / "pose")
    run = str(tmp_path / "run")
    args = ["fit", "--data.root", str(yaml_path), "--data.workers", "0", "--model.task", model_task]
    code = main([*args, "--trainer.default_root_dir", run])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and repr(model_task) in err and "--model.task detect" in err
    assert not (tmp_path / "run" / "last.ckpt").exists()
