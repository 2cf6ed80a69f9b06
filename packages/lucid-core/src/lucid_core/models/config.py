"""Model configuration: the JSON-serialisable record from which :func:`build_model` rebuilds a model."""

from __future__ import annotations

from dataclasses import dataclass

from lucid_core.tasks import TASKS as _TASK_TABLE

TASKS = tuple(_TASK_TABLE)  # ("detect", "segment", "pose", "obb"): the task table's order


@dataclass
class ModelConfig:
    """Everything needed to rebuild a model: ``build_model(**dataclasses.asdict(config))``."""

    family: str
    task: str
    scale: str
    num_classes: int
    kpt_shape: tuple[int, int] | None = None  # pose only, e.g. (17, 3)
    num_masks: int | None = None  # segment only (32)
    num_angles: int | None = None  # obb only (1)


@dataclass(frozen=True)
class ScaleRow:
    """One row of a family's compound-scaling table: (depth, width, max_channels)."""

    depth: float
    width: float
    max_channels: int
