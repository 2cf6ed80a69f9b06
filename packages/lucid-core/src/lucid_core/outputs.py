"""What a model returns in training mode: the raw dense branch outputs the objectives consume.

Layout follows ``shared/fixtures/README.md`` ("Head output layout"): anchors of all levels concatenated in stride
order, row-major inside a level; box channel ``side * reg_max + k`` with sides (left, top, right, bottom).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor


@dataclass
class BranchOutput:
    """One head branch over the whole anchor grid."""

    boxes: Tensor  # (B, 4 * reg_max, A) distance logits (reg_max > 1) or distances (reg_max == 1), grid units
    scores: Tensor  # (B, nc, A) class logits
    extras: dict[str, Tensor] = field(default_factory=dict)  # task outputs, each (B, C, A), raw


@dataclass
class TrainOutput:
    """Training-mode forward result of a :class:`~lucid_core.models.YOLOModel`."""

    one2many: BranchOutput
    one2one: BranchOutput | None
    level_shapes: list[tuple[int, int]]
    strides: tuple[int, ...]
    proto: Tensor | None = None  # segment: (B, nm, H/4, W/4)
    semseg: Tensor | None = None  # yolo26 segment auxiliary semantic branch

    @property
    def imgsz_hw(self) -> tuple[int, int]:
        """Network input size implied by the first level."""
        h, w = self.level_shapes[0]
        return h * self.strides[0], w * self.strides[0]
