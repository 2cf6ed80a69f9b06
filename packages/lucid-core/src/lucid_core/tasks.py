"""The task table: one :class:`TaskSpec` per task, read by the model registry, the objectives, the data targets,
the evaluation and the Lightning module (``shared/design/task-seam.md``).

Adding a task means one row here and one objective module under :mod:`lucid_core.loss.terms`; nothing else
dispatches on the task name. Metric keys and fitness follow the reference's documented behaviour (issue 12/15:
``best`` is chosen by the sum of the task's mAP50-95 values, e.g. box + mask for segment).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["TASKS", "TaskSpec", "get_task", "metric_key"]


# IoU kind -> metric prefix of its mAP values ("" keeps the historical detection keys metrics/mAP50(-95)).
_METRIC_PREFIX = {"bbox": "", "rotated": "", "segm": "mask/", "keypoints": "pose/"}


def metric_key(iou_type: str, name: str) -> str:
    """``metrics/<prefix><name>`` for one IoU kind, e.g. ``metric_key("segm", "mAP50-95")`` ->
    ``metrics/mask/mAP50-95``."""
    if iou_type not in _METRIC_PREFIX:
        raise ValueError(
            f"metric_key: unknown IoU type {iou_type!r}; expected one of {sorted(_METRIC_PREFIX)}"
        )
    return f"metrics/{_METRIC_PREFIX[iou_type]}{name}"


@dataclass(frozen=True)
class TaskSpec:
    """Everything that differs between tasks.

    Attributes:
        name: ``detect`` | ``segment`` | ``pose`` | ``obb``.
        suffix: the reference's model-name suffix (``yolo26n-seg``).
        options: ``build_model`` keyword options that apply to this task (with their defaults).
        objective: ``"module:function"`` of the objective factory, imported lazily. The factory is called as
            ``factory(model, gains=..., one2one=bool, **assigner options)`` and returns a branch objective
            (:class:`lucid_core.loss.objective.BranchObjective`).
        iou_types: what the evaluation scores, first = the box kind (``bbox`` or ``rotated``).
        target_fields: optional ``Targets``/batch fields this task's objective reads.
    """

    name: str
    suffix: str
    options: tuple[tuple[str, Any], ...]
    objective: str
    iou_types: tuple[str, ...]
    target_fields: tuple[str, ...] = ()

    def option_names(self) -> set[str]:
        return {k for k, _ in self.options}

    def option_defaults(self) -> dict[str, Any]:
        return dict(self.options)

    def objective_factory(self) -> Callable[..., Any]:
        """The branch-objective factory of this task (imported on first use)."""
        module, _, attr = self.objective.partition(":")
        factory: Callable[..., Any] = getattr(importlib.import_module(module), attr)
        return factory

    def metric_keys(self, name: str = "mAP50-95") -> tuple[str, ...]:
        """Logged metric keys of ``name`` for every IoU type, e.g. box and mask mAP50-95 for segment."""
        return tuple(metric_key(t, name) for t in self.iou_types)

    def fitness(self, metrics: dict[str, float]) -> float:
        """Fitness for ``best``: the sum of the task's mAP50-95 values (reference: box + mask for segment,
        box + pose for pose; detect and obb: their single mAP50-95)."""
        return float(sum(float(metrics.get(k, 0.0)) for k in self.metric_keys("mAP50-95")))


TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        TaskSpec(
            name="detect",
            suffix="",
            options=(),
            objective="lucid_core.loss.detection:detection_objective",
            iou_types=("bbox",),
        ),
        TaskSpec(
            name="segment",
            suffix="-seg",
            options=(("num_masks", 32),),
            objective="lucid_core.loss.terms.segment:segment_objective",
            iou_types=("bbox", "segm"),
            target_fields=("masks",),
        ),
        TaskSpec(
            name="pose",
            suffix="-pose",
            options=(("kpt_shape", (17, 3)),),
            objective="lucid_core.loss.terms.pose:pose_objective",
            iou_types=("bbox", "keypoints"),
            target_fields=("keypoints",),
        ),
        TaskSpec(
            name="obb",
            suffix="-obb",
            options=(("num_angles", 1),),
            objective="lucid_core.loss.terms.obb:obb_objective",
            iou_types=("rotated",),
            target_fields=("rboxes",),
        ),
    )
}


def get_task(name: str) -> TaskSpec:
    """The :class:`TaskSpec` of ``name``; a clear error naming the known tasks otherwise."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; expected one of {sorted(TASKS)}")
    return TASKS[name]
