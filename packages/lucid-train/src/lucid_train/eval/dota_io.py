"""DOTA files: ``labelTxt`` ground truth and Task-1 submission files (``Task1_<class>.txt``), read strictly.

Labels are one ``labelTxt`` file per image (``x1 y1 ... x4 y4 category difficult``, optional ``imagesource:`` /
``gsd:`` header lines; the image name is the file stem); detections are one ``Task1_<class>.txt`` file per class
with lines ``image score x1 y1 ... x4 y4``. Every problem raises :class:`DotaFormatError` naming file and line.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lucid_core.atomic import atomic_write_text
from lucid_data.readers.dota import parse_dota_file

TASK1_PREFIX = "Task1_"


class DotaFormatError(ValueError):
    """A DOTA label file or Task-1 detection file is missing or malformed (the message names file and line)."""


@dataclass
class DotaImageLabels:
    """The objects of one image: corners (N, 4, 2) float64 pixels, category names, difficult flags."""

    polygons: np.ndarray
    categories: list[str]
    difficult: np.ndarray


@dataclass
class Task1Detections:
    """The detections of one class: image names, scores (D,) and corners (D, 4, 2) float64 pixels."""

    images: list[str] = field(default_factory=list)
    scores: np.ndarray = field(default_factory=lambda: np.zeros(0))
    polygons: np.ndarray = field(default_factory=lambda: np.zeros((0, 4, 2)))

    def __len__(self) -> int:
        return len(self.images)


def read_label_dir(label_dir: str | os.PathLike[str]) -> dict[str, DotaImageLabels]:
    """Every ``*.txt`` labelTxt file of a folder (image name = file stem), parsed strictly."""
    label_dir = Path(label_dir)
    if not label_dir.is_dir():
        raise DotaFormatError(f"--dota-labels {label_dir}: not a folder of DOTA labelTxt files")
    files = sorted(label_dir.glob("*.txt"))
    if not files:
        raise DotaFormatError(f"--dota-labels {label_dir}: no *.txt label files")
    out: dict[str, DotaImageLabels] = {}
    for path in files:
        parsed = parse_dota_file(path)
        if parsed.problems:
            more = f" (and {len(parsed.problems) - 1} more problems)" if len(parsed.problems) > 1 else ""
            raise DotaFormatError(f"DOTA label file {parsed.problems[0]}{more}")
        out[path.stem] = DotaImageLabels(parsed.corners, list(parsed.categories), parsed.difficult)
    return out


def read_task1_file(path: str | os.PathLike[str]) -> Task1Detections:
    """One ``Task1_<class>.txt``: lines ``image score x1 y1 ... x4 y4`` (blank lines skipped)."""
    path = Path(path)
    images: list[str] = []
    values: list[list[float]] = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        tokens = line.split()
        if not tokens:
            continue
        if len(tokens) != 10:
            raise DotaFormatError(
                f"{path}:{lineno}: a Task-1 line is 'image score x1 y1 x2 y2 x3 y3 x4 y4' (10 fields), got "
                f"{len(tokens)}: {line.strip()!r}"
            )
        try:
            numbers = [float(t) for t in tokens[1:]]
        except ValueError as exc:
            raise DotaFormatError(
                f"{path}:{lineno}: score and coordinates must be numbers: {line.strip()!r}"
            ) from exc
        if not all(math.isfinite(v) for v in numbers):
            raise DotaFormatError(f"{path}:{lineno}: non-finite score or coordinate: {line.strip()!r}")
        images.append(tokens[0])
        values.append(numbers)
    arr = np.asarray(values, dtype=np.float64).reshape(-1, 9)
    return Task1Detections(images, arr[:, 0].copy(), arr[:, 1:].reshape(-1, 4, 2).copy())


def read_task1_dir(det_dir: str | os.PathLike[str]) -> dict[str, Task1Detections]:
    """All ``Task1_<class>.txt`` files of a folder → class name → detections."""
    det_dir = Path(det_dir)
    if not det_dir.is_dir():
        raise DotaFormatError(f"--dota-dets {det_dir}: not a folder of Task1_<class>.txt files")
    files = sorted(det_dir.glob(f"{TASK1_PREFIX}*.txt"))
    if not files:
        raise DotaFormatError(f"--dota-dets {det_dir}: no {TASK1_PREFIX}<class>.txt files")
    return {p.stem[len(TASK1_PREFIX) :]: read_task1_file(p) for p in files}


def write_task1_dir(det_dir: str | os.PathLike[str], detections: Mapping[str, Task1Detections]) -> list[Path]:
    """Write one ``Task1_<class>.txt`` per class (atomically, ``lucid_core.atomic``); returns the paths."""
    det_dir = Path(det_dir)
    det_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, dets in sorted(detections.items()):
        flat = dets.polygons.reshape(-1, 8)
        lines = [
            f"{image} {score:.6g} " + " ".join(f"{v:.2f}" for v in poly) + "\n"
            for image, score, poly in zip(dets.images, dets.scores.tolist(), flat.tolist())
        ]
        path = det_dir / f"{TASK1_PREFIX}{name}.txt"
        atomic_write_text(path, "".join(lines))
        paths.append(path)
    return paths
