"""COCO JSON ⇄ YOLO txt and DOTA → YOLO-OBB conversion, built on the readers so a converted dataset reads back to
the same Targets.

What is written follows the target fields of the source's task (`lucid_core.tasks.get_task(task)`): masks →
polygons, keypoints → keypoints (and `kpt_shape`/`flip_idx`), rboxes → 4 corners; none → boxes only.

- `write_yolo(source, output)`: `output/images/<split>/…` (symlinks to the originals, or copies),
  `output/labels/<split>/<stem>.txt`, and `output/data.yaml` (`path`, the split, `names`, `category_ids`,
  `kpt_shape`/`flip_idx` for keypoints, `task`). Crowd instances are dropped (a YOLO line cannot mark them).
  Coordinates are written with `decimals` significant digits (default 10: reads back to the same float32
  pixels; 6 gives the customary compact files).
- `write_coco(source, output)`: `output/annotations/<instances|person_keypoints>_<split>.json` (keypoints) with images linked
  into `output/images/<split>/`. Category ids are `source.category_ids`; YOLO pose keypoints are named
  `left_i`/`right_i` for the pairs of `flip_idx` (`kpt_i` when a point maps to itself), so the COCO reader
  rebuilds the same `flip_idx`. OBB instances are written with their 4 corners as the segmentation polygon (see `readers.coco`).
- `convert_dataset(source, output, to)`: reads the source non-strictly, so a bad annotation (missing fields, a
  polygon of fewer than 3 points, a wrong keypoint count, an unknown category id) is one problem line naming the
  file and the annotation id, and the rest converts; ``to="yolo-obb"`` reads the source as oriented boxes (e.g.
  DOTA labelTxt; difficult objects are kept, a YOLO line cannot mark them) and adds ``classes.txt`` (line i = the
  name of class i) beside ``data.yaml``.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from lucid_core.atomic import atomic_write_text
from lucid_core.tasks import get_task
from lucid_data.readers.common import polygon_area, rbox_to_corners
from lucid_data.readers.probe import load_dataset
from lucid_data.records import DatasetSource, ImageRecord, Task

__all__ = ["Conversion", "convert", "convert_dataset", "write_coco", "write_yolo", "yolo_lines"]

TARGET_FORMATS = ("yolo", "coco", "yolo-obb")
CLASSES_FILE = "classes.txt"


def _atomic_write_text(path: Path, text: str) -> None:
    atomic_write_text(path, text)


def _place_image(src: Path, dst: Path, copy: bool) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.is_symlink() or dst.exists():
        if dst.resolve() == src.resolve():
            return
        dst.unlink()
    if copy:
        shutil.copy2(src, dst)
    else:
        os.symlink(src.resolve(), dst)


def _relative_image_path(record: ImageRecord, source: DatasetSource) -> Path:
    try:
        rel = record.path.resolve().relative_to(Path(source.root).resolve())
    except ValueError:
        return Path(record.path.name)
    parts = rel.parts
    if "images" in parts:  # YOLO layout: keep what follows `images/<split>/`
        i = len(parts) - 1 - parts[::-1].index("images")
        rel = Path(*parts[i + 2 :]) if len(parts) > i + 2 else Path(record.path.name)
    return rel


def _obb_corners(record: ImageRecord, i: int) -> np.ndarray:
    t = record.targets
    if t.polygons is not None and len(t.polygons[i]) == 4:
        return t.polygons[i]
    if t.rboxes is not None:
        corners: np.ndarray = rbox_to_corners(t.rboxes[i : i + 1])[0]
        return corners
    raise ValueError(f"{record.path}: obb conversion needs corners or rboxes")


def yolo_lines(record: ImageRecord, task: Task, decimals: int = 10) -> list[str]:
    """YOLO label lines of one record (normalised by its size); crowd instances are skipped.

    The line format follows `task`'s target fields (`readers.yolo`): polygons, box + keypoints, corners or a box.
    """
    fields = get_task(task).target_fields
    h, w = record.size_hw
    t = record.targets
    scale = np.array([w, h], dtype=np.float64)

    def fmt(values: np.ndarray) -> str:
        return " ".join(format(float(v), f".{decimals}g") for v in values)

    lines = []
    for i in range(len(t)):
        if t.iscrowd[i]:
            continue
        cls = str(int(t.labels[i]))
        box = t.boxes[i].astype(np.float64)
        cxcywh = np.array(
            [
                (box[0] + box[2]) / 2 / w,
                (box[1] + box[3]) / 2 / h,
                (box[2] - box[0]) / w,
                (box[3] - box[1]) / h,
            ]
        )
        if "masks" in fields:
            if t.polygons is None:
                raise ValueError(f"{record.path}: segment conversion needs polygons")
            lines.append(f"{cls} {fmt((t.polygons[i].astype(np.float64) / scale).reshape(-1))}")
        elif "keypoints" in fields:
            if t.keypoints is None:
                raise ValueError(f"{record.path}: pose conversion needs keypoints")
            kp = t.keypoints[i].astype(np.float64).copy()
            kp[:, :2] /= scale
            lines.append(f"{cls} {fmt(cxcywh)} {fmt(kp.reshape(-1))}")
        elif "rboxes" in fields:
            corners = _obb_corners(record, i).astype(np.float64)
            lines.append(f"{cls} {fmt((corners / scale).reshape(-1))}")
        else:
            lines.append(f"{cls} {fmt(cxcywh)}")
    return lines


def write_yolo(
    source: DatasetSource, output: str | Path, *, copy_images: bool = False, decimals: int = 10
) -> Path:
    """Write `source` as a YOLO dataset under `output`; returns the data YAML path (updated per split)."""
    output = Path(output)
    split = source.split
    for record in source.records:
        rel = _relative_image_path(record, source)
        _place_image(record.path, output / "images" / split / rel, copy_images)
        lines = yolo_lines(record, source.task, decimals)
        _atomic_write_text(
            (output / "labels" / split / rel).with_suffix(".txt"), "".join(f"{x}\n" for x in lines)
        )
    yaml_path = output / "data.yaml"
    data: dict[str, Any] = {}
    if yaml_path.is_file():
        data = yaml.safe_load(yaml_path.read_text(encoding="utf-8")) or {}
    data.update(
        {
            "path": ".",
            split: f"images/{split}",
            "task": source.task,
            "names": {int(k): v for k, v in source.names.items()},
            "category_ids": [int(c) for c in source.category_ids],
        }
    )
    if "keypoints" in get_task(source.task).target_fields and source.kpt_shape is not None:
        data["kpt_shape"] = [int(source.kpt_shape[0]), 3]
        if source.flip_idx is not None:
            data["flip_idx"] = [int(i) for i in source.flip_idx]
        if source.kpt_sigmas is not None:
            data["kpt_sigmas"] = [float(v) for v in source.kpt_sigmas]
    _atomic_write_text(yaml_path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return yaml_path


def _keypoint_names(k: int, flip_idx: list[int] | None) -> list[str]:
    names = [f"kpt_{i}" for i in range(k)]
    for i, j in enumerate(flip_idx or []):
        if i < j:
            names[i], names[j] = f"left_{i}", f"right_{i}"
    return names


def write_coco(source: DatasetSource, output: str | Path, *, copy_images: bool = False) -> Path:
    """Write `source` as COCO JSON (+ linked images) under `output`; returns the JSON path."""
    output = Path(output)
    split = source.split
    fields = get_task(source.task).target_fields
    prefix = "person_keypoints" if "keypoints" in fields else "instances"
    json_path = output / "annotations" / f"{prefix}_{split}.json"
    k = source.kpt_shape[0] if source.kpt_shape else 0
    categories: list[dict[str, Any]] = []
    for label, cat_id in enumerate(source.category_ids):
        cat: dict[str, Any] = {"id": int(cat_id), "name": source.names[label], "supercategory": ""}
        if "keypoints" in fields:
            cat["keypoints"] = _keypoint_names(k, source.flip_idx)
            cat["skeleton"] = []
        categories.append(cat)
    images: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    used_ids: set[Any] = set()
    for index, record in enumerate(source.records):
        rel = _relative_image_path(record, source)
        _place_image(record.path, output / "images" / split / rel, copy_images)
        image_id: Any = record.image_id
        if isinstance(image_id, str):
            image_id = int(image_id) if image_id.isdigit() else index + 1
        if image_id in used_ids:
            raise ValueError(f"{record.path}: duplicate image id {image_id}")
        used_ids.add(image_id)
        h, w = record.size_hw
        images.append({"id": image_id, "file_name": rel.as_posix(), "height": int(h), "width": int(w)})
        t = record.targets
        for i in range(len(t)):
            x0, y0, x1, y1 = (float(v) for v in t.boxes[i])
            ann: dict[str, Any] = {
                "id": len(annotations) + 1,
                "image_id": image_id,
                "category_id": int(source.category_ids[int(t.labels[i])]),
                "bbox": [x0, y0, x1 - x0, y1 - y0],
                "area": (x1 - x0) * (y1 - y0),
                "iscrowd": int(t.iscrowd[i]),
            }
            if "masks" in fields and t.polygons is not None:
                poly = t.polygons[i].astype(np.float64)
                ann["segmentation"] = [[float(v) for v in poly.reshape(-1)]]
                ann["area"] = polygon_area(poly)
            if "rboxes" in fields:
                corners = _obb_corners(record, i).astype(np.float64)
                ann["segmentation"] = [[float(v) for v in corners.reshape(-1)]]
                ann["area"] = polygon_area(corners)
            if "keypoints" in fields and t.keypoints is not None:
                kp = t.keypoints[i].astype(np.float64)
                ann["keypoints"] = [float(v) if j % 3 != 2 else int(v) for j, v in enumerate(kp.reshape(-1))]
                ann["num_keypoints"] = int((kp[:, 2] > 0).sum())
            annotations.append(ann)
    data = {"info": {"description": f"converted by lucid-data from {source.root}"}, "licenses": [],
            "images": images, "annotations": annotations, "categories": categories}  # fmt: skip
    _atomic_write_text(json_path, json.dumps(data))
    return json_path


@dataclass(frozen=True)
class Conversion:
    """What :func:`convert_dataset` wrote: the data YAML / JSON path, counts, and one line per skipped annotation."""

    output: Path
    images: int
    instances: int
    crowd_dropped: int
    problems: tuple[str, ...]

    @property
    def skipped(self) -> int:
        """Annotations left out because they are unusable (one per problem line)."""
        return len(self.problems)

    def summary(self) -> str:
        crowd = f", {self.crowd_dropped} crowd instance(s) dropped" if self.crowd_dropped else ""
        return (
            f"converted {self.images} images, {self.instances} instances{crowd}; "
            f"{self.skipped} annotation(s) skipped"
        )


def convert_dataset(
    source_path: str | Path,
    output: str | Path,
    to: str,
    *,
    split: str = "train",
    task: Task | None = None,
    copy_images: bool = False,
    decimals: int = 10,
    strict: bool = False,
) -> Conversion:
    """Read `source_path` (any layout `load_dataset` knows; non-strictly unless `strict`) and write it as `to`
    (``"yolo"``, ``"coco"`` or ``"yolo-obb"``: the source read as task obb, plus ``classes.txt``)."""
    if to not in TARGET_FORMATS:
        raise ValueError(f"unknown target format {to!r}; expected one of {', '.join(TARGET_FORMATS)}")
    if to == "yolo-obb":
        if task not in (None, "obb"):
            raise ValueError(f"--to yolo-obb writes oriented boxes: use --task obb (or none), got {task!r}")
        task = "obb"
    source = load_dataset(source_path, split, task, strict=strict)
    written = 0
    crowd = 0
    for record in source.records:
        flags = np.asarray(record.targets.iscrowd, dtype=bool)
        written += len(record.targets) - (int(flags.sum()) if to != "coco" else 0)
        crowd += int(flags.sum()) if to != "coco" else 0
    if to == "coco":
        path = write_coco(source, output, copy_images=copy_images)
    else:
        path = write_yolo(source, output, copy_images=copy_images, decimals=decimals)
        if to == "yolo-obb":
            names = "".join(f"{source.names[i]}\n" for i in range(len(source.names)))
            _atomic_write_text(Path(output) / CLASSES_FILE, names)
    problems = tuple(str(p) for p in source.problems)
    return Conversion(path, len(source.records), written, crowd, problems)


def convert(
    source_path: str | Path,
    output: str | Path,
    to: str,
    *,
    split: str = "train",
    task: Task | None = None,
    copy_images: bool = False,
    decimals: int = 10,
) -> Path:
    """Read `source_path` (any layout `load_dataset` knows, strictly) and write it as `to` = "yolo" or "coco"
    (or "yolo-obb"); the written data YAML / JSON path (:func:`convert_dataset` with ``strict=True``)."""
    return convert_dataset(
        source_path,
        output,
        to,
        split=split,
        task=task,
        copy_images=copy_images,
        decimals=decimals,
        strict=True,
    ).output
