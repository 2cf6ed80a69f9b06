"""Deployment formats: TorchScript, ONNX, OpenVINO IR (fp32, fp16, INT8), TensorRT and Core ML, and loading them
back (:func:`load_exported`) as a module the predictor and evaluator run. docs/EXPORT.md has the format table."""

from lucid_core.export.errors import ExportInputError, MissingRuntimeError
from lucid_core.export.formats import FORMATS, ExportedFile, default_output, export_model
from lucid_core.export.graph import DEFAULT_MAX_DET, ExportModule
from lucid_core.export.loaded import ExportedModel, exported_files, exported_kind, load_exported
from lucid_core.export.onnx import DEFAULT_OPSET, export_onnx

__all__ = [
    "DEFAULT_MAX_DET",
    "DEFAULT_OPSET",
    "FORMATS",
    "ExportInputError",
    "ExportModule",
    "ExportedFile",
    "ExportedModel",
    "MissingRuntimeError",
    "default_output",
    "export_model",
    "export_onnx",
    "exported_files",
    "exported_kind",
    "load_exported",
]
