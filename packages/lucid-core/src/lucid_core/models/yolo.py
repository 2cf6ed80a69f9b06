"""``YOLOModel``: a layer graph (backbone + neck, or the backbone alone for classify) ending in a task head, with
reference-compatible layer indices.

``layers`` holds every layer including the head as its last entry, so state-dict keys read ``layers.{i}.<...>``
exactly where the reference has ``model.{i}.<...>`` (shared/weights/checkpoints.json); ``head`` is that last layer,
any module with the :class:`TaskHead` attributes (a dense :class:`DetectHead` or a classification head).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol, runtime_checkable

from torch import Tensor, nn

from lucid_core.heads.detect import DecodeBranch
from lucid_core.heads.segment import SegmentHead
from lucid_core.models.config import ModelConfig
from lucid_core.nn.proto import MultiScaleProto
from lucid_core.outputs import TrainOutput

ModelOutput = TrainOutput | Tensor | tuple[Tensor, Tensor]


@runtime_checkable
class TaskHead(Protocol):
    """What the model reads of its last layer: input strides, the one-to-one branch flag, the box distribution
    size (0 without boxes) and the deployed form."""

    strides: tuple[int, ...]
    end2end: bool
    reg_max: int

    @property
    def deployed(self) -> bool: ...

    def to_deployed(self) -> None: ...


class YOLOModel(nn.Module):
    """Backbone/neck layers + head; see docs/INTERFACES.md "The model"."""

    def __init__(
        self,
        config: ModelConfig,
        layers: list[nn.Module],
        sources: list[tuple[int, ...]],
        reg_max: int | None = None,
        end2end: bool | None = None,
    ) -> None:
        """``reg_max`` / ``end2end`` default to the head's."""
        super().__init__()
        if len(layers) != len(sources):
            raise ValueError(f"YOLOModel: {len(layers)} layers but {len(sources)} source lists")
        head = layers[-1]
        if not isinstance(head, TaskHead):
            raise TypeError(f"YOLOModel: the last layer must be a head, got {type(head).__name__}")
        self.config = replace(config)
        self.family = config.family
        self.task = config.task
        self.scale = config.scale
        self.num_classes = config.num_classes
        self.kpt_shape = config.kpt_shape
        self.reg_max = int(head.reg_max if reg_max is None else reg_max)
        self.end2end = bool(head.end2end if end2end is None else end2end)
        self.layers = nn.ModuleList(layers)
        self.sources = [tuple(s) for s in sources]
        needed = {j for s in self.sources for j in s if j >= 0}
        self._keep = frozenset(needed)

    @property
    def head(self) -> TaskHead:
        head = self.layers[-1]
        assert isinstance(head, TaskHead)
        return head

    @property
    def strides(self) -> tuple[int, ...]:
        return self.head.strides

    def forward(self, x: Tensor, branch: DecodeBranch | None = None) -> ModelOutput:
        """Run the layer graph; ``branch`` picks the decoded head branch in eval mode (:meth:`DetectHead.forward`;
        a head with one branch ignores it)."""
        outputs: dict[int, Tensor] = {}
        y: Tensor = x
        last = len(self.layers) - 1
        for i, (layer, src) in enumerate(zip(self.layers, self.sources, strict=True)):
            inputs = [y if j == -1 else outputs[j] for j in src]
            if i == last:
                result: ModelOutput = layer(inputs, branch)
                return result
            y = layer(inputs) if len(src) > 1 else layer(inputs[0])
            if i in self._keep:
                outputs[i] = y
        raise RuntimeError("YOLOModel: empty layer list")  # pragma: no cover

    def cls_branch_parameter_names(self) -> set[str]:
        """Parameters trained with lr × 3: class convs of both branches and the segment proto's semantic branch."""
        prefix = f"layers.{len(self.layers) - 1}."
        boosted = ("cv3.", "one2one_cv3.", "proto.semseg.")
        return {
            name
            for name, _ in self.named_parameters()
            if name.startswith(prefix) and name[len(prefix) :].startswith(boosted)
        }

    def to_deployed(self) -> YOLOModel:
        """End-to-end deployed form in place: drop the one-to-many branch and training-only parts (yolo26)."""
        self.head.to_deployed()
        return self

    @property
    def has_semseg(self) -> bool:
        head = self.head
        return isinstance(head, SegmentHead) and isinstance(head.proto, MultiScaleProto)
