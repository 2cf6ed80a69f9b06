"""Architecture parity with the reference: parameter counts and GFLOPs of every registered model.

Every expected number is read from shared/fixtures/model_params.json (see its README section). Models are built
on the ``meta`` device, so nothing is allocated or computed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from lucid_core.info import count_flops
from lucid_core.models import ModelKey, YOLOModel, build_model, list_models
from lucid_core.nn.fuse import fuse_model

pytestmark = pytest.mark.shared

# classify models are held against classify_params.json (test_core_classify_params.py)
KEYS = [k for k in list_models() if k.task != "classify"]
IDS = [k.name for k in KEYS]


@pytest.fixture(scope="module")
def reference(shared_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((shared_dir / "fixtures" / "model_params.json").read_text())
    return data


def build_as_reference(key: ModelKey, reference: dict[str, Any]) -> YOLOModel:
    entry = reference["models"][key.name]
    options = dict(reference["build"][key.task])
    nc = options.pop("nc")
    assert entry["nc"] == nc
    with torch.device("meta"):
        return build_model(key.family, key.task, key.scale, nc, **options)


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_registry_covers_the_fixture(reference: dict[str, Any]) -> None:
    assert sorted(IDS) == sorted(reference["models"])


@pytest.mark.parametrize("key", KEYS, ids=IDS)
def test_parameter_counts(key: ModelKey, reference: dict[str, Any]) -> None:
    entry = reference["models"][key.name]
    model = build_as_reference(key, reference)
    assert model.reg_max == entry["reg_max"]
    assert model.end2end == entry["end2end_head"]
    assert n_params(model) == entry["params_total"]
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == entry["params_trainable"]
    assert n_params(model.head) == entry["head_params"]
    head = model.head
    if model.end2end:
        one2many = sum(n_params(getattr(head, n)) for n in head.branch_module_names())
        one2one = sum(n_params(getattr(head, "one2one_" + n)) for n in head.branch_module_names())
        assert one2many == entry["params_one2many_branch"]
        assert one2one == entry["params_one2one_branch"]
        assert n_params(model) - one2many == entry["params_without_one2many"]
        if "params_flow_model" in entry:
            assert n_params(head.get_submodule("flow_model")) == entry["params_flow_model"]
        fuse_model(model.to_deployed())
        assert n_params(model) == entry["fused_end2end_params"]
    else:
        fuse_model(model)
        assert n_params(model) == entry["fused_params"]


@pytest.mark.parametrize("name", ["yolov8n", "yolo11n", "yolo26n"])
def test_layer_by_layer_topology(name: str, reference: dict[str, Any]) -> None:
    layers = reference["layers_n"][name]
    key = next(k for k in KEYS if k.name == name)
    model = build_as_reference(key, reference)
    assert len(model.layers) == layers["num_layers"]
    assert [n_params(layer) for layer in model.layers[:-1]] == layers["params"]
    head = layers["head"]
    assert list(model.sources[-1]) == head["from_layers"]
    assert list(model.head.in_channels) == head["in_channels"]
    assert list(model.strides) == head["strides"]
    model.eval()
    with torch.no_grad():
        x = torch.empty(1, 3, 256, 256, device="meta")
        out = model(x)
    assert isinstance(out, torch.Tensor)
    assert list(out.shape) == head["eval_output0_shape_at_256"]


def _gflops_cases(scales: str) -> list[Any]:
    cases = []
    for key in KEYS:
        marks = () if key.scale in scales else (pytest.mark.slow,)
        cases.append(pytest.param(key, 640, id=f"{key.name}@640", marks=marks))
        if key.task == "obb":
            cases.append(pytest.param(key, 1024, id=f"{key.name}@1024", marks=(pytest.mark.slow,)))
    return cases


@pytest.mark.parametrize(("key", "imgsz"), _gflops_cases(scales="n"))
def test_gflops_within_one_percent(key: ModelKey, imgsz: int, reference: dict[str, Any]) -> None:
    expected = reference["models"][key.name][f"gflops_{imgsz}"]
    model = build_as_reference(key, reference)
    gflops = count_flops(model, imgsz) / 1e9
    assert gflops == pytest.approx(expected, rel=0.01)
