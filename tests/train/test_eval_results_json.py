"""``lucid-eval --save-json``: pycocotools scoring the written results files gives the reported mAP (1e-9)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from lucid_train.eval.cli import main

pytestmark = pytest.mark.shared

pycocotools_coco = pytest.importorskip("pycocotools.coco")
pycocotools_eval = pytest.importorskip("pycocotools.cocoeval")


def _pycocotools_scores(folder: Path, iou_type: str) -> tuple[float, float]:
    """(mAP50-95, mAP50) of ``<iou_type>_results.json`` against ``ground_truth.json``, by pycocotools."""
    with contextlib.redirect_stdout(io.StringIO()):
        gt = pycocotools_coco.COCO()
        gt.dataset = json.loads((folder / "ground_truth.json").read_text())
        gt.createIndex()
        dt = gt.loadRes(str(folder / f"{iou_type}_results.json"))
        evaluator = pycocotools_eval.COCOeval(gt, dt, iou_type)
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return float(evaluator.stats[0]), float(evaluator.stats[1])


def _run(weights: Path, data: Path, tmp_path: Path, *extra: str) -> tuple[dict[str, Any], Path]:
    out, results = tmp_path / "report.json", tmp_path / "results"
    args = ["--weights", str(weights), "--data", str(data), "--output", str(out), "--save-json", str(results)]
    assert main([*args, *extra]) == 0
    return json.loads(out.read_text()), results


def test_box_and_mask_results_score_to_the_reported_map(shared_dir: Path, tmp_path: Path) -> None:
    weights = shared_dir / "weights" / "yolo26n-seg-shapes.pt"
    report, results = _run(
        weights, shared_dir / "data" / "shapes-seg" / "data.yaml", tmp_path, "--imgsz", "96"
    )
    assert sorted(p.name for p in results.iterdir()) == [
        "bbox_results.json",
        "ground_truth.json",
        "segm_results.json",
    ]
    for iou_type in ("bbox", "segm"):
        map50_95, map50 = _pycocotools_scores(results, iou_type)
        assert map50_95 == pytest.approx(report["iou_types"][iou_type]["mAP50-95"], abs=1e-9)
        assert map50 == pytest.approx(report["iou_types"][iou_type]["mAP50"], abs=1e-9)
    segm = json.loads((results / "segm_results.json").read_text())
    assert isinstance(segm[0]["segmentation"]["counts"], str)  # compressed RLE as text


@pytest.mark.slow
def test_keypoint_results_score_to_the_reported_map(shared_dir: Path, tmp_path: Path) -> None:
    weights = shared_dir / "weights" / "yolo11n-pose.pt"
    annotations = shared_dir / "data" / "coco-mmpose" / "test_coco.json"
    report, results = _run(weights, annotations, tmp_path)
    ground_truth = json.loads((results / "ground_truth.json").read_text())
    assert ground_truth["annotations"] == json.loads(annotations.read_text())["annotations"]
    for iou_type in ("bbox", "keypoints"):
        map50_95, map50 = _pycocotools_scores(results, iou_type)
        assert map50_95 == pytest.approx(report["iou_types"][iou_type]["mAP50-95"], abs=1e-9)
        assert map50 == pytest.approx(report["iou_types"][iou_type]["mAP50"], abs=1e-9)
