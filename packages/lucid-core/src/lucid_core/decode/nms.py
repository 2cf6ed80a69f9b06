"""Class-aware greedy NMS of axis-aligned boxes through ``torchvision.ops.nms``.

Rule (shared/fixtures/README.md, post-processing steps 1-2): per anchor conf = max class probability, keep
conf > thr (strict); greedy NMS where a box is suppressed when its IoU with a kept higher-scoring box **of the
same class** exceeds the IoU threshold, implemented by offsetting every box by ``class · 7680`` px so that
different classes never overlap; at most ``max_det`` boxes in descending confidence.
Documented defaults: validation conf 0.001 / iou 0.7, prediction conf 0.25 / iou 0.7, max_det 300.
"""

from __future__ import annotations

import torchvision
from torch import Tensor

from lucid_core.decode.selection import Selection, candidates_above, sort_and_cap

CLASS_OFFSET_PX = 7680.0
MAX_CANDIDATES = 30000


def decode_nms(
    boxes_xyxy: Tensor,
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
    """Select anchors of one image: ``boxes_xyxy`` ``(A, 4)`` pixels, ``scores`` ``(A, nc)`` probabilities.

    ``multi_label=True`` lets one anchor contribute every class above ``conf`` (each pair is an NMS candidate).
    At most ``max_candidates`` highest-scoring candidates enter NMS. ``classes`` (int64 ids): only candidates of
    those classes enter NMS, so an unlisted class never suppresses a listed one, and ``max_det`` counts the kept
    ones. ``agnostic=True``: class-agnostic NMS (boxes of different classes suppress each other; each keeps its
    label), the reference's ``agnostic_nms``.
    """
    if boxes_xyxy.ndim != 2 or boxes_xyxy.shape[1] != 4:
        raise ValueError(f"decode_nms: boxes must be (A, 4), got {tuple(boxes_xyxy.shape)}")
    if scores.ndim != 2 or scores.shape[0] != boxes_xyxy.shape[0]:
        raise ValueError(
            f"decode_nms: scores must be (A, nc) with A={boxes_xyxy.shape[0]}, got {tuple(scores.shape)}"
        )
    cand = sort_and_cap(
        candidates_above(scores, conf, multi_label=multi_label, classes=classes), max_candidates
    )
    if len(cand) == 0:
        return cand
    boxes = boxes_xyxy[cand.anchor_idx].float()
    offset_boxes = boxes if agnostic else boxes + cand.labels[:, None].to(boxes.dtype) * CLASS_OFFSET_PX
    keep = torchvision.ops.nms(offset_boxes, cand.scores.float(), iou)[:max_det]
    return Selection(cand.anchor_idx[keep], cand.scores[keep], cand.labels[keep])
