"""``lucid_core.load``: lucid-core weights or a reference ``.pt`` wherever weights are run (predict, lucid-predict,
lucid-export; lucid-eval in tests/train/test_eval_cli.py), with the restricted unpickler's guarantees and errors that
name the file; the deprecated loaders warn and return what ``load`` returns."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch

import lucid_core
from lucid_core import checkpoint
from lucid_core.checkpoint import CheckpointError, load, save_model
from lucid_core.convert_cli import main as convert_main
from lucid_core.inference import predict
from lucid_core.models import build_model
from lucid_core.predict_cli import main as predict_main

IMGSZ = 160


class _SystemCall:
    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (self.command,))


def _reference_weights(shared_dir: Path) -> list[Path]:
    found = sorted((shared_dir / "weights").glob("*.pt"))
    if not found:
        pytest.skip(f"no reference .pt in {shared_dir / 'weights'}")
    return found


@pytest.mark.shared
def test_a_reference_pt_predicts_as_its_converted_checkpoint(
    shared_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every reference checkpoint in shared/weights: `lucid-predict --weights X.pt` writes the same JSON as
    `lucid-predict` on the `lucid-convert`ed weights, and `load` keeps the names, imgsz and the file."""
    image = shared_dir / "data" / "images" / "bus.jpg"
    for source in _reference_weights(shared_dir):
        converted = tmp_path / "converted" / source.stem
        assert convert_main([str(source), str(converted)]) == 0
        loaded, stored = load(source), load(converted)
        assert loaded.names == stored.names and loaded.imgsz == stored.imgsz, source.name
        assert loaded.config == stored.config and not loaded.model.training
        assert loaded.weights_path == source and loaded.source_kind == "reference"
        assert (loaded.task, loaded.family) == (stored.task, stored.family)
        assert loaded.extra["imported"]["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
        outputs = []
        for weights in (source, converted):
            out = tmp_path / "predictions" / f"{source.stem}-{weights.suffix or 'lucid'}"
            argv = ["--weights", str(weights), "--source", str(image), "--output", str(out)]
            assert predict_main([*argv, "--imgsz", str(IMGSZ), "--conf", "0.05"]) == 0
            outputs.append(json.loads((out / f"{image.name}.json").read_text()))
        assert outputs[0] == outputs[1], source.name
        (det,) = predict(source, image, imgsz=IMGSZ, conf=0.05)
        assert len(det) == outputs[0]["num_detections"], source.name
    capsys.readouterr()


def test_a_malicious_pt_is_refused_everywhere_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lucid_core.export_cli import main as export_main

    sentinel = tmp_path / "sentinel"
    source = tmp_path / "evil.pt"
    torch.save({"model": _SystemCall(f"touch {sentinel}")}, source)
    with pytest.raises(CheckpointError, match=r"evil\.pt: cannot import") as info:
        load(source)
    assert f"{os.system.__module__}.system" in str(info.value)
    image = torch.zeros(3, 32, 32, dtype=torch.uint8)
    with pytest.raises(CheckpointError, match=r"evil\.pt"):
        predict(source, image)
    out = tmp_path / "out"
    assert predict_main(["--weights", str(source), "--source", str(tmp_path), "--output", str(out)]) == 2
    assert "evil.pt" in capsys.readouterr().err
    assert export_main([str(source), "--output", str(tmp_path / "evil.onnx"), "--no-check"]) == 2
    assert "evil.pt" in capsys.readouterr().err
    assert not sentinel.exists() and not out.exists() and not (tmp_path / "evil.onnx").exists()


def test_a_missing_pt_and_a_lucid_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"absent\.pt: reference checkpoint not found"):
        load(tmp_path / "absent.pt")
    (tmp_path / "garbage.pt").write_bytes(b" not a pickle")
    with pytest.raises(CheckpointError, match=r"garbage\.pt: not a readable reference checkpoint"):
        load(tmp_path / "garbage.pt")
    model = build_model("yolo26", "detect", "n", num_classes=2)
    save_model(model, tmp_path / "w", names=["a", "b"], imgsz=IMGSZ)
    loaded = load(tmp_path / "w")
    assert loaded.names == ["a", "b"] and loaded.imgsz == IMGSZ and "imported" not in loaded.extra
    with pytest.raises(CheckpointError, match=r"a Lightning training checkpoint"):
        load(tmp_path / "last.ckpt")


def test_the_old_loaders_warn_and_return_what_load_returns(tmp_path: Path) -> None:
    assert lucid_core.load is load
    model = build_model("yolov8", "detect", "n", num_classes=2)
    save_model(model, tmp_path / "w", names=["a", "b"], imgsz=IMGSZ)
    expected = load(tmp_path / "w")
    for name in ("load_checkpoint", "load_weights", "load_model"):
        with pytest.warns(
            DeprecationWarning, match=rf"checkpoint\.{name} is deprecated.*lucid_core\.load"
        ) as seen:
            result = getattr(lucid_core, name)(tmp_path / "w")
        assert [w.filename for w in seen] == [__file__]  # one warning, pointing at the caller
        got = result if name == "load_model" else result.model
        assert got.config == expected.model.config
        for key, value in expected.model.state_dict().items():
            assert torch.equal(got.state_dict()[key], value), (name, key)
        if name != "load_model":
            assert (result.names, result.imgsz, result.weights_path) == (
                expected.names,
                expected.imgsz,
                expected.weights_path,
            )
    for name in ("load_checkpoint", "load_model"):  # lucid checkpoints only, as before
        with (
            pytest.warns(DeprecationWarning),
            pytest.raises(CheckpointError, match=r"x\.pt: .*lucid-convert"),
        ):
            getattr(checkpoint, name)(tmp_path / "x.pt")
