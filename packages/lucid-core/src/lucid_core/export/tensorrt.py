"""TensorRT engine export (fp32 or fp16) from the ONNX graph (:mod:`.onnx`), on a CUDA machine with NVIDIA's
``tensorrt`` package installed by the user (NVIDIA's licence: not a lucid-core extra). Without either, a one-line
refusal. The metadata record goes beside the engine (:func:`~.metadata.sidecar_path`)."""

from __future__ import annotations

import importlib
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from lucid_core.atomic import atomic_path, atomic_write_json
from lucid_core.export.errors import ExportInputError, MissingRuntimeError
from lucid_core.export.graph import ExportModule
from lucid_core.export.metadata import sidecar_path
from lucid_core.export.onnx import INPUT_NAME, write_onnx

__all__ = ["import_tensorrt", "tensorrt_available", "write_engine"]

#: builder workspace limit
WORKSPACE_BYTES = 4 << 30


def import_tensorrt() -> Any:
    """NVIDIA's ``tensorrt`` module (``ImportError`` when absent). It is installed by the user under NVIDIA's
    licence and deliberately not declared by lucid-core (no extra pins it), hence the import by name."""
    return importlib.import_module("tensorrt")


def tensorrt_available() -> str | None:
    """None when an engine can be built here, else the one-line reason."""
    if not torch.cuda.is_available():
        return (
            "--format engine needs a CUDA device and NVIDIA's tensorrt package; no CUDA device is available"
        )
    try:
        import_tensorrt()
    except ImportError:
        return (
            "--format engine needs NVIDIA's tensorrt package, which is not installed (pip install tensorrt; "
            "NVIDIA's licence, so not a lucid-core extra: see docs/EXPORT.md)"
        )
    return None


def write_engine(
    module: ExportModule,
    path: Path,
    hw: tuple[int, int],
    *,
    batch: int,
    dynamic_batch: bool,
    half: bool,
    opset: int,
    metadata: Mapping[str, Any],
    max_batch: int = 16,
) -> Path:
    """Build a TensorRT engine of ``module`` (float32) at ``path``; ``half`` enables fp16 kernels. A dynamic batch
    gets an optimisation profile from 1 to ``max(max_batch, batch)`` (optimum ``batch``)."""
    reason = tensorrt_available()
    if reason is not None:
        raise MissingRuntimeError(reason)
    trt = import_tensorrt()

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    with tempfile.TemporaryDirectory(prefix="lucid-export-") as scratch:
        onnx_path = write_onnx(
            module,
            Path(scratch) / "model.onnx",
            hw,
            batch=batch,
            dynamic_batch=dynamic_batch,
            opset=opset,
            half=False,
        )
        if not parser.parse_from_file(str(onnx_path)):
            errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
            raise ExportInputError(f"--format engine: TensorRT cannot parse the graph ({errors})")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_BYTES)
    if half:
        config.set_flag(trt.BuilderFlag.FP16)
    if dynamic_batch:
        profile = builder.create_optimization_profile()
        top = max(max_batch, batch)
        profile.set_shape(INPUT_NAME, (1, 3, *hw), (batch, 3, *hw), (top, 3, *hw))
        config.add_optimization_profile(profile)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise ExportInputError("--format engine: TensorRT could not build an engine for this graph")
    with atomic_path(path) as tmp:
        tmp.write_bytes(bytes(serialized))
        atomic_write_json(sidecar_path(path), dict(metadata))
    return path
