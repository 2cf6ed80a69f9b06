"""Classification models against the reference: parameter counts, head counts, GFLOPs at 224 and the n-scale
per-layer outputs, every case read from shared/fixtures/classify_params.json (its README section). Models are
built on the ``meta`` device, so nothing is allocated or computed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from lucid_core.info import model_info
from lucid_core.models import YOLOModel, build_model, list_models

pytestmark = pytest.mark.shared

#: model_info lands within this of the reference's gflops_* for every dense model (test_core_model_params.py).
GFLOPS_REL = 0.01


@pytest.fixture(scope="module")
def reference(shared_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((shared_dir / "fixtures" / "classify_params.json").read_text())
    return data


def build_as_reference(entry: dict[str, Any]) -> YOLOModel:
    with torch.device("meta"):
        return build_model(entry["family"], entry["task"], entry["scale"], int(entry["nc"]))


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def layer_outputs(model: YOLOModel, imgsz: int) -> tuple[list[list[int]], Tensor]:
    """(C, H, W) of every non-head layer's output and the model output for a 1×3×imgsz×imgsz meta input."""
    outputs: list[list[int]] = []

    def record(_m: nn.Module, _i: object, out: Tensor) -> None:
        outputs.append(list(out.shape[1:]))

    handles = [layer.register_forward_hook(record) for layer in model.layers[:-1]]
    try:
        with torch.no_grad():
            logits = model(torch.empty(1, 3, imgsz, imgsz, device="meta"))
    finally:
        for handle in handles:
            handle.remove()
    assert isinstance(logits, Tensor)
    return outputs, logits


def test_registry_lists_every_fixture_model(reference: dict[str, Any]) -> None:
    names = {key.name for key in list_models() if key.task == "classify"}
    assert names == set(reference["models"])


def test_parameter_and_head_counts(reference: dict[str, Any]) -> None:
    for name, entry in reference["models"].items():
        model = build_as_reference(entry)
        assert (n_params(model), n_params(model.head)) == (entry["params_total"], entry["head_params"]), name
        assert model.task == entry["task"] and model.num_classes == entry["nc"] and not model.end2end


def test_gflops_at_224(reference: dict[str, Any]) -> None:
    for name, entry in reference["models"].items():
        gflops = model_info(build_as_reference(entry), 224).gflops
        assert gflops == pytest.approx(entry["gflops_224"], rel=GFLOPS_REL), name


def test_n_scale_layers(reference: dict[str, Any]) -> None:
    for name, layers in reference["layers_n"].items():
        model = build_as_reference(reference["models"][name])
        assert len(model.layers) == layers["num_layers"], name
        assert [n_params(layer) for layer in model.layers] == layers["params"], name
        head = layers["head"]
        shapes = {k: list(v.shape) for k, v in model.head.named_parameters()}  # type: ignore[attr-defined]
        assert shapes == head["param_shapes"], name
        assert list(model.head.in_channels) == [head["in_channels"]]  # type: ignore[attr-defined]
        outputs, logits = layer_outputs(model, 224)
        assert outputs == layers["out_shapes_at_224"], name
        assert list(logits.shape) == [1, reference["models"][name]["nc"]]
