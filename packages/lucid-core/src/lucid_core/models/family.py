"""What a family is: scaling table, backbone/neck layer graph and head options."""

from __future__ import annotations

from dataclasses import dataclass, field

from lucid_core.models.config import ScaleRow
from lucid_core.models.graph import LayerSpec


@dataclass(frozen=True)
class FamilySpec:
    """A registered model family (see ``yolov8.py``, ``yolo11.py``, ``yolo26.py``)."""

    name: str
    scales: dict[str, ScaleRow]
    layers: tuple[LayerSpec, ...]  # backbone + neck, reference layer order
    head_sources: tuple[int, ...]  # layers feeding the head, stride order
    strides: tuple[int, ...] = (8, 16, 32)
    reg_max: int = 16
    depthwise_cls: bool = True  # YOLO11-style depthwise-separable class branch
    end2end: bool = False  # YOLO26 one-to-one branch
    c3k_scales: str = ""  # scales at which every C3k2 uses C3k inner blocks
    proto_channels: int = 256  # before width scaling
    multiscale_proto: bool = False  # YOLO26 segmentation prototypes
    pose_rle: bool = False  # YOLO26 pose: RLE sigma outputs + flow model
    obb_angle_sigmoid: bool = True  # classic OBB angle (sigmoid − 0.25)·π; YOLO26: raw radians
    tasks: tuple[str, ...] | None = None  # the tasks it builds; None: every registered task
    default_options: dict[str, dict[str, object]] = field(default_factory=dict)

    def backbone_layers(self) -> tuple[LayerSpec, ...]:
        """The backbone: every layer before the neck's first ``Upsample`` (the FPN top-down path)."""
        for i, layer in enumerate(self.layers):
            if layer.kind == "Upsample":
                return self.layers[:i]
        return self.layers
