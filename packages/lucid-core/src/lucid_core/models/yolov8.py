"""YOLOv8 family: C2f backbone/neck, SPPF, plain-conv decoupled head, reg_max 16, NMS decoding.

Layer graph: the YOLOv8 model card (docs.ultralytics.com/models/yolov8, P3-P5 FPN/PAN, 22 layers + head),
checked layer by layer against ``layers_n`` in shared/fixtures/model_params.json. Scales: the reference's documented n-x table.
"""

from __future__ import annotations

from lucid_core.models.config import ScaleRow
from lucid_core.models.family import FamilySpec
from lucid_core.models.graph import LayerSpec as L

SCALES = {
    "n": ScaleRow(0.33, 0.25, 1024),
    "s": ScaleRow(0.33, 0.50, 1024),
    "m": ScaleRow(0.67, 0.75, 768),
    "l": ScaleRow(1.00, 1.00, 512),
    "x": ScaleRow(1.00, 1.25, 512),
}

_DOWN = {"kernel_size": 3, "stride": 2}
_RES = {"shortcut": True}

LAYERS = (
    L(-1, "Conv", 64, 1, _DOWN),  # 0  P1/2
    L(-1, "Conv", 128, 1, _DOWN),  # 1  P2/4
    L(-1, "C2f", 128, 3, _RES),  # 2
    L(-1, "Conv", 256, 1, _DOWN),  # 3  P3/8
    L(-1, "C2f", 256, 6, _RES),  # 4
    L(-1, "Conv", 512, 1, _DOWN),  # 5  P4/16
    L(-1, "C2f", 512, 6, _RES),  # 6
    L(-1, "Conv", 1024, 1, _DOWN),  # 7  P5/32
    L(-1, "C2f", 1024, 3, _RES),  # 8
    L(-1, "SPPF", 1024, 1, {"kernel_size": 5}),  # 9
    L(-1, "Upsample"),  # 10
    L((-1, 6), "Concat"),  # 11
    L(-1, "C2f", 512, 3),  # 12
    L(-1, "Upsample"),  # 13
    L((-1, 4), "Concat"),  # 14
    L(-1, "C2f", 256, 3),  # 15 P3 out
    L(-1, "Conv", 256, 1, _DOWN),  # 16
    L((-1, 12), "Concat"),  # 17
    L(-1, "C2f", 512, 3),  # 18 P4 out
    L(-1, "Conv", 512, 1, _DOWN),  # 19
    L((-1, 9), "Concat"),  # 20
    L(-1, "C2f", 1024, 3),  # 21 P5 out
)

YOLOV8 = FamilySpec(
    name="yolov8",
    scales=SCALES,
    layers=LAYERS,
    head_sources=(15, 18, 21),
    reg_max=16,
    depthwise_cls=False,
)
