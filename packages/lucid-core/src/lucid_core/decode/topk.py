"""One-to-one decoding by top-k without suppression (YOLO26 end-to-end head).

The one-to-one branch is trained with a one-anchor-per-object assignment, so its outputs are used directly
(issue 3, "one-to-one branch decoded by top-k without suppression"; max_det 300 by default). The reference's rule,
checked row by row against ``pred_e2e.output_fused`` of ``shared/fixtures/import_yolo26n-seg-shapes.pt`` (all
``min(300, A)`` rows, classes exact):

1. the k = min(max_det, A) anchors with the highest best-class score;
2. the k highest of those anchors' (anchor, class) scores, so one anchor may be reported with two classes;
3. the confidence threshold (strict ``>``). Nothing is suppressed: overlapping duplicates are all kept.
"""

from __future__ import annotations

from torch import Tensor

from lucid_core.decode.selection import Selection


def decode_topk(scores: Tensor, *, conf: float = 0.25, max_det: int = 300) -> Selection:
    """Select (anchor, class) pairs from ``scores`` ``(A, nc)`` class probabilities of one image."""
    if scores.ndim != 2:
        raise ValueError(f"decode_topk: scores must be (A, nc), got {tuple(scores.shape)}")
    num_anchors, num_classes = int(scores.shape[0]), int(scores.shape[1])
    k = min(max_det, num_anchors)
    anchors = scores.max(dim=1).values.topk(k, sorted=True).indices  # step 1
    top_scores, flat = scores[anchors].flatten().topk(min(k, k * num_classes), sorted=True)  # step 2
    keep = top_scores > conf
    flat = flat[keep]
    return Selection(
        anchor_idx=anchors[flat // num_classes], scores=top_scores[keep], labels=flat % num_classes
    )
