"""Readers: YOLO/COCO/DOTA parsing, bad labels reported as file:line, layout probing, rbox convention and DOTA
tiling; `shared` tests check COCO ⇄ YOLO conversions read back to the same Targets on the sample datasets."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from lucid_data import LabelError, Targets, load_dataset, merge_tile_predictions, tile_targets, tile_windows
from lucid_data.convert import write_coco, write_yolo
from lucid_data.readers.common import corners_to_rbox, merge_polygon_parts, polygon_area, rbox_to_corners
from lucid_data.records import DatasetSource
from lucid_data.rle import polygons_to_mask


def _make_yolo(
    root: Path, labels: dict[str, str], *, names: int = 3, size: tuple[int, int] = (40, 50), extra: str = ""
) -> Path:
    (root / "images" / "train").mkdir(parents=True)
    (root / "labels" / "train").mkdir(parents=True)
    for stem, text in labels.items():
        Image.fromarray(np.zeros((*size, 3), np.uint8)).save(root / "images" / "train" / f"{stem}.png")
        (root / "labels" / "train" / f"{stem}.txt").write_text(text)
    names_yaml = "".join(f"  {i}: c{i}\n" for i in range(names))
    (root / "data.yaml").write_text(f"path: .\ntrain: images/train\nnames:\n{names_yaml}{extra}")
    return root / "data.yaml"


def _same_targets(a: Targets, b: Targets, atol: float = 1e-4) -> None:
    assert len(a) == len(b)
    assert (a.labels == b.labels).all()
    assert a.orig_size == b.orig_size
    np.testing.assert_allclose(a.boxes, b.boxes, atol=atol, rtol=0)
    for field in ("keypoints", "rboxes"):
        va, vb = getattr(a, field), getattr(b, field)
        assert (va is None) == (vb is None), field
        if va is not None:
            np.testing.assert_allclose(va, vb, atol=atol, rtol=0)
    assert (a.polygons is None) == (b.polygons is None)
    if a.polygons is not None and b.polygons is not None:
        for pa, pb in zip(a.polygons, b.polygons, strict=True):
            np.testing.assert_allclose(pa, pb, atol=atol, rtol=0)
    assert (a.iscrowd == b.iscrowd).all() and (a.difficult == b.difficult).all()


def _by_name(source: DatasetSource) -> dict[str, Targets]:
    return {r.path.name: r.targets for r in source.records}


# ---------------------------------------------------------------- YOLO parsing and errors


def test_yolo_detect_pixels(tmp_path: Path) -> None:
    yaml_path = _make_yolo(tmp_path, {"a": "1 0.5 0.5 0.2 0.5\n\n2 0.1 0.2 0.2 0.4\n"})
    src = load_dataset(yaml_path)
    assert src.task == "detect" and src.names[2] == "c2" and src.category_ids == [0, 1, 2]
    t = src.records[0].targets
    assert t.orig_size == (40, 50) and t.image_id == "a"
    np.testing.assert_allclose(t.boxes, [[20, 10, 30, 30], [0, 0, 10, 16]], atol=1e-5)
    assert t.labels.tolist() == [1, 2]


def test_yolo_polygon_pixels_are_float32_label_times_float32_size(tmp_path: Path) -> None:
    # 0.973412 * 96 rounds to 93.447556 in double and to 93.44755 from float32 operands: the reference's value
    yaml_path = _make_yolo(tmp_path, {"a": "0 0.973412 0.123457 1.0 0.5 0.333333 0.9\n"}, size=(96, 96))
    polygon = load_dataset(yaml_path).records[0].targets.polygons[0]
    label = np.array([0.973412, 0.123457, 1.0, 0.5, 0.333333, 0.9], np.float32).reshape(-1, 2)
    expected = label * np.float32(96)
    assert expected.dtype == np.float32 and expected[0, 0] != np.float32(0.973412 * 96.0)
    np.testing.assert_array_equal(polygon, expected)


def test_yolo_pose_two_dim_keypoints_visibility(tmp_path: Path) -> None:
    """Fixtures README: for nd = 2 the visibility is 1, or 0 where a label coordinate is negative; (0, 0) counts."""
    line = "0 0.5 0.5 0.4 0.4 0.5 0.5 0 0 -1 0.5 0.25 -1\n"
    yaml_path = _make_yolo(
        tmp_path, {"a": line}, names=1, extra="kpt_shape: [4, 2]\nflip_idx: [1, 0, 3, 2]\n"
    )
    src = load_dataset(yaml_path)
    assert src.task == "pose" and src.flip_idx == [1, 0, 3, 2] and src.kpt_shape == (4, 2)
    np.testing.assert_allclose(
        src.records[0].targets.keypoints, [[[25, 20, 1], [0, 0, 1], [-50, 20, 0], [12.5, -40, 0]]]
    )


def test_yolo_bad_labels_all_reported_with_file_and_line(tmp_path: Path) -> None:
    text = "\n".join(
        [
            "0 0.5 0.5 0.2 0.2",  # 1 fine
            "3 0.5 0.5 0.2 0.2",  # 2 class id >= nc
            "1 0.5 abc 0.2 0.2",  # 3 not a number
            "1 0.5 0.5 0.2",  # 4 wrong count
            "1 1.5 0.5 0.2 0.2",  # 5 out of range
            "-1 0.5 0.5 0.2 0.2",  # 6 negative class
            "1 0.5 0.5 0 0.2",  # 7 zero width
        ]
    )
    yaml_path = _make_yolo(tmp_path, {"a": text})
    label = tmp_path / "labels" / "train" / "a.txt"
    with pytest.raises(LabelError) as info:
        load_dataset(yaml_path)
    reported = {p.line: p.reason for p in info.value.problems}
    assert sorted(reported) == [2, 3, 4, 5, 6, 7]
    assert "class id 3 >= nc=3" in reported[2]
    assert "'abc'" in reported[3]
    assert f"{label}:2: class id 3" in str(info.value)
    src = load_dataset(yaml_path, strict=False)
    assert len(src.records[0].targets) == 1
    assert len(src.problems) == 6 and src.problems[0].startswith(f"{label}:2:")


def test_yolo_task_inference(tmp_path: Path) -> None:
    seg = _make_yolo(tmp_path / "s", {"a": "0 0.1 0.1 0.5 0.1 0.5 0.5 0.1 0.5\n0 0.1 0.1 0.3 0.1 0.3 0.3\n"})
    src = load_dataset(seg)
    assert src.task == "segment" and len(src.records[0].targets.polygons or []) == 2
    obb = _make_yolo(tmp_path / "o", {"a": "0 0.1 0.1 0.5 0.1 0.5 0.5 0.1 0.5\n"})
    src = load_dataset(obb)
    assert src.task == "obb"
    np.testing.assert_allclose(src.records[0].targets.rboxes, [[15, 12, 20, 16, 0]], atol=1e-4)


def test_probe_error_says_what_was_expected(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(ValueError, match=r"expected a YOLO data YAML.*COCO JSON.*DOTA folder with labelTxt"):
        load_dataset(tmp_path)


# ---------------------------------------------------------------- COCO, DOTA (synthetic files)


def test_coco_reader_maps_categories_rle_and_crowd(tmp_path: Path) -> None:
    Image.fromarray(np.zeros((20, 30, 3), np.uint8)).save(tmp_path / "im.png")
    crowd_mask = np.zeros((20, 30), bool)
    crowd_mask[5:10, 4:12] = True
    from lucid_data import rle

    data = {
        "images": [{"id": 7, "file_name": "im.png", "height": 20, "width": 30}],
        "categories": [{"id": 90, "name": "z"}, {"id": 3, "name": "a"}],
        "annotations": [
            {"id": 1, "image_id": 7, "category_id": 90, "bbox": [1, 2, 10, 5], "iscrowd": 0,
             "segmentation": [[1, 2, 11, 2, 11, 7, 1, 7], [20, 10, 25, 10, 25, 15]]},
            {"id": 2, "image_id": 7, "category_id": 3, "bbox": [4, 5, 8, 5], "iscrowd": 1,
             "segmentation": rle.encode(crowd_mask)},
        ],
    }  # fmt: skip
    (tmp_path / "ann.json").write_text(json.dumps(data))
    det = load_dataset(tmp_path / "ann.json")
    assert det.task == "detect" and det.names == {0: "a", 1: "z"} and det.category_ids == [3, 90]
    t = det.records[0].targets
    assert t.labels.tolist() == [1, 0] and t.iscrowd.tolist() == [False, True] and t.image_id == 7
    np.testing.assert_allclose(t.boxes[0], [1, 2, 11, 7])
    seg = load_dataset(tmp_path / "ann.json", task="segment")
    rec = seg.records[0]
    assert rec.rles is not None and rec.rles[0] is None
    assert (rle.decode(rec.rles[1]) == crowd_mask).all()
    assert seg.records[0].targets.polygons is not None
    merged = seg.records[0].targets.polygons[0]
    # the joined outline covers exactly the two parts
    union = polygons_to_mask(
        [np.array([[1, 2], [11, 2], [11, 7], [1, 7]]), np.array([[20, 10], [25, 10], [25, 15]])], 20, 30
    )
    filled = polygons_to_mask([merged], 20, 30)
    assert (filled >= union).all()  # the union, plus the rasterised zero-width bridge (a 1-pixel line)
    assert (filled & ~union).sum() <= 12


def test_coco_unknown_category_is_an_error(tmp_path: Path) -> None:
    Image.fromarray(np.zeros((20, 30, 3), np.uint8)).save(tmp_path / "im.png")
    data = {"images": [{"id": 1, "file_name": "im.png", "height": 20, "width": 30}],
            "categories": [{"id": 1, "name": "a"}],
            "annotations": [{"id": 5, "image_id": 1, "category_id": 2, "bbox": [1, 1, 2, 2]}]}  # fmt: skip
    (tmp_path / "ann.json").write_text(json.dumps(data))
    with pytest.raises(LabelError, match=r"annotation id 5.*category_id 2"):
        load_dataset(tmp_path / "ann.json")


def test_coco_annotation_without_image_id_is_one_problem_line(tmp_path: Path) -> None:
    Image.fromarray(np.zeros((20, 30, 3), np.uint8)).save(tmp_path / "im.png")
    data = {"images": [{"id": 1, "file_name": "im.png", "height": 20, "width": 30}],
            "categories": [{"id": 1, "name": "a"}],
            "annotations": [{"id": 7, "category_id": 1, "bbox": [1, 1, 2, 2]},
                            {"id": 8, "image_id": 1, "category_id": 1, "bbox": [1, 1, 2, 2]}]}  # fmt: skip
    (tmp_path / "ann.json").write_text(json.dumps(data))
    with pytest.raises(LabelError, match=r"annotation id 7: no image_id") as info:
        load_dataset(tmp_path / "ann.json")
    assert len(info.value.problems) == 1
    source = load_dataset(tmp_path / "ann.json", strict=False)  # the rest reads
    assert len(source.records[0].targets.boxes) == 1


def test_dota_reader_headers_difficult_and_bad_lines(tmp_path: Path) -> None:
    (tmp_path / "images").mkdir()
    (tmp_path / "labelTxt").mkdir()
    Image.fromarray(np.zeros((100, 120, 3), np.uint8)).save(tmp_path / "images" / "s.png")
    (tmp_path / "labelTxt" / "s.txt").write_text(
        "imagesource:GoogleEarth\ngsd:0.5\n10 10 30 10 30 20 10 20 plane 1\n1 2 3 4 ship\n5 5 9 5 9 9 5 9 zebra 0\n"
    )
    with pytest.raises(LabelError) as info:
        load_dataset(tmp_path)
    assert {(p.line, "fields" in p.reason or "zebra" in p.reason) for p in info.value.problems} == {
        (4, True),
        (5, True),
    }
    src = load_dataset(tmp_path, strict=False)
    t = src.records[0].targets
    assert src.task == "obb" and len(t) == 1 and t.difficult.tolist() == [True] and src.names[0] == "plane"
    np.testing.assert_allclose(t.rboxes, [[20, 15, 20, 10, 0]], atol=1e-4)


# ---------------------------------------------------------------- geometry


@settings(max_examples=200, deadline=None)
@given(
    st.floats(10, 500), st.floats(10, 500), st.floats(2, 200), st.floats(2, 200), st.floats(-math.pi, math.pi)
)
def test_rbox_corner_round_trip_is_canonical(cx: float, cy: float, w: float, h: float, theta: float) -> None:
    corners = rbox_to_corners(np.array([[cx, cy, w, h, theta]]))
    rb = corners_to_rbox(corners)[0]
    # canonical form of the reference (fixture README, label convention): w >= h, θ ∈ [−π/4, 3π/4)
    assert -math.pi / 4 - 1e-6 <= rb[4] < 3 * math.pi / 4 and rb[2] >= rb[3] * (1 - 1e-5)
    assert rb[2] * rb[3] == pytest.approx(w * h, rel=1e-3)
    back = rbox_to_corners(rb[None])[0]
    # same rectangle: every corner of one is a corner of the other
    d = np.linalg.norm(corners[0][:, None, :] - back[None, :, :], axis=-1).min(1)
    assert d.max() < 1e-2 * max(1.0, w, h)


def test_merge_polygon_parts_keeps_area() -> None:
    a = np.array([[0, 0], [4, 0], [4, 4], [0, 4]], float)
    b = np.array([[10, 10], [12, 10], [12, 13]], float)
    merged = merge_polygon_parts([a, b])
    assert len(merged) == len(a) + len(b) + 2
    assert polygon_area(merged) == pytest.approx(polygon_area(a) + polygon_area(b))


def test_tile_windows_cover_scene() -> None:
    wins = tile_windows(557, 712, tile_size=256, overlap=64)
    cover = np.zeros((557, 712), bool)
    for x0, y0, x1, y1 in wins:
        assert x1 - x0 == 256 and y1 - y0 == 256
        cover[y0:y1, x0:x1] = True
    assert cover.all()
    with pytest.raises(ValueError, match="overlap"):
        tile_windows(100, 100, 64, 64)


# ---------------------------------------------------------------- shared sample data


@pytest.mark.shared
@pytest.mark.parametrize("task", ["detect", "segment", "pose"])
def test_coco_mmpose_and_its_yolo_conversion_agree(shared_dir: Path, tmp_path: Path, task: str) -> None:
    coco = load_dataset(shared_dir / "data" / "coco-mmpose" / "test_coco.json", task=task)  # type: ignore[arg-type]
    raw = json.loads((shared_dir / "data" / "coco-mmpose" / "test_coco.json").read_text())
    assert sum(len(r.targets) for r in coco.records) == len(raw["annotations"])
    assert len(coco) == len(raw["images"])
    back = load_dataset(write_yolo(coco, tmp_path / "y"))
    assert back.task == task and back.names == coco.names and back.category_ids == coco.category_ids
    assert back.flip_idx == coco.flip_idx
    a, b = _by_name(coco), _by_name(back)
    assert a.keys() == b.keys()
    for name in a:
        _same_targets(a[name].select(~a[name].iscrowd), b[name])


@pytest.mark.shared
@pytest.mark.parametrize(
    "name", ["coco8/coco8.yaml", "coco8-seg/coco8-seg.yaml", "coco8-pose/coco8-pose.yaml", "dota8/dota8.yaml"]
)
@pytest.mark.parametrize("split", ["train", "val"])
def test_yolo_coco_yolo_round_trip(shared_dir: Path, tmp_path: Path, name: str, split: str) -> None:
    yaml_path = shared_dir / "data" / name
    src = load_dataset(yaml_path, split)
    n_lines = sum(
        sum(1 for line in p.read_text().splitlines() if line.strip())
        for p in (yaml_path.parent / "labels" / split).glob("*.txt")
    )
    assert sum(len(r.targets) for r in src.records) == n_lines
    coco = load_dataset(write_coco(src, tmp_path / "c"), split, task=src.task)
    back = load_dataset(write_yolo(coco, tmp_path / "y"), split)
    assert back.task == src.task and back.names == src.names and back.flip_idx == src.flip_idx
    a, c, b = _by_name(src), _by_name(coco), _by_name(back)
    assert a.keys() == b.keys() == c.keys()
    for key in a:
        _same_targets(a[key], c[key])
        _same_targets(a[key], b[key])


@pytest.mark.shared
def test_dota_devkit_tile_merge_round_trip(shared_dir: Path) -> None:
    root = shared_dir / "data" / "dota-devkit"
    src = load_dataset(root)
    label_lines = [
        ln for ln in (root / "labelTxt" / "P1888.txt").read_text().splitlines() if len(ln.split()) >= 9
    ]
    rec = src.records[0]
    t = rec.targets
    assert len(t) == len(label_lines) and rec.size_hw == (557, 712)
    assert [src.names[int(i)] for i in t.labels] == [ln.split()[8] for ln in label_lines]
    tiles = []
    for window in tile_windows(*rec.size_hw, tile_size=256, overlap=64):
        sub, vis = tile_targets(t, window, min_visibility=0.5)
        assert sub.rboxes is not None and (vis >= 0.5).all()
        tiles.append(((window[0], window[1]), sub.rboxes, vis, sub.labels))
    rboxes, scores, labels = merge_tile_predictions(tiles, iou_threshold=0.3)
    assert len(rboxes) == len(t)
    assert (scores == 1.0).all()  # every object survives from a tile that holds it whole
    order = np.lexsort((rboxes[:, 1], rboxes[:, 0]))
    ref = np.lexsort((t.rboxes[:, 1], t.rboxes[:, 0]))  # type: ignore[index]
    np.testing.assert_allclose(rboxes[order], t.rboxes[ref], atol=1e-3)  # type: ignore[index]
    assert (labels[order] == t.labels[ref]).all()


@pytest.mark.shared
def test_dota_devkit_written_tiles_merge_back(shared_dir: Path, tmp_path: Path) -> None:
    from lucid_data.readers.dota import write_tiles

    src = load_dataset(shared_dir / "data" / "dota-devkit")
    t = src.records[0].targets
    tiles = load_dataset(write_tiles(src, tmp_path, tile_size=256, overlap=64, min_visibility=0.5))
    assert tiles.task == "obb" and all(r.size_hw == (256, 256) for r in tiles.records)
    per_tile = []
    for rec in tiles.records:
        _, size, x0, y0 = str(rec.image_id).replace("___", "__").split("__")
        assert int(size) == 256
        rb = rec.targets.rboxes
        assert rb is not None
        per_tile.append(
            ((int(x0), int(y0)), rb, rb[:, 2] * rb[:, 3], rec.targets.labels)
        )  # larger = less cut
    rboxes, _, labels = merge_tile_predictions(per_tile, iou_threshold=0.3)
    assert len(rboxes) == len(t)
    order = np.lexsort((rboxes[:, 1], rboxes[:, 0]))
    ref = np.lexsort((t.rboxes[:, 1], t.rboxes[:, 0]))  # type: ignore[index]
    np.testing.assert_allclose(rboxes[order][:, :4], t.rboxes[ref][:, :4], atol=1e-2)  # type: ignore[index]
    assert (labels[order] == t.labels[ref]).all()
