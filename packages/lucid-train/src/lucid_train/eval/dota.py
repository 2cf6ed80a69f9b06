"""The official DOTA Task-1 (oriented boxes) protocol: per-class VOC AP at polygon IoU 0.5, difficult ignored.

Definition: the DOTA devkit's Task-1 evaluation (github.com/CAPTAIN-WHU/DOTA_devkit, ``dota_evaluation_task1.py``,
the PASCAL VOC ``voc_eval`` with the IoU replaced by the exact polygon IoU; DOTA paper, Xia et al. CVPR 2018), per
class:

* ground truth: every object of the class in every image of the label set; ``npos`` counts the non-difficult
  ones;
* detections of the class over all images, sorted by descending score (ties keep file order: a stable sort;
  the devkit's ``np.argsort`` leaves ties unspecified);
* each detection is matched to the ground truth of its image with the largest polygon IoU (the first one on
  ties, annotation order), already-matched ones included; if that IoU is ``> 0.5`` (strictly): a difficult
  ground truth makes the detection neither TP nor FP, a free one makes it a TP (the object becomes matched), an
  already matched one makes it a FP (duplicate); otherwise it is a FP;
* ``rec = cumsum(tp) / npos``, ``prec = cumsum(tp) / max(cumsum(tp) + cumsum(fp), float64 eps)``;
* AP: the VOC 2007 11-point metric (mean over ``t in np.arange(0, 1.1, 0.1)`` of ``max(prec[rec >= t])``, 0
  when none) — the DOTA default — or the all-point area under the monotone precision envelope (VOC 2010+).

mAP is the mean AP over the classes with at least one non-difficult object (the devkit averages a fixed class
list and returns NaN for a class without ground truth; such classes are reported here with AP ``None``).

Files: labels are DOTA ``labelTxt`` files (``x1 y1 ... x4 y4 category difficult``, optional ``imagesource:`` /
``gsd:`` header lines; one file per image, the image name is the file stem), detections are Task-1 submission
files ``Task1_<class>.txt`` with lines ``image score x1 y1 ... x4 y4``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

TASK1_PREFIX = "Task1_"
DOTA_IOU_THRESHOLD = 0.5


class DotaFormatError(ValueError):
    """A DOTA label file or Task-1 detection file is missing or malformed (the message names file and line)."""


@dataclass
class DotaImageLabels:
    """The objects of one image: corners (N, 4, 2) float64 pixels, category names, difficult flags."""

    polygons: np.ndarray
    categories: list[str]
    difficult: np.ndarray


@dataclass
class Task1Detections:
    """The detections of one class: image names, scores (D,) and corners (D, 4, 2) float64 pixels."""

    images: list[str] = field(default_factory=list)
    scores: np.ndarray = field(default_factory=lambda: np.zeros(0))
    polygons: np.ndarray = field(default_factory=lambda: np.zeros((0, 4, 2)))

    def __len__(self) -> int:
        return len(self.images)


@dataclass(frozen=True)
class DotaClassResult:
    """Scores of one class: AP (07 and all-point; None without non-difficult ground truth) and counts."""

    name: str
    ap07: float | None
    ap: float | None
    num_gt: int  # non-difficult objects (npos)
    num_difficult: int
    num_det: int
    tp: int
    fp: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "class": self.name,
            "AP07": self.ap07,
            "AP": self.ap,
            "num_gt": self.num_gt,
            "num_difficult": self.num_difficult,
            "num_det": self.num_det,
            "tp": self.tp,
            "fp": self.fp,
        }


@dataclass(frozen=True)
class DotaResult:
    """DOTA Task-1 scores: per class and mAP (07 11-point and all-point)."""

    per_class: tuple[DotaClassResult, ...]
    num_images: int
    iou_threshold: float

    def _mean(self, attr: str) -> float | None:
        values = [getattr(c, attr) for c in self.per_class if getattr(c, attr) is not None]
        return float(np.mean(values)) if values else None

    @property
    def map07(self) -> float | None:
        return self._mean("ap07")

    @property
    def map(self) -> float | None:
        return self._mean("ap")

    def to_dict(self) -> dict[str, Any]:
        return {
            "protocol": "DOTA Task1 (devkit voc_eval, polygon IoU)",
            "iou_threshold": self.iou_threshold,
            "num_images": self.num_images,
            "mAP07": self.map07,
            "mAP": self.map,
            "per_class": [c.to_dict() for c in self.per_class],
        }


# ---------------------------------------------------------------------------------------------------- files
def read_label_dir(label_dir: str | Path) -> dict[str, DotaImageLabels]:
    """Every ``*.txt`` labelTxt file of a folder (image name = file stem), parsed strictly."""
    from lucid_data.readers.dota import parse_dota_file

    label_dir = Path(label_dir)
    if not label_dir.is_dir():
        raise DotaFormatError(f"--dota-labels {label_dir}: not a folder of DOTA labelTxt files")
    files = sorted(label_dir.glob("*.txt"))
    if not files:
        raise DotaFormatError(f"--dota-labels {label_dir}: no *.txt label files")
    out: dict[str, DotaImageLabels] = {}
    for path in files:
        parsed = parse_dota_file(path)
        if parsed.problems:
            more = f" (and {len(parsed.problems) - 1} more problems)" if len(parsed.problems) > 1 else ""
            raise DotaFormatError(f"DOTA label file {parsed.problems[0]}{more}")
        out[path.stem] = DotaImageLabels(parsed.corners, list(parsed.categories), parsed.difficult)
    return out


def read_task1_file(path: str | Path) -> Task1Detections:
    """One ``Task1_<class>.txt``: lines ``image score x1 y1 ... x4 y4`` (blank lines skipped)."""
    path = Path(path)
    images: list[str] = []
    values: list[list[float]] = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        tokens = line.split()
        if not tokens:
            continue
        if len(tokens) != 10:
            raise DotaFormatError(
                f"{path}:{lineno}: a Task-1 line is 'image score x1 y1 x2 y2 x3 y3 x4 y4' (10 fields), got "
                f"{len(tokens)}: {line.strip()!r}"
            )
        try:
            numbers = [float(t) for t in tokens[1:]]
        except ValueError as exc:
            raise DotaFormatError(
                f"{path}:{lineno}: score and coordinates must be numbers: {line.strip()!r}"
            ) from exc
        if not all(math.isfinite(v) for v in numbers):
            raise DotaFormatError(f"{path}:{lineno}: non-finite score or coordinate: {line.strip()!r}")
        images.append(tokens[0])
        values.append(numbers)
    arr = np.asarray(values, dtype=np.float64).reshape(-1, 9)
    return Task1Detections(images, arr[:, 0].copy(), arr[:, 1:].reshape(-1, 4, 2).copy())


def read_task1_dir(det_dir: str | Path) -> dict[str, Task1Detections]:
    """All ``Task1_<class>.txt`` files of a folder → class name → detections."""
    det_dir = Path(det_dir)
    if not det_dir.is_dir():
        raise DotaFormatError(f"--dota-dets {det_dir}: not a folder of Task1_<class>.txt files")
    files = sorted(det_dir.glob(f"{TASK1_PREFIX}*.txt"))
    if not files:
        raise DotaFormatError(f"--dota-dets {det_dir}: no {TASK1_PREFIX}<class>.txt files")
    return {p.stem[len(TASK1_PREFIX) :]: read_task1_file(p) for p in files}


def write_task1_dir(det_dir: str | Path, detections: Mapping[str, Task1Detections]) -> list[Path]:
    """Write one ``Task1_<class>.txt`` per class (atomically, ``lucid_core.atomic``); returns the paths."""
    from lucid_core.atomic import atomic_write_text

    det_dir = Path(det_dir)
    det_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, dets in sorted(detections.items()):
        flat = dets.polygons.reshape(-1, 8)
        lines = [
            f"{image} {score:.6g} " + " ".join(f"{v:.2f}" for v in poly) + "\n"
            for image, score, poly in zip(dets.images, dets.scores.tolist(), flat.tolist())
        ]
        path = det_dir / f"{TASK1_PREFIX}{name}.txt"
        atomic_write_text(path, "".join(lines))
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------------------- metric
def voc_ap(recall: np.ndarray, precision: np.ndarray, use_07_metric: bool = True) -> float:
    """VOC AP of a recall/precision curve: 11-point (VOC 2007, DOTA's default) or all-point (module docstring)."""
    if use_07_metric:
        ap = 0.0
        for t in np.arange(0.0, 1.1, 0.1):  # the devkit's exact thresholds (0.30000000000000004 included)
            above = recall >= t
            p = float(np.max(precision[above])) if above.any() else 0.0
            ap += p / 11.0
        return ap
    mrec = np.concatenate(([0.0], recall, [1.0]))
    mpre = np.concatenate(([0.0], precision, [0.0]))
    mpre = np.maximum.accumulate(mpre[::-1])[::-1]
    i = np.flatnonzero(mrec[1:] != mrec[:-1])
    return float(np.sum((mrec[i + 1] - mrec[i]) * mpre[i + 1]))


def _class_ap(
    name: str,
    labels: Mapping[str, DotaImageLabels],
    dets: Task1Detections,
    iou_threshold: float,
) -> DotaClassResult:
    from lucid_core.geometry.polygon_iou import paired_polygon_iou

    image_index = {image: k for k, image in enumerate(labels)}
    g_polys, g_img, g_diff = [], [], []
    for image, lab in labels.items():
        sel = [i for i, c in enumerate(lab.categories) if c == name]
        if sel:
            g_polys.append(lab.polygons[sel])
            g_img.append(np.full(len(sel), image_index[image], dtype=np.int64))
            g_diff.append(lab.difficult[sel])
    gt_poly = np.concatenate(g_polys) if g_polys else np.zeros((0, 4, 2))
    gt_img = np.concatenate(g_img) if g_img else np.zeros(0, np.int64)
    gt_diff = np.concatenate(g_diff) if g_diff else np.zeros(0, bool)
    npos = int((~gt_diff).sum())
    nd = len(dets)
    missing = [im for im in dets.images if im not in image_index]
    if missing:
        raise DotaFormatError(
            f"{TASK1_PREFIX}{name}.txt: image {missing[0]!r} has no label file among the {len(labels)} given "
            f"({len(missing)} detection(s) affected)"
        )
    order = np.argsort(-dets.scores, kind="stable")
    d_img = np.array([image_index[dets.images[i]] for i in order], dtype=np.int64)
    d_poly = dets.polygons[order]
    # ground truth of the class grouped by image (annotation order kept), pairs (detection, its image's GT)
    g_order = np.argsort(gt_img, kind="stable")
    starts = np.searchsorted(gt_img[g_order], np.arange(len(labels)), side="left")
    ends = np.searchsorted(gt_img[g_order], np.arange(len(labels)), side="right")
    counts = (ends - starts)[d_img]
    pair_det = np.repeat(np.arange(nd), counts)
    offset = np.arange(pair_det.size) - np.repeat(np.cumsum(counts) - counts, counts)
    pair_gt = g_order[np.repeat(starts[d_img], counts) + offset]
    ious = (
        paired_polygon_iou(torch.from_numpy(d_poly[pair_det]), torch.from_numpy(gt_poly[pair_gt])).numpy()
        if pair_det.size
        else np.zeros(0)
    )
    # per detection: the max IoU and its first maximal ground truth (a detection's pairs are contiguous and in
    # annotation order, so the smallest maximal pair index is the devkit's argmax)
    ovmax = np.full(nd, -np.inf)
    np.maximum.at(ovmax, pair_det, ious)
    maximal = np.flatnonzero(ious == ovmax[pair_det])
    first_pair = np.full(nd, pair_det.size, dtype=np.int64)
    np.minimum.at(first_pair, pair_det[maximal], maximal)
    has = first_pair < pair_det.size
    best_gt = np.full(nd, -1, dtype=np.int64)
    best_gt[has] = pair_gt[first_pair[has]]
    best_difficult = np.zeros(nd, dtype=bool)
    best_difficult[has] = gt_diff[best_gt[has]]
    matched = ovmax > iou_threshold
    tp = np.zeros(nd)
    fp = np.zeros(nd)
    fp[~matched] = 1.0
    regular = matched & ~best_difficult
    cand = np.flatnonzero(regular)  # in score order
    _, first_use = np.unique(best_gt[cand], return_index=True)
    tp_idx = cand[first_use]
    tp[tp_idx] = 1.0
    dup = np.setdiff1d(cand, tp_idx)
    fp[dup] = 1.0
    ctp, cfp = np.cumsum(tp), np.cumsum(fp)
    ap07 = ap = None
    if npos > 0:
        rec = ctp / float(npos)
        prec = ctp / np.maximum(ctp + cfp, np.finfo(np.float64).eps)
        ap07 = voc_ap(rec, prec, use_07_metric=True)
        ap = voc_ap(rec, prec, use_07_metric=False)
    return DotaClassResult(
        name=name,
        ap07=ap07,
        ap=ap,
        num_gt=npos,
        num_difficult=int(gt_diff.sum()),
        num_det=nd,
        tp=int(tp.sum()),
        fp=int(fp.sum()),
    )


def evaluate_dota(
    labels: Mapping[str, DotaImageLabels],
    detections: Mapping[str, Task1Detections],
    *,
    classes: Iterable[str] | None = None,
    iou_threshold: float = DOTA_IOU_THRESHOLD,
) -> DotaResult:
    """DOTA Task-1 scores of `detections` (class → detections) against `labels` (image → objects).

    ``classes`` defaults to every category of the labels and of the detections, sorted.
    """
    if classes is None:
        found = {c for lab in labels.values() for c in lab.categories} | set(detections)
        names: Sequence[str] = sorted(found)
    else:
        names = list(classes)
    per_class = tuple(
        _class_ap(name, labels, detections.get(name, Task1Detections()), iou_threshold) for name in names
    )
    return DotaResult(per_class=per_class, num_images=len(labels), iou_threshold=iou_threshold)


def evaluate_dota_dirs(
    label_dir: str | Path, det_dir: str | Path, *, iou_threshold: float = DOTA_IOU_THRESHOLD
) -> DotaResult:
    """`evaluate_dota` of a labelTxt folder and a folder of ``Task1_<class>.txt`` files."""
    return evaluate_dota(read_label_dir(label_dir), read_task1_dir(det_dir), iou_threshold=iou_threshold)


def format_dota_table(result: DotaResult) -> str:
    """Per-class AP (07 and all-point) and mAP as a fixed-width text table."""

    def fmt(v: float | None) -> str:
        return "   -  " if v is None else f"{v:.4f}"

    width = max([len("class"), *(len(c.name) for c in result.per_class)])
    lines = [f"{'class':<{width}}  {'AP07':>6}  {'AP':>6}  {'gt':>6}  {'det':>7}"]
    for c in result.per_class:
        lines.append(f"{c.name:<{width}}  {fmt(c.ap07):>6}  {fmt(c.ap):>6}  {c.num_gt:>6}  {c.num_det:>7}")
    lines.append(f"{'mAP':<{width}}  {fmt(result.map07):>6}  {fmt(result.map):>6}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- tiles
def merge_task1_tiles(
    detections: Mapping[str, Task1Detections], *, iou_threshold: float | None = None
) -> dict[str, Task1Detections]:
    """Tile-level Task-1 detections (image = devkit tile name) → whole-scene detections, per class:
    mapped back by offset and rate, then greedy polygon NMS at IoU 0.1 (`lucid_data.dota_tiles`)."""
    from lucid_data.dota_tiles import MERGE_NMS_IOU, merge_tile_detections, parse_tile_name

    thr = MERGE_NMS_IOU if iou_threshold is None else float(iou_threshold)
    out: dict[str, Task1Detections] = {}
    for name, dets in detections.items():
        rows: dict[str, list[int]] = {}
        for i, image in enumerate(dets.images):
            rows.setdefault(image, []).append(i)
        tiles = []
        for image, idx in rows.items():
            try:
                tile = parse_tile_name(image)
            except ValueError as exc:
                raise DotaFormatError(f"{TASK1_PREFIX}{name}.txt: {exc}") from exc
            sel = np.asarray(idx)
            tiles.append((tile, dets.polygons[sel], dets.scores[sel], np.zeros(sel.size, np.int64)))
        merged = merge_tile_detections(tiles, iou_threshold=thr)
        scenes = sorted(merged)
        out[name] = Task1Detections(
            images=[s for s in scenes for _ in range(len(merged[s].scores))],
            scores=np.concatenate([merged[s].scores for s in scenes]) if scenes else np.zeros(0),
            polygons=np.concatenate([merged[s].polygons for s in scenes]) if scenes else np.zeros((0, 4, 2)),
        )
    return out


def predict_task1(
    model: Any,
    images: Iterable[tuple[str, Any]],
    *,
    names: Sequence[str] | None = None,
    imgsz: int,
    conf: float,
    iou: float,
    max_det: int,
    device: str = "cpu",
    decode: str | None = None,
) -> dict[str, Task1Detections]:
    """Predict obb boxes on every ``(image name, image)`` (a path or an HWC uint8 RGB array) and return them as
    Task-1 detections (corners of each rotated box in that image's pixels, class = the model's class name)."""
    from lucid_core.geometry.rotated import rboxes_to_polygons
    from lucid_core.inference import predict_prepared, prepare_inference_model

    names = list(names) if names is not None else [str(i) for i in range(int(model.num_classes))]
    net, mode = prepare_inference_model(model, decode=decode, device=device)  # type: ignore[arg-type]
    per_class: dict[str, tuple[list[str], list[np.ndarray], list[np.ndarray]]] = {
        n: ([], [], []) for n in names
    }
    for image_name, image in images:
        (det,) = predict_prepared(
            net, image, mode=mode, imgsz=imgsz, conf=conf, iou=iou, max_det=max_det, device=device
        )
        if det.rboxes is None:
            raise ValueError(
                f"{image_name}: the model predicts no rotated boxes (task {model.task!r}, expected obb)"
            )
        polys = rboxes_to_polygons(det.rboxes.double()).numpy()
        scores = det.scores.double().numpy()
        labels = det.labels.numpy()
        for c in np.unique(labels):
            sel = labels == c
            names_out, ss, ps = per_class[names[int(c)]]
            names_out.extend([image_name] * int(sel.sum()))
            ss.append(scores[sel])
            ps.append(polys[sel])
    return {
        n: Task1Detections(
            names_out,
            np.concatenate(ss) if ss else np.zeros(0),
            np.concatenate(ps) if ps else np.zeros((0, 4, 2)),
        )
        for n, (names_out, ss, ps) in per_class.items()
    }


# ---------------------------------------------------------------------------------------------------- CLI
def dota_mode_requested(args: Any) -> bool:
    """Whether ``lucid-eval`` was asked for the DOTA protocol (``--dota-labels`` / ``--dota-dets`` /
    ``--merge-tiles``)."""
    return bool(
        getattr(args, "dota_labels", None)
        or getattr(args, "dota_dets", None)
        or getattr(args, "merge_tiles", False)
        or getattr(args, "split_scenes", False)
    )


def run_dota(args: Any) -> dict[str, Any]:
    """``lucid-eval --task obb --dota-labels DIR (--dota-dets DIR | --weights W --data IMAGES) [--merge-tiles]
    [--split-scenes]``: read (or predict, on tiles split here) Task-1 detections, merge tiles, score, write the
    report; returns it."""
    from lucid_train.eval.report import _finite, versions, write_report

    task = getattr(args, "task", None)
    if task not in (None, "obb"):
        raise DotaFormatError(f"--task {task}: the DOTA protocol scores oriented boxes, use --task obb")
    if not args.dota_labels:
        raise DotaFormatError("--dota-labels DIR is required for DOTA scoring (the labelTxt folder)")
    if bool(args.dota_dets) == bool(args.weights):
        raise DotaFormatError(
            "DOTA scoring needs exactly one detection source: --dota-dets DIR (Task1_<class>.txt files) or "
            "--weights W with --data IMAGE_DIR (predicted here)"
        )
    labels = read_label_dir(args.dota_labels)
    split = bool(getattr(args, "split_scenes", False))
    if split and not args.weights:
        raise DotaFormatError("--split-scenes splits the --data scenes for prediction: it needs --weights")
    run_info: dict[str, Any] = {
        "labels": str(args.dota_labels),
        "merge_tiles": bool(args.merge_tiles) or split,
    }
    if args.dota_dets:
        detections = read_task1_dir(args.dota_dets)
        run_info["detections"] = str(args.dota_dets)
    else:
        detections = _predict_for_dota(args, run_info)
    if args.merge_tiles or getattr(args, "split_scenes", False):
        from lucid_data.dota_tiles import MERGE_NMS_IOU

        detections = merge_task1_tiles(detections)
        run_info["merge_nms_iou"] = MERGE_NMS_IOU
    if getattr(args, "merged_dets", None):
        write_task1_dir(args.merged_dets, detections)
        run_info["merged_dets"] = str(args.merged_dets)
    result = evaluate_dota(labels, detections)
    report: dict[str, Any] = {"format": "lucid-eval-dota-report/1", **run_info, "versions": versions()}
    report.update(result.to_dict())
    report = _finite(report)
    write_report(args.output, report)
    report["_table"] = format_dota_table(result)
    return report


def _predict_for_dota(args: Any, run_info: dict[str, Any]) -> dict[str, Task1Detections]:
    from lucid_core.checkpoint import CheckpointError, load_checkpoint
    from lucid_core.inference import list_image_files
    from lucid_train.eval.report import sha256_file

    if not args.data or not Path(args.data).is_dir():
        raise DotaFormatError(
            f"--data {args.data}: with --weights, DOTA scoring needs a folder of images (tiles)"
        )
    try:
        checkpoint = load_checkpoint(args.weights, map_location=args.device)
    except (CheckpointError, FileNotFoundError) as exc:
        raise DotaFormatError(f"--weights: {exc}") from exc
    model = checkpoint.model
    if model.task != "obb":
        raise DotaFormatError(
            f"--weights {args.weights}: a {model.task!r} model, DOTA scoring needs an obb model"
        )
    files = list_image_files(args.data)
    if not files:
        raise DotaFormatError(f"--data {args.data}: no image files")
    imgsz = int(args.imgsz or checkpoint.imgsz)
    assert checkpoint.weights_path is not None
    images: Iterable[tuple[str, Any]] = ((p.stem, p) for p in files)
    if getattr(args, "split_scenes", False):
        images = _split_scene_files(files, args.tile_size, args.gap, args.rates)
        run_info.update(split={"tile_size": args.tile_size, "gap": args.gap, "rates": list(args.rates)})
    run_info.update(
        weights=str(args.weights),
        weights_sha256=sha256_file(checkpoint.weights_path),
        data=str(args.data),
        imgsz=imgsz,
        conf=args.conf,
        iou=args.iou,
        max_det=args.max_det,
    )
    return predict_task1(
        model,
        images,
        names=list(checkpoint.names),
        imgsz=imgsz,
        conf=args.conf,
        iou=args.iou,
        max_det=args.max_det,
        device=args.device,
    )


def _split_scene_files(
    files: Sequence[Path], tile_size: int, gap: int, rates: Sequence[float]
) -> Iterator[tuple[str, np.ndarray]]:
    """Devkit tiles (name, RGB array) of every whole scene, in memory (`lucid_data.dota_tiles.split_scene`)."""
    from lucid_data.dota_tiles import split_scene
    from lucid_data.imageio import load_image

    if tile_size <= 0 or not 0 <= gap < tile_size:
        raise DotaFormatError(
            f"--tile-size {tile_size} --gap {gap}: need tile size > 0 and 0 <= gap < tile size"
        )
    if not rates or any(r <= 0 for r in rates):
        raise DotaFormatError(f"--rates {list(rates)}: need positive scale factors, e.g. --rates 1.0 0.5")
    for path in files:
        for name, tile in split_scene(load_image(path), path.stem, tile_size=tile_size, gap=gap, rates=rates):
            yield str(name), np.ascontiguousarray(tile)
