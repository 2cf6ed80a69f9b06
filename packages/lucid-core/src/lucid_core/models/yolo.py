"""``YOLOModel``: a layer graph (backbone + neck) ending in a task head, with reference-compatible layer indices.

``layers`` holds every layer including the head as its last entry, so state-dict keys read ``layers.{i}.<...>``
exactly where the reference has ``model.{i}.<...>`` (shared/weights/checkpoints.json); ``head`` is that last layer.
"""

from __future__ import annotations

from dataclasses import replace

from torch import Tensor, nn

from lucid_core.heads.detect import DecodeBranch, DetectHead
from lucid_core.heads.segment import SegmentHead
from lucid_core.models.config import ModelConfig
from lucid_core.nn.proto import MultiScaleProto
from lucid_core.outputs import TrainOutput

ModelOutput = TrainOutput | Tensor | tuple[Tensor, Tensor]


class YOLOModel(nn.Module):
    """Backbone/neck layers + head; see docs/INTERFACES.md "The model"."""

    def __init__(
        self,
        config: ModelConfig,
        layers: list[nn.Module],
        sources: list[tuple[int, ...]],
        reg_max: int,
        end2end: bool,
    ) -> None:
        super().__init__()
        if len(layers) != len(sources):
            raise ValueError(f"YOLOModel: {len(layers)} layers but {len(sources)} source lists")
        if not isinstance(layers[-1], DetectHead):
            raise TypeError(f"YOLOModel: the last layer must be a head, got {type(layers[-1]).__name__}")
        self.config = replace(config)
        self.family = config.family
        self.task = config.task
        self.scale = config.scale
        self.num_classes = config.num_classes
        self.kpt_shape = config.kpt_shape
        self.reg_max = reg_max
        self.end2end = end2end
        self.layers = nn.ModuleList(layers)
        self.sources = [tuple(s) for s in sources]
        needed = {j for s in self.sources for j in s if j >= 0}
        self._keep = frozenset(needed)

    @property
    def head(self) -> DetectHead:
        head = self.layers[-1]
        assert isinstance(head, DetectHead)
        return head

    @property
    def strides(self) -> tuple[int, ...]:
        return self.head.strides

    def forward(self, x: Tensor, branch: DecodeBranch | None = None) -> ModelOutput:
        """Run the layer graph; ``branch`` picks the decoded head branch in eval mode (:meth:`DetectHead.forward`)."""
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
