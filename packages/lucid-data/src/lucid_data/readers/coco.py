"""COCO JSON datasets (COCO data format, "Object Instance Annotations" / "Keypoint Detection").

- Categories sorted by id map to contiguous labels 0..nc-1 (`DatasetSource.category_ids` maps back).
What is read follows the target fields the task declares (`lucid_core.tasks.get_task(task).target_fields`):
masks → polygons/RLE, keypoints → keypoints, rboxes → the corner polygon read as a rotated box; none → boxes only.

- `bbox` [x, y, w, h] → xyxy pixels clipped to the image; annotations whose clipped box is empty are skipped
  and listed in `problems` (they cannot be trained on and cannot be written as YOLO lines).
- masks (segment): polygon parts are joined into one outline (`merge_polygon_parts`), clipped to the image, and
  the box is the outline's hull (the same rule as YOLO segment labels, so a COCO dataset and its YOLO
  conversion give identical Targets). RLE segmentations (crowd regions) are kept raw in `ImageRecord.rles`
  (decode with `lucid_data.rle.decode`), their outline is the largest external contour of the decoded mask.
- keypoints [x1, y1, v1, ...] → (K, 3); `flip_idx` is derived from the keypoint names by swapping `left`/`right`.
- rboxes (obb; lucid-data's own convention, no COCO standard exists): the first segmentation polygon holds the
  4 corners of the oriented box (more points: their minimum-area rectangle), bbox = the corners' hull; a
  degenerate polygon (zero area: repeated or collinear corners, or non-finite values) is listed in `problems`
  and skipped, like an empty box.
- `iscrowd` is kept as a flag (training usually ignores crowd instances; YOLO conversion drops them).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from lucid_core.tasks import get_task
from lucid_data.readers.common import (
    LabelError,
    LabelProblem,
    corners_to_rbox,
    merge_polygon_parts,
    rbox_to_corners,
)
from lucid_data.records import DatasetSource, ImageRecord, Task
from lucid_data.rle import decode as decode_rle
from lucid_data.targets import Targets

__all__ = ["find_coco_json", "flip_idx_from_names", "image_dir_candidates", "read_coco"]


def flip_idx_from_names(names: list[str]) -> list[int]:
    """Keypoint permutation for a horizontal flip: `left_x` ↔ `right_x` (any case, `_`, `-` or ` ` joined)."""
    index = {n.lower(): i for i, n in enumerate(names)}
    out = []
    for i, name in enumerate(names):
        low = name.lower()
        if "left" in low:
            other = low.replace("left", "right")
        elif "right" in low:
            other = low.replace("right", "left")
        else:
            other = low
        out.append(index.get(other, i))
    return out


def find_coco_json(folder: Path, split: str, task: Task | None) -> Path:
    """The annotation JSON of `split` in `folder/annotations/` (or `folder`): a single JSON is taken as is;
    otherwise the one whose name contains the split, preferring `person_keypoints` for a task with keypoints."""
    ann_dir = folder / "annotations" if (folder / "annotations").is_dir() else folder
    files = sorted(ann_dir.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"{folder}: no COCO JSON (expected annotations/*.json)")
    if len(files) == 1:
        return files[0]
    matching = [f for f in files if split in f.stem]
    if not matching:
        raise FileNotFoundError(f"{ann_dir}: no JSON for split {split!r} among {[f.name for f in files]}")
    keypoints = task is not None and "keypoints" in get_task(task).target_fields
    prefer = "person_keypoints" if keypoints else "instances"
    matching.sort(key=lambda f: (prefer not in f.stem, len(f.name)))
    return matching[0]


def image_dir_candidates(json_path: Path) -> list[Path]:
    """Where images of `json_path` may be: next to it, `<root>/<stem split>`, `<root>/images/<stem split>`…"""
    base = json_path.parent
    root = base.parent if base.name == "annotations" else base
    split_name = re.sub(r"^(instances|person_keypoints|captions|panoptic)_", "", json_path.stem)
    return [base, root / split_name, root / "images" / split_name, root / "images", root]


def _resolve_image_dir(json_path: Path, file_names: list[str], image_dir: Path | None) -> Path:
    if image_dir is not None:
        return image_dir
    probe = file_names[:20]
    for cand in image_dir_candidates(json_path):
        if probe and all((cand / f).is_file() for f in probe):
            return cand
    for cand in image_dir_candidates(json_path):
        if probe and (cand / probe[0]).is_file():
            return cand
    tried = ", ".join(str(c) for c in image_dir_candidates(json_path))
    raise FileNotFoundError(f"{json_path}: images such as {probe[:1]} not found (looked in {tried})")


def _rle_outline(mask: np.ndarray) -> np.ndarray:
    contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    if not contours:
        return np.zeros((0, 2), np.float32)
    return max(contours, key=cv2.contourArea).reshape(-1, 2).astype(np.float32)


def _polygon_area(points: np.ndarray) -> float:
    """Shoelace area of a closed polygon ``(N, 2)`` (NaN for non-finite points)."""
    x, y = points[:, 0], points[:, 1]
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2)


def read_coco(
    json_path: str | Path,
    split: str = "train",
    task: Task | None = None,
    *,
    image_dir: str | Path | None = None,
    strict: bool = True,
) -> DatasetSource:
    """Read one COCO JSON. `task` defaults to pose when the categories define keypoints, else detect."""
    json_path = Path(json_path)
    with json_path.open("r", encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    for key in ("images", "annotations", "categories"):
        if key not in data:
            raise ValueError(f"{json_path}: not a COCO instances JSON (no `{key}`)")
    categories = sorted(data["categories"], key=lambda c: int(c["id"]))
    cat_to_label = {int(c["id"]): i for i, c in enumerate(categories)}
    names = {i: str(c.get("name", c["id"])) for i, c in enumerate(categories)}
    kpt_names = next((c["keypoints"] for c in categories if c.get("keypoints")), None)
    if task is None:
        task = "pose" if kpt_names else "detect"
    fields = get_task(task).target_fields
    want_masks, want_keypoints, want_rboxes = (f in fields for f in ("masks", "keypoints", "rboxes"))
    k = len(kpt_names) if kpt_names else 0
    if want_keypoints and not k:
        raise ValueError(f"{json_path}: pose task but no category lists `keypoints`")
    images = sorted(data["images"], key=lambda im: str(im["file_name"]))
    img_dir = _resolve_image_dir(
        json_path, [str(im["file_name"]) for im in images], Path(image_dir) if image_dir else None
    )
    by_image: dict[Any, list[dict[str, Any]]] = {}
    problems: list[LabelProblem] = []
    for ann in data["annotations"]:
        if "image_id" not in ann:  # one line for it; the rest of the file still reads
            problems.append(LabelProblem(json_path, 0, f"annotation id {ann.get('id')}: no image_id"))
            continue
        by_image.setdefault(ann["image_id"], []).append(ann)
    records: list[ImageRecord] = []
    for im in images:
        h, w = int(im["height"]), int(im["width"])
        boxes, labels, polys, kpts, crowd, rles = [], [], [], [], [], []
        for ann in sorted(by_image.get(im["id"], []), key=lambda a: a.get("id", 0)):
            where = f"annotation id {ann.get('id')} (image {im['file_name']})"
            cat = int(ann.get("category_id", -1))
            if cat not in cat_to_label:
                problems.append(LabelProblem(json_path, 0, f"{where}: category_id {cat} not in categories"))
                continue
            x, y, bw, bh = (float(v) for v in ann.get("bbox", (0, 0, 0, 0)))
            box = np.clip(np.array([x, y, x + bw, y + bh]), 0, [w, h, w, h])
            seg = ann.get("segmentation")
            raw_rle = None
            poly = None
            if want_masks:
                if isinstance(seg, list) and seg:
                    parts = [np.asarray(p, dtype=np.float64).reshape(-1, 2) for p in seg if len(p) >= 6]
                    poly = merge_polygon_parts(parts).astype(np.float64) if parts else None
                elif isinstance(seg, dict):
                    raw_rle = seg
                    poly = _rle_outline(decode_rle(seg)).astype(np.float64)
                if poly is None or len(poly) < 3:
                    problems.append(LabelProblem(json_path, 0, f"{where}: no usable segmentation"))
                    continue
                poly = np.clip(poly, 0, [w, h])
                box = np.concatenate([poly.min(0), poly.max(0)])
            if want_rboxes:
                if not (isinstance(seg, list) and seg and len(seg[0]) >= 8):
                    problems.append(
                        LabelProblem(json_path, 0, f"{where}: obb needs a corner polygon segmentation")
                    )
                    continue
                quad = np.asarray(seg[0], dtype=np.float64).reshape(-1, 2)
                poly = (
                    quad
                    if len(quad) == 4
                    else rbox_to_corners(corners_to_rbox(quad[None]))[0].astype(np.float64)
                )
                box = np.concatenate([poly.min(0), poly.max(0)])
                area = _polygon_area(poly)
                if not np.isfinite(poly).all() or area <= 0:
                    problems.append(
                        LabelProblem(
                            json_path,
                            0,
                            f"{where}: degenerate obb polygon {seg[0]} (area {area:g}); expected 4 corners "
                            "enclosing a non-zero area",
                        )
                    )
                    continue
            if box[2] <= box[0] or box[3] <= box[1]:
                problems.append(LabelProblem(json_path, 0, f"{where}: empty box {ann.get('bbox')}"))
                continue
            boxes.append(box)
            labels.append(cat_to_label[cat])
            crowd.append(bool(ann.get("iscrowd", 0)))
            if (want_masks or want_rboxes) and poly is not None:  # only once the instance is kept (aligned)
                polys.append(poly)
            if want_masks:
                rles.append(raw_rle)
            if want_keypoints:
                kp = ann.get("keypoints") or [0.0] * (3 * k)
                if len(kp) != 3 * k:
                    problems.append(
                        LabelProblem(json_path, 0, f"{where}: {len(kp)} keypoint values, expected {3 * k}")
                    )
                    boxes.pop(), labels.pop(), crowd.pop()
                    continue
                kpts.append(np.asarray(kp, dtype=np.float64).reshape(k, 3))
        n = len(labels)
        targets = Targets(
            boxes=np.array(boxes, dtype=np.float32).reshape(n, 4),
            labels=np.array(labels, dtype=np.int64),
            polygons=polys if want_masks or want_rboxes else None,
            rboxes=corners_to_rbox(np.array(polys).reshape(n, 4, 2)) if want_rboxes else None,
            keypoints=np.array(kpts, dtype=np.float32).reshape(n, k, 3) if want_keypoints else None,
            iscrowd=np.array(crowd, dtype=bool),
            image_id=im["id"],
            orig_size=(h, w),
        )
        records.append(
            ImageRecord(
                path=img_dir / str(im["file_name"]),
                targets=targets,
                image_id=im["id"],
                size_hw=(h, w),
                rles=rles if want_masks and any(r is not None for r in rles) else None,
            )
        )
    fatal = [
        p for p in problems if any(k in p.reason for k in ("category_id", "keypoint values", "no image_id"))
    ]
    if strict and fatal:
        raise LabelError(fatal)
    return DatasetSource(
        records=records,
        names=names,
        task=task,
        kpt_shape=(k, 3) if want_keypoints else None,
        flip_idx=flip_idx_from_names(list(kpt_names)) if want_keypoints and kpt_names else None,
        category_ids=[int(c["id"]) for c in categories],
        root=img_dir,
        split=split,
        problems=[str(p) for p in problems],
        annotation_file=Path(json_path),
    )
