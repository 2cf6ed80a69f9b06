"""ONNX export, kept importable here: the exporter lives in :mod:`lucid_core.export.onnx` (graph: :mod:`lucid_core.export.graph`)."""

from __future__ import annotations

from lucid_core.export.graph import DEFAULT_MAX_DET, ExportModule, topk_detections
from lucid_core.export.onnx import DEFAULT_OPSET, INPUT_NAME, export_onnx

__all__ = ["DEFAULT_MAX_DET", "DEFAULT_OPSET", "INPUT_NAME", "ExportModule", "export_onnx", "topk_detections"]
