"""COCO ground truth of a dataset given by path: its annotation JSON verbatim for a COCO layout, else built from
the split already read (:func:`lucid_train.eval.coco_gt.ground_truth_from_source`, re-exported here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lucid_data.readers.coco import find_coco_json
from lucid_data.readers.probe import detect_layout
from lucid_train.eval.coco_gt import CocoGroundTruth, ground_truth_from_source

__all__ = ["ground_truth_for_path", "ground_truth_from_source"]


def ground_truth_for_path(
    path: str | Path, split: str, source: Any, task: str | None = None
) -> CocoGroundTruth:
    """Ground truth of a dataset given by path: a COCO layout is read verbatim from its annotation JSON (COCO's
    own areas and multi-part polygons), any other layout is built from `source` (the split already read)."""
    layout, target = detect_layout(path, split)
    if layout != "coco":
        return ground_truth_from_source(source)
    json_path = target if Path(target).is_file() else find_coco_json(Path(target), split, task)
    return CocoGroundTruth.from_coco_json(
        json_path,
        image_root=getattr(source, "root", None),
        category_ids=list(source.category_ids),
        kpt_sigmas=getattr(source, "kpt_sigmas", None),
    )
