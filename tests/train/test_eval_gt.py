"""COCO ground truth built on the fly (rules of `lucid_train.eval.coco_gt`) and read from COCO JSON."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from lucid_core.results import Detections
from lucid_data import Targets
from lucid_train.eval import COCOEvaluator, CocoGroundTruth, GroundTruthError, GtImage
from lucid_train.eval.coco_gt import KEYPOINT_BOX_AREA_FRACTION
from lucid_train.eval.sources import ground_truth_for_path

faster_mask = pytest.importorskip("faster_coco_eval.core.mask")


def _targets() -> Targets:
    return Targets(
        boxes=np.array([[10.3, 20.7, 50.1, 60.9], [5.0, 5.0, 15.0, 25.0], [0, 0, 30, 30]], np.float32),
        labels=np.array([1, 0, 1]),
        polygons=[
            np.array([[10.3, 20.7], [50.1, 20.7], [50.1, 60.9], [10.3, 60.9]], np.float32),
            np.zeros((0, 2), np.float32),  # no outline: box area is used
            np.array([[0, 0], [30, 0], [0, 30]], np.float32),
        ],
        keypoints=np.array(
            [[[12, 22, 2], [0, 0, 0]], [[6, 6, 1], [7, 7, 2]], [[0, 0, 0], [0, 0, 0]]], np.float32
        ),
        iscrowd=np.array([False, False, True]),
        image_id="img_a",
        orig_size=(80, 100),
    )


def test_from_targets_keeps_boxes_unrounded_crowds_and_maps_categories() -> None:
    t = _targets()
    gt = CocoGroundTruth.from_targets(
        [GtImage(image_id=7, file_name="a.jpg", height=80, width=100, targets=t)],
        ["cat", "dog"],
        category_ids=[17, 18],
        keys=["img_a"],
    )
    anns = gt.dataset["annotations"]
    assert [a["category_id"] for a in anns] == [18, 17, 18]
    boxes64 = t.boxes.astype(np.float64)
    assert anns[0]["bbox"] == [
        boxes64[0, 0],
        boxes64[0, 1],
        boxes64[0, 2] - boxes64[0, 0],
        boxes64[0, 3] - boxes64[0, 1],
    ]
    assert [a["iscrowd"] for a in anns] == [0, 0, 1]
    # area: rasterised outline when there is one (COCO mask API, as loadRes does), else the box area; keypoints
    # without an outline take 0.53 of it (the reference validator's OKS scale)
    rle = faster_mask.merge(faster_mask.frPyObjects(anns[0]["segmentation"], 80, 100))
    assert anns[0]["area"] == float(faster_mask.area(rle))
    assert "segmentation" not in anns[1] and anns[1]["area"] == KEYPOINT_BOX_AREA_FRACTION * 10.0 * 20.0
    no_keypoints = CocoGroundTruth.from_targets(
        [GtImage(1, "a.jpg", 80, 100, replace(t, keypoints=None))], ["cat", "dog"]
    ).dataset["annotations"]
    assert no_keypoints[1]["area"] == 10.0 * 20.0
    assert [a["num_keypoints"] for a in anns] == [1, 2, 0]
    assert anns[1]["keypoints"] == [6.0, 6.0, 1.0, 7.0, 7.0, 2.0]
    assert gt.resolve_image_id("img_a") == 7 == gt.resolve_image_id(7)
    with pytest.raises(KeyError, match="img_b"):
        gt.resolve_image_id("img_b")


def test_label_outside_classes_is_an_error_naming_the_image() -> None:
    t = Targets(boxes=np.array([[0, 0, 1, 1]], np.float32), labels=np.array([5]))
    with pytest.raises(GroundTruthError, match=r"image 3 \(x.jpg\): class 5 outside 0..1"):
        CocoGroundTruth.from_targets([GtImage(3, "x.jpg", 10, 10, t)], ["a", "b"])


def test_coco_json_that_does_not_parse_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "ann.json"
    bad.write_text('{"images": [')
    with pytest.raises(GroundTruthError, match=r"ann.json does not parse as JSON"):
        CocoGroundTruth.from_coco_json(bad)
    bad.write_text(
        json.dumps(
            {
                "images": [{"id": 1, "height": 2, "width": 2}],
                "annotations": [{"id": 1, "image_id": 1, "category_id": 9, "bbox": [0, 0, 1, 1], "area": 1}],
                "categories": [{"id": 1}],
            }
        )
    )
    with pytest.raises(GroundTruthError, match=r"category_id 9 not in 'categories'"):
        CocoGroundTruth.from_coco_json(bad)


@pytest.mark.shared
def test_yolo_source_ground_truth_is_label_times_original_size(shared_dir: Path) -> None:
    from lucid_data.readers import load_dataset

    root = shared_dir / "data" / "coco8"
    source = load_dataset(root / "coco8.yaml", "val")
    gt = CocoGroundTruth.from_source(source)
    labels = sorted((root / "labels" / "val").glob("*.txt"))
    rows = [(p.stem, line.split()) for p in labels for line in p.read_text().splitlines() if line.strip()]
    assert len(gt.dataset["annotations"]) == len(rows)
    assert len(gt.dataset["images"]) == len(list((root / "images" / "val").iterdir()))
    for stem, fields in rows[:5]:
        image = gt.images[gt.resolve_image_id(stem)]
        h, w = image["height"], image["width"]
        cls, cx, cy, bw, bh = int(fields[0]), *(float(v) for v in fields[1:5])
        anns = [
            a for a in gt.dataset["annotations"] if a["image_id"] == image["id"] and a["category_id"] == cls
        ]
        expected = [(cx - bw / 2) * w, (cy - bh / 2) * h, bw * w, bh * h]
        assert any(np.allclose(a["bbox"], expected, rtol=1e-5, atol=1e-3) for a in anns)


@pytest.mark.shared
def test_coco_layout_ground_truth_is_the_json_verbatim(shared_dir: Path) -> None:
    from lucid_data.readers import load_dataset

    path = shared_dir / "data" / "coco-mmpose" / "test_coco.json"
    source = load_dataset(path, "val", "pose")
    gt = ground_truth_for_path(path, "val", source, "pose")
    raw = json.loads(path.read_text())
    assert gt.dataset["annotations"] == raw["annotations"]
    assert list(gt.category_ids) == list(source.category_ids)
    # record image ids are the COCO ids, so the evaluator accepts them directly
    evaluator = COCOEvaluator(gt, ("bbox",))
    for record in source.records:
        evaluator.update(record.image_id, Detections.empty())
    assert evaluator.compute().per_type["bbox"].stats[0] == 0.0


def test_evaluator_rejects_bad_detections() -> None:
    t = Targets(boxes=np.array([[0, 0, 10, 10]], np.float32), labels=np.array([0]))
    gt = CocoGroundTruth.from_targets([GtImage(1, "a.jpg", 20, 20, t)], ["a"])
    evaluator = COCOEvaluator(gt, ("bbox",))
    with pytest.raises(ValueError, match="label 3 outside the 1 classes"):
        evaluator.update(1, Detections(torch.zeros(1, 4), torch.ones(1), torch.tensor([3])))
    with pytest.raises(RuntimeError, match="before any update"):
        evaluator.compute()
    with pytest.raises(ValueError, match="no segmentation"):
        COCOEvaluator(gt, ("segm",))
    with pytest.raises(ValueError, match="backend must be one of"):
        COCOEvaluator(gt, ("bbox",), backend="nope")
