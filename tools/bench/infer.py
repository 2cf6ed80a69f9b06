"""Benchmark: CPU latency of the n-scale detectors at 640, batch 1, BN-folded (fused) vs unfused.

For each model (default yolo26n and yolo11n, detect, 80 classes) the same randomly initialised network is timed
twice in this run — unfused (the baseline) and after :func:`lucid_core.inference.prepare_inference_model` (BN folded,
the inference branch selected) — on one fixed 1x3x640x640 input: ``--warmup`` untimed forwards, then the median of
``--runs`` timed forwards under ``torch.inference_mode``. Prints milliseconds and the unfused/fused ratio, and the
largest difference between the two outputs (fusion must not change results beyond float rounding).

``--vs-reference`` (issue 18) then runs the reference's ``forward`` workload (``../shared/refbench/run.sh
forward``: eval-mode forward bs1 of its unfused model, median of 10 after 2 warm-ups) with the same family, size
and thread count, and prints ours (unfused, the like-for-like pair, and fused, what ``predict`` runs) beside it
with the ratio ours/reference (lower is better); the pair uses a default-initialised model like the reference's
(the randomised BN statistics of the fusion check make the unfused forward ~10x slower).

Run by hand (not by tests): ``OMP_NUM_THREADS=1 uv run --no-sync python tools/bench/infer.py [--threads 1]
[--vs-reference]``.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import torch
from torch import Tensor, nn

from lucid_core.inference import prepare_inference_model
from lucid_core.models import build_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _reference import add_reference_flag, print_pair, run_reference
from _timing import median_ms


def median_latency_ms(model: nn.Module, x: Tensor, warmup: int, runs: int) -> float:
    with torch.inference_mode():
        return median_ms(lambda: model(x), runs=runs, warmup=warmup)


def first_tensor(output: object) -> Tensor:
    return output[0] if isinstance(output, tuple) else output  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", nargs="+", default=["yolo26", "yolo11"], help="families (scale n, detect)"
    )
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    add_reference_flag(parser)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.rand(1, 3, args.imgsz, args.imgsz)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), input 1x3x{args.imgsz}x{args.imgsz}"
    )
    print(f"{'model':<10} {'unfused ms':>11} {'fused ms':>9} {'ratio':>6} {'max |diff|':>11}")
    for family in args.models:
        unfused = build_model(family, "detect", "n", num_classes=80).eval()
        with torch.no_grad():  # non-trivial BN statistics, so that the fused/unfused difference is meaningful
            for buf in unfused.buffers():
                if buf.is_floating_point():
                    buf.uniform_(0.5, 1.5)
        # top-k: a plain call of either model then runs the same (one-to-one) branch of an end-to-end head
        fused, _ = prepare_inference_model(copy.deepcopy(unfused), decode="topk")
        base = median_latency_ms(unfused, x, args.warmup, args.runs)
        fast = median_latency_ms(fused, x, args.warmup, args.runs)
        with torch.inference_mode():
            diff = (first_tensor(unfused(x)) - first_tensor(fused(x))).abs().max().item()
        print(f"{family + 'n':<10} {base:>11.1f} {fast:>9.1f} {base / fast:>6.2f} {diff:>11.2e}")
        if args.vs_reference:
            ref = run_reference(
                "forward", "--family", f"{family}n", "--imgsz", args.imgsz, threads=torch.get_num_threads()
            )
            # like for like: the reference times its default-initialised, unfused model; the randomised BN
            # statistics above (there for a meaningful fusion check) slow the unfused forward ~10x here
            torch.manual_seed(0)
            plain = build_model(family, "detect", "n", num_classes=80).eval()
            plain_ms = median_latency_ms(plain, x, args.warmup, args.runs)
            plain_fused, _ = prepare_inference_model(copy.deepcopy(plain))
            plain_fused_ms = median_latency_ms(plain_fused, x, args.warmup, args.runs)
            print_pair(f"forward {family}n@{args.imgsz} unfused, default init", plain_ms, ref, "ms")
            print_pair(f"forward {family}n@{args.imgsz} fused, default init", plain_fused_ms, ref, "ms")


if __name__ == "__main__":
    main()
