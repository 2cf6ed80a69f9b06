"""The task object: everything task-specific that lucid-core's model, objective, decoder and importer read.

A task is one :class:`Task` (subclass) instance registered with :func:`lucid_core.tasks.register_task`. The model
registry asks it for the head, the objective factory asks it for the branch objective, the decoder for the extra
rows and the result fields they become, the importer for the options stored in a reference head; evaluation reads
``iou_types`` and the data pipeline ``target_fields``. Nothing else dispatches on the task name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from torch import Tensor, nn

from lucid_core.geometry.letterbox import LetterboxInfo
from lucid_core.loss.objective import EndToEndObjective, OneToManyObjective
from lucid_core.loss.schedule import BranchWeightSchedule
from lucid_core.nn.conv import BN_EPS, BN_MOMENTUM
from lucid_core.results import Detections

if TYPE_CHECKING:
    from lucid_core.interop.unpickler import StandInModule
    from lucid_core.models.config import ModelConfig, ScaleRow
    from lucid_core.models.family import FamilySpec
    from lucid_core.models.graph import LayerSpec

__all__ = ["IMAGE_LABEL", "DecodeLayout", "Task", "TrainingObjective", "int_attribute", "metric_key"]

#: The target-field marker of an image-level task: one class index per image instead of instances.
IMAGE_LABEL = "image_label"

# IoU kind -> metric prefix of its mAP values ("" keeps the detection keys metrics/mAP50(-95)).
_METRIC_PREFIX = {"bbox": "", "rotated": "", "segm": "mask/", "keypoints": "pose/"}


def metric_key(iou_type: str, name: str) -> str:
    """``metrics/<prefix><name>`` for one IoU kind, e.g. ``metric_key("segm", "mAP50-95")`` ->
    ``metrics/mask/mAP50-95``."""
    if iou_type not in _METRIC_PREFIX:
        raise ValueError(
            f"metric_key: unknown IoU type {iou_type!r}; expected one of {sorted(_METRIC_PREFIX)}"
        )
    return f"metrics/{_METRIC_PREFIX[iou_type]}{name}"


def int_attribute(module: StandInModule, name: str) -> int | None:
    """The pickled attribute ``name`` of a reference module if it is a number, else ``None``."""
    value = module.__dict__.get(name)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class DecodeLayout:
    """Per-call decode facts a task derived from the dense output: keypoint layout and the input size."""

    kpt_shape: tuple[int, int] | None = None
    input_hw: tuple[int, int] | None = None


class TrainingObjective(Protocol):
    """What training calls: ``objective(output, batch) -> (total, loss_items)``, items named by ``loss_names``."""

    loss_names: tuple[str, ...]

    def __call__(self, output: Any, batch: Mapping[str, Any]) -> tuple[Tensor, Tensor]: ...


@dataclass(frozen=True)
class Task:
    """One task: its names, options and the hooks lucid-core calls. Subclass and override the hooks.

    Attributes:
        name: the task's name (``detect``, ``segment``, …), the key users pass.
        suffix: the reference's model-name suffix (``-seg``).
        options: ``build_model`` keyword options of this task with their defaults.
        iou_types: what evaluation scores, the box kind (``bbox`` or ``rotated``) first.
        target_fields: the per-instance target fields (besides boxes and classes) the data pipeline must produce
            and the objective reads: ``masks``, ``keypoints``, ``rboxes``.
        reference_head: the marker in a reference checkpoint's head class name (``Segment``).
        batch_norm: ``(eps, momentum)`` of every BatchNorm of this task's models (the reference's detection-model
            constants; its classification models keep PyTorch's defaults).
        validation_batch_factor: images per in-training validation batch, as a multiple of the training batch
            (the reference's validators: 2; its rotated-box validator: 1, read from its batch count). The
            validation losses are per-batch means, so the batch size is part of what they measure.
    """

    name: str
    suffix: str = ""
    options: tuple[tuple[str, Any], ...] = ()
    iou_types: tuple[str, ...] = ("bbox",)
    target_fields: tuple[str, ...] = ()
    reference_head: str = ""
    batch_norm: tuple[float, float] = (BN_EPS, BN_MOMENTUM)
    validation_batch_factor: int = 2

    # -- names and metrics -------------------------------------------------------------------------------------
    def option_names(self) -> set[str]:
        return {k for k, _ in self.options}

    def option_defaults(self) -> dict[str, Any]:
        return dict(self.options)

    @property
    def rotated(self) -> bool:
        """Whether the task's boxes are rotated (cx, cy, w, h, θ) rather than axis-aligned."""
        return "rboxes" in self.target_fields

    @property
    def image_level(self) -> bool:
        """Whether the task labels whole images (one class index per image, :data:`IMAGE_LABEL`) instead of
        instances: its data is a folder per class, its scores are accuracies, not mAP."""
        return IMAGE_LABEL in self.target_fields

    @property
    def default_imgsz(self) -> int:
        """The reference's documented default training image size for this task (640; classification 224)."""
        return 640

    @property
    def letterbox(self) -> bool:
        """Whether the network input is the letterboxed image (True, the dense tasks) or the image resized on
        its shorter side and centre-cropped (False: image-level tasks, the reference's classification
        preprocessing, docs/TRAINING.md "Classification"). Override to choose otherwise."""
        return not self.image_level

    def metric_keys(self, name: str = "mAP50-95") -> tuple[str, ...]:
        """Logged metric keys of ``name`` for every IoU type, e.g. box and mask mAP50-95 for segment."""
        return tuple(metric_key(t, name) for t in self.iou_types)

    def fitness(self, metrics: Mapping[str, float]) -> float:
        """Fitness for ``best``: the sum of the task's mAP50-95 values (the reference's rule)."""
        return float(sum(float(metrics.get(k, 0.0)) for k in self.metric_keys("mAP50-95")))

    # -- model -------------------------------------------------------------------------------------------------
    def configure(self, config: ModelConfig, options: Mapping[str, Any]) -> None:
        """Write this task's options (``options`` over the defaults) into ``config``."""
        for key, default in self.options:
            setattr(config, key, options.get(key, default))

    def layer_graph(self, family: FamilySpec) -> tuple[tuple[LayerSpec, ...], tuple[int, ...]]:
        """``(layers, head_sources)`` of this task's models of ``family``: by default backbone + neck."""
        return family.layers, family.head_sources

    def scale_row(self, family: FamilySpec, scale: str) -> ScaleRow:
        """The compound-scaling row of ``scale`` for this task's models of ``family``."""
        return family.scales[scale]

    def build_head(
        self, common: dict[str, Any], config: ModelConfig, family: FamilySpec, row: ScaleRow
    ) -> nn.Module:
        """The head of a model of this task; ``common`` holds the detection head's keyword arguments. The head
        has ``strides``, ``end2end``, ``reg_max``, ``deployed`` and ``to_deployed`` (``YOLOModel`` reads them)."""
        raise NotImplementedError(f"task {self.name!r} builds no head")

    # -- objective ---------------------------------------------------------------------------------------------
    def branch_objective(self, model: Any, *, one2one: bool, **options: Any) -> Any:
        """The loss of one head branch of ``model`` (a :class:`lucid_core.loss.objective.BranchObjective`).

        ``options``: ``gains`` (by name) and the assigner constants (``topk``, ``alpha``, ``beta``, ``o2o_topk``,
        ``o2o_topk2``), plus the task's own objective options; unknown keys are ignored.
        """
        raise NotImplementedError(f"task {self.name!r} has no objective")

    def build_objective(
        self,
        model: Any,
        *,
        gains: Mapping[str, float],
        epochs: int,
        assigner: Mapping[str, Any],
        o2m_init: float,
        o2m_final: float,
        **task_options: Any,
    ) -> TrainingObjective:
        """The training objective of ``model`` (:func:`lucid_core.tasks.build_objective`): one-to-many, or
        YOLO26's end-to-end combination of two :meth:`branch_objective` with the branch-weight schedule."""
        common = {"gains": dict(gains), **dict(assigner), **task_options}
        if bool(getattr(model, "end2end", False)):
            return EndToEndObjective(
                self.branch_objective(model, one2one=False, **common),
                self.branch_objective(model, one2one=True, **common),
                BranchWeightSchedule(epochs=epochs, o2m_init=o2m_init, o2m_final=o2m_final),
            )
        return OneToManyObjective(self.branch_objective(model, one2one=False, **common))

    # -- decoding ----------------------------------------------------------------------------------------------
    def decode_output(self, pred: Tensor, *, nc: int) -> list[Detections] | None:
        """Per-image results of an eval output this task decodes itself; ``None``: the dense box decode."""
        return None

    def decode_layout(
        self,
        extra: int,
        *,
        kpt_shape: tuple[int, int] | None,
        proto: Tensor | None,
        input_hw: tuple[int, int] | None,
    ) -> tuple[int | None, DecodeLayout]:
        """``(expected extra rows or None for any, layout)`` for a dense output with ``extra`` task rows."""
        return 0, DecodeLayout(kpt_shape, input_hw)

    def rotated_boxes(self, xywh: Tensor, extras: Tensor) -> Tensor | None:
        """``(A, 5)`` rotated boxes of every anchor, or ``None`` for an axis-aligned task."""
        return None

    def attach(
        self,
        det: Detections,
        extras: Tensor,
        *,
        index: int,
        proto: Tensor | None,
        layout: DecodeLayout,
        retina_letterbox: LetterboxInfo | None,
    ) -> Detections:
        """Add the task's result fields from the selected detections' extra rows ``extras`` ``(N, extra)``."""
        return det

    # -- reference checkpoints ---------------------------------------------------------------------------------
    def reference_num_classes(
        self, head: StandInModule, state: Mapping[str, Tensor], head_prefix: str
    ) -> int | None:
        """The class count of a reference checkpoint's head of this task (its ``nc`` attribute)."""
        return int_attribute(head, "nc")

    def reference_strides(self, family: FamilySpec) -> tuple[int, ...] | None:
        """The strides a reference checkpoint of this task stores for ``family`` (``None``: not checked)."""
        return family.strides

    def reference_options(
        self, head: StandInModule, state: Mapping[str, Tensor], head_prefix: str
    ) -> dict[str, Any]:
        """``build_model`` options stored in a reference checkpoint's head of this task."""
        return {}
