"""Benchmark: augmented training samples per second at 640 with mosaic, vs decode-only, cached vs uncached.

Dataset: `../shared/data/coco8` (train split, 4 COCO images; issue 5). Measured in the same run:

- decode-only: `lucid_data.load_image` of the dataset's files (the floor any pipeline pays without a cache);
- augmented (default `AugmentConfig`: mosaic 1.0, affine, HSV, flip) through `DetectionDataset`: uncached (the
  default, which reuses a process's recent decodes, `lucid_data.cache.RecentDecodes`, with the share of loads it
  answered), decoding every load (`decode_buffer_mib=0`), with `cache="ram"`, and with `cache="ram"` and HSV
  deferred to the training device (`--data.device_hsv`, a GPU option: the pipeline's share without the HSV
  transform, then `augment_hsv_batch`'s cost per sample on this CPU); in-process (0 workers) and through a
  `DataLoader` with 1 and 2 workers (throughput per worker);
- the first augmented line runs before `lucid_core.allocator.tune_glibc_malloc` (glibc's default thresholds, a
  fresh page for every big array of every sample), every later one after it, as `YOLODataModule` runs training;
- all with one OpenCV/torch thread per process, so the numbers are per core;
- with `--libs`: the pixel kernels of the pipeline in cv2 vs Pillow vs torch (resize, affine warp), the measurement
  behind choosing cv2.

Every line prints samples/s and the ratio to decode-only. With `--vs-reference` (issue 18) the reference's
dataset is timed after ours on the same YAML, imgsz, sample count and thread count
(`../shared/refbench/run.sh data`: mosaic 1.0, default augmentation, in-process, no cache; samples/s of its
`__getitem__`, as ours here) and the ratios ours/reference of the in-process lines are printed. Its uncached
dataset also reuses recent decodes: on coco8 (4 images) every load after the first pass is reused on both sides;
`--data` with many distinct images (e.g. coco8's 4 images copied 50 times) shows the case where they are not.
The peak RSS of this process is printed beside the reference run's (measured from outside,
`_reference.run_measured`).
`--threads` (default 1) is the OpenCV/torch thread count of the in-process lines and of the reference run;
workers always run one thread each. Run by hand (not by tests):
`OMP_NUM_THREADS=1 uv run --no-sync python tools/bench/data.py [--samples 200] [--workers 0 1 2] [--libs]
[--threads 2 --vs-reference [--pairs 3]]` (`--pairs N`: the in-process lines and the reference N times in turn,
then the median ratio and its range).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from lucid_core.allocator import tune_glibc_malloc
from lucid_data import DetectionDataset, collate, load_dataset, load_image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _reference import SHARED_DIR, add_reference_flag, peak_rss_mib, print_pair, print_peak_rss, run_reference

DEFAULT_DATA = SHARED_DIR / "data" / "coco8" / "coco8.yaml"


def _rate(count: int, seconds: float) -> float:
    return count / max(seconds, 1e-9)


def decode_only(paths: list[Path], samples: int) -> float:
    start = time.perf_counter()
    for i in range(samples):
        load_image(paths[i % len(paths)])
    return _rate(samples, time.perf_counter() - start)


def in_process(ds: DetectionDataset, samples: int, warmup: int = 8) -> float:
    """Samples/s of ``ds[i % len(ds)]`` after ``warmup`` untimed samples (the reference workload's protocol)."""
    ds.set_epoch(0)
    for i in range(warmup):
        ds[i % len(ds)]
    start = time.perf_counter()
    for i in range(samples):
        if i and i % len(ds) == 0:
            ds.set_epoch(i // len(ds))  # new augmentation draws every pass over the images
        ds[i % len(ds)]
    return _rate(samples, time.perf_counter() - start)


def _single_thread_cv2(_worker_id: int) -> None:
    import cv2

    cv2.setNumThreads(1)


def through_loader(ds: DetectionDataset, samples: int, workers: int, batch_size: int = 4) -> float:
    # coco8 has 4 images: one loader walks the indices repeatedly so worker start-up (included) is paid once
    order = [i % len(ds) for i in range(samples)]
    ds.set_epoch(0)
    loader = DataLoader(
        ds,
        batch_size=batch_size,
        sampler=order,
        num_workers=workers,
        collate_fn=collate,
        worker_init_fn=_single_thread_cv2,
    )
    start = time.perf_counter()
    done = 0
    for batch in loader:
        done += batch["images"].shape[0]
    return _rate(done, time.perf_counter() - start)


def device_hsv_cpu_cost(ds: DetectionDataset, rates: dict[str, float], batch: int = 8) -> None:
    """The deferred-HSV line's missing work, timed here: `augment_hsv_batch` on a collated batch of its samples on
    this CPU (where `--data.device_hsv` is not used), per sample, beside the in-process lines' per-sample times."""
    from lucid_data.augment.hsv_torch import augment_hsv_batch

    ds.set_epoch(0)
    samples = collate([ds[i % len(ds)] for i in range(batch)])
    augment_hsv_batch(samples["images"], samples["hsv_gains"])
    repeats = 5
    start = time.perf_counter()
    for _ in range(repeats):
        augment_hsv_batch(samples["images"], samples["hsv_gains"])
    per_sample = (time.perf_counter() - start) / (repeats * batch) * 1e3
    deferred, cached = rates.get("cached + device HSV"), rates.get("cached")
    pipeline = (
        f"{1e3 / deferred:.2f} ms per sample in the pipeline against {1e3 / cached:.2f} ms cached; "
        if deferred and cached
        else ""
    )
    print(
        f"HSV deferred: {pipeline}augment_hsv_batch on this CPU {per_sample:.2f} ms per sample "
        f"(bs{batch}; on a GPU it runs there)"
    )


def compare_libs(image: np.ndarray, repeats: int = 30) -> None:
    import cv2
    from PIL import Image

    def timed(fn) -> float:  # type: ignore[no-untyped-def]
        fn()
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        return (time.perf_counter() - start) / repeats * 1e3

    h, w = image.shape[:2]
    size = (int(w * 1.37), int(h * 1.37))
    pil = Image.fromarray(image)
    chw = torch.from_numpy(image).permute(2, 0, 1)[None].float()
    print(f"pixel kernels on a {w}x{h} image, ms per call (1 thread):")
    print(
        f"  resize  cv2 INTER_LINEAR {timed(lambda: cv2.resize(image, size, interpolation=cv2.INTER_LINEAR)):7.2f}"
    )
    print(f"  resize  Pillow BILINEAR  {timed(lambda: pil.resize(size, Image.BILINEAR)):7.2f}")
    print(
        f"  resize  torch bilinear   {timed(lambda: torch.nn.functional.interpolate(chw, size=size[::-1], mode='bilinear')):7.2f}"
    )
    m = cv2.getRotationMatrix2D((w / 2, h / 2), 10, 1.1)
    print(
        f"  affine  cv2 warpAffine   {timed(lambda: cv2.warpAffine(image, m, (640, 640), borderValue=(114, 114, 114))):7.2f}"
    )
    coeffs = tuple(np.linalg.inv(np.vstack([m, [0, 0, 1]]))[:2].reshape(-1))
    print(
        f"  affine  Pillow transform {timed(lambda: pil.transform((640, 640), Image.AFFINE, coeffs, Image.BILINEAR, fillcolor=(114, 114, 114))):7.2f}"
    )
    theta = torch.tensor([[[0.9, 0.1, 0.0], [-0.1, 0.9, 0.0]]])
    grid = torch.nn.functional.affine_grid(theta, [1, 3, 640, 640], align_corners=False)
    print(
        f"  affine  torch grid_sample{timed(lambda: torch.nn.functional.grid_sample(chw, grid, align_corners=False)):7.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--samples", type=int, default=120)
    parser.add_argument("--workers", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--libs", action="store_true", help="also time cv2 vs Pillow vs torch pixel kernels")
    parser.add_argument(
        "--threads", type=int, default=1, help="OpenCV/torch threads in-process (and reference)"
    )
    parser.add_argument(
        "--pairs",
        type=int,
        default=1,
        help="--vs-reference: time the in-process lines and the reference this many times in turn; median ratio",
    )
    add_reference_flag(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    import cv2

    cv2.setNumThreads(args.threads)  # workers: one thread each (worker_init_fn)
    in_process_rates: dict[str, float] = {}

    source = load_dataset(args.data, "train")
    paths = [Path(r.path) for r in source.records]
    base = decode_only(paths, args.samples)
    print(
        f"data: {args.data} ({len(paths)} train images), imgsz {args.imgsz}, {args.samples} samples per line"
    )
    print(f"{'decode-only (load_image)':50s} {base:8.1f} samples/s   1.00x")
    # first, the process as it starts: glibc's default thresholds (fresh pages for every sample's big arrays)
    untuned = in_process(
        DetectionDataset(source, imgsz=args.imgsz, augment=True, decode_buffer_mib=0), args.samples
    )
    print(
        f"{'augmented mosaic, decode every load, untuned':50s} {untuned:8.1f} samples/s   {untuned / base:4.2f}x"
    )
    tuned = tune_glibc_malloc()  # what YOLODataModule does (lucid_core.allocator); every line below runs so
    print(f"glibc malloc tuned as in training: {tuned}")
    variants = (
        ("uncached", {}),  # the default: recent decodes reused (lucid_data.cache.RecentDecodes)
        ("decode every load", {"decode_buffer_mib": 0}),
        ("cached", {"cache": "ram"}),
        # `--data.device_hsv`: the same samples without their HSV transform, which the training module applies
        # to the whole batch on the GPU (`augment_hsv_batch`); a GPU-only option (on a CPU run the workers keep
        # HSV), so this is the input pipeline's share only, and `device_hsv_cpu_cost` prints what it would
        # cost on this CPU instead
        ("cached + device HSV", {"cache": "ram", "defer_hsv": True}),
    )
    reused = ""
    datasets = {}
    for label, options in variants:
        ds = DetectionDataset(source, imgsz=args.imgsz, augment=True, **options)  # type: ignore[arg-type]
        datasets[label] = ds
        for workers in args.workers:
            if workers == 0:
                rate = in_process(ds, args.samples)
                name = f"augmented mosaic, {label}, in-process"
                per = rate
                in_process_rates[label] = rate
                if ds.recent is not None:
                    reused = f"  (decode buffer: {ds.recent.hits}/{ds.recent.hits + ds.recent.misses} loads reused)"
            else:
                rate = through_loader(ds, args.samples, workers)
                name = f"augmented mosaic, {label}, {workers} worker(s)"
                per = rate / workers
            print(f"{name:50s} {rate:8.1f} samples/s   {rate / base:4.2f}x  ({per:.1f}/s per worker){reused}")
            reused = ""
    if args.libs:
        compare_libs(load_image(paths[0]))
    if args.vs_reference:
        references = []
        ratios: dict[str, list[float]] = {}
        for round_ in range(max(args.pairs, 1)):  # ours, then the reference, again (the machine drifts)
            if round_:
                in_process_rates = {label: in_process(ds, args.samples) for label, ds in datasets.items()}
            ref = run_reference(
                "data",
                "--data",
                args.data,
                "--imgsz",
                args.imgsz,
                "--samples",
                args.samples,
                threads=args.threads,
            )
            references.append(ref)
            for label, rate in in_process_rates.items():
                ratio = print_pair(
                    f"data mosaic@{args.imgsz} in-process {label} ({args.threads} thr)",
                    rate,
                    ref,
                    "samples/s",
                )
                if ratio is not None:
                    ratios.setdefault(label, []).append(ratio)
        if args.pairs > 1 and ratios:
            summary = ", ".join(
                f"{label} {statistics.median(r):.2f}x (range {min(r):.2f}-{max(r):.2f})"
                for label, r in ratios.items()
            )
            print(f"data mosaic@{args.imgsz}: median ours/reference of {args.pairs} pairs: {summary}")
        # ours: this whole process (every line above, the RAM cache included); the reference: its runs
        print_peak_rss(f"peak RSS, data mosaic@{args.imgsz}", peak_rss_mib(), references)
    # last: its (B, 3, 640, 640) int64 intermediates would otherwise count in the pipeline's peak RSS above
    device_hsv_cpu_cost(datasets["cached + device HSV"], in_process_rates)


if __name__ == "__main__":
    main()
