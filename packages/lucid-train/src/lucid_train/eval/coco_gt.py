"""COCO ground truth for any dataset layout: read a COCO JSON verbatim or build one on the fly from targets.

The COCO detection/keypoint protocol (cocodataset.org/#detection-eval, #keypoints-eval) scores detections
against a COCO-format ground-truth dict (`images`, `annotations`, `categories`). This module produces that dict:

* `CocoGroundTruth.from_coco_json(path)` keeps a COCO annotation file exactly as written (boxes, areas, polygons,
  RLE, keypoints, ``iscrowd``), so the metric is the official one.
* `CocoGroundTruth.from_targets(...)` / `.from_source(source)` (:func:`ground_truth_from_source`) builds the dict
  from per-image
  `lucid_data.Targets` in ORIGINAL image pixels (YOLO txt layouts: normalised label × original width/height,
  done by the reader). Rules, chosen so that every layout gets the same metric:

  - **Boxes are not rounded.** ``bbox = [x1, y1, x2 - x1, y2 - y1]`` in float64 from the pixel values carried
    by the targets (COCO JSON files themselves carry two decimals; rounding would only move IoUs).
  - ``area`` (used by COCO for the small/medium/large ranges and by OKS as the object scale) is the
    rasterised area of the segmentation when there is one (polygons or a mask, computed with the COCO mask
    API exactly as ``COCO.loadRes`` does for detections), else the box area ``w * h`` — for an instance with
    keypoints :data:`KEYPOINT_BOX_AREA_FRACTION` ``× w × h``, the reference validator's OKS scale for labels
    without a segment (docs/EVALUATION.md, "Keypoints").
  - ``iscrowd`` is kept (crowd ground truth is matched and ignored by the protocol, never dropped).
    ``difficult`` has no COCO meaning and is not used (COCOeval overwrites ``ignore`` with ``iscrowd``).
  - keypoints are flattened ``[x1, y1, v1, ...]``; ``num_keypoints`` counts ``v > 0`` (COCOeval ignores a person
    with ``num_keypoints == 0``). Two-column keypoints get ``v = 2`` unless the point is ``(0, 0)``
    (the YOLO "not labelled" convention), which gets ``v = 0``.
  - contiguous label ``i`` maps to category id ``category_ids[i]`` (``i`` itself unless the source provides
    dataset ids, e.g. COCO's 1..90).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lucid_core.geometry.rotated import rboxes_to_polygons
from lucid_core.loss.terms.pose import COCO_KEYPOINT_SIGMAS_X10

# COCO keypoint sigmas (person, 17 keypoints), cocodataset.org/#keypoints-eval and pycocotools
# `Params.setKpParams`: the per-keypoint standard deviations divided by 10 there.
# COCO keypoint OKS sigmas in float64, as pycocotools divides them (the values live in lucid_core, beside the loss).
COCO_KPT_SIGMAS: tuple[float, ...] = tuple(v / 10.0 for v in COCO_KEYPOINT_SIGMAS_X10)

#: The OKS object scale of a keypoint label without a segment, as a fraction of its box area: the reference
#: validator's (measured black box: with it our keypoint mAP50-95 of its checkpoints equals its own figure within
#: 0.002; with the box area it was 0.07 higher). A COCO JSON file's own ``area`` is kept.
KEYPOINT_BOX_AREA_FRACTION = 0.53

#: The annotation (and result) key of a rotated box: its 8 corner coordinates, x1 y1 … x4 y4.
ROTATED_KEY = "obb"


class GroundTruthError(ValueError):
    """A ground-truth source (annotation file, label, image) is missing or malformed."""


@dataclass(frozen=True)
class GtImage:
    """One image of the ground truth: its id, file, ORIGINAL size and targets in original pixels.

    `targets` is anything with the `lucid_data.Targets` fields `boxes` (N,4 xyxy), `labels` (N,), and
    optionally `iscrowd`, `polygons`, `masks`, `keypoints` (tensors or numpy arrays).
    """

    image_id: int
    file_name: str
    height: int
    width: int
    targets: Any


def _as_numpy(value: Any) -> np.ndarray | None:
    if value is None:
        return None
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def _mask_api() -> Any:
    from faster_coco_eval.core import mask as mask_api

    return mask_api


def _polygons_to_coco(polygons: Any) -> list[list[float]]:
    """Polygons of one instance as COCO lists ``[[x1, y1, x2, y2, ...], ...]`` (polygons under 3 points dropped)."""
    if polygons is None:
        return []
    if hasattr(polygons, "detach"):
        polygons = _as_numpy(polygons)
    arrays = [polygons] if isinstance(polygons, np.ndarray) and polygons.ndim == 2 else list(polygons)
    out: list[list[float]] = []
    for polygon in arrays:
        flat = np.asarray(_as_numpy(polygon), dtype=np.float64).reshape(-1)
        if flat.size >= 6:
            out.append(flat.tolist())
    return out


@dataclass
class CocoGroundTruth:
    """A COCO ground-truth dict plus the label ↔ category-id mapping used to convert predictions.

    `dataset` is a standard COCO dict; `category_ids[label]` is the dataset category id of contiguous class
    `label`; `names[label]` its name; `kpt_sigmas` the OKS sigmas (None = COCO's 17 when keypoints are scored);
    `image_root` the folder that `images[*].file_name` is relative to (None if unknown).
    """

    dataset: dict[str, Any]
    category_ids: tuple[int, ...]
    names: tuple[str, ...]
    kpt_sigmas: tuple[float, ...] | None = None
    image_root: Path | None = None
    _key_to_id: dict[Any, int] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_coco_json(
        cls,
        path: str | Path,
        *,
        image_root: str | Path | None = None,
        category_ids: Sequence[int] | None = None,
        kpt_sigmas: Sequence[float] | None = None,
    ) -> CocoGroundTruth:
        """Read a COCO annotation file verbatim; contiguous labels follow sorted category ids unless given."""
        path = Path(path)
        if not path.is_file():
            raise GroundTruthError(f"annotation file {path} does not exist")
        try:
            dataset = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise GroundTruthError(f"annotation file {path} does not parse as JSON: {exc}") from exc
        return cls.from_coco_dict(
            dataset, origin=str(path), image_root=image_root, category_ids=category_ids, kpt_sigmas=kpt_sigmas
        )

    @classmethod
    def from_coco_dict(
        cls,
        dataset: Mapping[str, Any],
        *,
        origin: str = "<dict>",
        image_root: str | Path | None = None,
        category_ids: Sequence[int] | None = None,
        kpt_sigmas: Sequence[float] | None = None,
    ) -> CocoGroundTruth:
        """Validate a COCO dict (required keys and fields) and wrap it."""
        if not isinstance(dataset, Mapping):
            raise GroundTruthError(f"{origin}: top level must be an object, got {type(dataset).__name__}")
        for key in ("images", "annotations", "categories"):
            if not isinstance(dataset.get(key), list):
                raise GroundTruthError(f"{origin}: missing or non-list '{key}'")
        image_ids: set[int] = set()
        for i, image in enumerate(dataset["images"]):
            for key in ("id", "height", "width"):
                if key not in image:
                    raise GroundTruthError(f"{origin}: images[{i}] has no '{key}'")
            image_ids.add(image["id"])
        cats = {c["id"]: c for c in dataset["categories"]}
        for i, ann in enumerate(dataset["annotations"]):
            for key in ("id", "image_id", "category_id", "bbox", "area"):
                if key not in ann:
                    raise GroundTruthError(f"{origin}: annotations[{i}] (id {ann.get('id')}) has no '{key}'")
            if ann["image_id"] not in image_ids:
                raise GroundTruthError(
                    f"{origin}: annotations[{i}] refers to unknown image_id {ann['image_id']}"
                )
            if ann["category_id"] not in cats:
                raise GroundTruthError(
                    f"{origin}: annotations[{i}] has category_id {ann['category_id']} not in 'categories'"
                )
        ids = tuple(int(c) for c in (category_ids if category_ids is not None else sorted(cats)))
        unknown = [c for c in ids if c not in cats]
        if unknown:
            raise GroundTruthError(f"{origin}: category ids {unknown} are not in 'categories'")
        names = tuple(str(cats[c].get("name", c)) for c in ids)
        if kpt_sigmas is None:
            kpt_names = next((c.get("keypoints") for c in dataset["categories"] if c.get("keypoints")), None)
            if kpt_names is not None and len(kpt_names) != len(COCO_KPT_SIGMAS):
                kpt_sigmas = (
                    None  # caller must supply sigmas for non-COCO skeletons (checked by the evaluator)
                )
        out = cls(
            dataset=dict(dataset),
            category_ids=ids,
            names=names,
            kpt_sigmas=None if kpt_sigmas is None else tuple(float(s) for s in kpt_sigmas),
            image_root=None if image_root is None else Path(image_root),
        )
        out._key_to_id = {image["id"]: image["id"] for image in dataset["images"]}
        return out

    @classmethod
    def from_targets(
        cls,
        images: Iterable[GtImage],
        names: Sequence[str],
        *,
        category_ids: Sequence[int] | None = None,
        kpt_sigmas: Sequence[float] | None = None,
        image_root: str | Path | None = None,
        keys: Sequence[Any] | None = None,
    ) -> CocoGroundTruth:
        """Build a COCO dict from per-image targets in ORIGINAL pixels (rules in the module docstring).

        `keys[i]`, when given, is the caller's own identifier of image i (e.g. a file stem) that `image_id` lookups
        via `resolve_image_id` accept besides the integer id.
        """
        ids = tuple(int(c) for c in (category_ids if category_ids is not None else range(len(names))))
        if len(ids) != len(names):
            raise GroundTruthError(f"{len(names)} class names but {len(ids)} category ids")
        categories = [{"id": cid, "name": str(name), "supercategory": ""} for cid, name in zip(ids, names)]
        coco_images: list[dict[str, Any]] = []
        annotations: list[dict[str, Any]] = []
        seen: set[int] = set()
        for image in images:
            if image.image_id in seen:
                raise GroundTruthError(f"duplicate image_id {image.image_id} ({image.file_name})")
            seen.add(image.image_id)
            coco_images.append(
                {
                    "id": image.image_id,
                    "file_name": image.file_name,
                    "height": image.height,
                    "width": image.width,
                }
            )
            annotations.extend(_annotations_of(image, ids, start_id=len(annotations) + 1))
        if kpt_sigmas is not None:
            categories = [dict(c, keypoints=[str(k) for k in range(len(kpt_sigmas))]) for c in categories]
        dataset = {"images": coco_images, "annotations": annotations, "categories": categories}
        out = cls(
            dataset=dataset,
            category_ids=ids,
            names=tuple(str(n) for n in names),
            kpt_sigmas=None if kpt_sigmas is None else tuple(float(s) for s in kpt_sigmas),
            image_root=None if image_root is None else Path(image_root),
        )
        out._key_to_id = {image["id"]: image["id"] for image in coco_images}
        if keys is not None:
            out._key_to_id.update({key: image["id"] for key, image in zip(keys, coco_images)})
        return out

    @classmethod
    def from_source(cls, source: Any) -> CocoGroundTruth:
        """Ground truth of a `lucid_data.DatasetSource` (any layout): :func:`ground_truth_from_source`."""
        return ground_truth_from_source(source)

    # ------------------------------------------------------------------ queries
    @property
    def num_classes(self) -> int:
        return len(self.category_ids)

    @property
    def image_ids(self) -> list[int]:
        return [int(image["id"]) for image in self.dataset["images"]]

    @property
    def images(self) -> dict[int, dict[str, Any]]:
        return {int(image["id"]): image for image in self.dataset["images"]}

    def resolve_image_id(self, key: Any) -> int:
        """The integer COCO image id of `key` (an id or a key given to `from_targets`)."""
        if key in self._key_to_id:
            return self._key_to_id[key]
        if hasattr(key, "item"):
            key = key.item()
            if key in self._key_to_id:
                return self._key_to_id[key]
        raise KeyError(f"image {key!r} is not in the ground truth ({len(self._key_to_id)} images)")

    def has_segmentation(self) -> bool:
        return any("segmentation" in a and a["segmentation"] for a in self.dataset["annotations"])

    def has_rotated(self) -> bool:
        """Whether the annotations carry rotated-box corners (:data:`ROTATED_KEY`, written for targets with
        rboxes)."""
        return any(ROTATED_KEY in a for a in self.dataset["annotations"])

    def has_keypoints(self) -> bool:
        return any("keypoints" in a for a in self.dataset["annotations"])

    def num_keypoints(self) -> int | None:
        for ann in self.dataset["annotations"]:
            if "keypoints" in ann:
                return len(ann["keypoints"]) // 3
        return None

    def copy_dataset(self) -> dict[str, Any]:
        """A copy whose annotation dicts can be mutated by COCO tools without touching this object."""
        out = dict(self.dataset)
        out["annotations"] = [dict(a) for a in self.dataset["annotations"]]
        out["categories"] = copy.deepcopy(self.dataset["categories"])
        return out


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
    """The COCO ground truth of a `lucid_data.DatasetSource` (any layout).

    A source that names its COCO annotation file (attribute ``annotation_file``) is read verbatim
    (`CocoGroundTruth.from_coco_json`: COCO's own areas and multi-part polygons); any other source is converted
    from its `ImageRecord`s with the module's rules, raw COCO RLEs (``ImageRecord.rles``) used as the instance
    segmentation. Image ids: integer ``image_id``s are kept; string ids (YOLO/DOTA file stems) are numbered 1..N
    in record order, and both the stem and the number are accepted by `COCOEvaluator.update`.
    """
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
    mask_api = _mask_api()
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


def _annotations_of(image: GtImage, category_ids: Sequence[int], start_id: int) -> list[dict[str, Any]]:
    targets = image.targets
    where = f"image {image.image_id} ({image.file_name})"
    boxes = _as_numpy(targets.boxes)
    labels = _as_numpy(targets.labels)
    if boxes is None or labels is None:
        raise GroundTruthError(f"{where}: targets have no boxes/labels")
    boxes = boxes.astype(np.float64).reshape(-1, 4)
    labels = labels.astype(np.int64).reshape(-1)
    n = len(labels)
    if boxes.shape[0] != n:
        raise GroundTruthError(f"{where}: {boxes.shape[0]} boxes but {n} labels")
    bad = labels[(labels < 0) | (labels >= len(category_ids))]
    if bad.size:
        raise GroundTruthError(f"{where}: class {int(bad[0])} outside 0..{len(category_ids) - 1}")
    iscrowd = _as_numpy(getattr(targets, "iscrowd", None))
    iscrowd = np.zeros(n, dtype=bool) if iscrowd is None else iscrowd.astype(bool).reshape(-1)
    keypoints = _as_numpy(getattr(targets, "keypoints", None))
    polygons = getattr(targets, "polygons", None)
    masks = _as_numpy(getattr(targets, "masks", None))
    if masks is not None and masks.shape[1:] != (image.height, image.width):
        raise GroundTruthError(
            f"{where}: masks are {tuple(masks.shape[1:])}, expected the original size {(image.height, image.width)}"
        )
    mask_api = _mask_api() if (polygons is not None or masks is not None) else None
    rboxes = _as_numpy(getattr(targets, "rboxes", None))
    difficult = _as_numpy(getattr(targets, "difficult", None))
    obb_corners = _rotated_corners(rboxes, polygons, n, where) if rboxes is not None else None
    out: list[dict[str, Any]] = []
    for i in range(n):
        x1, y1, x2, y2 = (float(v) for v in boxes[i])
        w, h = x2 - x1, y2 - y1
        if not all(math.isfinite(v) for v in (x1, y1, w, h)) or w < 0 or h < 0:
            raise GroundTruthError(f"{where}: instance {i} has an invalid box {[x1, y1, x2, y2]}")
        ann: dict[str, Any] = {
            "id": start_id + i,
            "image_id": image.image_id,
            "category_id": int(category_ids[int(labels[i])]),
            "bbox": [x1, y1, w, h],
            "area": w * h,
            "iscrowd": int(iscrowd[i]),
        }
        if mask_api is not None and polygons is not None and polygons[i] is not None:
            polys = _polygons_to_coco(polygons[i])
            if polys:
                ann["segmentation"] = polys
                rles = mask_api.frPyObjects(polys, image.height, image.width)
                ann["area"] = float(mask_api.area(mask_api.merge(rles)))
        elif mask_api is not None and masks is not None:
            rle = mask_api.encode(np.asfortranarray(masks[i].astype(np.uint8)))
            rle["counts"] = (
                rle["counts"].decode("ascii") if isinstance(rle["counts"], bytes) else rle["counts"]
            )
            ann["segmentation"] = rle
            ann["area"] = float(mask_api.area(rle))
        if keypoints is not None:
            kp = keypoints[i].astype(np.float64)
            if kp.shape[-1] == 2:
                v = np.where((kp[:, 0] == 0) & (kp[:, 1] == 0), 0.0, 2.0)
                kp = np.concatenate([kp, v[:, None]], axis=1)
            ann["keypoints"] = kp.reshape(-1).tolist()
            ann["num_keypoints"] = int(np.count_nonzero(kp[:, 2] > 0))
            if "segmentation" not in ann:
                ann["area"] = KEYPOINT_BOX_AREA_FRACTION * w * h
        if obb_corners is not None:
            ann[ROTATED_KEY] = obb_corners[i].reshape(-1).tolist()
            ann["difficult"] = int(bool(difficult[i])) if difficult is not None and difficult.size == n else 0
        out.append(ann)
    return out


def _rotated_corners(rboxes: np.ndarray, polygons: Any, n: int, where: str) -> np.ndarray:
    """(n, 4, 2) float64 corners for rotated evaluation: the labelled quadrilateral where there is one (DOTA
    scores the labelled polygon), else the corners of the rotated box (``lucid_core.geometry.rotated``)."""
    rb = rboxes.astype(np.float64).reshape(-1, 5)
    if rb.shape[0] != n:
        raise GroundTruthError(f"{where}: {rb.shape[0]} rotated boxes but {n} labels")
    corners = rboxes_to_polygons(torch.from_numpy(rb)).numpy()
    if polygons is not None:
        for i in range(n):
            poly = _as_numpy(polygons[i]) if polygons[i] is not None else None
            if poly is not None and poly.size == 8:
                corners[i] = poly.astype(np.float64).reshape(4, 2)
    return corners
