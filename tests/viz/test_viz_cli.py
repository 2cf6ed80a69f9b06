"""The lucid-viz command line, in its own process (it selects Agg): curves of a run, predictions of a checkpoint."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread, imsave


def lucid_viz(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("MPLBACKEND", None)
    return subprocess.run(
        [sys.executable, "-m", "lucid_viz.cli", *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_console_script_points_at_main() -> None:
    (script,) = entry_points(group="console_scripts", name="lucid-viz")
    assert script.value == "lucid_viz.cli:main"


def test_curves_command_writes_the_png(tmp_path: Path) -> None:
    run_dir = tmp_path / "run3"
    run_dir.mkdir()
    with (run_dir / "metrics.csv").open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["epoch", "train/box_loss", "val/box_loss", "metrics/mAP50-95", "lr/pg0"])
        writer.writerows([[e, 1 / e, 1.2 / e, 0.1 * e, 0.01] for e in range(1, 5)])
    out = tmp_path / "plots" / "curves.png"
    done = lucid_viz("curves", str(run_dir), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out)
    pixels = imread(out)
    assert pixels.ndim == 3 and pixels[..., :3].std() > 0.05
    missing = lucid_viz("curves", str(tmp_path / "nope"), "-o", str(out))
    assert missing.returncode == 2 and "metrics.csv" in missing.stderr


def tiny_checkpoint(folder: Path, task: str) -> Path:
    """A randomly initialised YOLOv8n checkpoint with two classes (lucid_core.checkpoint format)."""
    build_model = pytest.importorskip("lucid_core.models").build_model
    save_model = pytest.importorskip("lucid_core.checkpoint").save_model
    pytest.importorskip("lucid_core.inference")
    import torch

    torch.manual_seed(0)
    weights = folder / f"tiny-{task}"
    save_model(
        build_model(family="yolov8", task=task, scale="n", num_classes=2), weights, names=["cat", "dog"]
    )
    return weights


def test_show_predictions_reads_names_and_task_from_the_checkpoint(tmp_path: Path) -> None:
    from lucid_viz import show_predictions

    weights = tiny_checkpoint(tmp_path, "obb")
    picture = np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    figure = show_predictions(weights, [picture], imgsz=64, conf=0.0, max_det=3)
    (cell,) = [axes for axes in figure.axes if axes.get_visible()]
    labels = [text.get_text().split()[0] for text in cell.texts]
    assert labels and set(labels) <= {"cat", "dog"}
    assert len(cell.patches) == len(labels) and all(p.get_xy().shape == (5, 2) for p in cell.patches), (
        "obb from the checkpoint's task: closed 4-corner polygons"
    )


@pytest.mark.slow
def test_predict_command_draws_a_checkpoints_predictions(tmp_path: Path) -> None:
    weights = tiny_checkpoint(tmp_path, "detect")
    source = tmp_path / "img.png"
    imsave(source, np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8))
    out = tmp_path / "pred.png"
    weights_file = weights.with_name(weights.name + ".json")
    assert weights_file.is_file()
    done = lucid_viz("predict", "--weights", str(weights_file), "--source", str(source), "-o", str(out),
                     "--imgsz", "64", "--conf", "0.0")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert imread(out).shape[0] > 100
