"""Grids of images with predictions over ground truth, and ``show_predictions`` for a checkpoint.

Each cell shows one image, its ground truth (dashed, under) and its predictions (solid, over), drawn by
:mod:`lucid_viz.draw`; colours follow the class index in every cell.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from lucid_core.checkpoint import load
from lucid_core.inference import predict
from lucid_core.tasks import TASKS
from lucid_viz.draw import DEFAULT_OPTIONS, RenderOptions, draw_ground_truth, overlay_predictions, show_image
from lucid_viz.figures import new_figure
from lucid_viz.inputs import as_rgb_image, check_task, get_field, load_image_rgb

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")


def draw_grid(
    images: Sequence[Any],
    predictions: Sequence[Any] | None,
    task: str,
    targets: Sequence[Any] | None = None,
    options: RenderOptions = DEFAULT_OPTIONS,
    *,
    ncols: int | None = None,
    titles: Sequence[str] | None = None,
    cell_inches: float = 4.0,
) -> Figure:
    """A Figure with one cell per image: ``targets[i]`` dashed under ``predictions[i]`` (either may be None)."""
    check_task(task)
    count = len(images)
    if count == 0:
        raise ValueError("draw_grid: no images given")
    for name, items in (("predictions", predictions), ("targets", targets), ("titles", titles)):
        if items is not None and len(items) != count:
            raise ValueError(f"draw_grid: {len(items)} {name} for {count} images")
    rgb_images = [as_rgb_image(image, f"images[{i}]") for i, image in enumerate(images)]
    ncols = max(1, min(ncols or math.ceil(math.sqrt(count)), count))
    nrows = math.ceil(count / ncols)
    aspect = max(image.shape[0] / image.shape[1] for image in rgb_images)
    figure = new_figure(cell_inches * ncols, cell_inches * aspect * nrows, dpi=options.dpi)
    figure.subplots_adjust(
        left=0.01, right=0.99, bottom=0.01, top=0.97 if titles else 0.99, wspace=0.02, hspace=0.06
    )
    axes_grid = figure.subplots(nrows, ncols, squeeze=False)
    for slot, axes in enumerate(axes_grid.flat):
        if slot >= count:
            axes.set_visible(False)
            continue
        show_image(axes, rgb_images[slot])
        if targets is not None and targets[slot] is not None:
            draw_ground_truth(axes, targets[slot], task, options)
        if predictions is not None and predictions[slot] is not None:
            overlay_predictions(axes, predictions[slot], task, options)
        if titles is not None:
            axes.set_title(titles[slot], fontsize=options.font_size)
    return figure


#: result fields that tell a task apart, the most telling first
TASK_FIELDS = ("rboxes", "keypoints", "masks")


def infer_task(result: Any) -> str:
    """The first registered task whose target fields are exactly the first of :data:`TASK_FIELDS` the result
    carries (rboxes → obb, keypoints → pose, masks → segment), or none of them (detect)."""
    present = next((name for name in TASK_FIELDS if get_field(result, name) is not None), None)
    wanted = (present,) if present is not None else ()
    return next((task.name for task in TASKS.values() if task.target_fields == wanted), "detect")


def expand_sources(source: str | os.PathLike[str] | Sequence[Any]) -> list[Any]:
    """A list of images from one path, a directory (its image files, sorted) or a sequence of paths/arrays."""
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
            if not files:
                raise FileNotFoundError(f"{path}: no image files ({', '.join(IMAGE_SUFFIXES)})")
            return list(files)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such image file or directory")
        return [path]
    return list(source)


def bgr_for_predict(image: Any) -> Any:
    """An RGB(A) H×W×C numpy image as the BGR array ``lucid_core.predict`` reads (OpenCV's order); anything else
    (paths, gray arrays, tensors, PIL images) as it is."""
    if isinstance(image, np.ndarray) and image.ndim == 3 and image.shape[-1] in (3, 4):
        return np.ascontiguousarray(image[..., 2::-1])
    return image


def show_predictions(
    weights: Any,
    images: str | os.PathLike[str] | Sequence[Any],
    annotations: Sequence[Any] | None = None,
    *,
    task: str | None = None,
    options: RenderOptions = DEFAULT_OPTIONS,
    ncols: int | None = None,
    predictor: Callable[..., Sequence[Any]] | None = None,
    **predict_kwargs: Any,
) -> Figure:
    """Predict with a checkpoint and draw a grid of the results, over ``annotations`` when given.

    ``weights`` is a checkpoint path (``lucid_core.checkpoint.load``; its class names and task are used unless
    ``options.names`` / ``task`` are given) or a model; the call is
    ``lucid_core.inference.predict(model, images, **predict_kwargs)`` (e.g. ``imgsz``, ``conf``; RGB arrays are
    handed over as BGR, its convention; each result's ``detections`` is drawn). ``predictor`` replaces
    ``predict`` (same call, images as given; the checkpoint is then handed to it as given). ``images`` is a path, a
    directory or a list of paths / RGB arrays; ``annotations`` holds one targets object per image, in
    original-image pixels (or None).
    """
    sources = expand_sources(images)
    if annotations is not None and len(annotations) != len(sources):
        raise ValueError(f"show_predictions: {len(annotations)} annotations for {len(sources)} images")
    model = weights
    inputs = list(sources)
    if predictor is None:
        predictor = predict
        inputs = [bgr_for_predict(s) for s in sources]
        if isinstance(weights, str | os.PathLike):
            checkpoint = load(weights)
            model = checkpoint.model
            if options.names is None and checkpoint.names:
                options = replace(options, names=list(checkpoint.names))
    results = [getattr(r, "detections", r) for r in predictor(model, inputs, **predict_kwargs)]
    if len(results) != len(sources):
        raise ValueError(
            f"show_predictions: predict returned {len(results)} results for {len(sources)} images"
        )
    if task is None:
        model_task = getattr(model, "task", None)
        task = model_task if model_task in TASKS else infer_task(results[0]) if results else "detect"
    shown = [load_image_rgb(s) if isinstance(s, str | os.PathLike) else s for s in sources]
    titles = [
        Path(s).name if isinstance(s, str | os.PathLike) else f"image {i}" for i, s in enumerate(sources)
    ]
    return draw_grid(shown, results, task, annotations, options, ncols=ncols, titles=titles)
