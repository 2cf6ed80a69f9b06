"""Family registry and ``build_model`` (docs/INTERFACES.md "The model")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from lucid_core.heads.detect import DetectHead
from lucid_core.heads.obb import OBBHead
from lucid_core.heads.pose import PoseHead
from lucid_core.heads.segment import SegmentHead
from lucid_core.models.config import TASKS, ModelConfig
from lucid_core.models.family import FamilySpec
from lucid_core.models.graph import build_layer, scale_channels
from lucid_core.models.yolo import YOLOModel
from lucid_core.tasks import TASKS as TASK_TABLE

_FAMILIES: dict[str, FamilySpec] = {}
TASK_SUFFIX = {name: spec.suffix for name, spec in TASK_TABLE.items()}


@dataclass(frozen=True)
class ModelKey:
    """One buildable (family, task, scale); ``name`` is the reference spelling (``yolo26n-seg``)."""

    family: str
    task: str
    scale: str

    @property
    def name(self) -> str:
        return f"{self.family}{self.scale}{TASK_SUFFIX[self.task]}"


def register_family(spec: FamilySpec, *, replace: bool = False) -> None:
    """Make ``spec`` buildable by name; re-registering an existing name needs ``replace=True``."""
    if spec.name in _FAMILIES and not replace:
        raise ValueError(f"family {spec.name!r} is already registered")
    _FAMILIES[spec.name] = spec


def get_family(name: str) -> FamilySpec:
    if name not in _FAMILIES:
        raise ValueError(f"unknown model family {name!r}; registered: {sorted(_FAMILIES)}")
    return _FAMILIES[name]


def list_models() -> list[ModelKey]:
    """Every registered (family, task, scale)."""
    return [ModelKey(f.name, t, s) for f in _FAMILIES.values() for t in f.tasks for s in f.scales]


_TASK_OPTIONS = {name: spec.option_names() for name, spec in TASK_TABLE.items()}


def build_model(
    family: str = "yolo26", task: str = "detect", scale: str = "n", num_classes: int = 80, **task_options: Any
) -> YOLOModel:
    """Build a randomly initialised model; ``task_options``: ``kpt_shape`` (pose), ``num_masks`` (segment)…"""
    spec = get_family(family)
    if task not in TASKS or task not in spec.tasks:
        raise ValueError(f"unknown task {task!r} for family {family!r}; expected one of {spec.tasks}")
    if scale not in spec.scales:
        raise ValueError(
            f"unknown scale {scale!r} for family {family!r}; expected one of {sorted(spec.scales)}"
        )
    if not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"num_classes must be a positive int, got {num_classes!r}")
    given = {k: v for k, v in task_options.items() if v is not None}
    unknown = set(given) - _TASK_OPTIONS[task]
    if unknown:
        raise ValueError(f"build_model: option(s) {sorted(unknown)} do not apply to task {task!r}")
    config = ModelConfig(family=family, task=task, scale=scale, num_classes=num_classes)
    if task == "pose":
        kpt = given.get("kpt_shape", (17, 3))
        config.kpt_shape = (int(kpt[0]), int(kpt[1]))
    elif task == "segment":
        config.num_masks = int(given.get("num_masks", 32))
    elif task == "obb":
        config.num_angles = int(given.get("num_angles", 1))

    row = spec.scales[scale]
    force_c3k = scale in spec.c3k_scales
    modules: list[nn.Module] = []
    sources: list[tuple[int, ...]] = []
    out_channels: list[int] = []
    for i, layer_spec in enumerate(spec.layers):
        src = (layer_spec.sources,) if isinstance(layer_spec.sources, int) else tuple(layer_spec.sources)
        ins = [out_channels[i - 1] if j == -1 else out_channels[j] for j in src] if i else [3]
        if force_c3k and layer_spec.kind == "C3k2":
            layer_spec = type(layer_spec)(
                layer_spec.sources,
                layer_spec.kind,
                layer_spec.out_channels,
                layer_spec.repeats,
                {**layer_spec.options, "c3k": True},
            )
        module, c_out = build_layer(layer_spec, ins, row)
        modules.append(module)
        sources.append(src)
        out_channels.append(c_out)
    head_in = tuple(out_channels[j] for j in spec.head_sources)
    common: dict[str, Any] = {
        "num_classes": num_classes,
        "in_channels": head_in,
        "strides": spec.strides,
        "reg_max": spec.reg_max,
        "depthwise_cls": spec.depthwise_cls,
        "end2end": spec.end2end,
    }
    head: DetectHead
    if task == "detect":
        head = DetectHead(**common)
    elif task == "segment":
        assert config.num_masks is not None
        head = SegmentHead(
            **common,
            num_masks=config.num_masks,
            proto_channels=scale_channels(spec.proto_channels, row),
            multiscale_proto=spec.multiscale_proto,
        )
    elif task == "pose":
        assert config.kpt_shape is not None
        head = PoseHead(**common, kpt_shape=config.kpt_shape, rle=spec.pose_rle)
    else:
        assert config.num_angles is not None
        head = OBBHead(**common, num_angles=config.num_angles, angle_sigmoid=spec.obb_angle_sigmoid)
    modules.append(head)
    sources.append(spec.head_sources)
    return YOLOModel(config, modules, sources, reg_max=spec.reg_max, end2end=spec.end2end)
