"""COCO-protocol scoring of `Detections` (bbox, segm, keypoints, rotated) with the lucid, faster-coco-eval or
pycocotools backend (docs/EVALUATION.md, "Protocol" and "Backends"; all three give identical statistics).

Detections arrive per image in ORIGINAL image pixels with contiguous labels and are converted to the COCO results
format (`bbox` ``[x, y, w, h]``, `segmentation` compressed RLE, `keypoints` ``[x, y, score, ...]``, dataset category
ids), so detection areas follow ``COCO.loadRes``. Summary statistics and per-class AP are recomputed from the
accumulated precision / recall with pycocotools' ``_summarize`` rule; one deliberate difference: the first statistic
uses ``max_dets[-1]`` where pycocotools hard-codes 100 (equal for the default ``(1, 10, 100)``). IoU type
``rotated`` (task obb; lucid backend only) uses the exact convex-polygon IoU of the rotated boxes (ground truth key
``obb``), and objects flagged ``difficult`` are ignored like crowds.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from faster_coco_eval import COCO, COCOeval_faster
from faster_coco_eval.core import mask as mask_api

from lucid_core.geometry.rotated import rboxes_to_polygons
from lucid_train.eval import vectorized
from lucid_train.eval.coco_gt import COCO_KPT_SIGMAS, ROTATED_KEY, CocoGroundTruth

IOU_TYPES = ("bbox", "segm", "keypoints", "rotated")
BACKENDS = ("lucid", "faster", "pycocotools")

DET_STAT_NAMES = ("AP", "AP50", "AP75", "APs", "APm", "APl", "AR{0}", "AR{1}", "AR{2}", "ARs", "ARm", "ARl")
KPT_STAT_NAMES = ("AP", "AP50", "AP75", "APm", "APl", "AR", "AR50", "AR75", "ARm", "ARl")


def _backend_classes(backend: str) -> tuple[Any, Any]:
    """(COCO, COCOeval) classes of a backend; pycocotools is imported only when asked for."""
    if backend == "lucid":
        return None, None
    if backend == "faster":
        return COCO, COCOeval_faster
    if backend == "pycocotools":
        try:  # the lucid-train[pycocotools] extra
            from pycocotools.coco import COCO as PyCOCO
            from pycocotools.cocoeval import COCOeval as PyCOCOeval
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "backend='pycocotools' needs the pycocotools package: install the extra `lucid-train[pycocotools]`"
            ) from exc
        return PyCOCO, PyCOCOeval
    raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")


@dataclass(frozen=True)
class IouTypeResult:
    """COCO summary of one IoU type: the 12 (bbox/segm) or 10 (keypoints) stats and per-class AP."""

    iou_type: str
    stats: tuple[float, ...]
    stat_names: tuple[str, ...]
    ap_per_class: tuple[float, ...]  # AP@[.5:.95] per contiguous class, -1 = no ground truth
    ap50_per_class: tuple[float, ...]  # AP@.5 per contiguous class, -1 = no ground truth
    # (101, C) COCO-interpolated precision at IoU 0.5 on the 101 recall thresholds (area all, last maxDets) per
    # contiguous class, -1 where a class has no ground truth: the per-class PR curves whose means are AP50
    pr50: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def map50_95(self) -> float:
        return self.stats[0]

    @property
    def map50(self) -> float:
        return self.stats[1]

    def to_dict(self, names: Sequence[str]) -> dict[str, Any]:
        return {
            "stats": dict(zip(self.stat_names, self.stats)),
            "mAP50": self.map50,
            "mAP50-95": self.map50_95,
            "per_class": [
                {"class": i, "name": names[i], "AP50-95": ap, "AP50": ap50}
                for i, (ap, ap50) in enumerate(zip(self.ap_per_class, self.ap50_per_class))
            ],
        }


@dataclass
class EvalResult:
    """Scores of one evaluation: one `IouTypeResult` per IoU type (the first one is the primary metric)."""

    per_type: dict[str, IouTypeResult]
    names: tuple[str, ...]
    num_images: int
    backend: str
    decode: str | None = None
    seconds: float = 0.0
    other_decodes: dict[str, EvalResult] = field(default_factory=dict)
    # the validation artefacts (lucid_train.eval.artifacts.ValidationArtifacts) when they were asked for
    artifacts: Any = field(default=None, compare=False, repr=False)

    @property
    def primary(self) -> IouTypeResult:
        return next(iter(self.per_type.values()))

    @property
    def map50(self) -> float:
        return self.primary.map50

    @property
    def map50_95(self) -> float:
        return self.primary.map50_95

    def metrics(self, prefix: str = "") -> dict[str, float]:
        """Flat scalars for a logger: ``{prefix}{iou_type}/mAP50``, ``.../mAP50-95`` (and other decodes)."""
        out: dict[str, float] = {}
        for iou_type, res in self.per_type.items():
            out[f"{prefix}{iou_type}/mAP50"] = res.map50
            out[f"{prefix}{iou_type}/mAP50-95"] = res.map50_95
        for decode, other in self.other_decodes.items():
            out.update(other.metrics(prefix=f"{prefix}{decode}/"))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "decode": self.decode,
            "backend": self.backend,
            "num_images": self.num_images,
            "seconds": self.seconds,
            "names": list(self.names),
            "mAP50": self.map50,
            "mAP50-95": self.map50_95,
            "iou_types": {k: v.to_dict(self.names) for k, v in self.per_type.items()},
            "other_decodes": {k: v.to_dict() for k, v in self.other_decodes.items()},
        }


def summarize_mean(values: np.ndarray) -> float:
    """pycocotools `_summarize`: mean of the entries > -1, or -1 when there are none."""
    valid = values[values > -1]
    return -1.0 if valid.size == 0 else float(np.mean(valid))


def summarize(
    precision: np.ndarray,
    recall: np.ndarray,
    iou_thrs: np.ndarray,
    area_labels: Sequence[str],
    max_dets: Sequence[int],
    iou_type: str,
) -> tuple[tuple[float, ...], tuple[str, ...]]:
    """The COCO summary statistics (pycocotools `COCOeval.summarize`) from accumulated arrays.

    precision: (T, R, K, A, M); recall: (T, K, A, M).
    """

    def stat(ap: bool, iou_thr: float | None = None, area: str = "all", max_det: int = 100) -> float:
        a = [i for i, label in enumerate(area_labels) if label == area]
        m = [i for i, d in enumerate(max_dets) if d == max_det]
        s = precision if ap else recall
        if iou_thr is not None:
            s = s[np.where(iou_thr == iou_thrs)[0]]
        s = s[:, :, :, a, m] if ap else s[:, :, a, m]
        return summarize_mean(s)

    stats: tuple[float, ...]
    if iou_type == "keypoints":
        d = max_dets[-1]
        stats = (
            stat(True, max_det=d),
            stat(True, 0.5, max_det=d),
            stat(True, 0.75, max_det=d),
            stat(True, area="medium", max_det=d),
            stat(True, area="large", max_det=d),
            stat(False, max_det=d),
            stat(False, 0.5, max_det=d),
            stat(False, 0.75, max_det=d),
            stat(False, area="medium", max_det=d),
            stat(False, area="large", max_det=d),
        )
        return stats, KPT_STAT_NAMES
    d0, d1, d2 = max_dets[0], max_dets[1], max_dets[2]
    stats = (
        stat(True, max_det=d2),
        stat(True, 0.5, max_det=d2),
        stat(True, 0.75, max_det=d2),
        stat(True, area="small", max_det=d2),
        stat(True, area="medium", max_det=d2),
        stat(True, area="large", max_det=d2),
        stat(False, max_det=d0),
        stat(False, max_det=d1),
        stat(False, max_det=d2),
        stat(False, area="small", max_det=d2),
        stat(False, area="medium", max_det=d2),
        stat(False, area="large", max_det=d2),
    )
    return stats, tuple(n.format(d0, d1, d2) for n in DET_STAT_NAMES)


@dataclass
class _ImageDetections:
    """Detections of one image already in COCO terms (xywh float64, scores, category ids, RLEs, keypoints)."""

    xywh: np.ndarray
    scores: np.ndarray
    category_ids: np.ndarray
    rles: list[dict[str, Any]] | None = None
    keypoints: np.ndarray | None = None
    polygons: np.ndarray | None = None  # (N, 4, 2) rotated-box corners, float64


def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


class COCOEvaluator:
    """Accumulates per-image `Detections` (ORIGINAL pixels) and scores them with the COCO protocol.

    Only images passed to `update` (with or without detections) are scored; call it for every image, also the
    empty ones, so that their ground truth counts as missed. Calling `update` again for an image replaces its
    detections. `kpt_sigmas` defaults to the ground truth's (dataset YAML ``kpt_sigmas``), else COCO's 17.
    """

    def __init__(
        self,
        gt: CocoGroundTruth,
        iou_types: Iterable[str] = ("bbox",),
        backend: str = "lucid",
        kpt_sigmas: Sequence[float] | None = None,
        max_dets: Sequence[int] = (1, 10, 100),
        kpt_max_dets: int = 20,
    ) -> None:
        self.gt = gt
        self.iou_types = tuple(iou_types)
        for iou_type in self.iou_types:
            if iou_type not in IOU_TYPES:
                raise ValueError(f"iou_types must be among {IOU_TYPES}, got {iou_type!r}")
        if not self.iou_types:
            raise ValueError("iou_types is empty")
        if "rotated" in self.iou_types and backend != "lucid":
            raise ValueError(
                f"iou_type 'rotated' is scored by backend 'lucid' only (pycocotools / faster-coco-eval have no "
                f"rotated IoU), got backend {backend!r}"
            )
        _backend_classes(backend)  # fail early on an unknown / unavailable backend
        self.backend = backend
        self.max_dets = tuple(int(d) for d in max_dets)
        if len(self.max_dets) != 3 or list(self.max_dets) != sorted(self.max_dets):
            raise ValueError(f"max_dets must be 3 increasing numbers (COCO's 1, 10, 100), got {max_dets}")
        self.kpt_max_dets = int(kpt_max_dets)
        if "rotated" in self.iou_types and not gt.has_rotated():
            raise ValueError(
                f"iou_types has 'rotated' but the ground truth has no rotated boxes (annotation {ROTATED_KEY!r})"
            )
        if "segm" in self.iou_types and not gt.has_segmentation():
            raise ValueError("iou_types has 'segm' but the ground truth has no segmentation")
        self.kpt_sigmas: tuple[float, ...] | None = None
        if "keypoints" in self.iou_types:
            num_kpts = gt.num_keypoints()
            if num_kpts is None:
                raise ValueError("iou_types has 'keypoints' but the ground truth has no keypoints")
            sigmas = kpt_sigmas if kpt_sigmas is not None else gt.kpt_sigmas
            if sigmas is None:
                # the pose loss's rule (fixture README "pose_loss_*.pt" step 5): COCO's 17, else 1/K
                sigmas = COCO_KPT_SIGMAS if num_kpts == len(COCO_KPT_SIGMAS) else [1.0 / num_kpts] * num_kpts
            if len(sigmas) != num_kpts:
                raise ValueError(
                    f"{len(sigmas)} keypoint sigmas for {num_kpts} keypoints: give the dataset YAML `kpt_sigmas`"
                )
            self.kpt_sigmas = tuple(float(s) for s in sigmas)
        self._category_ids = np.asarray(gt.category_ids, dtype=np.int64)
        self._sizes = {image_id: (int(im["height"]), int(im["width"])) for image_id, im in gt.images.items()}
        self._gt_coco: Any = None
        self._gt_instances: dict[str, Any] = {}
        self._images: dict[int, _ImageDetections] = {}

    # ------------------------------------------------------------------ accumulation
    def reset(self) -> None:
        """Forget all detections (the ground truth index is kept)."""
        self._images = {}

    def image_entries(self) -> dict[int, Any]:
        """The accumulated per-image detections (COCO image id → entry), e.g. to gather them from DDP ranks."""
        return dict(self._images)

    def add_image_entries(self, entries: dict[int, Any]) -> None:
        """Add :meth:`image_entries` of another evaluator; an image present in both keeps one entry."""
        self._images.update(entries)

    @property
    def num_images(self) -> int:
        return len(self._images)

    def update(self, image_id: Any, detections: Any) -> None:
        """Add the detections of one image (`lucid_core.results.Detections`, ORIGINAL pixels)."""
        coco_id = self.gt.resolve_image_id(image_id)
        boxes = _to_numpy(detections.boxes).astype(np.float64).reshape(-1, 4)
        scores = _to_numpy(detections.scores).astype(np.float64).reshape(-1)
        labels = _to_numpy(detections.labels).astype(np.int64).reshape(-1)
        n = scores.shape[0]
        if boxes.shape[0] != n or labels.shape[0] != n:
            raise ValueError(
                f"image {image_id}: {boxes.shape[0]} boxes, {n} scores, {labels.shape[0]} labels"
            )
        if n and (labels.min() < 0 or labels.max() >= len(self._category_ids)):
            bad = labels[(labels < 0) | (labels >= len(self._category_ids))][0]
            raise ValueError(
                f"image {image_id}: label {int(bad)} outside the {len(self._category_ids)} classes"
            )
        xywh = boxes.copy()
        xywh[:, 2:] -= xywh[:, :2]
        entry = _ImageDetections(xywh=xywh, scores=scores, category_ids=self._category_ids[labels])
        if "segm" in self.iou_types:
            entry.rles = self._encode_masks(coco_id, detections.masks, n)
        if "keypoints" in self.iou_types:
            kpts = detections.keypoints
            if kpts is None:
                if n:
                    raise ValueError(f"image {image_id}: keypoints are scored but the detections have none")
                kpts = np.zeros((0, len(self.kpt_sigmas or ()), 3))
            kp = _to_numpy(kpts).astype(np.float64)
            if kp.ndim != 3 or kp.shape[0] != n:
                raise ValueError(
                    f"image {image_id}: keypoints of shape {kp.shape}, expected ({n}, K, 2 or 3)"
                )
            if kp.shape[2] == 2:
                kp = np.concatenate([kp, np.ones_like(kp[..., :1])], axis=2)
            entry.keypoints = kp.reshape(n, kp.shape[1] * kp.shape[2])
        if "rotated" in self.iou_types:
            entry.polygons = self._rotated_polygons(image_id, detections.rboxes, n)
        self._images[coco_id] = entry

    @staticmethod
    def _rotated_polygons(image_id: Any, rboxes: Any, n: int) -> np.ndarray:
        """(n, 4, 2) float64 corners of the detections' rotated boxes (``lucid_core.geometry.rotated``)."""
        if rboxes is None:
            if n:
                raise ValueError(f"image {image_id}: rotated boxes are scored but the detections have none")
            return np.zeros((0, 4, 2))
        rb = torch.as_tensor(_to_numpy(rboxes), dtype=torch.float64).reshape(-1, 5)
        if rb.shape[0] != n:
            raise ValueError(f"image {image_id}: {rb.shape[0]} rotated boxes for {n} scores")
        return rboxes_to_polygons(rb).numpy()

    def _encode_masks(self, coco_id: int, masks: Any, n: int) -> list[dict[str, Any]]:
        if masks is None:
            if n:
                raise ValueError(f"image {coco_id}: segm is scored but the detections have no masks")
            return []
        m = _to_numpy(masks)
        if m.shape[0] != n or m.shape[1:] != self._sizes[coco_id]:
            raise ValueError(
                f"image {coco_id}: masks of shape {m.shape}, expected ({n}, {self._sizes[coco_id][0]}, "
                f"{self._sizes[coco_id][1]}) in original pixels"
            )
        if n == 0:
            return []
        rles = mask_api.encode(np.asfortranarray(m.astype(np.uint8).transpose(1, 2, 0)))
        return list(rles)

    # ------------------------------------------------------------------ scoring
    def results(self, iou_type: str) -> list[dict[str, Any]]:
        """The accumulated detections in the COCO results format of `iou_type` (fresh dicts)."""
        out: list[dict[str, Any]] = []
        for image_id in sorted(self._images):
            entry = self._images[image_id]
            cats = entry.category_ids.tolist()
            scores = entry.scores.tolist()
            if iou_type == "bbox":
                for box, cat, score in zip(entry.xywh.tolist(), cats, scores):
                    out.append({"image_id": image_id, "category_id": cat, "bbox": box, "score": score})
            elif iou_type == "segm":
                for rle, cat, score in zip(entry.rles or [], cats, scores):
                    out.append(
                        {"image_id": image_id, "category_id": cat, "segmentation": dict(rle), "score": score}
                    )
            elif iou_type == "rotated":
                polys = entry.polygons.reshape(-1, 8).tolist() if entry.polygons is not None else []
                for poly, cat, score in zip(polys, cats, scores):
                    out.append({"image_id": image_id, "category_id": cat, ROTATED_KEY: poly, "score": score})
            else:
                kpts = entry.keypoints.tolist() if entry.keypoints is not None else []
                for kp, cat, score in zip(kpts, cats, scores):
                    out.append({"image_id": image_id, "category_id": cat, "keypoints": kp, "score": score})
        return out

    def _ground_truth_coco(self) -> Any:
        if self._gt_coco is None:
            coco_cls, _ = _backend_classes(self.backend)
            with contextlib.redirect_stdout(io.StringIO()):
                gt = coco_cls()
                gt.dataset = self.gt.copy_dataset()
                gt.createIndex()
            self._gt_coco = gt
        return self._gt_coco

    def compute(self) -> EvalResult:
        """Score everything passed to `update` so far."""
        if not self._images:
            raise RuntimeError("COCOEvaluator.compute() before any update(): no images to score")
        tic = time.perf_counter()
        per_type = {iou_type: self._compute_one(iou_type) for iou_type in self.iou_types}
        return EvalResult(
            per_type=per_type,
            names=self.gt.names,
            num_images=len(self._images),
            backend=self.backend,
            seconds=time.perf_counter() - tic,
        )

    def _compute_one(self, iou_type: str) -> IouTypeResult:
        if self.backend == "lucid":
            return self._compute_vectorized(iou_type)
        coco_cls, eval_cls = _backend_classes(self.backend)
        gt = self._ground_truth_coco()
        dts = self.results(iou_type)
        with contextlib.redirect_stdout(io.StringIO()):
            if dts:
                dt = gt.loadRes(dts)
            else:  # loadRes cannot take an empty list in pycocotools
                dt = coco_cls()
                dt.dataset = {"images": list(gt.dataset["images"]), "categories": gt.dataset["categories"]}
                dt.dataset["annotations"] = []
                dt.createIndex()
            kwargs: dict[str, Any] = (
                {"print_function": lambda *a, **k: None} if self.backend == "faster" else {}
            )
            evaluator = eval_cls(gt, dt, iou_type, **kwargs)
            params = evaluator.params
            params.imgIds = sorted(self._images)
            params.catIds = sorted(gt.getCatIds())
            if iou_type == "keypoints":
                params.maxDets = [self.kpt_max_dets]
                params.kpt_oks_sigmas = np.asarray(self.kpt_sigmas, dtype=np.float64)
            else:
                params.maxDets = list(self.max_dets)
            evaluator.evaluate()
            evaluator.accumulate()
        precision = np.asarray(evaluator.eval["precision"])
        recall = np.asarray(evaluator.eval["recall"])
        stats, names = summarize(
            precision,
            recall,
            np.asarray(params.iouThrs),
            list(params.areaRngLbl),
            list(params.maxDets),
            iou_type,
        )
        ap, ap50 = self._per_class(precision, params)
        pr50 = self._pr50_from(precision, params.catIds, params.areaRngLbl, np.asarray(params.iouThrs))
        return IouTypeResult(iou_type, stats, names, ap, ap50, pr50)

    def detection_instances(self, iou_type: str) -> vectorized.Instances:
        """The accumulated detections as flat arrays, in `results()` order, with COCO ``loadRes`` areas."""
        ids = sorted(self._images)
        entries = [self._images[i] for i in ids]
        counts = [len(e.scores) for e in entries]
        boxes = np.concatenate([e.xywh for e in entries]) if entries else np.zeros((0, 4))
        inst = vectorized.Instances(
            image_ids=np.repeat(np.asarray(ids, dtype=np.int64), counts),
            category_ids=np.concatenate([e.category_ids for e in entries]),
            areas=boxes[:, 2] * boxes[:, 3],
            boxes=boxes,
            scores=np.concatenate([e.scores for e in entries]),
        )
        if iou_type == "segm":
            rles = [r for e in entries for r in (e.rles or [])]
            inst.rles = rles
            inst.areas = np.asarray(mask_api.area(rles), dtype=np.float64) if rles else np.zeros(0)
        elif iou_type == "keypoints":
            k = 3 * len(self.kpt_sigmas or ())
            kp = [e.keypoints if e.keypoints is not None else np.zeros((0, k)) for e in entries]
            kpts = np.concatenate(kp) if kp else np.zeros((0, k))
            inst.keypoints = kpts
            x, y = kpts[:, 0::3], kpts[:, 1::3]
            inst.areas = (x.max(1) - x.min(1)) * (y.max(1) - y.min(1)) if len(kpts) else np.zeros(0)
        elif iou_type == "rotated":
            polys = [e.polygons if e.polygons is not None else np.zeros((0, 4, 2)) for e in entries]
            inst.polygons = np.concatenate(polys) if polys else np.zeros((0, 4, 2))
            inst.areas = vectorized.polygon_areas(inst.polygons)
        return inst

    def _compute_vectorized(self, iou_type: str) -> IouTypeResult:
        max_dets = [self.kpt_max_dets] if iou_type == "keypoints" else list(self.max_dets)
        acc = vectorized.evaluate(
            self.ground_truth_instances(iou_type),
            self.detection_instances(iou_type),
            iou_type,
            img_ids=sorted(self._images),
            cat_ids=sorted({int(c["id"]) for c in self.gt.dataset["categories"]}),
            max_dets=max_dets,
            kpt_sigmas=self.kpt_sigmas,
        )
        stats, names = summarize(
            acc.precision, acc.recall, acc.iou_thrs, acc.area_labels, acc.max_dets, iou_type
        )
        ap, ap50 = self._per_class_from(acc.precision, acc.cat_ids, acc.area_labels, acc.iou_thrs)
        pr50 = self._pr50_from(acc.precision, acc.cat_ids, acc.area_labels, acc.iou_thrs)
        return IouTypeResult(iou_type, stats, names, ap, ap50, pr50)

    def ground_truth_instances(self, iou_type: str) -> vectorized.Instances:
        """The ground truth of `iou_type` as flat arrays (built once, shared with the lucid backend)."""
        if iou_type not in self._gt_instances:
            self._gt_instances[iou_type] = vectorized.ground_truth_instances(self.gt.dataset, iou_type)
        instances: vectorized.Instances = self._gt_instances[iou_type]
        return instances

    def _pr50_from(
        self, precision: np.ndarray, cat_ids: Sequence[int], area_labels: Sequence[str], iou_thrs: np.ndarray
    ) -> np.ndarray:
        """(R, C) precision at IoU 0.5, area ``all``, the last maxDets, per contiguous class (-1: no ground truth)."""
        cat_index = {int(c): k for k, c in enumerate(cat_ids)}
        a = list(area_labels).index("all")
        t50 = int(np.where(iou_thrs == 0.5)[0][0])
        out = -np.ones((precision.shape[1], len(self.gt.category_ids)))
        for i, cat in enumerate(self.gt.category_ids):
            k = cat_index.get(int(cat))
            if k is not None:
                out[:, i] = precision[t50, :, k, a, -1]
        return out

    def _per_class(self, precision: np.ndarray, params: Any) -> tuple[tuple[float, ...], tuple[float, ...]]:
        return self._per_class_from(precision, params.catIds, params.areaRngLbl, np.asarray(params.iouThrs))

    def _per_class_from(
        self, precision: np.ndarray, cat_ids: Sequence[int], area_labels: Sequence[str], iou_thrs: np.ndarray
    ) -> tuple[tuple[float, ...], tuple[float, ...]]:
        cat_index = {int(c): k for k, c in enumerate(cat_ids)}
        a = list(area_labels).index("all")
        t50 = np.where(iou_thrs == 0.5)[0]
        ap: list[float] = []
        ap50: list[float] = []
        for cat in self.gt.category_ids:
            k = cat_index.get(int(cat))
            if k is None:
                ap.append(-1.0)
                ap50.append(-1.0)
                continue
            ap.append(summarize_mean(precision[:, :, k, a, -1]))
            ap50.append(summarize_mean(precision[t50, :, k, a, -1]))
        return tuple(ap), tuple(ap50)
