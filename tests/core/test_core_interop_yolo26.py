"""Import of reference-shaped checkpoints built from our own models (no yolo26 reference file exists here).

Our model is re-expressed as a tree of stand-ins with reference class names and ``model.{i}`` keys, pickled the
way the reference does (``torch.save`` of a dict whose ``model`` is the module, float16 tensors, classes as
``GLOBAL`` opcodes), then imported: the family, task, scale and options must be inferred back and the imported
model must give the same outputs. Covers yolo26 for all four tasks (also in deployed form), plus one yolo11 and
one yolov8 case.
"""

from __future__ import annotations

import pickle
import types
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from lucid_core.interop import CheckpointImportError, import_checkpoint
from lucid_core.interop.unpickler import StandInModule, standin_class
from lucid_core.models import YOLOModel, build_model

# our head class name -> the reference's (importing lucid_core.heads before lucid_core.models is circular, so by name)
HEAD_CLASSES = {"SegmentHead": "Segment", "PoseHead": "Pose", "OBBHead": "OBB", "DetectHead": "Detect"}
MODEL_CLASSES = {
    "detect": "DetectionModel",
    "segment": "SegmentationModel",
    "pose": "PoseModel",
    "obb": "OBBModel",
}


def _reference_name(module: nn.Module, head_suffix: str) -> str:
    cls_name = type(module).__name__
    if cls_name in HEAD_CLASSES:
        return f"ultralytics.nn.modules.head.{HEAD_CLASSES[cls_name]}{head_suffix}"
    if type(module).__module__.startswith("torch.nn"):
        return f"{type(module).__module__}.{cls_name}"
    return f"ultralytics.nn.modules.block.{cls_name}"


def _standin(module: nn.Module, head_suffix: str, extra: dict[str, Any] | None = None) -> StandInModule:
    node = standin_class(_reference_name(module, head_suffix))()
    params = OrderedDict(
        (k, None if v is None else nn.Parameter(v.detach().half(), requires_grad=v.requires_grad))
        for k, v in module._parameters.items()
    )
    buffers = OrderedDict(
        (k, None if v is None else (v.detach().half() if v.is_floating_point() else v.detach()))
        for k, v in module._buffers.items()
    )
    children = OrderedDict(
        (k, None if v is None else _standin(v, head_suffix)) for k, v in module._modules.items()
    )
    node.__setstate__(
        {
            "training": False,
            "_parameters": params,
            "_buffers": buffers,
            "_non_persistent_buffers_set": set(module._non_persistent_buffers_set),
            "_modules": children,
            **(extra or {}),
        }
    )
    return node


def reference_checkpoint(
    model: YOLOModel, *, head_suffix: str = "", yaml: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A reference-shaped checkpoint dict (stand-in tree, ``model.{i}`` keys, float16) of ``model``."""
    head = model.head
    head_attrs: dict[str, Any] = {"nc": model.num_classes, "reg_max": model.reg_max, "end2end": model.end2end}
    if model.kpt_shape is not None:
        head_attrs["kpt_shape"] = list(model.kpt_shape)
    if model.task == "segment":
        head_attrs["nm"] = head.nm  # type: ignore[attr-defined]
    if model.task == "obb":
        head_attrs["ne"] = head.ne  # type: ignore[attr-defined]
    layers = OrderedDict(
        (str(i), _standin(layer, head_suffix, head_attrs if i == len(model.layers) - 1 else None))
        for i, layer in enumerate(model.layers)
    )
    sequence = standin_class("torch.nn.modules.container.Sequential")()
    sequence.__setstate__({"_parameters": OrderedDict(), "_buffers": OrderedDict(), "_modules": layers})
    root = standin_class(f"ultralytics.nn.tasks.{MODEL_CLASSES[model.task]}")()
    root.__setstate__(
        {
            "_parameters": OrderedDict(),
            "_buffers": OrderedDict(),
            "_modules": OrderedDict(model=sequence),
            "nc": model.num_classes,
            "names": {i: f"class{i}" for i in range(model.num_classes)},
            "stride": torch.tensor([float(s) for s in model.strides]),
            "yaml": yaml if yaml is not None else {"scale": model.scale, "nc": model.num_classes},
        }
    )
    return {"model": root, "ema": None, "train_args": {"imgsz": 320}, "version": "synthetic", "epoch": -1}


class _StandInPickler(pickle._Pickler):  # type: ignore[name-defined,misc]
    """Writes stand-in classes as ``GLOBAL <reference module> <name>`` (the reference's own opcodes)."""

    def save_global(self, obj: Any, name: str | None = None) -> None:
        if isinstance(obj, type) and issubclass(obj, StandInModule):
            module, _, qualname = obj.reference_class.rpartition(".")
            self.write(pickle.GLOBAL + f"{module}\n{qualname}\n".encode())
            self.memoize(obj)
            return
        super().save_global(obj, name)


STANDIN_PICKLE = types.ModuleType("standin_pickle")
STANDIN_PICKLE.Pickler = _StandInPickler  # type: ignore[attr-defined]


def save_reference_checkpoint(checkpoint: dict[str, Any], path: Path) -> Path:
    torch.save(checkpoint, path, pickle_module=STANDIN_PICKLE)
    return path


def _as_float16_weights(model: YOLOModel) -> YOLOModel:
    """The float32 model the importer must produce: the same weights rounded through float16."""
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.copy_(tensor.half().float())
    return model.eval()


def _outputs(model: YOLOModel, x: Tensor) -> list[Tensor]:
    with torch.no_grad():
        out = model(x)
    return list(out) if isinstance(out, tuple) else [out]  # type: ignore[arg-type]


CASES = [
    ("yolo26", "detect", {}),
    ("yolo26", "segment", {}),
    ("yolo26", "pose", {"kpt_shape": (5, 3)}),
    ("yolo26", "obb", {}),
]


@pytest.mark.parametrize(("family", "task", "options"), CASES, ids=[c[1] for c in CASES])
def test_yolo26_reference_layout_round_trips(
    tmp_path: Path, family: str, task: str, options: dict[str, Any]
) -> None:
    # the reference's yolo26 head class names are not known here: odd tasks use a suffixed name ("Pose26")
    head_suffix = "26" if task in ("segment", "pose") else ""
    torch.manual_seed(0)
    source = _as_float16_weights(build_model(family, task, "n", num_classes=3, **options))
    path = save_reference_checkpoint(
        reference_checkpoint(source, head_suffix=head_suffix), tmp_path / "ref.pt"
    )
    model, config = import_checkpoint(path)
    assert (model.family, model.task, model.scale, model.num_classes) == (family, task, "n", 3)
    assert model.config == source.config
    assert config.names == ["class0", "class1", "class2"] and config.imgsz == 320
    assert config.head_class.endswith(head_suffix)
    imported_state = model.state_dict()
    for key, value in source.state_dict().items():
        assert torch.equal(imported_state[key], value), key
    x = torch.rand(1, 3, 64, 96)
    for ours, theirs in zip(_outputs(model, x), _outputs(source, x), strict=True):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


@pytest.mark.parametrize("task", ["detect", "pose"])
def test_deployed_yolo26_checkpoint_imports_into_deployed_form(tmp_path: Path, task: str) -> None:
    torch.manual_seed(1)
    source = _as_float16_weights(build_model("yolo26", task, "n", num_classes=2)).to_deployed()
    path = save_reference_checkpoint(reference_checkpoint(source), tmp_path / "deployed.pt")
    model, config = import_checkpoint(path)
    assert model.head.deployed and config.deployed
    x = torch.rand(1, 3, 64, 64)
    torch.testing.assert_close(_outputs(model, x)[0], _outputs(source, x)[0], rtol=0, atol=0)


@pytest.mark.parametrize(
    ("family", "scale", "yaml"),
    [
        ("yolo11", "s", {"scale": "s"}),
        (
            "yolov8",
            "s",
            {"depth_multiple": 0.33, "width_multiple": 0.5},
        ),  # no scales block (fall detector style)
        ("yolov8", "n", {}),  # nothing in the yaml: the stem width decides
    ],
)
def test_family_and_scale_inference(tmp_path: Path, family: str, scale: str, yaml: dict[str, Any]) -> None:
    source = _as_float16_weights(build_model(family, "detect", scale, num_classes=4))
    checkpoint = reference_checkpoint(source, yaml=yaml)
    model, _ = import_checkpoint(save_reference_checkpoint(checkpoint, tmp_path / "ref.pt"))
    assert (model.family, model.scale) == (family, scale)


def test_end_to_end_head_with_dfl_is_refused(tmp_path: Path) -> None:
    checkpoint = reference_checkpoint(
        _as_float16_weights(build_model("yolo26", "detect", "n", num_classes=2))
    )
    head = checkpoint["model"].children()["model"].children()["23"]
    head.reg_max = 16
    with pytest.raises(CheckpointImportError, match="reg_max 16"):
        import_checkpoint(save_reference_checkpoint(checkpoint, tmp_path / "v10.pt"))
