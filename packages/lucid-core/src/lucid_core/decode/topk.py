"""One-to-one decoding by top-k without suppression (YOLO26 end-to-end head).

The one-to-one branch is trained with a one-anchor-per-object assignment, so its outputs are used directly:
each anchor contributes its best class, the ``max_det`` highest-scoring anchors are kept, then the confidence
threshold (strict ``>``) is applied. Nothing is suppressed, so overlapping duplicates are all kept
(issue 3, "one-to-one branch decoded by top-k without suppression"; max_det 300 by default).
"""

from __future__ import annotations

from torch import Tensor

from lucid_core.decode.selection import Selection


def decode_topk(scores: Tensor, *, conf: float = 0.25, max_det: int = 300) -> Selection:
    """Select anchors from ``scores`` ``(A, nc)`` class probabilities of one image."""
    if scores.ndim != 2:
        raise ValueError(f"decode_topk: scores must be (A, nc), got {tuple(scores.shape)}")
    best, labels = scores.max(dim=1)
    k = min(max_det, int(best.shape[0]))
    top_scores, top_idx = best.topk(k, sorted=True)
    keep = top_scores > conf
    return Selection(anchor_idx=top_idx[keep], scores=top_scores[keep], labels=labels[top_idx[keep]])
