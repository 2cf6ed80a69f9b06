"""Tasks as plugins: one :class:`~lucid_core.tasks.base.Task` object per task, registered by name.

``detect``, ``segment``, ``pose``, ``obb`` and ``classify`` are registered on import; :func:`register_task` adds another (a
:class:`Task` subclass instance with its head and objective) without editing any package file. Everything
task-specific in lucid-core is a method of the task object (docs/INTERFACES.md, "Tasks").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lucid_core.tasks.base import DecodeLayout, Task, TrainingObjective, int_attribute, metric_key
from lucid_core.tasks.classify import CLASSIFY, IMAGE_LABEL, ClassificationLoss, ClassifyTask
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
    "IMAGE_LABEL",
    "TASKS",
    "ClassificationLoss",
    "ClassifyTask",
    "DecodeLayout",
    "DetectTask",
    "OBBTask",
    "PoseTask",
    "SegmentTask",
    "Task",
    "TaskSpec",
    "TrainingObjective",
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
) -> TrainingObjective:
    """The training objective of ``model``, built by its task (:meth:`Task.build_objective`): for the dense
    tasks one-to-many, or YOLO26's end-to-end ``o2m · one2many + o2o · one2one`` with the branch-weight schedule
    over ``epochs``; for classify the cross-entropy (:class:`ClassificationLoss`).

    ``gains``: loss gains by name (missing ones take the task's reference defaults); ``assigner``: assigner
    constants (``topk``, ``alpha``, ``beta``); ``task_options``: the task's own objective options (e.g.
    ``sigmas`` for pose, ``overlap_mask`` for segment).
    """
    return get_task(str(model.task)).build_objective(
        model,
        gains=dict(gains or {}),
        epochs=epochs,
        assigner=dict(assigner or {}),
        o2m_init=o2m_init,
        o2m_final=o2m_final,
        **task_options,
    )


for _task in (DETECT, SEGMENT, POSE, OBB, CLASSIFY):
    register_task(_task, replace=True)
