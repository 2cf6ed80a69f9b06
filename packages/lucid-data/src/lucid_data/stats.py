"""Dataset label statistics: class counts, box centres and sizes (normalised), instances per image.

The numbers behind ``labels.png`` (``lucid_viz.eval_figures.plot_labels``) and ``lucid-data stats``; every
instance counts, crowd and difficult ones included. Boxes are the axis-aligned boxes the targets carry (for
oriented boxes their hull), normalised by the image size.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lucid_core.atomic import atomic_path, atomic_write_text

__all__ = ["LABELS_NPZ", "LabelStatistics", "from_instances", "label_statistics", "write_statistics"]

LABELS_NPZ = "labels.npz"


@dataclass(frozen=True)
class LabelStatistics:
    """``classes`` (N,) contiguous labels, ``boxes`` (N, 4) normalised ``cx, cy, w, h``, ``instances_per_image``
    (I,) for the I images, ``names`` contiguous label → class name."""

    names: tuple[str, ...]
    classes: np.ndarray
    boxes: np.ndarray
    instances_per_image: np.ndarray

    @property
    def class_counts(self) -> np.ndarray:
        """(C,) instances per class."""
        return np.bincount(self.classes, minlength=len(self.names))

    @property
    def images_per_class(self) -> np.ndarray:
        """(C,) images containing at least one instance of the class (needs the per-image split)."""
        bounds = np.concatenate([[0], np.cumsum(self.instances_per_image)])
        out = np.zeros(len(self.names), dtype=np.int64)
        for i in range(self.instances_per_image.size):
            present = np.unique(self.classes[bounds[i] : bounds[i + 1]])
            out[present] += 1
        return out

    def summary(self) -> dict[str, Any]:
        """JSON-able numbers: images, instances, per-class instances and images, box-size quartiles."""
        counts, images = self.class_counts, self.images_per_class
        quart = [0.0, 0.25, 0.5, 0.75, 1.0]
        sizes = {
            key: (np.quantile(self.boxes[:, col], quart).tolist() if len(self.boxes) else [])
            for key, col in (("width", 2), ("height", 3))
        }
        return {
            "images": int(self.instances_per_image.size),
            "instances": int(self.classes.size),
            "images_without_instances": int((self.instances_per_image == 0).sum()),
            "max_instances_per_image": int(self.instances_per_image.max(initial=0)),
            "classes": [
                {"class": i, "name": n, "instances": int(counts[i]), "images": int(images[i])}
                for i, n in enumerate(self.names)
            ],
            "box_size_quartiles": sizes,
        }

    def per_class_csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["class", "name", "images", "instances"])
        for row in self.summary()["classes"]:
            writer.writerow([row["class"], row["name"], row["images"], row["instances"]])
        return buffer.getvalue()


def from_instances(
    names: Sequence[str] | Mapping[int, str],
    per_image: Iterable[tuple[np.ndarray, np.ndarray, tuple[int, int]]],
) -> LabelStatistics:
    """Statistics of ``(labels (n,), xyxy pixel boxes (n, 4), (h, w))`` per image."""
    if isinstance(names, Mapping):
        names = [str(names[i]) for i in range(len(names))]
    classes, boxes, counts = [], [], []
    for labels, xyxy, (h, w) in per_image:
        xyxy = np.asarray(xyxy, dtype=np.float64).reshape(-1, 4)
        scale = np.array([w, h, w, h], dtype=np.float64)
        norm = xyxy / np.where(scale > 0, scale, 1.0)
        cxcywh = np.stack(
            [(norm[:, 0] + norm[:, 2]) / 2, (norm[:, 1] + norm[:, 3]) / 2, norm[:, 2] - norm[:, 0],
             norm[:, 3] - norm[:, 1]], axis=1
        )  # fmt: skip
        classes.append(np.asarray(labels, dtype=np.int64).reshape(-1))
        boxes.append(cxcywh)
        counts.append(len(cxcywh))
    return LabelStatistics(
        tuple(str(n) for n in names),
        np.concatenate(classes) if classes else np.zeros(0, dtype=np.int64),
        np.concatenate(boxes) if boxes else np.zeros((0, 4)),
        np.asarray(counts, dtype=np.int64),
    )


def label_statistics(source: Any) -> LabelStatistics:
    """Statistics of a `lucid_data.DatasetSource` (its records' targets, original pixels)."""
    return from_instances(
        source.names,
        ((r.targets.labels, r.targets.boxes, tuple(r.size_hw)) for r in source.records),
    )


def write_statistics(stats: LabelStatistics, directory: str | os.PathLike[str]) -> dict[str, Path]:
    """``stats.json``, ``per_class.csv`` and ``labels.npz`` (the arrays, for ``lucid-viz labels``) in
    ``directory`` (atomically); returns ``{name: path}``."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = {"stats": out / "stats.json", "per_class": out / "per_class.csv", "arrays": out / LABELS_NPZ}
    atomic_write_text(written["stats"], json.dumps(stats.summary(), indent=2) + "\n")
    atomic_write_text(written["per_class"], stats.per_class_csv())
    with atomic_path(written["arrays"]) as tmp, tmp.open("wb") as stream:
        np.savez(
            stream,
            names=np.asarray(stats.names, dtype=str),
            classes=stats.classes,
            boxes=stats.boxes,
            instances_per_image=stats.instances_per_image,
        )
    return written
