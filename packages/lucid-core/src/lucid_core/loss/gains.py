"""The reference's default loss gains and the per-branch assigner constants every task objective shares
(``shared/fixtures/README.md``: ``meta.hyp`` and ``assigner_params``), and the opt-in per-class weights of the
classification term (``gains["cls_weights"]``; docs/TRAINING.md, "Class weighting")."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["CLS_WEIGHTS", "DETECTION_GAINS", "branch_topk", "class_weights", "resolve_gains"]

#: box, classification and distribution-focal (or YOLO26's L1) gains of every task's detection terms
DETECTION_GAINS: dict[str, float] = {"box": 7.5, "cls": 0.5, "dfl": 1.5}

#: the key of ``gains`` holding one classification weight per class (absent: every class weighs 1)
CLS_WEIGHTS = "cls_weights"


def resolve_gains(defaults: Mapping[str, float], gains: Mapping[str, Any] | None) -> dict[str, float]:
    """``defaults`` overridden by the known keys of ``gains`` (unknown keys are ignored)."""
    given = dict(gains or {})
    return {key: float(given.get(key, value)) for key, value in defaults.items()}


def branch_topk(one2one: bool, topk: int, o2o_topk: int, o2o_topk2: int) -> tuple[int, int | None]:
    """``(topk, topk2)`` of the assigner of one branch: the one-to-one branch keeps top-``o2o_topk`` then
    ``o2o_topk2`` anchors per ground truth, the one-to-many branch top-``topk``."""
    return (o2o_topk, o2o_topk2) if one2one else (topk, None)


def class_weights(gains: Mapping[str, Any] | None, num_classes: int) -> tuple[float, ...] | None:
    """The per-class weights of the classification term in ``gains["cls_weights"]``, or ``None`` (unweighted).

    The weight of class ``c`` multiplies the binary cross-entropy of logit ``c`` at every anchor (as the ``weight``
    of ``torch.nn.BCEWithLogitsLoss``, broadcast over the class axis); docs/TRAINING.md, "Class weighting". A
    ``ValueError`` names a wrong count or a weight that is negative or not finite.
    """
    given = (gains or {}).get(CLS_WEIGHTS)
    if given is None:
        return None
    if isinstance(given, str | bytes) or not hasattr(given, "__len__"):
        raise ValueError(f"loss gains: {CLS_WEIGHTS} must be one number per class, got {given!r}")
    weights = tuple(float(w) for w in given)
    if len(weights) != num_classes:
        raise ValueError(f"loss gains: {CLS_WEIGHTS} has {len(weights)} weights for {num_classes} classes")
    bad = [w for w in weights if not math.isfinite(w) or w < 0]
    if bad:
        raise ValueError(f"loss gains: {CLS_WEIGHTS} must be finite and >= 0, got {bad[0]!r}")
    return weights
