"""Tasks as plugins: one :class:`~lucid_core.tasks.base.Task` object per task, registered by name.

``detect``, ``segment``, ``pose`` and ``obb`` are registered on import; :func:`register_task` adds another (a
:class:`Task` subclass instance with its head and objective) without editing any package file. Everything
task-specific in lucid-core is a method of the task object (docs/INTERFACES.md, "Tasks").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lucid_core.loss.objective import EndToEndObjective, OneToManyObjective
from lucid_core.loss.schedule import BranchWeightSchedule
from lucid_core.tasks.base import DecodeLayout, Task, int_attribute, metric_key
from lucid_core.tasks.detect import DETECT, DetectTask
from lucid_core.tasks.obb import OBB, OBBTask
from lucid_core.tasks.pose import POSE, PoseTask
from lucid_core.tasks.registry import (
    TASKS,
    get_task,
    register_task,
    registered_tasks,
    task_of_reference_head,
    unregister_task,
)
from lucid_core.tasks.segment import SEGMENT, SegmentTask

__all__ = [
    "TASKS",
    "DecodeLayout",
    "DetectTask",
    "OBBTask",
    "PoseTask",
    "SegmentTask",
    "Task",
    "TaskSpec",
    "build_objective",
    "get_task",
    "int_attribute",
    "metric_key",
    "register_task",
    "registered_tasks",
    "task_of_reference_head",
    "unregister_task",
]

#: The former name of :class:`Task`.
TaskSpec = Task


def build_objective(
    model: Any,
    *,
    gains: Mapping[str, float] | None = None,
    epochs: int = 100,
    assigner: Mapping[str, Any] | None = None,
    o2m_init: float = 0.8,
    o2m_final: float = 0.1,
    **task_options: Any,
) -> OneToManyObjective | EndToEndObjective:
    """The training objective of ``model`` (its ``task`` decides the branch objective): one-to-many, or YOLO26's
    end-to-end ``o2m · one2many + o2o · one2one`` with the branch-weight schedule over ``epochs``.

    ``gains``: loss gains by name (missing ones take the task's reference defaults); ``assigner``: assigner
    constants (``topk``, ``alpha``, ``beta``); ``task_options``: the task's own objective options (e.g.
    ``sigmas`` for pose, ``overlap_mask`` for segment).
    """
    task = get_task(str(model.task))
    common = {"gains": dict(gains or {}), **dict(assigner or {}), **task_options}
    if bool(getattr(model, "end2end", False)):
        return EndToEndObjective(
            task.branch_objective(model, one2one=False, **common),
            task.branch_objective(model, one2one=True, **common),
            BranchWeightSchedule(epochs=epochs, o2m_init=o2m_init, o2m_final=o2m_final),
        )
    return OneToManyObjective(task.branch_objective(model, one2one=False, **common))


for _task in (DETECT, SEGMENT, POSE, OBB):
    register_task(_task, replace=True)
