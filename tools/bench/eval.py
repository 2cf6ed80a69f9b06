"""Benchmark: COCO bbox scoring time of `lucid_train.eval.COCOEvaluator` vs pycocotools, same detections.

Synthetic set (issue 7): 5,000 images, 80 classes, about 7 ground-truth boxes per image (Poisson), some of them
crowd, some images empty, and 100 detections per image (jittered copies of the ground truth plus random boxes,
random scores). Both sides get the same detections; the pycocotools side is the reference pipeline
(``COCO.loadRes`` → ``COCOeval.evaluate`` → ``accumulate`` → ``summarize``), ours is ``update`` per image then
``compute``. The stats of the two are checked for equality and the ratio of wall times is printed.

Run: ``uv run --no-sync python tools/bench/eval.py [--images 5000] [--backend lucid] [--with-faster]``.
Measured (2 shared cores, busy machine): 500 images: faster-coco-eval 3.1 s vs pycocotools 12.3 s (3.9×), hence
the vectorised default backend; 5,000 images: ours 13.4 s vs pycocotools 654 s (48.7×), stats identical.

``--task obb`` (issue 17): rotated scoring of a synthetic DOTA-like set (default 1,000 images of 1024×1024,
15 classes, about 20 rotated objects per image, 5% difficult, 100 detections per image) with the DOTA Task-1
protocol (`lucid_train.eval.dota.evaluate_dota`, batched polygon IoU), timed against a per-pair reference in
the same run: the devkit's ``voc_eval`` loop (one detection at a time, hull prefilter, one polygon IoU call per
pair) with shapely's polygon intersection when shapely is installed, else a plain-Python Sutherland–Hodgman
clip per pair. Both must give the same AP per class (07 and all-point, within 1e-9); the ratio is printed. The
COCO-style ``rotated`` IoU type of `COCOEvaluator` is timed on the same set too.

``--artifacts`` (500 images unless ``--images`` says otherwise): what the validation artefacts of ``lucid-eval
--plots`` add to a ``lucid-eval`` run of that set, measured in this process (target: ≤ 10 %; docs/EVALUATION.md,
"Validation artefacts"). The run without them is the model part and the scoring part of ``lucid-eval``:
``ModelScorer.detections`` (eval-mode forward + NMS decode) of a yolo26 n with the set's 80 classes on the set's
images as the default rectangular batches of 16 at ``--imgsz`` 640 (random pixels; image decoding left out), then
`COCOEvaluator` on the set's detections (a random-init model detects nothing, so the scored detections are the
synthetic ones, as in the rest of this benchmark). The artefacts are `build_artifacts` (confusion matrix, PR and
confidence curves, per-class table) and `write_artifacts` (the tables and, with lucid-viz, the seven figures,
matplotlib's import included: the first figure of a ``lucid-eval`` process pays it). The printed ratio is (run +
artefacts) / run, each part timed once in this process: timing a second whole run instead would add the run's own
variance on a shared machine, larger than the artefacts.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
from typing import Any

import numpy as np
import torch

from lucid_core.models import build_model
from lucid_core.results import Detections
from lucid_data.rect import rect_batches
from lucid_train.eval import COCOEvaluator, CocoGroundTruth, ModelScorer
from lucid_train.eval.artifacts import build_artifacts, write_artifacts


def synthetic_set(
    num_images: int,
    num_classes: int = 80,
    gt_per_image: float = 7.0,
    dets_per_image: int = 100,
    seed: int = 0,
) -> tuple[CocoGroundTruth, list[tuple[int, Detections]]]:
    """A COCO ground truth (crowds, empty images) and per-image detections in original pixels."""
    rng = np.random.default_rng(seed)
    images: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    detections: list[tuple[int, Detections]] = []
    for image_id in range(1, num_images + 1):
        h, w = int(rng.integers(240, 641)), int(rng.integers(240, 641))
        images.append({"id": image_id, "file_name": f"{image_id:06d}.jpg", "height": h, "width": w})
        n = 0 if rng.random() < 0.05 else int(rng.poisson(gt_per_image))
        wh = rng.uniform(0.02, 0.6, (n, 2)) * (w, h)
        xy = rng.uniform(0, 1, (n, 2)) * ((w, h) - wh)
        cls = rng.integers(0, num_classes, n)
        crowd = rng.random(n) < 0.03
        for i in range(n):
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": image_id,
                    "category_id": int(cls[i]) + 1,
                    "bbox": [float(xy[i, 0]), float(xy[i, 1]), float(wh[i, 0]), float(wh[i, 1])],
                    "area": float(wh[i, 0] * wh[i, 1]),
                    "iscrowd": int(crowd[i]),
                }
            )
        # detections: up to 3 jittered copies per object, the rest random boxes
        copies = np.repeat(np.arange(n), 3)[:dets_per_image]
        jitter = rng.normal(0, 0.08, (copies.size, 4)) * np.tile(wh[copies], 2) if n else np.zeros((0, 4))
        boxes_gt = np.concatenate([xy, xy + wh], 1)[copies] + jitter if n else np.zeros((0, 4))
        labels_gt = np.where(
            rng.random(copies.size) < 0.9, cls[copies], rng.integers(0, num_classes, copies.size)
        )
        m = dets_per_image - copies.size
        rwh = rng.uniform(0.02, 0.6, (m, 2)) * (w, h)
        rxy = rng.uniform(0, 1, (m, 2)) * ((w, h) - rwh)
        boxes = np.concatenate([boxes_gt, np.concatenate([rxy, rxy + rwh], 1)])
        labels = np.concatenate([labels_gt, rng.integers(0, num_classes, m)])
        scores = rng.random(dets_per_image)
        detections.append(
            (
                image_id,
                Detections(
                    boxes=torch.from_numpy(boxes).float(),
                    scores=torch.from_numpy(scores).float(),
                    labels=torch.from_numpy(labels).long(),
                ),
            )
        )
    categories = [{"id": c + 1, "name": f"class{c}"} for c in range(num_classes)]
    gt = CocoGroundTruth.from_coco_dict(
        {"images": images, "annotations": annotations, "categories": categories}
    )
    return gt, detections


def time_ours(
    gt: CocoGroundTruth, detections: list[tuple[int, Detections]], backend: str
) -> tuple[float, list[float]]:
    seconds, stats, _, _ = _score(gt, detections, backend)
    return seconds, stats


def _score(
    gt: CocoGroundTruth, detections: list[tuple[int, Detections]], backend: str
) -> tuple[float, list[float], COCOEvaluator, Any]:
    tic = time.perf_counter()
    evaluator = COCOEvaluator(gt, ("bbox",), backend=backend)
    for image_id, det in detections:
        evaluator.update(image_id, det)
    result = evaluator.compute()
    stats = list(result.per_type["bbox"].stats)
    return time.perf_counter() - tic, stats, evaluator, result


def time_inference(gt: CocoGroundTruth, *, imgsz: int, batch: int, family: str, seed: int) -> float:
    """Seconds of ``lucid-eval``'s model part on the images of ``gt``: a ``family`` n detector with the set's
    classes, eval-mode forward + NMS decode (``ModelScorer.detections``) of the default rectangular batches."""
    torch.manual_seed(seed)
    model = build_model(family=family, task="detect", scale="n", num_classes=gt.num_classes).eval()
    sizes = [(int(im["height"]), int(im["width"])) for im in gt.dataset["images"]]
    batches = rect_batches(sizes, batch, imgsz, stride=max(model.strides), pad=0.5)
    scorer = ModelScorer(gt, task="detect", num_classes=gt.num_classes, multi_label=True)
    generator = torch.Generator().manual_seed(seed)
    inputs = [
        torch.randint(0, 256, (len(indices), 3, h, w), dtype=torch.uint8, generator=generator)
        for indices, (h, w) in zip(batches.batches, batches.shapes, strict=True)
    ]
    tic = time.perf_counter()
    for images in inputs:
        scorer.detections(model, images, "nms")
    return time.perf_counter() - tic


def time_artifacts(
    gt: CocoGroundTruth,
    detections: list[tuple[int, Detections]],
    backend: str,
    *,
    imgsz: int = 640,
    batch: int = 16,
    family: str = "yolo26",
    seed: int = 0,
) -> float:
    """What the artefacts add to a ``lucid-eval`` run of the set (module docstring); returns the ratio
    (run + artefacts) / run."""
    infer_s = time_inference(gt, imgsz=imgsz, batch=batch, family=family, seed=seed)
    score_s, _, evaluator, result = _score(gt, detections, backend)
    run_s = infer_s + score_s
    tic = time.perf_counter()
    artifacts = build_artifacts(evaluator, result)
    build_s = time.perf_counter() - tic
    with tempfile.TemporaryDirectory() as folder:
        tic = time.perf_counter()
        written = write_artifacts(artifacts, folder)
        write_s = time.perf_counter() - tic
    added = build_s + write_s
    ratio = (run_s + added) / run_s
    print(
        f"lucid-eval run without artefacts: {run_s:.2f} s ({family} n @ {imgsz}: inference {infer_s:.2f} s, "
        f"scoring {score_s:.2f} s)\n"
        f"artefacts: {added:.2f} s (building {build_s:.2f} s, writing {len(written)} files {write_s:.2f} s; "
        f"{added / score_s:.1f}x the scoring alone)\n"
        f"ratio with / without artefacts: {ratio:.3f} (+{100 * (ratio - 1):.1f} %, target <= +10 %)"
    )
    return ratio


def time_pycocotools(gt: CocoGroundTruth, results: list[dict[str, object]]) -> tuple[float, list[float]]:
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    tic = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = gt.copy_dataset()
        coco_gt.createIndex()
        coco_dt = coco_gt.loadRes(results)
        evaluator = COCOeval(coco_gt, coco_dt, "bbox")
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return time.perf_counter() - tic, [float(s) for s in evaluator.stats]


def synthetic_obb_set(
    num_images: int,
    num_classes: int = 15,
    gt_per_image: float = 20.0,
    dets_per_image: int = 100,
    seed: int = 0,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """DOTA-like labels (image → DotaImageLabels) and Task-1 detections (class → Task1Detections)."""
    from lucid_core.geometry.rotated import rboxes_to_polygons
    from lucid_train.eval.dota import DotaImageLabels, Task1Detections

    rng = np.random.default_rng(seed)
    names = [f"class{c}" for c in range(num_classes)]
    labels: dict[str, Any] = {}
    per_class: dict[str, tuple[list[str], list[float], list[np.ndarray]]] = {n: ([], [], []) for n in names}

    def corners(rb: np.ndarray) -> np.ndarray:
        return rboxes_to_polygons(torch.from_numpy(rb).reshape(-1, 5)).numpy()

    for k in range(num_images):
        image = f"P{k:05d}"
        n = int(rng.poisson(gt_per_image))
        rb = np.column_stack(
            [rng.uniform(0, 1024, (n, 2)), rng.uniform(8, 120, (n, 2)), rng.uniform(-np.pi / 2, np.pi / 2, n)]
        )
        cls = rng.integers(0, num_classes, n)
        labels[image] = DotaImageLabels(corners(rb), [names[c] for c in cls], rng.random(n) < 0.05)
        copies = np.repeat(np.arange(n), 3)[:dets_per_image]
        jitter = rng.normal(0, 1, (copies.size, 5)) * [4, 4, 4, 4, 0.1]
        d_rb = np.concatenate([rb[copies] + jitter, np.column_stack([
            rng.uniform(0, 1024, (dets_per_image - copies.size, 2)),
            rng.uniform(8, 120, (dets_per_image - copies.size, 2)),
            rng.uniform(-np.pi / 2, np.pi / 2, dets_per_image - copies.size),
        ])])  # fmt: skip
        d_rb[:, 2:4] = np.abs(d_rb[:, 2:4]) + 1
        d_cls = np.concatenate(
            [np.where(rng.random(copies.size) < 0.9, cls[copies], rng.integers(0, num_classes, copies.size)),
             rng.integers(0, num_classes, dets_per_image - copies.size)]
        )  # fmt: skip
        d_poly = corners(d_rb)
        scores = rng.random(dets_per_image)
        for i in range(dets_per_image):
            images, ss, ps = per_class[names[d_cls[i]]]
            images.append(image)
            ss.append(float(scores[i]))
            ps.append(d_poly[i])
    dets = {
        n: Task1Detections(im, np.asarray(ss), np.stack(ps) if ps else np.zeros((0, 4, 2)))
        for n, (im, ss, ps) in per_class.items()
    }
    return labels, dets


def _clip_area_python(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Intersection area of two counter-clockwise convex polygons: Sutherland–Hodgman, one pair, plain Python."""
    out = a
    for k in range(len(b)):
        (ax, ay), (bx, by) = b[k], b[(k + 1) % len(b)]
        ex, ey = bx - ax, by - ay
        inp, out = out, []
        for i in range(len(inp)):
            (px, py), (qx, qy) = inp[i], inp[(i + 1) % len(inp)]
            sp = ex * (py - ay) - ey * (px - ax)
            sq = ex * (qy - ay) - ey * (qx - ax)
            if sp >= 0:
                out.append((px, py))
            if (sp >= 0) != (sq >= 0):
                t = sp / (sp - sq)
                out.append((px + t * (qx - px), py + t * (qy - py)))
        if len(out) < 3:
            return 0.0
    n = len(out)
    return 0.5 * sum(out[i][0] * out[(i + 1) % n][1] - out[(i + 1) % n][0] * out[i][1] for i in range(n))


def _pair_iou_reference() -> tuple[str, Any]:
    """(name, iou(poly_a, poly_b)) of the per-pair reference: shapely if importable, else plain Python."""
    try:
        from shapely.geometry import Polygon
    except ImportError:

        def ccw(p: np.ndarray) -> list[tuple[float, float]]:
            pts = [(float(x), float(y)) for x, y in p]
            area2 = sum(pts[i][0] * pts[(i + 1) % 4][1] - pts[(i + 1) % 4][0] * pts[i][1] for i in range(4))
            return pts if area2 >= 0 else pts[::-1]

        def area(p: list[tuple[float, float]]) -> float:
            return 0.5 * abs(sum(p[i][0] * p[(i + 1) % 4][1] - p[(i + 1) % 4][0] * p[i][1] for i in range(4)))

        def iou_python(a: np.ndarray, b: np.ndarray) -> float:
            pa, pb = ccw(a), ccw(b)
            inter = _clip_area_python(pa, pb)
            union = area(pa) + area(pb) - inter
            return inter / union if union > 0 else 0.0

        return "plain-Python Sutherland-Hodgman per pair", iou_python

    def iou_shapely(a: np.ndarray, b: np.ndarray) -> float:
        pa, pb = Polygon(a), Polygon(b)
        inter = pa.intersection(pb).area
        union = pa.area + pb.area - inter
        return float(inter / union) if union > 0 else 0.0

    return "shapely per pair", iou_shapely


def devkit_reference(
    labels: dict[str, Any], dets: dict[str, Any]
) -> tuple[str, dict[str, tuple[float, float]]]:
    """The devkit's voc_eval, detection by detection (hull prefilter, one polygon IoU per pair)."""
    from lucid_train.eval.dota import voc_ap

    name, pair_iou = _pair_iou_reference()
    out: dict[str, tuple[float, float]] = {}
    for cls, d in dets.items():
        recs = {}
        npos = 0
        for image, lab in labels.items():
            sel = [i for i, c in enumerate(lab.categories) if c == cls]
            recs[image] = (lab.polygons[sel], lab.difficult[sel], [False] * len(sel))
            npos += int((~lab.difficult[sel]).sum())
        order = np.argsort(-d.scores, kind="stable")
        tp, fp = np.zeros(len(order)), np.zeros(len(order))
        for rank, i in enumerate(order):
            polys, difficult, used = recs[d.images[i]]
            bb = d.polygons[i]
            ovmax, jmax = -np.inf, -1
            if len(polys):
                lo, hi = polys.min(1), polys.max(1)
                near = np.flatnonzero((lo < bb.max(0)).all(1) & (hi > bb.min(0)).all(1))
                if near.size:
                    overlaps = [pair_iou(bb, polys[j]) for j in near]
                    jmax = int(near[int(np.argmax(overlaps))])
                    ovmax = max(overlaps)
            if ovmax > 0.5:
                if not difficult[jmax]:
                    if not used[jmax]:
                        tp[rank] = 1
                        used[jmax] = True
                    else:
                        fp[rank] = 1
            else:
                fp[rank] = 1
        ctp, cfp = np.cumsum(tp), np.cumsum(fp)
        rec = ctp / max(npos, 1)
        prec = ctp / np.maximum(ctp + cfp, np.finfo(np.float64).eps)
        out[cls] = (voc_ap(rec, prec, True), voc_ap(rec, prec, False))
    return name, out


def main_obb(num_images: int, seed: int) -> int:
    from lucid_data.targets import Targets
    from lucid_train.eval.coco_gt import GtImage
    from lucid_train.eval.dota import evaluate_dota

    labels, dets = synthetic_obb_set(num_images, seed=seed)
    n_gt = sum(len(lab.categories) for lab in labels.values())
    n_det = sum(len(d) for d in dets.values())
    print(f"synthetic obb set: {num_images} images, {len(dets)} classes, {n_gt} objects, {n_det} detections")
    tic, cpu = time.perf_counter(), time.process_time()
    ours = evaluate_dota(labels, dets)
    ours_s, ours_cpu = time.perf_counter() - tic, time.process_time() - cpu
    tic, cpu = time.perf_counter(), time.process_time()
    ref_name, ref = devkit_reference(labels, dets)
    ref_s, ref_cpu = time.perf_counter() - tic, time.process_time() - cpu
    worst = 0.0
    for c in ours.per_class:
        r07, rall = ref[c.name]
        worst = max(worst, abs((c.ap07 or 0.0) - r07), abs((c.ap or 0.0) - rall))
    print(
        f"DOTA Task1: ours {ours_s:.2f} s ({ours_cpu:.2f} s CPU)   devkit loop ({ref_name}): {ref_s:.2f} s "
        f"({ref_cpu:.2f} s CPU)   ratio: {ref_s / ours_s:.1f}x wall, {ref_cpu / ours_cpu:.1f}x CPU"
    )
    print(f"mAP07={ours.map07:.6f} mAP={ours.map:.6f}  largest AP difference vs reference: {worst:.2e}")
    # COCO-style rotated mAP on the same set
    names = sorted(dets)
    index = {n: i for i, n in enumerate(names)}
    images = list(labels)
    gt_images = []
    for k, image in enumerate(images):
        lab = labels[image]
        poly = lab.polygons
        gt_images.append(
            GtImage(
                image_id=k + 1,
                file_name=f"{image}.png",
                height=1024,
                width=1024,
                targets=Targets(
                    boxes=np.concatenate([poly.min(1), poly.max(1)], 1) if len(poly) else np.zeros((0, 4)),
                    labels=np.array([index[c] for c in lab.categories], dtype=np.int64),
                    polygons=list(poly),
                    rboxes=polygons_to_rboxes_np(poly),
                    difficult=lab.difficult,
                ),
            )
        )
    gt = CocoGroundTruth.from_targets(gt_images, names)
    per_image: dict[str, list[tuple[int, float, np.ndarray]]] = {im: [] for im in images}
    for n, d in dets.items():
        for im, score, poly in zip(d.images, d.scores.tolist(), d.polygons):
            per_image[im].append((index[n], score, poly))
    tic = time.perf_counter()
    evaluator = COCOEvaluator(gt, ("rotated",))
    for k, image in enumerate(images):
        rows = per_image[image]
        poly = np.stack([r[2] for r in rows]) if rows else np.zeros((0, 4, 2))
        evaluator.update(
            k + 1,
            Detections(
                boxes=torch.from_numpy(np.concatenate([poly.min(1), poly.max(1)], 1)).float(),
                scores=torch.tensor([r[1] for r in rows], dtype=torch.float32),
                labels=torch.tensor([r[0] for r in rows], dtype=torch.int64),
                rboxes=torch.from_numpy(polygons_to_rboxes_np(poly)),
            ),
        )
    res = evaluator.compute().per_type["rotated"]
    print(
        f"COCO-style rotated: {time.perf_counter() - tic:.2f} s   mAP50={res.map50:.6f} mAP50-95={res.map50_95:.6f}"
    )
    return 0 if worst <= 1e-9 else 1


def polygons_to_rboxes_np(polygons: np.ndarray) -> np.ndarray:
    from lucid_core.geometry.rotated import polygons_to_rboxes

    if len(polygons) == 0:
        return np.zeros((0, 5), np.float32)
    return polygons_to_rboxes(torch.from_numpy(np.asarray(polygons, dtype=np.float64))).float().numpy()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=("detect", "obb"), default="detect")
    parser.add_argument("--images", type=int, default=None, help="default: 5000 (detect), 1000 (obb)")
    parser.add_argument("--classes", type=int, default=80)
    parser.add_argument("--backend", default="lucid")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--with-faster", action="store_true", help="also time the faster-coco-eval backend")
    parser.add_argument(
        "--artifacts",
        action="store_true",
        help="also time what the validation artefacts add to a lucid-eval run (default 500 images)",
    )
    parser.add_argument("--imgsz", type=int, default=640, help="--artifacts: the run's network input size")
    parser.add_argument("--family", default="yolo26", help="--artifacts: the run's model family (scale n)")
    args = parser.parse_args(argv)
    if args.task == "obb":
        return main_obb(args.images or 1000, args.seed)
    args.images = args.images or (500 if args.artifacts else 5000)

    gt, detections = synthetic_set(args.images, args.classes, seed=args.seed)
    n_gt = len(gt.dataset["annotations"])
    n_crowd = sum(a["iscrowd"] for a in gt.dataset["annotations"])
    print(
        f"synthetic set: {args.images} images, {args.classes} classes, {n_gt} boxes ({n_crowd} crowd), "
        f"{sum(len(d) for _, d in detections)} detections"
    )
    ours_s, ours_stats = time_ours(gt, detections, args.backend)
    if args.artifacts:
        time_artifacts(gt, detections, args.backend, imgsz=args.imgsz, family=args.family, seed=args.seed)
    # the reference gets exactly the detections our evaluator saw, in the COCO results format
    reference = COCOEvaluator(gt, ("bbox",), backend=args.backend)
    for image_id, det in detections:
        reference.update(image_id, det)
    ref_s, ref_stats = time_pycocotools(gt, reference.results("bbox"))
    if args.with_faster and args.backend != "faster":
        faster_s, _ = time_ours(gt, detections, "faster")
        print(f"faster-coco-eval backend: {faster_s:.2f} s   ratio vs pycocotools: {ref_s / faster_s:.1f}x")
    same = ours_stats == ref_stats
    print(
        f"ours ({args.backend}): {ours_s:.2f} s   pycocotools: {ref_s:.2f} s   ratio: {ref_s / ours_s:.1f}x"
    )
    print(f"stats identical: {same}  AP={ours_stats[0]:.6f} AP50={ours_stats[1]:.6f}")
    if not same:
        print(f"ours:        {ours_stats}\npycocotools: {ref_stats}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
