"""Benchmark: ``predict`` latency of exported models (TorchScript, ONNX, OpenVINO fp32 and INT8), CPU.

yolo26n detect (80 classes, random initialisation, seed 0) is exported at ``--imgsz`` (640) with lucid-export's
exporters, loaded back (``lucid_core.export.load_exported``; OpenVINO with ``--threads`` inference threads) and
timed as the reference's ``export`` workload does: ``predict(model, image)`` on ``--image`` (default
``../shared/data/images/bus.jpg``), 3 untimed calls, then the median of ``--runs`` (20), with ``--threads`` torch
threads. YOLO26 exports hold the one-to-one branch, so predict decodes with top-k. The INT8 IR is calibrated on
``--calibration`` (default ``../shared/data/coco8/images``: the timing does not depend on the images). Printed: each
format's latency and its network's alone (the runtime on predict's letterboxed input); ``openvino-device`` is the
same fp32 IR at the CPU plugin's own inference precision (bf16 on CPUs with AMX or AVX-512 BF16, as an OpenVINO user
who sets nothing runs it; ``openvino`` forces f32 for PyTorch parity); INT8/fp32, whole predict and network alone;
with ``--vs-reference`` the reference's latency for the same format (``run.sh export --format F --image IMG``, in
the caller's environment) and ours/reference; the 1-minute load average before and after (the figures are only
comparable on an idle CPU; docs/EXPORT.md "Latency"). Ours runs with lucid-predict's OpenMP policy
(:mod:`lucid_core.openmp`, set before torch loads). Targets: OpenVINO ≤ 1.0× (goal 0.8×), ONNX and TorchScript ≤
0.8×, our INT8 ≤ 0.6× our OpenVINO fp32.

Run by hand or by ``make bench``: ``uv run --no-sync python tools/bench/export.py [--threads 2] [--vs-reference]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from lucid_core.openmp import limit_openmp_spinning

#: the caller's environment, which the reference runs in (libgomp's defaults unless the caller set a policy)
REFERENCE_ENVIRON = dict(os.environ)
if __name__ == "__main__":
    limit_openmp_spinning()  # ours as lucid-predict runs (lucid_core.openmp), before torch loads

import torch  # noqa: E402

from lucid_core.allocator import tune_glibc_malloc  # noqa: E402
from lucid_core.checkpoint import save_model  # noqa: E402
from lucid_core.export import ExportedModel, load_exported  # noqa: E402
from lucid_core.export_cli import export  # noqa: E402
from lucid_core.inference import letterbox_frame, network_input, predict  # noqa: E402
from lucid_core.models import build_model  # noqa: E402
from lucid_core.sources.images import read_image_bgr  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _reference import SHARED_DIR, add_reference_flag, print_pair, run_reference  # noqa: E402
from _timing import median_ms  # noqa: E402

FORMATS = ("torchscript", "onnx", "openvino", "openvino-device", "openvino-int8")
TARGETS = {"torchscript": 0.8, "onnx": 0.8, "openvino-device": 1.0}
#: rows timed against the reference's export too (``openvino``: our forced f32 against its IR at the plugin's bf16,
#: not like for like on CPUs with bf16, so without a target)
REFERENCE_ROWS = ("torchscript", "onnx", "openvino", "openvino-device")
#: the reference workload's format name of each row (``openvino-device``: our fp32 IR at the plugin's own precision)
REFERENCE_FORMAT = {"openvino-device": "openvino"}


def _latency_ms(model: torch.nn.Module, image: Path, imgsz: int, runs: int) -> float:
    return median_ms(lambda: predict(model, str(image), imgsz=imgsz, decode="topk"), runs=runs)


def _network_ms(model: ExportedModel, image: Path, imgsz: int, runs: int) -> float:
    """Median time of the runtime alone: the exported network on predict's letterboxed input of ``image``."""
    padded, _ = letterbox_frame(read_image_bgr(image), imgsz, stride=int(max(model.strides)))
    x = network_input([padded], memory_format=torch.contiguous_format)  # as predict feeds an exported model
    runner = model.runner
    return median_ms(lambda: runner(x), runs=runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", type=Path, default=SHARED_DIR / "data" / "images" / "bus.jpg")
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), choices=FORMATS)
    parser.add_argument("--calibration", type=Path, default=SHARED_DIR / "data" / "coco8" / "images")
    add_reference_flag(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"export bench: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    tune_glibc_malloc()  # as lucid-predict's main does
    torch.manual_seed(0)
    model = build_model("yolo26", "detect", "n", num_classes=80)
    ours: dict[str, float] = {}
    network: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="lucid-bench-export-") as folder:
        weights = Path(folder) / "yolo26n"
        save_model(model, weights, names=[str(i) for i in range(80)], imgsz=args.imgsz)
        for name in args.formats:
            fmt = name.removesuffix("-int8").removesuffix("-device")
            int8 = name.endswith("-int8")
            target = Path(folder) / {"torchscript": "m.torchscript", "onnx": "m.onnx"}.get(
                fmt, f"{name}_openvino"
            )
            export(
                weights,
                format=fmt,
                output=target,
                check=False,
                int8=int8,
                data=args.calibration if int8 else None,
            )
            precision = "device" if name.endswith("-device") else None
            net = load_exported(target, threads=args.threads, openvino_precision=precision)
            ours[name] = _latency_ms(net, args.image, args.imgsz, args.runs)
            network[name] = _network_ms(net, args.image, args.imgsz, args.runs)
            print(
                f"export {name} yolo26n@{args.imgsz}: ours {ours[name]:.1f} ms, network alone {network[name]:.1f} ms "
                f"({args.threads} threads)",
                flush=True,
            )
    if "openvino" in ours and "openvino-int8" in ours:
        ratio = ours["openvino-int8"] / ours["openvino"]
        print(f"export openvino int8/fp32: {ratio:.2f} (target <= 0.6)")
        ratio = network["openvino-int8"] / network["openvino"]
        print(f"export openvino int8/fp32, network alone: {ratio:.2f}")
    if args.vs_reference:
        for name in args.formats:
            if name not in REFERENCE_ROWS:
                continue
            reference = run_reference(
                "export",
                "--format",
                REFERENCE_FORMAT.get(name, name),
                "--image",
                args.image,
                "--imgsz",
                args.imgsz,
                threads=args.threads,
                environ=REFERENCE_ENVIRON,
            )
            ratio = print_pair(f"export {name} yolo26n@{args.imgsz}", ours[name], reference, "ms")
            if ratio is not None:
                target = f"target <= {TARGETS[name]}" if name in TARGETS else "no target: not like for like"
                print(f"export {name}: ours/reference {ratio:.2f} ({target})", flush=True)
    print(f"export bench: load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
