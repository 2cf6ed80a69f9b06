"""A vectorised (numpy) re-implementation of pycocotools ``COCOeval.evaluate`` + ``accumulate``.

It works on flat arrays (no per-detection dicts) and reproduces the reference (pycocotools 2.0.x ``cocoeval.py``)
decision for decision:

* IoU (``maskApi.c bbIou``): ``i / (da + ga - i)``, or ``i / da`` against a crowd ground truth; masks through the
  COCO RLE API (``iou``); keypoints through OKS (``computeOks``, per-keypoint sigmas, the doubled-box rule when
  the ground truth has no labelled keypoint, the same one-dimensional sums); rotated boxes through
  the exact convex-polygon IoU (``lucid_core.geometry.polygon_iou``), ``i / da`` against a crowd as for boxes.
  Each IoU kind is one entry of `PAIR_IOU_KINDS`; the matching and accumulation are shared.
* ``evaluateImg``: per (image, category), detections stable-sorted by descending score and cut at
  ``maxDets[-1]``; ground truths stable-sorted with ignored ones (crowd, out of area range, no keypoints) last;
  greedy matching per IoU threshold ``min(t, 1 - 1e-10)`` where a detection takes, among still-free regular
  ground truths, the LAST one reaching the best IoU, and only if none qualifies, an ignored one (crowds never
  become busy); unmatched detections outside the area range are ignored.
* ``accumulate``: per (category, area, maxDet) the detections of all images, in image-id order and per-image
  score order, are stable-sorted by score; cumulative TP/FP, recall ``tp / npig``, precision
  ``tp / (fp + tp + eps)`` made monotone from the right, sampled at the 101 recall thresholds with
  ``searchsorted(side="left")`` (0 past the last detection); -1 where a category has no ground truth.

The matching is sequential in the detections of one (image, category) only, so it runs as a loop over the
detection rank with all (image, category) groups and thresholds at once, groups bucketed by size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from faster_coco_eval.core import mask as mask_api

from lucid_core.geometry.polygon_iou import paired_intersection_area
from lucid_train.eval.coco_gt import ROTATED_KEY

AREA_RANGES_DET: tuple[tuple[str, float, float], ...] = (
    ("all", 0.0**2, 1e5**2),
    ("small", 0.0**2, 32.0**2),
    ("medium", 32.0**2, 96.0**2),
    ("large", 96.0**2, 1e5**2),
)
AREA_RANGES_KPT: tuple[tuple[str, float, float], ...] = (
    ("all", 0.0**2, 1e5**2),
    ("medium", 32.0**2, 96.0**2),
    ("large", 96.0**2, 1e5**2),
)
# pycocotools Params: np.linspace avoids the arange rounding issue
IOU_THRS = np.linspace(0.5, 0.95, int(np.round((0.95 - 0.5) / 0.05)) + 1, endpoint=True)
REC_THRS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1, endpoint=True)


@dataclass
class Instances:
    """Flat per-instance arrays of ground truth or detections for one IoU type."""

    image_ids: np.ndarray  # (N,) int64
    category_ids: np.ndarray  # (N,) int64
    areas: np.ndarray  # (N,) float64
    boxes: np.ndarray  # (N, 4) float64 xywh
    scores: np.ndarray | None = None  # detections only
    iscrowd: np.ndarray | None = None  # ground truth only (bool)
    ignore: np.ndarray | None = None  # ground truth only (bool): crowd, or no keypoints
    ids: np.ndarray | None = None  # ground truth annotation ids
    rles: list[Any] | None = None  # segm
    keypoints: np.ndarray | None = None  # (N, 3K) keypoints
    polygons: np.ndarray | None = None  # (N, 4, 2) rotated-box corners


@dataclass
class Accumulated:
    precision: np.ndarray  # (T, R, K, A, M)
    recall: np.ndarray  # (T, K, A, M)
    iou_thrs: np.ndarray
    area_labels: tuple[str, ...]
    max_dets: tuple[int, ...]
    cat_ids: tuple[int, ...]


def ground_truth_instances(dataset: dict[str, Any], iou_type: str) -> Instances:
    """Ground-truth arrays from a COCO dict (``ignore`` = iscrowd, or ``num_keypoints == 0`` for keypoints)."""
    anns = dataset["annotations"]
    n = len(anns)
    iscrowd = np.array([bool(a.get("iscrowd", 0)) for a in anns], dtype=bool)
    ignore = iscrowd.copy()
    out = Instances(
        image_ids=np.array([a["image_id"] for a in anns], dtype=np.int64),
        category_ids=np.array([a["category_id"] for a in anns], dtype=np.int64),
        areas=np.array([a["area"] for a in anns], dtype=np.float64),
        boxes=np.array([a["bbox"] for a in anns], dtype=np.float64).reshape(n, 4),
        iscrowd=iscrowd,
        ignore=ignore,
        ids=np.array([a["id"] for a in anns], dtype=np.int64),
    )
    if iou_type == "segm":
        sizes = {im["id"]: (im["height"], im["width"]) for im in dataset["images"]}
        rles = []
        for a in anns:
            h, w = sizes[a["image_id"]]
            seg = a.get("segmentation")
            if isinstance(seg, list):  # polygons
                rle = mask_api.merge(mask_api.frPyObjects(seg, h, w))
            elif isinstance(seg, dict) and isinstance(seg.get("counts"), list):  # uncompressed RLE
                rle = mask_api.frPyObjects(seg, h, w)
            elif isinstance(seg, dict):
                rle = seg
            else:
                raise ValueError(f"annotation {a['id']}: no segmentation for segm evaluation")
            rles.append(rle)
        out.rles = rles
    if iou_type == "keypoints":
        out.keypoints = np.array([a.get("keypoints", []) for a in anns], dtype=np.float64).reshape(n, -1)
        no_kpts = np.array([a.get("num_keypoints", 0) == 0 for a in anns], dtype=bool)
        out.ignore = no_kpts | ignore
    if iou_type == "rotated":
        out.polygons = rotated_ground_truth_polygons(anns)
        out.areas = polygon_areas(out.polygons)
        difficult = np.array([bool(a.get("difficult", 0)) for a in anns], dtype=bool)
        out.ignore = ignore | difficult  # DOTA: difficult objects are ignored (neither TP nor FP)
    return out


def rotated_ground_truth_polygons(anns: Sequence[dict[str, Any]]) -> np.ndarray:
    """(N, 4, 2) corners from each annotation's ``obb`` list ``[x1, y1, ..., x4, y4]`` (pixels)."""
    polys = []
    for a in anns:
        corners = a.get(ROTATED_KEY)
        if corners is None or len(corners) != 8:
            raise ValueError(
                f"annotation {a.get('id')}: rotated evaluation needs {ROTATED_KEY!r} = 8 corner coordinates, got {corners!r}"
            )
        polys.append(corners)
    return np.asarray(polys, dtype=np.float64).reshape(len(polys), 4, 2)


def polygon_areas(polygons: np.ndarray) -> np.ndarray:
    """Shoelace areas of (N, P, 2) polygons."""
    x, y = polygons[..., 0], polygons[..., 1]
    out: np.ndarray = 0.5 * np.abs((x * np.roll(y, -1, -1) - np.roll(x, -1, -1) * y).sum(-1))
    return out


def _group_starts(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unique values of a sorted key array, their start offsets and counts."""
    if keys.size == 0:
        return keys, np.zeros(0, np.int64), np.zeros(0, np.int64)
    change = np.flatnonzero(np.diff(keys)) + 1
    starts = np.concatenate([[0], change])
    counts = np.diff(np.concatenate([starts, [keys.size]]))
    return keys[starts], starts, counts


def _box_iou(d: np.ndarray, g: np.ndarray, crowd: np.ndarray) -> np.ndarray:
    """maskApi bbIou for paired rows: d, g (P, 4) xywh; crowd (P,) → (P,) IoU."""
    w = np.minimum(d[:, 2] + d[:, 0], g[:, 2] + g[:, 0]) - np.maximum(d[:, 0], g[:, 0])
    h = np.minimum(d[:, 3] + d[:, 1], g[:, 3] + g[:, 1]) - np.maximum(d[:, 1], g[:, 1])
    da = d[:, 2] * d[:, 3]
    ga = g[:, 2] * g[:, 3]
    i = w * h
    u = np.where(crowd, da, da + ga - i)
    with np.errstate(divide="ignore", invalid="ignore"):
        o = i / u
    return np.where((w <= 0) | (h <= 0), 0.0, o)


def _oks(
    d_kpts: np.ndarray, g: np.ndarray, g_box: np.ndarray, g_area: float, sigmas: np.ndarray
) -> np.ndarray:
    """pycocotools computeOks of D detections against one ground truth → (D,)."""
    variances = (sigmas * 2) ** 2
    xg, yg, vg = g[0::3], g[1::3], g[2::3]
    k1 = np.count_nonzero(vg > 0)
    xd, yd = d_kpts[:, 0::3], d_kpts[:, 1::3]
    if k1 > 0:
        dx = xd - xg
        dy = yd - yg
    else:
        x0, x1 = g_box[0] - g_box[2], g_box[0] + g_box[2] * 2
        y0, y1 = g_box[1] - g_box[3], g_box[1] + g_box[3] * 2
        z = np.zeros_like(xd)
        dx = np.max((z, x0 - xd), axis=0) + np.max((z, xd - x1), axis=0)
        dy = np.max((z, y0 - yd), axis=0) + np.max((z, yd - y1), axis=0)
    e = (dx**2 + dy**2) / variances / (g_area + np.spacing(1)) / 2
    if k1 > 0:
        e = e[:, vg > 0]
    return np.array([np.sum(row) / row.shape[0] for row in np.exp(-e)], dtype=np.float64)


def evaluate(
    gt: Instances,
    dt: Instances,
    iou_type: str,
    img_ids: Sequence[int],
    cat_ids: Sequence[int],
    max_dets: Sequence[int],
    kpt_sigmas: Sequence[float] | None = None,
) -> Accumulated:
    """COCOeval.evaluate() + accumulate() on flat arrays; returns precision (T,R,K,A,M) and recall (T,K,A,M)."""
    assert dt.scores is not None and gt.ignore is not None and gt.iscrowd is not None and gt.ids is not None
    img_ids = sorted({int(i) for i in img_ids})
    cat_ids = sorted({int(c) for c in cat_ids})
    max_dets = sorted(int(m) for m in max_dets)
    area_ranges = AREA_RANGES_KPT if iou_type == "keypoints" else AREA_RANGES_DET
    T, R, K, A, M = len(IOU_THRS), len(REC_THRS), len(cat_ids), len(area_ranges), len(max_dets)
    img_arr = np.asarray(img_ids, dtype=np.int64)
    cat_arr = np.asarray(cat_ids, dtype=np.int64)
    n_img = len(img_ids)

    def lookup(sorted_ids: np.ndarray, values: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(sorted_ids, values)
        found = pos < sorted_ids.size
        found[found] = sorted_ids[pos[found]] == values[found]
        return np.where(found, pos, -1)

    def positions(inst: Instances) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ip = lookup(img_arr, inst.image_ids.astype(np.int64))
        cp = lookup(cat_arr, inst.category_ids.astype(np.int64))
        keep = np.flatnonzero((ip >= 0) & (cp >= 0))
        return keep, ip[keep], cp[keep]

    g_keep, g_img, g_cat = positions(gt)
    d_keep, d_img, d_cat = positions(dt)
    # ground truth grouped by (category, image), annotation order kept
    g_group = g_cat * n_img + g_img
    g_order = np.argsort(g_group, kind="stable")
    g_sel = g_keep[g_order]
    g_group = g_group[g_order]
    # detections grouped by (category, image), stable-sorted by descending score, cut at maxDets[-1]
    d_group_all = d_cat * n_img + d_img
    d_scores_all = dt.scores[d_keep]
    d_order = np.lexsort((-d_scores_all, d_group_all))
    d_group_sorted = d_group_all[d_order]
    _, d_starts, d_counts = _group_starts(d_group_sorted)
    d_rank_sorted = np.arange(d_group_sorted.size) - np.repeat(d_starts, d_counts)
    cut = d_rank_sorted < max_dets[-1]
    d_sel = d_keep[d_order][cut]
    d_group = d_group_sorted[cut]
    d_rank = d_rank_sorted[cut]
    nd = d_sel.size

    d_area = dt.areas[d_sel]
    d_score = dt.scores[d_sel]
    g_area = gt.areas[g_sel]
    g_ignore = gt.ignore[g_sel]
    g_crowd = gt.iscrowd[g_sel]
    g_id = gt.ids[g_sel]

    # matches per area range: dt_match[a] (T, nd) holds the matched gt id (0 = none), dt_ig[a] (T, nd)
    dt_match = np.zeros((A, T, nd), dtype=np.int64)
    dt_ig = np.zeros((A, T, nd), dtype=bool)
    gt_keys, g_starts, g_counts = _group_starts(g_group)
    d_keys, d_gstarts, d_gcounts = _group_starts(d_group)
    common, g_idx, d_idx = np.intersect1d(gt_keys, d_keys, assume_unique=True, return_indices=True)
    if common.size:
        _match_groups(
            gt,
            dt,
            iou_type,
            g_sel,
            d_sel,
            g_starts[g_idx],
            g_counts[g_idx],
            d_gstarts[d_idx],
            d_gcounts[d_idx],
            g_area,
            g_ignore,
            g_crowd,
            g_id,
            area_ranges,
            dt_match,
            dt_ig,
            kpt_sigmas,
        )
    for a, (_, lo, hi) in enumerate(area_ranges):
        outside = (d_area < lo) | (d_area > hi)
        dt_ig[a] |= (dt_match[a] == 0) & outside[None, :]

    # accumulate
    precision = -np.ones((T, R, K, A, M))
    recall = -np.ones((T, K, A, M))
    d_cat_sel = d_group // n_img
    d_img_sel = d_group % n_img
    acc_order = np.lexsort((d_rank, d_img_sel, -d_score, d_cat_sel))
    cat_sorted = d_cat_sel[acc_order]
    g_cat_sel = g_group // n_img
    has_gt = np.bincount(g_cat_sel, minlength=K) > 0
    has_dt = np.bincount(d_cat_sel, minlength=K) > 0
    cat_bounds = np.searchsorted(cat_sorted, np.arange(K + 1), side="left")
    for a, (_, lo, hi) in enumerate(area_ranges):
        g_regular = ~(g_ignore | (g_area < lo) | (g_area > hi))
        npig_per_cat = np.bincount(g_cat_sel[g_regular], minlength=K)
        for k in range(K):
            if not (has_gt[k] or has_dt[k]):
                continue
            npig = int(npig_per_cat[k])
            if npig == 0:
                continue
            seg = acc_order[cat_bounds[k] : cat_bounds[k + 1]]
            for m, max_det in enumerate(max_dets):
                idx = seg[d_rank[seg] < max_det]
                matched = dt_match[a][:, idx] != 0
                ignored = dt_ig[a][:, idx]
                tps = matched & ~ignored
                fps = ~matched & ~ignored
                tp_sum = np.cumsum(tps, axis=1).astype(float)
                fp_sum = np.cumsum(fps, axis=1).astype(float)
                n = idx.size
                if n == 0:
                    recall[:, k, a, m] = 0
                    precision[:, :, k, a, m] = 0
                    continue
                rc = tp_sum / npig
                pr = tp_sum / (fp_sum + tp_sum + np.spacing(1))
                recall[:, k, a, m] = rc[:, -1]
                pr = np.maximum.accumulate(pr[:, ::-1], axis=1)[:, ::-1]
                # index of the first recall >= each threshold; past the last detection the precision is 0
                inds = np.stack([np.searchsorted(rc[t], REC_THRS, side="left") for t in range(T)])
                q = np.take_along_axis(pr, np.minimum(inds, n - 1), axis=1)
                precision[:, :, k, a, m] = np.where(inds < n, q, 0.0)
    return Accumulated(
        precision, recall, IOU_THRS, tuple(a[0] for a in area_ranges), tuple(max_dets), tuple(cat_ids)
    )


def _next_pow2(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.left_shift(1, np.ceil(np.log2(np.maximum(x, 1))).astype(np.int64))
    return out


def _match_groups(
    gt: Instances,
    dt: Instances,
    iou_type: str,
    g_sel: np.ndarray,
    d_sel: np.ndarray,
    g_start: np.ndarray,
    g_count: np.ndarray,
    d_start: np.ndarray,
    d_count: np.ndarray,
    g_area: np.ndarray,
    g_ignore: np.ndarray,
    g_crowd: np.ndarray,
    g_id: np.ndarray,
    area_ranges: Sequence[tuple[str, float, float]],
    dt_match: np.ndarray,
    dt_ig: np.ndarray,
    kpt_sigmas: Sequence[float] | None,
) -> None:
    """Greedy evaluateImg matching for all (image, category) groups having both ground truth and detections."""
    buckets = _next_pow2(d_count) * 4096 + _next_pow2(g_count)
    thr = np.minimum(IOU_THRS, 1 - 1e-10)
    T = thr.size
    for bucket in np.unique(buckets):
        members = np.flatnonzero(buckets == bucket)
        B = members.size
        Dm = int(d_count[members].max())
        Gm = int(g_count[members].max())
        # padded local index arrays (-1 = padding)
        d_local = np.arange(Dm)[None, :]
        g_local = np.arange(Gm)[None, :]
        d_valid = d_local < d_count[members][:, None]
        g_valid = g_local < g_count[members][:, None]
        d_index = np.where(d_valid, d_start[members][:, None] + d_local, 0)  # into d_sel arrays
        g_index = np.where(g_valid, g_start[members][:, None] + g_local, 0)  # into g_sel arrays
        iou = _pair_ious(
            gt, dt, iou_type, g_sel, d_sel, d_index, g_index, d_valid, g_valid, g_crowd, kpt_sigmas
        )
        for a, (_, lo, hi) in enumerate(area_ranges):
            ig = g_ignore[g_index] | (g_area[g_index] < lo) | (g_area[g_index] > hi)
            # stable sort: regular first, ignored next, padding last
            key = np.where(g_valid, ig.astype(np.int64), 2)
            perm = np.argsort(key, axis=1, kind="stable")
            ig_s = np.take_along_axis(ig, perm, 1)
            valid_s = np.take_along_axis(g_valid, perm, 1)
            crowd_s = np.take_along_axis(g_crowd[g_index], perm, 1)
            gid_s = np.take_along_axis(g_id[g_index], perm, 1)
            iou_s = np.take_along_axis(iou, perm[:, None, :], 2)  # (B, Dm, Gm)
            busy = np.zeros((B, T, Gm), dtype=bool)
            regular = valid_s & ~ig_s
            ignored = valid_s & ig_s
            rows = np.arange(B)[:, None]
            trows = np.arange(T)[None, :]
            for d in range(Dm):
                active = d_valid[:, d]
                if not active.any():
                    break
                o = np.broadcast_to(iou_s[:, d, None, :], (B, T, Gm))
                choice = np.full((B, T), -1, dtype=np.int64)
                for pool in (
                    regular[:, None, :] & ~busy,
                    ignored[:, None, :] & (crowd_s[:, None, :] | ~busy),
                ):
                    vals = np.where(pool, o, -np.inf)
                    best = vals.max(axis=2)
                    ok = (best >= thr[None, :]) & (choice < 0)
                    last = Gm - 1 - np.argmax((vals == best[..., None])[..., ::-1], axis=2)
                    choice = np.where(ok, last, choice)
                hit = (choice >= 0) & active[:, None]
                c = np.maximum(choice, 0)
                busy[rows, trows, c] |= hit
                det = d_index[:, d]
                gid = np.where(hit, gid_s[rows, c], 0)
                dig = hit & ig_s[rows, c]
                sel = np.flatnonzero(active)
                dt_match[a][:, det[sel]] = gid[sel].T
                dt_ig[a][:, det[sel]] = dig[sel].T


@dataclass
class PairBatch:
    """The (detection, ground truth) pairs of one bucket of (image, category) groups.

    ``d_index`` (B, Dm) / ``g_index`` (B, Gm) index the selected detections / ground truths (``d_sel`` /
    ``g_sel`` map those into the `Instances`), ``d_valid`` / ``g_valid`` mark the real entries; ``bi, di, gi``
    are the flat valid pairs with their instance rows ``dsel, gsel`` and the ground truth's crowd flag
    (``g_crowd`` is that flag per selected ground truth).
    """

    gt: Instances
    dt: Instances
    g_sel: np.ndarray
    d_sel: np.ndarray
    d_index: np.ndarray
    g_index: np.ndarray
    d_valid: np.ndarray
    g_valid: np.ndarray
    bi: np.ndarray
    di: np.ndarray
    gi: np.ndarray
    dsel: np.ndarray
    gsel: np.ndarray
    crowd: np.ndarray
    g_crowd: np.ndarray
    kpt_sigmas: Sequence[float] | None


def _bbox_pair_iou(p: PairBatch, iou: np.ndarray) -> None:
    iou[p.bi, p.di, p.gi] = _box_iou(p.dt.boxes[p.dsel], p.gt.boxes[p.gsel], p.crowd)


def _rotated_pair_iou(p: PairBatch, iou: np.ndarray) -> None:
    """Exact polygon IoU; against a crowd ``i / da`` (the bbox rule of ``maskApi.c``)."""
    assert p.dt.polygons is not None and p.gt.polygons is not None
    d_poly = p.dt.polygons[p.dsel]
    inter = paired_intersection_area(
        torch.from_numpy(d_poly), torch.from_numpy(p.gt.polygons[p.gsel])
    ).numpy()
    da = p.dt.areas[p.dsel]
    union = np.where(p.crowd, da, da + p.gt.areas[p.gsel] - inter)
    with np.errstate(divide="ignore", invalid="ignore"):
        iou[p.bi, p.di, p.gi] = np.where(union > 0, inter / union, 0.0)


def _segm_pair_iou(p: PairBatch, iou: np.ndarray) -> None:
    assert p.dt.rles is not None and p.gt.rles is not None
    for b in range(p.d_index.shape[0]):
        nd_b, ng_b = int(p.d_valid[b].sum()), int(p.g_valid[b].sum())
        d_r = [p.dt.rles[i] for i in p.d_sel[p.d_index[b, :nd_b]]]
        g_r = [p.gt.rles[i] for i in p.g_sel[p.g_index[b, :ng_b]]]
        crowd = [int(c) for c in p.g_crowd[p.g_index[b, :ng_b]]]
        iou[b, :nd_b, :ng_b] = np.asarray(mask_api.iou(d_r, g_r, crowd)).reshape(nd_b, ng_b)


def _keypoints_pair_iou(p: PairBatch, iou: np.ndarray) -> None:
    assert p.dt.keypoints is not None and p.gt.keypoints is not None
    sigmas = np.asarray(p.kpt_sigmas, dtype=np.float64)
    for b in range(p.d_index.shape[0]):
        nd_b, ng_b = int(p.d_valid[b].sum()), int(p.g_valid[b].sum())
        d_k = p.dt.keypoints[p.d_sel[p.d_index[b, :nd_b]]]
        for j in range(ng_b):
            gi_ = p.g_sel[p.g_index[b, j]]
            iou[b, :nd_b, j] = _oks(d_k, p.gt.keypoints[gi_], p.gt.boxes[gi_], float(p.gt.areas[gi_]), sigmas)


#: IoU kind → the function filling a bucket's (B, Dm, Gm) IoU / OKS array (one entry per kind).
PAIR_IOU_KINDS: dict[str, Callable[[PairBatch, np.ndarray], None]] = {
    "bbox": _bbox_pair_iou,
    "segm": _segm_pair_iou,
    "keypoints": _keypoints_pair_iou,
    "rotated": _rotated_pair_iou,
}


def _pair_ious(
    gt: Instances,
    dt: Instances,
    iou_type: str,
    g_sel: np.ndarray,
    d_sel: np.ndarray,
    d_index: np.ndarray,
    g_index: np.ndarray,
    d_valid: np.ndarray,
    g_valid: np.ndarray,
    g_crowd: np.ndarray,
    kpt_sigmas: Sequence[float] | None,
) -> np.ndarray:
    """(B, Dm, Gm) IoU / OKS between each group's detections (score order) and ground truths (annotation order)."""
    B, Dm = d_index.shape
    Gm = g_index.shape[1]
    iou = np.zeros((B, Dm, Gm))
    pair = d_valid[:, :, None] & g_valid[:, None, :]
    bi, di, gi = np.nonzero(pair)
    batch = PairBatch(
        gt=gt,
        dt=dt,
        g_sel=g_sel,
        d_sel=d_sel,
        d_index=d_index,
        g_index=g_index,
        d_valid=d_valid,
        g_valid=g_valid,
        bi=bi,
        di=di,
        gi=gi,
        dsel=d_sel[d_index[bi, di]],
        gsel=g_sel[g_index[bi, gi]],
        crowd=g_crowd[g_index[bi, gi]],
        g_crowd=g_crowd,
        kpt_sigmas=kpt_sigmas,
    )
    PAIR_IOU_KINDS[iou_type](batch, iou)
    return iou
