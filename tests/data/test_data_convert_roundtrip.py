"""Conversion round trips on real data (coco8-seg, coco8-pose, coco-mmpose, DOTA devkit) and bad COCO input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from lucid_data.cli import main
from lucid_data.convert import CLASSES_FILE, convert_dataset
from lucid_data.readers import load_dataset
from lucid_data.records import DatasetSource

pytestmark = pytest.mark.shared


def _by_name(source: DatasetSource) -> dict[str, object]:
    return {Path(r.path).name: r for r in source.records}


def assert_same_instances(a: DatasetSource, b: DatasetSource) -> None:
    """Every box, polygon vertex, keypoint (with visibility) and rotated box equal within 1e-6 of the image size."""
    ra, rb = _by_name(a), _by_name(b)
    assert sorted(ra) == sorted(rb)
    for name, x in ra.items():
        y = rb[name]
        tx, ty = x.targets, y.targets  # type: ignore[attr-defined]
        atol = 1e-6 * max(x.size_hw)  # type: ignore[attr-defined]
        assert tx.labels.tolist() == ty.labels.tolist(), name
        np.testing.assert_allclose(tx.boxes, ty.boxes, atol=atol, rtol=0, err_msg=name)
        if tx.polygons is not None:
            assert len(tx.polygons) == len(ty.polygons)
            for p, q in zip(tx.polygons, ty.polygons):
                np.testing.assert_allclose(p, q, atol=atol, rtol=0, err_msg=name)
        if tx.keypoints is not None:
            np.testing.assert_allclose(tx.keypoints[..., :2], ty.keypoints[..., :2], atol=atol, rtol=0)
            assert tx.keypoints[..., 2].tolist() == ty.keypoints[..., 2].tolist()
        if tx.rboxes is not None:
            np.testing.assert_allclose(tx.rboxes[:, :4], ty.rboxes[:, :4], atol=atol, rtol=0)
            np.testing.assert_allclose(tx.rboxes[:, 4], ty.rboxes[:, 4], atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    ("folder", "yaml_name", "task"),
    [("coco8-seg", "coco8-seg.yaml", "segment"), ("coco8-pose", "coco8-pose.yaml", "pose")],
)
@pytest.mark.parametrize("split", ["train", "val"])
def test_yolo_to_coco_and_back_keeps_every_instance(
    shared_dir: Path, tmp_path: Path, folder: str, yaml_name: str, task: str, split: str
) -> None:
    data = shared_dir / "data" / folder / yaml_name
    original = load_dataset(data, split, task)
    coco = convert_dataset(data, tmp_path / "coco", "coco", split=split, task=task)
    assert coco.skipped == 0 and coco.instances == sum(len(r.targets) for r in original.records)
    back = convert_dataset(coco.output, tmp_path / "yolo", "yolo", split=split, task=task)
    assert_same_instances(original, load_dataset(coco.output, split, task))
    assert_same_instances(original, load_dataset(back.output, split, task))
    # the label files themselves: the same numbers up to float formatting
    for label in sorted((shared_dir / "data" / folder / "labels" / split).glob("*.txt")):
        again = tmp_path / "yolo" / "labels" / split / label.name
        rows_a = [list(map(float, line.split())) for line in label.read_text().splitlines() if line.strip()]
        rows_b = [list(map(float, line.split())) for line in again.read_text().splitlines() if line.strip()]
        assert len(rows_a) == len(rows_b)
        for ra, rb in zip(rows_a, rows_b):
            np.testing.assert_allclose(ra, rb, atol=1e-6, rtol=0)


@pytest.mark.parametrize("task", ["pose", "segment", "detect"])
def test_coco_mmpose_to_yolo_and_back_keeps_every_instance(
    shared_dir: Path, tmp_path: Path, task: str
) -> None:
    annotations = shared_dir / "data" / "coco-mmpose" / "test_coco.json"
    original = load_dataset(annotations, "val", task)
    yolo = convert_dataset(annotations, tmp_path / "yolo", "yolo", split="val", task=task)
    assert yolo.skipped == 0 and yolo.crowd_dropped == 0  # the file has no crowd annotation
    coco = convert_dataset(yolo.output, tmp_path / "coco", "coco", split="val", task=task)
    assert_same_instances(original, load_dataset(yolo.output, "val", task))
    assert_same_instances(original, load_dataset(coco.output, "val", task))
    if task == "pose":  # every labelled keypoint value of the source file survives (x, y, v)
        source: dict[int, list[list[float]]] = {
            a["image_id"]: [] for a in json.loads(annotations.read_text())["annotations"]
        }
        for a in json.loads(annotations.read_text())["annotations"]:
            source[a["image_id"]].append(a["keypoints"])
        written = json.loads(coco.output.read_text())
        by_file = {im["id"]: im["file_name"] for im in written["images"]}
        src_files = {im["id"]: im["file_name"] for im in json.loads(annotations.read_text())["images"]}
        src_by_file = {src_files[k]: sorted(v) for k, v in source.items()}
        out_by_file: dict[str, list[list[float]]] = {}
        for a in written["annotations"]:
            out_by_file.setdefault(by_file[a["image_id"]], []).append(a["keypoints"])
        for name, kpts in src_by_file.items():
            np.testing.assert_allclose(sorted(out_by_file[name]), kpts, atol=1e-6 * 640, rtol=0)


def test_dota_labels_to_yolo_obb_read_back_as_the_same_rotated_boxes(
    shared_dir: Path, tmp_path: Path
) -> None:
    folder = shared_dir / "data" / "dota-devkit"
    direct = load_dataset(folder, "train", "obb")
    done = convert_dataset(folder, tmp_path / "obb", "yolo-obb")
    assert done.instances == 64 and done.skipped == 0
    names = (tmp_path / "obb" / CLASSES_FILE).read_text().splitlines()
    assert names == [direct.names[i] for i in range(len(direct.names))]
    converted = load_dataset(done.output, "train", "obb")
    assert converted.names == direct.names
    assert_same_instances(direct, converted)


def _bad_coco(tmp_path: Path, shared_dir: Path) -> Path:
    """coco-mmpose with four broken annotations: missing bbox, a 2-point polygon, 16 keypoints, category 7."""
    folder = tmp_path / "bad"
    shutil.copytree(shared_dir / "data" / "coco-mmpose", folder)
    path = folder / "test_coco.json"
    data = json.loads(path.read_text())
    anns = data["annotations"]
    del anns[0]["bbox"]
    anns[1]["segmentation"] = [[10.0, 10.0, 20.0, 20.0]]
    anns[2]["keypoints"] = anns[2]["keypoints"][:-3]
    anns[3]["category_id"] = 7
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(("task", "broken"), [("pose", (0, 2, 3)), ("segment", (1, 3))])
def test_bad_annotations_are_named_and_the_rest_converts(
    shared_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], task: str, broken: tuple[int, ...]
) -> None:
    path = _bad_coco(tmp_path, shared_dir)
    ids = [a["id"] for a in json.loads(path.read_text())["annotations"]]
    code = main(
        ["convert", str(path), str(tmp_path / "out"), "--to", "yolo", "--split", "val", "--task", task]
    )
    assert code == 0
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.startswith("lucid-data: skipped ")]
    assert len(lines) == len(broken)
    for index in broken:
        assert any(str(path) in line and f"annotation id {ids[index]} " in line for line in lines), ids[index]
    assert f"{len(ids) - len(broken)} instances; {len(broken)} annotation(s) skipped" in captured.err
    written = sum(
        len(p.read_text().splitlines()) for p in (tmp_path / "out" / "labels" / "val").glob("*.txt")
    )
    assert written == len(ids) - len(broken)
