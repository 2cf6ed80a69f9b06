"""``lucid-export WEIGHTS --format onnx [--imgsz N] [--dynamic-batch] [--half]``: export, then check ONNX vs PyTorch.

``WEIGHTS`` is a lucid-core checkpoint (stem, ``.safetensors`` or ``.json``, e.g. ``runs/train/best``) or a reference
``.pt`` checkpoint (imported in memory with :func:`lucid_core.interop.import_checkpoint`, nothing executed). The graph
is :func:`lucid_core.interop.export_onnx`'s (BatchNorm folded; YOLO26: one-to-one branch with in-graph top-k; see
:mod:`lucid_core.interop.onnx_export` for the outputs), written atomically to ``--output`` (default: ``WEIGHTS``
with the suffix ``.onnx``). ``--imgsz`` defaults to the checkpoint's training size; the batch dimension is fixed to
1 unless ``--dynamic-batch``; ``--half`` exports float16 weights and a float16 input.

Parity check (printed after the export): the exported file is run with onnxruntime (CPU) on seeded random images
(2 with a dynamic batch, else 1) and compared with the same export module in PyTorch, output by output: the
largest absolute difference and whether every element is within ``atol + rtol * |PyTorch|`` with
atol = rtol = 1e-4 (float32) or 1e-2 (float16). End-to-end (top-k) outputs are compared row set against row set,
both ordered by box position, so equal scores ordered differently by the two runtimes do not count as a
difference. Without onnxruntime (``pip install "lucid-core[onnx]"``) the check is skipped with a note.

The typed entry point is :func:`export` (``main`` parses the flags, calls it and prints :func:`print_report`).
Exit status: 0 exported (and the check passed or was skipped), 1 the check failed, 2 bad arguments or weights.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from lucid_core.checkpoint import CheckpointError, load
from lucid_core.interop.onnx_export import DEFAULT_MAX_DET, DEFAULT_OPSET, ExportModule, export_onnx
from lucid_core.models import YOLOModel
from lucid_core.tasks import get_task

FORMATS = ("onnx",)
#: parity tolerance (atol = rtol) per exported float type (module docstring).
TOLERANCE = {"float32": 1e-4, "float16": 1e-2}
PARITY_SEED = 0
#: below the lowest confidence any decode path reports (validation conf 0.001) a row's class is not compared
FAINT_SCORE = 1e-3


class ExportInputError(ValueError):
    """The weights or an argument of ``lucid-export`` is unusable (the message names it)."""


@dataclass
class OutputParity:
    """ONNX-vs-PyTorch comparison of one graph output."""

    name: str
    shape: tuple[int, ...]
    max_abs_diff: float
    tolerance: float
    within: bool


def load_weights(path: str | os.PathLike[str]) -> tuple[YOLOModel, int]:
    """``(model, training imgsz)`` of a lucid-core checkpoint or a reference ``.pt`` file (``lucid_core.checkpoint``'s
    loader; unusable weights raise :class:`ExportInputError`)."""
    try:
        checkpoint = load(path)
    except (CheckpointError, FileNotFoundError) as exc:
        raise ExportInputError(f"WEIGHTS {path}: {exc}") from exc
    return checkpoint.model, int(checkpoint.imgsz)


def _by_position(rows: np.ndarray, task: str) -> np.ndarray:
    """Rows ``(k, 6 + extra)`` of an end-to-end output ordered by box centre (then every column)."""
    if "rboxes" in get_task(task).target_fields:  # cx, cy, w, h
        cx, cy = rows[:, 0], rows[:, 1]
    else:  # x1, y1, x2, y2
        cx, cy = (rows[:, 0] + rows[:, 2]) / 2, (rows[:, 1] + rows[:, 3]) / 2
    keys = [rows[:, i] for i in range(rows.shape[1] - 1, -1, -1)] + [np.round(cx, 2), np.round(cy, 2)]
    return rows[np.lexsort(keys)]


def mask_faint_labels(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """``ours`` with the class column (5) of every row whose reference score (column 4) is below
    :data:`FAINT_SCORE` set to the reference's: there the class scores of an (almost) untrained model are equal up
    to rounding, and onnxruntime's and PyTorch's argmax may pick different ones; such rows are never reported by any
    decode path. Boxes and scores are still compared for every row."""
    faint = theirs[..., 4] < FAINT_SCORE
    out = ours.copy()
    out[..., 5] = np.where(faint, theirs[..., 5], ours[..., 5])
    return out


def parity_check(
    module: ExportModule, path: Path, input_hw: tuple[int, int], *, batch: int, half: bool
) -> list[OutputParity]:
    """Run ``path`` with onnxruntime and ``module`` with PyTorch on the same seeded images; compare each output.

    Raises ``ImportError`` when onnxruntime is not installed.
    """
    import onnxruntime as ort  # the [onnx] extra

    generator = torch.Generator().manual_seed(PARITY_SEED)
    x = torch.rand(batch, 3, *input_hw, generator=generator)
    dtype = torch.float16 if half else torch.float32
    x = x.to(dtype)
    with torch.no_grad():
        expected = module.to(dtype)(x)
    reference = [t.float().numpy() for t in (expected if isinstance(expected, tuple) else (expected,))]
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = [
        np.asarray(a, dtype=np.float32) for a in session.run(None, {session.get_inputs()[0].name: x.numpy()})
    ]
    names = [o.name for o in session.get_outputs()]
    tolerance = TOLERANCE["float16" if half else "float32"]
    report: list[OutputParity] = []
    for index, (name, ours, theirs) in enumerate(zip(names, got, reference, strict=True)):
        if ours.shape != theirs.shape:
            report.append(OutputParity(name, tuple(ours.shape), float("inf"), tolerance, False))
            continue
        if index == 0 and module.end2end:
            ours = np.stack([_by_position(rows, module.task) for rows in ours])
            theirs = np.stack([_by_position(rows, module.task) for rows in theirs])
            ours = mask_faint_labels(ours, theirs)
        diff = np.abs(ours - theirs)
        within = bool(np.all(diff <= tolerance + tolerance * np.abs(theirs)))
        report.append(OutputParity(name, tuple(ours.shape), float(diff.max(initial=0.0)), tolerance, within))
    return report


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lucid-export",
        description="Export lucid-core weights (or a reference .pt) to ONNX and check the file against PyTorch.",
        epilog="Exit status: 0 exported (check passed or skipped), 1 the parity check failed, 2 bad arguments.",
    )
    parser.add_argument(
        "weights", help="lucid-core checkpoint (stem, .safetensors or .json) or a reference .pt"
    )
    parser.add_argument("--format", choices=FORMATS, default="onnx", help="export format (default onnx)")
    parser.add_argument(
        "--imgsz", type=int, default=None, help="square input size (default: the checkpoint's)"
    )
    parser.add_argument("--dynamic-batch", action="store_true", help="dynamic batch dimension (default: 1)")
    parser.add_argument("--half", action="store_true", help="float16 weights and input")
    parser.add_argument("--output", default=None, help="output file (default: WEIGHTS with suffix .onnx)")
    parser.add_argument(
        "--max-det", type=int, default=DEFAULT_MAX_DET, help="end-to-end models: rows of the top-k output"
    )
    parser.add_argument("--opset", type=int, default=DEFAULT_OPSET, help="ONNX opset")
    parser.add_argument("--no-check", action="store_true", help="skip the onnxruntime parity check")
    return parser


def default_output(weights: str | os.PathLike[str]) -> Path:
    """``WEIGHTS`` with the suffix ``.onnx`` (``runs/train/best`` → ``runs/train/best.onnx``)."""
    path = Path(weights)
    return (
        path.with_suffix(".onnx") if path.suffix in (".safetensors", ".json", ".pt") else Path(f"{path}.onnx")
    )


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export` wrote: the file, a one-line description and the parity check (module docstring).

    ``parity`` is None when the check was skipped: ``skipped`` says why (``"not requested"`` or
    ``"onnxruntime missing"``).
    """

    weights: str
    path: Path
    description: str
    parity: list[OutputParity] | None
    skipped: str | None = None

    @property
    def passed(self) -> bool:
        """False only when the parity check ran and an output differs beyond its tolerance."""
        return self.parity is None or all(item.within for item in self.parity)


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
) -> ExportResult:
    """Export ``weights`` (lucid-core weights or a reference ``.pt``) to ``format``, then run the parity check.

    ``imgsz`` defaults to the checkpoint's training size (a multiple of the largest stride); ``output`` to
    :func:`default_output`; the batch is 1 unless ``dynamic_batch``; ``half`` exports float16. ``check=False``
    or a missing onnxruntime skips the check. Unusable weights or arguments raise :class:`ExportInputError`.
    """
    if format not in FORMATS:
        raise ExportInputError(f"--format {format}: expected one of {', '.join(FORMATS)}")
    model, trained_imgsz = load_weights(weights)
    size = int(imgsz if imgsz is not None else trained_imgsz)
    stride = max(model.strides)
    if size <= 0 or size % stride:
        raise ExportInputError(f"--imgsz {size}: expected a positive multiple of the largest stride {stride}")
    if max_det < 1:
        raise ExportInputError(f"--max-det {max_det}: expected >= 1")
    target = Path(output) if output else default_output(weights)
    path = export_onnx(
        model,
        target,
        imgsz=size,
        dynamic_batch=dynamic_batch,
        max_det=max_det,
        opset=opset,
        half=half,
    )
    cfg = model.config
    description = (
        f"{cfg.family}{cfg.scale} {cfg.task}, imgsz {size}x{size}, batch {'dynamic' if dynamic_batch else 1}, "
        f"{'float16' if half else 'float32'}, opset {opset}"
    )
    name = os.fspath(weights)
    if not check:
        return ExportResult(name, path, description, None, skipped="not requested")
    module = ExportModule(model, max_det=max_det)
    try:
        report = parity_check(module, path, (size, size), batch=2 if dynamic_batch else 1, half=half)
    except ImportError:
        return ExportResult(name, path, description, None, skipped="onnxruntime missing")
    return ExportResult(name, path, description, report)


def print_report(result: ExportResult) -> bool:
    """Print what was exported and the parity check (module docstring); False when the check failed."""
    print(f"lucid-export: {result.weights} -> {result.path} ({result.description})")
    if result.parity is None:
        reason = (
            "--no-check"
            if result.skipped == "not requested"
            else 'onnxruntime is not installed (pip install "lucid-core[onnx]")'
        )
        print(f"lucid-export: parity check skipped: {reason}")
        return True
    for item in result.parity:
        verdict = "ok" if item.within else "FAILED"
        print(
            f"lucid-export: parity onnxruntime vs PyTorch, {item.name} {item.shape}: max |diff| "
            f"{item.max_abs_diff:.3g} (atol = rtol = {item.tolerance:g}): {verdict}"
        )
    return result.passed


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
        )
    except ExportInputError as exc:
        print(f"lucid-export: error: {exc}", file=sys.stderr)
        return 2
    return 0 if print_report(result) else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
