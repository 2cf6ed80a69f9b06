"""OpenVINO IR export: the ONNX graph (:mod:`.onnx`) converted by ``openvino.convert_model``, fp32 or fp16 weights,
or INT8 by post-training quantisation with ``nncf`` on calibration images (:mod:`.calibration`): the performance
preset (symmetric weights and activations; docs/EXPORT.md "INT8" has its speed and accuracy against the mixed one).

The output is a folder ``<name>/`` holding ``<stem>.xml``, ``<stem>.bin`` and the metadata record
(:data:`~.metadata.IR_METADATA_FILE`), replaced as one unit. INT8 quantises the network and leaves the head's decode
arithmetic (anchor offsets, strides, sigmoid, DFL) and the in-graph top-k/NMS in float: box coordinates in pixels
and class probabilities share tensors there, which one INT8 scale cannot hold.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lucid_core.atomic import atomic_write_json
from lucid_core.export.calibration import DEFAULT_CALIBRATION_IMAGES, calibration_batches, calibration_files
from lucid_core.export.errors import ExportInputError, missing
from lucid_core.export.files import atomic_directory
from lucid_core.export.graph import ExportModule
from lucid_core.export.metadata import IR_METADATA_FILE
from lucid_core.export.onnx import write_onnx

__all__ = ["int8_ignored_patterns", "write_openvino"]


def int8_ignored_patterns(head_index: int) -> list[str]:
    """Node-name patterns INT8 quantisation leaves in float (module docstring): the head's own decode nodes, its
    DFL and everything the export adds after the model."""
    head = rf"/model/layers\.{head_index}"
    return [rf"^{head}/[^/]+$", rf"^{head}/dfl/.*", r"^/[^/]+$"]


def write_openvino(
    module: ExportModule,
    folder: Path,
    hw: tuple[int, int],
    *,
    batch: int,
    dynamic_batch: bool,
    half: bool,
    opset: int,
    metadata: Mapping[str, Any],
    int8_data: str | os.PathLike[str] | None = None,
    fraction: float = 1.0,
    calibration_images: int = DEFAULT_CALIBRATION_IMAGES,
    dynamic_hw: bool = False,
) -> Path:
    """Convert ``module`` (float32) to an IR folder at ``folder`` (module docstring); ``int8_data`` quantises;
    ``dynamic_hw`` leaves the input's height and width dynamic (calibration runs at ``hw``)."""
    try:
        import openvino as ov  # the [openvino] extra
    except ImportError:
        raise missing("openvino", "openvino", "--format openvino") from None
    files = calibration_files(int8_data, fraction=fraction, limit=calibration_images) if int8_data else []
    if int8_data is not None:
        try:
            import nncf  # the [openvino-int8] extra
        except ImportError:
            raise missing("nncf", "openvino-int8", "--int8") from None
    with tempfile.TemporaryDirectory(prefix="lucid-export-") as scratch:
        onnx_path = write_onnx(
            module,
            Path(scratch) / "model.onnx",
            hw,
            batch=batch,
            dynamic_batch=dynamic_batch or int8_data is not None,
            opset=opset,
            half=False,
            dynamic_hw=dynamic_hw,
        )
        model = ov.convert_model(str(onnx_path))
    if int8_data is not None:
        items = list(calibration_batches(files, hw))
        if not items:
            raise ExportInputError(
                f"--data {int8_data}: none of the {len(files)} calibration images could be read"
            )
        head_index = len(module.model.layers) - 1
        model = nncf.quantize(
            model,
            nncf.Dataset(items),
            subset_size=len(items),
            preset=nncf.QuantizationPreset.PERFORMANCE,  # symmetric activations: the faster INT8 kernels
            ignored_scope=nncf.IgnoredScope(patterns=int8_ignored_patterns(head_index), validate=False),
        )
        if not dynamic_batch:
            model.reshape({0: ov.PartialShape([batch, 3, *((-1, -1) if dynamic_hw else hw)])})
    stem = folder.name.removesuffix("_openvino") or "model"
    with atomic_directory(folder) as tmp:
        ov.save_model(model, str(tmp / f"{stem}.xml"), compress_to_fp16=half)
        atomic_write_json(tmp / IR_METADATA_FILE, dict(metadata))
    return folder
