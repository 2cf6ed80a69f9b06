"""In-training validation decode paths (issue 12): yolo26 scored on one-to-many + NMS by default with the one-to-one
top-k metrics beside it; ``--model.val_decode`` chooses which one is ``metrics/mAP50-95`` (and so drives ``best``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lucid_train_testing import make_shapes, tiny_data, tiny_module, tiny_trainer

from lucid_train.errors import TrainingSetupError
from lucid_train.scoring import validation_paths


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return tiny_data(make_shapes(tmp_path_factory.mktemp("vd") / "shapes", n_train=4, n_val=3), batch_size=2)


def _paths(module: Any) -> list[str]:
    return validation_paths(module.ema_model, module.val_decode)


def test_decode_paths_per_family_and_choice(data: Any) -> None:
    assert _paths(tiny_module(data)) == ["nms", "topk"]
    assert _paths(tiny_module(data, val_decode="topk")) == ["topk", "nms"]
    assert _paths(tiny_module(data, family="yolov8")) == ["nms"]


def test_bad_val_decode_is_a_one_paragraph_error(data: Any) -> None:
    with pytest.raises(TrainingSetupError, match=r"model\.val_decode.*'both'"):
        tiny_module(data, val_decode="both")
    with pytest.raises(TrainingSetupError, match=r"model\.val_decode: 'topk' needs an end-to-end model"):
        tiny_module(data, family="yolov8", val_decode="topk")


@pytest.mark.parametrize(("val_decode", "other"), [("nms", "metrics/e2e/"), ("topk", "metrics/nms/")])
def test_both_paths_are_logged_and_the_chosen_one_is_the_metric(
    data: Any, tmp_path: Path, val_decode: str, other: str
) -> None:
    module = tiny_module(data, val_decode=val_decode)
    tiny_trainer(tmp_path, limit_train_batches=1).fit(module, datamodule=data)
    keys = {"metrics/mAP50", "metrics/mAP50-95", f"{other}mAP50", f"{other}mAP50-95"}
    assert keys <= set(module.val_metrics)
    assert all(0.0 <= module.val_metrics[k] <= 1.0 for k in keys)
