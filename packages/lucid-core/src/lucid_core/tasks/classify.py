"""Classification: one class per image, from the family's backbone and a pooled linear head.

The model is the family's backbone without its spatial pyramid pooling (``SPPF``), then
:class:`~lucid_core.heads.classify.ClassifyHead` (shared/fixtures/classify_params.json: the reference's
``<family><scale>-cls`` models, layer by layer). Train mode gives logits, eval mode probabilities; the objective is
the cross-entropy; a decoded image is an empty :class:`~lucid_core.results.Detections` carrying ``probs``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import Tensor

from lucid_core.heads.classify import ClassifyHead
from lucid_core.results import Detections
from lucid_core.tasks.base import IMAGE_LABEL, Task

if TYPE_CHECKING:
    from lucid_core.interop.unpickler import StandInModule
    from lucid_core.models.config import ModelConfig, ScaleRow
    from lucid_core.models.family import FamilySpec
    from lucid_core.models.graph import LayerSpec

__all__ = [
    "CLASSIFY",
    "CLASSIFY_IMGSZ",
    "CLASSIFY_MAX_CHANNELS",
    "IMAGE_LABEL",
    "TOP1_KEY",
    "TOP5_KEY",
    "ClassificationLoss",
    "ClassifyTask",
]

#: ``max_channels`` of a family's classification scale table where it differs from the detection table
#: (yolov8: 1024 at every scale; pinned by ``head_params`` of yolov8{m,l,x}-cls in classify_params.json).
CLASSIFY_MAX_CHANNELS: dict[str, int] = {"yolov8": 1024}

#: The reference's default classification image size (docs.ultralytics.com/tasks/classify: 224).
CLASSIFY_IMGSZ = 224

#: Logged accuracy keys (the reference's result names).
TOP1_KEY = "metrics/accuracy_top1"
TOP5_KEY = "metrics/accuracy_top5"

#: Layer kinds of the detection backbone that a classification model leaves out.
_DROPPED_KINDS = frozenset({"SPPF"})


class ClassificationLoss:
    """Cross-entropy of logits ``(B, nc)`` against ``batch["cls"]`` (one class index per image, ``(B,)`` or
    ``(B, 1)``), mean over the batch; ``label_smoothing`` as in :func:`torch.nn.functional.cross_entropy`.

    ``loss(logits, batch) -> (total, loss_items)``: ``total`` is the mean, ``loss_items`` it detached, shape (1,).
    """

    loss_names: tuple[str, ...] = ("loss",)

    def __init__(self, label_smoothing: float = 0.0) -> None:
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"ClassificationLoss: label_smoothing must be in [0, 1), got {label_smoothing}")
        self.label_smoothing = float(label_smoothing)

    def __call__(self, output: Tensor, batch: Mapping[str, Any]) -> tuple[Tensor, Tensor]:
        if not isinstance(output, Tensor) or output.ndim != 2:
            raise ValueError(
                f"ClassificationLoss: expected logits (B, nc), got {getattr(output, 'shape', type(output))}"
            )
        labels = torch.as_tensor(batch["cls"], device=output.device).reshape(-1).long()
        if labels.shape[0] != output.shape[0]:
            raise ValueError(
                f"ClassificationLoss: {output.shape[0]} images but {labels.shape[0]} class labels in batch['cls']"
            )
        loss = F.cross_entropy(output.float(), labels, label_smoothing=self.label_smoothing)
        return loss, loss.detach().reshape(1)


class ClassifyTask(Task):
    """Image classification: backbone + :class:`ClassifyHead`, cross-entropy, ``probs`` in the results.

    BatchNorm keeps PyTorch's defaults, eps 1e-5 and momentum 0.1 (the reference's classification checkpoints
    store them on every BatchNorm, where its detection models store 1e-3 / 0.03; docs/TRAINING.md
    "Classification")."""

    def layer_graph(self, family: FamilySpec) -> tuple[tuple[LayerSpec, ...], tuple[int, ...]]:
        layers = tuple(layer for layer in family.backbone_layers() if layer.kind not in _DROPPED_KINDS)
        chained = all(layer.sources == -1 for layer in layers)
        if not layers or not chained:
            raise ValueError(f"classify: family {family.name!r} has no plain backbone chain to classify from")
        return layers, (len(layers) - 1,)

    def scale_row(self, family: FamilySpec, scale: str) -> ScaleRow:
        row = family.scales[scale]
        return replace(row, max_channels=CLASSIFY_MAX_CHANNELS.get(family.name, row.max_channels))

    def build_head(
        self, common: dict[str, Any], config: ModelConfig, family: FamilySpec, row: ScaleRow
    ) -> ClassifyHead:
        return ClassifyHead(
            num_classes=config.num_classes, in_channels=common["in_channels"][-1], stride=max(family.strides)
        )

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
    ) -> ClassificationLoss:
        """:class:`ClassificationLoss` (``label_smoothing`` from ``task_options``, default 0); the box gains,
        assigner constants and branch schedule do not apply."""
        return ClassificationLoss(float(task_options.get("label_smoothing", 0.0)))

    @property
    def default_imgsz(self) -> int:
        """224, the reference's classification image size (docs.ultralytics.com/tasks/classify)."""
        return CLASSIFY_IMGSZ

    def fitness(self, metrics: Mapping[str, float]) -> float:
        """The mean of top-1 and top-5 accuracy (the reference's classification fitness)."""
        return (float(metrics.get(TOP1_KEY, 0.0)) + float(metrics.get(TOP5_KEY, 0.0))) / 2

    def reference_num_classes(
        self, head: StandInModule, state: Mapping[str, Tensor], head_prefix: str
    ) -> int | None:
        """The rows of ``linear.weight`` (the reference's classification head stores no ``nc``)."""
        weight = state.get(f"{head_prefix}linear.weight")
        return int(weight.shape[0]) if weight is not None and weight.ndim == 2 else None

    def reference_strides(self, family: FamilySpec) -> tuple[int, ...] | None:
        """Not checked: the reference stores a placeholder stride (1) for a classifier."""
        return None

    def decode_output(self, pred: Tensor, *, nc: int) -> list[Detections]:
        """One empty :class:`Detections` per image whose ``probs`` is that image's row of ``pred`` ``(B, nc)``."""
        if pred.ndim != 2 or int(pred.shape[1]) != nc:
            raise ValueError(
                f"postprocess: task {self.name!r} expects probabilities (B, {nc}), got {tuple(pred.shape)}"
            )
        results: list[Detections] = []
        for row in pred.float():
            det = Detections.empty(pred.device)
            det.probs = row
            results.append(det)
        return results


CLASSIFY = ClassifyTask(
    name="classify",
    suffix="-cls",
    iou_types=(),
    target_fields=(IMAGE_LABEL,),
    reference_head="Classify",
    batch_norm=(1e-5, 0.1),
)
