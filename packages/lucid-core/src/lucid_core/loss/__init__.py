"""Training objectives: the detection terms, the task terms (``lucid_core.loss.terms``) and their combination
(one-to-many, or YOLO26's end-to-end) through the task seam (:mod:`lucid_core.loss.objective`)."""

from lucid_core.loss.detection import (
    BranchLoss,
    DetectionLoss,
    detection_branch_loss,
    detection_objective,
    distribution_focal_loss,
    normalised_l1_loss,
)
from lucid_core.loss.objective import (
    BranchObjective,
    E2EDetectionLoss,
    E2ELossResult,
    EndToEndObjective,
    OneToManyObjective,
)
from lucid_core.loss.schedule import BranchWeightSchedule
from lucid_core.loss.targets import PaddedTargets, pack_targets

__all__ = [
    "BranchLoss",
    "BranchObjective",
    "BranchWeightSchedule",
    "DetectionLoss",
    "E2EDetectionLoss",
    "E2ELossResult",
    "EndToEndObjective",
    "OneToManyObjective",
    "PaddedTargets",
    "detection_branch_loss",
    "detection_objective",
    "distribution_focal_loss",
    "normalised_l1_loss",
    "pack_targets",
]
