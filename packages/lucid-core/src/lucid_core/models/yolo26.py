"""YOLO26 family (default): YOLO11 backbone/neck, reg_max 1, end-to-end dual head (one-to-many + one-to-one).

Differences from YOLO11, each pinned by shared/fixtures/model_params.json: every neck C3k2 uses C3k inner blocks
(``layers_n`` params of layers 13/16/19), the last neck block appends a PSA block to its bottleneck (layer 22),
reg_max 1 (no DFL), a one-to-one copy of every head branch evaluated on detached features, YOLO26 prototypes with
a semantic auxiliary branch (segment) and RLE sigma outputs + RealNVP flow (pose). The SPPF adds a residual
connection (no parameters; not observable in the fixtures). Scales: the reference's documented n-x table.
"""

from __future__ import annotations

from lucid_core.models.family import FamilySpec
from lucid_core.models.yolo11 import SCALES, backbone_layers, neck_layers

YOLO26 = FamilySpec(
    name="yolo26",
    scales=dict(SCALES),
    layers=backbone_layers({"kernel_size": 5, "shortcut": True}) + neck_layers(neck_c3k=True, last_attn=True),
    head_sources=(16, 19, 22),
    reg_max=1,
    depthwise_cls=True,
    end2end=True,
    c3k_scales="mlx",
    multiscale_proto=True,
    pose_rle=True,
    obb_angle_sigmoid=False,  # OBB26 head: raw radians (fixture README "obb_loss_*.pt", head output layout)
)
