"""Core ML export (``coremltools``, the ``coreml`` extra): an ML program package converted from the TorchScript
trace, with the metadata record in its user-defined metadata. Core ML runs on macOS only, so on Linux the export
is checked structurally (:func:`check_spec`: inputs, outputs and their shapes), never run."""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from lucid_core.export.errors import ExportInputError, missing
from lucid_core.export.files import atomic_directory
from lucid_core.export.graph import ExportModule
from lucid_core.export.metadata import METADATA_KEY
from lucid_core.export.onnx import INPUT_NAME

__all__ = ["check_spec", "write_coreml"]


def write_coreml(
    module: ExportModule,
    path: Path,
    hw: tuple[int, int],
    *,
    batch: int,
    half: bool,
    metadata: Mapping[str, Any],
) -> Path:
    """Convert ``module`` (float32) to ``path`` (a ``.mlpackage`` folder); ``half`` computes in float16."""
    try:
        import coremltools as ct  # the [coreml] extra
    except ImportError:
        raise missing("coremltools", "coreml", "--format coreml") from None
    example = torch.zeros(batch, 3, *hw)
    with warnings.catch_warnings(), torch.no_grad():  # tracer and converter notices
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(  # type: ignore[no-untyped-call]
            module.eval(), (example,), strict=False, check_trace=False
        )
        sample = module(example)
        names = ["output0", "proto"] if isinstance(sample, tuple) else ["output0"]
        mlmodel = ct.convert(
            traced,
            inputs=[ct.TensorType(name=INPUT_NAME, shape=tuple(example.shape))],
            outputs=[ct.TensorType(name=name) for name in names],
            convert_to="mlprogram",
            compute_precision=ct.precision.FLOAT16 if half else ct.precision.FLOAT32,
            minimum_deployment_target=ct.target.macOS13,
        )
    mlmodel.user_defined_metadata[METADATA_KEY] = json.dumps(dict(metadata))
    check_spec(mlmodel.get_spec(), (batch, 3, *hw), names)
    with atomic_directory(path) as tmp:
        mlmodel.save(str(tmp / path.name))
        inner = tmp / path.name
        for item in inner.iterdir():
            item.rename(tmp / item.name)
        inner.rmdir()
    return path


def check_spec(spec: Any, input_shape: tuple[int, ...], outputs: list[str]) -> None:
    """The spec's input is ``images`` with ``input_shape`` and its outputs are ``outputs`` (else
    :class:`ExportInputError`)."""
    inputs = [(i.name, tuple(i.type.multiArrayType.shape)) for i in spec.description.input]
    if inputs != [(INPUT_NAME, input_shape)]:
        raise ExportInputError(
            f"--format coreml: unexpected inputs {inputs}, expected {INPUT_NAME} {input_shape}"
        )
    found = [o.name for o in spec.description.output]
    if found != outputs:
        raise ExportInputError(f"--format coreml: unexpected outputs {found}, expected {outputs}")
