"""The plots lucid-train writes at the end of ``fit``: ``curves.png`` and a ``val_predictions.png`` grid.

lucid-train calls :func:`write_fit_plots` behind a guarded import (lucid-viz is optional for training: the
``lucid-train[viz]`` extra), so matplotlib is imported only when these plots are made.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lucid_viz.curves import METRICS_FILE, curve_panels, load_metrics, plot_curves
from lucid_viz.draw import RenderOptions
from lucid_viz.figures import save_figure
from lucid_viz.grid import draw_grid
from lucid_viz.inputs import to_numpy

CURVES_FILE = "curves.png"
VAL_PREDICTIONS_FILE = "val_predictions.png"


def _split_images(val_images: Any) -> list[Any]:
    """A list of per-image arrays from a list, or from a (B, 3, H, W) / (B, H, W, 3) batch array or tensor."""
    if isinstance(val_images, Sequence) and not hasattr(val_images, "shape"):
        return list(val_images)
    batch = to_numpy(val_images)
    if batch.ndim != 4:
        raise ValueError(
            f"val_images: expected a list of images or a 4-d batch, got shape {tuple(batch.shape)}"
        )
    return list(batch)


def write_fit_plots(
    run_dir: str | os.PathLike[str],
    val_images: Any,
    predictions: Sequence[Any],
    targets: Sequence[Any] | None,
    task: str,
    names: Mapping[int, str] | Sequence[str] | None,
    *,
    max_images: int = 16,
    options: RenderOptions | None = None,
) -> dict[str, Path]:
    """Write ``<run_dir>/curves.png`` (when ``metrics.csv`` has something to plot) and
    ``<run_dir>/val_predictions.png`` (the first ``max_images`` validation images, predictions over dashed
    ground truth; all in the same pixel frame, e.g. network input). Files are written atomically.

    Returns ``{"curves": path, "val_predictions": path}`` for the files written.
    """
    directory = Path(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    metrics_path = directory / METRICS_FILE
    if metrics_path.is_file() and curve_panels(load_metrics(metrics_path)):
        written["curves"] = save_figure(plot_curves(directory), directory / CURVES_FILE)
    images = _split_images(val_images)[:max_images]
    if images:
        count = len(images)
        if len(predictions) < count:
            raise ValueError(f"write_fit_plots: {len(predictions)} predictions for {count} images")
        if targets is not None and len(targets) < count:
            raise ValueError(f"write_fit_plots: {len(targets)} targets for {count} images")
        render = options if options is not None else RenderOptions(names=names)
        figure = draw_grid(
            images,
            list(predictions[:count]),
            task,
            None if targets is None else list(targets[:count]),
            render,
        )
        written["val_predictions"] = save_figure(figure, directory / VAL_PREDICTIONS_FILE)
    return written
