"""Where mosaic partners come from, read black box: one labelled image among background images.

A training set of ``--images`` background images (no labels) and one marker image (a grid of squares). With
mosaic on and the weights held still (``lr0=0``), a batch holds instances only when the marker is in it, as
a sample's own image or as one of its 3 partners. The reference's progress line prints every batch's instance
count, so the batches that hold the marker are read from its log; ours are counted on our dataset, in our
sampler's order. When partners come from the last N images loaded, those batches sit within N / batch batches
of the marker's own; when they come from the whole set, anywhere in the epoch. docs/DATA.md ("Mosaic
partners") has the readings.

Usage: ``uv run --no-sync python tools/probe_mosaic_partners.py --batch 16 [--epochs 20] [--images 1000]
[--imgsz 96] [--side both|ours|reference] [--recent N]`` (``--recent``: ours' ``mosaic_recent``; the default is
ours' training default).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import cv2
import numpy as np

from lucid_data import DetectionDataset, load_dataset
from lucid_data.augment.pipeline import AugmentConfig
from lucid_data.order import rank_order

sys.path.insert(0, str(Path(__file__).resolve().parent))
import record_reference as rr  # tools/ is not a package: the directory is on sys.path

#: the source images' side; the marker's grid of squares, each ``GRID_SQUARE`` px, one per ``GRID_STEP`` px
SOURCE_SIDE = 96
GRID_STEP = 32
GRID_SQUARE = 24
#: the reference's settings that hold the weights still and keep mosaic on for every epoch
FROZEN = {"lr0": 0.0, "warmup_epochs": 0, "warmup_bias_lr": 0.0, "close_mosaic": 0, "val": False}
#: one progress line of a detection run: ``epoch/epochs  mem  losses...  instances  size: pct% bar  k/batches``
PROGRESS = re.compile(r"(\d+)/\d+\s+\S+\s+(?:[-\d.naif]+\s+)+?(\d+)\s+\d+:\s+\d+%\s+\S+\s+(\d+)/\d+")


def write_marker_dataset(root: Path, images: int, marker: int, seed: int = 0) -> Path:
    """A YOLO detection set under ``root``: ``images`` training images of grey noise without labels but
    ``marker``, which holds a 3 x 3 grid of labelled squares (class 0), and 4 validation images like the marker.
    Returns its data YAML."""
    if not 0 <= marker < images:
        raise ValueError(f"marker {marker} is outside {images} images")
    rng = np.random.default_rng(seed)
    for split, count in (("train", images), ("val", 4)):
        (root / "images" / split).mkdir(parents=True, exist_ok=True)
        (root / "labels" / split).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            image = rng.integers(90, 160, (SOURCE_SIDE, SOURCE_SIDE, 3), dtype=np.uint8)
            lines = []
            if split == "val" or i == marker:
                for y0 in range(4, SOURCE_SIDE, GRID_STEP):
                    for x0 in range(4, SOURCE_SIDE, GRID_STEP):
                        image[y0 : y0 + GRID_SQUARE, x0 : x0 + GRID_SQUARE] = (20, 20, 230)
                        c, w = (GRID_SQUARE / 2) / SOURCE_SIDE, GRID_SQUARE / SOURCE_SIDE
                        lines.append(
                            f"0 {x0 / SOURCE_SIDE + c:.6f} {y0 / SOURCE_SIDE + c:.6f} {w:.6f} {w:.6f}"
                        )
            cv2.imwrite(str(root / "images" / split / f"{i:05d}.png"), image)
            text = "".join(line + "\n" for line in lines)
            (root / "labels" / split / f"{i:05d}.txt").write_text(text, encoding="utf-8")
    data = root / "data.yaml"
    data.write_text(
        f"path: {root}\ntrain: images/train\nval: images/val\nnames:\n  0: square\n", encoding="utf-8"
    )
    return data


def batch_instances(log: str) -> dict[tuple[int, int], int]:
    """(epoch from 0, batch) -> instances, read from the reference's progress lines. Its line ``k/batches`` shows
    batch k's count (the line after the last batch repeats the last one and is dropped)."""
    counts: dict[tuple[int, int], int] = {}
    for match in PROGRESS.finditer(log):
        epoch, instances, k = (int(g) for g in match.groups())
        counts[(epoch - 1, k)] = instances
    last = {}
    for epoch, k in counts:
        last[epoch] = max(last.get(epoch, -1), k)
    return {key: n for key, n in counts.items() if key[1] < last[key[0]]}


def marker_batches(counts: dict[tuple[int, int], int]) -> dict[int, list[int]]:
    """Per epoch, the batches holding instances (the marker's)."""
    epochs: dict[int, list[int]] = {}
    for (epoch, k), n in sorted(counts.items()):
        epochs.setdefault(epoch, [])
        if n > 0:
            epochs[epoch].append(k)
    return epochs


def our_instances(
    data: Path, *, batch: int, epochs: int, imgsz: int, recent: int | None, seed: int = 0
) -> dict[tuple[int, int], int]:
    """(epoch, batch) -> instances of our training samples in our sampler's order (one process, rank 0), mosaic
    on throughout; ``recent`` is ``AugmentConfig.mosaic_recent`` (None: training's default for ``batch``)."""
    config = AugmentConfig(close_mosaic=0, mosaic_recent=recent).for_batch(batch)
    dataset = DetectionDataset(
        load_dataset(str(data), split="train"), imgsz=imgsz, augment=True, augment_config=config, seed=seed
    )
    counts: dict[tuple[int, int], int] = {}
    for epoch in range(epochs):
        dataset.set_epoch(epoch)
        order = rank_order(len(dataset), seed=seed, epoch=epoch, rank=0, world_size=1)
        for position, index in enumerate(order):
            key = (epoch, position // batch)
            counts[key] = counts.get(key, 0) + len(dataset[index]["targets"].labels)
    return counts


def reference_instances(
    data: Path, *, batch: int, epochs: int, imgsz: int, out: Path
) -> dict[tuple[int, int], int]:
    """(epoch, batch) -> instances of the reference's training batches (its ``train()`` with the weights held
    still, ``workers=1``); its log is ``out/reference.log``."""
    settings = {**FROZEN, "data": str(data), "epochs": epochs, "batch": batch, "imgsz": imgsz, "workers": 1}
    settings |= {"optimizer": "AdamW", "seed": 0, "name": "run", "exist_ok": True}
    log = out / "reference.log"
    rr.refbench_train(Path("yolo26n.yaml"), out / "project", settings, threads=2, log=log)
    return batch_instances(log.read_text(encoding="utf-8", errors="replace"))


def summary(name: str, epochs: dict[int, list[int]], batch: int) -> Iterable[str]:
    """One line per epoch (the marker's batches and their span) and a last line: the spans, in batches. Partners
    from a window of N recent images keep an epoch's span within N / batch batches, except where the previous
    epoch's window reaches into this epoch's first batches (the span then runs from batch 0)."""
    spans = []
    for epoch, hits in sorted(epochs.items()):
        span = hits[-1] - hits[0] if hits else None
        if span is not None:
            spans.append(span)
        yield f"{name} epoch {epoch}: batches {hits} span {span}"
    if spans:
        per_epoch = statistics.mean(len(h) for h in epochs.values())
        yield (
            f"{name}: batch {batch}, {len(spans)} epochs with the marker, {per_epoch:.1f} batches per epoch, "
            f"span median {statistics.median(spans)}, spans {sorted(spans)}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--imgsz", type=int, default=96)
    parser.add_argument("--side", choices=("both", "ours", "reference"), default="both")
    parser.add_argument(
        "--recent", type=int, default=None, help="ours' mosaic_recent (default: ours' default)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lucid-partners-") as tmp:
        data = write_marker_dataset(Path(tmp) / "data", args.images, args.images // 2)
        if args.side in ("both", "ours"):
            ours = our_instances(
                data, batch=args.batch, epochs=args.epochs, imgsz=args.imgsz, recent=args.recent
            )
            print("\n".join(summary("ours", marker_batches(ours), args.batch)), flush=True)
        if args.side in ("both", "reference"):
            ref = reference_instances(
                data, batch=args.batch, epochs=args.epochs, imgsz=args.imgsz, out=Path(tmp)
            )
            print("\n".join(summary("reference", marker_batches(ref), args.batch)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
