"""tools/probe_classify_augment.py: settings parsing and our side of the lr-0 reading (no reference needed)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from lucid_core.checkpoint import save_model
from lucid_core.models import build_model
from lucid_data.synth import synthesize
from tool_testing import load_tool

probe = load_tool("probe_classify_augment")


def test_settings_parse_to_augment_config_values() -> None:
    assert probe.parse_settings(["auto_augment=null", "erasing=0", "hsv_v=0.9"]) == {
        "auto_augment": None,
        "erasing": 0.0,
        "hsv_v": 0.9,
    }
    assert probe.parse_settings(["auto_augment=randaugment"]) == {"auto_augment": "randaugment"}
    with pytest.raises(ValueError, match="KEY one of"):
        probe.parse_settings(["colour=1"])
    with pytest.raises(ValueError, match="is not implemented"):
        probe.parse_settings(["auto_augment=trivialaugment"])


def test_our_side_is_a_finite_seeded_reading_that_sees_the_augmentation(tmp_path: Path) -> None:
    root = synthesize("classify", tmp_path / "data", n_train=12, n_val=3, imgsz=32, num_classes=3, seed=1)
    torch.manual_seed(0)
    save_model(
        build_model("yolo26", "classify", "n", num_classes=3), tmp_path / "w", names=["a", "b", "c"], imgsz=32
    )
    weights = tmp_path / "w.safetensors"
    off = {
        "auto_augment": None,
        "erasing": 0.0,
        "hsv_h": 0.0,
        "hsv_s": 0.0,
        "hsv_v": 0.0,
        "fliplr": 0.0,
        "scale": 0.0,
    }
    plain = probe.our_losses(weights, root, off, [0, 1], imgsz=32, batch=4)
    assert len(plain) == 2 and all(math.isfinite(v) for v in plain)
    assert probe.our_losses(weights, root, off, [0, 1], imgsz=32, batch=4) == plain  # a function of the seeds
    assert probe.our_losses(weights, root, {**off, "erasing": 1.0}, [0, 1], imgsz=32, batch=4) != plain
