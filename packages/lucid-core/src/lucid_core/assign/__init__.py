"""Label assignment for dense detection objectives."""

from lucid_core.assign.task_aligned import Assignment, DenseStages, TaskAlignedAssigner

__all__ = ["Assignment", "DenseStages", "TaskAlignedAssigner"]
