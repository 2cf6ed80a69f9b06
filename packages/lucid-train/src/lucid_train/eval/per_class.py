"""The per-class table: images, instances, then P, R, AP50, AP50-95 for each IoU type; text, CSV and Markdown.

``images`` / ``instances`` of the ``all`` row are the scored images and all regular ground truths; per class,
``images`` / ``instances`` count the regular (not ignored) ground truth of the class; P and R are taken at the
IoU type's best-F1 confidence (:mod:`lucid_train.eval.curves`); AP50 / AP50-95 are the reported COCO values
(``-1`` for a class without ground truth). The first row, ``all``, holds the totals, the mean P and R over the
classes with ground truth, and the reported mAP50 / mAP50-95.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lucid_train.eval.curves import ConfidenceCurves
from lucid_train.eval.evaluator import IouTypeResult

METRIC_COLUMNS = ("P", "R", "AP50", "AP50-95")


@dataclass(frozen=True)
class PerClassTable:
    """``columns`` and ``rows`` (``[name, images, instances, *metrics]``, first row ``all``)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...]

    def to_csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(self.columns)
        writer.writerows([_cell(v, 6) for v in row] for row in self.rows)
        return buffer.getvalue()

    def to_markdown(self) -> str:
        lines = ["| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(_cell(v, 4) for v in row) + " |" for row in self.rows]
        return "\n".join(lines) + "\n"

    def to_text(self) -> str:
        """Aligned columns for a terminal."""
        cells = [list(self.columns)] + [[_cell(v, 4) for v in row] for row in self.rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(self.columns))]
        return "\n".join(
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
            for r in cells
        )


def _cell(value: object, digits: int) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def per_class_table(
    names: Sequence[str],
    num_images: int,
    images: np.ndarray,
    instances: np.ndarray,
    results: Mapping[str, IouTypeResult],
    curves: Mapping[str, ConfidenceCurves],
) -> PerClassTable:
    """The table of ``names`` (contiguous classes) for every IoU type of ``results`` (in its order);
    ``num_images`` scored images, ``images`` / ``instances`` (C,) per class."""
    columns: list[str] = ["class", "images", "instances"]
    prefix = len(results) > 1
    for iou_type in results:
        columns += [f"{iou_type}/{m}" if prefix else m for m in METRIC_COLUMNS]
    total: list[object] = ["all", int(num_images), int(instances.sum())]
    rows: list[list[object]] = []
    for i, name in enumerate(names):
        rows.append([str(name), int(images[i]), int(instances[i])])
    for iou_type, result in results.items():
        curve = curves[iou_type]
        has = curve.has_gt
        total += [
            float(curve.precision_at_best[has].mean()) if has.any() else 0.0,
            float(curve.recall_at_best[has].mean()) if has.any() else 0.0,
            float(result.map50),
            float(result.map50_95),
        ]
        for i, row in enumerate(rows):
            row += [
                float(curve.precision_at_best[i]),
                float(curve.recall_at_best[i]),
                float(result.ap50_per_class[i]),
                float(result.ap_per_class[i]),
            ]
    return PerClassTable(tuple(columns), tuple(tuple(r) for r in [total, *rows]))
