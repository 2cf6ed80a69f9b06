"""The data pipeline reads the task's target fields, never its name: a registered toy task without target fields
synthesises, reads, converts and samples exactly like detect; and the DOTA modules import in one direction."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

from lucid_core.tasks import Task, register_task, unregister_task
from lucid_data import DetectionDataset, load_dataset
from lucid_data.convert import write_coco, write_yolo, yolo_lines
from lucid_data.readers.coco import read_coco
from lucid_data.synth import synthesize
from lucid_data.targets import Targets

PACKAGES = Path(__file__).resolve().parents[2] / "packages"
TOY = "toy_boxes"


@pytest.fixture
def toy_task() -> Iterator[str]:
    """A fifth task with no target fields, registered for the test only."""
    register_task(Task(name=TOY, suffix="-toy"))
    try:
        yield TOY
    finally:
        unregister_task(TOY)


def files_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def assert_same_targets(a: Targets, b: Targets) -> None:
    np.testing.assert_array_equal(a.boxes, b.boxes)
    np.testing.assert_array_equal(a.labels, b.labels)
    for name in ("polygons", "masks", "keypoints", "rboxes"):
        assert getattr(a, name) is None and getattr(b, name) is None, name


def test_toy_task_synthesises_like_detect(tmp_path: Path, toy_task: str) -> None:
    kwargs = {"n_train": 4, "n_val": 2, "imgsz": 64, "seed": 3}
    detect_yaml = synthesize("detect", tmp_path / "detect", **kwargs)
    toy_yaml = synthesize(toy_task, tmp_path / "toy", **kwargs)
    detect_files, toy_files = files_of(detect_yaml.parent), files_of(toy_yaml.parent)
    assert detect_files.keys() == toy_files.keys()
    assert {k for k in detect_files if detect_files[k] != toy_files[k]} == {"data.yaml"}
    detect_data, toy_data = yaml.safe_load(detect_yaml.read_text()), yaml.safe_load(toy_yaml.read_text())
    assert toy_data.pop("task") == toy_task and detect_data.pop("task") == "detect"
    assert toy_data == detect_data


@pytest.mark.parametrize("labels_of", ["detect", "segment", "obb"])
def test_toy_task_reads_yolo_labels_like_detect(tmp_path: Path, toy_task: str, labels_of: str) -> None:
    yaml_path = synthesize(labels_of, tmp_path / labels_of, n_train=4, n_val=0, imgsz=64, seed=1)
    as_detect = load_dataset(yaml_path, "train", "detect")
    as_toy = load_dataset(yaml_path, "train", toy_task)
    assert as_toy.task == toy_task and as_toy.kpt_shape is None
    for a, b in zip(as_detect.records, as_toy.records, strict=True):
        assert_same_targets(a.targets, b.targets)


def test_toy_task_refuses_a_bad_line_like_detect(tmp_path: Path, toy_task: str) -> None:
    yaml_path = synthesize("detect", tmp_path / "d", n_train=1, n_val=0, imgsz=64, seed=0)
    label = next((yaml_path.parent / "labels" / "train").glob("*.txt"))
    label.write_text("0 0.5 0.5 0.2\n")
    problems = {
        task: load_dataset(yaml_path, "train", task, strict=False).problems for task in ("detect", toy_task)
    }
    assert problems["detect"] == problems[toy_task]
    assert "expected 5 numbers (cls cx cy w h), got 4 numbers" in problems[toy_task][0]


def test_toy_task_converts_and_reads_coco_like_detect(tmp_path: Path, toy_task: str) -> None:
    yaml_path = synthesize("segment", tmp_path / "seg", n_train=3, n_val=0, imgsz=64, seed=2)
    written: dict[str, tuple[str, str]] = {}
    for task in ("detect", toy_task):
        source = load_dataset(yaml_path, "train", task)
        lines = [yolo_lines(r, task, decimals=6) for r in source.records]
        assert all(len(line.split()) == 5 for image in lines for line in image)
        coco_json = write_coco(source, tmp_path / f"coco-{task}")
        yolo_yaml = write_yolo(source, tmp_path / f"yolo-{task}", decimals=6)
        written[task] = (coco_json.read_text(), json.dumps(lines))
        assert coco_json.name == "instances_train.json"
        assert "kpt_shape" not in yaml.safe_load(yolo_yaml.read_text())
        labels = yolo_yaml.parent / "labels" / "train"
        assert [p.read_text() for p in sorted(labels.glob("*.txt"))] == ["\n".join(i) + "\n" for i in lines]
    detect_json, toy_json = json.loads(written["detect"][0]), json.loads(written[toy_task][0])
    assert detect_json["annotations"] == toy_json["annotations"]
    assert all("segmentation" not in a for a in toy_json["annotations"])
    assert written["detect"][1] == written[toy_task][1]
    coco_json = tmp_path / "coco-detect" / "annotations" / "instances_train.json"
    for a, b in zip(
        read_coco(coco_json, task="detect").records, read_coco(coco_json, task=toy_task).records, strict=True
    ):
        assert_same_targets(a.targets, b.targets)


def test_toy_task_samples_like_detect(tmp_path: Path, toy_task: str) -> None:
    yaml_path = synthesize("segment", tmp_path / "seg", n_train=3, n_val=0, imgsz=64, seed=4)
    for augment in (False, True):
        detect = DetectionDataset(yaml_path, imgsz=64, task="detect", augment=augment, verify="none")
        toy = DetectionDataset(yaml_path, imgsz=64, task=toy_task, augment=augment, verify="none")
        assert toy.target_fields == ()
        for i in range(len(detect)):
            a, b = detect[i], toy[i]
            assert a.keys() == b.keys() and "masks" not in b
            assert bool((a["image"] == b["image"]).all())
            assert_same_targets(a["targets"], b["targets"])


def test_an_unknown_task_is_refused_with_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match=re.escape("task must be one of ('detect', 'segment', 'pose', 'obb', 'classify')")
    ):
        synthesize("depth", tmp_path / "x", n_train=1, n_val=0, imgsz=64)


def test_no_task_name_dispatch_in_the_data_pipeline() -> None:
    pattern = re.compile(r"task ?(==|!=|in) ?[\"'(]")
    hits = [
        f"{path.relative_to(PACKAGES)}:{n}"
        for path in sorted((PACKAGES / "lucid-data" / "src").rglob("*.py"))
        if path.name != "cli.py"  # the command line's argument choices
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if pattern.search(line)
    ]
    assert hits == []


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports (module level or inside functions)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_dota_tiling_and_the_dota_reader_import_one_way() -> None:
    src = PACKAGES / "lucid-data" / "src" / "lucid_data"
    assert "lucid_data.dota_tiles" in imported_modules(src / "readers" / "dota.py")
    assert not any(m.startswith("lucid_data.readers") for m in imported_modules(src / "dota_tiles.py"))
