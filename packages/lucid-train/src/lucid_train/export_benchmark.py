"""The format table: every deployment format of one checkpoint scored and timed on this machine.

``python -m lucid_train.export_benchmark WEIGHTS --data DATA.yaml [--formats ...] [--output table.md]`` (and the
typed :func:`benchmark`) exports ``WEIGHTS`` to each format (lucid-core's exporters, into a temporary folder unless
``export_dir``), loads it back with ``lucid_core.load`` and writes one row per format: file size, mAP50-95 on the
``val`` split of ``DATA`` (square batches at the exported size; the task's last IoU type: mask, keypoint, rotated
or box), its difference to the PyTorch
model's, the median network latency per image at batch 1 and the images/s at the best of :data:`BATCH_SIZES`. A
format that fails (a missing runtime, a failed export) is a row with its error, not a crash. It lives in lucid-train
because scoring needs lucid-train's evaluator (lucid-core may not import it); ``lucid-export --benchmark`` points
here. Every model is scored with the decode its export needs (YOLO26: top-k on the one-to-one branch; the PyTorch row
uses the same decode).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lucid_core.atomic import atomic_write_text
from lucid_core.checkpoint import load
from lucid_core.export import default_output
from lucid_core.export_cli import export
from lucid_core.inference import forward_for_decode, prepare_inference_model
from lucid_core.tasks import get_task
from lucid_train.eval import evaluate_model

__all__ = ["BATCH_SIZES", "DEFAULT_FORMATS", "FormatRow", "benchmark", "format_table", "main"]

#: rows of the table: "pytorch" and lucid-export formats ("openvino-int8" = --format openvino --int8)
DEFAULT_FORMATS = ("pytorch", "torchscript", "onnx", "openvino", "openvino-fp16", "openvino-int8")
#: batch sizes tried for the throughput column
BATCH_SIZES = (1, 4, 8)


@dataclass
class FormatRow:
    """One format: where it went, its size, mAP50-95 and its difference to PyTorch, latency, throughput, error."""

    format: str
    path: str | None = None
    size_mb: float | None = None
    map50_95: float | None = None
    map_diff: float | None = None
    latency_ms: float | None = None
    images_per_s: float | None = None
    best_batch: int | None = None
    error: str | None = None


def _size_mb(path: Path) -> float:
    files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
    return sum(p.stat().st_size for p in files) / 1e6


def _time(run: Callable[[], Any], runs: int) -> float:
    """Median seconds of ``run`` after two warm-ups."""
    for _ in range(2):
        run()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _speed(net: Any, mode: str, imgsz: int, runs: int) -> tuple[float, float, int]:
    """(median ms per image at batch 1, best images/s, its batch) of the network forward."""
    per_batch: dict[int, float] = {}
    for batch in BATCH_SIZES:
        x = torch.rand(batch, 3, imgsz, imgsz)
        if any(p.ndim == 4 for p in net.parameters()):  # the PyTorch model's weights are channels-last
            x = x.contiguous(memory_format=torch.channels_last)

        def forward(x: torch.Tensor = x) -> Any:
            with torch.inference_mode():
                return forward_for_decode(net, x, mode)

        per_batch[batch] = _time(forward, runs if batch == 1 else max(3, runs // 4))
    best = max(BATCH_SIZES, key=lambda b: b / per_batch[b])
    return per_batch[1] * 1000, best / per_batch[best], best


def _export_spec(name: str) -> tuple[str, dict[str, Any]]:
    if name == "openvino-int8":
        return "openvino", {"int8": True}
    if name == "openvino-fp16":
        return "openvino", {"half": True}
    return name, {}


def benchmark(
    weights: str | os.PathLike[str],
    data: str | os.PathLike[str],
    *,
    formats: Sequence[str] = DEFAULT_FORMATS,
    imgsz: int | None = None,
    export_dir: str | os.PathLike[str] | None = None,
    runs: int = 20,
    batch: int = 16,
    on_row: Callable[[FormatRow], None] | None = None,
) -> list[FormatRow]:
    """The format table of ``weights`` on ``data`` (module docstring); ``on_row`` is called as each row is done."""
    checkpoint = load(weights)
    size = int(imgsz or checkpoint.imgsz)
    task = get_task(checkpoint.task)
    mode = "topk" if checkpoint.model.end2end else "nms"
    key = f"{task.iou_types[-1]}/mAP50-95"
    rows: list[FormatRow] = []
    reference_map: float | None = None
    with tempfile.TemporaryDirectory(prefix="lucid-export-bench-") as scratch:
        folder = Path(export_dir) if export_dir is not None else Path(scratch)
        for name in formats:
            row = FormatRow(name)
            try:
                if name == "pytorch":
                    net, _ = prepare_inference_model(checkpoint.model, decode=mode)  # type: ignore[arg-type]
                    row.path = str(checkpoint.weights_path)
                    row.size_mb = _size_mb(Path(str(checkpoint.weights_path)))
                else:
                    fmt, options = _export_spec(name)
                    target = default_output(
                        folder / Path(str(weights)).stem, fmt, int8=options.get("int8", False)
                    )
                    if name == "openvino-fp16":
                        target = target.with_name(target.name.replace("_openvino", "_fp16_openvino"))
                    result = export(
                        weights,
                        format=fmt,
                        imgsz=size,
                        dynamic_batch=fmt != "torchscript",
                        output=target,
                        check=False,
                        data=data if options.get("int8") else None,
                        **options,
                    )
                    net = load(result.path).model
                    row.path = str(result.path)
                    row.size_mb = _size_mb(result.path)
                scores = evaluate_model(
                    net, os.fspath(data), imgsz=size, batch_size=batch, decode=mode, rect=False
                )
                row.map50_95 = scores.metrics()[key]
                if name == "pytorch":
                    reference_map = row.map50_95
                if reference_map is not None:
                    row.map_diff = row.map50_95 - reference_map
                row.latency_ms, row.images_per_s, row.best_batch = _speed(net, mode, size, runs)
            except Exception as exc:  # a row, not a crash: the table reports every format's failure
                row.error = f"{type(exc).__name__}: {exc}".splitlines()[0]
            rows.append(row)
            if on_row is not None:
                on_row(row)
    return rows


def _cell(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def format_table(rows: Sequence[FormatRow]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "| format | size (MB) | mAP50-95 | Δ vs PyTorch | latency bs1 (ms/img) | images/s (best batch) | error |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        throughput = "—" if r.images_per_s is None else f"{r.images_per_s:.1f} (bs{r.best_batch})"
        lines.append(
            f"| {r.format} | {_cell(r.size_mb, '.2f')} | {_cell(r.map50_95, '.4f')} | {_cell(r.map_diff, '+.4f')} "
            f"| {_cell(r.latency_ms, '.1f')} | {throughput} | {r.error or ''} |"
        )
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lucid_train.export_benchmark",
        description="Export WEIGHTS to every format and write one table row per format (size, mAP, latency).",
    )
    parser.add_argument("weights", help="lucid-core checkpoint or a reference .pt")
    parser.add_argument(
        "--data", required=True, help="dataset scored on its val split (INT8 calibrates on train)"
    )
    parser.add_argument("--formats", nargs="+", default=list(DEFAULT_FORMATS), help="rows of the table")
    parser.add_argument("--imgsz", type=int, default=None, help="input size (default: the checkpoint's)")
    parser.add_argument("--runs", type=int, default=20, help="timed runs per measurement (median)")
    parser.add_argument("--batch", type=int, default=16, help="evaluation batch size")
    parser.add_argument(
        "--export-dir", default=None, help="keep the exported files here (default: temporary)"
    )
    parser.add_argument("--output", default=None, help="also write the Markdown table to this file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    rows = benchmark(
        args.weights,
        args.data,
        formats=args.formats,
        imgsz=args.imgsz,
        export_dir=args.export_dir,
        runs=args.runs,
        batch=args.batch,
        on_row=lambda r: print(
            f"export-benchmark: {r.format} done{' (error)' if r.error else ''}", file=sys.stderr
        ),
    )
    table = format_table(rows)
    print(table, end="")
    if args.output:
        atomic_write_text(args.output, table)
    return 0 if any(r.error is None for r in rows) else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
