"""Per-class precision-recall curves and precision / recall / F1 against the confidence threshold.

* PR curves are the COCO protocol's own: the interpolated precision at IoU 0.5 on the 101 recall thresholds
  (``IouTypeResult.pr50``), so the mean of a class's curve is exactly its reported AP50.
* Confidence curves: each detection is a true positive when, in descending score order within its image and
  class, it takes a still-free regular ground truth of its class at IoU >= 0.5 (the highest IoU); one that only
  overlaps ignored ground truth is left out; every other one is a false positive (no maxDets cut). At threshold
  ``t`` (detections with score >= t): P = TP / kept (1 when nothing is kept), R = TP / ground truths,
  F1 = 2PR / (P + R) (0 when both are 0). The best threshold maximises the mean F1 over the classes that have
  ground truth, among the detection scores (ties go to the higher threshold).

The best threshold is found in O(N log N): detections in descending score order each change only their own
class's F1 (``2·TP / (kept + GT)``), so the mean F1 at every distinct score is a cumulative sum of per-detection
changes; the thresholds whose sum comes within :data:`NEAR_BEST` of the maximum are then scored with the direct
formula above, so the choice (and its tie rule) is the direct one's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lucid_train.eval.matching import ImagePairs, image_pairs
from lucid_train.eval.vectorized import REC_THRS, Instances

CURVE_IOU = 0.5
GRID_POINTS = 1001
#: thresholds whose running-sum mean F1 is this close to the best are re-scored exactly (float rounding margin)
NEAR_BEST = 1e-9


@dataclass(frozen=True)
class PRCurves:
    """COCO PR curves: ``precision`` (C, 101) on ``recall`` (101,); ``ap50`` (C,), -1 for a class without GT."""

    iou_type: str
    recall: np.ndarray
    precision: np.ndarray
    ap50: np.ndarray
    names: tuple[str, ...]


@dataclass(frozen=True)
class MatchedDetections:
    """Every detection of one IoU type: contiguous class, score, true-positive flag; ground truths per class."""

    classes: np.ndarray
    scores: np.ndarray
    tp: np.ndarray
    num_gt: np.ndarray


@dataclass(frozen=True)
class ConfidenceCurves:
    """P, R, F1 (C, N) on the ``confidence`` grid (N,), and the best-F1 threshold with P and R there (C,)."""

    iou_type: str
    confidence: np.ndarray
    precision: np.ndarray
    recall: np.ndarray
    f1: np.ndarray
    best_conf: float
    best_f1: float
    precision_at_best: np.ndarray
    recall_at_best: np.ndarray
    has_gt: np.ndarray
    names: tuple[str, ...]


def pr_curves(iou_type: str, pr50: np.ndarray, names: Sequence[str]) -> PRCurves:
    """`PRCurves` from the (101, C) precision array of ``IouTypeResult.pr50``."""
    precision = np.asarray(pr50, dtype=np.float64).T
    ap50 = np.where((precision > -1).all(axis=1), precision.mean(axis=1), -1.0)
    return PRCurves(iou_type, REC_THRS.copy(), precision, ap50, tuple(names))


def match_detections(
    gt: Instances,
    dt: Instances,
    iou_type: str,
    *,
    image_ids: Sequence[int],
    category_ids: Sequence[int],
    iou: float = CURVE_IOU,
    kpt_sigmas: Sequence[float] | None = None,
    pairs: Sequence[ImagePairs] | None = None,
) -> MatchedDetections:
    """True-positive flags of every detection at IoU >= ``iou`` (module docstring rule); ``pairs``: the per-image
    IoU matrices of every detection of ``image_ids`` when already computed (:func:`image_pairs`)."""
    assert dt.scores is not None and gt.ignore is not None
    lookup = {int(c): i for i, c in enumerate(category_ids)}
    gt_cls = np.array([lookup.get(int(c), -1) for c in gt.category_ids], dtype=np.int64)
    dt_cls = np.array([lookup.get(int(c), -1) for c in dt.category_ids], dtype=np.int64)
    in_images = np.isin(gt.image_ids, np.asarray(list(image_ids), dtype=np.int64))
    regular_gt = in_images & ~gt.ignore & (gt_cls >= 0)
    num_gt = np.bincount(gt_cls[regular_gt], minlength=len(category_ids))
    tp = np.zeros(dt.scores.size, dtype=bool)
    skip = np.zeros(dt.scores.size, dtype=bool)
    every = image_pairs(gt, dt, iou_type, image_ids, kpt_sigmas=kpt_sigmas) if pairs is None else pairs
    for image in every:
        if image.det_rows.size == 0 or image.gt_rows.size == 0:
            continue
        same = dt_cls[image.det_rows][:, None] == gt_cls[image.gt_rows][None, :]
        overlap = np.where(same, image.iou, -1.0)
        candidates = np.flatnonzero((overlap >= iou).any(axis=1))
        if candidates.size == 0:
            continue
        ignored = gt.ignore[image.gt_rows]
        busy = np.zeros(image.gt_rows.size, dtype=bool)
        order = candidates[np.argsort(-dt.scores[image.det_rows[candidates]], kind="stable")]
        for di in order.tolist():
            row = overlap[di]
            free = np.where(~ignored & ~busy & (row >= iou), row, -1.0)
            if free.max() >= iou:
                gi = int(np.argmax(free))
                busy[gi] = True
                tp[image.det_rows[di]] = True
            elif (row[ignored] >= iou).any():
                skip[image.det_rows[di]] = True
    keep = ~skip & (dt_cls >= 0) & np.isin(dt.image_ids, np.asarray(list(image_ids), dtype=np.int64))
    return MatchedDetections(dt_cls[keep], dt.scores[keep], tp[keep], num_gt)


def _counts_at(
    matched: MatchedDetections, thresholds: np.ndarray, num_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """(C, N) kept detections and true positives at each threshold (score >= threshold)."""
    kept = np.zeros((num_classes, thresholds.size))
    tps = np.zeros((num_classes, thresholds.size))
    for c in range(num_classes):
        mine = matched.classes == c
        scores = matched.scores[mine]
        order = np.argsort(-scores, kind="stable")
        desc = scores[order]
        cum_tp = np.concatenate([[0], np.cumsum(matched.tp[mine][order])])
        # number of scores >= t in a descending array = first index with score < t
        n = np.searchsorted(-desc, -thresholds, side="right")
        kept[c] = n
        tps[c] = cum_tp[n]
    return kept, tps


def _prf(kept: np.ndarray, tps: np.ndarray, num_gt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    precision = np.divide(tps, kept, out=np.ones_like(tps), where=kept > 0)
    gt = num_gt[:, None].astype(np.float64)
    recall = np.divide(tps, gt, out=np.zeros_like(tps), where=gt > 0)
    total = precision + recall
    f1 = np.divide(2 * precision * recall, total, out=np.zeros_like(tps), where=total > 0)
    return precision, recall, f1


def _near_best(matched: MatchedDetections, candidates: np.ndarray, has_gt: np.ndarray) -> np.ndarray:
    """Indices (ascending) of the descending ``candidates`` whose mean F1 over the classes with ground truth is
    within :data:`NEAR_BEST` of the best, from running sums (module docstring)."""
    order = np.argsort(-matched.scores, kind="stable")
    classes, tp = matched.classes[order], matched.tp[order].astype(np.float64)
    by_class = np.argsort(classes, kind="stable")  # descending score within each class
    kept = np.empty(classes.size)
    tps = np.empty(classes.size)
    starts = np.searchsorted(classes[by_class], np.arange(has_gt.size))
    ones = np.ones(classes.size)
    # per-class running counts: a cumulative sum restarted at each class's first detection
    run_kept, run_tp = np.cumsum(ones), np.cumsum(tp[by_class])
    first = np.zeros(classes.size, dtype=np.int64)
    first[starts[starts < classes.size]] = 1
    group = np.cumsum(first) - 1
    begin = np.flatnonzero(first)
    base_kept = np.concatenate([[0.0], run_kept])[begin][group]
    base_tp = np.concatenate([[0.0], run_tp])[begin][group]
    kept[by_class], tps[by_class] = run_kept - base_kept, run_tp - base_tp
    gt = matched.num_gt[classes].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):  # 0/0 only for classes without ground truth
        f1_after = 2 * tps / (kept + gt)
        f1_before = 2 * (tps - tp) / (kept - 1 + gt)
    change = np.where(has_gt[classes], f1_after - f1_before, 0.0)
    mean_f1 = np.cumsum(change) / int(has_gt.sum())
    # the value at each distinct score: after its last detection (scores descend, so groups are contiguous)
    last = np.searchsorted(-matched.scores[order], -candidates, side="right") - 1
    at_candidates = mean_f1[last]
    return np.flatnonzero(at_candidates >= at_candidates.max() - NEAR_BEST)


def confidence_curves(
    iou_type: str, matched: MatchedDetections, names: Sequence[str], grid_points: int = GRID_POINTS
) -> ConfidenceCurves:
    """P/R/F1 on a ``grid_points`` grid over [0, 1] and the best-F1 threshold (module docstring rules)."""
    num = len(names)
    grid = np.linspace(0.0, 1.0, grid_points)
    precision, recall, f1 = _prf(*_counts_at(matched, grid, num), matched.num_gt)
    has_gt = matched.num_gt > 0
    candidates = np.unique(matched.scores)[::-1]  # descending: argmax takes the first = highest threshold
    if candidates.size and has_gt.any():
        near = candidates[_near_best(matched, candidates, has_gt)]
        p_c, r_c, f_c = _prf(*_counts_at(matched, near, num), matched.num_gt)
        mean_f1 = np.ascontiguousarray(f_c[has_gt].T).mean(
            axis=1
        )  # the same sum order for any number of columns
        best = int(np.argmax(mean_f1))
        best_conf, best_f1 = float(near[best]), float(mean_f1[best])
        p_best, r_best = p_c[:, best], r_c[:, best]
    else:
        best_conf, best_f1 = 1.0, 0.0
        p_best, r_best = np.zeros(num), np.zeros(num)
    return ConfidenceCurves(
        iou_type, grid, precision, recall, f1, best_conf, best_f1, p_best, r_best, has_gt, tuple(names)
    )
