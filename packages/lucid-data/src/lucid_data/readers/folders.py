"""The folder-per-class classification layout: ``root/<split>/<class>/<image>``.

The reference's documented layout (docs.ultralytics.com/datasets/classify): ``root/train/<class>/*.jpg``,
``root/val/<class>/…`` and ``root/test/<class>/…``; the class names are the sorted folder names (index i = the
i-th name), so every split must hold the same class folders. The ``val`` split reads ``val/``, or ``test/`` when
there is no ``val/`` (validation optional in that layout).

Each image becomes an :class:`~lucid_data.records.ImageRecord` whose targets hold one instance: the class of its
folder and a box over the whole image (so instance counts are image counts), ``image_id`` ``"<class>/<file name>"``
(names may repeat across classes). Errors name the path: an empty class folder, an image directly in the split
folder, a split without class folders, class folders that differ from the train split's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lucid_core.tasks.classify import CLASSIFY
from lucid_data.imageio import IMAGE_SUFFIXES, CorruptImageError, image_size
from lucid_data.records import DatasetSource, ImageRecord
from lucid_data.targets import Targets

__all__ = [
    "FOLDER_SPLITS",
    "FolderLayoutError",
    "class_folders",
    "is_folder_layout",
    "read_folders",
    "split_folder",
]

#: The split folders of the layout, in the order ``lucid-data check`` reports them.
FOLDER_SPLITS = ("train", "val", "test")


class FolderLayoutError(ValueError):
    """A folder-per-class dataset that cannot be read; the message names the path and what was expected."""


def _images_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def _subfolders(folder: Path) -> list[Path]:
    return sorted(
        (p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")), key=lambda p: p.name
    )


def is_folder_layout(path: str | Path) -> bool:
    """Whether ``path`` is a folder-per-class dataset: a ``train/`` (or ``val/``/``test/``) folder of class folders
    holding images, and no YOLO ``images/``/``labels/`` folders."""
    root = Path(path)
    if not root.is_dir() or (root / "images").is_dir() or (root / "labels").is_dir():
        return False
    for split in FOLDER_SPLITS:
        folder = root / split
        if folder.is_dir():
            classes = _subfolders(folder)
            if any(c.name in ("images", "labels") for c in classes):
                return False
            if any(_images_in(c) for c in classes):
                return True
    return False


def split_folder(root: str | Path, split: str) -> Path:
    """The folder read for ``split``: ``root/<split>``; for ``val`` without one, ``root/test``."""
    root = Path(root)
    folder = root / split
    if not folder.is_dir() and split == "val" and (root / "test").is_dir():
        folder = root / "test"
    if not folder.is_dir():
        present = [s for s in FOLDER_SPLITS if (root / s).is_dir()]
        raise FileNotFoundError(
            f"{folder}: no such split folder; the folder-per-class dataset {root} has {present or 'no split folders'}"
            " (expected root/<split>/<class>/<images>)"
        )
    return folder


def class_folders(folder: Path) -> list[Path]:
    """The class folders of one split folder, sorted by name; an error naming the path for an image directly in
    the split folder, a split without class folders or a class folder without images."""
    stray = _images_in(folder)
    if stray:
        raise FolderLayoutError(
            f"{stray[0]}: an image directly in the split folder {folder} ({len(stray)} such file(s)); expected "
            "every image inside a class folder, root/<split>/<class>/<image>"
        )
    classes = _subfolders(folder)
    if not classes:
        raise FolderLayoutError(f"{folder}: no class folders; expected root/<split>/<class>/<images>")
    for folder_of_class in classes:
        if not _images_in(folder_of_class):
            raise FolderLayoutError(
                f"{folder_of_class}: empty class folder (no image files with a suffix of "
                f"{', '.join(sorted(IMAGE_SUFFIXES))}); remove it or add its images"
            )
    return classes


def _reference_classes(root: Path, split_dir: Path, classes: list[str]) -> None:
    """Every split must have the train split's class folders (the names are the sorted folder names)."""
    train = root / "train"
    if split_dir == train or not train.is_dir():
        return
    expected = [p.name for p in _subfolders(train)]
    if classes != expected:
        missing = sorted(set(expected) - set(classes))
        extra = sorted(set(classes) - set(expected))
        parts = ([f"missing {missing}"] if missing else []) + ([f"extra {extra}"] if extra else [])
        raise FolderLayoutError(
            f"{split_dir}: its class folders differ from {train}'s ({'; '.join(parts) or 'another order'}); the class "
            f"index is the position among the sorted folder names, so every split needs the same class folders"
        )


def read_folders(path: str | Path, split: str = "train", task: str | None = None) -> DatasetSource:
    """Read one split of the folder-per-class dataset at ``path`` (module docstring) as a dataset of the
    image-level ``task`` (default classify); ``corrupt_images`` lists images whose header cannot be read (left
    out)."""
    root = Path(path)
    folder = split_folder(root, split)
    classes = class_folders(folder)
    names = [c.name for c in classes]
    _reference_classes(root, folder, names)
    records: list[ImageRecord] = []
    corrupt: list[str] = []
    for label, class_dir in enumerate(classes):
        for image in _images_in(class_dir):
            try:
                h, w = image_size(image)
            except CorruptImageError as exc:
                corrupt.append(str(exc))
                continue
            image_id = f"{class_dir.name}/{image.name}"
            targets = Targets(
                boxes=np.array([[0.0, 0.0, w, h]], np.float32),
                labels=np.array([label], np.int64),
                image_id=image_id,
                orig_size=(h, w),
            )
            records.append(ImageRecord(path=image, targets=targets, image_id=image_id, size_hw=(h, w)))
    return DatasetSource(
        records=records,
        names=dict(enumerate(names)),
        task=task or CLASSIFY.name,
        root=root,
        split=split,
        corrupt_images=corrupt,
    )
