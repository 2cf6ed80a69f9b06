"""The latency choices of the exported-model runners (docs/EXPORT.md "Latency") keep their outputs and settings."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

import lucid_core
from lucid_core.checkpoint import save_model
from lucid_core.export import ExportedModel
from lucid_core.export.loaded import PAD_VALUE
from lucid_core.export.runtime import OnnxRunner, Runner
from lucid_core.export_cli import export
from lucid_core.models import build_model

IMGSZ = 64


def _weights(folder: Path) -> Path:
    torch.manual_seed(0)
    model = build_model("yolov8", "detect", "n", num_classes=3)
    stem = folder / "yolov8-detect"
    save_model(model, stem, names=["a", "b", "c"], imgsz=IMGSZ)
    return stem


class _Recording:
    """A runner that records its input and forwards it to ``inner``."""

    def __init__(self, inner: Runner) -> None:
        self.inner, self.batch, self.half, self.any_hw = inner, inner.batch, inner.half, inner.any_hw
        self.memory_format = getattr(inner, "memory_format", torch.contiguous_format)
        self.seen: list[torch.Tensor] = []

    def __call__(self, x: torch.Tensor) -> list[torch.Tensor]:
        self.seen.append(x.clone())
        return self.inner(x)


def _tensor_constants(module: torch.jit.ScriptModule) -> list[torch.Tensor]:
    nodes = module.graph.findAllNodes("prim::Constant")  # type: ignore[attr-defined]
    values = [n.output().toIValue() for n in nodes if n.output().type().kind() == "TensorType"]
    return [v for v in values if isinstance(v, torch.Tensor) and v.ndim == 4 and min(v.shape[1:]) > 1]


def test_padding_is_the_constant_letterbox_pad_in_one_nchw_buffer(tmp_path: Path) -> None:
    """A smaller (channels_last, uint8-derived) input reaches the runner exactly as ``F.pad`` with the letterbox
    grey would make it, as one float32 tensor already in the layout the runner feeds (TorchScript: channels_last)."""
    net = lucid_core.load(export(_weights(tmp_path), format="torchscript", check=False).path).model
    assert isinstance(net, ExportedModel)
    recording = _Recording(net.runner)
    net.runner = recording
    x = torch.randint(0, 256, (1, 32, IMGSZ, 3), dtype=torch.uint8).permute(0, 3, 1, 2).float() / 255
    net(x)
    (seen,) = recording.seen
    assert seen.is_contiguous(memory_format=torch.channels_last) and seen.dtype == torch.float32
    assert torch.equal(seen, F.pad(x, (0, 0, 0, IMGSZ - 32), value=PAD_VALUE))


def test_torchscript_is_traced_channels_last_and_matches_nchw(tmp_path: Path) -> None:
    """The written trace holds channels_last convolution weights, and the runner's output equals the NCHW
    module's within the fp32 tolerance."""
    path = export(_weights(tmp_path), format="torchscript", check=False).path
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        module = torch.jit.load(str(path))  # type: ignore[no-untyped-call]
    weights = _tensor_constants(module)
    assert weights and all(w.is_contiguous(memory_format=torch.channels_last) for w in weights)
    net = lucid_core.load(path).model
    torch.manual_seed(0)
    model = build_model("yolov8", "detect", "n", num_classes=3).eval()
    x = torch.rand(1, 3, IMGSZ, IMGSZ)
    with torch.no_grad():
        torch.testing.assert_close(net(x), model(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fmt", ["onnx", pytest.param("openvino", marks=pytest.mark.slow)])
def test_onnx_and_openvino_run_any_input_size_at_that_size(tmp_path: Path, fmt: str) -> None:
    """Their files take any height and width: a smaller or larger input reaches the runtime unpadded and gives
    what PyTorch gives at that size (its own anchors and prototype size)."""
    pytest.importorskip("onnxruntime" if fmt == "onnx" else "openvino")
    torch.manual_seed(0)
    model = build_model("yolov8", "segment", "n", num_classes=3).eval()
    save_model(model, tmp_path / "seg", names=["a", "b", "c"], imgsz=IMGSZ)
    net = lucid_core.load(export(tmp_path / "seg", format=fmt, check=False).path).model
    assert isinstance(net, ExportedModel) and net.runner.any_hw
    recording = _Recording(net.runner)
    net.runner = recording
    for hw in ((32, IMGSZ), (IMGSZ + 32, IMGSZ)):
        x = torch.rand(1, 3, *hw)
        (pred, proto), (expected, expected_proto) = net(x), model(x)
        assert tuple(recording.seen[-1].shape[-2:]) == hw
        torch.testing.assert_close(pred, expected, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(proto, expected_proto, rtol=1e-4, atol=1e-4)


def test_a_top_k_export_pads_an_input_with_fewer_anchors_than_its_rows(tmp_path: Path) -> None:
    """The top-k graph returns a fixed number of rows (``min(max_det, anchors)`` at the exported size): an input
    with fewer anchors is padded to the exported size, one with enough runs at its own size."""
    pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    save_model(
        build_model("yolo26", "detect", "n", num_classes=3),
        tmp_path / "e2e",
        names=["a", "b", "c"],
        imgsz=IMGSZ,
    )
    net = lucid_core.load(export(tmp_path / "e2e", format="onnx", check=False).path).model
    assert isinstance(net, ExportedModel) and net.output == "topk" and net.runner.any_hw
    recording = _Recording(net.runner)
    net.runner = recording
    net(torch.rand(1, 3, 32, IMGSZ))
    assert tuple(recording.seen[-1].shape[-2:]) == (IMGSZ, IMGSZ)
    net(torch.rand(1, 3, IMGSZ, IMGSZ + 32))
    assert tuple(recording.seen[-1].shape[-2:]) == (IMGSZ, IMGSZ + 32)


@pytest.mark.slow
def test_openvino_compiles_a_few_shapes_alone_then_one_dynamic_model(tmp_path: Path) -> None:
    pytest.importorskip("openvino")
    from lucid_core.export.runtime import _COMPILED_KEPT

    torch.manual_seed(0)
    model = build_model("yolov8", "detect", "n", num_classes=3).eval()
    net = lucid_core.load(export(_weights(tmp_path), format="openvino", check=False).path).model
    assert isinstance(net, ExportedModel)
    sizes = [(32 * (1 + i), 32) for i in range(_COMPILED_KEPT + 2)]
    for hw in sizes:
        x = torch.rand(1, 3, *hw)
        torch.testing.assert_close(net(x), model(x), rtol=1e-4, atol=1e-4)
    runner = net.runner
    assert len(runner._compiled) == _COMPILED_KEPT and runner._compiled_any is not None  # type: ignore[attr-defined]


def test_onnx_session_runs_with_the_callers_thread_count(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    path = export(_weights(tmp_path), format="onnx", check=False).path
    assert OnnxRunner(path, threads=1).session.get_session_options().intra_op_num_threads == 1
    options = OnnxRunner(path).session.get_session_options()
    assert options.intra_op_num_threads == torch.get_num_threads() and options.inter_op_num_threads == 1


@pytest.mark.slow
def test_openvino_compiles_for_one_request_at_a_time(tmp_path: Path) -> None:
    pytest.importorskip("openvino")
    path = export(_weights(tmp_path), format="openvino", check=False).path
    net = lucid_core.load(path).model
    assert isinstance(net, ExportedModel)
    net(torch.rand(1, 3, IMGSZ, IMGSZ))
    compiled = next(iter(net.runner._compiled.values()))  # type: ignore[attr-defined]
    assert str(compiled.get_property("PERFORMANCE_HINT")) in ("LATENCY", "PerformanceMode.LATENCY")
    assert int(compiled.get_property("NUM_STREAMS")) == 1


@pytest.mark.slow
def test_openvino_inference_precision_is_f32_unless_asked(tmp_path: Path) -> None:
    """A float32 IR runs in f32 (PyTorch parity); ``openvino_precision="device"`` leaves the plugin's choice and
    ``"bf16"`` asks for bf16 (where the CPU lacks it the plugin runs f32): both stay within bf16 rounding."""
    pytest.importorskip("openvino")
    from lucid_core.export import load_exported

    path = export(_weights(tmp_path), format="openvino", check=False).path
    x = torch.rand(1, 3, IMGSZ, IMGSZ)
    outputs = {}
    for precision in (None, "device", "bf16"):
        net = load_exported(path, openvino_precision=precision)
        outputs[precision] = net(x)
        compiled = next(iter(net.runner._compiled.values()))  # type: ignore[attr-defined]
        hint = str(compiled.get_property("INFERENCE_PRECISION_HINT"))  # e.g. "<Type: 'float32'>"
        assert ("float32" in hint) if precision is None else any(p in hint for p in ("bfloat16", "float32"))
    reference = torch.cat([o.flatten() for o in _outputs_of(outputs[None])])
    for precision in ("device", "bf16"):
        other = torch.cat([o.flatten() for o in _outputs_of(outputs[precision])])
        assert (other - reference).abs().max() <= 5e-2 * reference.abs().max()
    with pytest.raises(ValueError, match="precision 'fp64'"):
        load_exported(path, openvino_precision="fp64")


def _outputs_of(out: object) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [v for v in out.values() if isinstance(v, torch.Tensor)]
    return [t for t in out if isinstance(t, torch.Tensor)]  # type: ignore[attr-defined]
