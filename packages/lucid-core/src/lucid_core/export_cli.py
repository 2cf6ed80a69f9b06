"""``lucid-export WEIGHTS --format torchscript|onnx|openvino|engine|coreml``: export, then check against PyTorch.

``WEIGHTS`` is a lucid-core checkpoint (stem, ``.safetensors`` or ``.json``, e.g. ``runs/train/best``) or a reference
``.pt`` checkpoint (imported in memory, nothing executed). The graph is :mod:`lucid_core.export.graph`'s (BatchNorm
folded; YOLO26: one-to-one branch with in-graph top-k; ``--nms``: one-to-many branch with in-graph NMS), written
atomically to ``--output`` (default beside ``WEIGHTS``: ``.torchscript``, ``.onnx``, ``_openvino/``,
``_int8_openvino/``, ``.engine``, ``.mlpackage``) with its metadata record, so loading it needs no flags
(``lucid_core.load``, ``lucid-predict --weights``, ``lucid-eval --weights``). ``--imgsz`` defaults to the
checkpoint's training size; the batch is ``--batch`` (1) unless ``--dynamic-batch`` (``--dynamic``); ``--half``
exports float16; ``--int8 --data DATA`` (OpenVINO) quantises after calibrating on ``DATA``'s training images.

Parity check (printed after the export): the exported file is run by its runtime on seeded random images (2 with a
dynamic batch, else ``--batch``) and compared with the same export module in PyTorch, output by output: the largest
absolute difference and whether every element is within ``atol + rtol * |PyTorch|`` with atol = rtol = 1e-4
(float32) or 1e-2 (float16); INT8 differences are printed, not judged. A missing runtime skips the check with a
note naming the extra; Core ML is checked structurally (its runtime is macOS-only).

``--benchmark DATA`` is not run here: the format table scores mAP with lucid-train's evaluator
(``python -m lucid_train.export_benchmark WEIGHTS --data DATA``, docs/EXPORT.md).

The typed entry point is :func:`export` (``main`` parses the flags, calls it and prints :func:`print_report`).
Exit status: 0 exported (and the check passed or was skipped), 1 the check failed, 2 bad arguments, weights or a
missing converter.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lucid_core.checkpoint import load
from lucid_core.errors import CheckpointError
from lucid_core.export.calibration import DEFAULT_CALIBRATION_IMAGES
from lucid_core.export.errors import ExportInputError
from lucid_core.export.formats import FORMATS, export_model
from lucid_core.export.formats import default_output as format_output
from lucid_core.export.graph import DEFAULT_MAX_DET, ExportModule
from lucid_core.export.onnx import DEFAULT_OPSET
from lucid_core.export.parity import (
    FAINT_SCORE,
    PARITY_SEED,
    OutputParity,
    compare_outputs,
    mask_faint_labels,
)
from lucid_core.export.runtime import (
    OnnxRunner,
    OpenVINORunner,
    Runner,
    TensorRTRunner,
    TorchScriptRunner,
    read_ir_metadata,
)
from lucid_core.models import YOLOModel
from lucid_core.tasks import get_task

__all__ = [
    "FAINT_SCORE",
    "FORMATS",
    "PARITY_SEED",
    "TOLERANCE",
    "ExportInputError",
    "ExportResult",
    "OutputParity",
    "build_parser",
    "default_output",
    "export",
    "load_weights",
    "main",
    "mask_faint_labels",
    "parity_check",
    "print_report",
]

#: parity tolerance (atol = rtol) per exported float type (module docstring).
TOLERANCE = {"float32": 1e-4, "float16": 1e-2}
#: the runtime that runs each format, as the parity lines name it, and the extra that installs it
RUNTIMES = {
    "onnx": ("onnxruntime", "onnx"),
    "torchscript": ("TorchScript", None),
    "openvino": ("OpenVINO", "openvino"),
    "engine": ("TensorRT", None),
    "coreml": ("Core ML", "coreml"),
}
_PRECISION_WORD = {"fp32": "float32", "fp16": "float16", "int8": "int8"}


def load_weights(path: str | os.PathLike[str]) -> tuple[YOLOModel, int]:
    """``(model, training imgsz)`` of a lucid-core checkpoint or a reference ``.pt`` file (``lucid_core.load``;
    unusable weights raise :class:`ExportInputError`)."""
    try:
        checkpoint = load(path)
    except (CheckpointError, FileNotFoundError) as exc:
        raise ExportInputError(f"WEIGHTS {path}: {exc}") from exc
    return checkpoint.model, int(checkpoint.imgsz)


def parity_check(
    module: ExportModule, path: Path, input_hw: tuple[int, int], *, batch: int, half: bool
) -> list[OutputParity]:
    """Run the ONNX file ``path`` with onnxruntime and ``module`` with PyTorch on the same seeded images; compare
    each output. Raises ``ImportError`` when onnxruntime is not installed."""
    try:
        runner = OnnxRunner(path)
    except CheckpointError as exc:
        raise ImportError(str(exc)) from exc
    names = [o.name for o in runner.session.get_outputs()]
    return compare_outputs(
        module,
        runner,
        names,
        input_hw,
        batch=batch,
        precision="fp16" if half else "fp32",
        reference_half=half,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lucid-export",
        description="Export lucid-core weights (or a reference .pt) and check the exported file against PyTorch.",
        epilog="Exit status: 0 exported (check passed or skipped), 1 the parity check failed, 2 bad arguments.",
    )
    parser.add_argument(
        "weights", help="lucid-core checkpoint (stem, .safetensors or .json) or a reference .pt"
    )
    parser.add_argument("--format", choices=FORMATS, default="onnx", help="export format (default onnx)")
    parser.add_argument(
        "--imgsz", type=int, default=None, help="square input size (default: the checkpoint's)"
    )
    parser.add_argument(
        "--dynamic-batch", "--dynamic", action="store_true", help="dynamic batch dimension (default: --batch)"
    )
    parser.add_argument("--batch", type=int, default=1, help="fixed batch size of the graph (default 1)")
    parser.add_argument(
        "--half", action="store_true", help="float16 weights (and input for onnx/torchscript)"
    )
    parser.add_argument(
        "--int8", action="store_true", help="OpenVINO INT8 by post-training quantisation (needs --data)"
    )
    parser.add_argument(
        "--data",
        default=None,
        help="INT8 calibration images: a data YAML (its train split) or an image folder",
    )
    parser.add_argument(
        "--fraction", type=float, default=1.0, help="fraction of the calibration split to use (default 1.0)"
    )
    parser.add_argument(
        "--calibration-images",
        type=int,
        default=DEFAULT_CALIBRATION_IMAGES,
        help=f"at most this many calibration images (default {DEFAULT_CALIBRATION_IMAGES})",
    )
    parser.add_argument(
        "--nms", action="store_true", help="class-aware NMS of the one-to-many branch inside the graph"
    )
    parser.add_argument(
        "--output", default=None, help="output path (default: beside WEIGHTS, named per format)"
    )
    parser.add_argument(
        "--max-det", type=int, default=DEFAULT_MAX_DET, help="end-to-end / --nms models: rows of the output"
    )
    parser.add_argument(
        "--opset", type=int, default=DEFAULT_OPSET, help="ONNX opset (onnx, openvino, engine)"
    )
    parser.add_argument("--no-check", action="store_true", help="skip the runtime parity check")
    parser.add_argument(
        "--benchmark",
        default=None,
        metavar="DATA",
        help="the format table is lucid-train's: python -m lucid_train.export_benchmark WEIGHTS --data DATA",
    )
    return parser


def default_output(weights: str | os.PathLike[str], format: str = "onnx", *, int8: bool = False) -> Path:
    """Where ``format`` goes beside ``WEIGHTS`` (``runs/train/best`` → ``runs/train/best.onnx``,
    ``best_openvino/``, …)."""
    return format_output(weights, format, int8=int8)


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export` wrote: the file, a one-line description and the parity check (module docstring).

    ``parity`` is None when the check was skipped: ``skipped`` says why (``"not requested"``, ``"<runtime>
    missing"`` or ``"Core ML runs on macOS only"``). ``format`` and ``metadata`` (the record stored with the file).
    """

    weights: str
    path: Path
    description: str
    parity: list[OutputParity] | None
    skipped: str | None = None
    format: str = "onnx"
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """False only when the parity check ran and an output differs beyond its tolerance."""
        return self.parity is None or all(item.within for item in self.parity)


def _runner(format: str, path: Path) -> Runner:
    if format == "onnx":
        return OnnxRunner(path)
    if format == "torchscript":
        return TorchScriptRunner(path)
    if format == "openvino":
        return OpenVINORunner(next(path.glob("*.xml")), read_ir_metadata(path))
    return TensorRTRunner(path)


def export(
    weights: str | os.PathLike[str],
    *,
    format: str = "onnx",
    imgsz: int | None = None,
    dynamic_batch: bool = False,
    half: bool = False,
    output: str | os.PathLike[str] | None = None,
    max_det: int = DEFAULT_MAX_DET,
    opset: int = DEFAULT_OPSET,
    check: bool = True,
    batch: int = 1,
    int8: bool = False,
    data: str | os.PathLike[str] | None = None,
    fraction: float = 1.0,
    calibration_images: int = DEFAULT_CALIBRATION_IMAGES,
    nms: bool = False,
) -> ExportResult:
    """Export ``weights`` (lucid-core weights or a reference ``.pt``) to ``format``, then run the parity check.

    ``imgsz`` defaults to the checkpoint's training size (a multiple of the largest stride); ``output`` to
    :func:`default_output`; the batch is ``batch`` unless ``dynamic_batch``; ``half`` exports float16; ``int8``
    (OpenVINO) calibrates on ``data`` (``fraction`` of its training images, at most ``calibration_images``);
    ``nms`` puts NMS into the graph. ``check=False`` or a missing runtime skips the check. Unusable weights or
    arguments, and a missing converter, raise :class:`ExportInputError`.
    """
    if format not in FORMATS:
        raise ExportInputError(f"--format {format}: expected one of {', '.join(FORMATS)}")
    if int8 and data is None:
        raise ExportInputError("--int8 needs --data: a data YAML or a folder of images to calibrate on")
    if data is not None and not int8:
        raise ExportInputError(f"--data {data}: calibration images are for --int8 only")
    try:
        checkpoint = load(weights)
    except (CheckpointError, FileNotFoundError) as exc:
        raise ExportInputError(f"WEIGHTS {weights}: {exc}") from exc
    if checkpoint.source_kind == "exported":
        raise ExportInputError(f"WEIGHTS {weights}: already an exported model; export its lucid checkpoint")
    model = checkpoint.model
    size = int(imgsz if imgsz is not None else checkpoint.imgsz)
    stride = max(model.strides)
    if size <= 0 or size % stride:
        raise ExportInputError(f"--imgsz {size}: expected a positive multiple of the largest stride {stride}")
    if max_det < 1:
        raise ExportInputError(f"--max-det {max_det}: expected >= 1")
    target = Path(output) if output else default_output(weights, format, int8=int8)
    exported = export_model(
        model,
        target,
        format=format,
        names=checkpoint.names,
        imgsz=(size, size),
        batch=batch,
        dynamic_batch=dynamic_batch,
        half=half,
        int8_data=data if int8 else None,
        fraction=fraction,
        calibration_images=calibration_images,
        max_det=max_det,
        opset=opset,
        nms=nms,
    )
    cfg = model.config
    precision = str(exported.metadata["precision"])
    shape = (
        f"imgsz {size}x{size}, batch {'dynamic' if dynamic_batch else batch}, {_PRECISION_WORD[precision]}"
    )
    description = f"{cfg.family}{cfg.scale} {cfg.task}, {shape}"
    if format == "onnx":
        description += f", opset {opset}"
    else:
        description = f"{format}, {description}" + (
            f", opset {opset}" if "opset" in exported.metadata else ""
        )
    if exported.module.output != "dense":
        description += f", in-graph {exported.module.output}"
    name = os.fspath(weights)
    result = ExportResult(name, exported.path, description, None, format=format, metadata=exported.metadata)
    if not check:
        return _with(result, skipped="not requested")
    runtime, _ = RUNTIMES[format]
    if format == "coreml":
        return _with(result, skipped="Core ML runs on macOS only")
    try:
        runner = _runner(format, exported.path)
    except CheckpointError:
        return _with(result, skipped=f"{runtime} missing")
    names = ["output0", "proto"] if "masks" in get_task(cfg.task).target_fields else ["output0"]
    report = compare_outputs(
        exported.module,
        runner,
        names,
        (size, size),
        batch=2 if dynamic_batch else batch,
        precision=precision,
        reference_half=half and format in ("onnx", "torchscript"),
    )
    return _with(result, parity=report)


def _with(result: ExportResult, **changes: Any) -> ExportResult:
    values = {**result.__dict__, **changes}
    return ExportResult(**values)


def print_report(result: ExportResult) -> bool:
    """Print what was exported and the parity check (module docstring); False when the check failed."""
    print(f"lucid-export: {result.weights} -> {result.path} ({result.description})")
    runtime, extra = RUNTIMES.get(result.format, ("onnxruntime", "onnx"))
    if result.parity is None:
        if result.skipped == "not requested":
            reason = "--no-check"
        elif result.skipped == "Core ML runs on macOS only":
            reason = "Core ML runs on macOS only (the spec's inputs and outputs were checked)"
        elif result.format == "engine":
            reason = "TensorRT or a CUDA device is missing"
        else:
            reason = f'{runtime} is not installed (pip install "lucid-core[{extra}]")'
        print(f"lucid-export: parity check skipped: {reason}")
        return True
    for item in result.parity:
        verdict = "ok" if item.within else "FAILED"
        bound = (
            f"atol = rtol = {item.tolerance:g}"
            if item.tolerance is not None
            else "int8: reported, not judged"
        )
        print(
            f"lucid-export: parity {runtime} vs PyTorch, {item.name} {item.shape}: max |diff| "
            f"{item.max_abs_diff:.3g} ({bound}): {verdict}"
        )
    return result.passed


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.benchmark is not None:
        print(
            "lucid-export: error: --benchmark scores mAP with lucid-train's evaluator: run "
            f"python -m lucid_train.export_benchmark {args.weights} --data {args.benchmark} (docs/EXPORT.md)",
            file=sys.stderr,
        )
        return 2
    try:
        result = export(
            args.weights,
            format=args.format,
            imgsz=args.imgsz,
            dynamic_batch=args.dynamic_batch,
            half=args.half,
            output=args.output,
            max_det=args.max_det,
            opset=args.opset,
            check=not args.no_check,
            batch=args.batch,
            int8=args.int8,
            data=args.data,
            fraction=args.fraction,
            calibration_images=args.calibration_images,
            nms=args.nms,
        )
    except ExportInputError as exc:
        print(f"lucid-export: error: {exc}", file=sys.stderr)
        return 2
    return 0 if print_report(result) else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
