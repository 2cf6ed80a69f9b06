"""ONNX export: every task, dynamic batch, onnxruntime matches PyTorch within 1e-4; YOLO26 decodes with TopK, no NMS."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from lucid_core.decode import decode_topk
from lucid_core.interop import export_onnx, import_checkpoint
from lucid_core.interop.onnx_export import ExportModule, topk_detections
from lucid_core.models import build_model

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

IMGSZ = 128
TOL = 1e-4
CASES = [
    ("yolo26", "detect"),
    ("yolo26", "segment"),
    ("yolo26", "pose"),
    ("yolo26", "obb"),
    ("yolov8", "detect"),
    ("yolo11", "pose"),
]


def _run(path: Path, x: torch.Tensor) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return list(session.run(None, {"images": x.numpy()}))


def _by_position(rows: np.ndarray, task: str) -> np.ndarray:
    """Rows of an end-to-end output ``(k, 6 + extra)`` ordered by box centre (anchor centres are distinct).

    A freshly built model gives every anchor almost the same score, so top-k order among equal scores is not
    defined across runtimes; with k = A every anchor is present and its position identifies it.
    """
    if task == "obb":  # cx, cy, w, h
        cx, cy = rows[:, 0], rows[:, 1]
    else:  # x1, y1, x2, y2
        cx, cy = (rows[:, 0] + rows[:, 2]) / 2, (rows[:, 1] + rows[:, 3]) / 2
    return rows[np.lexsort((np.round(cx, 2), np.round(cy, 2)))]


@pytest.mark.parametrize(("family", "task"), CASES, ids=[f"{f}-{t}" for f, t in CASES])
def test_onnxruntime_matches_pytorch_with_dynamic_batch(tmp_path: Path, family: str, task: str) -> None:
    torch.manual_seed(0)
    model = build_model(family, task, "n", num_classes=3).eval()
    num_anchors = sum((IMGSZ // s) ** 2 for s in model.strides)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    path = export_onnx(model, tmp_path / "model.onnx", IMGSZ, dynamic_batch=True, max_det=num_anchors)
    assert path.is_file() and not list(tmp_path.glob(".*.tmp"))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # model left untouched
    graph = onnx.load(str(path)).graph
    assert graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    ops = {node.op_type for node in graph.node}
    assert "NonMaxSuppression" not in ops
    assert ("TopK" in ops) == model.end2end
    reference_module = ExportModule(model, max_det=num_anchors)
    for batch in (1, 3):
        x = torch.rand(batch, 3, IMGSZ, IMGSZ)
        with torch.no_grad():
            expected = reference_module(x)
        expected_list = [t.numpy() for t in (expected if isinstance(expected, tuple) else (expected,))]
        got = _run(path, x)
        assert len(got) == len(expected_list) == (2 if task == "segment" else 1)
        for ours, theirs in zip(got, expected_list, strict=True):
            assert ours.shape == theirs.shape
        if model.end2end:
            extra = {"detect": 0, "segment": 32, "pose": 17 * 3, "obb": 1}[task]
            assert got[0].shape == (batch, num_anchors, 6 + extra)
            assert np.all(np.diff(got[0][..., 4], axis=1) <= 0)  # descending scores per image
            got[0] = np.stack([_by_position(rows, task) for rows in got[0]])
            expected_list[0] = np.stack([_by_position(rows, task) for rows in expected_list[0]])
        for ours, theirs in zip(got, expected_list, strict=True):
            np.testing.assert_allclose(ours, theirs, rtol=0, atol=TOL)


def test_yolo26_graph_decodes_with_topk_and_has_no_nms(tmp_path: Path) -> None:
    model = build_model("yolo26", "pose", "n", num_classes=2)
    path = export_onnx(model, tmp_path / "e2e.onnx", IMGSZ)
    ops = {node.op_type for node in onnx.load(str(path)).graph.node}
    assert "TopK" in ops
    assert "NonMaxSuppression" not in ops


def test_topk_detections_agrees_with_decode_topk_and_converts_boxes() -> None:
    torch.manual_seed(3)
    nc, anchors = 4, 40
    # one scoring class per anchor: the graph keeps each anchor's best class, decode_topk (the reference
    # predictor's rule) may report an anchor twice when its second class outranks other anchors
    one_class = torch.nn.functional.one_hot(torch.randint(0, nc, (anchors,)), nc).T[None].float()
    dense = torch.cat(
        (
            torch.rand(1, 4, anchors) * 50 + 10,
            torch.rand(1, nc, anchors) * one_class,
            torch.rand(1, 2, anchors),
        ),
        1,
    )
    out = topk_detections(dense, num_classes=nc, task="pose", max_det=10)[0]
    selection = decode_topk(dense[0, 4 : 4 + nc].T, conf=0.0, max_det=10)
    assert torch.equal(out[:, 4], selection.scores)
    assert torch.equal(out[:, 5].long(), selection.labels)
    cx, cy, w, h = dense[0, :4, selection.anchor_idx]
    torch.testing.assert_close(out[:, :4], torch.stack((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2), 1))
    torch.testing.assert_close(out[:, 6:], dense[0, 4 + nc :, selection.anchor_idx].T)
    obb = topk_detections(dense, num_classes=nc, task="obb", max_det=100)
    assert obb.shape == (1, anchors, 6 + 2)  # k capped at A; obb keeps centre/size
    torch.testing.assert_close(obb[0, :, :4].sort(0).values, dense[0, :4].T.sort(0).values)


def test_bad_imgsz_is_refused(tmp_path: Path) -> None:
    model = build_model("yolov8", "detect", "n", num_classes=1)
    with pytest.raises(ValueError, match="multiples of the largest stride 32"):
        export_onnx(model, tmp_path / "m.onnx", 100)


@pytest.mark.shared
def test_trained_checkpoint_export_matches(tmp_path: Path, shared_dir: Path) -> None:
    """Trained weights (YOLO11n-pose): probabilities within 1e-4, pixel rows within a relative 1e-4."""
    model, _ = import_checkpoint(shared_dir / "weights" / "yolo11n-pose.pt")
    path = export_onnx(model, tmp_path / "pose.onnx", IMGSZ)
    x = torch.rand(2, 3, IMGSZ, IMGSZ)
    with torch.no_grad():
        expected = ExportModule(model)(x)
    assert isinstance(expected, torch.Tensor)
    (got,) = _run(path, x)
    assert model.kpt_shape is not None
    num_kpts, dims = model.kpt_shape
    nc = model.num_classes
    keypoints = np.arange(num_kpts * dims).reshape(num_kpts, dims) + 4 + nc
    prob_rows = [*range(4, 4 + nc), *keypoints[:, 2]]
    pixel_rows = [0, 1, 2, 3, *keypoints[:, :2].ravel()]
    ref = expected.numpy()
    np.testing.assert_allclose(got[:, prob_rows], ref[:, prob_rows], rtol=0, atol=TOL)
    np.testing.assert_allclose(got[:, pixel_rows], ref[:, pixel_rows], rtol=TOL, atol=TOL)
