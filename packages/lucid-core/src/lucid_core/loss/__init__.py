"""Detection objectives: dense task-aligned loss (one-to-many) and the YOLO26 end-to-end combination."""

from lucid_core.loss.detection import (
    BranchLoss,
    DetectionLoss,
    E2EDetectionLoss,
    E2ELossResult,
    detection_branch_loss,
    distribution_focal_loss,
    normalised_l1_loss,
)
from lucid_core.loss.schedule import BranchWeightSchedule
from lucid_core.loss.targets import PaddedTargets, pack_targets

__all__ = [
    "BranchLoss",
    "BranchWeightSchedule",
    "DetectionLoss",
    "E2EDetectionLoss",
    "E2ELossResult",
    "PaddedTargets",
    "detection_branch_loss",
    "distribution_focal_loss",
    "normalised_l1_loss",
    "pack_targets",
]
