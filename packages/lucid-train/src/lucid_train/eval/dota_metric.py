"""The official DOTA Task-1 (oriented boxes) protocol: per-class VOC AP at polygon IoU 0.5, difficult ignored.

Definition: the DOTA devkit's Task-1 evaluation (github.com/CAPTAIN-WHU/DOTA_devkit, ``dota_evaluation_task1.py``,
the PASCAL VOC ``voc_eval`` with the IoU replaced by the exact polygon IoU; DOTA paper, Xia et al. CVPR 2018), per
class:

* ground truth: every object of the class in every image of the label set; ``npos`` counts the non-difficult
  ones;
* detections of the class over all images, sorted by descending score (ties keep file order: a stable sort;
  the devkit's ``np.argsort`` leaves ties unspecified);
* each detection is matched to the ground truth of its image with the largest polygon IoU (the first one on
  ties, annotation order), already-matched ones included; if that IoU is ``> 0.5`` (strictly): a difficult
  ground truth makes the detection neither TP nor FP, a free one makes it a TP (the object becomes matched), an
  already matched one makes it a FP (duplicate); otherwise it is a FP;
* ``rec = cumsum(tp) / npos``, ``prec = cumsum(tp) / max(cumsum(tp) + cumsum(fp), float64 eps)``;
* AP: the VOC 2007 11-point metric (mean over ``t in np.arange(0, 1.1, 0.1)`` of ``max(prec[rec >= t])``, 0
  when none) — the DOTA default — or the all-point area under the monotone precision envelope (VOC 2010+).

mAP is the mean AP over the classes with at least one non-difficult object (the devkit averages a fixed class
list and returns NaN for a class without ground truth; such classes are reported here with AP ``None``).

Inputs are the :mod:`lucid_train.eval.dota_io` types (labels per image, detections per class).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from lucid_core.geometry.polygon_iou import paired_polygon_iou
from lucid_train.eval.dota_io import TASK1_PREFIX, DotaFormatError, DotaImageLabels, Task1Detections

DOTA_IOU_THRESHOLD = 0.5


@dataclass(frozen=True)
class DotaClassResult:
    """Scores of one class: AP (07 and all-point; None without non-difficult ground truth) and counts."""

    name: str
    ap07: float | None
    ap: float | None
    num_gt: int  # non-difficult objects (npos)
    num_difficult: int
    num_det: int
    tp: int
    fp: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "class": self.name,
            "AP07": self.ap07,
            "AP": self.ap,
            "num_gt": self.num_gt,
            "num_difficult": self.num_difficult,
            "num_det": self.num_det,
            "tp": self.tp,
            "fp": self.fp,
        }


@dataclass(frozen=True)
class DotaResult:
    """DOTA Task-1 scores: per class and mAP (07 11-point and all-point)."""

    per_class: tuple[DotaClassResult, ...]
    num_images: int
    iou_threshold: float

    def _mean(self, attr: str) -> float | None:
        values = [getattr(c, attr) for c in self.per_class if getattr(c, attr) is not None]
        return float(np.mean(values)) if values else None

    @property
    def map07(self) -> float | None:
        return self._mean("ap07")

    @property
    def map(self) -> float | None:
        return self._mean("ap")

    def to_dict(self) -> dict[str, Any]:
        return {
            "protocol": "DOTA Task1 (devkit voc_eval, polygon IoU)",
            "iou_threshold": self.iou_threshold,
            "num_images": self.num_images,
            "mAP07": self.map07,
            "mAP": self.map,
            "per_class": [c.to_dict() for c in self.per_class],
        }


def voc_ap(recall: np.ndarray, precision: np.ndarray, use_07_metric: bool = True) -> float:
    """VOC AP of a recall/precision curve: 11-point (VOC 2007, DOTA's default) or all-point (module docstring)."""
    if use_07_metric:
        ap = 0.0
        for t in np.arange(0.0, 1.1, 0.1):  # the devkit's exact thresholds (0.30000000000000004 included)
            above = recall >= t
            p = float(np.max(precision[above])) if above.any() else 0.0
            ap += p / 11.0
        return ap
    mrec = np.concatenate(([0.0], recall, [1.0]))
    mpre = np.concatenate(([0.0], precision, [0.0]))
    mpre = np.maximum.accumulate(mpre[::-1])[::-1]
    i = np.flatnonzero(mrec[1:] != mrec[:-1])
    return float(np.sum((mrec[i + 1] - mrec[i]) * mpre[i + 1]))


def _class_ap(
    name: str,
    labels: Mapping[str, DotaImageLabels],
    dets: Task1Detections,
    iou_threshold: float,
) -> DotaClassResult:
    image_index = {image: k for k, image in enumerate(labels)}
    g_polys, g_img, g_diff = [], [], []
    for image, lab in labels.items():
        sel = [i for i, c in enumerate(lab.categories) if c == name]
        if sel:
            g_polys.append(lab.polygons[sel])
            g_img.append(np.full(len(sel), image_index[image], dtype=np.int64))
            g_diff.append(lab.difficult[sel])
    gt_poly = np.concatenate(g_polys) if g_polys else np.zeros((0, 4, 2))
    gt_img = np.concatenate(g_img) if g_img else np.zeros(0, np.int64)
    gt_diff = np.concatenate(g_diff) if g_diff else np.zeros(0, bool)
    npos = int((~gt_diff).sum())
    nd = len(dets)
    missing = [im for im in dets.images if im not in image_index]
    if missing:
        raise DotaFormatError(
            f"{TASK1_PREFIX}{name}.txt: image {missing[0]!r} has no label file among the {len(labels)} given "
            f"({len(missing)} detection(s) affected)"
        )
    order = np.argsort(-dets.scores, kind="stable")
    d_img = np.array([image_index[dets.images[i]] for i in order], dtype=np.int64)
    d_poly = dets.polygons[order]
    # ground truth of the class grouped by image (annotation order kept), pairs (detection, its image's GT)
    g_order = np.argsort(gt_img, kind="stable")
    starts = np.searchsorted(gt_img[g_order], np.arange(len(labels)), side="left")
    ends = np.searchsorted(gt_img[g_order], np.arange(len(labels)), side="right")
    counts = (ends - starts)[d_img]
    pair_det = np.repeat(np.arange(nd), counts)
    offset = np.arange(pair_det.size) - np.repeat(np.cumsum(counts) - counts, counts)
    pair_gt = g_order[np.repeat(starts[d_img], counts) + offset]
    ious = (
        paired_polygon_iou(torch.from_numpy(d_poly[pair_det]), torch.from_numpy(gt_poly[pair_gt])).numpy()
        if pair_det.size
        else np.zeros(0)
    )
    # per detection: the max IoU and its first maximal ground truth (a detection's pairs are contiguous and in
    # annotation order, so the smallest maximal pair index is the devkit's argmax)
    ovmax = np.full(nd, -np.inf)
    np.maximum.at(ovmax, pair_det, ious)
    maximal = np.flatnonzero(ious == ovmax[pair_det])
    first_pair = np.full(nd, pair_det.size, dtype=np.int64)
    np.minimum.at(first_pair, pair_det[maximal], maximal)
    has = first_pair < pair_det.size
    best_gt = np.full(nd, -1, dtype=np.int64)
    best_gt[has] = pair_gt[first_pair[has]]
    best_difficult = np.zeros(nd, dtype=bool)
    best_difficult[has] = gt_diff[best_gt[has]]
    matched = ovmax > iou_threshold
    tp = np.zeros(nd)
    fp = np.zeros(nd)
    fp[~matched] = 1.0
    regular = matched & ~best_difficult
    cand = np.flatnonzero(regular)  # in score order
    _, first_use = np.unique(best_gt[cand], return_index=True)
    tp_idx = cand[first_use]
    tp[tp_idx] = 1.0
    dup = np.setdiff1d(cand, tp_idx)
    fp[dup] = 1.0
    ctp, cfp = np.cumsum(tp), np.cumsum(fp)
    ap07 = ap = None
    if npos > 0:
        rec = ctp / float(npos)
        prec = ctp / np.maximum(ctp + cfp, np.finfo(np.float64).eps)
        ap07 = voc_ap(rec, prec, use_07_metric=True)
        ap = voc_ap(rec, prec, use_07_metric=False)
    return DotaClassResult(
        name=name,
        ap07=ap07,
        ap=ap,
        num_gt=npos,
        num_difficult=int(gt_diff.sum()),
        num_det=nd,
        tp=int(tp.sum()),
        fp=int(fp.sum()),
    )


def evaluate_dota(
    labels: Mapping[str, DotaImageLabels],
    detections: Mapping[str, Task1Detections],
    *,
    classes: Iterable[str] | None = None,
    iou_threshold: float = DOTA_IOU_THRESHOLD,
) -> DotaResult:
    """DOTA Task-1 scores of `detections` (class → detections) against `labels` (image → objects).

    ``classes`` defaults to every category of the labels and of the detections, sorted.
    """
    if classes is None:
        found = {c for lab in labels.values() for c in lab.categories} | set(detections)
        names: Sequence[str] = sorted(found)
    else:
        names = list(classes)
    per_class = tuple(
        _class_ap(name, labels, detections.get(name, Task1Detections()), iou_threshold) for name in names
    )
    return DotaResult(per_class=per_class, num_images=len(labels), iou_threshold=iou_threshold)


def format_dota_table(result: DotaResult) -> str:
    """Per-class AP (07 and all-point) and mAP as a fixed-width text table."""

    def fmt(v: float | None) -> str:
        return "   -  " if v is None else f"{v:.4f}"

    width = max([len("class"), *(len(c.name) for c in result.per_class)])
    lines = [f"{'class':<{width}}  {'AP07':>6}  {'AP':>6}  {'gt':>6}  {'det':>7}"]
    for c in result.per_class:
        lines.append(f"{c.name:<{width}}  {fmt(c.ap07):>6}  {fmt(c.ap):>6}  {c.num_gt:>6}  {c.num_det:>7}")
    lines.append(f"{'mAP':<{width}}  {fmt(result.map07):>6}  {fmt(result.map):>6}")
    return "\n".join(lines)
