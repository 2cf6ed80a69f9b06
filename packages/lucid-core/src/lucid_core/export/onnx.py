"""ONNX export of a :class:`~lucid_core.models.YOLOModel` for all tasks (graph outputs: :mod:`.graph`).

Input ``images``: ``(B, 3, H, W)`` RGB in [0, 1] (float16 with ``half``); the batch dimension is dynamic when asked,
and so are ``H`` and ``W`` with ``dynamic_hw`` (the anchor grid is then computed from the feature maps' sizes in the
graph, and a dense output's anchor axis and ``proto``'s size follow the input), else the spatial size is fixed.
Exported with the TorchScript-based ``torch.onnx.export(..., dynamo=False)``; the metadata record (:mod:`.metadata`)
goes into ``metadata_props`` when the ``onnx`` package is installed (the ``export`` extra), else beside the file.
Written atomically.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from lucid_core.atomic import atomic_path, atomic_write_json
from lucid_core.export.graph import DEFAULT_MAX_DET, ExportModule, OutputKind, input_hw
from lucid_core.export.metadata import METADATA_KEY, sidecar_path
from lucid_core.models import YOLOModel

__all__ = ["DEFAULT_OPSET", "INPUT_NAME", "export_onnx", "write_onnx"]

DEFAULT_OPSET = 17
INPUT_NAME = "images"


def write_onnx(
    module: ExportModule,
    path: Path,
    hw: tuple[int, int],
    *,
    batch: int = 1,
    dynamic_batch: bool,
    opset: int,
    half: bool,
    metadata: Mapping[str, Any] | None = None,
    dynamic_hw: bool = False,
) -> Path:
    """Trace ``module`` (already in its export dtype) on a zero image batch and write the graph to ``path``."""
    dtype = torch.float16 if half else torch.float32
    example = torch.zeros(batch, 3, *hw, dtype=dtype)
    with torch.no_grad():
        sample = module(example)
    output_names = ["output0", "proto"] if isinstance(sample, tuple) else ["output0"]
    dynamic_axes = _dynamic_axes(output_names, module.output, batch=dynamic_batch, hw=dynamic_hw)
    with atomic_path(path) as tmp:
        with (
            warnings.catch_warnings()
        ):  # tracer warnings about shape arithmetic; the graph is checked by tests
            warnings.simplefilter("ignore")
            torch.onnx.export(
                module,
                (example,),
                str(tmp),
                input_names=[INPUT_NAME],
                output_names=output_names,
                dynamic_axes=dynamic_axes,
                opset_version=opset,
                dynamo=False,
            )
        if metadata is not None and not _embed_metadata(tmp, metadata):
            atomic_write_json(sidecar_path(path), dict(metadata))
    return path


def _dynamic_axes(
    output_names: list[str], output: str, *, batch: bool, hw: bool
) -> dict[str, dict[int, str]] | None:
    """``torch.onnx.export``'s ``dynamic_axes``: the batch of every tensor, and with ``hw`` the input's size, the
    anchor axis of a dense output and the prototype masks' size (a row output keeps its ``max_det`` rows)."""
    axes: dict[str, dict[int, str]] = {
        name: ({0: "batch"} if batch else {}) for name in (INPUT_NAME, *output_names)
    }
    if hw:
        axes[INPUT_NAME].update({2: "height", 3: "width"})
        if output == "dense":
            axes["output0"][2] = "anchors"
        if "proto" in axes:
            axes["proto"].update({2: "proto_height", 3: "proto_width"})
    kept = {name: dims for name, dims in axes.items() if dims}
    return kept or None


def _embed_metadata(path: Path, metadata: Mapping[str, Any]) -> bool:
    """Write ``metadata`` into the file's ``metadata_props``; False when the ``onnx`` package is missing."""
    try:
        import onnx  # the [export] extra
    except ImportError:
        return False
    proto = onnx.load(str(path))
    entry = proto.metadata_props.add()
    entry.key, entry.value = METADATA_KEY, json.dumps(dict(metadata))
    onnx.save(proto, str(path))
    return True


def export_onnx(
    model: YOLOModel,
    path: str | os.PathLike[str],
    imgsz: int | tuple[int, int] = 640,
    dynamic_batch: bool = True,
    *,
    max_det: int = DEFAULT_MAX_DET,
    opset: int = DEFAULT_OPSET,
    fuse: bool = True,
    half: bool = False,
    output: OutputKind | None = None,
    batch: int = 1,
    metadata: Mapping[str, Any] | None = None,
    dynamic_hw: bool = False,
) -> Path:
    """Export ``model`` (left untouched) to ``path``; see :mod:`.graph` for the graph's outputs.

    ``imgsz``: the input size traced (int or ``(h, w)``, multiples of the largest stride), fixed unless
    ``dynamic_hw``; the batch dimension is dynamic when ``dynamic_batch``, else ``batch``. ``fuse`` (default)
    exports the inference form: BatchNorm folded and, for the top-k output, only the one-to-one branch. ``half``
    exports float16 weights with a float16 ``images`` input (traced on the CPU in float16). ``metadata``: the record
    to store with the file. Returns the written path.
    """
    target = Path(path)
    try:
        hw = input_hw(imgsz, max(model.strides))
    except ValueError as exc:
        raise ValueError(f"export_onnx: {exc}") from None
    module = ExportModule(model, max_det=max_det, fuse=fuse, output=output)
    module = module.to(torch.float16 if half else torch.float32)
    return write_onnx(
        module,
        target,
        hw,
        batch=batch,
        dynamic_batch=dynamic_batch,
        opset=opset,
        half=half,
        metadata=metadata,
        dynamic_hw=dynamic_hw,
    )
