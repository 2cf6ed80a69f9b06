"""``lucid_train.loggers.log_figures``: every logger that takes images gets each figure, by what it offers."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from lucid_train.loggers import log_figures

cv2 = pytest.importorskip("cv2")


def test_figures_go_to_tensorboard_wandb_and_mlflow_style_loggers_only(tmp_path: Path) -> None:
    figure = tmp_path / "confusion_matrix.png"
    pixels = np.zeros((20, 30, 3), dtype=np.uint8)
    pixels[..., 0] = 255  # red, in RGB order
    assert cv2.imwrite(str(figure), pixels[..., ::-1])
    calls: dict[str, list[Any]] = {"tb": [], "wandb": [], "mlflow": []}
    tensorboard = SimpleNamespace(
        experiment=SimpleNamespace(add_image=lambda *a, **k: calls["tb"].append((a, k)))
    )
    wandb = SimpleNamespace(experiment=object(), log_image=lambda **k: calls["wandb"].append(k))
    mlflow = SimpleNamespace(
        run_id="run-1", experiment=SimpleNamespace(log_artifact=lambda *a: calls["mlflow"].append(a))
    )
    csv = SimpleNamespace(experiment=SimpleNamespace(log_metrics=lambda *a: None))
    logged = log_figures([tensorboard, wandb, mlflow, csv], [figure], 3)  # type: ignore[list-item]
    assert logged == 3
    ((args, kwargs),) = calls["tb"]
    assert args[0] == "plots/confusion_matrix" and args[2] == 3 and kwargs == {"dataformats": "HWC"}
    assert args[1].shape == (20, 30, 3) and (args[1][..., 0] == 255).all()  # RGB
    assert calls["wandb"] == [{"key": "plots/confusion_matrix", "images": [str(figure)], "step": 3}]
    assert calls["mlflow"] == [("run-1", str(figure), "plots")]
    assert log_figures([tensorboard], [], 0) == 0
