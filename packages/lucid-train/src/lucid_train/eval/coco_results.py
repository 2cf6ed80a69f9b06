"""Results files of an evaluation, to score elsewhere: COCO results JSON per IoU type, DOTA Task-1 for rotated.

``<iou_type>_results.json`` (``bbox``, ``segm``, ``keypoints``) is the list ``COCOEvaluator.results`` scores,
exactly: ``image_id`` / ``category_id`` are the ground truth's (a COCO JSON's own ids; for other layouts the ids
the evaluation built, 0..N-1 in reading order), floats are written with their shortest exact repr, RLE ``counts``
as text. So pycocotools' ``loadRes`` + ``COCOeval`` on it against the same ground truth gives the reported
statistics. Rotated boxes go to ``Task1_<class>.txt`` files (``image score x1 y1 ... x4 y4``, the image's file
stem), the DOTA Task-1 submission format, with every number in its shortest exact repr too (the devkit's parser
reads any float), so the DOTA scorer on the files gives what it gives on the detections in memory. ``ground_truth.json`` is the COCO dict scored against (a COCO
layout's own annotations; for YOLO / DOTA layouts the one the evaluation built), so no layout needs converting.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from lucid_core.atomic import atomic_write_text
from lucid_train.eval.dota_io import TASK1_PREFIX, Task1Detections
from lucid_train.eval.evaluator import COCOEvaluator

GROUND_TRUTH_FILE = "ground_truth.json"


def _jsonable(entry: dict[str, Any]) -> dict[str, Any]:
    seg = entry.get("segmentation")
    if isinstance(seg, dict) and isinstance(seg.get("counts"), bytes):
        entry = {**entry, "segmentation": {**seg, "counts": seg["counts"].decode("ascii")}}
    return entry


def write_results(evaluator: COCOEvaluator, directory: str | os.PathLike[str]) -> dict[str, Path]:
    """Write the results files of every IoU type of ``evaluator`` and ``ground_truth.json`` (the COCO dict they
    were scored against) into ``directory``; returns ``{type: path}`` (``rotated`` → the folder of Task-1
    files, which is ``directory`` itself; ``ground_truth`` → its file)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {"ground_truth": out / GROUND_TRUTH_FILE}
    dataset = evaluator.gt.copy_dataset()
    dataset["annotations"] = [_jsonable(a) for a in dataset["annotations"]]
    atomic_write_text(written["ground_truth"], json.dumps(dataset, allow_nan=False) + "\n")
    for iou_type in evaluator.iou_types:
        if iou_type == "rotated":
            write_task1(evaluator, out)
            written[iou_type] = out
            continue
        path = out / f"{iou_type}_results.json"
        entries = [_jsonable(e) for e in evaluator.results(iou_type)]
        atomic_write_text(path, json.dumps(entries, allow_nan=False) + "\n")
        written[iou_type] = path
    return written


def write_task1(evaluator: COCOEvaluator, directory: str | os.PathLike[str]) -> list[Path]:
    """One ``Task1_<class>.txt`` per class (every class, empty when it has no detection) of
    :func:`task1_detections`, numbers exact (module docstring); written atomically."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, dets in sorted(task1_detections(evaluator).items()):
        corners = dets.polygons.reshape(-1, 8).tolist()
        lines = [
            f"{image} {score!r} " + " ".join(repr(v) for v in poly) + "\n"
            for image, score, poly in zip(dets.images, dets.scores.tolist(), corners)
        ]
        path = out / f"{TASK1_PREFIX}{name}.txt"
        atomic_write_text(path, "".join(lines))
        paths.append(path)
    return paths


def task1_detections(evaluator: COCOEvaluator) -> dict[str, Task1Detections]:
    """The rotated detections ``evaluator`` scored, per class name, as DOTA Task-1 detections (image = the file
    stem, corners in original pixels): what :func:`write_task1` writes, for the DOTA scorer in memory."""
    images = evaluator.gt.images
    names = list(evaluator.gt.names)
    index = {int(c): i for i, c in enumerate(evaluator.gt.category_ids)}
    rows: dict[int, tuple[list[str], list[float], list[np.ndarray]]] = {
        i: ([], [], []) for i in index.values()
    }
    for image_id, entry in sorted(evaluator.image_entries().items()):
        stem = Path(str(images[image_id].get("file_name", image_id))).stem
        polygons = entry.polygons if entry.polygons is not None else np.zeros((0, 4, 2))
        for cat, score, poly in zip(entry.category_ids.tolist(), entry.scores.tolist(), polygons):
            bucket = rows[index[int(cat)]]
            bucket[0].append(stem)
            bucket[1].append(score)
            bucket[2].append(poly)
    return {
        names[i]: Task1Detections(
            imgs, np.asarray(scores, dtype=np.float64), np.asarray(polys, dtype=np.float64).reshape(-1, 4, 2)
        )
        for i, (imgs, scores, polys) in rows.items()
    }
