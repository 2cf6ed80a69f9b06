"""Label assignment for dense detection objectives."""

from lucid_core.assign.task_aligned import Assignment, TaskAlignedAssigner

__all__ = ["Assignment", "TaskAlignedAssigner"]
