"""Rotated-box scoring (issue 17): the DOTA Task-1 protocol (lucid_train.eval.dota, `lucid-eval --dota-labels`),
the devkit split/merge (lucid_data.dota_tiles) and the COCO-style ``rotated`` IoU type of `COCOEvaluator`.

The hand-built DOTA case has a known answer worked out from the devkit's definition (module docstring of
lucid_train.eval.dota): two scored classes with ground truth, a difficult object, a duplicate detection, a
detection at IoU exactly 0.5 (not a match: the devkit needs ``> 0.5``) and a class without ground truth.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from lucid_core.results import Detections
from lucid_data.dota_tiles import (
    TileName,
    parse_tile_name,
    polygon_nms,
    split_scene,
    tile_to_scene,
)
from lucid_data.targets import Targets
from lucid_train.eval import COCOEvaluator, CocoGroundTruth
from lucid_train.eval.cli import main
from lucid_train.eval.coco_gt import GtImage
from lucid_train.eval.dota import (
    Task1Detections,
    evaluate_dota,
    merge_task1_tiles,
    read_label_dir,
    read_task1_dir,
    voc_ap,
    write_task1_dir,
)


def square(x0: float, y0: float, x1: float, y1: float) -> list[float]:
    """Clockwise (image coordinates) corners as DOTA writes them."""
    return [x0, y0, x1, y0, x1, y1, x0, y1]


def _line(values: list[float]) -> str:
    return " ".join(f"{v:g}" for v in values)


def write_known_case(root: Path) -> tuple[Path, Path]:
    labels, dets = root / "labelTxt", root / "dets"
    labels.mkdir(parents=True)
    dets.mkdir(parents=True)
    diamond = [100, 90, 110, 100, 100, 110, 90, 100]
    (labels / "img1.txt").write_text(
        "imagesource:GoogleEarth\ngsd:0.146\n"
        f"{_line(square(0, 0, 10, 10))} plane 0\n"
        f"{_line(square(20, 0, 30, 10))} plane 1\n"
        f"{_line(diamond)} ship\n",  # 9 fields: difficult defaults to 0
        encoding="utf-8",
    )
    (labels / "img2.txt").write_text(
        f"{_line(square(50, 50, 60, 60))} plane 0\n{_line(square(0, 0, 10, 10))} harbor 0\n", encoding="utf-8"
    )
    (dets / "Task1_plane.txt").write_text(
        f"img1 0.9 {_line(square(0, 0, 10, 10))}\n"  # TP
        f"img1 0.8 {_line(square(1, 0, 10, 10))}\n"  # IoU 0.9 with the matched object: duplicate → FP
        f"img1 0.7 {_line(square(20, 0, 30, 10))}\n"  # on the difficult object: neither TP nor FP
        f"img2 0.6 {_line(square(50, 50, 60, 58))}\n"  # IoU 0.8 → TP
        f"img2 0.5 {_line(square(100, 100, 110, 110))}\n",  # nothing there → FP
        encoding="utf-8",
    )
    shifted = [v + 1 if i % 2 == 0 else v for i, v in enumerate(diamond)]
    (dets / "Task1_ship.txt").write_text(
        f"img2 0.99 {_line(square(0, 0, 5, 5))}\nimg1 0.95 {_line(shifted)}\n", encoding="utf-8"
    )
    (dets / "Task1_harbor.txt").write_text(f"img2 0.4 {_line(square(0, 0, 20, 10))}\n", encoding="utf-8")
    (dets / "Task1_helicopter.txt").write_text(f"img1 0.3 {_line(square(0, 0, 4, 4))}\n", encoding="utf-8")
    return labels, dets


# devkit arithmetic for the case above. plane: rows TP, FP, (ignored), TP, FP over npos 2 → rec .5 .5 .5 1 1,
# prec 1 .5 .5 2/3 .5; 11-point: six thresholds <= .5 see 1, five see 2/3; all-point: .5·1 + .5·2/3.
PLANE_AP07, PLANE_AP = (6 + 5 * 2 / 3) / 11, 0.5 + 0.5 * 2 / 3
SHIP_AP07 = SHIP_AP = 0.5  # FP (score .99) then TP: precision .5 at recall 1
HARBOR_AP07 = HARBOR_AP = 0.0  # IoU exactly 0.5 is not a match


def test_voc_ap_definitions() -> None:
    rec = np.array([0.5, 0.5, 0.5, 1.0, 1.0])
    prec = np.array([1.0, 0.5, 0.5, 2 / 3, 0.5])
    assert voc_ap(rec, prec, use_07_metric=True) == pytest.approx(PLANE_AP07, abs=1e-12)
    assert voc_ap(rec, prec, use_07_metric=False) == pytest.approx(PLANE_AP, abs=1e-12)
    # the devkit's thresholds come from np.arange(0, 1.1, 0.1): 0.30000000000000004 > 0.3 (recall 0.3 misses it)
    assert voc_ap(np.array([0.3]), np.array([1.0]), use_07_metric=True) == pytest.approx(3 / 11)


def test_known_answer_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels, dets = write_known_case(tmp_path)
    out = tmp_path / "report.json"
    code = main(
        ["--task", "obb", "--dota-labels", str(labels), "--dota-dets", str(dets), "--output", str(out)]
    )
    assert code == 0
    report = json.loads(out.read_text())
    per = {c["class"]: c for c in report["per_class"]}
    assert set(per) == {"harbor", "helicopter", "plane", "ship"}
    assert per["plane"]["AP07"] == pytest.approx(PLANE_AP07, abs=1e-12)
    assert per["plane"]["AP"] == pytest.approx(PLANE_AP, abs=1e-12)
    assert (
        per["plane"]["num_gt"],
        per["plane"]["num_difficult"],
        per["plane"]["tp"],
        per["plane"]["fp"],
    ) == (
        2,
        1,
        2,
        2,
    )
    assert per["ship"]["AP07"] == pytest.approx(SHIP_AP07) and per["ship"]["AP"] == pytest.approx(SHIP_AP)
    assert per["harbor"]["AP07"] == HARBOR_AP07 and per["harbor"]["AP"] == HARBOR_AP
    assert per["helicopter"]["AP07"] is None and per["helicopter"]["num_gt"] == 0
    assert report["mAP07"] == pytest.approx((PLANE_AP07 + SHIP_AP07 + HARBOR_AP07) / 3, abs=1e-12)
    assert report["mAP"] == pytest.approx((PLANE_AP + SHIP_AP + HARBOR_AP) / 3, abs=1e-12)
    assert report["num_images"] == 2 and report["format"] == "lucid-eval-dota-report/1"
    printed = capsys.readouterr().out
    assert "plane" in printed and f"{PLANE_AP07:.4f}" in printed and "mAP07" in printed


def test_bad_inputs_exit_2_naming_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels, dets = write_known_case(tmp_path)
    (dets / "Task1_ship.txt").write_text("img1 0.9 1 2 3\n", encoding="utf-8")
    out = tmp_path / "r.json"
    args = ["--task", "obb", "--dota-labels", str(labels), "--dota-dets", str(dets), "--output", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Task1_ship.txt:1" in err and "10 fields" in err
    (dets / "Task1_ship.txt").write_text(f"img9 0.9 {_line(square(0, 0, 1, 1))}\n", encoding="utf-8")
    assert main(args) == 2
    assert "'img9'" in capsys.readouterr().err
    assert main([*args[:-2], "--task", "detect", "--output", str(out)]) == 2
    assert not out.exists()


def test_tile_names_split_and_map_back() -> None:
    assert parse_tile_name("P0001__1__0___824") == TileName("P0001", 1.0, 0, 824)
    assert parse_tile_name("a__b__0.5__12___3") == TileName("a__b", 0.5, 12, 3)
    assert parse_tile_name("P0861__1024__0___1648").rate == 1.0  # hub crop-size naming
    assert (
        str(TileName("P1", 0.5, 3, 4)) == "P1__0.5__3___4"
        and str(TileName("P1", 1.0, 0, 0)) == "P1__1__0___0"
    )
    with pytest.raises(ValueError, match="devkit"):
        parse_tile_name("P0001_0_0")
    image = np.zeros((300, 500, 3), np.uint8)
    tiles = list(split_scene(image, "S", tile_size=256, gap=56, rates=(1.0, 0.5)))
    names = [str(n) for n, _ in tiles]
    assert names[:2] == ["S__1__0___0", "S__1__200___0"] and "S__0.5__0___0" in names
    assert all(t.shape[:2] == (min(256, 300), 256) for n, t in tiles if n.rate == 1.0)
    poly = np.array([[[10.0, 20.0], [30.0, 20.0], [30.0, 40.0], [10.0, 40.0]]])
    back = tile_to_scene(poly, TileName("S", 0.5, 100, 50))
    assert np.allclose(back[0, 0], [220.0, 140.0])


def test_polygon_nms_is_greedy() -> None:
    a = np.array(square(0, 0, 10, 10), float).reshape(4, 2)
    polys = np.stack([a + np.array([dx, 0.0]) for dx in (0, 3, 6, 50)])
    keep = polygon_nms(polys, np.array([0.9, 0.8, 0.7, 0.6]), iou_threshold=0.1)
    # 1 is suppressed by 0; 2 overlaps 1 (IoU .54) but only kept boxes suppress, and 0-2 IoU is .25 > .1
    assert keep.tolist() == [0, 3]
    keep = polygon_nms(polys, np.array([0.9, 0.8, 0.7, 0.6]), iou_threshold=0.3)
    assert keep.tolist() == [0, 2, 3]


def test_merge_tiles_gives_back_every_object(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Objects placed in a scene, 'detected' exactly in every tile (and scale) that holds them whole; merging
    must give each object back once, in scene pixels, and score AP 1 through ``--merge-tiles``."""
    rng = np.random.default_rng(0)
    h, w = 700, 900
    objects = []
    for _ in range(25):
        cx, cy = rng.uniform(40, w - 40), rng.uniform(40, h - 40)
        bw, bh, th = rng.uniform(10, 40), rng.uniform(6, 20), rng.uniform(-math.pi, math.pi)
        c, s = math.cos(th), math.sin(th)
        v1, v2 = np.array([bw / 2 * c, bw / 2 * s]), np.array([-bh / 2 * s, bh / 2 * c])
        objects.append(np.array([[cx, cy]]) + np.stack([v1 + v2, v1 - v2, -v1 - v2, -v1 + v2]))
    objects_arr = np.stack(objects)
    keep = [0]
    from lucid_core.geometry.polygon_iou import pairwise_polygon_iou

    iou = pairwise_polygon_iou(torch.from_numpy(objects_arr), torch.from_numpy(objects_arr)).numpy()
    for i in range(1, len(objects_arr)):  # non-overlapping objects only (NMS 0.1 would merge the others)
        if (iou[i, keep] <= 0.1).all():
            keep.append(i)
    objects_arr = objects_arr[keep]
    labels = tmp_path / "labelTxt"
    labels.mkdir()
    (labels / "scene.txt").write_text(
        "".join(f"{_line(p.reshape(-1).tolist())} plane 0\n" for p in objects_arr), encoding="utf-8"
    )
    rows: list[tuple[str, float, np.ndarray]] = []
    for name, tile in split_scene(
        np.zeros((h, w, 3), np.uint8), "scene", tile_size=400, gap=100, rates=(1.0, 0.5)
    ):
        th_, tw_ = tile.shape[:2]
        scaled = objects_arr * name.rate - [name.left, name.up]
        inside = (scaled >= 0).all((1, 2)) & (scaled[..., 0] <= tw_).all(1) & (scaled[..., 1] <= th_).all(1)
        for k in np.flatnonzero(inside):
            rows.append((str(name), 0.9 if name.rate == 1.0 else 0.5, scaled[k]))
    tile_dets = {
        "plane": Task1Detections(
            [r[0] for r in rows], np.array([r[1] for r in rows]), np.stack([r[2] for r in rows])
        )
    }
    merged = merge_task1_tiles(tile_dets)["plane"]
    assert len(merged) == len(objects_arr) and set(merged.images) == {"scene"}
    err = np.abs(merged.polygons[:, None] - objects_arr[None]).max((2, 3)).min(1)
    assert err.max() < 1e-9
    assert (merged.scores == 0.9).all()  # the full-resolution copy wins the NMS
    det_dir = tmp_path / "tile_dets"
    write_task1_dir(det_dir, tile_dets)
    out = tmp_path / "report.json"
    args = ["--task", "obb", "--merge-tiles", "--dota-labels", str(labels), "--dota-dets", str(det_dir)]
    assert main([*args, "--merged-dets", str(tmp_path / "merged"), "--output", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["mAP07"] == pytest.approx(1.0) and report["mAP"] == pytest.approx(1.0)
    assert len(read_task1_dir(tmp_path / "merged")["plane"]) == len(objects_arr)
    assert (
        main(
            [
                "--task",
                "obb",
                "--merge-tiles",
                "--dota-labels",
                str(labels),
                "--dota-dets",
                str(labels),
                "--output",
                str(out),
            ]
        )
        == 2
    )
    capsys.readouterr()


def test_labels_and_whole_image_evaluate_without_files(tmp_path: Path) -> None:
    labels, dets = write_known_case(tmp_path)
    result = evaluate_dota(read_label_dir(labels), read_task1_dir(dets), classes=["plane", "ship"])
    assert [c.name for c in result.per_class] == ["plane", "ship"]
    assert result.map07 == pytest.approx((PLANE_AP07 + SHIP_AP07) / 2)


# ------------------------------------------------------------------------------- COCO-style rotated IoU type
def _rotated_gt(images: list[tuple[np.ndarray, np.ndarray, np.ndarray]], names: list[str]) -> CocoGroundTruth:
    gt_images = []
    for i, (rboxes, labels, difficult) in enumerate(images):
        corners = _corners(rboxes)
        gt_images.append(
            GtImage(
                image_id=i + 1,
                file_name=f"{i}.png",
                height=1000,
                width=1000,
                targets=Targets(
                    boxes=np.concatenate([corners.min(1), corners.max(1)], 1),
                    labels=labels,
                    rboxes=rboxes,
                    difficult=difficult,
                ),
            )
        )
    return CocoGroundTruth.from_targets(gt_images, names)


def _corners(rboxes: np.ndarray) -> np.ndarray:
    from lucid_core.geometry.rotated import rboxes_to_polygons

    return rboxes_to_polygons(torch.as_tensor(rboxes, dtype=torch.float64).reshape(-1, 5)).numpy()


def _dets(rboxes: np.ndarray, scores: np.ndarray, labels: np.ndarray) -> Detections:
    corners = _corners(rboxes)
    return Detections(
        boxes=torch.from_numpy(np.concatenate([corners.min(1), corners.max(1)], 1)).float(),
        scores=torch.from_numpy(scores).float(),
        labels=torch.from_numpy(labels).long(),
        rboxes=torch.from_numpy(rboxes).float(),
    )


def test_rotated_equals_bbox_on_axis_aligned_boxes() -> None:
    """theta = 0 everywhere: the polygon IoU is the box IoU, so every COCO statistic must agree."""
    rng = np.random.default_rng(3)
    gts, dets = [], []
    for _ in range(12):
        n = int(rng.integers(0, 8))
        xy = np.round(rng.uniform(0, 800, (n, 2)) * 8) / 8
        wh = np.round(rng.uniform(4, 150, (n, 2)) * 8) / 8
        cls = rng.integers(0, 3, n)
        gts.append((np.concatenate([xy, wh, np.zeros((n, 1))], 1), cls, np.zeros(n, bool)))
        m = int(rng.integers(0, 12))
        src = rng.integers(0, max(n, 1), m)
        jitter = np.round(rng.normal(0, 6, (m, 4)) * 8) / 8
        base = np.concatenate([xy, wh], 1)[src] if n else rng.uniform(10, 500, (m, 4))
        boxes = base + jitter
        boxes[:, 2:] = np.abs(boxes[:, 2:]) + 1
        labels = (
            np.where(rng.random(m) < 0.8, cls[src], rng.integers(0, 3, m)) if n else rng.integers(0, 3, m)
        )
        dets.append((np.concatenate([boxes, np.zeros((m, 1))], 1), rng.random(m), labels))
    gt = _rotated_gt(gts, ["a", "b", "c"])
    ev = COCOEvaluator(gt, ("bbox", "rotated"))
    for i, (rb, sc, lb) in enumerate(dets):
        ev.update(i + 1, _dets(rb, sc, lb))
    res = ev.compute()
    assert res.per_type["rotated"].stats == pytest.approx(res.per_type["bbox"].stats, abs=1e-12)
    assert res.per_type["bbox"].map50 > 0.2  # non-trivial: matches at several IoU thresholds


def test_rotated_uses_the_polygon_and_ignores_difficult() -> None:
    d = math.pi / 4
    gt_rb = np.array([[100.0, 100.0, 80.0, 6.0, d], [300.0, 300.0, 40.0, 20.0, 0.3]])
    # image 1: a thin 45° box and a detection beside it (polygon IoU 0, axis-aligned hull IoU high); image 2:
    # a found object and a difficult one nobody found
    off = 6.0 / math.sqrt(2)
    gt = _rotated_gt(
        [
            (gt_rb[:1], np.array([0]), np.array([False])),
            (gt_rb, np.array([0, 0]), np.array([False, True])),
        ],
        ["vehicle"],
    )
    ev = COCOEvaluator(gt, ("rotated", "bbox"))
    ev.update(1, _dets(np.array([[100.0 + off, 100.0 - off, 80.0, 6.0, d]]), np.array([0.9]), np.array([0])))
    ev.update(2, _dets(gt_rb[:1].copy(), np.array([0.8]), np.array([0])))
    res = ev.compute()
    # rotated: one TP (image 2) and one FP at a higher score; 1 of 2 regular objects found
    assert res.per_type["rotated"].map50 == pytest.approx(0.5 * 0.5, abs=0.02)
    assert res.per_type["bbox"].map50 > res.per_type["rotated"].map50
    with pytest.raises(ValueError, match="lucid"):
        COCOEvaluator(gt, ("rotated",), backend="faster")


def test_merge_tiles_predicts_with_weights(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--weights W --data TILES`: the tiles are predicted, merged and scored (random-init obb model, so only the
    plumbing is checked); a detect model and two detection sources are refused with exit 2."""
    import cv2

    from lucid_core.checkpoint import save_model
    from lucid_core.models.registry import build_model

    torch.manual_seed(0)
    save_model(
        build_model("yolov8", "obb", "n", num_classes=2), tmp_path / "obb", names=["plane", "ship"], imgsz=64
    )
    save_model(build_model("yolov8", "detect", "n", num_classes=2), tmp_path / "det", names=["plane", "ship"])
    tiles = tmp_path / "tiles"
    tiles.mkdir()
    rng = np.random.default_rng(0)
    for name in ("scene__1__0___0", "scene__1__32___0"):
        assert cv2.imwrite(str(tiles / f"{name}.png"), rng.integers(0, 255, (64, 64, 3), dtype=np.uint8))
    labels = tmp_path / "labelTxt"
    labels.mkdir()
    (labels / "scene.txt").write_text(f"{_line(square(10, 10, 40, 30))} plane 0\n", encoding="utf-8")
    out = tmp_path / "report.json"
    common = [
        "--task",
        "obb",
        "--merge-tiles",
        "--dota-labels",
        str(labels),
        "--data",
        str(tiles),
        "--imgsz",
        "64",
    ]
    assert main([*common, "--weights", str(tmp_path / "obb"), "--output", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["imgsz"] == 64 and len(report["weights_sha256"]) == 64 and report["merge_nms_iou"] == 0.1
    assert {c["class"] for c in report["per_class"]} >= {"plane", "ship"}
    capsys.readouterr()
    assert main([*common, "--weights", str(tmp_path / "det"), "--output", str(tmp_path / "x.json")]) == 2
    assert "obb model" in capsys.readouterr().err
    both = [*common, "--weights", str(tmp_path / "obb"), "--dota-dets", str(labels), "--output", str(out)]
    assert main(both) == 2
    assert "exactly one detection source" in capsys.readouterr().err
    # --split-scenes: whole scenes split here (two rates), predicted, merged back to the scene's name
    scenes = tmp_path / "scenes"
    scenes.mkdir()
    assert cv2.imwrite(str(scenes / "scene.png"), rng.integers(0, 255, (90, 100, 3), dtype=np.uint8))
    split = ["--split-scenes", "--tile-size", "64", "--gap", "16", "--rates", "1.0", "0.5"]
    args = ["--task", "obb", "--dota-labels", str(labels), "--data", str(scenes), "--imgsz", "64", *split]
    merged = tmp_path / "merged"
    assert (
        main([*args, "--weights", str(tmp_path / "obb"), "--merged-dets", str(merged), "--output", str(out)])
        == 0
    )
    report = json.loads(out.read_text())
    assert report["split"] == {"tile_size": 64, "gap": 16, "rates": [1.0, 0.5]} and report["merge_tiles"]
    assert {im for d in read_task1_dir(merged).values() for im in d.images} <= {"scene"}
    capsys.readouterr()
    assert main([*args, "--gap", "64", "--weights", str(tmp_path / "obb"), "--output", str(out)]) == 2
    assert "--gap 64" in capsys.readouterr().err
