"""Classification augmentation read black box at lr 0: the reference's mean training loss against ours.

From one reference classification checkpoint, one epoch over the classification gate's training images with the
weights held still: the reference's own ``train()`` (``../shared/refbench/run.sh train`` with ``lr0=0
warmup_epochs=0 warmup_bias_lr=0 weight_decay=0``; its ``results.csv`` ``train/loss``) and ours (our dataset's
augmented samples in batches of the recipe's size, in a seeded random order, the checkpoint's model in training
mode: batch-norm batch statistics, cross-entropy, no step). Nothing learns, so the mean loss reads how hard the
augmented images are; the same settings on both sides must give the same figure within seed noise.

Settings are ``--set KEY=VALUE`` in both trainers' names (``auto_augment``, ``erasing``, ``hsv_h``, ``hsv_s``, ``hsv_v``,
``fliplr``, ``flipud``, ``scale``; ``null`` is None). docs/TRAINING.md ("Classification") has the readings.

Usage: ``uv run --no-sync python tools/probe_classify_augment.py --weights W.pt [--seeds 0 1 2] [--side both|ours|
reference] [--set KEY=VALUE ...]``, e.g. ``--weights runs/fidelity/ref/shapes_yolo26n_classify/seed3/weights/
epoch4.pt --set auto_augment=null --set erasing=0``.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from lucid_core import load
from lucid_data import DetectionDataset, collate, load_dataset
from lucid_data.augment.pipeline import AugmentConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_trajectory as ct  # tools/ is not a package: the directory is on sys.path
import record_reference as rr

GATE = "shapes_yolo26n_classify"
#: the reference's settings that hold the weights still for one epoch
FROZEN = {"lr0": 0, "lrf": 1, "warmup_epochs": 0, "warmup_bias_lr": 0, "weight_decay": 0, "epochs": 1}


def parse_settings(items: list[str]) -> dict[str, Any]:
    """``key=value`` items as AugmentConfig values (numbers as floats, ``null``/``none`` as None); an unknown key
    is a ValueError naming it."""
    known = set(AugmentConfig().to_dict())
    settings: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in known:
            raise ValueError(f"{item!r}: expected KEY=VALUE with KEY one of {sorted(known)}")
        if value.lower() in ("null", "none"):
            settings[key] = None
        else:
            try:
                settings[key] = float(value)
            except ValueError:
                settings[key] = value
    AugmentConfig(**settings)  # validates
    return settings


def our_losses(
    weights: Path, root: Path, settings: dict[str, Any], seeds: list[int], imgsz: int, batch: int
) -> list[float]:
    """Per seed, our mean cross-entropy over one epoch of augmented training batches at fixed weights."""
    model = load(weights).model
    model.train()
    config = AugmentConfig(**settings)
    means = []
    for seed in seeds:
        dataset = DetectionDataset(
            load_dataset(root, "train"), imgsz=imgsz, augment=True, augment_config=config, seed=seed
        )
        order = np.random.default_rng(seed).permutation(len(dataset))
        losses = []
        with torch.no_grad():
            for start in range(0, len(order), batch):
                samples = collate([dataset[int(i)] for i in order[start : start + batch]])
                logits = model(samples["images"].float() / 255)
                losses.append(float(F.cross_entropy(logits, samples["cls"])))
        means.append(float(np.mean(losses)))
    return means


def reference_losses(
    weights: Path, root: Path, settings: dict[str, Any], seeds: list[int], imgsz: int, batch: int
) -> list[float]:
    """Per seed, the reference's ``train/loss`` of one epoch at lr 0 from ``weights`` (its ``train()``)."""
    values = {
        **FROZEN,
        "data": str(root.resolve()),
        "imgsz": imgsz,
        "batch": batch,
        "optimizer": "AdamW",
        "workers": 1,
    }
    values.update(settings)
    means = []
    with tempfile.TemporaryDirectory(prefix="lucid-lr0-probe-") as tmp:
        for seed in seeds:
            run = {**values, "seed": seed, "name": f"s{seed}"}
            rr.refbench_train(weights.resolve(), Path(tmp), run, threads=1, log=Path(tmp) / f"s{seed}.log")
            with open(Path(tmp) / f"s{seed}" / "results.csv", encoding="utf-8") as rows:
                means.append(float(next(csv.DictReader(rows))["train/loss"]))
    return means


def _summary(name: str, values: list[float]) -> str:
    spread = f", sd {statistics.stdev(values):.4f}" if len(values) > 1 else ""
    return f"{name}: mean {statistics.mean(values):.4f}{spread} ({' '.join(f'{v:.4f}' for v in values)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", type=Path, required=True, help="a reference classification checkpoint")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--side", choices=("both", "ours", "reference"), default="both")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="an augmentation setting, both sides"
    )
    args = parser.parse_args(argv)
    if not args.weights.is_file():
        parser.error(f"--weights {args.weights}: no such file")
    try:
        settings = parse_settings(args.set)
    except ValueError as exc:
        parser.error(str(exc))
    torch.set_num_threads(1)
    recipe = ct.select_gates([GATE])[0].recipe
    root = ct.synth_dataset("classify", rr.DATA_DIR, imgsz=recipe.imgsz)
    print(f"{GATE} training images at lr 0 from {args.weights}, settings {settings or 'the defaults'}")
    if args.side in ("both", "reference"):
        if not rr.REFBENCH.is_file():
            print(f"{rr.REFBENCH} is not present: no reference side", file=sys.stderr)
            return 2
        found = reference_losses(args.weights, root, settings, args.seeds, recipe.imgsz, recipe.batch_size)
        print(_summary("reference", found))
    if args.side in ("both", "ours"):
        print(
            _summary(
                "ours", our_losses(args.weights, root, settings, args.seeds, recipe.imgsz, recipe.batch_size)
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
