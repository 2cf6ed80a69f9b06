"""Validation figures: confusion matrix, PR curves, F1/P/R–confidence curves and the ``labels`` overview.

Inputs are plain arrays (or duck-typed objects with the fields of lucid-train's ``ValidationArtifacts`` and
lucid-data's ``LabelStatistics``), so lucid-viz needs neither package. Every figure is a ``Figure`` on its own
Agg canvas (:mod:`lucid_viz.figures`).

Drawn for speed, as they are written after every ``lucid-eval --plots`` and fit (docs/EVALUATION.md, "Validation
artefacts", measures them): fixed margins instead of a layout engine (which lays every text out twice), many
classes' curves as one ``LineCollection``, nearest-neighbour images, and PNGs written with fast zlib compression.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

from lucid_viz.colors import class_color
from lucid_viz.figures import new_figure, save_figure

#: classes drawn (and named in a legend) one by one; above this, thin grey lines and the class mean
MAX_LEGEND_CLASSES = 20
#: class names written on the confusion-matrix axes up to this count
MAX_TICK_CLASSES = 30

#: the arrays file of ``lucid-data stats --output`` (lucid-data's ``LABELS_NPZ``)
LABELS_NPZ = "labels.npz"

CONFIDENCE_FILES = {"F1": "F1_curve.png", "P": "P_curve.png", "R": "R_curve.png"}

#: zlib level of the written figures: 1 (fastest) instead of PIL's 6 — flat-colour plots barely grow
PNG_COMPRESS_LEVEL = 1
#: inches per character of a small tick label (for the fixed margins)
_CHAR_INCHES = 0.075


def _figure(width: float, height: float, *, left: float, right: float, bottom: float, top: float) -> Figure:
    """A Figure with one layout: margins in inches (no layout engine: it measures every text twice)."""
    figure = new_figure(width, height)
    figure.subplots_adjust(
        left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height
    )
    return figure


def plot_confusion_matrix(
    matrix: np.ndarray, names: Sequence[str], *, normalized: bool = False, title: str | None = None
) -> Figure:
    """(C+1, C+1) matrix, rows true class, columns predicted class, last row / column ``background``."""
    values = np.asarray(matrix, dtype=np.float64)
    labels = [*map(str, names), "background"]
    named = len(labels) <= MAX_TICK_CLASSES
    size = min(max(4.0, 0.45 * len(labels) + 2.5), 16.0) if named else 9.0  # unnamed: cells, no labels
    margin = 0.6 + (_CHAR_INCHES * max(len(label) for label in labels) if named else 0.3)
    title = title or ("confusion matrix (row-normalised)" if normalized else "confusion matrix")
    top = 0.25 + 0.22 * (title.count("\n") + 1)
    figure = _figure(size + 1.2, size, left=margin, right=1.3, bottom=margin, top=top)
    axes = figure.subplots()
    shown = np.where(values > 0, values, np.nan)
    image = axes.imshow(
        shown, cmap="Blues", vmin=0.0, vmax=1.0 if normalized else None, interpolation="nearest"
    )
    box = axes.get_position()
    figure.colorbar(
        image, cax=figure.add_axes((box.x1 + 0.25 / (size + 1.2), box.y0, 0.2 / (size + 1.2), box.height))
    )
    if named:
        ticks = np.arange(len(labels))
        axes.set_xticks(ticks, labels, rotation=90, fontsize="small")
        axes.set_yticks(ticks, labels, fontsize="small")
        if len(labels) <= 12:
            for (i, j), v in np.ndenumerate(values):
                if v > 0:
                    text = f"{v:.2f}" if normalized else f"{int(v)}"
                    dark = v > 0.5 * np.nanmax(shown)
                    axes.text(j, i, text, ha="center", va="center", color="white" if dark else "black")
    axes.set_xlabel("predicted")
    axes.set_ylabel("true")
    axes.set_title(title)
    return figure


def _class_lines(
    axes: Any,
    x: np.ndarray,
    values: np.ndarray,
    names: Sequence[str],
    labels: Sequence[str],
    valid: np.ndarray,
) -> None:
    rows = np.flatnonzero(valid)
    if rows.size > MAX_LEGEND_CLASSES:  # one artist for all of them
        segments = np.stack([np.broadcast_to(x, values[rows].shape), values[rows]], axis=-1)
        axes.add_collection(LineCollection(list(segments), colors="grey", linewidths=0.5, alpha=0.5))
        return
    for c in rows:
        axes.plot(x, values[c], color=class_color(int(c)), linewidth=1.0, label=labels[int(c)])


def plot_pr_curves(
    recall: np.ndarray,
    precision: np.ndarray,
    ap50: np.ndarray,
    names: Sequence[str],
    *,
    title: str | None = None,
) -> Figure:
    """Precision (C, R) against ``recall`` (R,) per class (legend: AP50) and the mean over classes with ground
    truth (``ap50 >= 0``)."""
    precision = np.asarray(precision, dtype=np.float64)
    ap50 = np.asarray(ap50, dtype=np.float64)
    valid = ap50 >= 0
    figure = _figure(6.5, 5.0, left=0.7, right=0.2, bottom=0.6, top=0.4)
    axes = figure.subplots()
    labels = [f"{n} {a:.3f}" for n, a in zip(names, ap50)]
    _class_lines(axes, recall, precision, names, labels, valid)
    if valid.any():
        mean = precision[valid].mean(axis=0)
        axes.plot(
            recall, mean, color="blue", linewidth=2.5, label=f"all classes {ap50[valid].mean():.3f} mAP50"
        )
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1.02)
    axes.set_xlabel("recall")
    axes.set_ylabel("precision")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="small", loc="lower left")
    axes.set_title(title or "precision-recall (IoU 0.5)")
    return figure


def plot_confidence_curve(
    confidence: np.ndarray,
    values: np.ndarray,
    names: Sequence[str],
    *,
    ylabel: str,
    has_gt: np.ndarray | None = None,
    best_conf: float | None = None,
    title: str | None = None,
) -> Figure:
    """``values`` (C, N) against ``confidence`` (N,) per class and their mean; ``best_conf`` marked."""
    values = np.asarray(values, dtype=np.float64)
    valid = np.ones(values.shape[0], dtype=bool) if has_gt is None else np.asarray(has_gt, dtype=bool)
    figure = _figure(6.5, 5.0, left=0.7, right=0.2, bottom=0.6, top=0.4)
    axes = figure.subplots()
    _class_lines(axes, confidence, values, names, list(map(str, names)), valid)
    if valid.any():
        mean = values[valid].mean(axis=0)
        label = "all classes"
        if best_conf is not None:
            at = float(np.interp(best_conf, confidence, mean))
            label += f" {at:.2f} at {best_conf:.3f}"
        axes.plot(confidence, mean, color="blue", linewidth=2.5, label=label)
    if best_conf is not None:
        axes.axvline(best_conf, color="black", linestyle="--", linewidth=1.0)
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1.02)
    axes.set_xlabel("confidence")
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="small", loc="lower left")
    axes.set_title(title or f"{ylabel}-confidence")
    return figure


def plot_labels(stats: Any, *, title: str | None = None) -> Figure:
    """Class histogram, box-centre and box-size densities and instances per image of ``stats`` (``names``,
    ``classes`` (N,), ``boxes`` (N, 4) normalised cx, cy, w, h, ``instances_per_image`` (I,))."""
    names = list(stats.names)
    classes = np.asarray(stats.classes, dtype=np.int64)
    boxes = np.asarray(stats.boxes, dtype=np.float64).reshape(-1, 4)
    per_image = np.asarray(stats.instances_per_image, dtype=np.int64)
    named = len(names) <= MAX_TICK_CLASSES
    bottom = 0.5 + (_CHAR_INCHES * max((len(n) for n in names), default=1) if named else 0.1)
    figure = _figure(10.0, 8.0 + bottom, left=0.8, right=0.3, bottom=0.6, top=0.6 if title else 0.4)
    figure.subplots_adjust(hspace=(0.6 + bottom) / 4.0, wspace=0.3)
    (hist, centres), (sizes, images) = figure.subplots(2, 2)
    counts = np.bincount(classes, minlength=len(names))
    hist.bar(np.arange(len(names)), counts, color=[class_color(i) for i in range(len(names))])
    if named:
        hist.set_xticks(np.arange(len(names)), names, rotation=90, fontsize="small")
    hist.set_ylabel("instances")
    hist.set_title(f"{int(classes.size)} instances, {len(names)} classes")
    for axes, (cx, cy), label in (
        (centres, (0, 1), ("x", "y")),
        (sizes, (2, 3), ("width", "height")),
    ):
        if boxes.size:
            density, _, _ = np.histogram2d(boxes[:, cx], boxes[:, cy], bins=50, range=[[0, 1], [0, 1]])
            shown = np.where(density > 0, density, np.nan).T  # rows = y
            top_count = max(float(np.nanmax(shown)), 1.0)
            axes.imshow(shown, extent=(0, 1, 1, 0), origin="upper", cmap="viridis",
                        norm=LogNorm(vmin=0.5, vmax=top_count), interpolation="nearest")  # fmt: skip
        axes.set_xlim(0, 1)
        axes.set_ylim(0, 1)
        axes.set_xlabel(label[0])
        axes.set_ylabel(label[1])
        axes.set_aspect("equal")
    centres.set_ylim(1, 0)  # image coordinates: y grows downwards
    centres.set_title("box centres (normalised)")
    sizes.set_title("box sizes (normalised)")
    top = int(per_image.max(initial=0))
    images.hist(per_image, bins=np.arange(top + 2) - 0.5, color="tab:blue", edgecolor="white")
    images.set_xlabel("instances per image")
    images.set_ylabel("images")
    images.set_title(f"{int(per_image.size)} images")
    if title:
        figure.suptitle(title)
    return figure


def write_eval_figures(directory: str | os.PathLike[str], artifacts: Any) -> dict[str, Path]:
    """Write every validation figure of ``artifacts`` (lucid-train's ``ValidationArtifacts``) to ``directory``.

    Files (the first IoU type unprefixed, the others prefixed ``<iou_type>_``): ``confusion_matrix.png``,
    ``confusion_matrix_normalized.png``, ``PR_curve.png``, ``F1_curve.png``, ``P_curve.png``, ``R_curve.png``;
    and ``labels.png``. Returns ``{key: path}`` (keys are the file stems).
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    names = list(artifacts.names)
    written: dict[str, Path] = {}

    def save(figure: Figure, stem: str) -> None:
        written[stem] = save_figure(figure, out / f"{stem}.png", compress_level=PNG_COMPRESS_LEVEL)

    for k, iou_type in enumerate(artifacts.iou_types):
        prefix = "" if k == 0 else f"{iou_type}_"
        note = f" [{iou_type}]"
        cm = artifacts.confusion.get(iou_type)
        if cm is not None:
            where = f"\n(conf {cm.conf:g}, IoU {cm.iou:g}){note}"
            save(
                plot_confusion_matrix(cm.counts, names, title="confusion matrix" + where),
                f"{prefix}confusion_matrix",
            )
            save(
                plot_confusion_matrix(
                    cm.normalized(), names, normalized=True, title="confusion matrix, row-normalised" + where
                ),
                f"{prefix}confusion_matrix_normalized",
            )
        pr = artifacts.pr.get(iou_type)
        if pr is not None:
            save(
                plot_pr_curves(
                    pr.recall, pr.precision, pr.ap50, names, title="precision-recall, IoU 0.5" + note
                ),
                f"{prefix}PR_curve",
            )
        curves = artifacts.confidence.get(iou_type)
        if curves is not None:
            for key, values, label in (("F1", curves.f1, "F1"), ("P", curves.precision, "precision"),
                                       ("R", curves.recall, "recall")):  # fmt: skip
                save(
                    plot_confidence_curve(
                        curves.confidence,
                        values,
                        names,
                        ylabel=label,
                        has_gt=curves.has_gt,
                        best_conf=curves.best_conf,
                        title=f"{label}-confidence, IoU 0.5{note}",
                    ),
                    f"{prefix}{CONFIDENCE_FILES[key].removesuffix('.png')}",
                )
    labels = getattr(artifacts, "labels", None)
    if labels is not None:
        save(plot_labels(labels), "labels")
    return written
