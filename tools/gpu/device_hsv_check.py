"""GPU check of ``--data.device_hsv`` (issue 18): on the device, the batch HSV is the worker path's bytes and costs
the training step next to nothing, while the input pipeline sheds its largest per-sample stage.

The CPU benchmark (``tools/bench/data.py``, line "cached + device HSV") measures only the pipeline's side: the
samples without their HSV round trip. The other side needs a CUDA device, and this script measures it:

1. bytes: ``BATCHES`` batches of ``BATCH`` mosaic samples at ``IMGSZ`` (``../shared/data/coco8``, else synthetic
   shapes) are built twice with the same seeds, by the worker path (OpenCV HSV) and deferred; the deferred batch
   through ``augment_hsv_batch`` on the device must equal the worker batch byte for byte (``IMGSZ`` is a multiple
   of OpenCV's row block, so the whole row takes its vector path: ``lucid_data.augment.hsv_torch``);
2. cost: CUDA-event medians of ``augment_hsv_batch`` on one such uint8 batch and of a yolo26 n training step on it
   (as the training module runs ``16-mixed``, the reference's default GPU precision: fp16 autocast forward with
   BatchNorm in float32, the objective in float32, GradScaler backward, SGD step);
   the HSV's share of the step must stay under ``MAX_STEP_SHARE``;
3. pipeline: the in-process samples/s of both datasets with one OpenCV thread (as a DataLoader worker runs), and
   the CPU time per sample the deferral saves, beside the device time per sample it adds.

Usage: ``python tools/gpu/device_hsv_check.py`` (``uv run`` in the workspace; with a bare interpreter it puts the
packages' sources on ``sys.path``; about a minute on an H100; exit 1 when a byte differs or the
share is over the bound, 2 without CUDA). ``DEVICE_HSV_CHECK_SMOKE=1`` runs the same plumbing on the CPU at toy
sizes (bytes checked, the share only printed), which is how the test suite runs it.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]
try:  # the workspace venv; on a bare device machine, the packages' sources (as tools/gpu/check.sh sets them)
    import lucid_train  # noqa: F401
except ImportError:
    sys.path[:0] = [str(ROOT / "packages" / p / "src") for p in ("lucid-core", "lucid-data", "lucid-train")]

#: DEVICE_HSV_CHECK_SMOKE=1: the same plumbing on the CPU at toy sizes, to test this script
SMOKE = os.environ.get("DEVICE_HSV_CHECK_SMOKE") == "1"
BATCH = 2 if SMOKE else 16
IMGSZ = 128 if SMOKE else 640
BATCHES = 2 if SMOKE else 4
TIMED = 2 if SMOKE else 20
PIPELINE_SAMPLES = 8 if SMOKE else 96
#: the device HSV may take at most this share of one training step
MAX_STEP_SHARE = 0.05
COCO8 = ROOT.parent / "shared" / "data" / "coco8" / "coco8.yaml"


def _source(workdir: Path) -> Path:
    if COCO8.is_file() and not SMOKE:
        return COCO8
    from lucid_data.synth import synthesize

    return synthesize("detect", workdir / "shapes", n_train=8, n_val=2, imgsz=IMGSZ, seed=0)


def _datasets(source: Path) -> tuple[Any, Any]:
    from lucid_data import DetectionDataset

    options: dict[str, Any] = {"imgsz": IMGSZ, "augment": True, "cache": "ram", "seed": 0}
    return DetectionDataset(source, **options), DetectionDataset(source, defer_hsv=True, **options)


def _sample(ds: Any, k: int) -> dict[str, Any]:
    """The k-th sample of an endless walk over the images, a new epoch (new draws) every pass."""
    ds.set_epoch(k // len(ds))
    sample: dict[str, Any] = ds[k % len(ds)]
    return sample


def check_bytes(worker: Any, deferred: Any, device: torch.device) -> tuple[int, int, dict[str, Any]]:
    """(differing values, values compared, the last collated worker batch)."""
    from lucid_data import collate
    from lucid_data.augment.hsv_torch import augment_hsv_batch

    differing = compared = 0
    batch: dict[str, Any] = {}
    for b in range(BATCHES):
        ks = range(b * BATCH, (b + 1) * BATCH)
        batch = collate([_sample(worker, k) for k in ks])
        later = collate([_sample(deferred, k) for k in ks])
        moved = augment_hsv_batch(later["images"].to(device), later["hsv_gains"]).cpu()
        differing += int((moved != batch["images"]).sum())
        compared += moved.numel()
    return differing, compared, batch


def _median_ms(fn: Callable[[], object], device: torch.device, runs: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def time_device_hsv(batch: dict[str, Any], device: torch.device) -> float:
    from lucid_data.augment.hsv_torch import augment_hsv_batch

    images = batch["images"].to(device)
    gains = torch.zeros(images.shape[0], 3, dtype=torch.float64) + torch.tensor([0.01, 0.5, -0.3])
    return _median_ms(lambda: augment_hsv_batch(images, gains), device, TIMED)


def time_training_step(batch: dict[str, Any], device: torch.device) -> float:
    """Median ms of a yolo26 n step on the batch as the training module runs it under ``16-mixed``: fp16 autocast
    forward with BatchNorm in float32, the objective in float32 outside autocast, scaled backward, SGD step."""
    from lucid_core.models import build_model
    from lucid_core.tasks import build_objective
    from lucid_train.precision import float32_output, keep_batchnorm_float32

    torch.manual_seed(0)
    model = build_model("yolo26", "detect", "n", num_classes=80).to(device).train()
    keep_batchnorm_float32(model)
    objective = build_objective(model)
    data = {k: batch[k].to(device) for k in ("batch_idx", "cls", "bboxes")}
    images = batch["images"].to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937, nesterov=True)
    amp = device.type == "cuda"
    scaler = torch.amp.GradScaler(device.type, enabled=amp)

    def step() -> None:
        with torch.autocast(device.type, dtype=torch.float16, enabled=amp):
            output = model(images.float() / 255.0)
        total, _ = objective(float32_output(output), data)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(total).backward()
        scaler.step(optimizer)
        scaler.update()

    return _median_ms(step, device, max(TIMED // 2, 2))


def pipeline_ms_per_sample(ds: Any) -> float:
    import cv2

    threads = cv2.getNumThreads()
    cv2.setNumThreads(1)  # as a DataLoader worker runs (lucid_data.opencv_threads)
    try:
        for k in range(4):
            _sample(ds, k)
        start = time.perf_counter()
        for k in range(PIPELINE_SAMPLES):
            _sample(ds, k)
        return (time.perf_counter() - start) / PIPELINE_SAMPLES * 1e3
    finally:
        cv2.setNumThreads(threads)


def main() -> int:
    if not SMOKE and not torch.cuda.is_available():
        print("device_hsv_check: no CUDA device (DEVICE_HSV_CHECK_SMOKE=1 runs the plumbing on the CPU)")
        return 2
    device = torch.device("cuda" if torch.cuda.is_available() and not SMOKE else "cpu")
    print(
        f"torch {torch.__version__}, device {device}, batch {BATCH} at {IMGSZ} px{' (smoke)' if SMOKE else ''}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        worker, deferred = _datasets(_source(Path(tmp)))
        differing, compared, batch = check_bytes(worker, deferred, device)
        print(f"bytes: {BATCHES} batches, {differing} of {compared} values differ from the worker path")
        hsv_ms = time_device_hsv(batch, device)
        step_ms = time_training_step(batch, device)
        share = hsv_ms / step_ms
        print(
            f"cost: augment_hsv_batch {hsv_ms:.3f} ms per batch ({1e3 * hsv_ms / BATCH:.1f} us per sample), "
            f"yolo26n training step {step_ms:.1f} ms: {100 * share:.2f} % of the step (bound {100 * MAX_STEP_SHARE:.0f} %)"
        )
        with_hsv, without = pipeline_ms_per_sample(worker), pipeline_ms_per_sample(deferred)
        print(
            f"pipeline (1 OpenCV thread, cached): {with_hsv:.2f} ms per sample with HSV, {without:.2f} ms deferred "
            f"({with_hsv / without:.2f}x the samples/s); the device adds {hsv_ms / BATCH:.3f} ms per sample"
        )
    failed = differing > 0 or (not SMOKE and share > MAX_STEP_SHARE)
    print("device_hsv_check:", "FAILED" if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
