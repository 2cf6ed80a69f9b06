"""Validation artefacts of one evaluation: confusion matrices, PR and confidence curves, the per-class table and
the label statistics, built from a scored `COCOEvaluator` (no extra pass over the images) and written to a folder.

The numbers are computed here; the figures are drawn by lucid-viz when it is installed (the ``lucid-train[viz]``
extra), otherwise only ``per_class.csv`` / ``per_class.md`` are written.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lucid_core.atomic import atomic_write_text
from lucid_data.stats import LabelStatistics, from_instances
from lucid_train.eval.confusion import CONF_THRESHOLD, IOU_THRESHOLD, ConfusionMatrix, confusion_matrix
from lucid_train.eval.curves import (
    ConfidenceCurves,
    PRCurves,
    confidence_curves,
    match_detections,
    pr_curves,
)
from lucid_train.eval.evaluator import COCOEvaluator, EvalResult
from lucid_train.eval.matching import image_pairs
from lucid_train.eval.per_class import PerClassTable, per_class_table
from lucid_train.eval.vectorized import Instances

PER_CLASS_CSV = "per_class.csv"
PER_CLASS_MD = "per_class.md"


@dataclass(frozen=True)
class ValidationArtifacts:
    """Everything drawn or tabulated after a validation, per IoU type (in the evaluator's order)."""

    names: tuple[str, ...]
    iou_types: tuple[str, ...]
    confusion: dict[str, ConfusionMatrix]
    pr: dict[str, PRCurves]
    confidence: dict[str, ConfidenceCurves]
    table: PerClassTable
    labels: LabelStatistics | None  # the scored images' ground truth (lucid-eval); None: no labels.png


def ground_truth_statistics(evaluator: COCOEvaluator, image_ids: list[int]) -> LabelStatistics:
    """Label statistics of the scored images' ground truth (every annotation, crowd included)."""
    dataset = evaluator.gt.dataset
    lookup = {int(c): i for i, c in enumerate(evaluator.gt.category_ids)}
    per_image: dict[int, list[dict[str, Any]]] = {i: [] for i in image_ids}
    for ann in dataset["annotations"]:
        if int(ann["image_id"]) in per_image:
            per_image[int(ann["image_id"])].append(ann)
    images = evaluator.gt.images

    def rows() -> Iterator[tuple[np.ndarray, np.ndarray, tuple[int, int]]]:
        for image_id in image_ids:
            anns = per_image[image_id]
            xywh = np.asarray([a["bbox"] for a in anns], dtype=np.float64).reshape(-1, 4)
            xyxy = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], axis=1)
            labels = np.asarray([lookup[int(a["category_id"])] for a in anns], dtype=np.int64)
            im = images[image_id]
            yield labels, xyxy, (int(im["height"]), int(im["width"]))

    return from_instances(evaluator.gt.names, rows())


def build_artifacts(
    evaluator: COCOEvaluator,
    result: EvalResult,
    *,
    conf: float = CONF_THRESHOLD,
    iou: float = IOU_THRESHOLD,
) -> ValidationArtifacts:
    """The artefacts of ``evaluator`` after ``result = evaluator.compute()`` (the same detections)."""
    names = tuple(result.names)
    image_ids = sorted(evaluator.image_entries())
    category_ids = list(evaluator.gt.category_ids)
    confusion: dict[str, ConfusionMatrix] = {}
    pr: dict[str, PRCurves] = {}
    conf_curves: dict[str, ConfidenceCurves] = {}
    counts: tuple[np.ndarray, np.ndarray] | None = None
    for iou_type in evaluator.iou_types:
        gt = evaluator.ground_truth_instances(iou_type)
        dt = evaluator.detection_instances(iou_type)
        # every detection's IoU with its image's ground truth, once for the matrix and the curves
        pairs = list(image_pairs(gt, dt, iou_type, image_ids, kpt_sigmas=evaluator.kpt_sigmas))
        confusion[iou_type] = confusion_matrix(
            gt, dt, iou_type, image_ids=image_ids, category_ids=category_ids, names=names, conf=conf, iou=iou,
            pairs=pairs,
        )  # fmt: skip
        matched = match_detections(
            gt, dt, iou_type, image_ids=image_ids, category_ids=category_ids, pairs=pairs
        )
        conf_curves[iou_type] = confidence_curves(iou_type, matched, names)
        per_type = result.per_type[iou_type]
        if per_type.pr50 is not None:
            pr[iou_type] = pr_curves(iou_type, per_type.pr50, names)
        if counts is None:
            counts = _class_counts(gt, category_ids, image_ids)
    assert counts is not None
    table = per_class_table(names, len(image_ids), counts[0], counts[1], result.per_type, conf_curves)
    return ValidationArtifacts(
        names,
        tuple(evaluator.iou_types),
        confusion,
        pr,
        conf_curves,
        table,
        ground_truth_statistics(evaluator, image_ids),
    )


def _class_counts(
    gt: Instances, category_ids: list[int], image_ids: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """(images, instances) per class over the regular ground truth of ``image_ids``."""
    assert gt.ignore is not None
    lookup = {int(c): i for i, c in enumerate(category_ids)}
    ids = gt.image_ids
    keep = np.isin(ids, np.asarray(image_ids, dtype=np.int64)) & ~gt.ignore
    classes = np.array([lookup.get(int(c), -1) for c in gt.category_ids[keep]], dtype=np.int64)
    valid = classes >= 0
    instances = np.bincount(classes[valid], minlength=len(category_ids))
    pairs = {(int(c), int(i)) for c, i in zip(classes[valid], ids[keep][valid])}
    images = np.bincount(np.array([c for c, _ in pairs], dtype=np.int64), minlength=len(category_ids))
    return images, instances


def write_artifacts(artifacts: ValidationArtifacts, directory: str | os.PathLike[str]) -> dict[str, Path]:
    """``per_class.csv`` / ``per_class.md`` and, with lucid-viz installed, the figures (``confusion_matrix.png``,
    ``PR_curve.png``, ``F1_curve.png``, ``P_curve.png``, ``R_curve.png``, ``labels.png``; a second IoU type's
    files carry its name as prefix, e.g. ``segm_PR_curve.png``). Returns ``{name: path}`` of what was written."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = {"per_class_csv": out / PER_CLASS_CSV, "per_class_md": out / PER_CLASS_MD}
    atomic_write_text(written["per_class_csv"], artifacts.table.to_csv())
    atomic_write_text(written["per_class_md"], artifacts.table.to_markdown())
    try:  # the optional lucid-viz (the lucid-train[viz] extra)
        from lucid_viz.eval_figures import write_eval_figures
    except ImportError:
        return written
    written.update(write_eval_figures(out, artifacts))
    return written
