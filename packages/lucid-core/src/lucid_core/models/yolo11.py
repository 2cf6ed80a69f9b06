"""YOLO11 family: C3k2 blocks, SPPF + C2PSA attention, depthwise-separable class branch, reg_max 16, NMS decoding.

Layer graph: the YOLO11 model card (docs.ultralytics.com/models/yolo11), checked layer by layer against
``layers_n`` in shared/fixtures/model_params.json; at scales m/l/x every C3k2 uses C3k inner blocks (pinned by the
``params_total`` of ``yolo11{m,l,x}``). Scales: the reference's documented n-x table.
"""

from __future__ import annotations

from lucid_core.models.config import ScaleRow
from lucid_core.models.family import FamilySpec
from lucid_core.models.graph import LayerSpec as L

SCALES = {
    "n": ScaleRow(0.50, 0.25, 1024),
    "s": ScaleRow(0.50, 0.50, 1024),
    "m": ScaleRow(0.50, 1.00, 512),
    "l": ScaleRow(1.00, 1.00, 512),
    "x": ScaleRow(1.00, 1.50, 512),
}

_DOWN = {"kernel_size": 3, "stride": 2}


def c3k2(c3k: bool, expansion: float = 0.5, attn: bool = False) -> dict[str, object]:
    return {"c3k": c3k, "expansion": expansion, "attn": attn}


def neck_layers(neck_c3k: bool, last_attn: bool) -> tuple[L, ...]:
    """Layers 11..22 (FPN top-down then PAN bottom-up), shared by YOLO11 and YOLO26.

    ``last_attn`` (YOLO26): layer 22 is one (Bottleneck, PSABlock) repeat at every scale.
    """
    return (
        L(-1, "Upsample"),  # 11
        L((-1, 6), "Concat"),  # 12
        L(-1, "C3k2", 512, 2, c3k2(neck_c3k)),  # 13
        L(-1, "Upsample"),  # 14
        L((-1, 4), "Concat"),  # 15
        L(-1, "C3k2", 256, 2, c3k2(neck_c3k)),  # 16 P3 out
        L(-1, "Conv", 256, 1, _DOWN),  # 17
        L((-1, 13), "Concat"),  # 18
        L(-1, "C3k2", 512, 2, c3k2(neck_c3k)),  # 19 P4 out
        L(-1, "Conv", 512, 1, _DOWN),  # 20
        L((-1, 10), "Concat"),  # 21
        L(-1, "C3k2", 1024, 1 if last_attn else 2, c3k2(True, attn=last_attn)),  # 22 P5 out
    )


def backbone_layers(sppf: dict[str, object]) -> tuple[L, ...]:
    """Layers 0..10 (stem, four C3k2 stages, SPPF, C2PSA)."""
    return (
        L(-1, "Conv", 64, 1, _DOWN),  # 0  P1/2
        L(-1, "Conv", 128, 1, _DOWN),  # 1  P2/4
        L(-1, "C3k2", 256, 2, c3k2(False, 0.25)),  # 2
        L(-1, "Conv", 256, 1, _DOWN),  # 3  P3/8
        L(-1, "C3k2", 512, 2, c3k2(False, 0.25)),  # 4
        L(-1, "Conv", 512, 1, _DOWN),  # 5  P4/16
        L(-1, "C3k2", 512, 2, c3k2(True)),  # 6
        L(-1, "Conv", 1024, 1, _DOWN),  # 7  P5/32
        L(-1, "C3k2", 1024, 2, c3k2(True)),  # 8
        L(-1, "SPPF", 1024, 1, sppf),  # 9
        L(-1, "C2PSA", 1024, 2),  # 10
    )


YOLO11 = FamilySpec(
    name="yolo11",
    scales=SCALES,
    layers=backbone_layers({"kernel_size": 5}) + neck_layers(neck_c3k=False, last_attn=False),
    head_sources=(16, 19, 22),
    reg_max=16,
    depthwise_cls=True,
    c3k_scales="mlx",
)
