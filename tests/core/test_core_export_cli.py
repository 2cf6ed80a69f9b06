"""``lucid-export``: the exported ONNX file equals PyTorch within 1e-4 for one model per task, and the parity
check is printed (issue 14). Each case derives its anchor count from the model it builds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from lucid_core.checkpoint import save_model
from lucid_core.export_cli import main
from lucid_core.interop.onnx_export import ExportModule
from lucid_core.models import build_model

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

IMGSZ = 64
TOL = 1e-4
CASES = [("yolo26", "detect"), ("yolov8", "segment"), ("yolo11", "pose"), ("yolo26", "obb")]


def _weights(tmp_path: Path, family: str, task: str) -> tuple[Path, int]:
    torch.manual_seed(0)
    model = build_model(family, task, "n", num_classes=3)
    stem = tmp_path / f"{family}-{task}"
    save_model(model, stem, names=["a", "b", "c"], imgsz=IMGSZ)
    return stem, sum((IMGSZ // s) ** 2 for s in model.strides)


def _by_position(rows: np.ndarray, task: str) -> np.ndarray:
    cx, cy = (
        (rows[:, 0], rows[:, 1])
        if task == "obb"
        else ((rows[:, 0] + rows[:, 2]) / 2, (rows[:, 1] + rows[:, 3]) / 2)
    )
    return rows[np.lexsort((np.round(cx, 2), np.round(cy, 2)))]


@pytest.mark.parametrize(("family", "task"), CASES, ids=[f"{f}-{t}" for f, t in CASES])
def test_export_round_trip_equals_pytorch(
    tmp_path: Path, family: str, task: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stem, anchors = _weights(tmp_path, family, task)
    # max_det = every anchor: a fresh model scores anchors almost equally, so only the full top-k set is defined
    assert main([str(stem), "--format", "onnx", "--dynamic-batch", "--max-det", str(anchors)]) == 0
    out = capsys.readouterr().out
    onnx_path = stem.with_suffix(".onnx")
    assert f"-> {onnx_path}" in out
    parity_lines = [line for line in out.splitlines() if "parity onnxruntime vs PyTorch" in line]
    assert parity_lines and all(line.endswith(": ok") for line in parity_lines)

    # independent of the CLI's own check: run the file and the PyTorch export module on fresh images
    torch.manual_seed(0)  # the same weights as the exported checkpoint
    model = build_model(family, task, "n", num_classes=3)
    reference = ExportModule(model.eval(), max_det=anchors)
    x = torch.rand(3, 3, IMGSZ, IMGSZ)
    with torch.no_grad():
        expected = reference(x)
    expected_list = [t.numpy() for t in (expected if isinstance(expected, tuple) else (expected,))]
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"images": x.numpy()})
    assert len(got) == len(expected_list)
    if model.end2end:
        got[0] = np.stack([_by_position(rows, task) for rows in got[0]])
        expected_list[0] = np.stack([_by_position(rows, task) for rows in expected_list[0]])
    for ours, theirs in zip(got, expected_list, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=TOL)


def test_half_export_has_a_float16_input_and_fixed_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stem, _ = _weights(tmp_path, "yolov8", "detect")
    target = tmp_path / "out" / "half.onnx"
    assert main([str(stem), "--half", "--output", str(target)]) == 0
    assert "float16" in capsys.readouterr().out
    graph_input = onnx.load(str(target)).graph.input[0].type.tensor_type
    assert graph_input.elem_type == onnx.TensorProto.FLOAT16
    assert graph_input.shape.dim[0].dim_value == 1  # static batch without --dynamic-batch


def test_bad_weights_and_size_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"
    assert main([str(missing)]) == 2
    err = capsys.readouterr().err.strip()
    assert str(missing) in err and "\n" not in err
    stem, _ = _weights(tmp_path, "yolov8", "detect")
    assert main([str(stem), "--imgsz", "100", "--no-check"]) == 2
    assert "--imgsz 100" in capsys.readouterr().err


def test_faint_rows_class_flips_are_not_a_parity_failure() -> None:
    """An almost untrained model's class scores tie up to rounding: below the lowest reported confidence the two
    runtimes may pick different classes; above it, and for boxes and scores everywhere, nothing is forgiven."""
    from lucid_core.export_cli import FAINT_SCORE, mask_faint_labels

    theirs = np.array([[[0, 0, 4, 4, FAINT_SCORE / 10, 2], [1, 1, 5, 5, 0.9, 1]]], dtype=np.float32)
    ours = theirs.copy()
    ours[0, 0, 5] = 0  # a faint row's class flipped
    assert np.array_equal(mask_faint_labels(ours, theirs), theirs)
    ours[0, 1, 5] = 0  # a confident row's class flipped: still a difference
    assert mask_faint_labels(ours, theirs)[0, 1, 5] == 0
    ours[0, 0, 0] = 1  # a faint row's box moved: still a difference
    assert mask_faint_labels(ours, theirs)[0, 0, 0] == 1
