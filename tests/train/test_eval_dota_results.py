"""``lucid-eval --save-json`` on oriented boxes: the Task-1 files, scored by our DOTA scorer (``--dota-dets``), give
exactly the DOTA figure of the detections the run scored.

The imported OBB checkpoint was trained on microscopy (one class, ``tau-fibrils``), so the labels are made from its
own top detections on the devkit scene (moved a little, two left out, one difficult for the DOTA scorer): the
scores are then far from 0 and every rule of the protocol (true and false positives, difficult objects) takes part.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lucid_core.geometry.rotated import rboxes_to_polygons
from lucid_core.inference import predict
from lucid_train.eval import coco_results, runner
from lucid_train.eval.cli import main
from lucid_train.eval.dota import evaluate_dota, read_label_dir, read_task1_dir

pytestmark = pytest.mark.shared

LABELLED = 12


def _obb_dataset(shared_dir: Path, weights: Path, root: Path) -> tuple[Path, Path, str]:
    """A YOLO-OBB dataset of the devkit scene (``root/data.yaml``, the checkpoint's class) and its DOTA labelTxt
    folder (``root/labelTxt``, with one object marked difficult), both made of the checkpoint's own top
    detections, moved by 1.5 px, two of them left out."""
    scene = shared_dir / "data" / "dota-devkit" / "images" / "P1888.png"
    for folder in ("images/val", "labels/val", "labelTxt"):
        (root / folder).mkdir(parents=True)
    shutil.copy(scene, root / "images" / "val" / scene.name)
    result = predict(str(weights), str(scene), conf=0.001)[0]
    det = result.detections
    assert det.rboxes is not None and det.scores.numel() >= LABELLED + 2
    name = result.names[0]
    rboxes = det.rboxes[: LABELLED + 2].double().clone()
    rboxes[:, :2] += 1.5  # a small shift: IoU stays above 0.5 for most, not all
    corners = rboxes_to_polygons(rboxes).numpy().reshape(-1, 8)
    kept = [i for i in range(corners.shape[0]) if i not in (1, 5)]  # two detected objects unlabelled: FPs
    height, width = result.orig_shape
    scale = np.tile([width, height], 4)
    yolo = ["0 " + " ".join(f"{v:.6f}" for v in corners[i] / scale) for i in kept]
    dota = [" ".join(f"{v:.1f}" for v in corners[i]) + f" {name} {int(i == 3)}" for i in kept]
    (root / "labels" / "val" / f"{scene.stem}.txt").write_text("\n".join(yolo) + "\n", encoding="utf-8")
    (root / "labelTxt" / f"{scene.stem}.txt").write_text("\n".join(dota) + "\n", encoding="utf-8")
    (root / "data.yaml").write_text(
        f"path: .\ntrain: images/val\nval: images/val\ntask: obb\nnames:\n  0: {name}\n", encoding="utf-8"
    )
    return root / "data.yaml", root / "labelTxt", name


def test_task1_files_of_save_json_score_to_the_dota_figure_of_the_run(
    shared_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = shared_dir / "weights" / "yolov8n-obb-taufibrils.pt"
    data, label_dir, name = _obb_dataset(shared_dir, weights, tmp_path / "obb")
    scored: list[Any] = []
    original = runner.write_results

    def keep(evaluator: Any, directory: Any) -> Any:  # the evaluator whose detections the run scored
        scored.append(evaluator)
        return original(evaluator, directory)

    monkeypatch.setattr(runner, "write_results", keep)
    results, report = tmp_path / "results", tmp_path / "report.json"
    args = [
        "--weights",
        str(weights),
        "--data",
        str(data),
        "--output",
        str(report),
        "--save-json",
        str(results),
    ]
    assert main(args) == 0
    assert (results / f"Task1_{name}.txt").is_file() and len(scored) == 1

    # the figure of the run: the DOTA scorer on the detections the run scored, in memory
    labels = read_label_dir(label_dir)
    in_memory = evaluate_dota(labels, coco_results.task1_detections(scored[0]))
    assert (
        in_memory.map is not None and 0.2 < in_memory.map < 1.0
    )  # true and false positives, a miss, a difficult object

    # the files, scored by our DOTA scorer: lucid-eval --dota-dets
    dota_report = tmp_path / "dota.json"
    command = ["--task", "obb", "--dota-dets", str(results), "--dota-labels", str(label_dir)]
    assert main([*command, "--output", str(dota_report)]) == 0
    from_files = json.loads(dota_report.read_text())
    assert from_files["mAP"] == in_memory.map and from_files["mAP07"] == in_memory.map07
    assert from_files["per_class"] == [c.to_dict() for c in in_memory.per_class]
    files = read_task1_dir(results)
    assert files[name].images == coco_results.task1_detections(scored[0])[name].images
    np.testing.assert_array_equal(files[name].scores, coco_results.task1_detections(scored[0])[name].scores)
