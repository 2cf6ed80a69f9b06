"""DOTA Task-1 scoring as one call: read (or predict) Task-1 detections, merge tiles, score, write the report.

:func:`score_dota` is what ``lucid-eval --dota-labels`` runs. The pieces live in :mod:`~lucid_train.eval.dota_io`
(files), :mod:`~lucid_train.eval.dota_metric` (the devkit's AP) and :mod:`~lucid_train.eval.dota_scenes` (tile
prediction and merging); their public names are re-exported here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lucid_core.checkpoint import CheckpointError, load
from lucid_core.inference import list_image_files
from lucid_core.tasks import get_task
from lucid_data.dota_tiles import MERGE_NMS_IOU
from lucid_train.eval.dota_io import (
    TASK1_PREFIX,
    DotaFormatError,
    DotaImageLabels,
    Task1Detections,
    read_label_dir,
    read_task1_dir,
    read_task1_file,
    write_task1_dir,
)
from lucid_train.eval.dota_metric import (
    DOTA_IOU_THRESHOLD,
    DotaClassResult,
    DotaResult,
    evaluate_dota,
    format_dota_table,
    voc_ap,
)
from lucid_train.eval.dota_scenes import merge_task1_tiles, predict_task1, split_scene_files
from lucid_train.eval.report import finite_json, sha256_file, versions, write_report

__all__ = [
    "DOTA_IOU_THRESHOLD",
    "TASK1_PREFIX",
    "DotaClassResult",
    "DotaFormatError",
    "DotaImageLabels",
    "DotaResult",
    "DotaScoring",
    "Task1Detections",
    "evaluate_dota",
    "evaluate_dota_dirs",
    "format_dota_table",
    "merge_task1_tiles",
    "predict_task1",
    "read_label_dir",
    "read_task1_dir",
    "read_task1_file",
    "score_dota",
    "voc_ap",
    "write_task1_dir",
]

REPORT_FORMAT = "lucid-eval-dota-report/1"


@dataclass(frozen=True)
class DotaScoring:
    """What :func:`score_dota` computed: the scores and the report dict written to ``output``."""

    result: DotaResult
    report: dict[str, Any]


def evaluate_dota_dirs(
    label_dir: str | os.PathLike[str],
    det_dir: str | os.PathLike[str],
    *,
    iou_threshold: float = DOTA_IOU_THRESHOLD,
) -> DotaResult:
    """`evaluate_dota` of a labelTxt folder and a folder of ``Task1_<class>.txt`` files."""
    return evaluate_dota(read_label_dir(label_dir), read_task1_dir(det_dir), iou_threshold=iou_threshold)


def score_dota(
    labels: str | os.PathLike[str],
    *,
    output: str | os.PathLike[str],
    detections: str | os.PathLike[str] | None = None,
    weights: str | os.PathLike[str] | None = None,
    data: str | os.PathLike[str] | None = None,
    merge_tiles: bool = False,
    split_scenes: bool = False,
    tile_size: int = 1024,
    gap: int = 200,
    rates: Sequence[float] = (1.0,),
    merged_dets: str | os.PathLike[str] | None = None,
    imgsz: int | None = None,
    conf: float = 0.001,
    iou: float = 0.7,
    max_det: int = 300,
    device: str = "cpu",
) -> DotaScoring:
    """DOTA Task-1 scores of one detection source against the labelTxt folder ``labels``; the report goes to
    ``output`` (atomically).

    The source is exactly one of ``detections`` (a folder of ``Task1_<class>.txt`` files) or ``weights`` (an obb
    checkpoint) with ``data`` (a folder of images, predicted here at ``imgsz`` — default the checkpoint's — with
    ``conf``/``iou``/``max_det``/``device``). ``merge_tiles``: the detections are on devkit tiles, merged back to
    scenes before scoring; ``split_scenes``: ``data`` holds whole scenes, split here into tiles (``tile_size``,
    ``gap``, ``rates``) and merged after prediction. ``merged_dets``: also write the scored Task-1 files there.
    Unusable inputs raise :class:`DotaFormatError` (the message names the ``lucid-eval`` flag).
    """
    if bool(detections) == bool(weights):
        raise DotaFormatError(
            "DOTA scoring needs exactly one detection source: --dota-dets DIR (Task1_<class>.txt files) or "
            "--weights W with --data IMAGE_DIR (predicted here)"
        )
    ground_truth = read_label_dir(labels)
    if split_scenes and not weights:
        raise DotaFormatError("--split-scenes splits the --data scenes for prediction: it needs --weights")
    run_info: dict[str, Any] = {"labels": str(labels), "merge_tiles": bool(merge_tiles) or split_scenes}
    if detections:
        found = read_task1_dir(detections)
        run_info["detections"] = str(detections)
    else:
        assert weights is not None
        found = _predict_for_dota(
            weights,
            data,
            run_info,
            split=(tile_size, gap, rates) if split_scenes else None,
            imgsz=imgsz,
            conf=conf,
            iou=iou,
            max_det=max_det,
            device=device,
        )
    if merge_tiles or split_scenes:
        found = merge_task1_tiles(found)
        run_info["merge_nms_iou"] = MERGE_NMS_IOU
    if merged_dets:
        write_task1_dir(merged_dets, found)
        run_info["merged_dets"] = str(merged_dets)
    result = evaluate_dota(ground_truth, found)
    report: dict[str, Any] = {"format": REPORT_FORMAT, **run_info, "versions": versions()}
    report.update(result.to_dict())
    report = finite_json(report)
    write_report(output, report)
    return DotaScoring(result=result, report=report)


def _predict_for_dota(
    weights: str | os.PathLike[str],
    data: str | os.PathLike[str] | None,
    run_info: dict[str, Any],
    *,
    split: tuple[int, int, Sequence[float]] | None,
    imgsz: int | None,
    conf: float,
    iou: float,
    max_det: int,
    device: str,
) -> dict[str, Task1Detections]:
    """Task-1 detections of an obb checkpoint on the images (or, with ``split``, the scenes' tiles) of ``data``;
    records the settings in ``run_info``."""
    if not data or not Path(data).is_dir():
        raise DotaFormatError(f"--data {data}: with --weights, DOTA scoring needs a folder of images (tiles)")
    try:
        checkpoint = load(weights, device=device)
    except (CheckpointError, FileNotFoundError) as exc:
        raise DotaFormatError(f"--weights: {exc}") from exc
    model = checkpoint.model
    if "rboxes" not in get_task(model.task).target_fields:
        raise DotaFormatError(f"--weights {weights}: a {model.task!r} model, DOTA scoring needs an obb model")
    files = list_image_files(data)
    if not files:
        raise DotaFormatError(f"--data {data}: no image files")
    size = int(imgsz or checkpoint.imgsz)
    assert checkpoint.weights_path is not None
    images: Iterable[tuple[str, Any]] = ((p.stem, p) for p in files)
    if split is not None:
        tile_size, gap, rates = split
        images = split_scene_files(files, tile_size, gap, rates)
        run_info.update(split={"tile_size": tile_size, "gap": gap, "rates": list(rates)})
    run_info.update(
        weights=str(weights),
        weights_sha256=sha256_file(checkpoint.weights_path),
        data=str(data),
        imgsz=size,
        conf=conf,
        iou=iou,
        max_det=max_det,
    )
    return predict_task1(
        model,
        images,
        names=list(checkpoint.names),
        imgsz=size,
        conf=conf,
        iou=iou,
        max_det=max_det,
        device=device,
    )
