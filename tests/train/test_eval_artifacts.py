"""Validation artefacts on a hand-built set: the confusion matrix, PR points, the best-F1 threshold, the table."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest
import torch

from lucid_core.results import Detections
from lucid_data.targets import Targets
from lucid_train.eval.artifacts import build_artifacts, write_artifacts
from lucid_train.eval.coco_gt import CocoGroundTruth, GtImage
from lucid_train.eval.confusion import greedy_pairs
from lucid_train.eval.evaluator import COCOEvaluator

# class a = 0, class b = 1; boxes xyxy in a 100 x 100 image
GROUND_TRUTH = {
    1: ([[0, 0, 10, 10], [20, 20, 30, 30], [50, 50, 60, 60]], [0, 1, 0], [False, False, False]),
    2: ([[0, 0, 10, 10], [50, 50, 90, 90]], [1, 1], [False, True]),  # the second one is a crowd
    3: ([[0, 0, 20, 20]], [0], [False]),
}
DETECTIONS = {
    1: (
        [[0, 0, 10, 10], [20, 20, 30, 30], [80, 80, 90, 90], [70, 70, 80, 80]],
        [0.9, 0.8, 0.3, 0.1],
        [0, 0, 1, 0],
    ),
    2: ([[0, 0, 10, 10], [50, 50, 90, 90]], [0.6, 0.5], [1, 1]),
    3: ([], [], []),
}


def _evaluator() -> COCOEvaluator:
    images = [
        GtImage(i, f"{i}.jpg", 100, 100, Targets(np.array(b, np.float32).reshape(-1, 4), np.array(c),
                                                 iscrowd=np.array(k)))
        for i, (b, c, k) in GROUND_TRUTH.items()
    ]  # fmt: skip
    gt = CocoGroundTruth.from_targets(images, ["a", "b"])
    evaluator = COCOEvaluator(gt, ("bbox",))
    for image_id, (boxes, scores, labels) in DETECTIONS.items():
        det = Detections(
            boxes=torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4),
            scores=torch.tensor(scores, dtype=torch.float32),
            labels=torch.tensor(labels, dtype=torch.int64),
        )
        evaluator.update(image_id, det)
    return evaluator


def test_known_confusion_matrix_pr_points_and_best_f1_threshold(tmp_path: Path) -> None:
    evaluator = _evaluator()
    result = evaluator.compute()
    art = build_artifacts(evaluator, result)
    cm = art.confusion["bbox"]
    assert (cm.conf, cm.iou) == (0.25, 0.45)
    # rows: true a, b, background; columns: predicted a, b, background.
    # a: one found, two missed (one only seen below conf 0.25); b: one taken for an a, one found;
    # background: the b at score 0.3 on nothing. The detection on the crowd counts nowhere.
    assert cm.counts.tolist() == [[1, 0, 2], [1, 1, 0], [0, 1, 0]]
    normalized = cm.normalized()
    assert np.allclose(normalized[0], [1 / 3, 0, 2 / 3]) and np.allclose(normalized[2], [0, 1, 0])

    # COCO PR at IoU 0.5: a = TP 0.9, FP 0.8, FP 0.1 of 3 -> precision 1 up to recall 1/3 (34 of the 101
    # points); b = TP 0.6, (0.5 on the crowd: ignored), FP 0.3 of 2 -> precision 1 up to recall 1/2 (51 points)
    pr = art.pr["bbox"]
    assert pr.precision.shape == (2, 101)
    # (COCO's precision is tp / (tp + fp + eps): 1 - 2e-16 where exact arithmetic gives 1)
    assert np.allclose(pr.precision[0, :34], 1.0) and np.all(pr.precision[0, 34:] == 0.0)
    assert np.allclose(pr.precision[1, :51], 1.0) and np.all(pr.precision[1, 51:] == 0.0)
    assert np.allclose(pr.ap50, [34 / 101, 51 / 101])
    assert np.allclose(pr.ap50, result.primary.ap50_per_class)

    # F1 by threshold (mean over a, b): 0.9 -> (1/2 + 0)/2; 0.8 -> (0.4 + 0)/2; 0.6 -> (0.4 + 2/3)/2 = 8/15;
    # 0.3 -> (0.4 + 1/2)/2; 0.1 -> (1/3 + 1/2)/2. Best: 0.6 (the crowd-only detection at 0.5 is left out).
    curves = art.confidence["bbox"]
    assert curves.best_conf == pytest.approx(0.6)
    assert curves.best_f1 == pytest.approx(8 / 15)
    assert np.allclose(curves.precision_at_best, [0.5, 1.0])
    assert np.allclose(curves.recall_at_best, [1 / 3, 0.5])
    grid = curves.confidence
    at = int(np.searchsorted(grid, 0.85))  # between 0.8 and 0.9: only the 0.9 detection of a is kept
    assert curves.precision[0, at] == 1.0 and curves.recall[0, at] == pytest.approx(1 / 3)
    assert curves.precision[1, at] == 1.0 and curves.recall[1, at] == 0.0 and curves.f1[1, at] == 0.0

    # per-class table: images / instances of regular ground truth, P and R at the best threshold, COCO APs
    rows = list(csv.reader(io.StringIO(art.table.to_csv())))
    assert rows[0] == ["class", "images", "instances", "P", "R", "AP50", "AP50-95"]
    assert (
        rows[1][:3] == ["all", "3", "5"] and rows[2][:3] == ["a", "2", "3"] and rows[3][:3] == ["b", "2", "2"]
    )
    assert float(rows[2][3]) == pytest.approx(0.5) and float(rows[3][4]) == pytest.approx(0.5)
    assert float(rows[1][5]) == pytest.approx(result.map50, abs=1e-6)
    assert art.table.to_markdown().startswith("| class | images | instances |")
    assert art.labels.class_counts.tolist() == [3, 3]  # every annotation, the crowd included

    written = write_artifacts(art, tmp_path)
    assert (tmp_path / "per_class.csv").read_text() == art.table.to_csv()
    assert {"per_class_csv", "per_class_md"} <= set(written)


def test_greedy_pairs_take_the_highest_iou_first() -> None:
    iou = np.array([[0.6, 0.9], [0.7, 0.0]])
    assert greedy_pairs(iou, 0.45) == [(0, 1), (1, 0)]
    assert greedy_pairs(iou, 0.95) == []
