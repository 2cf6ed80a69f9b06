"""Deployment formats: every format x task exports, loads back through ``lucid_core.load`` and runs the same decode
as PyTorch; bad inputs are one-line errors with exit status 2 and no partial output."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import lucid_core
from lucid_core.checkpoint import save_model
from lucid_core.errors import CheckpointError
from lucid_core.export import ExportedModel, ExportInputError, MissingRuntimeError
from lucid_core.export.graph import ExportModule
from lucid_core.export_cli import export, main
from lucid_core.inference import forward_for_decode, prepare_inference_model
from lucid_core.models import build_model
from lucid_core.results import Detections

pytest.importorskip("onnxruntime")

IMGSZ = 64
TOL = 1e-4
CASES = [("yolo26", "detect"), ("yolov8", "segment"), ("yolo11", "pose"), ("yolo26", "obb")]
FORMATS = ["torchscript", "onnx", "openvino"]
#: OpenVINO's conversion takes ~8 s per model on 2 cores: one task in the default suite, all of them in `slow`
ROUND_TRIP_FORMATS = [
    "torchscript",
    "onnx",
    pytest.param("openvino", marks=pytest.mark.slow, id="openvino"),
]
OUTPUT_NAMES = {"torchscript": "m.torchscript", "onnx": "m.onnx", "openvino": "m_openvino"}


def _weights(folder: Path, family: str, task: str) -> Path:
    torch.manual_seed(0)
    model = build_model(family, task, "n", num_classes=3)
    stem = folder / f"{family}-{task}"
    save_model(model, stem, names=["a", "b", "c"], imgsz=IMGSZ)
    return stem


def _detections(result: object) -> Detections:
    """The Detections of one predict result (a ``Results`` holds them in ``.detections``)."""
    return getattr(result, "detections", result)  # type: ignore[no-any-return]


def _outputs(out: object) -> list[torch.Tensor]:
    return list(out) if isinstance(out, tuple) else [out]  # type: ignore[list-item]


@pytest.mark.parametrize("fmt", ROUND_TRIP_FORMATS)
@pytest.mark.parametrize(("family", "task"), CASES, ids=[f"{f}-{t}" for f, t in CASES])
def test_export_loads_back_and_matches_pytorch(tmp_path: Path, fmt: str, family: str, task: str) -> None:
    if fmt == "openvino":
        pytest.importorskip("openvino")
    stem = _weights(tmp_path, family, task)
    result = export(stem, format=fmt, dynamic_batch=fmt != "torchscript")
    assert result.parity is not None and result.passed, result.parity
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries left
    ckpt = lucid_core.load(result.path)
    net = ckpt.model
    assert isinstance(net, ExportedModel) and ckpt.source_kind == "exported"
    assert (ckpt.names, ckpt.task, ckpt.imgsz, net.num_classes) == (["a", "b", "c"], task, IMGSZ, 3)
    assert net.strides == (8, 16, 32) and ckpt.extra["export"]["lucid_version"] == lucid_core.__version__
    torch.manual_seed(0)
    model = build_model(family, task, "n", num_classes=3).eval()
    mode = net.decode
    reference, _ = prepare_inference_model(model, decode=mode)  # type: ignore[arg-type]
    x = torch.rand(3, 3, IMGSZ, IMGSZ)  # 3 images: a fixed batch of 1 runs in chunks
    with torch.no_grad():
        got = _outputs(forward_for_decode(net, x, mode))
        expected = _outputs(
            forward_for_decode(reference, x.contiguous(memory_format=torch.channels_last), mode)
        )
    if net.output == "topk":  # the ONNX file of an end-to-end model holds top-k rows: compare after decoding
        rows = ExportModule(model)(x)
        rows = rows[0] if isinstance(rows, tuple) else rows
        assert got[0].shape == (3, 4 + 3 + got[0].shape[1] - 7, rows.shape[1])
        return
    assert len(got) == len(expected)
    for ours, theirs in zip(got, expected, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=TOL, atol=TOL)


def test_smaller_inputs_are_padded_and_keep_their_anchor_grid(tmp_path: Path) -> None:
    """A rectangular input (predict's minimal letterbox) runs in a square export: its own anchors come back."""
    stem = _weights(tmp_path, "yolov8", "segment")
    path = export(stem, format="torchscript", check=False).path
    net = lucid_core.load(path).model
    x = torch.rand(1, 3, 32, IMGSZ)
    pred, proto = net(x)
    assert pred.shape[-1] == sum((32 // s) * (IMGSZ // s) for s in (8, 16, 32)) and proto.shape[-2:] == (
        8,
        16,
    )
    with pytest.raises(ValueError, match="larger than the exported size"):
        net(torch.rand(1, 3, 96, 96))


def test_openvino_results_are_their_own_and_the_input_is_only_read(tmp_path: Path) -> None:
    """The OpenVINO runner feeds its input in place and wraps OpenVINO's output arrays without a copy: a later call
    must leave an earlier call's outputs as they were, and the caller's input unchanged."""
    pytest.importorskip("openvino")
    stem = _weights(tmp_path, "yolov8", "detect")
    net = lucid_core.load(export(stem, format="openvino", check=False).path).model
    a, b = torch.rand(1, 3, IMGSZ, IMGSZ), torch.rand(1, 3, IMGSZ, IMGSZ)
    a_before = a.clone()
    with torch.no_grad():
        first = net(a)
        kept = first.clone()
        second = net(b)
    assert torch.equal(first, kept) and not torch.equal(first, second)
    assert torch.equal(a, a_before)


def test_half_exports_stay_within_the_fp16_tolerance(tmp_path: Path) -> None:
    pytest.importorskip("openvino")
    stem = _weights(tmp_path, "yolov8", "detect")
    for fmt in ("onnx", "openvino"):
        result = export(stem, format=fmt, half=True)
        assert result.metadata["precision"] == "fp16"
        assert result.parity is not None and result.passed, result.parity
        assert all(item.tolerance == 1e-2 for item in result.parity)


def test_in_graph_nms_rows_decode_back_to_the_same_detections(tmp_path: Path) -> None:
    stem = _weights(tmp_path, "yolov8", "detect")
    result = export(stem, format="onnx", nms=True, max_det=50)
    assert result.passed and result.metadata["output"] == "nms"
    net = lucid_core.load(result.path).model
    x = torch.rand(1, 3, IMGSZ, IMGSZ)
    dense = net(x)
    assert dense.shape == (1, 4 + 3, 50)
    with pytest.raises(ExportInputError, match="--nms needs a fixed batch"):
        export(stem, format="onnx", nms=True, dynamic_batch=True)


@pytest.mark.shared
@pytest.mark.parametrize("fmt", ROUND_TRIP_FORMATS)
def test_predict_gives_the_pytorch_detections(shared_dir: Path, tmp_path: Path, fmt: str) -> None:
    """The shapes segmentation checkpoint: fp32 exports predict the PyTorch model's detections (YOLO26 one-to-one
    branch; the ONNX file's in-graph top-k keeps one class per anchor, as agnostic top-k does)."""
    if fmt == "openvino":
        pytest.importorskip("openvino")
    weights = shared_dir / "weights" / "yolo26n-seg-shapes.pt"
    images = sorted((shared_dir / "data" / "shapes-seg" / "images" / "val").glob("*.jpg"))[:4]
    result = export(weights, format=fmt, output=tmp_path / OUTPUT_NAMES[fmt], dynamic_batch=True, check=False)
    exported = lucid_core.load(result.path).model
    model = lucid_core.load(weights).model
    agnostic = fmt == "onnx"
    ours = [
        _detections(r)
        for r in lucid_core.predict(exported, images, imgsz=96, decode="topk", agnostic_nms=agnostic)
    ]
    theirs = [
        _detections(r)
        for r in lucid_core.predict(model, images, imgsz=96, decode="topk", agnostic_nms=agnostic)
    ]
    assert sum(len(d) for d in theirs) > 0
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a.labels, b.labels)
        torch.testing.assert_close(a.boxes, b.boxes, rtol=0, atol=1e-3)
        torch.testing.assert_close(a.scores, b.scores, rtol=0, atol=1e-4)
        assert a.masks is not None and b.masks is not None
        assert (a.masks != b.masks).float().mean() < 1e-3
    with pytest.raises(ValueError, match="holds the one2one branch only; decode it with 'topk'"):
        lucid_core.predict(exported, images[:1], imgsz=96, decode="nms")


@pytest.mark.shared
@pytest.mark.slow
def test_eval_of_an_exported_model_equals_pytorch(shared_dir: Path, tmp_path: Path) -> None:
    lucid_train = pytest.importorskip("lucid_train")
    weights = shared_dir / "weights" / "yolo26n-seg-shapes.pt"
    data = shared_dir / "data" / "shapes-seg" / "data.yaml"
    path = export(weights, format="torchscript", output=tmp_path / "m.torchscript", batch=4, check=False).path
    # square batches: the validation's rectangular batches (pad 0.5 stride) are larger than the exported size
    ours = lucid_train.evaluate(path, data, decode="topk", batch_size=8, rect=False)
    theirs = lucid_train.evaluate(weights, data, decode="topk", batch_size=8, rect=False)
    for key, value in theirs.metrics().items():
        assert ours.metrics()[key] == pytest.approx(value, abs=1e-4), key


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.parametrize("task", ["detect", "segment"])
def test_openvino_int8_keeps_97_percent_of_the_fp32_map(shared_dir: Path, tmp_path: Path, task: str) -> None:
    """INT8 calibrated on the shapes training set keeps >= 0.97 x the fp32 mAP50-95 on its val set, and the IR
    really is quantised (FakeQuantize nodes), not a silent fp32 fallback."""
    pytest.importorskip("nncf")
    lucid_train = pytest.importorskip("lucid_train")
    from lucid_core.checkpoint import load_for_training

    reference = shared_dir / "weights" / "yolo26n-seg-shapes.pt"
    data = shared_dir / "data" / "shapes-seg" / "data.yaml"
    weights = tmp_path / task
    start = load_for_training(reference, num_classes=3, task=task)  # detect: the same boxes without masks
    assert not start.reinitialised
    save_model(start.model, weights, names=start.names, imgsz=96)
    fp32 = export(weights, format="openvino", output=tmp_path / "fp32_openvino", check=False).path
    int8 = export(weights, format="openvino", int8=True, data=data, output=tmp_path / "int8_openvino").path
    xml = next(int8.glob("*.xml")).read_text()
    assert "FakeQuantize" in xml or 'element_type="i8"' in xml
    key = "segm/mAP50-95" if task == "segment" else "bbox/mAP50-95"
    scores = [lucid_train.evaluate(p, data, decode="topk", rect=False).metrics()[key] for p in (fp32, int8)]
    assert scores[1] >= 0.97 * scores[0], scores


# ------------------------------------------------------------------------------------------------ bad inputs
def _one_line_error(capsys: pytest.CaptureFixture[str], *needles: str) -> None:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and all(n in err for n in needles), err


def test_unknown_format_and_int8_without_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stem = _weights(tmp_path, "yolov8", "detect")
    with pytest.raises(SystemExit) as exit_info:
        main([str(stem), "--format", "tflite"])
    assert exit_info.value.code == 2
    with pytest.raises(ExportInputError, match="--format tflite"):
        export(stem, format="tflite")
    capsys.readouterr()
    assert main([str(stem), "--format", "openvino", "--int8"]) == 2
    _one_line_error(capsys, "--int8 needs --data")
    assert main([str(stem), "--format", "onnx", "--int8", "--data", str(tmp_path)]) == 2
    _one_line_error(capsys, "--int8")
    assert not list(tmp_path.glob("*openvino*")) and not stem.with_suffix(".onnx").exists()


def test_calibration_set_without_images(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("nncf")
    stem = _weights(tmp_path, "yolov8", "detect")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([str(stem), "--format", "openvino", "--int8", "--data", str(empty)]) == 2
    _one_line_error(capsys, "no calibration images found")
    (tmp_path / "data.yaml").write_text("path: .\ntrain: images/train\nnames:\n  0: a\n", encoding="utf-8")
    assert main([str(stem), "--format", "openvino", "--int8", "--data", str(tmp_path / "data.yaml")]) == 2
    _one_line_error(capsys, "no calibration images found")
    assert not [p for p in tmp_path.iterdir() if "openvino" in p.name or p.name.startswith(".")]


def test_missing_runtime_names_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stem = _weights(tmp_path, "yolov8", "detect")
    onnx_path = export(stem, format="onnx", check=False).path
    monkeypatch.setitem(sys.modules, "openvino", None)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(MissingRuntimeError, match=r'pip install "lucid-core\[openvino\]"'):
        export(stem, format="openvino")
    assert main([str(stem), "--format", "openvino"]) == 2
    _one_line_error(capsys, "openvino", "lucid-core[openvino]")
    assert not list(tmp_path.glob("*openvino*"))
    with pytest.raises(CheckpointError, match=r'needs onnxruntime.*pip install "lucid-core\[onnx\]"'):
        lucid_core.load(onnx_path)


def test_corrupt_and_foreign_files_are_refused(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07garbage" * 10)
    with pytest.raises(CheckpointError, match=r"corrupt\.onnx: not a readable ONNX model"):
        lucid_core.load(corrupt)
    foreign = tmp_path / "foreign.onnx"
    torch.onnx.export(torch.nn.Conv2d(3, 4, 3), (torch.zeros(1, 3, 8, 8),), str(foreign), dynamo=False)
    with pytest.raises(CheckpointError, match=r"foreign\.onnx: an ONNX model without lucid export metadata"):
        lucid_core.load(foreign)
    script = tmp_path / "foreign.torchscript"
    torch.jit.save(torch.jit.script(torch.nn.Identity()), str(script))
    with pytest.raises(CheckpointError, match="without lucid export metadata"):
        lucid_core.load(script)
    ir = tmp_path / "broken_openvino"
    ir.mkdir()
    (ir / "model.xml").write_text("<net/>", encoding="utf-8")
    (ir / "metadata.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(CheckpointError, match="metadata is not valid JSON"):
        lucid_core.load(ir)
    with pytest.raises(CheckpointError, match="macOS-only"):
        lucid_core.load(tmp_path / "model.mlpackage") if (
            tmp_path / "model.mlpackage"
        ).mkdir() is None else None


def test_predict_cli_refuses_a_corrupt_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lucid_core.predict_cli import main as predict_main

    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"not onnx")
    image = tmp_path / "img.png"
    image.write_bytes(b"")
    assert (
        predict_main(["--weights", str(corrupt), "--source", str(image), "--output", str(tmp_path / "o")])
        == 2
    )
    assert "corrupt.onnx" in capsys.readouterr().err


def test_exported_metadata_travels_inside_the_onnx_file(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    stem = _weights(tmp_path, "yolo11", "pose")
    path = export(stem, format="onnx", check=False).path
    props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assert "lucid_metadata" in props and '"kpt_shape": [17, 3]' in props["lucid_metadata"]
    assert np.array_equal(np.array(lucid_core.load(path).model.kpt_shape), [17, 3])
