"""One-to-one decoding by top-k without suppression (YOLO26 end-to-end head).

The one-to-one branch is trained with a one-anchor-per-object assignment, so its outputs are used directly
(max_det 300 by default). The reference's rule,
checked row by row against ``pred_e2e.output_fused`` of ``shared/fixtures/import_yolo26n-seg-shapes.pt`` (all
``min(300, A)`` rows, classes exact):

1. the k = min(max_det, A) anchors with the highest best-class score;
2. the k highest of those anchors' (anchor, class) scores, so one anchor may be reported with two classes;
3. the confidence threshold (strict ``>``). Nothing is suppressed: overlapping duplicates are all kept.

The reference's ``classes=`` and ``agnostic_nms=`` also act on this path (measured black-box on 8.4.190's
documented ``predict(nms=False)`` with the shapes segmentation checkpoint, conf 0.05): ``classes`` restricts the
scores to those classes *before* step 1 (with ``max_det=2`` it returns the two best pairs of the listed class,
not the listed pairs among the two best anchors), and ``agnostic`` reports each of the k anchors once, with its
best class (step 2 without the second pair of an anchor).
"""

from __future__ import annotations

from torch import Tensor

from lucid_core.decode.selection import Selection


def decode_topk(
    scores: Tensor,
    *,
    conf: float = 0.25,
    max_det: int = 300,
    classes: Tensor | None = None,
    agnostic: bool = False,
) -> Selection:
    """Select (anchor, class) pairs from ``scores`` ``(A, nc)`` class probabilities of one image; ``classes``
    (int64 ids) and ``agnostic`` as in the module docstring."""
    if scores.ndim != 2:
        raise ValueError(f"decode_topk: scores must be (A, nc), got {tuple(scores.shape)}")
    if classes is not None:
        sel = decode_topk(scores[:, classes], conf=conf, max_det=max_det, agnostic=agnostic)
        return Selection(sel.anchor_idx, sel.scores, classes[sel.labels])
    num_anchors, num_classes = int(scores.shape[0]), int(scores.shape[1])
    k = min(max_det, num_anchors)
    best, best_class = scores.max(dim=1)
    top_best, anchors = best.topk(k, sorted=True)  # step 1
    if agnostic:  # each anchor once, with its best class
        keep = top_best > conf
        return Selection(anchor_idx=anchors[keep], scores=top_best[keep], labels=best_class[anchors[keep]])
    top_scores, flat = scores[anchors].flatten().topk(min(k, k * num_classes), sorted=True)  # step 2
    keep = top_scores > conf
    flat = flat[keep]
    return Selection(
        anchor_idx=anchors[flat // num_classes], scores=top_scores[keep], labels=flat % num_classes
    )
