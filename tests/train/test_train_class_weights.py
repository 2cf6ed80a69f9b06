"""Opt-in class weighting of the classification loss (``--loss.cls_weights auto|FILE``; docs/TRAINING.md, "Class
weighting"): the weights scale exactly their class's part of the cls loss in every task, ``auto`` is the inverse
class frequency normalised to mean 1, a file is one weight per class line, and the default adds nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from lucid_train_testing import TINY_IMGSZ, make_shapes, tiny_data, tiny_module, tiny_trainer

from lucid_core.models import build_model
from lucid_core.tasks import build_objective
from lucid_train.recipe import (
    LossConfig,
    inverse_frequency_weights,
    read_class_weights,
    resolve_class_weights,
)

NUM_CLASSES = 3


def _batch_and_output(tmp_path: Path, task: str, family: str) -> tuple[Any, dict[str, Any]]:
    """A train-mode model of ``task`` and one collated batch of that task's synthetic shapes."""
    from lucid_data.synth import synthesize
    from lucid_train.datamodule import DetectionDataModule

    yaml_path = synthesize(task, tmp_path / task, n_train=4, n_val=4, imgsz=TINY_IMGSZ, seed=1)
    data = DetectionDataModule(root=str(yaml_path), imgsz=TINY_IMGSZ, batch_size=4, workers=0, task=task)
    data.setup("fit")
    batch = next(iter(data.val_dataloader()))
    options = {k: v for k, v in data.task_options.items() if k == "kpt_shape"}
    if "kpt_shape" in options:
        options["kpt_shape"] = tuple(options["kpt_shape"])
    torch.manual_seed(0)
    model = build_model(family=family, task=task, scale="n", num_classes=NUM_CLASSES, **options).train()
    return model, batch


def _cls_items(model: Any, batch: dict[str, Any], weights: list[float] | None) -> tuple[float, list[float]]:
    gains: dict[str, Any] = {} if weights is None else {"cls_weights": weights}
    objective = build_objective(model, gains=gains, epochs=10)
    with torch.no_grad():
        torch.manual_seed(0)
        _, items = objective(model(batch["images"].float() / 255.0), batch)
    names = list(objective.loss_names)
    at = names.index("cls_loss")
    return float(items[at]), [float(v) for i, v in enumerate(items) if i != at]


@pytest.mark.parametrize(
    ("task", "family"),
    [
        ("detect", "yolo26"),
        ("detect", "yolov8"),
        ("segment", "yolo26"),
        ("pose", "yolo11"),
        ("obb", "yolo26"),
    ],
)
def test_a_weighted_class_scales_its_part_of_the_cls_loss(tmp_path: Path, task: str, family: str) -> None:
    model, batch = _batch_and_output(tmp_path, task, family)
    plain, others = _cls_items(model, batch, None)
    ones, ones_others = _cls_items(model, batch, [1.0] * NUM_CLASSES)
    assert ones == pytest.approx(plain, rel=1e-6) and ones_others == others
    parts = [
        _cls_items(model, batch, [float(c == k) for c in range(NUM_CLASSES)])[0] for k in range(NUM_CLASSES)
    ]
    assert sum(parts) == pytest.approx(plain, rel=1e-5)
    assert all(p > 0 for p in parts)
    weighted, weighted_others = _cls_items(model, batch, [1.0, 4.0, 1.0])
    # class 1's part is multiplied by 4, the other classes' parts and the other loss items stay
    assert weighted == pytest.approx(plain + 3.0 * parts[1], rel=1e-5)
    assert weighted_others == others
    doubled, _ = _cls_items(model, batch, [2.0] * NUM_CLASSES)
    assert doubled == pytest.approx(2.0 * plain, rel=1e-6)


def test_auto_is_the_inverse_class_frequency_normalised_to_mean_one() -> None:
    weights = inverse_frequency_weights([10, 40, 0, 50])
    present = np.array([1 / 10, 1 / 40, 1 / 50])
    expected = present / present.mean()
    assert weights[0] == pytest.approx(expected[0]) and weights[1] == pytest.approx(expected[1])
    assert weights[3] == pytest.approx(expected[2]) and weights[2] == 1.0  # absent from the training labels
    assert np.mean([weights[0], weights[1], weights[3]]) == pytest.approx(1.0)
    assert inverse_frequency_weights([5, 5, 5]) == pytest.approx([1.0, 1.0, 1.0], abs=1e-12)


def test_a_weights_file_is_one_weight_per_class_line_and_bad_input_is_named(tmp_path: Path) -> None:
    good = tmp_path / "weights.txt"
    good.write_text("# person, car, bike\n1.0\n\n2.5  # rare\n0.5\n")
    assert read_class_weights(good, 3) == [1.0, 2.5, 0.5]
    config = resolve_class_weights(LossConfig(cls_weights=str(good)), num_classes=3)
    assert config.gains()["cls_weights"] == [1.0, 2.5, 0.5]
    with pytest.raises(ValueError, match=r"has 3 weights for the dataset's 4 classes"):
        read_class_weights(good, 4)
    bad = tmp_path / "bad.txt"
    bad.write_text("1.0\nlots\n1.0\n")
    with pytest.raises(ValueError, match=r"bad\.txt:2: 'lots' is not a number"):
        read_class_weights(bad, 3)
    negative = tmp_path / "negative.txt"
    negative.write_text("1\n-2\n1\n")
    with pytest.raises(ValueError, match=r"negative\.txt:2: weight '-2' must be finite and >= 0"):
        read_class_weights(negative, 3)
    with pytest.raises(ValueError, match="is not a file"):
        resolve_class_weights(LossConfig(cls_weights=str(tmp_path / "missing.txt")), num_classes=3)


def test_default_adds_no_weights_to_the_gains() -> None:
    assert "cls_weights" not in LossConfig().gains()
    assert "cls_weights" not in LossConfig(cls_weights="auto").gains()  # resolved at the fit's set-up
    assert resolve_class_weights(LossConfig(), num_classes=3) == LossConfig()


def test_fit_with_auto_weights_trains_with_the_training_labels_inverse_frequency(tmp_path: Path) -> None:
    from lucid_data.stats import label_statistics

    torch.set_num_threads(1)
    data = tiny_data(make_shapes(tmp_path / "shapes", n_train=4, n_val=2), batch_size=4)
    module = tiny_module(data, loss={"cls_weights": "auto"})
    tiny_trainer(tmp_path / "run", max_epochs=1, limit_train_batches=1, limit_val_batches=1).fit(
        module, datamodule=data
    )
    counts = label_statistics(data.source(data.train_split)).class_counts
    expected = inverse_frequency_weights(counts)
    assert module.loss_config.cls_weights == expected
    branches = [module.criterion.one2many, module.criterion.one2one]  # yolo26: both branches weighted
    for branch in branches:
        assert branch.cls_weights is not None
        assert branch.cls_weights.tolist() == pytest.approx(expected)
