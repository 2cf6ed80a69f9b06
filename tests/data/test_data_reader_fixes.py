"""Reader fixes (issue 14): a degenerate OBB quad in a COCO JSON is reported and skipped (no crash in a non-strict
read), and YOLO image ids stay unique when a recursively listed split holds the same stem in sibling folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from lucid_data import load_dataset
from lucid_data.readers.yolo import image_ids_for


def _coco_obb(tmp_path: Path, quads: list[list[float]]) -> Path:
    Image.fromarray(np.zeros((40, 50, 3), np.uint8)).save(tmp_path / "im.png")
    annotations = [
        {"id": i + 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "segmentation": [quad]}
        for i, quad in enumerate(quads)
    ]
    data = {
        "images": [{"id": 1, "file_name": "im.png", "height": 40, "width": 50}],
        "categories": [{"id": 1, "name": "a"}],
        "annotations": annotations,
    }
    path = tmp_path / "ann.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    "degenerate",
    [
        [5, 5, 5, 5, 5, 5, 5, 5],  # one point: empty box
        [2, 2, 10, 10, 20, 20, 30, 30],  # collinear corners: a non-empty box around a zero-area quad
    ],
    ids=["point", "collinear"],
)
def test_coco_degenerate_obb_polygon_is_reported_and_skipped(tmp_path: Path, degenerate: list[float]) -> None:
    good = [10, 10, 30, 10, 30, 20, 10, 20]
    path = _coco_obb(tmp_path, [good, degenerate, good])
    source = load_dataset(path, task="obb")
    targets = source.records[0].targets
    assert len(targets) == 2  # both good instances kept, aligned with their polygons and rboxes
    assert targets.polygons is not None and len(targets.polygons) == 2
    assert targets.rboxes is not None and targets.rboxes.shape == (2, 5)
    np.testing.assert_allclose(targets.boxes, [[10, 10, 30, 20]] * 2)
    assert len(source.problems) == 1
    assert "annotation id 2" in source.problems[0]
    assert "degenerate obb polygon" in source.problems[0] or "empty box" in source.problems[0]


def _image(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(path)


def test_yolo_ids_are_unique_per_relative_path(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    for sub, line in (("a", "0 0.5 0.5 0.5 0.5\n"), ("b", "0 0.25 0.25 0.25 0.25\n")):
        _image(root / "images" / "val" / sub / "0001.png")
        (root / "labels" / "val" / sub).mkdir(parents=True)
        (root / "labels" / "val" / sub / "0001.txt").write_text(line)
    _image(root / "images" / "val" / "c" / "0002.png")  # a unique stem keeps its stem id
    (root / "data.yaml").write_text("path: .\ntrain: images/val\nval: images/val\nnames: {0: x}\n")
    source = load_dataset(root / "data.yaml", split="val")
    ids = {r.path.relative_to(root / "images" / "val").as_posix(): r.image_id for r in source.records}
    assert ids == {"a/0001.png": "a/0001", "b/0001.png": "b/0001", "c/0002.png": "0002"}
    assert all(r.targets.image_id == r.image_id for r in source.records)


def test_yolo_ids_keep_the_suffix_when_only_the_suffix_differs(tmp_path: Path) -> None:
    images = [tmp_path / "x" / "0001.png", tmp_path / "x" / "0001.jpg", tmp_path / "y" / "0001.png"]
    assert image_ids_for(images) == ["x/0001.png", "x/0001.jpg", "y/0001"]


def test_yolo_same_image_listed_twice_is_refused_with_both_entries(tmp_path: Path) -> None:
    image = tmp_path / "images" / "0001.png"
    with pytest.raises(ValueError, match=r"0001\.png is listed twice in the split \(entries 1 and 2\)"):
        image_ids_for([image, image])
