"""Class-aware "fast" NMS of rotated boxes with ProbIoU.

Rule (shared/fixtures/README.md, post-processing step 2, OBB): sort by confidence; box j is dropped if **any**
higher-scoring box i of the same class — kept or itself suppressed — has ProbIoU(i, j) > iou (no greedy
re-admission). Classes are separated by adding ``class · 7680`` to the box centres.
The pairwise matrix is evaluated in row blocks so that memory stays ``O(block · N)``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from lucid_core.decode.nms import CLASS_OFFSET_PX, MAX_CANDIDATES
from lucid_core.decode.selection import Selection, candidates_above, sort_and_cap
from lucid_core.geometry.rotated import probiou

ROW_BLOCK = 1024


def rotated_nms(rboxes: Tensor, scores: Tensor, iou: float, labels: Tensor | None = None) -> Tensor:
    """Indices of kept boxes (descending score) among ``rboxes`` ``(N, 5)`` with ``scores`` ``(N,)``."""
    if rboxes.ndim != 2 or rboxes.shape[1] != 5:
        raise ValueError(f"rotated_nms: rboxes must be (N, 5), got {tuple(rboxes.shape)}")
    n = int(rboxes.shape[0])
    if n == 0:
        return torch.zeros((0,), dtype=torch.int64, device=rboxes.device)
    order = torch.argsort(scores, descending=True, stable=True)
    boxes = rboxes[order].float().clone()
    if labels is not None:
        boxes[:, :2] += labels[order, None].to(boxes.dtype) * CLASS_OFFSET_PX
    dropped = torch.zeros(n, dtype=torch.bool, device=rboxes.device)
    cols = torch.arange(n, device=rboxes.device)
    for start in range(0, n, ROW_BLOCK):
        rows = torch.arange(start, min(start + ROW_BLOCK, n), device=rboxes.device)
        overlap = probiou(boxes[rows], boxes)
        overlap = overlap.masked_fill(cols[None, :] <= rows[:, None], 0.0)  # only higher-scoring i < j count
        dropped |= (overlap > iou).any(dim=0)
    return order[~dropped]


def decode_rotated_nms(
    rboxes: Tensor,
    scores: Tensor,
    *,
    conf: float = 0.25,
    iou: float = 0.7,
    max_det: int = 300,
    multi_label: bool = False,
    max_candidates: int = MAX_CANDIDATES,
    classes: Tensor | None = None,
    agnostic: bool = False,
) -> Selection:
    """Select anchors of one image: ``rboxes`` ``(A, 5)``, ``scores`` ``(A, nc)`` probabilities; ``classes`` and
    ``agnostic`` as in :func:`lucid_core.decode.nms.decode_nms`."""
    if rboxes.ndim != 2 or rboxes.shape[1] != 5:
        raise ValueError(f"decode_rotated_nms: rboxes must be (A, 5), got {tuple(rboxes.shape)}")
    cand = sort_and_cap(
        candidates_above(scores, conf, multi_label=multi_label, classes=classes), max_candidates
    )
    if len(cand) == 0:
        return cand
    labels = None if agnostic else cand.labels
    keep = rotated_nms(rboxes[cand.anchor_idx], cand.scores, iou, labels=labels)[:max_det]
    return Selection(cand.anchor_idx[keep], cand.scores[keep], cand.labels[keep])
