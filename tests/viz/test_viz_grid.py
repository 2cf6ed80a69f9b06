"""Prediction grids: one cell per image, ground truth under predictions, show_predictions over a predictor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.image import imsave

from lucid_core.results import Detections
from lucid_data import Targets
from lucid_viz import RenderOptions, class_color_uint8, draw_grid, render_rgb, show_predictions
from lucid_viz.grid import expand_sources, infer_task


def image(value: int = 30) -> np.ndarray:
    return np.full((120, 160, 3), value, dtype=np.uint8)


def coloured_fraction(pixels: np.ndarray, label: int, tol: float = 25.0) -> float:
    diff = np.abs(pixels.astype(np.float64) - np.asarray(class_color_uint8(label), dtype=np.float64))
    return float((diff <= tol).all(axis=-1).mean())


def test_grid_has_one_visible_cell_per_image_with_the_overlays() -> None:
    predictions = [
        Detections(boxes=torch.tensor([[10.0, 10.0, 100.0, 100.0]]), scores=torch.tensor([0.9]),
                   labels=torch.tensor([3])),
        None,
        Detections.empty(),
    ]  # fmt: skip
    targets = [None, Targets(boxes=np.array([[20.0, 20.0, 140.0, 110.0]]), labels=np.array([8])), None]
    figure = draw_grid(
        [image(), image(), image()], predictions, "detect", targets, ncols=2, titles=["a", "b", "c"]
    )
    visible = [axes for axes in figure.axes if axes.get_visible()]
    assert len(visible) == 3 and len(figure.axes) == 4
    assert [axes.get_title() for axes in visible] == ["a", "b", "c"]
    assert len(visible[0].patches) == 1 and visible[0].patches[0].get_linestyle() == "solid"
    assert len(visible[1].patches) == 1 and visible[1].patches[0].get_linestyle() not in ("solid", "-")
    assert len(visible[2].patches) == 0
    pixels = render_rgb(figure)
    assert coloured_fraction(pixels, 3) > 0 and coloured_fraction(pixels, 8) > 0


def test_grid_rejects_mismatched_lengths() -> None:
    with pytest.raises(ValueError, match="1 predictions for 2 images"):
        draw_grid([image(), image()], [None], "detect")
    with pytest.raises(ValueError, match="no images"):
        draw_grid([], None, "detect")


@pytest.mark.parametrize(
    ("fields", "task"),
    [
        ({}, "detect"),
        ({"masks": torch.zeros(0, 8, 8, dtype=torch.bool)}, "segment"),
        ({"keypoints": torch.zeros(0, 17, 3)}, "pose"),
        ({"rboxes": torch.zeros(0, 5)}, "obb"),
    ],
)
def test_task_is_inferred_from_the_result_fields(fields: dict, task: str) -> None:
    empty = Detections.empty()
    assert infer_task(Detections(empty.boxes, empty.scores, empty.labels, **fields)) == task


def test_show_predictions_runs_the_predictor_and_draws_over_annotations(tmp_path: Path) -> None:
    folder = tmp_path / "images"
    folder.mkdir()
    for name in ("b.png", "a.png"):
        imsave(folder / name, image(60))
    (folder / "notes.txt").write_text("not an image")
    calls: list[tuple] = []

    def predictor(weights, sources, **kwargs):
        calls.append((weights, [Path(s).name for s in sources], kwargs))
        return [
            Detections(
                boxes=torch.tensor([[10.0, 10.0, 80.0, 70.0]]),
                scores=torch.tensor([0.8]),
                labels=torch.tensor([1]),
                rboxes=torch.tensor([[45.0, 40.0, 60.0, 30.0, 0.5]]),
            )
            for _ in sources
        ]

    annotations = [
        {"boxes": [[5.0, 5.0, 60.0, 60.0]], "labels": [2], "rboxes": [[30.0, 30.0, 40.0, 20.0, 0.2]]},
        None,
    ]
    figure = show_predictions("model.ckpt", folder, annotations, predictor=predictor, imgsz=320,
                              options=RenderOptions(names=["x", "plane", "ship"]))  # fmt: skip
    assert calls == [("model.ckpt", ["a.png", "b.png"], {"imgsz": 320})]
    cells = [axes for axes in figure.axes if axes.get_visible()]
    assert [axes.get_title() for axes in cells] == ["a.png", "b.png"]
    assert [text.get_text() for text in cells[0].texts] == ["plane 0.80"]
    assert len(cells[0].patches) == 2 and len(cells[1].patches) == 1, "obb inferred: polygons, no hull boxes"
    with pytest.raises(ValueError, match="annotations"):
        show_predictions("w", folder, [None], predictor=predictor)


def test_expand_sources_reports_missing_paths(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such image"):
        expand_sources(tmp_path / "absent.jpg")
    with pytest.raises(FileNotFoundError, match="no image files"):
        expand_sources(tmp_path)
