"""Calibration images for post-training quantisation, read without lucid-data.

``data`` is a YOLO data YAML (its ``train`` split: a folder, a ``.txt`` list of image paths or a list of those,
relative to ``path``, itself relative to the YAML's folder) or a folder of images. Only the YAML's top-level
``path`` / ``train`` keys are read, by a minimal line parser (no YAML library in lucid-core). Images are decoded
with torchvision (RGB, EXIF orientation applied) and letterboxed to the export size as predict does (centred,
grey 114), then scaled to [0, 1].
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from torchvision.io import ImageReadMode, decode_image

from lucid_core.export.errors import ExportInputError
from lucid_core.geometry.letterbox import letterbox

__all__ = ["DEFAULT_CALIBRATION_IMAGES", "calibration_batches", "calibration_files"]

#: images used for INT8 calibration unless told otherwise
DEFAULT_CALIBRATION_IMAGES = 300
IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp"})


def _scalar(value: str) -> str:
    value = value.split(" #", 1)[0].strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return value


def _read_yaml_keys(path: Path) -> dict[str, list[str]]:
    """Top-level ``key: value`` / ``key: [a, b]`` / ``key:`` + ``- item`` entries of a data YAML."""
    out: dict[str, list[str]] = {}
    current: str | None = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace() and ":" in line:
            key, _, value = line.partition(":")
            current = key.strip()
            value = _scalar(value)
            if value.startswith("[") and value.endswith("]"):
                out[current] = [_scalar(v) for v in value[1:-1].split(",") if _scalar(v)]
            else:
                out[current] = [value] if value else []
        elif current is not None and line.lstrip().startswith("- "):
            out[current].append(_scalar(line.lstrip()[2:]))
    return out


def _images_in(entry: Path) -> list[Path]:
    if entry.is_dir():
        return sorted(p for p in entry.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if entry.suffix == ".txt" and entry.is_file():
        lines = [line.strip() for line in entry.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [p if p.is_absolute() else entry.parent / p for p in map(Path, lines)]
    return [entry] if entry.is_file() and entry.suffix.lower() in IMAGE_SUFFIXES else []


def calibration_files(
    data: str | os.PathLike[str], *, fraction: float = 1.0, limit: int = DEFAULT_CALIBRATION_IMAGES
) -> list[Path]:
    """The calibration images of ``data`` (module docstring): ``fraction`` of the split, at most ``limit``, evenly
    spaced over the sorted list. No image found raises :class:`ExportInputError` naming ``--data``."""
    source = Path(data)
    if not 0 < fraction <= 1:
        raise ExportInputError(f"--fraction {fraction}: expected a value in (0, 1]")
    if limit < 1:
        raise ExportInputError(f"--calibration-images {limit}: expected >= 1")
    if source.is_dir():
        files = _images_in(source)
    elif source.is_file() and source.suffix in (".yaml", ".yml"):
        keys = _read_yaml_keys(source)
        root_entry = (keys.get("path") or [""])[0]
        root = source.parent / root_entry if root_entry else source.parent
        if not keys.get("train"):
            raise ExportInputError(f"--data {data}: no 'train' split to calibrate on")
        files = [f for entry in keys["train"] for f in _images_in(root / entry)]
    else:
        raise ExportInputError(f"--data {data}: expected a data YAML or a folder of images")
    count = min(limit, max(1, math.ceil(len(files) * fraction))) if files else 0
    if count == 0:
        raise ExportInputError(f"--data {data}: no calibration images found")
    picks = np.linspace(0, len(files) - 1, count).round().astype(int)
    return [files[i] for i in sorted(set(picks.tolist()))]


def calibration_batches(files: list[Path], hw: tuple[int, int]) -> Iterator[np.ndarray]:
    """One ``(1, 3, h, w)`` float32 array in [0, 1] per readable image, letterboxed to ``hw``."""
    for path in files:
        try:
            with warnings.catch_warnings():  # torchvision >= 0.29 announces a future move to torchcodec
                warnings.simplefilter("ignore", DeprecationWarning)
                image = decode_image(str(path), mode=ImageReadMode.RGB, apply_exif_orientation=True)
        except (RuntimeError, ValueError, OSError):
            continue
        padded, _ = letterbox(image, hw, auto=False)
        yield (padded[None].to(torch.float32) / 255).numpy()
