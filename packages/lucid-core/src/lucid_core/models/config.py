"""Model configuration: the JSON-serialisable record from which :func:`build_model` rebuilds a model."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class ModelConfig:
    """Everything needed to rebuild a model: ``build_model(**dataclasses.asdict(config))``."""

    family: str
    task: str
    scale: str
    num_classes: int
    kpt_shape: tuple[int, int] | None = None  # pose option, e.g. (17, 3)
    num_masks: int | None = None  # segment option (32)
    num_angles: int | None = None  # obb option (1)


@dataclass(frozen=True)
class ScaleRow:
    """One row of a family's compound-scaling table: (depth, width, max_channels)."""

    depth: float
    width: float
    max_channels: int

    def channels(self, channels: int) -> int:
        """``channels`` of the base layout at this scale: capped at ``max_channels``, times ``width``, rounded up
        to a multiple of 8."""
        return int(math.ceil(min(channels, self.max_channels) * self.width / 8) * 8)
