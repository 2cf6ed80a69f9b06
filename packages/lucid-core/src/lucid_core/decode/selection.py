"""The result of a decoder's anchor selection for one image: which anchors survive, with which score and class."""

from __future__ import annotations

from collections.abc import Sequence
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


def candidates_above(
    scores: Tensor, conf: float, *, multi_label: bool, classes: Tensor | None = None
) -> Selection:
    """Anchor/class pairs whose probability is strictly above ``conf`` (unordered).

    ``scores`` is ``(A, nc)``. Single-label: one pair per anchor, its best class (shared/fixtures/README.md,
    post-processing step 1). Multi-label: every (anchor, class) pair above the threshold. ``classes`` (int64
    class ids, see :func:`class_filter`): only the pairs of those classes are kept; single-label keeps an anchor
    only when its *best* class is listed (the reference's ``classes=`` as measured black-box: the result equals
    the unfiltered one restricted to those classes).
    """
    if multi_label:
        anchor_idx, labels = torch.nonzero(scores > conf, as_tuple=True)
        if classes is not None:
            listed = torch.isin(labels, classes)
            anchor_idx, labels = anchor_idx[listed], labels[listed]
        return Selection(anchor_idx=anchor_idx, scores=scores[anchor_idx, labels], labels=labels)
    best, labels = scores.max(dim=1)
    above = best > conf
    if classes is not None:
        above &= torch.isin(labels, classes)
    keep = torch.nonzero(above, as_tuple=True)[0]
    return Selection(anchor_idx=keep, scores=best[keep], labels=labels[keep])


def class_filter(classes: Sequence[int] | Tensor | None, nc: int, device: torch.device) -> Tensor | None:
    """The ``classes=`` argument of the decoders as an int64 tensor on ``device`` (None: every class).

    Raises ValueError naming the value when the list is empty or holds an id outside ``0 .. nc-1``.
    """
    if classes is None:
        return None
    ids = [int(c) for c in (classes.tolist() if isinstance(classes, Tensor) else classes)]
    if not ids:
        raise ValueError("classes: the list is empty; pass None to keep every class")
    bad = [c for c in ids if not 0 <= c < nc]
    if bad:
        raise ValueError(f"classes: {bad} not a class id of this model (it has {nc} classes: 0..{nc - 1})")
    return torch.tensor(sorted(set(ids)), dtype=torch.int64, device=device)


def sort_and_cap(selection: Selection, limit: int) -> Selection:
    """Sort by descending score and keep at most ``limit`` entries."""
    order = torch.argsort(selection.scores, descending=True, stable=True)[:limit]
    return Selection(selection.anchor_idx[order], selection.scores[order], selection.labels[order])
