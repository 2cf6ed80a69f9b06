"""Overlays of predictions and ground truth on one image, for every task.

What is drawn follows the fields a result or target carries (``masks``, ``polygons``, ``keypoints``, ``rboxes``),
never the task name; the task only says which fields must be there (a task with ``rboxes`` among its target
fields needs them, so its boxes are never drawn as their axis-aligned hull).

Conventions:
- colour is a function of the class index only (:func:`lucid_viz.colors.class_color`);
- predictions are drawn solid (boxes, rotated rectangles, skeletons), instance masks as translucent fills, and
  labelled ``"<name> <score>"``; ground truth is drawn dashed and unfilled (dashed mask/polygon outlines, hollow
  keypoints) so the two stay tellable apart without a legend;
- rotated boxes (``rboxes``, (N, 5) ``cx, cy, w, h, θ``) are drawn as their rotated rectangle, never as the
  axis-aligned hull that ``Detections.boxes`` holds for OBB;
- keypoints are joined by ``RenderOptions.skeleton`` (COCO's 19 edges by default); a predicted keypoint is shown
  when its score is at least ``keypoint_threshold``, a ground-truth keypoint when its COCO visibility flag is > 0
  (1 = labelled but occluded, 2 = visible; shared/data/README.md, "Formats").
Coordinates are pixels of the image drawn (x right, y down, the image spans [0, W] × [0, H]).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Polygon, Rectangle

from lucid_viz.colors import class_color
from lucid_viz.figures import new_figure
from lucid_viz.geometry import rboxes_to_corners
from lucid_viz.inputs import (
    as_rgb_image,
    check_task,
    class_name,
    field_array,
    get_field,
    task_fields,
    to_numpy,
)

# COCO person keypoint skeleton: the 19 edges of the COCO keypoints category ("skeleton", 1-based keypoint ids,
# as stored in COCO keypoint annotation files, e.g. shared/data/coco-mmpose/test_coco.json), here 0-based.
COCO_SKELETON: tuple[tuple[int, int], ...] = tuple(
    (a - 1, b - 1)
    for a, b in (
        (16, 14), (14, 12), (17, 15), (15, 13), (12, 13), (6, 12), (7, 13), (6, 7), (6, 8), (7, 9),
        (8, 10), (9, 11), (2, 3), (1, 2), (1, 3), (2, 4), (3, 5), (4, 6), (5, 7),
    )
)  # fmt: skip

Z_IMAGE, Z_MASKS, Z_GROUND_TRUTH, Z_PREDICTIONS, Z_LABELS = 0.0, 1.0, 2.0, 3.0, 4.0


@dataclass(frozen=True)
class RenderOptions:
    """How overlays look. Lengths are in points (1/72 inch); at ``dpi`` 72 a point is one image pixel."""

    names: Mapping[int, str] | Sequence[str] | None = None  # class names; the index is shown when absent
    skeleton: Sequence[tuple[int, int]] | None = COCO_SKELETON  # 0-based keypoint pairs; None draws no edges
    line_width: float = 2.0
    mask_alpha: float = 0.45  # opacity of predicted instance masks
    score_threshold: float = 0.0  # predictions scoring below are not drawn
    keypoint_threshold: float = 0.5  # predicted keypoints scoring below are hidden (with their edges)
    keypoint_size: float = 5.0  # marker diameter
    show_labels: bool = True  # "<name> <score>" above each prediction
    label_ground_truth: bool = False  # class name next to each ground-truth object
    font_size: float = 8.0
    ground_truth_dashes: tuple[float, float] = (3.0, 2.0)  # on/off lengths, in line widths
    dpi: float = 100.0  # of the figure draw_predictions makes when given no axes

    def __post_init__(self) -> None:
        if not 0.0 <= self.mask_alpha <= 1.0:
            raise ValueError(f"RenderOptions.mask_alpha must be in [0, 1], got {self.mask_alpha}")
        if self.line_width <= 0 or self.dpi <= 0:
            raise ValueError(
                f"RenderOptions.line_width and dpi must be > 0, got {self.line_width} and {self.dpi}"
            )
        if self.skeleton is not None:
            for edge in self.skeleton:
                if len(edge) != 2 or min(edge) < 0:
                    raise ValueError(f"RenderOptions.skeleton: edge {edge!r} is not a pair of indices >= 0")

    @property
    def ground_truth_linestyle(self) -> tuple[float, tuple[float, float]]:
        return (0.0, self.ground_truth_dashes)


DEFAULT_OPTIONS = RenderOptions()


def image_axes(image: Any, dpi: float = 100.0) -> tuple[Figure, Axes, np.ndarray]:
    """A figure exactly the image's size in pixels at ``dpi``, one frameless axes filling it, the image shown."""
    rgb = as_rgb_image(image)
    height, width = rgb.shape[:2]
    figure = new_figure(width / dpi, height / dpi, dpi=dpi)
    axes = figure.add_axes((0.0, 0.0, 1.0, 1.0))
    show_image(axes, rgb)
    return figure, axes, rgb


def show_image(axes: Axes, image: Any) -> np.ndarray:
    """Show ``image`` on ``axes`` in pixel coordinates (x in [0, W], y in [0, H] downwards), axes hidden."""
    rgb = as_rgb_image(image)
    height, width = rgb.shape[:2]
    axes.imshow(rgb, extent=(0, width, height, 0), interpolation="nearest", zorder=Z_IMAGE)
    _frame(axes, width, height)
    return rgb


def _frame(axes: Axes, width: float, height: float) -> None:
    axes.set_xlim(0, width)
    axes.set_ylim(height, 0)
    axes.set_axis_off()


def _image_extent(axes: Axes) -> tuple[float, float]:
    """(W, H) of the image shown on ``axes`` (from the first image, else from the axis limits)."""
    if axes.images:
        left, right, bottom, top = axes.images[0].get_extent()
        return abs(right - left), abs(bottom - top)
    x0, x1 = axes.get_xlim()
    y0, y1 = axes.get_ylim()
    return abs(x1 - x0), abs(y1 - y0)


def draw_predictions(
    image: Any,
    result: Any,
    task: str,
    options: RenderOptions = RenderOptions(),
    *,
    ax: Axes | None = None,
) -> Figure | Axes:
    """Draw one image's predictions (a ``lucid_core.results.Detections`` or a mapping with its fields).

    Without ``ax`` the image is drawn on a new figure of the image's own pixel size at ``options.dpi`` and that
    ``Figure`` is returned; with ``ax`` the image is shown there and the ``Axes`` is returned. ``result`` may be
    None (the image alone). ``image`` is a path, an (H, W, 3) RGB array or a (3, H, W) tensor.
    """
    check_task(task)
    if ax is None:
        figure, axes, _ = image_axes(image, options.dpi)
        overlay_predictions(axes, result, task, options)
        return figure
    show_image(ax, image)
    overlay_predictions(ax, result, task, options)
    return ax


def overlay_predictions(
    axes: Axes,
    result: Any,
    task: str,
    options: RenderOptions = RenderOptions(),
) -> Axes:
    """Draw ``result`` on ``axes`` that already show its image (the counterpart of draw_ground_truth)."""
    required = task_fields(task)
    if result is not None:
        _draw_result(axes, result, task, required, options)
    return axes


def _draw_result(
    axes: Axes, result: Any, task: str, required: tuple[str, ...], options: RenderOptions
) -> None:
    """Masks (when present), then rotated boxes when present (else boxes), then keypoints when present."""
    what = "result"
    scores = field_array(result, "scores", (), what)
    labels = field_array(result, "labels", (), what)
    if scores is None or labels is None:
        raise ValueError(f"{what}: needs 'scores' and 'labels' (a Detections or a mapping with them)")
    count = len(scores)
    if len(labels) != count:
        raise ValueError(f"{what}: {len(labels)} labels for {count} scores")
    keep = np.flatnonzero(scores >= options.score_threshold)
    order = keep[np.argsort(scores[keep], kind="stable")]  # lowest first, so the best is drawn on top
    class_ids = labels.astype(np.int64)
    masks = get_field(result, "masks")
    if masks is not None and count:
        _fill_masks(axes, _masks_array(masks, count, what), class_ids, order, options.mask_alpha)
    rboxes = field_array(result, "rboxes", (5,), what)
    if rboxes is None and "rboxes" in required:
        if count:
            raise ValueError(f"{what}: task {task!r} needs 'rboxes' (N, 5); the result has none")
        return
    if rboxes is not None:
        _check_count(rboxes, count, what, "rboxes")
        corners = rboxes_to_corners(rboxes) if count else np.zeros((0, 4, 2))
        for i in order:
            _polygon(axes, corners[i], class_ids[i], options, ground_truth=False)
            _label(axes, corners[i], class_ids[i], float(scores[i]), options)
        return
    boxes = field_array(result, "boxes", (4,), what)
    if boxes is None:
        raise ValueError(f"{what}: task {task!r} needs 'boxes' (N, 4) xyxy")
    _check_count(boxes, count, what, "boxes")
    for i in order:
        _rectangle(axes, boxes[i], class_ids[i], options, ground_truth=False)
        _label(axes, _box_corners(boxes[i]), class_ids[i], float(scores[i]), options)
    keypoints = field_array(result, "keypoints", (-1, -1), what)
    if keypoints is not None and count:
        _check_count(keypoints, count, what, "keypoints")
        for i in order:
            _skeleton(axes, keypoints[i], class_ids[i], options, ground_truth=False)


def draw_ground_truth(
    axes: Axes,
    targets: Any,
    task: str,
    options: RenderOptions = RenderOptions(),
) -> Axes:
    """Draw one image's ground truth on ``axes`` (already showing the image), dashed and unfilled.

    ``targets`` is a ``lucid_data.Targets`` or a mapping with its fields: ``boxes`` (N, 4) xyxy and ``labels``
    (N,), and those present of ``rboxes`` (N, 5; drawn instead of the boxes), ``polygons`` (list of (P, 2)
    arrays, or of lists of them) or else ``masks`` (N, H, W) as outlines, ``keypoints`` (N, K, 3) with COCO
    visibility. Returns ``axes``.
    """
    required = task_fields(task)
    what = "targets"
    labels = field_array(targets, "labels", (), what)
    if labels is None:
        raise ValueError(f"{what}: needs 'labels' (a lucid_data.Targets or a mapping with it)")
    class_ids = labels.astype(np.int64)
    count = len(class_ids)
    rboxes = field_array(targets, "rboxes", (5,), what)
    if rboxes is None and "rboxes" in required:
        if count:
            raise ValueError(f"{what}: task {task!r} needs 'rboxes' (N, 5); the targets have none")
        return axes
    if rboxes is not None:
        _check_count(rboxes, count, what, "rboxes")
        corners = rboxes_to_corners(rboxes) if count else np.zeros((0, 4, 2))
        for i in range(count):
            _polygon(axes, corners[i], class_ids[i], options, ground_truth=True)
            _ground_truth_label(axes, corners[i], class_ids[i], options)
        return axes
    boxes = field_array(targets, "boxes", (4,), what)
    if boxes is None:
        raise ValueError(f"{what}: task {task!r} needs 'boxes' (N, 4) xyxy")
    _check_count(boxes, count, what, "boxes")
    for i in range(count):
        _rectangle(axes, boxes[i], class_ids[i], options, ground_truth=True)
        _ground_truth_label(axes, _box_corners(boxes[i]), class_ids[i], options)
    polygons = get_field(targets, "polygons")
    masks = get_field(targets, "masks")
    if polygons is not None:
        if len(polygons) != count:
            raise ValueError(f"{what}.polygons: {len(polygons)} entries for {count} labels")
        for i, instance in enumerate(polygons):
            for part in _polygon_parts(instance, f"{what}.polygons[{i}]"):
                _polygon(axes, part, class_ids[i], options, ground_truth=True)
    elif masks is not None and count:
        mask_array = _masks_array(masks, count, what)
        for i in range(count):
            _mask_outline(axes, mask_array[i], class_ids[i], options)
    keypoints = field_array(targets, "keypoints", (-1, -1), what)
    if keypoints is not None and count:
        _check_count(keypoints, count, what, "keypoints")
        for i in range(count):
            _skeleton(axes, keypoints[i], class_ids[i], options, ground_truth=True)
    return axes


# --- primitives -------------------------------------------------------------------------------------------


def _check_count(array: np.ndarray, count: int, what: str, name: str) -> None:
    if len(array) != count:
        raise ValueError(f"{what}.{name}: {len(array)} rows for {count} labels")


def _box_corners(box: np.ndarray) -> np.ndarray:
    x1, y1, x2, y2 = box
    return np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]])


def _line_style(options: RenderOptions, ground_truth: bool) -> dict[str, Any]:
    if ground_truth:
        return {"linestyle": options.ground_truth_linestyle, "zorder": Z_GROUND_TRUTH}
    return {"linestyle": "solid", "zorder": Z_PREDICTIONS}


def _rectangle(
    axes: Axes, box: np.ndarray, label: int, options: RenderOptions, *, ground_truth: bool
) -> None:
    x1, y1, x2, y2 = (float(v) for v in box)
    axes.add_patch(
        Rectangle(
            (x1, y1),
            x2 - x1,
            y2 - y1,
            fill=False,
            edgecolor=class_color(label),
            linewidth=options.line_width,
            joinstyle="miter",
            **_line_style(options, ground_truth),
        )
    )


def _polygon(
    axes: Axes, points: np.ndarray, label: int, options: RenderOptions, *, ground_truth: bool
) -> None:
    axes.add_patch(
        Polygon(
            np.asarray(points, dtype=np.float64),
            closed=True,
            fill=False,
            edgecolor=class_color(label),
            linewidth=options.line_width,
            joinstyle="miter",
            **_line_style(options, ground_truth),
        )
    )


def _polygon_parts(instance: Any, what: str) -> list[np.ndarray]:
    """One instance's polygon(s): a (P, 2) array, a flat ``[x1, y1, ...]`` list, or a list of those."""
    if isinstance(instance, list | tuple):
        try:
            array = np.asarray([to_numpy(part) for part in instance], dtype=np.float64)
        except ValueError:  # ragged: several parts of different lengths
            array = None
        if array is None or array.ndim == 3 or (array.ndim == 2 and array.shape[1] != 2):
            return [part for piece in instance for part in _polygon_parts(piece, what)]
    else:
        array = to_numpy(instance).astype(np.float64)
    if array.ndim == 1 and array.size % 2 == 0:
        array = array.reshape(-1, 2)
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(f"{what}: expected a (P, 2) polygon, got shape {tuple(array.shape)}")
    return [array] if len(array) >= 2 else []


def _masks_array(masks: Any, count: int, what: str) -> np.ndarray:
    array = to_numpy(masks)
    if array.ndim != 3 or array.shape[0] != count:
        raise ValueError(f"{what}.masks: expected shape ({count}, H, W), got {tuple(array.shape)}")
    return array > 0.5 if array.dtype != np.bool_ else array


def _fill_masks(axes: Axes, masks: np.ndarray, labels: np.ndarray, order: np.ndarray, alpha: float) -> None:
    """All instance masks as one translucent RGBA layer stretched over the image (best score on top)."""
    if not len(order):
        return
    layer = np.zeros((*masks.shape[1:], 4), dtype=np.float32)
    for i in order:
        layer[masks[i]] = (*class_color(labels[i]), alpha)
    width, height = _image_extent(axes)
    axes.imshow(layer, extent=(0, width, height, 0), interpolation="nearest", zorder=Z_MASKS)
    _frame(axes, width, height)


def _mask_outline(axes: Axes, mask: np.ndarray, label: int, options: RenderOptions) -> None:
    if not mask.any():
        return
    width, height = _image_extent(axes)
    rows, cols = mask.shape
    xs = (np.arange(cols) + 0.5) * (width / cols)
    ys = (np.arange(rows) + 0.5) * (height / rows)
    axes.contour(
        xs,
        ys,
        mask.astype(np.float32),
        levels=[0.5],
        colors=[class_color(label)],
        linewidths=options.line_width,
        linestyles=[options.ground_truth_linestyle],
        zorder=Z_GROUND_TRUTH,
    )
    _frame(axes, width, height)


def _skeleton(
    axes: Axes, keypoints: np.ndarray, label: int, options: RenderOptions, *, ground_truth: bool
) -> None:
    """Keypoints (K, 2 or 3) and the skeleton edges between pairs that are both visible."""
    colour = class_color(label)
    if keypoints.shape[1] >= 3:
        flags = keypoints[:, 2]
        visible = flags > 0 if ground_truth else flags >= options.keypoint_threshold
    else:
        visible = np.ones(len(keypoints), dtype=bool)
    for a, b in options.skeleton or ():
        if a < len(keypoints) and b < len(keypoints) and visible[a] and visible[b]:
            axes.plot(
                keypoints[[a, b], 0],
                keypoints[[a, b], 1],
                color=colour,
                linewidth=options.line_width,
                solid_capstyle="butt",
                dash_capstyle="butt",
                **_line_style(options, ground_truth),
            )
    if visible.any():
        axes.scatter(
            keypoints[visible, 0],
            keypoints[visible, 1],
            s=options.keypoint_size**2,
            facecolors="none" if ground_truth else [colour],
            edgecolors=[colour],
            linewidths=max(options.line_width / 2.0, 0.5),
            zorder=(Z_GROUND_TRUTH if ground_truth else Z_PREDICTIONS) + 0.5,
        )


def _label_anchor(corners: np.ndarray, axes: Axes) -> tuple[float, float, str]:
    """Top-most corner (left-most on ties); text above it, or below when it would leave the image."""
    top = corners[np.lexsort((corners[:, 0], corners[:, 1]))[0]]
    return float(top[0]), float(top[1]), "bottom" if top[1] > 12.0 else "top"


def _label(axes: Axes, corners: np.ndarray, label: int, score: float, options: RenderOptions) -> None:
    if not options.show_labels:
        return
    x, y, vertical = _label_anchor(corners, axes)
    axes.text(
        x,
        y,
        f"{class_name(label, options.names)} {score:.2f}",
        fontsize=options.font_size,
        color="white",
        ha="left",
        va=vertical,
        clip_on=True,
        zorder=Z_LABELS,
        bbox={"facecolor": class_color(label), "edgecolor": "none", "pad": 1.0, "alpha": 0.85},
    )


def _ground_truth_label(axes: Axes, corners: np.ndarray, label: int, options: RenderOptions) -> None:
    if not options.label_ground_truth:
        return
    bottom = corners[np.lexsort((corners[:, 0], -corners[:, 1]))[0]]
    axes.text(
        float(bottom[0]),
        float(bottom[1]),
        class_name(label, options.names),
        fontsize=options.font_size,
        color=class_color(label),
        ha="left",
        va="top",
        clip_on=True,
        zorder=Z_LABELS,
    )
