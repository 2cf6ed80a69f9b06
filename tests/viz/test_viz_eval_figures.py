"""Validation figures: every file write_eval_figures writes opens and shows drawn content (pixel smoke check)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from matplotlib.image import imread

from lucid_viz import class_color_uint8
from lucid_viz.eval_figures import (
    plot_confusion_matrix,
    plot_labels,
    write_eval_figures,
)
from lucid_viz.figures import render_rgb

NAMES = ["circle", "square", "triangle"]


def _artifacts(iou_types: tuple[str, ...] = ("bbox",), classes: int = 3) -> SimpleNamespace:
    rng = np.random.default_rng(0)
    names = NAMES if classes == 3 else [f"c{i}" for i in range(classes)]
    counts = rng.integers(0, 20, size=(classes + 1, classes + 1))
    counts[-1, -1] = 0

    def normalized() -> np.ndarray:
        totals = counts.sum(1, keepdims=True)
        out: np.ndarray = np.divide(counts, totals, out=np.zeros(counts.shape), where=totals > 0)
        return out

    grid = np.linspace(0, 1, 101)
    curve = np.clip(1 - grid[None, :] ** 2 * rng.uniform(0.5, 1.0, (classes, 1)), 0, 1)
    per_type = {
        t: {
            "confusion": SimpleNamespace(counts=counts, normalized=normalized, conf=0.25, iou=0.45),
            "pr": SimpleNamespace(recall=grid, precision=curve, ap50=curve.mean(1)),
            "confidence": SimpleNamespace(
                confidence=grid,
                f1=curve * 0.8,
                precision=curve,
                recall=curve[:, ::-1],
                has_gt=np.ones(classes, bool),
                best_conf=0.4,
            ),
        }
        for t in iou_types
    }
    n = 200
    labels = SimpleNamespace(
        names=tuple(names),
        classes=rng.integers(0, classes, n),
        boxes=np.concatenate([rng.uniform(0.1, 0.9, (n, 2)), rng.uniform(0.05, 0.3, (n, 2))], axis=1),
        instances_per_image=np.array([n // 4] * 4),
    )
    return SimpleNamespace(
        names=tuple(names),
        iou_types=iou_types,
        confusion={t: v["confusion"] for t, v in per_type.items()},
        pr={t: v["pr"] for t, v in per_type.items()},
        confidence={t: v["confidence"] for t, v in per_type.items()},
        labels=labels,
    )


def _drawn_fraction(path: Path) -> float:
    """Share of pixels that are neither white nor transparent."""
    pixels = imread(path)
    rgb = pixels[..., :3]
    return float((rgb < 0.95).any(axis=-1).mean())


def test_every_figure_is_written_and_has_content(tmp_path: Path) -> None:
    written = write_eval_figures(tmp_path, _artifacts(("segm", "bbox")))
    expected = {
        "confusion_matrix", "confusion_matrix_normalized", "PR_curve", "F1_curve", "P_curve", "R_curve", "labels",
    }  # fmt: skip
    expected |= {f"bbox_{stem}" for stem in expected - {"labels"}}
    assert set(written) == expected
    for stem, path in written.items():
        assert path == tmp_path / f"{stem}.png" and path.stat().st_size > 1000
        height, width = imread(path).shape[:2]
        assert height > 200 and width > 200
        assert _drawn_fraction(path) > 0.01, f"{stem}.png is (nearly) blank"


def test_labels_histogram_uses_the_class_colours(tmp_path: Path) -> None:
    path = write_eval_figures(tmp_path, _artifacts())["labels"]
    pixels = np.round(imread(path)[..., :3] * 255)
    for label in range(3):
        assert (np.abs(pixels - np.asarray(class_color_uint8(label))) <= 2).all(axis=-1).any()


@pytest.mark.parametrize("normalized", [False, True])
def test_confusion_matrix_many_classes_renders(normalized: bool) -> None:
    art = _artifacts(classes=40)
    matrix = art.confusion["bbox"].normalized() if normalized else art.confusion["bbox"].counts
    image = render_rgb(plot_confusion_matrix(matrix, art.names, normalized=normalized))
    assert image.std() > 5


def test_labels_figure_of_an_empty_dataset_still_renders() -> None:
    empty = SimpleNamespace(
        names=("a",),
        classes=np.zeros(0, np.int64),
        boxes=np.zeros((0, 4)),
        instances_per_image=np.zeros(3, int),
    )
    assert render_rgb(plot_labels(empty)).std() > 1
