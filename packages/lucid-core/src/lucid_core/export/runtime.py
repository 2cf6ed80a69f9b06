"""The runtimes that run an exported file: one runner per format, each a callable ``arrays in -> arrays out``.

A runner takes one float32 ``(B, 3, H, W)`` tensor (in any layout; an optional ``memory_format`` attribute names the
one it feeds its runtime, default contiguous NCHW) and returns the graph's outputs in order as tensors on the CPU
(TensorRT: on its CUDA device). ``batch`` is the fixed batch of the file or None (dynamic); ``any_hw`` whether the
file takes any input height and width (ONNX and OpenVINO exports of the dense or top-k output). The runtime packages
are optional extras, imported when a runner is made; a missing one raises
:class:`~lucid_core.errors.CheckpointError` naming the extra.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from lucid_core.errors import CheckpointError
from lucid_core.export.metadata import IR_METADATA_FILE, METADATA_KEY, parse_metadata, sidecar_path
from lucid_core.export.tensorrt import import_tensorrt

__all__ = [
    "OnnxRunner",
    "OpenVINORunner",
    "Runner",
    "TensorRTRunner",
    "TorchScriptRunner",
    "read_ir_metadata",
    "read_onnx_metadata",
]

#: input shapes an OpenVINO runner compiles for alone (any further shape runs on one dynamic compile)
_COMPILED_KEPT = 4


class Runner(Protocol):
    """What :class:`~lucid_core.export.loaded.ExportedModel` calls."""

    batch: int | None
    half: bool
    any_hw: bool

    def __call__(self, x: Tensor) -> list[Tensor]: ...


def _needs(module: str, extra: str, path: Path) -> CheckpointError:
    return CheckpointError(
        f'{path}: running it needs {module}, which is not installed: pip install "lucid-core[{extra}]"'
    )


def read_onnx_metadata(path: Path, custom: dict[str, str]) -> dict[str, Any]:
    """The lucid record of an ONNX file: its ``metadata_props`` entry, else the sidecar JSON beside it."""
    if METADATA_KEY in custom:
        return parse_metadata(custom[METADATA_KEY], path)
    side = sidecar_path(path)
    if side.is_file():
        return parse_metadata(side.read_bytes(), side)
    raise CheckpointError(
        f"{path}: an ONNX model without lucid export metadata (not written by lucid-export)"
    )


class OnnxRunner:
    """onnxruntime on the CPU (the ``onnx`` extra).

    Session: ``threads`` intra-op threads (None = ``torch.get_num_threads()``, the count the caller set for torch),
    one inter-op thread, sequential execution, every graph optimisation, and worker threads that sleep rather than
    spin between operators (measured faster on a shared CPU: docs/EXPORT.md "Latency").
    """

    def __init__(self, path: Path, *, threads: int | None = None) -> None:
        try:
            import onnxruntime as ort  # the [onnx] extra
        except ImportError:
            raise _needs("onnxruntime", "onnx", path) from None
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(threads) if threads is not None else torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry("session.intra_op.allow_spinning", "1")
        options.add_session_config_entry("session.force_spinning_stop", "1")
        try:
            self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own types for unreadable or invalid models
            raise CheckpointError(f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})") from exc
        self.metadata = read_onnx_metadata(path, dict(self.session.get_modelmeta().custom_metadata_map))
        first = self.session.get_inputs()[0]
        self.input_name = first.name
        self.half = first.type == "tensor(float16)"
        self.batch = first.shape[0] if isinstance(first.shape[0], int) else None
        self.any_hw = not any(isinstance(size, int) for size in first.shape[2:])

    def __call__(self, x: Tensor) -> list[Tensor]:
        array = (
            x.detach().cpu().contiguous().numpy().astype(np.float16 if self.half else np.float32, copy=False)
        )
        return [torch.from_numpy(np.asarray(out)) for out in self.session.run(None, {self.input_name: array})]


class TorchScriptRunner:
    """A TorchScript file (torch only), run on the CPU."""

    def __init__(self, path: Path) -> None:
        extra = {METADATA_KEY: ""}
        try:
            with warnings.catch_warnings():  # torch >= 2.9 announces TorchScript's deprecation
                warnings.simplefilter("ignore", FutureWarning)
                self.module = torch.jit.load(  # type: ignore[no-untyped-call]
                    str(path), map_location="cpu", _extra_files=extra
                )
        except (RuntimeError, ValueError, OSError) as exc:
            raise CheckpointError(f"{path}: not a readable TorchScript file ({exc})") from exc
        if not extra[METADATA_KEY]:
            raise CheckpointError(
                f"{path}: a TorchScript file without lucid export metadata (not lucid-export's)"
            )
        self.metadata = parse_metadata(extra[METADATA_KEY], path)
        self.half = self.metadata.get("precision") == "fp16"
        self.batch = self.metadata.get("batch")
        self.any_hw = False
        self.memory_format = torch.channels_last  # the layout it is fed (ExportedModel pads straight into it)

    def __call__(self, x: Tensor) -> list[Tensor]:
        """Run ``x`` fed in channels_last, the layout the trace was written in (:mod:`.torchscript`)."""
        x = x.to(torch.float16 if self.half else torch.float32)
        with torch.inference_mode():
            out = self.module(x.contiguous(memory_format=torch.channels_last))
        return list(out) if isinstance(out, tuple | list) else [out]


#: ``OpenVINORunner(precision=...)`` values: the plugin's own default, or an inference precision hint.
OPENVINO_PRECISIONS = ("device", "f32", "bf16", "f16")


class OpenVINORunner:
    """An OpenVINO IR (``.xml`` + ``.bin``) on the CPU (the ``openvino`` extra); compiled once per input shape.

    ``threads``: the CPU plugin's inference threads (None = its default). ``precision``: the inference precision
    (``INFERENCE_PRECISION_HINT``, OpenVINO's "Precision control"): None runs a float32 IR in ``f32`` (not the
    plugin's bf16 default on CPUs that have it), so it matches PyTorch to float rounding; ``"device"`` leaves the
    plugin's default (bf16 on CPUs with AMX or AVX-512 BF16: faster, about 1e-2 relative); ``"f32"``, ``"bf16"``
    or ``"f16"`` asks for that one.
    Compiled for one request at a time: ``PERFORMANCE_HINT`` LATENCY with one stream (OpenVINO's CPU device
    documentation, "Performance hints"), which predict's one image per call wants (docs/EXPORT.md "Latency").
    """

    def __init__(
        self, xml: Path, metadata: dict[str, Any], *, threads: int | None = None, precision: str | None = None
    ) -> None:
        if precision is not None and precision not in OPENVINO_PRECISIONS:
            raise ValueError(f"OpenVINO precision {precision!r}: expected one of {OPENVINO_PRECISIONS}")
        try:
            import openvino as ov  # the [openvino] extra
        except ImportError:
            raise _needs("openvino", "openvino", xml) from None
        self.core = ov.Core()
        try:
            self.model = self.core.read_model(str(xml))
        except Exception as exc:  # openvino raises RuntimeError subclasses of its own
            raise CheckpointError(f"{xml}: not a readable OpenVINO IR ({type(exc).__name__}: {exc})") from exc
        self.metadata = metadata
        self.half = False  # IR inputs stay float32 (fp16 IRs compress the weights only)
        self.batch = metadata.get("batch")
        self.config: dict[str, Any] = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}
        if precision is None and metadata.get("precision") == "fp32":
            precision = "f32"
        if precision is not None and precision != "device":
            self.config["INFERENCE_PRECISION_HINT"] = precision
        if threads is not None:
            self.config["INFERENCE_NUM_THREADS"] = int(threads)
        sizes = self.model.inputs[0].partial_shape
        self.any_hw = all(sizes[axis].is_dynamic for axis in (2, 3))
        self._compiled: dict[tuple[int, ...], Any] = {}
        self._compiled_any: Any = None

    def _compiled_for(self, shape: tuple[int, ...]) -> Any:
        """The compiled model for inputs of ``shape``: compiled for that shape alone (the faster kernels) for the
        first :data:`_COMPILED_KEPT` shapes, then one compile of the IR as it is (its dynamic dimensions) for all
        others, so a stream of many sizes does not recompile."""
        compiled = self._compiled.get(shape)
        if compiled is not None:
            return compiled
        if len(self._compiled) < _COMPILED_KEPT:
            model = self.model.clone()
            model.reshape({0: list(shape)})
            compiled = self._compiled[shape] = self.core.compile_model(model, "CPU", self.config)
            return compiled
        if self._compiled_any is None:
            self._compiled_any = self.core.compile_model(self.model, "CPU", self.config)
        return self._compiled_any

    def __call__(self, x: Tensor) -> list[Tensor]:
        array = x.detach().cpu().contiguous().numpy().astype(np.float32, copy=False)
        compiled = self._compiled_for(tuple(array.shape))
        # the input is read in place (share_inputs); the outputs come back as arrays of their own (share_outputs
        # False, the default), so they are wrapped without another copy
        result = compiled(array, share_inputs=True)
        return [torch.from_numpy(result[out]) for out in compiled.outputs]


class TensorRTRunner:
    """A serialised TensorRT engine on its CUDA device (TensorRT is installed by the user: NVIDIA's licence)."""

    def __init__(self, path: Path) -> None:
        try:
            trt = import_tensorrt()
        except ImportError:
            raise CheckpointError(
                f"{path}: running a TensorRT engine needs NVIDIA's tensorrt package and a CUDA device "
                "(pip install tensorrt; not a lucid-core extra, see docs/EXPORT.md)"
            ) from None
        if not torch.cuda.is_available():
            raise CheckpointError(f"{path}: running a TensorRT engine needs a CUDA device; none is available")
        side = sidecar_path(path)
        if not side.is_file():
            raise CheckpointError(f"{path}: a TensorRT engine without its lucid metadata file {side.name}")
        self.metadata = parse_metadata(side.read_bytes(), side)
        logger = trt.Logger(trt.Logger.ERROR)
        self.engine = trt.Runtime(logger).deserialize_cuda_engine(path.read_bytes())
        if self.engine is None:
            raise CheckpointError(f"{path}: not a TensorRT engine this TensorRT version can read")
        self.context = self.engine.create_execution_context()
        self.names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        self.inputs = [n for n in self.names if self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.outputs = [n for n in self.names if n not in self.inputs]
        self.half = self.metadata.get("precision") == "fp16"
        self.batch = self.metadata.get("batch")
        self.any_hw = False
        self.device = torch.device("cuda")

    def __call__(self, x: Tensor) -> list[Tensor]:
        stream = torch.cuda.current_stream(self.device)
        x = x.to(self.device, torch.float16 if self.half else torch.float32).contiguous()
        name = self.inputs[0]
        self.context.set_input_shape(name, tuple(x.shape))
        self.context.set_tensor_address(name, x.data_ptr())
        outputs = []
        for out in self.outputs:
            shape = tuple(self.context.get_tensor_shape(out))
            dtype = torch.float16 if "HALF" in str(self.engine.get_tensor_dtype(out)) else torch.float32
            tensor = torch.empty(shape, dtype=dtype, device=self.device)
            self.context.set_tensor_address(out, tensor.data_ptr())
            outputs.append(tensor)
        if not self.context.execute_async_v3(stream.cuda_stream):
            raise RuntimeError("TensorRT: execution failed")
        stream.synchronize()
        return outputs


def read_ir_metadata(folder: Path) -> dict[str, Any]:
    """The lucid record of an OpenVINO IR folder (its ``metadata.json``)."""
    path = folder / IR_METADATA_FILE
    if not path.is_file():
        raise CheckpointError(f"{folder}: an OpenVINO IR without lucid export metadata ({IR_METADATA_FILE})")
    return parse_metadata(path.read_bytes(), path)
