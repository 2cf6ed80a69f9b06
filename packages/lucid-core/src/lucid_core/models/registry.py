"""Family registry and ``build_model`` (docs/INTERFACES.md "The model")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from lucid_core.models.config import ModelConfig
from lucid_core.models.family import FamilySpec
from lucid_core.models.graph import build_layer
from lucid_core.models.yolo import YOLOModel
from lucid_core.tasks.registry import get_task, registered_tasks

_FAMILIES: dict[str, FamilySpec] = {}


@dataclass(frozen=True)
class ModelKey:
    """One buildable (family, task, scale); ``name`` is the reference spelling (``yolo26n-seg``)."""

    family: str
    task: str
    scale: str

    @property
    def name(self) -> str:
        return f"{self.family}{self.scale}{get_task(self.task).suffix}"


def register_family(spec: FamilySpec, *, replace: bool = False) -> None:
    """Make ``spec`` buildable by name; re-registering an existing name needs ``replace=True``."""
    if spec.name in _FAMILIES and not replace:
        raise ValueError(f"family {spec.name!r} is already registered")
    _FAMILIES[spec.name] = spec


def get_family(name: str) -> FamilySpec:
    if name not in _FAMILIES:
        raise ValueError(f"unknown model family {name!r}; registered: {sorted(_FAMILIES)}")
    return _FAMILIES[name]


def registered_families() -> tuple[str, ...]:
    """Every registered family name, in registration order."""
    return tuple(_FAMILIES)


def family_tasks(spec: FamilySpec) -> tuple[str, ...]:
    """The registered tasks family ``spec`` builds (all of them unless the family names a subset)."""
    names = tuple(t.name for t in registered_tasks())
    return names if spec.tasks is None else tuple(t for t in names if t in spec.tasks)


def list_models() -> list[ModelKey]:
    """Every registered (family, task, scale)."""
    return [ModelKey(f.name, t, s) for f in _FAMILIES.values() for t in family_tasks(f) for s in f.scales]


def build_model(
    family: str = "yolo26", task: str = "detect", scale: str = "n", num_classes: int = 80, **task_options: Any
) -> YOLOModel:
    """Build a randomly initialised model; ``task_options``: ``kpt_shape`` (pose), ``num_masks`` (segment)…

    The task picks the layer graph and scale row (:meth:`Task.layer_graph`, :meth:`Task.scale_row`: backbone +
    neck for the dense tasks, the backbone alone for classify), builds the head and sets every BatchNorm's
    ``(eps, momentum)`` (:attr:`Task.batch_norm`)."""
    spec = get_family(family)
    if task not in family_tasks(spec):
        raise ValueError(f"unknown task {task!r} for family {family!r}; expected one of {family_tasks(spec)}")
    task_spec = get_task(task)
    if scale not in spec.scales:
        raise ValueError(
            f"unknown scale {scale!r} for family {family!r}; expected one of {sorted(spec.scales)}"
        )
    if not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"num_classes must be a positive int, got {num_classes!r}")
    given = {k: v for k, v in task_options.items() if v is not None}
    unknown = set(given) - task_spec.option_names()
    if unknown:
        raise ValueError(f"build_model: option(s) {sorted(unknown)} do not apply to task {task!r}")
    config = ModelConfig(family=family, task=task, scale=scale, num_classes=num_classes)
    task_spec.configure(config, given)

    row = task_spec.scale_row(spec, scale)
    layers, head_sources = task_spec.layer_graph(spec)
    force_c3k = scale in spec.c3k_scales
    modules: list[nn.Module] = []
    sources: list[tuple[int, ...]] = []
    out_channels: list[int] = []
    for i, layer_spec in enumerate(layers):
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
    head_in = tuple(out_channels[j] for j in head_sources)
    common: dict[str, Any] = {
        "num_classes": num_classes,
        "in_channels": head_in,
        "strides": spec.strides,
        "reg_max": spec.reg_max,
        "depthwise_cls": spec.depthwise_cls,
        "end2end": spec.end2end,
    }
    head = task_spec.build_head(common, config, spec, row)
    modules.append(head)
    sources.append(head_sources)
    model = YOLOModel(config, modules, sources)
    eps, momentum = task_spec.batch_norm
    for norm in model.modules():
        if isinstance(norm, nn.modules.batchnorm._BatchNorm):
            norm.eps, norm.momentum = eps, momentum
    return model
