"""Confusion matrix of detections against ground truth, with a background row and column.

Rules (docs/EVALUATION.md, "Validation artefacts"): detections with score >= ``conf`` (default 0.25) are matched
class-agnostically to the image's ground truth at IoU >= ``iou`` (default 0.45; OKS for keypoints, mask IoU for
masks, polygon IoU for rotated boxes), pairs taken greedily in descending IoU, each detection and ground truth at
most once. Row = true class, column = predicted class; the last row is background (a detection matching nothing:
a false positive), the last column is background (a ground truth nothing matched: a miss). Ignored ground truth
(crowd, DOTA difficult, a person without labelled keypoints) is neither a miss nor, when a detection overlaps it,
the cause of a false positive.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lucid_train.eval.matching import ImagePairs, image_pairs
from lucid_train.eval.vectorized import Instances

CONF_THRESHOLD = 0.25
IOU_THRESHOLD = 0.45


@dataclass(frozen=True)
class ConfusionMatrix:
    """``counts`` (C+1, C+1) int64: rows true class, columns predicted class, index C = background."""

    iou_type: str
    counts: np.ndarray
    names: tuple[str, ...]
    conf: float
    iou: float

    def normalized(self) -> np.ndarray:
        """Row-normalised counts (each non-empty row sums to 1; an empty row stays 0)."""
        totals = self.counts.sum(axis=1, keepdims=True)
        out: np.ndarray = np.divide(self.counts, totals, out=np.zeros(self.counts.shape), where=totals > 0)
        return out


def greedy_pairs(iou: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    """(detection, ground truth) pairs with IoU >= ``threshold``, taken in descending IoU, each index once."""
    d, g = np.nonzero(iou >= threshold)
    order = np.argsort(-iou[d, g], kind="stable")
    used_d: set[int] = set()
    used_g: set[int] = set()
    pairs = []
    for i in order.tolist():
        di, gi = int(d[i]), int(g[i])
        if di not in used_d and gi not in used_g:
            used_d.add(di)
            used_g.add(gi)
            pairs.append((di, gi))
    return pairs


def confusion_matrix(
    gt: Instances,
    dt: Instances,
    iou_type: str,
    *,
    image_ids: Sequence[int],
    category_ids: Sequence[int],
    names: Sequence[str],
    conf: float = CONF_THRESHOLD,
    iou: float = IOU_THRESHOLD,
    kpt_sigmas: Sequence[float] | None = None,
    pairs: Sequence[ImagePairs] | None = None,
) -> ConfusionMatrix:
    """The confusion matrix (module docstring rules) over ``image_ids``; ``category_ids[i]`` is class ``i``.
    ``pairs``: the per-image IoU matrices of every detection of ``image_ids`` when already computed
    (:func:`~lucid_train.eval.matching.image_pairs`); the ones below ``conf`` are dropped here."""
    assert dt.scores is not None and gt.ignore is not None
    num = len(category_ids)
    lookup = {int(c): i for i, c in enumerate(category_ids)}
    gt_cls = np.array([lookup.get(int(c), -1) for c in gt.category_ids], dtype=np.int64)
    dt_cls = np.array([lookup.get(int(c), -1) for c in dt.category_ids], dtype=np.int64)
    counts = np.zeros((num + 1, num + 1), dtype=np.int64)
    confident = dt.scores >= conf
    if pairs is None:
        every = image_pairs(gt, dt, iou_type, image_ids, det_mask=confident, kpt_sigmas=kpt_sigmas)
    else:
        every = (_confident(image, confident) for image in pairs)
    for image in every:
        _add_image(counts, image, gt, gt_cls, dt_cls, iou)
    return ConfusionMatrix(iou_type, counts, tuple(names), float(conf), float(iou))


def _confident(image: ImagePairs, confident: np.ndarray) -> ImagePairs:
    keep = confident[image.det_rows]
    return ImagePairs(image.image_id, image.det_rows[keep], image.gt_rows, image.iou[keep])


def _add_image(
    counts: np.ndarray, pairs: ImagePairs, gt: Instances, gt_cls: np.ndarray, dt_cls: np.ndarray, iou: float
) -> None:
    """Add one image's matches, misses and false positives to ``counts`` (module docstring rules)."""
    assert gt.ignore is not None
    num = counts.shape[0] - 1
    ignored = gt.ignore[pairs.gt_rows]
    regular = np.flatnonzero(~ignored)
    matched = greedy_pairs(pairs.iou[:, regular], iou)
    det_done = np.zeros(pairs.det_rows.size, dtype=bool)
    gt_done = np.zeros(regular.size, dtype=bool)
    for di, gi in matched:
        counts[gt_cls[pairs.gt_rows[regular[gi]]], dt_cls[pairs.det_rows[di]]] += 1
        det_done[di] = gt_done[gi] = True
    for gi in np.flatnonzero(~gt_done).tolist():
        counts[gt_cls[pairs.gt_rows[regular[gi]]], num] += 1
    on_ignored = (pairs.iou[:, ignored] >= iou).any(axis=1)
    for di in np.flatnonzero(~det_done & ~on_ignored).tolist():
        counts[num, dt_cls[pairs.det_rows[di]]] += 1
