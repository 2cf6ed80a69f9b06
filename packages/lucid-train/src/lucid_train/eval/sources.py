"""COCO ground truth of a `lucid_data.DatasetSource` (any layout), see `CocoGroundTruth.from_source`.

A COCO-layout source that names its annotation file (attribute ``annotation_file``) is read verbatim with
`CocoGroundTruth.from_coco_json`, which keeps COCO's own ``area`` values and multi-part polygons. Every other
source (YOLO txt, DOTA, a COCO source without the file) is converted from its `ImageRecord`s with the rules of
`lucid_train.eval.coco_gt` (boxes unrounded, area of the rasterised segmentation else of the box, iscrowd kept;
raw COCO RLEs carried by ``ImageRecord.rles`` are used as the instance segmentation).

Image ids: an integer ``image_id`` is kept; string ids (YOLO/DOTA file stems) are numbered 1..N in record
order, and both the stem and the number are accepted by `COCOEvaluator.update`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from lucid_train.eval.coco_gt import CocoGroundTruth, GroundTruthError, GtImage


class _RecordTargets:
    """`Targets` view of one record with the raw COCO RLEs replacing polygons where present."""

    def __init__(self, targets: Any, rles: list[dict[str, Any] | None] | None) -> None:
        self.boxes = targets.boxes
        self.labels = targets.labels
        self.iscrowd = getattr(targets, "iscrowd", None)
        self.keypoints = getattr(targets, "keypoints", None)
        self.masks = getattr(targets, "masks", None)
        self.polygons = getattr(targets, "polygons", None)
        self.rles = rles


def ground_truth_from_source(source: Any) -> CocoGroundTruth:
    """Build the COCO ground truth of a `DatasetSource` (see the module docstring)."""
    names_map = source.names
    names = [names_map[i] for i in range(len(names_map))] if isinstance(names_map, dict) else list(names_map)
    category_ids = list(getattr(source, "category_ids", None) or range(len(names)))
    kpt_sigmas = getattr(source, "kpt_sigmas", None)
    root = Path(getattr(source, "root", "."))
    annotation_file = getattr(source, "annotation_file", None)
    if annotation_file is not None:
        return CocoGroundTruth.from_coco_json(
            annotation_file, image_root=root, category_ids=category_ids, kpt_sigmas=kpt_sigmas
        )
    records = list(source.records)
    int_ids = all(isinstance(r.image_id, (int, np.integer)) for r in records)
    images: list[GtImage] = []
    keys: list[Any] = []
    for index, record in enumerate(records):
        image_id = int(record.image_id) if int_ids else index + 1
        h, w = (int(v) for v in record.size_hw)
        path = Path(record.path)
        try:
            file_name = str(path.relative_to(root))
        except ValueError:
            file_name = str(path)
        rles: list[dict[str, Any] | None] | None = getattr(record, "rles", None)
        targets = record.targets
        if rles and any(r is not None for r in rles):
            targets = _with_rle_segmentation(record.targets, rles, h, w)
        images.append(GtImage(image_id=image_id, file_name=file_name, height=h, width=w, targets=targets))
        keys.append(record.image_id)
    if not images:
        raise GroundTruthError(f"dataset source {root} (split {getattr(source, 'split', '?')}) has no images")
    return CocoGroundTruth.from_targets(
        images, names, category_ids=category_ids, kpt_sigmas=kpt_sigmas, image_root=root, keys=keys
    )


def _with_rle_segmentation(targets: Any, rles: list[dict[str, Any] | None], h: int, w: int) -> Any:
    """Targets whose masks come from the record's raw COCO RLEs (polygons rasterised for the others)."""
    from faster_coco_eval.core import mask as mask_api

    n = len(targets.labels)
    masks = np.zeros((n, h, w), dtype=bool)
    polygons = getattr(targets, "polygons", None)
    for i in range(n):
        rle = rles[i] if i < len(rles) else None
        if rle is not None:
            if isinstance(rle.get("counts"), list):
                rle = mask_api.frPyObjects(rle, h, w)
            masks[i] = mask_api.decode(rle).astype(bool)
        elif polygons is not None and polygons[i] is not None and len(polygons[i]) >= 3:
            flat = np.asarray(polygons[i], dtype=np.float64).reshape(-1).tolist()
            masks[i] = mask_api.decode(mask_api.merge(mask_api.frPyObjects([flat], h, w))).astype(bool)
    view = _RecordTargets(targets, rles)
    view.polygons = None
    view.masks = masks
    return view


def ground_truth_for_path(
    path: str | Path, split: str, source: Any, task: str | None = None
) -> CocoGroundTruth:
    """Ground truth of a dataset given by path: a COCO layout is read verbatim from its annotation JSON (COCO's
    own areas and multi-part polygons), any other layout is built from `source` (the split already read)."""
    from lucid_data.readers.coco import find_coco_json
    from lucid_data.readers.probe import detect_layout

    layout, target = detect_layout(path, split)
    if layout != "coco":
        return ground_truth_from_source(source)
    json_path = target if Path(target).is_file() else find_coco_json(Path(target), split, task)  # type: ignore[arg-type]
    return CocoGroundTruth.from_coco_json(
        json_path,
        image_root=getattr(source, "root", None),
        category_ids=list(source.category_ids),
        kpt_sigmas=getattr(source, "kpt_sigmas", None),
    )
