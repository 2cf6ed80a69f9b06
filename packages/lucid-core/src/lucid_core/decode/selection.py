"""The result of a decoder's anchor selection for one image: which anchors survive, with which score and class."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Selection:
    """Kept anchors of one image in descending score order."""

    anchor_idx: Tensor  # (N,) int64 column of the dense prediction
    scores: Tensor  # (N,) float
    labels: Tensor  # (N,) int64

    def __len__(self) -> int:
        return int(self.anchor_idx.shape[0])

    @classmethod
    def empty(cls, device: torch.device | str | None = None) -> Selection:
        return cls(
            anchor_idx=torch.zeros((0,), dtype=torch.int64, device=device),
            scores=torch.zeros((0,), device=device),
            labels=torch.zeros((0,), dtype=torch.int64, device=device),
        )


def candidates_above(scores: Tensor, conf: float, *, multi_label: bool) -> Selection:
    """Anchor/class pairs whose probability is strictly above ``conf`` (unordered).

    ``scores`` is ``(A, nc)``. Single-label: one pair per anchor, its best class (shared/fixtures/README.md,
    post-processing step 1). Multi-label: every (anchor, class) pair above the threshold.
    """
    if multi_label:
        anchor_idx, labels = torch.nonzero(scores > conf, as_tuple=True)
        return Selection(anchor_idx=anchor_idx, scores=scores[anchor_idx, labels], labels=labels)
    best, labels = scores.max(dim=1)
    keep = torch.nonzero(best > conf, as_tuple=True)[0]
    return Selection(anchor_idx=keep, scores=best[keep], labels=labels[keep])


def sort_and_cap(selection: Selection, limit: int) -> Selection:
    """Sort by descending score and keep at most ``limit`` entries."""
    order = torch.argsort(selection.scores, descending=True, stable=True)[:limit]
    return Selection(selection.anchor_idx[order], selection.scores[order], selection.labels[order])
