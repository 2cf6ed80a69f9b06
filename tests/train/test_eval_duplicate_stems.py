"""Evaluation of a YOLO split holding the same file stem in sibling folders scores both images (issue 14)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image

from lucid_core.results import Detections
from lucid_data import load_dataset
from lucid_train.eval import COCOEvaluator, CocoGroundTruth


def test_two_images_with_the_same_stem_in_sibling_folders_are_both_scored(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    lines = {"a": "0 0.5 0.5 0.5 0.5\n", "b": "0 0.25 0.25 0.25 0.25\n"}
    for sub, line in lines.items():
        (root / "images" / "val" / sub).mkdir(parents=True)
        (root / "labels" / "val" / sub).mkdir(parents=True)
        Image.fromarray(np.zeros((64, 64, 3), np.uint8)).save(root / "images" / "val" / sub / "0001.png")
        (root / "labels" / "val" / sub / "0001.txt").write_text(line)
    (root / "data.yaml").write_text("path: .\ntrain: images/val\nval: images/val\nnames: {0: x}\n")
    source = load_dataset(root / "data.yaml", split="val")
    gt = CocoGroundTruth.from_source(source)
    assert len(gt.image_ids) == 2
    evaluator = COCOEvaluator(gt, ("bbox",))
    for record in source.records:  # a perfect detection per image, keyed by the reader's image id
        boxes = torch.as_tensor(record.targets.boxes, dtype=torch.float32)
        evaluator.update(
            record.image_id,
            Detections(
                boxes=boxes, scores=torch.ones(len(boxes)), labels=torch.zeros(len(boxes), dtype=torch.long)
            ),
        )
    result = evaluator.compute()
    assert result.num_images == 2
    assert result.primary.map50_95 > 0.99  # with one image unscored, its box would be a miss: mAP 0.5
