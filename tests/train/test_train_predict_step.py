"""Prediction without ground truth (issue 14): ``predict_step`` decodes any image batch; the batch transfer hook lives
on the DataModule (no Lightning override warning); ``lucid-train predict`` is batch inference."""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.utilities.model_helpers import is_overridden
from lucid_train_testing import TINY_IMGSZ, make_shapes, tiny_data, tiny_module
from torch.utils.data import DataLoader

from lucid_core.results import Detections
from lucid_train.cli import main


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> object:
    return tiny_data(make_shapes(tmp_path_factory.mktemp("predict-shapes"), n_train=2, n_val=2))


def _images(count: int) -> torch.Tensor:
    return torch.randint(
        0,
        256,
        (count, 3, TINY_IMGSZ, TINY_IMGSZ),
        dtype=torch.uint8,
        generator=torch.Generator().manual_seed(0),
    )


def test_predict_step_needs_no_ground_truth_or_trainer(data: object) -> None:
    module = tiny_module(data)
    detections = module.predict_step({"images": _images(3)}, 0)
    assert len(detections) == 3 and all(isinstance(d, Detections) for d in detections)
    assert all(d.boxes.device.type == "cpu" for d in detections)


def test_trainer_predict_on_plain_image_batches(data: object) -> None:
    module = tiny_module(data, family="yolov8")
    batches = [{"images": _images(2)} for _ in range(2)]
    loader = DataLoader(batches, batch_size=None)
    trainer = pl.Trainer(
        accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False
    )
    out = trainer.predict(module, dataloaders=loader)
    assert out is not None and [len(batch) for batch in out] == [2, 2]


def test_transfer_hook_is_on_the_datamodule_only(data: object) -> None:
    """Lightning warns on every fit when the LightningModule overrides the hook and a DataModule is passed."""
    module = tiny_module(data)
    assert not is_overridden("transfer_batch_to_device", module)
    assert is_overridden("transfer_batch_to_device", data)
    batch = {"images": _images(1), "meta": [{"image_id": "a"}]}
    moved = data.transfer_batch_to_device(batch, torch.device("cpu"), 0)  # type: ignore[attr-defined]
    assert moved["meta"] is batch["meta"] and torch.equal(moved["images"], batch["images"])


def test_lucid_train_predict_is_batch_inference(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:  # no --weights/--source/--output: a usage error
        main(["predict", "--data.root", "x"])
    assert exit_info.value.code == 2
    assert "--weights" in capsys.readouterr().err


def test_lit_and_data_module_public_names(data: object) -> None:
    import lucid_train

    assert lucid_train.YOLOLitModule is lucid_train.DetectionLitModule
    assert lucid_train.YOLODataModule is lucid_train.DetectionDataModule
    assert isinstance(data, lucid_train.YOLODataModule)
    assert Path(str(data.root)).is_file()  # type: ignore[attr-defined]
