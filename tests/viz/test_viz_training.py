"""write_fit_plots: the curves.png and val_predictions.png that lucid-train writes at the end of fit."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.image import imread

from lucid_core.results import Detections
from lucid_data import Targets
from lucid_viz import class_color_uint8
from lucid_viz.training import CURVES_FILE, VAL_PREDICTIONS_FILE, write_fit_plots


def has_colour(path: Path, label: int, tol: float = 30.0) -> bool:
    pixels = np.round(imread(path)[..., :3] * 255)
    return bool((np.abs(pixels - np.asarray(class_color_uint8(label))) <= tol).all(axis=-1).any())


def batch(task: str) -> tuple[torch.Tensor, list[Detections], list[Targets]]:
    images = torch.full((2, 3, 96, 128), 114, dtype=torch.uint8)
    boxes = torch.tensor([[10.0, 10.0, 70.0, 80.0]])
    rboxes = torch.tensor([[60.0, 48.0, 60.0, 24.0, 0.6]])
    keypoints = torch.tensor([[[20.0, 20.0, 0.9], [60.0, 70.0, 0.9]] + [[0.0, 0.0, 0.0]] * 15])
    masks = torch.zeros(1, 96, 128, dtype=torch.bool)
    masks[0, 10:80, 10:70] = True
    extra = {
        "detect": {},
        "segment": {"masks": masks},
        "pose": {"keypoints": keypoints},
        "obb": {"rboxes": rboxes},
    }[task]
    prediction = Detections(boxes=boxes, scores=torch.tensor([0.9]), labels=torch.tensor([4]), **extra)
    target_extra = {
        "detect": {},
        "segment": {"polygons": [np.array([[12.0, 12.0], [68.0, 12.0], [40.0, 78.0]])]},
        "pose": {"keypoints": keypoints.numpy() * np.array([1.0, 1.0, 2.0])},
        "obb": {"rboxes": rboxes.numpy() + np.array([5.0, 0.0, 0.0, 0.0, 0.0])},
    }[task]
    target = Targets(boxes=boxes.numpy() + 4.0, labels=np.array([6]), **target_extra)
    return images, [prediction, Detections.empty()], [target, Targets.empty()]


@pytest.mark.parametrize("task", ["detect", "segment", "pose", "obb"])
def test_val_predictions_grid_is_written_for_every_task(tmp_path: Path, task: str) -> None:
    images, predictions, targets = batch(task)
    written = write_fit_plots(tmp_path, images, predictions, targets, task, {4: "four", 6: "six"})
    assert written == {"val_predictions": tmp_path / VAL_PREDICTIONS_FILE}
    assert has_colour(written["val_predictions"], 4), "prediction colour in the grid"
    assert has_colour(written["val_predictions"], 6), "ground-truth colour in the grid"
    assert not (tmp_path / CURVES_FILE).exists(), "no metrics.csv, no curves"


def test_curves_are_written_when_the_run_has_metrics(tmp_path: Path) -> None:
    with (tmp_path / "metrics.csv").open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["epoch", "train/box_loss", "val/box_loss", "metrics/mAP50", "lr/pg0"])
        writer.writerows([[1, 2.0, 2.5, 0.1, 0.01], [2, 1.5, 2.0, 0.2, 0.009]])
    images, predictions, _ = batch("detect")
    written = write_fit_plots(tmp_path, list(images), predictions, None, "detect", None, max_images=1)
    assert set(written) == {"curves", "val_predictions"}
    curves = imread(written["curves"])
    assert curves.shape[0] > 200 and curves.shape[1] > 400
    assert has_colour(written["val_predictions"], 4) and not has_colour(written["val_predictions"], 6)


def test_too_few_predictions_is_a_clear_error(tmp_path: Path) -> None:
    images, predictions, targets = batch("detect")
    with pytest.raises(ValueError, match="1 predictions for 2 images"):
        write_fit_plots(tmp_path, images, predictions[:1], targets, "detect", None)
