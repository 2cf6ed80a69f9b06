"""Benchmark: latency of the plain ``predict(model, image)`` call on one image file, CPU.

For each family (``--families``, default yolo26 yolo11; scale n, detect, 80 classes, random initialisation) the
same protocol as the reference's ``predict`` workload (``../shared/refbench/README.md``): ``predict(model, path)``
on ``--image`` (default ``../shared/data/images/bus.jpg``; decoded from the file on every call) at ``--imgsz``,
3 untimed calls, then the median of ``--runs`` (20). The first call prepares (BN-folds) a copy of the model, which
later calls reuse until the weights change (``lucid_core.inference.cached_inference_model``). ``--vs-reference``
then runs ``run.sh predict`` with the same image, family, size and ``--threads`` and prints both latencies and
the ratio ours/reference (lower is better; the target is ≤ 0.8). The benchmark opts in to the malloc policy
``lucid-predict`` uses (``lucid_core.allocator.tune_glibc_malloc()`` at the start of ``main``; ``predict`` itself
leaves malloc alone). Each line also prints the minor page faults per call; ``--malloc-baseline`` times the same
calls in a child process with glibc's default malloc (``LUCID_MALLOC_TUNING=0``) and prints tuned/default.
``--facade`` also times ``lucid_train.YOLO(weights).predict(path)`` on the same model saved as lucid-core weights
(the facade loads them once and reuses the prepared copy) and prints facade/core.
``--path`` times ``predict(weights_path, image)`` on the same saved weights (read once while the files are
unchanged, ``lucid_core.inference.weights_for_predict``) and prints path/core.

Run by hand (not by tests):
``uv run --no-sync python tools/bench/predict.py [--threads 2] [--malloc-baseline] [--facade] [--path] [--vs-reference]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from lucid_core.allocator import tune_glibc_malloc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _reference import SHARED_DIR, add_reference_flag, print_pair, run_reference


def _bench_model(family: str) -> torch.nn.Module:
    from lucid_core.models import build_model

    torch.manual_seed(0)
    return build_model(family, "detect", "n", num_classes=80).eval()


def _median_ms(call: Callable[[], object], warmup: int, runs: int) -> tuple[float, float]:
    """Median latency (ms) of ``runs`` timed calls after ``warmup``, and the minor page faults per timed call."""
    for _ in range(warmup):
        call()
    times = []
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    return statistics.median(times), faults / runs


def predict_latency_ms(family: str, image: Path, imgsz: int, warmup: int, runs: int) -> tuple[float, float]:
    """``predict(model, image)``: median latency (ms) and minor page faults per call (:func:`_median_ms`)."""
    from lucid_core.inference import predict

    model = _bench_model(family)
    return _median_ms(lambda: predict(model, str(image), imgsz=imgsz), warmup, runs)


def facade_latency_ms(family: str, image: Path, imgsz: int, warmup: int, runs: int) -> float:
    """``YOLO(weights).predict(image)`` on the same model saved as lucid-core weights: median latency (ms)."""
    from lucid_core.checkpoint import save_model
    from lucid_train import YOLO

    with tempfile.TemporaryDirectory() as folder:
        weights = Path(folder) / f"{family}n"
        save_model(_bench_model(family), weights, names=[str(i) for i in range(80)], imgsz=imgsz)
        facade = YOLO(weights)
        return _median_ms(lambda: facade.predict(str(image), imgsz=imgsz), warmup, runs)[0]


def path_latency_ms(family: str, image: Path, imgsz: int, warmup: int, runs: int) -> tuple[float, float]:
    """``predict(weights_path, image)`` on the same model saved as lucid-core weights, and the same call reading
    the weights every time (``lucid_core.load`` then ``predict(model, ...)``, what a path cost before it was kept):
    median latencies (ms)."""
    from lucid_core.checkpoint import load, save_model
    from lucid_core.inference import predict

    with tempfile.TemporaryDirectory() as folder:
        weights = Path(folder) / f"{family}n"
        save_model(_bench_model(family), weights, names=[str(i) for i in range(80)], imgsz=imgsz)
        kept = _median_ms(lambda: predict(weights, str(image), imgsz=imgsz), warmup, runs)[0]
        reread = _median_ms(lambda: predict(load(weights).model, str(image), imgsz=imgsz), warmup, runs)
        return kept, reread[0]


def untuned_latency_ms(
    family: str, image: Path, imgsz: int, warmup: int, runs: int, threads: int
) -> tuple[float, float]:
    """:func:`predict_latency_ms` in a child process with glibc's default malloc (``LUCID_MALLOC_TUNING=0``)."""
    code = (
        "import sys, torch; sys.path.insert(0, sys.argv[1]); torch.set_num_threads(int(sys.argv[7]));"
        "from pathlib import Path; from predict import predict_latency_ms;"
        "print(*predict_latency_ms(sys.argv[2], Path(sys.argv[3]), *map(int, sys.argv[4:7])))"
    )
    env = {**os.environ, "LUCID_MALLOC_TUNING": "0"}
    args = [
        str(Path(__file__).resolve().parent),
        family,
        str(image),
        str(imgsz),
        str(warmup),
        str(runs),
        str(threads),
    ]
    out = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, check=True, capture_output=True, text=True
    )
    ms, faults = (float(v) for v in out.stdout.split()[-2:])
    return ms, faults


def main() -> None:
    tune_glibc_malloc()  # as lucid-predict does; the --malloc-baseline child opts out (LUCID_MALLOC_TUNING=0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--families", nargs="+", default=["yolo26", "yolo11"])
    parser.add_argument("--image", type=Path, default=SHARED_DIR / "data" / "images" / "bus.jpg")
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (and the reference's)")
    parser.add_argument(
        "--malloc-baseline",
        action="store_true",
        help="also time each family in a child process with glibc's default malloc (LUCID_MALLOC_TUNING=0)",
    )
    parser.add_argument(
        "--path",
        action="store_true",
        help="also time predict(weights_path, image) on the same model saved as weights, and reading them on "
        "every call as before (path/core, reload/core)",
    )
    parser.add_argument(
        "--facade",
        action="store_true",
        help="also time lucid_train.YOLO(weights).predict on the same model saved as weights (facade/core)",
    )
    add_reference_flag(parser)
    args = parser.parse_args()
    if not args.image.is_file():
        print(f"predict: image {args.image} not found (pass --image or provide ../shared); nothing timed")
        return
    torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, {args.threads} thread(s), predict(model, {args.image.name}) at {args.imgsz}"
    )
    for family in args.families:
        ours, faults = predict_latency_ms(family, args.image, args.imgsz, args.warmup, args.runs)
        print(
            f"predict {family}n@{args.imgsz}: {ours:.1f} ms (median of {args.runs}), {faults:.0f} page faults/call"
        )
        if args.malloc_baseline:
            base, base_faults = untuned_latency_ms(
                family, args.image, args.imgsz, args.warmup, args.runs, args.threads
            )
            print(
                f"predict {family}n@{args.imgsz} with glibc's default malloc (LUCID_MALLOC_TUNING=0, a child "
                f"process): {base:.1f} ms, {base_faults:.0f} page faults/call; tuned/default {ours / base:.2f}x"
            )
        if args.facade:
            facade = facade_latency_ms(family, args.image, args.imgsz, args.warmup, args.runs)
            print(
                f"predict {family}n@{args.imgsz} through YOLO(weights).predict: {facade:.1f} ms, "
                f"facade/core {facade / ours:.2f}x"
            )
        if args.path:
            by_path, reread = path_latency_ms(family, args.image, args.imgsz, args.warmup, args.runs)
            print(
                f"predict {family}n@{args.imgsz} through predict(weights_path, image): {by_path:.1f} ms, "
                f"path/core {by_path / ours:.2f}x; reading the weights every call: {reread:.1f} ms, "
                f"reload/core {reread / ours:.2f}x"
            )
        if args.vs_reference:
            ref = run_reference(
                "predict",
                "--image",
                args.image,
                "--family",
                f"{family}n",
                "--imgsz",
                args.imgsz,
                threads=args.threads,
            )
            print_pair(f"predict {family}n@{args.imgsz}", ours, ref, "ms")


if __name__ == "__main__":
    main()
