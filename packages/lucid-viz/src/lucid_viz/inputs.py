"""Coercion of what callers hand to lucid-viz: images, results, targets and task names.

Results are ``lucid_core.results.Detections`` and targets are ``lucid_data.Targets`` (docs/INTERFACES.md), but
both are read by duck typing (attributes ``boxes``, ``scores``, ``labels``, ``masks``, ``polygons``,
``keypoints``, ``rboxes``) or from a plain mapping with the same keys, so lucid-viz never imports lucid_data.
Task names are checked against the task table of ``lucid_core.tasks``. Tensors are recognised by their
``detach``/``cpu``/``numpy`` methods.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from lucid_core.tasks import TASKS


def check_task(task: str) -> str:
    """Return ``task`` if it is a registered task (``lucid_core.tasks``), else raise a ValueError naming it."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}; got {task!r}")
    return task


def task_fields(task: str) -> tuple[str, ...]:
    """The target fields (``masks``, ``keypoints``, ``rboxes``) registered task ``task`` declares."""
    return TASKS[check_task(task)].target_fields


def to_numpy(value: Any) -> np.ndarray:
    """A numpy array from a numpy array, a torch tensor (any device) or a nested sequence."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu()
        if str(getattr(value, "dtype", "")) in ("torch.bfloat16", "torch.float16"):
            value = value.float()
        return np.asarray(value.numpy())
    return np.asarray(value)


def get_field(source: Any, name: str) -> Any:
    """``source.name`` or ``source[name]`` (for a mapping); None when absent."""
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


def field_array(source: Any, name: str, shape_tail: tuple[int, ...], what: str) -> np.ndarray | None:
    """Field ``name`` as a float array of shape (N, *shape_tail) (``-1`` in the tail = any size), or None."""
    value = get_field(source, name)
    if value is None:
        return None
    array = to_numpy(value)
    if array.size == 0:
        return np.zeros((0, *(max(d, 0) for d in shape_tail)), dtype=np.float64)
    if array.ndim != 1 + len(shape_tail) or any(
        want != -1 and got != want for want, got in zip(shape_tail, array.shape[1:])
    ):
        tail = ", ".join("*" if d == -1 else str(d) for d in shape_tail)
        raise ValueError(f"{what}.{name}: expected shape (N, {tail}), got {tuple(array.shape)}")
    return array.astype(np.float64, copy=False)


def as_rgb_image(image: Any, what: str = "image") -> np.ndarray:
    """An (H, W, 3) RGB array (uint8 or float in [0, 1]) from a path, an HWC/CHW array or tensor, or grey HW.

    Arrays and tensors are taken as RGB (the network-input convention of docs/INTERFACES.md); a (3, H, W) array
    whose last axis is not 3 is transposed. Paths are decoded with Pillow (matplotlib's own image reader) with the
    EXIF orientation applied, as OpenCV's ``imread`` does.
    """
    if isinstance(image, str | os.PathLike):
        return load_image_rgb(image)
    array = to_numpy(image)
    if array.ndim == 4 and array.shape[0] == 1:
        array = array[0]
    if array.ndim == 3 and array.shape[0] in (1, 3) and array.shape[-1] not in (1, 3, 4):
        array = np.transpose(array, (1, 2, 0))
    if array.ndim == 3 and array.shape[-1] == 1:
        array = array[..., 0]
    if array.ndim == 2:
        array = np.stack([array] * 3, axis=-1)
    if array.ndim != 3 or array.shape[-1] not in (3, 4):
        raise ValueError(f"{what}: expected an (H, W, 3) or (3, H, W) image, got shape {tuple(array.shape)}")
    array = array[..., :3]
    if array.dtype == np.uint8:
        return array
    if array.dtype == np.bool_:
        return array.astype(np.uint8) * np.uint8(255)
    if np.issubdtype(array.dtype, np.integer):
        return np.asarray(np.clip(array, 0, 255), dtype=np.uint8)
    array = array.astype(np.float32)
    if array.size and float(np.nanmax(array)) > 1.0:
        return np.asarray(np.clip(array, 0, 255), dtype=np.uint8)
    return np.asarray(np.clip(array, 0.0, 1.0), dtype=np.float32)


def load_image_rgb(path: str | os.PathLike[str]) -> np.ndarray:
    """Decode the image file at ``path`` to (H, W, 3) uint8 RGB (EXIF orientation applied)."""
    file_path = Path(path)
    if not file_path.is_file():
        raise FileNotFoundError(f"{file_path}: no such image file")
    try:
        with Image.open(file_path) as opened:
            rgb = ImageOps.exif_transpose(opened).convert("RGB")
            return np.asarray(rgb, dtype=np.uint8).copy()
    except OSError as error:
        raise ValueError(f"{file_path}: cannot decode image ({error})") from error


def class_name(label: int, names: Mapping[int, str] | Sequence[str] | None) -> str:
    """The name of class ``label`` from a ``{index: name}`` map or a list; the index itself when unknown."""
    if names is None:
        return str(label)
    if isinstance(names, Mapping):
        found = names.get(label, names.get(str(label)))  # type: ignore[call-overload]
        return str(label) if found is None else str(found)
    return str(names[label]) if 0 <= label < len(names) else str(label)
