"""TensorRT engines (a CUDA device and NVIDIA's tensorrt package, installed by the user): export, load back and
predict like the PyTorch model; without them, one-line refusals (those run everywhere)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import lucid_core
from lucid_core.checkpoint import save_model
from lucid_core.errors import CheckpointError
from lucid_core.export import ExportedModel, MissingRuntimeError
from lucid_core.export.tensorrt import tensorrt_available
from lucid_core.export_cli import export, main
from lucid_core.models import build_model

IMGSZ = 64


def _weights(folder: Path, family: str = "yolov8", task: str = "detect") -> Path:
    torch.manual_seed(0)
    stem = folder / f"{family}-{task}"
    save_model(build_model(family, task, "n", num_classes=3), stem, names=["a", "b", "c"], imgsz=IMGSZ)
    return stem


def test_without_tensorrt_the_engine_format_is_a_one_line_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if tensorrt_available() is None:
        pytest.skip("TensorRT and CUDA are present here")
    stem = _weights(tmp_path)
    with pytest.raises(MissingRuntimeError, match="--format engine needs"):
        export(stem, format="engine")
    assert main([str(stem), "--format", "engine"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--format engine needs" in err
    assert not stem.with_suffix(".engine").exists()
    fake = tmp_path / "m.engine"
    fake.write_bytes(b"not an engine")
    with pytest.raises(CheckpointError, match="TensorRT"):
        lucid_core.load(fake)


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("family", "task", "half"), [("yolov8", "detect", False), ("yolo26", "segment", True)]
)
def test_engine_round_trip_predicts_like_pytorch(tmp_path: Path, family: str, task: str, half: bool) -> None:
    pytest.importorskip("tensorrt")
    stem = _weights(tmp_path, family, task)
    result = export(stem, format="engine", half=half, dynamic_batch=True)
    assert result.parity is not None and result.passed, result.parity
    net = lucid_core.load(result.path).model
    assert isinstance(net, ExportedModel) and net.export_format == "engine"
    torch.manual_seed(0)
    model = build_model(family, task, "n", num_classes=3).eval()
    images = [torch.randint(0, 255, (3, IMGSZ, IMGSZ), dtype=torch.uint8) for _ in range(3)]
    ours = lucid_core.predict(net, images, imgsz=IMGSZ, decode=net.decode, conf=0.0, max_det=5)  # type: ignore[arg-type]
    theirs = lucid_core.predict(model, images, imgsz=IMGSZ, decode=net.decode, conf=0.0, max_det=5)  # type: ignore[arg-type]
    for a, b in zip(ours, theirs, strict=True):
        da, db = getattr(a, "detections", a), getattr(b, "detections", b)
        torch.testing.assert_close(da.scores, db.scores, rtol=0, atol=1e-2 if half else 1e-3)
