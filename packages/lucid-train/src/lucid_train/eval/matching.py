"""Per-image IoU matrices between detections and ground truth, for the validation artefacts.

The IoU of each kind is the scoring one (:data:`lucid_train.eval.vectorized.PAIR_IOU_KINDS`: boxes, RLE masks,
OKS for keypoints, exact polygon IoU for rotated boxes), so a pair that counts as a match in the confusion matrix
or the confidence curves is one the COCO protocol would match at the same threshold.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from lucid_train.eval.vectorized import PAIR_IOU_KINDS, Instances, PairBatch


@dataclass(frozen=True)
class ImagePairs:
    """One image: its detection rows and ground-truth rows (into the `Instances`) and their (D, G) IoU."""

    image_id: int
    det_rows: np.ndarray
    gt_rows: np.ndarray
    iou: np.ndarray


def _rows_by_image(image_ids: np.ndarray) -> dict[int, np.ndarray]:
    order = np.argsort(image_ids, kind="stable")
    keys, starts = np.unique(image_ids[order], return_index=True)
    bounds = [*starts.tolist(), order.size]
    return {int(k): order[bounds[i] : bounds[i + 1]] for i, k in enumerate(keys.tolist())}


def pair_iou(
    gt: Instances,
    dt: Instances,
    iou_type: str,
    det_rows: np.ndarray,
    gt_rows: np.ndarray,
    kpt_sigmas: Sequence[float] | None = None,
) -> np.ndarray:
    """(D, G) IoU (OKS for keypoints) of the detections ``det_rows`` against the ground truths ``gt_rows``."""
    nd, ng = det_rows.size, gt_rows.size
    iou = np.zeros((1, nd, ng))
    if nd == 0 or ng == 0:
        return np.zeros((nd, ng))
    assert gt.iscrowd is not None
    g_crowd = gt.iscrowd[gt_rows]
    d_index = np.arange(nd)[None, :]
    g_index = np.arange(ng)[None, :]
    bi, di, gi = np.nonzero(np.ones((1, nd, ng), dtype=bool))
    batch = PairBatch(
        gt=gt,
        dt=dt,
        g_sel=gt_rows,
        d_sel=det_rows,
        d_index=d_index,
        g_index=g_index,
        d_valid=np.ones((1, nd), dtype=bool),
        g_valid=np.ones((1, ng), dtype=bool),
        bi=bi,
        di=di,
        gi=gi,
        dsel=det_rows[di],
        gsel=gt_rows[gi],
        crowd=g_crowd[gi],
        g_crowd=g_crowd,
        kpt_sigmas=kpt_sigmas,
    )
    PAIR_IOU_KINDS[iou_type](batch, iou)
    out: np.ndarray = iou[0]
    return out


def image_pairs(
    gt: Instances,
    dt: Instances,
    iou_type: str,
    image_ids: Sequence[int],
    *,
    det_mask: np.ndarray | None = None,
    kpt_sigmas: Sequence[float] | None = None,
) -> Iterator[ImagePairs]:
    """For each of ``image_ids`` (in order): its detections (those in ``det_mask``), ground truths and IoU."""
    keep = np.ones(dt.image_ids.size, dtype=bool) if det_mask is None else det_mask
    dets = _rows_by_image(dt.image_ids)
    gts = _rows_by_image(gt.image_ids)
    empty = np.zeros(0, dtype=np.int64)
    for image_id in image_ids:
        d = dets.get(int(image_id), empty)
        d = d[keep[d]]
        g = gts.get(int(image_id), empty)
        yield ImagePairs(int(image_id), d, g, pair_iou(gt, dt, iou_type, d, g, kpt_sigmas))
