"""lucid-predict's sliced inference (``--slice``/``--overlap``) and a classifier's probabilities in its records."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

import lucid_core
from lucid_core.checkpoint import save_model
from lucid_core.cli_errors import UsageError
from lucid_core.models import build_model
from lucid_core.predict_cli import predict_to_dir

NAMES = ["circle", "square", "triangle"]


@pytest.mark.shared
def test_slice_flags_give_predict_with_slice(shared_dir: Path, tmp_path: Path) -> None:
    weights = shared_dir / "weights" / "yolov8n-obb-taufibrils.pt"
    scene = shared_dir / "data" / "dota8" / "images" / "val" / "P1571__1024__2976___0.jpg"
    run = predict_to_dir(weights, str(scene), tmp_path / "out", slice=640, overlap=0.2, batch=4, imgsz=640)
    assert run.processed == 1
    (record_file,) = (tmp_path / "out").glob("*.json")
    record = json.loads(record_file.read_text(encoding="utf-8"))
    (expected,) = lucid_core.predict(weights, scene, slice=640, overlap=0.2, batch=4)
    assert record["num_detections"] == len(expected.detections) > 0
    with pytest.raises(UsageError, match="overlap"):
        predict_to_dir(weights, str(scene), tmp_path / "bad", slice=640, overlap=1.0)


def test_a_classifiers_record_carries_its_probabilities(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = build_model("yolo26", "classify", "n", num_classes=3)
    weights = tmp_path / "cls"
    save_model(model, weights, names=NAMES, imgsz=32)
    image = tmp_path / "img.jpg"
    cv2.imwrite(str(image), np.full((40, 60, 3), 200, np.uint8))
    predict_to_dir(tmp_path / "cls.safetensors", str(image), tmp_path / "out")
    record = json.loads((tmp_path / "out" / "img.jpg.json").read_text(encoding="utf-8"))
    probs = record["probs"]
    assert len(probs["data"]) == 3 and sum(probs["data"]) == pytest.approx(1.0, abs=1e-5)
    assert probs["top1"] == int(np.argmax(probs["data"])) and probs["top1_name"] == NAMES[probs["top1"]]
    assert probs["top5"][0] == probs["top1"] and len(probs["top5"]) == 3
