"""Our COCO stats equal pycocotools' exactly (bbox, segm, keypoints) given the same detections.

Cases: the coco-mmpose sample (test_coco.json + its 4 images' sizes; every value read from the file) and a
synthetic set built to hit the protocol's corners: crowd ground truth (boxes and uncompressed RLE), empty images,
images without detections, a category without ground truth, score ties, more than maxDets detections in an
image, persons without labelled keypoints, and custom keypoint sigmas. Detections are deterministic jitters of
the ground truth plus random boxes. The reference is pycocotools run directly (not through our wrapper).
The default backend must match bit for bit; faster-coco-eval is allowed a last-bit difference (measured: its
C++ accumulate gives e.g. 0.39650715071507153 where pycocotools gives 0.3965071507150715).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from lucid_core.results import Detections
from lucid_train.eval import COCO_KPT_SIGMAS, COCOEvaluator, CocoGroundTruth

pycocotools = pytest.importorskip("pycocotools")
from faster_coco_eval.core import mask as mask_api  # noqa: E402
from pycocotools.coco import COCO  # noqa: E402
from pycocotools.cocoeval import COCOeval  # noqa: E402

IOU_TYPES = ("bbox", "segm", "keypoints")


def reference(
    dataset: dict[str, Any], results: list[dict[str, Any]], iou_type: str, sigmas: Any = None
) -> tuple[list[float], np.ndarray, list[int]]:
    """pycocotools stats, precision array and category ids for the given COCO results."""
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = copy.deepcopy(dataset)
        gt.createIndex()
        dt = gt.loadRes(copy.deepcopy(results))
        ev = COCOeval(gt, dt, iou_type)
        if sigmas is not None:
            ev.params.kpt_oks_sigmas = np.asarray(sigmas, dtype=np.float64)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return [float(s) for s in ev.stats], ev.eval["precision"], list(ev.params.catIds)


def per_class_reference(precision: np.ndarray, cat_ids: list[int], wanted: tuple[int, ...]) -> list[float]:
    out = []
    for cat in wanted:
        s = precision[:, :, cat_ids.index(cat), 0, -1]
        s = s[s > -1]
        out.append(float(np.mean(s)) if s.size else -1.0)
    return out


def _mask_of(segmentation: Any, h: int, w: int) -> np.ndarray:
    if isinstance(segmentation, list):
        rle = mask_api.merge(mask_api.frPyObjects(segmentation, h, w))
    elif isinstance(segmentation.get("counts"), list):
        rle = mask_api.frPyObjects(segmentation, h, w)
    else:
        rle = segmentation
    return mask_api.decode(rle).astype(bool)


def jittered_detections(
    dataset: dict[str, Any], category_ids: tuple[int, ...], seed: int, extra_random: int = 3
) -> dict[int, Detections]:
    """Per image: 0-3 jittered copies of each ground truth (boxes, shifted masks, moved keypoints) + random ones."""
    rng = np.random.default_rng(seed)
    label_of = {c: i for i, c in enumerate(category_ids)}
    num_kpts = next((len(a["keypoints"]) // 3 for a in dataset["annotations"] if "keypoints" in a), 0)
    out = {}
    for image in dataset["images"]:
        h, w = image["height"], image["width"]
        boxes, scores, labels, masks, kpts = [], [], [], [], []
        anns = [a for a in dataset["annotations"] if a["image_id"] == image["id"]]
        for ann in anns:
            x, y, bw, bh = ann["bbox"]
            mask = _mask_of(ann["segmentation"], h, w) if "segmentation" in ann else None
            for copy_index in range(int(rng.integers(0, 4))):
                j = rng.normal(0, 0.04 + 0.08 * copy_index, 4) * [bw, bh, bw, bh]
                boxes.append([x + j[0], y + j[1], x + bw + j[2], y + bh + j[3]])
                scores.append(round(float(rng.random()), 2))  # two decimals: score ties happen
                wrong = rng.random() < 0.1
                labels.append(
                    int(rng.integers(0, len(category_ids))) if wrong else label_of[ann["category_id"]]
                )
                if mask is not None:
                    masks.append(np.roll(mask, (int(j[1]), int(j[0])), axis=(0, 1)))
                if num_kpts:
                    kp = np.asarray(ann["keypoints"], dtype=np.float64).reshape(-1, 3).copy()
                    kp[:, :2] += rng.normal(0, 2 + 4 * copy_index, (num_kpts, 2))
                    kp[:, 2] = rng.random(num_kpts)
                    kpts.append(kp)
        for _ in range(extra_random):
            bw, bh = rng.uniform(4, w / 2), rng.uniform(4, h / 2)
            x, y = rng.uniform(0, w - bw), rng.uniform(0, h - bh)
            boxes.append([x, y, x + bw, y + bh])
            scores.append(round(float(rng.random()), 2))
            labels.append(int(rng.integers(0, len(category_ids))))
            m = np.zeros((h, w), dtype=bool)
            m[int(y) : int(y + bh), int(x) : int(x + bw)] = True
            masks.append(m)
            if num_kpts:
                kpts.append(
                    np.stack(
                        [
                            rng.uniform(x, x + bw, num_kpts),
                            rng.uniform(y, y + bh, num_kpts),
                            rng.random(num_kpts),
                        ],
                        1,
                    )
                )
        n = len(boxes)
        out[image["id"]] = Detections(
            boxes=torch.tensor(boxes, dtype=torch.float32).reshape(n, 4),
            scores=torch.tensor(scores, dtype=torch.float32),
            labels=torch.tensor(labels, dtype=torch.int64),
            masks=torch.from_numpy(np.array(masks).reshape(n, h, w)),
            keypoints=torch.from_numpy(np.array(kpts).reshape(n, num_kpts, 3)).float() if num_kpts else None,
        )
    return out


def synthetic_dataset(seed: int = 0, num_images: int = 36) -> dict[str, Any]:
    """COCO dict: 4 categories (id 4 never annotated), crowds, empty images, unlabelled persons, 5 keypoints."""
    rng = np.random.default_rng(seed)
    images, anns = [], []
    for image_id in range(1, num_images + 1):
        h, w = int(rng.integers(60, 200)), int(rng.integers(60, 200))
        images.append({"id": image_id * 3, "file_name": f"{image_id}.jpg", "height": h, "width": w})
        n = 0 if image_id % 7 == 0 else int(rng.integers(1, 7))
        for _ in range(n):
            bw, bh = rng.uniform(3, w * 0.8), rng.uniform(3, h * 0.8)
            x, y = rng.uniform(0, w - bw), rng.uniform(0, h - bh)
            crowd = int(rng.random() < 0.12)
            if crowd:
                m = np.zeros((h, w), dtype=np.uint8)
                m[int(y) : int(y + bh), int(x) : int(x + bw)] = 1
                # uncompressed RLE (column-major run lengths), the usual COCO crowd encoding
                flat = m.T.reshape(-1)
                change = np.flatnonzero(np.diff(np.concatenate([[0], flat, [1 - flat[-1]]])))
                counts = np.diff(np.concatenate([[0], change])).tolist()
                segmentation: Any = {"counts": counts, "size": [h, w]}
            else:
                cx, cy = x + bw / 2, y + bh / 2
                angles = np.sort(rng.uniform(0, 2 * np.pi, 7))
                poly = np.stack([cx + bw / 2 * np.cos(angles), cy + bh / 2 * np.sin(angles)], 1)
                segmentation = [poly.reshape(-1).round(2).tolist()]
            vis = rng.integers(0, 3, 5) * (rng.random() > 0.2)
            kx, ky = rng.uniform(x, x + bw, 5), rng.uniform(y, y + bh, 5)
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": image_id * 3,
                    "category_id": int(rng.integers(1, 4)),
                    "bbox": [round(x, 2), round(y, 2), round(bw, 2), round(bh, 2)],
                    "area": float(round(bw * bh * rng.uniform(0.5, 1.0), 2)),
                    "iscrowd": crowd,
                    "segmentation": segmentation,
                    "keypoints": np.stack([kx * (vis > 0), ky * (vis > 0), vis], 1).reshape(-1).tolist(),
                    "num_keypoints": int(np.count_nonzero(vis)),
                }
            )
    categories = [{"id": c, "name": f"class{c}"} for c in (1, 2, 3, 4)]
    return {"images": images, "annotations": anns, "categories": categories}


SYNTHETIC_SIGMAS = (0.03, 0.05, 0.07, 0.09, 0.11)


def _check(
    gt: CocoGroundTruth, detections: dict[int, Detections], iou_type: str, backend: str, sigmas: Any
) -> None:
    evaluator = COCOEvaluator(gt, (iou_type,), backend=backend, kpt_sigmas=sigmas)
    for image in gt.dataset["images"]:
        evaluator.update(image["id"], detections[image["id"]])
    ours = evaluator.compute().per_type[iou_type]
    stats, precision, cat_ids = reference(gt.dataset, evaluator.results(iou_type), iou_type, sigmas)
    per_class = per_class_reference(precision, cat_ids, gt.category_ids)
    if backend == "lucid":  # our default backend reproduces pycocotools bit for bit
        assert list(ours.stats) == stats
        assert list(ours.ap_per_class) == per_class
    else:  # faster-coco-eval's C++ accumulate can differ in the last bit of a precision value
        assert ours.stats == pytest.approx(stats, rel=1e-12, abs=1e-15)
        assert ours.ap_per_class == pytest.approx(per_class, rel=1e-12, abs=1e-15)


@pytest.mark.shared
@pytest.mark.parametrize("backend", ["lucid", "faster"])
@pytest.mark.parametrize("iou_type", IOU_TYPES)
def test_coco_mmpose_stats_equal_pycocotools(shared_dir: Path, iou_type: str, backend: str) -> None:
    path = shared_dir / "data" / "coco-mmpose" / "test_coco.json"
    gt = CocoGroundTruth.from_coco_json(path)
    detections = jittered_detections(json.loads(path.read_text()), gt.category_ids, seed=7)
    _check(gt, detections, iou_type, backend, None if iou_type != "keypoints" else COCO_KPT_SIGMAS)


@pytest.mark.parametrize("backend", ["lucid", "faster"])
@pytest.mark.parametrize("iou_type", IOU_TYPES)
def test_synthetic_crowds_empty_images_stats_equal_pycocotools(iou_type: str, backend: str) -> None:
    dataset = synthetic_dataset()
    gt = CocoGroundTruth.from_coco_dict(dataset, kpt_sigmas=SYNTHETIC_SIGMAS)
    detections = jittered_detections(dataset, gt.category_ids, seed=3)
    # one image with more detections than maxDets (100) and one image with none at all
    busy = dataset["images"][0]
    h, w = busy["height"], busy["width"]
    rng = np.random.default_rng(11)
    xy = rng.uniform(0, 0.5, (150, 2)) * (w, h)
    wh = rng.uniform(0.1, 0.5, (150, 2)) * (w, h)
    masks = np.zeros((150, h, w), dtype=bool)
    for i, (x, y) in enumerate(xy.astype(int)):
        masks[i, y : y + int(wh[i, 1]), x : x + int(wh[i, 0])] = True
    detections[busy["id"]] = Detections(
        boxes=torch.from_numpy(np.concatenate([xy, xy + wh], 1)).float(),
        scores=torch.from_numpy(rng.integers(0, 20, 150) / 20).float(),
        labels=torch.from_numpy(rng.integers(0, 4, 150)),
        masks=torch.from_numpy(masks),
        keypoints=torch.from_numpy(rng.uniform(0, min(h, w), (150, 5, 3))).float(),
    )
    empty = dataset["images"][1]["id"]
    detections[empty] = Detections(
        boxes=torch.zeros(0, 4),
        scores=torch.zeros(0),
        labels=torch.zeros(0, dtype=torch.int64),
        masks=torch.zeros(0, dataset["images"][1]["height"], dataset["images"][1]["width"], dtype=torch.bool),
        keypoints=torch.zeros(0, 5, 3),
    )
    assert any(a["iscrowd"] for a in dataset["annotations"])
    assert any(a["num_keypoints"] == 0 and not a["iscrowd"] for a in dataset["annotations"])
    _check(gt, detections, iou_type, backend, SYNTHETIC_SIGMAS if iou_type == "keypoints" else None)


def test_category_without_ground_truth_reports_minus_one() -> None:
    dataset = synthetic_dataset(num_images=8)
    gt = CocoGroundTruth.from_coco_dict(dataset)
    evaluator = COCOEvaluator(gt, ("bbox",))
    for image_id, det in jittered_detections(dataset, gt.category_ids, seed=1).items():
        evaluator.update(image_id, det)
    result = evaluator.compute().per_type["bbox"]
    assert gt.category_ids[3] == 4 and not any(a["category_id"] == 4 for a in dataset["annotations"])
    assert result.ap_per_class[3] == -1.0 and result.ap50_per_class[3] == -1.0
    assert all(ap >= 0 for ap in result.ap_per_class[:3])
