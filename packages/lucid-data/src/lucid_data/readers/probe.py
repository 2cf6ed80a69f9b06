"""`load_dataset(path)`: recognise the on-disk layout and dispatch to the YOLO, COCO or DOTA reader.

Recognised, in this order:
1. a `.yaml`/`.yml` file → YOLO data YAML;
2. a `.json` file → COCO JSON (images next to it, in `<root>/<split name>` or `<root>/images/<split name>`);
3. a folder with `labelTxt/` (or `<split>/labelTxt/`) → DOTA;
4. a folder with `annotations/*.json` → COCO;
5. a folder with exactly one `*.yaml` data file → YOLO via that YAML;
6. a folder with `images/` (and `labels/`) → YOLO without a YAML (names are the class ids);
7. a folder with `train/<class>/` (or `val/`, `test/`) image folders and no labels → the folder-per-class
   classification layout (`lucid_data.readers.folders`; class names = the sorted folder names).

An image-level task (classify, `Task.image_level`) reads only the folder-per-class layout, and that layout only an
image-level task.
"""

from __future__ import annotations

from pathlib import Path

from lucid_core.tasks import get_task
from lucid_data.readers.coco import find_coco_json, read_coco
from lucid_data.readers.dota import read_dota
from lucid_data.readers.folders import is_folder_layout, read_folders
from lucid_data.readers.yolo import read_yolo
from lucid_data.records import DatasetSource, Task

__all__ = ["EXPECTED_LAYOUTS", "detect_layout", "load_dataset"]

EXPECTED_LAYOUTS = (
    "a YOLO data YAML (path/train/val/names), "
    "a YOLO folder with images/ and labels/, "
    "a COCO JSON file or a folder with annotations/*.json, "
    "a DOTA folder with labelTxt/ and images/, "
    "or a classification folder root/train/<class>/<images> (one folder per class)"
)


def detect_layout(path: str | Path, split: str = "train") -> tuple[str, Path]:
    """("yolo" | "coco" | "dota" | "folders", the file or folder to read), or a `ValueError` saying what was
    expected."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; expected {EXPECTED_LAYOUTS}")
    if path.is_file():
        if path.suffix in (".yaml", ".yml"):
            return "yolo", path
        if path.suffix == ".json":
            return "coco", path
        raise ValueError(f"{path}: unknown file type {path.suffix!r}; expected {EXPECTED_LAYOUTS}")
    if (path / "labelTxt").is_dir() or (path / split / "labelTxt").is_dir():
        return "dota", path
    if (path / "annotations").is_dir() and any((path / "annotations").glob("*.json")):
        return "coco", path
    yamls = [p for p in sorted(path.glob("*.y*ml")) if p.suffix in (".yaml", ".yml")]
    if len(yamls) == 1:
        return "yolo", yamls[0]
    if (path / "images").is_dir():
        return "yolo", path
    if is_folder_layout(path):
        return "folders", path
    if list(path.glob("*.json")):
        return "coco", path
    raise ValueError(f"{path}: cannot tell the dataset layout; expected {EXPECTED_LAYOUTS}")


def load_dataset(
    path: str | Path, split: str = "train", task: Task | None = None, *, strict: bool = True
) -> DatasetSource:
    """Read one split of a dataset in any supported layout (see the module docstring).

    `task` overrides the inferred task (YAML `task`/`kpt_shape`, the label line lengths, COCO keypoints).
    `strict=False` lists bad labels in `DatasetSource.problems` instead of raising `LabelError`.
    """
    layout, target = detect_layout(path, split)
    image_level = task is not None and get_task(task).image_level
    if layout == "folders":
        if task is not None and not image_level:
            raise ValueError(
                f"{path}: a folder-per-class dataset labels whole images (task classify), not {task!r} instances"
            )
        return read_folders(target, split, task)
    if image_level:
        raise ValueError(
            f"{path}: task {task!r} reads the folder-per-class layout root/<split>/<class>/<images>; this is a "
            f"{layout} dataset of instance labels"
        )
    if layout == "yolo":
        return read_yolo(target, split, task, strict=strict)
    if layout == "coco":
        json_path = target if target.is_file() else find_coco_json(target, split, task)
        return read_coco(json_path, split, task, strict=strict)
    if task is not None and get_task(task).target_fields != ("rboxes",):
        raise ValueError(f"{path}: DOTA labels are oriented boxes (task obb), not {task!r}")
    return read_dota(target, split, strict=strict)
