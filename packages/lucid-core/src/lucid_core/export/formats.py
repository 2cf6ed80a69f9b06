"""One entry for every format: :func:`export_model` builds the export module, the metadata record and the file.

| format | output | precisions | runtime (extra) |
|---|---|---|---|
| ``torchscript`` | ``<stem>.torchscript`` | fp32, fp16 | torch |
| ``onnx`` | ``<stem>.onnx`` | fp32, fp16 | onnxruntime (``onnx``); ``onnx`` package to embed metadata (``export``) |
| ``openvino`` | ``<stem>_openvino/`` (``<stem>_int8_openvino/``) | fp32, fp16, int8 | openvino (``openvino``), nncf (``openvino-int8``) |
| ``engine`` | ``<stem>.engine`` | fp32, fp16 | NVIDIA tensorrt, user-installed |
| ``coreml`` | ``<stem>.mlpackage`` | fp32, fp16 | coremltools (``coreml``), export only (macOS runtime) |
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lucid_core.export.calibration import DEFAULT_CALIBRATION_IMAGES
from lucid_core.export.coreml import write_coreml
from lucid_core.export.errors import ExportInputError
from lucid_core.export.graph import DEFAULT_MAX_DET, ExportModule, OutputKind
from lucid_core.export.metadata import export_metadata
from lucid_core.export.onnx import DEFAULT_OPSET, write_onnx
from lucid_core.export.openvino import write_openvino
from lucid_core.export.tensorrt import write_engine
from lucid_core.export.torchscript import write_torchscript
from lucid_core.models import YOLOModel

__all__ = ["FORMATS", "ExportedFile", "default_output", "export_model"]

FORMATS = ("torchscript", "onnx", "openvino", "engine", "coreml")
_SUFFIX = {"torchscript": ".torchscript", "onnx": ".onnx", "engine": ".engine", "coreml": ".mlpackage"}


def default_output(weights: str | os.PathLike[str], format: str = "onnx", *, int8: bool = False) -> Path:
    """Where an export of ``weights`` goes by default: beside it, named per format (module docstring)."""
    path = Path(weights)
    stem = path.with_suffix("") if path.suffix in (".safetensors", ".json", ".pt", ".pth") else path
    if format == "openvino":
        return stem.with_name(f"{stem.name}{'_int8' if int8 else ''}_openvino")
    return stem.with_name(stem.name + _SUFFIX[format])


@dataclass(frozen=True)
class ExportedFile:
    """What :func:`export_model` wrote: the path, the metadata record and the module the graph was traced from."""

    path: Path
    metadata: dict[str, Any]
    module: ExportModule


def export_model(
    model: YOLOModel,
    path: str | os.PathLike[str],
    *,
    format: str = "onnx",
    names: Sequence[str],
    imgsz: tuple[int, int],
    batch: int = 1,
    dynamic_batch: bool = False,
    half: bool = False,
    int8_data: str | os.PathLike[str] | None = None,
    fraction: float = 1.0,
    calibration_images: int = DEFAULT_CALIBRATION_IMAGES,
    max_det: int = DEFAULT_MAX_DET,
    opset: int = DEFAULT_OPSET,
    nms: bool = False,
    output: OutputKind | None = None,
) -> ExportedFile:
    """Export ``model`` (left untouched) as ``format`` to ``path`` with its metadata record; atomically.

    ``imgsz`` ``(h, w)`` multiples of the largest stride; ``batch`` the fixed batch (``dynamic_batch``: any);
    ``half`` float16; ``int8_data`` (OpenVINO only) calibrates an INT8 model on that data YAML or image folder;
    ``nms`` puts class-aware NMS of the one-to-many branch into the graph. ``output`` (:mod:`.graph`) defaults to
    ``"nms"`` with ``nms``, else to the in-graph top-k for an end-to-end model exported to ONNX (the ONNX file's
    documented layout) and to the dense output otherwise (decoded by lucid-core, exactly as the PyTorch model).
    Bad combinations raise :class:`ExportInputError`; a missing converter its subclass naming the extra.
    """
    if format not in FORMATS:
        raise ExportInputError(f"--format {format}: expected one of {', '.join(FORMATS)}")
    if int8_data is not None and format != "openvino":
        raise ExportInputError(f"--int8: INT8 calibration is available for --format openvino, not {format}")
    if int8_data is not None and half:
        raise ExportInputError("--int8 and --half: choose one precision")
    if nms and dynamic_batch:
        raise ExportInputError("--nms needs a fixed batch (--batch N), not --dynamic-batch")
    if batch < 1:
        raise ExportInputError(f"--batch {batch}: expected >= 1")
    if output is None:
        output = "nms" if nms else ("topk" if format == "onnx" and model.end2end else "dense")
    try:
        module = ExportModule(model, max_det=max_det, output=output)
    except ValueError as exc:
        raise ExportInputError(f"--nms: {exc}") from None
    precision = "int8" if int8_data is not None else ("fp16" if half else "fp32")
    metadata = export_metadata(
        model,
        export_format=format,
        names=names,
        imgsz=imgsz,
        batch=None if dynamic_batch else batch,
        output=module.output,
        branch=module.branch,
        max_det=max_det,
        precision=precision,
        extra={"opset": opset} if format in ("onnx", "openvino", "engine") else None,
    )
    target = Path(path)
    # ONNX Runtime and OpenVINO run any input size: a non-square image then runs at its own letterboxed size
    dynamic_hw = format in ("onnx", "openvino") and module.output in ("dense", "topk")
    traced_half = half and format in ("onnx", "torchscript")
    module = module.to(torch.float16 if traced_half else torch.float32)
    if format == "onnx":
        write_onnx(
            module,
            target,
            imgsz,
            batch=batch,
            dynamic_batch=dynamic_batch,
            opset=opset,
            half=half,
            metadata=metadata,
            dynamic_hw=dynamic_hw,
        )
    elif format == "torchscript":
        write_torchscript(module, target, imgsz, batch=batch, half=half, metadata=metadata)
    elif format == "openvino":
        write_openvino(
            module,
            target,
            imgsz,
            batch=batch,
            dynamic_batch=dynamic_batch,
            half=half,
            opset=opset,
            metadata=metadata,
            int8_data=int8_data,
            fraction=fraction,
            calibration_images=calibration_images,
            dynamic_hw=dynamic_hw,
        )
    elif format == "engine":
        write_engine(
            module,
            target,
            imgsz,
            batch=batch,
            dynamic_batch=dynamic_batch,
            half=half,
            opset=opset,
            metadata=metadata,
        )
    else:
        write_coreml(module, target, imgsz, batch=batch, half=half, metadata=metadata)
    return ExportedFile(target, metadata, module)
