"""The reference's default loss gains and the per-branch assigner constants every task objective shares
(``shared/fixtures/README.md``: ``meta.hyp`` and ``assigner_params``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["DETECTION_GAINS", "branch_topk", "resolve_gains"]

#: box, classification and distribution-focal (or YOLO26's L1) gains of every task's detection terms
DETECTION_GAINS: dict[str, float] = {"box": 7.5, "cls": 0.5, "dfl": 1.5}


def resolve_gains(defaults: Mapping[str, float], gains: Mapping[str, Any] | None) -> dict[str, float]:
    """``defaults`` overridden by the known keys of ``gains`` (unknown keys are ignored)."""
    given = dict(gains or {})
    return {key: float(given.get(key, value)) for key, value in defaults.items()}


def branch_topk(one2one: bool, topk: int, o2o_topk: int, o2o_topk2: int) -> tuple[int, int | None]:
    """``(topk, topk2)`` of the assigner of one branch: the one-to-one branch keeps top-``o2o_topk`` then
    ``o2o_topk2`` anchors per ground truth, the one-to-many branch top-``topk``."""
    return (o2o_topk, o2o_topk2) if one2one else (topk, None)
