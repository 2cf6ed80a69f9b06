"""Exported classifiers (ONNX, OpenVINO, TorchScript) give PyTorch's probabilities and top-1 through ``predict``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import lucid_core
from lucid_core.checkpoint import save_model
from lucid_core.export import load_exported
from lucid_core.export_cli import export
from lucid_core.models import build_model
from lucid_data.synth import synthesize

pytest.importorskip("onnxruntime")

OUTPUTS = {"onnx": "m.onnx", "torchscript": "m.torchscript", "openvino": "m_openvino"}


@pytest.mark.parametrize("fmt", ["onnx", "torchscript", pytest.param("openvino", marks=pytest.mark.slow)])
def test_an_exported_classifier_gives_the_pytorch_top1_on_a_val_split(tmp_path: Path, fmt: str) -> None:
    if fmt == "openvino":
        pytest.importorskip("openvino")
    root = synthesize("classify", tmp_path / "data", n_train=3, n_val=9, imgsz=64, num_classes=3, seed=2)
    images = sorted(str(p) for p in (root / "val").rglob("*.jpg"))
    torch.manual_seed(0)
    model = build_model("yolo26", "classify", "n", num_classes=3)
    save_model(model, tmp_path / "cls", names=["circle", "square", "triangle"], imgsz=64)
    weights = tmp_path / "cls.safetensors"
    result = export(weights, format=fmt, output=tmp_path / OUTPUTS[fmt])
    exported = load_exported(result.path)
    ours = lucid_core.predict(weights, images, imgsz=64)
    theirs = lucid_core.predict(exported, images, imgsz=64)
    assert len(images) == 9 and len(ours) == len(theirs) == 9
    for a, b in zip(ours, theirs, strict=True):
        assert a.probs is not None and b.probs is not None
        assert a.probs.top1 == b.probs.top1
        torch.testing.assert_close(b.detections.probs, a.detections.probs, rtol=1e-4, atol=1e-5)
